//! The write side: records into checksummed blocks.

use std::io::Write;

use crate::codec::{encode_header, encode_record, size_bound, DeltaState};
use crate::error::TraceError;
use crate::format::*;
use crate::record::{Header, Record};

/// Writes a trace: the file prefix and header at creation, then records
/// grouped into blocks of about [`BLOCK_TARGET`] bytes.
///
/// Records are encoded straight into one reused block buffer, so `write`
/// does not allocate once the buffer has grown to its working size. Blocks
/// reach `out` whole, in one `write_all` each, so `out` needs no buffering
/// of its own.
///
/// Records in the open block reach `out` on [`flush`](Self::flush),
/// [`finish`](Self::finish), when the block fills, or (best effort, errors
/// ignored) when the writer is dropped.
pub struct Writer<W: Write> {
    /// `None` only after `finish` took it.
    out: Option<W>,
    /// The open block: [`BLOCK_HEADER_LEN`] bytes reserved for its header, then payload
    /// up to `fill`. The bytes after `fill` are working room: the buffer is
    /// kept at least `size_bound` longer than `fill` before each record.
    block: Vec<u8>,
    fill: usize,
    block_records: u32,
    state: DeltaState,
    records: u64,
    bytes: u64,
}

impl<W: Write> Writer<W> {
    /// Writes the magic, the format version and the header block to `out`.
    pub fn new(mut out: W, header: &Header) -> Result<Self, TraceError> {
        let mut buf = Vec::with_capacity(BLOCK_HEADER_LEN + BLOCK_TARGET + 4096);
        buf.extend_from_slice(&FILE_MAGIC);
        buf.extend_from_slice(&FORMAT_MAJOR.to_le_bytes());
        buf.extend_from_slice(&FORMAT_MINOR.to_le_bytes());
        let block_at = buf.len();
        buf.resize(block_at + BLOCK_HEADER_LEN, 0);
        encode_header(&mut buf, header);
        let payload_len = buf.len() - block_at - BLOCK_HEADER_LEN;
        if payload_len > MAX_BLOCK_PAYLOAD {
            return Err(TraceError::RecordTooLarge {
                bytes: payload_len as u64,
            });
        }
        let crc = crc32fast::hash(&buf[block_at + BLOCK_HEADER_LEN..]);
        put_block_header(
            &mut buf[block_at..],
            HEADER_BLOCK_MAGIC,
            payload_len,
            1,
            crc,
        );
        out.write_all(&buf)?;
        let bytes = buf.len() as u64;
        buf.clear();
        buf.resize(BLOCK_HEADER_LEN + BLOCK_TARGET + 1024, 0);
        Ok(Writer {
            out: Some(out),
            block: buf,
            fill: BLOCK_HEADER_LEN,
            block_records: 0,
            state: DeltaState::default(),
            records: 0,
            bytes,
        })
    }

    /// Appends `rec` to the open block, sealing the block once it passes
    /// [`BLOCK_TARGET`] bytes. Fails only when sealing fails to write (the
    /// records of that block are then dropped, and the writer goes on with
    /// a fresh block), or for a record larger than [`MAX_BLOCK_PAYLOAD`]
    /// (refused; nothing else is lost).
    #[inline]
    pub fn write(&mut self, rec: &Record) -> Result<(), TraceError> {
        let bound = size_bound(rec);
        if self.fill + bound > self.block.len() {
            self.make_room(bound)?;
        }
        let n = encode_record(&mut self.block[self.fill..], &mut self.state, rec);
        self.fill += n;
        self.block_records += 1;
        self.records += 1;
        if self.fill - BLOCK_HEADER_LEN >= BLOCK_TARGET {
            self.seal()?;
        }
        Ok(())
    }

    /// Grows the working room for a record of up to `bound` bytes, sealing
    /// first if the record would push the block past the payload limit.
    #[cold]
    fn make_room(&mut self, bound: usize) -> Result<(), TraceError> {
        if bound > MAX_BLOCK_PAYLOAD {
            return Err(TraceError::RecordTooLarge {
                bytes: bound as u64,
            });
        }
        if self.fill - BLOCK_HEADER_LEN + bound > MAX_BLOCK_PAYLOAD {
            self.seal()?;
        }
        if self.fill + bound > self.block.len() {
            self.block.resize(self.fill + bound, 0);
        }
        Ok(())
    }

    /// Seals the open block (if it holds any record) and flushes `out`.
    pub fn flush(&mut self) -> Result<(), TraceError> {
        self.seal()?;
        if let Some(out) = self.out.as_mut() {
            out.flush()?;
        }
        Ok(())
    }

    /// Records accepted by [`write`](Self::write) so far, including those
    /// still in the open block.
    pub fn records_written(&self) -> u64 {
        self.records
    }

    /// Bytes handed to `out` so far: prefix, header and sealed blocks (not
    /// the open block).
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    /// Seals the open block, flushes and returns `out`.
    pub fn finish(mut self) -> Result<W, TraceError> {
        self.flush()?;
        self.out
            .take()
            .ok_or_else(|| TraceError::Io(std::io::Error::other("trace writer already finished")))
    }

    fn seal(&mut self) -> Result<(), TraceError> {
        if self.block_records == 0 {
            return Ok(());
        }
        let block = &mut self.block[..self.fill];
        let (head, payload) = block.split_at_mut(BLOCK_HEADER_LEN);
        let crc = crc32fast::hash(payload);
        put_block_header(
            head,
            DATA_BLOCK_MAGIC,
            payload.len(),
            self.block_records,
            crc,
        );
        let res = match self.out.as_mut() {
            Some(out) => out.write_all(block),
            None => Ok(()),
        };
        // Start a new block whatever happened: retrying a block that was
        // partly written would only add damage after it.
        let len = self.fill as u64;
        self.fill = BLOCK_HEADER_LEN;
        self.block_records = 0;
        self.state = DeltaState::default();
        res?;
        self.bytes += len;
        Ok(())
    }
}

impl<W: Write> Drop for Writer<W> {
    fn drop(&mut self) {
        if self.out.is_some() {
            // Errors cannot be reported from here; `finish` reports them.
            let _ = self.flush();
        }
    }
}

fn put_block_header(dst: &mut [u8], magic: u32, len: usize, count: u32, crc: u32) {
    dst[0..4].copy_from_slice(&magic.to_le_bytes());
    dst[4..8].copy_from_slice(&(len as u32).to_le_bytes());
    dst[8..12].copy_from_slice(&count.to_le_bytes());
    dst[12..16].copy_from_slice(&crc.to_le_bytes());
}
