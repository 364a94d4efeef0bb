//! What a fatal signal hit, as the signal handler leaves it for the writer
//! thread, which turns it into the trace's `Crash` record (before the `End`
//! record it explains): the reading side. The handler side (`note`, and
//! the fields it fills) is in `signals`.
//!
//! The driver call in flight is kept per thread by whoever follows driver
//! calls (the CUPTI callbacks, at their enter and exit sites): a thread
//! that dies inside one has its enter without its exit.

use std::sync::atomic::Ordering;

#[cfg(test)]
use crate::signals::crash::note;
use crate::signals::crash::{
    ADDRESS, CODE, DRIVER, DRIVER_CALL, FAULT, NOTING, READY, SIGNAL, THREAD, TIME_NS,
};

/// A driver call was entered on this thread.
pub(crate) fn driver_call_entered(cbid: u32, correlation: u32) {
    let v = (u64::from(cbid) + 1) << 32 | u64::from(correlation);
    let _ = DRIVER_CALL.try_with(|c| c.set(v));
}

/// The driver call entered last on this thread returned.
pub(crate) fn driver_call_left() {
    let _ = DRIVER_CALL.try_with(|c| c.set(0));
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
