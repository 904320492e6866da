//! The samples the signal handler takes, on their way to the monitor thread: a bounded ring of
//! slots allocated once, each big enough for one whole stack, that the handler fills in place
//! (AsyncGetCallTrace writes its frames straight into the slot) without allocating or locking.
//!
//! Many threads may write (each from its own signal handler), one thread reads. Each slot has a
//! sequence number (Dmitry Vyukov's bounded queue): a writer claims the slot of the next
//! position with a compare-and-swap of the head, fills it, then publishes it by storing the
//! position + 1 in its sequence (release); the reader takes slots in order while their sequence
//! says so (acquire), then frees each for the writer one lap later. A full ring drops the sample
//! and counts it: a handler never waits.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::jvmti::{Jint, JmethodId};

/// The most frames kept of a stack (the newest ones).
pub const MAX_FRAMES: usize = 512;

/// `ASGCT_CallFrame`: one frame as AsyncGetCallTrace gives it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CallFrame {
    /// The bytecode index (or a negative code for a native frame).
    pub bci: Jint,
    /// The method.
    pub method: JmethodId,
}

/// What a writer fills in.
pub struct Record {
    /// Which thread was sampled (its OS id).
    pub thread: u64,
    /// AsyncGetCallTrace's frame count, or one of its negative error codes, or
    /// [`Record::NOT_JAVA`].
    pub status: Jint,
    /// The frames, newest first; the first `status` of them when it is positive.
    pub frames: [CallFrame; MAX_FRAMES],
}

impl Record {
    /// The thread is not attached to the JVM: one of its own native threads (GC, VM thread) or
    /// one of a native library's.
    pub const NOT_JAVA: Jint = -100;
}

struct Slot {
    sequence: AtomicU64,
    record: UnsafeCell<Record>,
}

/// The ring.
pub struct Ring {
    slots: Box<[Slot]>,
    mask: u64,
    head: AtomicU64,
    /// The reader's position (only the reader moves it).
    tail: AtomicU64,
    drops: AtomicU64,
}

// SAFETY: a slot's record is written only by the writer that claimed it, and read only by the
// reader after its publication, the sequence number ordering the two; the method ids in it are
// plain values.
unsafe impl Sync for Ring {}
unsafe impl Send for Ring {}

impl Ring {
    /// A ring of `capacity` slots, rounded up to a power of two.
    pub fn new(capacity: usize) -> Ring {
        let capacity = capacity.max(2).next_power_of_two();
        let slots = (0..capacity)
            .map(|index| Slot {
                sequence: AtomicU64::new(index as u64),
                record: UnsafeCell::new(Record {
                    thread: 0,
                    status: 0,
                    frames: [CallFrame {
                        bci: 0,
                        method: std::ptr::null_mut(),
                    }; MAX_FRAMES],
                }),
            })
            .collect();
        Ring {
            slots,
            mask: capacity as u64 - 1,
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            drops: AtomicU64::new(0),
        }
    }

    /// Claims a slot, lets `fill` write the sample into it and publishes it; drops the sample
    /// when the ring is full. Async-signal-safe: no allocation, no lock, no wait.
    pub fn push(&self, fill: impl FnOnce(&mut Record)) {
        let mut position = self.head.load(Ordering::Relaxed);
        let slot = loop {
            let slot = &self.slots[(position & self.mask) as usize];
            let sequence = slot.sequence.load(Ordering::Acquire);
            if sequence == position {
                match self.head.compare_exchange_weak(
                    position,
                    position + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break slot,
                    Err(now) => position = now,
                }
            } else if sequence < position {
                // The reader has not freed this slot yet: full
                self.drops.fetch_add(1, Ordering::Relaxed);
                return;
            } else {
                position = self.head.load(Ordering::Relaxed);
            }
        };
        // SAFETY: this writer alone claimed the slot at `position`.
        fill(unsafe { &mut *slot.record.get() });
        slot.sequence.store(position + 1, Ordering::Release);
    }

    /// Hands each published sample to `each`, in order, and frees its slot. Only one thread may
    /// read.
    pub fn drain(&self, mut each: impl FnMut(&Record)) {
        let mut position = self.tail.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[(position & self.mask) as usize];
            if slot.sequence.load(Ordering::Acquire) != position + 1 {
                break;
            }
            // SAFETY: published by its writer, and not written again until freed below.
            each(unsafe { &*slot.record.get() });
            slot.sequence
                .store(position + self.mask + 1, Ordering::Release);
            position += 1;
        }
        self.tail.store(position, Ordering::Relaxed);
    }

    /// Samples written so far (the head's position: nothing more to count).
    pub fn pushed(&self) -> u64 {
        self.head.load(Ordering::Relaxed)
    }

    /// Samples dropped so far because the ring was full.
    pub fn drops(&self) -> u64 {
        self.drops.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn samples_come_out_in_order_and_a_full_ring_drops() {
        let ring = Ring::new(3);
        for thread in 1..=5 {
            ring.push(|record| {
                record.thread = thread;
                record.status = 1;
            });
        }
        assert_eq!((ring.pushed(), ring.drops()), (4, 1), "4 slots");
        let mut seen = Vec::new();
        ring.drain(|record| seen.push(record.thread));
        assert_eq!(seen, [1, 2, 3, 4]);
        ring.push(|record| record.thread = 6);
        ring.drain(|record| seen.push(record.thread));
        assert_eq!(seen, [1, 2, 3, 4, 6]);
    }

    #[test]
    fn many_writers_one_reader_lose_nothing_they_do_not_count() {
        let ring = Arc::new(Ring::new(64));
        let writers: Vec<_> = (0..4u64)
            .map(|writer| {
                let ring = ring.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        ring.push(|record| {
                            record.thread = writer;
                            record.status = i as Jint;
                            record.frames[0].bci = i as Jint;
                        });
                    }
                })
            })
            .collect();
        let mut last = [-1i64; 4];
        let mut read = 0u64;
        let mut reading = || {
            ring.drain(|record| {
                let writer = record.thread as usize;
                assert_eq!(record.status, record.frames[0].bci, "a whole record");
                assert!(
                    i64::from(record.status) > last[writer],
                    "in order per writer"
                );
                last[writer] = i64::from(record.status);
                read += 1;
            })
        };
        while writers.iter().any(|w| !w.is_finished()) {
            reading();
        }
        reading();
        for writer in writers {
            writer.join().unwrap();
        }
        assert_eq!(read + ring.drops(), 40_000);
    }
}
