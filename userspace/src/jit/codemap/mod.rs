//! Reader of the code map that jvm-symbolizer-agent writes (format: docs/code-map.md,
//! `joularcode_core::code_map`).
//!
//! The map is read while the JVM runs: each [`CodeMap::refresh`] reads only the bytes appended
//! since the last one, and a partial last line waits for the next refresh. What the lines say is
//! kept in a [`CodeTable`], which names a pc only with code that was valid at the sample's time
//! (HotSpot reuses the addresses of unloaded code), and which is compacted as the JVM unloads code:
//! a JVM that runs for weeks costs the memory of its live code, not of its history.
//!
//! Everything in the file is untrusted (the JVM's user writes it): it is opened as
//! [`crate::foreign`] says (no link, a regular file of the JVM's user, never blocking), read at
//! most [`READ_RATE`] bytes a second and for at most 20 ms per refresh, and at most [`MAX_KEPT`]
//! pieces of code, method numbers and names are held, so that a map of garbage, or of millions
//! of live records, costs bounded time and memory. A malformed line is skipped and counted, never
//! fatal.
//!
//! Each refresh renews the map's lease, at most once a [`RENEW_EVERY`]: it sets the access time of
//! the file it reads (`futimens` on its own descriptor), which the agent watches; the agent stops
//! writing, and removes its map, once no reader did so for 5 s (docs/code-map.md, "The lease").

use std::fs::{File, FileTimes};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use joularcode_core::code_map::{self as format, VERSION};
use joularcode_core::mutf8;
use joularcode_core::power::clock::monotonic_ns;

use crate::foreign::{ForeignError, ProcessDir};

mod table;

pub use table::{CodeKind, CodeTable, JitFrames};

/// Bound on what one line may hold (the longest lines, compiled methods with thousands of inline
/// ranges, take a few hundred KB).
const MAX_LINE: usize = 4 << 20;
/// Bytes read per second of a map at most: an agent writes a few KB a second, and its replay of
/// the code cache at attach (tens of MB for the biggest applications) once.
pub const READ_RATE: u64 = 8 << 20;
/// Bytes read by one refresh at most (saved up at [`READ_RATE`] while there is less to read).
const READ_BURST: u64 = 16 << 20;
/// Bytes read and parsed at a time by a refresh.
const CHUNK: usize = 256 << 10;
/// How long one refresh reads at most (a chunk more when it started within it): parsing a map is
/// never what holds up a cycle.
const REFRESH_TIME: Duration = Duration::from_millis(20);
/// The largest code map opened.
const MAX_FILE: u64 = 1 << 30;
/// Pieces of code, method numbers and names held at most, once the table is compacted (about 100
/// bytes of memory each): a JVM has some hundred thousand methods and pieces of code alive; past
/// it, the rest of the map is not read.
pub const MAX_KEPT: usize = 1 << 20;
/// How often a refresh renews the agent's lease on its map: the agent looks every second, and
/// stops after 5 s without a renewal.
const RENEW_EVERY: Duration = Duration::from_secs(1);
/// How long code stays known after it was unloaded, counted back from the oldest sample that may
/// still be looked up ([`CodeMap::refresh`]): a margin for the samples still on their way (the
/// sampler delivers them in about the order they were taken).
const KEEP_UNLOADED: Duration = Duration::from_secs(5);

/// Why a code map cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CodeMapError {
    /// The file cannot be opened (not written yet), or is refused (a link, a FIFO, another
    /// user's file...).
    #[error("cannot read the code map: {0}")]
    Open(#[from] ForeignError),
    /// The file cannot be read.
    #[error("cannot read the code map {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The first line is not a code map header of a known version.
    #[error(
        "{path} is not a code map of version {VERSION} (its first line is not a header \
         'joularcode-code-map {VERSION} ...'): use a jvm-symbolizer-agent of the same version as \
         joularcode-bpf"
    )]
    Header {
        /// The file.
        path: PathBuf,
    },
    /// The map reached [`MAX_KEPT`]: what was read is kept, the rest is not read.
    #[error(
        "the code map {path} reports more than {MAX_KEPT} live pieces of code and methods: the \
         rest is not read, and code it reports later is named from the code cache"
    )]
    Full {
        /// The file.
        path: PathBuf,
    },
}

