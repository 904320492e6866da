//! Files core reads that someone else may have put in place (a power file the host writes, the
//! ring buffer in /dev/shm, the configuration): opened without ever blocking.

use std::fs::File;
use std::path::Path;

/// Opens `path` for reading without blocking on a pipe planted there, and without following a
/// symbolic link unless `follow_links`. The caller checks that what it opened is a regular file.
pub(crate) fn open_for_reading(path: &Path, follow_links: bool) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let no_follow = if follow_links { 0 } else { libc::O_NOFOLLOW };
        options.custom_flags(no_follow | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    #[cfg(not(unix))]
    let _ = follow_links;
    options.open(path)
}
