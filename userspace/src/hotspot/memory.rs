//! Reading another process's memory through the [`Memory`] trait: [`ProcessMemory`] reads a live
//! process (`process_vm_readv`, with `/proc/PID/mem` as the fallback when the system call is not
//! allowed); tests give the readers a fake memory image instead. Every read has a bounded length;
//! an unreadable address gives `None`, never a panic.

use std::fs::File;
use std::io::IoSliceMut;
use std::os::unix::fs::FileExt;

use nix::errno::Errno;
use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

/// The longest single read: names, tables and headers are all far smaller.
pub const MAX_READ: usize = 1 << 20;

/// Most reads of [`Memory::read_all`] in one `process_vm_readv` (the kernel's `UIO_MAXIOV`).
pub const READS_PER_CALL: usize = 1024;

/// Memory of a target, read by address. Only [`Memory::read_into`] is the target's own; the other
/// reads are built on it.
pub trait Memory: std::fmt::Debug + Send + Sync {
    /// Fills `buf` from `addr`; false when any byte of the range cannot be read, or the range is
    /// longer than [`MAX_READ`] or wraps around.
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> bool;

    /// `len` bytes at `addr` (at most [`MAX_READ`]).
    fn read_bytes(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0; len.min(MAX_READ + 1)];
        self.read_into(addr, &mut buf).then_some(buf)
    }

    /// Each of `reads` (an address and a length): the bytes, or `None` for a read that
    /// [`Memory::read_bytes`] would refuse or fail. As many separate reads; a live process's
    /// memory takes up to [`READS_PER_CALL`] of them in one system call.
    fn read_all(&self, reads: &[(u64, usize)]) -> Vec<Option<Vec<u8>>> {
        reads
            .iter()
            .map(|&(addr, len)| self.read_bytes(addr, len))
            .collect()
    }

    /// The native-endian u64 at `addr`.
    fn read_u64(&self, addr: u64) -> Option<u64> {
        let mut buf = [0; 8];
        self.read_into(addr, &mut buf)
            .then(|| u64::from_ne_bytes(buf))
    }

    /// The native-endian u32 at `addr`.
    fn read_u32(&self, addr: u64) -> Option<u32> {
        let mut buf = [0; 4];
        self.read_into(addr, &mut buf)
            .then(|| u32::from_ne_bytes(buf))
    }

    /// The native-endian u16 at `addr`.
    fn read_u16(&self, addr: u64) -> Option<u16> {
        let mut buf = [0; 2];
        self.read_into(addr, &mut buf)
            .then(|| u16::from_ne_bytes(buf))
    }

    /// The byte at `addr`.
    fn read_u8(&self, addr: u64) -> Option<u8> {
        let mut buf = [0; 1];
        self.read_into(addr, &mut buf).then_some(buf[0])
    }

    /// The NUL-terminated string at `addr`, of at most `max_len` bytes (without the NUL), read in
    /// small chunks so that a string near the end of a mapping is still read. `None` if it is
    /// longer, unreadable, or not UTF-8.
    fn read_c_string(&self, addr: u64, max_len: usize) -> Option<String> {
        const CHUNK: usize = 64;
        let mut out = Vec::new();
        while out.len() <= max_len {
            let at = addr.checked_add(out.len() as u64)?;
            // Do not cross a page boundary in one read: the next page may be unmapped.
            let to_page_end = (4096 - (at % 4096)) as usize;
            let mut buf = vec![0; CHUNK.min(to_page_end)];
            if !self.read_into(at, &mut buf) {
                return None;
            }
            if let Some(nul) = buf.iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..nul]);
                return (out.len() <= max_len)
                    .then(|| String::from_utf8(out).ok())
                    .flatten();
            }
            out.extend_from_slice(&buf);
        }
        None
    }
}

/// A memory that counts the calls that read it: each [`Memory::read_into`], and each
/// [`Memory::read_all`] as one, as a live process's memory makes one system call of it.
#[cfg(test)]
#[derive(Debug)]
pub struct Counted<M> {
    mem: M,
    calls: std::sync::atomic::AtomicUsize,
}

#[cfg(test)]
impl<M: Memory> Counted<M> {
    /// Counts the reads of `mem`.
    pub fn new(mem: M) -> Counted<M> {
        Counted {
            mem,
            calls: Default::default(),
        }
    }

    /// The calls made since the last time this was asked.
    pub fn calls(&self) -> usize {
        self.calls.swap(0, std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
impl<M: Memory> Memory for Counted<M> {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.mem.read_into(addr, buf)
    }

    fn read_all(&self, reads: &[(u64, usize)]) -> Vec<Option<Vec<u8>>> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.mem.read_all(reads)
    }
}

/// Whether a read of `len` bytes at `addr` is one that [`Memory::read_into`] may attempt: not at
/// NULL, not longer than [`MAX_READ`], not wrapping around.
pub fn readable_range(addr: u64, len: usize) -> bool {
    len <= MAX_READ && addr != 0 && addr.checked_add(len as u64).is_some()
}

/// The memory of one live process.
#[derive(Debug)]
pub struct ProcessMemory {
    pid: i32,
    mem_file: Option<File>,
}

impl ProcessMemory {
    /// The memory of process `pid`. Opens `/proc/PID/mem` as a fallback; `process_vm_readv` is
    /// tried first on every read.
    pub fn new(pid: u32) -> ProcessMemory {
        let mem_file = File::open(format!("/proc/{pid}/mem")).ok();
        ProcessMemory {
            pid: pid as i32,
            mem_file,
        }
    }

