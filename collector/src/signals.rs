//! Everything the collector runs inside a signal handler, in one place.
//!
//! Reached from a handler: the collector's one handler ([`handler`]) and
//! all it calls (the coherence check's claim on a fault, its range lookups
//! ([`ranges`]) and its fault ring, the crash note, the ending, the last
//! flush and the wait for it, the note on stderr), and, past their first
//! line, the interposers a program's own handler may call (`_exit`,
//! `_Exit` and the exec family, async-signal-safe in POSIX; `sigaction`
//! and `signal`, which runtimes call from theirs; `read` and `write`, the
//! coherence check's wrappers, async-signal-safe in POSIX too). The rest
//! of the collector learns what a handler did from the state kept here
//! (atomics, slots, a ring), after it returned. Everything in this file is
//! async-signal-safe, by the rules below. No other file of the collector
//! is entered from a handler past such a first line, and no other file
//! says its code is async-signal-safe.
//!
//! The check's wrappers (`coherence::calls`) are entered from the
//! program's own handlers. While the check runs, the collector holds
//! every signal the program handles ([`keep_program_handlers`]: the
//! handler goes behind ours, with its flags, mask and arguments, as for
//! the signals held anyway), so a program's handler always runs from
//! [`handler`], which marks the thread as inside it ([`in_handler`]: where
//! its frame is, so that a handler left by `siglongjmp` does not stay
//! marked). A wrapper entered there calls [`fault::host_call`] without a
//! code address: the pages are opened and the access recorded in the
//! fault ring, as the handler records a fault, and the walk to the
//! program's call (`callsite`, which allocates and locks) is not made; the
//! access is reported at an unknown place. Outside a handler the wrapper
//! passes that walk in, and `host_call` runs it only when a watched range
//! is touched.
//!
//! The rules, and why each holds:
//!
//! 1. **No allocation.** A handler may interrupt `malloc` inside its arena
//!    lock, and the check may have protected heap pages (a small array
//!    shares its page with the allocator's other blocks). Buffers are
//!    fixed: small ones on the stack (which may be a small sigaltstack),
//!    the fault ring in a static; the check's snapshot is read from pages
//!    of its own (`mmap`).
//! 2. **No lock.** The interrupted thread may hold it: no `Mutex`, no
//!    `Once`/`OnceLock` initialisation, no stdio, no `thread_local!` with
//!    a lazy initialiser or a destructor. Shared state is atomics; per
//!    thread state is `const` thread-locals of `Cell`s, read with
//!    `try_with` (a thread being torn down reads the default).
//! 3. **No `dlsym`**, nor anything else of the dynamic linker (its lock,
//!    its allocations). A function of another object that a handler calls
//!    is looked up before any handler can run (`next_fns`, at load) and
//!    read here with one atomic load ([`Resolved`]): 0 means missing, and
//!    the caller falls back to the system call or fails as the function
//!    would.
//! 4. **System calls are raw** ([`sys`], through `libc::syscall`), never
//!    `libc::write`, `libc::read` or another libc wrapper a process may
//!    define. The library itself exports `read` and `write` (the coherence
//!    check's wrappers, coherence/calls.rs), and a program may define them
//!    too; the dynamic linker binds every call of those names, this
//!    library's own included, to the first definition in the process, so
//!    a `libc::write` here would run the check's lookup or the program's
//!    code inside the handler. glibc's `syscall` is the one entry nobody
//!    wraps. Kept as library calls: `clock_gettime` (the vDSO: no system
//!    call, no lock) and the system's `sigaction` (resolved at load; it
//!    adds the restorer that a raw `rt_sigaction` would need).
//! 5. **Nothing waits for ever.** A line on stderr is written only when
//!    it can be without waiting (a full pipe nobody reads drops it:
//!    [`write_note`]); a wait for the writer thread gives up once the
//!    writer stops making progress ([`flush::stop`]).
//! 6. **No panic**: it would allocate and unwind into C. No `unwrap`,
//!    indexes in bounds by construction or through `get`, arithmetic that
//!    cannot overflow.
//! 7. **errno as found**: the handler saves it first and restores it last.
//!
//! What this file imports keeps the same rules: `libc`, `core`'s atomics
//! and cells, and `accprof_trace::Ending` and `MAX_ACCESS_FRAMES` (a plain
//! enum, a constant). The coherence check's range types and the lookups
//! the handler makes on them ([`ranges`]: `judge`, `save_window`,
//! `page_span`, `Range::prot`, `Prot::bits`) live here too, and
//! `coherence::table` re-exports them: computations on slices of plain
//! `Copy` values (rules 1 and 2: no allocation, no lock; rule 6: `get`
//! and `partition_point` for indexes, saturating arithmetic), with no
//! system call. The table, its page segments and the snapshot the
//! handler reads are built there, outside any handler; the snapshot is
//! published into pages of its own (`coherence::fault`) before a handler
//! can read it.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// A table of functions of other objects, filled before any handler runs
/// and read here with one load (rule 3): `next_fns` looks them up.
pub(crate) struct Resolved<const N: usize> {
    found: [AtomicUsize; N],
}

impl<const N: usize> Resolved<N> {
    pub(crate) const fn new() -> Self {
        Resolved {
            found: [const { AtomicUsize::new(0) }; N],
        }
    }

    /// The address of function `i`; 0 when it was not found or not
    /// looked up yet. One load: callable from a handler.
    pub(crate) fn get(&self, i: usize) -> usize {
        self.found.get(i).map_or(0, |f| f.load(Ordering::Acquire))
    }

    /// Records function `i` (by whoever looks it up, outside handlers).
    pub(crate) fn set(&self, i: usize, f: usize) {
        if let Some(slot) = self.found.get(i) {
            slot.store(f, Ordering::Release);
        }
    }
}

/// The raw system calls of this module (rule 4). Each returns what the
/// kernel returned, -errno on failure.
pub(crate) mod sys {
    use libc::c_long;

    fn ret(r: c_long) -> isize {
        if r < 0 {
            -(errno() as isize)
        } else {
            r as isize
        }
    }

