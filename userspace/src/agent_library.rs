//! The symbolizer agent inside the binary, and the file the JVMs load it from.
//!
//! `build.rs` builds `jvm-symbolizer-agent` (with a Cargo of its own: stable Cargo has no
//! dependency on another crate's cdylib) and this module includes its bytes, [`EMBEDDED`], so
//! that `cargo build --release -p joularcode-bpf` gives one file that needs nothing beside it.
//!
//! Unless `--agent-path` names another library, the agent is written at run time to
//! [`RUNTIME_DIR`] as [`file_name`] (`libjvm_symbolizer_agent-` and the first 128 bits of its
//! SHA-256, so a name holds one content, and every run of one build loads the same file), where the
//! JVMs of every user can read it and nobody but root can change it (docs/security.md, rule 17):
//!
//! - every folder from `/` to it is a folder (not a link), owned by root or by the profiler's
//!   user, and writable by its owner only: nobody else can make, rename or replace anything on
//!   that path, so what is checked stays true after the check (unlike in /tmp, where anyone can
//!   make the name first);
//! - the file there is used only if it is a regular file of the profiler's user, writable by
//!   nobody else, that holds the very bytes; otherwise a new file is created under a temporary
//!   name (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0644 whatever the umask), written, read back and
//!   compared, then renamed over the name, which is checked again.
//!
//! A JVM in another mount namespace (a container) cannot open that path: it gets a copy in its
//! own /tmp, under the same [`file_name`] (`crate::attach`).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// The agent library built with this binary.
pub const EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libjvm_symbolizer_agent.so"));

/// The folder the embedded agent is written to: root's, on a file system that starts empty at
/// each boot (the systemd unit's `RuntimeDirectory`).
pub const RUNTIME_DIR: &str = "/run/joularcode-bpf";

/// The mode of the folder: entered by every user, written by its owner only.
const FOLDER_MODE: u32 = 0o755;

/// The mode of the agent: read by every user, written by its owner only.
const FILE_MODE: u32 = 0o644;

/// Why the agent could not be written where the JVMs load it. Each says in one line what is
/// wrong and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum AgentLibraryError {
    /// A folder on the way could be changed by another user, or is not a plain folder.
    #[error(
        "{} {why}, so the symbolizer agent is not written there: make it a folder of root that \
         only root can write (chown root {0}; chmod 755 {0}), or give the agent with --agent-path FILE",
        .path.display()
    )]
    Unsafe {
        /// The folder.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Writing failed.
    #[error(
        "cannot write the symbolizer agent to {}: {source} (run as root, or give the agent with \
         --agent-path FILE)",
        .path.display()
    )]
    Io {
        /// What was being written.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
}

