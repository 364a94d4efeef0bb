//! What the join learns of the process besides its entities: who ran it
//! and how it ended, what was lost, the names and sites the entities point
//! at, and the totals summed once. The model keeps it whole
//! ([`super::run::Run::process`]); the summary, streamed without a model, reads
//! the same struct at the end of the join.

use std::collections::BTreeMap;

use accprof_trace::{Device, DropSource, EndRecord, Header, Level, Loss, Module};

use super::entities::{ConstructId, HostAccess, MpiCall, Site, SiteId};
use super::facts::{Placement, Totals};

#[derive(Debug, Clone)]
pub struct Process {
    pub header: Header,
    /// Whether the coherence check ran and what it watched.
    pub check: crate::check::CheckState,
    /// The trace format's version (major, minor).
    pub version: (u16, u16),
    /// Byte ranges of the trace that could not be read.
    pub losses: Vec<Loss>,
    pub devices: Vec<Device>,
    /// The source sites, read through their handles ([`super::run::Run::site`]).
    pub(crate) sites: Vec<Site>,
    /// The source frames above a site, innermost first
    /// ([`super::run::Run::callers`]).
    pub(crate) callers: BTreeMap<SiteId, Vec<Site>>,
    /// MPI calls in start order ([`super::run::Run::mpi_calls`]).
    pub(crate) mpi_calls: Vec<MpiCall>,
    /// What the coherence check caught, in time order
    /// ([`super::run::Run::host_accesses`]).
    pub(crate) host_accesses: Vec<HostAccess>,
    /// Kernel and variable names, indexed by [`super::entities::NameId`].
    pub(crate) names: Vec<String>,
    /// Names of the OpenACC API routines called, indexed by
    /// [`super::entities::ApiRoutine`].
    pub routines: Vec<String>,
    /// Loaded modules (to map host addresses to symbols).
    pub modules: Vec<Module>,
    /// OpenACC events in the trace.
    pub acc_events: u64,
    /// Records the collector could not keep, by source.
    pub dropped: Vec<(DropSource, u64)>,
    pub diagnostics: Vec<(Level, String)>,
    /// Things the analyzer could not do (e.g. a binary missing for symbols).
    pub notes: Vec<String>,
    /// Records of kinds this reader does not know, skipped.
    pub skipped_unknown: u64,
    /// First and last timestamp seen.
    pub span_ns: (u64, u64),
    /// The constructs still open when the trace ended, per thread from the
    /// outermost to the innermost (what was running when the program
    /// stopped, or constructs whose end callbacks were toggled off).
    pub open_at_end: Vec<ConstructId>,
    /// How the process ended, when the collector saw it end; None for a
    /// trace that was cut (or written by a collector before format 1.1).
    pub ending: Option<EndRecord>,
    /// The fatal signal the collector's handler saw, with the thread, the
    /// faulting address and the driver call in flight (format 1.6 on).
    pub crash: Option<accprof_trace::Crash>,
    /// Constructs and device allocations the join started (the model's
    /// tables hold as many).
    pub(crate) constructs: u32,
    pub(crate) allocs: u32,
    /// The device time and traffic, summed once ([`super::run::Run::totals`]).
    pub(crate) totals: Totals,
    /// Where the constructs ran and which runtime ran them, read once.
    pub(crate) placement: Placement,
}