    /// This thread's errno.
    pub(crate) fn errno() -> i32 {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() }
    }

    pub(crate) fn set_errno(e: i32) {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = e };
    }

    /// write(2) of `bytes` to `fd`.
    pub(crate) fn write(fd: i32, bytes: &[u8]) -> isize {
        // SAFETY: the kernel reads `bytes.len()` bytes of a valid slice.
        ret(unsafe { libc::syscall(libc::SYS_write, fd, bytes.as_ptr(), bytes.len()) })
    }

    /// write(2) that fails with EAGAIN where it would wait (a full pipe),
    /// through pwritev2's RWF_NOWAIT at the current offset. Kernels or
    /// files without it answer EOPNOTSUPP (or EINVAL).
    pub(crate) fn write_nowait(fd: i32, bytes: &[u8]) -> isize {
        let iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: one iovec over a valid slice; offset -1 (split in two
        // halves, the high one 0) is the file's current offset.
        ret(unsafe {
            libc::syscall(
                libc::SYS_pwritev2,
                fd,
                &iov as *const libc::iovec,
                1,
                -1 as c_long,
                0 as c_long,
                libc::RWF_NOWAIT,
            )
        })
    }

    /// Whether `fd` takes a write now (ppoll with a zero timeout).
    pub(crate) fn writable(fd: i32) -> bool {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: one pollfd and a timespec we own; no signal mask given.
        let r = unsafe {
            libc::syscall(
                libc::SYS_ppoll,
                &mut pfd as *mut libc::pollfd,
                1,
                &zero as *const libc::timespec,
                std::ptr::null::<u64>(),
                0,
            )
        };
        r == 1 && pfd.revents & libc::POLLOUT != 0 && pfd.revents & libc::POLLERR == 0
    }

    /// The kernel's bit for `sig` in a signal set (its first 64 signals,
    /// all Linux has: the sets given to the kernel below are 8 bytes).
    pub(crate) fn bit(sig: i32) -> u64 {
        match sig {
            1..=64 => 1 << (sig - 1),
            _ => 0,
        }
    }

    /// rt_sigprocmask(how, set): this thread's previous mask, or None.
    pub(crate) fn sigmask(how: i32, set: u64) -> Option<u64> {
        let mut old: u64 = 0;
        // SAFETY: 8-byte sets we own, the size the kernel's sets have.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                how,
                &set as *const u64,
                &mut old as *mut u64,
                8,
            )
        };
        (r == 0).then_some(old)
    }

    /// The signals pending for this thread or the process.
    pub(crate) fn pending() -> u64 {
        let mut set: u64 = 0;
        // SAFETY: an 8-byte set we own.
        unsafe { libc::syscall(libc::SYS_rt_sigpending, &mut set as *mut u64, 8) };
        set
    }

    /// Takes a pending `sig` (blocked) without waiting.
    pub(crate) fn take_pending(sig: i32) {
        let set = bit(sig);
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: an 8-byte set and a timespec we own; no siginfo wanted.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigtimedwait,
                &set as *const u64,
                std::ptr::null_mut::<libc::siginfo_t>(),
                &zero as *const libc::timespec,
                8,
            )
        };
    }

    pub(crate) fn gettid() -> i32 {
        // SAFETY: gettid has no arguments.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }

    pub(crate) fn getpid() -> i32 {
        // SAFETY: getpid has no arguments.
        unsafe { libc::syscall(libc::SYS_getpid) as i32 }
    }

    /// Sends `sig` to this thread.
    pub(crate) fn raise(sig: i32) {
        // SAFETY: a signal to this very thread.
        unsafe { libc::syscall(libc::SYS_tgkill, getpid(), gettid(), sig) };
    }

    /// mprotect(2) of `lo..lo+len`.
    pub(crate) fn mprotect(lo: u64, len: u64, prot: i32) {
        // SAFETY: the callers' promise that loosening these pages changes
        // nothing else (see `fault::protect`).
        unsafe { libc::syscall(libc::SYS_mprotect, lo, len, prot) };
    }

    /// Sleeps `ns` nanoseconds (less if a signal comes).
    pub(crate) fn sleep_ns(ns: u64) {
        let ts = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: a valid relative timespec; no remainder wanted.
        unsafe {
            libc::syscall(
                libc::SYS_clock_nanosleep,
                libc::CLOCK_MONOTONIC,
                0,
                &ts as *const libc::timespec,
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
    }
}

/// Ends the process through `f`, an exit function of another object
/// (`_exit`, `_Exit`, `exit`), or the raw system call when it was not
/// found (0).
#[cfg_attr(test, allow(dead_code))]
pub(crate) fn exit_through(f: usize, status: i32) -> ! {
    type ExitFn = unsafe extern "C" fn(libc::c_int) -> !;
    if f != 0 {
        // SAFETY: `f` is the next definition of an exit function, which has
        // this signature.
        unsafe { std::mem::transmute::<usize, ExitFn>(f)(status) }
    }
    loop {
        // SAFETY: exit_group ends the process; it has no memory arguments.
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}

/// A function of another object was not found: fail the way a missing
/// one would (ENOSYS).
#[cfg_attr(test, allow(dead_code))]
pub(crate) fn no_function() -> libc::c_int {
    sys::set_errno(libc::ENOSYS);
    -1
}

/// Current CLOCK_MONOTONIC time in ns: the vDSO's clock_gettime, no
/// system call and no lock (rule 4).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC
    // always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Writes a line of the collector's on stderr from a handler, with one raw
/// write(2) (rule 4: never through a `write` defined in the process, this
/// library's wrapper included), and only if it can be written without
/// waiting (rule 5): to a pipe that is full because nobody reads it, a
/// handler's line would wait for ever; it is dropped instead. A pipe takes
/// a line of up to PIPE_BUF bytes whole or not at all.
pub(crate) fn write_note(bytes: &[u8]) {
    write_stderr(bytes, false);
}

/// Writes `bytes` on stderr with one raw write(2); `wait`: as a plain
/// write does (outside handlers), else only if it can be done without
/// waiting ([`write_note`]).
///
/// SIGPIPE is blocked around the write: when stderr is a pipe whose reader
/// is gone (`prog 2>&1 | head -1`), a line of ours must not kill a program
/// that would have exited normally. A SIGPIPE our write raised is taken
/// back before the mask is restored; one already pending is left alone.
pub(crate) fn write_stderr(bytes: &[u8], wait: bool) {
    let pipe = sys::bit(libc::SIGPIPE);
    let old = sys::sigmask(libc::SIG_BLOCK, pipe);
    let was_pending = sys::pending() & pipe != 0;
    let mut n = if wait {
        sys::write(2, bytes)
    } else {
        sys::write_nowait(2, bytes)
    };
    let refused = [libc::EAGAIN, libc::EOPNOTSUPP, libc::EINVAL].map(|e| -(e as isize));
    if !wait && refused.contains(&n) {
        // No RWF_NOWAIT for this file, or a file system that would rather
        // not wait on its own locks: ask whether it takes a write now (a
        // file always does, and a terminal; a full pipe does not).
        n = if sys::writable(2) {
            sys::write(2, bytes)
        } else {
            -(libc::EAGAIN as isize)
        };
    }
    if let Some(old) = old {
        if n == -(libc::EPIPE as isize) && !was_pending {
            sys::take_pending(libc::SIGPIPE);
        }
        sys::sigmask(libc::SIG_SETMASK, old);
    }
}

/// The collector's life: uninitialized -> enabled -> stopping -> disabled,
/// in one atomic (see `state`, which makes the moves a handler does not).
pub(crate) mod life {
    use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

    pub(crate) const UNINITIALIZED: u8 = 0;
    pub(crate) const ENABLED: u8 = 1;
    pub(crate) const STOPPING: u8 = 2;
    pub(crate) const DISABLED: u8 = 3;

    pub(crate) static STATE: AtomicU8 = AtomicU8::new(UNINITIALIZED);

    #[inline]
    pub fn enabled() -> bool {
        STATE.load(Ordering::Relaxed) == ENABLED
    }

    /// Moves enabled -> stopping (the final flush is under way): producers
    /// stop recording, the writer finishes what is buffered. True for the
    /// caller that made the move.
    #[cold]
    pub fn begin_stop() -> bool {
        STATE
            .compare_exchange(ENABLED, STOPPING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The pid the collector's state belongs to (set at start and in a
    /// forked child). A vfork child shares our memory under another pid:
    /// its `_exit` or exec must not touch the parent's writer.
    static OWN_PID: AtomicU32 = AtomicU32::new(0);

    pub(crate) fn set_own_pid(pid: u32) {
        OWN_PID.store(pid, Ordering::Release);
    }

    pub(crate) fn in_own_process() -> bool {
        OWN_PID.load(Ordering::Acquire) == super::sys::getpid() as u32
    }
}

/// How the process is ending, as the code that saw it leaves it for the
/// writer thread (see `ending`, which reads it).
pub(crate) mod ending {
    use std::sync::atomic::{AtomicU64, Ordering};

    use accprof_trace::Ending;

    /// The pending ending, encoded by [`encode`]; 0 when none.
    pub(crate) static PENDING: AtomicU64 = AtomicU64::new(0);
    /// When it happened (CLOCK_MONOTONIC ns), stored before `PENDING`.
    pub(crate) static AT_NS: AtomicU64 = AtomicU64::new(0);

    pub(crate) const EXIT_UNKNOWN: u64 = 1;
    pub(crate) const EXIT: u64 = 2;
    pub(crate) const QUICK_EXIT: u64 = 3;
    pub(crate) const SIGNAL: u64 = 4;
    pub(crate) const EXEC: u64 = 5;
    pub(crate) const RUNTIME_ERROR: u64 = 6;

    pub(crate) fn encode(how: Ending) -> u64 {
        let (kind, code) = match how {
            Ending::Exit(None) => (EXIT_UNKNOWN, 0),
            Ending::Exit(Some(c)) => (EXIT, c),
            Ending::QuickExit(c) => (QUICK_EXIT, c),
            Ending::Signal(s) => (SIGNAL, s),
            Ending::Exec => (EXEC, 0),
            Ending::RuntimeError(c) => (RUNTIME_ERROR, c),
        };
        kind << 32 | u64::from(code as u32)
    }

    /// Says how the process is ending; the next flush writes it.
    pub(crate) fn set(how: Ending) {
        AT_NS.store(super::now_ns(), Ordering::Relaxed);
        PENDING.store(encode(how), Ordering::Release);
    }
}

/// What a fatal signal hit, as the handler leaves it for the writer thread
/// (see `crash`, which turns it into the trace's `Crash` record). A fault
/// noted stays: a program's handler that ends with `abort()` after a
/// SIGSEGV still died of the SIGSEGV. Any other signal is replaced by the
/// next one.
pub(crate) mod crash {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

    thread_local! {
        /// The driver call this thread is inside: its callback id + 1 in
        /// the high half, its correlation id in the low half; 0 when none.
        pub(crate) static DRIVER_CALL: Cell<u64> = const { Cell::new(0) };
    }

    /// Held while a [`note`] writes the fields below (a second thread's
    /// signal at that instant is not noted).
    pub(crate) static NOTING: AtomicBool = AtomicBool::new(false);
    /// Set by [`note`] for a fault the kernel raised (the thread may have
    /// died inside the CUDA driver, holding its locks): from then on the
    /// writer does not call into CUPTI.
    pub(crate) static FAULT: AtomicBool = AtomicBool::new(false);
    /// Set once the fields are complete; the writer reads them after.
    pub(crate) static READY: AtomicBool = AtomicBool::new(false);
    pub(crate) static TIME_NS: AtomicU64 = AtomicU64::new(0);
    pub(crate) static THREAD: AtomicU32 = AtomicU32::new(0);
    pub(crate) static SIGNAL: AtomicI32 = AtomicI32::new(0);
    pub(crate) static CODE: AtomicI32 = AtomicI32::new(0);
    /// The faulting address + 1 (0: none).
    pub(crate) static ADDRESS: AtomicU64 = AtomicU64::new(0);
    pub(crate) static DRIVER: AtomicU64 = AtomicU64::new(0);

    /// Notes a fatal signal delivered to this thread, unless a fault was
    /// noted already.
    pub(crate) fn note(sig: libc::c_int, info: *const libc::siginfo_t) {
        if FAULT.load(Ordering::Acquire) || NOTING.swap(true, Ordering::AcqRel) {
            return;
        }
        let (code, address) = if info.is_null() {
            (0, 0)
        } else {
            // SAFETY: the kernel's siginfo; si_addr is meaningful for the
            // fault signals when the kernel raised them (si_code > 0).
            unsafe {
                let code = (*info).si_code;
                let fault = code > 0
                    && matches!(
                        sig,
                        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE
                    );
                let addr = if fault {
                    ((*info).si_addr() as u64).wrapping_add(1)
                } else {
                    0
                };
                (code, addr)
            }
        };
        TIME_NS.store(super::now_ns(), Ordering::Relaxed);
        THREAD.store(super::sys::gettid() as u32, Ordering::Relaxed);
        SIGNAL.store(sig, Ordering::Relaxed);
        CODE.store(code, Ordering::Relaxed);
        ADDRESS.store(address, Ordering::Relaxed);
        DRIVER.store(
            DRIVER_CALL.try_with(Cell::get).unwrap_or(0),
            Ordering::Relaxed,
        );
        if address != 0 {
            FAULT.store(true, Ordering::Release);
        }
        READY.store(true, Ordering::Release);
        NOTING.store(false, Ordering::Release);
    }
}

/// The handshake with the writer thread (see `writer`, whose thread
/// serves it): flush requests and the final stop, asked for and waited on
/// from any thread or handler, and the endings that flush from handlers
/// and from the interposed `_exit` and exec.
pub(crate) mod flush {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
    use std::time::Duration;

    use accprof_trace::Ending;

    use super::life::{begin_stop, enabled, in_own_process};
    use super::{now_ns, sys, write_note};

    /// How long a dying process (a signal, `_exit`) or an exec waits for
    /// the last records without the writer making progress: short, as a
    /// signal handler or a child's `_exit` should not hang.
    pub(crate) const QUICK_WAIT: Duration = Duration::from_secs(2);

    /// A wait on the writer lasts at most this many times its stall limit.
    pub(crate) const MAX_WAIT_STALLS: u32 = 24;

    pub(crate) static FLUSH_REQUESTED: AtomicU64 = AtomicU64::new(0);
    pub(crate) static FLUSH_DONE: AtomicU64 = AtomicU64::new(0);
    pub(crate) static FROM_SIGNAL: AtomicBool = AtomicBool::new(false);
    pub(crate) static DEVICE_FLUSH: AtomicBool = AtomicBool::new(false);
    pub(crate) static STOP: AtomicBool = AtomicBool::new(false);
    pub(crate) static RUNNING: AtomicBool = AtomicBool::new(false);
    pub(crate) static FINISHED: AtomicBool = AtomicBool::new(false);
    /// Records written so far (advanced in steps while a batch is
    /// written): what waits on the writer take as progress.
    pub(crate) static WRITTEN: AtomicU64 = AtomicU64::new(0);
    /// The eventfd the writer waits on (-1: none).
    pub(crate) static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

    thread_local! {
        static IS_WRITER: Cell<bool> = const { Cell::new(false) };
    }

    /// Marks the calling thread as the writer.
    pub(crate) fn mark_writer_thread() {
        let _ = IS_WRITER.try_with(|w| w.set(true));
    }

    /// True on the writer thread (a signal landing there must not wait on
    /// itself).
    pub fn is_writer_thread() -> bool {
        IS_WRITER.try_with(Cell::get).unwrap_or(false)
    }

    /// True while the writer thread runs.
    pub fn running() -> bool {
        RUNNING.load(Ordering::Acquire)
    }

    /// Wakes the writer: 8 bytes to its eventfd, a raw write (rule 4).
    pub(crate) fn wake_writer() {
        let fd = WAKE_FD.load(Ordering::Acquire);
        if fd >= 0 {
            sys::write(fd, &1u64.to_ne_bytes());
        }
    }

    /// Asks for a flush of everything buffered and waits for it while the
    /// writer makes progress, giving up after `timeout` without any. With
    /// `from_signal` the writer skips a buffer whose lock is held (by the
    /// interrupted thread). The device side is flushed first when
    /// `from_signal` or `device`.
    pub fn flush_and_wait(timeout: Duration, from_signal: bool, device: bool) -> bool {
        if !RUNNING.load(Ordering::Acquire) {
            return false;
        }
        if from_signal {
            FROM_SIGNAL.store(true, Ordering::Release);
        }
        if device {
            DEVICE_FLUSH.store(true, Ordering::Release);
        }
        let want = FLUSH_REQUESTED.fetch_add(1, Ordering::AcqRel) + 1;
        wake_writer();
        wait_until(timeout, || FLUSH_DONE.load(Ordering::Acquire) >= want)
    }

    /// Final flush: the writer drains, writes the `End` record, closes the
    /// file and ends. `from_signal` as for [`flush_and_wait`].
    pub fn stop(timeout: Duration, from_signal: bool) -> bool {
        if !RUNNING.load(Ordering::Acquire) {
            return true;
        }
        if from_signal {
            FROM_SIGNAL.store(true, Ordering::Release);
        }
        STOP.store(true, Ordering::Release);
        wake_writer();
        wait_until(timeout, || FINISHED.load(Ordering::Acquire))
    }

    /// Waits until `done`, for as long as the writer keeps writing: `stall`
    /// is how long it may go without writing a record before the wait gives
    /// up, and [`MAX_WAIT_STALLS`] times `stall` caps the whole wait. A
    /// large backlog at exit (a program that records faster than the disk
    /// takes it) is written out whole, while a writer stuck on a dead file
    /// system cannot hold the process for more than `stall`.
    fn wait_until(stall: Duration, done: impl Fn() -> bool) -> bool {
        wait_while_progressing(
            stall,
            stall.saturating_mul(MAX_WAIT_STALLS),
            done,
            || WRITTEN.load(Ordering::Relaxed),
            // Short steps: exit waits on this, and most flushes take well
            // under a millisecond.
            || sys::sleep_ns(50_000),
        )
    }

    /// The wait of [`wait_until`], with its progress counter and pause
    /// passed in.
    pub(crate) fn wait_while_progressing(
        stall: Duration,
        cap: Duration,
        done: impl Fn() -> bool,
        progress: impl Fn() -> u64,
        pause: impl Fn(),
    ) -> bool {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let (stall, cap) = (ns(stall), ns(cap));
        let start = now_ns();
        let mut last_progress = start;
        let mut seen = progress();
        while !done() {
            let now = now_ns();
            let p = progress();
            if p != seen {
                seen = p;
                last_progress = now;
            }
            if now.saturating_sub(last_progress) >= stall || now.saturating_sub(start) >= cap {
                return false;
            }
            pause();
        }
        true
    }

    /// Flushes from a signal handler that hands the signal to the program's
    /// own: bounded.
    pub(crate) fn flush_from_signal() {
        if enabled() && in_own_process() && !is_writer_thread() {
            flush_and_wait(QUICK_WAIT, true, true);
        }
    }

    /// Says on stderr, in one line that needs no allocation, that the last
    /// records may be lost.
    fn say_cut(what: &[u8]) {
        let mut line = super::Line::new();
        line.put(b"accprof: the trace writer did not finish in time after ");
        line.put(what);
        line.put(b"; the trace may miss its last records\n");
        write_note(line.bytes());
    }

    /// The process dies of `sig` once its handler returns: the final flush,
    /// with `End(Signal)`. Bounded.
    pub(crate) fn end_by_signal(sig: i32) {
        if !in_own_process() || !begin_stop() {
            return;
        }
        super::ending::set(Ending::Signal(sig));
        if !is_writer_thread() && !stop(QUICK_WAIT, true) {
            say_cut(b"a signal");
        }
    }

    /// `_exit`/`_Exit`: no atexit handler will run, so the final flush is
    /// now, with `End(QuickExit)`. Bounded.
    #[cfg_attr(test, allow(dead_code))]
    pub(crate) fn quick_exit(status: i32) {
        if !in_own_process() || !begin_stop() {
            return;
        }
        super::ending::set(Ending::QuickExit(status));
        if !is_writer_thread() && !stop(QUICK_WAIT, true) {
            say_cut(b"_exit");
        }
    }

    /// An exec is about to replace this image: everything recorded goes to
    /// disk, ended by `End(Exec)`. Recording goes on, in case the exec
    /// fails (a later `End` then supersedes this one).
    #[cfg_attr(test, allow(dead_code))]
    pub(crate) fn before_exec() {
        // Without a writer (a forked child that recorded nothing) there is
        // nothing to end, and an ending left pending would outlive a failed
        // exec.
        if !enabled() || !in_own_process() || is_writer_thread() || !running() {
            return;
        }
        super::ending::set(Ending::Exec);
        if !flush_and_wait(QUICK_WAIT, false, true) {
            say_cut(b"exec");
        }
    }
}

/// A line built without allocating: bytes past its capacity are cut.
struct Line {
    buf: [u8; 200],
    len: usize,
}

impl Line {
    fn new() -> Line {
        Line {
            buf: [0; 200],
            len: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = b;
                self.len += 1;
            }
        }
    }

    fn put_hex(&mut self, v: u64) {
        let mut out = [b'0'; 18];
        out[1] = b'x';
        for (i, o) in out[2..].iter_mut().enumerate() {
            let d = ((v >> ((15 - i) * 4)) & 0xf) as u8;
            *o = if d < 10 { b'0' + d } else { b'a' + d - 10 };
        }
        self.put(&out);
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len.min(self.buf.len())]
    }
}

/// The coherence check's host ranges as the handler reads them, and the
/// pure lookups it makes on them: plain `Copy` values and computations on
/// slices of them, with no allocation, no lock and no system call. The
/// check's table (`coherence::table`) builds the ranges and the snapshot
/// they are published in, outside any handler, and re-exports these.
pub(crate) mod ranges {
    /// Which copy of a range the host may trust.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum State {
        /// Both copies agree (just mapped, uploaded or downloaded).
        HostCurrent,
        /// A compute construct (this region) may have written the device copy
        /// since the host copy was last brought up to date.
        DeviceNewer { since: u64 },
        /// The host wrote its copy since both agreed; no upload yet.
        HostNewer,
    }

    /// How a range's pages are protected while it is in a state.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub(crate) enum Prot {
        /// No access: every touch faults (a stale copy, or a download whose
        /// reader is awaited).
        None,
        /// Read-only: a host write faults (both copies agree).
        Read,
        /// Open.
        Rw,
    }

    impl Prot {
        pub fn bits(self) -> i32 {
            match self {
                Prot::None => libc::PROT_NONE,
                Prot::Read => libc::PROT_READ,
                Prot::Rw => libc::PROT_READ | libc::PROT_WRITE,
            }
        }
    }

    /// A download (`update self`) the host has not read yet.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) struct Download {
        /// The update construct that downloaded.
        pub region: u64,
        pub time: u64,
        pub thread: u32,
    }

    /// One host range mapped to the device.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) struct Range {
        pub start: u64,
        pub bytes: u64,
        /// The device copy's address; 0 when the runtime did not say.
        pub device: u64,
        /// The variable's interned name; 0 when none was given.
        pub name: u32,
        pub state: State,
        /// The last download into the range, while the host has not read it.
        pub unread: Option<Download>,
        /// Mapped from a copy the runtime may have staged through a buffer of
        /// its own: not watched until shown to be the array itself.
        pub unproven: bool,
        /// No longer mapped (its device copy was freed): kept only while its
        /// last download is unread, which a read after the data region (the
        /// usual place for a result) still makes read.
        pub gone: bool,
    }

    impl Range {
        pub fn end(&self) -> u64 {
            self.start.saturating_add(self.bytes)
        }

        pub fn contains(&self, addr: u64) -> bool {
            addr >= self.start && addr < self.end()
        }

        pub fn is_stale(&self) -> bool {
            matches!(self.state, State::DeviceNewer { .. })
        }

        /// The protection this range asks of its pages: reads of a stale copy
        /// and of an unread download fault; writes to a copy the device shares
        /// fault; a range the host already changed is left open.
        pub fn prot(&self) -> Prot {
            if self.unproven {
                return Prot::Rw;
            }
            match self.state {
                State::DeviceNewer { .. } => Prot::None,
                _ if self.unread.is_some() => Prot::None,
                State::HostCurrent if self.device != 0 => Prot::Read,
                _ => Prot::Rw,
            }
        }
    }

    /// The first page of `start` and the end of the last page of
    /// `start..start+bytes` (`page` a power of two, never 0: `PAGE` is set
    /// only to one, so `page - 1` cannot wrap; the rest saturates).
    pub(crate) fn page_span(start: u64, bytes: u64, page: u64) -> (u64, u64) {
        let lo = start & !(page - 1);
        let end = start.saturating_add(bytes);
        let hi = end.saturating_add(page - 1) & !(page - 1);
        (lo, hi)
    }

    /// What the state published for the signal handler says about a faulting
    /// address.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Verdict {
        /// Inside this watched range.
        Watched(Range),
        /// On a page the check protected, outside every watched range (other
        /// data sharing the page): let it through, say nothing.
        OurPage,
        /// Not the check's doing: the program's own fault.
        NotOurs,
    }

    /// What a fault at `addr` is, given the watched ranges and the protected
    /// page spans (sorted). A scan and a binary search over the snapshot's
    /// slices, the index read through `get`: no allocation, no panic.
    pub(crate) fn judge(watched: &[Range], spans: &[(u64, u64)], addr: u64) -> Verdict {
        if let Some(r) = watched.iter().find(|r| r.contains(addr)) {
            return Verdict::Watched(*r);
        }
        let i = spans.partition_point(|s| s.1 <= addr);
        match spans.get(i) {
            Some(&(lo, hi)) if addr >= lo && addr < hi => Verdict::OurPage,
            _ => Verdict::NotOurs,
        }
    }

    /// The bytes around `addr` worth saving for the confirmation: at most
    /// `max` bytes, starting up to `max / 2` before the address, inside the
    /// range and inside the address's page (the next page may still be
    /// protected, and the handler must not fault). Returns (start, len).
    /// Saturating arithmetic only (`page` as in [`page_span`]).
    pub(crate) fn save_window(r: &Range, addr: u64, page: u64, max: u64) -> (u64, u64) {
        let page_lo = addr & !(page - 1);
        let page_hi = page_lo.saturating_add(page);
        let lo = addr.saturating_sub(max / 2).max(r.start).max(page_lo);
        let hi = lo.saturating_add(max).min(r.end()).min(page_hi);
        (lo, hi.saturating_sub(lo))
    }

    /// Ranges for tests (here and in the coherence table's).
    #[cfg(test)]
    pub(crate) mod tests {
        use super::*;

        const PAGE: u64 = 4096;

        pub(crate) fn at(start: u64, bytes: u64, state: State) -> Range {
            Range {
                start,
                bytes,
                device: 0xd000_0000 + start,
                name: 0,
                state,
                unread: None,
                unproven: false,
                gone: false,
            }
        }

        pub(crate) fn stale_at(start: u64, bytes: u64) -> Range {
            at(start, bytes, State::DeviceNewer { since: 1 })
        }

        #[test]
        fn page_spans_cover_partial_pages() {
            assert_eq!(page_span(0x1000, 0x1000, PAGE), (0x1000, 0x2000));
            assert_eq!(page_span(0x1008, 0x10, PAGE), (0x1000, 0x2000));
            assert_eq!(page_span(0x1ff8, 0x10, PAGE), (0x1000, 0x3000));
        }

        #[test]
        fn each_state_asks_its_protection() {
            let mut r = at(0x1000, 0x100, State::HostCurrent);
            assert_eq!(r.prot(), Prot::Read);
            r.state = State::HostNewer;
            assert_eq!(r.prot(), Prot::Rw);
            r.unread = Some(Download {
                region: 3,
                time: 1,
                thread: 1,
            });
            assert_eq!(r.prot(), Prot::None, "a download awaiting its reader");
            r.unread = None;
            r.state = State::DeviceNewer { since: 2 };
            assert_eq!(r.prot(), Prot::None);
            // A copy that may be the runtime's staging buffer is never watched.
            r.unproven = true;
            assert_eq!(r.prot(), Prot::Rw);
        }

        #[test]
        fn the_saved_window_stays_in_the_range_and_the_page() {
            let r = stale_at(0x1000, 0x3000);
            assert_eq!(save_window(&r, 0x1800, PAGE, 64), (0x17e0, 64));
            assert_eq!(save_window(&r, 0x1000, PAGE, 64), (0x1000, 64));
            assert_eq!(save_window(&r, 0x1ff8, PAGE, 64), (0x1fd8, 0x28));
            let small = stale_at(0x1010, 8);
            assert_eq!(save_window(&small, 0x1010, PAGE, 64), (0x1010, 8));
        }
    }
}

