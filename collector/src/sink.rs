//! Where records go: per-thread buffers that producers push into, and a
//! global queue of definitions (strings, modules, call sites).
//!
//! Producers never do I/O. Each thread owns one buffer behind its own mutex;
//! only the writer thread ever takes it from another thread, a few times a
//! second, so the lock is uncontended on the hot path. Definitions go to a
//! separate queue that the writer drains *after* the thread buffers and
//! writes *before* them: a record is always pushed after the definitions it
//! uses, so this order guarantees definitions precede uses in the file.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use accprof_trace::{Record, StringId};

/// Records a thread buffers before it wakes the writer.
const WAKE_AT: usize = 8192;

pub(crate) struct ThreadBuffer {
    records: Mutex<Vec<Record>>,
}

struct Registry {
    buffers: Vec<Arc<ThreadBuffer>>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    buffers: Vec::new(),
});
static DEFINITIONS: Mutex<Vec<Record>> = Mutex::new(Vec::new());
static INTERNED: Mutex<Option<HashMap<Box<[u8]>, StringId>>> = Mutex::new(None);
static NEXT_STRING: AtomicU32 = AtomicU32::new(1);

/// Records dropped because they could not be written.
pub(crate) static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Signals the writer that a buffer is worth draining now.
pub(crate) static WAKE: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

thread_local! {
    static LOCAL: RefCell<Option<Arc<ThreadBuffer>>> = const { RefCell::new(None) };
    static STRING_CACHE: RefCell<HashMap<usize, (StringId, Box<[u8]>)>> = RefCell::new(HashMap::new());
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind;
    // keep going with it rather than poisoning the whole collector.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn local_buffer() -> Option<Arc<ThreadBuffer>> {
    LOCAL
        .try_with(|l| {
            let mut l = l.borrow_mut();
            if l.is_none() {
                let buf = Arc::new(ThreadBuffer {
                    records: Mutex::new(Vec::with_capacity(1024)),
                });
                lock(&REGISTRY).buffers.push(Arc::clone(&buf));
                *l = Some(buf);
            }
            l.clone()
        })
        .ok()
        .flatten()
}

/// Appends a record to this thread's buffer.
pub(crate) fn push(rec: Record) {
    crate::check_child_writer();
    let Some(buf) = local_buffer() else {
        // Thread-local storage already torn down (a callback during thread
        // exit): fall back to the shared queue.
        lock(&DEFINITIONS).push(rec);
        return;
    };
    let len = {
        let mut v = lock(&buf.records);
        v.push(rec);
        v.len()
    };
    if len == WAKE_AT {
        wake_writer();
    }
}

/// Queues a definition (string, module, call site, device).
pub(crate) fn define(rec: Record) {
    lock(&DEFINITIONS).push(rec);
}

pub(crate) fn wake_writer() {
    let (m, cv) = &WAKE;
    *lock(m) = true;
    cv.notify_one();
}

/// Interns a string, defining it on first use.
pub(crate) fn intern(text: &[u8]) -> StringId {
    let mut map = lock(&INTERNED);
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(id) = map.get(text) {
        return *id;
    }
    let id = StringId(NEXT_STRING.fetch_add(1, Ordering::Relaxed));
    map.insert(text.into(), id);
    define(Record::String {
        id,
        text: String::from_utf8_lossy(text).into_owned(),
    });
    id
}

/// Interns a NUL-terminated C string, caching by address on this thread
/// (runtimes hand the same static strings again and again). The cached bytes
/// are compared so a reused address with new contents is not misnamed.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string valid for this call.
pub(crate) unsafe fn intern_cstr(p: *const libc::c_char) -> Option<StringId> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees a valid NUL-terminated string.
    let bytes = unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes();
    let key = p as usize;
    let cached = STRING_CACHE
        .try_with(|c| {
            c.borrow()
                .get(&key)
                .filter(|(_, b)| &**b == bytes)
                .map(|(id, _)| *id)
        })
        .ok()
        .flatten();
    if cached.is_some() {
        return cached;
    }
    let id = intern(bytes);
    let _ = STRING_CACHE.try_with(|c| c.borrow_mut().insert(key, (id, bytes.into())));
    Some(id)
}

/// Takes everything buffered: definitions first, then every thread's records.
/// Buffers of threads that have exited are forgotten once empty.
pub(crate) fn drain(out: &mut Vec<Record>) {
    let mut taken: Vec<Record> = Vec::new();
    {
        let mut reg = lock(&REGISTRY);
        reg.buffers.retain(|b| {
            let mut v = lock(&b.records);
            taken.append(&mut v);
            // Strong count 1: only the registry holds it; its thread is gone.
            Arc::strong_count(b) > 1
        });
    }
    // Definitions drained after the records they may define (see module doc).
    out.append(&mut lock(&DEFINITIONS));
    out.append(&mut taken);
}

/// Like [`drain`], but never blocks: a buffer whose lock is held (the thread
/// was interrupted while pushing) is skipped. Used when flushing from a
/// signal, where the interrupted thread may hold a lock.
pub(crate) fn drain_nonblocking(out: &mut Vec<Record>) {
    let mut taken: Vec<Record> = Vec::new();
    if let Ok(reg) = REGISTRY.try_lock() {
        for b in reg.buffers.iter() {
            if let Ok(mut v) = b.records.try_lock() {
                taken.append(&mut v);
            }
        }
    }
    if let Ok(mut d) = DEFINITIONS.try_lock() {
        out.append(&mut d);
    }
    out.append(&mut taken);
}

type HeldLocks = (
    MutexGuard<'static, Registry>,
    MutexGuard<'static, Vec<Record>>,
    MutexGuard<'static, Option<HashMap<Box<[u8]>, StringId>>>,
    MutexGuard<'static, bool>,
);

thread_local! {
    static HELD_FOR_FORK: RefCell<Option<HeldLocks>> = const { RefCell::new(None) };
}

/// pthread_atfork "prepare": hold every shared lock across fork so the child
/// never inherits one locked by a thread that does not exist there.
pub(crate) fn fork_prepare() {
    let held = (
        lock(&REGISTRY),
        lock(&DEFINITIONS),
        lock(&INTERNED),
        lock(&WAKE.0),
    );
    let _ = HELD_FOR_FORK.try_with(|h| *h.borrow_mut() = Some(held));
}

/// pthread_atfork "parent": release what prepare took.
pub(crate) fn fork_parent() {
    let _ = HELD_FOR_FORK.try_with(|h| h.borrow_mut().take());
}

/// pthread_atfork "child": the child keeps only the forking thread. The
/// parent's buffered records are the parent's to write, and the child's own
/// file must define its strings again, so everything starts empty.
pub(crate) fn fork_child() {
    let _ = HELD_FOR_FORK.try_with(|h| {
        if let Some((mut reg, mut defs, mut interned, mut wake)) = h.borrow_mut().take() {
            // Buffers of other threads may be locked by threads that do not
            // exist here: drop them unlocked, never lock them.
            reg.buffers.clear();
            defs.clear();
            *interned = None;
            *wake = false;
        }
    });
    let _ = LOCAL.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            *l = None;
        }
    });
    let _ = STRING_CACHE.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            c.clear();
        }
    });
}
