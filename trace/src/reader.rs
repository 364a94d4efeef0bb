//! The read side: header checks, block validation, record decoding and
//! loss accounting.

use std::io::{self, Read};
use std::path::Path;

use crate::codec::{self, count_frames, decode_header, DeltaState};
use crate::error::TraceError;
use crate::format::*;
use crate::record::{Header, Record};
use crate::varint::{Cursor, DecodeError};

/// A stretch of the input that was not read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    /// Byte offset in the input where the damage starts (a block header, or
    /// a record inside a block).
    pub offset: u64,
    /// How many bytes from `offset` on were not read.
    pub bytes: u64,
    /// What was wrong, in words.
    pub reason: String,
}

/// A whole trace in memory, as [`read_trace`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// Format version of the file (major, minor).
    pub version: (u16, u16),
    /// The process header.
    pub header: Header,
    /// Every record read, in file order.
    pub records: Vec<Record>,
    /// What could not be read (empty for an intact file).
    pub losses: Vec<Loss>,
    /// Records of kinds this reader does not know (from a later minor
    /// version), skipped.
    pub skipped_unknown: u64,
}

/// Reads the whole trace from `input`. Damage after the header is reported
/// in [`Trace::losses`], not as an error.
pub fn read_trace(input: impl Read) -> Result<Trace, TraceError> {
    let mut reader = Reader::new(input)?;
    let mut records = Vec::new();
    while let Some(r) = reader.next_record() {
        records.push(r);
    }
    Ok(Trace {
        version: reader.version,
        header: reader.header,
        records,
        losses: reader.losses,
        skipped_unknown: reader.skipped_unknown,
    })
}

/// [`read_trace`] on a file.
pub fn read_file(path: &Path) -> Result<Trace, TraceError> {
    read_trace(std::fs::File::open(path)?)
}

/// Reads a trace record by record.
///
/// [`new`](Self::new) checks the magic, the version and the header. After
/// that nothing is an error: [`next_record`](Self::next_record) returns
/// records until the end of the input or the first damaged block, and
/// [`losses`](Self::losses) says what was not read. A block is checked whole
/// (magic, length, checksum, record framing and count) before any of its
/// records is returned, so a damaged block contributes nothing.
///
/// By default reading stops at the first damaged block and the loss covers
/// everything from there to the end of the input. With
/// [`with_resync`](Self::with_resync) the reader instead scans for the next
/// intact block and goes on; the loss then covers the bytes skipped.
/// A record that cannot be decoded inside an intact block (written by a
/// faulty writer) costs the rest of its block only; reading goes on with the
/// next block.
pub struct Reader<R: Read> {
    src: Source<R>,
    header: Header,
    version: (u16, u16),
    /// Payload of the current block, validated.
    block: Vec<u8>,
    /// Next frame in `block`.
    pos: usize,
    /// Input offset of `block[0]`.
    block_offset: u64,
    state: DeltaState,
    losses: Vec<Loss>,
    /// A loss whose end is not known yet (while resynchronising).
    open_loss: Option<Loss>,
    skipped_unknown: u64,
    resync: bool,
    done: bool,
}

