//! accprof-trace: the trace format shared by the collector (which writes it)
//! and the analyzer (which reads it): the record model and a versioned,
//! length-framed, block-checksummed binary codec.
//!
//! It must stay small: no dependencies beyond a checksum and an error derive,
//! no I/O policy (callers hand it `Read`/`Write`), no allocation per record on
//! the write path.
//!
//! Write with [`Writer`], read with [`Reader`] or [`read_trace`] /
//! [`read_file`], or with [`ParallelReader`] (`Reader::parallel`) to decode
//! on a worker thread. The byte layout is described in [`mod@format`].
//!
//! ```
//! use accprof_trace::*;
//! # let header = Header {
//! #     host: "node1".into(), pid: 42, rank: None, command_line: vec!["./app".into()],
//! #     executable: "/tmp/app".into(), start_unix_ns: 1, start_clock_ns: 2,
//! #     clock: Clock::Monotonic, runtime: "unknown".into(), collector: "doc".into(),
//! #     sources: Sources { acc_prof: SourceState::Active,
//! #         cupti: SourceState::Inactive("not loaded".into()), hashing: HashMode::Off,
//! #         coherence: false },
//! #     process_start_ns: None,
//! # };
//! let mut w = Writer::new(Vec::new(), &header)?;
//! w.write(&Record::Dropped { source: DropSource::Cupti, count: 3 })?;
//! let bytes = w.finish()?;
//!
//! let trace = read_trace(&bytes[..])?;
//! assert_eq!(trace.header, header);
//! assert_eq!(trace.records.len(), 1);
//! assert!(trace.losses.is_empty());
//! # Ok::<(), TraceError>(())
//! ```

mod codec;
pub mod contract;
mod error;
pub mod format;
mod parallel;
mod reader;
pub mod record;
mod varint;
mod writer;

pub use error::TraceError;
pub use format::{FORMAT_MAJOR, FORMAT_MINOR};
pub use parallel::ParallelReader;
pub use reader::{read_file, read_trace, Loss, Reader, RecordSource, Trace};
pub use record::*;
pub use writer::Writer;
