//! Where outputs go (results, the cycle log, stacks, flame graphs...): the profiler runs as root,
//! and another user may own a folder on the way, so no symbolic link is ever followed.
//!
//! A path is walked one component at a time from `/` (or the working directory), each opened with
//! `O_NOFOLLOW | O_DIRECTORY` relative to the one before and created with `mkdirat` when missing;
//! the file is opened with `openat` in the last folder. A link at any component, a component that
//! is not a directory, or a file that is not a regular file with a single link (a FIFO would hang
//! the writer, a hard link would write into another file) is refused with one line that says
//! which component and what to do. A character device of root's (`/dev/null`) is the one other
//! file accepted: only root makes those.
//!
//! ```no_run
//! use joularcode_core::output::path::{self, Mode};
//! # fn main() -> std::io::Result<()> {
//! // Before anything starts: refuse a bad path at once, creating nothing.
//! path::check_file(std::path::Path::new("out/profile.svg"))?;
//! // Later: create the folders and the file.
//! let file = path::create_file(std::path::Path::new("out/profile.svg"), Mode::Truncate)?;
//! # Ok(()) }
//! ```

use std::fs::File;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

/// How an output file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Emptied first (the cycle log, a flame graph).
    Truncate,
    /// Appended to (the CSV files).
    Append,
}

/// Checks, creating nothing, that `path` can be a directory of outputs: every component that
/// exists is a directory and none is a symbolic link (those that do not exist yet are created by
/// [`OutputDir::create`]).
pub fn check_dir(path: &Path) -> io::Result<()> {
    imp::walk(path, false).map(|_| ())
}

/// Checks, creating nothing, that `path` can be an output file: its folder as [`check_dir`]
/// checks it, and the file itself, if it exists, a regular file with no other hard link and not
/// a symbolic link.
pub fn check_file(path: &Path) -> io::Result<()> {
    let (dir, name) = split(path)?;
    match imp::walk(&dir, false)? {
        Some(dir) => dir.check_file(name),
        None => Ok(()),
    }
}

/// Creates the output file `path` (its folders too), or opens it if it exists, for writing
/// ([`Mode`]), following no symbolic link.
pub fn create_file(path: &Path, mode: Mode) -> io::Result<File> {
    let (dir, name) = split(path)?;
    OutputDir::create(&dir)?.open_file(name, mode)
}

/// Appends `bytes` to `file` entirely, or cuts the file back to where it was.
pub fn append_whole(file: &mut File, bytes: &[u8]) -> io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let before = file.metadata()?.len();
    let written = file.write_all(bytes);
    if written.is_err() {
        // Best effort: the error that matters is the write's
        let _ = file.set_len(before);
    }
    written
}

/// A directory of outputs, created and held open: its files are opened relative to it, so a
/// folder on its path renamed or replaced later does not move them.
#[derive(Debug)]
pub struct OutputDir {
    path: PathBuf,
    inner: imp::Dir,
}

impl OutputDir {
    /// Creates the directory `path` with its missing parents, following no symbolic link, and
    /// opens it.
    pub fn create(path: &Path) -> io::Result<OutputDir> {
        let inner = imp::walk(path, true)?
            .ok_or_else(|| io::Error::other(format!("{} could not be created.", path.display())))?;
        Ok(OutputDir {
            path: path.to_path_buf(),
            inner,
        })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the file `name` in this directory for writing, creating it, following no link.
    pub fn open_file(&self, name: &str, mode: Mode) -> io::Result<File> {
        self.inner.open_file(name, mode)
    }

    /// The directory `name` in this one, created if missing.
    pub fn subdir(&self, name: &str) -> io::Result<OutputDir> {
        OutputDir::create(&self.path.join(name))
    }
}

/// `path` split into its folder (`.` for a bare name) and its file name.
fn split(path: &Path) -> io::Result<(PathBuf, &str)> {
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} does not end with a file name (or it is not UTF-8).",
                    path.display()
                ),
            )
        })?;
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

/// The components of `path` to open one by one, and whether it starts at `/`.
fn components(path: &Path) -> (bool, Vec<&std::ffi::OsStr>) {
    let mut absolute = false;
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => absolute = true,
            Component::CurDir => {}
            Component::ParentDir => parts.push(std::ffi::OsStr::new("..")),
            Component::Normal(name) => parts.push(name),
        }
    }
    (absolute, parts)
}

