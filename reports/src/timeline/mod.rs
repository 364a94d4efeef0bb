//! The run as a timeline for Perfetto's UI (ui.perfetto.dev) and
//! chrome://tracing: per rank, one track per host thread (the OpenACC
//! constructs, nested, the MPI calls, and as instants the host accesses
//! of `--check coherence`), one per device stream (kernels) and one per copy
//! direction and stream (transfers), with a flow arrow from each construct
//! to each kernel and copy it caused, and the source line, variable, bytes
//! and launch shape as arguments.
//!
//! The parts: [`walk`] reads the model's tables in start order over all
//! ranks and hands tracks, slices and instants to a [`TimelineSink`]; the
//! sinks encode them, two encodings of the same events:
//! - [`chrome`]: Chrome trace-event JSON ([`write_chrome`]): readable, and
//!   what most tools take, but about 85 bytes per event of the trace (17 GB
//!   for 200 M events; measured on bench/eventstorm.c's trace) and slow to
//!   parse.
//! - [`perfetto`]: Perfetto's protobuf trace ([`write_perfetto`]): about 50
//!   bytes per event, and what the UI loads fastest, written by a small
//!   encoder of its own ([`Proto`]).
//!
//! Both stream: events go out as the model's tables are walked, and what
//! is held besides the model is one event and, per track, the ends of the
//! slices still open on it (the nesting depth).

use std::io;

pub mod chrome;
pub mod perfetto;
pub mod walk;

pub use chrome::{write_chrome, ChromeSink};
pub use perfetto::{write_perfetto, PerfettoSink, Proto};
pub use walk::write;

/// An argument of an event.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Str(&'a str),
    Int(u64),
}

/// A track: its id, the rank it belongs to, its kind and its name.
#[derive(Debug, Clone)]
pub struct Track {
    /// Unique over the whole export.
    pub id: u64,
    /// The rank's process track it sits under.
    pub process: u64,
    pub name: String,
    /// Order in the UI (host threads first).
    pub sort: u32,
}

/// One slice on a track.
pub struct Slice<'a> {
    pub track: u64,
    pub name: &'a str,
    pub category: &'static str,
    pub start_ns: u64,
    pub end_ns: u64,
    pub args: &'a [(&'static str, Arg<'a>)],
    /// Flows that start at this slice (a construct's kernels and copies).
    pub flows_out: &'a [u64],
    /// The flow that ends at this slice.
    pub flow_in: Option<u64>,
}

/// An event without duration on a track (a host access the coherence
/// check caught).
pub struct Instant<'a> {
    pub track: u64,
    pub name: &'a str,
    pub category: &'static str,
    pub at_ns: u64,
    pub args: &'a [(&'static str, Arg<'a>)],
}

/// Where the events go.
pub trait TimelineSink {
    fn process(&mut self, id: u64, pid: u32, name: &str) -> io::Result<()>;
    fn track(&mut self, t: &Track) -> io::Result<()>;
    fn slice(&mut self, s: &Slice<'_>) -> io::Result<()>;
    fn instant(&mut self, i: &Instant<'_>) -> io::Result<()>;
    fn finish(&mut self) -> io::Result<()>;
}

/// Counts of what a timeline holds (for tests and the CLI's message).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub constructs: u64,
    pub kernels: u64,
    pub copies: u64,
    pub mpi_calls: u64,
    pub host_accesses: u64,
    pub flows: u64,
}