impl<R: Read> Reader<R> {
    /// Reads and checks the magic, the version and the header block.
    pub fn new(input: R) -> Result<Self, TraceError> {
        let mut src = Source::new(input);
        let mut prefix = [0u8; FILE_PREFIX_LEN];
        let n = src.fill(&mut prefix)?;
        if n == 0 {
            return Err(TraceError::Empty);
        }
        let m = n.min(FILE_MAGIC.len());
        if prefix[..m] != FILE_MAGIC[..m] {
            return Err(TraceError::NotATrace);
        }
        if n < FILE_PREFIX_LEN {
            return Err(TraceError::Truncated { bytes: n as u64 });
        }
        let major = u16::from_le_bytes([prefix[8], prefix[9]]);
        let minor = u16::from_le_bytes([prefix[10], prefix[11]]);
        let found = (major, minor);
        let mut block = Vec::new();
        let read = read_header_block(&mut src, &mut block);
        let damaged = |copy: Option<(u16, u16)>| TraceError::BadHeader {
            reason: damaged_version(found, copy),
        };
        if major != FORMAT_MAJOR {
            // A header that reads as this major's tells a damaged version
            // field from a newer format; anything else is taken at its word.
            return Err(match read {
                Ok((_, Some(copy))) if copy != found => damaged(Some(copy)),
                Ok((_, None)) => damaged(None),
                _ => TraceError::UnsupportedVersion {
                    found_major: major,
                    found_minor: minor,
                },
            });
        }
        let (header, copy) = read?;
        match copy {
            Some(copy) if copy != found => return Err(damaged(Some(copy))),
            None if minor >= FIRST_MINOR_WITH_VERSION_COPY => return Err(damaged(None)),
            _ => {}
        }
        block.clear();
        Ok(Reader {
            src,
            header,
            version: (major, minor),
            block,
            pos: 0,
            block_offset: 0,
            state: DeltaState::default(),
            losses: Vec::new(),
            open_loss: None,
            skipped_unknown: 0,
            resync: false,
            done: false,
        })
    }

    /// Instead of stopping at the first damaged block, skip to the next
    /// intact one and go on. Records of the skipped stretch are lost
    /// (including any strings or call sites they defined).
    pub fn with_resync(mut self, on: bool) -> Self {
        self.resync = on;
        self
    }

    /// The process header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Format version of the input (major, minor).
    pub fn version(&self) -> (u16, u16) {
        self.version
    }

    /// What was not read so far, and why. Complete once `next_record` has
    /// returned `None`.
    pub fn losses(&self) -> &[Loss] {
        &self.losses
    }

    /// Records of unknown kinds skipped so far.
    pub fn skipped_unknown(&self) -> u64 {
        self.skipped_unknown
    }

    /// The next record; `None` at the end of the input or (without resync)
    /// at the first damaged block.
    #[inline]
    pub fn next_record(&mut self) -> Option<Record> {
        loop {
            let r = next_in_block(
                &self.block,
                &mut self.pos,
                &mut self.state,
                self.block_offset,
                &mut self.skipped_unknown,
                &mut self.losses,
            );
            if r.is_some() {
                return r;
            }
            if self.done {
                return None;
            }
            self.load_block();
        }
    }

    /// Whether the input is done: no block is left to load.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// Takes the block [`load_block`](Self::load_block) loaded (empty when
    /// none was), with the input offset of its first byte, leaving `spare`
    /// (cleared) in its place.
    pub(crate) fn take_block(&mut self, mut spare: Vec<u8>) -> (Vec<u8>, u64) {
        spare.clear();
        self.pos = 0;
        (std::mem::replace(&mut self.block, spare), self.block_offset)
    }

