//! Device timestamps on the trace clock: CUPTI's timestamp callback, or a
//! measured offset where the library has none.

use std::sync::atomic::{AtomicI64, Ordering};

use accprof_trace::Level;
use cudarc::cupti::sys;

use sys::CUptiResult::CUPTI_SUCCESS;

use super::load::{has_symbol, Loaded};

/// ns to add to CUPTI timestamps; 0 when CUPTI takes our clock.
pub(super) static CLOCK_OFFSET: AtomicI64 = AtomicI64::new(0);

/// CUPTI's timestamp source: our trace clock, so device times compare
/// directly with host events.
extern "C" fn timestamp() -> u64 {
    std::panic::catch_unwind(crate::clock::now_ns).unwrap_or(0)
}

pub(super) fn setup_clock(lib: &Loaded, notes: &mut Vec<(Level, String)>) {
    if has_symbol(lib, c"cuptiActivityRegisterTimestampCallback") {
        // SAFETY: `timestamp` is an extern "C" fn() -> u64 that lives as
        // long as the process.
        let r = unsafe { sys::cuptiActivityRegisterTimestampCallback(Some(timestamp)) };
        if r == CUPTI_SUCCESS {
            CLOCK_OFFSET.store(0, Ordering::Release);
            return;
        }
        notes.push((
            Level::Warning,
            format!("cuptiActivityRegisterTimestampCallback failed ({r:?})"),
        ));
    } else {
        notes.push((
            Level::Warning,
            "this libcupti has no cuptiActivityRegisterTimestampCallback".into(),
        ));
    }
    let offset = measure_offset();
    CLOCK_OFFSET.store(offset, Ordering::Release);
    notes.push((
        Level::Warning,
        format!("device timestamps moved onto the trace clock by a measured offset of {offset} ns"),
    ));
}

/// Offset from CUPTI's clock to ours: the tightest of a few bracketed
/// readings.
fn measure_offset() -> i64 {
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..8 {
        let before = crate::clock::now_ns();
        let mut t: u64 = 0;
        // SAFETY: cuptiGetTimestamp writes one u64 into our local.
        let r = unsafe { sys::cuptiGetTimestamp(&mut t) };
        let after = crate::clock::now_ns();
        if r != CUPTI_SUCCESS || t == 0 {
            continue;
        }
        let width = after.saturating_sub(before);
        let mid = before + width / 2;
        let offset = (i128::from(mid) - i128::from(t)) as i64;
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, offset));
        }
    }
    best.map_or(0, |(_, o)| o)
}

/// A CUPTI timestamp on the trace clock; 0 (not collected) stays 0.
pub(super) fn shift(t: u64, offset: i64) -> u64 {
    if t == 0 {
        0
    } else {
        t.wrapping_add_signed(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shift_keeps_zero() {
        assert_eq!(shift(0, 100), 0);
        assert_eq!(shift(50, 100), 150);
        assert_eq!(shift(150, -100), 50);
    }
}