impl CodeMapError {
    /// Whether the map was found but refused: reading it again is no use.
    pub fn is_refused(&self) -> bool {
        matches!(self, CodeMapError::Open(ForeignError::Refused { .. }))
    }
}

/// The bytes a map may still be read, refilled at [`READ_RATE`] up to [`READ_BURST`].
#[derive(Debug, Clone, Copy)]
struct Budget {
    bytes: u64,
    at: Instant,
}

impl Budget {
    fn full() -> Budget {
        Budget {
            bytes: READ_BURST,
            at: Instant::now(),
        }
    }

    /// The bytes that may be read now.
    fn available(&mut self) -> u64 {
        let now = Instant::now();
        let earned = now.duration_since(self.at).as_secs_f64() * READ_RATE as f64;
        self.bytes = (self.bytes as f64 + earned).min(READ_BURST as f64) as u64;
        self.at = now;
        self.bytes
    }
}

/// The code map of one JVM, read incrementally.
#[derive(Debug)]
pub struct CodeMap {
    path: PathBuf,
    /// The map's folder, held open between refreshes, and the map opened in it.
    dir: Option<ProcessDir>,
    file: Option<File>,
    inode: Option<(u64, u64)>,
    budget: Budget,
    offset: u64,
    partial: Vec<u8>,
    skipping: bool,
    header_seen: bool,
    table: CodeTable,
    max_kept: usize,
    full: bool,
    /// Code unloaded before this time may be dropped (see [`KEEP_UNLOADED`]).
    horizon_ns: u64,
    bad_lines: u64,
    /// When the lease was last renewed.
    renewed: Option<Instant>,
    /// Whether the last refresh found no map at its path ([`CodeMap::gone`]).
    gone: bool,
}

impl CodeMap {
    /// A reader of the code map at `path`; nothing is read before [`CodeMap::refresh`].
    pub fn new(path: impl Into<PathBuf>) -> CodeMap {
        CodeMap {
            path: path.into(),
            dir: None,
            file: None,
            inode: None,
            budget: Budget::full(),
            offset: 0,
            partial: Vec::new(),
            skipping: false,
            header_seen: false,
            table: CodeTable::default(),
            max_kept: MAX_KEPT,
            full: false,
            horizon_ns: 0,
            bad_lines: 0,
            renewed: None,
            gone: false,
        }
    }

