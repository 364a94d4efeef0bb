//! Hashes of the host buffers of copies.

use accprof_trace::{BufferHash, Direction, HashMode, Record};

/// Hashes a host buffer and records it on the thread `th` belongs to,
/// unless hashing is off.
///
/// # Safety
/// `host_ptr..host_ptr+bytes` must be readable host memory for this call.
pub(super) unsafe fn push_hash(
    th: &crate::tls::PerThread,
    direction: Direction,
    correlation: u32,
    host_ptr: Option<u64>,
    bytes: Option<u64>,
) {
    let mode = crate::config::config().hash;
    if mode == HashMode::Off {
        return;
    }
    let (Some(host_ptr), Some(bytes)) = (host_ptr, bytes) else {
        return;
    };
    let Ok(len) = usize::try_from(bytes) else {
        return;
    };
    if host_ptr == 0 || len == 0 {
        return;
    }
    // The duration in ns straight from the clock: a stamp may be counter
    // ticks, which only the writer converts, and only as points in time.
    let started = crate::clock::now_ns();
    // SAFETY: readable for `len` bytes (caller).
    let Some(hash) =
        (unsafe { crate::hash::hash_buffer(host_ptr as usize as *const u8, len, mode) })
    else {
        return;
    };
    let done = crate::clock::now_ns();
    crate::sink::push_in(
        th,
        Record::Hash(BufferHash {
            time_ns: crate::clock::stamp(),
            region: crate::region::current_in(th),
            correlation,
            direction,
            host_ptr,
            bytes,
            mode,
            hash,
            // The collector's time, not the program's.
            hash_ns: Some(done.saturating_sub(started)),
        }),
    );
}