/// The handler side of the coherence check: the claim on a SIGSEGV the
/// check caused, the published snapshot it reads, and the ring of faults
/// it writes (see `coherence::fault`, which publishes the snapshot, and
/// `coherence::checker`, which drains the ring at the next construct
/// boundary). With each fault it keeps what the walk out of the faulting
/// code needs (the registers and a window of the thread's stack, beside
/// the record); the walk itself runs when the ring is drained.
pub(crate) mod fault {
    use std::cell::{Cell, UnsafeCell};
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

    use super::ranges::{judge, page_span, save_window, Prot, Range, State, Verdict};

    use super::{now_ns, sys, write_note, Line};

    /// si_code of a SIGSEGV for an access the page's protection refused.
    const SEGV_ACCERR: libc::c_int = 2;

    /// Bytes saved around a faulting address for the confirmation.
    pub(crate) const SAVED: usize = 64;
    /// Faults kept until the next construct boundary; more are counted.
    const RING: usize = 256;
    /// Stack words saved above the faulting instruction's stack pointer (8
    /// KiB): enough for the frames of libgfortran's formatted I/O or libc's
    /// stdio between the access and the program's call.
    pub(crate) const STACK_WORDS: usize = 1024;
    /// Return addresses kept above a faulting instruction.
    pub(crate) const FRAMES: usize = accprof_trace::MAX_ACCESS_FRAMES;