    /// Loads and validates the next block into `self.block`, or records
    /// why it could not.
    #[inline(never)]
    pub(crate) fn load_block(&mut self) {
        self.block.clear();
        self.pos = 0;
        self.state = DeltaState::default();
        let start = self.src.offset;
        let mut hdr = [0u8; BLOCK_HEADER_LEN];
        let n = match self.src.fill(&mut hdr) {
            Ok(n) => n,
            Err(e) => return self.io_failure(start, e),
        };
        if n == 0 {
            self.close_open_loss(start);
            self.done = true;
            return;
        }
        if n < BLOCK_HEADER_LEN {
            return self.damage(
                start,
                &hdr[..n],
                format!("truncated block header ({n} of {BLOCK_HEADER_LEN} bytes)"),
            );
        }
        let (magic, len, count, crc) = split_block_header(&hdr);
        if magic != DATA_BLOCK_MAGIC {
            return self.damage(start, &hdr, format!("bad block magic {magic:#010x}"));
        }
        if len > MAX_BLOCK_PAYLOAD {
            return self.damage(
                start,
                &hdr,
                format!("block length {len} is over the {MAX_BLOCK_PAYLOAD}-byte limit"),
            );
        }
        let got = match self.src.read_into(len, &mut self.block) {
            Ok(got) => got,
            Err(e) => return self.io_failure(start, e),
        };
        let reason = if got < len {
            Some(format!("truncated block ({got} of {len} payload bytes)"))
        } else {
            let found = crc32fast::hash(&self.block);
            if found != crc {
                Some(format!(
                    "checksum mismatch (stored {crc:#010x}, computed {found:#010x})"
                ))
            } else {
                match count_frames(&self.block) {
                    Err(at) => Some(format!("bad record framing at payload byte {at}")),
                    Ok(m) if m != count => Some(format!(
                        "record count mismatch (block says {count}, payload holds {m})"
                    )),
                    Ok(_) => None,
                }
            }
        };
        if let Some(reason) = reason {
            let payload = std::mem::take(&mut self.block);
            self.damage_with_payload(start, &hdr, &payload, reason);
            self.block = payload;
            self.block.clear();
            return;
        }
        self.block_offset = start + BLOCK_HEADER_LEN as u64;
        self.close_open_loss(start);
    }

    fn damage(&mut self, start: u64, consumed: &[u8], reason: String) {
        self.damage_with_payload(start, consumed, &[], reason);
    }

    /// The block at `start` is damaged; `head` and `payload` are the bytes of
    /// it already consumed.
    fn damage_with_payload(&mut self, start: u64, head: &[u8], payload: &[u8], reason: String) {
        if self.open_loss.is_none() {
            self.open_loss = Some(Loss {
                offset: start,
                bytes: 0,
                reason,
            });
        }
        if self.resync {
            // The next block may start anywhere after the first byte of
            // this one, including inside what was taken for its payload.
            let mut back = Vec::with_capacity(head.len() + payload.len());
            back.extend_from_slice(head.get(1..).unwrap_or_default());
            back.extend_from_slice(payload);
            self.src.unread(&back);
            match self.src.skip_to(&DATA_BLOCK_MAGIC.to_le_bytes()) {
                Ok(true) => {}
                Ok(false) => {
                    let end = self.src.offset;
                    self.close_open_loss(end);
                    self.done = true;
                }
                Err(e) => self.io_failure(self.src.offset, e),
            }
        } else {
            // Count what is not read, so the loss says how much it is.
            let drained = self.src.drain();
            let end = self.src.offset;
            self.close_open_loss(end);
            if let Err(e) = drained {
                self.io_failure(end, e);
            }
            self.done = true;
        }
    }

    fn io_failure(&mut self, at: u64, e: io::Error) {
        self.close_open_loss(at);
        self.losses.push(Loss {
            offset: at,
            bytes: 0,
            reason: format!("read error, the rest of the input was not read: {e}"),
        });
        self.done = true;
    }

    fn close_open_loss(&mut self, end: u64) {
        if let Some(mut loss) = self.open_loss.take() {
            loss.bytes = end.saturating_sub(loss.offset);
            self.losses.push(loss);
        }
    }
}

/// What a consumer of records needs from a reader: [`Reader`] and
/// [`crate::ParallelReader`] both are one, so code that builds something
/// from the records takes either.
pub trait RecordSource {
    /// The process header.
    fn header(&self) -> &Header;
    /// Format version of the input (major, minor).
    fn version(&self) -> (u16, u16);
    /// The next record; `None` at the end of what can be read.
    fn next_record(&mut self) -> Option<Record>;
    /// What was not read, and why; complete once `next_record` has
    /// returned `None`.
    fn losses(&self) -> &[Loss];
    /// Records of unknown kinds skipped.
    fn skipped_unknown(&self) -> u64;
    /// Calls `f` with each record still to come, up to where
    /// `next_record` returns `None`. A source that holds its records
    /// decoded lends them rather than moving each out.
    fn for_each_record<F: FnMut(&Record)>(&mut self, mut f: F)
    where
        Self: Sized,
    {
        while let Some(rec) = self.next_record() {
            f(&rec);
        }
    }
}

