//! The arrays a device block holds, asked of the OpenACC runtime itself.
//!
//! A block that outlives the construct that made it holds arrays the
//! runtime mapped (`data create(u, us, ...)`, `enter data`, `declare`, an
//! API routine); their host addresses are known to the check only when a
//! copy names them, and `create` copies nothing. The runtime answers for
//! every byte of its device memory: `acc_hostptr(d)` is the host address
//! mapped to `d` (null where nothing is), `acc_is_present(h, n)` whether
//! `h..h+n` is mapped as one piece. Walking a block with them gives each
//! array in it: its host start at its device start, its length the longest
//! `n` still present (doubled, then halved), the bytes between arrays
//! (alignment, pointer slots) skipped one by one. GCC 12's `acc_hostptr`
//! answers for a block that holds several arrays (a `data` construct's)
//! with any one of them: an answer is kept only when `acc_deviceptr` maps
//! the host address back to the same device address (the arrays of a
//! `data` construct are learned from its clauses instead: `data_start`).
//!
//! Those routines take the runtime's device lock. A thread inside an
//! acc_prof callback holds libgomp's profiling lock, and another thread
//! holding the device lock may be waiting for that lock to send its own
//! event: asking from the callback's thread could deadlock. So the
//! questions are asked on a thread of the check's own, which holds no
//! lock of the runtime's, while the callback waits for the answer at most
//! [`WAIT`]; if it ever has to give up, the answers come later (taken at
//! the next event) and the lookup is not asked again: the check goes on
//! with what the copies show, and the exit note says so.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// One array found in a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub host: u64,
    pub bytes: u64,
    pub device: u64,
}

/// Unmapped bytes skipped between two arrays of a block before the rest
/// of the block is left (alignment and pointer slots take a few; a block
/// the runtime did not map arrays into has none at all).
const MAX_GAP: u64 = 256;

/// Questions asked of the runtime for one block, at most.
const MAX_CALLS: u32 = 1 << 16;

