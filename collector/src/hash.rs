//! Content hashes of host buffers around transfers, so the analyzer can
//! prove that an upload sent bytes the device already had, or that data went
//! device -> host -> device unchanged.

use accprof_trace::HashMode;
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// Chunks read in sampled mode, and their size: 16 x 256 B = 4 KiB per
/// buffer whatever its size, so cost stays flat for large arrays.
const SAMPLES: usize = 16;
const SAMPLE_BYTES: usize = 256;

/// Hashes `len` bytes at `ptr` in the given mode (None when off).
///
/// # Safety
/// `ptr..ptr+len` must be readable host memory for the duration of the call
/// (the driver is about to read it, or just wrote it).
pub unsafe fn hash_buffer(ptr: *const u8, len: usize, mode: HashMode) -> Option<u64> {
    if ptr.is_null() {
        return None;
    }
    match mode {
        HashMode::Off => None,
        HashMode::Full => {
            // SAFETY: the caller guarantees the range is readable.
            let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
            Some(xxh3_64(bytes))
        }
        HashMode::Sampled => {
            if len <= SAMPLES * SAMPLE_BYTES {
                // SAFETY: as above.
                let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
                return Some(xxh3_64(bytes));
            }
            let mut h = Xxh3::new();
            h.update(&(len as u64).to_le_bytes());
            let stride = (len - SAMPLE_BYTES) / (SAMPLES - 1);
            for i in 0..SAMPLES {
                let off = i * stride;
                // SAFETY: off + SAMPLE_BYTES <= len by construction of stride.
                let chunk = unsafe { std::slice::from_raw_parts(ptr.add(off), SAMPLE_BYTES) };
                h.update(chunk);
            }
            Some(h.digest())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes a whole slice.
    fn hash(a: &[u8], mode: HashMode) -> Option<u64> {
        // SAFETY: a slice is readable host memory for its whole length, and
        // the borrow keeps it alive for the call.
        unsafe { hash_buffer(a.as_ptr(), a.len(), mode) }
    }

    #[test]
    fn modes_see_what_they_read() {
        let mut a = vec![1u8; 1 << 20];
        let full = hash(&a, HashMode::Full);
        let sampled = hash(&a, HashMode::Sampled);
        assert_eq!(hash(&a, HashMode::Off), None);
        // A change in the first chunk is seen by both modes.
        a[0] = 2;
        assert_ne!(hash(&a, HashMode::Full), full);
        assert_ne!(hash(&a, HashMode::Sampled), sampled);
        // Between samples only full mode sees a change: that is the trade.
        a[0] = 1;
        a[300] = 9;
        assert_ne!(hash(&a, HashMode::Full), full);
        assert_eq!(hash(&a, HashMode::Sampled), sampled);
    }

    #[test]
    fn small_buffers_are_hashed_whole_in_sampled_mode() {
        let a = [7u8; 100];
        assert_eq!(hash(&a, HashMode::Sampled), hash(&a, HashMode::Full));
    }
}
