//! The one clock of a trace: CLOCK_MONOTONIC in nanoseconds (CUPTI is given
//! the same clock, so host and device timestamps compare directly).
//!
//! Host events (acc_prof events, driver calls, buffer hashes) do not read
//! that clock themselves: where the kernel keeps CLOCK_MONOTONIC with the
//! CPU's time-stamp counter (an invariant TSC, the clocksource `tsc`), an
//! event is stamped with the raw counter, which
//! costs about half as much as `clock_gettime` (16 against 28 ns on the H200
//! host), and the writer thread turns stamps into nanoseconds with
//! [`Calibration`]: pairs of (counter, CLOCK_MONOTONIC) readings taken as it
//! drains, between which stamps are interpolated. Elsewhere stamps are
//! CLOCK_MONOTONIC nanoseconds already and conversion is the identity.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Current CLOCK_MONOTONIC time in ns (in `signals`: handlers read it).
pub use crate::signals::now_ns;

/// True when [`stamp`] reads the time-stamp counter.
static TSC: AtomicBool = AtomicBool::new(false);
/// The first calibration pair, taken when the counter was chosen.
static FIRST_TICKS: AtomicU64 = AtomicU64::new(0);
static FIRST_NS: AtomicU64 = AtomicU64::new(0);

/// Chooses the hot-path clock, once, before any event is stamped.
/// `ACCPROF_CLOCK=monotonic` keeps `clock_gettime`.
pub fn init(allow_tsc: bool) {
    if !allow_tsc || !tsc_is_the_kernel_clock() {
        return;
    }
    let (ticks, ns) = pair();
    FIRST_TICKS.store(ticks, Ordering::Relaxed);
    FIRST_NS.store(ns, Ordering::Relaxed);
    TSC.store(true, Ordering::Release);
}

/// Whether stamps are counter ticks (for the trace header's notes).
pub fn uses_tsc() -> bool {
    TSC.load(Ordering::Acquire)
}

