//! The aggregates behind the PGI_ACC_TIME-style summary: per source file,
//! function and line, how often each construct was reached, the kernels it
//! launched (per launch shape) and the transfers it made, with time
//! statistics; and, for several traces (MPI ranks), one merged summary with
//! per-rank totals and the imbalance of each line across ranks.
//!
//! Attribution: a kernel or copy belongs to the line of the construct that
//! caused it (a call of an OpenACC API routine such as `acc_copyin` counts
//! as a construct at the line of the call), and each construct counts at
//! the line the model reports it at ([`Run::line_site`]: nested constructs
//! at their top-level construct's line, the exit of a structured `data` or
//! `host_data` region at its entry's).
//!
//! Times: a function's `time(us)` is the host time spent inside its
//! top-level OpenACC constructs (from each construct's start event to its
//! end event; nested constructs are inside their parent and not counted
//! again). Kernel `device time` is CUPTI's start-to-end per launch; kernel
//! `elapsed time` is the host time of the construct that launched it.
//! Transfer times are CUPTI's device times, or without CUPTI the host time
//! of acc_prof's enqueue events.
//!
//! The rows and the run's facts are data the run carries, so they are
//! defined in the model (model/summary_types.rs) and re-exported here;
//! this module makes them (the sink, the merge).

mod merge;
mod sink;
#[cfg(test)]
mod tests;

pub use crate::model::summary_types::*;
pub use merge::{merge, LineImbalance, MergedSummary, RankRow};
pub use sink::SummarySink;

/// Reads a trace and summarizes it without building the model: memory
/// follows the distinct lines and launch shapes and what is in flight,
/// not the number of events.
pub fn summarize_reader(
    reader: impl accprof_trace::RecordSource,
    symbolizer: &mut crate::symbolize::Symbolizer,
) -> Summary {
    let mut summary = crate::join::join_reader(reader, symbolizer, SummarySink::new());
    // Without a model, the buffers the runtime did not name are named by
    // the executable's symbols, as the model names them before it reads
    // the sources ([`crate::Run::buffer_name`]).
    if let Some(exe) = summary.executable.take() {
        let mut moved: Vec<u64> = summary
            .functions
            .iter()
            .flat_map(|f| &f.lines)
            .flat_map(|l| &l.transfers)
            .flat_map(|t| &t.moved)
            .filter_map(|m| match m {
                Moved::Buffer(p) => Some(*p),
                Moved::Named(_) => None,
            })
            .collect();
        moved.sort_unstable();
        moved.dedup();
        let names = symbolizer.data_names(&exe, moved);
        summary.name_buffers(|p| names.get(&p).map(String::as_str));
    }
    summary
}
