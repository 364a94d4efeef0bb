//! The read API of a run: what every view asks of the model.

use accprof_trace::BufferHash;

use super::entities::*;
use super::facts::*;
use super::index::*;
use super::ledger_types::Ledger;
use super::process::Process;
use super::summary_types::{InFlight, RunFacts, Summary};
use super::tables::*;

/// One process's run, joined.
#[derive(Debug, Clone)]
pub struct Run {
    /// Who ran it, how it ended, what was lost, the names and sites the
    /// entities point at, the totals: what the join learned of the process
    /// besides its entities.
    pub process: Process,
    /// The constructs in start order (read back whole through
    /// [`Run::construct`]).
    /// The kernels in device start order (launch start order when CUPTI
    /// did not record: see [`KernelSource`]), the transfers in start
    /// order, the device allocations in allocation order.
    pub(crate) tables: Tables,
    /// In start order.
    pub(crate) memsets: Vec<Memset>,
    /// The runtime's launch events, by construct: all of them when CUPTI
    /// recorded; without CUPTI (`launches_in_kernels`) each kernel is its
    /// launch, and only those whose numbers a kernel cannot hold are here.
    pub(crate) launches: Vec<LaunchRequest>,
    pub(crate) launches_in_kernels: bool,
    pub hashes: Vec<BufferHash>,
    /// When the collector itself kept the host busy (hashing buffers, the
    /// coherence check's work at construct boundaries), as
    /// sorted, disjoint [start, end) spans ([`Run::collector_ns_in`]).
    pub(crate) collector_spans: Vec<(u64, u64)>,
    /// Where the executable's binary was found for reading (its recorded
    /// path or a copy in a search directory, same build); None when it was
    /// not found.
    pub executable_binary: Option<std::path::PathBuf>,
    /// Names of the executable's data objects (globals, statics) at the host
    /// addresses the transfers moved, from its symbol table: what the
    /// findings call a buffer the runtime did not name.
    pub data_names: std::collections::BTreeMap<u64, String>,
    /// The other names of the buffers ([`Run::buffer_name`]).
    pub(crate) buffer_names: super::index::BufferNames,
    /// Each construct's own kernels, transfers, allocations, memsets and
    /// launches (the other way round from their `construct` fields), made
    /// by [`Run::derive`].
    pub(crate) related: Related,
    /// The PGI_ACC_TIME-style summary, made by the same join that made
    /// the entities ([`Run::summary`]).
    pub(crate) summary: Summary,
}

impl Run {
    /// The summary by file, function and line (the `PGI_ACC_TIME` layout)
    /// with the run's facts, made in the same pass over the trace as the
    /// model itself.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// The run's own facts: who ran it, its totals, losses, how it ended
    /// and what was in flight then.
    pub fn facts(&self) -> &RunFacts {
        // Every run's summary holds its one run's facts: the summary's
        // sink makes them at the end of the join (and of a run made by
        // hand, from its finished tables).
        &self.summary.runs[0]
    }

    /// Where the wall time went: made by the ledger's sink in the join's
    /// pass with the summary, carried in the run's facts.
    pub fn ledger(&self) -> &Ledger {
        &self.facts().ledger
    }

    /// Adds what the analyzer could not do to the run's notes, and to its
    /// facts, which the summary shows.
    pub fn add_notes(&mut self, notes: Vec<String>) {
        self.summary.runs[0].notes.extend(notes.iter().cloned());
        self.process.notes.extend(notes);
    }

    /// The construct that was running when the program ended abnormally:
    /// the latest-started of the outermost constructs still open at the end
    /// of the trace. None when the program ended normally or nothing was
    /// open.
    pub fn in_flight(&self) -> Option<&InFlight> {
        self.facts().in_flight.as_ref()
    }

    /// The name of an API routine (`acc_copyin`, ...).
    pub fn routine(&self, r: ApiRoutine) -> &str {
        self.process
            .routines
            .get(r.0 as usize)
            .map_or("?", String::as_str)
    }

    // The accessors take handles this run handed out; a handle of another
    // run is a bug in the caller and panics when out of range.

    pub fn site(&self, id: SiteId) -> &Site {
        &self.process.sites[id.index()]
    }

    pub fn construct(&self, id: ConstructId) -> Construct {
        self.tables.construct(&self.tables.constructs[id.index()])
    }

