//! A replace takes no group: [`Prefixes::insert`] of a route already there
//! asks its [`Arrays`] for no room, so it (and taking back a replace after
//! a write of many routes ran out of groups) cannot fail for want of one.

use std::sync::atomic::{AtomicU32, Ordering};

use vrhost_fib::{Arrays, FibError, Prefixes, ROOT_BITS};

/// Fixed arrays with `cap` groups, handed out in order, never reused.
struct Fixed {
    root: Vec<AtomicU32>,
    pool: Vec<AtomicU32>,
    next: u32,
    cap: u32,
    asked: usize,
}

impl Fixed {
    fn new(cap: u32) -> Self {
        Fixed {
            root: (0..1u32 << ROOT_BITS).map(|_| AtomicU32::new(0)).collect(),
            pool: (0..cap * 256).map(|_| AtomicU32::new(0)).collect(),
            next: 0,
            cap,
            asked: 0,
        }
    }

    /// The entry for `addr`, walking the groups.
    fn lookup(&self, addr: u32) -> u32 {
        let mut e = self.root[(addr >> 16) as usize].load(Ordering::Relaxed);
        for shift in [8, 0] {
            if e & (1 << 31) == 0 {
                break;
            }
            let g = (e & !(1 << 31)) as usize;
            e = self.pool[(g << 8) | ((addr >> shift) & 0xff) as usize].load(Ordering::Relaxed);
        }
        e
    }
}

impl Arrays for Fixed {
    fn root(&self) -> &[AtomicU32] {
        &self.root
    }

    fn pool(&self) -> &[AtomicU32] {
        &self.pool
    }

    fn reserve(&mut self, n: usize) -> Result<(), FibError> {
        self.asked += 1;
        if (self.cap - self.next) as usize >= n {
            Ok(())
        } else {
            Err(FibError::Capacity {
                groups: self.next as usize,
            })
        }
    }

    fn alloc(&mut self) -> u32 {
        assert!(self.next < self.cap, "alloc past what reserve allowed");
        self.next += 1;
        self.next - 1
    }

    fn release(&mut self, _g: u32) {}
}

#[test]
fn a_replace_with_the_groups_full_works_and_asks_for_none() {
    let mut a = Fixed::new(2);
    let mut p: Prefixes<u32> = Prefixes::new();
    // A /24 (one group) and a /32 (two groups) in other /16s: 3 groups in 2.
    p.insert(&mut a, 0x0b01_0100, 24, 1).expect("one group");
    let e = p
        .insert(&mut a, 0x0b02_0207, 32, 1)
        .expect_err("two more in one");
    assert!(matches!(e, FibError::Capacity { .. }), "{e:?}");
    // One group left: no new route needing two fits, yet a replace does.
    let asked = a.asked;
    assert_eq!(p.insert(&mut a, 0x0b01_0100, 24, 2), Ok(Some(1)));
    assert_eq!(a.asked, asked, "a replace asks for no room");
    assert_eq!(a.lookup(0x0b01_0107), a.lookup(0x0b01_01fe));
    assert_eq!(a.lookup(0x0b01_0107) & 0x7f_ffff, 2, "the new next hop");
    assert_eq!(a.next, 1, "no group taken");
}
