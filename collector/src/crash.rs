//! What a fatal signal hit, as the signal handler leaves it for the writer
//! thread, which turns it into the trace's `Crash` record (before the `End`
//! record it explains).
//!
//! The handler side ([`note`]) is async-signal-safe: atomics and a
//! thread-local cell without a destructor, no allocation, no lock. A fault
//! noted stays: a program's handler that ends with `abort()` after a
//! SIGSEGV still died of the SIGSEGV. Any other signal is replaced by the
//! next one (a SIGINT the program handled and survived is not what it
//! died of later).
//!
//! The driver call in flight is kept per thread by whoever follows driver
//! calls (the CUPTI callbacks, at their enter and exit sites): a thread
//! that dies inside one has its enter without its exit.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

thread_local! {
    /// The driver call this thread is inside: its callback id + 1 in the
    /// high half, its correlation id in the low half; 0 when none.
    static DRIVER_CALL: Cell<u64> = const { Cell::new(0) };
}

/// A driver call was entered on this thread.
pub(crate) fn driver_call_entered(cbid: u32, correlation: u32) {
    let v = (u64::from(cbid) + 1) << 32 | u64::from(correlation);
    let _ = DRIVER_CALL.try_with(|c| c.set(v));
}

/// The driver call entered last on this thread returned.
pub(crate) fn driver_call_left() {
    let _ = DRIVER_CALL.try_with(|c| c.set(0));
}

/// Held while a [`note`] writes the fields below (a second thread's
/// signal at that instant is not noted).
static NOTING: AtomicBool = AtomicBool::new(false);
/// Set by [`note`] for a fault the kernel raised (the thread may have died
/// inside the CUDA driver, holding its locks): from then on the writer
/// does not call into CUPTI.
static FAULT: AtomicBool = AtomicBool::new(false);
/// Set once the fields are complete; the writer reads them after.
static READY: AtomicBool = AtomicBool::new(false);
static TIME_NS: AtomicU64 = AtomicU64::new(0);
static THREAD: AtomicU32 = AtomicU32::new(0);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
static CODE: AtomicI32 = AtomicI32::new(0);
/// The faulting address + 1 (0: none).
static ADDRESS: AtomicU64 = AtomicU64::new(0);
static DRIVER: AtomicU64 = AtomicU64::new(0);

/// Notes a fatal signal delivered to this thread, unless a fault was
/// noted already. Async-signal-safe.
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
    TIME_NS.store(crate::clock::now_ns(), Ordering::Relaxed);
    // SAFETY: gettid has no preconditions; async-signal-safe.
    THREAD.store(unsafe { libc::gettid() } as u32, Ordering::Relaxed);
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

/// Whether a fault was noted: the device side must not be asked for its
/// records (a flush of CUPTI's buffers from a process whose thread died
/// inside the driver can wait forever on the driver's locks, and the host
/// records would then never reach the file).
pub(crate) fn faulted() -> bool {
    FAULT.load(Ordering::Acquire)
}

/// What [`note`] left, once: (time, thread, signal, code, address, driver
/// call as (callback id, correlation)).
pub(crate) struct Noted {
    pub time_ns: u64,
    pub thread: u32,
    pub signal: i32,
    pub code: i32,
    pub address: Option<u64>,
    pub driver_call: Option<(u32, u32)>,
}

/// The crash noted since the last call, if any (for the writer).
pub(crate) fn take() -> Option<Noted> {
    if !READY.swap(false, Ordering::AcqRel) {
        return None;
    }
    let address = ADDRESS.load(Ordering::Relaxed);
    let driver = DRIVER.load(Ordering::Relaxed);
    Some(Noted {
        time_ns: TIME_NS.load(Ordering::Relaxed),
        thread: THREAD.load(Ordering::Relaxed),
        signal: SIGNAL.load(Ordering::Relaxed),
        code: CODE.load(Ordering::Relaxed),
        address: (address != 0).then(|| address - 1),
        driver_call: (driver != 0).then(|| ((driver >> 32) as u32 - 1, driver as u32)),
    })
}

/// In a forked child: the parent's crash is not the child's.
pub(crate) fn reset_after_fork() {
    NOTING.store(false, Ordering::Release);
    READY.store(false, Ordering::Release);
    FAULT.store(false, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_noted_stays_and_is_taken_once_with_the_driver_call_in_flight() {
        reset_after_fork();
        // A signal the program survives is replaced by the next.
        note(libc::SIGINT, std::ptr::null());
        assert_eq!(take().map(|n| n.signal), Some(libc::SIGINT));
        driver_call_entered(307, 42);
        // SAFETY: an all-zero siginfo is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        info.si_code = 1;
        note(libc::SIGSEGV, &info);
        driver_call_left();
        note(libc::SIGABRT, std::ptr::null());
        let n = take().expect("noted");
        assert_eq!(n.signal, libc::SIGSEGV);
        assert_eq!(n.code, 1);
        assert_eq!(n.address, Some(0));
        assert_eq!(n.driver_call, Some((307, 42)));
        // SAFETY: gettid has no preconditions.
        assert_eq!(n.thread, unsafe { libc::gettid() } as u32);
        assert!(take().is_none());
        assert!(faulted());
        reset_after_fork();
        assert!(!faulted());
    }
}