    /// The code map the agent writes for the JVM of host pid `pid`, which calls itself `ns_pid`,
    /// in its own /tmp, read through `/proc/<pid>/root` so that it works across containers.
    pub fn of_process(pid: u32, ns_pid: u32) -> CodeMap {
        CodeMap::new(format!("/proc/{pid}/root/tmp/joularcode-{ns_pid}.map"))
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the last refresh found no map at its path: its agent stopped writing it (no
    /// reader renewed its lease in time, or it reached its size bound), or the JVM ended. An
    /// agent that stopped starts again, with a new map, when it is attached again.
    pub fn gone(&self) -> bool {
        self.gone
    }

    /// Malformed lines skipped so far.
    pub fn bad_lines(&self) -> u64 {
        self.bad_lines
    }

    /// Unload lines that named no loaded code.
    pub fn unmatched_unloads(&self) -> u64 {
        self.table.unmatched_unloads()
    }

    /// Number of pieces of code held (loaded, unloaded and stubs).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no code is held yet.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Pieces of code, method numbers and names held: what the map's memory grows with.
    pub fn size(&self) -> usize {
        self.table.size()
    }

    /// Reads what the agent appended since the last refresh, within the read budget (the rest
    /// waits for the next refreshes). Returns the number of bytes read. A map that shrank or was
    /// replaced (the JVM's pid reused, the agent restarted) is read again from its start. A map
    /// that is gone once it was opened (the agent removes it when the JVM ends, and the JVM's
    /// /proc root goes with the JVM) is read to its end through the open file; one refused (a
    /// link, a FIFO in its place) is not.
    ///
    /// The samples still to look up were all taken at or after `oldest_sample_ns` (`u64::MAX`:
    /// none older than now): code unloaded more than 5 s before it is dropped as the map grows.
    /// [`CodeMapError::Full`] is returned once, when the map holds [`MAX_KEPT`] live pieces of
    /// code, method numbers and names; it stays usable, and later refreshes read nothing.
    pub fn refresh(&mut self, oldest_sample_ns: u64) -> Result<u64, CodeMapError> {
        if self.full {
            return Ok(0);
        }
        self.horizon_ns = monotonic_ns()
            .min(oldest_sample_ns)
            .saturating_sub(KEEP_UNLOADED.as_nanos() as u64);
        let name = self
            .path
            .file_name()
            .and_then(|name| name.to_str())
            .ok_or_else(|| ForeignError::Refused {
                path: self.path.clone(),
                why: "is not a file name".into(),
            })?
            .to_string();
        // The folder is held between refreshes; after an error it is entered again next time
        // (the JVM may have restarted).
        let found = match self.dir.take() {
            Some(dir) => Ok(dir),
            None => ProcessDir::open(self.path.parent().unwrap_or(Path::new("/"))),
        }
        .and_then(|dir| {
            let found = dir.identify(&name, MAX_FILE)?;
            Ok((dir, found))
        });
        let length = match found {
            Ok((dir, (id, len))) => {
                if self.file.is_none() || self.inode != Some(id) || len < self.offset {
                    let opened = dir.open_file(&name, MAX_FILE)?;
                    // The budget is the file name's, whatever file it holds.
                    let (budget, max_kept) = (self.budget, self.max_kept);
                    *self = CodeMap::new(self.path.clone());
                    self.budget = budget;
                    self.max_kept = max_kept;
                    self.inode = Some(opened.id);
                    self.file = Some(opened.file);
                }
                self.dir = Some(dir);
                self.gone = false;
                self.renew();
                Some(len)
            }
            Err(e @ ForeignError::Io { .. }) if self.file.is_some() => {
                self.gone = e.is_not_found();
                None
            }
            Err(e) => {
                self.gone = e.is_not_found();
                return Err(e.into());
            }
        };
        // Nothing appended since the last read: no more system calls.
        let Some(file) = self.file.as_mut().filter(|_| length != Some(self.offset)) else {
            return Ok(0);
        };
        let path = self.path.clone();
        let io = |source| CodeMapError::Io {
            path: path.clone(),
            source,
        };
        file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let started = Instant::now();
        let mut chunk = Vec::with_capacity(CHUNK);
        let mut read = 0;
        let fed = loop {
            let want = self.budget.available().min(CHUNK as u64);
            chunk.clear();
            let Some(file) = self.file.as_mut() else {
                break Ok(());
            };
            let n = file.take(want).read_to_end(&mut chunk).map_err(io)?;
            self.budget.bytes -= n as u64;
            self.offset += n as u64;
            read += n as u64;
            let fed = self.feed_lines(&chunk);
            if fed.is_err() || n == 0 || started.elapsed() >= REFRESH_TIME {
                break fed;
            }
        };
        self.table.publish();
        fed?;
        if self.full {
            return Err(CodeMapError::Full { path });
        }
        Ok(read)
    }

    /// Renews the agent's lease on the map opened, if [`RENEW_EVERY`] has passed: sets its access
    /// time (any new value renews it; the agent counts on its own clock). A failure is no error:
    /// the agent then stops, and the map is noticed [`CodeMap::gone`].
    fn renew(&mut self) {
        if self.renewed.is_some_and(|at| at.elapsed() < RENEW_EVERY) {
            return;
        }
        if let Some(file) = &self.file {
            let now = FileTimes::new().set_accessed(SystemTime::now());
            if file.set_times(now).is_ok() {
                self.renewed = Some(Instant::now());
            }
        }
    }

    /// Parses `bytes` that follow what was fed before (a refresh feeds the file's new bytes).
    /// Complete lines take effect at once; a partial last line waits for the next call.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), CodeMapError> {
        let fed = self.feed_lines(bytes);
        self.table.publish();
        fed
    }

    /// [`CodeMap::feed`] without making the new lines searchable yet ([`CodeTable::publish`]).
    fn feed_lines(&mut self, bytes: &[u8]) -> Result<(), CodeMapError> {
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            if self.full {
                return Ok(());
            }
            let (line, tail) = rest.split_at(end);
            rest = &tail[1..];
            if std::mem::take(&mut self.skipping) {
                self.partial.clear();
                continue;
            }
            let result = if self.partial.is_empty() {
                self.line(line)
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(line);
                self.line(&whole)
            };
            result?;
        }
        if self.partial.len() + rest.len() > MAX_LINE {
            self.partial.clear();
            self.skipping = true;
            self.bad_lines += 1;
        } else if !self.skipping {
            self.partial.extend_from_slice(rest);
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8]) -> Result<(), CodeMapError> {
        let text = mutf8::decode(line);
        if !self.header_seen {
            if format::parse_header(&text).is_none() {
                return Err(CodeMapError::Header {
                    path: self.path.clone(),
                });
            }
            self.header_seen = true;
            return Ok(());
        }
        if !format::parse(&text).is_some_and(|record| self.table.apply(record)) {
            self.bad_lines += 1;
        }
        if self.table.wants_compaction() {
            self.table.publish();
            self.table.compact(self.horizon_ns);
            self.full = self.table.size() >= self.max_kept;
        }
        Ok(())
    }

