//! The joined model of one process's run: OpenACC constructs with their
//! source sites, and the kernels and copies the device did for each.
//!
//! Joining rules:
//! - Constructs come from acc_prof start/end pairs (same region id). A
//!   construct opened while another is open on the same thread is nested in
//!   it (GCC opens enter/exit data inside every compute construct for its
//!   implicit copies); nested constructs take their parent's source site.
//! - A start whose end never comes (the program toggled the end callback
//!   off, or died) must not swallow what follows: constructs of one class
//!   never nest in each other, so a start of the class of an open construct
//!   on the same thread closes that construct and everything opened inside
//!   it, all marked `cut`. An end closes whatever is still open inside its
//!   construct the same way.
//! - A CUPTI kernel or memcpy belongs to the construct whose region the
//!   driver call with the same correlation id was made in.
//! - Without CUPTI, kernels and copies come from acc_prof's enqueue events
//!   (host times only, marked as such; GCC reports only the small argument
//!   block as copies).
//! - A call of an OpenACC API routine (`acc_copyin`, ...) that the
//!   collector interposed is a construct of class [`ConstructClass::ApiCall`]
//!   at the application's call site; the copies of its region and the
//!   constructs the runtime reports inside it are its own.

use std::collections::HashMap;

use accprof_trace::{
    AccDetail, AccEventKind, ApiCall, ApiPhase, BufferHash, CallSiteId, ConstructKind, CopyKind,
    Device, DropSource, Header, Level, Loss, MemoryKind, ModuleId, Record, RegionId, StringId,
    Trace,
};

use crate::symbolize::{SymbolizedSite, Symbolizer};

/// Declares an opaque handle to one entity of a [`Run`]: only the model
/// makes them, views get them from the run's iterators and look the entity
/// up with the run's accessors. Handles order as their entities do in the
/// run (constructs by start, kernels and transfers by start time, ...).
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub(crate) u32);

        impl $name {
            /// The handle of the entity at `index` in its table. A run holds
            /// fewer than 2^32 entities of a kind (each takes tens of bytes).
            #[inline]
            pub(crate) fn at(index: usize) -> Self {
                $name(index as u32)
            }

            /// The entity's position in its table, for tables kept beside
            /// the model (one slot per entity).
            #[inline]
            pub(crate) fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

handle!(
    /// A source [`Site`] of a [`Run`] ([`Run::site`]).
    SiteId
);
handle!(
    /// A [`Construct`] of a [`Run`] ([`Run::construct`]).
    ConstructId
);
handle!(
    /// A [`Kernel`] of a [`Run`] ([`Run::kernel`]).
    KernelId
);
handle!(
    /// A [`Transfer`] of a [`Run`] ([`Run::transfer`]).
    TransferId
);
handle!(
    /// A [`DeviceAlloc`] of a [`Run`] ([`Run::alloc`]).
    AllocId
);

/// A place in the source, as precise as the run allowed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Site {
    /// Source file, or the module path when there is no line information.
    pub file: String,
    /// Function name, or "?" when unknown.
    pub function: String,
    /// Source line; None when only an address is known.
    pub line: Option<u32>,
    /// Module and offset when the site came from a call site (for messages
    /// when the source is missing).
    pub address: Option<(String, u64)>,
}

impl Site {
    pub fn unknown() -> Site {
        Site {
            file: "(unknown file)".into(),
            function: "?".into(),
            line: None,
            address: None,
        }
    }
}

/// An OpenACC API routine (its name is [`Run::routine`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApiRoutine(pub(crate) u32);

/// What kind of OpenACC construct this was, as the summary groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConstructClass {
    /// parallel, kernels, serial: device code runs.
    Compute,
    /// Entering a data region or `enter data` (or the implicit data part of
    /// a compute construct).
    EnterData,
    /// Leaving a data region or `exit data`.
    ExitData,
    Update,
    Wait,
    /// A call of an OpenACC API routine (`acc_copyin`, `acc_wait`, ...).
    ApiCall(ApiRoutine),
}

#[derive(Debug, Clone)]
pub struct Construct {
    pub region: RegionId,
    pub class: ConstructClass,
    /// The construct as the runtime named it (parallel, kernels, data, ...);
    /// for the exit of a structured `data` or `host_data` region, its
    /// entry's (libgomp names a `host_data` region's exit `data`).
    pub kind: Option<ConstructKind>,
    pub implicit: bool,
    pub site: SiteId,
    pub thread: u32,
    pub start_ns: u64,
    /// None when the end event never came (the program died inside).
    pub end_ns: Option<u64>,
    pub parent: Option<ConstructId>,
    pub async_queue: Option<i32>,
    /// `acc_device_t` as the runtime numbered it.
    pub device_type: Option<u32>,
    pub device: Option<u32>,
    /// Launches the runtime reported (acc_prof enqueue_launch).
    pub launches: Vec<LaunchRequest>,
    /// No end event came: a later start closed it (callbacks toggled off
    /// with `acc_prof_unregister(..., acc_toggle)`), or it was still open
    /// when the trace ended (the program died inside it). `end_ns` is None.
    pub cut: bool,
}

impl Construct {
    pub fn host_ns(&self) -> Option<u64> {
        self.end_ns.map(|e| e.saturating_sub(self.start_ns))
    }
}

/// One enqueue_launch as the runtime reported it.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub kernel_name: Option<String>,
    pub gangs: Option<u64>,
    pub workers: Option<u64>,
    pub vector_length: Option<u64>,
    pub start_ns: u64,
    pub end_ns: Option<u64>,
}

/// Where a kernel's numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelSource {
    /// CUPTI kernel record: device start/end, launch shape, resources.
    Cupti,
    /// acc_prof enqueue_launch start/end (CUPTI did not record): host times
    /// of the enqueue, gangs as the grid and vector length and workers as
    /// the block; no resources.
    AccProf,
}

/// A kernel the device ran (CUPTI), or, when CUPTI did not record, one the
/// runtime launched.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub construct: Option<ConstructId>,
    pub name: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers: u32,
    pub shared_bytes: u32,
    pub local_bytes_per_thread: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub device: u32,
    pub stream: u32,
    pub source: KernelSource,
}

impl Kernel {
    /// Start to end: on the device for a CUPTI kernel, the enqueue on the
    /// host for a launch event.
    pub fn device_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// CUPTI timed it on the device.
    pub fn device_timed(&self) -> bool {
        self.source == KernelSource::Cupti
    }
}

/// Where a transfer's numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferSource {
    /// CUPTI memcpy record: device start/end.
    Cupti,
    /// acc_prof enqueue_upload/download pair: host times only.
    AccProf,
}

/// One host<->device transfer.
#[derive(Debug, Clone)]
pub struct Transfer {
    pub construct: Option<ConstructId>,
    pub kind: CopyKind,
    pub bytes: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub src: MemoryKind,
    pub dst: MemoryKind,
    pub source: TransferSource,
    pub variable: Option<String>,
    pub host_ptr: Option<u64>,
    /// Content hash of the host buffer, when one was taken.
    pub hash: Option<u64>,
}

