//! A run from its finished parts. The model knows no join: whoever reads
//! a trace (the builder, builder/) gathers the tables, launches, memsets
//! and the collector's own work, hands them over as [`Parts`], and the model puts
//! them together and indexes them; then reads what the executable tells
//! of its buffers. Runs made by hand for tests start from
//! [`Run::empty`].

use accprof_trace::BufferHash;

#[cfg(any(test, feature = "testkit"))]
use accprof_trace::Header;

use super::entities::*;
#[cfg(any(test, feature = "testkit"))]
use super::facts::{Placement, Totals};
use super::index::*;
use super::process::Process;
use super::run::*;
use super::tables::*;
use crate::symbolize::Symbolizer;

use super::summary_types::Summary;

/// What a run is made of, as the reader of a trace finished it: the
/// tables complete and each in the run's order, the launches by
/// construct.
pub(crate) struct Parts {
    pub(crate) process: Process,
    pub(crate) tables: Tables,
    pub(crate) memsets: Vec<Memset>,
    pub(crate) launches: Vec<LaunchRequest>,
    pub(crate) launches_in_kernels: bool,
    pub(crate) hashes: Vec<BufferHash>,
    /// The collector's other work (the coherence check's), start and end.
    pub(crate) own_work: Vec<(u64, u64)>,
}

impl Run {
    /// The run of `parts`, its indices made; its summary and the names
    /// of its buffers still to come.
    pub(crate) fn assemble(parts: Parts) -> Run {
        let mut tables = parts.tables;
        tables.seal();
        let mut run = Run {
            process: parts.process,
            tables,
            memsets: parts.memsets,
            launches: parts.launches,
            launches_in_kernels: parts.launches_in_kernels,
            collector_spans: collector_spans(&parts.hashes, parts.own_work),
            hashes: parts.hashes,
            executable_binary: None,
            data_names: Default::default(),
            buffer_names: Default::default(),
            related: Related::default(),
            summary: Summary::default(),
        };
        run.derive_indices();
        run
    }

    /// What the analysis reads from the program's executable besides call
    /// sites, found once through `symbolizer`: where its file is, and the
    /// names of the data objects the transfers moved.
    pub(crate) fn read_binaries(&mut self, symbolizer: &mut Symbolizer) {
        let Some(exe) = self.executable_module() else {
            self.derive_names();
            return;
        };
        let binary = symbolizer.locate(exe);
        // Each buffer once: the transfers' shapes hold their host pointers.
        let mut moved: Vec<u64> = self
            .tables
            .transfer_shapes
            .list
            .iter()
            .map(|s| s.host_ptr)
            .filter(|&p| p != u64::MAX)
            .collect();
        moved.sort_unstable();
        moved.dedup();
        let names = symbolizer.data_names(exe, moved);
        self.executable_binary = binary;
        self.data_names = names.into_iter().collect();
        self.derive_names();
    }
}

impl Run {
    /// A run with no entities (for runs made by hand), its summary
    /// still to be made by whoever makes it.
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn empty(header: Header) -> Run {
        Run {
            process: Process {
                check: Default::default(),
                placement: Placement::new(&header),
                header,
                version: (1, 0),
                losses: Vec::new(),
                devices: Vec::new(),
                sites: Vec::new(),
                callers: Default::default(),
                mpi_calls: Vec::new(),
                host_accesses: Vec::new(),
                names: Vec::new(),
                routines: Vec::new(),
                modules: Vec::new(),
                acc_events: 0,
                dropped: Vec::new(),
                diagnostics: Vec::new(),
                notes: Vec::new(),
                skipped_unknown: 0,
                span_ns: (0, 0),
                open_at_end: Vec::new(),
                ending: None,
                crash: None,
                constructs: 0,
                allocs: 0,
                totals: Totals::default(),
            },
            tables: Tables::default(),
            memsets: Vec::new(),
            launches: Vec::new(),
            launches_in_kernels: false,
            hashes: Vec::new(),
            collector_spans: Vec::new(),
            executable_binary: None,
            data_names: Default::default(),
            buffer_names: Default::default(),
            related: Related::default(),
            summary: Summary::default(),
        }
    }

    /// The handle of a name, added when new (for runs made by hand).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn intern_name(&mut self, text: &str) -> NameId {
        match self.process.names.iter().position(|n| n == text) {
            Some(i) => NameId::at(i),
            None => {
                self.process.names.push(text.to_string());
                NameId::at(self.process.names.len() - 1)
            }
        }
    }
}
