//! The one join of a trace's records into finished entities: constructs
//! closed, kernels, transfers and memsets joined to the construct whose
//! driver call caused them, device allocations with their frees. Each
//! entity goes to a [`Sink`] once it is final; the full model
//! ([`crate::model::Run`]) is one sink, the streaming summary another.
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
//! - A CUPTI kernel, memcpy or memset belongs to the construct whose region
//!   the driver call with the same correlation id was made in.
//! - Without CUPTI, kernels and copies come from acc_prof's enqueue events
//!   (host times only, marked as such; GCC reports only the small argument
//!   block as copies).
//! - A call of an OpenACC API routine (`acc_copyin`, ...) that the
//!   collector interposed is a construct of class [`ConstructClass::ApiCall`]
//!   at the application's call site; the copies of its region and the
//!   constructs the runtime reports inside it are its own.
//!
//! Memory: what the join holds is what is in flight: open constructs,
//! device records waiting for their driver call (or, joined, for their
//! construct to end), allocations not yet freed, and the tables of
//! distinct sites, names and strings. Finished entities leave at once.

use std::collections::HashMap;

use accprof_trace::{
    AccDetail, AccEventKind, ApiCall, ApiPhase, CallSiteId, ConstructKind, CopyKind, Device,
    DropSource, Header, Level, Loss, MemoryKind, ModuleId, Record, StringId,
};

use crate::idhash::IdHashMap;
use crate::model::{
    AllocId, ApiRoutine, Construct, ConstructClass, ConstructId, DeviceAlloc, Kernel, KernelSource,
    LaunchRequest, LineSites, Memset, NameId, Placement, Process, Site, SiteId, Totals, Transfer,
    TransferSource, MAX_DEVICE_RECORD_NS,
};
use crate::symbolize::Symbolizer;

mod sink;
mod sites;
mod state;
#[cfg(test)]
mod tests;

pub use sink::{At, Both, Order, Sink};
use state::*;

/// The first format whose traces may hold timed driver calls.
const FIRST_VERSION_WITH_DRIVER_SPANS: (u16, u16) = (1, 4);

/// Sequence numbers of the runtime's own events sort after CUPTI's.
const ACC_SEQ: u64 = 1 << 63;

fn plausible(start_ns: u64, end_ns: u64) -> bool {
    end_ns >= start_ns && end_ns - start_ns <= MAX_DEVICE_RECORD_NS
}

/// `kind` as a bit of a set of kinds (by its OpenACC number, at most 25).
const fn bit(kind: AccEventKind) -> u32 {
    1 << kind as u32
}

/// The kinds that start a construct, and those that end one: most events
/// are neither, and one test says so.
const STARTS: u32 = bit(AccEventKind::ComputeConstructStart)
    | bit(AccEventKind::EnterDataStart)
    | bit(AccEventKind::ExitDataStart)
    | bit(AccEventKind::UpdateStart)
    | bit(AccEventKind::WaitStart);
const ENDS: u32 = bit(AccEventKind::ComputeConstructEnd)
    | bit(AccEventKind::EnterDataEnd)
    | bit(AccEventKind::ExitDataEnd)
    | bit(AccEventKind::UpdateEnd)
    | bit(AccEventKind::WaitEnd);

#[inline]
fn class_of(kind: AccEventKind) -> Option<ConstructClass> {
    use AccEventKind::*;
    if bit(kind) & STARTS == 0 {
        return None;
    }
    Some(match kind {
        ComputeConstructStart => ConstructClass::Compute,
        EnterDataStart => ConstructClass::EnterData,
        ExitDataStart => ConstructClass::ExitData,
        UpdateStart => ConstructClass::Update,
        WaitStart => ConstructClass::Wait,
        _ => return None,
    })
}

#[inline]
fn is_end(kind: AccEventKind) -> bool {
    bit(kind) & ENDS != 0
}

