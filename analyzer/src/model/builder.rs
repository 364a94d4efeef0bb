//! The builder: the join's sink that keeps everything, and the entry
//! points that read a trace into a [`Run`].

use accprof_trace::{BufferHash, Header, Trace};

use super::entities::*;
#[cfg(any(test, feature = "testkit"))]
use super::facts::{Placement, Totals};
use super::index::*;
use super::process::Process;
use super::run::*;
use super::tables::*;
use crate::join::{At, Both, Order, Sink};
use crate::summary::{Summary, SummarySink};
use crate::symbolize::Symbolizer;

/// The sink that keeps everything: the full [`Run`].
pub(crate) struct RunSink {
    /// The kernels are the launches (no CUPTI): keep only the launches
    /// they cannot tell back.
    pub(super) launches_in_kernels: bool,
    pub(super) launches: Vec<LaunchRequest>,
    pub(super) kernels: Arrivals<KernelRow>,
    pub(super) transfers: Arrivals<TransferRow>,
    pub(super) memsets: Arrivals<Memset>,
    /// The shapes of the rows, and the allocations (by handle).
    pub(super) tables: Tables,
    pub(super) hashes: Vec<BufferHash>,
    /// The collector's other work (the coherence check's), start and end.
    pub(super) own_work: Vec<(u64, u64)>,
}

impl RunSink {
    pub(crate) fn new(header: &Header) -> Self {
        RunSink {
            launches_in_kernels: !header.sources.cupti.is_active(),
            launches: Vec::new(),
            kernels: Arrivals::default(),
            transfers: Arrivals::default(),
            memsets: Arrivals::default(),
            tables: Tables::default(),
            hashes: Vec::new(),
            own_work: Vec::new(),
        }
    }
}

/// Puts `x` at `index`, growing the table with `x` as needed (the join
/// hands every index below the last over once).
pub(super) fn place<T: Clone>(table: &mut Vec<T>, index: usize, x: T) {
    if table.len() <= index {
        table.resize(index + 1, x);
    } else {
        table[index] = x;
    }
}

/// Entities of one kind as the join hands them over: their rows, and
/// beside them the second half of each one's [`Order`] (the first is the
/// row's start). They mostly come in the run's order, and then the rows
/// are the table as they stand.
pub(super) struct Arrivals<T> {
    rows: Vec<T>,
    seqs: Vec<u64>,
    /// The latest order handed over.
    last: Option<Order>,
    /// None came before the one handed over before it.
    sorted: bool,
}

impl<T> Default for Arrivals<T> {
    fn default() -> Self {
        Arrivals {
            rows: Vec::new(),
            seqs: Vec::new(),
            last: None,
            sorted: true,
        }
    }
}

impl<T> Arrivals<T> {
    pub(super) fn push(&mut self, order: Order, row: T) {
        if self.last.is_some_and(|last| order < last) {
            self.sorted = false;
        }
        self.last = Some(order);
        self.rows.push(row);
        self.seqs.push(order.1);
    }

    /// The rows in the run's order (start, then the order's second half),
    /// the table no larger than it holds.
    pub(super) fn in_order(self, start: impl Fn(&T) -> u64) -> Vec<T> {
        let mut rows = self.rows;
        if !self.sorted {
            let mut keyed: Vec<(u64, T)> = self.seqs.into_iter().zip(rows).collect();
            keyed.sort_by_key(|(seq, x)| (start(x), *seq));
            rows = keyed.into_iter().map(|(_, x)| x).collect();
        }
        rows.shrink_to_fit();
        rows
    }
}

impl Sink for RunSink {
    type Output = Run;

    fn construct(
        &mut self,
        id: ConstructId,
        c: &Construct,
        launches: &[LaunchRequest],
        _at: &At,
        _open_at_end: bool,
    ) {
        let row = self.tables.construct_row(c);
        place(&mut self.tables.constructs, id.index(), row);
        if self.launches_in_kernels {
            let kept = launches.iter().filter(|l| !l.fits_kernel()).cloned();
            self.launches.extend(kept);
        } else {
            self.launches.extend_from_slice(launches);
        }
    }

    fn kernel(&mut self, k: &Kernel, order: Order, _at: Option<&At>) {
        debug_assert_eq!(
            order.0, k.start_ns,
            "a kernel's order starts with its start"
        );
        let row = self.tables.kernel_row(k);
        self.kernels.push(order, row);
    }

    fn transfer(&mut self, t: &Transfer, order: Order, _at: Option<&At>) {
        debug_assert_eq!(
            order.0, t.start_ns,
            "a transfer's order starts with its start"
        );
        let row = self.tables.transfer_row(t);
        self.transfers.push(order, row);
    }

