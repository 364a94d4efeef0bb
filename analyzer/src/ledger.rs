//! Where the wall time went: a ledger that partitions each host thread's
//! wall time, with no time counted twice, into the program's own host
//! code, MPI calls, the collector's own work, and, inside OpenACC
//! constructs, what the runtime did there as the CUDA driver timed it
//! (allocation and free, transfers, launches, waiting for the device,
//! start-up, other driver calls) and the rest: the runtime's own
//! bookkeeping between driver calls.
//!
//! It is made by [`LedgerSink`] in the join's one pass, beside the
//! summary, and carried by the run's facts ([`crate::summary::RunFacts`]),
//! so `report` (which builds no model) and every view of the model read
//! the same numbers. Per line site it keeps the same parts, which the
//! rules draw their costs and savings from.
//!
//! Attribution: a driver call belongs to the top-level construct of its
//! thread whose host span contains its start; CUPTI hands the calls over
//! in batches, after the constructs they ran in, so a thread's recent
//! constructs are kept until its calls have caught up with them.

use std::collections::VecDeque;

use accprof_trace::{BufferHash, DriverOp, DriverSpan};

use crate::join::{At, Order, Sink};
use crate::model::{
    Construct, ConstructId, Kernel, LaunchRequest, Memset, Process, SiteId, Transfer,
};

/// The parts a construct's host time is split into, as the driver timed
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// Device and pinned host memory allocated and freed.
    Allocation,
    /// Copies and memsets, host staging and device copy together.
    Transfer,
    Launch,
    /// The host waited for the device (stream, context, event syncs).
    Wait,
    /// The driver, a context or the device code started.
    StartUp,
    /// Every other driver call (queries, streams, events, callbacks).
    OtherDriver,
}

impl Part {
    pub const ALL: [Part; 6] = [
        Part::Allocation,
        Part::Transfer,
        Part::Launch,
        Part::Wait,
        Part::StartUp,
        Part::OtherDriver,
    ];

    pub fn of(op: DriverOp) -> Part {
        match op {
            DriverOp::Alloc | DriverOp::Free | DriverOp::AllocHost | DriverOp::FreeHost => {
                Part::Allocation
            }
            DriverOp::CopyHostToDevice
            | DriverOp::CopyDeviceToHost
            | DriverOp::CopyOther
            | DriverOp::Memset => Part::Transfer,
            DriverOp::Launch => Part::Launch,
            DriverOp::Synchronize => Part::Wait,
            DriverOp::ModuleLoad | DriverOp::Init => Part::StartUp,
            DriverOp::Other => Part::OtherDriver,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Part::Allocation => "allocation and free",
            Part::Transfer => "transfers",
            Part::Launch => "kernel launches",
            Part::Wait => "waiting for the device",
            Part::StartUp => "CUDA start-up and code loading",
            Part::OtherDriver => "other CUDA driver calls",
        }
    }

    /// Short name for tables and exports of the same part outside
    /// constructs.
    pub fn outside_key(self) -> &'static str {
        match self {
            Part::Allocation => "outside_allocation",
            Part::Transfer => "outside_transfer",
            Part::Launch => "outside_launch",
            Part::Wait => "outside_wait",
            Part::StartUp => "outside_startup",
            Part::OtherDriver => "outside_other_driver",
        }
    }

    /// Short name for tables and exports.
    pub fn key(self) -> &'static str {
        match self {
            Part::Allocation => "allocation",
            Part::Transfer => "transfer",
            Part::Launch => "launch",
            Part::Wait => "wait",
            Part::StartUp => "startup",
            Part::OtherDriver => "other_driver",
        }
    }
}

/// Time and calls of each [`Part`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parts {
    pub ns: [u64; 6],
    pub calls: [u64; 6],
}

impl Parts {
    fn add(&mut self, part: Part, ns: u64) {
        let i = part as usize;
        self.ns[i] = self.ns[i].saturating_add(ns);
        self.calls[i] += 1;
    }

    pub fn ns(&self, part: Part) -> u64 {
        self.ns[part as usize]
    }

    pub fn calls(&self, part: Part) -> u64 {
        self.calls[part as usize]
    }

