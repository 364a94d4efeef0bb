//! How the process is ending, as the code that saw it (an `exit` or `exec`
//! interposer, a signal handler) tells the writer thread, which turns it
//! into the trace's `End` record.
//!
//! Signal handlers set it, so it lives in two atomics, kept with the
//! setter (`set`) in `signals`; this is the reading side.

use std::sync::atomic::{AtomicU64, Ordering};

use accprof_trace::{EndRecord, Ending};

use crate::signals::ending::{
    encode, AT_NS, EXEC, EXIT, EXIT_UNKNOWN, PENDING, QUICK_EXIT, RUNTIME_ERROR, SIGNAL,
};

/// The status `exit` was called with, encoded like `PENDING`; read only by
/// the final flush, which runs later from the library's destructor.
static EXIT_STATUS: AtomicU64 = AtomicU64::new(0);

fn decode(v: u64) -> Option<Ending> {
    let code = v as u32 as i32;
    Some(match v >> 32 {
        EXIT_UNKNOWN => Ending::Exit(None),
        EXIT => Ending::Exit(Some(code)),
        QUICK_EXIT => Ending::QuickExit(code),
        SIGNAL => Ending::Signal(code),
        EXEC => Ending::Exec,
        RUNTIME_ERROR => Ending::RuntimeError(code),
        _ => return None,
    })
}

/// The ending set since the last call, if any.
pub(crate) fn take() -> Option<EndRecord> {
    let how = decode(PENDING.swap(0, Ordering::AcqRel))?;
    Some(EndRecord {
        time_ns: AT_NS.load(Ordering::Relaxed),
        how,
    })
}

/// `exit(status)` was called (the interposer says so): the final flush,
/// from the library's destructor, writes the status. Not in a process
/// that is not the collector's own (a child forked by `vfork`).
#[cfg_attr(test, allow(dead_code))]
pub(crate) fn exit_called(status: i32) {
    if crate::signals::life::in_own_process() {
        EXIT_STATUS.store(encode(Ending::Exit(Some(status))), Ordering::Release);
    }
}

/// The status `exit` was called with, if it was.
pub(crate) fn exit_status() -> Option<i32> {
    match decode(EXIT_STATUS.load(Ordering::Acquire)) {
        Some(Ending::Exit(s)) => s,
        _ => None,
    }
}

/// The ending the final flush writes: the one set, else a normal exit
/// (with the status `exit` saw, if it saw one).
pub(crate) fn take_final() -> EndRecord {
    take().unwrap_or_else(|| EndRecord {
        time_ns: crate::clock::now_ns(),
        how: decode(EXIT_STATUS.load(Ordering::Acquire)).unwrap_or(Ending::Exit(None)),
    })
}

/// In a forked child: the parent's ending is not the child's.
pub(crate) fn reset_after_fork() {
    PENDING.store(0, Ordering::Release);
    EXIT_STATUS.store(0, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ending_round_trips() {
        for how in [
            Ending::Exit(None),
            Ending::Exit(Some(0)),
            Ending::Exit(Some(-1)),
            Ending::Exit(Some(255)),
            Ending::QuickExit(3),
            Ending::Signal(13),
            Ending::Exec,
            Ending::RuntimeError(700),
        ] {
            assert_eq!(decode(encode(how)), Some(how), "{how:?}");
        }
        assert_eq!(decode(0), None);
    }
}
