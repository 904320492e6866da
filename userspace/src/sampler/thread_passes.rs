//! The passes of the task iterator `jp_iter_threads`, which bring the tracked threads' times up
//! to date and write the entry of each live one: over the threads of each tracked process while
//! few are tracked (Linux 6.1's task iterator of one process), else over every task of the host.
//!
//! A pass over one process visits its threads only; a pass over the host visits every task, most
//! of them not tracked. libbpf-rs attaches iterators to a map or a cgroup only: the link of one
//! process is made here with libbpf's own call.

use std::collections::HashMap;
use std::io::Read;
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

use libbpf_rs::{libbpf_sys, AsRawLibbpf, Iter, Link, Program};

use super::privileges;
use super::wire::ThreadRecord;

/// Processes passed over one by one, at most: with more, their threads are most of the host's
/// tasks, and one pass over the host costs less than a pass each.
const MAX_PROCESS_PASSES: usize = 16;

/// The first kernel whose task iterator can be given one process (`bpf_iter_link_info.task`).
const PROCESS_PASSES_KERNEL: (u32, u32) = (6, 1);

/// Bytes asked for per read of an iterator: more than the kernel's buffer (8 pages), which bounds
/// what one read returns.
const READ_BYTES: usize = 64 * 1024;

/// Reads of one iterator, at most: the records of a full `threads` map (65,536 entries of 48
/// bytes, 96 reads of 32 KiB), with room for the reads the kernel cuts short (at a million tasks,
/// or a signal).
const MAX_READS: usize = 256;

/// How the tracked threads' times are read.
pub(super) struct ThreadPasses {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The iterator of each tracked process, while passes are per process.
    processes: HashMap<u32, Link>,
    /// Passes are over the host's tasks from now on.
    host: bool,
}

impl ThreadPasses {
    /// Passes per process if this kernel has them, else over the host.
    pub fn new() -> ThreadPasses {
        ThreadPasses {
            state: Mutex::new(State {
                host: !privileges::kernel_is_at_least(PROCESS_PASSES_KERNEL),
                ..State::default()
            }),
        }
    }

    /// Process `pid` is tracked: it gets its own pass with `program` while passes are per
    /// process, and the passes go over the host once there would be too many of them or the
    /// kernel refuses one.
    pub fn track(&self, program: &Program, pid: u32) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.host || state.processes.contains_key(&pid) {
            return;
        }
        let link = (state.processes.len() < MAX_PROCESS_PASSES)
            .then(|| attach_to_process(program, pid))
            .flatten();
        match link {
            Some(link) => {
                state.processes.insert(pid, link);
            }
            None => state.pass_over_host(),
        }
    }

    /// A process is followed: the BPF side tracks its children, which only a pass over the host
    /// meets.
    pub fn follow(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pass_over_host();
    }

    /// Process `pid` is no longer tracked.
    pub fn untrack(&self, pid: u32) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .processes
            .remove(&pid);
    }

    /// Runs the passes: the entries of the live threads of the tracked processes, brought up to
    /// date. `None` if a pass failed (the caller then reads the map `threads`, as fresh as the
    /// last samples, forks and exits made it). `host` is the iterator over the host's tasks.
    pub fn run(&self, host: &Link) -> Option<Vec<ThreadRecord>> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut output = Vec::new();
        if state.host {
            read_pass(host, &mut output)?;
        } else {
            for link in state.processes.values() {
                read_pass(link, &mut output)?;
            }
        }
        Some(ThreadRecord::parse_all(&output).collect())
    }
}

impl State {
    /// Passes over the host's tasks from now on.
    fn pass_over_host(&mut self) {
        self.host = true;
        self.processes.clear();
    }
}

/// The task iterator `program` over the threads of process `pid` only; `None` if the kernel
/// refuses it.
fn attach_to_process(program: &Program, pid: u32) -> Option<Link> {
    let mut info = libbpf_sys::bpf_iter_link_info::default();
    info.task.pid = pid;
    let opts = libbpf_sys::bpf_iter_attach_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_iter_attach_opts>() as _,
        link_info: &mut info,
        link_info_len: std::mem::size_of::<libbpf_sys::bpf_iter_link_info>() as _,
        ..Default::default()
    };
    // SAFETY: the program is loaded and outlives the call; `opts` and `info` outlive it too, and
    // libbpf copies what it needs of them.
    let link =
        unsafe { libbpf_sys::bpf_program__attach_iter(program.as_libbpf_object().as_ptr(), &opts) };
    // SAFETY: a link libbpf just made, owned by nothing else; libbpf returns NULL on failure.
    NonNull::new(link).map(|link| unsafe { Link::from_ptr(link) })
}

/// Reads a pass of the iterator `link` to its end into `output`; `None` if it failed.
fn read_pass(link: &Link, output: &mut Vec<u8>) -> Option<()> {
    let mut iter = Iter::new(link).ok()?;
    let mut chunk = vec![0u8; READ_BYTES];
    for _ in 0..MAX_READS {
        match iter.read(&mut chunk) {
            Ok(0) => return Some(()),
            Ok(read) => output.extend_from_slice(&chunk[..read]),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) => {}
            Err(_) => return None,
        }
    }
    None
}
