//! MPI point-to-point and collective calls, wrapped through the MPI
//! profiling interface so that a halo exchange staged through the host can
//! be set beside the `update`s around it: each call's host ranges (what it
//! sends from and receives into) are recorded as an [`MpiCall`], with the
//! program's call into MPI as its call site (the unwind constructs use,
//! past this library and MPI's own, the Fortran bindings included).
//!
//! The preload exports `MPI_Send`, `MPI_Sendrecv`, ... and their `PMPI_`
//! twins. A C program calls the `MPI_` entry; the Fortran bindings do not:
//! Open MPI's `mpi_sendrecv_` (`use mpi`, `mpif.h`) and `mpi_sendrecv_f08_`
//! (`use mpi_f08`) convert the Fortran handles and call `PMPI_Sendrecv`
//! through the PLT, past `MPI_Sendrecv`. Taking the C `PMPI_` entry catches
//! every binding with C handles and C sentinels (MPI_IN_PLACE, MPI_BOTTOM)
//! already converted, so no Fortran symbol, calling convention or handle
//! table is needed here. A call is recorded once: the outermost wrapper on
//! the thread records, and the `MPI_` wrapper calls the library's own
//! `PMPI_` entry, never ours. Calls the library makes of its own `PMPI_`
//! entries through the PLT are recorded too (Open MPI's
//! `PMPI_Sendrecv_replace` towards MPI_PROC_NULL, ROMIO's collectives):
//! they read and write the ranges they name all the same.
//!
//! Each wrapper looks up the next `PMPI_` entry after this library
//! (`dlsym(RTLD_NEXT)`, not `RTLD_DEFAULT`, which would find our own) at
//! its first call, with `PMPI_Type_size` and `MPIX_Query_cuda_support`
//! where the library has it, so the collector links no MPI library and a
//! program without MPI never looks up an MPI symbol. The wrappers are only
//! reached when the library is preloaded, ahead of the MPI library.
//!
//! MPI handles (datatypes, communicators, requests) differ by ABI (Open
//! MPI: pointers, MPICH: ints); they are passed through untouched as
//! register-wide words, which carries both on x86-64 and aarch64.

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use accprof_trace::{MpiCall, MpiRange, Record, StringId};

use crate::{clock, sink, state};

/// An MPI handle (datatype, communicator, operation), as passed.
type Handle = usize;

/// The routines wrapped, by index into [`NAMES`].
const NAMES: [&CStr; 8] = [
    c"MPI_Send",
    c"MPI_Recv",
    c"MPI_Sendrecv",
    c"MPI_Isend",
    c"MPI_Irecv",
    c"MPI_Bcast",
    c"MPI_Reduce",
    c"MPI_Allreduce",
];
const PMPI_NAMES: [&CStr; 8] = [
    c"PMPI_Send",
    c"PMPI_Recv",
    c"PMPI_Sendrecv",
    c"PMPI_Isend",
    c"PMPI_Irecv",
    c"PMPI_Bcast",
    c"PMPI_Reduce",
    c"PMPI_Allreduce",
];
const SEND: usize = 0;
const RECV: usize = 1;
const SENDRECV: usize = 2;
const ISEND: usize = 3;
const IRECV: usize = 4;
const BCAST: usize = 5;
const REDUCE: usize = 6;
const ALLREDUCE: usize = 7;

/// The library's entries, 0 until looked up (a failed lookup is retried).
static REAL: [AtomicUsize; NAMES.len()] = [const { AtomicUsize::new(0) }; NAMES.len()];
/// The routines' interned names, 0 until first recorded: the hot path
/// takes no lock for them.
static ROUTINE: [AtomicU32; NAMES.len()] = [const { AtomicU32::new(0) }; NAMES.len()];
static TYPE_SIZE: AtomicUsize = AtomicUsize::new(0);
/// 0 not asked yet, 1 no query, 2 not CUDA-aware, 3 CUDA-aware.
static CUDA_AWARE: AtomicUsize = AtomicUsize::new(0);

/// What a wrapper returns when the library's entry cannot be found: a
/// nonzero code, which every MPI treats as an error.
const NOT_FOUND: c_int = 1;

