//! Reader of the code map that jvm-symbolizer-agent writes (format: docs/code-map.md).
//!
//! The map is read while the JVM runs: each [`CodeMap::refresh`] reads only the bytes appended
//! since the last one, and a partial last line waits for the next refresh. Every piece of code
//! keeps the interval in which it was valid, `[load, unload)`, because HotSpot reuses the
//! addresses of unloaded code: [`CodeMap::lookup`] names a pc only with code that was valid at
//! the sample's time. Lookups are a binary search over the ranges sorted by start address.
//!
//! Everything in the file is untrusted (the JVM's user writes it): it is opened as
//! [`crate::foreign`] says (no link, a regular file of the JVM's user, never blocking), read at
//! most [`READ_RATE`] bytes a second and for at most 20 ms per refresh, and at most [`MAX_LINES`]
//! lines of it are kept, so that a map of garbage, or of millions of records, costs bounded time
//! and memory. A malformed line is
//! skipped and counted, never fatal.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::foreign::{ForeignError, ProcessDir};

/// First word and version of a code map's header line.
const MAGIC: &str = "joularcode-code-map";
const VERSION: &str = "1";
/// Bounds on what one line may hold (the longest lines, compiled methods with thousands of
/// inline ranges, take a few hundred KB).
const MAX_LINE: usize = 4 << 20;
const MAX_METHOD_ID: u32 = 1 << 24;
const MAX_CODE_SIZE: u64 = 1 << 30;
const MAX_DEPTH: usize = 1024;
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
/// Lines of a map kept at most (about 100 bytes of memory each): a JVM reports some hundred
/// thousand methods and pieces of code; past it, the rest of the map is not read.
pub const MAX_LINES: u64 = 1 << 20;

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
         '{MAGIC} {VERSION} ...'): use a jvm-symbolizer-agent of the same version as \
         joularcode-bpf"
    )]
    Header {
        /// The file.
        path: PathBuf,
    },
    /// The map reached [`MAX_LINES`]: what was read is kept, the rest is not read.
    #[error(
        "the code map {path} holds more than {MAX_LINES} lines: the rest is not read, and code \
         it reports later is named from the code cache"
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

/// What a piece of code is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeKind {
    /// A JIT-compiled Java method.
    Compiled,
    /// Code the JVM generated: interpreter, stubs, adapters.
    Stub,
}

/// The Java frames at one pc, found by [`CodeMap::lookup`].
#[derive(Debug, Clone, Copy)]
pub struct JitFrames<'a> {
    /// Compiled method or stub.
    pub kind: CodeKind,
    /// Start address of the code.
    pub start: u64,
    /// Address after its end.
    pub end: u64,
    /// When the code was loaded (0 when it existed before the agent started reporting).
    pub load_ns: u64,
    /// When it was unloaded, if it was.
    pub unload_ns: Option<u64>,
    chain: &'a [u32],
    strings: &'a [Box<str>],
}

impl<'a> JitFrames<'a> {
    /// The frames, outermost first: the compiled method, then each inlined method. For a stub,
    /// its one name.
    pub fn frames(&self) -> impl DoubleEndedIterator<Item = &'a str> + ExactSizeIterator + 'a {
        let strings = self.strings;
        self.chain.iter().map(move |&s| &*strings[s as usize])
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    start: u64,
    end: u64,
    load: u64,
    unload: u64,
    code: u32,
}

#[derive(Debug, Clone, Copy)]
struct Span {
    offset: u32,
    len: u32,
}

#[derive(Debug)]
struct InlineRange {
    from: u32,
    to: u32,
    chain: Span,
}

#[derive(Debug)]
struct Code {
    kind: CodeKind,
    root: Span,
    inline: Vec<InlineRange>,
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
    lines: u64,
    offset: u64,
    partial: Vec<u8>,
    skipping: bool,
    header_seen: bool,
    strings: Vec<Box<str>>,
    methods: HashMap<u32, u32>,
    chains: Vec<u32>,
    codes: Vec<Code>,
    entries: Vec<Entry>,
    max_end: Vec<u64>,
    fresh: usize,
    unloads: Vec<(u64, u64)>,
    bad_lines: u64,
    unmatched_unloads: u64,
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
            lines: 0,
            offset: 0,
            partial: Vec::new(),
            skipping: false,
            header_seen: false,
            strings: Vec::new(),
            methods: HashMap::new(),
            chains: Vec::new(),
            codes: Vec::new(),
            entries: Vec::new(),
            max_end: Vec::new(),
            fresh: 0,
            unloads: Vec::new(),
            bad_lines: 0,
            unmatched_unloads: 0,
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

