//! The cases of Joular Code for Java's PowerJoularRingBufferTest, on files written in PowerJoular
//! 2.0's 248-byte layout, plus a torn read and a stalled writer.

use std::cell::Cell;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use joularcode_core::log::{Level, Recorded};
use joularcode_core::power::ringbuffer::{read_bytes, read_newest, Area, RingBuffer, AREA_SIZE};
use joularcode_core::power::{ManualClock, PowerSource};

const NOW: i64 = 1_746_000_000;

/// An area whose cycles `0..head` were written, cycle k at `NOW - (head - 1 - k)` with power
/// `10 + k` (so the newest is at NOW with power 10 + head - 1).
fn area(head: i64) -> Vec<u8> {
    let mut bytes = vec![0u8; AREA_SIZE];
    bytes[..8].copy_from_slice(&head.to_ne_bytes());
    for k in 0.max(head - 5)..head {
        let slot = 8 + (k as usize % 5) * 48;
        let timestamp = NOW - (head - 1 - k);
        bytes[slot..slot + 8].copy_from_slice(&timestamp.to_ne_bytes());
        bytes[slot + 8..slot + 16].copy_from_slice(&(10.0 + k as f64).to_ne_bytes());
    }
    bytes
}

fn with_newest(head: i64, timestamp: i64, power: f64) -> Vec<u8> {
    let mut bytes = area(head);
    let slot = 8 + ((head - 1) as usize % 5) * 48;
    bytes[slot..slot + 8].copy_from_slice(&timestamp.to_ne_bytes());
    bytes[slot + 8..slot + 16].copy_from_slice(&power.to_ne_bytes());
    bytes
}

/// Rewrites the file in place, as PowerJoular's stores into its mapping do.
fn store(path: &Path, bytes: &[u8]) {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap();
    file.write_all(bytes).unwrap();
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    clock: Arc<ManualClock>,
    log: Recorded,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("powerjoular");
        Fixture {
            _dir: dir,
            path,
            clock: Arc::new(ManualClock::new(NOW)),
            log: Recorded::default(),
        }
    }

    fn open(&self) -> RingBuffer {
        RingBuffer::open(&self.path, self.clock.clone(), &self.log)
    }
}

fn read_at(bytes: &[u8]) -> Result<f64, String> {
    let mut start = 0;
    read_bytes(bytes, Path::new("/dev/shm/powerjoular"), &mut start, NOW).map_err(|e| e.to_string())
}

#[test]
fn power_joular_ring_buffer_test_reads_the_newest_entry_for_heads_1_3_and_7() {
    for head in [1, 3, 7] {
        assert_eq!(read_at(&area(head)), Ok(10.0 + (head - 1) as f64));
        let f = Fixture::new();
        store(&f.path, &area(head));
        let mut ring = f.open();
        store(&f.path, &area(head + 1));
        assert_eq!(ring.watts().unwrap(), 10.0 + head as f64);
    }
}

#[test]
fn power_joular_ring_buffer_test_throws_for_head_0_head_minus_1_power_minus_1_and_nan() {
    let path = "/dev/shm/powerjoular";
    assert_eq!(
        read_at(&area(0)),
        Err(format!(
            "PowerJoular has not published a measurement in {path} yet."
        ))
    );
    let mut minus_one = area(3);
    minus_one[..8].copy_from_slice(&(-1i64).to_ne_bytes());
    assert!(read_at(&minus_one)
        .unwrap_err()
        .contains("has not published"));
    assert_eq!(
        read_at(&with_newest(2, NOW, -1.0)),
        Err("PowerJoular could not measure the CPU power (it wrote -1.0).".to_owned())
    );
    assert_eq!(
        read_at(&with_newest(2, NOW, f64::NAN)),
        Err("PowerJoular could not measure the CPU power (it wrote NaN).".to_owned())
    );
    // Quoted as Java's Double.toString writes it
    assert_eq!(
        read_at(&with_newest(2, NOW, f64::NEG_INFINITY)),
        Err("PowerJoular could not measure the CPU power (it wrote -Infinity).".to_owned())
    );
    assert_eq!(
        read_at(&with_newest(2, NOW, -2.5e-4)),
        Err("PowerJoular could not measure the CPU power (it wrote -2.5E-4).".to_owned())
    );
    // PowerJoular without a CPU source writes 0, which is a power
    assert_eq!(read_at(&with_newest(2, NOW, 0.0)), Ok(0.0));
}

