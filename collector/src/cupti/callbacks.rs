//! The driver-API and resource callbacks: the driver calls followed (the
//! TRACED table), what is recorded around them, failed calls that leave the
//! context unusable, and the flush before a context is destroyed.

use std::ffi::c_void;
use std::ptr::addr_of;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;

use accprof_trace::{Direction, DriverApi, DriverCall, Level, Record};
use cudarc::cupti::sys;

use sys::CUpti_driver_api_trace_cbid as Cb;

use super::copy_hash::push_hash;
use super::{
    device_side, diagnostic, live, ACTIVE, CONTEXT_DESTROYED, FLUSH_FORCED, FLUSH_LOCK, IN_FLUSH,
    STATE,
};

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
pub(super) struct Traced {
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
pub(super) static TRACED: &[(Cb, Traced)] = &[
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

/// Each followed call with what the callbacks record it as.
#[cfg(test)]
pub(super) fn traced_apis() -> impl Iterator<Item = (Cb, DriverApi)> {
    TRACED.iter().map(|(cb, t)| (*cb, t.api))
}

const SITE_ENTER: u32 = sys::CUpti_ApiCallbackSite::CUPTI_API_ENTER as u32;
const SITE_EXIT: u32 = sys::CUpti_ApiCallbackSite::CUPTI_API_EXIT as u32;

/// CUPTI's subscriber callback, for both domains enabled.
pub(super) extern "C" fn api_callback(
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
pub(super) fn flush_before_context_destroy() {
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
    let Some(t) = traced(cbid) else {
        if crate::coherence::on() && COHERENCE_TRACED.iter().any(|c| *c as u32 == cbid) {
            // SAFETY: as for this function.
            unsafe { coherence_memory(cbid, data) };
        }
        return;
    };
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
    match site {
        SITE_ENTER => crate::crash::driver_call_entered(cbid, correlation),
        SITE_EXIT => crate::crash::driver_call_left(),
        _ => {}
    }
    if site == SITE_EXIT {
        let code = if ret.is_null() {
            0
        } else {
            // SAFETY: at the exit site CUPTI's functionReturnValue points to
            // the call's CUresult, a 4-byte C enum read as an integer, valid
            // for the duration of the callback.
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
    if crate::coherence::inside() {
        // The coherence check reads a device copy: accprof's call, not a
        // transfer of the program. CUPTI's memcpy and driver records of it
        // are left out too (its time is in the check's `OwnWork`).
        if site == SITE_ENTER {
            crate::coherence::own_call(correlation, OWN_RECORDS);
        }
        return;
    }
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
            if crate::coherence::on()
                && matches!(
                    t.api,
                    DriverApi::CopyHostToDevice | DriverApi::CopyDeviceToHost
                )
            {
                // SAFETY: as for read_params: the struct `t.params` names.
                let device = unsafe { device_param(t.params, params) };
                // Before the copy touches the host bytes (asynchronous
                // downloads too: they write them later).
                crate::coherence::driver_copy(
                    t.api == DriverApi::CopyHostToDevice,
                    host_ptr,
                    bytes,
                    device,
                );
            }
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

/// CUPTI's records of one copy: its memcpy and its driver call's span.
const OWN_RECORDS: u8 = 2;

pub(super) const CONTEXT_DESTROY_STARTING: u32 =
    sys::CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING as u32;

pub(super) fn callback_name(cb: Cb) -> String {
    let name = format!("{cb:?}");
    name.trim_start_matches("CUPTI_DRIVER_TRACE_CBID_")
        .to_string()
}

/// The name of driver callback id `cbid` (`cuLaunchKernel`), for the
/// call a crash hit.
pub(super) fn driver_call_name(cbid: u32) -> String {
    TRACED
        .iter()
        .find(|(cb, _)| *cb as u32 == cbid)
        .map(|(cb, _)| callback_name(*cb))
        .unwrap_or_else(|| format!("driver call {cbid}"))
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

/// The device address of a host <-> device copy, from its parameter
/// struct (None for other shapes or a null struct).
///
/// # Safety
/// `p` is null or points to a parameter struct of the shape `shape` names.
unsafe fn device_param(shape: Params, p: *const c_void) -> Option<u64> {
    if p.is_null() {
        return None;
    }
    // SAFETY: as in read_params: the struct the arm names, integers only.
    unsafe {
        match shape {
            Params::HtoD => Some((*p.cast::<sys::cuMemcpyHtoD_v2_params_st>()).dstDevice),
            Params::DtoH => Some((*p.cast::<sys::cuMemcpyDtoH_v2_params_st>()).srcDevice),
            _ => None,
        }
    }
}

/// The device blocks allocated and freed, followed only while the
/// coherence check runs: a range whose device copy is freed is no longer
/// mapped (the OpenACC runtime may say nothing else of it).
///
/// # Safety
/// `data` must point to the CUpti_CallbackData of a driver-API callback.
unsafe fn coherence_memory(cbid: u32, data: *const sys::CUpti_CallbackData) {
    // SAFETY: `data` is valid (caller); addr_of! makes no reference.
    let (site, params, ret) = unsafe {
        (
            addr_of!((*data).callbackSite).cast::<u32>().read(),
            (*data).functionParams,
            (*data).functionReturnValue,
        )
    };
    if params.is_null() {
        return;
    }
    if cbid == Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 as u32 && site == SITE_EXIT {
        // SAFETY: at the exit site the return value is the call's CUresult.
        if ret.is_null() || unsafe { ret.cast::<u32>().read() } != 0 {
            return;
        }
        // SAFETY: cuMemAlloc_v2's parameter struct; after a successful
        // call `dptr` points to the new block's address.
        let (dptr, bytes) = unsafe {
            let s = &*params.cast::<sys::cuMemAlloc_v2_params_st>();
            (s.dptr, s.bytesize)
        };
        if !dptr.is_null() {
            // SAFETY: as above.
            let at = unsafe { dptr.read() };
            crate::coherence::device_alloc(at, bytes as u64);
        }
    } else if cbid == Cb::CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal_v2 as u32 && site == SITE_EXIT {
        // SAFETY: at the exit site the return value is the call's CUresult.
        if ret.is_null() || unsafe { ret.cast::<u32>().read() } != 0 {
            return;
        }
        // SAFETY: cuModuleGetGlobal_v2's parameter struct; after a
        // successful call its non-null out pointers hold the global's
        // address and size.
        let (at, bytes) = unsafe {
            let s = &*params.cast::<sys::cuModuleGetGlobal_v2_params_st>();
            if s.dptr.is_null() || s.bytes.is_null() {
                return;
            }
            (s.dptr.read(), s.bytes.read())
        };
        crate::coherence::device_global(at, bytes as u64);
    } else if cbid == Cb::CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2 as u32 && site == SITE_ENTER {
        // SAFETY: cuMemFree_v2's parameter struct.
        let at = unsafe { (*params.cast::<sys::cuMemFree_v2_params_st>()).dptr };
        crate::coherence::device_free(at);
    }
}

/// The callbacks only the coherence check needs: device blocks made and
/// freed, and the loaded code's globals (`declare` variables, Fortran
/// module arrays), which are their own device copies.
pub(super) const COHERENCE_TRACED: [Cb; 3] = [
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal_v2,
];

/// Host pointer and byte count of a call, from its parameter struct.
///
/// # Safety
/// `p` must point to a parameter struct of the shape `shape` describes.
unsafe fn read_params(shape: Params, p: *const c_void) -> (Option<u64>, Option<u64>) {
    let addr = |ptr: *const c_void| Some(ptr as usize as u64);
    let n = |v: usize| Some(v as u64);
    // SAFETY: in every arm `p` points to the parameter struct the arm names
    // (caller), which CUPTI keeps valid and aligned for the callback; these
    // structs hold only integers and raw pointers, so any bits are valid.
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
