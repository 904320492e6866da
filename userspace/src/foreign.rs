//! What another user controls: the files and sockets that a profiled JVM's owner can create,
//! replace or remove (its /tmp, its working folder), opened by a profiler that runs as root.
//! Everything that touches them goes through here (docs/security.md):
//!
//! - a folder of a process is entered through `/proc/<pid>/root` or `/proc/<pid>/cwd`, the kernel's
//!   own links to it (they cross mount namespaces), and nothing below is a link:
//!   `openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH)`;
//! - a file is first opened `O_PATH` (which opens nothing: no FIFO can block it, no device is
//!   touched), checked with fstat (a regular file, or a socket for the attach socket; owned by the
//!   process's user; within a size cap), and only then opened for reading through that handle;
//!   whether a file read before is still the one there is one `fstatat` without following a link,
//!   of a plain name in the folder held, with the same checks;
//! - a file made there (the attach trigger, the agent's copy) is created `O_EXCL`, and removed
//!   only while it is still the one made;
//! - the attach socket's peer must be the process itself (`SO_PEERCRED`).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;

use crate::proc_files::ProcStatus;

/// How names below a process's folder are resolved: no link of any kind, nothing above it.
const RESOLVE: ResolveFlags = ResolveFlags::NO_SYMLINKS
    .union(ResolveFlags::NO_MAGICLINKS)
    .union(ResolveFlags::BENEATH);

