//! The coherence check (`ACCPROF_CHECK=coherence`): stale host reads.
//!
//! The collector knows which host ranges are mapped to the device (the
//! acc_prof data events; with libgomp, which sends no host addresses for
//! arrays, the copies the CUDA driver is asked for) and when a compute
//! construct may have written their device copies. From that moment until
//! a download brings the host copy up to date, the host pages of those
//! ranges are protected (`PROT_NONE`); a host read faults, the handler
//! ([`fault`]) records where it came from, opens the page and the program
//! goes on unchanged. At the next construct boundary the bytes the read
//! touched are compared with the device copy's (a kernel that only read
//! the range left both equal): only a difference becomes a `Coherence`
//! record, which `accprof analyze` reports as C1.
//!
//! A source like `cupti` and `mpi`: fed by the acc_prof callback and the
//! driver callbacks, it pushes records into the sink. Off, it costs one
//! predictable branch per event and installs nothing.

// Interposes read/write like crate::interpose: not in the unit tests' binary.
#[cfg(not(test))]
mod calls;
mod checker;
mod device;
pub(crate) mod fault;
mod staging;
mod table;
mod walk;

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use accprof_trace::{AccEventKind, CheckSummary, ConstructKind, OwnWork, Record};

use crate::event::{flag, AccRaw, NONE32};
use checker::Checker;

/// `acc_device_host` in the OpenACC numbering.
const ACC_DEVICE_HOST: u32 = 2;

static ON: AtomicBool = AtomicBool::new(false);

/// Whether the check runs: the one branch the hot paths pay when it does
/// not.
#[inline(always)]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

static CHECKER: Mutex<Option<Checker>> = Mutex::new(None);

