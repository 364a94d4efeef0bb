//! The aggregates behind the PGI_ACC_TIME-style summary: per source file,
//! function and line, how often each construct was reached, the kernels it
//! launched (per launch shape) and the transfers it made, with time
//! statistics; and, for several traces (MPI ranks), one merged summary with
//! per-rank totals and the imbalance of each line across ranks.
//!
//! Attribution: a kernel or copy belongs to the line of the construct that
//! caused it (a call of an OpenACC API routine such as `acc_copyin` counts
//! as a construct at the line of the call), and each construct counts at
//! the line the model reports it at ([`Run::line_site`]: nested constructs
//! at their top-level construct's line, the exit of a structured `data` or
//! `host_data` region at its entry's).
//!
//! Times: a function's `time(us)` is the host time spent inside its
//! top-level OpenACC constructs (from each construct's start event to its
//! end event; nested constructs are inside their parent and not counted
//! again). Kernel `device time` is CUPTI's start-to-end per launch; kernel
//! `elapsed time` is the host time of the construct that launched it.
//! Transfer times are CUPTI's device times, or without CUPTI the host time
//! of acc_prof's enqueue events.

use std::collections::{BTreeMap, HashMap};

use accprof_trace::{
    ConstructKind, CopyKind, Device, DropSource, EndRecord, Ending, Loss, MemoryKind, SourceState,
    Sources,
};

use crate::idhash::IdHashMap;
use crate::join::{At, Order, Sink};
use crate::model::Process;
use crate::model::{
    ApiRoutine, Construct, ConstructClass, ConstructId, Kernel, KernelSource, LaunchRequest,
    Memset, NameId, SiteId, Transfer, TransferSource, ACC_DEVICE_HOST,
};

/// Count, total, min and max of a set of durations, in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub count: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

impl Stats {
    #[inline]
    pub fn add(&mut self, ns: u64) {
        if self.count == 0 {
            self.min_ns = ns;
            self.max_ns = ns;
        } else {
            self.min_ns = self.min_ns.min(ns);
            self.max_ns = self.max_ns.max(ns);
        }
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(ns);
    }

    pub fn merge(&mut self, other: &Stats) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        self.count += other.count;
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn avg_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// What a line's construct entry is called in the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reached {
    ComputeRegion,
    DataRegion,
    EnterData,
    ExitData,
    Update,
    Wait,
}

impl Reached {
    const ALL: [Reached; 6] = [
        Reached::ComputeRegion,
        Reached::DataRegion,
        Reached::EnterData,
        Reached::ExitData,
        Reached::Update,
        Reached::Wait,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Reached::ComputeRegion => "compute region",
            Reached::DataRegion => "data region",
            Reached::EnterData => "enter data directive",
            Reached::ExitData => "exit data directive",
            Reached::Update => "update directive",
            Reached::Wait => "wait directive",
        }
    }
}

/// Kernels of one line with one launch shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelLine {
    pub name: String,
    pub grid: Vec<u32>,
    pub block: Vec<u32>,
    /// Device time per launch (CUPTI); count 0 when CUPTI was off.
    pub device: Stats,
    /// Host time of each compute construct that launched it.
    pub elapsed: Stats,
    pub launches: u64,
    pub registers: u32,
    pub shared_bytes: u32,
    pub local_bytes_per_thread: u32,
}

/// How many transfers of one line had one size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SizeCount {
    pub bytes: u64,
    pub count: u64,
}

/// Distinct sizes kept per transfer line (the largest); the rest are only
/// counted.
pub const MAX_SIZES: usize = 16;

/// Transfers of one line in one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferLine {
    pub direction: Option<CopyKind>,
    pub count: u64,
    pub bytes: u64,
    /// Device time (CUPTI) or, without CUPTI, host time of the enqueue.
    pub time: Stats,
    pub device_timed: bool,
    pub pageable: u64,
    pub pinned: u64,
    pub variables: Vec<String>,
    /// Transfers per size, largest size first (at most [`MAX_SIZES`]).
    pub sizes: Vec<SizeCount>,
    /// Transfers whose size did not fit in `sizes`.
    pub other_sizes: u64,
}

