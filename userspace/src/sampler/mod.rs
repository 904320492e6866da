//! The eBPF sampler: stack samples and exact on-CPU time of every thread of the tracked
//! processes (see docs/sampler.md).
//!
//! [`Sampler::new`] loads the programs of `bpf/sampler.bpf.c`, attaches the scheduler
//! tracepoints, the task iterator and one cpu-clock perf event per online CPU, and starts a
//! thread that drains the ring buffer every [`CONSUME_INTERVAL`] into a bounded channel
//! ([`Sampler::samples`]).
//! Nothing is sampled until a process is tracked ([`Sampler::track`], [`Sampler::follow`]).
//! Dropping the sampler detaches and unloads everything; the process's exit does too.

mod batch;
pub mod jvm;
pub mod perf;
pub mod privileges;
mod thread_passes;
mod wire;

use std::fs;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, IntoRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject, RingBufferBuilder};

/// Now on CLOCK_MONOTONIC, the clock of [`Sample::time_ns`].
pub use joularcode_core::power::clock::monotonic_ns;
pub use jvm::WalkedJvm;
use thread_passes::ThreadPasses;
use wire::ThreadRecord;
pub use wire::{record_len, FrameKind, Sample, StackFrame, WalkEnd, MAX_FRAMES};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/sampler.skel.rs"));
}
use skel::{SamplerSkel, SamplerSkelBuilder};

/// How often the consumer thread drains the ring buffer (the BPF side never wakes it up): four
/// times a cycle of 1 s. Each pass wakes the consumer and the session, which then read the code
/// maps and check the code and methods the samples meet: the record process's cost follows the
/// passes more than the samples.
pub const CONSUME_INTERVAL: Duration = Duration::from_millis(250);
/// Seconds of samples the channel holds before the consumer thread drops new ones (counted in
/// [`Sampler::drops`]): read [`Sampler::samples`] at least this often.
pub const CHANNEL_SECONDS: u64 = 4;
/// Batches the channel holds: one per pass of the consumer, for [`CHANNEL_SECONDS`].
const CHANNEL_BATCHES: usize =
    (CHANNEL_SECONDS * 1000 / CONSUME_INTERVAL.as_millis() as u64) as usize;

/// How the sampler's BPF program walks the frame-pointer chain. Both record the same frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// With the bpf_loop helper (Linux 5.17 and later): the verifier checks one step.
    BpfLoop,
    /// A few steps per program, chained by tail calls, for kernels without bpf_loop (5.15,
    /// 5.16): the verifier checks every step of a program, so loading takes longer.
    Bounded,
}

impl Walk {
    /// [`Walk::BpfLoop`] if this kernel lets perf_event programs call bpf_loop, else
    /// [`Walk::Bounded`].
    pub fn detect() -> Walk {
        let has_loop = libbpf_rs::ProgramType::PerfEvent
            .is_helper_supported(libbpf_rs::libbpf_sys::BPF_FUNC_loop)
            .unwrap_or(false);
        if has_loop {
            Walk::BpfLoop
        } else {
            Walk::Bounded
        }
    }
}

/// What the kernel says of the sampling program ([`Sampler::program_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramStats {
    /// Nanoseconds it ran, in all (counted while kernel.bpf_stats_enabled is 1).
    pub run_time_ns: u64,
    /// How many times it ran (counted while kernel.bpf_stats_enabled is 1).
    pub run_count: u64,
    /// Instructions the verifier went through to load it.
    pub verified_instructions: u32,
}

/// On-CPU time of one thread of a tracked process, from the sched accounting: since the process
/// was tracked (or since the thread started, if later), its name the comm of its last update.
pub use joularcode_core::threads::ThreadTime;

/// Why the sampler could not start or could not change what it tracks. Each says in one line what
/// failed and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// Not root, and without the capabilities needed (the message names them).
    #[error("{0}")]
    Privileges(String),
    /// The kernel is too old, or a file describing it is unreadable.
    #[error("{0}")]
    Kernel(String),
    /// The BPF programs could not be opened, loaded or attached.
    #[error("{0}")]
    Bpf(String),
    /// A perf event could not be opened.
    #[error("{0}")]
    Perf(String),
    /// This process does not run in the host's PID namespace.
    #[error("{0}")]
    PidNamespace(String),
    /// A process to track does not exist or cannot be read.
    #[error("{0}")]
    Process(String),
}