pub(crate) struct Join<S: Sink> {
    sink: S,
    /// Whether CUPTI recorded: without it acc_prof's transfers are kept.
    cupti: bool,
    strings: IdHashMap<StringId, String>,
    modules: HashMap<ModuleId, accprof_trace::Module>,
    call_sites: IdHashMap<CallSiteId, accprof_trace::CallSite>,
    /// The callers the collector recorded above a call site.
    call_chains: IdHashMap<CallSiteId, Vec<accprof_trace::Frame>>,
    /// Per site, the source frames above it (inlined functions, then the
    /// recorded callers).
    callers: std::collections::BTreeMap<SiteId, Vec<Site>>,
    mpi_calls: Vec<crate::model::MpiCall>,
    host_accesses: Vec<crate::model::HostAccess>,
    /// The coherence check's closing counts.
    check_summary: Option<accprof_trace::CheckSummary>,
    /// The sites of the coherence check's code addresses, symbolized once.
    code_sites: HashMap<u64, SiteId>,
    /// The same for return addresses (the program's calls into a library
    /// that made a host access), by address.
    return_sites: HashMap<u64, SiteId>,
    /// The last constructs started (region, construct): a coherence
    /// record names the construct that made the device copy newer, which
    /// has ended by the time the record is written.
    recent: std::collections::VecDeque<(u64, ConstructId)>,
    site_index: HashMap<Site, SiteId>,
    sites: Vec<Site>,
    symbolized: IdMap<SiteId>,
    names: Vec<String>,
    name_index: HashMap<String, NameId>,
    name_of_string: IdHashMap<StringId, NameId>,
    /// The name "?" (a kernel whose name is unknown), once interned.
    unknown_name: Option<NameId>,
    next_construct: u32,
    live: LiveMap,
    /// Emptied launch lists, to be filled again.
    spare_launches: Vec<Vec<LaunchRequest>>,
    /// Region id -> its construct, while the construct is open.
    by_region: OpenRegions,
    /// Open constructs per thread, innermost last (few threads: a vector).
    open: Vec<(u32, Vec<ConstructId>)>,
    line_sites: LineSites,
    /// CUPTI correlation id -> driver call facts, until its device record
    /// is handed over.
    correlation: IdHashMap<u32, Correlated>,
    /// Device records whose driver call has not been read yet.
    unjoined: IdHashMap<u32, Vec<(DeviceRecord, u64)>>,
    /// Order of the device records and acc_prof copies as read.
    seq: u64,
    pending_copies: Vec<PendingCopy>,
    next_alloc: u32,
    /// Allocations not yet freed, by device pointer (latest last).
    unfreed: IdHashMap<u64, Unfreed>,
    devices: Vec<Device>,
    acc_events: u64,
    dropped: HashMap<DropSource, u64>,
    diagnostics: Vec<(Level, String)>,
    /// The first and last time seen (none seen while the last is 0:
    /// times of 0 are not seen).
    span: (u64, u64),
    ending: Option<accprof_trace::EndRecord>,
    crash: Option<accprof_trace::Crash>,
    routines: Vec<String>,
    routine_ids: IdHashMap<StringId, ApiRoutine>,
    totals: Totals,
    placement: Placement,
    /// Device records left out: end before start, or implausibly long.
    rejected_kernels: u64,
    rejected_copies: u64,
    rejected_memsets: u64,
    /// The dropped-record counts added up past u64::MAX.
    dropped_overflow: bool,
}

/// Constructs remembered for the coherence records (see `Join::recent`).
const RECENT: usize = 1024;

