//! The device side: CUPTI activity records (kernels, copies, memsets,
//! devices, driver calls) and driver-API callbacks.
//!
//! The driver-API callbacks tie CUPTI's correlation id of each launch, copy
//! and memset to the OpenACC region open on the calling thread, and hash
//! host buffers around copies. Activity buffers are parsed where CUPTI hands
//! them back (often on its own thread) and turned into trace records there.
//!
//! CUPTI is optional. When it cannot be used (no driver, no libcupti, a
//! library whose records this build cannot read, another tool holding the
//! subscriber), [`start`] says why in one sentence and the collector goes
//! on with acc_prof alone.
//!
//! Calls go through cudarc's `cupti::sys` bindings. Their loader panics when
//! it cannot find the library, and only looks up bare names on the dynamic
//! loader's path; so this module finds and loads libcupti itself first, and
//! calls into cudarc only once cudarc's own lookup is certain to bind to the
//! very same loaded object (glibc matches an already loaded library by its
//! soname).
//!
//! [`load`] finds and loads the driver and libcupti, [`clock`] puts device
//! timestamps on the trace clock, [`activity`] turns activity buffers into
//! trace records, [`driver_op`] says what each driver call does,
//! [`callbacks`] follows driver calls and context
//! destruction, and [`copy_hash`] hashes host buffers around copies. This
//! file holds the start/flush/fork state machine and the functions the rest
//! of the collector calls.

mod activity;
mod callbacks;
mod clock;
mod copy_hash;
mod driver_op;
mod load;

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};
use std::sync::Mutex;

use accprof_trace::{Level, Record};
use cudarc::cupti::sys;

use sys::CUptiResult::{CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, CUPTI_SUCCESS};
use sys::CUpti_ActivityKind as Kind;

use activity::{buffer_completed, buffer_requested, FLUSH_PERIOD_MS};
use callbacks::{api_callback, callback_name, context_broken, CONTEXT_DESTROY_STARTING, TRACED};
use clock::setup_clock;
use load::{
    check_cudarc_binds, check_symbols, driver_hint, format_cuda_version, has_symbol, load_cupti,
    probe_driver,
};

// ---------------------------------------------------------------------------
// Process-wide state
// ---------------------------------------------------------------------------

const IDLE: u8 = 0;
const STARTING: u8 = 1;
const ACTIVE: u8 = 2;
const FAILED: u8 = 3;
/// A forked child: CUPTI state came over from the parent but is unusable.
const FORGOTTEN: u8 = 4;

static STATE: AtomicU8 = AtomicU8::new(IDLE);

/// Set while [`flush`] runs: the final flush happens after the collector has
/// moved to "stopping", when producers no longer record, yet the records it
/// brings out of CUPTI must still be parsed.
static FINAL_FLUSH: AtomicBool = AtomicBool::new(false);
/// Serializes flushes (exit path, writer, context destruction).
static FLUSH_LOCK: Mutex<()> = Mutex::new(());
static SUBSCRIBER: AtomicPtr<sys::CUpti_Subscriber_st> = AtomicPtr::new(ptr::null_mut());

thread_local! {
    /// This thread is inside a flush (CUPTI calls back into us from it).
    static IN_FLUSH: Cell<bool> = const { Cell::new(false) };
}

/// CUPTI was set up by this process and callbacks may act.
fn live() -> bool {
    matches!(STATE.load(Ordering::Acquire), STARTING | ACTIVE)
}

/// Whether records taken out of CUPTI should become trace records: while
/// the collector records, and during the final flush.
fn recording() -> bool {
    crate::state::enabled() || FINAL_FLUSH.load(Ordering::Acquire)
}

/// Runs a callback body that must run even while the collector is stopping
/// (buffer completion, flushes), turning a panic into a quiet disable
/// instead of unwinding into CUPTI. Driver-API callbacks use
/// [`crate::state::guarded`] instead: they are producers and stop with the
/// collector.
fn device_side<F: FnOnce()>(what: &'static str, f: F) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        crate::state::disable(&format!("internal error in {what}"));
    }
}

// ---------------------------------------------------------------------------
// Start, flush, fork
// ---------------------------------------------------------------------------

