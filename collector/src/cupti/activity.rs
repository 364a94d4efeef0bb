//! Activity buffers: handed to CUPTI empty, and their kernel, memcpy,
//! memset, device and driver-call records turned into trace records when
//! they come back.

use std::ffi::{c_char, CStr};
use std::mem::{size_of, MaybeUninit};
use std::ptr::{self, addr_of_mut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use accprof_trace::{
    CopyKind, Device, DriverOp, DriverSpan, DropSource, KernelRecord, MemcpyRecord, MemoryKind,
    MemsetRecord, Record, StringId,
};
use cudarc::cupti::sys;
use cudarc::driver::sys::CUcontext;

use sys::CUptiResult::CUPTI_SUCCESS;
use sys::CUpti_ActivityKind as Kind;

use super::clock::{shift, CLOCK_OFFSET};
use super::driver_op::{driver_op, MIN_OTHER_NS};
use super::{device_side, live, recording};

/// Activity buffers handed to CUPTI: about 4,000 kernel records each, so a
/// busy program fills one every few thousand launches, not every few dozen,
/// and CUPTI's worker thread hands full ones back while the program runs
/// (see [`FLUSH_PERIOD_MS`]) instead of all of them at exit, where turning
/// them into records would add to the program's wall time.
const BUFFER_BYTES: usize = 1 << 20;
/// How often CUPTI's worker thread returns full buffers.
pub(super) const FLUSH_PERIOD_MS: u32 = 100;
/// CUPTI requires 8-byte aligned activity buffers.
const BUFFER_ALIGN: usize = 8;
/// Devices already described in the trace.
static DEVICES_SEEN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// CUPTI asks for an empty buffer. Not `guarded`: CUPTI must always get an
/// answer, and nothing here can panic.
pub(super) extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
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
pub(super) extern "C" fn buffer_completed(
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
const KIND_DRIVER: u32 = Kind::CUPTI_ACTIVITY_KIND_DRIVER as u32;

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
                if crate::coherence::is_own_record(m.correlationId) {
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
            KIND_DRIVER => {
                // SAFETY: a driver API record starts at `raw`, `avail` bytes
                // readable.
                let a = unsafe { read_record::<sys::CUpti_ActivityAPI>(raw, avail, fix_api) };
                if !complete(a.start, a.end) {
                    incomplete += 1;
                    continue;
                }
                // The program's calls only: the collector's own threads
                // (the writer, CUPTI's starter) are not the program's.
                if crate::tls::is_own_thread(a.threadId) {
                    continue;
                }
                let span = driver_span(&a, offset);
                if crate::coherence::is_own_record(span.correlation) {
                    continue;
                }
                if SHORT_CALLS.left_out(&span) {
                    continue;
                }
                crate::sink::push(Record::DriverSpan(span));
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

/// # Safety
/// `p` must point to writable storage of this record type.
unsafe fn fix_api(p: *mut sys::CUpti_ActivityAPI) {
    // SAFETY: as in fix_kernel.
    unsafe { addr_of_mut!((*p).kind).write_unaligned(Kind::CUPTI_ACTIVITY_KIND_DRIVER) };
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

/// A driver call's record. Its thread id is the OS thread id, as in every
/// other record (the thread id type is set before the kind is enabled).
/// The call id is kept for [`DriverOp::Other`] calls only (the op names the
/// others), the correlation id only for calls with a device record sharing
/// it: 0 is absent, and absent fields cost nothing in the trace.
fn driver_span(a: &sys::CUpti_ActivityAPI, offset: i64) -> DriverSpan {
    let op = driver_op(a.cbid);
    DriverSpan {
        thread: a.threadId,
        start_ns: shift(a.start, offset),
        end_ns: shift(a.end, offset),
        op,
        cbid: if op == DriverOp::Other { a.cbid } else { 0 },
        correlation: if op.has_device_record() {
            a.correlationId
        } else {
            0
        },
    }
}

/// The driver calls of this process left out of the trace for being
/// [`DriverOp::Other`] calls shorter than [`MIN_OTHER_NS`]: how many, and
/// their time.
pub(super) struct ShortCalls {
    count: AtomicU64,
    ns: AtomicU64,
}

pub(super) static SHORT_CALLS: ShortCalls = ShortCalls::new();

impl ShortCalls {
    const fn new() -> Self {
        ShortCalls {
            count: AtomicU64::new(0),
            ns: AtomicU64::new(0),
        }
    }

    /// Whether `span` is left out; counts it if so.
    fn left_out(&self, span: &DriverSpan) -> bool {
        let ns = span.duration_ns();
        if span.op != DriverOp::Other || ns >= MIN_OTHER_NS {
            return false;
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.ns.fetch_add(ns, Ordering::Relaxed);
        true
    }

    /// The end-of-run note on the calls left out, if any were.
    pub(super) fn note(&self) -> Option<String> {
        let count = self.count.load(Ordering::Relaxed);
        let ns = self.ns.load(Ordering::Relaxed);
        (count > 0).then(|| {
            format!(
                "driver calls under {} us not recorded: {count} calls, {:.1} us (counted as the runtime's own work between driver calls)",
                MIN_OTHER_NS / 1_000,
                ns as f64 / 1_000.0
            )
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::addr_of;

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
    fn driver_records_convert() {
        use accprof_trace::DriverOp;
        use sys::CUpti_driver_api_trace_cbid as Cb;
        let mut a: sys::CUpti_ActivityAPI = zeroed();
        a.kind = Kind::CUPTI_ACTIVITY_KIND_DRIVER;
        a.cbid = Cb::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2 as u32;
        a.start = 2_000;
        a.end = 2_750;
        a.processId = 4242;
        a.threadId = 4243;
        a.correlationId = 17;
        assert_eq!(
            driver_span(&a, -500),
            DriverSpan {
                thread: 4243,
                start_ns: 1_500,
                end_ns: 2_250,
                op: DriverOp::CopyHostToDevice,
                cbid: 0,
                correlation: 17,
            }
        );
        a.cbid = Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel as u32;
        let s = driver_span(&a, 0);
        assert_eq!((s.op, s.cbid, s.correlation), (DriverOp::Launch, 0, 17));
        a.cbid = Cb::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 as u32;
        let s = driver_span(&a, 0);
        assert_eq!((s.op, s.cbid, s.correlation), (DriverOp::Alloc, 0, 0));
        a.cbid = Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent as u32;
        let s = driver_span(&a, 0);
        assert_eq!((s.op, s.cbid, s.correlation), (DriverOp::Other, a.cbid, 0));
        // An older CUPTI's record cut before the correlation id, with junk
        // where the kind lives: the id reads as 0 and the kind is fixed.
        a.kind = Kind::CUPTI_ACTIVITY_KIND_MEMCPY;
        // SAFETY: viewing our own struct's bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                addr_of!(a).cast::<u8>(),
                size_of::<sys::CUpti_ActivityAPI>(),
            )
        };
        let mut junk = bytes.to_vec();
        junk[..4].copy_from_slice(&0xdead_beef_u32.to_le_bytes());
        let cut = std::mem::offset_of!(sys::CUpti_ActivityAPI, correlationId);
        // SAFETY: `junk` holds at least `cut` readable bytes.
        let r = unsafe { read_record::<sys::CUpti_ActivityAPI>(junk.as_ptr(), cut, fix_api) };
        assert_eq!((r.threadId, r.correlationId), (4243, 0));
        assert_eq!(r.kind, Kind::CUPTI_ACTIVITY_KIND_DRIVER);
    }

    #[test]
    fn short_other_calls_are_counted_not_written() {
        use accprof_trace::DriverOp;
        use sys::CUpti_driver_api_trace_cbid as Cb;
        let short = ShortCalls::new();
        assert_eq!(short.note(), None);
        let mut a: sys::CUpti_ActivityAPI = zeroed();
        a.kind = Kind::CUPTI_ACTIVITY_KIND_DRIVER;
        a.threadId = 7;
        a.start = 10_000;
        let call = |a: &mut sys::CUpti_ActivityAPI, cb: Cb, ns: u64| {
            a.cbid = cb as u32;
            a.end = a.start + ns;
            driver_span(a, 0)
        };
        // Queries around a launch: under a microsecond, left out.
        let get_device = call(&mut a, Cb::CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice, 100);
        assert_eq!(get_device.op, DriverOp::Other);
        assert!(short.left_out(&get_device));
        let range = call(
            &mut a,
            Cb::CUPTI_DRIVER_TRACE_CBID_cuMemGetAddressRange_v2,
            999,
        );
        assert!(short.left_out(&range));
        // A microsecond or more: written.
        let callback = call(
            &mut a,
            Cb::CUPTI_DRIVER_TRACE_CBID_cuStreamAddCallback,
            1_000,
        );
        assert_eq!(callback.op, DriverOp::Other);
        assert!(!short.left_out(&callback));
        // Every other op is written however short.
        let launch = call(&mut a, Cb::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 50);
        assert_eq!(launch.op, DriverOp::Launch);
        assert!(!short.left_out(&launch));
        let sync = call(&mut a, Cb::CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 0);
        assert!(!short.left_out(&sync));
        assert_eq!(
            short.note().as_deref(),
            Some("driver calls under 1 us not recorded: 2 calls, 1.1 us (counted as the runtime's own work between driver calls)")
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
    fn completeness() {
        assert!(complete(1, 1));
        assert!(complete(1, 2));
        assert!(!complete(0, 0));
        assert!(!complete(5, 0));
        assert!(!complete(0, 5));
    }
}
