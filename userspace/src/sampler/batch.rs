//! Reading a whole BPF hash map in a few system calls (`BPF_MAP_LOOKUP_BATCH` and
//! `BPF_MAP_LOOKUP_AND_DELETE_BATCH`, Linux 5.6), rather than two or three per entry (the next
//! key, its value, its deletion): the sampler takes the exited threads' entries every cycle.

use std::os::fd::AsRawFd;

use libbpf_rs::libbpf_sys;
use libbpf_rs::MapCore;

/// Entries asked for per call, at first.
const BATCH: usize = 1024;

/// Every entry of a hash map as read in batches: keys and values, each of its map's size.
#[derive(Debug, Default)]
pub struct Entries {
    key_size: usize,
    value_size: usize,
    keys: Vec<u8>,
    values: Vec<u8>,
}

impl Entries {
    /// The (key, value) pairs read.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.keys
            .chunks_exact(self.key_size.max(1))
            .zip(self.values.chunks_exact(self.value_size.max(1)))
    }
}

/// Every entry of hash map `map`, read in batches of [`BATCH`] (or more, when one bucket of the
/// map holds more entries than a batch: the kernel then says `ENOSPC`), and deleted as read if
/// `take` (`BPF_MAP_LOOKUP_AND_DELETE_BATCH`). `None` if the kernel refused otherwise (the caller
/// reads the map key by key then). Entries that the BPF programs add or change meanwhile may be
/// read or not, as with any walk of a map that changes.
pub fn read_all(map: &dyn MapCore, take: bool) -> Option<Entries> {
    let call = if take {
        libbpf_sys::bpf_map_lookup_and_delete_batch
    } else {
        libbpf_sys::bpf_map_lookup_batch
    };
    let key_size = map.key_size() as usize;
    let value_size = map.value_size() as usize;
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    let mut entries = Entries {
        key_size,
        value_size,
        ..Entries::default()
    };
    // The kernel's position between calls (a bucket number for hash maps); at least a key's size.
    let mut position = vec![0u8; key_size.max(8)];
    let mut next = position.clone();
    let mut started = false;
    let mut batch = BATCH;
    loop {
        let mut keys = vec![0u8; batch * key_size];
        let mut values = vec![0u8; batch * value_size];
        let mut count = batch as u32;
        let in_batch = if started {
            position.as_mut_ptr().cast()
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: every buffer outlives the call and holds `count` keys or values, or a position
        // of at least a key's size; the kernel writes at most that.
        let ret = unsafe {
            call(
                map.as_fd().as_raw_fd(),
                in_batch,
                next.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        let read = (count as usize).min(batch);
        entries.keys.extend_from_slice(&keys[..read * key_size]);
        entries
            .values
            .extend_from_slice(&values[..read * value_size]);
        match -ret {
            0 if read == 0 => return Some(entries),
            0 => {}
            libc::ENOENT => return Some(entries),
            libc::ENOSPC if read == 0 && batch < (1 << 20) => {
                batch *= 4;
                continue;
            }
            _ => return None,
        }
        std::mem::swap(&mut position, &mut next);
        started = true;
    }
}