/// The path of the first `n` components of `path`, for messages.
fn prefix(path: &Path, n: usize) -> PathBuf {
    let (absolute, parts) = components(path);
    let mut shown = if absolute {
        PathBuf::from("/")
    } else {
        PathBuf::new()
    };
    shown.extend(&parts[..n]);
    shown
}

/// The refusal of a symbolic link at `path` (which points to `target`).
fn link_error(path: &Path, target: Option<PathBuf>) -> io::Error {
    let to = target.map_or_else(String::new, |target| format!(" (to {})", target.display()));
    io::Error::other(format!(
        "{}{to} is a symbolic link, and outputs are never written through one, as another user \
         could have made it: give a path without links.",
        path.display()
    ))
}

/// The refusal of `path` because it is not `what`.
fn kind_error(path: &Path, what: &str) -> io::Error {
    io::Error::other(format!(
        "{} is not {what}: remove it, or give another path.",
        path.display()
    ))
}

/// The refusal of a regular file with other hard links.
#[cfg(unix)]
fn links_error(path: &Path) -> io::Error {
    io::Error::other(format!(
        "{} has other hard links, so writing it would change another file: remove it, or give \
         another path.",
        path.display()
    ))
}

/// `error` on `path`, with the path.
fn with_path(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}.", path.display()))
}

#[cfg(unix)]
mod imp {
    use std::ffi::OsStr;
    use std::fs::File;
    use std::io;
    use std::os::fd::OwnedFd;
    use std::path::Path;

    use rustix::fs::{AtFlags, FileType, Mode as Perm, OFlags, CWD};
    use rustix::io::Errno;

    use super::{components, kind_error, link_error, links_error, prefix, with_path, Mode};

