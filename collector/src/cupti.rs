//! The device side: CUPTI activity records (kernels, copies, memsets,
//! devices) and driver-API callbacks.
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

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::{size_of, MaybeUninit};
use std::path::{Path, PathBuf};
use std::ptr::{self, addr_of, addr_of_mut};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

use accprof_trace::{
    BufferHash, CopyKind, Device, Direction, DriverApi, DriverCall, DropSource, HashMode,
    KernelRecord, Level, MemcpyRecord, MemoryKind, MemsetRecord, Record, StringId,
};
use cudarc::cupti::sys;
use cudarc::driver::sys::CUcontext;

use sys::CUptiResult::{
    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, CUPTI_ERROR_NOT_COMPATIBLE,
    CUPTI_ERROR_NOT_INITIALIZED, CUPTI_SUCCESS,
};
use sys::CUpti_ActivityKind as Kind;
use sys::CUpti_driver_api_trace_cbid as Cb;

/// Activity buffers handed to CUPTI: about 4,000 kernel records each, so a
/// busy program fills one every few thousand launches, not every few dozen,
/// and CUPTI's worker thread hands full ones back while the program runs
/// (see [`FLUSH_PERIOD_MS`]) instead of all of them at exit, where turning
/// them into records would add to the program's wall time.
const BUFFER_BYTES: usize = 1 << 20;
/// How often CUPTI's worker thread returns full buffers.
const FLUSH_PERIOD_MS: u32 = 100;
/// CUPTI requires 8-byte aligned activity buffers.
const BUFFER_ALIGN: usize = 8;

/// The soname of the CUPTI this build's bindings describe (cudarc feature
/// cuda-13000). Preferred when a directory holds several names.
const OUR_SONAME: &str = "libcupti.so.13";

/// Library subdirectories of a CUDA toolkit root that may hold libcupti.
#[cfg(target_arch = "aarch64")]
const LIB_SUBDIRS: [&str; 3] = ["lib64", "extras/CUPTI/lib64", "targets/sbsa-linux/lib"];
#[cfg(not(target_arch = "aarch64"))]
const LIB_SUBDIRS: [&str; 3] = ["lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib"];

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
/// ns to add to CUPTI timestamps; 0 when CUPTI takes our clock.
static CLOCK_OFFSET: AtomicI64 = AtomicI64::new(0);
/// The loaded libcupti, kept loaded for the life of the process.
static LIBRARY: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
static SUBSCRIBER: AtomicPtr<sys::CUpti_Subscriber_st> = AtomicPtr::new(ptr::null_mut());
/// Devices already described in the trace.
static DEVICES_SEEN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

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
        .spawn(run);
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

