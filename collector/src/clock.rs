//! The one clock of a trace: CLOCK_MONOTONIC in nanoseconds (CUPTI is given
//! the same clock, so host and device timestamps compare directly).

/// Current CLOCK_MONOTONIC time in ns.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC
    // always exists on Linux. It is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// Wall-clock time in ns since the Unix epoch.
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

thread_local! {
    static TID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// OS id of the calling thread (cached per thread).
#[inline]
pub fn thread_id() -> u32 {
    let cached = TID.try_with(|t| t.get()).unwrap_or(0);
    if cached != 0 {
        return cached;
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let _ = TID.try_with(|t| t.set(tid));
    tid
}

/// Forgets this thread's cached id (the child of a fork has a new one).
pub fn reset_thread_id() {
    let _ = TID.try_with(|t| t.set(0));
}
