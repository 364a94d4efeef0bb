//! The collector's life: uninitialized -> enabled -> stopping -> disabled,
//! kept in one atomic and advanced only by compare-exchange in cold code.
//! Every hot path asks `enabled()` first; once disabled, nothing is recorded
//! and the program goes on as if the collector were not there.
//!
//! The atomic, and the two steps a signal handler takes (asking whether
//! the collector is enabled, beginning the stop), are in `signals`.

use std::sync::atomic::{AtomicBool, Ordering};

pub use crate::signals::life::{begin_stop, enabled};
use crate::signals::life::{DISABLED, ENABLED, STATE, STOPPING, UNINITIALIZED};

static SAID_DISABLED: AtomicBool = AtomicBool::new(false);

/// Moves uninitialized -> enabled; false if someone else already started
/// (or the collector was disabled first).
#[cold]
pub fn enable() -> bool {
    STATE
        .compare_exchange(UNINITIALIZED, ENABLED, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// Re-enables after a fork: the child records into its own trace.
#[cold]
pub fn reenable_after_fork() {
    let _ = STATE.compare_exchange(STOPPING, ENABLED, Ordering::AcqRel, Ordering::Acquire);
}

/// Turns the collector off for good after an internal error, saying so once
/// on stderr. The program is not affected.
#[cold]
pub fn disable(reason: &str) {
    STATE.store(DISABLED, Ordering::Release);
    if !SAID_DISABLED.swap(true, Ordering::AcqRel) {
        crate::note::error(&format!(
            "disabled: {reason}; the program continues unobserved"
        ));
    }
}

/// Runs an FFI entry's body unless disabled, turning a panic into a quiet
/// disable instead of unwinding into C.
#[inline]
pub fn guarded<F: FnOnce()>(what: &'static str, f: F) {
    if !enabled() {
        return;
    }
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        disable(&format!("internal error in {what}"));
    }
}
