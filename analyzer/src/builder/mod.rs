//! The builder: reads a trace into a [`Run`] through the join, with the
//! summary made in the same pass.
//!
//! The join hands its entities to two sinks at once ([`Both`]): the
//! model's ([`RunSink`], sink.rs), which keeps everything, and the
//! summary's. The model itself knows no join: this module is the one
//! place that ties the two, so the join depends on the model and never
//! the other way round.

mod sink;
#[cfg(test)]
mod tests;

use sink::RunSink;

use crate::join::Both;
use crate::model::Run;
use crate::summary::SummarySink;
use crate::symbolize::Symbolizer;
use accprof_trace::Trace;

/// Builds the model of one trace, symbolizing call sites with `symbolizer`.
pub fn build(trace: Trace, symbolizer: &mut Symbolizer) -> Run {
    let sink = Both(RunSink::new(&trace.header), SummarySink::new());
    let (mut run, summary) = crate::join::join_trace(trace, symbolizer, sink);
    run.summary = summary;
    run.read_binaries(symbolizer);
    run
}

/// Builds the model while reading: records are looked at one by one and
/// never held all at once, so memory follows the model, not the trace.
pub fn build_from_reader(
    reader: impl accprof_trace::RecordSource,
    symbolizer: &mut Symbolizer,
) -> Run {
    let sink = Both(RunSink::new(reader.header()), SummarySink::new());
    let (mut run, summary) = crate::join::join_reader(reader, symbolizer, sink);
    run.summary = summary;
    run.read_binaries(symbolizer);
    run
}