    fn memset(&mut self, m: &Memset, order: Order, _at: Option<&At>) {
        debug_assert_eq!(
            order.0, m.start_ns,
            "a memset's order starts with its start"
        );
        self.memsets.push(order, m.clone());
    }

    fn alloc(&mut self, id: AllocId, a: &DeviceAlloc) {
        let row = self.tables.alloc_row(a);
        place(&mut self.tables.allocs, id.index(), row);
    }

    fn freed(&mut self, id: AllocId, free_ns: u64) {
        if let Some(r) = self.tables.allocs.get_mut(id.index()) {
            r.free_ns = free_ns;
        }
    }

    fn hash(&mut self, h: &BufferHash, _at: Option<&crate::join::At>) {
        self.hashes.push(*h);
    }

    fn own_work(&mut self, w: &accprof_trace::OwnWork) {
        self.own_work.push((w.start_ns, w.end_ns));
    }

    fn finish(self, process: Process) -> Run {
        // Every construct and allocation the join started came back.
        let mut tables = self.tables;
        tables.constructs.truncate(process.constructs as usize);
        tables.constructs.shrink_to_fit();
        tables.allocs.truncate(process.allocs as usize);
        tables.allocs.shrink_to_fit();
        tables.kernels = self.kernels.in_order(|k| k.start_ns);
        tables.transfers = self.transfers.in_order(|t| t.start_ns);
        tables.seal();
        let mut launches = self.launches;
        if !launches
            .windows(2)
            .all(|w| w[0].construct <= w[1].construct)
        {
            launches.sort_by_key(|l| l.construct);
        }
        launches.shrink_to_fit();
        let mut hashes = self.hashes;
        hashes.shrink_to_fit();
        let mut run = Run {
            process,
            tables,
            memsets: self.memsets.in_order(|m| m.start_ns),
            launches,
            launches_in_kernels: self.launches_in_kernels,
            collector_spans: collector_spans(&hashes, self.own_work),
            hashes,
            executable_binary: None,
            data_names: Default::default(),
            buffer_names: Default::default(),
            related: Related::default(),
            summary: Summary::default(),
        };
        run.derive_indices();
        run
    }
}

impl Run {
    /// A run with no entities (for runs made by hand).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn empty(header: Header) -> Run {
        let mut run = Run {
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
        };
        run.summary = SummarySink::new().finish(run.process.clone());
        run
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

    /// Sets the kernels, transfers and allocations of a run made by hand
    /// (each table in the run's order).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn set_entities(
        &mut self,
        kernels: &[Kernel],
        transfers: &[Transfer],
        allocs: &[DeviceAlloc],
    ) {
        let mut t = std::mem::take(&mut self.tables);
        t.kernels = kernels.iter().map(|k| t.kernel_row(k)).collect();
        t.transfers = transfers.iter().map(|x| t.transfer_row(x)).collect();
        t.allocs = allocs.iter().map(|a| t.alloc_row(a)).collect();
        t.seal();
        self.tables = t;
    }

    /// The kernels the runtime's launch events tell of, for a run made by
    /// hand without CUPTI (the join hands them over itself).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn launched_kernels(&mut self) -> Vec<Kernel> {
        let unnamed = self.intern_name("?");
        self.launches
            .iter()
            .map(|l| l.kernel(&self.construct(l.construct), unnamed))
            .collect()
    }
}

/// Builds the model of one trace, symbolizing call sites with `symbolizer`.
pub fn build(trace: Trace, symbolizer: &mut Symbolizer) -> Run {
    let sink = Both(RunSink::new(&trace.header), SummarySink::new());
    let (mut run, summary) = crate::join::join_trace(trace, symbolizer, sink);
    run.summary = summary;
    read_binaries(&mut run, symbolizer);
    run
}

/// What the analysis reads from the program's executable besides call
/// sites, found once through `symbolizer`: where its file is, and the names
/// of the data objects the transfers moved.
pub(super) fn read_binaries(run: &mut Run, symbolizer: &mut Symbolizer) {
    let Some(exe) = run.executable_module() else {
        run.derive_names();
        return;
    };
    let binary = symbolizer.locate(exe);
    // Each buffer once: the transfers' shapes hold their host pointers.
    let mut moved: Vec<u64> = run
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
    run.executable_binary = binary;
    run.data_names = names.into_iter().collect();
    run.derive_names();
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
    read_binaries(&mut run, symbolizer);
    run
}
