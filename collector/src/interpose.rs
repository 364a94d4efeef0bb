//! The calls that end the process or replace its image, interposed so the
//! trace is complete on disk before they take effect: `exit` (to learn the
//! status), `_exit` and `_Exit` (no atexit handler runs after them), and
//! the exec family (the new image would start a trace of its own under the
//! same pid, and the old one's buffered records would be lost).
//!
//! `sigaction` and `signal` too: a handler the program (or a runtime
//! library such as libgfortran) installs after the collector for a signal
//! the collector handles must not replace the collector's; it is kept
//! behind it instead (see `signals`). Other signals go straight to the
//! system.
//!
//! Each forwards to the next definition (`dlsym(RTLD_NEXT)`, resolved when
//! the library loads), with its arguments untouched. `_exit`, `_Exit`, the
//! exec family, `sigaction` and `signal` may be called from a program's
//! signal handler: past their first line they call only into `signals`,
//! and they read the function they forward to with one load, never a
//! lookup (see `signals`). The variadic
//! `execl`, `execlp` and `execle` cannot be written in Rust: on x86-64 a
//! naked trampoline saves the argument registers, runs the hook, restores
//! them and jumps to the real function, so the caller's stack (where the
//! arguments past the sixth are) is the one the real function sees.

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::next_fns::NextFns;
use crate::signals::{exit_through, no_function as not_found};

/// The real functions, by index into [`NAMES`].
static REAL: NextFns<{ NAMES.len() }> = NextFns::new(NAMES);

const NAMES: [&CStr; 12] = [
    c"exit", c"_exit", c"_Exit", c"execve", c"execv", c"execvp", c"execvpe", c"fexecve", c"execl",
    c"execlp", c"execle", c"signal",
];
const EXIT: usize = 0;
const UNDERSCORE_EXIT: usize = 1;
const UNDERSCORE_UPPER_EXIT: usize = 2;
const EXECVE: usize = 3;
const EXECV: usize = 4;
const EXECVP: usize = 5;
const EXECVPE: usize = 6;
const FEXECVE: usize = 7;
const SIGNAL: usize = 11;
#[cfg(target_arch = "x86_64")]
const EXECL: usize = 8;
#[cfg(target_arch = "x86_64")]
const EXECLP: usize = 9;
#[cfg(target_arch = "x86_64")]
const EXECLE: usize = 10;

/// Looks every real function up once; called when the library loads.
pub(crate) fn resolve_all() {
    REAL.resolve_all();
}

type ExecveFn =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
type ExecvFn = unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;
type FexecveFn = unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int;

/// The real function `i`, as looked up when the library loaded: one load,
/// never a lookup (these calls may come from a signal handler). Called
/// before that (from another library's constructor, when no handler of
/// ours exists), it has everything looked up first.
macro_rules! real {
    ($i:expr) => {{
        REAL.ready($i)
    }};
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn exit(status: c_int) -> ! {
    let _ = std::panic::catch_unwind(|| {
        one_exit_at_a_time();
        crate::ending::exit_called(status)
    });
    exit_through(real!(EXIT), status)
}

/// The thread that called `exit` first (its kernel thread id), 0 before.
static EXITING: AtomicUsize = AtomicUsize::new(0);

/// How long a second thread's `exit` waits for the first one to end the
/// process before it goes on as it would without the collector.
const SECOND_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `exit` from a second thread while another runs the exit handlers (an
/// OpenACC runtime's fatal error reported at once by the thread that
/// waited and by the driver's callback thread): both would run the
/// remaining handlers and destructors at the same time, which C leaves
/// undefined. Without the collector the first one is over in an instant;
/// with it, writing the trace at exit widens that window enough for the
/// two to collide (heap corruption, SIGSEGV). So the second caller waits
/// for the first to end the process, at most [`SECOND_EXIT_WAIT`] (in case
/// the first waits on it), and only then goes on.
fn one_exit_at_a_time() {
    // SAFETY: gettid has no arguments.
    let me = unsafe { libc::syscall(libc::SYS_gettid) } as usize;
    let first = match EXITING.compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => return,
        Err(t) if t == me => return,
        Err(t) => t,
    };
    // SAFETY: plain system calls; signal 0 only checks that the thread
    // exists in this process (it does not in a forked child, where the
    // first caller's id was inherited).
    let alive =
        || unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), first as libc::pid_t, 0) == 0 };
    let start = std::time::Instant::now();
    while alive() && start.elapsed() < SECOND_EXIT_WAIT {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    let _ = std::panic::catch_unwind(|| crate::signals::flush::quick_exit(status));
    exit_through(real!(UNDERSCORE_EXIT), status)
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    let _ = std::panic::catch_unwind(|| crate::signals::flush::quick_exit(status));
    exit_through(real!(UNDERSCORE_UPPER_EXIT), status)
}

