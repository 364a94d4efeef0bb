//! Where records go: per-thread buffers that producers push into, and a
//! global queue of definitions (strings, modules, call sites).
//!
//! Producers never do I/O and take no lock per event. Each thread appends
//! compact [`Event`]s to a chain of fixed-size chunks that only it writes:
//! it fills a slot, then publishes the new length with a release store (a
//! plain store on x86-64). The writer thread reads up to the published
//! length, under the buffer's mutex, which the producer takes only when a
//! chunk is full and it chains the next one. Chunks the writer has read
//! whole go back to a pool, so a steady run reuses the same memory.
//!
//! Definitions go to a separate queue that the writer drains *after* the
//! thread buffers and writes *before* them: a record is always pushed after
//! the definitions it uses, so this order guarantees definitions precede
//! uses in the file.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use accprof_trace::{Record, StringId};

use crate::buffer::{Chain, Chunk, ThreadBuffer, CHUNK};
use crate::event::Event;
use crate::fasthash::AddrMap;
/// Wakes whoever drains the buffers (the writer, through the descriptor it
/// gave [`set_wake_fd`]), with a raw write: handlers wake it too, so it is
/// in `signals`.
pub(crate) use crate::signals::flush::wake_writer;
use crate::signals::flush::WAKE_FD;
use crate::tls::{PerThread, THREAD};

/// Events a chunk holds when its thread wakes the writer.
const WAKE_AT: usize = CHUNK / 2;
/// Read chunks kept for reuse.
const POOL_MAX: usize = 64;

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
static POOL: Mutex<Vec<Arc<Chunk>>> = Mutex::new(Vec::new());

static WRITER_WANTED: AtomicBool = AtomicBool::new(false);
static WRITER_STARTER: OnceLock<fn()> = OnceLock::new();

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

/// Chains a fresh chunk to this thread's buffer (registering the buffer on
/// first use) and makes it the one the thread writes. False when the
/// thread's storage is unusable (being torn down, or borrowed).
#[cold]
fn next_chunk(t: &PerThread) -> bool {
    let Ok(mut l) = t.buffer.try_borrow_mut() else {
        return false;
    };
    let buf = l.get_or_insert_with(|| {
        let buf = Arc::new(ThreadBuffer {
            tid: crate::clock::thread_id_in(t),
            chain: Mutex::new(Chain {
                chunks: VecDeque::new(),
                read: 0,
            }),
        });
        lock(&REGISTRY).buffers.push(Arc::clone(&buf));
        buf
    });
    let chunk = lock(&POOL).pop().unwrap_or_else(Chunk::new);
    t.chunk.set(Arc::as_ptr(&chunk));
    t.filled.set(0);
    lock(&buf.chain).chunks.push_back(chunk);
    true
}

/// Builds an event straight into this thread's buffer: `make` writes it
/// into the slot it is given and returns true, or returns false to push
/// nothing. No lock, no atomic read-modify-write, no intermediate copy.
/// `make` must not push itself.
#[inline]
pub(crate) fn push_with(t: &PerThread, make: impl FnOnce(*mut Event) -> bool) {
    if WRITER_WANTED.load(Ordering::Relaxed) {
        start_wanted_writer();
    }
    let n = t.filled.get();
    let chunk = t.chunk.get();
    if n < CHUNK && !chunk.is_null() {
        // SAFETY: a non-NULL `t.chunk` is the last chunk of this thread's
        // chain, which keeps it alive; slot n is past the published length,
        // so only this thread touches it.
        unsafe { write_at(&*chunk, n, t, make) };
    } else if next_chunk(t) {
        // SAFETY: as above, for the chunk next_chunk just chained.
        unsafe { write_at(&*t.chunk.get(), 0, t, make) };
    } else {
        // Thread-local storage being torn down (a callback during thread
        // exit): fall back to the shared queue, as a full record.
        let mut ev = MaybeUninit::<Event>::uninit();
        if make(ev.as_mut_ptr()) {
            // SAFETY: `make` returned true: it wrote the event.
            let ev = unsafe { ev.assume_init() };
            lock(&DEFINITIONS).push(ev.into_record(crate::clock::thread_id()));
        }
    }
}

/// # Safety
/// `chunk` must be the thread's current chunk and `n` its filled count.
#[inline(always)]
unsafe fn write_at(chunk: &Chunk, n: usize, t: &PerThread, make: impl FnOnce(*mut Event) -> bool) {
    if make(chunk.slots[n].get().cast::<Event>()) {
        chunk.len.store(n + 1, Ordering::Release);
        t.filled.set(n + 1);
        if n + 1 == WAKE_AT {
            wake_writer();
        }
    }
}