#[test]
fn power_joular_ring_buffer_test_freshness() {
    assert_eq!(read_at(&with_newest(4, NOW - 2, 7.5)), Ok(7.5));
    assert_eq!(read_at(&with_newest(4, NOW + 60, 7.5)), Ok(7.5));
    assert_eq!(
        read_at(&with_newest(4, NOW - 3600, 7.5)),
        Err("The latest measurement in /dev/shm/powerjoular is 3600 s old. Is PowerJoular still running with -r?".to_owned())
    );
}

#[test]
fn power_joular_ring_buffer_test_no_new_cycle_throws_twice_then_the_next_cycle_is_read() {
    let f = Fixture::new();
    store(&f.path, &area(3));
    let mut ring = f.open();
    store(&f.path, &area(4));
    assert_eq!(ring.watts().unwrap(), 13.0);
    let stalled = format!(
        "PowerJoular published no measurement in {} for 2 s. Is it still running with -r?",
        f.path.display()
    );
    assert_eq!(ring.watts().unwrap_err().to_string(), stalled);
    // Opened again, the same entry is not charged again
    assert_eq!(ring.watts().unwrap_err().to_string(), stalled);
    store(&f.path, &area(5));
    assert_eq!(ring.watts().unwrap(), 14.0);
}

#[test]
fn power_joular_ring_buffer_test_an_area_that_appears_later_is_picked_up() {
    let f = Fixture::new();
    let mut ring = f.open();
    assert_eq!(
        f.log.messages(),
        vec![(
            Level::Info,
            format!(
                "Reading CPU power from the PowerJoular ring buffer {}",
                f.path.display()
            )
        )]
    );
    assert_eq!(
        ring.watts().unwrap_err().to_string(),
        format!(
            "There is no PowerJoular ring buffer at {}. Is PowerJoular running with -r?",
            f.path.display()
        )
    );
    store(&f.path, &area(1));
    assert_eq!(ring.watts().unwrap(), 10.0);
}

#[test]
fn power_joular_ring_buffer_test_a_64_byte_file_is_not_read() {
    let f = Fixture::new();
    store(&f.path, &area(2)[..64]);
    let mut ring = f.open();
    let too_short = format!(
        "{} is too short to be a PowerJoular ring buffer, or is still being created.",
        f.path.display()
    );
    assert_eq!(ring.watts().unwrap_err().to_string(), too_short);
    assert_eq!(
        read_at(&area(2)[..247]),
        Err(too_short.replace(&f.path.display().to_string(), "/dev/shm/powerjoular"))
    );
    // Once complete, it is read
    store(&f.path, &area(2));
    assert_eq!(ring.watts().unwrap(), 11.0);
}

#[test]
#[cfg(unix)]
fn power_joular_ring_buffer_test_a_restart_is_read_from_the_new_file() {
    let f = Fixture::new();
    store(&f.path, &area(6));
    let mut ring = f.open();
    store(&f.path, &area(7));
    assert_eq!(ring.watts().unwrap(), 16.0);
    // PowerJoular restarts: unlink, then a new file (a new inode) whose head starts again
    fs::remove_file(&f.path).unwrap();
    store(&f.path, &area(1));
    assert!(ring
        .watts()
        .unwrap_err()
        .to_string()
        .starts_with("PowerJoular published no measurement"));
    assert_eq!(ring.watts().unwrap(), 10.0);
}

