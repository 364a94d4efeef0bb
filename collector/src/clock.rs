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
