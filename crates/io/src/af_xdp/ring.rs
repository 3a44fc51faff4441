//! The AF_XDP rings as user space sees them: single-producer,
//! single-consumer, power-of-two rings of descriptors in memory shared with
//! the kernel, each with a producer and a consumer index (free-running
//! `u32`s, wrapping) and a flags word.
//!
//! User space produces into the fill and tx rings and consumes from the rx
//! and completion rings. Like libxdp, each side keeps a cached copy of the
//! peer's index and reads the shared one only when the cache says there is
//! no room or nothing to read, so a burst costs one shared load and one
//! shared store.
//!
//! The kernel's index is untrusted input: a value that would put more than
//! `size` entries between the two indexes is refused (counted in
//! `bad_index`), never followed. Entries are always addressed as
//! `index & mask`, so no index can reach outside the ring.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering, fence};

use super::sys::XDP_RING_NEED_WAKEUP;

/// Where a ring lives in a mapping.
#[derive(Debug, Clone, Copy)]
pub(super) struct RingMem<T> {
    pub producer: *const AtomicU32,
    pub consumer: *const AtomicU32,
    pub flags: *const AtomicU32,
    pub desc: *mut T,
    /// Entries, a power of two.
    pub size: u32,
}

impl<T> RingMem<T> {
    /// The ring at byte offsets `off` of the mapping at `base`, `len` bytes
    /// long, checking that every part lies inside it and is aligned.
    ///
    /// The pointers are only valid while the mapping is.
    pub(super) fn in_mapping(
        base: *mut u8,
        len: usize,
        off: &super::sys::XdpRingOffset,
        size: u32,
    ) -> Option<RingMem<T>> {
        let word = |o: u64| -> Option<usize> {
            let o = usize::try_from(o).ok()?;
            (o % align_of::<AtomicU32>() == 0 && o.checked_add(4)? <= len).then_some(o)
        };
        let (p, c, f) = (word(off.producer)?, word(off.consumer)?, word(off.flags)?);
        let d = usize::try_from(off.desc).ok()?;
        let end = d.checked_add(size_of::<T>().checked_mul(size as usize)?)?;
        if !size.is_power_of_two() || d % align_of::<T>() != 0 || end > len {
            return None;
        }
        // Pointer arithmetic inside one mapping: every offset was checked
        // against its length above (`wrapping_add` keeps this safe code).
        Some(RingMem {
            producer: base.wrapping_add(p).cast(),
            consumer: base.wrapping_add(c).cast(),
            flags: base.wrapping_add(f).cast(),
            desc: base.wrapping_add(d).cast(),
            size,
        })
    }
}

/// Shared parts of both ring directions.
#[derive(Debug)]
struct Ring<T> {
    mem: RingMem<T>,
    mask: u32,
    /// Kernel indexes refused as impossible.
    bad_index: u64,
}

impl<T: Copy> Ring<T> {
    /// # Safety
    /// Every pointer of `mem` is valid (aligned, inside live memory shared
    /// with the kernel or a test's stand-in) for the life of the ring, and
    /// `desc` points to `size` entries.
    unsafe fn new(mem: RingMem<T>) -> Self {
        debug_assert!(mem.size.is_power_of_two());
        Ring {
            mem,
            mask: mem.size - 1,
            bad_index: 0,
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: valid and aligned for the ring's life (`new`'s contract);
        // the kernel accesses it only atomically.
        unsafe { &*self.mem.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as `producer`.
        unsafe { &*self.mem.consumer }
    }

    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as `producer`.
        unsafe { &*self.mem.flags }
    }

