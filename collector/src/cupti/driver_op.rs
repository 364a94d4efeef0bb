//! What each CUDA driver call does, for the driver spans: CUPTI's driver
//! call ids (`CUpti_driver_api_trace_cbid`) grouped into [`DriverOp`]s.
//! The calls are named, never numbered: the ids come from the bindings of
//! the CUPTI this build knows; ids a newer CUPTI adds read as
//! [`DriverOp::Other`] until they are named here.

use std::sync::OnceLock;

use accprof_trace::DriverOp;
use cudarc::cupti::sys;

use sys::CUpti_driver_api_trace_cbid as Cb;

/// Device memory: `cuMemAlloc*`, pitched, stream-ordered, from a pool, managed.
const ALLOC: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
];

/// `cuMemFree*`, stream-ordered included.
const FREE: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemFree,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
];

/// Page-locked host memory allocated or registered.
const ALLOC_HOST: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
];

/// Page-locked host memory freed or unregistered.
const FREE_HOST: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
];

/// Host to device, arrays included (as CUPTI's memcpy kinds count HtoA).
const COPY_HOST_TO_DEVICE: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
];

/// Device to host, arrays included (AtoH).
const COPY_DEVICE_TO_HOST: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
];

/// Device to device, peer, 2D/3D, array to array or device, batched, and
/// `cuMemcpy`/`cuMemcpyAsync` (unified addressing: the direction is in the
/// pointers, not the call).
const COPY_OTHER: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2_ptsz,
];

/// `cuMemset*`.
const MEMSET: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2_ptds,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz,
];

/// Kernel launches, old (`cuLaunch`, `cuLaunchGrid*`) and new.
const LAUNCH: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
];

/// The host waits for the device.
const SYNCHRONIZE: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
];

/// Code loaded and linked, and the look-ups of its functions and globals.
const MODULE_LOAD: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuModuleLoad,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLinkCreate,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLinkAddData,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLinkAddFile,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLinkComplete,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLinkCreate_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLinkAddData_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLinkAddFile_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile,
];

/// The driver and contexts started (not `cuCtxSetCurrent`: it starts nothing).
const INIT: &[Cb] = &[
    Cb::CUPTI_DRIVER_TRACE_CBID_cuInit,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxCreate,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v3,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v4,
];
/// Every named call with its op; a call is in one group only (tested).
static GROUPS: [(DriverOp, &[Cb]); 12] = [
    (DriverOp::Alloc, ALLOC),
    (DriverOp::Free, FREE),
    (DriverOp::AllocHost, ALLOC_HOST),
    (DriverOp::FreeHost, FREE_HOST),
    (DriverOp::CopyHostToDevice, COPY_HOST_TO_DEVICE),
    (DriverOp::CopyDeviceToHost, COPY_DEVICE_TO_HOST),
    (DriverOp::CopyOther, COPY_OTHER),
    (DriverOp::Memset, MEMSET),
    (DriverOp::Launch, LAUNCH),
    (DriverOp::Synchronize, SYNCHRONIZE),
    (DriverOp::ModuleLoad, MODULE_LOAD),
    (DriverOp::Init, INIT),
];

/// Queries the runtimes make around every launch, well under a
/// microsecond each: CUPTI is told not to trace them at all
/// (`cuptiActivityEnableDriverApi`), which saves its per-call cost in the
/// program's thread as well as the records. Their time stays in "the
/// runtime's own work between driver calls".
pub(super) const UNTRACED: [Cb; 11] = [
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuMemGetAddressRange_v2,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuOccupancyMaxPotentialBlockSize,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
    Cb::CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
];

/// [`DriverOp::Other`] calls shorter than this are not written, only
/// counted: on a launch storm most spans are sub-microsecond queries the
/// runtime makes around each launch (`cuCtxGetDevice`,
/// `cuMemGetAddressRange`, `cuOccupancyMaxPotentialBlockSize`), which would
/// add about half the spans to the trace and say nothing a reader acts on.
/// Their time stays in "the runtime's own work between driver calls". Spans
/// of every other op are always written.
pub(super) const MIN_OTHER_NS: u64 = 1_000;