    /// The Java frames at `pc` at time `time_ns` (CLOCK_MONOTONIC), outermost first, from the
    /// code that was valid then: loaded at or before `time_ns` and not yet unloaded. Within a
    /// compiled method, the inline record covering `pc` gives the inlined methods.
    ///
    /// For a caller frame, `pc` is a return address: use [`CodeMap::lookup_return_address`].
    pub fn lookup(&self, pc: u64, time_ns: u64) -> Option<JitFrames<'_>> {
        self.table.lookup(pc, time_ns)
    }

    /// Every piece of code held, by start address, each with its own name (the compiled method
    /// alone, without inlined methods).
    pub fn iter(&self) -> impl Iterator<Item = JitFrames<'_>> {
        self.table.iter()
    }

    /// [`CodeMap::lookup`] for a caller frame, whose pc is the return address after a call: the
    /// call instruction is at `return_address - 1`.
    pub fn lookup_return_address(
        &self,
        return_address: u64,
        time_ns: u64,
    ) -> Option<JitFrames<'_>> {
        self.lookup(return_address.checked_sub(1)?, time_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(map: &CodeMap, pc: u64, time: u64) -> Option<Vec<&str>> {
        map.lookup(pc, time).map(|f| f.frames().collect())
    }

    const HEADER: &str = "joularcode-code-map 2 monotonic 42\n";

    #[test]
    fn partial_lines_wait_and_bad_lines_are_counted() {
        let mut map = CodeMap::new("test.map");
        let text = format!("{HEADER}M 0 a.A.m\nL 1 1000 10 0\nL 2 2000 10 7\nX\nL 3 3000 zz 0\nL 4 4000 10 0 5-3:0\nU 5 9999\n");
        let (head, tail) = text.split_at(text.find("1000").unwrap() + 2);
        map.feed(head.as_bytes()).unwrap();
        assert!(map.lookup(0x1000, 10).is_none(), "half a line is not read");
        map.feed(tail.as_bytes()).unwrap();
        assert_eq!(names(&map, 0x1000, 10), Some(vec!["a.A.m"]));
        assert_eq!(map.bad_lines(), 4);
        assert_eq!(map.unmatched_unloads(), 1);
        assert_eq!(map.len(), 1);
    }

    #[test]
    fn garbage_after_the_header_is_skipped_without_panics() {
        let mut map = CodeMap::new("garbage.map");
        map.feed(HEADER.as_bytes()).unwrap();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let alphabet = b"LRUSM 0123456789abcdef-:,%\n\xff";
        for _ in 0..2000 {
            let chunk: Vec<u8> = (0..64)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            map.feed(&chunk).unwrap();
            let _ = map.lookup(state % 0x10_0000, state % 1000);
        }
        assert!(map.bad_lines() > 0);
    }

    #[test]
    fn a_map_is_read_within_its_budget_and_kept_to_its_live_code() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("full.map");
        let mut text = HEADER.to_string();
        text.push_str("M 0 a.A.m\n");
        // Garbage costs reading time, not memory; live code counts against the bound.
        text.push_str(&"X\n".repeat(1 << 20));
        for i in 0..20_000u64 {
            text.push_str(&format!("L 1 {:x} 10 0\n", 0x1000 + i * 0x10));
        }
        std::fs::write(&path, &text).unwrap();
        let mut map = CodeMap::new(&path);
        map.max_kept = 10_000;
        let mut refreshes = 0;
        let full = loop {
            refreshes += 1;
            match map.refresh(u64::MAX) {
                Ok(read) => assert!(read <= READ_BURST, "{read}"),
                Err(e) => break e,
            }
            assert!(refreshes < 10_000, "the map never fills");
        };
        assert!(matches!(full, CodeMapError::Full { .. }), "{full}");
        assert_eq!(map.bad_lines(), 1 << 20);
        assert!((10_000..20_000).contains(&map.size()), "{}", map.size());
        assert_eq!(
            map.refresh(u64::MAX).unwrap(),
            0,
            "a full map is not read any more"
        );
        assert!(map.budget.bytes <= READ_BURST);
    }

    /// The agent's own writer (its numbering of methods, its inline ranges, its forgetting of
    /// method numbers) read back by this reader.
    #[test]
    fn what_the_agent_writes_is_read_back() {
        use jvm_symbolizer_agent::format::inline_ranges;
        use jvm_symbolizer_agent::jvmti::JmethodId;
        use jvm_symbolizer_agent::output::Pending;

        let method = |n: usize| n as JmethodId;
        let mut p = Pending::default();
        format::header(&mut p.map, 42);
        format::stub(&mut p.map, 1, 0x3000, 0x40, "Interpreter");
        let load = |p: &mut Pending, time: u64, start: u64, names: &[(usize, &str)]| {
            for (m, name) in names {
                p.number(method(*m), name);
            }
            let id = |m: usize| p.methods[&m];
            let root = id(names[0].0);
            let chain: Vec<u32> = names.iter().map(|(m, _)| id(*m)).collect();
            let ranges = inline_ranges(0x100, root, [(0x0f, vec![root]), (0x1f, chain)]);
            format::compiled_load(&mut p.map, false, time, start, 0x100, root, &ranges);
        };
        load(
            &mut p,
            10,
            0x1000,
            &[(1, "a.B.work"), (2, "a.B.inner x\n\"q")],
        );
        format::compiled_unload(&mut p.map, 20, 0x1000);
        p.forget(25);
        load(&mut p, 30, 0x1000, &[(3, "c.D.other"), (1, "a.B.work")]);
        let mut map = CodeMap::new("agent.map");
        map.feed(&p.map).unwrap();
        assert_eq!(map.bad_lines(), 0);
        let names = |pc: u64, time: u64| -> Vec<&str> {
            map.lookup(pc, time)
                .map_or(vec![], |f| f.frames().collect())
        };
        assert_eq!(names(0x1005, 15), ["a.B.work"]);
        assert_eq!(names(0x1015, 15), ["a.B.work", "a.B.inner x\n\"q"]);
        // Between the unload and the next load: the code reported next.
        assert_eq!(names(0x1015, 22), ["c.D.other", "a.B.work"]);
        assert_eq!(names(0x1015, 35), ["c.D.other", "a.B.work"]);
        assert_eq!(names(0x3010, 35), ["Interpreter"]);
        let stub = map.lookup(0x3000, 0).unwrap();
        assert_eq!(stub.kind, CodeKind::Stub);
    }

    #[test]
    fn a_file_that_is_not_a_code_map_is_an_error() {
        let mut map = CodeMap::new("x.map");
        let err = map.feed(b"7f00 10 perf.Map\n").unwrap_err();
        assert!(err.to_string().contains("not a code map"), "{err}");
        // What the file holds is never quoted: a map may be a link to a file only root reads
        let mut map = CodeMap::new("secret.map");
        let err = map
            .feed(b"root:$6$salt$hash:19000:0:99999:7:::\n")
            .unwrap_err();
        assert!(!err.to_string().contains("root:"), "{err}");
    }

    #[test]
    fn refresh_reads_only_new_bytes_and_restarts_on_a_new_file() {
        let path = std::env::temp_dir().join(format!("codemap-test-{}.map", std::process::id()));
        std::fs::write(&path, format!("{HEADER}M 0 a.A.m\nL 1 1000 10 0\nL 2 20")).unwrap();
        let mut map = CodeMap::new(&path);
        map.refresh(u64::MAX).unwrap();
        assert_eq!(map.len(), 1);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, b"00 10 0\n").unwrap();
        map.refresh(u64::MAX).unwrap();
        assert_eq!(names(&map, 0x2000, 5), Some(vec!["a.A.m"]));
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, format!("{HEADER}M 0 b.B.m\nL 1 1000 10 0\n")).unwrap();
        map.refresh(u64::MAX).unwrap();
        assert_eq!(names(&map, 0x1000, 5), Some(vec!["b.B.m"]));
        assert_eq!(map.len(), 1);
        // The agent writes its last lines and removes the map as the JVM ends: they are read
        // through the open file.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        std::io::Write::write_all(&mut file, b"L 2 3000 10 0\n").unwrap();
        map.refresh(u64::MAX).unwrap();
        assert_eq!(names(&map, 0x3000, 5), Some(vec!["b.B.m"]));
        let mut never_opened = CodeMap::new(&path);
        assert!(never_opened.refresh(u64::MAX).is_err());
    }

    #[test]
    fn refresh_renews_the_lease_once_a_second_and_notices_a_map_gone() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("joularcode-42.map");
        std::fs::write(&path, HEADER).unwrap();
        // A time after the file's last change, which reads do not update (relatime): only a
        // renewal changes it.
        let mark = SystemTime::now() + Duration::from_secs(100_000);
        let mark_secs = mark
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let set_atime = |time| {
            let file = File::open(&path).unwrap();
            file.set_times(FileTimes::new().set_accessed(time)).unwrap();
        };
        let atime = || std::fs::metadata(&path).unwrap().atime();
        set_atime(mark);
        let mut map = CodeMap::new(&path);
        map.refresh(u64::MAX).unwrap();
        assert!(atime() < mark_secs, "the first refresh renews the lease");
        set_atime(mark);
        map.refresh(u64::MAX).unwrap();
        assert_eq!(atime(), mark_secs, "not renewed twice within a second");
        std::thread::sleep(RENEW_EVERY);
        map.refresh(u64::MAX).unwrap();
        assert!(atime() < mark_secs, "renewed again a second later");
        assert!(!map.gone());
        std::fs::remove_file(&path).unwrap();
        map.refresh(u64::MAX).unwrap();
        assert!(map.gone(), "the agent stopped and removed its map");
        std::fs::write(&path, HEADER).unwrap();
        map.refresh(u64::MAX).unwrap();
        assert!(!map.gone(), "a new map is read again");
    }
}