    pub fn total_ns(&self) -> u64 {
        self.ns.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    pub fn merge(&mut self, o: &Parts) {
        for i in 0..self.ns.len() {
            self.ns[i] = self.ns[i].saturating_add(o.ns[i]);
            self.calls[i] += o.calls[i];
        }
    }
}

/// One host thread's wall time, partitioned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadLedger {
    /// OS thread id.
    pub thread: u32,
    /// Host time inside top-level OpenACC constructs (API routine calls
    /// included).
    pub inside_ns: u64,
    /// Top-level constructs.
    pub constructs: u64,
    /// What the driver timed inside them.
    pub inside: Parts,
    /// Driver calls outside every construct (the program's own CUDA
    /// calls, the runtime's start-up before the first construct).
    pub outside: Parts,
    /// MPI calls.
    pub mpi_ns: u64,
    pub mpi_calls: u64,
    /// The collector's own work on this thread (hashing host buffers).
    pub collector_ns: u64,
}

impl ThreadLedger {
    /// Inside constructs, what no driver call and no collector work
    /// explains: the runtime's own bookkeeping.
    pub fn runtime_rest_ns(&self) -> u64 {
        self.inside_ns
            .saturating_sub(self.inside.total_ns())
            .saturating_sub(self.collector_ns)
    }

    /// What is left of `wall_ns` outside constructs, MPI calls and driver
    /// calls: the program's own host code.
    pub fn program_ns(&self, wall_ns: u64) -> u64 {
        wall_ns
            .saturating_sub(self.inside_ns)
            .saturating_sub(self.mpi_ns)
            .saturating_sub(self.outside.total_ns())
    }
}

/// What a line site's top-level constructs spent on the host, by part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteLedger {
    pub constructs: u64,
    pub host_ns: u64,
    pub parts: Parts,
    /// Collector work inside them.
    pub collector_ns: u64,
}

impl SiteLedger {
    pub fn runtime_rest_ns(&self) -> u64 {
        self.host_ns
            .saturating_sub(self.parts.total_ns())
            .saturating_sub(self.collector_ns)
    }
}

/// The run's ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// The wall time every thread's ledger partitions (the run's).
    pub wall_ns: u64,
    /// The trace holds the driver's timings (format 1.4 and CUPTI's
    /// driver records on): without them the time inside constructs is not
    /// split.
    pub timed: bool,
    /// Driver calls recorded.
    pub driver_calls: u64,
    /// From the first start-up call's start to the last one's end
    /// ([`Part::StartUp`]: the driver, a context, the device code
    /// loaded): where the run waited for CUDA before its work; None
    /// without the driver's timings.
    pub startup_span: Option<(u64, u64)>,
    /// Host threads that ran OpenACC constructs or MPI calls, the busiest
    /// first.
    pub threads: Vec<ThreadLedger>,
    /// By line site ([`crate::Run::line_site`]), indexed by site.
    pub sites: Vec<SiteLedger>,
    /// From the process's start to the trace's first record (the loader,
    /// the program's start-up before the collector): outside the wall time
    /// the threads' parts sum to. None when the trace does not say
    /// (before format 1.4).
    pub before_first_record_ns: Option<u64>,
}

impl Ledger {
    /// The line site's parts, when it has any.
    pub fn site(&self, site: SiteId) -> Option<&SiteLedger> {
        self.sites.get(site.index()).filter(|s| s.constructs > 0)
    }

    /// The busiest thread: the one whose table views show first.
    pub fn main_thread(&self) -> Option<&ThreadLedger> {
        self.threads.first()
    }
}

/// A top-level construct waiting for the driver calls made inside it.
#[derive(Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    site: SiteId,
}

#[derive(Default)]
struct ThreadAcc {
    ledger: ThreadLedger,
    /// Its latest top-level constructs, in start order.
    recent: VecDeque<Span>,
    /// The end of its latest finished top-level construct.
    horizon: u64,
    /// Calls that started after `horizon`: inside a construct not yet
    /// finished, or outside.
    pending: Vec<(u64, u64, DriverOp)>,
}

/// Constructs kept for calls still to come: about a second of a launch
/// storm. Older ones a late call could still fall in count it as outside.
const RECENT: usize = 1 << 18;