impl Transfer {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// An upload or a download (not a device-to-device or other copy).
    pub fn is_host_device(&self) -> bool {
        matches!(self.kind, CopyKind::HostToDevice | CopyKind::DeviceToHost)
    }
}

/// A device allocation the runtime reported (acc_prof alloc/free events).
/// GCC allocates one block per group of mapped variables, so `bytes` may
/// cover several variables.
#[derive(Debug, Clone)]
pub struct DeviceAlloc {
    pub construct: Option<ConstructId>,
    pub bytes: u64,
    pub device_ptr: Option<u64>,
    pub variable: Option<String>,
    pub alloc_ns: u64,
    /// None when no free with the same device pointer came.
    pub free_ns: Option<u64>,
}

/// One process's run, joined.
#[derive(Debug, Clone)]
pub struct Run {
    pub header: Header,
    pub version: (u16, u16),
    pub losses: Vec<Loss>,
    pub devices: Vec<Device>,
    /// The entities, read through their handles ([`Run::sites`],
    /// [`Run::construct`], ...): their positions are the model's business.
    pub(crate) sites: Vec<Site>,
    /// In start order.
    pub(crate) constructs: Vec<Construct>,
    /// In device start order (launch start order when CUPTI did not
    /// record: see [`KernelSource`]).
    pub(crate) kernels: Vec<Kernel>,
    /// In start order.
    pub(crate) transfers: Vec<Transfer>,
    /// Device allocations, in allocation order.
    pub(crate) allocs: Vec<DeviceAlloc>,
    /// Loaded modules (to map host addresses to symbols).
    pub modules: Vec<accprof_trace::Module>,
    pub hashes: Vec<BufferHash>,
    pub acc_events: u64,
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
    pub ending: Option<accprof_trace::EndRecord>,
    /// Names of the OpenACC API routines called, indexed by [`ApiRoutine`].
    pub routines: Vec<String>,
    /// Where the executable's binary was found for reading (its recorded
    /// path or a copy in a search directory, same build); None when it was
    /// not found.
    pub executable_binary: Option<std::path::PathBuf>,
    /// Names of the executable's data objects (globals, statics) at the host
    /// addresses the transfers moved, from its symbol table: what the
    /// findings call a buffer the runtime did not name.
    pub data_names: HashMap<u64, String>,
    /// Each construct's own kernels, transfers and allocations (the other
    /// way round from their `construct` fields), made by [`Run::derive`].
    pub(crate) related: Related,
    /// Summed once the tables are complete ([`Run::totals`]).
    pub(crate) totals: Totals,
    /// Where the constructs ran and which runtime ran them, read once.
    pub(crate) placement: Placement,
}

/// The device time and host<->device traffic of a run, summed once by the
/// builder: every view reads these, none adds them up again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Device time of the kernels CUPTI timed (start to end of each).
    pub kernel_ns: u64,
    /// Kernels the run holds (launch events too when CUPTI did not record).
    pub kernels: u64,
    /// Host<->device transfers (uploads and downloads; device-to-device and
    /// other copies are not counted): their time, number and bytes.
    pub transfer_ns: u64,
    pub transfers: u64,
    pub transfer_bytes: u64,
}

impl Totals {
    fn of(kernels: &[Kernel], transfers: &[Transfer]) -> Totals {
        let mut t = Totals::default();
        for k in kernels {
            if k.device_timed() {
                t.kernel_ns = t.kernel_ns.saturating_add(k.device_ns());
            }
            t.kernels += 1;
        }
        for x in transfers.iter().filter(|x| x.is_host_device()) {
            t.transfer_ns = t.transfer_ns.saturating_add(x.duration_ns());
            t.transfers += 1;
            t.transfer_bytes = t.transfer_bytes.saturating_add(x.bytes);
        }
        t
    }
}

/// `acc_device_host` in the OpenACC API's numbering of `acc_device_t`.
pub const ACC_DEVICE_HOST: u32 = 2;

/// Where the constructs ran and which runtime ran them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Placement {
    /// Some construct ran on the host (OpenACC host fallback).
    some_on_host: bool,
    /// There were constructs and every one ran on the host.
    all_on_host: bool,
    /// The OpenACC runtime is GCC's libgomp.
    libgomp: bool,
}

impl Placement {
    fn of(header: &Header, constructs: &[Construct]) -> Placement {
        let on_host = |c: &Construct| c.device_type == Some(ACC_DEVICE_HOST);
        Placement {
            some_on_host: constructs.iter().any(on_host),
            all_on_host: !constructs.is_empty() && constructs.iter().all(on_host),
            libgomp: header.runtime.contains("libgomp"),
        }
    }
}

/// The kernels, transfers and allocations of every construct.
#[derive(Debug, Clone, Default)]
pub(crate) struct Related {
    /// The site each construct is reported at ([`Run::line_site`]).
    line_sites: Vec<SiteId>,
    kernels: ByConstruct<KernelId>,
    transfers: ByConstruct<TransferId>,
    allocs: ByConstruct<AllocId>,
}

/// Entities of one kind grouped by the construct they belong to: the
/// handles of construct `c`'s are `ids[starts[c]..starts[c + 1]]`, in the
/// run's order.
#[derive(Debug, Clone)]
struct ByConstruct<I> {
    starts: Vec<usize>,
    ids: Vec<I>,
}

impl<I> Default for ByConstruct<I> {
    fn default() -> Self {
        ByConstruct {
            starts: Vec::new(),
            ids: Vec::new(),
        }
    }
}

impl<I: Copy> ByConstruct<I> {
    fn new<'a, T: 'a>(
        constructs: usize,
        entities: Entities<'a, I, T>,
        owner: impl Fn(&T) -> Option<ConstructId>,
    ) -> Self {
        let mut owned: Vec<(usize, I)> = entities
            .filter_map(|(id, x)| owner(x).map(|c| (c.index(), id)))
            .filter(|&(c, _)| c < constructs)
            .collect();
        // Stable: each construct's entities stay in the run's order.
        owned.sort_by_key(|&(c, _)| c);
        let mut starts = Vec::with_capacity(constructs + 1);
        let mut at = 0;
        for c in 0..constructs {
            starts.push(at);
            while owned.get(at).is_some_and(|&(o, _)| o == c) {
                at += 1;
            }
        }
        starts.push(at);
        ByConstruct {
            starts,
            ids: owned.into_iter().map(|(_, id)| id).collect(),
        }
    }

    fn of(&self, c: ConstructId) -> &[I] {
        match (self.starts.get(c.index()), self.starts.get(c.index() + 1)) {
            (Some(&a), Some(&b)) => &self.ids[a..b],
            _ => &[],
        }
    }
}

impl Run {
    /// The name of an API routine (`acc_copyin`, ...).
    pub fn routine(&self, r: ApiRoutine) -> &str {
        self.routines.get(r.0 as usize).map_or("?", String::as_str)
    }

    // The accessors take handles this run handed out; a handle of another
    // run is a bug in the caller and panics when out of range.

    pub fn site(&self, id: SiteId) -> &Site {
        &self.sites[id.index()]
    }

    pub fn construct(&self, id: ConstructId) -> &Construct {
        &self.constructs[id.index()]
    }

    pub fn kernel(&self, id: KernelId) -> &Kernel {
        &self.kernels[id.index()]
    }