impl TransferLine {
    /// Counts `count` transfers of `bytes`. The largest sizes are kept,
    /// whatever order the transfers come in: a smaller one that was kept
    /// goes to `other_sizes` when a larger one needs its place.
    fn add_size(&mut self, bytes: u64, count: u64) {
        if let Some(s) = self.sizes.iter_mut().find(|s| s.bytes == bytes) {
            s.count += count;
            return;
        }
        if self.sizes.len() < MAX_SIZES {
            self.sizes.push(SizeCount { bytes, count });
            return;
        }
        let smallest = self
            .sizes
            .iter_mut()
            .min_by_key(|s| s.bytes)
            .filter(|s| s.bytes < bytes);
        match smallest {
            Some(s) => {
                self.other_sizes += s.count;
                *s = SizeCount { bytes, count };
            }
            None => self.other_sizes += count,
        }
    }

    /// How many transfers moved exactly `bytes` bytes.
    pub fn count_of_size(&self, bytes: u64) -> u64 {
        self.sizes
            .iter()
            .filter(|s| s.bytes == bytes)
            .map(|s| s.count)
            .sum()
    }

    fn merge(&mut self, o: &TransferLine) {
        self.count += o.count;
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.time.merge(&o.time);
        self.device_timed |= o.device_timed;
        self.pageable += o.pageable;
        self.pinned += o.pinned;
        for v in &o.variables {
            if !self.variables.contains(v) {
                self.variables.push(v.clone());
            }
        }
        for s in &o.sizes {
            self.add_size(s.bytes, s.count);
        }
        self.other_sizes += o.other_sizes;
    }
}

/// Everything attributed to one source line.
#[derive(Debug, Clone, Default)]
pub struct LineSummary {
    pub line: Option<u32>,
    /// How often each kind of construct was reached here.
    pub reached: BTreeMap<Reached, Stats>,
    /// How often each OpenACC API routine was called here (host time of
    /// each call), by routine name.
    pub api_calls: BTreeMap<String, Stats>,
    pub kernels: Vec<KernelLine>,
    pub transfers: Vec<TransferLine>,
    /// Call address in the module (return address - 1) when there is no
    /// line: sites without line information stay apart.
    pub address: Option<u64>,
    /// Host time of the top-level constructs at this line.
    pub host_ns: u64,
    /// Top-level constructs reached at this line (API routine calls
    /// included), counted as the run's total counts them: a construct's
    /// implicit data regions count with it.
    pub constructs: u64,
}

impl LineSummary {
    /// Device time of the line's kernels and transfers.
    pub fn device_ns(&self) -> u64 {
        let k: u64 = self
            .kernels
            .iter()
            .fold(0u64, |acc, k| acc.saturating_add(k.device.total_ns));
        let t: u64 = self
            .transfers
            .iter()
            .filter(|t| t.device_timed)
            .fold(0u64, |acc, t| acc.saturating_add(t.time.total_ns));
        k.saturating_add(t)
    }

    /// What the line costs, to rank lines: its device time, or its host
    /// time when nothing was timed on the device (no CUPTI).
    pub fn cost_ns(&self) -> u64 {
        match self.device_ns() {
            0 => self.host_ns,
            d => d,
        }
    }

    fn key(&self) -> (Option<u32>, Option<u64>) {
        (self.line, self.address)
    }

