//! The cgroups a process belongs to (`/proc/PID/cgroup`), and the host's JVMs narrowed to some
//! cgroups (`--cgroup`): a service's, a container's, a Kubernetes pod's or a node's pods.

use std::io::Read;
use std::path::Path;

/// The most of a `/proc/PID/cgroup` file read: a line per hierarchy, each a path of at most
/// 4 KiB (the kernel's buffer), so a real file fits many times over. The names in the paths may
/// be the process owner's (a delegated cgroup).
const MAX_CGROUP_FILE: u64 = 64 * 1024;

/// The text of `proc_root/PID/cgroup`, at most [`MAX_CGROUP_FILE`] bytes of it, bytes that are
/// not UTF-8 replaced; `None` when it cannot be read (the process has ended).
pub fn read_cgroup_file(proc_root: &Path, pid: u32) -> Option<String> {
    let mut text = Vec::new();
    std::fs::File::open(proc_root.join(format!("{pid}/cgroup")))
        .and_then(|file| file.take(MAX_CGROUP_FILE).read_to_end(&mut text))
        .ok()?;
    Some(String::from_utf8_lossy(&text).into_owned())
}

/// The paths of the lines of a `/proc/PID/cgroup` file (`hierarchy-id:controllers:path`), one
/// per hierarchy (cgroup v1 and v2 alike).
pub fn cgroup_paths(cgroup_file: &str) -> impl Iterator<Item = &str> {
    cgroup_file
        .lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
}

/// A cgroup, by its path in its hierarchy as `/proc/PID/cgroup` shows it
/// (`/system.slice/app.service`), without a trailing `/` (the root is the empty path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupPath(String);

/// A `--cgroup` value that names no cgroup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CgroupError {
    /// Not an absolute path in the cgroup hierarchy.
    #[error("{0:?} is not a cgroup: give its path as /proc/PID/cgroup shows it, e.g. /system.slice/app.service")]
    NotAbsolute(String),
    /// A folder of the cgroup file system instead of the cgroup's path.
    #[error("{0:?} is a folder of the cgroup file system: give the cgroup's path as /proc/PID/cgroup shows it (the part after /sys/fs/cgroup/ or after its controller's folder), e.g. /system.slice/app.service")]
    Mounted(String),
    /// `.` or `..` in the path.
    #[error("{0:?}: a cgroup path has no . or .. in it")]
    Relative(String),
}

impl std::str::FromStr for CgroupPath {
    type Err = CgroupError;

    fn from_str(path: &str) -> Result<CgroupPath, CgroupError> {
        let trimmed = path.trim_end_matches('/');
        if !path.starts_with('/') {
            Err(CgroupError::NotAbsolute(path.to_string()))
        } else if path.starts_with("/sys/fs/cgroup") {
            Err(CgroupError::Mounted(path.to_string()))
        } else if trimmed.split('/').any(|part| part == "." || part == "..") {
            Err(CgroupError::Relative(path.to_string()))
        } else {
            Ok(CgroupPath(trimmed.to_string()))
        }
    }
}

/// Which of the host's processes are profiled: every one (no cgroup given), or those in one of
/// the given cgroups or below one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroups(Vec<CgroupPath>);

impl Cgroups {
    /// Every process of the host.
    pub const fn every() -> Cgroups {
        Cgroups(Vec::new())
    }

    /// The processes in these cgroups or below them; none given: every process.
    pub fn new(paths: Vec<CgroupPath>) -> Cgroups {
        Cgroups(paths)
    }

    /// Whether every process of the host is taken.
    pub fn is_every(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the process whose `/proc/PID/cgroup` file reads `cgroup_file` is taken: a line
    /// of it names one of the cgroups or one below it.
    pub fn hold(&self, cgroup_file: &str) -> bool {
        self.is_every()
            || cgroup_paths(cgroup_file).any(|path| {
                self.0.iter().any(|CgroupPath(cgroup)| {
                    // the root (the empty path) holds everything
                    path.strip_prefix(cgroup.as_str())
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                })
            })
    }

    /// Whether process `pid` of `proc_root` is taken; one that ended is not.
    pub fn hold_process(&self, proc_root: &Path, pid: u32) -> bool {
        self.is_every() || read_cgroup_file(proc_root, pid).is_some_and(|cgroup| self.hold(&cgroup))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cgroups of these paths, each valid.
    fn cgroups(paths: &[&str]) -> Cgroups {
        Cgroups::new(paths.iter().map(|path| path.parse().unwrap()).collect())
    }

    const HYBRID: &str = "9:name=systemd:/system.slice/app.service\n4:memory:/process_api/8c\n\
                          0::/system.slice/app.service\n";

    #[test]
    fn a_process_is_held_by_its_cgroup_and_those_above_it_in_any_hierarchy() {
        let held = |paths: &[&str]| cgroups(paths).hold(HYBRID);
        assert!(held(&[]));
        assert!(held(&["/system.slice/app.service"]));
        assert!(held(&["/system.slice/"]));
        assert!(held(&["/"]));
        assert!(held(&["/process_api"]));
        assert!(held(&["/other", "/process_api/8c"]));
        assert!(!held(&["/system.slice/app"]));
        assert!(!held(&["/system.slice/app.service/child"]));
        assert!(!held(&["/user.slice"]));
        assert!(!cgroups(&["/x"]).hold("garbage without colons\n"));
    }

    #[test]
    fn a_path_that_names_no_cgroup_is_refused_in_words_that_say_what_to_give() {
        for (path, says) in [
            ("system.slice", "is not a cgroup"),
            (
                "/sys/fs/cgroup/pids/docker",
                "a folder of the cgroup file system",
            ),
            ("/a/../b", "no . or .."),
        ] {
            let error = path.parse::<CgroupPath>().unwrap_err().to_string();
            assert!(error.contains(says), "{path}: {error}");
        }
    }

    #[test]
    fn an_ended_process_is_not_held_but_every_process_is_taken_without_cgroups() {
        let missing = Path::new("/nonexistent-proc");
        assert!(!cgroups(&["/"]).hold_process(missing, 1));
        assert!(Cgroups::every().hold_process(missing, 1));
        let me = std::process::id();
        assert!(cgroups(&["/"]).hold_process(Path::new("/proc"), me));
    }
}
