//! The shared-memory ring buffer PowerJoular 2.0 writes with `-r`: a 248-byte file in the
//! machine's byte order, which PowerJoular maps and this reads word by word.
//!
//! ```text
//! offset 0           u64 head: cycles written since the file was created (0 = none yet)
//! offset 8 + 48*i    slot i (i = 0..4) holds cycle k when k mod 5 = i:
//!   +0  u64 timestamp (Unix seconds)   +8  f64 cpu_power (W, read here)
//!   +16 f64 gpu_power  +24 f64 total_power  +32 f64 cpu_usage  +40 f64 pid_app_power
//! ```
//!
//! PowerJoular stores the slot, issues a full barrier, then stores the new head, once a second.
//! There is no sequence number per slot: the head is read before and after the entry, with
//! acquire fences, and a read during which it moved is refused. A restart creates a new file
//! (a new inode) with the head back at 0; the old file, still open here, then stops moving, so a
//! window with no new cycle closes it and the next reading opens whatever is at the path by then.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Clock, PowerError, PowerSource, ONE_SECOND};
use crate::input::open_for_reading;
use crate::log::{Level, Log};
use crate::output::java_float::java_double;

/// The size of the area.
pub const AREA_SIZE: usize = 8 + ENTRY_COUNT * ENTRY_SIZE;
/// The size of one slot.
pub const ENTRY_SIZE: usize = 48;
/// How many slots there are.
pub const ENTRY_COUNT: usize = 5;
/// How long a window waits for PowerJoular's next cycle.
pub const MAX_WINDOW: Duration = Duration::from_secs(2);
/// PowerJoular writes once a second: an entry older than this means it has stopped.
pub const MAX_AGE_SECONDS: i64 = 5;

/// 8-byte words of an area, read as PowerJoular's writer may be changing them.
pub trait Area {
    /// The native-order word at `offset`, a multiple of 8 below [`AREA_SIZE`].
    fn word(&self, offset: usize) -> u64;
}

/// A snapshot of an area's bytes (at least [`AREA_SIZE`] of them).
impl Area for [u8] {
    fn word(&self, offset: usize) -> u64 {
        let mut bytes = [0u8; 8];
        if let Some(word) = self.get(offset..offset + 8) {
            bytes.copy_from_slice(word);
        }
        u64::from_ne_bytes(bytes)
    }
}

/// The file, open, and read one word at a time rather than mapped: a mapping faults (SIGBUS) on
/// a file that someone cuts short after it was mapped, where a read only comes back short. The
/// slot read is not rewritten for four cycles, and a head torn by PowerJoular's store of the next
/// one differs from the head read again after the slot, which [`read_newest`] refuses.
struct Opened(File);

impl Area for Opened {
    /// The word at `offset`, or all ones when the file no longer holds it: a head of -1, a
    /// timestamp of -1 and a NaN power, which every check refuses.
    fn word(&self, offset: usize) -> u64 {
        let mut file = &self.0;
        let mut bytes = [0u8; 8];
        let read = file
            .seek(SeekFrom::Start(offset as u64))
            .and_then(|_| file.read_exact(&mut bytes));
        match read {
            Ok(()) => u64::from_ne_bytes(bytes),
            Err(_) => u64::MAX,
        }
    }
}

/// A reading that failed, and whether the file must be closed so that the next reading opens
/// the file at the path again.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong.
    pub error: PowerError,
    /// The writer has stopped or restarted on a new file.
    pub reopen: bool,
}

fn failure(error: String, reopen: bool) -> Failure {
    Failure {
        error: PowerError::new(error),
        reopen,
    }
}

/// Reads the newest CPU power from `area`, with Joular Code for Java's checks in its order.
/// `window_start_head` is the head when the window began, and becomes the head read now.
pub fn read_newest(
    area: &(impl Area + ?Sized),
    path: &Path,
    window_start_head: &mut i64,
    now_unix_seconds: i64,
) -> Result<f64, Failure> {
    let head = area.word(0) as i64;
    let previous_head = std::mem::replace(window_start_head, head);
    if head <= 0 {
        return Err(failure(
            format!(
                "PowerJoular has not published a measurement in {} yet.",
                path.display()
            ),
            false,
        ));
    }
    if head == previous_head {
        return Err(failure(
            format!(
                "PowerJoular published no measurement in {} for {} s. Is it still running with -r?",
                path.display(),
                MAX_WINDOW.as_secs()
            ),
            true,
        ));
    }
    // Pairs with PowerJoular's barrier before it publishes the head
    fence(Ordering::Acquire);
    let slot = 8 + ((head - 1) as u64 % ENTRY_COUNT as u64) as usize * ENTRY_SIZE;
    let timestamp = area.word(slot) as i64;
    let power = f64::from_bits(area.word(slot + 8));
    fence(Ordering::Acquire);
    if area.word(0) as i64 != head {
        return Err(failure(
            format!(
                "PowerJoular was writing to {} while it was read.",
                path.display()
            ),
            false,
        ));
    }
    // A timestamp in the future is accepted: the clock may have stepped
    let age = now_unix_seconds.saturating_sub(timestamp);
    if age > MAX_AGE_SECONDS {
        return Err(failure(
            format!(
                "The latest measurement in {} is {age} s old. Is PowerJoular still running with -r?",
                path.display()
            ),
            true,
        ));
    }
    if !power.is_finite() || power < 0.0 {
        return Err(failure(
            format!(
                "PowerJoular could not measure the CPU power (it wrote {}).",
                java_double(power)
            ),
            false,
        ));
    }
    Ok(power)
}