    fn merge(&mut self, o: &LineSummary) {
        for (k, s) in &o.reached {
            self.reached.entry(*k).or_default().merge(s);
        }
        for (k, s) in &o.api_calls {
            self.api_calls.entry(k.clone()).or_default().merge(s);
        }
        for k in &o.kernels {
            let e = kernel_entry(&mut self.kernels, &k.name, &k.grid, &k.block);
            e.device.merge(&k.device);
            e.elapsed.merge(&k.elapsed);
            e.launches += k.launches;
            e.registers = e.registers.max(k.registers);
            e.shared_bytes = e.shared_bytes.max(k.shared_bytes);
            e.local_bytes_per_thread = e.local_bytes_per_thread.max(k.local_bytes_per_thread);
        }
        for t in &o.transfers {
            transfer_entry(&mut self.transfers, t.direction).merge(t);
        }
        self.host_ns = self.host_ns.saturating_add(o.host_ns);
        self.constructs = self.constructs.saturating_add(o.constructs);
    }
}

#[derive(Debug, Clone, Default)]
pub struct FunctionSummary {
    pub file: String,
    pub function: String,
    pub device_label: String,
    pub device_number: u32,
    /// Host time inside this function's top-level OpenACC constructs.
    pub time_ns: u64,
    pub lines: Vec<LineSummary>,
}

/// What a summary needs to know about the run(s) it describes, besides the
/// aggregates: identity, data sources, devices and what was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFacts {
    pub rank: Option<u32>,
    pub pid: u32,
    pub host: String,
    pub command_line: Vec<String>,
    pub runtime: String,
    pub sources: Sources,
    pub devices: Vec<Device>,
    pub dropped: Vec<(DropSource, u64)>,
    pub losses: Vec<Loss>,
    pub notes: Vec<String>,
    pub acc_events: u64,
    pub wall_ns: u64,
    pub host_construct_ns: u64,
    pub kernel_ns: u64,
    pub transfer_ns: u64,
    /// Trace format version (major, minor).
    pub version: (u16, u16),
    pub executable: String,
    /// Wall-clock start, ns since the Unix epoch (with host and pid, it
    /// tells one process's trace from another's).
    pub start_unix_ns: u64,
    /// How the process ended, when the trace says.
    pub ending: Option<EndRecord>,
    /// Constructs whose end event never came.
    pub cut_constructs: u64,
    /// The construct running when the program died, when it died inside one.
    pub in_flight: Option<InFlight>,
    /// Errors the collector recorded (a failed driver call, a broken
    /// device context), in the order they happened.
    pub errors: Vec<String>,
    /// The process was still running when the trace was read, so the
    /// trace ends where reading stopped, not where the program did. The
    /// trace cannot say; whoever reads it on the process's host sets it
    /// (always false here).
    pub running: bool,
}

/// The construct that was running when the program ended abnormally (by
/// a signal, a fatal runtime error, `_exit`, or with the trace cut off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    pub file: String,
    pub function: String,
    pub line: Option<u32>,
    /// What it is: "compute region (parallel)", "update directive", ...
    pub what: String,
    /// The innermost construct open inside it, when that is another one
    /// (the implicit data part of a compute construct).
    pub inside: Option<String>,
    /// Its last kernel: name and launch shape, when it launched one.
    pub kernel: Option<String>,
    /// Its last host<->device transfers, oldest first (at most 3).
    pub transfers: Vec<String>,
}

impl RunFacts {
    /// How the process ended, in words; None for a plain exit with status 0
    /// (or one whose status was not seen).
    pub fn ending_text(&self) -> Option<String> {
        Some(match self.ending?.how {
            Ending::Exit(Some(0)) | Ending::Exit(None) => return None,
            Ending::Exit(Some(c)) => format!("the program exited with status {c}"),
            Ending::QuickExit(c) => {
                format!("the program ended with _exit({c}): atexit handlers did not run")
            }
            Ending::Signal(n) => {
                format!("the program was killed by signal {n} ({})", signal_name(n))
            }
            Ending::Exec => {
                "the program replaced itself with another (exec); its trace ends there".to_string()
            }
            Ending::RuntimeError(c) => {
                format!("the program stopped on a fatal OpenACC runtime or CUDA error (code {c})")
            }
        })
    }