/// Walks the device block `at..at+bytes`: each array the runtime mapped
/// into it, in device order. `hostptr(d)`: the host address mapped to the
/// device address `d`, 0 where none; `present(h, n)`: whether `h..h+n` is
/// mapped as one piece.
pub(crate) fn discover(
    at: u64,
    bytes: u64,
    hostptr: &mut dyn FnMut(u64) -> u64,
    present: &mut dyn FnMut(u64, u64) -> bool,
    deviceptr: &mut dyn FnMut(u64) -> u64,
) -> Vec<Found> {
    let end = at.saturating_add(bytes);
    let mut out = Vec::new();
    let mut d = at;
    let mut calls = 0u32;
    while d < end && calls < MAX_CALLS {
        // The next mapped byte: an array's start.
        let gap_end = d.saturating_add(MAX_GAP).min(end);
        let mut host = 0;
        while d < gap_end && calls < MAX_CALLS {
            calls += 1;
            host = hostptr(d);
            if host != 0 {
                break;
            }
            d += 1;
        }
        if host == 0 {
            break;
        }
        let room = end - d;
        calls += 1;
        if !present(host, 1) {
            d += 1;
            continue;
        }
        // The longest length still mapped as one piece: doubled while it
        // is, then halved between the last that was and the first that
        // was not.
        let (mut lo, mut hi) = (1u64, 2u64);
        while hi <= room && calls < MAX_CALLS {
            calls += 1;
            if !present(host, hi) {
                break;
            }
            lo = hi;
            hi = hi.saturating_mul(2);
        }
        let mut hi = hi.min(room.saturating_add(1));
        while hi - lo > 1 && calls < MAX_CALLS {
            calls += 1;
            let mid = lo + (hi - lo) / 2;
            if present(host, mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // libgomp's acc_hostptr answers for a block holding several arrays
        // with any one of them (GCC 12): kept only when the host address
        // maps back to this device address.
        calls += 1;
        if deviceptr(host) == d {
            out.push(Found {
                host,
                bytes: lo,
                device: d,
            });
        }
        d += lo;
    }
    out
}

/// How long a callback waits for the answers.
const WAIT: Duration = Duration::from_millis(200);

type HostPtr = unsafe extern "C" fn(*mut libc::c_void) -> *mut libc::c_void;
type IsPresent = unsafe extern "C" fn(*mut libc::c_void, libc::size_t) -> libc::c_int;
type DevicePtr = unsafe extern "C" fn(*mut libc::c_void) -> *mut libc::c_void;

/// The runtime's routines, found once (None: not an OpenACC runtime that
/// has them).
pub(super) fn routines() -> Option<(HostPtr, IsPresent, DevicePtr)> {
    static FOUND: std::sync::OnceLock<Option<(usize, usize, usize)>> = std::sync::OnceLock::new();
    let (h, p, d) = (*FOUND.get_or_init(|| {
        // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names.
        let (h, p, d) = unsafe {
            (
                libc::dlsym(libc::RTLD_DEFAULT, c"acc_hostptr".as_ptr()),
                libc::dlsym(libc::RTLD_DEFAULT, c"acc_is_present".as_ptr()),
                libc::dlsym(libc::RTLD_DEFAULT, c"acc_deviceptr".as_ptr()),
            )
        };
        (!h.is_null() && !p.is_null() && !d.is_null())
            .then_some((h as usize, p as usize, d as usize))
    }))?;
    // SAFETY: the addresses of the OpenACC routines of those names, whose
    // C signatures the OpenACC specification fixes as these.
    Some(unsafe {
        (
            std::mem::transmute::<usize, HostPtr>(h),
            std::mem::transmute::<usize, IsPresent>(p),
            std::mem::transmute::<usize, DevicePtr>(d),
        )
    })
}

#[derive(Default)]
struct Queue {
    /// Blocks to walk (start, bytes).
    blocks: Vec<(u64, u64)>,
    /// The worker is walking some.
    busy: bool,
    /// Arrays found, not taken yet.
    found: Vec<Found>,
}

static QUEUE: Mutex<Option<Queue>> = Mutex::new(None);
static DONE: Condvar = Condvar::new();
static WORK: Condvar = Condvar::new();
/// The process whose worker runs (a forked child starts its own).
static WORKER_PID: AtomicU32 = AtomicU32::new(0);
/// Set once a callback had to give up waiting: no more questions.
static GAVE_UP: AtomicBool = AtomicBool::new(false);
/// Set while answers wait to be taken.
static PENDING: AtomicBool = AtomicBool::new(false);

/// Questions asked of the runtime's table, in all (for the exit note).
static QUESTIONS: AtomicU64 = AtomicU64::new(0);

pub(crate) fn questions() -> u64 {
    QUESTIONS.load(Ordering::Relaxed)
}

/// Whether the lookup was abandoned (a callback waited [`WAIT`] in vain).
pub(crate) fn gave_up() -> bool {
    GAVE_UP.load(Ordering::Relaxed)
}

/// Whether the runtime can be asked at all.
pub(crate) fn available() -> bool {
    !gave_up() && routines().is_some()
}

/// Asks for the arrays of `blocks` and waits for them (at most [`WAIT`]);
/// returns them with any found since the last call. Called from an
/// acc_prof callback made outside the runtime's device lock.
pub(crate) fn ask(blocks: Vec<(u64, u64)>) -> Vec<Found> {
    if blocks.is_empty() || !available() || !worker() {
        return take();
    }
    let Ok(mut g) = QUEUE.lock() else {
        return Vec::new();
    };
    let q = g.get_or_insert_with(Queue::default);
    q.blocks.extend(blocks);
    WORK.notify_one();
    let Ok((mut g, waited)) = DONE.wait_timeout_while(g, WAIT, |q| {
        q.as_ref().is_some_and(|q| q.busy || !q.blocks.is_empty())
    }) else {
        return Vec::new();
    };
    if waited.timed_out() {
        GAVE_UP.store(true, Ordering::Relaxed);
    }
    let found = g
        .as_mut()
        .map(|q| std::mem::take(&mut q.found))
        .unwrap_or_default();
    PENDING.store(false, Ordering::Relaxed);
    found
}

/// The arrays found since the last call (answers that came after a
/// callback gave up waiting).
pub(crate) fn take() -> Vec<Found> {
    if !PENDING.swap(false, Ordering::Relaxed) {
        return Vec::new();
    }
    QUEUE
        .lock()
        .ok()
        .and_then(|mut g| g.as_mut().map(|q| std::mem::take(&mut q.found)))
        .unwrap_or_default()
}

/// Starts the worker of this process if it is not running; false if it
/// cannot be.
fn worker() -> bool {
    let pid = std::process::id();
    if WORKER_PID.load(Ordering::Acquire) == pid {
        return true;
    }
    if let Ok(mut g) = QUEUE.lock() {
        // A forked child's copy of the parent's queue: the parent's worker
        // did not come along.
        *g = Some(Queue::default());
    }
    let started = std::thread::Builder::new()
        .name("accprof-lookup".into())
        .spawn(run)
        .is_ok();
    if started {
        WORKER_PID.store(pid, Ordering::Release);
    } else {
        GAVE_UP.store(true, Ordering::Relaxed);
    }
    started
}

/// The worker: walks the blocks asked for, forever.
fn run() {
    // Its driver calls (the runtime attaching it to the device) and
    // callbacks are the check's own, never acted on.
    super::enter_own_thread();
    crate::tls::mark_own_thread(crate::clock::thread_id());
    let Some((hostptr, present, deviceptr)) = routines() else {
        return;
    };
    loop {
        let blocks = {
            let Ok(g) = QUEUE.lock() else { return };
            let Ok(mut g) = WORK.wait_while(g, |q| q.as_ref().is_none_or(|q| q.blocks.is_empty()))
            else {
                return;
            };
            let Some(q) = g.as_mut() else { return };
            q.busy = true;
            std::mem::take(&mut q.blocks)
        };
        let mut found = Vec::new();
        let asked = std::cell::Cell::new(0u64);
        let ask = || asked.set(asked.get() + 1);
        for (at, bytes) in blocks {
            // The runtime's routines are called with any address (a device
            // address the runtime does not know gives null; a host range
            // not mapped gives 0), on a thread holding none of its locks.
            found.extend(discover(
                at,
                bytes,
                &mut |d| {
                    ask();
                    // SAFETY: as above.
                    unsafe { hostptr(d as *mut libc::c_void) as u64 }
                },
                &mut |h, n| {
                    ask();
                    // SAFETY: as above.
                    unsafe { present(h as *mut libc::c_void, n as libc::size_t) != 0 }
                },
                &mut |h| {
                    ask();
                    // SAFETY: as above.
                    unsafe { deviceptr(h as *mut libc::c_void) as u64 }
                },
            ));
        }
        QUESTIONS.fetch_add(asked.get(), Ordering::Relaxed);
        let Ok(mut g) = QUEUE.lock() else { return };
        if let Some(q) = g.as_mut() {
            q.found.extend(found);
            q.busy = false;
            PENDING.store(true, Ordering::Relaxed);
        }
        DONE.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runtime's table: (host, bytes, device) of each mapped array.
    type Oracle<'a> = (
        Box<dyn FnMut(u64) -> u64 + 'a>,
        Box<dyn FnMut(u64, u64) -> bool + 'a>,
        Box<dyn FnMut(u64) -> u64 + 'a>,
    );

    fn oracle(maps: &[(u64, u64, u64)]) -> Oracle<'_> {
        let hostptr = move |d: u64| {
            maps.iter()
                .find(|m| d >= m.2 && d < m.2 + m.1)
                .map_or(0, |m| m.0 + (d - m.2))
        };
        let present = move |h: u64, n: u64| {
            maps.iter()
                .any(|m| h >= m.0 && h.saturating_add(n) <= m.0 + m.1 && n <= m.1)
        };
        let deviceptr = move |h: u64| {
            maps.iter()
                .find(|m| h >= m.0 && h < m.0 + m.1)
                .map_or(0, |m| m.2 + (h - m.0))
        };
        (Box::new(hostptr), Box::new(present), Box::new(deviceptr))
    }

    /// `data create(u, rhs, forcing)` as libgomp lays it out: one block,
    /// each array at its alignment, a pointer slot between two of them
    /// that maps nothing; every array is found with its exact length.
    #[test]
    fn every_array_of_a_block_is_found_with_its_length() {
        let block = 0x7f00_0000_0000;
        let maps = [
            (0x5000_0000, 8 * 1000 + 4, block),
            (0x6000_0000, 8 * 333, block + 8008 + 8),
            (0x7000_0000, 1, block + 8008 + 8 + 2664 + 16),
        ];
        let (mut h, mut p, mut d) = oracle(&maps);
        let found = discover(block, 8008 + 8 + 2664 + 16 + 8, &mut h, &mut p, &mut d);
        assert_eq!(
            found,
            maps.iter()
                .map(|m| Found {
                    host: m.0,
                    bytes: m.1,
                    device: m.2
                })
                .collect::<Vec<_>>()
        );
    }

    /// The first array need not start at the block's start (the runtime
    /// aligns it); an array that runs past the block is cut at its end;
    /// a block with nothing mapped in its first bytes is left.
    #[test]
    fn blocks_are_walked_within_their_bounds() {
        let block = 0x9000_0000;
        let maps = [(0x1000, 4096, block + 48)];
        let (mut h, mut p, mut d) = oracle(&maps);
        assert_eq!(
            discover(block, 1024, &mut h, &mut p, &mut d),
            vec![Found {
                host: 0x1000,
                bytes: 1024 - 48,
                device: block + 48
            }]
        );
        let (mut h, mut p, mut d) = oracle(&maps);
        assert_eq!(
            discover(block + 8192, 1 << 20, &mut h, &mut p, &mut d),
            vec![]
        );
    }

    /// Large arrays take a few dozen questions, not one per byte.
    #[test]
    fn a_large_array_takes_few_questions() {
        let maps = [(0x4000_0000, 3 << 30, 0x10_0000_0000)];
        let (mut h, mut p, mut d) = oracle(&maps);
        let asked = std::cell::Cell::new(0);
        let found = discover(
            0x10_0000_0000,
            3 << 30,
            &mut |d| {
                asked.set(asked.get() + 1);
                h(d)
            },
            &mut |a, n| {
                asked.set(asked.get() + 1);
                p(a, n)
            },
            &mut d,
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].bytes, 3 << 30);
        assert!(asked.get() < 100, "{} questions", asked.get());
    }

    /// GCC 12's acc_hostptr answers for a block holding several arrays
    /// with any one of them (host start of that one plus the offset in
    /// the block): such answers do not map back and are dropped, not
    /// taken for an array at the wrong device address.
    #[test]
    fn answers_that_do_not_map_back_are_dropped() {
        let block = 0x7f00_0000;
        // u, rhs, forcing: static arrays side by side on the host, in one
        // block on the device.
        let maps = [
            (0x5000, 4096, block),
            (0x6000, 4096, block + 4096),
            (0x7000, 4096, block + 8192),
        ];
        let (_, mut p, mut d) = oracle(&maps);
        // The runtime's answer through rhs's key, whatever the address.
        let mut h = |dev: u64| 0x6000 + (dev - block) + 4096;
        let found = discover(block, 3 * 4096, &mut h, &mut p, &mut d);
        assert_eq!(found, vec![]);
    }
}