    /// Malformed lines skipped so far.
    pub fn bad_lines(&self) -> u64 {
        self.bad_lines
    }

    /// Unload lines that named no loaded code.
    pub fn unmatched_unloads(&self) -> u64 {
        self.unmatched_unloads
    }

    /// Number of pieces of code known (loaded, unloaded and stubs).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no code is known yet.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Reads what the agent appended since the last refresh, within the read budget (the rest
    /// waits for the next refreshes). Returns the number of bytes read. A map that shrank or was
    /// replaced (the JVM's pid reused, the agent restarted) is read again from its start. A map
    /// that is gone once it was opened (the agent removes it when the JVM ends, and the JVM's
    /// /proc root goes with the JVM) is read to its end through the open file; one refused (a
    /// link, a FIFO in its place) is not.
    ///
    /// [`CodeMapError::Full`] is returned once, when the map reaches [`MAX_LINES`]; it stays
    /// usable, and later refreshes read nothing.
    pub fn refresh(&mut self) -> Result<u64, CodeMapError> {
        if self.lines >= MAX_LINES {
            return Ok(0);
        }
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
        match found {
            Ok((dir, (id, len))) => {
                if self.file.is_none() || self.inode != Some(id) || len < self.offset {
                    let opened = dir.open_file(&name, MAX_FILE)?;
                    // The budget is the file name's, whatever file it holds.
                    let budget = self.budget;
                    *self = CodeMap::new(self.path.clone());
                    self.budget = budget;
                    self.inode = Some(opened.id);
                    self.file = Some(opened.file);
                }
                self.dir = Some(dir);
            }
            Err(ForeignError::Io { .. }) if self.file.is_some() => {}
            Err(e) => return Err(e.into()),
        }
        let Some(file) = self.file.as_mut() else {
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
        self.publish();
        fed?;
        if self.lines >= MAX_LINES {
            return Err(CodeMapError::Full { path });
        }
        Ok(read)
    }

    /// Parses `bytes` that follow what was fed before (a refresh feeds the file's new bytes).
    /// Complete lines take effect at once; a partial last line waits for the next call.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), CodeMapError> {
        let fed = self.feed_lines(bytes);
        self.publish();
        fed
    }

    /// [`CodeMap::feed`] without making the new lines searchable yet ([`CodeMap::publish`]).
    fn feed_lines(&mut self, bytes: &[u8]) -> Result<(), CodeMapError> {
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            if self.lines >= MAX_LINES {
                return Ok(());
            }
            self.lines += 1;
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
        let text = String::from_utf8_lossy(line);
        if !self.header_seen {
            let mut fields = text.split(' ');
            if fields.next() != Some(MAGIC) || fields.next() != Some(VERSION) {
                return Err(CodeMapError::Header {
                    path: self.path.clone(),
                });
            }
            self.header_seen = true;
            return Ok(());
        }
        if self.record(&text).is_none() {
            self.bad_lines += 1;
        }
        Ok(())
    }