/// Loads CUPTI and starts recording: kernel, memcpy, memset and device
/// activity, driver-API callbacks for launches, copies and memsets, and a
/// flush when a context is about to be destroyed. `Err(reason)` when it
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
/// [`flush`] and every callback a no-op. Async-signal-safe.
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
    for (cb, _) in TRACED {
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

const CONTEXT_DESTROY_STARTING: u32 =
    sys::CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING as u32;

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

fn callback_name(cb: Cb) -> String {
    let name = format!("{cb:?}");
    name.trim_start_matches("CUPTI_DRIVER_TRACE_CBID_")
        .to_string()
}

/// "13.0" from the driver's 13000.
fn format_cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// A hint for subscribe failures that mean "driver older than this CUPTI".
fn driver_hint(r: sys::CUptiResult, lib: &Loaded, driver: Option<i32>) -> String {
    if r != CUPTI_ERROR_NOT_INITIALIZED && r != CUPTI_ERROR_NOT_COMPATIBLE {
        return String::new();
    }
    match (cupti_cuda_version(lib.version), driver) {
        (Some((maj, min)), Some(d)) => format!(
            " (libcupti at {} is from CUDA {maj}.{min}; the driver supports CUDA {}: the driver may be too old for it)",
            lib.path,
            format_cuda_version(d)
        ),
        _ => format!(" (the CUDA driver may be too old for the libcupti at {})", lib.path),
    }
}

// ---------------------------------------------------------------------------
// Finding the driver and libcupti
// ---------------------------------------------------------------------------

/// A libcupti loaded (RTLD_NOW | RTLD_GLOBAL) and kept loaded.
struct Loaded {
    handle: *mut c_void,
    path: String,
    /// cuptiGetVersion's answer (CUPTI_API_VERSION of the library).
    version: u32,
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated thread-local string,
    // valid until the next dl* call on this thread; copied at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// Checks that the CUDA driver library loads (CUPTI cannot work without it)
/// and returns its CUDA version (e.g. 13000) when it says. The handle stays
/// open: CUPTI and the runtime load the driver next, and closing it here
/// would unload it only for them to load it again (about a millisecond).
fn probe_driver() -> Result<Option<i32>, String> {
    let name = c"libcuda.so.1";
    // SAFETY: dlopen with a NUL-terminated name; RTLD_NOLOAD only looks.
    let mut h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if h.is_null() {
        // SAFETY: as above; loading the driver runs no CUDA code.
        h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    }
    if h.is_null() {
        let err = dl_error();
        return Err(
            if err.contains("No such file") || err.contains("cannot open") {
                "no CUDA driver (libcuda.so.1 not found)".into()
            } else {
                format!("no CUDA driver (libcuda.so.1 could not be loaded: {err})")
            },
        );
    }
    // SAFETY: `h` is a live handle; the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(h, c"cuDriverGetVersion".as_ptr()) };
    let mut version: c_int = 0;
    let ok = !sym.is_null() && {
        type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;
        // SAFETY: cuDriverGetVersion(int*) -> CUresult, callable before
        // cuInit; the pointer is to our local.
        unsafe {
            let f: GetVersion = std::mem::transmute::<*mut c_void, GetVersion>(sym);
            f(&mut version) == 0
        }
    };
    Ok(ok.then_some(version))
}

/// Where to look for libcupti: the environment and the toolkits installed.
#[derive(Debug, Clone, Default)]
pub(crate) struct SearchEnv {
    /// $CUDA_HOME, $CUDA_PATH (toolkit roots named by the user).
    pub cuda_homes: Vec<String>,
    pub ld_library_path: Option<String>,
    /// /usr/local/cuda-* directories.
    pub versioned_toolkits: Vec<PathBuf>,
    /// /opt/nvidia/hpc_sdk/Linux_x86_64/*/cuda/* directories.
    pub hpc_sdk_toolkits: Vec<PathBuf>,
}

impl SearchEnv {
    fn from_system() -> SearchEnv {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        let cuda_homes = ["CUDA_HOME", "CUDA_PATH"]
            .iter()
            .filter_map(|n| var(n))
            .collect();
        let versioned_toolkits = list_dir(Path::new("/usr/local"))
            .into_iter()
            .filter(|p| file_name(p).starts_with("cuda-"))
            .collect();
        let arch = if cfg!(target_arch = "aarch64") {
            "Linux_aarch64"
        } else {
            "Linux_x86_64"
        };
        let hpc_sdk_toolkits = list_dir(&Path::new("/opt/nvidia/hpc_sdk").join(arch))
            .into_iter()
            .flat_map(|sdk| list_dir(&sdk.join("cuda")))
            .filter(|p| file_name(p).starts_with(|c: char| c.is_ascii_digit()))
            .collect();
        SearchEnv {
            cuda_homes,
            ld_library_path: var("LD_LIBRARY_PATH"),
            versioned_toolkits,
            hpc_sdk_toolkits,
        }
    }
}

fn list_dir(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    }
}

fn file_name(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// "13.0" or "cuda-12.9" -> [13, 0] / [12, 9]; [] when not a version.
fn version_of(name: &str) -> Vec<u32> {
    name.trim_start_matches("cuda-")
        .split('.')
        .map(str::parse::<u32>)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_default()
}

/// Toolkits the driver supports first, newest first within each group (an
/// HPC SDK's own version breaks ties).
fn order_toolkits(mut roots: Vec<PathBuf>, driver: Option<i32>) -> Vec<PathBuf> {
    let limit = driver.map(|d| (d / 1000, (d % 1000) / 10));
    let key = |p: &PathBuf| {
        let v = version_of(file_name(p));
        let fits = match (limit, v.as_slice()) {
            (None, _) => true,
            (Some((dm, dn)), [m, n, ..]) => {
                (i64::from(*m), i64::from(*n)) <= (i64::from(dm), i64::from(dn))
            }
            (Some(_), _) => false,
        };
        let sdk = p
            .parent()
            .and_then(Path::parent)
            .map(|s| version_of(file_name(s)))
            .unwrap_or_default();
        (fits, v, sdk)
    };
    roots.sort_by_key(|p| std::cmp::Reverse(key(p)));
    roots
}

/// Directories searched for libcupti, in order: $CUDA_HOME / $CUDA_PATH,
/// /usr/local/cuda, /usr/local/cuda-*, the HPC SDK's toolkits (each with
/// its library subdirectories), then each directory of LD_LIBRARY_PATH.
pub(crate) fn search_dirs(env: &SearchEnv, driver: Option<i32>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = env.cuda_homes.iter().map(PathBuf::from).collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots.extend(order_toolkits(env.versioned_toolkits.clone(), driver));
    roots.extend(order_toolkits(env.hpc_sdk_toolkits.clone(), driver));
    let mut dirs: Vec<PathBuf> = roots
        .iter()
        .flat_map(|r| LIB_SUBDIRS.iter().map(move |s| r.join(s)))
        .collect();
    if let Some(lp) = &env.ld_library_path {
        dirs.extend(lp.split(':').filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// Orders the libcupti file names of one directory: this build's soname
/// first, then other sonames (libcupti.so.N), the development link, and
/// fully versioned files last (they are what the links point to anyway).
fn rank_library_names(mut names: Vec<String>) -> Vec<String> {
    names.retain(|n| n.starts_with("libcupti.so"));
    let rank = |n: &str| {
        if n == OUR_SONAME {
            0
        } else if n
            .strip_prefix("libcupti.so.")
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        {
            1
        } else if n == "libcupti.so" {
            2
        } else {
            3
        }
    };
    names.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| b.cmp(a)));
    names
}

/// Library files to try, in order, without duplicates of the same file.
fn library_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for dir in dirs {
        let names = list_dir(dir)
            .iter()
            .map(|p| file_name(p).to_string())
            .collect();
        for name in rank_library_names(names) {
            let path = dir.join(&name);
            let id = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            if seen.insert(id) {
                out.push(path);
            }
        }
    }
    out
}

fn dlopen_path(path: &Path, flags: c_int) -> *mut c_void {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return ptr::null_mut();
    };
    // SAFETY: dlopen with a NUL-terminated path. Loading libcupti runs no
    // CUPTI initialization (that happens on the first CUPTI call).
    unsafe { libc::dlopen(c.as_ptr(), flags) }
}

fn dlopen_name(name: &str, flags: c_int) -> *mut c_void {
    dlopen_path(Path::new(name), flags)
}

/// The file a handle was loaded from, found through one of its symbols.
fn object_path(handle: *mut c_void, symbol: &CStr) -> Option<String> {
    // SAFETY: `handle` is live; the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(handle, symbol.as_ptr()) };
    if sym.is_null() {
        return None;
    }
    crate::callsite::object_of(sym.cast_const())
}

/// Finds libcupti and loads it: the one already in the process if any (the
/// program or another tool loaded it), else the first file of the search
/// directories that loads, else whatever the dynamic loader finds by name.
fn load_cupti(driver: Option<i32>) -> Result<Loaded, String> {
    let names = cudarc::get_lib_name_candidates("cupti");
    let mut handle = names
        .iter()
        .map(|n| dlopen_name(n, libc::RTLD_NOW | libc::RTLD_GLOBAL | libc::RTLD_NOLOAD))
        .find(|h| !h.is_null())
        .unwrap_or(ptr::null_mut());

    let dirs = search_dirs(&SearchEnv::from_system(), driver);
    let mut failures = Vec::new();
    if handle.is_null() {
        for file in library_files(&dirs) {
            let h = dlopen_path(&file, libc::RTLD_NOW | libc::RTLD_GLOBAL);
            if h.is_null() {
                failures.push(format!("{}: {}", file.display(), dl_error()));
            } else {
                handle = h;
                break;
            }
        }
    }
    if handle.is_null() {
        handle = names
            .iter()
            .map(|n| dlopen_name(n, libc::RTLD_NOW | libc::RTLD_GLOBAL))
            .find(|h| !h.is_null())
            .unwrap_or(ptr::null_mut());
    }
    if handle.is_null() {
        if let Some(first) = failures.first() {
            return Err(format!("libcupti could not be loaded ({first})"));
        }
        let existing: Vec<String> = dirs
            .iter()
            .filter(|d| d.is_dir())
            .map(|d| d.display().to_string())
            .collect();
        return Err(if existing.is_empty() {
            "libcupti not found (no CUDA toolkit directory among $CUDA_HOME, $CUDA_PATH, /usr/local/cuda*, /opt/nvidia/hpc_sdk, LD_LIBRARY_PATH; none on the system library path either)".into()
        } else {
            format!(
                "libcupti not found (searched: {} and the system library path)",
                existing.join(", ")
            )
        });
    }
    LIBRARY.store(handle, Ordering::Release);
    let path = object_path(handle, c"cuptiGetVersion").unwrap_or_else(|| "(unknown path)".into());

    // SAFETY: `handle` is live; the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(handle, c"cuptiGetVersion".as_ptr()) };
    if sym.is_null() {
        return Err(format!(
            "{path} is not a usable libcupti (no cuptiGetVersion)"
        ));
    }
    let mut version: u32 = 0;
    type GetVersion = unsafe extern "C" fn(*mut u32) -> u32;
    // SAFETY: cuptiGetVersion(uint32_t*) -> CUptiResult; our local is the
    // out pointer. The result is read as a plain integer.
    let r = unsafe { std::mem::transmute::<*mut c_void, GetVersion>(sym)(&mut version) };
    if r != 0 {
        return Err(format!("cuptiGetVersion failed in {path} (error {r})"));
    }
    readable_api_version(version).map_err(|why| format!("libcupti at {path}: {why}"))?;
    Ok(Loaded {
        handle,
        path,
        version,
    })
}

/// Whether this build can read the activity records of a CUPTI with this
/// API version. Every field read here sits at the same offset in the
/// records of CUPTI 11.8 through 13.x (new versions only append fields).
fn readable_api_version(v: u32) -> Result<(), String> {
    match v {
        18..=99 | 130_000..=139_999 => Ok(()),
        0..=17 => Err(format!(
            "CUPTI API version {v} is older than CUDA 11.8, whose records this build reads"
        )),
        _ => Err(format!(
            "CUPTI API version {v} is newer than the CUDA 13 records this build knows"
        )),
    }
}

/// The CUDA version a CUPTI API version comes from, where known.
fn cupti_cuda_version(v: u32) -> Option<(u32, u32)> {
    match v {
        130_000..=139_999 => Some((v / 10_000, (v / 100) % 100)),
        20 => Some((12, 2)),
        21 => Some((12, 3)),
        22 => Some((12, 4)),
        23 => Some((12, 5)),
        24 => Some((12, 6)),
        26 => Some((12, 8)),
        28 => Some((12, 9)),
        _ => None,
    }
}

/// cudarc's loader takes the first of its candidate names that dlopen
/// accepts. Walk the same names with the same flags: the first that loads
/// must be our object, or cudarc would call into another libcupti (or panic
/// finding none).
fn check_cudarc_binds(lib: &Loaded) -> Result<(), String> {
    for name in cudarc::get_lib_name_candidates("cupti") {
        // Same flags as libloading::Library::new.
        let h = dlopen_name(&name, libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if h.is_null() {
            continue;
        }
        let same = h == lib.handle;
        let other = if same {
            String::new()
        } else {
            object_path(h, c"cuptiGetVersion").unwrap_or_else(|| "another object".into())
        };
        // SAFETY: drops the reference this probe took; our own handle keeps
        // the library loaded when it is the same object.
        unsafe { libc::dlclose(h) };
        return if same {
            Ok(())
        } else {
            Err(format!(
                "cudarc's loader would bind {name} to {other}, not to the libcupti loaded from {}",
                lib.path
            ))
        };
    }
    Err(format!(
        "the libcupti at {} is not reachable under any name cudarc's loader tries (its soname is not {OUR_SONAME} or another known one)",
        lib.path
    ))
}

/// cudarc panics on a missing symbol: check every one used before calling.
fn check_symbols(lib: &Loaded) -> Result<(), String> {
    const REQUIRED: [&CStr; 10] = [
        c"cuptiSubscribe",
        c"cuptiUnsubscribe",
        c"cuptiEnableCallback",
        c"cuptiActivityRegisterCallbacks",
        c"cuptiActivityEnable",
        c"cuptiActivityDisable",
        c"cuptiActivityGetNextRecord",
        c"cuptiActivityGetNumDroppedRecords",
        c"cuptiActivityFlushAll",
        c"cuptiGetTimestamp",
    ];
    for name in REQUIRED {
        if !has_symbol(lib, name) {
            return Err(format!(
                "libcupti at {} lacks {}",
                lib.path,
                name.to_string_lossy()
            ));
        }
    }
    Ok(())
}

fn has_symbol(lib: &Loaded, name: &CStr) -> bool {
    // SAFETY: `lib.handle` is live (never closed); the name is NUL-terminated.
    !unsafe { libc::dlsym(lib.handle, name.as_ptr()) }.is_null()
}

// ---------------------------------------------------------------------------
// Clock
// ---------------------------------------------------------------------------

/// CUPTI's timestamp source: our trace clock, so device times compare
/// directly with host events.
extern "C" fn timestamp() -> u64 {
    std::panic::catch_unwind(crate::clock::now_ns).unwrap_or(0)
}

fn setup_clock(lib: &Loaded, notes: &mut Vec<(Level, String)>) {
    if has_symbol(lib, c"cuptiActivityRegisterTimestampCallback") {
        // SAFETY: `timestamp` is an extern "C" fn() -> u64 that lives as
        // long as the process.
        let r = unsafe { sys::cuptiActivityRegisterTimestampCallback(Some(timestamp)) };
        if r == CUPTI_SUCCESS {
            CLOCK_OFFSET.store(0, Ordering::Release);
            return;
        }
        notes.push((
            Level::Warning,
            format!("cuptiActivityRegisterTimestampCallback failed ({r:?})"),
        ));
    } else {
        notes.push((
            Level::Warning,
            "this libcupti has no cuptiActivityRegisterTimestampCallback".into(),
        ));
    }
    let offset = measure_offset();
    CLOCK_OFFSET.store(offset, Ordering::Release);
    notes.push((
        Level::Warning,
        format!("device timestamps moved onto the trace clock by a measured offset of {offset} ns"),
    ));
}

/// Offset from CUPTI's clock to ours: the tightest of a few bracketed
/// readings.
fn measure_offset() -> i64 {
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..8 {
        let before = crate::clock::now_ns();
        let mut t: u64 = 0;
        // SAFETY: cuptiGetTimestamp writes one u64 into our local.
        let r = unsafe { sys::cuptiGetTimestamp(&mut t) };
        let after = crate::clock::now_ns();
        if r != CUPTI_SUCCESS || t == 0 {
            continue;
        }
        let width = after.saturating_sub(before);
        let mid = before + width / 2;
        let offset = (i128::from(mid) - i128::from(t)) as i64;
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, offset));
        }
    }
    best.map_or(0, |(_, o)| o)
}

