//! The model's sink: keeps every entity the join hands over, in the
//! run's order, and hands the finished tables to the model.

use accprof_trace::{BufferHash, Header};

use crate::join::{At, Order, Sink};
use crate::model::{
    AllocId, Construct, ConstructId, DeviceAlloc, Kernel, KernelRow, LaunchRequest, Memset, Parts,
    Process, Run, Tables, Transfer, TransferRow,
};

/// The sink that keeps everything: the full [`Run`].
pub(super) struct RunSink {
    /// The kernels are the launches (no CUPTI): keep only the launches
    /// they cannot tell back.
    launches_in_kernels: bool,
    launches: Vec<LaunchRequest>,
    kernels: Arrivals<KernelRow>,
    transfers: Arrivals<TransferRow>,
    memsets: Arrivals<Memset>,
    /// The shapes of the rows, and the allocations (by handle).
    tables: Tables,
    hashes: Vec<BufferHash>,
    /// The collector's other work (the coherence check's), start and end.
    own_work: Vec<(u64, u64)>,
}

impl RunSink {
    pub(super) fn new(header: &Header) -> Self {
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

    fn hash(&mut self, h: &BufferHash, _at: Option<&At>) {
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
        Run::assemble(Parts {
            process,
            tables,
            memsets: self.memsets.in_order(|m| m.start_ns),
            launches,
            launches_in_kernels: self.launches_in_kernels,
            hashes,
            own_work: self.own_work,
        })
    }
}