thread_local! {
    /// Inside a wrapped call on this thread (a library that implements a
    /// collective with the public point-to-point calls records once).
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// The library's `PMPI_` entry for routine `i` (else its next `MPI_` one).
fn real(i: usize) -> usize {
    let f = REAL[i].load(Ordering::Acquire);
    if f != 0 {
        return f;
    }
    // SAFETY: dlsym with NUL-terminated names. RTLD_NEXT searches the
    // objects after this one: the MPI library's PMPI_ entry, never the
    // twin this library exports (calling that would recurse).
    let f = unsafe {
        let p = libc::dlsym(libc::RTLD_NEXT, PMPI_NAMES[i].as_ptr());
        if p.is_null() {
            libc::dlsym(libc::RTLD_NEXT, NAMES[i].as_ptr())
        } else {
            p
        }
    } as usize;
    REAL[i].store(f, Ordering::Release);
    f
}

/// Routine `i`'s name in the trace's string table, interned at its first
/// call.
fn routine(i: usize) -> StringId {
    match ROUTINE[i].load(Ordering::Relaxed) {
        0 => {
            let id = sink::intern(NAMES[i].to_bytes());
            ROUTINE[i].store(id.0, Ordering::Relaxed);
            id
        }
        id => StringId(id),
    }
}

/// Bytes of `count` elements of `datatype`; None when the library cannot
/// say.
fn bytes_of(count: c_int, datatype: Handle) -> Option<u64> {
    let mut f = TYPE_SIZE.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: dlsym with a NUL-terminated name.
        f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"PMPI_Type_size".as_ptr()) } as usize;
        TYPE_SIZE.store(f, Ordering::Release);
    }
    if f == 0 || count < 0 {
        return None;
    }
    type TypeSize = unsafe extern "C" fn(Handle, *mut c_int) -> c_int;
    let mut size: c_int = 0;
    // SAFETY: `f` is the library's PMPI_Type_size(datatype, int *size);
    // `size` outlives the call.
    let rc = unsafe { std::mem::transmute::<usize, TypeSize>(f)(datatype, &mut size) };
    (rc == 0 && size >= 0).then(|| count as u64 * size as u64)
}

/// Whether the library says it takes device memory, asked once.
fn cuda_aware() -> Option<bool> {
    let mut v = CUDA_AWARE.load(Ordering::Acquire);
    if v == 0 {
        // SAFETY: dlsym with a NUL-terminated name.
        let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"MPIX_Query_cuda_support".as_ptr()) }
            as usize;
        v = if f == 0 {
            1
        } else {
            type Query = unsafe extern "C" fn() -> c_int;
            // SAFETY: Open MPI's `int MPIX_Query_cuda_support(void)`.
            let yes = unsafe { std::mem::transmute::<usize, Query>(f)() } != 0;
            if yes {
                3
            } else {
                2
            }
        };
        CUDA_AWARE.store(v, Ordering::Release);
    }
    match v {
        2 => Some(false),
        3 => Some(true),
        _ => None,
    }
}

/// One buffer argument: (pointer, count, datatype, written by the call).
type Buffer = (*const c_void, c_int, Handle, bool);

/// A range worth recording: MPI_IN_PLACE and MPI_BOTTOM-like sentinels
/// (NULL, 1, all ones) are not buffers.
fn range_of(b: Buffer) -> Option<MpiRange> {
    let p = b.0 as u64;
    if p <= 1 || p == u64::MAX {
        return None;
    }
    Some(MpiRange {
        host_ptr: p,
        bytes: bytes_of(b.1, b.2)?,
        write: b.3,
    })
}

/// Calls the library's routine `i` through `call`, recording the call with
/// the ranges of `buffers` when it is the outermost one on this thread.
/// `peers`: the rank each buffer goes to or comes from (point-to-point
/// calls; empty for collectives): towards MPI_PROC_NULL nothing is read or
/// written.
fn around(
    i: usize,
    buffers: &[Buffer],
    peers: &[c_int],
    call: impl FnOnce(usize) -> c_int,
) -> c_int {
    let f = real(i);
    if f == 0 {
        return NOT_FOUND;
    }
    let outer = INSIDE.try_with(|c| !c.replace(true)).unwrap_or(false);
    if !outer {
        return call(f);
    }
    // A fixed point in this frame for the unwind that finds the program's
    // call into MPI (see callsite::capture).
    let anchor = std::hint::black_box(0u64);
    let anchor = &anchor as *const u64 as usize;
    // CLOCK_MONOTONIC ns, the trace's clock: these records are not among
    // those whose counter-tick stamps the writer converts.
    let record = state::enabled();
    let start_ns = if record { clock::now_ns() } else { 0 };
    if crate::coherence::on() {
        // After the call's start: its accesses fall inside its span.
        let _ = std::panic::catch_unwind(|| coherence_check(buffers, peers));
    }
    let rc = call(f);
    if record {
        let end_ns = clock::now_ns();
        let _ = std::panic::catch_unwind(|| {
            let ranges: Vec<MpiRange> = buffers.iter().filter_map(|&b| range_of(b)).collect();
            let rec = Record::MpiCall(MpiCall {
                start_ns,
                end_ns,
                thread: crate::tls::THREAD
                    .try_with(clock::thread_id_in)
                    .unwrap_or(0),
                routine: routine(i),
                cuda_aware: cuda_aware(),
                ranges,
                // After the call's end: the unwind is not in its span.
                call_site: crate::callsite::capture(anchor),
            });
            sink::push(rec);
        });
    }
    let _ = INSIDE.try_with(|c| c.set(false));
    rc
}