/// A hot-path timestamp: counter ticks or CLOCK_MONOTONIC ns (see module
/// doc); only the writer's [`Calibration`] may interpret it.
#[inline]
pub fn stamp() -> u64 {
    if TSC.load(Ordering::Relaxed) {
        ticks()
    } else {
        now_ns()
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn ticks() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU and has no preconditions.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn ticks() -> u64 {
    now_ns()
}

/// The counter is used only where the kernel trusts it for CLOCK_MONOTONIC
/// itself: an invariant TSC (CPUID) that the kernel chose as clocksource
/// (it falls back to another source when the TSC is unstable or differs
/// between CPUs).
#[cfg(target_arch = "x86_64")]
fn tsc_is_the_kernel_clock() -> bool {
    use core::arch::x86_64::__cpuid;
    // Leaf 0x8000_0000 reports the highest extended leaf; 0x8000_0007
    // (invariant TSC in EDX bit 8) is read only when present.
    let invariant =
        __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0;
    invariant
        && std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .is_ok_and(|s| s.trim() == "tsc")
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_is_the_kernel_clock() -> bool {
    false
}

/// One (ticks, ns) reading: the clock read between two counter reads, the
/// counter taken as their midpoint.
fn pair() -> (u64, u64) {
    // A thread preempted between the reads would pair a clock reading with
    // a counter value microseconds away from it: keep the tightest of a
    // few tries (each costs some tens of ns).
    let mut best = (u64::MAX, (0, 0));
    for _ in 0..5 {
        let before = ticks();
        let ns = now_ns();
        let after = ticks();
        let window = after.saturating_sub(before);
        if window < best.0 {
            best = (window, (before + window / 2, ns));
        }
    }
    best.1
}

/// Turns stamps into CLOCK_MONOTONIC ns; owned by the writer thread.
pub struct Calibration {
    /// Kept pairs, oldest first, at least [`Calibration::SPACING_NS`] apart.
    kept: std::collections::VecDeque<(u64, u64)>,
    /// The reading of the current batch (the right end of the last segment).
    fresh: (u64, u64),
    /// The last segment, where nearly every stamp of a batch falls: its
    /// left end and its rate as ns per tick in 32.32 fixed point.
    last: Option<(u64, u64, u64)>,
}

impl Calibration {
    /// Kept pairs are at least this far apart: a reading is exact to a few
    /// tens of ns, so a longer segment gives a steadier rate.
    const SPACING_NS: u64 = 10_000_000;
    /// Pairs kept: records older than these are extrapolated.
    const KEEP: usize = 256;

    /// Calibration starting from the first pair (identity when stamps are ns).
    pub fn new() -> Calibration {
        let first = (
            FIRST_TICKS.load(Ordering::Relaxed),
            FIRST_NS.load(Ordering::Relaxed),
        );
        Calibration::starting_at(first)
    }

    fn starting_at(first: (u64, u64)) -> Calibration {
        Calibration {
            kept: std::collections::VecDeque::from([first]),
            fresh: first,
            last: None,
        }
    }

    /// Takes a new reading: call after draining, before converting what was
    /// drained (every stamp drained is then older than the reading).
    pub fn take_reading(&mut self) {
        if uses_tsc() {
            self.add(pair());
        }
    }

    fn add(&mut self, p: (u64, u64)) {
        if p.0 <= self.fresh.0 {
            return;
        }
        let last = last_of(&self.kept);
        if p.1.saturating_sub(last.1) >= Self::SPACING_NS {
            self.kept.push_back(p);
            if self.kept.len() > Self::KEEP {
                self.kept.pop_front();
            }
        }
        self.fresh = p;
        let a = if self.kept.len() >= 2 && p == last_of(&self.kept) {
            self.kept[self.kept.len() - 2]
        } else {
            last_of(&self.kept)
        };
        let (dt, dn) = (p.0 - a.0, p.1.saturating_sub(a.1));
        self.last = u64::try_from((u128::from(dn) << 32) / u128::from(dt))
            .ok()
            .map(|rate| (a.0, a.1, rate));
    }

    /// A stamp in CLOCK_MONOTONIC ns.
    #[inline]
    pub fn to_ns(&self, stamp: u64) -> u64 {
        if !uses_tsc() {
            return stamp;
        }
        self.ticks_to_ns(stamp)
    }

    fn ticks_to_ns(&self, t: u64) -> u64 {
        if let Some((a_ticks, a_ns, rate)) = self.last {
            if t >= a_ticks && t <= self.fresh.0 {
                let off = (u128::from(t - a_ticks) * u128::from(rate)) >> 32;
                return a_ns.saturating_add(off as u64);
            }
        }
        // The segment holding t: [kept[i], kept[i+1]], or [last kept, fresh]
        // past the last kept pair; outside all of them, the nearest segment
        // extended.
        let n = self.kept.len();
        let last = self.kept[n - 1];
        let (a, b) = if t >= last.0 || n == 1 {
            if self.fresh.0 > last.0 {
                (last, self.fresh)
            } else if n >= 2 {
                (self.kept[n - 2], last)
            } else {
                return last.1.saturating_add_signed(nominal_ns(t, last.0));
            }
        } else {
            let i = self.kept.partition_point(|p| p.0 <= t);
            let i = i.clamp(1, n - 1);
            (self.kept[i - 1], self.kept[i])
        };
        interpolate(a, b, t)
    }
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration::new()
    }
}

fn last_of(kept: &std::collections::VecDeque<(u64, u64)>) -> (u64, u64) {
    *kept.back().expect("never empty")
}

/// Before a second reading exists: 1 tick = 1 ns (only a stamp taken in
/// the instant between the first reading and the writer's first one).
fn nominal_ns(t: u64, from: u64) -> i64 {
    t.wrapping_sub(from) as i64
}

/// ns at `t` on the line through `a` and `b` (ticks, ns), extended beyond
/// them when `t` lies outside.
fn interpolate(a: (u64, u64), b: (u64, u64), t: u64) -> u64 {
    let dt = i128::from(b.0) - i128::from(a.0);
    if dt <= 0 {
        return a.1;
    }
    let dn = i128::from(b.1) - i128::from(a.1);
    let off = i128::from(t) - i128::from(a.0);
    let ns = i128::from(a.1) + off * dn / dt;
    ns.clamp(0, i128::from(u64::MAX)) as u64
}

/// Wall-clock time in ns since the Unix epoch.
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// OS id of the calling thread (cached per thread).
#[inline]
pub fn thread_id() -> u32 {
    crate::tls::THREAD
        .try_with(thread_id_in)
        // SAFETY: gettid has no preconditions.
        .unwrap_or_else(|_| unsafe { libc::gettid() } as u32)
}

/// OS id of the thread `t` belongs to.
#[inline]
pub(crate) fn thread_id_in(t: &crate::tls::PerThread) -> u32 {
    let cached = t.tid.get();
    if cached != 0 {
        return cached;
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    t.tid.set(tid);
    tid
}

/// Forgets this thread's cached id (the child of a fork has a new one).
pub fn reset_thread_id() {
    let _ = crate::tls::THREAD.try_with(|t| t.tid.set(0));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixed-point rates round: within a nanosecond.
    #[track_caller]
    fn near(got: u64, want: u64) {
        assert!(got.abs_diff(want) <= 1, "{got} != {want}");
    }

    /// A counter at 2.5 ticks per ns starting at 1,000 ticks, ns from 5,000
    /// (exact for even ns).
    fn at(ns: u64) -> (u64, u64) {
        (1_000 + ns * 5 / 2, 5_000 + ns)
    }

    #[test]
    fn interpolates_between_readings() {
        let mut c = Calibration::starting_at(at(0));
        c.add(at(50_000_000));
        c.add(at(70_000_000));
        for ns in [0, 2, 12_345_678, 50_000_000, 60_000_002, 70_000_000] {
            near(c.ticks_to_ns(at(ns).0), at(ns).1);
        }
        // Past the last reading and before the first: extended lines.
        near(c.ticks_to_ns(at(80_000_000).0), at(80_000_000).1);
        near(c.ticks_to_ns(0), 5_000 - 400);
    }

    #[test]
    fn each_segment_has_its_own_rate() {
        // The counter runs at 2 ticks/ns for 20 ms, then at 3 ticks/ns.
        let mut c = Calibration::starting_at((0, 0));
        c.add((40_000_000, 20_000_000));
        c.add((100_000_000, 40_000_000));
        near(c.ticks_to_ns(20_000_000), 10_000_000);
        near(c.ticks_to_ns(70_000_000), 30_000_000);
    }

    #[test]
    fn close_readings_are_not_kept_but_used() {
        let mut c = Calibration::starting_at((0, 0));
        c.add((4_000, 2_000)); // 2 us later: a fresh reading, not kept
        assert_eq!(c.kept.len(), 1);
        near(c.ticks_to_ns(2_000), 1_000);
        c.add((40_000_000, 20_000_000));
        assert_eq!(c.kept.len(), 2);
        // A reading older than the fresh one is ignored.
        c.add((30_000_000, 1));
        near(c.ticks_to_ns(20_000_000), 10_000_000);
    }

    #[test]
    fn only_recent_pairs_are_kept() {
        let mut c = Calibration::starting_at((0, 0));
        for i in 1..=1000u64 {
            c.add((i * 20_000_000, i * 10_000_000));
        }
        assert_eq!(c.kept.len(), Calibration::KEEP);
        near(c.ticks_to_ns(0), 0);
    }

    #[test]
    fn stamps_follow_the_monotonic_clock() {
        init(true);
        let mut c = Calibration::new();
        let ns0 = now_ns();
        let s = stamp();
        let ns1 = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        c.take_reading();
        let t = c.to_ns(s);
        assert!(
            t + 1_000 >= ns0 && t <= ns1 + 1_000,
            "{ns0} <= {t} <= {ns1} (tsc: {})",
            uses_tsc()
        );
    }
}
