//! A bounded lock-free single-producer single-consumer ring: the hand-off between the ingest
//! thread and each worker. Power-of-two capacity, free-running indices on separate cache
//! lines, single items or batches (one index publication per batch).
//!
//! # Orderings (why this is correct without locks)
//! - `tail` is written only by the producer, `head` only by the consumer; each side keeps its
//!   own index in a local copy and reads the other's index only when its cached copy says the
//!   ring is full (producer) or empty (consumer).
//! - The producer writes a slot, then publishes it with `tail.store(Release)`. The consumer
//!   reads `tail` with `Acquire` before touching any slot below it, so the slot's contents
//!   happen-before the consumer's read.
//! - The consumer moves a value out of a slot, then frees it with `head.store(Release)`. The
//!   producer reads `head` with `Acquire` before reusing any slot below it, so the consumer's
//!   read happens-before the producer's overwrite.
//! - A stale cached copy of the other side's index only under-estimates free space or
//!   available items, never over-estimates it, because the indices only grow.
//! - Indices are free-running `usize` counters; `tail - head` (wrapping) is the fill level
//!   and never exceeds the capacity, so wrapping past `usize::MAX` is harmless.
//! - `closed` flags are set with `Release` after a side's last index store, and read with
//!   `Acquire`: a consumer that sees the producer closed and then finds the ring empty has
//!   seen every item.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use serde::Deserialize;

/// What the ingest does when a queue's ring is full.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnFull {
    /// Wait for room (lossless back-pressure: right for file replay and benchmarks).
    #[default]
    Wait,
    /// Drop the frames and count them as `ring_full` (what a NIC does at line rate).
    Drop,
}

struct Shared<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
    /// Next slot the consumer reads (written by the consumer only).
    head: CachePadded<AtomicUsize>,
    /// Next slot the producer writes (written by the producer only).
    tail: CachePadded<AtomicUsize>,
    producer_closed: AtomicBool,
    consumer_closed: AtomicBool,
}

// SAFETY: a slot is accessed by exactly one side at a time (the producer for slots in
// [tail, head + capacity), the consumer for slots in [head, tail)), with the hand-over
// ordered by the Release/Acquire index stores and loads described in the module comment.
// Values of T move between threads, so T must be Send.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: as above; the ring owns its values, which may be dropped on either thread.
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // Both sides are gone: drop the values still queued.
        let head = *self.head.get_mut();
        let tail = *self.tail.get_mut();
        let mut i = head;
        while i != tail {
            let slot = self.slots[i & self.mask].get_mut();
            // SAFETY: slots in [head, tail) hold initialised values that nobody moved out.
            unsafe { slot.assume_init_drop() };
            i = i.wrapping_add(1);
        }
    }
}

/// The producing end.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    tail: usize,
    head_cache: usize,
}

/// The consuming end.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    head: usize,
    tail_cache: usize,
}

impl<T> std::fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

impl<T> std::fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

/// Creates a ring holding up to `capacity` items, rounded up to a power of two (at least 1).
pub fn ring<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(1).next_power_of_two();
    let slots = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let shared = Arc::new(Shared {
        slots,
        mask: cap - 1,
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
        producer_closed: AtomicBool::new(false),
        consumer_closed: AtomicBool::new(false),
    });
    (
        Producer {
            shared: shared.clone(),
            tail: 0,
            head_cache: 0,
        },
        Consumer {
            shared,
            head: 0,
            tail_cache: 0,
        },
    )
}