/// Set once the background start has finished, whatever its outcome (and
/// in a forked child, where it never runs).
static START_DONE: AtomicBool = AtomicBool::new(true);

/// Starts CUPTI on a thread of its own and returns at once; `report` gets
/// the outcome there. Loading libcupti and subscribing take some 6 ms on
/// the H200 host, which then overlap with the program's own start-up
/// instead of adding to it. The runtime's device_init event waits for the
/// start ([`await_start`]), so no device work begins before recording
/// does. Where no thread can be started, CUPTI starts here.
pub(crate) fn start_in_background(report: fn(Result<(), String>)) {
    START_DONE.store(false, Ordering::Release);
    let run = move || {
        report(start());
        START_DONE.store(true, Ordering::Release);
    };
    let spawned = std::thread::Builder::new()
        .name("accprof-cupti".into())
        .spawn(move || {
            // The collector's thread, not the program's (unlike the
            // caller's, below, where no thread can be started). Its one
            // driver call, the version probe, comes before driver spans
            // are enabled: marked all the same.
            crate::tls::mark_own_thread(crate::clock::thread_id());
            run()
        });
    if spawned.is_err() {
        run();
    }
}

/// Waits (at most `timeout`) for a background start to finish; true when
/// it has. Polls, so it is safe after fork and takes no lock.
pub(crate) fn await_start(timeout: std::time::Duration) -> bool {
    if START_DONE.load(Ordering::Acquire) {
        return true;
    }
    let t0 = std::time::Instant::now();
    while !START_DONE.load(Ordering::Acquire) {
        if t0.elapsed() >= timeout {
            return false;
        }
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 50_000,
        };
        // SAFETY: nanosleep with a valid timespec.
        unsafe { libc::nanosleep(&ts, ptr::null_mut()) };
    }
    true
}

/// Loads CUPTI and starts recording: kernel, memcpy, memset, device and
/// (unless turned off) driver activity, driver-API callbacks for launches,
/// copies and memsets, and a flush when a context is about to be destroyed. `Err(reason)` when it
/// cannot; the reason is one sentence for the trace header.
pub(crate) fn start() -> Result<(), String> {
    match STATE.compare_exchange(IDLE, STARTING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {}
        Err(ACTIVE) => return Ok(()),
        Err(FORGOTTEN) => return Err("CUPTI cannot be used in a forked child".into()),
        Err(_) => return Err("CUPTI could not be started earlier in this process".into()),
    }
    let result = std::panic::catch_unwind(start_inner)
        .unwrap_or_else(|_| Err("internal error while starting CUPTI".into()));
    let next = if result.is_ok() { ACTIVE } else { FAILED };
    // Never resurrect a child's state if a fork raced with the start.
    let _ = STATE.compare_exchange(STARTING, next, Ordering::AcqRel, Ordering::Acquire);
    result
}

/// The name of the driver call with CUPTI callback id `cbid`.
pub(crate) fn driver_call_name(cbid: u32) -> String {
    callbacks::driver_call_name(cbid)
}

/// Flushes all activity buffers (forced: records still in flight come out
/// too) and records dropped-record counts. A no-op when CUPTI never started
/// in this process, in a forked child, and when re-entered.
pub(crate) fn flush() {
    if STATE.load(Ordering::Acquire) != ACTIVE
        || context_broken()
        || HANDS_OFF.load(Ordering::Acquire)
    {
        return;
    }
    if IN_FLUSH.try_with(|f| f.replace(true)).unwrap_or(true) {
        return;
    }
    device_side("CUPTI flush", || {
        let _serial = FLUSH_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        FINAL_FLUSH.store(true, Ordering::Release);
        // SAFETY: CUPTI is active in this process; flushing is allowed from
        // any thread except inside the buffer callback (IN_FLUSH guards the
        // re-entry). The forced flag delivers partially filled buffers.
        let r = unsafe { sys::cuptiActivityFlushAll(FLUSH_FORCED) };
        FINAL_FLUSH.store(false, Ordering::Release);
        if r != CUPTI_SUCCESS {
            diagnostic(
                Level::Warning,
                format!("cuptiActivityFlushAll failed: {r:?}"),
            );
        }
    });
    let _ = IN_FLUSH.try_with(|f| f.set(false));
}