impl SamplerError {
    /// Whether eBPF sampling cannot run on this machine at all (no privileges, an old kernel, BPF
    /// or perf events refused), as opposed to a process that cannot be tracked.
    pub fn is_unavailable(&self) -> bool {
        !matches!(self, SamplerError::Process(_))
    }
}

fn bpf_error(what: &str) -> impl FnOnce(libbpf_rs::Error) -> SamplerError + '_ {
    move |e| SamplerError::Bpf(format!("cannot {what} (bpf/sampler.bpf.c): {e}"))
}

/// The loaded and attached sampler.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    consumer: Option<JoinHandle<()>>,
    samples: Receiver<Vec<Sample>>,
    channel_drops: Arc<AtomicU64>,
    perf_links: Vec<Link>,
    walk: Walk,
    passes: ThreadPasses,
    /// The count of exited entries left in the map `threads` at the last read of it.
    exited_left_seen: AtomicU64,
    skel: SamplerSkel<'static>,
}

impl Sampler {
    /// Checks the kernel and the privileges, loads the programs and starts sampling every
    /// online CPU at `rate_hz` samples per second of CPU time (for tracked processes only),
    /// walking stacks the best way this kernel allows ([`Walk::detect`]).
    pub fn new(rate_hz: u64) -> Result<Sampler, SamplerError> {
        Sampler::with_walk(rate_hz, Walk::detect())
    }

    /// [`Sampler::new`], with the given way of walking stacks.
    pub fn with_walk(rate_hz: u64, walk: Walk) -> Result<Sampler, SamplerError> {
        privileges::check_kernel()?;
        privileges::check_privileges()?;
        privileges::check_pid_namespace()?;
        if rate_hz == 0 || rate_hz > 10_000 {
            return Err(SamplerError::Perf(format!(
                "a sample rate of {rate_hz} Hz is out of range: use 1 to 10000 Hz"
            )));
        }
        let cpus = perf::online_cpus()?;
        // The skeleton borrows the storage of its object for its whole life, which is the
        // sampler's: these few bytes are leaked (the object itself is freed with the skeleton).
        let storage: &'static mut MaybeUninit<OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = SamplerSkelBuilder::default()
            .open(storage)
            .map_err(bpf_error("open the BPF object"))?;
        open.maps
            .samples
            .set_max_entries(ring_size(rate_hz, cpus.len()))
            .map_err(bpf_error("size the ring buffer"))?;
        match walk {
            Walk::BpfLoop => {
                open.progs.jp_on_sample_bounded.set_autoload(false);
                open.progs.jp_walk_more.set_autoload(false);
            }
            Walk::Bounded => open.progs.jp_on_sample.set_autoload(false),
        }
        let mut skel = open.load().map_err(bpf_error("load the BPF programs"))?;
        if walk == Walk::Bounded {
            let more = skel.progs.jp_walk_more.as_fd().as_raw_fd();
            skel.maps
                .walk_more
                .update(&0u32.to_ne_bytes(), &more.to_ne_bytes(), MapFlags::ANY)
                .map_err(bpf_error("chain the bounded walk's programs"))?;
        }
        skel.attach().map_err(bpf_error(
            "attach the scheduler tracepoints and the task iterator",
        ))?;

        let mut perf_links = Vec::with_capacity(cpus.len());
        let mut dither = perf::Dither::new(rate_hz, CONSUME_INTERVAL, cpus.len());
        for &cpu in &cpus {
            let fd = perf::open_cpu_clock(cpu, dither.period_ns(fastrand::f64())).map_err(|e| {
                let hint = match e.raw_os_error() {
                    Some(libc::EINVAL) => {
                        " (is the rate above /proc/sys/kernel/perf_event_max_sample_rate?)"
                    }
                    _ => "",
                };
                SamplerError::Perf(format!(
                    "cannot open the cpu-clock perf event on CPU {cpu} at {rate_hz} Hz: {e}{hint}"
                ))
            })?;
            let program = match walk {
                Walk::BpfLoop => &skel.progs.jp_on_sample,
                Walk::Bounded => &skel.progs.jp_on_sample_bounded,
            };
            let link = program
                .attach_perf_event(fd.as_raw_fd())
                .map_err(bpf_error("attach the sampler to a perf event"))?;
            // The link owns the perf event from now on and closes it when dropped; the consumer
            // keeps a duplicate to dither its period.
            let duplicate = fd.try_clone().map_err(|e| {
                SamplerError::Perf(format!("cannot duplicate the perf event of CPU {cpu}: {e}"))
            })?;
            let _ = fd.into_raw_fd();
            perf_links.push(link);
            dither.add(duplicate);
        }

        let (sender, samples) = mpsc::sync_channel(CHANNEL_BATCHES);
        let channel_drops = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = start_consumer(&skel, sender, channel_drops.clone(), stop.clone(), dither)?;
        Ok(Sampler {
            stop,
            consumer: Some(consumer),
            samples,
            channel_drops,
            perf_links,
            walk,
            passes: ThreadPasses::new(),
            exited_left_seen: AtomicU64::new(0),
            skel,
        })
    }