impl<R: Read> RecordSource for Reader<R> {
    fn header(&self) -> &Header {
        Reader::header(self)
    }
    fn version(&self) -> (u16, u16) {
        Reader::version(self)
    }
    #[inline]
    fn next_record(&mut self) -> Option<Record> {
        Reader::next_record(self)
    }
    fn losses(&self) -> &[Loss] {
        Reader::losses(self)
    }
    fn skipped_unknown(&self) -> u64 {
        Reader::skipped_unknown(self)
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        self.next_record()
    }
}

/// The next record of a validated block `block` (whose first byte is at
/// input offset `block_offset`), decoding from `*pos` with `state`; `None`
/// once the block is done. Records of unknown kinds are counted in
/// `skipped` and passed over. A record that cannot be decoded costs the
/// rest of its block (later records may be deltas against it): the loss is
/// pushed on `losses` and the block is done.
#[inline(always)]
pub(crate) fn next_in_block(
    block: &[u8],
    pos: &mut usize,
    state: &mut DeltaState,
    block_offset: u64,
    skipped: &mut u64,
    losses: &mut Vec<Loss>,
) -> Option<Record> {
    while *pos < block.len() {
        let (at, tag, body) = frame(block, pos, block_offset, losses)?;
        // The frequent kinds are built right in the return value: going
        // through `decode_record`'s Result would copy each 168-byte record
        // once more.
        let b = &mut Cursor::new(body);
        macro_rules! hot {
            ($variant:ident, $decode:ident) => {{
                let v = codec::$decode(b, state);
                if !b.failed() {
                    return Some(Record::$variant(v));
                }
                b.finish(()).err()
            }};
        }
        let err = match tag {
            TAG_ACC => hot!(Acc, decode_acc),
            TAG_KERNEL => hot!(Kernel, decode_kernel),
            TAG_MEMCPY => hot!(Memcpy, decode_memcpy),
            TAG_MEMSET => hot!(Memset, decode_memset),
            TAG_DRIVER_CALL => hot!(DriverCall, decode_driver_call),
            TAG_HASH => hot!(Hash, decode_hash),
            _ => match codec::decode_record(tag, body, state) {
                Ok(Some(rec)) => return Some(rec),
                Ok(None) => {
                    *skipped += 1;
                    None
                }
                Err(e) => Some(e),
            },
        };
        if let Some(e) = err {
            malformed(block, pos, block_offset, at, tag, e, losses);
            return None;
        }
    }
    None
}

/// [`next_in_block`] into `slot`, a record of a reused buffer: an acc_prof
/// event (the bulk of every trace) is decoded right where it stays when
/// the slot held one before. False where `next_in_block` returns `None`
/// (then `slot` holds no record to use).
#[inline]
pub(crate) fn next_in_block_into(
    block: &[u8],
    pos: &mut usize,
    state: &mut DeltaState,
    block_offset: u64,
    skipped: &mut u64,
    losses: &mut Vec<Loss>,
    slot: &mut Record,
) -> bool {
    if *pos >= block.len() {
        return false;
    }
    let Some((at, tag, body)) = frame(block, pos, block_offset, losses) else {
        return false;
    };
    let b = &mut Cursor::new(body);
    if tag == TAG_ACC {
        if let Record::Acc(a) = slot {
            codec::decode_acc_into(b, state, a);
        } else {
            *slot = Record::Acc(codec::decode_acc(b, state));
        }
        if !b.failed() {
            return true;
        }
        if let Some(e) = b.finish(()).err() {
            malformed(block, pos, block_offset, at, tag, e, losses);
        }
        return false;
    }
    // Everything else is rare enough to go the ordinary way, from
    // this record on (skipping unknown kinds, ending at a malformed
    // record, as it does).
    *pos = at;
    other_in_block(block, pos, state, block_offset, skipped, losses, slot)
}