/// The ledger as a sink of the join.
#[derive(Default)]
pub struct LedgerSink {
    threads: Vec<ThreadAcc>,
    sites: Vec<SiteLedger>,
    /// Top-level constructs open when the trace ended.
    open: Vec<(u32, u64, SiteId)>,
    driver_calls: u64,
    /// The first start and the last end of the start-up calls.
    startup: Option<(u64, u64)>,
    /// The trace cannot hold driver calls (its format is older than
    /// them, or CUPTI did not record): no construct is kept for calls to
    /// come.
    spanless: bool,
}

impl LedgerSink {
    pub fn new() -> Self {
        Self::default()
    }

    fn thread(&mut self, thread: u32) -> &mut ThreadAcc {
        let i = match self.threads.iter().position(|t| t.ledger.thread == thread) {
            Some(i) => i,
            None => {
                self.threads.push(ThreadAcc {
                    ledger: ThreadLedger {
                        thread,
                        ..Default::default()
                    },
                    ..Default::default()
                });
                self.threads.len() - 1
            }
        };
        &mut self.threads[i]
    }

    fn site(sites: &mut Vec<SiteLedger>, site: SiteId) -> &mut SiteLedger {
        let i = site.index();
        if sites.len() <= i {
            sites.resize_with(i + 1, SiteLedger::default);
        }
        &mut sites[i]
    }

    /// A top-level construct of `thread` spanning `[start, end)`.
    fn top_level(&mut self, thread: u32, start: u64, end: u64, site: SiteId) {
        let s = Self::site(&mut self.sites, site);
        s.constructs += 1;
        s.host_ns = s.host_ns.saturating_add(end.saturating_sub(start));
        let keep = !self.spanless;
        let t = self.thread(thread);
        t.ledger.constructs += 1;
        t.ledger.inside_ns = t.ledger.inside_ns.saturating_add(end.saturating_sub(start));
        if keep {
            if t.recent.len() == RECENT {
                t.recent.pop_front();
            }
            t.recent.push_back(Span { start, end, site });
        }
        t.horizon = t.horizon.max(end);
        if t.pending.iter().any(|&(s, ..)| s < t.horizon) {
            let horizon = t.horizon;
            let mut pending = std::mem::take(&mut t.pending);
            pending.retain(|&(s, e, op)| {
                if s < horizon {
                    self.place(thread, s, e, op);
                    false
                } else {
                    true
                }
            });
            self.thread(thread).pending = pending;
        }
    }

    /// Counts a driver call in the construct it ran in, or outside.
    fn place(&mut self, thread: u32, start: u64, end: u64, op: DriverOp) {
        let part = Part::of(op);
        let ns = end.saturating_sub(start);
        let t = self.thread(thread);
        // The last construct starting at or before the call.
        let i = t.recent.partition_point(|s| s.start <= start);
        let inside = i
            .checked_sub(1)
            .map(|i| t.recent[i])
            .filter(|s| start < s.end);
        match inside {
            Some(span) => {
                t.ledger.inside.add(part, ns);
                Self::site(&mut self.sites, span.site).parts.add(part, ns);
            }
            None => t.ledger.outside.add(part, ns),
        }
    }
}

impl Sink for LedgerSink {
    type Output = Ledger;

    fn driver_spans_possible(&mut self, possible: bool) {
        self.spanless = !possible;
    }

    fn construct(
        &mut self,
        _id: ConstructId,
        c: &Construct,
        _launches: &[LaunchRequest],
        at: &At,
        open_at_end: bool,
    ) {
        if c.parent.is_some() {
            return;
        }
        match c.end_ns() {
            Some(end) => self.top_level(c.thread, c.start_ns, end, at.line_site),
            None if open_at_end => self.open.push((c.thread, c.start_ns, at.line_site)),
            // Cut by a later start on its thread: its end is unknown.
            None => {}
        }
    }

    fn kernel(&mut self, _k: &Kernel, _order: Order, _at: Option<&At>) {}
    fn transfer(&mut self, _t: &Transfer, _order: Order, _at: Option<&At>) {}
    fn memset(&mut self, _m: &Memset, _order: Order, _at: Option<&At>) {}

