//! The collector's signal handler, the one mechanism for every signal it
//! handles: flush on fatal and terminating signals, note what a crash hit
//! (see `crash`), give SIGSEGV/SIGBUS to the coherence check first (a
//! registered hook), then hand the signal on to the program's disposition.
//!
//! The handler stays installed whatever the program or its runtime
//! libraries do later: `sigaction` and `signal` are interposed (see
//! `interpose`), and for a signal we hold, the disposition the program asks
//! for is recorded here as the one to chain to, and is what it reads back.
//! libgfortran, for one, installs its backtrace handler for SIGSEGV, SIGBUS,
//! SIGILL, SIGFPE and SIGQUIT after the collector's, and re-raises with
//! `signal(sig, SIG_DFL)` from inside it: the re-raised signal comes back
//! here, finds the default recorded, and the trace ends before the process
//! dies. Calls made through the raw system call are not seen.
//!
//! Two groups of signals:
//! - the usual ways to stop or crash a program ([`USUAL`]), held unless the
//!   program ignores them (then they stay ignored, for real: an ignored
//!   signal is inherited across exec, a handled one is not);
//! - every other signal whose default action ends the process
//!   ([`IF_DEFAULT`]), held only while its disposition is the default: a
//!   program that handles one (a timer, a profiler's SIGPROF) uses it for
//!   itself, so its handler is installed for real, without us in between.
//!
//! SIGSEGV and SIGBUS are held whatever their disposition (the coherence
//! check needs them; a fault with the signal ignored kills the process as
//! if it were not).
//!
//! Left alone: SIGKILL and SIGSTOP (cannot be caught), SIGCHLD, SIGCONT,
//! SIGURG, SIGWINCH and the stop signals (their default does not end the
//! process), and glibc's own real-time signals below `SIGRTMIN()` (thread
//! cancellation and set*id broadcasts; `SIGRTMIN()` already excludes them).
//!
//! What the handler reaches keeps to the rules for signal handlers: no
//! allocation, no lock, no `dlsym` (the system's `sigaction` is looked up
//! at install), raw system calls and atomics only. Each function it calls
//! says so in its doc.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use crate::next_fns::NextFns;

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

/// A fault hook: true when it took the signal as its own (the coherence
/// check's protected pages), false to pass it on. 0: none.
static FAULT_HOOK: AtomicUsize = AtomicUsize::new(0);

pub(crate) type FaultHook = fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) -> bool;

/// Registers the hook SIGSEGV and SIGBUS go to first (the coherence check,
/// which sits above this module and is not named here).
pub(crate) fn set_fault_hook(hook: FaultHook) {
    FAULT_HOOK.store(hook as usize, Ordering::Release);
}

fn slot(sig: libc::c_int) -> Option<&'static Slot> {
    usize::try_from(sig).ok().and_then(|i| SLOTS.get(i))
}

/// The system's `sigaction`, past our interposer: looked up at install,
/// never in the handler.
static REAL: NextFns<1> = NextFns::new([c"sigaction"]);

type SigactionFn =
    unsafe extern "C" fn(libc::c_int, *const libc::sigaction, *mut libc::sigaction) -> libc::c_int;

/// Calls the system's `sigaction`. Async-signal-safe once [`install`] has
/// looked it up (an atomic load and the call).
///
/// # Safety
/// As sigaction(2).
pub(crate) unsafe fn real_sigaction(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> libc::c_int {
    match REAL.get(0) {
        0 => {
            // SAFETY: errno is this thread's.
            unsafe { *libc::__errno_location() = libc::ENOSYS };
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

/// The disposition behind ours. Async-signal-safe.
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

/// Installs our handler once per process. A forked child inherits both the
/// handlers and this table, so nothing needs re-arming there; an exec'd
/// image loads the collector afresh and installs again.
pub fn install() {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    REAL.get(0);
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
        GROUP_IF_DEFAULT => handler == libc::SIG_DFL,
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
    // SAFETY: a zeroed, then filled, struct we own.
    let r = unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
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
    // SAFETY: the mask is ours to fill.
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

/// Whether the kernel raised `sig` for a fault of the interrupted thread
/// (the instruction faults again if the handler returns). Async-signal-safe.
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

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(s) = slot(sig) else { return };
    // SAFETY: errno is this thread's; the interrupted code must find it
    // as it left it.
    let errno = unsafe { *libc::__errno_location() };
    if sig == libc::SIGSEGV || sig == libc::SIGBUS {
        let hook = FAULT_HOOK.load(Ordering::Acquire);
        if hook != 0 {
            // SAFETY: only a `FaultHook` is ever stored there.
            let hook: FaultHook = unsafe { std::mem::transmute::<usize, FaultHook>(hook) };
            if hook(sig, info, ctx) {
                // SAFETY: as above.
                unsafe { *libc::__errno_location() = errno };
                return;
            }
        }
    }
    let behind = load(s);
    let h = behind.sa_sigaction;
    if h == libc::SIG_DFL || (h == libc::SIG_IGN && is_fault(sig, info)) {
        // The process dies of this signal: note it and write the trace's end.
        crate::crash::note(sig, info);
        crate::end_by_signal(sig);
        // SAFETY: restoring the default and re-raising: the signal is
        // blocked while we run, so it is delivered with the default action
        // as soon as we return (for faults, the instruction faults again).
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            real_sigaction(sig, &dfl, std::ptr::null_mut());
            libc::raise(sig);
        }
    } else if h != libc::SIG_IGN {
        if s.group.load(Ordering::Relaxed) == GROUP_USUAL {
            // A crash or a stop the program handles: what was recorded goes
            // to disk first, in case its handler never returns.
            crate::crash::note(sig, info);
            crate::flush_from_signal();
        }
        chain(sig, s, &behind, info, ctx);
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Calls the program's handler the way the kernel would have: with its
/// mask added to the blocked signals (the kernel restores the mask when
/// our handler returns), `sig` unblocked for SA_NODEFER, the disposition
/// reset first for SA_RESETHAND, and the arguments its flags ask for.
/// Async-signal-safe (sigprocmask and atomics).
fn chain(
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
    // SAFETY: sigprocmask with sets we own; sigaddset on a set we own.
    unsafe {
        libc::sigprocmask(libc::SIG_BLOCK, &behind.sa_mask, std::ptr::null_mut());
        let mut this: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut this);
        libc::sigaddset(&mut this, sig);
        let how = if flags & libc::SA_NODEFER != 0 {
            libc::SIG_UNBLOCK
        } else {
            libc::SIG_BLOCK
        };
        libc::sigprocmask(how, &this, std::ptr::null_mut());
    }
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
}