/// A CUPTI timestamp on the trace clock; 0 (not collected) stays 0.
fn shift(t: u64, offset: i64) -> u64 {
    if t == 0 {
        0
    } else {
        t.wrapping_add_signed(offset)
    }
}

// ---------------------------------------------------------------------------
// Activity buffers
// ---------------------------------------------------------------------------

/// CUPTI asks for an empty buffer. Not `guarded`: CUPTI must always get an
/// answer, and nothing here can panic.
extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let p = if live() {
        // SAFETY: aligned_alloc with a power-of-two alignment that divides
        // the size; NULL on failure, which CUPTI handles by dropping records.
        unsafe { libc::aligned_alloc(BUFFER_ALIGN, BUFFER_BYTES) }.cast::<u8>()
    } else {
        ptr::null_mut()
    };
    // SAFETY: CUPTI passes valid out pointers; checked for NULL anyway.
    unsafe {
        if !buffer.is_null() {
            *buffer = p;
        }
        if !size.is_null() {
            *size = if p.is_null() { 0 } else { BUFFER_BYTES };
        }
        if !max_records.is_null() {
            // 0: as many records as fit.
            *max_records = 0;
        }
    }
}

/// CUPTI hands back a buffer: turn its records into ours, note drops, free
/// it. The buffer is freed whatever happens.
extern "C" fn buffer_completed(
    ctx: CUcontext,
    stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    if live() && recording() {
        device_side("CUPTI buffer completion", || {
            // SAFETY: `buffer` is one of ours, `size` bytes long, its first
            // `valid` bytes written by CUPTI.
            let incomplete = unsafe { parse_buffer(buffer, size.min(BUFFER_BYTES), valid) };
            let mut dropped: usize = 0;
            // SAFETY: context and stream as CUPTI gave them; out pointer to
            // our local.
            let r = unsafe { sys::cuptiActivityGetNumDroppedRecords(ctx, stream, &mut dropped) };
            let dropped = if r == CUPTI_SUCCESS {
                dropped as u64
            } else {
                0
            };
            let lost = dropped + incomplete;
            if lost > 0 {
                crate::sink::push(Record::Dropped {
                    source: DropSource::Cupti,
                    count: lost,
                });
            }
        });
    }
    // SAFETY: allocated by aligned_alloc in buffer_requested; CUPTI is done
    // with it once it has handed it back.
    unsafe { libc::free(buffer.cast()) };
}

const KIND_KERNEL: u32 = Kind::CUPTI_ACTIVITY_KIND_KERNEL as u32;
const KIND_CONCURRENT_KERNEL: u32 = Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32;
const KIND_MEMCPY: u32 = Kind::CUPTI_ACTIVITY_KIND_MEMCPY as u32;
const KIND_MEMSET: u32 = Kind::CUPTI_ACTIVITY_KIND_MEMSET as u32;
const KIND_DEVICE: u32 = Kind::CUPTI_ACTIVITY_KIND_DEVICE as u32;

/// Parses one completed buffer; returns how many records were incomplete
/// (no end time: a forced flush caught them in flight).
///
/// # Safety
/// `buffer` must be valid for `size` bytes, the first `valid` of them
/// written by CUPTI.
unsafe fn parse_buffer(buffer: *mut u8, size: usize, valid: usize) -> u64 {
    let valid = valid.min(size);
    let offset = CLOCK_OFFSET.load(Ordering::Acquire);
    let mut incomplete = 0;
    let mut rec: *mut sys::CUpti_Activity = ptr::null_mut();
    loop {
        // SAFETY: the buffer and its valid length as CUPTI reported them;
        // `rec` is NULL or the previous record, as the API requires.
        let r = unsafe { sys::cuptiActivityGetNextRecord(buffer, valid, &mut rec) };
        if r != CUPTI_SUCCESS || rec.is_null() {
            break;
        }
        let at = (rec as usize).wrapping_sub(buffer as usize);
        if at + size_of::<u32>() > valid {
            break;
        }
        let raw = rec.cast::<u8>().cast_const();
        let avail = valid - at;
        // The kind is read as an integer: a record kind this build does not
        // know must not become an invalid enum value.
        // SAFETY: at least 4 bytes of the record are inside the valid part;
        // records are 8-byte aligned.
        let kind = unsafe { raw.cast::<u32>().read() };
        match kind {
            KIND_KERNEL | KIND_CONCURRENT_KERNEL => {
                // SAFETY: a kernel record starts at `raw`, `avail` bytes readable.
                let k =
                    unsafe { read_record::<sys::CUpti_ActivityKernel10>(raw, avail, fix_kernel) };
                if !complete(k.start, k.end) {
                    incomplete += 1;
                    continue;
                }
                let name = kernel_name(k.name);
                crate::sink::push(Record::Kernel(kernel_record(&k, name, offset)));
            }
            KIND_MEMCPY => {
                // SAFETY: a memcpy record starts at `raw`, `avail` bytes readable.
                let m =
                    unsafe { read_record::<sys::CUpti_ActivityMemcpy6>(raw, avail, fix_memcpy) };
                if !complete(m.start, m.end) {
                    incomplete += 1;
                    continue;
                }
                crate::sink::push(Record::Memcpy(memcpy_record(&m, offset)));
            }
            KIND_MEMSET => {
                // SAFETY: a memset record starts at `raw`, `avail` bytes readable.
                let m =
                    unsafe { read_record::<sys::CUpti_ActivityMemset4>(raw, avail, fix_memset) };
                if !complete(m.start, m.end) {
                    incomplete += 1;
                    continue;
                }
                crate::sink::push(Record::Memset(memset_record(&m, offset)));
            }
            KIND_DEVICE => {
                // SAFETY: a device record starts at `raw`, `avail` bytes readable.
                let d =
                    unsafe { read_record::<sys::CUpti_ActivityDevice5>(raw, avail, fix_device) };
                define_device(&d);
            }
            _ => {}
        }
    }
    incomplete
}