    /// One record line; `None` when malformed.
    fn record(&mut self, line: &str) -> Option<()> {
        let (kind, rest) = line.split_once(' ')?;
        match kind {
            "M" => {
                let (id, name) = rest.split_once(' ')?;
                let id: u32 = id.parse().ok().filter(|&id| id < MAX_METHOD_ID)?;
                let string = self.intern(unescape(name)?);
                self.methods.insert(id, string);
            }
            "L" | "R" => self.compiled(kind == "R", rest)?,
            "U" => {
                let mut fields = rest.split(' ');
                let time = fields.next()?.parse().ok()?;
                let start = u64::from_str_radix(fields.next()?, 16).ok()?;
                if fields.next().is_some() {
                    return None;
                }
                self.unloads.push((start, time));
            }
            "S" => {
                let mut fields = rest.splitn(4, ' ');
                let _time: u64 = fields.next()?.parse().ok()?;
                let (start, end) = address_range(fields.next()?, fields.next()?)?;
                let name = self.intern(unescape(fields.next()?)?);
                let root = self.chain(&[name]);
                self.push(
                    Entry {
                        start,
                        end,
                        load: 0,
                        unload: u64::MAX,
                        code: 0,
                    },
                    Code {
                        kind: CodeKind::Stub,
                        root,
                        inline: Vec::new(),
                    },
                );
            }
            _ => return None,
        }
        Some(())
    }

    fn compiled(&mut self, replayed: bool, rest: &str) -> Option<()> {
        let mut fields = rest.split(' ');
        let time: u64 = fields.next()?.parse().ok()?;
        let (start, end) = address_range(fields.next()?, fields.next()?)?;
        let size = end - start;
        let root = self.method(fields.next()?)?;
        let mut inline = Vec::new();
        let chains_before = self.chains.len();
        for field in fields {
            let parsed = (|| {
                let (range, ids) = field.split_once(':')?;
                let (from, to) = range.split_once('-')?;
                let from = u32::from_str_radix(from, 16).ok()?;
                let to = u32::from_str_radix(to, 16).ok()?;
                if from >= to || u64::from(to) > size {
                    return None;
                }
                let ids: Vec<u32> = ids
                    .split(',')
                    .take(MAX_DEPTH + 1)
                    .map(|id| self.method(id))
                    .collect::<Option<_>>()?;
                (ids.len() <= MAX_DEPTH).then_some((from, to, ids))
            })();
            let Some((from, to, ids)) = parsed else {
                self.chains.truncate(chains_before);
                return None;
            };
            let chain = self.chain(&ids);
            inline.push(InlineRange { from, to, chain });
        }
        inline.sort_by_key(|r| r.from);
        if inline.windows(2).any(|w| w[0].to > w[1].from) {
            self.chains.truncate(chains_before);
            return None;
        }
        let root = self.chain(&[root]);
        let load = if replayed { 0 } else { time };
        let entry = Entry {
            start,
            end,
            load,
            unload: u64::MAX,
            code: 0,
        };
        self.push(
            entry,
            Code {
                kind: CodeKind::Compiled,
                root,
                inline,
            },
        );
        Some(())
    }

    fn method(&self, id: &str) -> Option<u32> {
        self.methods.get(&id.parse().ok()?).copied()
    }

    fn intern(&mut self, name: String) -> u32 {
        self.strings.push(name.into_boxed_str());
        (self.strings.len() - 1) as u32
    }

    fn chain(&mut self, ids: &[u32]) -> Span {
        let offset = self.chains.len() as u32;
        self.chains.extend_from_slice(ids);
        Span {
            offset,
            len: ids.len() as u32,
        }
    }

    fn push(&mut self, mut entry: Entry, code: Code) {
        entry.code = self.codes.len() as u32;
        self.codes.push(code);
        self.entries.push(entry);
        self.fresh += 1;
    }

    /// Sorts the new entries in, applies the unloads read, and rebuilds the search helper.
    fn publish(&mut self) {
        if self.fresh == 0 && self.unloads.is_empty() {
            return;
        }
        if self.fresh > 0 {
            self.entries.sort_by_key(|e| (e.start, e.load));
            self.fresh = 0;
            let mut max = 0;
            self.max_end = self
                .entries
                .iter()
                .map(|e| {
                    max = max.max(e.end);
                    max
                })
                .collect();
        }
        for (start, time) in std::mem::take(&mut self.unloads) {
            let first = self.entries.partition_point(|e| e.start < start);
            let open = self.entries[first..]
                .iter_mut()
                .take_while(|e| e.start == start)
                .filter(|e| e.unload == u64::MAX && e.load <= time)
                .max_by_key(|e| e.load);
            match open {
                Some(entry) => entry.unload = time,
                None => self.unmatched_unloads += 1,
            }
        }
    }

