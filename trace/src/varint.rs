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

/// A length-prefixed byte string.
#[inline]
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Writes into a slice the caller has sized with an upper bound of what
/// will be written (see `codec::size_bound`), so that the hot path needs
/// no capacity checks beyond the slice's own bounds check.
pub(crate) struct Enc<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Enc<'a> {
    #[inline(always)]
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Enc { buf, pos: 0 }
    }

    #[inline(always)]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The underlying buffer, once encoding is done.
    #[inline(always)]
    pub(crate) fn into_inner(self) -> &'a mut [u8] {
        self.buf
    }

    #[inline(always)]
    pub(crate) fn u8(&mut self, b: u8) {
        self.buf[self.pos] = b;
        self.pos += 1;
    }

    #[inline(always)]
    pub(crate) fn varint(&mut self, v: u64) {
        if v < 0x80 {
            self.u8(v as u8);
        } else if v < 0x4000 {
            let p = self.pos;
            self.buf[p..p + 2].copy_from_slice(&[(v as u8) | 0x80, (v >> 7) as u8]);
            self.pos = p + 2;
        } else {
            self.varint_long(v);
        }
    }

    #[inline(never)]
    fn varint_long(&mut self, v: u64) {
        let (a, n) = varint_array(v);
        self.buf[self.pos..self.pos + n].copy_from_slice(&a[..n]);
        self.pos += n;
    }

    #[inline(always)]
    pub(crate) fn zigzag(&mut self, v: i64) {
        self.varint(zigzag(v));
    }

    #[inline(always)]
    pub(crate) fn u64_le(&mut self, v: u64) {
        self.buf[self.pos..self.pos + 8].copy_from_slice(&v.to_le_bytes());
        self.pos += 8;
    }

    /// A length-prefixed byte string.
    #[inline]
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }
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

