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
//!
//! Which rows a thread's ledger shows, and their keys and labels, are
//! decided once ([`Ledger::rows_of`], in model/ledger_rows.rs) for every view.
//!
//! The figures themselves (`Ledger`, `Part`, the rows) are data the run
//! carries, defined in the model (model/ledger_types.rs, the rows in
//! model/ledger_rows.rs) and re-exported
//! here; this module is the sink that makes them.

pub use crate::model::ledger_rows::{Account, LedgerRow};
pub use crate::model::ledger_types::{Ledger, Part, Parts, SiteLedger, ThreadLedger, JIT_MIN_NS};

use std::collections::VecDeque;

use accprof_trace::{BufferHash, DriverOp, DriverSpan, OwnWork};

use crate::join::{At, Order, Sink};
use crate::model::{
    Construct, ConstructId, Kernel, LaunchRequest, Memset, Process, SiteId, Transfer,
};

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
    /// Calls (and the collector's work: `None`) that started after
    /// `horizon`: inside a construct not yet finished, or outside.
    pending: Vec<(u64, u64, Option<DriverOp>)>,
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
    module_load_ns: u64,
    module_load_calls: u64,
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

    /// Counts a driver call (`None`: the collector's own work) in the
    /// construct it ran in, or outside.
    fn place(&mut self, thread: u32, start: u64, end: u64, op: Option<DriverOp>) {
        let ns = end.saturating_sub(start);
        let t = self.thread(thread);
        // The last construct starting at or before the call.
        let i = t.recent.partition_point(|s| s.start <= start);
        let inside = i
            .checked_sub(1)
            .map(|i| t.recent[i])
            .filter(|s| start < s.end);
        match (inside, op.map(Part::of)) {
            (Some(span), Some(part)) => {
                t.ledger.inside.add(part, ns);
                Self::site(&mut self.sites, span.site).parts.add(part, ns);
            }
            (Some(span), None) => {
                t.ledger.collector_ns = t.ledger.collector_ns.saturating_add(ns);
                let s = Self::site(&mut self.sites, span.site);
                s.collector_ns = s.collector_ns.saturating_add(ns);
            }
            (None, Some(part)) => t.ledger.outside.add(part, ns),
            (None, None) => {
                t.ledger.collector_outside_ns = t.ledger.collector_outside_ns.saturating_add(ns);
            }
        }
    }

    /// A span to place on `thread` once its constructs have caught up.
    fn arrive(&mut self, thread: u32, start: u64, end: u64, op: Option<DriverOp>) {
        let t = self.thread(thread);
        if start >= t.horizon {
            t.pending.push((start, end, op));
        } else {
            self.place(thread, start, end, op);
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
        if d.op == DriverOp::ModuleLoad {
            self.module_load_ns = self
                .module_load_ns
                .saturating_add(d.end_ns.saturating_sub(d.start_ns));
            self.module_load_calls += 1;
        }
        if Part::of(d.op) == Part::StartUp {
            self.startup = Some(match self.startup {
                Some((s, e)) => (s.min(d.start_ns), e.max(d.end_ns)),
                None => (d.start_ns, d.end_ns),
            });
        }
        self.arrive(d.thread, d.start_ns, d.end_ns, Some(d.op));
    }

    fn own_work(&mut self, w: &OwnWork) {
        self.spanless = false;
        self.arrive(w.thread, w.start_ns, w.end_ns, None);
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
        if let Some(main) = threads.first_mut() {
            main.collector_outside_ns = main
                .collector_outside_ns
                .saturating_add(info.check.handler_ns());
        }
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
            module_load_ns: self.module_load_ns,
            module_load_calls: self.module_load_calls,
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

    /// The coherence check's work is accprof's: inside a construct it is
    /// the collector's part, not the runtime's own work, and outside one
    /// it is not the program's host code (nor is its fault handler's
    /// time, counted on the busiest thread); the other lines read as they
    /// would without the check.
    #[test]
    fn the_checks_own_work_is_the_collectors_time() {
        let site = SiteId::at(0);
        let mut bare = LedgerSink::new();
        let mut checked = LedgerSink::new();
        for s in [&mut bare, &mut checked] {
            s.top_level(1, 100, 200, site);
            s.driver_span(&call(110, 130));
        }
        // At the construct's start (inside it), and after its end.
        checked.own_work(&OwnWork {
            thread: 1,
            start_ns: 101,
            end_ns: 141,
        });
        checked.own_work(&OwnWork {
            thread: 1,
            start_ns: 200,
            end_ns: 230,
        });
        // The next construct ends: the work before it is placed.
        for s in [&mut bare, &mut checked] {
            s.top_level(1, 300, 400, site);
        }
        let t = &checked.threads[0].ledger;
        assert_eq!(t.collector_ns, 40);
        assert_eq!(t.collector_outside_ns, 30);
        assert_eq!(checked.sites[0].collector_ns, 40);
        let b = &bare.threads[0].ledger;
        // Without the check, its 40 ns would be the runtime's own work.
        assert_eq!(b.runtime_rest_ns(), 180);
        assert_eq!(t.runtime_rest_ns(), 140);
        assert_eq!(b.program_ns(1000) - t.program_ns(1000), 30);
        assert_eq!(t.inside.ns(Part::Launch), b.inside.ns(Part::Launch));
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