/// Why something another user controls was not used.
#[derive(Debug, thiserror::Error)]
pub enum ForeignError {
    /// It could not be opened (it does not exist, the process ended...).
    #[error("cannot open {path}: {source}")]
    Io {
        /// What was opened.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    /// It is not what it should be: a link, a FIFO, another user's file, too big...
    #[error("{path} {why}, so it is not used")]
    Refused {
        /// What was refused.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

impl ForeignError {
    /// Whether it failed only because nothing is there (yet).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ForeignError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    fn io(path: &Path, errno: Errno) -> ForeignError {
        ForeignError::Io {
            path: path.to_path_buf(),
            source: errno.into(),
        }
    }

    fn refused(path: &Path, why: impl Into<String>) -> ForeignError {
        ForeignError::Refused {
            path: path.to_path_buf(),
            why: why.into(),
        }
    }

    /// The error of resolving `path` below a process's folder: a link on the way is refused.
    fn resolving(path: &Path, errno: Errno) -> ForeignError {
        match errno {
            Errno::LOOP => ForeignError::refused(path, "is a symbolic link or has one on its path"),
            Errno::XDEV => ForeignError::refused(path, "leads out of the process's folder"),
            Errno::NOTDIR => ForeignError::refused(path, "has a component that is not a folder"),
            errno => ForeignError::io(path, errno),
        }
    }
}

/// Why a file whose `stat` is this is refused, unless it is a `kind` owned by `owner` (if
/// given).
fn check_stat(stat: &rustix::fs::Stat, kind: FileType, owner: Option<u32>) -> Result<(), String> {
    let found = FileType::from_raw_mode(stat.st_mode);
    if found != kind {
        return Err(format!("is {}, not {}", describe(found), describe(kind)));
    }
    if let Some(owner) = owner.filter(|&owner| owner != stat.st_uid) {
        return Err(format!(
            "belongs to user {}, not to the process's user {owner}",
            stat.st_uid
        ));
    }
    Ok(())
}

/// The effective user id of process `pid` (the owner of the files it creates), from
/// `/proc/<pid>/status`.
pub fn process_uid(pid: u32) -> Option<u32> {
    ProcStatus::read(Path::new("/proc"), &pid.to_string())
        .ok()?
        .effective_uid()
}

/// A file of another user, opened for reading after the checks.
#[derive(Debug)]
pub struct ForeignFile {
    /// The file, read-only.
    pub file: File,
    /// Its device and inode: a file replaced under the same name has others.
    pub id: (u64, u64),
    /// Its size when opened.
    pub len: u64,
}

/// A folder that another user controls, held open: every name in it is resolved from it.
#[derive(Debug)]
pub struct ProcessDir {
    fd: OwnedFd,
    path: PathBuf,
    /// Who must own what is read in it: the process's user (`None`: anyone, for a folder that is
    /// not a process's).
    owner: Option<u32>,
}

impl ProcessDir {
    /// The folder `dir` (absolute, as process `pid` sees it) of process `pid`, entered through
    /// `/proc/<pid>/root` without following any link below it.
    pub fn in_root(pid: u32, dir: &str) -> Result<ProcessDir, ForeignError> {
        ProcessDir::open(&PathBuf::from(format!("/proc/{pid}/root{dir}")))
    }

    /// The working folder of process `pid` (`/proc/<pid>/cwd`).
    pub fn cwd(pid: u32) -> Result<ProcessDir, ForeignError> {
        ProcessDir::open(&PathBuf::from(format!("/proc/{pid}/cwd")))
    }

    /// The folder `path`. A path that starts with `/proc/<pid>/root` or `/proc/<pid>/cwd` enters
    /// through that link (the only one followed) and what it holds must belong to process
    /// `pid`'s user; any other path may hold no link at all, and its files may belong to anyone.
    pub fn open(path: &Path) -> Result<ProcessDir, ForeignError> {
        let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let (fd, owner) = match process_entry(path) {
            Some((pid, entry, rest)) => {
                let entry = rustix::fs::open(&entry, dir_flags, Mode::empty())
                    .map_err(|errno| ForeignError::io(&entry, errno))?;
                let owner = process_uid(pid).ok_or_else(|| ForeignError::io(path, Errno::SRCH))?;
                let fd = if rest.as_os_str().is_empty() {
                    entry
                } else {
                    rustix::fs::openat2(&entry, &rest, dir_flags, Mode::empty(), RESOLVE)
                        .map_err(|errno| ForeignError::resolving(path, errno))?
                };
                (fd, Some(owner))
            }
            None => {
                let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
                let fd = rustix::fs::openat2(CWD, path, dir_flags, Mode::empty(), resolve)
                    .map_err(|errno| ForeignError::resolving(path, errno))?;
                (fd, None)
            }
        };
        Ok(ProcessDir {
            fd,
            path: path.to_path_buf(),
            owner,
        })
    }

    /// Its path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The user who must own what is read here, if any.
    pub fn owner(&self) -> Option<u32> {
        self.owner
    }

    /// Opens `name` without following a link, and returns its fstat once it is checked to be a
    /// `kind` owned by `owner` (if given).
    fn checked(
        &self,
        name: &str,
        kind: FileType,
        owner: Option<u32>,
    ) -> Result<(OwnedFd, rustix::fs::Stat), ForeignError> {
        let path = self.path.join(name);
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat2(&self.fd, name, flags, Mode::empty(), RESOLVE)
            .map_err(|errno| ForeignError::resolving(&path, errno))?;
        let stat = rustix::fs::fstat(&fd).map_err(|errno| ForeignError::io(&path, errno))?;
        check_stat(&stat, kind, owner).map_err(|why| ForeignError::refused(&path, why))?;
        Ok((fd, stat))
    }

    /// Opens the regular file `name` for reading, after the checks: not a link, a regular
    /// file, owned by the folder's process's user, at most `max_len` bytes long.
    pub fn open_file(&self, name: &str, max_len: u64) -> Result<ForeignFile, ForeignError> {
        self.open_file_of(name, self.owner, max_len)
    }

    /// The device, inode and size of the regular file `name`, with the checks of
    /// [`ProcessDir::open_file`] but without opening it: whether a file opened before is still
    /// the one there, for a few system calls.
    ///
    /// One `fstatat` that does not follow a link, in the folder held: `name` must be a plain
    /// name in it (no `/`, not `..`), which nothing on the way can redirect.
    pub fn identify(&self, name: &str, max_len: u64) -> Result<((u64, u64), u64), ForeignError> {
        // The path is made only to tell what is wrong: this runs at every pass.
        let path = || self.path.join(name);
        if name.contains('/') || name == ".." {
            return Err(ForeignError::refused(
                &path(),
                "is not a name in its folder",
            ));
        }
        let stat = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|errno| ForeignError::resolving(&path(), errno))?;
        check_stat(&stat, FileType::RegularFile, self.owner)
            .map_err(|why| ForeignError::refused(&path(), why))?;
        let len = self.check_len(name, &stat, max_len)?;
        Ok(((stat.st_dev, stat.st_ino), len))
    }

    /// The size of `name` from its `stat`, refused above `max_len`.
    fn check_len(
        &self,
        name: &str,
        stat: &rustix::fs::Stat,
        max_len: u64,
    ) -> Result<u64, ForeignError> {
        let len = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
        if len > max_len {
            return Err(ForeignError::refused(
                &self.path.join(name),
                format!("holds {len} bytes, more than the {max_len} read from such a file"),
            ));
        }
        Ok(len)
    }

    /// [`ProcessDir::open_file`], for a file that `owner` must own (a file the profiler made).
    pub fn open_file_of(
        &self,
        name: &str,
        owner: Option<u32>,
        max_len: u64,
    ) -> Result<ForeignFile, ForeignError> {
        let path = self.path.join(name);
        let (fd, stat) = self.checked(name, FileType::RegularFile, owner)?;
        let len = self.check_len(name, &stat, max_len)?;
        let file = reopen(&fd, OFlags::RDONLY).map_err(|errno| ForeignError::io(&path, errno))?;
        Ok(ForeignFile {
            file,
            id: (stat.st_dev, stat.st_ino),
            len,
        })
    }

    /// Connects to the Unix socket `name`, which must be owned by the folder's process's user
    /// and listened on by process `pid` itself (`SO_PEERCRED`): a link to another process's
    /// socket, or a socket someone else listens on, is refused.
    pub fn connect(&self, name: &str, pid: u32) -> Result<UnixStream, ForeignError> {
        let path = self.path.join(name);
        let (fd, _) = self.checked(name, FileType::Socket, self.owner)?;
        let stream = connect_nonblocking(&fd_path(&fd)).map_err(|source| ForeignError::Io {
            path: path.clone(),
            source,
        })?;
        let peer = rustix::net::sockopt::socket_peercred(&stream)
            .map_err(|errno| ForeignError::io(&path, errno))?;
        let peer_pid = peer.pid.as_raw_pid();
        let peer_uid = peer.uid.as_raw();
        if u32::try_from(peer_pid).ok() != Some(pid) || self.owner.is_some_and(|o| o != peer_uid) {
            return Err(ForeignError::refused(
                &path,
                format!(
                    "is listened on by process {peer_pid} of user {peer_uid}, not by process \
                     {pid} itself"
                ),
            ));
        }
        Ok(stream)
    }

    /// Creates the new, empty file `name` (`O_EXCL`: never one that is there already).
    pub fn create_new(&self, name: &str, mode: u32) -> Result<Made, ForeignError> {
        let path = self.path.join(name);
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::NOCTTY
            | OFlags::CLOEXEC;
        let fd = rustix::fs::openat2(&self.fd, name, flags, Mode::from_raw_mode(mode), RESOLVE)
            .map_err(|errno| ForeignError::resolving(&path, errno))?;
        let stat = rustix::fs::fstat(&fd).map_err(|errno| ForeignError::io(&path, errno))?;
        Ok(Made {
            file: File::from(fd),
            name: name.to_string(),
            id: (stat.st_dev, stat.st_ino),
        })
    }

    /// Whether `name` is a regular file (whoever owns it), not following a link.
    pub fn holds_file(&self, name: &str) -> bool {
        self.checked(name, FileType::RegularFile, None).is_ok()
    }

    /// Removes `made`, if the name still holds the very file that was made.
    pub fn remove_made(&self, made: Made) {
        if self.id_of(&made.name) == Some(made.id) {
            let _ = rustix::fs::unlinkat(&self.fd, made.name.as_str(), AtFlags::empty());
        }
    }

    /// Removes the regular file `name` if it belongs to the folder's process's user (a link, or
    /// someone else's file, stays).
    pub fn remove_file(&self, name: &str) {
        if let Ok((_, stat)) = self.checked(name, FileType::RegularFile, self.owner) {
            if self.id_of(name) == Some((stat.st_dev, stat.st_ino)) {
                let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::empty());
            }
        }
    }