    pub fn transfer(&self, id: TransferId) -> &Transfer {
        &self.transfers[id.index()]
    }

    pub fn alloc(&self, id: AllocId) -> &DeviceAlloc {
        &self.allocs[id.index()]
    }

    /// The source sites with their handles.
    pub fn sites(&self) -> Entities<'_, SiteId, Site> {
        Entities::of(&self.sites, SiteId::at)
    }

    /// The constructs with their handles, in start order.
    pub fn constructs(&self) -> Entities<'_, ConstructId, Construct> {
        Entities::of(&self.constructs, ConstructId::at)
    }

    /// The kernels with their handles, in device start order.
    pub fn kernels(&self) -> Entities<'_, KernelId, Kernel> {
        Entities::of(&self.kernels, KernelId::at)
    }

    /// The transfers with their handles, in start order.
    pub fn transfers(&self) -> Entities<'_, TransferId, Transfer> {
        Entities::of(&self.transfers, TransferId::at)
    }

    /// The device allocations with their handles, in allocation order.
    pub fn allocs(&self) -> Entities<'_, AllocId, DeviceAlloc> {
        Entities::of(&self.allocs, AllocId::at)
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

    /// The source site every view reports construct `c` at: a nested
    /// construct (the implicit data part of a compute construct, what the
    /// runtime does inside an API routine) at its top-level construct's
    /// site; the exit of a structured `data` or `host_data` region at the
    /// site of its entry (GCC reports the region's end from the last or
    /// first line of its body, PGI at the pragma: the pragma line is the
    /// one users look for); any other construct at its own site.
    pub fn line_site(&self, c: ConstructId) -> SiteId {
        self.related
            .line_sites
            .get(c.index())
            .copied()
            .unwrap_or_else(|| self.construct(c).site)
    }

    /// The exits of structured `data` and `host_data` regions with their
    /// entries: per thread, an exit closes the innermost open region.
    fn structured_exits(&self) -> Vec<(ConstructId, ConstructId)> {
        let mut pairs = Vec::new();
        // Open regions per thread, innermost last.
        let mut open: HashMap<u32, Vec<ConstructId>> = HashMap::new();
        for (id, c) in self.constructs() {
            if c.parent.is_some()
                || !matches!(c.kind, Some(ConstructKind::Data | ConstructKind::HostData))
            {
                continue;
            }
            let stack = open.entry(c.thread).or_default();
            match c.class {
                ConstructClass::EnterData => stack.push(id),
                ConstructClass::ExitData => {
                    if let Some(entry) = stack.pop() {
                        pairs.push((id, entry));
                    }
                }
                _ => {}
            }
        }
        pairs
    }

    /// Each construct's [`Run::line_site`], in construct order, given the
    /// structured regions' exits and entries.
    fn line_sites(&self, exits: &[(ConstructId, ConstructId)]) -> Vec<SiteId> {
        let mut sites: Vec<SiteId> = self.constructs.iter().map(|c| c.site).collect();
        for &(exit, entry) in exits {
            sites[exit.index()] = sites[entry.index()];
        }
        for (id, c) in self.constructs() {
            if c.parent.is_some() {
                sites[id.index()] = sites[self.top_level(id).index()];
            }
        }
        sites
    }

    /// Derives, once the tables are complete, what the views read instead
    /// of working it out each: the kernels, transfers and allocations of
    /// each construct, each structured region's exit's kind and each
    /// construct's reporting site, the totals, and where the constructs ran.
    pub(crate) fn derive(&mut self) {
        let exits = self.structured_exits();
        for &(exit, entry) in &exits {
            self.constructs[exit.index()].kind = self.constructs[entry.index()].kind;
        }
        let n = self.constructs.len();
        self.related = Related {
            line_sites: self.line_sites(&exits),
            kernels: ByConstruct::new(n, self.kernels(), |k| k.construct),
            transfers: ByConstruct::new(n, self.transfers(), |t| t.construct),
            allocs: ByConstruct::new(n, self.allocs(), |a| a.construct),
        };
        self.totals = Totals::of(&self.kernels, &self.transfers);
        self.placement = Placement::of(&self.header, &self.constructs);
    }

    /// The outermost construct containing `id` (itself when top-level).
    pub fn top_level(&self, mut id: ConstructId) -> ConstructId {
        while let Some(p) = self.construct(id).parent {
            id = p;
        }
        id
    }

    pub fn cupti_active(&self) -> bool {
        self.header.sources.cupti.is_active()
    }

    /// Kernel time and host<->device transfers, summed once.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// Some construct ran on the host (OpenACC host fallback).
    pub fn ran_on_host(&self) -> bool {
        self.placement.some_on_host
    }

    /// The run had constructs and all of them ran on the host: there was
    /// no device.
    pub fn ran_only_on_host(&self) -> bool {
        self.placement.all_on_host
    }

    /// The OpenACC runtime is GCC's libgomp (its numbering of devices and
    /// the events it sends differ from other runtimes').
    pub fn runtime_is_libgomp(&self) -> bool {
        self.placement.libgomp
    }

    pub fn wall_ns(&self) -> u64 {
        self.span_ns.1.saturating_sub(self.span_ns.0)
    }

    /// The executable's module: the one whose path is the traced
    /// executable, else the first one loaded.
    pub fn executable_module(&self) -> Option<&accprof_trace::Module> {
        self.modules
            .iter()
            .find(|m| m.path == self.header.executable)
            .or_else(|| self.modules.first())
    }
}

/// The entities of one kind of a [`Run`] with their handles, in the
/// run's order.
#[derive(Clone)]
pub struct Entities<'a, I, T> {
    inner: std::iter::Enumerate<std::slice::Iter<'a, T>>,
    id: fn(usize) -> I,
}