/// The file name of the agent whose library is `bytes`: `libjvm_symbolizer_agent-<32 hex
/// digits>.so`, the first 128 bits of its SHA-256.
pub fn file_name(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let hex: String = digest.as_ref()[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("libjvm_symbolizer_agent-{hex}.so")
}

/// Writes the [`EMBEDDED`] agent into its folder ([`folder_for`]), or finds it there, written by
/// an earlier run; returns its path.
pub fn write_embedded() -> Result<PathBuf, AgentLibraryError> {
    // SAFETY: geteuid only reads this process's user id.
    let me = unsafe { libc::geteuid() };
    let folder = folder_for(
        me,
        std::env::var_os("XDG_RUNTIME_DIR"),
        std::env::var_os("HOME"),
    );
    write(&folder, EMBEDDED)
}

/// The folder of the embedded agent for the user `euid`: [`RUNTIME_DIR`] for root, whose JVMs
/// may be anyone's. Another user profiles only their own JVMs (`record --mode agent`, where the
/// BPF sampler cannot load), which load it from a folder of theirs: `joularcode-bpf` in their
/// runtime folder (`XDG_RUNTIME_DIR`, an absolute path), else in `~/.cache`. Either is checked as
/// [`RUNTIME_DIR`] is: a path that another user could change is refused.
pub fn folder_for(euid: u32, runtime: Option<OsString>, home: Option<OsString>) -> PathBuf {
    let absolute = |dir: Option<OsString>| dir.map(PathBuf::from).filter(|dir| dir.is_absolute());
    if euid == 0 {
        return PathBuf::from(RUNTIME_DIR);
    }
    absolute(runtime)
        .or_else(|| absolute(home).map(|home| home.join(".cache")))
        .map_or_else(
            || PathBuf::from(RUNTIME_DIR),
            |dir| dir.join("joularcode-bpf"),
        )
}

/// Writes the library `bytes` into `dir`, an absolute path, made if missing, that only root (or
/// this process's user) can change; returns the file's path.
fn write(dir: &Path, bytes: &[u8]) -> Result<PathBuf, AgentLibraryError> {
    let io = |source: io::Error| AgentLibraryError::Io {
        path: dir.to_path_buf(),
        source,
    };
    // SAFETY: geteuid only reads this process's user id.
    let me = unsafe { libc::geteuid() };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(FOLDER_MODE)
        .create(dir)
        .map_err(io)?;
    check_owned_path(dir, me)?;
    let folder = open_folder(dir).map_err(io)?;
    // Made under a umask that hides it from the JVMs' users, or left so by an earlier run
    rustix::fs::fchmod(&folder, Mode::from_raw_mode(FOLDER_MODE)).map_err(|e| io(e.into()))?;
    write_in(&folder, dir, bytes, me)
}

/// Checks that `dir` and every folder above it is a folder, not a link, owned by root or `me`,
/// and writable by its owner only.
fn check_owned_path(dir: &Path, me: u32) -> Result<(), AgentLibraryError> {
    if !dir.is_absolute() {
        return Err(AgentLibraryError::Unsafe {
            path: dir.to_path_buf(),
            why: "is not an absolute path".into(),
        });
    }
    for folder in dir.ancestors() {
        let unsafe_because = |why: &str| AgentLibraryError::Unsafe {
            path: folder.to_path_buf(),
            why: why.into(),
        };
        let meta = std::fs::symlink_metadata(folder).map_err(|source| AgentLibraryError::Io {
            path: folder.to_path_buf(),
            source,
        })?;
        if meta.file_type().is_symlink() {
            return Err(unsafe_because("is a symbolic link"));
        }
        if !meta.is_dir() {
            return Err(unsafe_because("is not a folder"));
        }
        if meta.uid() != 0 && meta.uid() != me {
            return Err(unsafe_because(&format!("belongs to user {}", meta.uid())));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(unsafe_because("can be written by other users"));
        }
    }
    Ok(())
}

/// Writes `bytes` as [`file_name`] in the folder `folder` (at `dir`), unless it holds them
/// already; returns the file's path.
fn write_in(
    folder: &OwnedFd,
    dir: &Path,
    bytes: &[u8],
    me: u32,
) -> Result<PathBuf, AgentLibraryError> {
    let name = file_name(bytes);
    let path = dir.join(&name);
    if holds(folder, &name, bytes, me) {
        return Ok(path);
    }
    let temp = format!(".{name}.{}", std::process::id());
    let io = |source: io::Error| AgentLibraryError::Io {
        path: dir.join(&temp),
        source,
    };
    // A temporary file of an earlier run of this pid, killed while it wrote
    let _ = rustix::fs::unlinkat(folder, &temp, AtFlags::empty());
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::RDWR | OFlags::CLOEXEC;
    let made = rustix::fs::openat(folder, &temp, flags, Mode::from_raw_mode(FILE_MODE))
        .map_err(|e| io(e.into()))?;
    let written = fill(made, bytes)
        .and_then(|()| rustix::fs::renameat(folder, &temp, folder, &name).map_err(io::Error::from));
    if let Err(source) = written {
        let _ = rustix::fs::unlinkat(folder, &temp, AtFlags::empty());
        return Err(io(source));
    }
    if !holds(folder, &name, bytes, me) {
        return Err(AgentLibraryError::Io {
            path,
            source: io::Error::other("the file written does not read back as the agent"),
        });
    }
    Ok(path)
}

/// Writes `bytes` into the new file `made`, readable by every user, and reads them back.
fn fill(made: OwnedFd, bytes: &[u8]) -> io::Result<()> {
    rustix::fs::fchmod(&made, Mode::from_raw_mode(FILE_MODE))?;
    let mut file = File::from(made);
    file.write_all(bytes)?;
    file.sync_all()?;
    file.rewind()?;
    if read_up_to(&mut file, bytes.len())? != bytes {
        return Err(io::Error::other(
            "the file written does not read back as the agent",
        ));
    }
    Ok(())
}

/// Whether `name` in `folder` is a regular file of `me`, that only `me` can write, holding
/// exactly `bytes` (a link is not followed).
fn holds(folder: &OwnedFd, name: &str, bytes: &[u8], me: u32) -> bool {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::openat(folder, name, flags, Mode::empty()) else {
        return false;
    };
    let Ok(stat) = rustix::fs::fstat(&fd) else {
        return false;
    };
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
        || stat.st_uid != me
        || stat.st_mode & 0o022 != 0
        || u64::try_from(stat.st_size) != Ok(bytes.len() as u64)
    {
        return false;
    }
    read_up_to(&mut File::from(fd), bytes.len()).is_ok_and(|read| read == bytes)
}

/// The content of `file`, `len` bytes and one more at most (so a longer file is seen to be).
fn read_up_to(file: &mut File, len: usize) -> io::Result<Vec<u8>> {
    let mut read = Vec::with_capacity(len);
    file.take(len as u64 + 1).read_to_end(&mut read)?;
    Ok(read)
}

/// The folder `dir`, opened (not through a link) to make files in it.
fn open_folder(dir: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::open(dir, flags, Mode::empty())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn me() -> u32 {
        // SAFETY: geteuid only reads this process's user id.
        unsafe { libc::geteuid() }
    }

    #[test]
    fn root_writes_to_run_and_another_user_to_a_folder_of_their_own() {
        let some = |path: &str| Some(OsString::from(path));
        assert_eq!(
            folder_for(0, some("/run/user/0"), some("/root")),
            Path::new(RUNTIME_DIR)
        );
        assert_eq!(
            folder_for(1000, some("/run/user/1000"), some("/home/ada")),
            Path::new("/run/user/1000/joularcode-bpf")
        );
        assert_eq!(
            folder_for(1000, None, some("/home/ada")),
            Path::new("/home/ada/.cache/joularcode-bpf")
        );
        assert_eq!(
            folder_for(1000, some("relative"), some("also/relative")),
            Path::new(RUNTIME_DIR)
        );
    }

    #[test]
    fn the_name_is_the_hash_of_the_bytes() {
        // SHA-256 of "abc" starts ba7816bf8f01cfea414140de5dae2223
        assert_eq!(
            file_name(b"abc"),
            "libjvm_symbolizer_agent-ba7816bf8f01cfea414140de5dae2223.so"
        );
        assert_ne!(file_name(b"abc"), file_name(b"abd"));
        assert!(file_name(EMBEDDED).starts_with("libjvm_symbolizer_agent-"));
        // the embedded agent is an ELF shared library
        assert_eq!(&EMBEDDED[..4], b"\x7fELF");
    }

    #[test]
    fn the_agent_is_written_readable_by_all_and_found_again() {
        let dir = tempfile::tempdir().expect("a folder");
        let folder = open_folder(dir.path()).expect("open the folder");
        let path = write_in(&folder, dir.path(), b"agent", me()).expect("written");
        assert_eq!(path, dir.path().join(file_name(b"agent")));
        assert_eq!(std::fs::read(&path).expect("read"), b"agent");
        let meta = std::fs::metadata(&path).expect("metadata");
        assert_eq!(meta.permissions().mode() & 0o7777, 0o644);
        let inode = meta.ino();
        // found again: the same file, no temporary left
        let again = write_in(&folder, dir.path(), b"agent", me()).expect("found");
        assert_eq!(std::fs::metadata(&again).expect("metadata").ino(), inode);
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
    }

    #[test]
    fn what_is_not_the_agent_under_its_name_is_replaced_not_used() {
        let dir = tempfile::tempdir().expect("a folder");
        let folder = open_folder(dir.path()).expect("open the folder");
        let name = dir.path().join(file_name(b"agent"));
        let elsewhere = dir.path().join("elsewhere");
        // other bytes, a longer file, a file others can write, a link to the agent's bytes
        for plant in 0..4 {
            let _ = std::fs::remove_file(&name);
            match plant {
                0 => std::fs::write(&name, b"other").expect("plant"),
                1 => std::fs::write(&name, b"agent and more").expect("plant"),
                2 => {
                    std::fs::write(&name, b"agent").expect("plant");
                    let writable = std::fs::Permissions::from_mode(0o666);
                    std::fs::set_permissions(&name, writable).expect("chmod");
                }
                _ => {
                    std::fs::write(&elsewhere, b"agent").expect("plant");
                    std::os::unix::fs::symlink(&elsewhere, &name).expect("link");
                }
            }
            let path = write_in(&folder, dir.path(), b"agent", me()).expect("written");
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            assert!(meta.is_file(), "plant {plant}");
            assert_eq!(meta.permissions().mode() & 0o7777, 0o644, "plant {plant}");
            assert_eq!(
                std::fs::read(&path).expect("read"),
                b"agent",
                "plant {plant}"
            );
        }
        assert_eq!(std::fs::read(&elsewhere).expect("read"), b"agent");
    }

    #[test]
    fn a_path_others_can_change_is_refused() {
        assert!(check_owned_path(Path::new("/usr/lib"), me()).is_ok());
        // /tmp: anyone makes names there
        let dir = tempfile::tempdir().expect("a folder");
        let err = check_owned_path(dir.path(), me()).unwrap_err();
        assert!(
            err.to_string()
                .contains("/tmp can be written by other users"),
            "{err}"
        );
        let err = check_owned_path(Path::new("run/joularcode-bpf"), me()).unwrap_err();
        assert!(err.to_string().contains("not an absolute path"), "{err}");
        let err = write(&dir.path().join("agents"), b"agent").unwrap_err();
        assert!(err.to_string().contains("--agent-path FILE"), "{err}");
    }
}