    /// The samples, in batches, in the order the ring buffer delivered them (per CPU in time
    /// order). The consumer thread adds one batch of the newest ones at each pass, every
    /// [`CONSUME_INTERVAL`] (none when it found no sample): a reader woken by a batch has the
    /// whole pass at once, not the part of it sent so far.
    pub fn samples(&self) -> &Receiver<Vec<Sample>> {
        &self.samples
    }

    /// Starts sampling and accounting the threads of process `pid`. Its threads' on-CPU time
    /// counts from now: each existing thread's baseline is its schedstat runtime now.
    pub fn track(&self, pid: u32) -> Result<(), SamplerError> {
        let tasks = format!("/proc/{pid}/task");
        let entries = fs::read_dir(&tasks).map_err(|e| {
            SamplerError::Process(format!("cannot track process {pid}: {tasks}: {e}"))
        })?;
        for tid in entries.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        {
            if let Some(thread) = read_thread(pid, tid) {
                // An entry the BPF side made first is as good: keep it.
                let _ = self.skel.maps.threads.update(
                    &tid.to_ne_bytes(),
                    bytemuck::bytes_of(&thread),
                    MapFlags::NO_EXIST,
                );
            }
        }
        mark(&self.skel.maps.tracked, pid, "track")?;
        self.passes.track(&self.skel.progs.jp_iter_threads, pid);
        Ok(())
    }

    /// Tracks `pid` and every process it starts from now on, and theirs in turn.
    pub fn follow(&self, pid: u32) -> Result<(), SamplerError> {
        mark(&self.skel.maps.followed, pid, "follow")?;
        self.passes.follow();
        self.track(pid)
    }

    /// Stops sampling, accounting and following `pid`, and forgets the times of its live
    /// threads. Threads that have exited (all of them, if the process has ended) are still
    /// reported, once, by the next [`Sampler::thread_times`].
    ///
    /// A process that ends stops being tracked and followed by itself; untracking it is still
    /// needed to forget it if its pid is reused.
    pub fn untrack(&self, pid: u32) {
        // A missing key is not an error: the process was not tracked.
        let _ = self.skel.maps.tracked.delete(&pid.to_ne_bytes());
        let _ = self.skel.maps.followed.delete(&pid.to_ne_bytes());
        self.passes.untrack(pid);
        for thread in read_entries(&self.skel.maps.threads, false) {
            if thread.pid == pid && thread.exited == 0 {
                let _ = self.skel.maps.threads.delete(&thread.tid.to_ne_bytes());
            }
        }
    }

    /// The processes tracked now (including those [`Sampler::follow`] added).
    pub fn tracked(&self) -> Vec<u32> {
        self.skel
            .maps
            .tracked
            .keys()
            .filter_map(|key| Some(u32::from_ne_bytes(key.as_slice().try_into().ok()?)))
            .collect()
    }

