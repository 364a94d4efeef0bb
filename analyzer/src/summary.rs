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

use crate::model::{
    ApiRoutine, ConstructClass, ConstructId, KernelSource, Run, TransferId, TransferSource,
    ACC_DEVICE_HOST,
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

/// Distinct sizes kept per transfer line; the rest are only counted.
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
    fn add_size(&mut self, bytes: u64, count: u64) {
        if let Some(s) = self.sizes.iter_mut().find(|s| s.bytes == bytes) {
            s.count += count;
        } else if self.sizes.len() < MAX_SIZES {
            self.sizes.push(SizeCount { bytes, count });
        } else {
            self.other_sizes += count;
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
    run: &Run,
    class: ConstructClass,
    kind: Option<ConstructKind>,
    nested: bool,
) -> String {
    let Some(reached) = reached_of(class, kind, nested) else {
        return match class {
            ConstructClass::ApiCall(r) => format!("call of {}", run.routine(r)),
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

/// The construct that was running when the program ended abnormally: the
/// latest-started of the outermost constructs still open at the end of the
/// trace. None when the program ended normally or nothing was open.
pub fn in_flight(run: &Run) -> Option<InFlight> {
    let abnormal = match run.ending.map(|e| e.how) {
        None => true,
        Some(Ending::Signal(_) | Ending::RuntimeError(_) | Ending::QuickExit(_)) => true,
        // An exit with a failure status while a construct is still open
        // is the runtime's fatal-error path (libgomp's "cuStreamSynchronize
        // error", "present clause" and the like exit from inside it).
        Some(Ending::Exit(Some(status))) => status != 0,
        Some(Ending::Exit(None) | Ending::Exec) => false,
    };
    if !abnormal {
        return None;
    }
    let top: ConstructId = run
        .open_at_end
        .iter()
        .map(|&c| run.top_level(c))
        .max_by_key(|&c| (run.construct(c).start_ns, c))?;
    let c = run.construct(top);
    let site = run.site(run.line_site(top));
    let inside = run
        .open_at_end
        .iter()
        .rev()
        .find(|&&o| o != top && run.top_level(o) == top)
        .map(|&o| {
            let x = run.construct(o);
            let label = construct_label(run, x.class, x.kind, false);
            if x.implicit {
                format!("its implicit {label}")
            } else {
                label
            }
        });
    // The constructs of the outermost one: itself and those nested in it.
    let family: Vec<ConstructId> = run
        .constructs()
        .filter(|&(id, _)| run.top_level(id) == top)
        .map(|(id, _)| id)
        .collect();
    // Handles order as the run does: the latest kernel is the largest.
    let last_kernel = family
        .iter()
        .flat_map(|&c| run.kernels_of(c))
        .filter(|&&k| run.kernel(k).device_timed())
        .max();
    let kernel = match last_kernel.map(|&k| run.kernel(k)) {
        Some(k) => Some(format!(
            "{} grid [{}] block [{}]",
            k.name,
            kernel_dims(k.grid)
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("x"),
            kernel_dims(k.block)
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("x")
        )),
        None => family
            .iter()
            .flat_map(|&c| run.construct(c).launches.iter())
            .max_by_key(|l| l.start_ns)
            .map(|l| {
                let n = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
                format!(
                    "{} with {} gangs, {} workers, vector length {}",
                    l.kernel_name.as_deref().unwrap_or("(unnamed kernel)"),
                    n(l.gangs),
                    n(l.workers),
                    n(l.vector_length)
                )
            }),
    };
    let mut family_transfers: Vec<TransferId> = family
        .iter()
        .flat_map(|&c| run.transfers_of(c))
        .copied()
        .collect();
    family_transfers.sort_unstable();
    let mut transfers: Vec<String> = family_transfers
        .iter()
        .rev()
        .map(|&t| run.transfer(t))
        .filter(|x| matches!(x.kind, CopyKind::HostToDevice | CopyKind::DeviceToHost))
        .take(3)
        .map(|x| {
            let dir = if x.kind == CopyKind::HostToDevice {
                "host->device"
            } else {
                "device->host"
            };
            match &x.variable {
                Some(v) => format!("{dir} {} ({v})", crate::units::bytes(x.bytes)),
                None => format!("{dir} {}", crate::units::bytes(x.bytes)),
            }
        })
        .collect();
    transfers.reverse();
    Some(InFlight {
        file: site.file.clone(),
        function: site.function.clone(),
        line: site.line,
        what: construct_label(run, c.class, c.kind, false),
        inside,
        kernel,
        transfers,
    })
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

fn device_label(run: &Run, device_type: Option<u32>) -> &'static str {
    let gcc = run.runtime_is_libgomp();
    match device_type {
        Some(ACC_DEVICE_HOST) => "HOST",
        Some(5) if gcc => "NVIDIA",
        Some(4) if !gcc => "NVIDIA",
        _ if run.cupti_active() => "NVIDIA",
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

/// Aggregates of one site while summarizing.
#[derive(Default)]
struct SiteAcc {
    used: bool,
    reached: [Stats; 6],
    api_calls: Vec<(ApiRoutine, Stats)>,
    kernels: Vec<KernelLine>,
    transfers: Vec<TransferLine>,
    host_ns: u64,
    device_type: Option<u32>,
    device_number: Option<u32>,
}

fn kernel_dims(d: [u32; 3]) -> Vec<u32> {
    let mut v = d.to_vec();
    while v.len() > 1 && v.last() == Some(&1) {
        v.pop();
    }
    v
}

/// Builds the summary of one run.
pub fn summarize(run: &Run) -> Summary {
    // One slot per site, and a last one for work no construct claims.
    let unattributed = run.sites().len();
    let mut acc: Vec<SiteAcc> = Vec::with_capacity(unattributed + 1);
    acc.resize_with(unattributed + 1, SiteAcc::default);
    let cupti = run.cupti_active();
    let mut host_construct_ns = 0;
    for (id, c) in run.constructs() {
        let a = &mut acc[run.line_site(id).index()];
        a.used = true;
        if a.device_type.is_none() {
            a.device_type = c.device_type;
            a.device_number = c.device;
        }
        let host = c.host_ns().unwrap_or(0);
        match reached_of(c.class, c.kind, c.parent.is_some()) {
            // What the runtime reports inside an API routine is the call's.
            Some(_)
                if c.parent.is_some()
                    && matches!(
                        run.construct(run.top_level(id)).class,
                        ConstructClass::ApiCall(_)
                    ) => {}
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
        if c.parent.is_none() {
            a.host_ns = a.host_ns.saturating_add(host);
            host_construct_ns = u64::saturating_add(host_construct_ns, host);
        }
    }
    for (_, k) in run.kernels() {
        let slot = k
            .construct
            .map_or(unattributed, |c| run.line_site(c).index());
        let a = &mut acc[slot];
        a.used = true;
        let entry = kernel_entry(
            &mut a.kernels,
            &k.name,
            &kernel_dims(k.grid),
            &kernel_dims(k.block),
        );
        entry.launches += 1;
        entry.registers = entry.registers.max(k.registers);
        entry.shared_bytes = entry.shared_bytes.max(k.shared_bytes);
        entry.local_bytes_per_thread = entry.local_bytes_per_thread.max(k.local_bytes_per_thread);
        match (k.source, k.construct) {
            (KernelSource::Cupti, c) => {
                entry.device.add(k.device_ns());
                if let Some(h) = c.and_then(|c| run.construct(run.top_level(c)).host_ns()) {
                    entry.elapsed.add(h);
                }
            }
            // A launch event: its compute construct's host time, no device time.
            (KernelSource::AccProf, Some(c)) => {
                entry.elapsed.add(run.construct(c).host_ns().unwrap_or(0));
            }
            (KernelSource::AccProf, None) => {}
        }
    }
    for (_, cp) in run.transfers() {
        if !cp.is_host_device() {
            continue;
        }
        let slot = cp
            .construct
            .map_or(unattributed, |c| run.line_site(c).index());
        let a = &mut acc[slot];
        a.used = true;
        let t = transfer_entry(&mut a.transfers, Some(cp.kind));
        t.count += 1;
        t.bytes = t.bytes.saturating_add(cp.bytes);
        t.time.add(cp.duration_ns());
        t.device_timed = cp.source == TransferSource::Cupti;
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
        if let Some(v) = &cp.variable {
            if !t.variables.contains(v) {
                t.variables.push(v.clone());
            }
        }
    }
    let totals = run.totals();

    // Group the sites into files, functions and lines.
    struct FuncAcc {
        device_type: Option<u32>,
        device_number: Option<u32>,
        time_ns: u64,
        lines: BTreeMap<(Option<u32>, Option<u64>), LineSummary>,
    }
    let mut funcs: BTreeMap<(String, String), FuncAcc> = BTreeMap::new();
    // The slots in order: the sites, then the unattributed work.
    let slots = run.sites().map(|(_, s)| Some(s)).chain([None]);
    for (site, a) in slots.zip(acc) {
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
        if f.device_type.is_none() {
            f.device_type = a.device_type;
            f.device_number = a.device_number;
        }
        f.time_ns = f.time_ns.saturating_add(a.host_ns);
        let mut ls = LineSummary {
            line,
            address,
            host_ns: a.host_ns,
            kernels: a.kernels,
            transfers: a.transfers,
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
                .entry(run.routine(*routine).to_string())
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
                device_label: device_label(run, f.device_type).to_string(),
                device_number: f.device_number.unwrap_or(0),
                time_ns: f.time_ns,
                lines,
            }
        })
        .collect();
    let facts = RunFacts {
        rank: run.header.rank,
        pid: run.header.pid,
        host: run.header.host.clone(),
        command_line: run.header.command_line.clone(),
        runtime: run.header.runtime.clone(),
        sources: run.header.sources.clone(),
        devices: run.devices.clone(),
        dropped: run.dropped.clone(),
        losses: run.losses.clone(),
        notes: run.notes.clone(),
        acc_events: run.acc_events,
        wall_ns: run.wall_ns(),
        host_construct_ns,
        kernel_ns: totals.kernel_ns,
        transfer_ns: totals.transfer_ns,
        version: run.version,
        executable: run.header.executable.clone(),
        start_unix_ns: run.header.start_unix_ns,
        ending: run.ending,
        cut_constructs: run.constructs().map(|(_, x)| x).filter(|c| c.cut).count() as u64,
        in_flight: in_flight(run),
        errors: run
            .diagnostics
            .iter()
            .filter(|(level, _)| *level == accprof_trace::Level::Error)
            .map(|(_, m)| m.clone())
            .collect(),
    };
    Summary {
        functions,
        cupti,
        wall_ns: run.wall_ns(),
        kernel_ns: totals.kernel_ns,
        transfer_ns: totals.transfer_ns,
        transfers: totals.transfers,
        transfer_bytes: totals.transfer_bytes,
        host_construct_ns,
        constructs: run
            .constructs()
            .map(|(_, x)| x)
            .filter(|c| c.parent.is_none())
            .count() as u64,
        host_fallback: run.ran_on_host(),
        runs: vec![facts],
    }
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
        let mut run = b.build();
        run.open_at_end.push(c);
        let f = in_flight(&run).expect("a construct in flight");
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
    fn sizes_are_counted_then_capped() {
        let mut t = TransferLine::default();
        for i in 0..(MAX_SIZES as u64 + 3) {
            t.add_size(100 + i, 2);
        }
        t.add_size(100, 1);
        assert_eq!(t.count_of_size(100), 3);
        assert_eq!(t.sizes.len(), MAX_SIZES);
        assert_eq!(t.other_sizes, 6);
    }
}
