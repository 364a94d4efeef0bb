//! accprof-trace: the trace format shared by the collector (which writes it)
//! and the analyzer (which reads it): the record model and a versioned,
//! length-framed, block-checksummed binary codec.
//!
//! It must stay small: no dependencies beyond a checksum and an error derive,
//! no I/O policy (callers hand it `Read`/`Write`), no allocation per record on
//! the write path.

pub mod record;

pub use record::*;
