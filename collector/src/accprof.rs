//! The OpenACC profiling interface (acc_prof): registration and the one
//! callback every event goes through.
//!
//! Runtimes differ in what they fill (NVHPC sends source file, line and
//! variable names; GCC's libgomp sends none of them, and -1 for lines), so
//! every field is read only when `valid_bytes` covers it, pointers are
//! checked for NULL, numbers for -1 and enums for range.

use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use accprof_trace::{AccEventKind, ConstructKind, SourceState};

use crate::event::{flag, AccRaw, Event, NONE32, NO_CONSTRUCT};

use crate::{callsite, clock, header, region, sink, state};

/// `acc_prof_info` (OpenACC 2.6).
#[repr(C)]
pub struct AccProfInfo {
    pub event_type: c_int,
    pub valid_bytes: c_int,
    pub version: c_int,
    pub device_type: c_int,
    pub device_number: c_int,
    pub thread_id: c_int,
    pub async_: isize,
    pub async_queue: isize,
    pub src_file: *const c_char,
    pub func_name: *const c_char,
    pub line_no: c_int,
    pub end_line_no: c_int,
    pub func_line_no: c_int,
    pub func_end_line_no: c_int,
}

/// `acc_data_event_info`.
#[repr(C)]
pub struct AccDataEventInfo {
    pub event_type: c_int,
    pub valid_bytes: c_int,
    pub parent_construct: c_int,
    pub implicit: c_int,
    pub tool_info: *mut c_void,
    pub var_name: *const c_char,
    pub bytes: usize,
    pub host_ptr: *const c_void,
    pub device_ptr: *const c_void,
}

/// `acc_launch_event_info`.
#[repr(C)]
pub struct AccLaunchEventInfo {
    pub event_type: c_int,
    pub valid_bytes: c_int,
    pub parent_construct: c_int,
    pub implicit: c_int,
    pub tool_info: *mut c_void,
    pub kernel_name: *const c_char,
    pub num_gangs: usize,
    pub num_workers: usize,
    pub vector_length: usize,
}

/// The common head of every `acc_event_info` variant.
#[repr(C)]
pub struct AccOtherEventInfo {
    pub event_type: c_int,
    pub valid_bytes: c_int,
    pub parent_construct: c_int,
    pub implicit: c_int,
    pub tool_info: *mut c_void,
}

pub type AccProfCallback = unsafe extern "C" fn(*mut AccProfInfo, *mut c_void, *mut c_void);
pub type AccProfReg = unsafe extern "C" fn(c_int, Option<AccProfCallback>, c_int);
pub type AccProfLookup = unsafe extern "C" fn(*const c_char) -> *mut c_void;

const ACC_REG: c_int = 0;
const DEVICE_INIT_START: c_int = AccEventKind::DeviceInitStart as c_int;

static REGISTERED: AtomicBool = AtomicBool::new(false);
/// Callbacks with an event number outside the specification's range.
pub static UNKNOWN_EVENTS: AtomicU64 = AtomicU64::new(0);

/// True when a field ending at `end` bytes into the struct is covered by the
/// struct's `valid_bytes`.
#[inline]
fn covers(valid_bytes: c_int, offset: usize, size: usize) -> bool {
    valid_bytes > 0 && offset + size <= valid_bytes as usize
}

/// A field of `$s`, read without its own check when `$whole` (the struct's
/// `valid_bytes` covers all of it).
macro_rules! get {
    ($whole:expr, $s:expr, $ty:ty, $f:ident) => {
        if $whole {
            Some($s.$f)
        } else {
            field!($s, $ty, $f)
        }
    };
}

macro_rules! field {
    ($s:expr, $ty:ty, $f:ident) => {
        if covers($s.valid_bytes, offset_of!($ty, $f), size_of_field(&$s.$f)) {
            Some($s.$f)
        } else {
            None
        }
    };
}

#[inline]
fn size_of_field<T>(_: &T) -> usize {
    size_of::<T>()
}

/// Registers our callback for every event through `reg`, once per process
/// whichever route (ACC_PROFLIB or the preload constructor) comes first.
///
/// # Safety
/// `reg` must be the runtime's `acc_prof_register`-compatible function.
pub unsafe fn register_all(reg: AccProfReg, route: &str) {
    if REGISTERED.swap(true, Ordering::AcqRel) {
        return;
    }
    for ev in 1..=25 {
        // SAFETY: reg is the runtime's registration function (caller's
        // promise); the callback has the acc_prof_callback signature.
        unsafe { reg(ev, Some(on_event), ACC_REG) };
    }
    header::set(&header::ACC_PROF, SourceState::Active);
    if let Ok(mut r) = header::RUNTIME.lock() {
        *r = Some(format!("{} ({route})", runtime_name(reg as *const c_void)));
    }
}