    /// The on-CPU time of every thread of the tracked processes, exited ones included. An
    /// exited thread is reported once, then forgotten.
    ///
    /// The live threads' times come from the task iterator's passes, which bring them up to
    /// date; the exited ones' from the map `exited`, taken whole. The map `threads` is read whole
    /// only when exited entries were left in it (`exited` was full) or a pass failed.
    pub fn thread_times(&self) -> Vec<ThreadTime> {
        let live = self
            .skel
            .links
            .jp_iter_threads
            .as_ref()
            .and_then(|host| self.passes.run(host));
        let mut records = match live {
            Some(live) if !self.exited_left_since_last_read() => live,
            _ => {
                let all = read_entries(&self.skel.maps.threads, false);
                for thread in all.iter().filter(|thread| thread.exited != 0) {
                    let _ = self.skel.maps.threads.delete(&thread.tid.to_ne_bytes());
                }
                all
            }
        };
        records.extend(read_entries(&self.skel.maps.exited, true));
        records
            .into_iter()
            .map(|thread| ThreadTime {
                pid: thread.pid,
                tid: thread.tid,
                on_cpu_ns: thread.runtime.saturating_sub(thread.baseline),
                name: thread.name(),
                exited: thread.exited != 0,
            })
            .collect()
    }

    /// Whether the BPF side left exited entries in the map `threads` since the last call.
    fn exited_left_since_last_read(&self) -> bool {
        let left = self.skel.maps.bss_data.as_ref().map_or(0, |bss| {
            // SAFETY: as in drops().
            unsafe { std::ptr::read_volatile(&bss.exited_left) }
        });
        self.exited_left_seen.swap(left, Ordering::Relaxed) != left
    }

    /// Samples lost so far: ring buffer full (BPF side) or channel full (nobody reading).
    pub fn drops(&self) -> u64 {
        let bpf = self.skel.maps.bss_data.as_ref().map_or(0, |bss| {
            // SAFETY: the .bss is mapped shared with the kernel; a volatile read sees the
            // counter the BPF programs increment atomically.
            unsafe { std::ptr::read_volatile(&bss.ring_drops) }
        });
        bpf + self.channel_drops.load(Ordering::Relaxed)
    }

    /// Threads that were not accounted because the thread table (65,536 threads) was full.
    pub fn thread_drops(&self) -> u64 {
        self.skel.maps.bss_data.as_ref().map_or(0, |bss| {
            // SAFETY: as in drops().
            unsafe { std::ptr::read_volatile(&bss.thread_drops) }
        })
    }

    /// The online CPUs sampled (one perf event each).
    pub fn cpus(&self) -> usize {
        self.perf_links.len()
    }

    /// The kernel's figures for the sampling program (the one attached to the perf events:
    /// with kernel.bpf_stats_enabled on, its run time and run count, tail calls included), or
    /// `None` if the kernel does not give them.
    pub fn program_stats(&self) -> Option<ProgramStats> {
        let program = match self.walk {
            Walk::BpfLoop => &self.skel.progs.jp_on_sample,
            Walk::Bounded => &self.skel.progs.jp_on_sample_bounded,
        };
        program_stats(program.as_fd())
    }
}

/// Every entry of the map `threads` or `exited` (`map`), deleted as read if `take`: in a few
/// batches, else key by key.
fn read_entries(map: &dyn MapCore, take: bool) -> Vec<ThreadRecord> {
    if let Some(entries) = batch::read_all(map, take) {
        return entries
            .iter()
            .filter_map(|(_, value)| ThreadRecord::parse(value))
            .collect();
    }
    map.keys()
        .filter_map(|key| {
            let value = map.lookup(&key, MapFlags::ANY).ok()??;
            if take {
                let _ = map.delete(&key);
            }
            ThreadRecord::parse(&value)
        })
        .collect()
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(consumer) = self.consumer.take() {
            let _ = consumer.join();
        }
        // The perf links, then the skeleton (tracepoint links, programs, maps) drop after this.
    }
}

/// The kernel's figures for the loaded program `program`.
fn program_stats(program: std::os::fd::BorrowedFd<'_>) -> Option<ProgramStats> {
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: the kernel fills at most `len` bytes of `info`, a plain C struct.
    let ret = unsafe {
        libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(program.as_raw_fd(), &mut info, &mut len)
    };
    (ret == 0).then_some(ProgramStats {
        run_time_ns: info.run_time_ns,
        run_count: info.run_cnt,
        verified_instructions: info.verified_insns,
    })
}