/// What a driver call did, by its CUPTI id; every call not named in
/// [`GROUPS`] (queries, streams, events, contexts made current, unknown
/// ids) is [`DriverOp::Other`].
pub(super) fn driver_op(cbid: u32) -> DriverOp {
    static BY_ID: OnceLock<Vec<DriverOp>> = OnceLock::new();
    let table = BY_ID.get_or_init(|| {
        let len = GROUPS
            .iter()
            .flat_map(|(_, calls)| calls.iter())
            .map(|cb| *cb as usize + 1)
            .max()
            .unwrap_or(0);
        let mut v = vec![DriverOp::Other; len];
        for (op, calls) in &GROUPS {
            for cb in *calls {
                v[*cb as usize] = *op;
            }
        }
        v
    });
    usize::try_from(cbid)
        .ok()
        .and_then(|i| table.get(i).copied())
        .unwrap_or(DriverOp::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untraced_queries_are_only_other_calls() {
        for cb in UNTRACED {
            assert_eq!(driver_op(cb as u32), DriverOp::Other, "{cb:?}");
        }
    }
    use accprof_trace::DriverApi;

    use sys::CUpti_driver_api_trace_cbid::*;

    #[track_caller]
    fn all(op: DriverOp, calls: &[Cb]) {
        for cb in calls {
            assert_eq!(driver_op(*cb as u32), op, "{cb:?}");
        }
    }

    #[test]
    fn calls_map_to_what_they_do() {
        all(
            DriverOp::Alloc,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuMemAlloc,
                CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
                CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
                CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
            ],
        );
        all(
            DriverOp::Free,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
            ],
        );
        all(
            DriverOp::AllocHost,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
                CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
            ],
        );
        all(
            DriverOp::FreeHost,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
                CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
            ],
        );
        all(
            DriverOp::CopyHostToDevice,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2,
            ],
        );
        all(
            DriverOp::CopyDeviceToHost,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2,
            ],
        );
        all(
            DriverOp::CopyOther,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
                CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync,
            ],
        );
        all(
            DriverOp::Memset,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2,
                CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
                CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds,
            ],
        );
        all(
            DriverOp::Launch,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
                CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
                CUPTI_DRIVER_TRACE_CBID_cuLaunch,
                CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
                CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
            ],
        );
        all(
            DriverOp::Synchronize,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
                CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
                CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
                CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
                CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
            ],
        );
        all(
            DriverOp::ModuleLoad,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuModuleLoad,
                CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData,
                CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx,
                CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary,
                CUPTI_DRIVER_TRACE_CBID_cuLinkCreate_v2,
                CUPTI_DRIVER_TRACE_CBID_cuLinkAddData_v2,
                CUPTI_DRIVER_TRACE_CBID_cuLinkAddFile_v2,
                CUPTI_DRIVER_TRACE_CBID_cuLinkComplete,
                CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction,
                CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal_v2,
                CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData,
                CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile,
            ],
        );
        all(
            DriverOp::Init,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuInit,
                CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v2,
                CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v4,
                CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain,
            ],
        );
        all(
            DriverOp::Other,
            &[
                CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
                CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
                CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2,
                CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease,
                CUPTI_DRIVER_TRACE_CBID_cuDeviceGet,
                CUPTI_DRIVER_TRACE_CBID_cuStreamCreate,
                CUPTI_DRIVER_TRACE_CBID_cuEventRecord,
                CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent,
                CUPTI_DRIVER_TRACE_CBID_cuMemHostGetDevicePointer_v2,
                CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunctionCount,
                CUPTI_DRIVER_TRACE_CBID_cuLinkDestroy,
                CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc,
                CUPTI_DRIVER_TRACE_CBID_INVALID,
            ],
        );
        // Ids past the table (a newer CUPTI's) are Other.
        for id in [CUPTI_DRIVER_TRACE_CBID_SIZE as u32, 1 << 20, u32::MAX] {
            assert_eq!(driver_op(id), DriverOp::Other, "{id}");
        }
    }

    #[test]
    fn each_call_is_in_one_group() {
        let mut seen = std::collections::HashMap::new();
        for (op, calls) in &GROUPS {
            for cb in *calls {
                if let Some(first) = seen.insert(*cb as u32, *op) {
                    panic!("{cb:?} is in {first:?} and {op:?}");
                }
            }
        }
        assert!(seen.len() > 150, "{}", seen.len());
    }

    /// The calls the driver callbacks follow agree with the spans on what
    /// each one does.
    #[test]
    fn followed_calls_agree() {
        for (cb, api) in super::super::callbacks::traced_apis() {
            let want = match api {
                DriverApi::Launch => DriverOp::Launch,
                DriverApi::CopyHostToDevice => DriverOp::CopyHostToDevice,
                DriverApi::CopyDeviceToHost => DriverOp::CopyDeviceToHost,
                DriverApi::CopyOther => DriverOp::CopyOther,
                DriverApi::Memset => DriverOp::Memset,
                DriverApi::Other => DriverOp::Other,
            };
            assert_eq!(driver_op(cb as u32), want, "{cb:?}");
        }
    }
}
