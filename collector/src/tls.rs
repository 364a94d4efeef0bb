//! Everything the hot path keeps per thread, in one thread-local: a cdylib
//! pays a `__tls_get_addr` call (and a lazy-init check) per thread-local it
//! touches, and every acc_prof event touches all of these.

use std::cell::{Cell, RefCell};
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
