//! The summary's rows and the run's facts: what every view of the summary
//! reads. The run carries them; the summary's sink (summary/) fills them
//! in the join's pass, and `summary` re-exports them.

use std::collections::BTreeMap;

use accprof_trace::{
    ConstructKind, CopyKind, Device, DropSource, EndRecord, Ending, Loss, SourceState, Sources,
};

use super::entities::ConstructClass;
use super::entities::SiteId;
use super::ledger_types::Ledger;

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
    pub(crate) const ALL: [Reached; 6] = [
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
    /// The variables moved, in the order of their first transfer, named as
    /// [`crate::Run::variable`] names a transfer.
    pub variables: Vec<String>,
    /// The same in the order met: the runtime's names, and the host
    /// buffers the runtime did not name, for the model to name
    /// ([`TransferLine::name_buffers`]).
    pub(crate) moved: Vec<Moved>,
    /// Transfers per size, largest size first (at most [`MAX_SIZES`]).
    pub sizes: Vec<SizeCount>,
    /// Transfers whose size did not fit in `sizes`.
    pub other_sizes: u64,
}

/// A variable of a transfer line as the summary met it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Moved {
    /// Named by the runtime.
    Named(String),
    /// A host buffer the runtime did not name.
    Buffer(u64),
}

impl TransferLine {
    /// Names the line's variables: the runtime's names, the buffers it did
    /// not name by `buffer_name` (those it cannot name are left out), each
    /// name once.
    pub(crate) fn name_buffers<'a>(&mut self, buffer_name: impl Fn(u64) -> Option<&'a str>) {
        self.variables.clear();
        for m in &self.moved {
            let name = match m {
                Moved::Named(n) => Some(n.as_str()),
                Moved::Buffer(p) => buffer_name(*p),
            };
            if let Some(n) = name {
                if !self.variables.iter().any(|v| v == n) {
                    self.variables.push(n.to_string());
                }
            }
        }
    }

    /// Counts `count` transfers of `bytes`. The largest sizes are kept,
    /// whatever order the transfers come in: a smaller one that was kept
    /// goes to `other_sizes` when a larger one needs its place.
    pub(crate) fn add_size(&mut self, bytes: u64, count: u64) {
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

    pub(crate) fn merge(&mut self, o: &TransferLine) {
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
    /// Device time of the line's kernels (CUPTI's; 0 without it).
    pub fn kernel_ns(&self) -> u64 {
        self.kernels
            .iter()
            .fold(0u64, |acc, k| acc.saturating_add(k.device.total_ns))
    }

    /// Device time of the line's kernels and transfers.
    pub fn device_ns(&self) -> u64 {
        let k = self.kernel_ns();
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

    pub(crate) fn key(&self) -> (Option<u32>, Option<u64>) {
        (self.line, self.address)
    }

    pub(crate) fn merge(&mut self, o: &LineSummary) {
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
    /// Every device the function's constructs ran on (ascending): one
    /// but for a program that changes devices, or ranks merged that ran
    /// on different ones.
    pub device_numbers: Vec<u32>,
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
    /// The fatal signal the collector saw, when the trace holds it.
    pub crash: Option<accprof_trace::Crash>,
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
    /// Where the wall time went (made by the ledger's sink).
    pub ledger: Ledger,
    /// Whether the coherence check ran and what it watched.
    pub check: crate::check::CheckState,
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
        let how = match (self.ending, &self.crash) {
            (Some(e), _) => e.how,
            // The crash was written, the end was not (the process died
            // before the last flush finished).
            (None, Some(c)) => Ending::Signal(c.signal),
            (None, None) => return None,
        };
        if let (Ending::Signal(n), Some(c)) = (how, &self.crash) {
            return Some(self.crash_text(n, c));
        }
        Some(match how {
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

    /// "died of signal 11 (SIGSEGV) at address 0x1000 in the CUDA driver
    /// call cuLaunchKernel, during the compute region (parallel) at
    /// file:line": the signal the process died of (`n`), what the first
    /// fatal signal hit, and the construct in flight.
    fn crash_text(&self, n: i32, c: &accprof_trace::Crash) -> String {
        let mut t = if c.signal == n && c.code <= 0 {
            // Sent by a process (kill, raise, abort), not a fault.
            format!("the program was killed by signal {n} ({})", signal_name(n))
        } else if c.signal == n {
            format!("the program died of signal {n} ({})", signal_name(n))
        } else {
            format!(
                "the program was killed by signal {n} ({}) after signal {} ({})",
                signal_name(n),
                c.signal,
                signal_name(c.signal)
            )
        };
        if let Some(a) = c.address {
            t.push_str(&format!(" at address {a:#x}"));
        }
        if let Some((name, _)) = &c.driver_call {
            t.push_str(&format!(" in the CUDA driver call {name}"));
        }
        if let Some(f) = &self.in_flight {
            let line = f.line.map_or("?".to_string(), |l| l.to_string());
            t.push_str(&format!(", during the {} at {}:{line}", f.what, f.file));
        }
        t
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

pub(crate) fn construct_label(
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
    /// Each line site's share of its line's kernel time, by site
    /// ([`Summary::site_kernel_ns`]); empty in a merged summary.
    pub(crate) site_kernel_ns: Vec<u64>,
    /// The executable's module, to name the buffers the runtime did not
    /// name by its symbols when there is no model to ask
    /// (`summary::summarize_reader`).
    pub(crate) executable: Option<accprof_trace::Module>,
}

impl Summary {
    /// Names the transfer lines' variables: the runtime's names, and the
    /// buffers it did not name by `buffer_name`.
    pub(crate) fn name_buffers<'a>(&mut self, buffer_name: impl Fn(u64) -> Option<&'a str>) {
        for f in &mut self.functions {
            for l in &mut f.lines {
                for t in &mut l.transfers {
                    t.name_buffers(&buffer_name);
                }
            }
        }
    }

    /// Device time of the kernels reported at `site` (a
    /// [`crate::Run::line_site`]): what the site adds to its line's
    /// [`LineSummary::kernel_ns`] (a line gathers the sites that share its
    /// file, function and line). The rules read a site's kernel time here.
    pub fn site_kernel_ns(&self, site: SiteId) -> u64 {
        self.site_kernel_ns.get(site.index()).copied().unwrap_or(0)
    }
}

/// Orders a line's transfers by direction and their sizes largest first.
pub(crate) fn finish_line(l: &mut LineSummary) {
    l.transfers.sort_by_key(|t| t.direction);
    for t in &mut l.transfers {
        t.sizes.sort_by_key(|s| std::cmp::Reverse(s.bytes));
    }
}

/// None for an API routine call: those count by routine name.
pub(crate) fn reached_of(
    class: ConstructClass,
    kind: Option<ConstructKind>,
    nested: bool,
) -> Option<Reached> {
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

pub(crate) fn kernel_entry<'a>(
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

pub(crate) fn transfer_entry(
    transfers: &mut Vec<TransferLine>,
    dir: Option<CopyKind>,
) -> &mut TransferLine {
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