    /// Whether the ring's flags word asks for a system call.
    fn needs_wakeup(&self) -> bool {
        // SeqCst fence: the producer store of `submit` must be globally
        // visible before we read the flag, or we could read a stale "no
        // wakeup needed" while the kernel, having just set it, reads our
        // stale producer index and goes to sleep (the Dekker pattern: the
        // kernel side sets the flag, then looks at the ring again).
        fence(Ordering::SeqCst);
        // Relaxed: the fence above orders it; the flag carries no data.
        self.flags().load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    fn read(&self, index: u32) -> T {
        let slot = (index & self.mask) as usize;
        // SAFETY: `slot < size` and `desc` points to `size` entries (`new`'s
        // contract). Volatile: the value is read exactly once into a local,
        // which the caller validates; the acquire load that made the entry
        // visible was done by the caller (`ConsRing::available`).
        unsafe { self.mem.desc.add(slot).read_volatile() }
    }

    fn write(&self, index: u32, value: T) {
        let slot = (index & self.mask) as usize;
        // SAFETY: `slot < size` as in `read`; the entry belongs to user space
        // until the release store of `submit` publishes it.
        unsafe { self.mem.desc.add(slot).write_volatile(value) }
    }
}

/// A ring user space produces into (fill: frame addresses; tx: descriptors).
#[derive(Debug)]
pub(super) struct ProdRing<T> {
    ring: Ring<T>,
    /// Next index to write (private until `submit`).
    prod: u32,
    /// The kernel's consumer index as last read, plus `size`: `cons_end -
    /// prod` entries are known free.
    cons_end: u32,
    _t: PhantomData<T>,
}

impl<T: Copy> ProdRing<T> {
    /// A producer view of a ring that the kernel just created (both indexes
    /// are read once, the kernel's starting point).
    ///
    /// # Safety
    /// As [`Ring::new`].
    pub(super) unsafe fn new(mem: RingMem<T>) -> Self {
        // SAFETY: forwarded contract.
        let ring = unsafe { Ring::new(mem) };
        // Relaxed: nothing else runs on the ring before setup ends.
        let prod = ring.producer().load(Ordering::Relaxed);
        let cons = ring.consumer().load(Ordering::Relaxed);
        ProdRing {
            prod,
            cons_end: cons.wrapping_add(mem.size),
            ring,
            _t: PhantomData,
        }
    }

    /// How many of `want` entries can be written now.
    pub(super) fn free(&mut self, want: u32) -> u32 {
        let free = self.cons_end.wrapping_sub(self.prod);
        if free >= want {
            return want;
        }
        // Acquire: pairs with the kernel's release of its consumer index
        // (smp_mb before STORE ->consumer in xsk_queue.h), so its reads of
        // the entries it consumed happen before we overwrite them.
        let cons = self.ring.consumer().load(Ordering::Acquire);
        let used = self.prod.wrapping_sub(cons);
        if used > self.ring.mem.size {
            // The consumer claims to be ahead of us, or more than a ring
            // behind: refuse it, keep the last sane view.
            self.ring.bad_index += 1;
            return free.min(want);
        }
        self.cons_end = cons.wrapping_add(self.ring.mem.size);
        (self.ring.mem.size - used).min(want)
    }

    /// Write entry `i` of the batch being produced (`i < free(..)`).
    pub(super) fn put(&mut self, i: u32, value: T) {
        self.ring.write(self.prod.wrapping_add(i), value);
    }

    /// Publish `n` written entries to the kernel.
    pub(super) fn submit(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.prod = self.prod.wrapping_add(n);
        // Release: pairs with the kernel's acquire of the producer index
        // (LOAD ->producer, smp_rmb), so the entries written by `put` are
        // visible before the kernel reads them.
        self.ring.producer().store(self.prod, Ordering::Release);
    }

    /// Entries produced that the kernel has not consumed yet.
    pub(super) fn outstanding(&self) -> u32 {
        // Acquire: as in `free`.
        let cons = self.ring.consumer().load(Ordering::Acquire);
        self.prod.wrapping_sub(cons).min(self.ring.mem.size)
    }

    /// Whether the kernel asks for a system call to make progress on this
    /// ring.
    pub(super) fn needs_wakeup(&self) -> bool {
        self.ring.needs_wakeup()
    }

    /// Kernel consumer indexes refused.
    pub(super) fn bad_index(&self) -> u64 {
        self.ring.bad_index
    }
}

/// A ring user space consumes from (rx: descriptors; completion: frame
/// addresses).
#[derive(Debug)]
pub(super) struct ConsRing<T> {
    ring: Ring<T>,
    /// Next index to read (private until `release`).
    cons: u32,
    /// The kernel's producer index as last read.
    prod: u32,
    _t: PhantomData<T>,
}

impl<T: Copy> ConsRing<T> {
    /// A consumer view of a ring the kernel just created.
    ///
    /// # Safety
    /// As [`Ring::new`].
    pub(super) unsafe fn new(mem: RingMem<T>) -> Self {
        // SAFETY: forwarded contract.
        let ring = unsafe { Ring::new(mem) };
        // Relaxed: nothing else runs on the ring before setup ends.
        let cons = ring.consumer().load(Ordering::Relaxed);
        ConsRing {
            cons,
            prod: cons,
            ring,
            _t: PhantomData,
        }
    }