/// Copies one CUPTI record into a `T`, reading at most `avail` bytes (a
/// record of an older CUPTI can be shorter than this build's struct; the
/// missing tail reads as zero), then lets `fix` overwrite the enum-typed
/// fields, which this module never reads, with valid values: whatever a
/// newer CUPTI wrote there, the copy is then a valid `T`.
///
/// # Safety
/// `rec` must be readable for `min(avail, size_of::<T>())` bytes, and every
/// field of `T` other than those `fix` sets must accept any bit pattern or
/// all zeros (integers, raw pointers, unions of integers).
unsafe fn read_record<T>(rec: *const u8, avail: usize, fix: unsafe fn(*mut T)) -> T {
    let mut out = MaybeUninit::<T>::zeroed();
    let n = size_of::<T>().min(avail);
    // SAFETY: `rec` readable for `n` bytes (caller), `out` writable for
    // size_of::<T>() >= n bytes; distinct allocations.
    unsafe { ptr::copy_nonoverlapping(rec, out.as_mut_ptr().cast::<u8>(), n) };
    // SAFETY: `out` is our own storage of type T.
    unsafe { fix(out.as_mut_ptr()) };
    // SAFETY: all bytes initialized (zeroed, then copied); enum fields set
    // to valid values by `fix`; the rest accepts any bits (caller).
    unsafe { out.assume_init() }
}

/// # Safety
/// `p` must point to writable storage of this record type.
unsafe fn fix_kernel(p: *mut sys::CUpti_ActivityKernel10) {
    // SAFETY: `p` points to our own MaybeUninit storage of this type;
    // addr_of_mut! makes no reference, write_unaligned suits packed fields.
    unsafe {
        addr_of_mut!((*p).kind).write_unaligned(Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        addr_of_mut!((*p).partitionedGlobalCacheRequested).write_unaligned(
            sys::CUpti_ActivityPartitionedGlobalCacheConfig::CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_UNKNOWN,
        );
        addr_of_mut!((*p).partitionedGlobalCacheExecuted).write_unaligned(
            sys::CUpti_ActivityPartitionedGlobalCacheConfig::CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_UNKNOWN,
        );
        addr_of_mut!((*p).shmemLimitConfig)
            .write_unaligned(sys::CUpti_FuncShmemLimitConfig::CUPTI_FUNC_SHMEM_LIMIT_DEFAULT);
        addr_of_mut!((*p).channelType)
            .write_unaligned(sys::CUpti_ChannelType::CUPTI_CHANNEL_TYPE_INVALID);
    }
}

/// # Safety
/// `p` must point to writable storage of this record type.
unsafe fn fix_memcpy(p: *mut sys::CUpti_ActivityMemcpy6) {
    // SAFETY: as in fix_kernel.
    unsafe {
        addr_of_mut!((*p).kind).write_unaligned(Kind::CUPTI_ACTIVITY_KIND_MEMCPY);
        addr_of_mut!((*p).channelType)
            .write_unaligned(sys::CUpti_ChannelType::CUPTI_CHANNEL_TYPE_INVALID);
    }
}

/// # Safety
/// `p` must point to writable storage of this record type.
unsafe fn fix_memset(p: *mut sys::CUpti_ActivityMemset4) {
    // SAFETY: as in fix_kernel.
    unsafe {
        addr_of_mut!((*p).kind).write_unaligned(Kind::CUPTI_ACTIVITY_KIND_MEMSET);
        addr_of_mut!((*p).channelType)
            .write_unaligned(sys::CUpti_ChannelType::CUPTI_CHANNEL_TYPE_INVALID);
    }
}

/// # Safety
/// `p` must point to writable storage of this record type.
unsafe fn fix_device(p: *mut sys::CUpti_ActivityDevice5) {
    // SAFETY: as in fix_kernel.
    unsafe {
        addr_of_mut!((*p).kind).write_unaligned(Kind::CUPTI_ACTIVITY_KIND_DEVICE);
        addr_of_mut!((*p).flags).write_unaligned(sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_NONE);
    }
}

/// A record with both times: incomplete records of a forced flush have no
/// end (0) and are counted as lost instead of written with a bogus length.
fn complete(start: u64, end: u64) -> bool {
    start != 0 && end >= start
}

fn kernel_name(name: *const c_char) -> StringId {
    // SAFETY: CUPTI's kernel name: NULL or a NUL-terminated string valid
    // while the buffer is being processed.
    unsafe { crate::sink::intern_cstr(name) }
        .unwrap_or_else(|| crate::sink::intern(b"(unnamed kernel)"))
}

/// Describes a device once per trace.
fn define_device(d: &sys::CUpti_ActivityDevice5) {
    let id = d.id;
    {
        let mut seen = DEVICES_SEEN.lock().unwrap_or_else(|e| e.into_inner());
        if seen.contains(&id) {
            return;
        }
        seen.push(id);
    }
    // SAFETY: CUPTI's device name: NULL or a NUL-terminated string valid
    // while the buffer is being processed.
    let name = unsafe { c_string(d.name) }.unwrap_or_else(|| "(unknown device)".into());
    crate::sink::define(Record::Device(device_record(d, name)));
}

/// # Safety
/// `p` must be NULL or point to a NUL-terminated string.
unsafe fn c_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-NULL and NUL-terminated (caller).
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

/// A launch dimension or size as CUPTI's int; negative (never seen) as 0.
fn non_negative(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

fn kernel_record(k: &sys::CUpti_ActivityKernel10, name: StringId, offset: i64) -> KernelRecord {
    KernelRecord {
        start_ns: shift(k.start, offset),
        end_ns: shift(k.end, offset),
        name,
        grid: [
            non_negative(k.gridX),
            non_negative(k.gridY),
            non_negative(k.gridZ),
        ],
        block: [
            non_negative(k.blockX),
            non_negative(k.blockY),
            non_negative(k.blockZ),
        ],
        registers: u32::from(k.registersPerThread),
        static_shared_bytes: non_negative(k.staticSharedMemory),
        dynamic_shared_bytes: non_negative(k.dynamicSharedMemory),
        local_bytes_per_thread: k.localMemoryPerThread,
        device: k.deviceId,
        context: k.contextId,
        stream: k.streamId,
        correlation: k.correlationId,
    }
}

fn memcpy_record(m: &sys::CUpti_ActivityMemcpy6, offset: i64) -> MemcpyRecord {
    MemcpyRecord {
        start_ns: shift(m.start, offset),
        end_ns: shift(m.end, offset),
        bytes: m.bytes,
        kind: copy_kind(m.copyKind),
        src: memory_kind(u16::from(m.srcKind)),
        dst: memory_kind(u16::from(m.dstKind)),
        device: m.deviceId,
        context: m.contextId,
        stream: m.streamId,
        correlation: m.correlationId,
    }
}

fn memset_record(m: &sys::CUpti_ActivityMemset4, offset: i64) -> MemsetRecord {
    MemsetRecord {
        start_ns: shift(m.start, offset),
        end_ns: shift(m.end, offset),
        bytes: m.bytes,
        value: m.value,
        memory: memory_kind(m.memoryKind),
        device: m.deviceId,
        context: m.contextId,
        stream: m.streamId,
        correlation: m.correlationId,
    }
}

fn device_record(d: &sys::CUpti_ActivityDevice5, name: String) -> Device {
    Device {
        id: d.id,
        name,
        sm_count: d.numMultiprocessors,
        compute_capability: (d.computeCapabilityMajor, d.computeCapabilityMinor),
        global_memory_bytes: d.globalMemorySize,
    }
}

/// CUpti_ActivityMemcpyKind (stored as u8 in the record). Arrays are
/// device memory: HtoA is an upload, AtoH a download.
fn copy_kind(raw: u8) -> CopyKind {
    use sys::CUpti_ActivityMemcpyKind as M;
    const HTOD: u8 = M::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD as u8;
    const DTOH: u8 = M::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH as u8;
    const HTOA: u8 = M::CUPTI_ACTIVITY_MEMCPY_KIND_HTOA as u8;
    const ATOH: u8 = M::CUPTI_ACTIVITY_MEMCPY_KIND_ATOH as u8;
    const ATOA: u8 = M::CUPTI_ACTIVITY_MEMCPY_KIND_ATOA as u8;
    const ATOD: u8 = M::CUPTI_ACTIVITY_MEMCPY_KIND_ATOD as u8;
    const DTOA: u8 = M::CUPTI_ACTIVITY_MEMCPY_KIND_DTOA as u8;
    const DTOD: u8 = M::CUPTI_ACTIVITY_MEMCPY_KIND_DTOD as u8;
    const HTOH: u8 = M::CUPTI_ACTIVITY_MEMCPY_KIND_HTOH as u8;
    const PTOP: u8 = M::CUPTI_ACTIVITY_MEMCPY_KIND_PTOP as u8;
    match raw {
        HTOD | HTOA => CopyKind::HostToDevice,
        DTOH | ATOH => CopyKind::DeviceToHost,
        DTOD | ATOA | ATOD | DTOA => CopyKind::DeviceToDevice,
        HTOH => CopyKind::HostToHost,
        PTOP => CopyKind::PeerToPeer,
        _ => CopyKind::Other,
    }
}

/// CUpti_ActivityMemoryKind (u8 in memcpy records, u16 in memsets).
fn memory_kind(raw: u16) -> MemoryKind {
    use sys::CUpti_ActivityMemoryKind as M;
    const PAGEABLE: u16 = M::CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE as u16;
    const PINNED: u16 = M::CUPTI_ACTIVITY_MEMORY_KIND_PINNED as u16;
    const DEVICE: u16 = M::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u16;
    const ARRAY: u16 = M::CUPTI_ACTIVITY_MEMORY_KIND_ARRAY as u16;
    const MANAGED: u16 = M::CUPTI_ACTIVITY_MEMORY_KIND_MANAGED as u16;
    const DEVICE_STATIC: u16 = M::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC as u16;
    const MANAGED_STATIC: u16 = M::CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC as u16;
    match raw {
        PAGEABLE => MemoryKind::Pageable,
        PINNED => MemoryKind::Pinned,
        DEVICE | DEVICE_STATIC => MemoryKind::Device,
        ARRAY => MemoryKind::Array,
        MANAGED | MANAGED_STATIC => MemoryKind::Managed,
        _ => MemoryKind::Unknown,
    }
}

// ---------------------------------------------------------------------------
// Driver-API and resource callbacks
// ---------------------------------------------------------------------------

/// When a host buffer is hashed around a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HashAt {
    Never,
    /// Uploads: the bytes are there before the call.
    Enter,
    /// Synchronous downloads: the bytes are there when the call returns.
    /// (Asynchronous downloads are never hashed: at exit the data has not
    /// arrived, and a wrong hash is worse than none.)
    Exit,
}

/// Which parameter struct a call has, for host pointer and size. The
/// _ptds/_ptsz and Async variants share the leading fields of the struct
/// named here (checked against the bindings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Params {
    None,
    /// cuMemcpyHtoD_v2_params_st { dstDevice, srcHost, ByteCount, .. }
    HtoD,
    /// cuMemcpyDtoH_v2_params_st { dstHost, srcDevice, ByteCount, .. }
    DtoH,
    /// cuMemcpyDtoD_v2_params_st { dstDevice, srcDevice, ByteCount, .. }
    DtoD,
    /// cuMemcpy_params_st { dst, src, ByteCount, .. } (unified addressing)
    Unified,
    /// cuMemcpyPeer_params_st { dstDevice, dstContext, srcDevice, srcContext, ByteCount, .. }
    Peer,
    /// cuMemsetD8/16/32: { dstDevice, value, N, .. }; element size in bytes.
    Memset(u8),
    /// cuMemsetD2D8/16/32: { dstDevice, dstPitch, value, Width, Height, .. }.
    Memset2D(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Traced {
    api: DriverApi,
    params: Params,
    hash: HashAt,
}

const fn tr(api: DriverApi, params: Params, hash: HashAt) -> Traced {
    Traced { api, params, hash }
}

const LAUNCH: Traced = tr(DriverApi::Launch, Params::None, HashAt::Never);
const UPLOAD: Traced = tr(DriverApi::CopyHostToDevice, Params::HtoD, HashAt::Enter);
const DOWNLOAD_SYNC: Traced = tr(DriverApi::CopyDeviceToHost, Params::DtoH, HashAt::Exit);
const DOWNLOAD_ASYNC: Traced = tr(DriverApi::CopyDeviceToHost, Params::DtoH, HashAt::Never);
const DTOD: Traced = tr(DriverApi::CopyOther, Params::DtoD, HashAt::Never);
const UNIFIED: Traced = tr(DriverApi::CopyOther, Params::Unified, HashAt::Never);
const PEER: Traced = tr(DriverApi::CopyOther, Params::Peer, HashAt::Never);
const COPY_OTHER: Traced = tr(DriverApi::CopyOther, Params::None, HashAt::Never);
const fn memset(elem: u8) -> Traced {
    tr(DriverApi::Memset, Params::Memset(elem), HashAt::Never)
}
const fn memset_2d(elem: u8) -> Traced {
    tr(DriverApi::Memset, Params::Memset2D(elem), HashAt::Never)
}

/// The driver calls followed: launches, the copies libgomp's nvptx plugin
/// makes (the _v2 entry points) and their per-thread-stream twins, other
/// copies, memsets.
///
/// Not the synchronizations (cuStreamSynchronize and friends), although an
/// asynchronous kernel's fault comes to light there: when a device error
/// kills an OpenACC program, libgomp exits from the driver's callback
/// thread while the main thread is still returning from the failed
/// synchronization, and a CUPTI callback of ours around that call crashed
/// such programs (SIGSEGV or SIGABRT in about half the runs on an H200)
/// that bare exit with status 1. The fault is still seen at the next
/// launch or copy, and the program's exit status and the construct it
/// died in are in the trace.
static TRACED: &[(Cb, Traced)] = &[
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, LAUNCH),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, LAUNCH),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, LAUNCH),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, LAUNCH),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
        LAUNCH,
    ),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
        LAUNCH,
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, UPLOAD),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds, UPLOAD),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, UPLOAD),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
        UPLOAD,
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, DOWNLOAD_SYNC),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
        DOWNLOAD_SYNC,
    ),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
        DOWNLOAD_ASYNC,
    ),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
        DOWNLOAD_ASYNC,
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2, DTOD),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds, DTOD),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2, DTOD),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz, DTOD),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy, UNIFIED),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds, UNIFIED),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, UNIFIED),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz, UNIFIED),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer, PEER),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds, PEER),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, PEER),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz, PEER),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2, COPY_OTHER),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds, COPY_OTHER),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2,
        COPY_OTHER,
    ),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds,
        COPY_OTHER,
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2, COPY_OTHER),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz,
        COPY_OTHER,
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2, COPY_OTHER),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds, COPY_OTHER),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2, COPY_OTHER),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz,
        COPY_OTHER,
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer, COPY_OTHER),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer_ptds, COPY_OTHER),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync, COPY_OTHER),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz,
        COPY_OTHER,
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, memset(1)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds, memset(1)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, memset(1)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz, memset(1)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2, memset(2)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds, memset(2)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async, memset(2)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz, memset(2)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2, memset(4)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds, memset(4)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, memset(4)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz, memset(4)),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2, memset_2d(1)),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2_ptds,
        memset_2d(1),
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async, memset_2d(1)),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz,
        memset_2d(1),
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2, memset_2d(2)),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds,
        memset_2d(2),
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async, memset_2d(2)),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async_ptsz,
        memset_2d(2),
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2, memset_2d(4)),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2_ptds,
        memset_2d(4),
    ),
    (Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async, memset_2d(4)),
    (
        Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz,
        memset_2d(4),
    ),
];

