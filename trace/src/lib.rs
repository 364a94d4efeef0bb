//! accprof-trace: the trace format shared by the collector (which writes it)
//! and the analyzer (which reads it): the record model and a versioned,
//! length-framed, block-checksummed binary codec.
//!
//! It must stay small: no dependencies beyond a checksum and an error derive,
//! no I/O policy (callers hand it `Read`/`Write`), no allocation per record on
//! the write path.
//!
//! Write with [`Writer`], read with [`Reader`] or [`read_trace`] /
//! [`read_file`]. The byte layout is described in [`format`].

mod codec;
mod error;
pub mod format;
mod reader;
pub mod record;
mod varint;
mod writer;

pub use error::TraceError;
pub use format::{FORMAT_MAJOR, FORMAT_MINOR};
pub use reader::{read_file, read_trace, Loss, Reader, Trace};
pub use record::*;
pub use writer::Writer;