    /// Whether the trace says nothing of how the process ended although its
    /// format can (1.1 on): the trace may have been cut.
    pub fn no_end_record(&self) -> bool {
        self.ending.is_none() && self.version >= (1, 1)
    }

    /// Why no OpenACC events were recorded, when the header says.
    pub fn no_acc_reason(&self) -> Option<&str> {
        match &self.sources.acc_prof {
            SourceState::Inactive(why) => Some(why),
            SourceState::Active => None,
        }
    }
}

/// The usual name of a Linux signal number ("SIGSEGV"), or "unknown signal".
pub fn signal_name(n: i32) -> &'static str {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match usize::try_from(n).ok().and_then(|i| NAMES.get(i)) {
        Some(name) if !name.is_empty() => name,
        _ if (34..=64).contains(&n) => "a real-time signal",
        _ => "unknown signal",
    }
}

fn construct_label(
    routines: &[String],
    class: ConstructClass,
    kind: Option<ConstructKind>,
    nested: bool,
) -> String {
    let Some(reached) = reached_of(class, kind, nested) else {
        return match class {
            ConstructClass::ApiCall(r) => format!(
                "call of {}",
                routines.get(r.0 as usize).map_or("?", String::as_str)
            ),
            _ => "construct".to_string(),
        };
    };
    let what = reached.label();
    match kind {
        Some(k) if class == ConstructClass::Compute => {
            format!("{what} ({})", format!("{k:?}").to_lowercase())
        }
        _ => what.to_string(),
    }
}

#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub functions: Vec<FunctionSummary>,
    /// CUPTI recorded device times (in every run, for a merged summary).
    pub cupti: bool,
    /// Wall time the trace covers (the longest run's, merged).
    pub wall_ns: u64,
    pub kernel_ns: u64,
    pub transfer_ns: u64,
    /// Host<->device transfers (the ones `transfer_ns` times) and their bytes.
    pub transfers: u64,
    pub transfer_bytes: u64,
    pub host_construct_ns: u64,
    /// Top-level OpenACC constructs reached (nested ones count with their parent).
    pub constructs: u64,
    /// Some construct ran on the host (OpenACC host fallback, device type 2).
    pub host_fallback: bool,
    /// The run this summarizes, or every run merged into it, in input order.
    pub runs: Vec<RunFacts>,
}

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

