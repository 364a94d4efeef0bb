//! The summary's sink: it adds up the join's entities by source line as
//! they come, and keeps what is in flight.

use std::collections::BTreeMap;

use accprof_trace::{ConstructKind, CopyKind, Ending, MemoryKind};

use crate::idhash::IdHashMap;
use crate::join::{At, Order, Sink};
use crate::ledger::LedgerSink;
use crate::model::summary_types::*;
use crate::model::Process;
use crate::model::{
    ApiRoutine, Construct, ConstructClass, ConstructId, Kernel, KernelSource, LaunchRequest,
    Memset, NameId, SiteId, Transfer, TransferSource, ACC_DEVICE_HOST,
};
use accprof_trace::{BufferHash, DriverSpan};

fn device_label(info: &Process, device_type: Option<u32>) -> &'static str {
    let gcc = info.placement.libgomp();
    match device_type {
        Some(ACC_DEVICE_HOST) => "HOST",
        Some(5) if gcc => "NVIDIA",
        Some(4) if !gcc => "NVIDIA",
        _ if info.header.sources.cupti.is_active() => "NVIDIA",
        _ => "DEVICE",
    }
}

/// Kernels of one line with one launch shape, while summarizing.
struct KernelAcc {
    /// The first of them in the run's order.
    first: Order,
    name: NameId,
    grid: [u32; 3],
    block: [u32; 3],
    line: KernelLine,
}

/// Transfers of one line in one direction, while summarizing.
struct TransferAcc {
    line: TransferLine,
    /// Variables (the runtime's names, else the host buffers) with the
    /// first transfer of each, in the run's order.
    variables: Vec<(Order, Result<NameId, u64>)>,
    /// The last transfer's order (it says whether they are device-timed).
    last: Order,
}

/// Aggregates of one site while summarizing.
#[derive(Default)]
struct SiteAcc {
    used: bool,
    reached: [Stats; 6],
    api_calls: Vec<(ApiRoutine, Stats)>,
    kernels: Vec<KernelAcc>,
    transfers: Vec<TransferAcc>,
    host_ns: u64,
    constructs: u64,
    /// The first construct (by handle) with a device type: its type and
    /// device number.
    typed: Option<(ConstructId, u32, Option<u32>)>,
    /// The last construct without one: its device number.
    untyped: Option<(ConstructId, Option<u32>)>,
}

impl SiteAcc {
    fn device(&self) -> (Option<u32>, Option<u32>) {
        match (self.typed, self.untyped) {
            (Some((_, t, n)), _) => (Some(t), n),
            (None, Some((_, n))) => (None, n),
            (None, None) => (None, None),
        }
    }
}

fn kernel_dims(d: [u32; 3]) -> Vec<u32> {
    let mut v = d.to_vec();
    while v.len() > 1 && v.last() == Some(&1) {
        v.pop();
    }
    v
}

/// What the summary keeps of an outermost construct while it is open, in
/// case the program dies inside it: its last kernel, launch and transfers.
#[derive(Default)]
struct Family {
    last_kernel: Option<(Order, NameId, [u32; 3], [u32; 3])>,
    last_launch: Option<((u64, ConstructId, usize), LaunchRequest)>,
    /// The last three host<->device transfers.
    last_transfers: Vec<LastTransfer>,
}

/// A host<->device transfer a [`Family`] keeps: order, direction, bytes,
/// variable.
type LastTransfer = (Order, CopyKind, u64, Option<NameId>);

fn family_mut(families: &mut [(ConstructId, Family)], top: ConstructId) -> Option<&mut Family> {
    families
        .iter_mut()
        .rev()
        .find(|(t, _)| *t == top)
        .map(|(_, f)| f)
}

/// A construct open when the trace ended.
struct OpenAtEnd {
    top: ConstructId,
    start_ns: u64,
    line_site: SiteId,
    class: ConstructClass,
    kind: Option<ConstructKind>,
    implicit: bool,
}

/// The summary as a sink of the join: it aggregates per line and launch
/// shape as the entities come, so it holds what the distinct lines,
/// shapes, sizes and variables need, never an entity per event.
pub struct SummarySink {
    acc: Vec<SiteAcc>,
    unattributed: SiteAcc,
    /// The outermost constructs open now (few: one or two a thread).
    families: Vec<(ConstructId, Family)>,
    /// Emptied transfer lists of families gone, to be filled again.
    spare_transfers: Vec<Vec<LastTransfer>>,
    open_at_end: IdHashMap<ConstructId, OpenAtEnd>,
    /// Where the wall time went, made in the same pass.
    ledger: LedgerSink,
}

