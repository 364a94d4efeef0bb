//! The storage a thread writes its events into: a chain of fixed-size
//! chunks. Data only: pushing into it and draining it is the sink's work
//! (sink.rs); the thread-local state (tls.rs) holds a thread's own chain.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use crate::event::Event;

/// Events per chunk (96 bytes each).
pub(crate) const CHUNK: usize = 8192;

/// A fixed array of event slots. Slots below `len` are written and are the
/// writer's to take, each exactly once; the rest belong to the producer.
pub(crate) struct Chunk {
    pub(crate) slots: Box<[UnsafeCell<MaybeUninit<Event>>]>,
    pub(crate) len: AtomicUsize,
}

// SAFETY: a slot is written by its one producer thread before `len` covers
// it (release) and read by the writer only after (acquire); never both.
unsafe impl Sync for Chunk {}
// SAFETY: as above; the events themselves are Send.
unsafe impl Send for Chunk {}

impl Chunk {
    pub(crate) fn new() -> Arc<Chunk> {
        Arc::new(Chunk {
            slots: (0..CHUNK)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
            len: AtomicUsize::new(0),
        })
    }
}

/// One thread's chunks not yet read whole, oldest first; the last is the
/// one its thread writes.
pub(crate) struct Chain {
    pub(crate) chunks: VecDeque<Arc<Chunk>>,
    /// Slots of the front chunk already taken.
    pub(crate) read: usize,
}

pub(crate) struct ThreadBuffer {
    /// OS id of the owning thread (events do not carry it).
    pub(crate) tid: u32,
    pub(crate) chain: Mutex<Chain>,
}
