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

pub(crate) mod fault;
mod table;

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use accprof_trace::{AccEventKind, Coherence, CoherenceKind, ConstructKind, Record, RegionId};

use crate::event::{flag, AccRaw, NONE32};
use table::{page_span, protected_spans, Snapshot, Table};

/// `acc_device_host` in the OpenACC numbering.
const ACC_DEVICE_HOST: u32 = 2;

static ON: AtomicBool = AtomicBool::new(false);

/// Whether the check runs: the one branch the hot paths pay when it does
/// not.
#[inline(always)]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

#[derive(Default)]
struct Checker {
    table: Table,
    /// Replaced snapshots a handler may still read (see `fault::publish`).
    #[allow(clippy::vec_box)]
    retired: Vec<Box<Snapshot>>,
    /// Constructs ran on a device with its own memory / on the host.
    device_seen: bool,
    host_seen: bool,
    confirmed: u64,
    current: u64,
    unconfirmed: u64,
    /// Ranges ever mapped: none on a device means nothing was checked.
    mapped: u64,
    /// Host <-> device copies the driver reported (CUPTI's callbacks): with
    /// none, the ranges' host addresses could not be known.
    copies_seen: u64,
    /// Ranges left unwatched: on a thread's stack (protecting it would
    /// leave no room for the handler) or in memory `mprotect` refused.
    unwatched: u64,
}

static CHECKER: Mutex<Option<Checker>> = Mutex::new(None);

