//! Hashing for maps keyed by the integers a trace hands out.

use std::collections::HashMap;

/// A hasher for the join's integer keys (handles, region and correlation
/// ids, string ids): one multiply, where the standard SipHash costs a
/// third of the join's time. The keys come from the trace, but a crafted
/// trace that makes them collide costs only speed.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

/// A hash map keyed by integers, hashed with [`IdHasher`].
pub(crate) type IdHashMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;