    /// How each folder is opened: only to look up names in it (`O_PATH` where there is one).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    const DIR_FLAGS: OFlags = OFlags::PATH
        .union(OFlags::DIRECTORY)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    const DIR_FLAGS: OFlags = OFlags::RDONLY
        .union(OFlags::DIRECTORY)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);

    /// An open directory and its path.
    #[derive(Debug)]
    pub struct Dir {
        fd: OwnedFd,
        path: std::path::PathBuf,
    }

    /// Opens `path` component by component without following links, creating the missing ones
    /// when `create`; without `create`, `None` at the first missing component.
    pub fn walk(path: &Path, create: bool) -> io::Result<Option<Dir>> {
        let (absolute, parts) = components(path);
        let start = if absolute { "/" } else { "." };
        let mut fd = rustix::fs::openat(CWD, start, DIR_FLAGS, Perm::empty())
            .map_err(|errno| with_path(Path::new(start), errno.into()))?;
        for (i, name) in parts.iter().enumerate() {
            let shown = || prefix(path, i + 1);
            fd = match open_dir(&fd, name) {
                Ok(next) => next,
                Err(Errno::NOENT) if !create => return Ok(None),
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&fd, *name, Perm::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(errno) => {
                            return Err(io::Error::new(
                                io::Error::from(errno).kind(),
                                format!(
                                    "Could not create the directory {}: {}.",
                                    shown().display(),
                                    io::Error::from(errno)
                                ),
                            ))
                        }
                    }
                    open_dir(&fd, name).map_err(|errno| refusal(&fd, name, &shown(), errno))?
                }
                Err(errno) => return Err(refusal(&fd, name, &shown(), errno)),
            };
        }
        Ok(Some(Dir {
            fd,
            path: path.to_path_buf(),
        }))
    }

    fn open_dir(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
        rustix::fs::openat(dir, name, DIR_FLAGS, Perm::empty())
    }

    /// Why `name` in `dir` (shown as `shown`) could not be opened as a directory.
    fn refusal(dir: &OwnedFd, name: &OsStr, shown: &Path, errno: Errno) -> io::Error {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink => {
                let target = rustix::fs::readlinkat(dir, name, Vec::new())
                    .ok()
                    .map(|target| target.to_string_lossy().into_owned().into());
                link_error(shown, target)
            }
            Ok(stat) if FileType::from_raw_mode(stat.st_mode) != FileType::Directory => {
                kind_error(shown, "a directory")
            }
            _ => with_path(shown, errno.into()),
        }
    }

    impl Dir {
        /// Refuses an existing `name` that is a link, not a regular file, or has other links.
        pub fn check_file(&self, name: &str) -> io::Result<()> {
            let path = self.path.join(name);
            match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => check_stat(&path, &self.fd, name, &stat),
                Err(Errno::NOENT) => Ok(()),
                Err(errno) => Err(with_path(&path, errno.into())),
            }
        }

        /// Opens `name` for writing, creating it: `O_NOFOLLOW` refuses a link, `O_NONBLOCK`
        /// keeps a FIFO from hanging the open, and what was opened is checked before it is
        /// emptied or written.
        pub fn open_file(&self, name: &str, mode: Mode) -> io::Result<File> {
            let path = self.path.join(name);
            let mut flags = OFlags::WRONLY
                | OFlags::CREATE
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC
                | OFlags::NONBLOCK;
            if mode == Mode::Append {
                flags |= OFlags::APPEND;
            }
            let fd = rustix::fs::openat(&self.fd, name, flags, Perm::from_raw_mode(0o666))
                .map_err(|errno| match errno {
                    Errno::LOOP | Errno::ISDIR | Errno::NXIO => {
                        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                            Ok(stat) => check_stat(&path, &self.fd, name, &stat)
                                .err()
                                .unwrap_or_else(|| with_path(&path, errno.into())),
                            Err(_) => with_path(&path, errno.into()),
                        }
                    }
                    errno => with_path(&path, errno.into()),
                })?;
            let stat = rustix::fs::fstat(&fd).map_err(|errno| with_path(&path, errno.into()))?;
            check_stat(&path, &self.fd, name, &stat)?;
            if mode == Mode::Truncate
                && FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
            {
                rustix::fs::ftruncate(&fd, 0).map_err(|errno| with_path(&path, errno.into()))?;
            }
            Ok(File::from(fd))
        }
    }

    fn check_stat(
        path: &Path,
        dir: &OwnedFd,
        name: &str,
        stat: &rustix::fs::Stat,
    ) -> io::Result<()> {
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(dir, name, Vec::new())
                    .ok()
                    .map(|target| target.to_string_lossy().into_owned().into());
                Err(link_error(path, target))
            }
            FileType::RegularFile if stat.st_nlink > 1 => Err(links_error(path)),
            FileType::RegularFile => Ok(()),
            // Only root makes device files, so no other user planted this one: root named it
            // (`--output /dev/null`), and it is opened without blocking.
            FileType::CharacterDevice if stat.st_uid == 0 => Ok(()),
            _ => Err(kind_error(path, "a regular file")),
        }
    }
}

#[cfg(not(unix))]
mod imp {
    use std::fs::File;
    use std::io;
    use std::path::{Path, PathBuf};

    use super::{components, kind_error, link_error, prefix, with_path, Mode};

    /// A directory, by path: without openat, each check comes just before its use.
    #[derive(Debug)]
    pub struct Dir {
        path: PathBuf,
    }

