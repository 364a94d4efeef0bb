//! The joined model of one process's run: OpenACC constructs with their
//! source sites, and the kernels and copies the device did for each.
//!
//! Joining rules:
//! - Constructs come from acc_prof start/end pairs (same region id). A
//!   construct opened while another is open on the same thread is nested in
//!   it (GCC opens enter/exit data inside every compute construct for its
//!   implicit copies); nested constructs take their parent's source site.
//! - A CUPTI kernel or memcpy belongs to the construct whose region the
//!   driver call with the same correlation id was made in.
//! - Without CUPTI, launches and copies come from acc_prof's enqueue events
//!   (host times only; GCC reports only the small argument block as copies).

use std::collections::HashMap;

use accprof_trace::{
    AccDetail, AccEventKind, BufferHash, CallSiteId, ConstructKind, CopyKind, Device, DropSource,
    Header, Level, Loss, MemoryKind, ModuleId, Record, RegionId, StringId, Trace,
};

use crate::symbolize::{Symbolizer, SymbolizedSite};

/// Index of a [`Site`] in [`Run::sites`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteId(pub usize);

/// Index of a [`Construct`] in [`Run::constructs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConstructId(pub usize);

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
}

#[derive(Debug, Clone)]
pub struct Construct {
    pub region: RegionId,
    pub class: ConstructClass,
    /// The construct as the runtime named it (parallel, kernels, data, ...).
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

/// A kernel the device ran (CUPTI).
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
}

impl Kernel {
    pub fn device_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Where a copy's numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopySource {
    /// CUPTI memcpy record: device start/end.
    Cupti,
    /// acc_prof enqueue_upload/download pair: host times only.
    AccProf,
}

/// One host<->device transfer.
#[derive(Debug, Clone)]
pub struct Copy {
    pub construct: Option<ConstructId>,
    pub kind: CopyKind,
    pub bytes: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub src: MemoryKind,
    pub dst: MemoryKind,
    pub source: CopySource,
    pub variable: Option<String>,
    pub host_ptr: Option<u64>,
    /// Content hash of the host buffer, when one was taken.
    pub hash: Option<u64>,
}

impl Copy {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// One process's run, joined.
#[derive(Debug, Clone)]
pub struct Run {
    pub header: Header,
    pub version: (u16, u16),
    pub losses: Vec<Loss>,
    pub devices: Vec<Device>,
    pub sites: Vec<Site>,
    pub constructs: Vec<Construct>,
    pub kernels: Vec<Kernel>,
    pub copies: Vec<Copy>,
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
}

impl Run {
    pub fn site(&self, id: SiteId) -> &Site {
        &self.sites[id.0]
    }

    pub fn construct(&self, id: ConstructId) -> &Construct {
        &self.constructs[id.0]
    }

    /// The outermost construct containing `id` (itself when top-level).
    pub fn top_level(&self, mut id: ConstructId) -> ConstructId {
        while let Some(p) = self.constructs[id.0].parent {
            id = p;
        }
        id
    }

    pub fn cupti_active(&self) -> bool {
        self.header.sources.cupti.is_active()
    }

    pub fn wall_ns(&self) -> u64 {
        self.span_ns.1.saturating_sub(self.span_ns.0)
    }
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
    let mut b = Builder::default();
    for rec in &trace.records {
        b.add(rec, symbolizer);
    }
    b.finish(trace)
}

#[derive(Default)]
struct Builder {
    strings: HashMap<StringId, String>,
    modules: HashMap<ModuleId, accprof_trace::Module>,
    call_sites: HashMap<CallSiteId, accprof_trace::CallSite>,
    site_index: HashMap<Site, SiteId>,
    sites: Vec<Site>,
    symbolized: HashMap<CallSiteId, SiteId>,
    constructs: Vec<Construct>,
    by_region: HashMap<RegionId, ConstructId>,
    /// Open constructs per thread, innermost last.
    open: HashMap<u32, Vec<ConstructId>>,
    /// CUPTI correlation id -> region of the driver call.
    correlation: HashMap<u32, RegionId>,
    /// Host pointer + bytes of the driver call (for variables and hashes).
    correlation_ptr: HashMap<u32, (Option<u64>, Option<u64>)>,
    hash_by_correlation: HashMap<u32, u64>,
    kernels_raw: Vec<accprof_trace::KernelRecord>,
    memcpys_raw: Vec<accprof_trace::MemcpyRecord>,
    /// acc_prof upload/download starts waiting for their end, per thread.
    pending_copies: HashMap<(u32, AccEventKind), (u64, u64, Option<StringId>, Option<u64>)>,
    acc_copies: Vec<(Option<RegionId>, CopyKind, u64, u64, u64, Option<StringId>, Option<u64>)>,
    devices: Vec<Device>,
    hashes: Vec<BufferHash>,
    acc_events: u64,
    dropped: HashMap<DropSource, u64>,
    diagnostics: Vec<(Level, String)>,
    span: Option<(u64, u64)>,
}

impl Builder {
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