impl<'a, I, T> Entities<'a, I, T> {
    fn of(items: &'a [T], id: fn(usize) -> I) -> Self {
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

/// The kernels the runtime's launch events tell of (for a run without
/// CUPTI), in the order of their constructs.
pub(crate) fn launched_kernels(constructs: &[Construct]) -> impl Iterator<Item = Kernel> + '_ {
    constructs.iter().enumerate().flat_map(|(id, c)| {
        c.launches.iter().map(move |l| {
            let workers = l.workers.filter(|&w| w > 1).unwrap_or(1);
            Kernel {
                construct: Some(ConstructId::at(id)),
                name: l.kernel_name.clone().unwrap_or_else(|| "?".into()),
                grid: [l.gangs.unwrap_or(0) as u32, 1, 1],
                block: [l.vector_length.unwrap_or(0) as u32, workers as u32, 1],
                registers: 0,
                shared_bytes: 0,
                local_bytes_per_thread: 0,
                start_ns: l.start_ns,
                end_ns: l.end_ns.unwrap_or(l.start_ns),
                device: c.device.unwrap_or(0),
                stream: 0,
                source: KernelSource::AccProf,
            }
        })
    })
}

fn class_of(kind: AccEventKind) -> Option<ConstructClass> {
    use AccEventKind::*;
    Some(match kind {
        ComputeConstructStart => ConstructClass::Compute,
        EnterDataStart => ConstructClass::EnterData,
        ExitDataStart => ConstructClass::ExitData,
        UpdateStart => ConstructClass::Update,
        WaitStart => ConstructClass::Wait,
        _ => return None,
    })
}

fn is_end(kind: AccEventKind) -> bool {
    use AccEventKind::*;
    matches!(
        kind,
        ComputeConstructEnd | EnterDataEnd | ExitDataEnd | UpdateEnd | WaitEnd
    )
}

/// Builds the model of one trace, symbolizing call sites with `symbolizer`.
pub fn build(trace: Trace, symbolizer: &mut Symbolizer) -> Run {
    let mut b = Builder::new(trace.header.sources.cupti.is_active());
    for rec in &trace.records {
        b.add(rec, symbolizer);
    }
    let mut run = b.finish(
        trace.header,
        trace.version,
        trace.losses,
        trace.skipped_unknown,
    );
    read_binaries(&mut run, symbolizer);
    run
}

/// What the analysis reads from the program's executable besides call
/// sites, found once through `symbolizer`: where its file is, and the names
/// of the data objects the transfers moved.
fn read_binaries(run: &mut Run, symbolizer: &mut Symbolizer) {
    let Some(exe) = run.executable_module() else {
        return;
    };
    let binary = symbolizer.locate(exe);
    let moved = run.transfers.iter().filter_map(|t| t.host_ptr);
    let names = symbolizer.data_names(exe, moved);
    run.executable_binary = binary;
    run.data_names = names;
}

/// Builds the model while reading: records are looked at one by one and
/// never held all at once, so memory follows the model, not the trace.
pub fn build_from_reader(
    mut reader: impl accprof_trace::RecordSource,
    symbolizer: &mut Symbolizer,
) -> Run {
    let mut b = Builder::new(reader.header().sources.cupti.is_active());
    while let Some(rec) = reader.next_record() {
        b.add(&rec, symbolizer);
    }
    let header = reader.header().clone();
    let version = reader.version();
    let losses = reader.losses().to_vec();
    let skipped = reader.skipped_unknown();
    let mut run = b.finish(header, version, losses, skipped);
    read_binaries(&mut run, symbolizer);
    run
}

/// A map from ids handed out in sequence (region ids, CUPTI correlation
/// ids, call site ids) to small values: a vector indexed by id while the
/// ids stay dense, a hash map for the ones far outside (a damaged or
/// unusual trace costs speed, never memory).
struct IdMap<V> {
    dense: Vec<Option<V>>,
    sparse: HashMap<u64, V>,
    len: usize,
}

impl<V: Copy> IdMap<V> {
    fn new() -> Self {
        IdMap {
            dense: Vec::new(),
            sparse: HashMap::new(),
            len: 0,
        }
    }

    #[inline]
    fn insert(&mut self, id: u64, v: V) {
        self.len += 1;
        if let Some(slot) = self.dense.get_mut(id as usize) {
            *slot = Some(v);
            return;
        }
        // Grow only while the ids are about as many as the entries.
        if id < 4096 || id < 4 * self.len as u64 {
            let want = (id as usize + 1).max(self.dense.len() * 2);
            self.dense.resize(want, None);
            self.dense[id as usize] = Some(v);
        } else {
            self.sparse.insert(id, v);
        }
    }

    #[inline]
    fn get(&self, id: u64) -> Option<V> {
        match self.dense.get(id as usize) {
            Some(v) => *v,
            None if self.sparse.is_empty() => None,
            None => self.sparse.get(&id).copied(),
        }
    }
}

/// What a CUPTI correlation id tells: the region of the driver call, the
/// host pointer of a copy and the hash of the host buffer.
#[derive(Clone, Copy, Default)]
struct Correlated {
    region: u64,
    host_ptr: Option<u64>,
    hash: Option<u64>,
}

/// An acc_prof upload/download start waiting for its end.
struct PendingCopy {
    thread: u32,
    start_kind: AccEventKind,
    start_ns: u64,
    bytes: u64,
    var: Option<StringId>,
    host_ptr: Option<u64>,
}

/// An acc_prof transfer (used only when CUPTI was not recording).
struct AccCopy {
    region: RegionId,
    kind: CopyKind,
    bytes: u64,
    start_ns: u64,
    end_ns: u64,
    var: Option<StringId>,
    host_ptr: Option<u64>,
}

struct Builder {
    /// Whether CUPTI recorded: without it acc_prof's transfers are kept.
    cupti: bool,
    strings: HashMap<StringId, String>,
    modules: HashMap<ModuleId, accprof_trace::Module>,
    call_sites: HashMap<CallSiteId, accprof_trace::CallSite>,
    site_index: HashMap<Site, SiteId>,
    sites: Vec<Site>,
    symbolized: IdMap<SiteId>,
    constructs: Vec<Construct>,
    by_region: IdMap<ConstructId>,
    /// Open constructs per thread, innermost last (few threads: a vector).
    open: Vec<(u32, Vec<ConstructId>)>,
    /// CUPTI correlation id -> driver call facts.
    correlation: IdMap<Correlated>,
    kernels_raw: Vec<accprof_trace::KernelRecord>,
    memcpys_raw: Vec<accprof_trace::MemcpyRecord>,
    pending_copies: Vec<PendingCopy>,
    acc_copies: Vec<AccCopy>,
    allocs: Vec<DeviceAlloc>,
    devices: Vec<Device>,
    hashes: Vec<BufferHash>,
    acc_events: u64,
    dropped: HashMap<DropSource, u64>,
    diagnostics: Vec<(Level, String)>,
    span: Option<(u64, u64)>,
    ending: Option<accprof_trace::EndRecord>,
    routines: Vec<String>,
    routine_ids: HashMap<StringId, ApiRoutine>,
    /// Device records left out: end before start, or implausibly long.
    rejected_kernels: u64,
    rejected_copies: u64,
    /// The dropped-record counts added up past u64::MAX.
    dropped_overflow: bool,
}

/// The longest a single kernel or copy is believed to last; a record
/// claiming more (or ending before it starts) is damaged or crafted, and
/// its numbers would swamp every total.
pub const MAX_DEVICE_RECORD_NS: u64 = 7 * 24 * 3600 * 1_000_000_000;

fn plausible(start_ns: u64, end_ns: u64) -> bool {
    end_ns >= start_ns && end_ns - start_ns <= MAX_DEVICE_RECORD_NS
}

impl Builder {
    fn new(cupti: bool) -> Self {
        Builder {
            cupti,
            strings: HashMap::new(),
            modules: HashMap::new(),
            call_sites: HashMap::new(),
            site_index: HashMap::new(),
            sites: Vec::new(),
            symbolized: IdMap::new(),
            constructs: Vec::new(),
            by_region: IdMap::new(),
            open: Vec::new(),
            correlation: IdMap::new(),
            kernels_raw: Vec::new(),
            memcpys_raw: Vec::new(),
            pending_copies: Vec::new(),
            acc_copies: Vec::new(),
            allocs: Vec::new(),
            devices: Vec::new(),
            hashes: Vec::new(),
            acc_events: 0,
            dropped: HashMap::new(),
            diagnostics: Vec::new(),
            span: None,
            ending: None,
            routines: Vec::new(),
            routine_ids: HashMap::new(),
            rejected_kernels: 0,
            rejected_copies: 0,
            dropped_overflow: false,
        }
    }