/// In a forked child: CUPTI came along in memory but cannot be used there
/// (its threads and the driver's state stayed with the parent). Makes
/// [`flush`] and every callback a no-op (two atomic stores).
pub(crate) fn forget_after_fork() {
    STATE.store(FORGOTTEN, Ordering::Release);
    START_DONE.store(true, Ordering::Release);
}

const FLUSH_FORCED: u32 = sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32;

fn start_inner() -> Result<(), String> {
    let driver = probe_driver()?;
    let lib = load_cupti(driver)?;
    check_cudarc_binds(&lib)?;
    check_symbols(&lib)?;

    // Subscribe first, as NVIDIA recommends: when another tool holds the
    // subscriber, nothing of ours has been enabled yet and nothing needs
    // undoing.
    let mut sub: sys::CUpti_SubscriberHandle = ptr::null_mut();
    // SAFETY: cudarc binds to `lib` (checked above); `sub` is a valid out
    // pointer; the callback is a plain extern "C" function that lives as long
    // as the process.
    let r = unsafe { sys::cuptiSubscribe(&mut sub, Some(api_callback), ptr::null_mut()) };
    if r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED {
        return Err(
            "another tool holds the CUPTI subscriber (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"
                .into(),
        );
    }
    if r != CUPTI_SUCCESS {
        return Err(format!(
            "cuptiSubscribe failed: {r:?}{}",
            driver_hint(r, &lib, driver)
        ));
    }
    SUBSCRIBER.store(sub, Ordering::Release);

    let mut notes: Vec<(Level, String)> = vec![(
        Level::Info,
        format!(
            "CUPTI from {} (API version {}), CUDA driver {}",
            lib.path,
            lib.version,
            driver.map_or_else(|| "version unknown".to_string(), format_cuda_version)
        ),
    )];
    setup_clock(&lib, &mut notes);
    // Before any kind is enabled: CUPTI stamps records with the thread id
    // type in force when they are made.
    let driver_spans = driver_spans_possible(&lib, &mut notes);

    // SAFETY: both callbacks are extern "C" functions with CUPTI's
    // signatures that live as long as the process.
    let r = unsafe {
        sys::cuptiActivityRegisterCallbacks(Some(buffer_requested), Some(buffer_completed))
    };
    if r != CUPTI_SUCCESS {
        undo(&[]);
        return Err(format!("cuptiActivityRegisterCallbacks failed: {r:?}"));
    }

    let mut enabled = Vec::new();
    for (kind, name, required) in ACTIVITY_KINDS {
        // SAFETY: a plain enable of an activity kind this CUPTI knows.
        let r = unsafe { sys::cuptiActivityEnable(kind) };
        if r == CUPTI_SUCCESS {
            enabled.push(kind);
        } else if required {
            undo(&enabled);
            return Err(format!("cuptiActivityEnable({name}) failed: {r:?}"));
        } else {
            notes.push((
                Level::Warning,
                format!("cuptiActivityEnable({name}) failed: {r:?}"),
            ));
        }
    }

    if driver_spans {
        // SAFETY: a plain enable of an activity kind this CUPTI knows.
        let r = unsafe { sys::cuptiActivityEnable(Kind::CUPTI_ACTIVITY_KIND_DRIVER) };
        if r == CUPTI_SUCCESS {
            enabled.push(Kind::CUPTI_ACTIVITY_KIND_DRIVER);
            untrace_queries(&lib, &mut notes);
        } else {
            notes.push((
                Level::Warning,
                format!("cuptiActivityEnable(DRIVER) failed: {r:?}; no driver spans"),
            ));
        }
    }

    if has_symbol(&lib, c"cuptiActivityFlushPeriod") {
        // SAFETY: a plain setting of CUPTI's worker thread.
        let r = unsafe { sys::cuptiActivityFlushPeriod(FLUSH_PERIOD_MS) };
        if r != CUPTI_SUCCESS {
            notes.push((
                Level::Info,
                format!(
                    "cuptiActivityFlushPeriod failed ({r:?}); device records are processed at exit"
                ),
            ));
        }
    }

    let mut refused = Vec::new();
    let coherence: &[sys::CUpti_driver_api_trace_cbid] = if crate::config::config().coherence {
        &callbacks::COHERENCE_TRACED
    } else {
        &[]
    };
    for cb in TRACED.iter().map(|(cb, _)| cb).chain(coherence) {
        // SAFETY: `sub` is our live subscriber; the id is from this CUPTI's
        // driver-API table.
        let r = unsafe {
            sys::cuptiEnableCallback(
                1,
                sub,
                sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
                *cb as u32,
            )
        };
        if r != CUPTI_SUCCESS {
            refused.push(callback_name(*cb));
        }
    }
    if !refused.is_empty() {
        notes.push((
            Level::Warning,
            format!("CUPTI refused driver callbacks for {}", refused.join(", ")),
        ));
    }
    // SAFETY: as above, for the resource domain.
    let r = unsafe {
        sys::cuptiEnableCallback(
            1,
            sub,
            sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE,
            CONTEXT_DESTROY_STARTING,
        )
    };
    if r != CUPTI_SUCCESS {
        notes.push((
            Level::Warning,
            format!(
                "CUPTI refused the context-destruction callback ({r:?}); records of a context destroyed before exit may be lost"
            ),
        ));
    }

    for (level, message) in notes {
        diagnostic(level, message);
    }
    Ok(())
}