    pub fn kernel(&self, id: KernelId) -> Kernel {
        self.tables.kernel(&self.tables.kernels[id.index()])
    }

    pub fn transfer(&self, id: TransferId) -> Transfer {
        self.tables.transfer(&self.tables.transfers[id.index()])
    }

    pub fn alloc(&self, id: AllocId) -> DeviceAlloc {
        self.tables.alloc(&self.tables.allocs[id.index()])
    }

    /// A construct's start and end (`None`: the end never came), read
    /// from its row without making the whole construct: for views that
    /// look up many times, such as the timeline's lanes.
    pub fn construct_span(&self, id: ConstructId) -> (u64, Option<u64>) {
        let r = &self.tables.constructs[id.index()];
        (r.start_ns, (r.end_ns != u64::MAX).then_some(r.end_ns))
    }

    /// A kernel's start and end, read from its row.
    pub fn kernel_span(&self, id: KernelId) -> (u64, u64) {
        let r = &self.tables.kernels[id.index()];
        (r.start_ns, r.end_ns)
    }

    /// A transfer's start and end, read from its row.
    pub fn transfer_span(&self, id: TransferId) -> (u64, u64) {
        let r = &self.tables.transfers[id.index()];
        (r.start_ns, r.end_ns)
    }

    /// An allocation's time and its free's (`None`: never freed), read
    /// from its row.
    pub fn alloc_span(&self, id: AllocId) -> (u64, Option<u64>) {
        let r = &self.tables.allocs[id.index()];
        (r.alloc_ns, (r.free_ns != u64::MAX).then_some(r.free_ns))
    }

    /// An allocation's bytes, without making the whole allocation.
    pub fn alloc_bytes(&self, id: AllocId) -> u64 {
        let r = &self.tables.allocs[id.index()];
        self.tables.alloc_shapes.get(r.shape).bytes
    }

    pub fn memset(&self, id: MemsetId) -> &Memset {
        &self.memsets[id.index()]
    }

