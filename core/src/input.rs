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

/// Why the start of a small file could not be read ([`read_start`]).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Nothing is at the path.
    #[error("there is no such file")]
    NotFound,
    /// A folder, a FIFO, a device.
    #[error("it is not a regular file")]
    NotRegular,
    /// Opening or reading it failed.
    #[error("{0}")]
    Io(std::io::Error),
}

/// The first `max` bytes of the regular file `path` (symbolic links followed), read without
/// blocking on a pipe planted there: what is at the path is checked before the open (a FIFO
/// would block it) and again on what was opened, in case the path changed in between.
pub fn read_start(path: &Path, max: usize) -> Result<Vec<u8>, StartError> {
    use std::io::Read;
    if std::fs::metadata(path).is_ok_and(|found| !found.is_file()) {
        return Err(StartError::NotRegular);
    }
    let opened = open_for_reading(path, true).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => StartError::NotFound,
        _ => StartError::Io(error),
    })?;
    if !opened.metadata().map_err(StartError::Io)?.is_file() {
        return Err(StartError::NotRegular);
    }
    let mut start = Vec::with_capacity(max);
    opened
        .take(max as u64)
        .read_to_end(&mut start)
        .map_err(StartError::Io)?;
    Ok(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_start_of_a_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "12345").unwrap();
        assert_eq!(read_start(&file, 3).unwrap(), b"123");
        assert!(matches!(
            read_start(dir.path(), 3),
            Err(StartError::NotRegular)
        ));
        assert!(matches!(
            read_start(&dir.path().join("none"), 3),
            Err(StartError::NotFound)
        ));
    }
}