    fn intern_site(&mut self, site: Site) -> SiteId {
        if let Some(id) = self.site_index.get(&site) {
            return *id;
        }
        let id = SiteId(self.sites.len());
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
            if let Some(id) = self.symbolized.get(&cs) {
                return *id;
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
            self.symbolized.insert(cs, id);
            return id;
        }
        if let Some(p) = parent {
            return self.constructs[p.0].site;
        }
        self.intern_site(Site::unknown())
    }

    fn add(&mut self, rec: &Record, symbolizer: &mut Symbolizer) {
        match rec {
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
            Record::Acc(ev) => self.add_acc(ev, symbolizer),
            Record::Kernel(k) => {
                self.see_time(k.start_ns);
                self.see_time(k.end_ns);
                self.kernels_raw.push(*k);
            }
            Record::Memcpy(m) => {
                self.see_time(m.start_ns);
                self.see_time(m.end_ns);
                self.memcpys_raw.push(*m);
            }
            Record::Memset(_) => {}
            Record::DriverCall(d) => {
                self.correlation.insert(d.correlation, d.region);
                self.correlation_ptr
                    .insert(d.correlation, (d.host_ptr, d.bytes));
            }
            Record::Hash(h) => {
                self.hash_by_correlation.insert(h.correlation, h.hash);
                self.hashes.push(*h);
            }
            Record::Dropped { source, count } => {
                *self.dropped.entry(*source).or_default() += count;
            }
            Record::Diagnostic { level, message, .. } => {
                self.diagnostics.push((*level, message.clone()));
            }
        }
    }