/// The coherence check's view of the call's buffers: MPI reads what it
/// sends (a stale copy is a stale read) and writes what it receives, and
/// may do either through the kernel (shared-memory single copy), which
/// finds a protected page an error: the pages are opened first.
fn coherence_check(buffers: &[Buffer], peers: &[c_int]) {
    let null = proc_null();
    let ranges: Vec<MpiRange> = buffers
        .iter()
        .enumerate()
        .filter(|(k, _)| peers.get(*k) != Some(&null))
        .filter_map(|(_, &b)| range_of(b))
        .collect();
    if ranges.is_empty() {
        return;
    }
    // Inside the call instruction: its line is the call's.
    let code = || crate::callsite::app_return_address().map_or(0, |a| a.saturating_sub(1));
    for r in ranges {
        crate::coherence::host_buffer(r.host_ptr, r.bytes, r.write, &code);
    }
}

/// MPI_PROC_NULL of the library loaded: -2 in Open MPI, -1 in the MPICH
/// family (where -2 is MPI_ANY_SOURCE).
fn proc_null() -> c_int {
    static NULL: std::sync::OnceLock<c_int> = std::sync::OnceLock::new();
    *NULL.get_or_init(|| {
        // SAFETY: dlsym with a NUL-terminated name; only compared to null.
        let ompi = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"ompi_mpi_comm_world".as_ptr()) };
        if ompi.is_null() {
            -1
        } else {
            -2
        }
    })
}

type SendFn = unsafe extern "C" fn(*const c_void, c_int, Handle, c_int, c_int, Handle) -> c_int;
type RecvFn =
    unsafe extern "C" fn(*mut c_void, c_int, Handle, c_int, c_int, Handle, *mut c_void) -> c_int;
type SendrecvFn = unsafe extern "C" fn(
    *const c_void,
    c_int,
    Handle,
    c_int,
    c_int,
    *mut c_void,
    c_int,
    Handle,
    c_int,
    c_int,
    Handle,
    *mut c_void,
) -> c_int;
type IsendFn =
    unsafe extern "C" fn(*const c_void, c_int, Handle, c_int, c_int, Handle, *mut c_void) -> c_int;
type IrecvFn =
    unsafe extern "C" fn(*mut c_void, c_int, Handle, c_int, c_int, Handle, *mut c_void) -> c_int;
type BcastFn = unsafe extern "C" fn(*mut c_void, c_int, Handle, c_int, Handle) -> c_int;
type ReduceFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Handle, Handle, c_int, Handle) -> c_int;
type AllreduceFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Handle, Handle, Handle) -> c_int;

/// # Safety
/// As the MPI routine.
unsafe fn send(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    around(SEND, &[(buf, count, datatype, false)], &[dest], |f| {
        // SAFETY: `f` is the library's PMPI_Send; the arguments are the caller's.
        unsafe { std::mem::transmute::<usize, SendFn>(f)(buf, count, datatype, dest, tag, comm) }
    })
}

/// # Safety
/// As the MPI routine.
unsafe fn recv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut c_void,
) -> c_int {
    around(RECV, &[(buf, count, datatype, true)], &[source], |f| {
        // SAFETY: `f` is the library's PMPI_Recv; the arguments are the caller's.
        unsafe {
            std::mem::transmute::<usize, RecvFn>(f)(buf, count, datatype, source, tag, comm, status)
        }
    })
}

/// # Safety
/// As the MPI routine.
#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    status: *mut c_void,
) -> c_int {
    let buffers = [
        (sendbuf, sendcount, sendtype, false),
        (recvbuf as *const c_void, recvcount, recvtype, true),
    ];
    around(SENDRECV, &buffers, &[dest, source], |f| {
        // SAFETY: `f` is the library's PMPI_Sendrecv; the arguments are the caller's.
        unsafe {
            std::mem::transmute::<usize, SendrecvFn>(f)(
                sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                recvtag, comm, status,
            )
        }
    })
}

