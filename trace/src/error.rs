//! The crate's one error type.

use crate::format::{FORMAT_MAJOR, FORMAT_MINOR, MAX_BLOCK_PAYLOAD};

/// Why a trace could not be opened or written.
///
/// Damage after the header is not an error: the reader returns what it could
/// read and reports the rest as [`crate::Loss`]es. Messages are one line and
/// do not name the file; callers add that.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The input has no bytes at all.
    #[error("empty file: not an accprof trace")]
    Empty,

    /// The input does not start with the trace magic.
    #[error("not an accprof trace (it does not start with the ACCPROF magic)")]
    NotATrace,

    /// The input ends inside the magic, the version or the header block.
    #[error("truncated accprof trace: the file ends inside its header, after {bytes} bytes")]
    Truncated {
        /// How many bytes there were.
        bytes: u64,
    },

    /// The trace has a major version this reader does not read.
    #[error(
        "unsupported trace format version {found_major}.{found_minor}: this accprof reads \
         format {}.x (written as {}.{}); use an accprof that supports {found_major}.x",
        FORMAT_MAJOR,
        FORMAT_MAJOR,
        FORMAT_MINOR
    )]
    UnsupportedVersion {
        /// The version found in the file.
        found_major: u16,
        /// The minor version found in the file.
        found_minor: u16,
    },

    /// The header block is present but damaged (bad block framing, checksum
    /// or contents).
    #[error("damaged trace header: {reason}")]
    BadHeader {
        /// What was wrong, in words.
        reason: String,
    },

    /// A record too large to fit in one block (writer side).
    #[error("record of {bytes} bytes is larger than the {MAX_BLOCK_PAYLOAD}-byte block limit")]
    RecordTooLarge {
        /// Encoded size of the record (an upper bound).
        bytes: u64,
    },

    /// Reading the header or writing failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}
