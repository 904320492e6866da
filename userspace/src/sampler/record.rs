//! The records the BPF sampler writes into its ring buffer (`bpf/sampler.h`), read back into Rust.
//!
//! The bytes come from the kernel, but every length is still checked: a short or inconsistent
//! record is rejected, never trusted.

/// One frame of a frame-pointer walk, as the BPF program read it from the thread's stack.
///
/// On x86_64 HotSpot, an interpreter frame keeps its `Method*` at fp-3 words and its bytecode
/// pointer at fp-8 words; for other frames these two words are whatever the frame holds there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame {
    /// The frame pointer of this frame.
    pub fp: u64,
    /// The word at fp+8: the return address, i.e. the pc in the caller of this frame.
    pub return_address: u64,
    /// The word at fp-24 (fp-3 words): an interpreter frame's `Method*`. 0 if unreadable.
    pub method_slot: u64,
    /// The word at fp-64 (fp-8 words): an interpreter frame's bytecode pointer. 0 if unreadable.
    pub bcp_slot: u64,
}

/// One stack sample of one thread of a tracked process.
///
/// `frames[0]` is the frame whose fp is `bp` (the leaf frame, when it has set up its frame
/// pointer): the leaf pc is `ip`, and `frames[i].return_address` is the pc in the caller of
/// frame `i`. The walk stops at 128 frames, at a null or misaligned fp, at an unreadable frame,
/// at a saved fp that is not above the current one, or at a null return address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The process (tgid).
    pub pid: u32,
    /// The thread (the kernel's pid of the task).
    pub tid: u32,
    /// The CPU the thread ran on.
    pub cpu: u32,
    /// When the sample was taken, CLOCK_MONOTONIC nanoseconds.
    pub time_ns: u64,
    /// The sample interrupted the thread in kernel mode (ip, sp and bp are still the user
    /// registers, from the task's saved user state).
    pub kernel: bool,
    /// User instruction pointer.
    pub ip: u64,
    /// User stack pointer.
    pub sp: u64,
    /// User frame pointer (rbp).
    pub bp: u64,
    /// The frame-pointer walk, from `bp` towards the thread's first frame.
    pub frames: Vec<RawFrame>,
}

/// The most frames one sample holds (`JP_MAX_FRAMES`).
pub const MAX_FRAMES: usize = 128;
/// Bytes of `struct jp_sample` before its frames.
const HEADER_LEN: usize = 56;
/// Bytes of one `struct jp_frame`.
const FRAME_LEN: usize = 32;
/// Bytes of one whole `struct jp_sample`, as reserved in the ring buffer.
pub const RECORD_LEN: usize = HEADER_LEN + MAX_FRAMES * FRAME_LEN;
/// `jp_sample.flags`: the sample landed in kernel mode.
const FLAG_KERNEL: u32 = 1;

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_ne_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_ne_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}

impl Sample {
    /// Reads one ring-buffer record. `None` if it is shorter than its header, claims more than
    /// 128 frames, or is shorter than the frames it claims.
    pub fn parse(bytes: &[u8]) -> Option<Sample> {
        if bytes.len() < HEADER_LEN {
            return None;
        }
        let nframes = u32_at(bytes, 48) as usize;
        if nframes > MAX_FRAMES || bytes.len() < HEADER_LEN + nframes * FRAME_LEN {
            return None;
        }
        let frames = bytes[HEADER_LEN..HEADER_LEN + nframes * FRAME_LEN]
            .chunks_exact(FRAME_LEN)
            .map(|frame| RawFrame {
                fp: u64_at(frame, 0),
                return_address: u64_at(frame, 8),
                method_slot: u64_at(frame, 16),
                bcp_slot: u64_at(frame, 24),
            })
            .collect();
        Some(Sample {
            pid: u32_at(bytes, 0),
            tid: u32_at(bytes, 4),
            cpu: u32_at(bytes, 8),
            kernel: u32_at(bytes, 12) & FLAG_KERNEL != 0,
            time_ns: u64_at(bytes, 16),
            ip: u64_at(bytes, 24),
            sp: u64_at(bytes, 32),
            bp: u64_at(bytes, 40),
            frames,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(nframes: u32, flags: u32) -> Vec<u8> {
        let mut bytes = Vec::new();
        for word in [7u32, 9, 1, flags] {
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        for word in [1_000u64, 0x40_1000, 0x7ff0_0000, 0x7ff0_0100] {
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        bytes.extend_from_slice(&nframes.to_ne_bytes());
        bytes.extend_from_slice(&0u32.to_ne_bytes());
        for i in 0..MAX_FRAMES as u64 {
            for word in [
                0x7ff0_0100 + i * 0x40,
                0x40_2000 + i,
                0xa000 + i,
                0xb000 + i,
            ] {
                bytes.extend_from_slice(&word.to_ne_bytes());
            }
        }
        bytes
    }

    #[test]
    fn reads_the_header_and_the_valid_frames_only() {
        let sample = Sample::parse(&record(2, 1)).expect("a valid record");
        assert_eq!((sample.pid, sample.tid, sample.cpu), (7, 9, 1));
        assert!(sample.kernel);
        assert_eq!(sample.time_ns, 1_000);
        assert_eq!(
            (sample.ip, sample.sp, sample.bp),
            (0x40_1000, 0x7ff0_0000, 0x7ff0_0100)
        );
        assert_eq!(
            sample.frames,
            vec![
                RawFrame {
                    fp: 0x7ff0_0100,
                    return_address: 0x40_2000,
                    method_slot: 0xa000,
                    bcp_slot: 0xb000
                },
                RawFrame {
                    fp: 0x7ff0_0140,
                    return_address: 0x40_2001,
                    method_slot: 0xa001,
                    bcp_slot: 0xb001
                },
            ]
        );
        assert!(!Sample::parse(&record(0, 0)).expect("no frames").kernel);
    }

    #[test]
    fn rejects_short_or_inconsistent_records() {
        assert_eq!(Sample::parse(&record(2, 0)[..40]), None);
        assert_eq!(Sample::parse(&record(129, 0)), None);
        assert_eq!(
            Sample::parse(&record(3, 0)[..HEADER_LEN + 2 * FRAME_LEN]),
            None
        );
        assert!(Sample::parse(&record(128, 0)).is_some());
    }
}