    #[inline]
    fn see_time(&mut self, t: u64) {
        if t == 0 {
            return;
        }
        self.span = Some(match self.span {
            None => (t, t),
            Some((a, b)) => (a.min(t), b.max(t)),
        });
    }

    fn string(&self, id: Option<StringId>) -> Option<String> {
        id.and_then(|id| self.strings.get(&id).cloned())
    }

    /// The open-construct stack of `thread`.
    #[inline]
    fn stack(&mut self, thread: u32) -> &mut Vec<ConstructId> {
        let i = match self.open.iter().position(|(t, _)| *t == thread) {
            Some(i) => i,
            None => {
                self.open.push((thread, Vec::new()));
                self.open.len() - 1
            }
        };
        &mut self.open[i].1
    }

    fn intern_site(&mut self, site: Site) -> SiteId {
        if let Some(id) = self.site_index.get(&site) {
            return *id;
        }
        let id = SiteId::at(self.sites.len());
        self.sites.push(site.clone());
        self.site_index.insert(site, id);
        id
    }

    fn site_for(
        &mut self,
        ev: &accprof_trace::AccEvent,
        parent: Option<ConstructId>,
        symbolizer: &mut Symbolizer,
    ) -> SiteId {
        if let Some(line) = ev.location.line {
            let site = Site {
                file: self
                    .string(ev.location.file)
                    .unwrap_or_else(|| "(unknown file)".into()),
                function: self
                    .string(ev.location.function)
                    .unwrap_or_else(|| "?".into()),
                line: Some(line),
                address: None,
            };
            return self.intern_site(site);
        }
        if let Some(cs) = ev.call_site {
            return self.call_site_site(cs, symbolizer);
        }
        if let Some(p) = parent {
            return self.constructs[p.index()].site;
        }
        self.intern_site(Site::unknown())
    }

    /// The source site of an interned call site, symbolized once.
    fn call_site_site(&mut self, cs: CallSiteId, symbolizer: &mut Symbolizer) -> SiteId {
        if let Some(id) = self.symbolized.get(u64::from(cs.0)) {
            return id;
        }
        let site = match self.call_sites.get(&cs).copied() {
            Some(c) => match self.modules.get(&c.module) {
                Some(m) => match symbolizer.lookup(m, c.return_offset) {
                    SymbolizedSite::Found {
                        file,
                        function,
                        line,
                    } => Site {
                        file,
                        function,
                        line,
                        address: Some((m.path.clone(), c.return_offset)),
                    },
                    SymbolizedSite::NoDebugInfo { function } => Site {
                        file: m.path.clone(),
                        function: function.unwrap_or_else(|| "?".into()),
                        line: None,
                        address: Some((m.path.clone(), c.return_offset)),
                    },
                },
                None => Site::unknown(),
            },
            None => Site::unknown(),
        };
        let id = self.intern_site(site);
        self.symbolized.insert(u64::from(cs.0), id);
        id
    }

    fn add(&mut self, rec: &Record, symbolizer: &mut Symbolizer) {
        match rec {
            Record::Acc(ev) => self.add_acc(ev, symbolizer),
            Record::DriverCall(d) => {
                let mut c = self
                    .correlation
                    .get(u64::from(d.correlation))
                    .unwrap_or_default();
                c.region = d.region.0;
                c.host_ptr = d.host_ptr;
                self.correlation.insert(u64::from(d.correlation), c);
            }
            Record::Hash(h) => {
                let mut c = self
                    .correlation
                    .get(u64::from(h.correlation))
                    .unwrap_or_default();
                c.hash = Some(h.hash);
                self.correlation.insert(u64::from(h.correlation), c);
                self.hashes.push(*h);
            }
            Record::Kernel(k) => {
                if !plausible(k.start_ns, k.end_ns) {
                    self.rejected_kernels += 1;
                    return;
                }
                self.see_time(k.start_ns);
                self.see_time(k.end_ns);
                self.kernels_raw.push(*k);
            }
            Record::Memcpy(m) => {
                if !plausible(m.start_ns, m.end_ns) {
                    self.rejected_copies += 1;
                    return;
                }
                self.see_time(m.start_ns);
                self.see_time(m.end_ns);
                self.memcpys_raw.push(*m);
            }
            Record::String { id, text } => {
                self.strings.insert(*id, text.clone());
            }
            Record::Module(m) => {
                self.modules.insert(m.id, m.clone());
            }
            Record::CallSite(c) => {
                self.call_sites.insert(c.id, *c);
            }
            Record::Device(d) => {
                if !self.devices.iter().any(|x| x.id == d.id) {
                    self.devices.push(d.clone());
                }
            }
            Record::Memset(_) => {}
            Record::Dropped { source, count } => {
                let n = self.dropped.entry(*source).or_default();
                match n.checked_add(*count) {
                    Some(v) => *n = v,
                    None => {
                        *n = u64::MAX;
                        self.dropped_overflow = true;
                    }
                }
            }
            Record::Diagnostic { level, message, .. } => {
                self.diagnostics.push((*level, message.clone()));
            }
            Record::End(end) => {
                self.see_time(end.time_ns);
                self.ending = Some(*end);
            }
            Record::Api(a) => self.add_api(a, symbolizer),
        }
    }

    /// An interposed API routine call: a top-level construct from its start
    /// to its end, at its call site.
    fn add_api(&mut self, a: &ApiCall, symbolizer: &mut Symbolizer) {
        self.see_time(a.time_ns);
        match a.phase {
            ApiPhase::Start => {
                let routine = self.routine_of(a.routine);
                let site = match a.call_site {
                    Some(cs) => self.call_site_site(cs, symbolizer),
                    None => self.intern_site(Site::unknown()),
                };
                let id = ConstructId::at(self.constructs.len());
                self.constructs.push(Construct {
                    region: a.region,
                    class: ConstructClass::ApiCall(routine),
                    kind: Some(ConstructKind::RuntimeApi),
                    implicit: false,
                    site,
                    thread: a.thread,
                    start_ns: a.time_ns,
                    end_ns: None,
                    parent: None,
                    async_queue: a.async_queue,
                    device_type: None,
                    device: None,
                    launches: Vec::new(),
                    cut: false,
                });
                self.by_region.insert(a.region.0, id);
                self.stack(a.thread).push(id);
            }
            ApiPhase::End => {
                let Some(id) = self.by_region.get(a.region.0) else {
                    return;
                };
                if !matches!(
                    self.constructs[id.index()].class,
                    ConstructClass::ApiCall(_)
                ) {
                    return;
                }
                self.constructs[id.index()].end_ns = Some(a.time_ns);
                // Whatever the runtime left open inside the call ends with it.
                let stack = self.stack(a.thread);
                if let Some(pos) = stack.iter().rposition(|&c| c == id) {
                    stack.truncate(pos);
                }
            }
        }
    }

    fn routine_of(&mut self, name: StringId) -> ApiRoutine {
        if let Some(r) = self.routine_ids.get(&name) {
            return *r;
        }
        let text = self.string(Some(name)).unwrap_or_else(|| "?".into());
        let r = match self.routines.iter().position(|n| *n == text) {
            Some(i) => ApiRoutine(i as u32),
            None => {
                self.routines.push(text);
                ApiRoutine(self.routines.len() as u32 - 1)
            }
        };
        self.routine_ids.insert(name, r);
        r
    }