    /// Renames `from` to `to`, both in this folder (`to` is replaced).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        rustix::fs::renameat(&self.fd, from, &self.fd, to).map_err(io::Error::from)
    }

    /// The device and inode of what `name` is now, not following a link.
    fn id_of(&self, name: &str) -> Option<(u64, u64)> {
        let stat = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        Some((stat.st_dev, stat.st_ino))
    }
}

/// A file the profiler made in another user's folder ([`ProcessDir::create_new`]).
#[derive(Debug)]
pub struct Made {
    /// The file, open for writing.
    pub file: File,
    name: String,
    id: (u64, u64),
}

/// Opens the regular file `path` for reading, with the checks of [`ProcessDir::open_file`]
/// (the owner is checked for a path below `/proc/<pid>/root` or `/proc/<pid>/cwd`).
pub fn open_file(path: &Path, max_len: u64) -> Result<ForeignFile, ForeignError> {
    let (dir, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(dir), Some(name)) => (dir, name),
        _ => return Err(ForeignError::refused(path, "is not a file name")),
    };
    ProcessDir::open(dir)?.open_file(name, max_len)
}

/// A file that a process's mapping shows, opened (`O_PATH`) and checked, not read yet: what
/// [`open_mapped_file`] returns.
#[derive(Debug)]
pub struct MappedFile {
    path: PathBuf,
    fd: OwnedFd,
    stat: rustix::fs::Stat,
    max_len: u64,
}