impl<T> Producer<T> {
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    /// Items queued now (a snapshot).
    pub fn len(&self) -> usize {
        self.tail
            .wrapping_sub(self.shared.head.load(Ordering::Acquire))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free slots, refreshing the cached consumer index only when the cache says full.
    fn free(&mut self, want: usize) -> usize {
        let cap = self.capacity();
        let mut free = cap - self.tail.wrapping_sub(self.head_cache);
        if free < want {
            self.head_cache = self.shared.head.load(Ordering::Acquire);
            free = cap - self.tail.wrapping_sub(self.head_cache);
        }
        free
    }

    fn write(&mut self, v: T) {
        let slot = &self.shared.slots[self.tail & self.shared.mask];
        // SAFETY: the slot is free (checked by `free`): the consumer released it with a
        // Release store of `head` that our Acquire load observed, and only this producer
        // writes slots. Writing a MaybeUninit never drops the old (moved-out) value.
        unsafe { (*slot.get()).write(v) };
        self.tail = self.tail.wrapping_add(1);
    }

    /// Enqueues `v`, or gives it back when the ring is full.
    pub fn push(&mut self, v: T) -> Result<(), T> {
        if self.free(1) == 0 {
            return Err(v);
        }
        self.write(v);
        self.shared.tail.store(self.tail, Ordering::Release);
        Ok(())
    }

    /// Moves as many items as fit from the front of `items` (in order) into the ring with one
    /// publication; returns how many moved. The rest stay in `items`.
    pub fn push_batch(&mut self, items: &mut Vec<T>) -> usize {
        let n = self.free(items.len()).min(items.len());
        if n == 0 {
            return 0;
        }
        for v in items.drain(..n) {
            self.write(v);
        }
        self.shared.tail.store(self.tail, Ordering::Release);
        n
    }

    /// Whether the consumer has been dropped (nothing pushed from now on will be read).
    pub fn is_consumer_closed(&self) -> bool {
        self.shared.consumer_closed.load(Ordering::Acquire)
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        self.shared.producer_closed.store(true, Ordering::Release);
    }
}

impl<T> Consumer<T> {
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    /// Items queued now (a snapshot).
    pub fn len(&self) -> usize {
        self.shared
            .tail
            .load(Ordering::Acquire)
            .wrapping_sub(self.head)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items available, refreshing the cached producer index only when the cache says empty.
    fn available(&mut self, want: usize) -> usize {
        let mut avail = self.tail_cache.wrapping_sub(self.head);
        if avail < want {
            self.tail_cache = self.shared.tail.load(Ordering::Acquire);
            avail = self.tail_cache.wrapping_sub(self.head);
        }
        avail
    }

    fn read(&mut self) -> T {
        let slot = &self.shared.slots[self.head & self.shared.mask];
        // SAFETY: the slot is below the producer's published tail (checked by `available`,
        // whose Acquire load synchronises with the producer's Release store after writing
        // it), so it holds an initialised value; only this consumer reads slots, and `head`
        // moves past it right after, so the value is moved out exactly once.
        let v = unsafe { (*slot.get()).assume_init_read() };
        self.head = self.head.wrapping_add(1);
        v
    }

    /// Dequeues one item, `None` when the ring is empty.
    pub fn pop(&mut self) -> Option<T> {
        if self.available(1) == 0 {
            return None;
        }
        let v = self.read();
        self.shared.head.store(self.head, Ordering::Release);
        Some(v)
    }

    /// Appends up to `max` items to `out` (in order) with one release of their slots; returns
    /// how many.
    pub fn pop_batch(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        let n = self.available(max).min(max);
        if n == 0 {
            return 0;
        }
        out.reserve(n);
        for _ in 0..n {
            let v = self.read();
            out.push(v);
        }
        self.shared.head.store(self.head, Ordering::Release);
        n
    }

    /// Whether the producer has been dropped. Once it is, an empty ring stays empty: the
    /// pattern `if c.is_producer_closed() && c.pop().is_none() { /* done */ }` (checking
    /// `closed` before the last `pop`) loses nothing.
    pub fn is_producer_closed(&self) -> bool {
        self.shared.producer_closed.load(Ordering::Acquire)
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        self.shared.consumer_closed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn capacity_rounds_up() {
        assert_eq!(ring::<u8>(0).0.capacity(), 1);
        assert_eq!(ring::<u8>(5).0.capacity(), 8);
        assert_eq!(ring::<u8>(1024).1.capacity(), 1024);
    }

    #[test]
    fn fifo_full_and_empty() {
        let (mut p, mut c) = ring(4);
        assert_eq!(c.pop(), None);
        for i in 0..4 {
            p.push(i).unwrap();
        }
        assert_eq!(p.push(9), Err(9));
        assert_eq!((p.len(), c.len()), (4, 4));
        assert_eq!(c.pop(), Some(0));
        p.push(4).unwrap();
        let mut out = Vec::new();
        assert_eq!(c.pop_batch(&mut out, 10), 4);
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(c.is_empty());
    }

    #[test]
    fn batches_move_what_fits() {
        let (mut p, mut c) = ring(8);
        let mut items: Vec<u32> = (0..12).collect();
        assert_eq!(p.push_batch(&mut items), 8);
        assert_eq!(items, [8, 9, 10, 11]);
        assert_eq!(p.push_batch(&mut items), 0);
        let mut out = Vec::new();
        assert_eq!(c.pop_batch(&mut out, 3), 3);
        assert_eq!(p.push_batch(&mut items), 3);
        assert_eq!(items, [11]);
        assert_eq!(c.pop_batch(&mut out, 100), 8);
        assert_eq!(out, (0..11).collect::<Vec<_>>());
    }

    #[test]
    fn indices_wrap_past_usize_max() {
        let (mut p, mut c) = ring(4);
        // Start both sides just below the wrap point.
        let start = usize::MAX - 5;
        p.tail = start;
        p.head_cache = start;
        c.head = start;
        c.tail_cache = start;
        p.shared.head.store(start, Ordering::Relaxed);
        p.shared.tail.store(start, Ordering::Relaxed);
        for round in 0..5u32 {
            for i in 0..3 {
                p.push(round * 10 + i).unwrap();
            }
            for i in 0..3 {
                assert_eq!(c.pop(), Some(round * 10 + i));
            }
        }
        assert!(c.is_empty());
    }

    proptest::proptest! {
        /// Any sequence of single and batch operations behaves like a bounded VecDeque.
        #[test]
        fn matches_a_bounded_deque(cap in 1usize..20, ops in proptest::collection::vec((0u8..4, 0usize..12), 0..200)) {
            let (mut p, mut c) = ring::<u32>(cap);
            let cap = p.capacity();
            let mut model = std::collections::VecDeque::new();
            let mut next = 0u32;
            for (op, n) in ops {
                match op {
                    0 => {
                        let ok = p.push(next).is_ok();
                        proptest::prop_assert_eq!(ok, model.len() < cap);
                        if ok { model.push_back(next); }
                        next += 1;
                    }
                    1 => proptest::prop_assert_eq!(c.pop(), model.pop_front()),
                    2 => {
                        let mut items: Vec<u32> = (next..next + n as u32).collect();
                        let moved = p.push_batch(&mut items);
                        proptest::prop_assert_eq!(moved, n.min(cap - model.len()));
                        model.extend(next..next + moved as u32);
                        proptest::prop_assert_eq!(items.len(), n - moved);
                        next += n as u32;
                    }
                    _ => {
                        let mut out = Vec::new();
                        let got = c.pop_batch(&mut out, n);
                        let want: Vec<u32> = model.drain(..n.min(model.len())).collect();
                        proptest::prop_assert_eq!(got, want.len());
                        proptest::prop_assert_eq!(out, want);
                    }
                }
                proptest::prop_assert_eq!(c.len(), model.len());
            }
        }
    }

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn queued_values_are_dropped_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut p, mut c) = ring(8);
        for _ in 0..6 {
            assert!(p.push(Counted(drops.clone())).is_ok());
        }
        drop(c.pop());
        drop(c.pop());
        assert_eq!(drops.load(Ordering::Relaxed), 2);
        assert!(!p.is_consumer_closed());
        drop(c);
        assert!(p.is_consumer_closed());
        drop(p);
        assert_eq!(drops.load(Ordering::Relaxed), 6);
    }

