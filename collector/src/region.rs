//! Which OpenACC construct instance a thread is inside.
//!
//! Every construct start (compute, enter/exit data, update, wait) opens a
//! region with a fresh id; its end closes it. Events in between (data
//! events, launches) and the driver calls CUPTI reports on the same thread
//! belong to the innermost open region.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use accprof_trace::RegionId;

static NEXT: AtomicU64 = AtomicU64::new(1);

const DEPTH: usize = 16;

thread_local! {
    static STACK: Cell<([u64; DEPTH], usize)> = const { Cell::new(([0; DEPTH], 0)) };
}

/// Opens a region on this thread and returns its id.
pub fn open() -> RegionId {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let _ = STACK.try_with(|s| {
        let (mut ids, n) = s.get();
        if n < DEPTH {
            ids[n] = id;
        }
        // Past DEPTH we only count, so closes stay balanced.
        s.set((ids, n + 1));
    });
    RegionId(id)
}

/// Closes the innermost region and returns its id (0 when none is open: an
/// end event whose start was not seen).
pub fn close() -> RegionId {
    STACK
        .try_with(|s| {
            let (ids, n) = s.get();
            if n == 0 {
                return RegionId(0);
            }
            s.set((ids, n - 1));
            RegionId(if n <= DEPTH { ids[n - 1] } else { 0 })
        })
        .unwrap_or(RegionId(0))
}

/// How many regions are open on this thread.
pub fn depth() -> usize {
    STACK.try_with(|s| s.get().1).unwrap_or(0)
}

/// The innermost open region on this thread (0 when none).
pub fn current() -> RegionId {
    STACK
        .try_with(|s| {
            let (ids, n) = s.get();
            RegionId(if n == 0 || n > DEPTH { 0 } else { ids[n - 1] })
        })
        .unwrap_or(RegionId(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_regions_close_in_order() {
        let a = open();
        let b = open();
        assert_eq!(current(), b);
        assert_eq!(close(), b);
        assert_eq!(current(), a);
        assert_eq!(close(), a);
        assert_eq!(current(), RegionId(0));
        assert_eq!(close(), RegionId(0));
    }
}