/// What tells one file's content from another's without reading it: device, inode, size, and
/// the change time (which nobody can set, and every write or rename updates).
pub type FileIdentity = (u64, u64, i64, i64, u64);

impl MappedFile {
    /// The file's identity: two equal identities are the same content.
    pub fn identity(&self) -> FileIdentity {
        let stat = &self.stat;
        (
            stat.st_dev,
            stat.st_ino,
            stat.st_size,
            stat.st_ctime,
            stat.st_ctime_nsec,
        )
    }

    /// Reads the file whole (at most the size it was checked for).
    pub fn read(&self) -> Result<Vec<u8>, ForeignError> {
        use std::io::Read;
        let mut bytes = Vec::new();
        reopen(&self.fd, OFlags::RDONLY)
            .map_err(|errno| ForeignError::io(&self.path, errno))?
            .take(self.max_len)
            .read_to_end(&mut bytes)
            .map_err(|source| ForeignError::Io {
                path: self.path.clone(),
                source,
            })?;
        Ok(bytes)
    }
}

/// Opens a file that process `pid`'s mapping shows (its libjvm.so), whoever owns it: through
/// `path`, either `/proc/<pid>/map_files/<range>` (the kernel's link to the very file mapped) or a
/// path below `/proc/<pid>/root` (no link followed below it). It must be a regular file of at most
/// `max_len` bytes: a mapping of a device, or a huge file, named like a library is not read.
pub fn open_mapped_file(path: &Path, max_len: u64) -> Result<MappedFile, ForeignError> {
    let mapped = path
        .parent()
        .and_then(|dir| dir.file_name())
        .is_some_and(|dir| dir == "map_files");
    let (fd, stat) = if mapped {
        let flags = OFlags::PATH | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty())
            .map_err(|errno| ForeignError::io(path, errno))?;
        let stat = rustix::fs::fstat(&fd).map_err(|errno| ForeignError::io(path, errno))?;
        (fd, stat)
    } else {
        let (dir, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
            (Some(dir), Some(name)) => (dir, name),
            _ => return Err(ForeignError::refused(path, "is not a file name")),
        };
        ProcessDir::open(dir)?.checked(name, FileType::RegularFile, None)?
    };
    let found = FileType::from_raw_mode(stat.st_mode);
    if found != FileType::RegularFile {
        return Err(ForeignError::refused(
            path,
            format!("is {}, not a regular file", describe(found)),
        ));
    }
    let len = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if len > max_len {
        return Err(ForeignError::refused(
            path,
            format!("holds {len} bytes, more than the {max_len} read from such a file"),
        ));
    }
    Ok(MappedFile {
        path: path.to_path_buf(),
        fd,
        stat,
        max_len,
    })
}