/// Reads the newest CPU power from a snapshot of an area's bytes, as [`read_newest`] does.
pub fn read_bytes(
    bytes: &[u8],
    path: &Path,
    window_start_head: &mut i64,
    now_unix_seconds: i64,
) -> Result<f64, PowerError> {
    if bytes.len() < AREA_SIZE {
        return Err(too_short(path));
    }
    read_newest(bytes, path, window_start_head, now_unix_seconds).map_err(|failure| failure.error)
}

fn too_short(path: &Path) -> PowerError {
    PowerError::new(format!(
        "{} is too short to be a PowerJoular ring buffer, or is still being created.",
        path.display()
    ))
}

/// Opens the ring buffer at `path`: a regular file (not a link) of at least [`AREA_SIZE`] bytes.
fn attach(path: &Path) -> Result<Opened, PowerError> {
    let not_regular = || PowerError::new(format!("{} is not a regular file.", path.display()));
    match path.symlink_metadata() {
        Ok(metadata) if !metadata.is_file() => return Err(not_regular()),
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(PowerError::new(format!(
                "There is no PowerJoular ring buffer at {}. Is PowerJoular running with -r?",
                path.display()
            )))
        }
        Err(error) => {
            return Err(PowerError::new(format!(
                "Cannot read {}: {error}.",
                path.display()
            )))
        }
    }
    let cannot_open =
        |error: io::Error| PowerError::new(format!("Cannot open {}: {error}.", path.display()));
    let file = open_for_reading(path, false).map_err(cannot_open)?;
    let metadata = file.metadata().map_err(cannot_open)?;
    if !metadata.is_file() {
        return Err(not_regular());
    }
    if metadata.len() < AREA_SIZE as u64 {
        return Err(too_short(path));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid only reads this process's user id.
        owned_by_a_trusted_user(path, metadata.uid(), unsafe { libc::geteuid() })?;
    }
    Ok(Opened(file))
}

/// Refuses a ring buffer that belongs to another user than root or `me`: any user can make files
/// in /dev/shm, and one who made the ring buffer before PowerJoular could report any power.
pub fn owned_by_a_trusted_user(path: &Path, owner: u32, me: u32) -> Result<(), PowerError> {
    if owner == 0 || owner == me {
        return Ok(());
    }
    Err(PowerError::new(format!(
        "{} belongs to user {owner}, not to root or to the user running the profiler ({me}), so \
         it could report any power. Run PowerJoular as root, or remove the file and start \
         PowerJoular again.",
        path.display()
    )))
}

/// CPU power from PowerJoular's ring buffer.
pub struct RingBuffer {
    path: PathBuf,
    clock: Arc<dyn Clock>,
    opened: Option<Opened>,
    window_start_head: i64,
}

impl RingBuffer {
    /// Opens the source, which never fails: PowerJoular may start later, and the first reading
    /// tries again.
    pub fn open(path: &Path, clock: Arc<dyn Clock>, log: &dyn Log) -> RingBuffer {
        let opened = attach(path).ok();
        let window_start_head = opened.as_ref().map_or(0, |area| area.word(0) as i64);
        log.log(
            Level::Info,
            &format!(
                "Reading CPU power from the PowerJoular ring buffer {}",
                path.display()
            ),
        );
        RingBuffer {
            path: path.to_owned(),
            clock,
            opened,
            window_start_head,
        }
    }
}

impl PowerSource for RingBuffer {
    fn describe(&self) -> String {
        format!("ringbuffer {}", self.path.display())
    }

    fn watts(&mut self) -> Result<f64, PowerError> {
        let area = match self.opened.take() {
            Some(area) => area,
            None => attach(&self.path)?,
        };
        let now = self.clock.unix_seconds();
        match read_newest(&area, &self.path, &mut self.window_start_head, now) {
            Ok(power) => {
                self.opened = Some(area);
                Ok(power)
            }
            Err(failure) => {
                if !failure.reopen {
                    self.opened = Some(area);
                }
                Err(failure.error)
            }
        }
    }

    fn window_over(&self, elapsed: Duration) -> bool {
        match &self.opened {
            None => elapsed >= ONE_SECOND,
            Some(area) => area.word(0) as i64 != self.window_start_head || elapsed >= MAX_WINDOW,
        }
    }
}
