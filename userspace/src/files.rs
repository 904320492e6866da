//! Files the profiler creates. It runs as root, so it never writes through a symbolic link.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Creates `path`, or empties it if it exists, for writing; a symbolic link at `path` is refused
/// (ELOOP) rather than followed.
pub fn create_no_follow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_created_and_emptied_a_link_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        std::fs::write(&path, "old").unwrap();
        create_no_follow(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(create_no_follow(&link).is_err());
    }
}