/// None for an API routine call: those count by routine name.
fn reached_of(class: ConstructClass, kind: Option<ConstructKind>, nested: bool) -> Option<Reached> {
    Some(match class {
        ConstructClass::Compute => Reached::ComputeRegion,
        ConstructClass::Update => Reached::Update,
        ConstructClass::Wait => Reached::Wait,
        ConstructClass::EnterData if !nested && kind == Some(ConstructKind::EnterData) => {
            Reached::EnterData
        }
        ConstructClass::ExitData if !nested && kind == Some(ConstructKind::ExitData) => {
            Reached::ExitData
        }
        ConstructClass::EnterData | ConstructClass::ExitData => Reached::DataRegion,
        ConstructClass::ApiCall(_) => return None,
    })
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
    /// Variables with the first transfer of each, in the run's order.
    variables: Vec<(Order, NameId)>,
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
        c: Construct,
        launches: &[LaunchRequest],
        at: &At,
        open_at_end: bool,
    ) {
        if let Some(f) = family_mut(&mut self.families, at.top) {
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

    fn kernel(&mut self, k: Kernel, order: Order, at: Option<&At>) {
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

    fn transfer(&mut self, cp: Transfer, order: Order, at: Option<&At>) {
        if !cp.is_host_device() {
            return;
        }
        if let Some(f) = at.and_then(|at| family_mut(&mut self.families, at.top)) {
            f.last_transfers
                .push((order, cp.kind, cp.bytes, cp.variable));
            f.last_transfers.sort_by_key(|x| std::cmp::Reverse(x.0));
            f.last_transfers.truncate(3);
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
        if let Some(v) = cp.variable {
            match acc.variables.iter_mut().find(|(_, x)| *x == v) {
                Some((first, _)) => *first = (*first).min(order),
                None => acc.variables.push((order, v)),
            }
        }
    }

    fn memset(&mut self, _m: Memset, _order: Order, _at: Option<&At>) {}

    fn finish(self, info: Process) -> Summary {
        let name = |n: NameId| info.names.get(n.index()).map_or("?", String::as_str);
        let facts = self.facts(&info);
        // Group the sites into files, functions and lines.
        struct FuncAcc {
            device_type: Option<u32>,
            device_number: Option<u32>,
            time_ns: u64,
            lines: BTreeMap<(Option<u32>, Option<u64>), LineSummary>,
        }
        let mut funcs: BTreeMap<(String, String), FuncAcc> = BTreeMap::new();
        // The slots in order: the sites, then the unattributed work.
        let mut acc = self.acc;
        acc.resize_with(info.sites.len(), SiteAcc::default);
        let slots = info.sites.iter().map(Some).chain([None]);
        for (site, a) in slots.zip(acc.into_iter().chain([self.unattributed])) {
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
                device_number: None,
                time_ns: 0,
                lines: BTreeMap::new(),
            });
            let (device_type, device_number) = a.device();
            if f.device_type.is_none() {
                f.device_type = device_type;
                f.device_number = device_number;
            }
            f.time_ns = f.time_ns.saturating_add(a.host_ns);
            let mut kernels = a.kernels;
            kernels.sort_by_key(|k| k.first);
            let transfers = a
                .transfers
                .into_iter()
                .map(|mut t| {
                    t.variables.sort_by_key(|(first, _)| *first);
                    t.line.variables = t
                        .variables
                        .iter()
                        .map(|&(_, v)| name(v).to_string())
                        .collect();
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
                    device_number: f.device_number.unwrap_or(0),
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
            cut_constructs: totals.cut_constructs,
            in_flight: self.in_flight(info),
            errors: info
                .diagnostics
                .iter()
                .filter(|(level, _)| *level == accprof_trace::Level::Error)
                .map(|(_, m)| m.clone())
                .collect(),
            running: false,
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

/// Reads a trace and summarizes it without building the model: memory
/// follows the distinct lines and launch shapes and what is in flight,
/// not the number of events.
pub fn summarize_reader(
    reader: impl accprof_trace::RecordSource,
    symbolizer: &mut crate::symbolize::Symbolizer,
) -> Summary {
    crate::join::join_reader(reader, symbolizer, SummarySink::new())
}

/// Orders a line's transfers by direction and their sizes largest first.
fn finish_line(l: &mut LineSummary) {
    l.transfers.sort_by_key(|t| t.direction);
    for t in &mut l.transfers {
        t.sizes.sort_by_key(|s| std::cmp::Reverse(s.bytes));
    }
}

fn kernel_entry<'a>(
    kernels: &'a mut Vec<KernelLine>,
    name: &str,
    grid: &[u32],
    block: &[u32],
) -> &'a mut KernelLine {
    let pos = kernels
        .iter()
        .position(|k| k.grid == grid && k.block == block && k.name == name);
    match pos {
        Some(i) => &mut kernels[i],
        None => {
            kernels.push(KernelLine {
                name: name.to_string(),
                grid: grid.to_vec(),
                block: block.to_vec(),
                ..Default::default()
            });
            let last = kernels.len() - 1;
            &mut kernels[last]
        }
    }
}

fn transfer_entry(transfers: &mut Vec<TransferLine>, dir: Option<CopyKind>) -> &mut TransferLine {
    match transfers.iter().position(|t| t.direction == dir) {
        Some(i) => &mut transfers[i],
        None => {
            transfers.push(TransferLine {
                direction: dir,
                ..Default::default()
            });
            let last = transfers.len() - 1;
            &mut transfers[last]
        }
    }
}

/// One rank's totals in a merged summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankRow {
    /// The rank the launcher gave (trace header), else the trace's position
    /// among the inputs.
    pub rank: u32,
    /// False when `rank` is the input position (the header had none).
    pub rank_known: bool,
    pub pid: u32,
    pub host: String,
    pub wall_ns: u64,
    pub host_construct_ns: u64,
    pub kernel_ns: u64,
    pub transfer_ns: u64,
}

/// How unevenly one source line's time is spread over the ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct LineImbalance {
    pub file: String,
    pub function: String,
    pub line: Option<u32>,
    pub address: Option<u64>,
    /// The line's cost ([`LineSummary::cost_ns`]) on the rank where it is largest.
    pub max_ns: u64,
    pub max_rank: u32,
    /// Mean over all ranks (a rank that never reached the line counts 0).
    pub mean_ns: u64,
    /// max / mean (1.0 = perfectly even).
    pub ratio: f64,
}

/// Several runs (MPI ranks) summarized together.
#[derive(Debug, Clone, Default)]
pub struct MergedSummary {
    /// Every line's statistics over all ranks, in the one-run layout.
    pub merged: Summary,
    /// One row per input, ordered by rank.
    pub ranks: Vec<RankRow>,
    /// Lines by imbalance: largest `max - mean` (the time the other ranks
    /// would wait for the slowest one) first; lines with no spread left out.
    pub imbalance: Vec<LineImbalance>,
}

/// Merges the summaries of several runs given in input order.
pub fn merge(summaries: &[Summary]) -> MergedSummary {
    let mut ranks = Vec::with_capacity(summaries.len());
    // Rank of each summary, and each line's cost per rank.
    type LineKey = (String, String, Option<u32>, Option<u64>);
    let mut costs: HashMap<LineKey, Vec<u64>> = HashMap::new();
    let mut funcs: BTreeMap<(String, String), FunctionSummary> = BTreeMap::new();
    let mut merged = Summary {
        cupti: !summaries.is_empty(),
        ..Default::default()
    };
    for (i, s) in summaries.iter().enumerate() {
        let facts = s.runs.first();
        let rank = facts.and_then(|f| f.rank);
        ranks.push(RankRow {
            rank: rank.unwrap_or(i as u32),
            rank_known: rank.is_some(),
            pid: facts.map_or(0, |f| f.pid),
            host: facts.map(|f| f.host.clone()).unwrap_or_default(),
            wall_ns: s.wall_ns,
            host_construct_ns: s.host_construct_ns,
            kernel_ns: s.kernel_ns,
            transfer_ns: s.transfer_ns,
        });
        merged.cupti &= s.cupti;
        merged.wall_ns = merged.wall_ns.max(s.wall_ns);
        merged.kernel_ns = merged.kernel_ns.saturating_add(s.kernel_ns);
        merged.transfer_ns = merged.transfer_ns.saturating_add(s.transfer_ns);
        merged.transfers = merged.transfers.saturating_add(s.transfers);
        merged.transfer_bytes = merged.transfer_bytes.saturating_add(s.transfer_bytes);
        merged.constructs = merged.constructs.saturating_add(s.constructs);
        merged.host_fallback |= s.host_fallback;
        merged.host_construct_ns = merged.host_construct_ns.saturating_add(s.host_construct_ns);
        merged.runs.extend(s.runs.iter().cloned());
        for f in &s.functions {
            let m = funcs
                .entry((f.file.clone(), f.function.clone()))
                .or_insert_with(|| FunctionSummary {
                    file: f.file.clone(),
                    function: f.function.clone(),
                    device_label: f.device_label.clone(),
                    device_number: f.device_number,
                    ..Default::default()
                });
            m.time_ns = m.time_ns.saturating_add(f.time_ns);
            for l in &f.lines {
                match m.lines.iter_mut().find(|x| x.key() == l.key()) {
                    Some(x) => x.merge(l),
                    None => m.lines.push(l.clone()),
                }
                let per_rank = costs
                    .entry((f.file.clone(), f.function.clone(), l.line, l.address))
                    .or_insert_with(|| vec![0; summaries.len()]);
                per_rank[i] = per_rank[i].saturating_add(l.cost_ns());
            }
        }
    }
    merged.functions = funcs
        .into_values()
        .map(|mut f| {
            f.lines.sort_by_key(|l| l.key());
            for l in &mut f.lines {
                finish_line(l);
            }
            f
        })
        .collect();
    let mut imbalance: Vec<LineImbalance> = costs
        .into_iter()
        .filter_map(|((file, function, line, address), per_rank)| {
            let n = per_rank.len() as u64;
            let total: u64 = per_rank.iter().fold(0u64, |a, v| a.saturating_add(*v));
            let (max_i, &max_ns) = per_rank
                .iter()
                .enumerate()
                .max_by_key(|(i, v)| (**v, std::cmp::Reverse(*i)))?;
            let mean_ns = total / n.max(1);
            if max_ns == 0 || max_ns <= mean_ns {
                return None;
            }
            Some(LineImbalance {
                file,
                function,
                line,
                address,
                max_ns,
                max_rank: ranks[max_i].rank,
                mean_ns,
                ratio: max_ns as f64 * n as f64 / total as f64,
            })
        })
        .collect();
    imbalance.sort_by(|a, b| {
        (b.max_ns - b.mean_ns)
            .cmp(&(a.max_ns - a.mean_ns))
            .then_with(|| (&a.file, &a.function, a.line).cmp(&(&b.file, &b.function, b.line)))
    });
    ranks.sort_by_key(|r| r.rank);
    MergedSummary {
        merged,
        ranks,
        imbalance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_transfers_give_their_sizes_as_every_view_does() {
        use crate::testkit::runs::RunBuilder;
        let mut b = RunBuilder::new(accprof_trace::HashMode::Off);
        let site = b.site("app.c", 20);
        let c = b.open(ConstructClass::Compute, site, None);
        let small = b.buf(88, 1);
        let big = b.buf(8_421_408, 2);
        b.copy(c, CopyKind::HostToDevice, small, 1_000);
        b.copy(c, CopyKind::DeviceToHost, big, 2_000);
        b.run.process.open_at_end.push(c);
        let run = b.build();
        let f = run.in_flight().expect("a construct in flight");
        assert_eq!(
            f.transfers,
            ["host->device 88 B", "device->host 8.03 MiB"],
            "{f:?}"
        );
    }

    #[test]
    fn stats_merge_and_average() {
        let mut a = Stats::default();
        a.add(10);
        a.add(30);
        let mut b = Stats::default();
        b.add(5);
        a.merge(&b);
        assert_eq!(
            (a.count, a.total_ns, a.min_ns, a.max_ns, a.avg_ns()),
            (3, 45, 5, 30, 15)
        );
        let mut empty = Stats::default();
        empty.merge(&a);
        assert_eq!(empty, a);
        assert_eq!(Stats::default().avg_ns(), 0);
    }

    #[test]
    fn sizes_are_counted_then_the_largest_kept_in_any_order() {
        let sizes: Vec<u64> = (0..(MAX_SIZES as u64 + 3)).map(|i| 100 + i).collect();
        for order in [sizes.clone(), sizes.iter().rev().copied().collect()] {
            let mut t = TransferLine::default();
            for &b in &order {
                t.add_size(b, 2);
            }
            t.add_size(118, 1);
            t.add_size(100, 1);
            assert_eq!(t.count_of_size(118), 3);
            assert_eq!(t.count_of_size(100), 0);
            assert_eq!(t.sizes.len(), MAX_SIZES);
            assert_eq!(t.sizes.iter().map(|s| s.bytes).min(), Some(103));
            // 100, 101 and 102 twice each, and 100 once more.
            assert_eq!(t.other_sizes, 7);
        }
    }
}
