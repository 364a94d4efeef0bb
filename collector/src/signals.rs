//! Flush on fatal and terminating signals, then hand the signal on.
//!
//! The handler only does async-signal-safe things: it says how the process
//! ends through an atomic, asks the writer thread for its final flush
//! through an eventfd and waits for it with a bound, then calls the handler
//! that was installed before ours (or restores the default and re-raises),
//! so the program dies, or carries on, exactly as it would have.
//!
//! Two groups of signals:
//! - the usual ways to stop or crash a program, handled unless the program
//!   ignores them (then they stay ignored);
//! - every other signal whose default action ends the process, handled only
//!   when its disposition is the default when we install: a program (or a
//!   runtime loaded before us) that handles one, uses it for itself, and a
//!   handler installed later replaces ours anyway.
//!
//! Left alone: SIGKILL and SIGSTOP (cannot be caught), SIGCHLD, SIGCONT,
//! SIGURG, SIGWINCH and the stop signals (their default does not end the
//! process), and glibc's own real-time signals below `SIGRTMIN()` (thread
//! cancellation and set*id broadcasts; `SIGRTMIN()` already excludes them).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Signals numbered below this (Linux numbers them 1..=64).
const NSIG: usize = 65;

/// Handled unless ignored: the program is being stopped or has crashed.
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

/// Handled only while their disposition is the default (which ends the
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

/// The disposition each signal had before ours (its `sa_sigaction`), and
/// whether that handler takes three arguments. Written for a signal before
/// our handler is installed for it, read only by that handler afterwards.
static PREVIOUS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
static PREVIOUS_SIGINFO: [AtomicBool; NSIG] = [const { AtomicBool::new(false) }; NSIG];
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Installs our handler once per process. A forked child inherits both the
/// handlers and this table, so nothing needs re-arming there; an exec'd
/// image loads the collector afresh and installs again.
pub fn install() {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    for sig in USUAL {
        take_over(sig, false);
    }
    for sig in IF_DEFAULT
        .into_iter()
        .chain(libc::SIGRTMIN()..=libc::SIGRTMAX())
    {
        take_over(sig, true);
    }
}

fn take_over(sig: libc::c_int, only_if_default: bool) {
    let Some(i) = usize::try_from(sig).ok().filter(|&i| i < NSIG) else {
        return;
    };
    // SAFETY: sigaction with zeroed, then filled, structs we own; the
    // previous disposition is stored before our handler can run.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return;
        }
        // Leave ignored signals ignored: the program chose that.
        if old.sa_sigaction == libc::SIG_IGN
            || (only_if_default && old.sa_sigaction != libc::SIG_DFL)
        {
            return;
        }
        PREVIOUS[i].store(old.sa_sigaction, Ordering::Release);
        PREVIOUS_SIGINFO[i].store(old.sa_flags & libc::SA_SIGINFO != 0, Ordering::Release);
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut new.sa_mask);
        libc::sigaction(sig, &new, std::ptr::null_mut());
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(i) = usize::try_from(sig).ok().filter(|&i| i < NSIG) else {
        return;
    };
    // SAFETY: errno is this thread's; the interrupted code must find it
    // as it left it.
    let errno = unsafe { *libc::__errno_location() };
    let old = PREVIOUS[i].load(Ordering::Acquire);
    if old == libc::SIG_DFL {
        // The process dies of this signal: write the trace's end.
        crate::end_by_signal(sig);
        // SAFETY: restoring the default and re-raising: the signal is blocked
        // while we run, so it is delivered with the default action as soon
        // as we return (for faults, the instruction faults again).
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    } else if old != libc::SIG_IGN {
        crate::flush_from_signal();
        // SAFETY: calling the program's own handler the way the kernel would
        // have, with the flags it was installed with.
        unsafe {
            if PREVIOUS_SIGINFO[i].load(Ordering::Acquire) {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(old);
                f(sig, info, ctx);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(old);
                f(sig);
            }
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}