/// What to do for a driver callback id: an array indexed by id, built once.
fn traced(cbid: u32) -> Option<Traced> {
    static BY_ID: OnceLock<Vec<Option<Traced>>> = OnceLock::new();
    let table = BY_ID.get_or_init(|| {
        let len = TRACED
            .iter()
            .map(|(cb, _)| *cb as usize + 1)
            .max()
            .unwrap_or(0);
        let mut v = vec![None; len];
        for (cb, t) in TRACED {
            v[*cb as usize] = Some(*t);
        }
        v
    });
    table.get(cbid as usize).copied().flatten()
}

const SITE_ENTER: u32 = sys::CUpti_ApiCallbackSite::CUPTI_API_ENTER as u32;
const SITE_EXIT: u32 = sys::CUpti_ApiCallbackSite::CUPTI_API_EXIT as u32;

/// CUPTI's subscriber callback, for both domains enabled.
extern "C" fn api_callback(
    _userdata: *mut c_void,
    domain: sys::CUpti_CallbackDomain,
    cbid: sys::CUpti_CallbackId,
    cbdata: *const c_void,
) {
    if !live() || cbdata.is_null() {
        return;
    }
    match domain {
        sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API => {
            crate::state::guarded("CUPTI driver callback", || {
                // SAFETY: in the driver-API domain CUPTI passes a
                // CUpti_CallbackData valid for the duration of the callback.
                unsafe { on_driver_call(cbid, cbdata.cast()) }
            });
        }
        sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE if cbid == CONTEXT_DESTROY_STARTING => {
            device_side("CUPTI context destruction", flush_before_context_destroy);
        }
        _ => {}
    }
}

