//! The agent's two files and the buffer in front of them.
//!
//! JVMTI callbacks only append lines to [`Pending`] under a mutex; a background thread writes
//! them out every [`FLUSH_EVERY`], so the profiler sees new code within that time and the JVM's
//! compiler threads never wait on a disk. The files are written while a profiler holds the code
//! map's lease ([`crate::lease`]): [`Sink::stop`] closes them and removes the map, and
//! [`Sink::start`] opens them again, empty.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use joularcode_core::code_map as records;
use joularcode_core::power::clock::monotonic_ns;

use crate::jvmti::JmethodId;
use crate::lease::{Lease, Stamp, Verdict};
use crate::lock;
use crate::options::Options;

/// How often the background thread writes what the callbacks appended.
pub const FLUSH_EVERY: Duration = Duration::from_millis(20);

/// What the callbacks append to, and what they remember between events.
#[derive(Default)]
pub struct Pending {
    /// Code map bytes not yet written.
    pub map: Vec<u8>,
    /// Perf map bytes not yet written (left empty without a perf map).
    pub perf: Vec<u8>,
    /// Whether a perf map is written.
    pub perf_map: bool,
    /// Method numbers of the `M` lines written so far, by jmethodID.
    pub methods: HashMap<usize, u32>,
    /// Method names by number, for the perf map.
    pub names: Vec<Box<str>>,
    /// Generated code already written (start, size): GenerateEvents repeats it.
    pub stubs: HashSet<(u64, u32)>,
}

impl Pending {
    /// Gives method `method` named `name` the next number, and writes its `M` line.
    pub fn number(&mut self, method: JmethodId, name: &str) {
        if self.methods.contains_key(&(method as usize)) {
            return;
        }
        let id = self.names.len() as u32;
        self.methods.insert(method as usize, id);
        records::method(&mut self.map, id, name);
        self.names.push(name.into());
    }

    /// Forgets every method number, and writes the `F` line that says so.
    pub fn forget(&mut self, time_ns: u64) {
        records::forget(&mut self.map, time_ns);
        self.methods.clear();
        self.names.clear();
    }
}

struct Files {
    map: File,
    perf: Option<File>,
    failed: bool,
    lease: Lease,
}

/// The code map and perf map of this JVM.
pub struct Sink {
    pending: Mutex<Pending>,
    /// The files written; none while the agent is stopped (no profiler reads its map).
    files: Mutex<Option<Files>>,
    /// Path of the code map.
    pub map_path: PathBuf,
    /// Path of the perf map, if one is written.
    perf_path: Option<PathBuf>,
    /// The JVM's pid, for the header.
    pid: u32,
}

/// How many times the code map is opened again when it was removed between its opening and its
/// locking (by a profiler sweeping the maps of JVMs that have ended).
const OPEN_TRIES: usize = 3;

/// The device and inode of a file's metadata: what tells one file from another at one path.
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// A file's access time, which the profilers reading the code map set ([`crate::lease`]).
fn access_time(meta: &std::fs::Metadata) -> Stamp {
    (meta.atime(), meta.atime_nsec())
}

/// Why a map file could not be opened, written or removed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Opening or writing it failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS's error.
        source: std::io::Error,
    },
    /// Reading its metadata failed.
    #[error("cannot stat {}: {source}", path.display())]
    Stat {
        /// The file.
        path: PathBuf,
        /// The OS's error.
        source: std::io::Error,
    },
    /// Emptying it failed.
    #[error("cannot truncate {}: {source}", path.display())]
    Truncate {
        /// The file.
        path: PathBuf,
        /// The OS's error.
        source: std::io::Error,
    },
    /// Removing it failed.
    #[error("cannot remove {}: {source}", path.display())]
    Remove {
        /// The file.
        path: PathBuf,
        /// The OS's error.
        source: std::io::Error,
    },
    /// Something else than a regular file is at its path.
    #[error("{} is not a regular file: remove it or choose another dir= option", .0.display())]
    NotRegular(PathBuf),
    /// It was removed between its opening and its locking, [`OPEN_TRIES`] times.
    #[error("{} keeps being removed while it is opened", .0.display())]
    KeepsBeingRemoved(PathBuf),
}