    /// Checks `path` component by component, creating the missing ones when `create`.
    pub fn walk(path: &Path, create: bool) -> io::Result<Option<Dir>> {
        let (_, parts) = components(path);
        for i in 0..parts.len() {
            let shown = prefix(path, i + 1);
            match std::fs::symlink_metadata(&shown) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(link_error(&shown, std::fs::read_link(&shown).ok()))
                }
                Ok(meta) if !meta.is_dir() => return Err(kind_error(&shown, "a directory")),
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound && !create => {
                    return Ok(None)
                }
                Err(error) if error.kind() == io::ErrorKind::NotFound => {
                    std::fs::create_dir(&shown).map_err(|error| with_path(&shown, error))?
                }
                Err(error) => return Err(with_path(&shown, error)),
            }
        }
        Ok(Some(Dir {
            path: path.to_path_buf(),
        }))
    }

    impl Dir {
        /// Refuses an existing `name` that is a link or not a regular file.
        pub fn check_file(&self, name: &str) -> io::Result<()> {
            let path = self.path.join(name);
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    Err(link_error(&path, std::fs::read_link(&path).ok()))
                }
                Ok(meta) if !meta.is_file() => Err(kind_error(&path, "a regular file")),
                Ok(_) => Ok(()),
                Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(error) => Err(with_path(&path, error)),
            }
        }

        /// Opens `name` for writing, creating it, after the checks.
        pub fn open_file(&self, name: &str, mode: Mode) -> io::Result<File> {
            self.check_file(name)?;
            let path = self.path.join(name);
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .append(mode == Mode::Append)
                .truncate(mode == Mode::Truncate)
                .open(&path)
                .map_err(|error| with_path(&path, error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn folders_and_the_file_are_created_and_a_file_emptied_or_appended() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a/b/out.txt");
        check_file(&file).unwrap();
        assert!(!dir.path().join("a").exists(), "a check creates nothing");
        std::io::Write::write_all(&mut create_file(&file, Mode::Append).unwrap(), b"one").unwrap();
        std::io::Write::write_all(&mut create_file(&file, Mode::Append).unwrap(), b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "onetwo");
        create_file(&file, Mode::Truncate).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
        check_file(&file).unwrap();
        check_dir(&dir.path().join("a/b/c/d")).unwrap();
    }

    #[test]
    fn a_link_at_any_component_is_refused_and_nothing_is_written_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("out.txt"), "kept").unwrap();
        symlink(&elsewhere, dir.path().join("shared")).unwrap();
        for path in ["shared/out.txt", "shared/sub/out.txt", "shared/../shared/x"] {
            let path = dir.path().join(path);
            let checked = check_file(&path).unwrap_err().to_string();
            let created = create_file(&path, Mode::Truncate).unwrap_err().to_string();
            for error in [checked, created] {
                assert!(error.contains("shared (to "), "{error}");
                assert!(error.contains("is a symbolic link"), "{error}");
            }
        }
        let error = check_dir(&dir.path().join("shared/sub")).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        symlink(elsewhere.join("out.txt"), dir.path().join("last")).unwrap();
        let error = create_file(&dir.path().join("last"), Mode::Append).unwrap_err();
        assert!(error.to_string().contains("is a symbolic link"), "{error}");
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("out.txt")).unwrap(),
            "kept"
        );
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1);
    }

    #[test]
    fn a_fifo_a_folder_a_hard_link_or_a_file_on_the_way_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) }, 0);
        for error in [
            check_file(&fifo).unwrap_err(),
            create_file(&fifo, Mode::Append).unwrap_err(),
        ] {
            assert!(
                error.to_string().contains("is not a regular file"),
                "{error}"
            );
        }
        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).unwrap();
        let error = create_file(&folder, Mode::Truncate).unwrap_err();
        assert!(
            error.to_string().contains("is not a regular file"),
            "{error}"
        );
        let original = dir.path().join("original");
        std::fs::write(&original, "precious").unwrap();
        std::fs::hard_link(&original, dir.path().join("hard")).unwrap();
        let error = create_file(&dir.path().join("hard"), Mode::Truncate).unwrap_err();
        assert!(error.to_string().contains("other hard links"), "{error}");
        assert_eq!(std::fs::read_to_string(&original).unwrap(), "precious");
        let error = create_file(&original.join("x"), Mode::Truncate).unwrap_err();
        assert!(error.to_string().contains("is not a directory"), "{error}");
    }

    #[test]
    fn dev_null_is_written_to() {
        check_file(Path::new("/dev/null")).unwrap();
        for mode in [Mode::Truncate, Mode::Append] {
            let mut file = create_file(Path::new("/dev/null"), mode).unwrap();
            file.write_all(b"discarded").unwrap();
        }
    }

    #[test]
    fn relative_paths_start_at_the_working_directory() {
        assert_eq!(
            split(Path::new("out.csv")).unwrap(),
            (PathBuf::from("."), "out.csv")
        );
        assert_eq!(
            prefix(Path::new("/a/./b/../c"), 3),
            PathBuf::from("/a/b/..")
        );
        assert!(split(Path::new("/")).is_err());
    }
}