/// Names the library that holds `addr` (the runtime's register function).
fn runtime_name(addr: *const c_void) -> String {
    let Some(path) = crate::callsite::object_of(addr) else {
        return "OpenACC runtime".into();
    };
    let name = path.rsplit('/').next().unwrap_or(&path);
    let family = if name.starts_with("libgomp") {
        "GCC libgomp"
    } else if name.starts_with("libacc") || name.starts_with("libnv") {
        "NVHPC"
    } else {
        "OpenACC runtime"
    };
    format!("{family} {path}")
}

/// Starts a new region for construct starts, closes it for ends.
#[inline]
fn region_for(kind: AccEventKind, t: &crate::tls::PerThread) -> accprof_trace::RegionId {
    use AccEventKind::*;
    match kind {
        ComputeConstructStart => {
            // Compute constructs never nest on the host: one that starts
            // while regions are open follows a construct whose end event
            // never came (the program toggled the callback off, or the
            // runtime skipped it). Close them, so this one is top-level and
            // gets its own call site.
            region::close_to_in(t, 0);
            region::open_in(t)
        }
        EnterDataStart | ExitDataStart | UpdateStart | WaitStart => region::open_in(t),
        ComputeConstructEnd | EnterDataEnd | ExitDataEnd | UpdateEnd | WaitEnd => {
            region::close_in(t)
        }
        _ => region::current_in(t),
    }
}

fn is_construct_start(kind: AccEventKind) -> bool {
    use AccEventKind::*;
    matches!(
        kind,
        ComputeConstructStart | EnterDataStart | ExitDataStart | UpdateStart | WaitStart
    )
}

/// The acc_prof callback.
///
/// # Safety
/// Called by the runtime with pointers to its info structs (any may be NULL;
/// each is read only as far as its `valid_bytes` says).
pub unsafe extern "C" fn on_event(
    prof_info: *mut AccProfInfo,
    event_info: *mut c_void,
    _api_info: *mut c_void,
) {
    // Device initialization waits for CUPTI (started in the background),
    // so the device's first work is recorded. The wait is not timed.
    // SAFETY: a non-NULL prof_info from the runtime points to an
    // acc_prof_info, whose first field is always present.
    if !prof_info.is_null() && unsafe { (*prof_info).event_type } == DEVICE_INIT_START {
        crate::cupti::await_start(crate::config::DEVICE_START_WAIT);
    }
    // Converted to ns by the writer (see clock).
    let time_ns = clock::stamp();
    // A fixed point in this frame: the runtime's frames above it have a
    // fixed layout per call chain (see callsite::capture).
    let anchor = std::hint::black_box(0u64);
    let anchor = &anchor as *const u64 as usize;
    state::guarded("the acc_prof callback", || {
        // One thread-local access per event: everything below takes `t`.
        let _ = crate::tls::THREAD.try_with(|t| {
            let mut seen = None;
            sink::push_with(t, |slot| {
                // SAFETY: the runtime passes valid (or NULL) pointers for the
                // call; `slot` is writable space for one record.
                let made = unsafe {
                    convert_into(
                        slot,
                        t,
                        time_ns,
                        prof_info.as_ref(),
                        event_info.cast_const(),
                        anchor,
                    )
                };
                if made && crate::coherence::on() {
                    // SAFETY: convert_into just wrote an Event::Acc there.
                    if let Event::Acc(a) = unsafe { &*slot } {
                        seen = Some(*a);
                    }
                }
                made
            });
            // Outside the slot: the check may call the runtime.
            if let Some(a) = seen {
                crate::coherence::on_acc(&a);
            }
        });
    });
}

