//! accprof-analyzer: turns traces into a model of the run (constructs joined to
//! the kernels and copies they caused, tied to source lines), computes the
//! aggregates behind every report, and runs the findings rules.
//!
//! It reads traces; it never runs programs and never writes files.

pub mod analysis;
pub mod builder;
pub mod check;
pub mod compare;
pub mod findings;
pub(crate) mod idhash;
pub mod join;
pub mod ledger;
pub mod load;
pub mod model;
pub mod patch;
pub mod proposals;
pub mod rules;
pub mod runtime_facts;
pub(crate) mod shell;
pub mod source;
pub mod summary;
pub mod symbolize;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod units;

/// The trace's words the model speaks in (copy, construct and memory kinds,
/// the sources a trace had, how a process ended): views name them through
/// the analyzer, never the trace crate.
pub mod vocabulary {
    pub use accprof_trace::{
        CoherenceKind, ConstructKind, CopyKind, EndRecord, Ending, HashMode, Header, MemoryKind,
        SourceState, Sources,
    };
}

pub use load::{load_run, load_run_with, summarize_run_with, LoadError, LoadOptions, Progress};
pub use model::{
    AllocId, ApiRoutine, Construct, ConstructClass, ConstructId, DeviceAlloc, Entities, HostAccess,
    HostAccessId, Item, Kernel, KernelId, KernelSource, Memset, MemsetId, MpiCall, MpiCallId,
    NameId, NameOrigin, Run, Site, SiteId, Track, Transfer, TransferId, TransferSource,
};