/// Reads a file that process `pid`'s mapping shows, with the checks of [`open_mapped_file`].
pub fn read_mapped_file(path: &Path, max_len: u64) -> Result<Vec<u8>, ForeignError> {
    open_mapped_file(path, max_len)?.read()
}

/// `/proc/<pid>/root` or `/proc/<pid>/cwd` at the start of `path`: the pid, that entry, and the
/// rest of the path.
fn process_entry(path: &Path) -> Option<(u32, PathBuf, PathBuf)> {
    let mut components = path.components();
    if components.next() != Some(Component::RootDir)
        || components.next() != Some(Component::Normal("proc".as_ref()))
    {
        return None;
    }
    let Some(Component::Normal(pid)) = components.next() else {
        return None;
    };
    let pid: u32 = pid.to_str()?.parse().ok()?;
    let Some(Component::Normal(link)) = components.next() else {
        return None;
    };
    if link != "root" && link != "cwd" {
        return None;
    }
    let entry = PathBuf::from(format!("/proc/{pid}")).join(link);
    Some((pid, entry, components.as_path().to_path_buf()))
}

/// The path through which an `O_PATH` handle is opened for real: the file it holds, whatever
/// its name leads to now.
fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
}

/// Opens the file an `O_PATH` handle holds, non-blocking.
pub(crate) fn reopen(fd: &OwnedFd, flags: OFlags) -> Result<File, Errno> {
    let flags = flags | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    rustix::fs::open(fd_path(fd), flags, Mode::empty()).map(File::from)
}

/// Connects to the Unix socket at `path` without waiting: a listener whose queue is full (one
/// that never accepts) gives `WouldBlock` instead of blocking the caller for good. The stream
/// returned blocks again, with a write timeout.
fn connect_nonblocking(path: &Path) -> io::Result<UnixStream> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::connect(&fd, &SocketAddrUnix::new(path)?)?;
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(std::time::Duration::from_secs(5)))?;
    Ok(stream)
}