    /// How many entries (at most `max`) can be read now. Reads the kernel's
    /// producer index only when the cached one cannot fill the request.
    pub(super) fn available(&mut self, max: u32) -> u32 {
        let mut n = self.prod.wrapping_sub(self.cons);
        if n < max {
            // Acquire: pairs with the kernel's release of its producer index
            // (smp_wmb before STORE ->producer), so the entries it wrote are
            // visible before `get` reads them.
            let prod = self.ring.producer().load(Ordering::Acquire);
            n = prod.wrapping_sub(self.cons);
            if n > self.ring.mem.size {
                // More entries than the ring holds, or behind us: refused.
                self.ring.bad_index += 1;
                return 0;
            }
            self.prod = prod;
        }
        n.min(max)
    }

    /// Read entry `i` of the available batch (`i < available(..)`).
    pub(super) fn get(&self, i: u32) -> T {
        self.ring.read(self.cons.wrapping_add(i))
    }

    /// Hand `n` read entries back to the kernel.
    pub(super) fn release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cons = self.cons.wrapping_add(n);
        // Release: pairs with the kernel's acquire of the consumer index
        // before it reuses the entries (smp_mb (A) in xsk_queue.h): our
        // reads of them are done first.
        self.ring.consumer().store(self.cons, Ordering::Release);
    }

    /// Whether the kernel asks for a system call (set on the fill ring by
    /// zero-copy drivers; never needed here on a consumer ring, kept for
    /// symmetry in tests).
    #[cfg(test)]
    pub(super) fn needs_wakeup(&self) -> bool {
        self.ring.needs_wakeup()
    }

    /// Kernel producer indexes refused.
    pub(super) fn bad_index(&self) -> u64 {
        self.ring.bad_index
    }
}

/// Test stand-in for a ring's shared memory: what the kernel would map.
#[cfg(test)]
pub(super) mod fake {
    use super::*;

    /// Indexes and flags on their own words, then `size` entries.
    pub(crate) struct FakeRing<T> {
        pub producer: Box<AtomicU32>,
        pub consumer: Box<AtomicU32>,
        pub flags: Box<AtomicU32>,
        pub desc: Box<[T]>,
    }

    impl<T: Copy + Default> FakeRing<T> {
        pub(crate) fn new(size: u32) -> Self {
            FakeRing {
                producer: Box::default(),
                consumer: Box::default(),
                flags: Box::default(),
                desc: vec![T::default(); size as usize].into_boxed_slice(),
            }
        }

        pub(crate) fn mem(&mut self) -> RingMem<T> {
            RingMem {
                producer: &*self.producer,
                consumer: &*self.consumer,
                flags: &*self.flags,
                desc: self.desc.as_mut_ptr(),
                size: self.desc.len() as u32,
            }
        }

        /// Kernel side of a ring user space produces into: take all.
        pub(crate) fn kernel_take(&mut self) -> Vec<T> {
            let prod = self.producer.load(Ordering::Acquire);
            let cons = self.consumer.load(Ordering::Relaxed);
            let mask = self.desc.len() as u32 - 1;
            let out = (0..prod.wrapping_sub(cons))
                .map(|i| self.desc[(cons.wrapping_add(i) & mask) as usize])
                .collect();
            self.consumer.store(prod, Ordering::Release);
            out
        }