/// libgomp destroys its context at exit, before our destructor runs; the
/// records of that context must come out first. Skipped when a flush is
/// already under way (it covers them) or would re-enter.
fn flush_before_context_destroy() {
    CONTEXT_DESTROYED.store(true, Ordering::Release);
    if STATE.load(Ordering::Acquire) != ACTIVE || !crate::state::enabled() || context_broken() {
        return;
    }
    if IN_FLUSH.try_with(|f| f.replace(true)).unwrap_or(true) {
        return;
    }
    if let Ok(_serial) = FLUSH_LOCK.try_lock() {
        // SAFETY: CUPTI is active; not inside a buffer callback (IN_FLUSH).
        // Forced: the context's records cannot complete after it is gone.
        unsafe { sys::cuptiActivityFlushAll(FLUSH_FORCED) };
    }
    let _ = IN_FLUSH.try_with(|f| f.set(false));
}

/// # Safety
/// `data` must point to the CUpti_CallbackData of a driver-API callback.
unsafe fn on_driver_call(cbid: u32, data: *const sys::CUpti_CallbackData) {
    let Some(t) = traced(cbid) else { return };
    // The site is read as an integer: only ENTER and EXIT are acted on.
    // SAFETY: `data` is valid (caller); addr_of! makes no reference.
    let site = unsafe { addr_of!((*data).callbackSite).cast::<u32>().read() };
    // SAFETY: as above; plain integer and pointer fields.
    let (correlation, params, ret) = unsafe {
        (
            (*data).correlationId,
            (*data).functionParams,
            (*data).functionReturnValue,
        )
    };
    if site == SITE_EXIT {
        // SAFETY: at exit functionReturnValue points to the call's CUresult.
        let code = if ret.is_null() {
            0
        } else {
            unsafe { ret.cast::<u32>().read() }
        };
        if code != 0 {
            cuda_error(cbid, code);
            return;
        }
    }
    let (host_ptr, bytes) = if params.is_null() {
        (None, None)
    } else {
        // SAFETY: for this callback id CUPTI's functionParams points to the
        // parameter struct `t.params` names (or one sharing its leading
        // fields), valid during the callback.
        unsafe { read_params(t.params, params) }
    };
    match site {
        SITE_ENTER => {
            // Converted to ns by the writer (see clock).
            let time_ns = crate::clock::stamp();
            let mut call = DriverCall {
                time_ns,
                thread: 0,
                region: accprof_trace::RegionId(0),
                correlation,
                api: t.api,
                host_ptr,
                bytes,
            };
            // One thread-local access for the call and its hash.
            let done = crate::tls::THREAD.try_with(|th| {
                call.thread = crate::clock::thread_id_in(th);
                call.region = crate::region::current_in(th);
                crate::sink::push_in(th, Record::DriverCall(call));
                if t.hash == HashAt::Enter {
                    // SAFETY: an upload is about to read exactly these host
                    // bytes.
                    unsafe { push_hash(th, Direction::Upload, correlation, host_ptr, bytes) };
                }
            });
            if done.is_err() {
                // Thread-local storage gone (a call during thread exit): no
                // region to name.
                call.thread = crate::clock::thread_id();
                crate::sink::push(Record::DriverCall(call));
            }
        }
        SITE_EXIT if t.hash == HashAt::Exit => {
            // The call succeeded (checked above).
            let _ = crate::tls::THREAD.try_with(|th| {
                // SAFETY: a synchronous download has just written exactly
                // these host bytes.
                unsafe { push_hash(th, Direction::Download, correlation, host_ptr, bytes) };
            });
        }
        _ => {}
    }
}

/// Set once a driver call has reported an error that leaves the context
/// unusable (an illegal address, a kernel that faulted or timed out). From
/// then on the collector makes no call into CUPTI that touches the device:
/// flushing a broken context can hang or crash inside the driver, and the
/// program must end as it would have without us.
static CONTEXT_BROKEN: AtomicBool = AtomicBool::new(false);

/// Failed driver calls reported in the trace, at most [`MAX_ERRORS_SAID`].
static ERRORS_SAID: AtomicU32 = AtomicU32::new(0);
const MAX_ERRORS_SAID: u32 = 16;

/// CUresult codes after which the context cannot be used again.
fn is_sticky(code: u32) -> bool {
    matches!(code, 700 | 702 | 714..=719 | 999)
}

/// The CUresult name of the codes a failing OpenACC program meets.
fn cuda_error_name(code: u32) -> &'static str {
    match code {
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        4 => "CUDA_ERROR_DEINITIALIZED",
        201 => "CUDA_ERROR_INVALID_CONTEXT",
        400 => "CUDA_ERROR_INVALID_HANDLE",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        701 => "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        702 => "CUDA_ERROR_LAUNCH_TIMEOUT",
        714 => "CUDA_ERROR_HARDWARE_STACK_ERROR",
        715 => "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        716 => "CUDA_ERROR_MISALIGNED_ADDRESS",
        717 => "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        718 => "CUDA_ERROR_INVALID_PC",
        719 => "CUDA_ERROR_LAUNCH_FAILED",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => "CUDA error",
    }
}

/// A traced driver call failed: say so in the trace; after an error that
/// breaks the context, stop touching the device and get what was recorded
/// onto disk now, since the program is about to die (and may hang doing so).
#[cold]
fn cuda_error(cbid: u32, code: u32) {
    let name = TRACED
        .iter()
        .find(|(cb, _)| *cb as u32 == cbid)
        .map(|(cb, _)| callback_name(*cb))
        .unwrap_or_else(|| format!("driver call {cbid}"));
    let sticky = is_sticky(code);
    let first_sticky = sticky && !CONTEXT_BROKEN.swap(true, Ordering::AcqRel);
    if ERRORS_SAID.fetch_add(1, Ordering::Relaxed) < MAX_ERRORS_SAID || first_sticky {
        let mut message = format!("{name} failed: {} ({code})", cuda_error_name(code));
        if first_sticky {
            message.push_str(
                "; the device context is unusable: device records not yet delivered by CUPTI are lost",
            );
        }
        diagnostic(Level::Error, message);
    }
    if first_sticky {
        crate::writer::flush_and_wait(std::time::Duration::from_secs(1), false, false);
    }
}

/// True once the device context is known to be broken (see [`cuda_error`]).
pub(crate) fn context_broken() -> bool {
    CONTEXT_BROKEN.load(Ordering::Acquire)
}

/// Set when the runtime began destroying a device context: its records
/// were flushed then (see [`flush_before_context_destroy`]).
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

/// Host pointer and byte count of a call, from its parameter struct.
///
/// # Safety
/// `p` must point to a parameter struct of the shape `shape` describes.
unsafe fn read_params(shape: Params, p: *const c_void) -> (Option<u64>, Option<u64>) {
    let addr = |ptr: *const c_void| Some(ptr as usize as u64);
    let n = |v: usize| Some(v as u64);
    // SAFETY (all arms): `p` points to the struct named (caller); these
    // structs hold only integers and raw pointers.
    unsafe {
        match shape {
            Params::None => (None, None),
            Params::HtoD => {
                let s = &*p.cast::<sys::cuMemcpyHtoD_v2_params_st>();
                (addr(s.srcHost), n(s.ByteCount))
            }
            Params::DtoH => {
                let s = &*p.cast::<sys::cuMemcpyDtoH_v2_params_st>();
                (addr(s.dstHost.cast_const()), n(s.ByteCount))
            }
            Params::DtoD => (
                None,
                n((*p.cast::<sys::cuMemcpyDtoD_v2_params_st>()).ByteCount),
            ),
            Params::Unified => (None, n((*p.cast::<sys::cuMemcpy_params_st>()).ByteCount)),
            Params::Peer => (
                None,
                n((*p.cast::<sys::cuMemcpyPeer_params_st>()).ByteCount),
            ),
            Params::Memset(elem) => {
                let count = match elem {
                    1 => (*p.cast::<sys::cuMemsetD8_v2_params_st>()).N,
                    2 => (*p.cast::<sys::cuMemsetD16_v2_params_st>()).N,
                    _ => (*p.cast::<sys::cuMemsetD32_v2_params_st>()).N,
                };
                (None, n(count.saturating_mul(usize::from(elem))))
            }
            Params::Memset2D(elem) => {
                let (w, h) = match elem {
                    1 => {
                        let s = &*p.cast::<sys::cuMemsetD2D8_v2_params_st>();
                        (s.Width, s.Height)
                    }
                    2 => {
                        let s = &*p.cast::<sys::cuMemsetD2D16_v2_params_st>();
                        (s.Width, s.Height)
                    }
                    _ => {
                        let s = &*p.cast::<sys::cuMemsetD2D32_v2_params_st>();
                        (s.Width, s.Height)
                    }
                };
                (
                    None,
                    n(w.saturating_mul(h).saturating_mul(usize::from(elem))),
                )
            }
        }
    }
}