    fn add_acc(&mut self, ev: &accprof_trace::AccEvent, symbolizer: &mut Symbolizer) {
        self.acc_events += 1;
        self.see_time(ev.time_ns);
        if let Some(class) = class_of(ev.kind) {
            let parent = self
                .open
                .get(&ev.thread)
                .and_then(|s| s.last().copied());
            let site = self.site_for(ev, parent, symbolizer);
            let id = ConstructId(self.constructs.len());
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
            });
            self.by_region.insert(ev.region, id);
            self.open.entry(ev.thread).or_default().push(id);
            return;
        }
        if is_end(ev.kind) {
            if let Some(&id) = self.by_region.get(&ev.region) {
                self.constructs[id.0].end_ns = Some(ev.time_ns);
                if let Some(stack) = self.open.get_mut(&ev.thread) {
                    if let Some(pos) = stack.iter().rposition(|&c| c == id) {
                        stack.truncate(pos);
                    }
                }
            }
            return;
        }
        let owner = self.by_region.get(&ev.region).copied();
        match (ev.kind, ev.detail) {
            (AccEventKind::EnqueueLaunchStart, AccDetail::Launch(l)) => {
                if let Some(id) = owner {
                    let name = self.string(l.kernel_name);
                    self.constructs[id.0].launches.push(LaunchRequest {
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
                if let Some(id) = owner {
                    if let Some(l) = self.constructs[id.0]
                        .launches
                        .iter_mut()
                        .rev()
                        .find(|l| l.end_ns.is_none())
                    {
                        l.end_ns = Some(ev.time_ns);
                    }
                }
            }
            (
                AccEventKind::EnqueueUploadStart | AccEventKind::EnqueueDownloadStart,
                AccDetail::Data(d),
            ) => {
                self.pending_copies.insert(
                    (ev.thread, ev.kind),
                    (
                        ev.time_ns,
                        d.bytes.unwrap_or(0),
                        d.var_name,
                        d.host_ptr,
                    ),
                );
            }
            (AccEventKind::EnqueueUploadEnd | AccEventKind::EnqueueDownloadEnd, _) => {
                let (start_kind, dir) = if ev.kind == AccEventKind::EnqueueUploadEnd {
                    (AccEventKind::EnqueueUploadStart, CopyKind::HostToDevice)
                } else {
                    (AccEventKind::EnqueueDownloadStart, CopyKind::DeviceToHost)
                };
                if let Some((start, bytes, var, ptr)) =
                    self.pending_copies.remove(&(ev.thread, start_kind))
                {
                    self.acc_copies
                        .push((Some(ev.region), dir, bytes, start, ev.time_ns, var, ptr));
                }
            }
            _ => {}
        }
    }

    fn finish(mut self, trace: Trace) -> Run {
        let construct_of = |b: &Builder, corr: u32| {
            b.correlation
                .get(&corr)
                .and_then(|r| b.by_region.get(r).copied())
        };
        let mut kernels = Vec::with_capacity(self.kernels_raw.len());
        for k in std::mem::take(&mut self.kernels_raw) {
            kernels.push(Kernel {
                construct: construct_of(&self, k.correlation),
                name: self
                    .strings
                    .get(&k.name)
                    .cloned()
                    .unwrap_or_else(|| "?".into()),
                grid: k.grid,
                block: k.block,
                registers: k.registers,
                shared_bytes: k.static_shared_bytes + k.dynamic_shared_bytes,
                local_bytes_per_thread: k.local_bytes_per_thread,
                start_ns: k.start_ns,
                end_ns: k.end_ns,
                device: k.device,
                stream: k.stream,
            });
        }
        let mut copies = Vec::new();
        for m in std::mem::take(&mut self.memcpys_raw) {
            let ptr = self.correlation_ptr.get(&m.correlation).and_then(|p| p.0);
            copies.push(Copy {
                construct: construct_of(&self, m.correlation),
                kind: m.kind,
                bytes: m.bytes,
                start_ns: m.start_ns,
                end_ns: m.end_ns,
                src: m.src,
                dst: m.dst,
                source: CopySource::Cupti,
                variable: None,
                host_ptr: ptr,
                hash: self.hash_by_correlation.get(&m.correlation).copied(),
            });
        }
        // Without CUPTI, acc_prof's transfer events are all we have.
        if !trace.header.sources.cupti.is_active() {
            for (region, kind, bytes, start, end, var, ptr) in std::mem::take(&mut self.acc_copies)
            {
                copies.push(Copy {
                    construct: region.and_then(|r| self.by_region.get(&r).copied()),
                    kind,
                    bytes,
                    start_ns: start,
                    end_ns: end,
                    src: MemoryKind::Unknown,
                    dst: MemoryKind::Unknown,
                    source: CopySource::AccProf,
                    variable: var.and_then(|v| self.strings.get(&v).cloned()),
                    host_ptr: ptr,
                    hash: None,
                });
            }
        }
        kernels.sort_by_key(|k| k.start_ns);
        copies.sort_by_key(|c| c.start_ns);
        let mut dropped: Vec<_> = self.dropped.into_iter().collect();
        dropped.sort_by_key(|(s, _)| format!("{s:?}"));
        Run {
            header: trace.header,
            version: trace.version,
            losses: trace.losses,
            devices: self.devices,
            sites: self.sites,
            constructs: self.constructs,
            kernels,
            copies,
            hashes: self.hashes,
            acc_events: self.acc_events,
            dropped,
            diagnostics: self.diagnostics,
            notes: Vec::new(),
            skipped_unknown: trace.skipped_unknown,
            span_ns: self.span.unwrap_or((0, 0)),
        }
    }
}