    #[test]
    fn two_thread_stress_single_and_batch() {
        // Bounded: 200k items through a small ring forces many full/empty transitions.
        const N: u64 = 200_000;
        let (mut p, mut c) = ring::<u64>(64);
        let producer = std::thread::spawn(move || {
            let mut next = 0u64;
            let mut batch = Vec::with_capacity(16);
            while next < N {
                if next % 3 == 0 {
                    if p.push(next).is_ok() {
                        next += 1;
                    } else {
                        std::hint::spin_loop();
                    }
                } else {
                    while batch.len() < 16 && next + (batch.len() as u64) < N {
                        batch.push(next + batch.len() as u64);
                    }
                    let n = batch.len() as u64;
                    while !batch.is_empty() {
                        if p.push_batch(&mut batch) == 0 {
                            std::thread::yield_now();
                        }
                    }
                    next += n;
                }
            }
        });
        let mut expect = 0u64;
        let mut out = Vec::with_capacity(32);
        loop {
            let closed = c.is_producer_closed();
            out.clear();
            let got = if expect % 2 == 0 {
                c.pop_batch(&mut out, 32)
            } else {
                c.pop().map(|v| out.push(v)).map_or(0, |_| 1)
            };
            for &v in &out {
                assert_eq!(v, expect, "out of order or lost");
                expect += 1;
            }
            if got == 0 {
                if closed {
                    break;
                }
                std::thread::yield_now();
            }
        }
        producer.join().unwrap();
        assert_eq!(expect, N);
    }
}
