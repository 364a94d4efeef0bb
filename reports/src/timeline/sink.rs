//! What the walk hands on: tracks, slices and instants, and the sink
//! that encodes them.

use std::io;

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