    /// The Java frames at `pc` at time `time_ns` (CLOCK_MONOTONIC), outermost first, from the
    /// code that was valid then: loaded at or before `time_ns` and not yet unloaded. Within a
    /// compiled method, the inline record covering `pc` gives the inlined methods.
    ///
    /// For a caller frame, `pc` is a return address: use [`CodeMap::lookup_return_address`].
    pub fn lookup(&self, pc: u64, time_ns: u64) -> Option<JitFrames<'_>> {
        let mut i = self.entries.partition_point(|e| e.start <= pc);
        let mut best: Option<&Entry> = None;
        while i > 0 {
            i -= 1;
            if self.max_end[i] <= pc {
                break;
            }
            let e = &self.entries[i];
            let valid = pc < e.end && e.load <= time_ns && time_ns < e.unload;
            if valid && best.is_none_or(|b| e.load >= b.load) {
                best = Some(e);
            }
        }
        let entry = best?;
        let code = &self.codes[entry.code as usize];
        let offset = (pc - entry.start) as u32;
        let span = code
            .inline
            .get(code.inline.partition_point(|r| r.to <= offset))
            .filter(|r| r.from <= offset)
            .map_or(code.root, |r| r.chain);
        Some(self.frames(entry, span))
    }

    /// Every piece of code known, by start address, each with its own name (the compiled method
    /// alone, without inlined methods).
    pub fn iter(&self) -> impl Iterator<Item = JitFrames<'_>> {
        self.entries
            .iter()
            .map(|e| self.frames(e, self.codes[e.code as usize].root))
    }

    fn frames(&self, entry: &Entry, span: Span) -> JitFrames<'_> {
        JitFrames {
            kind: self.codes[entry.code as usize].kind,
            start: entry.start,
            end: entry.end,
            load_ns: entry.load,
            unload_ns: (entry.unload != u64::MAX).then_some(entry.unload),
            chain: &self.chains[span.offset as usize..(span.offset + span.len) as usize],
            strings: &self.strings,
        }
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

/// `start` and `size` in hex, as `[start, start + size)`, with a bounded size.
fn address_range(start: &str, size: &str) -> Option<(u64, u64)> {
    let start = u64::from_str_radix(start, 16).ok()?;
    let size = u64::from_str_radix(size, 16)
        .ok()
        .filter(|&s| s > 0 && s <= MAX_CODE_SIZE)?;
    Some((start, start.checked_add(size)?))
}

