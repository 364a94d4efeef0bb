//! Where records go: per-thread buffers that producers push into, and a
//! global queue of definitions (strings, modules, call sites).
//!
//! Producers never do I/O. Each thread owns one buffer of compact
//! [`Event`]s behind its own mutex;
//! only the writer thread ever takes it from another thread, a few times a
//! second, so the lock is uncontended on the hot path. Definitions go to a
//! separate queue that the writer drains *after* the thread buffers and
//! writes *before* them: a record is always pushed after the definitions it
//! uses, so this order guarantees definitions precede uses in the file.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use accprof_trace::{Record, StringId};

use crate::event::Event;
use crate::fasthash::AddrMap;
use crate::tls::{PerThread, THREAD};

/// Records a thread buffers before it wakes the writer.
const WAKE_AT: usize = 8192;

pub(crate) struct ThreadBuffer {
    /// OS id of the owning thread (events do not carry it).
    tid: u32,
    events: Mutex<Vec<Event>>,
}

/// What one drain takes: definitions (and records pushed after their
/// thread's storage was gone), then each thread's events with its id.
#[derive(Default)]
pub(crate) struct Batch {
    pub defs: Vec<Record>,
    pub threads: Vec<(u32, Vec<Event>)>,
}

impl Batch {
    pub(crate) fn len(&self) -> usize {
        self.defs.len() + self.threads.iter().map(|(_, v)| v.len()).sum::<usize>()
    }
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

/// String address -> its id and the bytes it held when interned.
type StringCache = AddrMap<usize, (StringId, Box<[u8]>)>;

thread_local! {
    static STRING_CACHE: RefCell<StringCache> = RefCell::new(AddrMap::default());
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind;
    // keep going with it rather than poisoning the whole collector.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn register_local() -> Option<()> {
    THREAD
        .try_with(|t| {
            let mut l = t.buffer.try_borrow_mut().ok()?;
            if l.is_none() {
                let buf = Arc::new(ThreadBuffer {
                    tid: crate::clock::thread_id_in(t),
                    events: Mutex::new(Vec::with_capacity(WAKE_AT)),
                });
                lock(&REGISTRY).buffers.push(Arc::clone(&buf));
                *l = Some(buf);
            }
            Some(())
        })
        .ok()
        .flatten()
}

/// Builds an event straight into this thread's buffer: `make` writes it
/// into the slot it is given and returns true, or returns false to push
/// nothing. No intermediate copies of the event on the hot path. `make`
/// must not push itself.
#[inline]
pub(crate) fn push_with(t: &PerThread, make: impl FnOnce(*mut Event) -> bool) {
    crate::check_child_writer();
    let mut make = Some(make);
    let pushed = (|| {
        let l = t.buffer.try_borrow().ok()?;
        let buf = l.as_ref()?;
        let make = make.take()?;
        let mut v = lock(&buf.events);
        if v.len() == v.capacity() {
            v.reserve(WAKE_AT);
        }
        let len = v.len();
        // SAFETY: capacity > len was ensured above; `make` writes the whole
        // slot before the length covers it, and the length grows only if it
        // said so.
        unsafe {
            if !make(v.as_mut_ptr().add(len)) {
                return Some(len);
            }
            v.set_len(len + 1);
        }
        Some(len + 1)
    })();
    match pushed {
        Some(len) => {
            if len == WAKE_AT {
                wake_writer();
            }
        }
        None => {
            if let Some(make) = make {
                let mut ev = std::mem::MaybeUninit::<Event>::uninit();
                if make(ev.as_mut_ptr()) {
                    // SAFETY: `make` returned true: it wrote the event.
                    push_event(unsafe { ev.assume_init() });
                }
            }
        }
    }
}

/// Appends a record to this thread's buffer.
#[inline]
pub(crate) fn push(rec: Record) {
    push_event(Event::from_record(rec));
}

fn push_event(ev: Event) {
    crate::check_child_writer();
    let mut rec = Some(ev);
    let pushed = THREAD.try_with(|t| {
        let l = t.buffer.try_borrow().ok()?;
        let buf = l.as_ref()?;
        let mut v = lock(&buf.events);
        v.push(rec.take()?);
        Some(v.len())
    });
    if let Ok(Some(len)) = pushed {
        if len == WAKE_AT {
            wake_writer();
        }
        return;
    }
    let Some(rec) = rec else {
        return;
    };
    if pushed.is_ok() && register_local().is_some() {
        // First record of this thread: its buffer now exists.
        push_event(rec);
    } else {
        // Thread-local storage already torn down (a callback during thread
        // exit): fall back to the shared queue, as a full record.
        lock(&DEFINITIONS).push(rec.into_record(crate::clock::thread_id()));
    }
}

/// Queues a definition (string, module, call site, device).
pub(crate) fn define(rec: Record) {
    lock(&DEFINITIONS).push(rec);
}

fn wake_writer() {
    crate::writer::wake();
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

/// Takes everything buffered into `out` (which must be empty). Each
/// thread's vector is swapped with a recycled one of the same capacity, so
/// neither side copies or faults in fresh pages. Buffers of threads that
/// have exited are forgotten once empty.
pub(crate) fn drain(out: &mut Batch, spares: &mut Vec<Vec<Event>>) {
    {
        let mut reg = lock(&REGISTRY);
        reg.buffers.retain(|b| {
            let mut spare = spares.pop().unwrap_or_default();
            {
                let mut v = lock(&b.events);
                if v.is_empty() {
                    spares.push(spare);
                } else {
                    std::mem::swap(&mut *v, &mut spare);
                    out.threads.push((b.tid, spare));
                }
            }
            // Strong count 1: only the registry holds it; its thread is gone.
            Arc::strong_count(b) > 1
        });
    }
    // Definitions drained after the records they may define (see module doc).
    std::mem::swap(&mut *lock(&DEFINITIONS), &mut out.defs);
}

/// Like [`drain`], but never blocks: a buffer whose lock is held (the thread
/// was interrupted while pushing) is skipped. Used when flushing from a
/// signal, where the interrupted thread may hold a lock.
pub(crate) fn drain_nonblocking(out: &mut Batch) {
    if let Ok(reg) = REGISTRY.try_lock() {
        for b in reg.buffers.iter() {
            if let Ok(mut v) = b.events.try_lock() {
                out.threads.push((b.tid, std::mem::take(&mut *v)));
            }
        }
    }
    if let Ok(mut d) = DEFINITIONS.try_lock() {
        std::mem::swap(&mut *d, &mut out.defs);
    }
}

type HeldLocks = (
    MutexGuard<'static, Registry>,
    MutexGuard<'static, Vec<Record>>,
    MutexGuard<'static, Option<HashMap<Box<[u8]>, StringId>>>,
);

thread_local! {
    static HELD_FOR_FORK: RefCell<Option<HeldLocks>> = const { RefCell::new(None) };
}

/// pthread_atfork "prepare": hold every shared lock across fork so the child
/// never inherits one locked by a thread that does not exist there.
pub(crate) fn fork_prepare() {
    let held = (lock(&REGISTRY), lock(&DEFINITIONS), lock(&INTERNED));
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
        if let Some((mut reg, mut defs, mut interned)) = h.borrow_mut().take() {
            // Buffers of other threads may be locked by threads that do not
            // exist here: drop them unlocked, never lock them.
            reg.buffers.clear();
            defs.clear();
            *interned = None;
        }
    });
    let _ = THREAD.try_with(|t| {
        if let Ok(mut l) = t.buffer.try_borrow_mut() {
            *l = None;
        }
    });
    let _ = STRING_CACHE.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            c.clear();
        }
    });
}