/// # Safety
/// As the MPI routine.
unsafe fn isend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut c_void,
) -> c_int {
    around(ISEND, &[(buf, count, datatype, false)], &[dest], |f| {
        // SAFETY: `f` is the library's PMPI_Isend; the arguments are the caller's.
        unsafe {
            std::mem::transmute::<usize, IsendFn>(f)(buf, count, datatype, dest, tag, comm, request)
        }
    })
}

/// # Safety
/// As the MPI routine.
unsafe fn irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut c_void,
) -> c_int {
    around(IRECV, &[(buf, count, datatype, true)], &[source], |f| {
        // SAFETY: `f` is the library's PMPI_Irecv; the arguments are the caller's.
        unsafe {
            std::mem::transmute::<usize, IrecvFn>(f)(
                buf, count, datatype, source, tag, comm, request,
            )
        }
    })
}

/// # Safety
/// As the MPI routine.
unsafe fn bcast(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    root: c_int,
    comm: Handle,
) -> c_int {
    around(BCAST, &[(buf, count, datatype, true)], &[], |f| {
        // SAFETY: `f` is the library's PMPI_Bcast; the arguments are the caller's.
        unsafe { std::mem::transmute::<usize, BcastFn>(f)(buf, count, datatype, root, comm) }
    })
}

/// # Safety
/// As the MPI routine.
unsafe fn reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
    root: c_int,
    comm: Handle,
) -> c_int {
    let buffers = [
        (sendbuf, count, datatype, false),
        (recvbuf as *const c_void, count, datatype, true),
    ];
    around(REDUCE, &buffers, &[], |f| {
        // SAFETY: `f` is the library's PMPI_Reduce; the arguments are the caller's.
        unsafe {
            std::mem::transmute::<usize, ReduceFn>(f)(
                sendbuf, recvbuf, count, datatype, op, root, comm,
            )
        }
    })
}

/// # Safety
/// As the MPI routine.
unsafe fn allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
    comm: Handle,
) -> c_int {
    let buffers = [
        (sendbuf, count, datatype, false),
        (recvbuf as *const c_void, count, datatype, true),
    ];
    around(ALLREDUCE, &buffers, &[], |f| {
        // SAFETY: `f` is the library's PMPI_Allreduce; the arguments are the caller's.
        unsafe {
            std::mem::transmute::<usize, AllreduceFn>(f)(
                sendbuf, recvbuf, count, datatype, op, comm,
            )
        }
    })
}

/// The two exported entries of a wrapped routine, `MPI_X` (called by C
/// programs) and `PMPI_X` (called by the Fortran bindings), both running
/// the private wrapper: a call between them inside this library would go
/// through the PLT and make the loader look MPI names up in every program.
macro_rules! entries {
    ($mpi:ident, $pmpi:ident => $inner:ident($($arg:ident: $ty:ty),* $(,)?)) => {
        /// # Safety
        /// As the MPI routine.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $mpi($($arg: $ty),*) -> c_int {
            // SAFETY: the caller's arguments, passed on unchanged.
            unsafe { $inner($($arg),*) }
        }

        /// # Safety
        /// As the MPI routine.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $pmpi($($arg: $ty),*) -> c_int {
            // SAFETY: the caller's arguments, passed on unchanged.
            unsafe { $inner($($arg),*) }
        }
    };
}

entries!(MPI_Send, PMPI_Send => send(
    buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle,
));
entries!(MPI_Recv, PMPI_Recv => recv(
    buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle,
    status: *mut c_void,
));
entries!(MPI_Sendrecv, PMPI_Sendrecv => sendrecv(
    sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, dest: c_int, sendtag: c_int,
    recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, source: c_int, recvtag: c_int,
    comm: Handle, status: *mut c_void,
));
entries!(MPI_Isend, PMPI_Isend => isend(
    buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle,
    request: *mut c_void,
));
entries!(MPI_Irecv, PMPI_Irecv => irecv(
    buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle,
    request: *mut c_void,
));
entries!(MPI_Bcast, PMPI_Bcast => bcast(
    buf: *mut c_void, count: c_int, datatype: Handle, root: c_int, comm: Handle,
));
entries!(MPI_Reduce, PMPI_Reduce => reduce(
    sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle,
    root: c_int, comm: Handle,
));
entries!(MPI_Allreduce, PMPI_Allreduce => allreduce(
    sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle,
    comm: Handle,
));