/// Undoes the agent's `%XX` escapes.
fn unescape(name: &str) -> Option<String> {
    if name.is_empty() {
        return None;
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(text: &str) -> CodeMap {
        let mut map = CodeMap::new("test.map");
        map.feed(text.as_bytes()).unwrap();
        map
    }

    fn names(map: &CodeMap, pc: u64, time: u64) -> Option<Vec<&str>> {
        map.lookup(pc, time).map(|f| f.frames().collect())
    }

    const HEADER: &str = "joularcode-code-map 1 monotonic 42\n";

    #[test]
    fn inline_ranges_give_the_chain_outermost_first() {
        let map = map(&format!(
            "{HEADER}M 0 a.B.work\nM 1 a.B.outer\nM 2 a.B.inner%20x\n\
             L 100 1000 100 0 10-20:0,1 20-30:0,1,2\n"
        ));
        assert_eq!(names(&map, 0x1005, 200), Some(vec!["a.B.work"]));
        assert_eq!(
            names(&map, 0x1010, 200),
            Some(vec!["a.B.work", "a.B.outer"])
        );
        assert_eq!(
            names(&map, 0x102f, 200),
            Some(vec!["a.B.work", "a.B.outer", "a.B.inner x"])
        );
        assert_eq!(names(&map, 0x1030, 200), Some(vec!["a.B.work"]));
        assert_eq!(names(&map, 0x1100, 200), None);
        // A return address right after a call at the end of an inline range.
        let frames = map.lookup_return_address(0x1030, 200).unwrap();
        assert_eq!(frames.frames().count(), 3);
        assert_eq!(frames.kind, CodeKind::Compiled);
    }

    #[test]
    fn reused_addresses_name_the_code_valid_at_the_sample_time() {
        let map = map(&format!(
            "{HEADER}M 0 a.Old.m\nM 1 a.New.m\n\
             L 100 1000 80 0\nU 500 1000\nL 600 1000 40 1\n"
        ));
        assert_eq!(names(&map, 0x1010, 99), None, "before any load");
        assert_eq!(names(&map, 0x1010, 100), Some(vec!["a.Old.m"]));
        assert_eq!(names(&map, 0x1010, 499), Some(vec!["a.Old.m"]));
        assert_eq!(names(&map, 0x1010, 550), None, "between unload and reload");
        assert_eq!(names(&map, 0x1010, 600), Some(vec!["a.New.m"]));
        assert_eq!(names(&map, 0x1060, 700), None, "the new code is shorter");
        assert_eq!(names(&map, 0x1060, 300), Some(vec!["a.Old.m"]));
        let old = map.lookup(0x1010, 300).unwrap();
        assert_eq!((old.load_ns, old.unload_ns), (100, Some(500)));
    }

    #[test]
    fn overlapping_code_prefers_the_latest_load_and_replays_count_from_the_start() {
        let map = map(&format!(
            "{HEADER}M 0 a.A.big\nM 1 a.B.small\n\
             R 900 1000 1000 0\nL 1000 1400 20 1\nS 5 3000 100 Interpreter\n"
        ));
        assert_eq!(names(&map, 0x1410, 10), Some(vec!["a.A.big"]));
        assert_eq!(names(&map, 0x1410, 2000), Some(vec!["a.B.small"]));
        assert_eq!(names(&map, 0x1800, 2000), Some(vec!["a.A.big"]));
        let stub = map.lookup(0x3000, 1).unwrap();
        assert_eq!(stub.kind, CodeKind::Stub);
        assert_eq!(stub.frames().next(), Some("Interpreter"));
    }

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
    fn a_map_is_read_within_its_budget_and_kept_to_its_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("full.map");
        let mut text = HEADER.to_string();
        text.push_str(&"X\n".repeat(MAX_LINES as usize + 5));
        std::fs::write(&path, &text).unwrap();
        let mut map = CodeMap::new(&path);
        let mut refreshes = 0;
        let full = loop {
            refreshes += 1;
            match map.refresh() {
                Ok(read) => assert!(read <= READ_BURST, "{read}"),
                Err(e) => break e,
            }
            assert!(refreshes < 10_000, "the map never fills");
        };
        assert!(matches!(full, CodeMapError::Full { .. }), "{full}");
        assert_eq!(map.bad_lines(), MAX_LINES - 1, "the header is a line too");
        assert_eq!(map.refresh().unwrap(), 0, "a full map is not read any more");
        assert!(map.budget.bytes <= READ_BURST);
    }

    #[test]
    fn a_file_that_is_not_a_code_map_is_an_error() {
        let mut map = CodeMap::new("x.map");
        let err = map.feed(b"7f00 10 perf.Map\n").unwrap_err();
        assert!(err.to_string().contains("not a code map"), "{err}");
    }

    #[test]
    fn refresh_reads_only_new_bytes_and_restarts_on_a_new_file() {
        let path = std::env::temp_dir().join(format!("codemap-test-{}.map", std::process::id()));
        std::fs::write(&path, format!("{HEADER}M 0 a.A.m\nL 1 1000 10 0\nL 2 20")).unwrap();
        let mut map = CodeMap::new(&path);
        map.refresh().unwrap();
        assert_eq!(map.len(), 1);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, b"00 10 0\n").unwrap();
        map.refresh().unwrap();
        assert_eq!(names(&map, 0x2000, 5), Some(vec!["a.A.m"]));
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, format!("{HEADER}M 0 b.B.m\nL 1 1000 10 0\n")).unwrap();
        map.refresh().unwrap();
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
        map.refresh().unwrap();
        assert_eq!(names(&map, 0x3000, 5), Some(vec!["b.B.m"]));
        let mut never_opened = CodeMap::new(&path);
        assert!(never_opened.refresh().is_err());
    }
}