    /// The registers a walk starts from.
    #[derive(Debug, Clone, Copy, Default)]
    pub(crate) struct Regs {
        /// The faulting instruction.
        pub pc: u64,
        pub sp: u64,
        /// The frame pointer register (rbp), whatever the code keeps there.
        pub fp: u64,
    }

    /// What the handler saves for the walk: the registers, then `words`
    /// stack words from `regs.sp` up (never past the thread's stack end).
    pub(crate) struct StackCopy {
        pub regs: Regs,
        pub words: usize,
        pub stack: [u64; STACK_WORDS],
    }

    impl StackCopy {
        pub(crate) const EMPTY: StackCopy = StackCopy {
            regs: Regs {
                pc: 0,
                sp: 0,
                fp: 0,
            },
            words: 0,
            stack: [0; STACK_WORDS],
        };
    }

    /// One fault, as the handler left it.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Fault {
        pub time: u64,
        pub thread: u32,
        pub code_addr: u64,
        pub host_addr: u64,
        pub range: Range,
        /// A write (else a read).
        pub write: bool,
        /// The saved host bytes: `saved_len` bytes from `saved_at`.
        pub saved_at: u64,
        pub saved_len: usize,
        pub saved: [u8; SAVED],
        /// The return addresses above `code_addr`, innermost first: filled
        /// when the ring is drained, from the stack the handler saved, when
        /// the access was made outside the main executable (in a library).
        pub frames: [u64; FRAMES],
        pub nframes: usize,
    }

    const EMPTY: u8 = 0;
    const WRITING: u8 = 1;
    const READY: u8 = 2;

    struct Slot {
        state: AtomicU8,
        fault: UnsafeCell<Fault>,
        /// The registers and stack for the walk (not in `Fault`: the
        /// handler must not build 8 KiB on its stack, which may be a small
        /// sigaltstack).
        stack: UnsafeCell<StackCopy>,
    }

    // SAFETY: a slot's fault is written only by the handler that moved its
    // state EMPTY -> WRITING, and read only by the drainer that moved it
    // READY -> WRITING; the state's acquire/release orders the two.
    unsafe impl Sync for Slot {}

    pub(crate) const BLANK: Fault = Fault {
        time: 0,
        thread: 0,
        code_addr: 0,
        host_addr: 0,
        range: Range {
            start: 0,
            bytes: 0,
            device: 0,
            name: 0,
            state: State::HostCurrent,
            unread: None,
            unproven: false,
            gone: false,
        },
        write: false,
        saved_at: 0,
        saved_len: 0,
        saved: [0; SAVED],
        frames: [0; FRAMES],
        nframes: 0,
    };

    static SLOTS: [Slot; RING] = [const {
        Slot {
            state: AtomicU8::new(EMPTY),
            fault: UnsafeCell::new(BLANK),
            stack: UnsafeCell::new(StackCopy::EMPTY),
        }
    }; RING];
    static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

    /// Pages the check protected for a watched array that other data
    /// shares, which the program touched (an `OurPage` fault): each page
    /// and how many times. A page touched again and again (a scalar beside
    /// an array, read at every construct) is left open from then on
    /// (coherence's `hot_pages`), or every construct would pay a fault, a
    /// protection change and a new snapshot.
    pub(crate) const SHARED: usize = 64;
    pub(crate) static SHARED_PAGE: [AtomicU64; SHARED] = [const { AtomicU64::new(0) }; SHARED];
    pub(crate) static SHARED_HITS: [AtomicU64; SHARED] = [const { AtomicU64::new(0) }; SHARED];

    /// Counts a touch of the shared page `page` (atomics only; a page
    /// beyond the table's room is not counted).
    pub(crate) fn shared_touched(page: u64) {
        for (p, hits) in SHARED_PAGE.iter().zip(&SHARED_HITS) {
            let seen = match p.compare_exchange(0, page, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => page,
                Err(q) => q,
            };
            if seen == page {
                hits.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }

    /// Counters for the exit note.
    pub(crate) static FAULTS: AtomicU64 = AtomicU64::new(0);
    pub(crate) static HANDLER_NS: AtomicU64 = AtomicU64::new(0);
    /// Faults the ring had no room for: what they would have said is lost
    /// (the drainer then takes every awaited download for read).
    pub(crate) static RING_FULL: AtomicU64 = AtomicU64::new(0);
    /// Protection changes the handler made: the callbacks' idea of what is
    /// protected is out of date when this moved.
    pub(crate) static OPENED: AtomicU64 = AtomicU64::new(0);
    /// Host writes into a stale range (not reads: not a C1; not checked).
    pub(crate) static WRITES: AtomicU64 = AtomicU64::new(0);
    /// Accesses from inside an OpenACC construct (the runtime's own).
    pub(crate) static RUNTIME_ACCESSES: AtomicU64 = AtomicU64::new(0);

    /// The published snapshot (null: nothing protected).
    static SNAPSHOT: AtomicPtr<Published> = AtomicPtr::new(std::ptr::null_mut());
    /// Handlers (and wrapped calls) reading a snapshot right now.
    static READERS: AtomicUsize = AtomicUsize::new(0);
    /// The system page size.
    pub(crate) static PAGE: AtomicU64 = AtomicU64::new(4096);
    /// Set once the check runs: the collector's handler offers it every
    /// SIGSEGV and SIGBUS first.
    static ARMED: AtomicBool = AtomicBool::new(false);

    thread_local! {
        /// OpenACC constructs open on this thread: an access from inside
        /// one is the runtime's (its copies), never the program's.
        pub(crate) static IN_CONSTRUCT: Cell<u32> = const { Cell::new(0) };
        /// The end (highest address) of this thread's stack, once known
        /// (0: not yet): the handler's copy of the stack stops there.
        /// Learned outside the handler (`pthread_getattr_np` may allocate).
        pub(crate) static STACK_END: Cell<u64> = const { Cell::new(0) };
    }

    /// Lets the collector's handler offer SIGSEGV and SIGBUS to [`claim`].
    pub(crate) fn arm() {
        ARMED.store(true, Ordering::Release);
    }

    /// A snapshot as the handler reads it, copied into pages of its own
    /// (`mmap`): the handler must never touch the heap, whose pages the
    /// check may have protected (a small array shares its page with the
    /// allocator's other blocks, the collector's included). The header is
    /// followed by the watched ranges, then the page spans.
    #[repr(C)]
    pub(crate) struct Published {
        pub(crate) mapped: usize,
        pub(crate) watched: usize,
        pub(crate) spans: usize,
    }

    impl Published {
        /// Where the ranges and the spans start, and the whole length.
        pub(crate) fn layout(watched: usize, spans: usize) -> (usize, usize, usize) {
            let ranges_at =
                std::mem::size_of::<Published>().next_multiple_of(std::mem::align_of::<Range>());
            let spans_at = (ranges_at + watched * std::mem::size_of::<Range>())
                .next_multiple_of(std::mem::align_of::<(u64, u64)>());
            (
                ranges_at,
                spans_at,
                spans_at + spans * std::mem::size_of::<(u64, u64)>(),
            )
        }

        pub fn watched(&self) -> &[Range] {
            let (at, _, _) = Self::layout(self.watched, self.spans);
            // SAFETY: the mapping this header starts holds `watched` ranges
            // at this offset (`coherence::fault::create`), and lives as long
            // as `self`.
            unsafe {
                std::slice::from_raw_parts(
                    (self as *const Published).cast::<u8>().add(at).cast(),
                    self.watched,
                )
            }
        }

        pub fn spans(&self) -> &[(u64, u64)] {
            let (_, at, _) = Self::layout(self.watched, self.spans);
            // SAFETY: as in `watched`, for the spans.
            unsafe {
                std::slice::from_raw_parts(
                    (self as *const Published).cast::<u8>().add(at).cast(),
                    self.spans,
                )
            }
        }

        pub fn judge(&self, addr: u64) -> Verdict {
            judge(self.watched(), self.spans(), addr)
        }

        /// Where the first page the check protected at or above `at` starts
        /// (`u64::MAX`: none): the handler's copy of the stack stops there
        /// (a mapped array on this thread's stack, mapped by another
        /// thread).
        pub fn protected_from(&self, at: u64) -> u64 {
            let spans = self.spans();
            let i = spans.partition_point(|s| s.1 <= at);
            spans.get(i).map_or(u64::MAX, |s| s.0.max(at))
        }
    }

    /// Publishes `new` for the handler; returns the snapshot it replaces.
    pub(crate) fn replace(new: *mut Published) -> *mut Published {
        SNAPSHOT.swap(new, Ordering::SeqCst)
    }

    /// Whether no handler reads a snapshot now: one that enters after a
    /// [`replace`] sees the new one (its increment and load are ordered
    /// after the swap), so the replaced ones may go.
    pub(crate) fn no_readers() -> bool {
        READERS.load(Ordering::SeqCst) == 0
    }

    /// Runs `f` on the published snapshot, if any (the handler's and the
    /// wrapped calls' one reader protocol).
    pub(crate) fn with_snapshot<T>(f: impl FnOnce(&Published) -> T) -> Option<T> {
        READERS.fetch_add(1, Ordering::SeqCst);
        let snap = SNAPSHOT.load(Ordering::SeqCst);
        // SAFETY: a published snapshot is unmapped only while READERS is 0.
        let r = unsafe { snap.as_ref() }.map(f);
        READERS.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Opens the whole pages `lo..hi` (a wrapped call is about to hand them
    /// to the system).
    pub(crate) fn open_span(lo: u64, hi: u64) {
        protect(lo, hi.saturating_sub(lo), Prot::Rw);
    }

    /// Takes the faults recorded since the last call, oldest slot first,
    /// each with the stack copy the handler took with it (valid for the
    /// call: the slot is released after it).
    pub(crate) fn drain(mut each: impl FnMut(Fault, &StackCopy)) {
        for slot in &SLOTS {
            if slot
                .state
                .compare_exchange(READY, WRITING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // SAFETY: we own the slot until it is EMPTY again (see Slot).
                let f = unsafe { *slot.fault.get() };
                // SAFETY: as above, for the slot's stack copy.
                let copy = unsafe { &*slot.stack.get() };
                each(f, copy);
                slot.state.store(EMPTY, Ordering::Release);
            }
        }
    }

    /// Copies the interrupted code's registers and the stack words above
    /// its stack pointer into `out`, which the caller owns: up to the
    /// thread's stack end when this thread made it known, else to the end
    /// of the stack pointer's page (always mapped), and never to `limit` or
    /// past it (the first page the check protected above the stack
    /// pointer). Leaves `out.words` 0 when there is no context. Reads the
    /// ucontext and the thread's own stack, writes only `out`.
    pub(crate) fn capture(ctx: *mut libc::c_void, out: &mut StackCopy, limit: u64) {
        out.words = 0;
        let Some(regs) = registers(ctx) else { return };
        out.regs = regs;
        if regs.sp == 0 || regs.sp % 8 != 0 {
            return;
        }
        let page = PAGE.load(Ordering::Relaxed);
        let end = match STACK_END.try_with(Cell::get).unwrap_or(0) {
            e if e > regs.sp => e,
            _ => (regs.sp | (page - 1)).saturating_add(1),
        }
        .min(limit.max(regs.sp));
        let words = ((end - regs.sp) / 8).min(STACK_WORDS as u64) as usize;
        // SAFETY: sp..end is the interrupted thread's stack, mapped and
        // readable (above its stack pointer, below its end); `out.stack`
        // holds STACK_WORDS words.
        unsafe {
            std::ptr::copy_nonoverlapping(
                regs.sp as usize as *const u64,
                out.stack.as_mut_ptr(),
                words,
            );
        }
        out.words = words;
    }

    #[cfg(target_arch = "x86_64")]
    fn registers(ctx: *mut libc::c_void) -> Option<Regs> {
        if ctx.is_null() {
            return None;
        }
        // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
        let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
        let g = &uc.uc_mcontext.gregs;
        Some(Regs {
            pc: g[libc::REG_RIP as usize] as u64,
            sp: g[libc::REG_RSP as usize] as u64,
            fp: g[libc::REG_RBP as usize] as u64,
        })
    }

    /// The walk follows x86-64's call frame rules only.
    #[cfg(not(target_arch = "x86_64"))]
    fn registers(_ctx: *mut libc::c_void) -> Option<Regs> {
        None
    }

    #[cfg(target_arch = "x86_64")]
    fn context(ctx: *mut libc::c_void) -> (u64, bool) {
        if ctx.is_null() {
            return (0, false);
        }
        // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
        let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
        let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
        // Page-fault error code: bit 1 set for a write.
        let write = uc.uc_mcontext.gregs[libc::REG_ERR as usize] & 2 != 0;
        (rip, write)
    }

    #[cfg(target_arch = "aarch64")]
    fn context(ctx: *mut libc::c_void) -> (u64, bool) {
        if ctx.is_null() {
            return (0, false);
        }
        // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
        let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
        // The write bit (ESR WnR) lives in an extra context record; without
        // it every access counts as a read.
        (uc.uc_mcontext.pc, false)
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn context(_ctx: *mut libc::c_void) -> (u64, bool) {
        (0, false)
    }

    fn open_page(addr: u64) {
        let page = PAGE.load(Ordering::Relaxed);
        protect(addr & !(page - 1), page, Prot::Rw);
    }

    /// Gives `lo..lo+len` (whole pages) protection `prot`: only ever less
    /// strict than what the check set there (they were readable and
    /// writable before it protected them), so nothing else changes.
    fn protect(lo: u64, len: u64, prot: Prot) {
        OPENED.fetch_add(1, Ordering::Relaxed);
        sys::mprotect(lo, len, prot.bits());
    }

    /// Takes a SIGSEGV or SIGBUS that the check caused (an access to a page
    /// it protected) and returns true; false for every other, which the
    /// collector's handler passes on.
    pub(super) fn claim(
        sig: libc::c_int,
        info: *mut libc::siginfo_t,
        ctx: *mut libc::c_void,
    ) -> bool {
        if !ARMED.load(Ordering::Acquire) {
            return false;
        }
        let started = now_ns();
        // Only the kernel's "no access to a mapped page" can be the check's
        // (not a raise, not an unmapped address).
        let addr = if info.is_null() || sig != libc::SIGSEGV {
            0
        } else {
            // SAFETY: the kernel's siginfo; si_addr is meaningful for its
            // own SIGSEGV, which si_code tells apart.
            unsafe {
                if (*info).si_code == SEGV_ACCERR {
                    (*info).si_addr() as u64
                } else {
                    0
                }
            }
        };
        let sp = registers(ctx).map_or(0, |r| r.sp);
        let (verdict, stack_limit) = with_snapshot(|s| (s.judge(addr), s.protected_from(sp)))
            .unwrap_or((Verdict::NotOurs, 0));
        match verdict {
            Verdict::NotOurs => {
                if addr != 0 {
                    say_not_ours(addr, context(ctx).0);
                }
                return false;
            }
            Verdict::OurPage => {
                shared_touched(addr & !(PAGE.load(Ordering::Relaxed) - 1));
                open_page(addr);
            }
            Verdict::Watched(range) => {
                FAULTS.fetch_add(1, Ordering::Relaxed);
                let (code_addr, write) = context(ctx);
                let inside = IN_CONSTRUCT.try_with(Cell::get).unwrap_or(0) > 0;
                if inside {
                    RUNTIME_ACCESSES.fetch_add(1, Ordering::Relaxed);
                    open_page(addr);
                } else {
                    access_from(started, code_addr, addr, write, range, (ctx, stack_limit));
                }
            }
        }
        HANDLER_NS.fetch_add(now_ns().saturating_sub(started), Ordering::Relaxed);
        true
    }

    /// A wrapped call (`coherence::calls`, MPI's) hands `addr..addr+len`
    /// to the system, which would find a protected page an error, not a
    /// fault: each watched range it touches is recorded as the handler
    /// would have recorded a fault there (`write`: the call writes the host
    /// bytes), at the address `code_addr` gives (asked once, only when a
    /// watched range is touched; `None`, as from a signal handler, records
    /// 0: the walk to the program's call allocates and locks), and the
    /// pages are opened before the call.
    pub(crate) fn host_call(addr: u64, len: u64, write: bool, code_addr: Option<&dyn Fn() -> u64>) {
        if len == 0 || addr == 0 {
            return;
        }
        let end = addr.saturating_add(len);
        let now = now_ns();
        with_snapshot(|s| {
            let mut code = None;
            for r in s
                .watched()
                .iter()
                .filter(|r| r.start < end && r.end() > addr)
            {
                let at = *code.get_or_insert_with(|| code_addr.map_or(0, |f| f()));
                access(now, at, addr.max(r.start), write, *r);
            }
            let (lo, hi) = page_span(addr, len, PAGE.load(Ordering::Relaxed));
            if s.spans().iter().any(|sp| sp.0 < hi && sp.1 > lo) {
                open_span(lo, hi);
            }
        });
    }

    /// A host access to a watched range, from a wrapped call that hands the
    /// range to the system (`code_addr` inside the call instruction):
    /// recorded for the next construct boundary, and the range's pages
    /// opened as far as the access needs.
    fn access(time: u64, code_addr: u64, addr: u64, write: bool, range: Range) {
        access_from(
            time,
            code_addr,
            addr,
            write,
            range,
            (std::ptr::null_mut(), 0),
        );
    }

    /// [`access`], from the handler too: `ctx` its ucontext (null from a
    /// wrapped call), whose registers and stack below the limit are kept
    /// for the walk.
    fn access_from(
        time: u64,
        code_addr: u64,
        addr: u64,
        write: bool,
        range: Range,
        ctx: (*mut libc::c_void, u64),
    ) {
        let page = PAGE.load(Ordering::Relaxed);
        if write || range.is_stale() {
            // A stale copy is watched page by page (each read is one); a
            // write needs its page writable.
            open_page(addr);
        } else {
            // A read of a download: it is read, whatever else is; what
            // stays watched is a write to a copy the device shares.
            let (lo, hi) = page_span(range.start, range.bytes, page);
            let after = Range {
                unread: None,
                ..range
            };
            protect(lo, hi - lo, after.prot());
        }
        if write && range.is_stale() {
            WRITES.fetch_add(1, Ordering::Relaxed);
        }
        if !(write && range.is_stale()) || range.unread.is_some() {
            // After the page is open: a read's bytes are saved.
            record(time, code_addr, addr, write, range, ctx);
        }
    }

    fn record(
        time: u64,
        code_addr: u64,
        addr: u64,
        write: bool,
        range: Range,
        (ctx, stack_limit): (*mut libc::c_void, u64),
    ) {
        let page = PAGE.load(Ordering::Relaxed);
        let start = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
        for k in 0..RING {
            let slot = &SLOTS[start.wrapping_add(k) % RING];
            if slot
                .state
                .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            let (at, len) = save_window(&range, addr, page, SAVED as u64);
            let mut f = Fault {
                time,
                thread: sys::gettid() as u32,
                code_addr,
                host_addr: addr,
                range,
                write,
                saved_at: at,
                saved_len: len as usize,
                saved: [0; SAVED],
                frames: [0; FRAMES],
                nframes: 0,
            };
            if !write {
                // SAFETY: at..at+len lies in the page `access_from` opened
                // (at least readable) before recording; save_window keeps it
                // there, and at most SAVED bytes long.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        at as usize as *const u8,
                        f.saved.as_mut_ptr(),
                        len as usize,
                    );
                }
            }
            // SAFETY: we own the slot (EMPTY -> WRITING above).
            unsafe { slot.fault.get().write(f) };
            // SAFETY: as above, for its stack copy; written in place.
            capture(ctx, unsafe { &mut *slot.stack.get() }, stack_limit);
            slot.state.store(READY, Ordering::Release);
            return;
        }
        RING_FULL.fetch_add(1, Ordering::Relaxed);
    }

    /// One line on stderr for a fault the check passes on while it runs:
    /// the program's own (or one the check cannot explain).
    fn say_not_ours(addr: u64, code: u64) {
        let mut line = Line::new();
        line.put(b"accprof: coherence check: SIGSEGV at ");
        line.put_hex(addr);
        line.put(b" (instruction ");
        line.put_hex(code);
        line.put(b") is not on a page the check watches: passed on to the program\n");
        write_note(line.bytes());
    }
}

/// Signals numbered below this (Linux numbers them 1..=64).
const NSIG: usize = 65;

/// Held unless ignored: the program is being stopped or has crashed.
const USUAL: [libc::c_int; 9] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGABRT,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
];

/// Held only while their disposition is the default (which ends the
/// process). The real-time signals SIGRTMIN()..=SIGRTMAX() are added at
/// install time (their numbers are known only then).
const IF_DEFAULT: [libc::c_int; 13] = [
    libc::SIGPIPE,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGSYS,
    libc::SIGTRAP,
    libc::SIGSTKFLT,
    libc::SIGIO,
    libc::SIGPWR,
];

/// Which group a signal is in.
const NOT_OURS: u8 = 0;
const GROUP_USUAL: u8 = 1;
const GROUP_IF_DEFAULT: u8 = 2;

const MASK_WORDS: usize = std::mem::size_of::<libc::sigset_t>() / 8;

/// One signal's state: its group, whether our handler is installed for it,
/// and the disposition behind ours (handler address, flags and mask, as
/// the program would read them back).
struct Slot {
    group: AtomicU8,
    held: AtomicBool,
    handler: AtomicUsize,
    flags: AtomicU64,
    mask: [AtomicU64; MASK_WORDS],
}

static SLOTS: [Slot; NSIG] = [const {
    Slot {
        group: AtomicU8::new(NOT_OURS),
        held: AtomicBool::new(false),
        handler: AtomicUsize::new(libc::SIG_DFL),
        flags: AtomicU64::new(0),
        mask: [const { AtomicU64::new(0) }; MASK_WORDS],
    }
}; NSIG];

static INSTALLED: AtomicBool = AtomicBool::new(false);

fn slot(sig: libc::c_int) -> Option<&'static Slot> {
    usize::try_from(sig).ok().and_then(|i| SLOTS.get(i))
}