impl<S: Sink> Join<S> {
    pub(crate) fn new(header: &Header, version: (u16, u16), mut sink: S) -> Self {
        // CUPTI times the driver calls: without it (as the header says, which
        // the join trusts for the transfers too) there are none.
        let cupti = header.sources.cupti.is_active();
        // The coherence check's own work comes as spans too.
        sink.driver_spans_possible(
            (cupti && version >= FIRST_VERSION_WITH_DRIVER_SPANS) || header.sources.coherence,
        );
        Join {
            sink,
            cupti,
            strings: IdHashMap::default(),
            modules: HashMap::new(),
            call_sites: IdHashMap::default(),
            call_chains: IdHashMap::default(),
            callers: Default::default(),
            mpi_calls: Vec::new(),
            host_accesses: Vec::new(),
            check_summary: None,
            code_sites: HashMap::new(),
            return_sites: HashMap::new(),
            recent: std::collections::VecDeque::new(),
            site_index: HashMap::new(),
            sites: Vec::new(),
            symbolized: IdMap::new(),
            names: Vec::new(),
            name_index: HashMap::new(),
            name_of_string: IdHashMap::default(),
            unknown_name: None,
            next_construct: 0,
            live: LiveMap::new(),
            spare_launches: Vec::new(),
            by_region: OpenRegions::default(),
            open: Vec::new(),
            line_sites: LineSites::default(),
            correlation: IdHashMap::default(),
            unjoined: IdHashMap::default(),
            seq: 0,
            pending_copies: Vec::new(),
            next_alloc: 0,
            unfreed: IdHashMap::default(),
            devices: Vec::new(),
            acc_events: 0,
            dropped: HashMap::new(),
            diagnostics: Vec::new(),
            span: (u64::MAX, 0),
            ending: None,
            crash: None,
            routines: Vec::new(),
            routine_ids: IdHashMap::default(),
            totals: Totals::default(),
            placement: Placement::new(header),
            rejected_kernels: 0,
            rejected_copies: 0,
            rejected_memsets: 0,
            dropped_overflow: false,
        }
    }

    #[inline]
    fn see_time(&mut self, t: u64) {
        if t == 0 {
            return;
        }
        self.span = (self.span.0.min(t), self.span.1.max(t));
    }

    fn string(&self, id: Option<StringId>) -> Option<String> {
        id.and_then(|id| self.strings.get(&id).cloned())
    }

    fn intern_name(&mut self, text: &str) -> NameId {
        if let Some(&id) = self.name_index.get(text) {
            return id;
        }
        let id = NameId::at(self.names.len());
        self.names.push(text.to_string());
        self.name_index.insert(text.to_string(), id);
        id
    }

    /// The name "?", interned the first time it is needed.
    #[inline]
    fn unknown_name(&mut self) -> NameId {
        match self.unknown_name {
            Some(n) => n,
            None => {
                let n = self.intern_name("?");
                self.unknown_name = Some(n);
                n
            }
        }
    }

    /// The name a string of the trace stands for; None while the string
    /// is unknown.
    fn name(&mut self, id: Option<StringId>) -> Option<NameId> {
        let id = id?;
        if let Some(&n) = self.name_of_string.get(&id) {
            return Some(n);
        }
        let text = self.strings.get(&id)?.clone();
        let n = self.intern_name(&text);
        self.name_of_string.insert(id, n);
        Some(n)
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
        if let Some(p) = parent.and_then(|p| self.live.get(&p)) {
            return p.c.site;
        }
        self.intern_site(Site::unknown())
    }