/// Turns the runtime's structs into an [`AccRaw`] event written straight
/// into `slot` (no intermediate copies on the hot path); false when the
/// event is not recorded. `stack_anchor` is the address of a local in the
/// callback's frame (for call-site capture).
///
/// # Safety
/// `slot` must be valid for writing one `Event`; `event_info` must be NULL
/// or point to an acc_event_info whose `valid_bytes` is truthful.
#[inline(always)]
pub(crate) unsafe fn convert_into(
    slot: *mut Event,
    t: &crate::tls::PerThread,
    time_ns: u64,
    pi: Option<&AccProfInfo>,
    event_info: *const c_void,
    stack_anchor: usize,
) -> bool {
    let Some(pi) = pi else {
        return false;
    };
    let Some(kind) = AccEventKind::from_raw(pi.event_type as i64) else {
        UNKNOWN_EVENTS.fetch_add(1, Ordering::Relaxed);
        return false;
    };
    let region = region_for(kind, t);
    let string = |p: Option<*const c_char>| match p {
        // SAFETY: a non-NULL string field from the runtime is NUL-terminated.
        Some(p) if !p.is_null() => unsafe { sink::intern_cstr(p) }.map_or(0, |s| s.0),
        _ => 0,
    };
    // Runtimes fill the whole struct (libgomp and NVHPC do): one check
    // then covers every field.
    let whole = covers(pi.valid_bytes, 0, size_of::<AccProfInfo>());
    let line = |v: Option<c_int>| v.filter(|&l| l > 0).map_or(0, |l| l as u32);
    let lines = [
        line(get!(whole, pi, AccProfInfo, line_no)),
        line(get!(whole, pi, AccProfInfo, end_line_no)),
        line(get!(whole, pi, AccProfInfo, func_line_no)),
        line(get!(whole, pi, AccProfInfo, func_end_line_no)),
    ];
    // Only top-level constructs need their own call site: nested ones (the
    // implicit data part of a compute construct) share their parent's.
    let call_site = if is_construct_start(kind) && lines[0] == 0 && t.depth.get() == 1 {
        callsite::capture(stack_anchor).map_or(0, |c| c.0)
    } else {
        0
    };
    let mut flags = 0u8;
    let mut construct = NO_CONSTRUCT;
    let mut name = 0;
    let mut p = [0u64; 3];
    // SAFETY: caller's promise on event_info; every variant starts with the
    // acc_other_event_info head, whose own valid_bytes guards further reads.
    if let Some(o) = unsafe { (event_info as *const AccOtherEventInfo).as_ref() } {
        if let Some(c) = field!(o, AccOtherEventInfo, parent_construct) {
            if ConstructKind::from_raw(c as i64).is_some() {
                construct = c as u8;
            }
        }
        if field!(o, AccOtherEventInfo, implicit).is_some_and(|i| i != 0) {
            flags |= flag::IMPLICIT;
        }
        let mut put = |i: usize, bit: u8, v: Option<u64>| {
            if let Some(v) = v {
                p[i] = v;
                flags |= bit;
            }
        };
        if kind.is_data() {
            // SAFETY: for data events the runtime passes acc_data_event_info.
            let d = unsafe { &*(event_info as *const AccDataEventInfo) };
            let whole = covers(d.valid_bytes, 0, size_of::<AccDataEventInfo>());
            name = string(get!(whole, d, AccDataEventInfo, var_name));
            put(
                0,
                flag::HAS_P0,
                get!(whole, d, AccDataEventInfo, bytes).map(|b| b as u64),
            );
            let ptr = |p: Option<*const c_void>| p.filter(|p| !p.is_null()).map(|p| p as u64);
            put(
                1,
                flag::HAS_P1,
                ptr(get!(whole, d, AccDataEventInfo, host_ptr)),
            );
            put(
                2,
                flag::HAS_P2,
                ptr(get!(whole, d, AccDataEventInfo, device_ptr)),
            );
            flags |= flag::DATA;
        } else if kind.is_launch() {
            // SAFETY: for launch events the runtime passes acc_launch_event_info.
            let l = unsafe { &*(event_info as *const AccLaunchEventInfo) };
            let whole = covers(l.valid_bytes, 0, size_of::<AccLaunchEventInfo>());
            name = string(get!(whole, l, AccLaunchEventInfo, kernel_name));
            put(
                0,
                flag::HAS_P0,
                get!(whole, l, AccLaunchEventInfo, num_gangs).map(|v| v as u64),
            );
            put(
                1,
                flag::HAS_P1,
                get!(whole, l, AccLaunchEventInfo, num_workers).map(|v| v as u64),
            );
            put(
                2,
                flag::HAS_P2,
                get!(whole, l, AccLaunchEventInfo, vector_length).map(|v| v as u64),
            );
            flags |= flag::LAUNCH;
        }
    }
    let async_queue = match get!(whole, pi, AccProfInfo, async_) {
        Some(a) => {
            flags |= flag::HAS_ASYNC;
            a as i32
        }
        None => 0,
    };
    let device_type = get!(whole, pi, AccProfInfo, device_type)
        .filter(|&d| d >= 0)
        .map_or(NONE32, |d| d as u32);
    let device_number = get!(whole, pi, AccProfInfo, device_number)
        .filter(|&d| d >= 0)
        .map_or(NONE32, |d| d as u32);
    let file = string(get!(whole, pi, AccProfInfo, src_file));
    let function = string(get!(whole, pi, AccProfInfo, func_name));
    // SAFETY: the caller guarantees `slot` is writable for one Event.
    unsafe {
        slot.write(Event::Acc(AccRaw {
            time: time_ns,
            region: region.0,
            p,
            name,
            file,
            function,
            lines,
            call_site,
            device_type,
            device_number,
            async_queue,
            kind,
            construct,
            flags,
        }));
    }
    true
}