/// A cursor over one record body (or the header, or a block payload).
///
/// Errors are sticky: a failed read records the first error, returns a
/// zero value and makes every later read fail too, so decoders read all
/// fields without a branch per field and check once with
/// [`finish`](Self::finish). Whatever was decoded after an error is thrown
/// away.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    err: Option<DecodeError>,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor {
            buf,
            pos: 0,
            err: None,
        }
    }

    #[inline(always)]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    #[inline(always)]
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True once a read has failed.
    #[inline(always)]
    pub(crate) fn failed(&self) -> bool {
        self.err.is_some()
    }

    /// `Ok(v)` if every read so far succeeded, else the first error.
    #[inline(always)]
    pub(crate) fn finish<T>(&self, v: T) -> DResult<T> {
        match self.err {
            None => Ok(v),
            Some(e) => Err(e),
        }
    }

    /// Records `e` (unless an earlier error is already recorded) and stops
    /// all further reads.
    #[cold]
    #[inline(never)]
    pub(crate) fn fail(&mut self, e: DecodeError) {
        if self.err.is_none() {
            self.err = Some(e);
        }
        self.pos = self.buf.len();
    }

    #[inline(always)]
    pub(crate) fn u8(&mut self) -> u8 {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => {
                self.fail(DecodeError::Short);
                0
            }
        }
    }

    #[inline(always)]
    pub(crate) fn u64_le(&mut self) -> u64 {
        match self.buf.get(self.pos..self.pos + 8) {
            Some(b) => {
                self.pos += 8;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                u64::from_le_bytes(a)
            }
            None => {
                self.fail(DecodeError::Short);
                0
            }
        }
    }

    #[inline(always)]
    pub(crate) fn varint(&mut self) -> u64 {
        // One and two bytes cover ids, small counts and most deltas.
        if let Some(&b0) = self.buf.get(self.pos) {
            if b0 < 0x80 {
                self.pos += 1;
                return u64::from(b0);
            }
            if let Some(&b1) = self.buf.get(self.pos + 1) {
                if b1 < 0x80 {
                    self.pos += 2;
                    return u64::from(b0 & 0x7f) | (u64::from(b1) << 7);
                }
            }
        }
        self.varint_slow()
    }

    #[inline(never)]
    fn varint_slow(&mut self) -> u64 {
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                self.fail(DecodeError::Short);
                return 0;
            };
            self.pos += 1;
            // The tenth byte may only carry the top bit of a u64.
            if shift == 63 && b > 1 {
                self.fail(DecodeError::Overflow);
                return 0;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    /// A varint that is there only when `present`. The usual one-byte
    /// value is taken without a branch on `present` (its byte is read
    /// either way, the position moves only when it is there), since which
    /// optional fields a record has changes from record to record.
    #[inline(always)]
    pub(crate) fn opt_varint(&mut self, present: bool) -> Option<u64> {
        match self.buf.get(self.pos) {
            Some(&b0) if b0 < 0x80 => {
                self.pos += usize::from(present);
                present.then_some(u64::from(b0))
            }
            _ => present.then(|| self.varint()),
        }
    }

    #[inline(always)]
    pub(crate) fn varint_u32(&mut self) -> u32 {
        let v = self.varint();
        match u32::try_from(v) {
            Ok(v) => v,
            Err(_) => {
                self.fail(DecodeError::Overflow);
                0
            }
        }
    }

    #[inline(always)]
    pub(crate) fn zigzag(&mut self) -> i64 {
        unzigzag(self.varint())
    }

    #[inline(always)]
    pub(crate) fn zigzag_i32(&mut self) -> i32 {
        let v = self.zigzag();
        match i32::try_from(v) {
            Ok(v) => v,
            Err(_) => {
                self.fail(DecodeError::Overflow);
                0
            }
        }
    }

    /// A length-prefixed byte string (empty after an error).
    #[inline]
    pub(crate) fn bytes(&mut self) -> &'a [u8] {
        let len = self.varint();
        let b = usize::try_from(len)
            .ok()
            .and_then(|len| self.pos.checked_add(len))
            .and_then(|end| self.buf.get(self.pos..end));
        match b {
            Some(b) => {
                self.pos += b.len();
                b
            }
            None => {
                self.fail(DecodeError::Short);
                &[]
            }
        }
    }

    pub(crate) fn string(&mut self) -> String {
        match std::str::from_utf8(self.bytes()) {
            Ok(s) => s.to_owned(),
            Err(_) => {
                self.fail(DecodeError::Utf8);
                String::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: impl FnOnce(&mut Enc<'_>)) -> Vec<u8> {
        let mut buf = [0u8; 64];
        let mut e = Enc::new(&mut buf);
        f(&mut e);
        let n = e.pos();
        buf[..n].to_vec()
    }

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
            assert_eq!(enc(|e| e.varint(v)), buf, "{v}");
            let mut c = Cursor::new(&buf);
            assert_eq!(c.varint(), v);
            assert_eq!(c.finish(()), Ok(()));
            assert_eq!(c.remaining(), 0);
        }
    }

    #[test]
    fn zigzag_round_trip_edges() {
        for v in [0, 1, -1, 63, -64, 64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
            let b = enc(|e| e.zigzag(v));
            assert_eq!(Cursor::new(&b).zigzag(), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    fn fails<T>(buf: &[u8], f: impl FnOnce(&mut Cursor<'_>) -> T) -> Option<DecodeError> {
        let mut c = Cursor::new(buf);
        f(&mut c);
        c.finish(()).err()
    }

    #[test]
    fn overlong_varints_are_refused() {
        // Eleven continuation bytes.
        let buf = [0xffu8; 11];
        assert_eq!(fails(&buf, |c| c.varint()), Some(DecodeError::Overflow));
        // Ten bytes whose last one carries more than the top bit.
        let mut buf = [0xffu8; 10];
        buf[9] = 0x02;
        assert_eq!(fails(&buf, |c| c.varint()), Some(DecodeError::Overflow));
        // Truncated, in the fast and the slow path.
        assert_eq!(fails(&[0x80], |c| c.varint()), Some(DecodeError::Short));
        assert_eq!(
            fails(&[0x80, 0x80], |c| c.varint()),
            Some(DecodeError::Short)
        );
        assert_eq!(fails(&[], |c| c.varint()), Some(DecodeError::Short));
        // Too wide for a u32 or i32 field.
        let mut buf = Vec::new();
        put_varint(&mut buf, 1 << 32);
        assert_eq!(fails(&buf, |c| c.varint_u32()), Some(DecodeError::Overflow));
        let b = enc(|e| e.zigzag(i64::from(i32::MIN) - 1));
        assert_eq!(fails(&b, |c| c.zigzag_i32()), Some(DecodeError::Overflow));
    }

    #[test]
    fn errors_are_sticky() {
        let mut c = Cursor::new(&[0x80]);
        assert_eq!(c.varint(), 0);
        assert!(c.failed());
        // Later reads fail too and return zeros.
        assert_eq!(c.u8(), 0);
        assert_eq!(c.u64_le(), 0);
        assert_eq!(c.finish(()), Err(DecodeError::Short));
        // The first error is the one reported.
        let mut c = Cursor::new(&[0xc3]);
        c.fail(DecodeError::Invalid("x"));
        c.fail(DecodeError::Short);
        assert_eq!(c.finish(()), Err(DecodeError::Invalid("x")));
    }

    #[test]
    fn strings_check_length_and_utf8() {
        let mut buf = Vec::new();
        put_bytes(&mut buf, "héllo ∑".as_bytes());
        assert_eq!(enc(|e| e.bytes("héllo ∑".as_bytes())), buf);
        assert_eq!(Cursor::new(&buf).string(), "héllo ∑");
        assert_eq!(fails(&buf[..3], |c| c.string()), Some(DecodeError::Short));
        let bad = [2u8, 0xc3, 0x28];
        assert_eq!(fails(&bad, |c| c.string()), Some(DecodeError::Utf8));
        // A length that overflows usize arithmetic must not panic.
        let mut huge = Vec::new();
        put_varint(&mut huge, u64::MAX);
        assert_eq!(fails(&huge, |c| c.bytes().len()), Some(DecodeError::Short));
    }
}