/// [`next_in_block_into`] for a record that is not an acc_prof event: kept
/// out of line so that the hot path stays small.
#[inline(never)]
fn other_in_block(
    block: &[u8],
    pos: &mut usize,
    state: &mut DeltaState,
    block_offset: u64,
    skipped: &mut u64,
    losses: &mut Vec<Loss>,
    slot: &mut Record,
) -> bool {
    match next_in_block(block, pos, state, block_offset, skipped, losses) {
        Some(r) => {
            *slot = r;
            true
        }
        None => false,
    }
}

/// The frame of the record at `*pos` of `block` (its offset, tag and body),
/// moving `*pos` past it; `None`, with the rest of the block lost, when it
/// runs past the block (the framing was checked when the block was loaded:
/// this only keeps a bug from looping).
#[inline(always)]
fn frame<'b>(
    block: &'b [u8],
    pos: &mut usize,
    block_offset: u64,
    losses: &mut Vec<Loss>,
) -> Option<(usize, u8, &'b [u8])> {
    let at = *pos;
    let mut c = Cursor::new(&block[at..]);
    let tag = c.u8();
    let body = c.bytes();
    *pos += c.pos();
    if c.failed() {
        malformed(
            block,
            pos,
            block_offset,
            at,
            tag,
            DecodeError::Short,
            losses,
        );
        return None;
    }
    Some((at, tag, body))
}

/// A record of an intact block could not be decoded: the rest of the block
/// is lost.
#[cold]
#[inline(never)]
fn malformed(
    block: &[u8],
    pos: &mut usize,
    block_offset: u64,
    at: usize,
    tag: u8,
    e: DecodeError,
    losses: &mut Vec<Loss>,
) {
    losses.push(Loss {
        offset: block_offset + at as u64,
        bytes: (block.len() - at) as u64,
        reason: format!("malformed record (kind {tag}): {e}"),
    });
    *pos = block.len();
}

/// Reads the header block after the file prefix: its framing, its
/// checksum, its contents, and the copy of the format version that format
/// 1.3 and later keep in it.
fn read_header_block<R: Read>(
    src: &mut Source<R>,
    block: &mut Vec<u8>,
) -> Result<(Header, Option<(u16, u16)>), TraceError> {
    let bad = |reason: String| TraceError::BadHeader { reason };
    let mut hdr = [0u8; BLOCK_HEADER_LEN];
    if src.fill(&mut hdr)? < BLOCK_HEADER_LEN {
        return Err(TraceError::Truncated { bytes: src.offset });
    }
    let (magic, len, count, crc) = split_block_header(&hdr);
    if magic != HEADER_BLOCK_MAGIC {
        return Err(bad(format!("bad header block magic {magic:#010x}")));
    }
    if len > MAX_BLOCK_PAYLOAD {
        return Err(bad(format!("header block length {len} is over the limit")));
    }
    if count != 1 {
        return Err(bad(format!(
            "header block says it holds {count} records, not 1"
        )));
    }
    if src.read_into(len, block)? < len {
        return Err(TraceError::Truncated { bytes: src.offset });
    }
    let found = crc32fast::hash(block);
    if found != crc {
        return Err(bad(format!(
            "checksum mismatch (stored {crc:#010x}, computed {found:#010x})"
        )));
    }
    decode_header(block).map_err(|e| bad(e.to_string()))
}