/// Opens and locks the code map at `path`. `Ok(None)` when another agent holds the lock.
///
/// A profiler removes the maps whose lock nobody holds (those of JVMs that ended without their
/// agent removing them, see `joularcode-bpf`'s `jit::stale`): if that happened between the
/// opening and the locking, the file locked is no longer at `path`, and it is opened again.
fn open_locked(path: &Path) -> Result<Option<File>, OutputError> {
    for _ in 0..OPEN_TRIES {
        let map = open_regular(path)?;
        // SAFETY: flock on an open descriptor; released when the process ends.
        if unsafe { libc::flock(map.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Ok(None);
        }
        let locked = map.metadata().map_err(|source| OutputError::Stat {
            path: path.to_owned(),
            source,
        })?;
        let at_path = std::fs::symlink_metadata(path).ok();
        if at_path.is_some_and(|meta| identity(&meta) == identity(&locked)) {
            return Ok(Some(map));
        }
    }
    Err(OutputError::KeepsBeingRemoved(path.to_owned()))
}

/// Opens `path` for writing without following a symbolic link, and checks it is a regular file.
fn open_regular(path: &Path) -> Result<File, OutputError> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| OutputError::Write {
            path: path.to_owned(),
            source,
        })?;
    let meta = file.metadata().map_err(|source| OutputError::Stat {
        path: path.to_owned(),
        source,
    })?;
    if !meta.is_file() {
        return Err(OutputError::NotRegular(path.to_owned()));
    }
    Ok(file)
}

impl Sink {
    /// Opens `joularcode-<pid>.map` (and `perf-<pid>.map`) in the options' folder, and locks the
    /// code map. Returns `Ok(None)` when another copy of the agent in this JVM holds the lock: a
    /// second attach must not write everything twice.
    pub fn open(options: &Options, pid: u32) -> Result<Option<Sink>, OutputError> {
        let sink = Sink {
            pending: Mutex::new(Pending::default()),
            files: Mutex::new(None),
            map_path: options.dir.join(format!("joularcode-{pid}.map")),
            perf_path: options
                .perf_map
                .then(|| options.dir.join(format!("perf-{pid}.map"))),
            pid,
        };
        Ok(sink.start()?.then_some(sink))
    }

    /// Starts writing, unless it writes already: opens and locks the code map, empties both
    /// files, writes the header with every method number forgotten, and grants the map a new
    /// lease. False when another copy of the agent holds the lock.
    pub fn start(&self) -> Result<bool, OutputError> {
        let mut files = lock(&self.files);
        if files.is_some() {
            return Ok(true);
        }
        let Some(map) = open_locked(&self.map_path)? else {
            return Ok(false);
        };
        let perf = match &self.perf_path {
            Some(path) => {
                let perf = open_regular(path)?;
                perf.set_len(0).map_err(|source| OutputError::Truncate {
                    path: path.clone(),
                    source,
                })?;
                Some(perf)
            }
            None => None,
        };
        map.set_len(0).map_err(|source| OutputError::Truncate {
            path: self.map_path.clone(),
            source,
        })?;
        let meta = map.metadata().map_err(|source| OutputError::Stat {
            path: self.map_path.clone(),
            source,
        })?;
        let mut pending = Pending {
            perf_map: perf.is_some(),
            ..Pending::default()
        };
        records::header(&mut pending.map, self.pid);
        *lock(&self.pending) = pending;
        *files = Some(Files {
            map,
            perf,
            failed: false,
            lease: Lease::granted(access_time(&meta), monotonic_ns()),
        });
        Ok(true)
    }

    /// Whether the code map is written (a profiler holds its lease).
    pub fn running(&self) -> bool {
        lock(&self.files).is_some()
    }

    /// Looks at the lease of the code map at `now_ns` (CLOCK_MONOTONIC); `None` while stopped.
    pub fn check_lease(&self, now_ns: u64) -> Option<Verdict> {
        let mut files = lock(&self.files);
        let files = files.as_mut()?;
        Some(match files.map.metadata() {
            Ok(meta) => files.lease.check(access_time(&meta), meta.len(), now_ns),
            Err(_) => Verdict::Expired,
        })
    }