    fn add_acc(&mut self, ev: &accprof_trace::AccEvent, symbolizer: &mut Symbolizer) {
        self.acc_events += 1;
        self.see_time(ev.time_ns);
        if let Some(class) = class_of(ev.kind) {
            if let Some((_, stack)) = self.open.iter_mut().find(|(t, _)| *t == ev.thread) {
                let constructs = &mut self.constructs;
                if let Some(pos) = stack
                    .iter()
                    .position(|&c| constructs[c.index()].class == class)
                {
                    for c in stack.drain(pos..) {
                        constructs[c.index()].cut = true;
                    }
                }
            }
            let parent = self.stack(ev.thread).last().copied();
            let site = self.site_for(ev, parent, symbolizer);
            let id = ConstructId::at(self.constructs.len());
            self.constructs.push(Construct {
                region: ev.region,
                class,
                kind: ev.construct,
                implicit: ev.implicit,
                site,
                thread: ev.thread,
                start_ns: ev.time_ns,
                end_ns: None,
                parent,
                async_queue: ev.async_queue,
                device_type: ev.device_type,
                device: ev.device_number,
                launches: Vec::new(),
                cut: false,
            });
            self.by_region.insert(ev.region.0, id);
            self.stack(ev.thread).push(id);
            return;
        }
        if is_end(ev.kind) {
            if let Some(id) = self.by_region.get(ev.region.0) {
                self.constructs[id.index()].end_ns = Some(ev.time_ns);
                self.constructs[id.index()].cut = false;
                let stack = self.stack(ev.thread);
                if let Some(pos) = stack.iter().rposition(|&c| c == id) {
                    let inside: Vec<ConstructId> = stack.drain(pos..).skip(1).collect();
                    for c in inside {
                        self.constructs[c.index()].cut = true;
                    }
                }
            }
            return;
        }
        match (ev.kind, ev.detail) {
            (AccEventKind::EnqueueLaunchStart, AccDetail::Launch(l)) => {
                if let Some(id) = self.by_region.get(ev.region.0) {
                    let name = self.string(l.kernel_name);
                    self.constructs[id.index()].launches.push(LaunchRequest {
                        kernel_name: name,
                        gangs: l.num_gangs,
                        workers: l.num_workers,
                        vector_length: l.vector_length,
                        start_ns: ev.time_ns,
                        end_ns: None,
                    });
                }
            }
            (AccEventKind::EnqueueLaunchEnd, _) => {
                if let Some(id) = self.by_region.get(ev.region.0) {
                    if let Some(l) = self.constructs[id.index()]
                        .launches
                        .iter_mut()
                        .rev()
                        .find(|l| l.end_ns.is_none())
                    {
                        l.end_ns = Some(ev.time_ns);
                    }
                }
            }
            (AccEventKind::Alloc, AccDetail::Data(d)) => {
                // All ones is libgomp's "unknown" size.
                let bytes = d.bytes.filter(|&b| b != u64::MAX).unwrap_or(0);
                let construct = self.by_region.get(ev.region.0);
                let variable = self.string(d.var_name);
                self.allocs.push(DeviceAlloc {
                    construct,
                    bytes,
                    device_ptr: d.device_ptr,
                    variable,
                    alloc_ns: ev.time_ns,
                    free_ns: None,
                });
            }
            (AccEventKind::Free, AccDetail::Data(d)) => {
                if let Some(ptr) = d.device_ptr {
                    if let Some(a) = self
                        .allocs
                        .iter_mut()
                        .rev()
                        .find(|a| a.device_ptr == Some(ptr) && a.free_ns.is_none())
                    {
                        a.free_ns = Some(ev.time_ns);
                    }
                }
            }
            // With CUPTI the device's memcpy records are the transfers.
            _ if self.cupti => {}
            (
                AccEventKind::EnqueueUploadStart | AccEventKind::EnqueueDownloadStart,
                AccDetail::Data(d),
            ) => {
                let pending = PendingCopy {
                    thread: ev.thread,
                    start_kind: ev.kind,
                    start_ns: ev.time_ns,
                    bytes: d.bytes.unwrap_or(0),
                    var: d.var_name,
                    host_ptr: d.host_ptr,
                };
                match self
                    .pending_copies
                    .iter_mut()
                    .find(|p| p.thread == ev.thread && p.start_kind == ev.kind)
                {
                    Some(p) => *p = pending,
                    None => self.pending_copies.push(pending),
                }
            }
            (AccEventKind::EnqueueUploadEnd | AccEventKind::EnqueueDownloadEnd, _) => {
                let (start_kind, kind) = if ev.kind == AccEventKind::EnqueueUploadEnd {
                    (AccEventKind::EnqueueUploadStart, CopyKind::HostToDevice)
                } else {
                    (AccEventKind::EnqueueDownloadStart, CopyKind::DeviceToHost)
                };
                if let Some(i) = self
                    .pending_copies
                    .iter()
                    .position(|p| p.thread == ev.thread && p.start_kind == start_kind)
                {
                    let p = self.pending_copies.swap_remove(i);
                    self.acc_copies.push(AccCopy {
                        region: ev.region,
                        kind,
                        bytes: p.bytes,
                        start_ns: p.start_ns,
                        end_ns: ev.time_ns,
                        var: p.var,
                        host_ptr: p.host_ptr,
                    });
                }
            }
            _ => {}
        }
    }

