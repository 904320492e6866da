//! Perf maps: `START SIZE name` lines, as the agent, perf-map-agent and others write them, and the
//! JDK's `Compiler.perfmap` output (`0x`-prefixed addresses, `ret Class.method(params)` names).
//!
//! A perf map is a snapshot without times: it cannot tell reused addresses apart, so it is only a
//! fallback for code the agent's code map does not name. A bad line is skipped and counted.

use std::io::Read;
use std::path::Path;

use joularcode_core::{mutf8, names};

use crate::foreign::{self, ForeignError, ForeignFile, ProcessDir};

/// Largest perf map read (the JDK's are a few MB for big applications).
pub const MAX_FILE: u64 = 64 << 20;

/// One line of a perf map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfMapEntry {
    /// First address.
    pub start: u64,
    /// Size in bytes.
    pub size: u64,
    /// Joular's `package.Class.method` for a Java method; the name as written for anything else
    /// (`Interpreter`, `I2C/C2I adapters`).
    pub name: String,
}

/// A parsed perf map, sorted by start address.
#[derive(Debug, Clone, Default)]
pub struct PerfMap {
    entries: Vec<PerfMapEntry>,
    bad_lines: usize,
}

impl PerfMap {
    /// Parses a perf map, in either form, skipping bad lines; names are cut as
    /// [`names::qualified_name`] cuts them.
    pub fn parse(text: &str) -> PerfMap {
        let mut map = PerfMap::default();
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            match parse_line(line) {
                Some(entry) => map.entries.push(entry),
                None => map.bad_lines += 1,
            }
        }
        map.entries.sort_by_key(|e| e.start);
        map
    }

    /// Reads and parses the perf map at `path`, opened as something another user controls
    /// ([`foreign::open_file`]: no link, a regular file of the JVM's user, at most 64 MiB).
    pub fn read(path: &Path) -> Result<PerfMap, ForeignError> {
        PerfMap::read_opened(foreign::open_file(path, MAX_FILE)?, path)
    }

    /// Reads and parses the perf map `opened` (at `path`), decoded as [`mutf8::decode`] does (the
    /// JDK writes the names as the JVM holds them).
    fn read_opened(opened: ForeignFile, path: &Path) -> Result<PerfMap, ForeignError> {
        let mut bytes = Vec::new();
        opened
            .file
            .take(MAX_FILE)
            .read_to_end(&mut bytes)
            .map_err(|source| ForeignError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(PerfMap::parse(&mutf8::decode(&bytes)))
    }

    /// Reads and parses the perf map `name` of the JVM's /tmp `tmp` (what `jcmd Compiler.perfmap`
    /// wrote), then removes it there, as it would only go stale: only a regular file of the
    /// JVM's user is read (not through a link, never blocking, at most 64 MiB) or removed.
    pub fn take(tmp: &ProcessDir, name: &str) -> Result<PerfMap, ForeignError> {
        let map = tmp
            .open_file(name, MAX_FILE)
            .and_then(|opened| PerfMap::read_opened(opened, &tmp.path().join(name)));
        tmp.remove_file(name);
        map
    }

    /// The entries, by start address.
    pub fn entries(&self) -> &[PerfMapEntry] {
        &self.entries
    }

    /// Lines that could not be read.
    pub fn bad_lines(&self) -> usize {
        self.bad_lines
    }

    /// The entry whose code holds `pc`: the last one starting at or before it, if it is long
    /// enough.
    pub fn lookup(&self, pc: u64) -> Option<&PerfMapEntry> {
        let i = self.entries.partition_point(|e| e.start <= pc);
        self.entries[..i].last().filter(|e| pc - e.start < e.size)
    }
}

fn hex(field: &str) -> Option<u64> {
    let digits = field
        .strip_prefix("0x")
        .or_else(|| field.strip_prefix("0X"))
        .unwrap_or(field);
    u64::from_str_radix(digits, 16).ok()
}

fn parse_line(line: &str) -> Option<PerfMapEntry> {
    let mut fields = line.trim_end().splitn(3, ' ');
    let start = hex(fields.next()?)?;
    let size = hex(fields.next()?)?;
    let name = fields.next()?.trim();
    if name.is_empty() || size == 0 {
        return None;
    }
    Some(PerfMapEntry {
        start,
        size,
        name: names::qualified_name(&java_name(name)).into_owned(),
    })
}