/// The system's `sigaction`, past the interposer: looked up when the
/// library loads (`next_fns`), never here.
pub(crate) static SIGACTION: Resolved<1> = Resolved::new();

type SigactionFn =
    unsafe extern "C" fn(libc::c_int, *const libc::sigaction, *mut libc::sigaction) -> libc::c_int;

/// Calls the system's `sigaction` (an atomic load and the call).
///
/// # Safety
/// As sigaction(2).
pub(crate) unsafe fn real_sigaction(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> libc::c_int {
    match SIGACTION.get(0) {
        0 => {
            sys::set_errno(libc::ENOSYS);
            -1
        }
        // SAFETY: the next definition of sigaction, with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, SigactionFn>(f)(sig, act, old) },
    }
}

fn store(s: &Slot, sa: &libc::sigaction) {
    // SAFETY: sigset_t is plain bytes, MASK_WORDS u64 long.
    let words: [u64; MASK_WORDS] = unsafe { std::mem::transmute_copy(&sa.sa_mask) };
    for (w, v) in s.mask.iter().zip(words) {
        w.store(v, Ordering::Relaxed);
    }
    s.flags.store(sa.sa_flags as u32 as u64, Ordering::Relaxed);
    s.handler.store(sa.sa_sigaction, Ordering::Release);
}

/// The disposition behind ours.
fn load(s: &Slot) -> libc::sigaction {
    // SAFETY: an all-zero sigaction is a valid value.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = s.handler.load(Ordering::Acquire);
    sa.sa_flags = s.flags.load(Ordering::Relaxed) as u32 as libc::c_int;
    let words: [u64; MASK_WORDS] = std::array::from_fn(|i| s.mask[i].load(Ordering::Relaxed));
    // SAFETY: as in `store`.
    sa.sa_mask = unsafe { std::mem::transmute_copy(&words) };
    sa
}

/// Installs our handler once per process, the system's `sigaction`
/// already resolved. A forked child inherits both the handlers and this
/// table, so nothing needs re-arming there; an exec'd image loads the
/// collector afresh and installs again.
pub fn install() {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    for sig in USUAL {
        take_over(sig, GROUP_USUAL);
    }
    for sig in IF_DEFAULT
        .into_iter()
        .chain(libc::SIGRTMIN()..=libc::SIGRTMAX())
    {
        take_over(sig, GROUP_IF_DEFAULT);
    }
}

/// Whether a signal of `group` is held with `handler` behind ours.
fn wants(sig: libc::c_int, group: u8, handler: libc::sighandler_t) -> bool {
    match group {
        _ if sig == libc::SIGSEGV || sig == libc::SIGBUS => true,
        GROUP_USUAL => handler != libc::SIG_IGN,
        GROUP_IF_DEFAULT => {
            handler == libc::SIG_DFL
                || (handler != libc::SIG_IGN && KEEP_PROGRAM_HANDLERS.load(Ordering::Acquire))
        }
        _ => false,
    }
}

fn take_over(sig: libc::c_int, group: u8) {
    let Some(s) = slot(sig) else { return };
    // SAFETY: sigaction with zeroed, then filled, structs we own; the
    // previous disposition is stored before our handler can run.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if real_sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return;
        }
        store(s, &old);
        s.group.store(group, Ordering::Release);
        if wants(sig, group, old.sa_sigaction) {
            hold(sig, s);
        }
    }
}