thread_local! {
    /// This thread is inside the check: the driver routines it calls (the
    /// device copy's bytes) send callbacks of their own, which must
    /// neither be acted on nor wait for the lock it holds.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

fn with_checker<T>(f: impl FnOnce(&mut Checker) -> T) -> Option<T> {
    if BUSY.try_with(Cell::get).unwrap_or(true) {
        return None;
    }
    let mut g = CHECKER.lock().ok()?;
    let start = crate::clock::now_ns();
    let _ = BUSY.try_with(|b| b.set(true));
    let out = f(g.get_or_insert_with(Checker::default));
    let _ = BUSY.try_with(|b| b.set(false));
    drop(g);
    own_work(start, crate::clock::now_ns());
    Some(out)
}

/// The check's time outside the handler, in all.
static WORK_NS: AtomicU64 = AtomicU64::new(0);

/// The check's stretches of work on a thread are recorded once they add
/// up to this much: most acc_prof events ask little of it, and a record
/// each would double the trace.
const MIN_OWN_WORK_NS: u64 = 1_000;

thread_local! {
    /// This thread's stretches of the check's work not yet recorded: the
    /// first one's start and their time.
    static UNRECORDED: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// The check worked from `start` to `end` on this thread: accprof's time,
/// not the runtime's nor the program's. Recorded as `OwnWork` (which the
/// analyzer's ledger counts as the collector's) from the start of the
/// first stretch not yet recorded, as long as the stretches since.
fn own_work(start: u64, end: u64) {
    let ns = end.saturating_sub(start);
    WORK_NS.fetch_add(ns, Ordering::Relaxed);
    let _ = UNRECORDED.try_with(|u| {
        let (first, sum) = u.get();
        let (first, sum) = if sum == 0 {
            (start, ns)
        } else {
            (first, sum + ns)
        };
        if sum < MIN_OWN_WORK_NS {
            u.set((first, sum));
            return;
        }
        u.set((0, 0));
        crate::sink::push(Record::OwnWork(OwnWork {
            thread: crate::clock::thread_id(),
            start_ns: first,
            end_ns: first + sum,
        }));
    });
}

/// Whether this thread is inside the check: a driver call made now is the
/// check's own (its reads of device copies), not the program's.
pub(crate) fn inside() -> bool {
    on() && BUSY.try_with(Cell::get).unwrap_or(false)
}

/// The correlation ids of the check's own driver calls whose CUPTI
/// records (the memcpy, the driver call's span) are still to come, with
/// how many are: those records are accprof's, never the program's
/// transfers.
static OWN_CALLS: Mutex<Vec<(u32, u8)>> = Mutex::new(Vec::new());
/// Set once the check made a driver call CUPTI records: until then the
/// activity records pay no lock.
static OWN_CALLS_MADE: AtomicBool = AtomicBool::new(false);

/// The check makes the driver call `correlation` (from the driver
/// callback, on the check's thread): CUPTI's `records` records of it are
/// to be left out.
pub(crate) fn own_call(correlation: u32, records: u8) {
    if let Ok(mut own) = OWN_CALLS.lock() {
        own.push((correlation, records));
        OWN_CALLS_MADE.store(true, Ordering::Release);
    }
}

/// Whether a CUPTI record of the call `correlation` is the check's own
/// (and is to be left out); each call's records are counted down.
pub(crate) fn is_own_record(correlation: u32) -> bool {
    if correlation == 0 || !OWN_CALLS_MADE.load(Ordering::Acquire) {
        return false;
    }
    let Ok(mut own) = OWN_CALLS.lock() else {
        return false;
    };
    own_record_in(&mut own, correlation)
}

fn own_record_in(own: &mut Vec<(u32, u8)>, correlation: u32) -> bool {
    let Some(i) = own.iter().position(|&(c, _)| c == correlation) else {
        return false;
    };
    own[i].1 = own[i].1.saturating_sub(1);
    if own[i].1 == 0 {
        own.swap_remove(i);
    }
    true
}

/// Installs the handler when `ACCPROF_CHECK` asks for the check; called
/// once at start, after the collector's own signal handlers.
pub(crate) fn start() {
    if !crate::config::config().coherence {
        return;
    }
    fault::install();
    staging::watch_runtime_frees();
    let (lo, hi) = thread_block();
    TLS_LO.store(lo, Ordering::Relaxed);
    TLS_HI.store(hi, Ordering::Relaxed);
    ON.store(true, Ordering::Release);
}

/// The starting thread's static TLS and thread control block (errno, the
/// stack guard, the check's own thread-locals): the handler reads them, so
/// their pages are never protected. glibc takes the main thread's block
/// from the heap's first pages (`sbrk`), where a small array may sit too.
static TLS_LO: AtomicU64 = AtomicU64::new(0);
static TLS_HI: AtomicU64 = AtomicU64::new(0);

/// The pages from the lowest thread-local the handler reads to the thread
/// control block's header (the stack guard), exactly: a range on the next
/// page (an array mapped right below the TLS block) is still watched.
fn thread_block() -> (u64, u64) {
    let page = fault::PAGE.load(Ordering::Relaxed);
    let ours = fault::IN_CONSTRUCT.with(|c| c as *const Cell<u32> as u64);
    // SAFETY: errno's location and the thread's handle have no
    // preconditions.
    let (errno, tp) = unsafe { (libc::__errno_location() as u64, libc::pthread_self() as u64) };
    let lo = ours.min(errno).min(tp) & !(page - 1);
    // The header's words the handler's code may read (guards at +0x28).
    let top = ours.max(errno).max(tp.saturating_add(0x40));
    let hi = top.saturating_add(page - 1) & !(page - 1);
    (lo, hi)
}

/// Whether `host..host+bytes` shares a page with the starting thread's
/// thread-local block (see [`thread_block`]).
pub(super) fn on_thread_block(host: u64, bytes: u64) -> bool {
    let (lo, hi) = (
        TLS_LO.load(Ordering::Relaxed),
        TLS_HI.load(Ordering::Relaxed),
    );
    let (plo, phi) = table::page_span(host, bytes, fault::PAGE.load(Ordering::Relaxed));
    lo < hi && plo < hi && phi > lo
}

thread_local! {
    /// The constructs open on this thread, innermost last (the first 8):
    /// kind and region.
    static OPEN: [Cell<(u8, u64)>; 8] = const { [const { Cell::new((u8::MAX, 0)) }; 8] };
}

/// The innermost construct open on this thread: kind and region.
fn innermost() -> Option<(ConstructKind, u64)> {
    let depth = fault::IN_CONSTRUCT.try_with(Cell::get).unwrap_or(0) as usize;
    if depth == 0 {
        return None;
    }
    let (k, region) = OPEN
        .try_with(|o| o.get(depth - 1).map(Cell::get))
        .ok()
        .flatten()?;
    Some((ConstructKind::from_raw(i64::from(k))?, region))
}

/// One acc_prof event, as the callback recorded it.
pub(crate) fn on_acc(a: &AccRaw) {
    use AccEventKind::*;
    if BUSY.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    let starts = matches!(
        a.kind,
        ComputeConstructStart | EnterDataStart | ExitDataStart | UpdateStart | WaitStart
    );
    let ends = matches!(
        a.kind,
        ComputeConstructEnd | EnterDataEnd | ExitDataEnd | UpdateEnd | WaitEnd
    );
    if starts {
        let depth = fault::IN_CONSTRUCT.try_with(Cell::get).unwrap_or(0) as usize;
        let _ = OPEN.try_with(|o| {
            if let Some(c) = o.get(depth) {
                c.set((a.construct, a.region));
            }
        });
        fault::construct_entered();
    } else if ends {
        fault::construct_left();
    }
    let has = |bit: u8| a.flags & bit != 0;
    let data = has(flag::DATA);
    let (bytes, host, device) = (
        has(flag::HAS_P0).then_some(a.p[0]),
        has(flag::HAS_P1).then_some(a.p[1]),
        has(flag::HAS_P2).then_some(a.p[2]),
    );
    let on_host = a.device_type == ACC_DEVICE_HOST || (data && host.is_some() && host == device);
    let _ = with_checker(|c| {
        if on_host {
            c.host_seen = true;
            return;
        }
        if a.device_type != NONE32 && a.device_type > ACC_DEVICE_HOST {
            c.device_seen = true;
        }
        if starts {
            // The device copy may change from here on: compare first.
            c.settle(true);
            if a.kind == ComputeConstructStart {
                c.lost_writes(a.region);
            }
        }
        match (a.kind, host, bytes) {
            (Create, Some(h), Some(b)) => c.map(h, b, device.unwrap_or(0), a.name, true),
            (EnqueueUploadStart, Some(h), Some(b)) => c.host_updated(h, b, true, None),
            (EnqueueDownloadStart, Some(h), Some(b)) => {
                let by = innermost().and_then(|(k, r)| (k == ConstructKind::Update).then_some(r));
                c.host_updated(h, b, false, by)
            }
            (Delete, Some(h), b) => {
                let end = h.saturating_add(b.unwrap_or(1).max(1));
                c.unmap(|r| r.start >= h && r.start < end)
            }
            (EnterDataEnd, ..) => c.prove(),
            (ComputeConstructEnd, ..) => c.device_written(a.region),
            _ => {}
        }
        if ends {
            c.apply();
        }
    });
}

/// A host <-> device copy the driver is asked for (CUPTI's callback, on
/// the calling thread, before the copy).
pub(crate) fn driver_copy(
    upload: bool,
    host: Option<u64>,
    bytes: Option<u64>,
    device: Option<u64>,
) {
    let (Some(h), Some(b)) = (host, bytes) else {
        return;
    };
    let device = device.unwrap_or(0);
    let open = innermost();
    let _ = with_checker(|c| {
        if c.host_seen && !c.device_seen {
            return;
        }
        c.copies_seen += 1;
        let by = open.and_then(|(k, r)| (k == ConstructKind::Update).then_some(r));
        c.host_updated(h, b, upload, if upload { None } else { by });
        // Copies of a data construct map a range that outlives it; those
        // of a compute construct (its arguments, its own clauses) end with
        // it.
        let data = matches!(
            open,
            Some((ConstructKind::Data | ConstructKind::EnterData, _))
        );
        if upload && data && device != 0 {
            c.map(h, b, device, 0, false);
        }
    });
}

/// The driver allocated a device block (only followed while the check
/// runs).
pub(crate) fn device_alloc(at: u64, bytes: u64) {
    let _ = with_checker(|c| {
        c.blocks.insert(at, bytes);
    });
}

/// The driver is about to free the device block at `at`: the ranges whose
/// device copies it holds are no longer mapped. This, not the OpenACC
/// runtime's routines, tells when a range goes: libgomp's data events give
/// no host addresses, and its `acc_is_present` takes the device lock that
/// another thread may hold while it waits for the profiling lock this
/// thread's callback holds.
pub(crate) fn device_free(at: u64) {
    let _ = with_checker(|c| {
        let size = c.blocks.remove(&at).unwrap_or(1);
        let end = at.saturating_add(size);
        c.unmap(|r| r.device >= at && r.device < end);
        c.apply();
    });
}

/// A call that hands `addr..addr+len` to the system or to MPI (which
/// would find a protected page an error, not a fault): the accesses it
/// makes are recorded as the handler would have (`write`: the call writes
/// the host bytes), at the address `code_addr` gives (inside the call
/// instruction; asked only when a watched range is touched), and the pages
/// are opened before the call.
pub(crate) fn host_buffer(addr: u64, len: u64, write: bool, code_addr: &dyn Fn() -> u64) {
    if !on() || len == 0 || addr == 0 {
        return;
    }
    let end = addr.saturating_add(len);
    let now = crate::clock::now_ns();
    fault::with_snapshot(|s| {
        let mut code = None;
        for r in s
            .watched()
            .iter()
            .filter(|r| r.start < end && r.end() > addr)
        {
            let at = *code.get_or_insert_with(code_addr);
            fault::access(now, at, addr.max(r.start), write, *r);
        }
        let (lo, hi) = table::page_span(addr, len, fault::PAGE.load(Ordering::Relaxed));
        if s.spans().iter().any(|sp| sp.0 < hi && sp.1 > lo) {
            fault::open_span(lo, hi);
        }
    });
}

thread_local! {
    /// This thread's stack (low, high), once asked.
    static STACK: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// Whether `host..host+bytes` touches the calling thread's stack: its
/// pages cannot be protected, the handler itself runs there.
pub(super) fn on_own_stack(host: u64, bytes: u64) -> bool {
    let bounds = STACK.try_with(|s| {
        if s.get().is_none() {
            s.set(stack_bounds());
        }
        s.get()
    });
    let Ok(Some((lo, hi))) = bounds else {
        return false;
    };
    host < hi && host.saturating_add(bytes) > lo
}

fn stack_bounds() -> Option<(u64, u64)> {
    // SAFETY: pthread_getattr_np fills the attribute we own, destroyed
    // after reading the stack's address and size.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut size = 0usize;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        ok.then(|| (addr as u64, addr as u64 + size as u64))
    }
}

/// At exit: the faults still waiting (the device may be gone: they stay
/// unconfirmed), the downloads nobody read, every page opened, and the
/// note.
pub(crate) fn at_exit() {
    if !ON.swap(false, Ordering::AcqRel) {
        return;
    }
    let Some((note, mut summary)) = with_checker(|c| {
        c.finish();
        (exit_note(c), summary(c))
    }) else {
        return;
    };
    summary.work_ns = WORK_NS.load(Ordering::Relaxed);
    crate::sink::push(Record::CheckSummary(summary));
    if let Some(note) = note {
        // Asked for explicitly: said even under ACCPROF_QUIET.
        crate::note::error(&note);
    }
}

/// The check's closing counts (its work time is added by the caller).
fn summary(c: &Checker) -> CheckSummary {
    let (ranges, bytes) = merged(&c.ever_watched);
    CheckSummary {
        time_ns: crate::clock::now_ns(),
        applied: c.device_seen,
        ranges,
        bytes,
        faults: fault::FAULTS.load(Ordering::Relaxed),
        handler_ns: fault::HANDLER_NS.load(Ordering::Relaxed),
        work_ns: 0,
    }
}

/// How many host ranges, and how many bytes, the ranges watched at some
/// time cover: parts of one array split by partial updates, or the same
/// array watched again at other lengths, count once.
fn merged(watched: &std::collections::BTreeMap<u64, u64>) -> (u64, u64) {
    let (mut ranges, mut bytes, mut end) = (0u64, 0u64, 0u64);
    for (&start, &len) in watched {
        let stop = start.saturating_add(len);
        if ranges > 0 && start < end {
            bytes += stop.saturating_sub(end);
            end = end.max(stop);
            continue;
        }
        ranges += 1;
        bytes += len;
        end = stop;
    }
    (ranges, bytes)
}

fn exit_note(c: &Checker) -> Option<String> {
    if c.host_seen && !c.device_seen {
        return Some(
            "coherence check: does not apply: no device copies (the OpenACC device is the host, or shares its memory)"
                .into(),
        );
    }
    if !c.device_seen {
        return None;
    }
    if c.mapped <= c.staged && c.copies_seen > 0 {
        return Some(
            "coherence check: no array stayed on the device between constructs (every copy belonged to a compute construct's own clauses), so no host read could find it stale"
                .into(),
        );
    }
    if c.mapped == 0 {
        return Some(
            "coherence check: no host range mapped to the device was seen, so nothing was checked (GCC's libgomp gives its arrays' host addresses only through CUPTI's copies: is CUPTI off?)"
                .into(),
        );
    }
    let faults = fault::FAULTS.load(Ordering::Relaxed);
    let us = fault::HANDLER_NS.load(Ordering::Relaxed) as f64 / 1e3;
    let mut s = format!(
        "coherence check: {faults} faults ({us:.1} us in the handler); stale host reads: {} confirmed, {} found current, {} unconfirmed; lost host writes: {}; downloads nobody read: {}",
        c.confirmed, c.current, c.unconfirmed, c.lost_writes, c.unread_downloads
    );
    let extra = [
        (
            fault::WRITES.load(Ordering::Relaxed),
            "host writes into stale ranges (not checked)",
        ),
        (
            fault::RING_FULL.load(Ordering::Relaxed),
            "faults not kept (more than 256 between two constructs)",
        ),
        (
            c.unwatched + c.table.overflow,
            "ranges not watched (on a stack, or not protectable)",
        ),
        (
            c.staged,
            "copies from the runtime's staging buffers (arrays under 32 KiB mapped together: not watched)",
        ),
    ];
    for (n, what) in extra {
        if n > 0 {
            s.push_str(&format!("; {n} {what}"));
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::{exit_note, merged, own_record_in, Checker};
    use std::collections::BTreeMap;

    /// Both of CUPTI's records of the check's own copy are left out, and
    /// nothing else: the program's records with other correlation ids go
    /// through, and once both came the id is forgotten (CUPTI reuses
    /// nothing, but the list must not grow).
    #[test]
    fn the_checks_own_copies_are_left_out_once_each_record() {
        let mut own = vec![(7, 2), (9, 2)];
        assert!(!own_record_in(&mut own, 8));
        assert!(own_record_in(&mut own, 7));
        assert!(own_record_in(&mut own, 7));
        assert!(!own_record_in(&mut own, 7));
        assert_eq!(own, vec![(9, 2)]);
    }

    /// Parts of one array (split by a partial update) and the same array
    /// watched again at another length count once; arrays side by side
    /// count apart.
    #[test]
    fn watched_ranges_are_counted_once_each() {
        let mut w = BTreeMap::new();
        assert_eq!(merged(&w), (0, 0));
        w.insert(0x1000, 0x800);
        w.insert(0x1400, 0x400); // a part of the first
        w.insert(0x1800, 0x100); // the next array, adjacent
        w.insert(0x4000, 0x100);
        w.insert(0x4080, 0x100); // overlaps the one before
        assert_eq!(merged(&w), (3, 0x800 + 0x100 + 0x180));
    }

    fn note(c: &Checker) -> String {
        exit_note(c).expect("a note")
    }

    /// Copies came (CUPTI was recording) but none of them mapped an array
    /// beyond its construct: nothing could be stale, and CUPTI is not to
    /// blame; with no copy at all, the addresses could not be known.
    #[test]
    fn a_run_without_data_regions_is_told_apart_from_one_without_cupti() {
        let mut c = Checker::default();
        c.device_seen = true;
        assert!(note(&c).contains("is CUPTI off?"), "{}", note(&c));
        c.copies_seen = 4;
        assert!(
            note(&c).contains("no array stayed on the device between constructs"),
            "{}",
            note(&c)
        );
        c.mapped = 1;
        assert!(
            note(&c).starts_with("coherence check: 0 faults"),
            "{}",
            note(&c)
        );
    }
}