#[test]
#[cfg(unix)]
fn power_joular_ring_buffer_test_a_symlink_or_a_directory_is_refused() {
    let f = Fixture::new();
    let target = f.path.with_file_name("real");
    store(&target, &area(2));
    std::os::unix::fs::symlink(&target, &f.path).unwrap();
    let mut ring = f.open();
    let refused = format!("{} is not a regular file.", f.path.display());
    assert_eq!(ring.watts().unwrap_err().to_string(), refused);
    fs::remove_file(&f.path).unwrap();
    fs::create_dir(&f.path).unwrap();
    assert_eq!(ring.watts().unwrap_err().to_string(), refused);
    fs::remove_dir(&f.path).unwrap();
    // A fifo is refused without blocking on its open
    let fifo = std::ffi::CString::new(f.path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    assert_eq!(ring.watts().unwrap_err().to_string(), refused);
}

#[test]
fn power_joular_ring_buffer_test_window_over() {
    let f = Fixture::new();
    let ring = f.open();
    // Not open: one second
    assert!(!ring.window_over(Duration::from_millis(999)));
    assert!(ring.window_over(Duration::from_secs(1)));
    store(&f.path, &area(2));
    let mut ring = f.open();
    assert!(!ring.window_over(Duration::from_millis(1500)));
    assert!(ring.window_over(Duration::from_secs(2)));
    store(&f.path, &area(3));
    assert!(ring.window_over(Duration::from_millis(10)));
    // Once read, the next window waits for the cycle after
    assert_eq!(ring.watts().unwrap(), 12.0);
    assert!(!ring.window_over(Duration::from_millis(10)));
    store(&f.path, &area(4));
    assert!(ring.window_over(Duration::from_millis(10)));
}

/// An area whose head moves on by one between the reads, as if the reader stalled for a cycle.
struct MovingHead {
    bytes: Vec<u8>,
    reads: Cell<u64>,
}

impl Area for MovingHead {
    fn word(&self, offset: usize) -> u64 {
        let word = self.bytes.as_slice().word(offset);
        if offset == 0 {
            self.reads.set(self.reads.get() + 1);
            return word + self.reads.get() - 1;
        }
        word
    }
}

#[test]
fn power_ring_buffer_a_torn_read_is_refused() {
    let moving = MovingHead {
        bytes: area(4),
        reads: Cell::new(0),
    };
    let mut start = 0;
    let failure =
        read_newest(&moving, Path::new("/dev/shm/powerjoular"), &mut start, NOW).unwrap_err();
    assert_eq!(
        failure.error.to_string(),
        "PowerJoular was writing to /dev/shm/powerjoular while it was read."
    );
    assert!(!failure.reopen);
    assert_eq!(start, 4);
}

#[test]
fn power_ring_buffer_a_stalled_writer_closes_the_file() {
    let f = Fixture::new();
    store(&f.path, &area(2));
    let mut ring = f.open();
    // PowerJoular was killed: its file stays, and its newest entry grows old
    store(&f.path, &with_newest(3, NOW - 6, 5.0));
    assert_eq!(
        ring.watts().unwrap_err().to_string(),
        format!(
            "The latest measurement in {} is 6 s old. Is PowerJoular still running with -r?",
            f.path.display()
        )
    );
    // Closed after that: windows are one second long again
    assert!(ring.window_over(Duration::from_secs(1)));
}

/// Someone cuts the file short while it is open: each reading fails with a message (a mapping
/// would have faulted), and once the file is closed, it is refused as too short.
#[test]
fn power_ring_buffer_a_file_cut_short_while_open_is_refused_not_a_fault() {
    let f = Fixture::new();
    store(&f.path, &area(2));
    let mut ring = f.open();
    let cut = |head: i64, length: usize| {
        let mut bytes = area(head);
        bytes.truncate(length);
        fs::write(&f.path, &bytes).unwrap();
    };
    let path = f.path.display();
    // No head left: -1
    cut(2, 4);
    assert_eq!(
        ring.watts().unwrap_err().to_string(),
        format!("PowerJoular has not published a measurement in {path} yet.")
    );
    // The newest slot (104..152) keeps its timestamp but not its power: NaN
    cut(3, 116);
    assert_eq!(
        ring.watts().unwrap_err().to_string(),
        "PowerJoular could not measure the CPU power (it wrote NaN)."
    );
    // The newest slot (152..200) is gone: a timestamp of -1 is old, and the file is closed
    cut(4, 100);
    assert!(ring
        .watts()
        .unwrap_err()
        .to_string()
        .starts_with(&format!("The latest measurement in {path} is ")));
    cut(5, 200);
    assert_eq!(
        ring.watts().unwrap_err().to_string(),
        format!("{path} is too short to be a PowerJoular ring buffer, or is still being created.")
    );
    store(&f.path, &area(5));
    assert_eq!(ring.watts().unwrap(), 14.0);
}

#[test]
fn a_ring_buffer_of_another_user_is_refused() {
    use joularcode_core::power::ringbuffer::owned_by_a_trusted_user;
    let path = Path::new("/dev/shm/powerjoular");
    assert!(owned_by_a_trusted_user(path, 0, 1000).is_ok(), "root's");
    assert!(owned_by_a_trusted_user(path, 1000, 1000).is_ok(), "mine");
    assert_eq!(
        owned_by_a_trusted_user(path, 1001, 0)
            .unwrap_err()
            .message(),
        "/dev/shm/powerjoular belongs to user 1001, not to root or to the user running the \
         profiler (0), so it could report any power. Run PowerJoular as root, or remove the file \
         and start PowerJoular again."
    );
}