    pub(crate) fn add(&mut self, rec: &Record, symbolizer: &mut Symbolizer) {
        match rec {
            Record::Acc(ev) => self.add_acc(ev, symbolizer),
            Record::DriverSpan(d) => {
                self.see_time(d.start_ns);
                self.see_time(d.end_ns);
                self.sink.driver_span(d);
            }
            Record::DriverCall(d) => {
                let construct = self.by_region.get(&d.region.0).copied();
                let mut c = self
                    .correlation
                    .get(&d.correlation)
                    .copied()
                    .unwrap_or_default();
                if let Some(old) = c.construct.take() {
                    self.release(old);
                }
                if let Some(id) = construct {
                    self.retain(id);
                }
                c.called = true;
                c.construct = construct;
                c.host_ptr = d.host_ptr;
                self.correlation.insert(d.correlation, c);
                if let Some(waiting) = self.unjoined.remove(&d.correlation) {
                    for (r, seq) in waiting {
                        self.join(r, seq);
                    }
                }
            }
            Record::Hash(h) => {
                self.correlation.entry(h.correlation).or_default().hash = Some(h.hash);
                let at = self
                    .by_region
                    .get(&h.region.0)
                    .copied()
                    .and_then(|c| self.at(c));
                self.sink.hash(h, at.as_ref());
            }
            Record::Kernel(k) => {
                if !plausible(k.start_ns, k.end_ns) {
                    self.rejected_kernels += 1;
                    return;
                }
                self.see_time(k.start_ns);
                self.see_time(k.end_ns);
                self.device_record(DeviceRecord::Kernel(*k));
            }
            Record::Memcpy(m) => {
                if !plausible(m.start_ns, m.end_ns) {
                    self.rejected_copies += 1;
                    return;
                }
                self.see_time(m.start_ns);
                self.see_time(m.end_ns);
                self.device_record(DeviceRecord::Memcpy(*m));
            }
            Record::Memset(m) => {
                if !plausible(m.start_ns, m.end_ns) {
                    self.rejected_memsets += 1;
                    return;
                }
                self.see_time(m.start_ns);
                self.see_time(m.end_ns);
                self.device_record(DeviceRecord::Memset(*m));
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
            Record::MpiCall(m) => {
                self.see_time(m.start_ns);
                self.see_time(m.end_ns);
                let site = m.call_site.map(|cs| self.call_site_site(cs, symbolizer));
                self.mpi_calls.push(crate::model::MpiCall {
                    routine: self
                        .string(Some(m.routine))
                        .unwrap_or_else(|| "MPI_?".into()),
                    start_ns: m.start_ns,
                    end_ns: m.end_ns,
                    thread: m.thread,
                    cuda_aware: m.cuda_aware,
                    ranges: m.ranges.clone(),
                    site,
                });
            }
            Record::CallChain(c) => {
                self.call_chains.insert(c.site, c.callers.clone());
                // Defined after the site was first used: add its callers now.
                if let Some(id) = self.symbolized.get(u64::from(c.site.0)) {
                    self.callers.remove(&id);
                    self.find_callers(c.site, id, symbolizer);
                }
            }
            Record::Device(d) => {
                if !self.devices.iter().any(|x| x.id == d.id) {
                    self.devices.push(d.clone());
                }
            }
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
            Record::Crash(c) => {
                self.see_time(c.time_ns);
                // The latest signal, unless a fault came first: an abort
                // from a handler after a SIGSEGV is not what it died of.
                let fault = |c: &accprof_trace::Crash| c.address.is_some();
                if !self.crash.as_ref().is_some_and(|k| fault(k) && !fault(c)) {
                    self.crash = Some(c.clone());
                }
            }
            Record::Api(a) => self.add_api(a, symbolizer),
            Record::Coherence(k) => self.add_coherence(k, symbolizer),
            Record::OwnWork(w) => {
                self.see_time(w.start_ns);
                self.see_time(w.end_ns);
                self.sink.own_work(w);
            }
            Record::CheckSummary(k) => self.check_summary = Some(*k),
        }
    }

    fn retain(&mut self, id: ConstructId) {
        if let Some(l) = self.live.get_mut(&id) {
            l.refs += 1;
        }
    }

    /// Drops one reference to a live construct; the last one lets it go
    /// (and its own reference to its outermost construct).
    fn release(&mut self, id: ConstructId) {
        let Some(l) = self.live.get_mut(&id) else {
            return;
        };
        l.refs = l.refs.saturating_sub(1);
        if l.refs == 0 {
            let top = l.top;
            self.live.remove(&id);
            if top != id {
                self.release(top);
            }
        }
    }

    fn device_record(&mut self, r: DeviceRecord) {
        let seq = self.seq;
        self.seq += 1;
        let called = self
            .correlation
            .get(&r.correlation())
            .is_some_and(|c| c.called);
        if called {
            self.join(r, seq);
        } else {
            self.unjoined
                .entry(r.correlation())
                .or_default()
                .push((r, seq));
        }
    }

    /// A device record whose driver call was read (or, at the end, whose
    /// driver call never came).
    fn join(&mut self, r: DeviceRecord, seq: u64) {
        let corr = r.correlation();
        let c = self.correlation.get(&corr).copied().unwrap_or_default();
        let live = c
            .construct
            .and_then(|id| self.live.get(&id).map(|l| (id, l.top, l.fin)));
        let Some((construct, top, fin)) = live else {
            self.correlation.remove(&corr);
            self.emit_device(r, seq, None, c);
            return;
        };
        match r {
            // A kernel waits for its outermost construct's host time.
            DeviceRecord::Kernel(_) => {
                self.correlation.remove(&corr);
                match self.live.get_mut(&top) {
                    // The driver call's reference goes with it.
                    Some(t) if !t.fin => t.waiting.push((r, seq, construct)),
                    _ => {
                        let at = self.at(construct);
                        self.emit_device(r, seq, at.as_ref(), c);
                        self.release(construct);
                    }
                }
            }
            // A copy or memset waits for its construct to end: a hash of
            // the buffer may still come.
            DeviceRecord::Memcpy(_) | DeviceRecord::Memset(_) => {
                if fin {
                    self.correlation.remove(&corr);
                    let at = self.at(construct);
                    self.emit_device(r, seq, at.as_ref(), c);
                    self.release(construct);
                } else if let Some(l) = self.live.get_mut(&construct) {
                    l.waiting.push((r, seq, construct));
                }
            }
        }
    }

    /// Where a live construct stands.
    fn at(&self, id: ConstructId) -> Option<At> {
        Some(self.at_of(id, self.live.get(&id)?))
    }

    /// Where the live construct `id` (whose entry is `l`) stands.
    #[inline]
    fn at_of(&self, id: ConstructId, l: &Live) -> At {
        let top = if l.top == id {
            Some(l)
        } else {
            self.live.get(&l.top)
        };
        At {
            construct: id,
            thread: l.c.thread,
            line_site: l.c.line_site,
            top: l.top,
            top_class: l.top_class,
            host_ns: l.c.host_ns(),
            top_host_ns: top.filter(|t| t.fin).and_then(|t| t.c.host_ns()),
        }
    }

    fn emit_device(&mut self, r: DeviceRecord, seq: u64, at: Option<&At>, c: Correlated) {
        let construct = at.map(|a| a.construct);
        match r {
            DeviceRecord::Kernel(k) => {
                let name = self
                    .name(Some(k.name))
                    .unwrap_or_else(|| self.unknown_name());
                let kernel = Kernel {
                    construct,
                    name,
                    grid: k.grid,
                    block: k.block,
                    registers: k.registers,
                    shared_bytes: k.static_shared_bytes.saturating_add(k.dynamic_shared_bytes),
                    local_bytes_per_thread: k.local_bytes_per_thread,
                    start_ns: k.start_ns,
                    end_ns: k.end_ns,
                    device: k.device,
                    stream: k.stream,
                    source: KernelSource::Cupti,
                    launch: 0,
                };
                self.totals.add_kernel(&kernel);
                self.sink.kernel(&kernel, (k.start_ns, seq), at);
            }
            DeviceRecord::Memcpy(m) => {
                let mut t = Transfer::new(
                    construct,
                    m.kind,
                    m.bytes,
                    m.start_ns,
                    m.end_ns,
                    m.src,
                    m.dst,
                    TransferSource::Cupti,
                );
                t.set_host_ptr(c.host_ptr);
                t.set_hash(c.hash);
                t.set_device(m.device, m.stream, m.correlation);
                self.totals.add_transfer(&t);
                self.sink.transfer(&t, (m.start_ns, seq), at);
            }
            DeviceRecord::Memset(m) => {
                let x = Memset {
                    construct,
                    bytes: m.bytes,
                    value: m.value,
                    memory: m.memory,
                    start_ns: m.start_ns,
                    end_ns: m.end_ns,
                    device: m.device,
                    stream: m.stream,
                    correlation: m.correlation,
                };
                self.sink.memset(&x, (m.start_ns, seq), at);
            }
        }
    }

    /// A construct starts: nested in the innermost open one of its thread.
    fn start(&mut self, mut c: Construct, region: u64) -> ConstructId {
        let id = ConstructId::at(self.next_construct as usize);
        self.next_construct = self.next_construct.saturating_add(1);
        let (top, top_class, top_line) = match c.parent.and_then(|p| self.live.get(&p)) {
            Some(p) => {
                c.depth = p.c.depth.saturating_add(1);
                let top = p.top;
                match self.live.get(&top) {
                    Some(t) => (top, t.c.class, Some(t.c.line_site)),
                    None => (top, c.class, None),
                }
            }
            None => (id, c.class, None),
        };
        let (line_site, kind) = self.line_sites.assign(&c, top_line);
        c.line_site = line_site;
        c.kind = kind;
        self.placement.add(&c);
        self.sink.started(id, &c);
        if top != id {
            self.retain(top);
        }
        self.by_region.insert(region, id);
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((region, id));
        let thread = c.thread;
        self.live.insert(
            id,
            Live {
                c,
                top,
                top_class,
                launches: self.spare_launches.pop().unwrap_or_default(),
                waiting: Vec::new(),
                refs: 1,
                fin: false,
            },
        );
        self.stack(thread).push(id);
        id
    }

    /// A construct is final: what waited for it is handed over, then the
    /// construct itself.
    fn finalize(&mut self, id: ConstructId, open_at_end: bool) {
        let Some(l) = self.live.get_mut(&id) else {
            return;
        };
        if l.fin {
            return;
        }
        l.fin = true;
        let waiting = std::mem::take(&mut l.waiting);
        let launches = std::mem::take(&mut l.launches);
        self.by_region.remove(id);
        // Most of them are of one construct: where it stands is read once.
        let mut at: Option<(ConstructId, Option<At>)> = None;
        for (r, seq, construct) in waiting {
            let corr = r.correlation();
            let c = match r {
                DeviceRecord::Kernel(_) => Correlated::default(),
                _ => self.correlation.remove(&corr).unwrap_or_default(),
            };
            let here = match at {
                Some((id, a)) if id == construct => a,
                _ => {
                    let a = self.at(construct);
                    at = Some((construct, a));
                    a
                }
            };
            self.emit_device(r, seq, here.as_ref(), c);
            self.release(construct);
        }
        let Some(l) = self.live.get(&id) else {
            return;
        };
        let c = l.c.clone();
        let at = self.at_of(id, l);
        // Without CUPTI, the runtime's launch events are the kernels.
        if !self.cupti {
            for (i, l) in launches.iter().enumerate() {
                let k = l.kernel(&c, self.unknown_name());
                self.totals.add_kernel(&k);
                let order = (
                    k.start_ns,
                    ACC_SEQ | (id.index() as u64) << 24 | (i as u64).min((1 << 24) - 1),
                );
                self.sink.kernel(&k, order, Some(&at));
            }
        }
        self.totals.add_construct(&c);
        self.sink.construct(id, &c, &launches, &at, open_at_end);
        self.release(id);
        if self.spare_launches.len() < 16 {
            let mut launches = launches;
            launches.clear();
            self.spare_launches.push(launches);
        }
    }

    /// Closes constructs taken off a thread's stack: cut, except the one
    /// whose end came.
    fn close_all(&mut self, ids: Vec<ConstructId>, cut: bool) {
        // Innermost first: a construct is handed over after those inside it.
        for id in ids.into_iter().rev() {
            if let Some(l) = self.live.get_mut(&id) {
                l.c.cut = cut;
            }
            self.finalize(id, false);
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
                let mut c = Construct::new(
                    ConstructClass::ApiCall(routine),
                    Some(ConstructKind::RuntimeApi),
                    site,
                    a.thread,
                    a.time_ns,
                    None,
                );
                c.set_async_queue(a.async_queue);
                self.start(c, a.region.0);
            }
            ApiPhase::End => {
                let Some(id) = self.by_region.get(&a.region.0).copied() else {
                    return;
                };
                let Some(l) = self.live.get_mut(&id) else {
                    return;
                };
                if !matches!(l.c.class, ConstructClass::ApiCall(_)) {
                    return;
                }
                l.c.set_end_ns(Some(a.time_ns));
                // Whatever the runtime left open inside the call ends with
                // it (not cut: the call's end says where it stopped).
                let stack = self.stack(a.thread);
                let taken: Vec<ConstructId> = match stack.iter().rposition(|&c| c == id) {
                    Some(pos) => stack.drain(pos..).collect(),
                    None => vec![id],
                };
                for c in taken.into_iter().rev() {
                    self.finalize(c, false);
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
            Some(i) => ApiRoutine(i as u16),
            // More names than any API has (a damaged or crafted trace).
            None if self.routines.len() >= usize::from(u16::MAX) => ApiRoutine(u16::MAX),
            None => {
                self.routines.push(text);
                ApiRoutine(self.routines.len() as u16 - 1)
            }
        };
        self.routine_ids.insert(name, r);
        r
    }

    fn add_acc(&mut self, ev: &accprof_trace::AccEvent, symbolizer: &mut Symbolizer) {
        self.acc_events += 1;
        self.see_time(ev.time_ns);
        if let Some(class) = class_of(ev.kind) {
            let pos = {
                let live = &self.live;
                let stack = self
                    .open
                    .iter()
                    .find(|(t, _)| *t == ev.thread)
                    .map(|(_, s)| s.as_slice())
                    .unwrap_or(&[]);
                stack
                    .iter()
                    .position(|c| live.get(c).is_some_and(|l| l.c.class == class))
            };
            if let Some(pos) = pos {
                let cut: Vec<ConstructId> = self.stack(ev.thread).drain(pos..).collect();
                self.close_all(cut, true);
            }
            let parent = self.stack(ev.thread).last().copied();
            let site = self.site_for(ev, parent, symbolizer);
            let mut c = Construct::new(class, ev.construct, site, ev.thread, ev.time_ns, parent);
            c.implicit = ev.implicit;
            c.set_async_queue(ev.async_queue);
            c.set_device(ev.device_type, ev.device_number);
            self.start(c, ev.region.0);
            return;
        }
        if is_end(ev.kind) {
            if let Some(id) = self.by_region.get(&ev.region.0).copied() {
                if let Some(l) = self.live.get_mut(&id) {
                    l.c.set_end_ns(Some(ev.time_ns));
                    l.c.cut = false;
                }
                let stack = self.stack(ev.thread);
                let inside: Vec<ConstructId> = match stack.iter().rposition(|&c| c == id) {
                    Some(pos) => stack.drain(pos..).skip(1).collect(),
                    None => Vec::new(),
                };
                self.close_all(inside, true);
                self.finalize(id, false);
            }
            return;
        }
        match (ev.kind, &ev.detail) {
            (AccEventKind::EnqueueLaunchStart, AccDetail::Launch(l)) => {
                if let Some(id) = self.by_region.get(&ev.region.0).copied() {
                    let name = self.name(l.kernel_name);
                    if let Some(c) = self.live.get_mut(&id) {
                        c.launches.push(LaunchRequest::new(
                            id,
                            name,
                            l.num_gangs,
                            l.num_workers,
                            l.vector_length,
                            ev.time_ns,
                        ));
                    }
                }
            }
            (AccEventKind::EnqueueLaunchEnd, _) => {
                if let Some(c) = self
                    .by_region
                    .get(&ev.region.0)
                    .and_then(|id| self.live.get_mut(id))
                {
                    if let Some(l) = c.launches.iter_mut().rev().find(|l| l.end_ns().is_none()) {
                        l.set_end_ns(ev.time_ns);
                    }
                }
            }
            (AccEventKind::Alloc, AccDetail::Data(d)) => {
                // All ones is libgomp's "unknown" size.
                let bytes = d.bytes.filter(|&b| b != u64::MAX).unwrap_or(0);
                let construct = self.by_region.get(&ev.region.0).copied();
                let variable = self.name(d.var_name);
                let id = AllocId::at(self.next_alloc as usize);
                self.next_alloc = self.next_alloc.saturating_add(1);
                let a = DeviceAlloc::new(construct, bytes, d.device_ptr, variable, ev.time_ns);
                self.sink.alloc(id, &a);
                // Without a device pointer nothing can free it.
                if let Some(p) = d.device_ptr {
                    match self.unfreed.entry(p) {
                        std::collections::hash_map::Entry::Occupied(mut e) => {
                            let u = e.get_mut();
                            let earlier = std::mem::replace(&mut u.latest, id);
                            u.earlier.push(earlier);
                        }
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert(Unfreed {
                                latest: id,
                                earlier: Vec::new(),
                            });
                        }
                    }
                }
            }
            (AccEventKind::Free, AccDetail::Data(d)) => {
                if let Some(ptr) = d.device_ptr {
                    let freed = match self.unfreed.get_mut(&ptr) {
                        Some(u) => match u.earlier.pop() {
                            Some(earlier) => Some(std::mem::replace(&mut u.latest, earlier)),
                            None => self.unfreed.remove(&ptr).map(|u| u.latest),
                        },
                        None => None,
                    };
                    if let Some(id) = freed {
                        self.sink.freed(id, ev.time_ns);
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
                    let construct = self.by_region.get(&ev.region.0).copied();
                    let variable = self.name(p.var);
                    let mut t = Transfer::new(
                        construct,
                        kind,
                        p.bytes,
                        p.start_ns,
                        ev.time_ns,
                        MemoryKind::Unknown,
                        MemoryKind::Unknown,
                        TransferSource::AccProf,
                    );
                    t.variable = variable;
                    t.set_host_ptr(p.host_ptr);
                    let order = (t.start_ns, ACC_SEQ | self.seq);
                    self.seq += 1;
                    self.totals.add_transfer(&t);
                    let at = construct.and_then(|c| self.at(c));
                    self.sink.transfer(&t, order, at.as_ref());
                }
            }
            _ => {}
        }
    }

    pub(crate) fn finish(
        mut self,
        header: Header,
        version: (u16, u16),
        losses: Vec<Loss>,
        skipped_unknown: u64,
    ) -> S::Output {
        // Device records whose driver call never came belong to no
        // construct.
        let mut unjoined: Vec<(DeviceRecord, u64)> = std::mem::take(&mut self.unjoined)
            .into_values()
            .flatten()
            .collect();
        unjoined.sort_by_key(|&(_, seq)| seq);
        for (r, seq) in unjoined {
            self.join(r, seq);
        }
        // What is still open was running when the trace ended.
        let mut open_at_end = Vec::new();
        for (_, stack) in std::mem::take(&mut self.open) {
            for &c in &stack {
                if let Some(l) = self.live.get_mut(&c) {
                    l.c.cut = true;
                }
                open_at_end.push(c);
            }
            for &c in stack.iter().rev() {
                self.finalize(c, true);
            }
        }
        let mut dropped: Vec<_> = self.dropped.into_iter().collect();
        dropped.sort_by_key(|(s, _)| format!("{s:?}"));
        let mut modules: Vec<_> = self.modules.into_values().collect();
        modules.sort_by_key(|m| m.id);
        let mut notes = Vec::new();
        for (n, what) in [
            (self.rejected_kernels, "kernel"),
            (self.rejected_copies, "memcpy"),
            (self.rejected_memsets, "memset"),
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
        let check = crate::check::CheckState::of(
            version,
            header.sources.coherence,
            self.check_summary.as_ref(),
            self.host_accesses.len() as u64,
        );
        let info = Process {
            check,
            header,
            version,
            losses,
            devices: self.devices,
            sites: self.sites,
            callers: self.callers,
            mpi_calls: {
                let mut m = self.mpi_calls;
                m.sort_by_key(|c| c.start_ns);
                m
            },
            host_accesses: {
                let mut h = self.host_accesses;
                h.sort_by_key(|a| a.time_ns);
                h
            },
            names: self.names,
            routines: self.routines,
            modules,
            acc_events: self.acc_events,
            dropped,
            diagnostics: self.diagnostics,
            notes,
            skipped_unknown,
            span_ns: if self.span.1 == 0 { (0, 0) } else { self.span },
            open_at_end,
            ending: self.ending,
            crash: self.crash,
            constructs: self.next_construct,
            allocs: self.next_alloc,
            totals: self.totals,
            placement: self.placement,
        };
        self.sink.finish(info)
    }
}

/// Reads a whole trace through a join into `sink`.
pub fn join_reader<S: Sink>(
    mut reader: impl accprof_trace::RecordSource,
    symbolizer: &mut Symbolizer,
    sink: S,
) -> S::Output {
    let mut j = Join::new(reader.header(), reader.version(), sink);
    reader.for_each_record(|rec| j.add(rec, symbolizer));
    let header = reader.header().clone();
    let version = reader.version();
    let losses = reader.losses().to_vec();
    let skipped = reader.skipped_unknown();
    j.finish(header, version, losses, skipped)
}

/// Reads the records of a trace held in memory through a join into `sink`.
pub fn join_trace<S: Sink>(
    trace: accprof_trace::Trace,
    symbolizer: &mut Symbolizer,
    sink: S,
) -> S::Output {
    let mut j = Join::new(&trace.header, trace.version, sink);
    for rec in &trace.records {
        j.add(rec, symbolizer);
    }
    j.finish(
        trace.header,
        trace.version,
        trace.losses,
        trace.skipped_unknown,
    )
}