fn before_exec() {
    let _ = std::panic::catch_unwind(crate::signals::flush::before_exec);
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    before_exec();
    match real!(EXECVE) {
        0 => not_found(),
        // SAFETY: the next execve, called with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, ExecveFn>(f)(path, argv, envp) },
    }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    before_exec();
    match real!(EXECVPE) {
        0 => not_found(),
        // SAFETY: the next execvpe, called with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, ExecveFn>(f)(file, argv, envp) },
    }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    before_exec();
    match real!(EXECV) {
        0 => not_found(),
        // SAFETY: the next execv, called with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, ExecvFn>(f)(path, argv) },
    }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    before_exec();
    match real!(EXECVP) {
        0 => not_found(),
        // SAFETY: the next execvp, called with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, ExecvFn>(f)(file, argv) },
    }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    before_exec();
    match real!(FEXECVE) {
        0 => not_found(),
        // SAFETY: the next fexecve, called with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, FexecveFn>(f)(fd, argv, envp) },
    }
}

/// Runs the exec hook for a variadic trampoline and returns the real
/// function to jump to (0 when there is none: the trampoline then returns
/// -1 itself).
#[cfg(target_arch = "x86_64")]
extern "C" fn variadic_hook(i: usize) -> usize {
    before_exec();
    real!(i)
}

#[cfg(target_arch = "x86_64")]
extern "C" fn variadic_missing() -> c_int {
    not_found()
}

/// A trampoline for a variadic exec function: rdi, rsi, rdx, rcx, r8 and r9
/// hold the first six arguments, the rest are on the caller's stack, and al
/// counts vector registers used. All are saved (seven pushes leave the
/// stack 16-byte aligned for the call), the hook runs, all are restored and
/// the real function is jumped to, as if called directly.
#[cfg(target_arch = "x86_64")]
macro_rules! variadic_exec {
    ($name:ident, $index:expr) => {
        /// # Safety
        /// As the C function.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name() {
            std::arch::naked_asm!(
                "push rdi",
                "push rsi",
                "push rdx",
                "push rcx",
                "push r8",
                "push r9",
                "push rax",
                "mov edi, {index}",
                "call {hook}",
                "mov r11, rax",
                "pop rax",
                "pop r9",
                "pop r8",
                "pop rcx",
                "pop rdx",
                "pop rsi",
                "pop rdi",
                "test r11, r11",
                "jz {missing}",
                "jmp r11",
                index = const $index,
                hook = sym variadic_hook,
                missing = sym variadic_missing,
            )
        }
    };
}

#[cfg(target_arch = "x86_64")]
variadic_exec!(execl, EXECL);
#[cfg(target_arch = "x86_64")]
variadic_exec!(execlp, EXECLP);
#[cfg(target_arch = "x86_64")]
variadic_exec!(execle, EXECLE);

type SignalFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    if crate::signals::SIGACTION.get(0) == 0 {
        // Called before the library loaded (by another library's
        // constructor, when no handler of ours exists).
        crate::signals::SIGACTION.set(0, crate::next_fns::next(c"sigaction"));
    }
    // SAFETY: the caller's arguments, as sigaction(2) takes them.
    if let Some(r) = unsafe { crate::signals::intercept(sig, act, old) } {
        return r;
    }
    // SAFETY: as above.
    unsafe { crate::signals::real_sigaction(sig, act, old) }
}

/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if let Some(old) = crate::signals::intercept_signal(sig, handler) {
        return old;
    }
    match real!(SIGNAL) {
        0 => {
            not_found();
            libc::SIG_ERR
        }
        // SAFETY: the next signal, called with the caller's arguments.
        f => unsafe { std::mem::transmute::<usize, SignalFn>(f)(sig, handler) },
    }
}