/// Adds `pid` to a set of pids (the map `tracked` or `followed`); `verb` says which, for the error.
fn mark(set: &dyn MapCore, pid: u32, verb: &str) -> Result<(), SamplerError> {
    set.update(&pid.to_ne_bytes(), &[1], MapFlags::ANY)
        .map_err(|e| {
            SamplerError::Bpf(format!(
                "cannot {verb} process {pid} (map {}): {e}",
                set.name().to_string_lossy()
            ))
        })
}

/// Frames per sample the ring buffer is sized for: a deep Java stack (javac's average is about
/// 60). Samples with more frames take more room: the ring then holds less than a second.
const SIZED_FRAMES: usize = 64;

/// Seconds of samples of [`SIZED_FRAMES`] frames the ring buffer holds.
const RING_SECONDS: u64 = 2;

/// Bytes of ring buffer for `cpus` CPUs sampled at `rate_hz`: room for [`RING_SECONDS`] of
/// samples of 64 frames (eight times what the consumer drains at each pass; still two passes of
/// samples of the most frames), as a power of two from 1 MiB to 256 MiB.
fn ring_size(rate_hz: u64, cpus: usize) -> u32 {
    let bytes = rate_hz
        .saturating_mul(cpus as u64)
        .saturating_mul(RING_SECONDS)
        .saturating_mul(record_len(SIZED_FRAMES) as u64);
    bytes.clamp(1 << 20, 1 << 28).next_power_of_two() as u32
}

/// Starts the thread that drains the ring buffer into the channel until `stop` is set, one
/// batch per pass, and dithers the sampling period at each pass.
fn start_consumer(
    skel: &SamplerSkel<'static>,
    sender: SyncSender<Vec<Sample>>,
    channel_drops: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    mut dither: perf::Dither,
) -> Result<JoinHandle<()>, SamplerError> {
    // Filled by the ring's callback, taken after each drain; both run on the consumer thread.
    let batch = Arc::new(Mutex::new(Vec::new()));
    let filled = batch.clone();
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&skel.maps.samples, move |bytes: &[u8]| {
            // A record too short for its header cannot come from our program: skip it.
            if let Some(sample) = Sample::parse(bytes) {
                filled
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(sample);
            }
            0
        })
        .map_err(bpf_error("read the ring buffer"))?;
    let ring = builder.build().map_err(bpf_error("map the ring buffer"))?;
    let drain = move || {
        let _ = ring.consume();
        let taken = std::mem::take(&mut *batch.lock().unwrap_or_else(PoisonError::into_inner));
        if !taken.is_empty() {
            if let Err(TrySendError::Full(lost) | TrySendError::Disconnected(lost)) =
                sender.try_send(taken)
            {
                channel_drops.fetch_add(lost.len() as u64, Ordering::Relaxed);
            }
        }
    };
    thread::Builder::new()
        .name("jp-ring".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                drain();
                dither.pass();
                thread::sleep(CONSUME_INTERVAL);
            }
            drain();
        })
        .map_err(|e| SamplerError::Bpf(format!("cannot start the ring buffer thread: {e}")))
}

/// A `threads` entry for a thread that exists now, with its schedstat runtime as the baseline.
fn read_thread(pid: u32, tid: u32) -> Option<ThreadRecord> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let schedstat = fs::read_to_string(format!("{dir}/schedstat")).ok()?;
    let runtime = schedstat.split_whitespace().next()?.parse().ok()?;
    let name = fs::read_to_string(format!("{dir}/comm")).ok()?;
    Some(ThreadRecord::new(
        pid,
        tid,
        runtime,
        name.trim_end_matches('\n'),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_holds_two_passes_of_the_deepest_samples() {
        assert_eq!(ring_size(100, 2), 1 << 20);
        assert_eq!(ring_size(1000, 2), 1 << 23);
        assert_eq!(ring_size(100, 64), 1 << 25);
        assert_eq!(ring_size(10_000, 4096), 1 << 28);
        assert!(ring_size(100, 8) as usize >= 2 * 100 * 8 * record_len(SIZED_FRAMES));
        let pass = CONSUME_INTERVAL.as_secs_f64();
        let deepest_pass = (1000.0 * 2.0 * pass) as usize * record_len(MAX_FRAMES);
        assert!(ring_size(1000, 2) as usize >= 2 * deepest_pass);
    }

    #[test]
    fn the_channel_holds_a_few_seconds_of_passes() {
        assert_eq!(CHANNEL_BATCHES, 16);
    }
}
