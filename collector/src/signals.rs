//! Flush on fatal and terminating signals, then hand the signal on.
//!
//! The handler only does async-signal-safe things: it asks the writer thread
//! for a flush through an eventfd and waits for it with a bound, then calls
//! the handler that was installed before ours (or restores the default and
//! re-raises), so the program dies, or carries on, exactly as it would have.

use std::sync::atomic::{AtomicBool, Ordering};

const SIGNALS: [libc::c_int; 9] = [
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

/// The previous dispositions, indexed like SIGNALS. Written once before our
/// handlers are installed, read only afterwards.
static mut PREVIOUS: [std::mem::MaybeUninit<libc::sigaction>; 9] =
    [const { std::mem::MaybeUninit::uninit() }; 9];
static INSTALLED: AtomicBool = AtomicBool::new(false);

pub fn install() {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    for (i, &sig) in SIGNALS.iter().enumerate() {
        // SAFETY: sigaction with a zeroed, then filled, struct we own; the
        // previous disposition is stored before our handler can run, and
        // PREVIOUS is never written again after install().
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            // Leave ignored signals ignored: the program chose that.
            if old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            PREVIOUS[i] = std::mem::MaybeUninit::new(old);
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = handler as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(sig, &new, std::ptr::null_mut());
        }
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    crate::flush_from_signal();
    let Some(i) = SIGNALS.iter().position(|&s| s == sig) else {
        return;
    };
    // SAFETY: PREVIOUS[i] was initialised by install() before this handler
    // was installed for `sig`, and is never written afterwards.
    let old = unsafe { PREVIOUS[i].assume_init() };
    if old.sa_sigaction == libc::SIG_DFL {
        // SAFETY: restoring the default and re-raising: the signal is blocked
        // while we run, so it is delivered with the default action as soon
        // as we return (for faults, the instruction faults again).
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    } else if old.sa_sigaction != libc::SIG_IGN {
        // SAFETY: calling the program's own handler the way the kernel would
        // have, with the flags it was installed with.
        unsafe {
            if old.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(old.sa_sigaction);
                f(sig, info, ctx);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
                f(sig);
            }
        }
    }
}