/// What a file type is called in messages.
fn describe(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a folder",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "of an unknown type",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn fifo(path: &Path) {
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) }, 0);
    }

    #[test]
    fn a_regular_file_is_read_and_a_fifo_a_link_or_a_big_file_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("map"), "content").unwrap();
        let mut opened = open_file(&dir.path().join("map"), 100).unwrap();
        let mut text = String::new();
        opened.file.read_to_string(&mut text).unwrap();
        assert_eq!((text.as_str(), opened.len), ("content", 7));

        fifo(&dir.path().join("fifo"));
        let error = open_file(&dir.path().join("fifo"), 100).unwrap_err();
        assert!(
            error.to_string().contains("is a FIFO, not a regular file"),
            "{error}"
        );
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link")).unwrap();
        let error = open_file(&dir.path().join("link"), 1 << 20).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        std::os::unix::fs::symlink(dir.path(), dir.path().join("up")).unwrap();
        let error = open_file(&dir.path().join("up/map"), 100).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        let error = open_file(&dir.path().join("map"), 3).unwrap_err();
        assert!(error.to_string().contains("holds 7 bytes"), "{error}");
        assert!(open_file(&dir.path().join("none"), 3)
            .unwrap_err()
            .is_not_found());
    }

    #[test]
    fn a_file_is_identified_without_following_a_link_or_leaving_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("map"), "content").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/map"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("map"), dir.path().join("link")).unwrap();
        fifo(&dir.path().join("fifo"));
        let folder = ProcessDir::open(dir.path()).unwrap();
        let (id, len) = folder.identify("map", 100).unwrap();
        assert_eq!(id, folder.open_file("map", 100).unwrap().id);
        assert_eq!(len, 7);
        let refused = |name: &str, max_len| folder.identify(name, max_len).unwrap_err().to_string();
        assert!(refused("link", 100).contains("symbolic link"));
        assert!(refused("fifo", 100).contains("is a FIFO, not a regular file"));
        assert!(refused("sub", 100).contains("not a regular file"));
        assert!(refused("sub/map", 100).contains("not a name in its folder"));
        assert!(refused("..", 100).contains("not a name in its folder"));
        assert!(refused("map", 3).contains("holds 7 bytes"));
        assert!(folder.identify("none", 100).unwrap_err().is_not_found());
    }

    #[test]
    #[cfg_attr(
        not(feature = "e2e"),
        ignore = "needs root (a file of another user): scripts/test.sh runs it, or cargo test --features e2e as root"
    )]
    fn a_process_folder_is_entered_through_proc_and_its_user_owns_what_is_read() {
        let me = std::process::id();
        let dir = tempfile::tempdir().unwrap();
        let inside = format!("/proc/{me}/root{}", dir.path().display());
        std::fs::write(dir.path().join("mine"), "x").unwrap();
        let folder = ProcessDir::open(Path::new(&inside)).unwrap();
        // SAFETY: geteuid only reads this process's user id.
        assert_eq!(folder.owner(), Some(unsafe { libc::geteuid() }));
        folder.open_file("mine", 10).unwrap();
        std::os::unix::fs::chown(dir.path().join("mine"), Some(12345), None).unwrap();
        let error = folder.open_file("mine", 10).unwrap_err();
        assert!(
            error.to_string().contains("belongs to user 12345"),
            "{error}"
        );
        assert_eq!(
            process_entry(Path::new("/proc/42/cwd/a/b")),
            Some((42, PathBuf::from("/proc/42/cwd"), PathBuf::from("a/b")))
        );
        assert_eq!(process_entry(Path::new("/proc/self/root/tmp")), None);
        assert_eq!(process_entry(Path::new("/tmp/proc/42/root")), None);
    }

    #[test]
    #[cfg_attr(
        not(feature = "e2e"),
        ignore = "needs root (/proc/PID/map_files): scripts/test.sh runs it, or cargo test --features e2e as root"
    )]
    fn a_mapped_file_is_read_whoever_owns_it_but_not_a_device() {
        let me = std::process::id();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let line = maps
            .lines()
            .find(|line| line.ends_with(exe.to_str().unwrap()))
            .unwrap();
        let range = line.split(' ').next().unwrap();
        let mapped = PathBuf::from(format!("/proc/{me}/map_files/{range}"));
        let bytes = read_mapped_file(&mapped, u64::MAX).unwrap();
        assert_eq!(bytes, std::fs::read(&exe).unwrap());
        let error = read_mapped_file(&mapped, 10).unwrap_err();
        assert!(error.to_string().contains("more than the 10"), "{error}");
        let zero = std::fs::File::open("/dev/zero").unwrap();
        // SAFETY: a private read-only mapping of /dev/zero, unmapped below.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                zero.as_raw_fd(),
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        let device = PathBuf::from(format!(
            "/proc/{me}/map_files/{:x}-{:x}",
            at as usize,
            at as usize + 4096
        ));
        let error = read_mapped_file(&device, u64::MAX).unwrap_err();
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(at, 4096) };
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }

    #[test]
    fn a_file_made_is_removed_only_while_it_is_still_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let folder = ProcessDir::open(dir.path()).unwrap();
        let made = folder.create_new("trigger", 0o644).unwrap();
        assert!(folder.create_new("trigger", 0o644).is_err(), "O_EXCL");
        folder.remove_made(made);
        assert!(!dir.path().join("trigger").exists());

        let made = folder.create_new("trigger", 0o644).unwrap();
        std::fs::remove_file(dir.path().join("trigger")).unwrap();
        std::fs::write(dir.path().join("trigger"), "someone else's").unwrap();
        folder.remove_made(made);
        assert!(dir.path().join("trigger").exists(), "another file stays");
        assert!(folder.holds_file("trigger"));
        fifo(&dir.path().join("fifo"));
        assert!(!folder.holds_file("fifo"));
        folder.remove_file("fifo");
        assert!(
            dir.path().join("fifo").exists(),
            "only regular files are removed"
        );
    }
}
