//! Code maps left behind by JVMs that ended without their agent removing them (killed with
//! SIGKILL, crashed).
//!
//! The symbolizer agent holds an exclusive `flock` on its code map, `joularcode-<pid>.map`, while
//! its JVM runs, and removes the map when the JVM ends (docs/code-map.md). A map that no process
//! holds locked is therefore left over by a JVM that is gone: the profiler removes those when a
//! session starts, when a profiled JVM ends, and in the /tmp of each JVM it opens that has a /tmp
//! of its own (a container's). An agent that opens its map in the instant between the check and
//! the removal sees its file go, and opens a new one.

use std::ffi::CStr;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{
    flock, fstat, openat, statat, unlinkat, AtFlags, Dir, FileType, FlockOperation, Mode, OFlags,
    CWD,
};

use crate::foreign::reopen;

/// Removes the code maps of the folder `dir` that no agent holds, and returns how many. Only
/// regular files named `joularcode-<digits>.map` are touched; no symbolic link is followed and
/// nothing blocks (a FIFO under that name is left alone). A folder that cannot be read is no
/// error: there is nothing to remove in it.
pub fn sweep(dir: &Path) -> usize {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(folder) = openat(CWD, dir, flags, Mode::empty()) else {
        return 0;
    };
    let Ok(entries) = Dir::read_from(&folder) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| is_code_map(entry.file_name()))
        .filter(|entry| remove_if_unlocked(&folder, entry.file_name()))
        .count()
}

/// Sweeps the /tmp that the JVM of host pid `pid` sees, when it is not the host's (a container's).
pub fn sweep_own_tmp(pid: u32) {
    let own = format!("/proc/{pid}/root/tmp");
    let identity = |path: &str| statat(CWD, path, AtFlags::empty()).map(|s| (s.st_dev, s.st_ino));
    if let (Ok(own_tmp), Ok(host_tmp)) = (identity(&own), identity("/tmp")) {
        if own_tmp != host_tmp {
            sweep(Path::new(&own));
        }
    }
}

/// Whether `name` is `joularcode-<digits>.map`.
fn is_code_map(name: &CStr) -> bool {
    name.to_bytes()
        .strip_prefix(b"joularcode-")
        .and_then(|rest| rest.strip_suffix(b".map"))
        .is_some_and(|pid| !pid.is_empty() && pid.iter().all(u8::is_ascii_digit))
}

/// Removes the file `name` of the folder `folder` if it is a regular file that no process holds
/// an exclusive lock on, and is still the file that was checked when it is removed. Returns
/// whether it was removed.
fn remove_if_unlocked(folder: &OwnedFd, name: &CStr) -> bool {
    // Checked through an O_PATH handle before it is opened for real: opening a device (a
    // container's root can make one in its /tmp) can act on it.
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(handle) = openat(folder, name, flags, Mode::empty()) else {
        return false;
    };
    let Ok(checked) = fstat(&handle) else {
        return false;
    };
    if FileType::from_raw_mode(checked.st_mode) != FileType::RegularFile {
        return false;
    }
    let Ok(file) = reopen(&handle, OFlags::RDONLY) else {
        return false;
    };
    if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        return false;
    }
    let still_there = statat(folder, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|now| (now.st_dev, now.st_ino) == (checked.st_dev, checked.st_ino));
    still_there && unlinkat(folder, name, AtFlags::empty()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn only_unlocked_regular_maps_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("joularcode-1.map"), "stale").unwrap();
        let held = std::fs::File::create(path("joularcode-2.map")).unwrap();
        // SAFETY: flock on an open descriptor, as the agent takes it.
        assert_eq!(
            unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        std::fs::write(path("precious"), "keep").unwrap();
        std::os::unix::fs::symlink(path("precious"), path("joularcode-3.map")).unwrap();
        let fifo = std::ffi::CString::new(path("joularcode-4.map").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::create_dir(path("joularcode-5.map")).unwrap();
        std::fs::write(path("joularcode-x.map"), "not a pid").unwrap();
        std::fs::write(path("perf-6.map"), "a perf map").unwrap();

        assert_eq!(sweep(dir.path()), 1);
        assert!(!path("joularcode-1.map").exists(), "stale map removed");
        for kept in [
            "joularcode-2.map",
            "joularcode-4.map",
            "joularcode-5.map",
            "joularcode-x.map",
            "perf-6.map",
            "precious",
        ] {
            assert!(path(kept).exists(), "{kept} kept");
        }
        assert!(std::fs::symlink_metadata(path("joularcode-3.map")).is_ok());
        assert_eq!(std::fs::read_to_string(path("precious")).unwrap(), "keep");
        drop(held);
        assert_eq!(
            sweep(dir.path()),
            1,
            "a map is removed once its agent is gone"
        );
        assert_eq!(sweep(&dir.path().join("missing")), 0);
    }
}