    fn hash(&mut self, h: &BufferHash, at: Option<&At>) {
        if let (Some(ns), Some(at)) = (h.hash_ns, at) {
            let t = self.thread(at.thread);
            t.ledger.collector_ns = t.ledger.collector_ns.saturating_add(ns);
            let s = Self::site(&mut self.sites, at.line_site);
            s.collector_ns = s.collector_ns.saturating_add(ns);
        }
    }

    fn driver_span(&mut self, d: &DriverSpan) {
        // A crafted trace may hold calls its format cannot: the
        // constructs from here on are kept for them.
        self.spanless = false;
        self.driver_calls += 1;
        if Part::of(d.op) == Part::StartUp {
            self.startup = Some(match self.startup {
                Some((s, e)) => (s.min(d.start_ns), e.max(d.end_ns)),
                None => (d.start_ns, d.end_ns),
            });
        }
        let t = self.thread(d.thread);
        if d.start_ns >= t.horizon {
            t.pending.push((d.start_ns, d.end_ns, d.op));
        } else {
            self.place(d.thread, d.start_ns, d.end_ns, d.op);
        }
    }

    fn finish(self, info: Process) -> Ledger {
        self.ledger(&info)
    }
}

impl LedgerSink {
    /// The ledger of the run `info` describes.
    pub fn ledger(mut self, info: &Process) -> Ledger {
        let (first, last) = info.span_ns;
        for (thread, start, site) in std::mem::take(&mut self.open) {
            self.top_level(thread, start, last.max(start), site);
        }
        for i in 0..self.threads.len() {
            let pending = std::mem::take(&mut self.threads[i].pending);
            let thread = self.threads[i].ledger.thread;
            for (s, e, op) in pending {
                self.place(thread, s, e, op);
            }
        }
        for m in &info.mpi_calls {
            let t = self.thread(m.thread);
            t.ledger.mpi_ns = t
                .ledger
                .mpi_ns
                .saturating_add(m.end_ns.saturating_sub(m.start_ns));
            t.ledger.mpi_calls += 1;
        }
        let mut threads: Vec<ThreadLedger> = self
            .threads
            .into_iter()
            .map(|t| t.ledger)
            .filter(|t| t.constructs > 0 || t.mpi_calls > 0)
            .collect();
        threads.sort_by_key(|t| (std::cmp::Reverse(t.inside_ns + t.mpi_ns), t.thread));
        Ledger {
            wall_ns: last.saturating_sub(first),
            timed: self.driver_calls > 0,
            driver_calls: self.driver_calls,
            startup_span: self.startup,
            threads,
            sites: self.sites,
            before_first_record_ns: info
                .header
                .process_start_ns
                .filter(|&s| s <= first)
                .map(|s| first - s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(start_ns: u64, end_ns: u64) -> DriverSpan {
        DriverSpan {
            thread: 1,
            start_ns,
            end_ns,
            op: DriverOp::Launch,
            cbid: 0,
            correlation: 0,
        }
    }

    /// Told that no driver call can come, the sink keeps no construct for
    /// one; a call that comes all the same (a crafted trace) is counted,
    /// outside the constructs that went, inside those kept from then on.
    #[test]
    fn a_trace_without_driver_calls_keeps_no_construct_for_them() {
        let site = SiteId::at(0);
        let mut kept = LedgerSink::new();
        let mut spanless = LedgerSink::new();
        spanless.driver_spans_possible(false);
        for s in [&mut kept, &mut spanless] {
            s.top_level(1, 10, 20, site);
            s.top_level(1, 30, 40, site);
        }
        assert_eq!(kept.threads[0].recent.len(), 2);
        assert!(spanless.threads[0].recent.is_empty());
        spanless.driver_span(&call(12, 14));
        spanless.top_level(1, 50, 60, site);
        spanless.driver_span(&call(52, 55));
        let t = &spanless.threads[0];
        assert_eq!(t.recent.len(), 1);
        assert_eq!(t.ledger.outside.ns(Part::Launch), 2);
        assert_eq!(t.ledger.inside.ns(Part::Launch), 3);
        assert_eq!(spanless.driver_calls, 2);
        assert_eq!(spanless.sites[0].constructs, 3);
    }
}