/// Appends a record to this thread's buffer.
#[inline]
pub(crate) fn push(rec: Record) {
    let mut rec = Some(rec);
    let _ = THREAD.try_with(|t| {
        if let Some(rec) = rec.take() {
            push_in(t, rec);
        }
    });
    if let Some(rec) = rec {
        // No thread-local storage at all any more.
        lock(&DEFINITIONS).push(rec);
    }
}

/// Appends a record to the buffer of the thread `t` belongs to.
#[inline]
pub(crate) fn push_in(t: &PerThread, rec: Record) {
    let ev = Event::from_record(rec);
    push_with(t, |slot| {
        // SAFETY: `slot` is writable space for one event.
        unsafe { slot.write(ev) };
        true
    });
}

/// Queues a definition (string, module, call site, device).
pub(crate) fn define(rec: Record) {
    lock(&DEFINITIONS).push(rec);
}

/// The eventfd [`wake_writer`] signals (-1: none); returns the previous one.
pub(crate) fn set_wake_fd(fd: i32) -> i32 {
    WAKE_FD.swap(fd, Ordering::AcqRel)
}

/// The eventfd the writer waits on (-1: none).
pub(crate) fn wake_fd() -> i32 {
    WAKE_FD.load(Ordering::Acquire)
}

/// How a writer is started when one is wanted (set once, at start-up, by
/// whoever owns the writer: the sink does not name it).
pub(crate) fn set_writer_starter(start: fn()) {
    let _ = WRITER_STARTER.set(start);
}

/// Asks for a writer before the next record is pushed (a forked child
/// starts its own on its first record, so one that execs at once leaves no
/// file behind).
pub(crate) fn want_writer() {
    WRITER_WANTED.store(true, Ordering::Release);
}