impl Default for SummarySink {
    fn default() -> Self {
        Self::new()
    }
}

impl SummarySink {
    pub fn new() -> Self {
        SummarySink {
            acc: Vec::new(),
            unattributed: SiteAcc::default(),
            families: Vec::new(),
            spare_transfers: Vec::new(),
            open_at_end: IdHashMap::default(),
            ledger: LedgerSink::new(),
        }
    }

    fn slot(&mut self, at: Option<&At>) -> &mut SiteAcc {
        let a = match at {
            None => &mut self.unattributed,
            Some(at) => {
                let i = at.line_site.index();
                if self.acc.len() <= i {
                    self.acc.resize_with(i + 1, SiteAcc::default);
                }
                &mut self.acc[i]
            }
        };
        a.used = true;
        a
    }
}

impl Sink for SummarySink {
    type Output = Summary;

    fn driver_spans_possible(&mut self, possible: bool) {
        self.ledger.driver_spans_possible(possible);
    }

    fn started(&mut self, id: ConstructId, c: &Construct) {
        if c.parent.is_none() {
            let family = Family {
                last_transfers: self.spare_transfers.pop().unwrap_or_default(),
                ..Family::default()
            };
            self.families.push((id, family));
        }
    }

    fn construct(
        &mut self,
        id: ConstructId,
        c: &Construct,
        launches: &[LaunchRequest],
        at: &At,
        open_at_end: bool,
    ) {
        self.ledger.construct(id, c, launches, at, open_at_end);
        let f = match launches {
            [] => None,
            _ => family_mut(&mut self.families, at.top),
        };
        if let Some(f) = f {
            for (i, l) in launches.iter().enumerate() {
                let key = (l.start_ns, id, i);
                if f.last_launch.as_ref().map_or(true, |(k, _)| key >= *k) {
                    f.last_launch = Some((key, l.clone()));
                }
            }
        }
        if open_at_end {
            self.open_at_end.insert(
                id,
                OpenAtEnd {
                    top: at.top,
                    start_ns: c.start_ns,
                    line_site: at.line_site,
                    class: c.class,
                    kind: c.kind,
                    implicit: c.implicit,
                },
            );
        } else if c.parent.is_none() {
            if let Some(i) = self.families.iter().position(|(t, _)| *t == id) {
                let (_, mut f) = self.families.swap_remove(i);
                if self.spare_transfers.len() < 16 {
                    f.last_transfers.clear();
                    self.spare_transfers.push(f.last_transfers);
                }
            }
        }
        let host = c.host_ns().unwrap_or(0);
        let nested = c.parent.is_some();
        let a = self.slot(Some(at));
        match c.device_type() {
            Some(t) => {
                if a.typed.map_or(true, |(first, _, _)| id < first) {
                    a.typed = Some((id, t, c.device()));
                }
            }
            None => {
                if a.untyped.map_or(true, |(last, _)| id > last) {
                    a.untyped = Some((id, c.device()));
                }
            }
        }
        match reached_of(c.class, c.kind, nested) {
            // What the runtime reports inside an API routine is the call's.
            Some(_) if nested && matches!(at.top_class, ConstructClass::ApiCall(_)) => {}
            Some(r) => a.reached[r as usize].add(host),
            None => {
                if let ConstructClass::ApiCall(routine) = c.class {
                    match a.api_calls.iter_mut().find(|(r, _)| *r == routine) {
                        Some((_, s)) => s.add(host),
                        None => {
                            let mut s = Stats::default();
                            s.add(host);
                            a.api_calls.push((routine, s));
                        }
                    }
                }
            }
        }
        if !nested {
            a.host_ns = a.host_ns.saturating_add(host);
            a.constructs += 1;
        }
    }