    /// The memsets with their handles, in start order.
    pub fn memsets(&self) -> Entities<'_, MemsetId, Memset> {
        Entities::of(&self.memsets, MemsetId::at)
    }

    /// The source frames above a site, innermost first: the function that
    /// called the site's function (where the call is written), then its
    /// caller, ... (functions inlined into others count as frames of their
    /// own). Empty when the trace recorded no callers (the runtime named
    /// the line itself, or the trace is older than format 1.2).
    pub fn callers(&self, site: SiteId) -> &[Site] {
        self.process
            .callers
            .get(&site)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Records the frames above a site (for runs made by hand).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn set_callers(&mut self, site: SiteId, callers: Vec<Site>) {
        self.process.callers.insert(site, callers);
    }

    /// The source sites with their handles.
    pub fn sites(&self) -> Entities<'_, SiteId, Site> {
        Entities::of(&self.process.sites, SiteId::at)
    }

    /// The constructs with their handles, in start order.
    pub fn constructs(&self) -> Rows<'_, ConstructId, ConstructRow, Construct> {
        Rows::of(
            &self.tables.constructs,
            &self.tables,
            ConstructId::at,
            Tables::construct,
        )
    }

    /// The constructs of `class` with their handles, in start order: the
    /// others are passed over on their rows, never read back whole.
    pub fn constructs_of_class(
        &self,
        class: ConstructClass,
    ) -> impl Iterator<Item = (ConstructId, Construct)> + '_ {
        let t = &self.tables;
        t.constructs
            .iter()
            .enumerate()
            .filter(move |(_, r)| t.construct_shapes.get(r.shape).class == class)
            .map(move |(i, r)| (ConstructId::at(i), t.construct(r)))
    }

    /// The kernels with their handles, in device start order.
    pub fn kernels(&self) -> Rows<'_, KernelId, KernelRow, Kernel> {
        Rows::of(
            &self.tables.kernels,
            &self.tables,
            KernelId::at,
            Tables::kernel,
        )
    }

    /// The transfers with their handles, in start order.
    pub fn transfers(&self) -> Rows<'_, TransferId, TransferRow, Transfer> {
        Rows::of(
            &self.tables.transfers,
            &self.tables,
            TransferId::at,
            Tables::transfer,
        )
    }

    /// The device allocations with their handles, in allocation order.
    pub fn allocs(&self) -> Rows<'_, AllocId, AllocRow, DeviceAlloc> {
        Rows::of(
            &self.tables.allocs,
            &self.tables,
            AllocId::at,
            Tables::alloc,
        )
    }

    /// The kernels of construct `c` itself (not of constructs nested in
    /// it), in device start order.
    pub fn kernels_of(&self, c: ConstructId) -> &[KernelId] {
        self.related.kernels.of(c)
    }

    /// The transfers of construct `c` itself, in start order.
    pub fn transfers_of(&self, c: ConstructId) -> &[TransferId] {
        self.related.transfers.of(c)
    }

    /// The device allocations of construct `c` itself, in allocation order.
    pub fn allocs_of(&self, c: ConstructId) -> &[AllocId] {
        self.related.allocs.of(c)
    }

    /// The memsets of construct `c` itself, in start order.
    pub fn memsets_of(&self, c: ConstructId) -> &[MemsetId] {
        self.related.memsets.of(c)
    }

    /// The launch events the runtime reported for construct `c`, in the
    /// order they came.
    pub fn launches_of(&self, c: ConstructId) -> impl Iterator<Item = LaunchRequest> + '_ {
        let mut kept = self
            .related
            .launches
            .of(c)
            .iter()
            .map(move |&l| self.launches[l as usize].clone());
        let kernels: &[KernelId] = if self.launches_in_kernels {
            self.kernels_of(c)
        } else {
            &[]
        };
        let mut from_kernels = kernels.iter().map(|&k| self.kernel(k));
        std::iter::from_fn(move || {
            if !self.launches_in_kernels {
                return kept.next();
            }
            let k = from_kernels.next()?;
            if LaunchRequest::kept(&k) {
                kept.next()
            } else {
                Some(LaunchRequest::of_kernel(&k, c))
            }
        })
    }

    /// A kernel or variable name.
    pub fn name(&self, id: NameId) -> &str {
        self.process
            .names
            .get(id.index())
            .map_or("?", String::as_str)
    }

    /// The source site every view reports construct `c` at: a nested
    /// construct (the implicit data part of a compute construct, what the
    /// runtime does inside an API routine) at its top-level construct's
    /// site; the exit of a structured `data` or `host_data` region at the
    /// site of its entry (GCC reports the region's end from the last or
    /// first line of its body, PGI at the pragma: the pragma line is the
    /// one users look for); any other construct at its own site.
    pub fn line_site(&self, c: ConstructId) -> SiteId {
        self.construct_shape(c).line_site
    }

    /// What construct `id` shares with others, read from its row.
    pub(super) fn construct_shape(&self, id: ConstructId) -> ConstructShape {
        let t = &self.tables;
        t.construct_shapes.get(t.constructs[id.index()].shape)
    }

    /// The construct -> entity indices.
    /// The kernels' and launches' indices are made beside the others, on
    /// a second thread: on a large run they are about half the work.
    pub(super) fn derive_indices(&mut self) {
        let (kernels, launches) = (&self.tables.kernels, &self.launches);
        let device = || {
            (
                ByConstruct::new(kernels, KernelId::at, |k| k.construct),
                ByConstruct::new(launches, |i| i as u32, |l| Some(l.construct)),
            )
        };
        let rest = || {
            (
                ByConstruct::new(&self.tables.transfers, TransferId::at, |t| t.construct),
                ByConstruct::new(&self.tables.allocs, AllocId::at, |a| a.construct),
                ByConstruct::new(&self.memsets, MemsetId::at, |m| m.construct),
            )
        };
        let ((kernels, launches), (transfers, allocs, memsets)) = if kernels.len() < 1 << 16 {
            (device(), rest())
        } else {
            std::thread::scope(|s| {
                let other = s.spawn(device);
                let rest = rest();
                // An index cannot panic but by running out of memory,
                // which aborts: a join error would be a bug here.
                (
                    other
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    rest,
                )
            })
        };
        self.related = Related {
            kernels,
            transfers,
            allocs,
            memsets,
            launches,
        };
    }

    /// A construct's class, read from its row without making the whole
    /// construct.
    pub fn construct_class(&self, id: ConstructId) -> ConstructClass {
        self.construct_shape(id).class
    }

    /// The host thread a construct ran on, read from its row without
    /// making the whole construct.
    pub fn construct_thread(&self, id: ConstructId) -> u32 {
        self.construct_shape(id).thread
    }

    /// The top-level constructs (those no other construct holds), in start
    /// order, read from the rows without making each construct.
    pub fn top_level_constructs(&self) -> impl Iterator<Item = ConstructId> + '_ {
        self.tables
            .constructs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.parent.is_none())
            .map(|(i, _)| ConstructId::at(i))
    }

    /// The outermost construct containing `id` (itself when top-level).
    pub fn top_level(&self, mut id: ConstructId) -> ConstructId {
        while let Some(p) = self.tables.constructs[id.index()].parent {
            id = p;
        }
        id
    }

    pub fn cupti_active(&self) -> bool {
        self.process.header.sources.cupti.is_active()
    }

    /// Host time in [t0, t1) that the collector spent itself (hashing
    /// host buffers), not the program: 0 when none, and for traces written
    /// before format 1.2, which did not record it
    /// ([`Run::collector_time_recorded`]).
    pub fn collector_ns_in(&self, t0: u64, t1: u64) -> u64 {
        let spans = &self.collector_spans;
        let first = spans.partition_point(|&(_, e)| e <= t0);
        spans[first..]
            .iter()
            .take_while(|&&(s, _)| s < t1)
            .map(|&(s, e)| e.min(t1).saturating_sub(s.max(t0)))
            .sum()
    }

    /// The MPI calls the collector recorded, in start order (empty for a
    /// program without MPI and for traces before format 1.2).
    pub fn mpi_calls(&self) -> &[MpiCall] {
        &self.process.mpi_calls
    }

    /// The host accesses the coherence check caught, in time order (empty
    /// unless the run had `--check coherence`, and before format 1.5).
    pub fn host_accesses(&self) -> &[HostAccess] {
        &self.process.host_accesses
    }

    /// The host accesses with their handles, in time order.
    pub fn host_access_ids(
        &self,
    ) -> impl ExactSizeIterator<Item = (HostAccessId, &HostAccess)> + '_ {
        self.process
            .host_accesses
            .iter()
            .enumerate()
            .map(|(i, a)| (HostAccessId::at(i), a))
    }

    /// The host access `id`.
    pub fn host_access(&self, id: HostAccessId) -> &HostAccess {
        &self.process.host_accesses[id.index()]
    }

    /// The source line access `id` is reported at: the host instruction
    /// that made it; for a download nobody read (no instruction made it),
    /// the line of the download's construct, when the trace names it.
    pub fn access_site(&self, id: HostAccessId) -> Option<SiteId> {
        let a = self.host_access(id);
        match a.kind {
            accprof_trace::CoherenceKind::UnreadDownload => a.construct.map(|c| self.line_site(c)),
            _ => a.site,
        }
    }

    /// The name of the array access `id` fell in: the runtime's, else the
    /// run's name for the buffer that holds the accessed address (a range
    /// the check watched can hold several arrays: two mapped by one clause
    /// into one device block), else for the one at the range's start.
    pub fn access_variable(&self, id: HostAccessId) -> Option<&str> {
        let a = self.host_access(id);
        if let Some(n) = a.variable {
            return Some(self.name(n));
        }
        let start = self.named_start_within(a.range_start, a.named_at(), None)?;
        self.buffer_name(start)
    }

    /// The MPI calls with their handles, in start order.
    pub fn mpi_call_ids(&self) -> impl ExactSizeIterator<Item = (MpiCallId, &MpiCall)> + '_ {
        self.process
            .mpi_calls
            .iter()
            .enumerate()
            .map(|(i, c)| (MpiCallId::at(i), c))
    }

    /// The MPI call `id`.
    pub fn mpi_call(&self, id: MpiCallId) -> &MpiCall {
        &self.process.mpi_calls[id.index()]
    }

    /// The source line MPI call `id` is reported at: the program's call
    /// into MPI, when the trace has its call site.
    pub fn mpi_site(&self, id: MpiCallId) -> Option<SiteId> {
        self.mpi_call(id).site
    }

    /// Adds an MPI call (for runs made by hand).
    #[cfg(any(test, feature = "testkit"))]
    pub fn push_mpi_call(&mut self, call: MpiCall) {
        let at = self
            .process
            .mpi_calls
            .partition_point(|c| c.start_ns <= call.start_ns);
        self.process.mpi_calls.insert(at, call);
    }

    /// All the host time the collector spent hashing.
    pub fn collector_ns(&self) -> u64 {
        self.collector_spans.iter().map(|&(s, e)| e - s).sum()
    }

    /// Whether the trace says how long the collector hashed: false when it
    /// hashed without recording the time (format 1.1 and older), so host
    /// times include it unseen.
    pub fn collector_time_recorded(&self) -> bool {
        self.hashes.iter().all(|h| h.hash_ns.is_some())
    }

    /// A construct's host time without the collector's own time inside it.
    pub fn program_host_ns(&self, c: &Construct) -> Option<u64> {
        let end = c.end_ns()?;
        Some(
            c.host_ns()?
                .saturating_sub(self.collector_ns_in(c.start_ns, end)),
        )
    }

    /// Kernel time and host<->device transfers, summed once.
    pub fn totals(&self) -> Totals {
        self.process.totals
    }

    /// Some construct ran on the host (OpenACC host fallback).
    pub fn ran_on_host(&self) -> bool {
        self.process.placement.some_on_host
    }

    /// The run had constructs and all of them ran on the host: there was
    /// no device.
    pub fn ran_only_on_host(&self) -> bool {
        self.process.placement.all_on_host
    }

    /// The OpenACC runtime is GCC's libgomp (its numbering of devices and
    /// the events it sends differ from other runtimes').
    pub fn runtime_is_libgomp(&self) -> bool {
        self.process.placement.libgomp
    }

    pub fn wall_ns(&self) -> u64 {
        self.process
            .span_ns
            .1
            .saturating_sub(self.process.span_ns.0)
    }

    /// The executable's module: the one whose path is the traced
    /// executable, else the first one loaded.
    pub fn executable_module(&self) -> Option<&accprof_trace::Module> {
        self.process
            .modules
            .iter()
            .find(|m| m.path == self.process.header.executable)
            .or_else(|| self.process.modules.first())
    }
}