/// Tells CUPTI not to trace the sub-microsecond queries of
/// [`driver_op::UNTRACED`]; a CUPTI without the call traces them (their
/// short spans are then counted, not written).
fn untrace_queries(lib: &load::Loaded, notes: &mut Vec<(Level, String)>) {
    if !has_symbol(lib, c"cuptiActivityEnableDriverApi") {
        return;
    }
    for cb in driver_op::UNTRACED {
        // SAFETY: a plain per-call setting of the DRIVER kind enabled above.
        let r = unsafe { sys::cuptiActivityEnableDriverApi(cb as u32, 0) };
        if r != CUPTI_SUCCESS {
            notes.push((
                Level::Info,
                format!("cuptiActivityEnableDriverApi({cb:?}, off) failed: {r:?}; it is traced"),
            ));
        }
    }
}

/// Whether driver spans (DRIVER activity records) can be recorded: they
/// are wanted (`ACCPROF_DRIVER`), and CUPTI stamps their records with the
/// OS thread id (gettid), the id every other record carries; CUPTI's
/// default is pthread_self(), which matches nothing else in the trace.
/// Says why not in `notes`.
fn driver_spans_possible(lib: &load::Loaded, notes: &mut Vec<(Level, String)>) -> bool {
    if !crate::config::config().driver {
        notes.push((
            Level::Info,
            format!(
                "driver spans turned off ({}=0)",
                accprof_trace::contract::env::DRIVER
            ),
        ));
        return false;
    }
    if !has_symbol(lib, c"cuptiSetThreadIdType") {
        notes.push((
            Level::Warning,
            "this libcupti has no cuptiSetThreadIdType; no driver spans (their thread ids would not match the trace's)".into(),
        ));
        return false;
    }
    // SAFETY: a plain setting of how CUPTI identifies threads in records;
    // no activity kind is enabled yet.
    let r = unsafe {
        sys::cuptiSetThreadIdType(
            sys::CUpti_ActivityThreadIdType::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM,
        )
    };
    if r != CUPTI_SUCCESS {
        notes.push((
            Level::Warning,
            format!(
                "cuptiSetThreadIdType(SYSTEM) failed: {r:?}; no driver spans (their thread ids would not match the trace's)"
            ),
        ));
        return false;
    }
    true
}