    fn kernel(&mut self, k: &Kernel, order: Order, at: Option<&At>) {
        if k.device_timed() {
            if let Some(f) = at.and_then(|at| family_mut(&mut self.families, at.top)) {
                if f.last_kernel.map_or(true, |(o, ..)| order > o) {
                    f.last_kernel = Some((order, k.name, k.grid, k.block));
                }
            }
        }
        let a = self.slot(at);
        let pos = a
            .kernels
            .iter()
            .position(|e| e.grid == k.grid && e.block == k.block && e.name == k.name);
        let e = match pos {
            Some(i) => &mut a.kernels[i],
            None => {
                a.kernels.push(KernelAcc {
                    first: order,
                    name: k.name,
                    grid: k.grid,
                    block: k.block,
                    line: KernelLine::default(),
                });
                let last = a.kernels.len() - 1;
                &mut a.kernels[last]
            }
        };
        e.first = e.first.min(order);
        let entry = &mut e.line;
        entry.launches += 1;
        entry.registers = entry.registers.max(k.registers);
        entry.shared_bytes = entry.shared_bytes.max(k.shared_bytes);
        entry.local_bytes_per_thread = entry.local_bytes_per_thread.max(k.local_bytes_per_thread);
        match (k.source, at) {
            (KernelSource::Cupti, at) => {
                entry.device.add(k.device_ns());
                if let Some(h) = at.and_then(|at| at.top_host_ns) {
                    entry.elapsed.add(h);
                }
            }
            // A launch event: its compute construct's host time, no device time.
            (KernelSource::AccProf, Some(at)) => {
                entry.elapsed.add(at.host_ns.unwrap_or(0));
            }
            (KernelSource::AccProf, None) => {}
        }
    }

    fn transfer(&mut self, cp: &Transfer, order: Order, at: Option<&At>) {
        if !cp.is_host_device() {
            return;
        }
        if let Some(f) = at.and_then(|at| family_mut(&mut self.families, at.top)) {
            // The three latest, latest first; of equal orders, the one
            // handed over first.
            let last = &mut f.last_transfers;
            let i = last.iter().position(|x| x.0 < order).unwrap_or(last.len());
            if i < 3 {
                last.insert(i, (order, cp.kind, cp.bytes, cp.variable));
                last.truncate(3);
            }
        }
        let a = self.slot(at);
        let dir = Some(cp.kind);
        let i = match a.transfers.iter().position(|t| t.line.direction == dir) {
            Some(i) => i,
            None => {
                a.transfers.push(TransferAcc {
                    line: TransferLine {
                        direction: dir,
                        ..Default::default()
                    },
                    variables: Vec::new(),
                    last: order,
                });
                a.transfers.len() - 1
            }
        };
        let acc = &mut a.transfers[i];
        let t = &mut acc.line;
        t.count += 1;
        t.bytes = t.bytes.saturating_add(cp.bytes);
        t.time.add(cp.duration_ns());
        if order >= acc.last {
            acc.last = order;
            t.device_timed = cp.source == TransferSource::Cupti;
        }
        t.add_size(cp.bytes, 1);
        let host_side = if cp.kind == CopyKind::HostToDevice {
            cp.src
        } else {
            cp.dst
        };
        match host_side {
            MemoryKind::Pageable => t.pageable += 1,
            MemoryKind::Pinned => t.pinned += 1,
            _ => {}
        }
        let v = match (cp.variable, cp.host_ptr()) {
            (Some(v), _) => Some(Ok(v)),
            (None, Some(p)) => Some(Err(p)),
            (None, None) => None,
        };
        if let Some(v) = v {
            match acc.variables.iter_mut().find(|(_, x)| *x == v) {
                Some((first, _)) => *first = (*first).min(order),
                None => acc.variables.push((order, v)),
            }
        }
    }

    fn memset(&mut self, _m: &Memset, _order: Order, _at: Option<&At>) {}

    fn hash(&mut self, h: &BufferHash, at: Option<&At>) {
        self.ledger.hash(h, at);
    }

    fn driver_span(&mut self, d: &DriverSpan) {
        self.ledger.driver_span(d);
    }

    fn own_work(&mut self, w: &accprof_trace::OwnWork) {
        self.ledger.own_work(w);
    }