    fn read_mem_file(&self, addr: u64, buf: &mut [u8]) -> bool {
        match &self.mem_file {
            Some(file) => file.read_exact_at(buf, addr).is_ok(),
            None => false,
        }
    }
}

impl Memory for ProcessMemory {
    /// The reads in batches of up to [`READS_PER_CALL`], one `process_vm_readv` each. The kernel
    /// stops a batch at the first read it cannot make whole, and says how many bytes it read:
    /// the reads before it are whole, that one failed, and the next batch starts after it.
    fn read_all(&self, reads: &[(u64, usize)]) -> Vec<Option<Vec<u8>>> {
        let mut out: Vec<Option<Vec<u8>>> = reads
            .iter()
            .map(|&(addr, len)| (len == 0 && readable_range(addr, 0)).then(Vec::new))
            .collect();
        let wanted: Vec<usize> = (0..reads.len())
            .filter(|&i| reads[i].1 > 0 && readable_range(reads[i].0, reads[i].1))
            .collect();
        let mut pos = 0;
        while pos < wanted.len() {
            let batch = &wanted[pos..wanted.len().min(pos + READS_PER_CALL)];
            let mut bufs: Vec<Vec<u8>> = batch.iter().map(|&i| vec![0; reads[i].1]).collect();
            let remote: Vec<RemoteIoVec> = batch
                .iter()
                .map(|&i| RemoteIoVec {
                    base: reads[i].0 as usize,
                    len: reads[i].1,
                })
                .collect();
            let mut local: Vec<IoSliceMut> = bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            let done = match process_vm_readv(Pid::from_raw(self.pid), &mut local, &remote) {
                Ok(n) => n,
                Err(Errno::EPERM | Errno::ENOSYS) => {
                    for &i in batch {
                        out[i] = self.read_bytes(reads[i].0, reads[i].1);
                    }
                    pos += batch.len();
                    continue;
                }
                Err(Errno::ESRCH) => break,
                // Nothing read: the first read failed.
                Err(_) => 0,
            };
            drop(local);
            let mut read = 0;
            let mut whole = 0;
            for (&i, buf) in batch.iter().zip(bufs) {
                read += buf.len();
                if read > done {
                    break;
                }
                out[i] = Some(buf);
                whole += 1;
            }
            // The read after the whole ones failed (if the batch was cut short).
            pos += (whole + 1).min(batch.len());
        }
        out
    }

    fn read_into(&self, addr: u64, buf: &mut [u8]) -> bool {
        if !readable_range(addr, buf.len()) {
            return false;
        }
        if buf.is_empty() {
            return true;
        }
        let remote = [RemoteIoVec {
            base: addr as usize,
            len: buf.len(),
        }];
        let len = buf.len();
        match process_vm_readv(
            Pid::from_raw(self.pid),
            &mut [IoSliceMut::new(buf)],
            &remote,
        ) {
            Ok(n) => n == len,
            Err(Errno::EPERM | Errno::ENOSYS) => self.read_mem_file(addr, buf),
            Err(_) => false,
        }
    }
}

/// The `N` bytes at `offset` in `bytes`, if they are all inside it.
pub fn array_at<const N: usize>(bytes: &[u8], offset: u64) -> Option<[u8; N]> {
    let start = usize::try_from(offset).ok()?;
    bytes.get(start..start.checked_add(N)?)?.try_into().ok()
}

/// The native-endian u64 at `offset` in `bytes`.
pub fn word(bytes: &[u8], offset: u64) -> Option<u64> {
    array_at(bytes, offset).map(u64::from_ne_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_memory() {
        let value: u64 = 0x1122_3344_5566_7788;
        let text = b"hello\0";
        let mem = ProcessMemory::new(std::process::id());
        assert_eq!(mem.read_u64(&value as *const u64 as u64), Some(value));
        assert_eq!(
            mem.read_c_string(text.as_ptr() as u64, 16).as_deref(),
            Some("hello")
        );
        assert_eq!(mem.read_c_string(text.as_ptr() as u64, 4), None);
    }

    #[test]
    fn many_reads_in_few_calls_fail_one_by_one() {
        let values: Vec<u64> = (0..3000).collect();
        let at = |i: usize| &values[i] as *const u64 as u64;
        let mut reads: Vec<(u64, usize)> = (0..3000).map(|i| (at(i), 8)).collect();
        // Unmapped, refused, empty, and NULL among them; a failure ends a batch early.
        reads[5] = (8, 8);
        reads[1500] = (0x1000, MAX_READ + 1);
        reads[1501] = (at(1501), 0);
        reads[2999] = (0, 0);
        let mem = ProcessMemory::new(std::process::id());
        let read = mem.read_all(&reads);
        assert_eq!(read.len(), 3000);
        for (i, bytes) in read.iter().enumerate() {
            let expected = match i {
                5 | 1500 | 2999 => None,
                1501 => Some(Vec::new()),
                _ => Some((i as u64).to_ne_bytes().to_vec()),
            };
            assert_eq!(bytes, &expected, "read {i}");
        }
        assert_eq!(
            ProcessMemory::new(u32::MAX >> 2).read_all(&reads[..3]),
            [None, None, None]
        );
    }

    #[test]
    fn bad_addresses_give_none() {
        let mem = ProcessMemory::new(std::process::id());
        assert_eq!(mem.read_u64(0), None);
        assert_eq!(mem.read_u64(8), None);
        assert_eq!(mem.read_u64(u64::MAX - 3), None);
        assert_eq!(mem.read_bytes(0x1000, MAX_READ + 1), None);
    }
}
