//! The C library calls that hand a host buffer to the kernel, wrapped
//! while the coherence check runs: the kernel finds a protected page an
//! error (EFAULT), not a fault, so a `write` of a stale array would fail
//! where the program expects it to succeed, and a `read` into an array
//! the device shares would come back short. Each wrapper tells the check
//! first (a stale range written out is a stale read; a range read into is
//! a host write) and the check opens the pages; then the call goes to the
//! next definition with its arguments untouched. While the check is off a
//! wrapper costs one load and a branch.
//!
//! `fread` and `fwrite` are wrapped because the C library moves large
//! blocks with its own internal `read` and `write`, which no wrapper sees.
//!
//! Exported, these are the process's `read` and `write` for every object
//! loaded after the program, this library included: its own reads and
//! writes (the trace writer's wake-ups, its lines on stderr, the signal
//! handler's) are raw system calls, so they never come here (see
//! `signals`). The next definitions are looked up when the library loads,
//! as a program's signal handler may call `read` or `write`: past the
//! check's one load, a wrapper entered from a handler (which the check
//! makes sure the collector knows: `signals::keep_program_handlers`)
//! calls only into `signals`, which records the access without the walk
//! to the program's call (`signals::in_handler`).

use std::ffi::{c_int, c_void, CStr};

use crate::next_fns::NextFns;

const NAMES: [&CStr; 6] = [
    c"read",
    c"write",
    c"pread64",
    c"pwrite64",
    c"fread",
    c"fwrite",
];
const READ: usize = 0;
const WRITE: usize = 1;
const PREAD: usize = 2;
const PWRITE: usize = 3;
const FREAD: usize = 4;
const FWRITE: usize = 5;

static REAL: NextFns<{ NAMES.len() }> = NextFns::new(NAMES);

/// Looks the next definitions up; called when the library loads.
pub(crate) fn resolve_all() {
    REAL.resolve_all();
}

/// The next definition of function `i`, as looked up when the library
/// loaded: one load, no lookup. Called before that (from another
/// library's constructor, when no handler of ours exists), it has
/// everything looked up first.
fn real(i: usize) -> usize {
    REAL.ready(i)
}

/// Tells the check about `buf..buf+len` before the call; `write`: the
/// call writes the host bytes.
#[inline]
fn before(buf: *const c_void, len: usize, write: bool) {
    if !super::on() {
        return;
    }
    if crate::signals::in_handler() {
        // Entered from a signal handler (the program's, which may call
        // `write`): the access is recorded without the walk to the
        // program's call, which allocates and locks; all of it is in
        // `signals`.
        super::fault::host_call(buf as u64, len as u64, write, None);
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        super::host_buffer(buf as u64, len as u64, write, &|| {
            crate::callsite::app_return_address().map_or(0, |a| a.saturating_sub(1))
        })
    });
}

fn missing() -> isize {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, usize) -> isize;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, usize) -> isize;
type PreadFn = unsafe extern "C" fn(c_int, *mut c_void, usize, i64) -> isize;
type PwriteFn = unsafe extern "C" fn(c_int, *const c_void, usize, i64) -> isize;
type FreadFn = unsafe extern "C" fn(*mut c_void, usize, usize, *mut libc::FILE) -> usize;
type FwriteFn = unsafe extern "C" fn(*const c_void, usize, usize, *mut libc::FILE) -> usize;

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    before(buf, n, true);
    match real(READ) {
        0 => missing(),
        // SAFETY: the next read, with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, ReadFn>(f)(fd, buf, n) },
    }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    before(buf, n, false);
    match real(WRITE) {
        0 => missing(),
        // SAFETY: the next write, with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, WriteFn>(f)(fd, buf, n) },
    }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, n: usize, off: i64) -> isize {
    before(buf, n, true);
    match real(PREAD) {
        0 => missing(),
        // SAFETY: the next pread64, with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, PreadFn>(f)(fd, buf, n, off) },
    }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, n: usize, off: i64) -> isize {
    before(buf, n, false);
    match real(PWRITE) {
        0 => missing(),
        // SAFETY: the next pwrite64, with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, PwriteFn>(f)(fd, buf, n, off) },
    }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn fread(
    buf: *mut c_void,
    size: usize,
    count: usize,
    stream: *mut libc::FILE,
) -> usize {
    before(buf, size.saturating_mul(count), true);
    match real(FREAD) {
        0 => 0,
        // SAFETY: the next fread, with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, FreadFn>(f)(buf, size, count, stream) },
    }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn fwrite(
    buf: *const c_void,
    size: usize,
    count: usize,
    stream: *mut libc::FILE,
) -> usize {
    before(buf, size.saturating_mul(count), false);
    match real(FWRITE) {
        0 => 0,
        // SAFETY: the next fwrite, with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, FwriteFn>(f)(buf, size, count, stream) },
    }
}
