//! Byte-level primitives: LEB128 varints, zigzag, and a bounds-checked
//! decoding cursor. Nothing here knows about records.

/// Longest LEB128 encoding of a u64.
pub(crate) const MAX_VARINT_LEN: usize = 10;

/// Maps signed to unsigned so that small magnitudes stay small.
#[inline]
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends the LEB128 encoding of `v`.
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, v: u64) {
    // One- and two-byte values are the common case (deltas, ids, small
    // counts); keep them free of the loop.
    if v < 0x80 {
        out.push(v as u8);
        return;
    }
    if v < 0x4000 {
        out.extend_from_slice(&[(v as u8) | 0x80, (v >> 7) as u8]);
        return;
    }
    let (tmp, n) = varint_array(v);
    out.extend_from_slice(&tmp[..n]);
}

/// The LEB128 encoding of `v` in a fixed array, and its length.
#[inline]
pub(crate) fn varint_array(mut v: u64) -> ([u8; MAX_VARINT_LEN], usize) {
    let mut tmp = [0u8; MAX_VARINT_LEN];
    let mut n = 0;
    while v >= 0x80 {
        tmp[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    tmp[n] = v as u8;
    (tmp, n + 1)
}

/// Number of bytes [`put_varint`] writes for `v`.
#[cfg(test)]
pub(crate) fn varint_len(v: u64) -> usize {
    // 1 + floor(bits / 7), with 0 taking one byte.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[inline]
pub(crate) fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    put_varint(out, zigzag(v));
}

/// A length-prefixed byte string.
#[inline]
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Why a body could not be decoded. Kept tiny: the reader turns it into a
/// [`crate::Loss`] reason with the record's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// The body ended inside a field.
    Short,
    /// A varint longer than 10 bytes or wider than its field.
    Overflow,
    /// A value outside its field's range (enum code, reserved flag bit).
    Invalid(&'static str),
    /// A string that is not UTF-8.
    Utf8,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Short => f.write_str("body ends inside a field"),
            DecodeError::Overflow => f.write_str("varint too long for its field"),
            DecodeError::Invalid(what) => write!(f, "invalid {what}"),
            DecodeError::Utf8 => f.write_str("string is not UTF-8"),
        }
    }
}

pub(crate) type DResult<T> = Result<T, DecodeError>;

/// A cursor over one record body (or one block payload).
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    #[inline]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    pub(crate) fn u8(&mut self) -> DResult<u8> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::Short)?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    pub(crate) fn u64_le(&mut self) -> DResult<u64> {
        let end = self.pos.checked_add(8).ok_or(DecodeError::Short)?;
        let b = self.buf.get(self.pos..end).ok_or(DecodeError::Short)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        self.pos = end;
        Ok(u64::from_le_bytes(a))
    }

    #[inline]
    pub(crate) fn varint(&mut self) -> DResult<u64> {
        let b0 = self.u8()?;
        if b0 < 0x80 {
            return Ok(u64::from(b0));
        }
        self.varint_slow(b0)
    }

    #[cold]
    #[inline(never)]
    fn varint_slow(&mut self, b0: u8) -> DResult<u64> {
        let mut v = u64::from(b0 & 0x7f);
        let mut shift = 7u32;
        loop {
            let b = self.u8()?;
            // The tenth byte may only carry the top bit of a u64.
            if shift == 63 && b > 1 {
                return Err(DecodeError::Overflow);
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(DecodeError::Overflow);
            }
        }
    }

    #[inline]
    pub(crate) fn varint_u32(&mut self) -> DResult<u32> {
        u32::try_from(self.varint()?).map_err(|_| DecodeError::Overflow)
    }

    #[inline]
    pub(crate) fn zigzag(&mut self) -> DResult<i64> {
        Ok(unzigzag(self.varint()?))
    }

    #[inline]
    pub(crate) fn bytes(&mut self) -> DResult<&'a [u8]> {
        let len = usize::try_from(self.varint()?).map_err(|_| DecodeError::Short)?;
        let end = self.pos.checked_add(len).ok_or(DecodeError::Short)?;
        let b = self.buf.get(self.pos..end).ok_or(DecodeError::Short)?;
        self.pos = end;
        Ok(b)
    }

    pub(crate) fn string(&mut self) -> DResult<String> {
        let b = self.bytes()?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| DecodeError::Utf8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_edges() {
        let vals = [
            0,
            1,
            0x7f,
            0x80,
            0x3fff,
            0x4000,
            u64::from(u32::MAX),
            1 << 56,
            u64::MAX - 1,
            u64::MAX,
        ];
        for v in vals {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(buf.len(), varint_len(v), "{v}");
            let mut c = Cursor::new(&buf);
            assert_eq!(c.varint(), Ok(v));
            assert_eq!(c.remaining(), 0);
        }
    }

    #[test]
    fn zigzag_round_trip_edges() {
        for v in [0, 1, -1, 63, -64, 64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn overlong_varints_are_refused() {
        // Eleven continuation bytes.
        let buf = [0xffu8; 11];
        assert_eq!(Cursor::new(&buf).varint(), Err(DecodeError::Overflow));
        // Ten bytes whose last one carries more than the top bit.
        let mut buf = [0xffu8; 10];
        buf[9] = 0x02;
        assert_eq!(Cursor::new(&buf).varint(), Err(DecodeError::Overflow));
        // Truncated.
        assert_eq!(Cursor::new(&[0x80]).varint(), Err(DecodeError::Short));
        // Too wide for a u32 field.
        let mut buf = Vec::new();
        put_varint(&mut buf, 1 << 32);
        assert_eq!(Cursor::new(&buf).varint_u32(), Err(DecodeError::Overflow));
    }

    #[test]
    fn strings_check_length_and_utf8() {
        let mut buf = Vec::new();
        put_bytes(&mut buf, "héllo ∑".as_bytes());
        assert_eq!(Cursor::new(&buf).string().as_deref(), Ok("héllo ∑"));
        assert_eq!(Cursor::new(&buf[..3]).string(), Err(DecodeError::Short));
        let bad = [2u8, 0xc3, 0x28];
        assert_eq!(Cursor::new(&bad).string(), Err(DecodeError::Utf8));
        // A length that overflows usize arithmetic must not panic.
        let mut huge = Vec::new();
        put_varint(&mut huge, u64::MAX);
        assert_eq!(Cursor::new(&huge).bytes(), Err(DecodeError::Short));
    }
}
