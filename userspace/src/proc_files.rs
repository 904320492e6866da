//! What a process's /proc files say, read in one place. `/proc/PID/status`: its name, its
//! effective user and capabilities, the signals it catches, and its pid in its innermost PID
//! namespace (the kernel escapes the line ends of a name its owner chose; a field missing or that
//! does not parse is `None`, never a panic), with its PID namespace who may write its memory.
//! `/proc/PID/maps`: whether a line maps libjvm.so.
//! `/proc/PID/cmdline`: a JVM's main class.

use std::path::Path;

use joularcode_core::names;

/// The main class of JVM `pid`, from its command line ([`names::main_class`]).
pub fn main_class(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    names::main_class(&args)
}

/// The text of one process's `/proc/PID/status`.
#[derive(Debug, Clone, Default)]
pub struct ProcStatus(String);

impl ProcStatus {
    /// Reads `/proc/<pid>/status` below `proc_root` (`pid` may be `self`).
    pub fn read(proc_root: &Path, pid: &str) -> std::io::Result<ProcStatus> {
        std::fs::read_to_string(proc_root.join(pid).join("status")).map(ProcStatus)
    }

    /// The status of this text.
    pub fn parse(text: &str) -> ProcStatus {
        ProcStatus(text.to_string())
    }

    /// The value of the field `name` (`Name`, `Uid`, ...), without its blanks around.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.0
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    }

    /// The effective user id: the second id of `Uid`.
    pub fn effective_uid(&self) -> Option<u32> {
        self.field("Uid")?.split_whitespace().nth(1)?.parse().ok()
    }

    /// A hexadecimal mask: `CapEff` (capabilities), `SigCgt` (signals caught).
    pub fn mask(&self, name: &str) -> Option<u64> {
        u64::from_str_radix(self.field(name)?, 16).ok()
    }

    /// The pid the process sees itself as: the last (innermost namespace's) of `NStgid`, or
    /// `Tgid` on a kernel without it.
    pub fn ns_pid(&self) -> Option<u32> {
        self.field("NStgid")
            .or_else(|| self.field("Tgid"))?
            .split_whitespace()
            .last()?
            .parse()
            .ok()
    }
}

/// Who could write process `pid`'s memory besides root: its user ids (the `Uid` line of its
/// status) and its PID namespace (the inode of `/proc/PID/ns/pid`); `None` if either cannot be
/// read.
pub fn memory_writers(pid: u32) -> Option<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let status = ProcStatus::read(Path::new("/proc"), &pid.to_string()).ok()?;
    let uids = status.field("Uid")?.to_string();
    let namespace = std::fs::metadata(format!("/proc/{pid}/ns/pid")).ok()?.ino();
    Some((uids, namespace))
}

/// Whether a line of `/proc/PID/maps`, or the path it maps, is a HotSpot JVM's `libjvm.so`, also
/// once its file was replaced (a JDK updated while the JVM runs). A path need not be UTF-8: the
/// line is bytes.
pub fn maps_libjvm(line: &[u8]) -> bool {
    line.ends_with(b"/libjvm.so") || line.ends_with(b"/libjvm.so (deleted)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_by_their_line() {
        let status = ProcStatus::parse(
            "Name:\tjava\nUmask:\t0022\nTgid:\t4242\nNStgid:\t4242\t7\nUid:\t1000\t1001\t1000\t1000\n\
             SigCgt:\t0000000181005ccf\nCapEff:\t000001ffffffffff\n",
        );
        assert_eq!(status.field("Name"), Some("java"));
        assert_eq!(status.effective_uid(), Some(1001));
        assert_eq!(status.ns_pid(), Some(7));
        assert_eq!(status.mask("SigCgt"), Some(0x181005ccf));
        assert_eq!(status.mask("CapEff"), Some(0x1ffffffffff));
        assert_eq!(ProcStatus::parse("Tgid:\t4242\n").ns_pid(), Some(4242));
        let empty = ProcStatus::default();
        assert_eq!(
            (empty.field("Name"), empty.effective_uid(), empty.ns_pid()),
            (None, None, None)
        );
        assert_eq!(ProcStatus::parse("CapEff:\tzz\n").mask("CapEff"), None);
    }

    #[test]
    fn libjvm_is_found_also_deleted() {
        let line = |path: &str| format!("7f00-7f10 r--p 00000000 fd:01 42 {path}").into_bytes();
        assert!(maps_libjvm(&line(
            "/usr/lib/jvm/java-17/lib/server/libjvm.so"
        )));
        assert!(maps_libjvm(&line(
            "/opt/jdk/lib/server/libjvm.so (deleted)"
        )));
        assert!(!maps_libjvm(&line("/opt/jdk/lib/libjava.so")));
        assert!(!maps_libjvm(&line("/tmp/libjvm.so.bak")));
    }

    #[test]
    fn this_process_is_read() {
        let me = ProcStatus::read(Path::new("/proc"), "self").unwrap();
        assert_eq!(me.ns_pid(), Some(std::process::id()));
        assert!(me.effective_uid().is_some() && me.mask("CapEff").is_some());
    }
}
