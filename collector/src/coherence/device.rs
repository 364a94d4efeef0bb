//! Reading the two copies' bytes for the comparisons the check makes:
//! the device's through the CUDA driver the runtime loaded (never the
//! OpenACC runtime's routines: libgomp holds its profiling lock while it
//! calls our callbacks, and its `acc_memcpy_from_device` and
//! `acc_is_present` take locks another thread may hold while it waits for
//! that one), the host's through `process_vm_readv`, which reports an
//! unmapped or protected page instead of faulting.

use std::ffi::c_void;

/// cuMemcpyDtoH_v2(dst, src, bytes).
type MemcpyDtoH = unsafe extern "C" fn(*mut c_void, u64, usize) -> libc::c_int;
/// cuCtxGetCurrent(&ctx): whether this thread has a CUDA context to copy in.
type CtxGetCurrent = unsafe extern "C" fn(*mut *mut c_void) -> libc::c_int;

/// The CUDA driver's routines the check reads device copies with (absent
/// ones leave the comparisons undecided).
#[derive(Clone, Copy)]
struct Api {
    memcpy_dtoh: Option<MemcpyDtoH>,
    ctx_get_current: Option<CtxGetCurrent>,
}

fn api() -> Api {
    static API: std::sync::OnceLock<Api> = std::sync::OnceLock::new();
    *API.get_or_init(|| Api {
        memcpy_dtoh: cuda(c"cuMemcpyDtoH_v2").map(|p| {
            // SAFETY: the CUDA driver routine of this name has this
            // signature (CUdeviceptr is 64 bits, CUresult an int).
            unsafe { std::mem::transmute::<*mut c_void, MemcpyDtoH>(p) }
        }),
        ctx_get_current: cuda(c"cuCtxGetCurrent").map(|p| {
            // SAFETY: as above.
            unsafe { std::mem::transmute::<*mut c_void, CtxGetCurrent>(p) }
        }),
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

/// The device's bytes at `at` (out.len() of them), when they can be read.
pub(super) fn read_device(at: u64, out: &mut [u8]) -> bool {
    if at == 0 || out.is_empty() {
        return false;
    }
    let api = api();
    let (Some(copy), Some(current)) = (api.memcpy_dtoh, api.ctx_get_current) else {
        return false;
    };
    let mut ctx: *mut c_void = std::ptr::null_mut();
    // SAFETY: cuCtxGetCurrent writes one pointer into `ctx`.
    if unsafe { current(&mut ctx) } != 0 || ctx.is_null() {
        return false;
    }
    // SAFETY: the caller names bytes inside a device copy the driver
    // allocated; `out` has room for them. A bad address is an error
    // return, not a fault.
    unsafe { copy(out.as_mut_ptr().cast(), at, out.len()) == 0 }
}

/// The host's bytes at `at`, read without touching them (no fault on a
/// page the check protected or one the program unmapped): through
/// `process_vm_readv`, or where a sandbox refuses it, through a pipe.
pub(super) fn read_host(at: u64, out: &mut [u8]) -> bool {
    if at == 0 || out.is_empty() {
        return false;
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: at as usize as *mut c_void,
        iov_len: out.len(),
    };
    // SAFETY: process_vm_readv on this process writes at most out.len()
    // bytes into `out`; an inaccessible remote address is an error return.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n == out.len() as isize {
        return true;
    }
    let errno = std::io::Error::last_os_error().raw_os_error();
    if n < 0 && matches!(errno, Some(libc::EPERM) | Some(libc::ENOSYS)) {
        return through_pipe(at, out);
    }
    false
}

/// Copies `out.len()` bytes at `at` through a pipe: write(2) reports a
/// bad address as EFAULT instead of faulting. Raw system calls: the
/// library's own reads and writes must not enter the `read` and `write` it
/// exports (the check's wrappers, see `calls`).
fn through_pipe(at: u64, out: &mut [u8]) -> bool {
    static PIPE: std::sync::OnceLock<Option<(i32, i32)>> = std::sync::OnceLock::new();
    let Some((r, w)) = *PIPE.get_or_init(|| {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        let ok = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } == 0;
        ok.then_some((fds[0], fds[1]))
    }) else {
        return false;
    };
    let mut done = 0;
    while done < out.len() {
        let n = (out.len() - done).min(4096);
        // SAFETY: write(2) reads n bytes at the address or fails with
        // EFAULT; read(2) fills our own buffer. The check's lock is held:
        // no other thread uses the pipe.
        let ok = unsafe {
            let wrote = libc::syscall(libc::SYS_write, w, (at as usize + done) as *const c_void, n);
            wrote == n as libc::c_long
                && libc::syscall(libc::SYS_read, r, out[done..].as_mut_ptr(), n)
                    == n as libc::c_long
        };
        if !ok {
            // Leave the pipe empty for the next read.
            let mut sink = [0u8; 4096];
            // SAFETY: reads into our own buffer from our non-blocking pipe.
            while unsafe { libc::syscall(libc::SYS_read, r, sink.as_mut_ptr(), sink.len()) } > 0 {}
            return false;
        }
        done += n;
    }
    true
}
