//! Everything the hot path keeps per thread, in one thread-local: a cdylib
//! pays a `__tls_get_addr` call (and a lazy-init check) per thread-local it
//! touches, and every acc_prof event touches all of these.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::buffer::{Chunk, ThreadBuffer};

/// Regions tracked per thread (deeper nesting is counted, not recorded).
pub(crate) const DEPTH: usize = 16;

pub(crate) struct PerThread {
    /// OS thread id, 0 until first asked.
    pub tid: Cell<u32>,
    /// Open OpenACC regions, innermost at `depth - 1`.
    pub regions: [Cell<u64>; DEPTH],
    pub depth: Cell<usize>,
    /// Inside an interposed OpenACC API routine: routines it calls in turn
    /// are its own work, not the application's calls.
    pub in_api: Cell<bool>,
    /// This thread's record buffer, registered on first use.
    pub buffer: RefCell<Option<Arc<ThreadBuffer>>>,
    /// The chunk of `buffer` this thread writes (NULL before the first),
    /// kept alive by the buffer's chain.
    pub chunk: Cell<*const Chunk>,
    /// Slots of `chunk` written.
    pub filled: Cell<usize>,
}

thread_local! {
    pub(crate) static THREAD: PerThread = const {
        PerThread {
            tid: Cell::new(0),
            regions: [const { Cell::new(0) }; DEPTH],
            depth: Cell::new(0),
            in_api: Cell::new(false),
            buffer: RefCell::new(None),
            chunk: Cell::new(std::ptr::null()),
            filled: Cell::new(0),
        }
    };
}

/// OS ids of the collector's own long-lived threads (the writer, CUPTI's
/// starter): what they do is the collector's work, never the program's.
static OWN_THREADS: [AtomicU32; 4] = [const { AtomicU32::new(0) }; 4];

/// Counts the thread `tid` (the caller's OS id) as one of the
/// collector's own.
pub(crate) fn mark_own_thread(tid: u32) {
    for slot in &OWN_THREADS {
        match slot.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(t) if t == tid => return,
            Err(_) => {}
        }
    }
}

/// Whether `tid` is one of the collector's own threads.
pub(crate) fn is_own_thread(tid: u32) -> bool {
    tid != 0 && OWN_THREADS.iter().any(|s| s.load(Ordering::Relaxed) == tid)
}

/// In a forked child: the parent's threads did not come along, and their
/// ids may be reused for the child's.
pub(crate) fn forget_own_threads() {
    for slot in &OWN_THREADS {
        slot.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_threads_are_known_by_id() {
        // SAFETY: gettid has no preconditions.
        let gettid = || unsafe { libc::gettid() } as u32;
        let tid = std::thread::spawn(move || {
            mark_own_thread(gettid());
            mark_own_thread(gettid());
            gettid()
        })
        .join()
        .expect("joins");
        assert!(is_own_thread(tid));
        assert!(!is_own_thread(gettid()));
        assert!(!is_own_thread(0));
        // Marked twice, counted once: a slot is left for the others.
        let marked = OWN_THREADS
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) == tid)
            .count();
        assert_eq!(marked, 1);
    }
}
