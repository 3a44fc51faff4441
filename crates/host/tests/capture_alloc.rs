//! A capture tap's worker side never allocates: every buffer is made when
//! the tap is, and copying a frame only moves buffers between queues. Checked
//! with a counting allocator (in its own test binary, so other tests are
//! not counted), on the producer's thread only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use vrhost_host::capture::{Direction, TapConfig, tap};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the
// thread-local counter does not allocate (a const-initialized Cell).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

#[test]
fn copying_frames_never_allocates_on_the_worker_side() {
    let (mut t, mut r) = tap(&TapConfig {
        entries: 512,
        snaplen: 128,
        ..TapConfig::default()
    });
    let frame = [7u8; 200];
    let mut copied = 0u64;
    let mut refused = 0u64;
    let mut producer_allocs = 0;
    let mut read = 0;
    for round in 0..2000 {
        let before = allocs();
        // A burst, more than the queue holds every few rounds: copies,
        // refusals, refills and publishing are all exercised.
        for i in 0..48u16 {
            let dir = if i % 2 == 0 {
                Direction::In
            } else {
                Direction::Out
            };
            if t.copy(dir, i % 3, &frame) {
                copied += 1;
            } else {
                refused += 1;
            }
        }
        t.end_burst();
        producer_allocs += allocs() - before;
        // The reader (not counted) keeps up only now and then.
        if round % 16 == 0 {
            read += r.read(usize::MAX, |rec| assert_eq!(rec.data().len(), 128));
        }
    }
    assert_eq!(producer_allocs, 0, "the worker side allocated");
    // The counter does count.
    let before = allocs();
    let v = std::hint::black_box(vec![0u8; 64]);
    assert_eq!(allocs(), before + 1);
    drop(v);
    assert!(
        copied > 0 && refused > 0,
        "{copied} copied, {refused} refused"
    );
    read += r.read(usize::MAX, |_| {});
    assert_eq!(read as u64, copied);
}