/// Activity kinds enabled, and whether CUPTI is useless without them.
/// CONCURRENT_KERNEL, not KERNEL: the latter serializes kernels.
const ACTIVITY_KINDS: [(Kind, &str, bool); 4] = [
    (
        Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        "CONCURRENT_KERNEL",
        true,
    ),
    (Kind::CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", true),
    (Kind::CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", false),
    (Kind::CUPTI_ACTIVITY_KIND_DEVICE, "DEVICE", false),
];

/// Takes back what a failed start had set up.
fn undo(enabled: &[Kind]) {
    // SAFETY: disabling kinds we enabled and dropping our own subscriber;
    // buffers CUPTI still holds come back through buffer_completed, which
    // frees them.
    unsafe {
        for kind in enabled {
            sys::cuptiActivityDisable(*kind);
        }
        if !enabled.is_empty() {
            sys::cuptiActivityFlushAll(FLUSH_FORCED);
        }
        let sub = SUBSCRIBER.swap(ptr::null_mut(), Ordering::AcqRel);
        if !sub.is_null() {
            sys::cuptiUnsubscribe(sub);
        }
    }
}

fn diagnostic(level: Level, message: String) {
    crate::sink::push(Record::Diagnostic {
        time_ns: crate::clock::now_ns(),
        level,
        message,
    });
}

/// Set when the runtime began destroying a device context: its records
/// were flushed then (see [`callbacks::flush_before_context_destroy`]).
static CONTEXT_DESTROYED: AtomicBool = AtomicBool::new(false);

/// Set by [`finish_at_exit`] when CUPTI must not be called again.
static HANDS_OFF: AtomicBool = AtomicBool::new(false);

/// The device side of the final flush, from the library's destructor (after
/// the program's exit handlers, while shared libraries are being unloaded).
/// Flushes only when that is known to be safe and useful: not when the
/// runtime already destroyed its context (its records were flushed then,
/// and libcupti may be finalized by now), and not after an exit with a
/// failure status, which for an OpenACC program is mostly the runtime's
/// fatal-error path, where the context may be broken without our having
/// seen the error (libgomp exits from the driver's callback thread) and a
/// flush can crash inside the driver. Then CUPTI is left alone for good.
pub(crate) fn finish_at_exit(exit_status: Option<i32>) {
    if STATE.load(Ordering::Acquire) != ACTIVE {
        return;
    }
    finish_device(exit_status);
    // After the last buffers came back: the driver calls left out for
    // being short (the count is ours; no CUPTI call).
    if let Some(note) = activity::SHORT_CALLS.note() {
        diagnostic(Level::Info, note);
    }
}

fn finish_device(exit_status: Option<i32>) {
    let failed = exit_status.is_some_and(|s| s != 0);
    if CONTEXT_DESTROYED.load(Ordering::Acquire) || failed || context_broken() {
        HANDS_OFF.store(true, Ordering::Release);
        if failed && !CONTEXT_DESTROYED.load(Ordering::Acquire) && !context_broken() {
            diagnostic(
                Level::Warning,
                format!(
                    "the program exited with status {} before the runtime released the device; device records CUPTI still held were not collected",
                    exit_status.unwrap_or_default()
                ),
            );
        }
        return;
    }
    flush();
}

#[cfg(test)]
mod tests {
    use super::load::dlopen_name;
    use super::*;

    /// The one test that touches the process-wide state (tests run in
    /// parallel in one process, whose constructor may already have called
    /// start()).
    #[test]
    fn start_degrades_without_cupti() {
        let loaded = dlopen_name("libcuda.so.1", libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        let has_driver = !loaded.is_null() || {
            let h = dlopen_name("libcuda.so.1", libc::RTLD_LAZY);
            if !h.is_null() {
                // SAFETY: closing the probe handle just opened.
                unsafe { libc::dlclose(h) };
            }
            !h.is_null()
        };
        if !has_driver {
            let no_driver = Err("no CUDA driver (libcuda.so.1 not found)".to_string());
            assert_eq!(start_inner(), no_driver);
            let first = start();
            assert!(
                first == no_driver
                    || first
                        == Err("CUPTI could not be started earlier in this process".to_string()),
                "{first:?}"
            );
            // Failed once: says so instead of retrying.
            assert_eq!(
                start(),
                Err("CUPTI could not be started earlier in this process".to_string())
            );
        }
        // flush is harmless whatever happened, and twice.
        flush();
        flush();
        forget_after_fork();
        assert_eq!(
            start(),
            Err("CUPTI cannot be used in a forked child".to_string())
        );
        flush();
        assert!(!live());
    }
}