thread_local! {
    /// This thread is inside the check: the runtime routines it calls
    /// (the device copy's bytes) send events and driver callbacks of their
    /// own, which must neither be acted on nor wait for the lock it holds.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

fn with_checker<T>(f: impl FnOnce(&mut Checker) -> T) -> Option<T> {
    if BUSY.try_with(Cell::get).unwrap_or(true) {
        return None;
    }
    let mut g = CHECKER.lock().ok()?;
    let _ = BUSY.try_with(|b| b.set(true));
    let out = f(g.get_or_insert_with(Checker::default));
    let _ = BUSY.try_with(|b| b.set(false));
    Some(out)
}

/// Installs the handler when `ACCPROF_CHECK` asks for the check; called
/// once at start, after the collector's own signal handlers.
pub(crate) fn start() {
    if !crate::config::config().coherence {
        return;
    }
    fault::install(fault::real_sigaction());
    ON.store(true, Ordering::Release);
}

/// The program's `sigaction` for SIGSEGV and SIGBUS while the check runs
/// (see [`fault::intercept`]); `None`: not ours, call the system's.
///
/// # Safety
/// As sigaction(2).
#[cfg_attr(test, allow(dead_code))]
pub(crate) unsafe fn intercept_sigaction(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> Option<libc::c_int> {
    if !on() {
        return None;
    }
    // SAFETY: the caller's promise.
    unsafe { fault::intercept(sig, act, old) }
}

/// Whether `signal(sig, ...)` must go through [`intercept_sigaction`].
#[cfg_attr(test, allow(dead_code))]
pub(crate) fn intercepts(sig: libc::c_int) -> bool {
    on() && fault::intercepts(sig)
}

thread_local! {
    /// The kinds of the constructs open on this thread, innermost last
    /// (the first 8).
    static KINDS: [Cell<u8>; 8] = const { [const { Cell::new(u8::MAX) }; 8] };
}

fn innermost_kind() -> Option<ConstructKind> {
    let depth = fault::IN_CONSTRUCT.try_with(Cell::get).unwrap_or(0) as usize;
    if depth == 0 {
        return None;
    }
    let k = KINDS
        .try_with(|k| k.get(depth - 1).map(Cell::get))
        .ok()
        .flatten()?;
    ConstructKind::from_raw(i64::from(k))
}

fn page() -> u64 {
    fault::PAGE.load(Ordering::Relaxed)
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
        let _ = KINDS.try_with(|k| {
            if let Some(c) = k.get(depth) {
                c.set(a.construct);
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
        // The device copy may change from here on: compare first.
        if starts {
            confirm(c, true);
        }
        match (a.kind, host, bytes) {
            (Create, Some(h), Some(b)) => {
                c.map(h, b, device.unwrap_or(0), a.name);
            }
            (EnqueueUploadStart, Some(h), Some(b)) | (EnqueueDownloadStart, Some(h), Some(b)) => {
                c.host_updated(h, b);
            }
            (Delete, Some(h), b) => c.unmap(h, b.unwrap_or(1)),
            (ExitDataEnd, ..) => c.prune_absent(),
            (ComputeConstructEnd, ..) => c.device_written(a.region),
            _ => {}
        }
    });
}

/// A host <-> device copy the driver is asked for (CUPTI's callback, on
/// the calling thread, before the copy).
pub(crate) fn driver_copy(upload: bool, host: Option<u64>, bytes: Option<u64>) {
    let (Some(h), Some(b)) = (host, bytes) else {
        return;
    };
    let kind = innermost_kind();
    let _ = with_checker(|c| {
        if c.host_seen && !c.device_seen {
            return;
        }
        c.copies_seen += 1;
        c.host_updated(h, b);
        // Copies of a data construct map a range that outlives it; those
        // of a compute construct (its arguments, its own clauses) end with
        // it.
        if upload && matches!(kind, Some(ConstructKind::Data | ConstructKind::EnterData)) {
            c.map(h, b, 0, 0);
        }
    });
}

impl Checker {
    fn map(&mut self, host: u64, bytes: u64, device: u64, name: u32) {
        if on_own_stack(host, bytes) {
            self.unwatched += 1;
            return;
        }
        let was_stale = self
            .table
            .ranges()
            .iter()
            .any(|r| r.start == host && r.is_stale());
        if !self.table.map(host, bytes, device, name) {
            return;
        }
        self.mapped += 1;
        if was_stale {
            open(host, bytes);
            self.publish();
        }
    }

    /// The runtime is about to read (upload) or write (download) the host
    /// bytes: open their pages first; afterwards both copies agree.
    fn host_updated(&mut self, host: u64, bytes: u64) {
        let end = host.saturating_add(bytes);
        let touches_stale = self
            .table
            .ranges()
            .iter()
            .any(|r| r.is_stale() && r.start < end && r.end() > host);
        if !touches_stale {
            return;
        }
        open(host, bytes);
        self.table.host_updated(host, bytes);
        self.publish();
    }

    fn unmap(&mut self, host: u64, bytes: u64) {
        let gone: Vec<_> = self
            .table
            .ranges()
            .iter()
            .filter(|r| r.start >= host && r.start < host.saturating_add(bytes.max(1)))
            .copied()
            .collect();
        if gone.is_empty() {
            return;
        }
        for r in &gone {
            open(r.start, r.bytes);
        }
        self.table.unmap(host, bytes);
        self.publish();
    }

    /// After an exit data: forget the ranges the runtime no longer holds
    /// (asked of the OpenACC API when the events gave no device address).
    fn prune_absent(&mut self) {
        let Some(present) = api().is_present else {
            return;
        };
        let mut gone = Vec::new();
        self.table.retain(|r| {
            // SAFETY: acc_is_present takes any host address and size.
            let keep =
                r.device != 0 || unsafe { present(r.start as *mut c_void, r.bytes as usize) } != 0;
            if !keep {
                gone.push(*r);
            }
            keep
        });
        for r in &gone {
            open(r.start, r.bytes);
        }
        if !gone.is_empty() {
            self.publish();
        }
    }

    /// A compute construct ended: the ranges the device holds may be newer
    /// there. Their pages are protected until the host copy is updated.
    fn device_written(&mut self, region: u64) {
        let present = api().is_present;
        self.table.device_written(region, |r| {
            r.device != 0
                || present.is_some_and(|p| {
                    // SAFETY: acc_is_present takes any host address and size.
                    unsafe { p(r.start as *mut c_void, r.bytes as usize) != 0 }
                })
        });
        let stale = self.table.stale();
        if stale.is_empty() {
            return;
        }
        // Published before the pages close, so a fault always finds its
        // range.
        self.publish();
        for (lo, hi) in protected_spans(&stale, page()) {
            // SAFETY: whole pages of host ranges the program mapped to the
            // device; the handler opens any page something else needs.
            let failed = unsafe {
                libc::mprotect(
                    lo as usize as *mut c_void,
                    (hi - lo) as usize,
                    libc::PROT_NONE,
                )
            } != 0;
            if failed {
                self.unwatched += 1;
            }
        }
    }

    fn publish(&mut self) {
        fault::publish(Snapshot::new(self.table.stale(), page()), &mut self.retired);
    }
}

/// Gives the pages of `host..host+bytes` their access back.
fn open(host: u64, bytes: u64) {
    let (lo, hi) = page_span(host, bytes, page());
    // SAFETY: pages the check may have protected; they were readable and
    // writable before.
    unsafe {
        libc::mprotect(
            lo as usize as *mut c_void,
            (hi - lo) as usize,
            libc::PROT_READ | libc::PROT_WRITE,
        );
    }
}

thread_local! {
    /// This thread's stack (low, high), once asked.
    static STACK: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// Whether `host..host+bytes` touches the calling thread's stack: its
/// pages cannot be protected, the handler itself runs there.
fn on_own_stack(host: u64, bytes: u64) -> bool {
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

type IsPresent = unsafe extern "C" fn(*mut c_void, usize) -> libc::c_int;
type DevicePtr = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
/// cuMemcpyDtoH_v2(dst, src, bytes): the CUDA driver's copy, not the
/// OpenACC runtime's: libgomp holds its profiling lock while it calls our
/// callbacks, and its `acc_memcpy_from_device` takes that lock again to
/// dispatch its own events (a deadlock seen on an H200).
type MemcpyDtoH = unsafe extern "C" fn(*mut c_void, u64, usize) -> libc::c_int;
/// cuCtxGetCurrent(&ctx): whether this thread has a CUDA context to copy in.
type CtxGetCurrent = unsafe extern "C" fn(*mut *mut c_void) -> libc::c_int;

/// The OpenACC API routines the check asks (the runtime's, found by
/// name; absent ones leave what they decide undecided).
#[derive(Clone, Copy)]
struct Api {
    is_present: Option<IsPresent>,
    deviceptr: Option<DevicePtr>,
    memcpy_dtoh: Option<MemcpyDtoH>,
    ctx_get_current: Option<CtxGetCurrent>,
}

fn api() -> Api {
    static API: std::sync::OnceLock<Api> = std::sync::OnceLock::new();
    *API.get_or_init(|| {
        let find = |name: &std::ffi::CStr| {
            // SAFETY: dlsym with a NUL-terminated name.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            // The collector's own entry (it interposes the API routines to
            // record the program's calls) is not the runtime's: take the
            // next definition.
            let p = if !p.is_null() && in_this_library(p) {
                // SAFETY: as above.
                unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
            } else {
                p
            };
            (!p.is_null()).then_some(p)
        };
        Api {
            is_present: find(c"acc_is_present").map(|p| {
                // SAFETY: the OpenACC routine of this name has this
                // signature.
                unsafe { std::mem::transmute::<*mut c_void, IsPresent>(p) }
            }),
            deviceptr: find(c"acc_deviceptr").map(|p| {
                // SAFETY: the OpenACC routine of this name has this
                // signature.
                unsafe { std::mem::transmute::<*mut c_void, DevicePtr>(p) }
            }),
            memcpy_dtoh: cuda(c"cuMemcpyDtoH_v2").map(|p| {
                // SAFETY: the CUDA driver routine of this name has this
                // signature (CUdeviceptr is 64 bits, CUresult an int).
                unsafe { std::mem::transmute::<*mut c_void, MemcpyDtoH>(p) }
            }),
            ctx_get_current: cuda(c"cuCtxGetCurrent").map(|p| {
                // SAFETY: as above.
                unsafe { std::mem::transmute::<*mut c_void, CtxGetCurrent>(p) }
            }),
        }
    })
}

/// A routine of the CUDA driver the runtime loaded (never loaded here).
fn cuda(name: &std::ffi::CStr) -> Option<*mut c_void> {
    // SAFETY: dlopen with a NUL-terminated name; RTLD_NOLOAD only looks for
    // a library already loaded, and the handle is never closed.
    let h = unsafe {
        libc::dlopen(
            c"libcuda.so.1".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_NOLOAD,
        )
    };
    if h.is_null() {
        return None;
    }
    // SAFETY: dlsym on a live handle with a NUL-terminated name.
    let p = unsafe { libc::dlsym(h, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// Whether `p` is an address of this library.
fn in_this_library(p: *mut c_void) -> bool {
    let base = |addr: *const c_void| {
        // SAFETY: dladdr fills the struct we own; it only reads `addr`.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            (libc::dladdr(addr, &mut info) != 0).then_some(info.dli_fbase as usize)
        }
    };
    let own = base(in_this_library as *const c_void);
    own.is_some() && base(p) == own
}

/// The device's bytes of `f`'s saved window, when they can be read.
fn device_bytes(f: &fault::Fault, out: &mut [u8]) -> bool {
    let api = api();
    let (Some(copy), Some(current)) = (api.memcpy_dtoh, api.ctx_get_current) else {
        return false;
    };
    let mut ctx: *mut c_void = std::ptr::null_mut();
    // SAFETY: cuCtxGetCurrent writes one pointer into `ctx`.
    if unsafe { current(&mut ctx) } != 0 || ctx.is_null() {
        return false;
    }
    let base = if f.range.device != 0 {
        f.range.device
    } else {
        match api.deviceptr {
            // SAFETY: acc_deviceptr takes any host address (NULL when it is
            // not present).
            Some(d) => (unsafe { d(f.range.start as *mut c_void) }) as u64,
            None => 0,
        }
    };
    if base == 0 {
        return false;
    }
    let at = base + (f.saved_at - f.range.start);
    // SAFETY: a present range's device copy holds the whole range; the
    // window lies inside it (save_window); `out` has room for it.
    unsafe { copy(out.as_mut_ptr().cast(), at, out.len()) == 0 }
}

/// Compares the faults recorded since the last boundary with the device
/// copy (when `device` is true: the device may still be asked) and
/// records the stale reads.
fn confirm(c: &mut Checker, device: bool) {
    let mut faults = Vec::new();
    fault::drain(|f| faults.push(f));
    for f in faults {
        let mut dev = [0u8; fault::SAVED];
        let n = f.saved_len;
        let confirmed = if device && device_bytes(&f, &mut dev[..n]) {
            if dev[..n] == f.saved[..n] {
                c.current += 1;
                continue;
            }
            c.confirmed += 1;
            true
        } else {
            c.unconfirmed += 1;
            false
        };
        crate::callsite::define_module_of(f.code_addr);
        let since = match f.range.state {
            table::State::DeviceNewer { since } => since,
            table::State::HostCurrent => 0,
        };
        crate::sink::push(Record::Coherence(Coherence {
            kind: CoherenceKind::StaleRead,
            time_ns: f.time,
            thread: f.thread,
            code_addr: f.code_addr,
            host_addr: f.host_addr,
            range_start: f.range.start,
            range_bytes: f.range.bytes,
            variable: (f.range.name != 0).then_some(accprof_trace::StringId(f.range.name)),
            construct: RegionId(since),
            confirmed,
        }));
    }
}

/// At exit: the faults still waiting (the device may be gone: they stay
/// unconfirmed), every page opened, and the note.
pub(crate) fn at_exit() {
    if !ON.swap(false, Ordering::AcqRel) {
        return;
    }
    let Some(note) = with_checker(|c| {
        confirm(c, false);
        for r in c.table.ranges() {
            if r.is_stale() {
                open(r.start, r.bytes);
            }
        }
        c.table.retain(|_| false);
        c.publish();
        exit_note(c)
    }) else {
        return;
    };
    if let Some(note) = note {
        // Asked for explicitly: said even under ACCPROF_QUIET.
        crate::note::error(&note);
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
    if c.mapped == 0 && c.copies_seen > 0 {
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
        "coherence check: {faults} faults ({us:.1} us in the handler); stale host reads: {} confirmed, {} found current, {} unconfirmed",
        c.confirmed, c.current, c.unconfirmed
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
    use super::{exit_note, Checker};

    fn note(c: &Checker) -> String {
        exit_note(c).expect("a note")
    }

    /// Copies came (CUPTI was recording) but none of them mapped an array
    /// beyond its construct: nothing could be stale, and CUPTI is not to
    /// blame; with no copy at all, the addresses could not be known.
    #[test]
    fn a_run_without_data_regions_is_told_apart_from_one_without_cupti() {
        let mut c = Checker {
            device_seen: true,
            ..Checker::default()
        };
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
