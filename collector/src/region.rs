//! Which OpenACC construct instance a thread is inside.
//!
//! Every construct start (compute, enter/exit data, update, wait) opens a
//! region with a fresh id; its end closes it. Events in between (data
//! events, launches) and the driver calls CUPTI reports on the same thread
//! belong to the innermost open region.

use std::sync::atomic::{AtomicU64, Ordering};

use accprof_trace::RegionId;

use crate::tls::{PerThread, DEPTH};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// Opens a region on the thread `t` belongs to and returns its id.
#[inline]
pub(crate) fn open_in(t: &PerThread) -> RegionId {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let n = t.depth.get();
    if n < DEPTH {
        t.regions[n].set(id);
    }
    // Past DEPTH we only count, so closes stay balanced.
    t.depth.set(n + 1);
    RegionId(id)
}

/// Closes the innermost region and returns its id (0 when none is open: an
/// end event whose start was not seen).
#[inline]
pub(crate) fn close_in(t: &PerThread) -> RegionId {
    let n = t.depth.get();
    if n == 0 {
        return RegionId(0);
    }
    t.depth.set(n - 1);
    RegionId(if n <= DEPTH {
        t.regions[n - 1].get()
    } else {
        0
    })
}

/// Closes every region opened since the thread was `depth` regions deep:
/// the end of an interposed API routine, which also closes what the
/// runtime left open inside it (a start whose end never came).
#[inline]
pub(crate) fn close_to_in(t: &PerThread, depth: usize) {
    if t.depth.get() > depth {
        t.depth.set(depth);
    }
}

/// The innermost open region (0 when none).
#[inline]
pub(crate) fn current_in(t: &PerThread) -> RegionId {
    let n = t.depth.get();
    RegionId(if n == 0 || n > DEPTH {
        0
    } else {
        t.regions[n - 1].get()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::THREAD;

    fn current() -> RegionId {
        THREAD.with(current_in)
    }

    fn open() -> RegionId {
        THREAD.with(open_in)
    }

    fn close() -> RegionId {
        THREAD.with(close_in)
    }

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
