//! The run as a timeline for Perfetto's UI (ui.perfetto.dev) and
//! chrome://tracing: per rank, one track per host thread (the OpenACC
//! constructs, nested, the MPI calls, and as instants the host accesses
//! of `--check coherence`), one per device stream (kernels) and one per copy
//! direction and stream (transfers), with a flow arrow from each construct
//! to each kernel and copy it caused, and the source line, variable, bytes
//! and launch shape as arguments.
//!
//! The parts: [`walk`] reads the model's tables in start order over all
//! ranks and hands tracks, slices and instants to a [`TimelineSink`]
//! ([`sink`]: the events and where they go); the sinks encode them, two encodings of the same events:
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

pub mod chrome;
pub mod perfetto;
pub mod sink;
pub mod walk;

pub use chrome::{write_chrome, ChromeSink};
pub use perfetto::{write_perfetto, PerfettoSink, Proto};
pub use sink::{Arg, Counts, Instant, Slice, TimelineSink, Track};
pub use walk::write;