/// Joular's `package.Class.method` from a JDK perfmap name `ret package.Class.method(params)`;
/// other names are kept as they are.
pub fn java_name(name: &str) -> String {
    match name.split_once('(') {
        Some((head, _params)) if !head.is_empty() => {
            let qualified = head.rsplit(' ').next().unwrap_or(head);
            if qualified.contains('.') {
                qualified.to_string()
            } else {
                name.to_string()
            }
        }
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn both_forms_and_bad_lines() {
        let map = PerfMap::parse(
            "0x00007f3a1c000100 0x0000000000000160 void demo.Burn$Inner.spin(int, java.lang.String[])\n\
             0x00007f3a1c000400 0x0000000000000020 java.lang.String demo.Burn.name()\n\
             0x00007f3a1c000000 0x0000000000000100 Interpreter\n\
             7f3a1c000800 40 demo.Agent.work\n\
             garbage line\n\
             0xzz 10 x\n\
             7f3a1c000900 0 empty.Size\n\
             7f3a1c000a00 10 \n\
             7f3a1c000b00 10 I2C/C2I adapters\n",
        );
        assert_eq!(map.bad_lines(), 4);
        let names: Vec<&str> = map.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "Interpreter",
                "demo.Burn$Inner.spin",
                "demo.Burn.name",
                "demo.Agent.work",
                "I2C/C2I adapters"
            ]
        );
        assert_eq!(
            map.lookup(0x7f3a1c000150).unwrap().name,
            "demo.Burn$Inner.spin"
        );
        assert_eq!(map.lookup(0x7f3a1c0000ff).unwrap().name, "Interpreter");
        assert!(map.lookup(0x7f3a1c000260).is_none());
        assert_eq!(map.lookup(0x7f3a1c000b0f).unwrap().name, "I2C/C2I adapters");
    }

    /// The perf map `name` of the folder `dir`, as [`PerfMap::take`] takes it: its first entry's
    /// name, or the refusal.
    fn take(dir: &Path, name: &str) -> Result<String, String> {
        let tmp = ProcessDir::open(dir).map_err(|e| e.to_string())?;
        let map = PerfMap::take(&tmp, name).map_err(|e| e.to_string())?;
        Ok(map.entries()[0].name.clone())
    }

    #[test]
    fn only_a_regular_file_within_the_cap_is_read_and_only_one_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("perf-1.map"), "7f00 10 demo.Own.map\n").unwrap();
        assert_eq!(take(dir.path(), "perf-1.map").unwrap(), "demo.Own.map");
        assert!(!path("perf-1.map").exists(), "read, then removed");

        // A link to a file the JVM's user may not read: not followed, not removed.
        std::fs::write(path("secret"), "7f00 10 root.Secret.name\n").unwrap();
        std::os::unix::fs::symlink(path("secret"), path("perf-2.map")).unwrap();
        let error = take(dir.path(), "perf-2.map").unwrap_err();
        assert!(
            error.contains("symbolic link") && !error.contains("Secret"),
            "{error}"
        );
        assert!(
            std::fs::symlink_metadata(path("perf-2.map")).is_ok(),
            "the link stays"
        );
        assert!(path("secret").exists(), "its target stays");

        // A FIFO nobody writes: refused at once (an open for reading would wait for good).
        let fifo = std::ffi::CString::new(path("perf-3.map").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let error = take(dir.path(), "perf-3.map").unwrap_err();
        assert!(error.contains("is a FIFO, not a regular file"), "{error}");
        assert!(path("perf-3.map").exists(), "the FIFO stays");

        // Bigger than the cap (sparse): refused before a byte is read.
        let big = std::fs::File::create(path("perf-4.map")).unwrap();
        big.set_len(MAX_FILE + 1).unwrap();
        let error = take(dir.path(), "perf-4.map").unwrap_err();
        assert!(
            error.contains(&format!(
                "holds {} bytes, more than the {MAX_FILE}",
                MAX_FILE + 1
            )),
            "{error}"
        );
    }

    /// The JDK writes names as the JVM holds them, in modified UTF-8; a name of any length is cut
    /// as the readers of Symbols cut it.
    #[test]
    fn names_are_decoded_as_the_jvm_writes_them_and_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut line = b"0x7f00 0x10 void demo.Odd.r".to_vec();
        line.extend(b"\xed\xa0\xb5\xed\xb2\x9c\xc0\x80(int)\n");
        std::fs::write(dir.path().join("perf-1.map"), line).unwrap();
        assert_eq!(
            take(dir.path(), "perf-1.map").unwrap(),
            "demo.Odd.r\u{1d49c}\0"
        );
        let long = format!("demo.Odd.{}", "m".repeat(65_535));
        std::fs::write(dir.path().join("perf-2.map"), format!("7f00 10 {long}\n")).unwrap();
        let name = take(dir.path(), "perf-2.map").unwrap();
        assert_eq!(name, joularcode_core::names::qualified_name(&long));
        assert!(name.len() <= joularcode_core::names::MAX_FRAME_NAME_BYTES);
    }

    #[test]
    #[cfg_attr(
        not(feature = "e2e"),
        ignore = "needs root (a file of another user): scripts/test.sh runs it, or cargo test --features e2e as root"
    )]
    fn another_users_perf_map_is_neither_read_nor_removed() {
        // The folder as a JVM's /tmp is entered: through /proc/<pid>/root, whose user (this
        // process's) must own what is read there.
        let dir = tempfile::tempdir().unwrap();
        let tmp = PathBuf::from(format!(
            "/proc/{}/root{}",
            std::process::id(),
            dir.path().display()
        ));
        let map = dir.path().join("perf-5.map");
        std::fs::write(&map, "7f00 10 other.User.map\n").unwrap();
        assert_eq!(take(&tmp, "perf-5.map").unwrap(), "other.User.map");
        std::fs::write(&map, "7f00 10 other.User.map\n").unwrap();
        std::os::unix::fs::chown(&map, Some(12345), None).unwrap();
        let error = take(&tmp, "perf-5.map").unwrap_err();
        assert!(error.contains("belongs to user 12345"), "{error}");
        assert!(map.exists(), "another user's file stays");
    }

    #[test]
    fn hidden_classes_keep_their_suffix() {
        assert_eq!(
            java_name("void demo.Burn$$Lambda/0x0000000801001000.run()"),
            "demo.Burn$$Lambda/0x0000000801001000.run"
        );
        assert_eq!(
            java_name("RuntimeStub - _new_array_Java"),
            "RuntimeStub - _new_array_Java"
        );
    }
}