/// Installs our handler for `sig`, the disposition behind it already
/// stored.
fn hold(sig: libc::c_int, s: &Slot) -> libc::c_int {
    // A program's handler of the second group, held for the coherence
    // check, keeps its own restart and stack behaviour: a program that
    // expects EINTR from an alarm still gets it.
    let behind = s.handler.load(Ordering::Acquire);
    let flags = if s.group.load(Ordering::Acquire) == GROUP_IF_DEFAULT
        && behind != libc::SIG_DFL
        && behind != libc::SIG_IGN
    {
        let program = s.flags.load(Ordering::Relaxed) as u32 as libc::c_int;
        libc::SA_SIGINFO | (program & (libc::SA_ONSTACK | libc::SA_RESTART))
    } else {
        libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART
    };
    // SAFETY: a zeroed, then filled, struct we own.
    let r = unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler as *const () as usize;
        new.sa_flags = flags;
        libc::sigemptyset(&mut new.sa_mask);
        real_sigaction(sig, &new, std::ptr::null_mut())
    };
    if r == 0 {
        s.held.store(true, Ordering::Release);
    }
    r
}

/// The program's `sigaction(sig, act, old)`: for a signal we hold, the
/// disposition is kept behind ours and the program is told the one it
/// would have had; a disposition we do not hold for (an ignored signal,
/// a handler of the program's for a signal of the second group) is
/// installed for real, and ours comes back when the program returns to
/// one we hold for. `None`: not ours, the caller forwards the call.
///
/// libgfortran, for one, installs its backtrace handler for SIGSEGV,
/// SIGBUS, SIGILL, SIGFPE and SIGQUIT after the collector's, and re-raises
/// with `signal(sig, SIG_DFL)` from inside it: the re-raised signal comes
/// back here, finds the default recorded, and the trace ends before the
/// process dies. Calls made through the raw system call are not seen.
///
/// # Safety
/// `act` and `old` as for sigaction(2).
#[cfg_attr(test, allow(dead_code))]
pub(crate) unsafe fn intercept(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> Option<libc::c_int> {
    if !INSTALLED.load(Ordering::Acquire) {
        return None;
    }
    let s = slot(sig)?;
    let group = s.group.load(Ordering::Acquire);
    if group == NOT_OURS {
        return None;
    }
    let held = s.held.load(Ordering::Acquire);
    if !held {
        // The system has the program's disposition.
        if act.is_null() {
            return None;
        }
        // SAFETY: the caller's promise.
        let new = unsafe { &*act };
        if !wants(sig, group, new.sa_sigaction) {
            return None;
        }
        if !old.is_null() {
            // SAFETY: the caller's promise.
            if unsafe { real_sigaction(sig, std::ptr::null(), old) } != 0 {
                return Some(-1);
            }
        }
        store(s, new);
        return Some(hold(sig, s));
    }
    if !old.is_null() {
        // SAFETY: the caller's promise.
        unsafe { old.write(load(s)) };
    }
    if !act.is_null() {
        // SAFETY: the caller's promise.
        let new = unsafe { &*act };
        store(s, new);
        if !wants(sig, group, new.sa_sigaction) {
            s.held.store(false, Ordering::Release);
            // SAFETY: the program's own disposition, installed for real.
            return Some(unsafe { real_sigaction(sig, act, std::ptr::null_mut()) });
        }
        if group == GROUP_IF_DEFAULT && KEEP_PROGRAM_HANDLERS.load(Ordering::Acquire) {
            // Ours again, with the flags the new disposition asks.
            return Some(hold(sig, s));
        }
    }
    Some(0)
}

/// `signal(sig, handler)` for a signal [`intercept`] takes: glibc's BSD
/// semantics (the handler stays installed, interrupted calls restart).
/// `None`: not ours.
#[cfg_attr(test, allow(dead_code))]
pub(crate) fn intercept_signal(
    sig: libc::c_int,
    handler: libc::sighandler_t,
) -> Option<libc::sighandler_t> {
    // SAFETY: all-zero sigactions are valid values, filled below.
    let (mut act, mut old): (libc::sigaction, libc::sigaction) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: the mask is ours to fill (sigemptyset and sigaddset only
    // write its bits).
    unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaddset(&mut act.sa_mask, sig);
    }
    // SAFETY: pointers to our own structs.
    match unsafe { intercept(sig, &act, &mut old) }? {
        0 => Some(old.sa_sigaction),
        _ => Some(libc::SIG_ERR),
    }
}

thread_local! {
    /// Where the innermost [`handler`] running on this thread has its
    /// frame (0: none): code running below it, within
    /// [`HANDLER_REACH`], runs inside that handler. Kept as an address
    /// rather than a depth because a program's handler may leave by
    /// `siglongjmp` and never return to ours, which then cannot clear it:
    /// code that runs later runs above that frame, or on another stack, or,
    /// called deeper from further up, with the signal no longer blocked
    /// ([`HANDLER_SIGNAL`]).
    static HANDLER_FRAME: Cell<u64> = const { Cell::new(0) };
    /// The signal that innermost handler runs for, blocked while it runs
    /// (0: not known to be, SA_NODEFER). `siglongjmp` out of the handler
    /// restores the mask it was left with, which did not block it.
    static HANDLER_SIGNAL: Cell<i32> = const { Cell::new(0) };
}

/// How far below [`handler`]'s frame its callees' frames may lie (the
/// program's handler and what it calls): beyond this, or above the
/// frame, the code is not inside it (a frame on another stack, or one of
/// a program that left its handler by `siglongjmp`).
const HANDLER_REACH: u64 = 1 << 20;

/// An address in the caller's frame (a local's).
#[inline(always)]
fn frame_address() -> u64 {
    let mark = 0u8;
    std::hint::black_box(&mark) as *const u8 as u64
}

/// Whether this thread runs inside a handler of the collector's: its own
/// work, or a program's handler it passes a signal on to. While the
/// coherence check runs, every handler of the program runs so
/// ([`keep_program_handlers`]); a wrapped call made there
/// (`coherence::calls`) records its access without the walk that would
/// allocate. Two loads, and where a handler's frame is above, one raw
/// rt_sigprocmask.
pub(crate) fn in_handler() -> bool {
    let here = frame_address();
    let below = match HANDLER_FRAME.try_with(Cell::get) {
        Ok(top) if top != 0 => here < top && top - here < HANDLER_REACH,
        _ => false,
    };
    if !below {
        return false;
    }
    match HANDLER_SIGNAL.try_with(Cell::get).unwrap_or(0) {
        0 => true,
        sig => sys::sigmask(libc::SIG_BLOCK, 0).is_none_or(|m| m & sys::bit(sig) != 0),
    }
}

/// Set while the coherence check runs: the signals of the second group
/// stay held when the program installs a handler of its own, so that
/// [`handler`] runs it and [`in_handler`] knows.
static KEEP_PROGRAM_HANDLERS: AtomicBool = AtomicBool::new(false);

/// Holds, from now on, every signal of the second group that the program
/// handles (the coherence check starts): installed for real until now,
/// its handler goes behind ours, with its mask, flags and arguments
/// ([`pass_on`]). Called once, outside any handler.
pub(crate) fn keep_program_handlers() {
    KEEP_PROGRAM_HANDLERS.store(true, Ordering::Release);
    if !INSTALLED.load(Ordering::Acquire) {
        return;
    }
    for (sig, s) in SLOTS.iter().enumerate() {
        let Ok(sig) = libc::c_int::try_from(sig) else {
            continue;
        };
        let group = s.group.load(Ordering::Acquire);
        if group != GROUP_IF_DEFAULT || s.held.load(Ordering::Acquire) {
            continue;
        }
        // The disposition the program has now (another library may have
        // installed one past the interposer).
        // SAFETY: a zeroed sigaction we own, filled by the system.
        let old = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if real_sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            old
        };
        if wants(sig, group, old.sa_sigaction) {
            store(s, &old);
            hold(sig, s);
        }
    }
}