/// The entities of one kind of a [`Run`] with their handles, in the
/// run's order.
#[derive(Clone)]
pub struct Entities<'a, I, T> {
    pub(super) inner: std::iter::Enumerate<std::slice::Iter<'a, T>>,
    pub(super) id: fn(usize) -> I,
}

impl<'a, I, T> Entities<'a, I, T> {
    pub(super) fn of(items: &'a [T], id: fn(usize) -> I) -> Self {
        Entities {
            inner: items.iter().enumerate(),
            id,
        }
    }

    /// Whether no entities are left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a, I, T> Iterator for Entities<'a, I, T> {
    type Item = (I, &'a T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(i, x)| ((self.id)(i), x))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<I, T> DoubleEndedIterator for Entities<'_, I, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(i, x)| ((self.id)(i), x))
    }
}

impl<I, T> ExactSizeIterator for Entities<'_, I, T> {}

/// The kernels, transfers or allocations of a [`Run`] with their
/// handles, in the run's order, each read back whole from its row.
#[derive(Clone)]
pub struct Rows<'a, I, R, T> {
    pub(super) inner: std::iter::Enumerate<std::slice::Iter<'a, R>>,
    pub(super) tables: &'a Tables,
    pub(super) id: fn(usize) -> I,
    pub(super) read: fn(&Tables, &R) -> T,
}

impl<'a, I, R, T> Rows<'a, I, R, T> {
    pub(super) fn of(
        rows: &'a [R],
        tables: &'a Tables,
        id: fn(usize) -> I,
        read: fn(&Tables, &R) -> T,
    ) -> Self {
        Rows {
            inner: rows.iter().enumerate(),
            tables,
            id,
            read,
        }
    }

    /// Whether no entities are left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<I, R, T> Iterator for Rows<'_, I, R, T> {
    type Item = (I, T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.inner
            .next()
            .map(|(i, r)| ((self.id)(i), (self.read)(self.tables, r)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<I, R, T> DoubleEndedIterator for Rows<'_, I, R, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner
            .next_back()
            .map(|(i, r)| ((self.id)(i), (self.read)(self.tables, r)))
    }
}

impl<I, R, T> ExactSizeIterator for Rows<'_, I, R, T> {}