/// Hashes a host buffer and records it on the thread `th` belongs to,
/// unless hashing is off.
///
/// # Safety
/// `host_ptr..host_ptr+bytes` must be readable host memory for this call.
unsafe fn push_hash(
    th: &crate::tls::PerThread,
    direction: Direction,
    correlation: u32,
    host_ptr: Option<u64>,
    bytes: Option<u64>,
) {
    let mode = crate::config::config().hash;
    if mode == HashMode::Off {
        return;
    }
    let (Some(host_ptr), Some(bytes)) = (host_ptr, bytes) else {
        return;
    };
    let Ok(len) = usize::try_from(bytes) else {
        return;
    };
    if host_ptr == 0 || len == 0 {
        return;
    }
    // SAFETY: readable for `len` bytes (caller).
    let Some(hash) =
        (unsafe { crate::hash::hash_buffer(host_ptr as usize as *const u8, len, mode) })
    else {
        return;
    };
    crate::sink::push_in(
        th,
        Record::Hash(BufferHash {
            time_ns: crate::clock::stamp(),
            region: crate::region::current_in(th),
            correlation,
            direction,
            host_ptr,
            bytes,
            mode,
            hash,
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zeroed<T>() -> T {
        // SAFETY: only used for the CUPTI record structs, whose fields are
        // integers, raw pointers, unions of integers and enums with a 0
        // variant.
        unsafe { std::mem::zeroed() }
    }

    #[test]
    fn kernel_records_convert() {
        let mut k: sys::CUpti_ActivityKernel10 = zeroed();
        k.kind = Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = 1_000;
        k.end = 3_500;
        k.gridX = 128;
        k.gridY = 2;
        k.gridZ = 1;
        k.blockX = 32;
        k.blockY = 4;
        k.blockZ = 1;
        k.registersPerThread = 40;
        k.staticSharedMemory = 256;
        k.dynamicSharedMemory = 1024;
        k.localMemoryPerThread = 16;
        k.deviceId = 0;
        k.contextId = 1;
        k.streamId = 7;
        k.correlationId = 99;
        let r = kernel_record(&k, StringId(5), 0);
        assert_eq!(
            r,
            KernelRecord {
                start_ns: 1_000,
                end_ns: 3_500,
                name: StringId(5),
                grid: [128, 2, 1],
                block: [32, 4, 1],
                registers: 40,
                static_shared_bytes: 256,
                dynamic_shared_bytes: 1024,
                local_bytes_per_thread: 16,
                device: 0,
                context: 1,
                stream: 7,
                correlation: 99,
            }
        );
        // An offset moves both times; a negative dimension reads as 0.
        k.gridX = -1;
        let r = kernel_record(&k, StringId(5), -400);
        assert_eq!((r.start_ns, r.end_ns, r.grid[0]), (600, 3_100, 0));
        // Zeroed: an incomplete record, times stay 0.
        let z: sys::CUpti_ActivityKernel10 = zeroed();
        assert!(!complete(z.start, z.end));
        let r = kernel_record(&z, StringId(1), 12_345);
        assert_eq!((r.start_ns, r.end_ns, r.grid), (0, 0, [0, 0, 0]));
    }

    #[test]
    fn memcpy_records_convert() {
        let mut m: sys::CUpti_ActivityMemcpy6 = zeroed();
        m.kind = Kind::CUPTI_ACTIVITY_KIND_MEMCPY;
        m.copyKind = sys::CUpti_ActivityMemcpyKind::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD as u8;
        m.srcKind = sys::CUpti_ActivityMemoryKind::CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE as u8;
        m.dstKind = sys::CUpti_ActivityMemoryKind::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u8;
        m.bytes = 1 << 20;
        m.start = 10;
        m.end = 20;
        m.deviceId = 1;
        m.contextId = 2;
        m.streamId = 3;
        m.correlationId = 4;
        assert_eq!(
            memcpy_record(&m, 5),
            MemcpyRecord {
                start_ns: 15,
                end_ns: 25,
                bytes: 1 << 20,
                kind: CopyKind::HostToDevice,
                src: MemoryKind::Pageable,
                dst: MemoryKind::Device,
                device: 1,
                context: 2,
                stream: 3,
                correlation: 4,
            }
        );
        m.copyKind = sys::CUpti_ActivityMemcpyKind::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH as u8;
        m.srcKind = sys::CUpti_ActivityMemoryKind::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u8;
        m.dstKind = sys::CUpti_ActivityMemoryKind::CUPTI_ACTIVITY_MEMORY_KIND_PINNED as u8;
        let r = memcpy_record(&m, 0);
        assert_eq!(
            (r.kind, r.src, r.dst),
            (
                CopyKind::DeviceToHost,
                MemoryKind::Device,
                MemoryKind::Pinned
            )
        );
        let z: sys::CUpti_ActivityMemcpy6 = zeroed();
        let r = memcpy_record(&z, 0);
        assert_eq!(
            (r.kind, r.src, r.dst, r.bytes),
            (CopyKind::Other, MemoryKind::Unknown, MemoryKind::Unknown, 0)
        );
    }

    #[test]
    fn copy_and_memory_kinds_map() {
        assert_eq!(copy_kind(1), CopyKind::HostToDevice);
        assert_eq!(copy_kind(2), CopyKind::DeviceToHost);
        assert_eq!(copy_kind(3), CopyKind::HostToDevice);
        assert_eq!(copy_kind(4), CopyKind::DeviceToHost);
        for k in [5, 6, 7, 8] {
            assert_eq!(copy_kind(k), CopyKind::DeviceToDevice);
        }
        assert_eq!(copy_kind(9), CopyKind::HostToHost);
        assert_eq!(copy_kind(10), CopyKind::PeerToPeer);
        assert_eq!(copy_kind(0), CopyKind::Other);
        assert_eq!(copy_kind(200), CopyKind::Other);
        assert_eq!(memory_kind(1), MemoryKind::Pageable);
        assert_eq!(memory_kind(2), MemoryKind::Pinned);
        assert_eq!(memory_kind(3), MemoryKind::Device);
        assert_eq!(memory_kind(4), MemoryKind::Array);
        assert_eq!(memory_kind(5), MemoryKind::Managed);
        assert_eq!(memory_kind(6), MemoryKind::Device);
        assert_eq!(memory_kind(7), MemoryKind::Managed);
        assert_eq!(memory_kind(0), MemoryKind::Unknown);
        assert_eq!(memory_kind(999), MemoryKind::Unknown);
    }

    #[test]
    fn memset_records_convert() {
        let mut m: sys::CUpti_ActivityMemset4 = zeroed();
        m.kind = Kind::CUPTI_ACTIVITY_KIND_MEMSET;
        m.value = 0xab;
        m.bytes = 4096;
        m.start = 100;
        m.end = 150;
        m.memoryKind = sys::CUpti_ActivityMemoryKind::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u16;
        m.deviceId = 0;
        m.contextId = 1;
        m.streamId = 14;
        m.correlationId = 8;
        assert_eq!(
            memset_record(&m, 0),
            MemsetRecord {
                start_ns: 100,
                end_ns: 150,
                bytes: 4096,
                value: 0xab,
                memory: MemoryKind::Device,
                device: 0,
                context: 1,
                stream: 14,
                correlation: 8,
            }
        );
    }

    #[test]
    fn device_records_convert() {
        let mut d: sys::CUpti_ActivityDevice5 = zeroed();
        d.id = 0;
        d.numMultiprocessors = 132;
        d.computeCapabilityMajor = 9;
        d.computeCapabilityMinor = 0;
        d.globalMemorySize = 150_000_000_000;
        let r = device_record(&d, "NVIDIA H200".into());
        assert_eq!(
            r,
            Device {
                id: 0,
                name: "NVIDIA H200".into(),
                sm_count: 132,
                compute_capability: (9, 0),
                global_memory_bytes: 150_000_000_000,
            }
        );
    }

    #[test]
    fn short_records_read_as_zero_and_enums_are_fixed() {
        // A record cut short (an older CUPTI's smaller struct at the end of
        // the valid bytes): fields past it read as 0.
        let mut k: sys::CUpti_ActivityKernel10 = zeroed();
        k.start = 7;
        k.end = 9;
        k.correlationId = 42;
        k.queued = 77;
        // SAFETY: viewing our own struct's bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                addr_of!(k).cast::<u8>(),
                size_of::<sys::CUpti_ActivityKernel10>(),
            )
        };
        let mut junk = bytes.to_vec();
        // Out-of-range values where enums live must not survive.
        junk[4 * 3..4 * 3 + 4].copy_from_slice(&0xdead_beef_u32.to_le_bytes());
        let cut = std::mem::offset_of!(sys::CUpti_ActivityKernel10, queued);
        // SAFETY: `junk` holds at least `cut` readable bytes.
        let r =
            unsafe { read_record::<sys::CUpti_ActivityKernel10>(junk.as_ptr(), cut, fix_kernel) };
        assert_eq!((r.start, r.end, r.correlationId, r.queued), (7, 9, 42, 0));
        assert_eq!(
            r.partitionedGlobalCacheExecuted as u32,
            sys::CUpti_ActivityPartitionedGlobalCacheConfig::CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_UNKNOWN as u32
        );
    }

    #[test]
    fn errors_that_break_the_context_are_told_apart() {
        // Synchronizations are not followed (see TRACED).
        assert_eq!(
            traced(Cb::CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize as u32),
            None
        );
        assert_eq!(
            traced(Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel as u32).map(|t| t.api),
            Some(DriverApi::Launch)
        );
        // An illegal address breaks the context; running out of resources
        // for one launch does not.
        assert!(is_sticky(700) && is_sticky(719) && is_sticky(999));
        assert!(!is_sticky(701) && !is_sticky(2) && !is_sticky(600));
        assert_eq!(cuda_error_name(700), "CUDA_ERROR_ILLEGAL_ADDRESS");
    }

    #[test]
    fn completeness() {
        assert!(complete(1, 1));
        assert!(complete(1, 2));
        assert!(!complete(0, 0));
        assert!(!complete(5, 0));
        assert!(!complete(0, 5));
    }

    #[test]
    fn search_dirs_follow_the_documented_order() {
        let env = SearchEnv {
            cuda_homes: vec!["/opt/cuda".into()],
            ld_library_path: Some("/a/lib::/usr/local/cuda/lib64:/b".into()),
            versioned_toolkits: vec![
                "/usr/local/cuda-12.9".into(),
                "/usr/local/cuda-13.2".into(),
                "/usr/local/cuda-13.0".into(),
                "/usr/local/cuda-x".into(),
            ],
            hpc_sdk_toolkits: vec![
                "/opt/nvidia/hpc_sdk/Linux_x86_64/25.1/cuda/12.6".into(),
                "/opt/nvidia/hpc_sdk/Linux_x86_64/25.7/cuda/12.9".into(),
                "/opt/nvidia/hpc_sdk/Linux_x86_64/25.7/cuda/13.0".into(),
            ],
        };
        let dirs = search_dirs(&env, Some(13000));
        let s: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        let sub = LIB_SUBDIRS[2];
        let mut want = Vec::new();
        for root in [
            "/opt/cuda",
            "/usr/local/cuda",
            // Toolkits the 13.0 driver supports first, newest first.
            "/usr/local/cuda-13.0",
            "/usr/local/cuda-12.9",
            "/usr/local/cuda-13.2",
            "/usr/local/cuda-x",
            "/opt/nvidia/hpc_sdk/Linux_x86_64/25.7/cuda/13.0",
            "/opt/nvidia/hpc_sdk/Linux_x86_64/25.7/cuda/12.9",
            "/opt/nvidia/hpc_sdk/Linux_x86_64/25.1/cuda/12.6",
        ] {
            for d in LIB_SUBDIRS {
                want.push(format!("{root}/{d}"));
            }
        }
        // LD_LIBRARY_PATH last; empty entries skipped, duplicates dropped.
        want.push("/a/lib".into());
        want.push("/b".into());
        assert_eq!(s, want);
        assert!(s.iter().any(|d| d.ends_with(sub)));

        // Without a driver version: newest first.
        let dirs = search_dirs(&env, None);
        let roots: Vec<String> = dirs
            .iter()
            .step_by(LIB_SUBDIRS.len())
            .map(|d| d.display().to_string())
            .collect();
        assert!(roots[2].starts_with("/usr/local/cuda-13.2/"));
        assert!(roots[3].starts_with("/usr/local/cuda-13.0/"));

        // Nothing set: /usr/local/cuda only.
        let dirs = search_dirs(&SearchEnv::default(), None);
        assert_eq!(dirs.len(), LIB_SUBDIRS.len());
        assert!(dirs.iter().all(|d| d.starts_with("/usr/local/cuda")));
    }

    #[test]
    fn library_names_rank_our_soname_first() {
        let names = vec![
            "libcupti.so".to_string(),
            "libcupti.so.2025.3.0".into(),
            "libcupti_static.a".into(),
            "libcupti.so.12".into(),
            "libcupti.so.13".into(),
        ];
        assert_eq!(
            rank_library_names(names),
            vec![
                "libcupti.so.13",
                "libcupti.so.12",
                "libcupti.so",
                "libcupti.so.2025.3.0"
            ]
        );
    }

    #[test]
    fn api_versions() {
        assert!(readable_api_version(130_001).is_ok());
        assert!(readable_api_version(130_401).is_ok());
        assert!(readable_api_version(28).is_ok());
        assert!(readable_api_version(18).is_ok());
        assert!(readable_api_version(14).is_err());
        assert!(readable_api_version(140_001).is_err());
        assert_eq!(cupti_cuda_version(130_001), Some((13, 0)));
        assert_eq!(cupti_cuda_version(130_202), Some((13, 2)));
        assert_eq!(cupti_cuda_version(24), Some((12, 6)));
        assert_eq!(format_cuda_version(13000), "13.0");
        assert_eq!(format_cuda_version(12090), "12.9");
    }

    #[test]
    fn callbacks_are_classified() {
        let id = |cb: Cb| cb as u32;
        let up = traced(id(Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2));
        assert_eq!(up, Some(UPLOAD));
        let down = traced(id(Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2));
        assert_eq!(down.map(|t| t.hash), Some(HashAt::Exit));
        let down_async = traced(id(Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2));
        assert_eq!(
            down_async.map(|t| (t.api, t.hash)),
            Some((DriverApi::CopyDeviceToHost, HashAt::Never))
        );
        assert_eq!(
            traced(id(Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)),
            Some(LAUNCH)
        );
        assert_eq!(
            traced(id(Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)),
            Some(LAUNCH)
        );
        assert_eq!(
            traced(id(Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async)).map(|t| t.params),
            Some(Params::Memset(4))
        );
        assert_eq!(
            traced(id(Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2)),
            None
        );
        assert_eq!(traced(u32::MAX), None);
        // No id twice in the table.
        let mut ids: Vec<u32> = TRACED.iter().map(|(cb, _)| *cb as u32).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), TRACED.len());
    }

    #[test]
    fn params_give_host_pointer_and_bytes() {
        let buf = [0u8; 64];
        let up = sys::cuMemcpyHtoD_v2_params_st {
            dstDevice: 0x7000_0000,
            srcHost: buf.as_ptr().cast(),
            ByteCount: 64,
        };
        // SAFETY: pointers to our own parameter structs of the right shape.
        unsafe {
            let (p, n) = read_params(Params::HtoD, addr_of!(up).cast());
            assert_eq!((p, n), (Some(buf.as_ptr() as usize as u64), Some(64)));
            let ms = sys::cuMemsetD32_v2_params_st {
                dstDevice: 1,
                ui: 0,
                N: 10,
            };
            assert_eq!(
                read_params(Params::Memset(4), addr_of!(ms).cast()),
                (None, Some(40))
            );
            let ms = sys::cuMemsetD2D16_v2_params_st {
                dstDevice: 1,
                dstPitch: 512,
                us: 0,
                Width: 100,
                Height: 3,
            };
            assert_eq!(
                read_params(Params::Memset2D(2), addr_of!(ms).cast()),
                (None, Some(600))
            );
            assert_eq!(read_params(Params::None, addr_of!(ms).cast()), (None, None));
        }
    }

    #[test]
    fn shift_keeps_zero() {
        assert_eq!(shift(0, 100), 0);
        assert_eq!(shift(50, 100), 150);
        assert_eq!(shift(150, -100), 50);
    }

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