/// Whether the kernel raised `sig` for a fault of the interrupted thread
/// (the instruction faults again if the handler returns).
fn is_fault(sig: libc::c_int, info: *const libc::siginfo_t) -> bool {
    let code = if info.is_null() {
        0
    } else {
        // SAFETY: the kernel's siginfo, read as plain fields.
        unsafe { (*info).si_code }
    };
    code > 0
        && matches!(
            sig,
            libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP
        )
}

/// The collector's handler, for every signal it holds: SIGSEGV and SIGBUS
/// go to the coherence check first; a signal the process dies of flushes
/// the trace with its ending; one the program handles flushes what was
/// recorded (for a crash or a stop) and goes on to its handler.
extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let outer = HANDLER_FRAME
        .try_with(|f| f.replace(frame_address()))
        .unwrap_or(0);
    let outer_sig = HANDLER_SIGNAL.try_with(|f| f.replace(sig)).unwrap_or(0);
    handle(sig, info, ctx);
    let _ = HANDLER_FRAME.try_with(|f| f.set(outer));
    let _ = HANDLER_SIGNAL.try_with(|f| f.set(outer_sig));
}

/// [`handler`]'s work.
fn handle(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(s) = slot(sig) else { return };
    // The interrupted code must find errno as it left it (rule 7).
    let errno = sys::errno();
    if (sig == libc::SIGSEGV || sig == libc::SIGBUS) && fault::claim(sig, info, ctx) {
        sys::set_errno(errno);
        return;
    }
    let behind = load(s);
    let h = behind.sa_sigaction;
    if h == libc::SIG_DFL || (h == libc::SIG_IGN && is_fault(sig, info)) {
        // The process dies of this signal: note it and write the trace's end.
        crash::note(sig, info);
        flush::end_by_signal(sig);
        // Restoring the default and re-raising: the signal is blocked
        // while we run, so it is delivered with the default action as soon
        // as we return (for faults, the instruction faults again).
        // SAFETY: a zeroed sigaction asking for the default.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            real_sigaction(sig, &dfl, std::ptr::null_mut());
        }
        sys::raise(sig);
    } else if h != libc::SIG_IGN {
        if s.group.load(Ordering::Relaxed) == GROUP_USUAL {
            // A crash or a stop the program handles: what was recorded goes
            // to disk first, in case its handler never returns.
            crash::note(sig, info);
            flush::flush_from_signal();
        }
        pass_on(sig, s, &behind, info, ctx);
    }
    sys::set_errno(errno);
}