#[cold]
fn start_wanted_writer() {
    if WRITER_WANTED.swap(false, Ordering::AcqRel) {
        if let Some(start) = WRITER_STARTER.get() {
            start();
        }
    }
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

/// Moves the published, not yet taken events of `chain` into `out`;
/// chunks read whole (all but the last) go to `done`.
fn take_from(chain: &mut Chain, out: &mut Vec<Event>, done: &mut Vec<Arc<Chunk>>) {
    while let Some(front) = chain.chunks.front() {
        let len = front.len.load(Ordering::Acquire);
        let from = chain.read.min(len);
        let n = len - from;
        out.reserve(n);
        // SAFETY: slots [from, len) are below the published length (acquire
        // above), written whole by the producer, and taken exactly once
        // (`read` moves past them); a slot has the layout of an Event
        // (UnsafeCell and MaybeUninit are transparent), and `out` has room.
        unsafe {
            std::ptr::copy_nonoverlapping(
                front.slots[from..len].as_ptr().cast::<Event>(),
                out.as_mut_ptr().add(out.len()),
                n,
            );
            out.set_len(out.len() + n);
        }
        chain.read = len;
        if chain.chunks.len() > 1 && len == CHUNK {
            // Full and superseded: its thread writes the next one.
            done.extend(chain.chunks.pop_front());
            chain.read = 0;
        } else {
            break;
        }
    }
}

/// Returns chunks read whole to the pool.
fn recycle(pool: &mut Vec<Arc<Chunk>>, done: &mut Vec<Arc<Chunk>>) {
    for c in done.drain(..) {
        if pool.len() < POOL_MAX && Arc::strong_count(&c) == 1 {
            c.len.store(0, Ordering::Relaxed);
            pool.push(c);
        }
    }
}

/// Takes everything buffered into `out` (which must be empty), reusing the
/// vectors in `spares`. Buffers of threads that have exited are forgotten
/// once read.
pub(crate) fn drain(out: &mut Batch, spares: &mut Vec<Vec<Event>>) {
    let mut done = Vec::new();
    {
        let mut reg = lock(&REGISTRY);
        reg.buffers.retain(|b| {
            // Strong count 1: only the registry holds it, its thread is
            // gone. Asked before taking, so what the thread published
            // before letting go is taken now (the fence pairs with the
            // release of its count).
            let gone = Arc::strong_count(b) == 1;
            if gone {
                std::sync::atomic::fence(Ordering::Acquire);
            }
            let mut v = spares.pop().unwrap_or_default();
            take_from(&mut lock(&b.chain), &mut v, &mut done);
            if v.is_empty() {
                spares.push(v);
            } else {
                out.threads.push((b.tid, v));
            }
            !gone
        });
    }
    if !done.is_empty() {
        recycle(&mut lock(&POOL), &mut done);
    }
    // Definitions drained after the records they may define (see module doc).
    std::mem::swap(&mut *lock(&DEFINITIONS), &mut out.defs);
}

/// Like [`drain`], but never blocks: a buffer whose lock is held is
/// skipped. Used when flushing for a signal, where the interrupted thread
/// may hold a lock.
pub(crate) fn drain_nonblocking(out: &mut Batch) {
    let mut done = Vec::new();
    if let Ok(reg) = REGISTRY.try_lock() {
        for b in reg.buffers.iter() {
            if let Ok(mut chain) = b.chain.try_lock() {
                let mut v = Vec::new();
                take_from(&mut chain, &mut v, &mut done);
                out.threads.push((b.tid, v));
            }
        }
    }
    if let Ok(mut pool) = POOL.try_lock() {
        recycle(&mut pool, &mut done);
    }
    if let Ok(mut d) = DEFINITIONS.try_lock() {
        std::mem::swap(&mut *d, &mut out.defs);
    }
}

type HeldLocks = (
    MutexGuard<'static, Registry>,
    MutexGuard<'static, Option<HashMap<Box<[u8]>, StringId>>>,
    MutexGuard<'static, Vec<Record>>,
    MutexGuard<'static, Vec<Arc<Chunk>>>,
);

thread_local! {
    static HELD_FOR_FORK: RefCell<Option<HeldLocks>> = const { RefCell::new(None) };
}

/// pthread_atfork "prepare": hold every shared lock across fork so the child
/// never inherits one locked by a thread that does not exist there.
/// Taken in the order the rest of this module nests them (`intern` holds
/// INTERNED while it defines).
pub(crate) fn fork_prepare() {
    let held = (
        lock(&REGISTRY),
        lock(&INTERNED),
        lock(&DEFINITIONS),
        lock(&POOL),
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
        if let Some((mut reg, mut interned, mut defs, _pool)) = h.borrow_mut().take() {
            // Buffers of other threads may be locked by threads that do not
            // exist here: drop them unlocked, never lock them. Their events
            // are the parent's; the slots are not dropped (MaybeUninit).
            reg.buffers.clear();
            defs.clear();
            *interned = None;
        }
    });
    let _ = THREAD.try_with(|t| {
        // The chunk this thread wrote went with the parent's buffers.
        t.chunk.set(std::ptr::null());
        t.filled.set(0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AccRaw, NONE32, NO_CONSTRUCT};
    use accprof_trace::AccEventKind;

    fn event(seq: u64) -> Event {
        Event::Acc(AccRaw {
            time: seq,
            region: 0,
            p: [0; 3],
            name: 0,
            file: 0,
            function: 0,
            lines: [0; 4],
            call_site: 0,
            device_type: NONE32,
            device_number: NONE32,
            async_queue: 0,
            kind: AccEventKind::EnqueueLaunchStart,
            construct: NO_CONSTRUCT,
            flags: 0,
        })
    }

    /// Threads push several chunks each while another thread drains: every
    /// event comes out exactly once, in order per thread, including those
    /// a thread published just before it exited.
    #[test]
    fn every_event_is_taken_once_in_order_across_chunks_and_thread_exit() {
        const PER_THREAD: u64 = 3 * CHUNK as u64 + 123;
        let producers: Vec<_> = (0..3)
            .map(|_| {
                std::thread::spawn(|| {
                    for seq in 0..PER_THREAD {
                        THREAD.with(|t| {
                            push_with(t, |slot| {
                                // SAFETY: the slot is writable for one event.
                                unsafe { slot.write(event(seq)) };
                                true
                            })
                        });
                    }
                    // SAFETY: gettid has no preconditions.
                    unsafe { libc::gettid() as u32 }
                })
            })
            .collect();
        let mut seen: HashMap<u32, Vec<u64>> = HashMap::new();
        let mut spares = Vec::new();
        let mut take = |seen: &mut HashMap<u32, Vec<u64>>| {
            let mut b = Batch::default();
            drain(&mut b, &mut spares);
            for (tid, v) in b.threads {
                for e in v {
                    if let Event::Acc(a) = e {
                        seen.entry(tid).or_default().push(a.time);
                    }
                }
            }
        };
        while !producers.iter().all(|p| p.is_finished()) {
            take(&mut seen);
        }
        let tids: Vec<u32> = producers
            .into_iter()
            .map(|p| p.join().expect("producer thread panicked"))
            .collect();
        take(&mut seen);
        for tid in tids {
            let got = seen.remove(&tid).unwrap_or_default();
            assert_eq!(got.len() as u64, PER_THREAD, "thread {tid}");
            assert!(
                got.iter().copied().eq(0..PER_THREAD),
                "thread {tid} out of order"
            );
        }
        // The exited threads' buffers are forgotten once read.
        take(&mut seen);
        let left = lock(&REGISTRY)
            .buffers
            .iter()
            .filter(|b| Arc::strong_count(b) == 1)
            .count();
        assert_eq!(left, 0);
    }
}