    fn finish(mut self, info: Process) -> Summary {
        let name = |n: NameId| info.names.get(n.index()).map_or("?", String::as_str);
        let mut facts = self.facts(&info);
        facts.ledger = std::mem::take(&mut self.ledger).ledger(&info);
        // Group the sites into files, functions and lines.
        struct FuncAcc {
            device_type: Option<u32>,
            device_numbers: Vec<u32>,
            time_ns: u64,
            lines: BTreeMap<(Option<u32>, Option<u64>), LineSummary>,
        }
        let mut funcs: BTreeMap<(String, String), FuncAcc> = BTreeMap::new();
        // The slots in order: the sites, then the unattributed work.
        let mut acc = self.acc;
        acc.resize_with(info.sites.len(), SiteAcc::default);
        let slots = info.sites.iter().map(Some).chain([None]);
        let mut site_kernel_ns = vec![0; info.sites.len()];
        let all = slots.zip(acc.into_iter().chain([self.unattributed]));
        for (i, (site, a)) in all.enumerate() {
            if !a.used {
                continue;
            }
            let (file, function, line, address) = if let Some(s) = site {
                let address = match s.line {
                    None => s.address.as_ref().map(|(_, off)| off.saturating_sub(1)),
                    Some(_) => None,
                };
                (s.file.clone(), s.function.clone(), s.line, address)
            } else {
                ("(unattributed)".to_string(), "?".to_string(), None, None)
            };
            let f = funcs.entry((file, function)).or_insert_with(|| FuncAcc {
                device_type: None,
                device_numbers: Vec::new(),
                time_ns: 0,
                lines: BTreeMap::new(),
            });
            let (device_type, device_number) = a.device();
            if f.device_type.is_none() {
                f.device_type = device_type;
            }
            if let Some(n) = device_number {
                if let Err(at) = f.device_numbers.binary_search(&n) {
                    f.device_numbers.insert(at, n);
                }
            }
            f.time_ns = f.time_ns.saturating_add(a.host_ns);
            let mut kernels = a.kernels;
            kernels.sort_by_key(|k| k.first);
            let transfers = a
                .transfers
                .into_iter()
                .map(|mut t| {
                    t.variables.sort_by_key(|(first, _)| *first);
                    t.line.moved = t
                        .variables
                        .iter()
                        .map(|&(_, v)| match v {
                            Ok(v) => Moved::Named(name(v).to_string()),
                            Err(p) => Moved::Buffer(p),
                        })
                        .collect();
                    // The runtime's names until the model names the rest.
                    t.line.name_buffers(|_| None);
                    t.line
                })
                .collect();
            let mut ls = LineSummary {
                line,
                address,
                host_ns: a.host_ns,
                constructs: a.constructs,
                kernels: kernels
                    .into_iter()
                    .map(|k| KernelLine {
                        name: name(k.name).to_string(),
                        grid: kernel_dims(k.grid),
                        block: kernel_dims(k.block),
                        ..k.line
                    })
                    .collect(),
                transfers,
                ..Default::default()
            };
            for r in Reached::ALL {
                let s = a.reached[r as usize];
                if s.count > 0 {
                    ls.reached.insert(r, s);
                }
            }
            for (routine, s) in &a.api_calls {
                ls.api_calls
                    .entry(
                        info.routines
                            .get(routine.0 as usize)
                            .map_or("?", String::as_str)
                            .to_string(),
                    )
                    .or_default()
                    .merge(s);
            }
            if site.is_some() {
                site_kernel_ns[i] = ls.kernel_ns();
            }
            match f.lines.entry((line, address)) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(ls);
                }
                std::collections::btree_map::Entry::Occupied(mut o) => o.get_mut().merge(&ls),
            }
        }
        let functions = funcs
            .into_iter()
            .map(|((file, function), f)| {
                let mut lines: Vec<LineSummary> = f.lines.into_values().collect();
                for l in &mut lines {
                    finish_line(l);
                }
                FunctionSummary {
                    file,
                    function,
                    device_label: device_label(&info, f.device_type).to_string(),
                    device_numbers: if f.device_numbers.is_empty() {
                        vec![0]
                    } else {
                        f.device_numbers
                    },
                    time_ns: f.time_ns,
                    lines,
                }
            })
            .collect();
        let totals = info.totals;
        Summary {
            functions,
            cupti: info.header.sources.cupti.is_active(),
            wall_ns: facts.wall_ns,
            kernel_ns: totals.kernel_ns,
            transfer_ns: totals.transfer_ns,
            transfers: totals.transfers,
            transfer_bytes: totals.transfer_bytes,
            host_construct_ns: totals.host_construct_ns,
            constructs: totals.constructs,
            host_fallback: info.placement.some_on_host(),
            runs: vec![facts],
            site_kernel_ns,
            executable: info
                .modules
                .iter()
                .find(|m| m.path == info.header.executable)
                .or_else(|| info.modules.first())
                .cloned(),
        }
    }
}

