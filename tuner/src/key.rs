//! Stable names for what the tuner keeps: cache keys and file names.

/// A stable hash of a text (cache keys, file names).
pub fn text_hash(s: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(s.as_bytes())
}
