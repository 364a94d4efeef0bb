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
mod blocks;
#[cfg(not(test))]
pub(crate) mod calls;
mod checker;
mod data_start;
mod device;
pub(crate) mod fault;
mod lookup;
mod staging;
pub(crate) mod table;
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

/// The calling thread is the check's own for good (the lookup's worker):
/// its driver calls and callbacks are never acted on.
fn enter_own_thread() {
    let _ = BUSY.try_with(|b| b.set(true));
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
    // The program's handlers run from the collector's, which marks the
    // thread: a wrapped call made there takes the handler's path.
    crate::signals::keep_program_handlers();
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

/// The compute construct open on this thread, outermost (its data
/// clauses' enter and exit events nest in it with regions of their own):
/// its region.
fn enclosing_compute() -> Option<u64> {
    let depth = fault::IN_CONSTRUCT.try_with(Cell::get).unwrap_or(0) as usize;
    OPEN.try_with(|o| {
        o.iter().take(depth).map(Cell::get).find_map(|(k, region)| {
            ConstructKind::from_raw(i64::from(k))
                .filter(|k| blocks::is_compute(*k))
                .map(|_| region)
        })
    })
    .ok()
    .flatten()
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
    if !on_host && (starts || ends) && a.kind != WaitStart && a.kind != WaitEnd {
        look_up();
    }
    let _ = with_checker(|c| {
        if on_host {
            c.host_seen = true;
            return;
        }
        if a.device_type != NONE32 && a.device_type > ACC_DEVICE_HOST {
            c.device_seen = true;
        }
        if starts {
            // Ranges mapped by copies outside any construct (the API
            // routines: acc_copyin, acc_update_device) are shown to be
            // arrays now, before a compute construct changes the device
            // copy they are compared with.
            c.prove();
            // The device copy may change from here on: compare first.
            c.settle(true);
            if a.kind == ComputeConstructStart {
                c.lost_writes(a.region);
            }
        }
        match (a.kind, host, bytes) {
            (Create, Some(h), Some(b)) => {
                c.map(h, b, device.unwrap_or(0), a.name, true);
            }
            (EnqueueUploadStart, Some(h), Some(b)) => c.host_updated(h, b, true, None),
            (EnqueueDownloadStart, Some(h), Some(b)) => {
                let by = innermost().and_then(|(k, r)| (k == ConstructKind::Update).then_some(r));
                c.host_updated(h, b, false, by)
            }
            (Delete, Some(h), b) => {
                let end = h.saturating_add(b.unwrap_or(1).max(1));
                c.unmap(|r| r.start >= h && r.start < end)
            }
            (ComputeConstructEnd, ..) => {
                c.device_written(a.region);
                c.blocks.construct_end(a.region);
                UNASKED.store(true, Ordering::Relaxed);
            }
            _ => {}
        }
        if ends {
            // The ranges mapped from copies made since (a data construct's
            // entry, an API routine's) are watched once shown to be arrays.
            c.prove();
            c.apply();
        }
    });
}

/// Asks the runtime which arrays the device blocks kept since the last
/// time hold (`create` copies nothing a copy could name) and maps them.
/// Only at the construct events libgomp sends outside its device lock
/// (start and end of compute, data, enter/exit data and update
/// constructs): the lookup takes that lock.
fn look_up() {
    // The checker's lock only when a kept block waits to be asked about.
    let blocks = if UNASKED.swap(false, Ordering::Relaxed) && lookup::available() {
        with_checker(|c| c.blocks.take_unasked()).unwrap_or_default()
    } else {
        Vec::new()
    };
    if blocks.is_empty() {
        mapped_by_runtime(lookup::take());
        return;
    }
    // The wait for the runtime's answers is the check's time.
    let start = crate::clock::now_ns();
    let found = lookup::ask(blocks);
    own_work(start, crate::clock::now_ns());
    mapped_by_runtime(found);
}

/// Set when a device block may have become kept (allocated outside a
/// compute construct, a global of the loaded code, or a compute
/// construct's block still allocated at its end): `look_up` has blocks to
/// ask about.
static UNASKED: AtomicBool = AtomicBool::new(false);

/// Arrays the runtime says it mapped (its mapping table, or the clauses
/// of a `data` construct it just entered), with their device copies.
fn mapped_by_runtime(found: Vec<lookup::Found>) {
    if found.is_empty() {
        return;
    }
    let _ = with_checker(|c| {
        for f in found {
            // Only blocks still kept: one freed while the lookup ran took
            // its arrays along.
            if c.blocks.kept_at(f.device).is_some() {
                let known = c
                    .table
                    .ranges()
                    .iter()
                    .any(|r| r.start == f.host && r.device == f.device && !r.gone);
                if c.map(f.host, f.bytes, f.device, 0, true) && !known {
                    c.looked_up += 1;
                }
            }
        }
        c.apply();
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
    let _ = with_checker(|c| on_copy(c, upload, h, b, device, open));
}

/// A copy of `bytes` between `host` and `device`, made while `open` (the
/// innermost construct on the calling thread) is open.
fn on_copy(
    c: &mut Checker,
    upload: bool,
    host: u64,
    bytes: u64,
    device: u64,
    open: Option<(ConstructKind, u64)>,
) {
    if c.host_seen && !c.device_seen {
        return;
    }
    c.copies_seen += 1;
    // A copy into a device block that outlived the construct that made it
    // (or made by a data construct's entry, an update) maps the host range
    // it copies; a compute construct's own temporaries do not.
    if let blocks::Copy::Maps { proven } = c.blocks.copy(device, open.map(|o| o.0)) {
        c.map(host, bytes, device, 0, proven);
    }
    let by = open.and_then(|(k, r)| (k == ConstructKind::Update).then_some(r));
    c.host_updated(host, bytes, upload, if upload { None } else { by });
}

/// The device block at `at` is freed: the ranges it held go.
fn on_free(c: &mut Checker, at: u64) {
    let (at, end) = c.blocks.free(at);
    c.unmap(|r| r.device >= at && r.device < end);
}

/// The driver allocated a device block (only followed while the check
/// runs).
pub(crate) fn device_alloc(at: u64, bytes: u64) {
    let compute = enclosing_compute();
    // A data construct's block: its clauses name its arrays.
    let named = compute.is_none() && data_start::entering();
    let _ = with_checker(|c| {
        c.blocks.alloc(at, bytes, compute);
        if named {
            c.blocks.named_by_clauses(at);
        }
    });
    if compute.is_none() && !named {
        UNASKED.store(true, Ordering::Relaxed);
    }
}

/// The runtime looked up a global of the code it loaded (a `declare`
/// variable, a Fortran module array): its device copy, for the whole run.
pub(crate) fn device_global(at: u64, bytes: u64) {
    let _ = with_checker(|c| c.blocks.global(at, bytes));
    UNASKED.store(true, Ordering::Relaxed);
}

/// The driver is about to free the device block at `at`: the ranges whose
/// device copies it holds are no longer mapped. This, not the OpenACC
/// runtime's routines, tells when a range goes: libgomp's data events give
/// no host addresses, and its `acc_is_present` takes the device lock that
/// another thread may hold while it waits for the profiling lock this
/// thread's callback holds.
pub(crate) fn device_free(at: u64) {
    let _ = with_checker(|c| {
        on_free(c, at);
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
    if !on() {
        return;
    }
    fault::host_call(addr, len, write, Some(code_addr));
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
    let (ranges, bytes) = c.watched_total();
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
    let (ranges, bytes) = c.watched_total();
    if ranges == 0 {
        let why = if c.copies_seen == 0 {
            "no host <-> device copy was seen (GCC's libgomp gives its arrays' host addresses only through CUPTI's copies: is CUPTI off?)".to_string()
        } else if c.blocks.kept_ever == 0 && c.staged == 0 {
            // Only here is it known that nothing stayed on the device.
            "no array stayed on the device between constructs (every device block was freed by the compute construct that made it), so no host read could find it stale".to_string()
        } else {
            format!(
                "{} device blocks ({}) outlived the construct that made them, but no copy into them named a host range this check could watch",
                c.blocks.kept_ever,
                size(c.blocks.kept_bytes)
            )
        };
        let mut s = format!("coherence check: watched nothing: {why}");
        push_unwatched(&mut s, c);
        return Some(s);
    }
    let faults = fault::FAULTS.load(Ordering::Relaxed);
    let us = fault::HANDLER_NS.load(Ordering::Relaxed) as f64 / 1e3;
    let mut s = format!(
        "coherence check: watched {ranges} host ranges ({}); {faults} faults ({us:.1} us in the handler); stale host reads: {} confirmed, {} found current, {} unconfirmed; lost host writes: {}; downloads nobody read: {}",
        size(bytes), c.confirmed, c.current, c.unconfirmed, c.lost_writes, c.unread_downloads
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
    ];
    for (n, what) in extra {
        if n > 0 {
            s.push_str(&format!("; {n} {what}"));
        }
    }
    push_unwatched(&mut s, c);
    push_lookup(&mut s, c);
    Some(s)
}

/// What the note adds on the runtime's mapping table: how many arrays it
/// named, or why it was not asked.
fn push_lookup(s: &mut String, c: &Checker) {
    if lookup::gave_up() {
        s.push_str("; the runtime's mapping table stopped answering (its device lock was held too long), so arrays no copy named (`create`) were watched only until then");
    } else if c.looked_up > 0 {
        let asked = match lookup::questions() {
            0 => String::new(),
            n => format!("; {n} questions to its table"),
        };
        s.push_str(&format!(
            "; {} arrays named by the runtime (its mapping table, or a data construct's clauses{asked})",
            c.looked_up
        ));
    }
}

/// What the note adds on what was not watched: ranges on a stack or not
/// protectable, and the runtime's staging copies.
fn push_unwatched(s: &mut String, c: &Checker) {
    let lost = c.unwatched + c.table.overflow;
    if lost > 0 {
        s.push_str(&format!(
            "; {lost} ranges not watched (on a stack, or not protectable)"
        ));
    }
    if c.pages_left_open > 0 {
        let n = c.pages_left_open;
        s.push_str(&format!(
            "; {n} {} left open (other data there, beside a watched array, was touched again and again; the array's bytes there are not watched)",
            if n == 1 { "page" } else { "pages" }
        ));
    }
    if c.staged > 0 {
        s.push_str(&format!(
            "; {} copies ({}) from the runtime's staging buffer (small arrays of one data construct uploaded together): {} of their arrays watched (found from the runtime's copies into the buffer, or from their own first copy since)",
            c.staged,
            size(c.staged_bytes),
            c.staged_learned.len()
        ));
    }
}

/// Bytes for a note: "512 B", "8.0 KiB", "3.2 MiB".
fn size(b: u64) -> String {
    match b {
        0..1024 => format!("{b} B"),
        1024..1048576 => format!("{:.1} KiB", b as f64 / 1024.0),
        _ => format!("{:.1} MiB", b as f64 / 1048576.0),
    }
}

#[cfg(test)]
mod tests {
    use super::table::State;
    use super::{exit_note, on_copy, on_free, own_record_in, Checker};
    use accprof_trace::ConstructKind::{self, *};

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
        let mut c = Checker::default();
        assert_eq!(c.watched_total(), (0, 0));
        let w = &mut c.seen;
        w.insert(0x1000, 0x800);
        w.insert(0x1400, 0x400); // a part of the first
        w.insert(0x1800, 0x100); // the next array, adjacent
        w.insert(0x4000, 0x100);
        w.insert(0x4080, 0x100); // overlaps the one before
        assert_eq!(c.watched_total(), (3, 0x800 + 0x100 + 0x180));
    }

    fn note(c: &Checker) -> String {
        exit_note(c).expect("a note")
    }

    /// A checker on a device with its own memory.
    fn device() -> Checker {
        let mut c = Checker::default();
        c.device_seen = true;
        c
    }

    // Host and device addresses nothing in this process uses (the checker
    // only compares and records them here).
    const U: u64 = 0x10_0000_0000;
    const DEV: u64 = 0x7_0000_0000;
    const MIB: u64 = 1 << 20;

    fn upload(c: &mut Checker, host: u64, bytes: u64, dev: u64, open: (ConstructKind, u64)) {
        on_copy(c, true, host, bytes, dev, Some(open));
    }

    fn download(c: &mut Checker, host: u64, bytes: u64, dev: u64, open: (ConstructKind, u64)) {
        on_copy(c, false, host, bytes, dev, Some(open));
    }

    /// Blocks the driver allocates inside a compute construct belong to
    /// it, not to the enter-data events nested in it (regions of their
    /// own): the region whose end event comes is the compute construct's.
    #[test]
    fn a_block_made_in_a_compute_construct_belongs_to_it() {
        let set = |open: &[(ConstructKind, u64)]| {
            super::OPEN.with(|o| {
                for (c, (k, r)) in o.iter().zip(open) {
                    c.set((*k as u8, *r));
                }
            });
            super::fault::IN_CONSTRUCT.with(|d| d.set(open.len() as u32));
        };
        set(&[(Parallel, 10), (Parallel, 11)]);
        assert_eq!(super::enclosing_compute(), Some(10));
        set(&[(Data, 5), (Kernels, 6), (Kernels, 7)]);
        assert_eq!(super::enclosing_compute(), Some(6));
        set(&[(Data, 5), (EnterData, 8)]);
        assert_eq!(super::enclosing_compute(), None);
        set(&[]);
        assert_eq!(super::enclosing_compute(), None);
    }

    /// Copies came (CUPTI was recording) but no device block outlived the
    /// construct that made it: nothing could be stale, and CUPTI is not to
    /// blame; with no copy at all, the addresses could not be known.
    #[test]
    fn a_run_without_data_regions_is_told_apart_from_one_without_cupti() {
        let mut c = device();
        assert!(note(&c).contains("is CUPTI off?"), "{}", note(&c));
        // A compute construct's own copyin: allocated, copied, freed
        // before its end.
        c.blocks.alloc(DEV, 4096, Some(3));
        upload(&mut c, U, 4096, DEV, (Parallel, 3));
        on_free(&mut c, DEV);
        c.blocks.construct_end(3);
        assert!(c.table.ranges().is_empty());
        assert!(
            note(&c).contains("no array stayed on the device between constructs"),
            "{}",
            note(&c)
        );
    }

    /// NPB SP's pattern: `data create(u)` in main (a block, no copy),
    /// `update device(u)`, compute under `data present(u)`, `update
    /// host(u)`: the update's copy maps u to the block, the compute
    /// construct makes it stale, the download current again, and the
    /// block's free unmaps it. The note says what was watched.
    #[test]
    fn create_then_update_is_watched_until_the_block_is_freed() {
        let mut c = device();
        c.blocks.alloc(DEV, 8 * MIB, None);
        assert!(
            !note(&c).contains("no array stayed on the device"),
            "a block outlived its construct: {}",
            note(&c)
        );
        upload(&mut c, U, 8 * MIB, DEV, (Update, 2));
        let r = c.table.ranges()[0];
        assert_eq!(
            (r.start, r.bytes, r.device, r.unproven),
            (U, 8 * MIB, DEV, false)
        );
        c.device_written(4);
        c.blocks.construct_end(4);
        assert_eq!(c.table.ranges()[0].state, State::DeviceNewer { since: 4 });
        download(&mut c, U, 8 * MIB, DEV, (Update, 5));
        let r = c.table.ranges()[0];
        assert_eq!(r.state, State::HostCurrent);
        assert_eq!(r.unread.map(|d| d.region), Some(5));
        on_free(&mut c, DEV);
        assert!(c.table.ranges().iter().all(|r| r.gone && r.device == 0));
        assert_eq!(c.watched_total(), (1, 8 * MIB));
        assert!(
            note(&c).starts_with("coherence check: watched 1 host ranges (8.0 MiB); 0 faults"),
            "{}",
            note(&c)
        );
    }

    /// `data create` (no copy) and nothing copied into the block since:
    /// the note says so instead of "no array stayed on the device".
    #[test]
    fn blocks_that_stayed_without_a_copy_are_said() {
        let mut c = device();
        c.blocks.alloc(DEV, 3 * MIB, None);
        c.blocks.alloc(DEV + 4 * MIB, MIB, None);
        c.blocks.alloc(DEV + 8 * MIB, 64, Some(3));
        upload(&mut c, U, 64, DEV + 8 * MIB, (Parallel, 3));
        on_free(&mut c, DEV + 8 * MIB);
        c.blocks.construct_end(3);
        let n = note(&c);
        assert!(
            n.starts_with("coherence check: watched nothing: 2 device blocks (4.0 MiB) outlived"),
            "{n}"
        );
    }

    /// `declare create` globals and Fortran module arrays: the loaded
    /// code's global is their device copy; `update device` maps them, a
    /// compute construct makes them stale.
    #[test]
    fn a_declared_global_is_mapped_by_its_update() {
        let mut c = device();
        c.blocks.global(DEV, 8000);
        upload(&mut c, U, 8000, DEV, (Update, 1));
        c.device_written(2);
        assert_eq!(c.table.ranges()[0].state, State::DeviceNewer { since: 2 });
        // acc_update_self outside any construct (an API routine): a
        // download into the kept global, the range current again.
        on_copy(&mut c, false, U + 80, 80, DEV + 80, None);
        assert_eq!(c.table.ranges().len(), 3, "split at the part downloaded");
        assert_eq!(c.table.ranges()[1].state, State::HostCurrent);
    }

    /// `acc_malloc` + `acc_map_data` (a block outside any construct, no
    /// copy) then `update device`; `acc_create` then `acc_update_device`
    /// (no construct at all): both map. A copy outside any construct to a
    /// block never allocated is nothing.
    #[test]
    fn api_routines_map_through_their_blocks() {
        let mut c = device();
        c.blocks.alloc(DEV, 4096, None);
        upload(&mut c, U, 4096, DEV, (Update, 1));
        c.blocks.alloc(DEV + MIB, 4096, None);
        on_copy(&mut c, true, U + MIB, 4096, DEV + MIB, None);
        on_copy(&mut c, true, U + 2 * MIB, 4096, DEV + 2 * MIB, None);
        let starts: Vec<u64> = c.table.ranges().iter().map(|r| r.start).collect();
        assert_eq!(starts, [U, U + MIB]);
        // From an API routine: watched once shown to be the array (`prove`
        // reads the device copy, not here).
        assert!(c.table.ranges()[1].unproven);
    }

    /// Fortran `update host(p(1:10))` of an array only updates copy, then
    /// `update host(p)`: one range, not a part and a whole.
    #[test]
    fn a_partial_update_before_the_whole_leaves_one_range() {
        let mut c = device();
        c.blocks.alloc(DEV, 8000, None);
        download(&mut c, U + 80, 80, DEV + 80, (Update, 1));
        assert_eq!(c.table.ranges().len(), 1);
        download(&mut c, U, 8000, DEV, (Update, 2));
        assert_eq!(c.table.ranges().len(), 1);
        assert_eq!(
            (c.table.ranges()[0].start, c.table.ranges()[0].bytes),
            (U, 8000)
        );
        download(&mut c, U + 800, 80, DEV + 800, (Update, 3));
        assert!(c
            .table
            .ranges()
            .iter()
            .all(|r| r.start >= U && r.end() <= U + 8000));
        assert_eq!(c.watched_total(), (1, 8000));
    }

    /// libgomp stages small arrays of one data construct through a buffer
    /// it frees after the upload: not watched then; an array of it is
    /// watched from its own first copy (an update into the same device
    /// span), and the note counts both.
    #[test]
    fn staged_arrays_are_watched_from_their_own_first_copy() {
        let mut c = device();
        let buf = Box::into_raw(Box::new([0u8; 256]));
        let s = buf as u64;
        c.blocks.alloc(DEV, 256, None);
        upload(&mut c, s, 256, DEV, (Data, 1));
        assert!(c.table.ranges()[0].unproven);
        // SAFETY: a block of the global allocator (malloc), freed once, as
        // the runtime frees its buffer.
        unsafe { super::staging::runtime_free(buf.cast()) };
        c.prove();
        assert!(c.table.ranges().is_empty());
        assert_eq!((c.staged, c.staged_bytes), (1, 256));
        assert_eq!(c.watched_total(), (0, 0));
        upload(&mut c, U, 128, DEV + 128, (Update, 2));
        assert_eq!(c.watched_total(), (1, 128));
        let n = note(&c);
        assert!(
            n.contains("1 copies (256 B) from the runtime's staging buffer")
                && n.contains(": 1 of their arrays watched"),
            "{n}"
        );
        super::staging::forget(s);
    }
}