impl SummarySink {
    /// The facts of the run: its own, the model's totals, and what was
    /// in flight when it ended.
    fn facts(&self, info: &Process) -> RunFacts {
        let totals = info.totals;
        RunFacts {
            rank: info.header.rank,
            pid: info.header.pid,
            host: info.header.host.clone(),
            command_line: info.header.command_line.clone(),
            runtime: info.header.runtime.clone(),
            sources: info.header.sources.clone(),
            devices: info.devices.clone(),
            dropped: info.dropped.clone(),
            losses: info.losses.clone(),
            notes: info.notes.clone(),
            acc_events: info.acc_events,
            wall_ns: info.span_ns.1.saturating_sub(info.span_ns.0),
            host_construct_ns: totals.host_construct_ns,
            kernel_ns: totals.kernel_ns,
            transfer_ns: totals.transfer_ns,
            version: info.version,
            executable: info.header.executable.clone(),
            start_unix_ns: info.header.start_unix_ns,
            ending: info.ending,
            crash: info.crash.clone(),
            cut_constructs: totals.cut_constructs,
            in_flight: self.in_flight(info),
            errors: info
                .diagnostics
                .iter()
                .filter(|(level, _)| *level == accprof_trace::Level::Error)
                .map(|(_, m)| m.clone())
                .collect(),
            running: false,
            ledger: Default::default(),
            check: info.check,
        }
    }

    /// The construct that was running when the program ended abnormally:
    /// the latest-started of the outermost constructs still open at the
    /// end of the trace.
    fn in_flight(&self, info: &Process) -> Option<InFlight> {
        let abnormal = match info.ending.map(|e| e.how) {
            None => true,
            Some(Ending::Signal(_) | Ending::RuntimeError(_) | Ending::QuickExit(_)) => true,
            // An exit with a failure status while a construct is still
            // open is the runtime's fatal-error path (libgomp's
            // "cuStreamSynchronize error", "present clause" and the like
            // exit from inside it).
            Some(Ending::Exit(Some(status))) => status != 0,
            Some(Ending::Exit(None) | Ending::Exec) => false,
        };
        if !abnormal {
            return None;
        }
        let open = |id: &ConstructId| self.open_at_end.get(id);
        let top: ConstructId = info
            .open_at_end
            .iter()
            .filter_map(|o| open(o).map(|x| x.top))
            .filter_map(|t| open(&t).map(|x| (x.start_ns, t)))
            .max()?
            .1;
        let c = open(&top)?;
        let site = info.sites.get(c.line_site.index())?;
        let inside = info
            .open_at_end
            .iter()
            .rev()
            .filter_map(|o| open(o).map(|x| (o, x)))
            .find(|&(&o, x)| o != top && x.top == top)
            .map(|(_, x)| {
                let label = construct_label(&info.routines, x.class, x.kind, false);
                if x.implicit {
                    format!("its implicit {label}")
                } else {
                    label
                }
            });
        let name = |n: NameId| info.names.get(n.index()).map_or("?", String::as_str);
        let dims = |d: [u32; 3]| {
            kernel_dims(d)
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("x")
        };
        let family = self
            .families
            .iter()
            .find(|(t, _)| *t == top)
            .map(|(_, f)| f);
        let kernel = match family.and_then(|f| f.last_kernel) {
            Some((_, n, grid, block)) => Some(format!(
                "{} grid [{}] block [{}]",
                name(n),
                dims(grid),
                dims(block)
            )),
            None => family.and_then(|f| f.last_launch.as_ref()).map(|(_, l)| {
                let n = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
                format!(
                    "{} with {} gangs, {} workers, vector length {}",
                    l.kernel_name.map_or("(unnamed kernel)", name),
                    n(l.gangs()),
                    n(l.workers()),
                    n(l.vector_length())
                )
            }),
        };
        let transfers = family
            .map(|f| {
                f.last_transfers
                    .iter()
                    .rev()
                    .map(|&(_, kind, bytes, variable)| {
                        let dir = if kind == CopyKind::HostToDevice {
                            "host->device"
                        } else {
                            "device->host"
                        };
                        match variable {
                            Some(v) => {
                                format!("{dir} {} ({})", crate::units::bytes(bytes), name(v))
                            }
                            None => format!("{dir} {}", crate::units::bytes(bytes)),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(InFlight {
            file: site.file.clone(),
            function: site.function.clone(),
            line: site.line,
            what: construct_label(&info.routines, c.class, c.kind, false),
            inside,
            kernel,
            transfers,
        })
    }
}