/// Why a version field that the header contradicts is damage.
fn damaged_version(found: (u16, u16), copy: Option<(u16, u16)>) -> String {
    let (major, minor) = found;
    match copy {
        Some((cm, cn)) => format!(
            "its version field reads {major}.{minor} but the header, under its checksum, says {cm}.{cn} (a damaged byte, not another format)"
        ),
        None if major != FORMAT_MAJOR => format!(
            "its version field reads {major}.{minor} but the header after it is an intact format {FORMAT_MAJOR} header (a damaged byte, not a newer format)"
        ),
        None => format!(
            "its version field reads {major}.{minor} but the header lacks the copy of the version that every header of format {FORMAT_MAJOR}.{FIRST_MINOR_WITH_VERSION_COPY} or later holds (a damaged byte, not a newer format)"
        ),
    }
}

fn split_block_header(h: &[u8; BLOCK_HEADER_LEN]) -> (u32, usize, u32, u32) {
    let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    (word(0), word(4) as usize, word(8), word(12))
}

/// The input, with bytes pushed back in front of it (for resynchronising)
/// and a count of bytes consumed.
struct Source<R> {
    input: R,
    pending: Vec<u8>,
    pending_pos: usize,
    /// Input offset of the next byte to be consumed.
    offset: u64,
}

impl<R: Read> Source<R> {
    fn new(input: R) -> Self {
        Source {
            input,
            pending: Vec::new(),
            pending_pos: 0,
            offset: 0,
        }
    }

    fn take_pending(&mut self, max: usize) -> &[u8] {
        let n = max.min(self.pending.len() - self.pending_pos);
        let s = &self.pending[self.pending_pos..self.pending_pos + n];
        self.pending_pos += n;
        s
    }

    /// Reads until `buf` is full or the input ends; returns the count.
    fn fill(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let p = self.take_pending(buf.len());
        let mut n = p.len();
        buf[..n].copy_from_slice(p);
        while n < buf.len() {
            match self.input.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.offset += n as u64;
                    return Err(e);
                }
            }
        }
        self.offset += n as u64;
        Ok(n)
    }

    /// Appends up to `len` bytes to `out`; fewer only at the end of input.
    fn read_into(&mut self, len: usize, out: &mut Vec<u8>) -> io::Result<usize> {
        let p = self.take_pending(len);
        let from_pending = p.len();
        out.extend_from_slice(p);
        // Grow by what arrives, not by what the (untrusted) length says.
        out.reserve((len - from_pending).min(2 * BLOCK_TARGET));
        let n = (&mut self.input)
            .take((len - from_pending) as u64)
            .read_to_end(out)?;
        self.offset += (from_pending + n) as u64;
        Ok(from_pending + n)
    }

    /// Puts `bytes` (just consumed) back in front of the input.
    fn unread(&mut self, bytes: &[u8]) {
        let mut v = Vec::with_capacity(bytes.len() + self.pending.len() - self.pending_pos);
        v.extend_from_slice(bytes);
        v.extend_from_slice(&self.pending[self.pending_pos..]);
        self.pending = v;
        self.pending_pos = 0;
        self.offset -= bytes.len() as u64;
    }

    /// Consumes bytes up to the next occurrence of `magic`, which is left
    /// unread. False when the input ended first.
    fn skip_to(&mut self, magic: &[u8; 4]) -> io::Result<bool> {
        const CHUNK: usize = 16 * 1024;
        let mut buf: Vec<u8> = Vec::new();
        loop {
            let n = self.read_into(CHUNK, &mut buf)?;
            if let Some(i) = buf.windows(4).position(|w| w == magic) {
                self.unread(&buf[i..]);
                return Ok(true);
            }
            if n == 0 {
                return Ok(false);
            }
            // A magic may straddle two chunks.
            let tail = buf.len().saturating_sub(3);
            buf.drain(..tail);
        }
    }

    /// Consumes the rest of the input.
    fn drain(&mut self) -> io::Result<()> {
        self.offset += (self.pending.len() - self.pending_pos) as u64;
        self.pending.clear();
        self.pending_pos = 0;
        let n = io::copy(&mut self.input, &mut io::sink())?;
        self.offset += n;
        Ok(())
    }
}