    fn finish(
        mut self,
        header: Header,
        version: (u16, u16),
        losses: Vec<Loss>,
        skipped_unknown: u64,
    ) -> Run {
        let construct_of = |b: &Builder, corr: u32| -> (Option<ConstructId>, Correlated) {
            match b.correlation.get(u64::from(corr)) {
                Some(c) => (b.by_region.get(c.region), c),
                None => (None, Correlated::default()),
            }
        };
        // Kernel names are few: one String per name, cloned per kernel.
        let mut names: HashMap<StringId, String> = HashMap::new();
        let mut kernels = Vec::with_capacity(self.kernels_raw.len());
        for k in std::mem::take(&mut self.kernels_raw) {
            let name = names
                .entry(k.name)
                .or_insert_with(|| {
                    self.strings
                        .get(&k.name)
                        .cloned()
                        .unwrap_or_else(|| "?".into())
                })
                .clone();
            kernels.push(Kernel {
                construct: construct_of(&self, k.correlation).0,
                name,
                grid: k.grid,
                block: k.block,
                registers: k.registers,
                shared_bytes: k.static_shared_bytes + k.dynamic_shared_bytes,
                local_bytes_per_thread: k.local_bytes_per_thread,
                start_ns: k.start_ns,
                end_ns: k.end_ns,
                device: k.device,
                stream: k.stream,
                source: KernelSource::Cupti,
            });
        }
        // Without CUPTI, the runtime's launch events are all we have.
        if !self.cupti {
            kernels.extend(launched_kernels(&self.constructs));
        }
        let mut transfers = Vec::with_capacity(self.memcpys_raw.len());
        for m in std::mem::take(&mut self.memcpys_raw) {
            let (construct, c) = construct_of(&self, m.correlation);
            transfers.push(Transfer {
                construct,
                kind: m.kind,
                bytes: m.bytes,
                start_ns: m.start_ns,
                end_ns: m.end_ns,
                src: m.src,
                dst: m.dst,
                source: TransferSource::Cupti,
                variable: None,
                host_ptr: c.host_ptr,
                hash: c.hash,
            });
        }
        // Without CUPTI, acc_prof's transfer events are all we have.
        if !self.cupti {
            for c in std::mem::take(&mut self.acc_copies) {
                transfers.push(Transfer {
                    construct: self.by_region.get(c.region.0),
                    kind: c.kind,
                    bytes: c.bytes,
                    start_ns: c.start_ns,
                    end_ns: c.end_ns,
                    src: MemoryKind::Unknown,
                    dst: MemoryKind::Unknown,
                    source: TransferSource::AccProf,
                    variable: c.var.and_then(|v| self.strings.get(&v).cloned()),
                    host_ptr: c.host_ptr,
                    hash: None,
                });
            }
        }
        // CUPTI hands records over in start order per buffer: mostly sorted.
        if !kernels.windows(2).all(|w| w[0].start_ns <= w[1].start_ns) {
            kernels.sort_by_key(|k| k.start_ns);
        }
        if !transfers.windows(2).all(|w| w[0].start_ns <= w[1].start_ns) {
            transfers.sort_by_key(|c| c.start_ns);
        }
        let mut dropped: Vec<_> = self.dropped.into_iter().collect();
        dropped.sort_by_key(|(s, _)| format!("{s:?}"));
        let mut modules: Vec<_> = self.modules.values().cloned().collect();
        modules.sort_by_key(|m| m.id);
        let mut notes = Vec::new();
        for (n, what) in [
            (self.rejected_kernels, "kernel"),
            (self.rejected_copies, "memcpy"),
        ] {
            if n > 0 {
                notes.push(format!(
                    "{n} CUPTI {what} record{} left out (end before start, or longer than 7 days: a damaged or crafted trace)",
                    if n == 1 { "" } else { "s" },
                ));
            }
        }
        if self.dropped_overflow {
            notes.push(
                "the dropped-record counts add up past the largest number (a damaged or crafted trace): shown as 18,446,744,073,709,551,615"
                    .to_string(),
            );
        }
        let mut open_at_end = Vec::new();
        for (_, stack) in std::mem::take(&mut self.open) {
            for c in stack {
                self.constructs[c.index()].cut = true;
                open_at_end.push(c);
            }
        }
        let mut run = Run {
            header,
            version,
            losses,
            devices: self.devices,
            sites: self.sites,
            constructs: self.constructs,
            kernels,
            transfers,
            allocs: self.allocs,
            modules,
            hashes: self.hashes,
            acc_events: self.acc_events,
            dropped,
            diagnostics: self.diagnostics,
            notes,
            skipped_unknown,
            span_ns: self.span.unwrap_or((0, 0)),
            open_at_end,
            ending: self.ending,
            routines: self.routines,
            executable_binary: None,
            data_names: HashMap::new(),
            related: Related::default(),
            totals: Totals::default(),
            placement: Placement::default(),
        };
        run.derive();
        run
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use accprof_trace::{Clock, HashMode, SourceLocation, SourceState, Sources};

    fn header() -> Header {
        Header {
            host: "h".into(),
            pid: 1,
            rank: None,
            command_line: vec!["./a".into()],
            executable: "./a".into(),
            start_unix_ns: 0,
            start_clock_ns: 0,
            clock: Clock::Monotonic,
            runtime: "libgomp".into(),
            collector: "test".into(),
            sources: Sources {
                acc_prof: SourceState::Active,
                cupti: SourceState::Inactive("test".into()),
                hashing: HashMode::Off,
            },
        }
    }

    /// An event of `region` on thread 1 at `line` (NVHPC-style location).
    fn ev(t: u64, kind: AccEventKind, region: u64, line: u32) -> Record {
        Record::Acc(accprof_trace::AccEvent {
            time_ns: t,
            kind,
            thread: 1,
            region: RegionId(region),
            device_type: None,
            device_number: None,
            async_queue: None,
            construct: None,
            implicit: false,
            location: SourceLocation {
                line: Some(line),
                ..SourceLocation::default()
            },
            call_site: None,
            detail: AccDetail::None,
        })
    }

    fn build_of(records: Vec<Record>) -> Run {
        let trace = Trace {
            version: (1, 1),
            header: header(),
            records,
            losses: Vec::new(),
            skipped_unknown: 0,
        };
        build(trace, &mut Symbolizer::new())
    }

    fn lines(run: &Run) -> Vec<(Option<u32>, bool, bool)> {
        run.constructs
            .iter()
            .map(|c| (run.site(c.site).line, c.parent.is_some(), c.cut))
            .collect()
    }

    fn on(device_type: u32, r: Record) -> Record {
        match r {
            Record::Acc(mut e) => {
                e.device_type = Some(device_type);
                Record::Acc(e)
            }
            r => r,
        }
    }

    #[test]
    fn where_the_constructs_ran_is_read_once_from_their_device_types() {
        use AccEventKind::*;
        let host = |r| on(ACC_DEVICE_HOST, r);
        let mixed = build_of(vec![
            host(ev(1, ComputeConstructStart, 1, 10)),
            host(ev(2, ComputeConstructEnd, 1, 10)),
            on(5, ev(3, ComputeConstructStart, 2, 20)),
            on(5, ev(4, ComputeConstructEnd, 2, 20)),
        ]);
        assert!(mixed.ran_on_host() && !mixed.ran_only_on_host());
        assert!(mixed.runtime_is_libgomp());
        let all = build_of(vec![
            host(ev(1, ComputeConstructStart, 1, 10)),
            host(ev(2, ComputeConstructEnd, 1, 10)),
        ]);
        assert!(all.ran_on_host() && all.ran_only_on_host());
        let none = build_of(Vec::new());
        assert!(!none.ran_on_host() && !none.ran_only_on_host());
    }

    #[test]
    fn the_totals_count_kernels_and_host_device_transfers_only() {
        use crate::testkit::runs::RunBuilder;
        let mut b = RunBuilder::new(HashMode::Off);
        let site = b.site("a.c", 1);
        let c = b.open(ConstructClass::Compute, site, None);
        let (x, y) = (b.buf(4096, 1), b.buf(100, 2));
        b.copy(c, CopyKind::HostToDevice, x, 300);
        b.kernel(c, 8, 1_000);
        b.kernel(c, 8, 2_000);
        b.copy(c, CopyKind::DeviceToDevice, y, 50);
        b.copy(c, CopyKind::DeviceToHost, y, 70);
        b.close(c);
        let run = b.build();
        assert_eq!(
            run.totals(),
            Totals {
                kernel_ns: 3_000,
                kernels: 2,
                transfer_ns: 370,
                transfers: 2,
                transfer_bytes: 4196,
            }
        );
    }

    #[test]
    fn without_cupti_the_launch_events_are_the_kernels_with_host_times() {
        use AccEventKind::*;
        let launch = |t, kind, gangs, workers| match ev(t, kind, 1, 10) {
            Record::Acc(mut e) => {
                e.detail = AccDetail::Launch(accprof_trace::LaunchInfo {
                    kernel_name: None,
                    num_gangs: Some(gangs),
                    num_workers: Some(workers),
                    vector_length: Some(32),
                });
                Record::Acc(e)
            }
            r => r,
        };
        let run = build_of(vec![
            ev(1, ComputeConstructStart, 1, 10),
            launch(2, EnqueueLaunchStart, 4, 1),
            ev(5, EnqueueLaunchEnd, 1, 10),
            launch(6, EnqueueLaunchStart, 1, 8),
            ev(7, ComputeConstructEnd, 1, 10),
        ]);
        let c = ConstructId(0);
        let ks: Vec<_> = run
            .kernels()
            .map(|(_, k)| (k.construct, k.grid, k.block, k.start_ns, k.end_ns, k.source))
            .collect();
        assert_eq!(
            ks,
            [
                (Some(c), [4, 1, 1], [32, 1, 1], 2, 5, KernelSource::AccProf),
                // The second launch's end never came.
                (Some(c), [1, 1, 1], [32, 8, 1], 6, 6, KernelSource::AccProf),
            ]
        );
        assert_eq!(run.kernels_of(c).len(), 2);
        // Host times are no device time.
        assert_eq!((run.totals().kernels, run.totals().kernel_ns), (2, 0));
    }

    #[test]
    fn a_compute_construct_without_its_end_is_closed_by_the_next_one() {
        use AccEventKind::*;
        // Four reductions; the end of the second was toggled off.
        let mut r = Vec::new();
        for (i, line) in [10u32, 20, 30, 40].into_iter().enumerate() {
            let region = i as u64 + 1;
            let t = 100 * region;
            r.push(ev(t, ComputeConstructStart, region, line));
            r.push(ev(t + 10, EnterDataStart, region + 100, line));
            r.push(ev(t + 20, EnterDataEnd, region + 100, line));
            if line != 20 {
                r.push(ev(t + 50, ComputeConstructEnd, region, line));
            }
        }
        let run = build_of(r);
        let top: Vec<_> = lines(&run)
            .into_iter()
            .filter(|(_, nested, _)| !nested)
            .collect();
        assert_eq!(
            top,
            [
                (Some(10), false, false),
                (Some(20), false, true),
                (Some(30), false, false),
                (Some(40), false, false)
            ]
        );
        assert!(run.open_at_end.is_empty());
        assert_eq!(run.constructs[2].end_ns, None);
    }

    #[test]
    fn a_start_at_an_outer_depth_closes_everything_inside() {
        use AccEventKind::*;
        let run = build_of(vec![
            ev(1, ComputeConstructStart, 1, 10),
            ev(2, EnterDataStart, 101, 10),
            // Neither end comes.
            ev(5, ComputeConstructStart, 2, 20),
            ev(6, ComputeConstructEnd, 2, 20),
            ev(7, UpdateStart, 3, 30),
        ]);
        assert_eq!(
            lines(&run),
            [
                (Some(10), false, true),
                (Some(10), true, true),
                (Some(20), false, false),
                (Some(30), false, true)
            ]
        );
        // The update was running when the trace ended.
        assert_eq!(run.open_at_end, [ConstructId(3)]);
    }

    #[test]
    fn an_end_closes_what_is_still_open_inside_it() {
        use AccEventKind::*;
        let run = build_of(vec![
            ev(1, ComputeConstructStart, 1, 10),
            ev(2, EnterDataStart, 101, 10),
            ev(3, ComputeConstructEnd, 1, 10),
        ]);
        assert_eq!(
            lines(&run),
            [(Some(10), false, false), (Some(10), true, true)]
        );
        assert!(run.open_at_end.is_empty());
    }

    #[test]
    fn impossible_device_records_are_left_out_and_said() {
        let rec = |start_ns, end_ns| {
            Record::Memcpy(accprof_trace::MemcpyRecord {
                start_ns,
                end_ns,
                bytes: 8,
                kind: CopyKind::HostToDevice,
                src: MemoryKind::Pageable,
                dst: MemoryKind::Device,
                device: 0,
                context: 0,
                stream: 0,
                correlation: 0,
            })
        };
        let run = build_of(vec![
            rec(10, 20),
            rec(30, 5),
            rec(0, u64::MAX),
            Record::Dropped {
                source: DropSource::Cupti,
                count: u64::MAX,
            },
            Record::Dropped {
                source: DropSource::Cupti,
                count: 1,
            },
        ]);
        assert_eq!(run.transfers.len(), 1);
        assert_eq!(run.span_ns, (10, 20));
        assert_eq!(run.dropped, [(DropSource::Cupti, u64::MAX)]);
        assert_eq!(run.notes.len(), 2, "{:?}", run.notes);
    }

    /// A `data` region on thread 1 around a `host_data` region whose exit
    /// the runtime names `data`, both exits reported from a body line; a
    /// `data` region on thread 2 interleaved with them; an implicit part
    /// of a compute construct at a line of its own.
    #[test]
    fn line_sites_follow_entries_and_top_level_constructs() {
        use crate::testkit::runs::RunBuilder;
        let mut b = RunBuilder::new(HashMode::Off);
        let (data, host_data, body) = (b.site("a.c", 10), b.site("a.c", 12), b.site("a.c", 15));
        let (other, compute, part) = (b.site("a.c", 30), b.site("a.c", 40), b.site("a.c", 41));
        let region = |b: &mut RunBuilder, class, kind, site, thread| {
            let id = b.open(class, site, None);
            let c = b.construct_mut(id);
            c.kind = Some(kind);
            c.thread = thread;
            id
        };
        let (enter, exit) = (ConstructClass::EnterData, ConstructClass::ExitData);
        let d_in = region(&mut b, enter, ConstructKind::Data, data, 1);
        let o_in = region(&mut b, enter, ConstructKind::Data, other, 2);
        let h_in = region(&mut b, enter, ConstructKind::HostData, host_data, 1);
        let o_out = region(&mut b, exit, ConstructKind::Data, body, 2);
        let h_out = region(&mut b, exit, ConstructKind::Data, body, 1);
        let d_out = region(&mut b, exit, ConstructKind::Data, body, 1);
        let c = b.open(ConstructClass::Compute, compute, None);
        let implicit = b.open(ConstructClass::EnterData, part, Some(c));
        let run = b.build();
        let line = |id| run.site(run.line_site(id)).line;
        assert_eq!(line(d_in), Some(10));
        assert_eq!(line(d_out), Some(10));
        assert_eq!(line(h_in), Some(12));
        assert_eq!(line(h_out), Some(12));
        assert_eq!(line(o_in), Some(30));
        assert_eq!(line(o_out), Some(30));
        assert_eq!(line(implicit), Some(40));
        assert_eq!(run.construct(h_out).kind, Some(ConstructKind::HostData));
        assert_eq!(run.construct(d_out).kind, Some(ConstructKind::Data));
        // The runtime's own sites stay as reported.
        assert_eq!(run.site(run.construct(h_out).site).line, Some(15));
    }
}