/// Calls the program's handler the way the kernel would have: with the
/// program's `sa_mask` blocked, and `sig` blocked too unless it asked for
/// SA_NODEFER (then `sig` is unblocked: ours runs with it blocked), the
/// disposition reset first for SA_RESETHAND, and the arguments its flags
/// ask for. The mask is set with the raw rt_sigprocmask and put back as it
/// was once the handler returns (the kernel would restore it on return
/// from ours as well; a handler that never returns keeps what the kernel
/// would have given it).
fn pass_on(
    sig: libc::c_int,
    s: &Slot,
    behind: &libc::sigaction,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    let flags = behind.sa_flags;
    if flags & libc::SA_RESETHAND != 0 {
        s.handler.store(libc::SIG_DFL, Ordering::Release);
        s.flags.store(0, Ordering::Relaxed);
    }
    // SAFETY: sigset_t is plain bytes; its first word holds signals 1..=64,
    // the kernel's whole set.
    let words: [u64; MASK_WORDS] = unsafe { std::mem::transmute_copy(&behind.sa_mask) };
    let program_mask = words.first().copied().unwrap_or(0);
    let this = sys::bit(sig);
    let old = if flags & libc::SA_NODEFER != 0 {
        // `sig` is not blocked in the program's handler: `in_handler`
        // cannot ask the mask.
        let _ = HANDLER_SIGNAL.try_with(|f| f.set(0));
        let old = sys::sigmask(libc::SIG_BLOCK, program_mask & !this);
        sys::sigmask(libc::SIG_UNBLOCK, this);
        old
    } else {
        sys::sigmask(libc::SIG_BLOCK, program_mask | this)
    };
    let h = behind.sa_sigaction;
    // SAFETY: the handler the program installed, with the arguments its
    // flags say it takes.
    unsafe {
        if flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(h);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
            f(sig);
        }
    }
    if let Some(old) = old {
        sys::sigmask(libc::SIG_SETMASK, old);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    use super::flush::wait_while_progressing;

    fn pause() {
        std::thread::sleep(Duration::from_millis(1));
    }

    /// Code below the handler's frame runs inside it; outside a handler,
    /// above its frame (left by `siglongjmp`) or far below it, it does not.
    #[test]
    fn inside_a_handler_is_below_its_frame_and_within_reach() {
        #[inline(never)]
        fn callee() -> bool {
            super::in_handler()
        }
        assert!(!callee(), "no handler yet");
        let frame = super::frame_address();
        super::HANDLER_FRAME.with(|f| f.set(frame));
        assert!(callee(), "called from the handler's frame");
        super::HANDLER_FRAME.with(|f| f.set(frame + super::HANDLER_REACH + 4096));
        assert!(!callee(), "far below a frame that was left long ago");
        super::HANDLER_FRAME.with(|f| f.set(frame - 4096));
        assert!(!callee(), "above the handler's frame: it was left");
        // The signal the handler runs for is blocked there; left by
        // siglongjmp, the mask no longer blocks it.
        let usr2 = super::sys::bit(libc::SIGUSR2);
        super::HANDLER_FRAME.with(|f| f.set(frame));
        super::HANDLER_SIGNAL.with(|f| f.set(libc::SIGUSR2));
        let was = super::sys::sigmask(libc::SIG_UNBLOCK, usr2).expect("mask");
        assert!(!callee(), "the signal is not blocked: the handler was left");
        super::sys::sigmask(libc::SIG_BLOCK, usr2);
        assert!(callee(), "blocked, as while its handler runs");
        super::sys::sigmask(libc::SIG_SETMASK, was);
        super::HANDLER_SIGNAL.with(|f| f.set(0));
        super::HANDLER_FRAME.with(|f| f.set(0));
        assert!(!callee());
    }

    #[test]
    fn a_writer_that_keeps_writing_is_waited_for_past_the_stall_limit() {
        let start = Instant::now();
        let written = Cell::new(0u64);
        let done = || start.elapsed() >= Duration::from_millis(120);
        let ok = wait_while_progressing(
            Duration::from_millis(30),
            Duration::from_secs(10),
            done,
            || {
                written.set(written.get() + 1);
                written.get()
            },
            pause,
        );
        assert!(ok, "a progressing writer must be waited for");
        assert!(start.elapsed() >= Duration::from_millis(120));
    }

    #[test]
    fn a_stalled_writer_is_given_up_after_the_stall_limit() {
        let start = Instant::now();
        let ok = wait_while_progressing(
            Duration::from_millis(40),
            Duration::from_secs(10),
            || false,
            || 7,
            pause,
        );
        let waited = start.elapsed();
        assert!(!ok);
        assert!(waited >= Duration::from_millis(40), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }

    #[test]
    fn the_cap_ends_even_a_progressing_wait() {
        let start = Instant::now();
        let n = Cell::new(0u64);
        let ok = wait_while_progressing(
            Duration::from_millis(50),
            Duration::from_millis(100),
            || false,
            || {
                n.set(n.get() + 1);
                n.get()
            },
            pause,
        );
        let waited = start.elapsed();
        assert!(!ok);
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }

    /// A line to a full pipe nobody reads is dropped at once, not waited
    /// for; one to a pipe with room is written whole.
    #[test]
    fn a_note_to_a_full_pipe_is_dropped_without_waiting() {
        let mut p = [0i32; 2];
        // SAFETY: pipe2 fills two descriptors we own; dup/dup2 swap fd 2
        // for this test's pipe and back (the test harness captures the
        // output of tests through its own buffers, not fd 2).
        unsafe {
            assert_eq!(libc::pipe2(p.as_mut_ptr(), libc::O_NONBLOCK), 0);
            let chunk = [b'x'; 4096];
            while super::sys::write(p[1], &chunk) > 0 {}
            while super::sys::write(p[1], &chunk[..1]) > 0 {}
            libc::fcntl(p[1], libc::F_SETFL, 0);
            let saved = libc::dup(2);
            libc::dup2(p[1], 2);
            let start = Instant::now();
            super::write_note(b"accprof: to a full pipe\n");
            let took = start.elapsed();
            // Room for the next line.
            let mut buf = [0u8; 65536];
            let drained = libc::read(p[0], buf.as_mut_ptr().cast(), buf.len());
            super::write_note(b"accprof: with room\n");
            libc::dup2(saved, 2);
            libc::close(saved);
            assert!(took < Duration::from_secs(1), "{took:?}");
            assert!(drained > 0);
            let mut rest = vec![0u8; 1 << 20];
            let mut got = Vec::new();
            loop {
                let n = libc::read(p[0], rest.as_mut_ptr().cast(), rest.len());
                if n <= 0 {
                    break;
                }
                got.extend_from_slice(&rest[..n as usize]);
            }
            libc::close(p[0]);
            libc::close(p[1]);
            let text = String::from_utf8_lossy(&got);
            assert!(!text.contains("to a full pipe"), "{text}");
            assert!(text.contains("accprof: with room\n"), "{text}");
        }
    }
}
