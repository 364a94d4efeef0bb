//! `Writer::write` does not allocate once its block buffer has its working
//! size. (Its own test binary: the counting allocator is global.)

#[path = "support/mix.rs"]
mod mix;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steady_state_writes_do_not_allocate() {
    let recs = mix::records(mix::Flavor::Nvhpc, 20_000);
    let mut w = accprof_trace::Writer::new(std::io::sink(), &mix::sample_header()).expect("header");
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for r in &recs {
        w.write(r).expect("write");
    }
    w.flush().expect("flush");
    let during = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert!(w.bytes_written() > 8 * 64 * 1024, "many blocks were sealed");
    assert_eq!(
        during,
        0,
        "allocations while writing {} records",
        recs.len()
    );
}