        /// Kernel side of a ring user space consumes from: append entries.
        pub(crate) fn kernel_put(&mut self, items: &[T]) {
            let prod = self.producer.load(Ordering::Relaxed);
            let mask = self.desc.len() as u32 - 1;
            for (k, v) in items.iter().enumerate() {
                self.desc[(prod.wrapping_add(k as u32) & mask) as usize] = *v;
            }
            self.producer
                .store(prod.wrapping_add(items.len() as u32), Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeRing;
    use super::*;
    use crate::af_xdp::sys::XdpRingOffset;

    #[test]
    fn produce_and_consume_wrap_around() {
        let mut f = FakeRing::<u64>::new(8);
        // Start near the u32 wrap, as a long-running ring will be.
        f.producer.store(u32::MAX - 3, Ordering::Relaxed);
        f.consumer.store(u32::MAX - 3, Ordering::Relaxed);
        // SAFETY: `f` outlives the ring; its memory is what `mem` points to.
        let mut p = unsafe { ProdRing::new(f.mem()) };
        let mut total = 0u64;
        for round in 0..10u64 {
            let n = p.free(5);
            assert_eq!(n, 5);
            for i in 0..n {
                p.put(i, round * 10 + u64::from(i));
            }
            p.submit(n);
            assert_eq!(p.outstanding(), 5);
            let got = f.kernel_take();
            assert_eq!(got, (0..5).map(|i| round * 10 + i).collect::<Vec<_>>());
            total += got.len() as u64;
        }
        assert_eq!(total, 50);
        // Full ring: 8 free at most, then none until the kernel consumes.
        assert_eq!(p.free(100), 8);
        p.submit(8);
        assert_eq!(p.free(1), 0);
        f.kernel_take();
        assert_eq!(p.free(3), 3);
    }

    #[test]
    fn consumer_reads_what_kernel_put() {
        let mut f = FakeRing::<u64>::new(4);
        // SAFETY: `f` outlives the ring.
        let mut c = unsafe { ConsRing::new(f.mem()) };
        assert_eq!(c.available(32), 0);
        f.kernel_put(&[1, 2, 3]);
        assert_eq!(c.available(2), 2);
        assert_eq!((c.get(0), c.get(1)), (1, 2));
        c.release(2);
        assert_eq!(f.consumer.load(Ordering::Relaxed), 2);
        assert_eq!(c.available(32), 1);
        assert_eq!(c.get(0), 3);
        c.release(1);
        assert!(!c.needs_wakeup());
    }

    #[test]
    fn impossible_kernel_indexes_are_refused() {
        let mut f = FakeRing::<u64>::new(4);
        // SAFETY: `f` outlives the rings.
        let mut c = unsafe { ConsRing::new(f.mem()) };
        // Producer claims 1000 entries in a ring of 4.
        f.producer.store(1000, Ordering::Release);
        assert_eq!(c.available(32), 0);
        assert_eq!(c.bad_index(), 1);
        // Producer behind the consumer.
        f.producer.store(u32::MAX, Ordering::Release);
        assert_eq!(c.available(32), 0);
        assert_eq!(c.bad_index(), 2);

        let mut g = FakeRing::<u64>::new(4);
        // SAFETY: `g` outlives the ring.
        let mut p = unsafe { ProdRing::new(g.mem()) };
        let n = p.free(4);
        p.submit(n);
        // Consumer claims to be ahead of what was produced.
        g.consumer.store(100, Ordering::Release);
        assert_eq!(p.free(1), 0);
        assert_eq!(p.bad_index(), 1);
        assert_eq!(p.outstanding(), 4, "clamped to the ring size");
    }

    #[test]
    fn ring_layout_is_checked_against_the_mapping() {
        let base = std::ptr::null_mut::<u8>().wrapping_add(4096);
        let off = XdpRingOffset {
            producer: 0,
            consumer: 64,
            flags: 128,
            desc: 192,
        };
        assert!(RingMem::<u64>::in_mapping(base, 192 + 8 * 64, &off, 64).is_some());
        // Descriptors past the end.
        assert!(RingMem::<u64>::in_mapping(base, 192 + 8 * 63, &off, 64).is_none());
        // Not a power of two.
        assert!(RingMem::<u64>::in_mapping(base, 4096, &off, 48).is_none());
        // A misaligned index word.
        let bad = XdpRingOffset {
            consumer: 66,
            ..off
        };
        assert!(RingMem::<u64>::in_mapping(base, 4096, &bad, 64).is_none());
        // An offset that overflows.
        let huge = XdpRingOffset {
            desc: u64::MAX - 4,
            ..off
        };
        assert!(RingMem::<u64>::in_mapping(base, 4096, &huge, 64).is_none());
    }
}