    /// Runs `f` on the pending lines and state, under the lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut Pending) -> R) -> R {
        f(&mut lock(&self.pending))
    }

    /// Stops writing: removes the code map (only if the file at its path is still the one
    /// written), closes both files and drops the lines not written yet. A profiler still reading
    /// the map keeps it open, and reads it to its end. The perf map stays, as perf maps do:
    /// `perf report` reads it after the process has ended. Returns the removal's error.
    pub fn stop(&self) -> Option<OutputError> {
        let files = lock(&self.files).take()?;
        *lock(&self.pending) = Pending::default();
        let ours = files.map.metadata().ok().map(|meta| identity(&meta));
        let at_path = std::fs::symlink_metadata(&self.map_path)
            .ok()
            .map(|meta| identity(&meta));
        if ours.is_none() || ours != at_path {
            return None;
        }
        std::fs::remove_file(&self.map_path)
            .err()
            .map(|source| OutputError::Remove {
                path: self.map_path.clone(),
                source,
            })
    }

    /// Writes out everything appended so far, in order (while stopped, it is dropped). Returns
    /// the first write error once.
    pub fn flush(&self) -> Option<OutputError> {
        let mut files = lock(&self.files);
        let (map, perf) = self.with(|p| (std::mem::take(&mut p.map), std::mem::take(&mut p.perf)));
        let files = files.as_mut()?;
        let mut result = files.map.write_all(&map);
        if let Some(file) = files.perf.as_mut() {
            result = result.and(file.write_all(&perf));
        }
        match result {
            Err(source) if !files.failed => {
                files.failed = true;
                Some(OutputError::Write {
                    path: self.map_path.clone(),
                    source,
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_per_map_and_lines_reach_the_files_in_order() {
        let dir = std::env::temp_dir().join(format!("agent-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let options = Options {
            dir: dir.clone(),
            perf_map: true,
        };
        let sink = Sink::open(&options, 42)
            .unwrap()
            .expect("first agent writes");
        assert!(
            Sink::open(&options, 42).unwrap().is_none(),
            "second copy stays quiet"
        );
        sink.with(|p| {
            records::compiled_unload(&mut p.map, 7, 0x1000);
            crate::format::perf_line(&mut p.perf, 0x1000, 0x10, "a.B.c");
        });
        assert_eq!(sink.flush().map(|error| error.to_string()), None);
        sink.with(|p| records::compiled_unload(&mut p.map, 8, 0x2000));
        assert_eq!(sink.flush().map(|error| error.to_string()), None);
        let map = std::fs::read_to_string(dir.join("joularcode-42.map")).unwrap();
        assert_eq!(
            map,
            "joularcode-code-map 2 monotonic 42\nU 7 1000\nU 8 2000\n"
        );
        let perf = std::fs::read_to_string(dir.join("perf-42.map")).unwrap();
        assert_eq!(perf, "1000 10 a.B.c\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_code_map_is_removed_when_it_stops_but_not_a_file_that_took_its_place() {
        let dir = std::env::temp_dir().join(format!("agent-remove-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let options = Options {
            dir: dir.clone(),
            perf_map: true,
        };
        let sink = Sink::open(&options, 42).unwrap().expect("the agent writes");
        assert_eq!(sink.stop().map(|error| error.to_string()), None);
        assert!(!dir.join("joularcode-42.map").exists());
        assert!(dir.join("perf-42.map").exists(), "perf maps stay for perf");
        let other = Sink::open(&options, 43).unwrap().expect("the agent writes");
        std::fs::remove_file(dir.join("joularcode-43.map")).unwrap();
        std::fs::write(dir.join("joularcode-43.map"), "another file").unwrap();
        assert_eq!(other.stop().map(|error| error.to_string()), None);
        assert!(dir.join("joularcode-43.map").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_stopped_sink_writes_nothing_and_starts_again_with_a_new_map() {
        let dir = std::env::temp_dir().join(format!("agent-restart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let options = Options {
            dir: dir.clone(),
            perf_map: false,
        };
        let path = dir.join("joularcode-42.map");
        let sink = Sink::open(&options, 42).unwrap().expect("the agent writes");
        sink.with(|p| p.number(7 as JmethodId, "a.B.c"));
        assert_eq!(sink.flush().map(|error| error.to_string()), None);
        assert_eq!(sink.stop().map(|error| error.to_string()), None);
        assert!(!sink.running() && !path.exists());
        assert_eq!(sink.check_lease(monotonic_ns()), None);
        sink.with(|p| records::compiled_unload(&mut p.map, 7, 0x1000));
        assert_eq!(sink.flush().map(|error| error.to_string()), None);
        assert!(!path.exists(), "nothing is written while stopped");
        assert!(sink.start().unwrap());
        sink.with(|p| p.number(9 as JmethodId, "d.E.f"));
        assert_eq!(sink.flush().map(|error| error.to_string()), None);
        let map = std::fs::read_to_string(&path).unwrap();
        assert_eq!(map, "joularcode-code-map 2 monotonic 42\nM 0 d.E.f\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_reader_setting_the_access_time_renews_the_lease() {
        let dir = std::env::temp_dir().join(format!("agent-lease-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let options = Options {
            dir: dir.clone(),
            perf_map: false,
        };
        let sink = Sink::open(&options, 42).unwrap().expect("the agent writes");
        let lease = crate::lease::LEASE.as_nanos() as u64;
        let start = monotonic_ns();
        assert_eq!(sink.check_lease(start + lease / 2), Some(Verdict::Held));
        let reader = File::open(dir.join("joularcode-42.map")).unwrap();
        let read_at = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let times = std::fs::FileTimes::new().set_accessed(read_at);
        reader.set_times(times).unwrap();
        assert_eq!(sink.check_lease(start + lease + 1), Some(Verdict::Held));
        assert_eq!(sink.check_lease(start + 2 * lease), Some(Verdict::Held));
        assert_eq!(
            sink.check_lease(start + 2 * lease + lease / 2 + 1),
            Some(Verdict::Expired)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_in_place_of_the_map_is_refused() {
        let dir = std::env::temp_dir().join(format!("agent-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("joularcode-42.map")).unwrap();
        let options = Options {
            dir: dir.clone(),
            perf_map: false,
        };
        let err = Sink::open(&options, 42).err().expect("refused").to_string();
        assert!(err.contains("cannot write"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
