//! [`Context`]: the run as every rule sees it, and the facts it derives
//! from the run once for all the rules: the large host <-> device transfers
//! in time order ([`Xfer`], the model's) and each host buffer's history of them, when
//! kernels ran, the compute constructs per site and what their launches got
//! ([`LaunchSite`]), the host costs of transfers, what equal hashes prove,
//! the names of host buffers and variables, and the questions several rules
//! ask of them (the loop that repeats a construct, consecutive transfers of
//! a buffer, whether the host changed a buffer in between).

use std::collections::BTreeMap;

use accprof_trace::HashMode;

use crate::findings::{Confidence, Finding};
use crate::idhash::IdHashMap;
use crate::model::{
    large_xfers, names, ConstructClass, ConstructId, Run, SiteId, SourceNames, Xfer,
};
use crate::source::SourceSet;

use super::host_cost;

/// Thresholds of the rules.
#[derive(Debug, Clone)]
pub struct Options {
    /// Transfers and allocations smaller than this are not examined: they
    /// are scalars, Fortran descriptors and kernel argument blocks, which a
    /// data region does not remove.
    pub min_bytes: u64,
    /// A transfer or allocation at one place must repeat this often to count
    /// as repeated (D6, A1).
    pub min_repeats: usize,
    /// Share of the run's wall time below which time-based findings
    /// (S1, S2, S3, L3) are not reported.
    pub min_share: f64,
    /// Device idle gaps shorter than this are launch overhead, not idleness (S3).
    pub min_gap_ns: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            min_bytes: crate::model::LARGE_XFER_BYTES,
            min_repeats: 3,
            min_share: 0.05,
            min_gap_ns: 100_000,
        }
    }
}

/// What one rule found.
#[derive(Debug, Default)]
pub struct Checked {
    pub findings: Vec<Finding>,
    /// What the rule could not check, and why.
    pub notes: Vec<String>,
}

impl Checked {
    pub fn note(&mut self, s: impl Into<String>) {
        let s = s.into();
        if !self.notes.contains(&s) {
            self.notes.push(s);
        }
    }
}

/// Everything the rules share.
pub struct Context<'a> {
    pub run: &'a Run,
    pub sources: &'a SourceSet,
    pub opts: &'a Options,
    /// Large transfers in time order.
    pub xfers: Vec<Xfer>,
    /// Per host buffer (pointer, bytes): its transfers in time order (indices into `xfers`).
    pub buffers: BTreeMap<(u64, u64), Vec<usize>>,
    /// Transfers below `min_bytes`, not examined.
    pub small_transfers: usize,
    /// Kernel intervals sorted by start, when the run's own table is not
    /// (it is in start order as the join makes it: then it is read in
    /// place).
    kernel_order: Option<Vec<(u64, u64)>>,
    /// The running maximum of the kernels' ends in start order, made when
    /// first asked for.
    kernel_max_end: std::sync::OnceLock<Vec<u64>>,
    /// Where kernel times come from, None when the run has none.
    pub kernel_source: Option<&'static str>,
    /// The sources' buffer names, when the run did not learn them
    /// ([`Run::learn_names`]); the rules name buffers by
    /// [`Context::buffer_name`].
    pub(super) unlearned: Option<SourceNames>,
    /// Compute constructs per site, made when first asked for.
    launch_sites: std::sync::OnceLock<Vec<LaunchSite>>,
    /// The host costs of transfers and allocations, when the trace has the
    /// driver's timings.
    pub host: Option<host_cost::HostCosts>,
}

/// Counts of keys per site, taken a run of equal ones at a time: a run
/// costs one map update, not one per key.
struct Tally<K> {
    run: Option<(SiteId, K, u64)>,
}

impl<K> Default for Tally<K> {
    fn default() -> Self {
        Tally { run: None }
    }
}

impl<K: Copy + Eq + std::hash::Hash> Tally<K> {
    fn add(&mut self, counts: &mut IdHashMap<SiteId, IdHashMap<K, u64>>, site: SiteId, key: K) {
        match &mut self.run {
            Some((s, k, n)) if *s == site && *k == key => *n += 1,
            _ => {
                self.flush(counts);
                self.run = Some((site, key, 1));
            }
        }
    }

    fn flush(&mut self, counts: &mut IdHashMap<SiteId, IdHashMap<K, u64>>) {
        if let Some((site, key, n)) = self.run.take() {
            *counts.entry(site).or_default().entry(key).or_default() += n;
        }
    }
}

/// The compute constructs at one site and what their launches got: the
/// device-timed kernels (CUPTI) or, without them, the runtime's launch
/// requests.
#[derive(Debug, Clone)]
pub struct LaunchSite {
    pub site: SiteId,
    pub constructs: Vec<ConstructId>,
    /// Device-timed kernels, and their device time as the summary has it
    /// ([`crate::summary::Summary::site_kernel_ns`]).
    pub kernels: Vec<crate::model::KernelId>,
    pub device_ns: u64,
    /// Host time of the constructs, start to end.
    pub host_ns: u64,
    /// The grid and block most kernels got (CUPTI).
    pub grid_block: Option<([u32; 3], [u32; 3])>,
    /// (gangs, workers, vector length) most launch requests got.
    pub dims: Option<(u64, u64, u64)>,
    /// Some construct ran on an async queue (as the runtime reported, or
    /// as its directive's `async` clause says).
    pub asynchronous: bool,
    /// Host<->device transfers of the program's data (at least
    /// `min_bytes`: not argument blocks or scalars) the constructs made,
    /// nested data constructs included, and their bytes.
    pub data_transfers: u64,
    pub data_bytes: u64,
}

impl LaunchSite {
    /// Kernels launched here: CUPTI's count, else the constructs reached.
    pub fn launches(&self) -> u64 {
        if self.kernels.is_empty() {
            self.constructs.len() as u64
        } else {
            self.kernels.len() as u64
        }
    }

    /// The vector length launched: CUPTI's block width, else the runtime's.
    pub fn launched_vector(&self) -> Option<u64> {
        match (self.grid_block, self.dims) {
            (Some((_, b)), _) => Some(u64::from(b[0])),
            (None, Some((_, _, v))) => Some(v),
            _ => None,
        }
    }

    /// Its constructs move the program's data: at least one transfer of
    /// it for every two constructs. Their host time is then the data
    /// findings' to claim, not a launch finding's.
    pub fn moves_data(&self) -> bool {
        2 * self.data_transfers >= self.constructs.len() as u64 && self.data_transfers > 0
    }

    /// The kernels' device time, or the constructs' host time without
    /// CUPTI, and which of the two it is.
    pub fn time(&self) -> (u64, &'static str) {
        if self.kernels.is_empty() {
            (self.host_ns, "host construct time")
        } else {
            (self.device_ns, "kernel device time")
        }
    }
}

impl<'a> Context<'a> {
    pub fn new(run: &'a Run, sources: &'a SourceSet, opts: &'a Options) -> Context<'a> {
        let (xfers, small) = large_xfers(run, opts.min_bytes);
        let mut buffers: BTreeMap<(u64, u64), Vec<usize>> = BTreeMap::new();
        for (i, x) in xfers.iter().enumerate() {
            if let Some(p) = x.host_ptr {
                buffers.entry((p, x.bytes)).or_default().push(i);
            }
        }
        let sorted = run
            .tables
            .kernels
            .windows(2)
            .all(|w| w[0].start_ns <= w[1].start_ns);
        let kernel_order = (!sorted).then(|| {
            let mut v: Vec<(u64, u64)> =
                run.kernels().map(|(_, k)| (k.start_ns, k.end_ns)).collect();
            v.sort_unstable();
            v
        });
        // With CUPTI on, its kernel records are complete (drops are noted
        // separately): no record means no kernel. Without it, the runtime's
        // launch events say when a kernel was enqueued (not when it ran):
        // good enough for "none ran".
        let kernel_source = if run.cupti_active() {
            Some("CUPTI kernel records")
        } else if run.kernels().any(|(_, k)| !k.device_timed()) {
            Some("acc_prof launch events")
        } else {
            None
        };
        // A run whose view did not have it learn the sources' names (one
        // made for a test) learns them for the rules alone.
        let unlearned = (!run.names_learned())
            .then(|| names::from_sources(run, sources, crate::model::LARGE_XFER_BYTES));
        Context {
            run,
            sources,
            opts,
            xfers,
            buffers,
            small_transfers: small,
            kernel_order,
            kernel_max_end: std::sync::OnceLock::new(),
            kernel_source,
            unlearned,
            launch_sites: std::sync::OnceLock::new(),
            host: host_cost::HostCosts::of(run),
        }
    }

    /// What removing the transfers saves: the host time of their copy
    /// calls where the driver timed them ([`host_cost`]), else their device
    /// copy time.
    pub fn xfers_cost(&self, xs: &[&Xfer]) -> u64 {
        match &self.host {
            Some(h) => h.transfers_ns(self.run, xs.iter().map(|x| x.transfer)),
            None => xs.iter().map(|x| x.duration_ns()).sum(),
        }
    }

    /// The sentence that says how transfers are costed, where the driver
    /// timed them.
    pub fn xfers_cost_meaning(&self) -> Option<&'static str> {
        self.host.as_ref().map(|_| {
            "Costs are host time as the CUDA driver timed it: each place's copy-call time shared among its transfers in proportion to their device times (the device time where that is longer)."
        })
    }

    /// The compute constructs of the run by site, in site order.
    pub fn launch_sites(&self) -> &[LaunchSite] {
        self.launch_sites.get_or_init(|| {
            let run = self.run;
            let mut by_site: BTreeMap<SiteId, LaunchSite> = BTreeMap::new();
            // How many launches got each shape, per site.
            type Counts<K> = IdHashMap<SiteId, IdHashMap<K, u64>>;
            let mut shapes: Counts<([u32; 3], [u32; 3])> = IdHashMap::default();
            let mut dims: Counts<(u64, u64, u64)> = IdHashMap::default();
            // A site's constructs mostly come one after another with the
            // same shapes (a loop launching one kernel): each is counted
            // a run at a time.
            let mut shape_run = Tally::default();
            let mut dims_run = Tally::default();
            let mut entry: Option<LaunchSite> = None;
            for (id, c) in run.constructs_of_class(ConstructClass::Compute) {
                let site = run.line_site(id);
                if entry.as_ref().is_some_and(|e| e.site != site) {
                    if let Some(done) = entry.take() {
                        by_site.insert(done.site, done);
                    }
                }
                let e = entry.get_or_insert_with(|| {
                    by_site.remove(&site).unwrap_or_else(|| LaunchSite {
                        site,
                        constructs: Vec::new(),
                        kernels: Vec::new(),
                        device_ns: run.summary().site_kernel_ns(site),
                        host_ns: 0,
                        grid_block: None,
                        dims: None,
                        asynchronous: false,
                        data_transfers: 0,
                        data_bytes: 0,
                    })
                });
                e.constructs.push(id);
                e.host_ns += c.host_ns().unwrap_or(0);
                e.asynchronous |= c.async_queue().is_some_and(|q| q >= 0 || q == -1);
                for &k in run.kernels_of(id) {
                    let kernel = run.kernel(k);
                    if kernel.device_timed() {
                        e.kernels.push(k);
                        shape_run.add(&mut shapes, site, (kernel.grid, kernel.block));
                    }
                }
                for l in run.launches_of(id) {
                    if let (Some(g), Some(w), Some(v)) = (l.gangs(), l.workers(), l.vector_length())
                    {
                        dims_run.add(&mut dims, site, (g, w, v));
                    }
                }
            }
            if let Some(done) = entry {
                by_site.insert(done.site, done);
            }
            shape_run.flush(&mut shapes);
            dims_run.flush(&mut dims);
            fn most<K: Copy + Ord>(m: Option<&IdHashMap<K, u64>>) -> Option<K> {
                m?.iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(k, _)| *k)
            }
            for (_, t) in run.transfers() {
                if t.bytes < self.opts.min_bytes || !t.is_host_device() {
                    continue;
                }
                let Some(c) = t.construct else { continue };
                if let Some(e) = by_site.get_mut(&run.line_site(c)) {
                    e.data_transfers += 1;
                    e.data_bytes = e.data_bytes.saturating_add(t.bytes);
                }
            }
            by_site
                .into_values()
                .map(|mut e| {
                    e.grid_block = most(shapes.get(&e.site));
                    e.dims = most(dims.get(&e.site));
                    // GCC's runtime does not report the queue: the source does.
                    e.asynchronous |= self
                        .directive_at(e.site)
                        .is_some_and(|(_, d)| d.clause("async").is_some());
                    e
                })
                .collect()
        })
    }

    /// The directive at a site, when its source was read.
    pub fn directive_at(
        &self,
        site: SiteId,
    ) -> Option<(&crate::source::SourceFile, crate::source::Directive)> {
        let s = self.run.site(site);
        let src = self.sources.get(&s.file)?;
        let d = src.directive_at(s.line?)?;
        Some((src, d))
    }

    /// True when some kernel ran (or was launched) in the open interval (t0, t1).
    pub fn kernel_between(&self, t0: u64, t1: u64) -> bool {
        // Kernels that start before t1; any of them ending after t0 overlaps.
        let n = match &self.kernel_order {
            Some(v) => v.partition_point(|&(s, _)| s < t1),
            None => self.run.tables.kernels.partition_point(|k| k.start_ns < t1),
        };
        n > 0 && self.kernel_max_end()[n - 1] > t0
    }

    /// The running maximum of the kernels' ends, in start order.
    fn kernel_max_end(&self) -> &[u64] {
        self.kernel_max_end.get_or_init(|| {
            let mut max_end = 0;
            let mut running = |e: u64| {
                max_end = e.max(max_end);
                max_end
            };
            match &self.kernel_order {
                Some(v) => v.iter().map(|&(_, e)| running(e)).collect(),
                None => self
                    .run
                    .tables
                    .kernels
                    .iter()
                    .map(|k| running(k.end_ns))
                    .collect(),
            }
        })
    }

    /// True when the run can tell whether kernels ran.
    pub fn knows_kernels(&self) -> bool {
        self.kernel_source.is_some()
    }

    /// Why CUPTI's kernel records are known to be incomplete, so that a
    /// kernel missing from them proves nothing (U1 and A2 rest on that
    /// absence); None when nothing says so. Besides drops and a cut
    /// trace: compute constructs that ran on the device with no kernel
    /// record, as when the device context broke and CUPTI never
    /// delivered the records it held.
    pub fn kernel_records_incomplete(&self) -> Option<String> {
        let run = self.run;
        if !run.cupti_active() {
            return None;
        }
        if !run.process.losses.is_empty() {
            return Some("the trace was cut, so CUPTI's kernel records are incomplete".into());
        }
        if run
            .process
            .dropped
            .iter()
            .any(|(s, n)| *s == accprof_trace::DropSource::Cupti && *n > 0)
        {
            return Some("CUPTI dropped records".into());
        }
        let unrecorded: Vec<ConstructId> = run
            .constructs()
            .filter(|(id, c)| {
                c.class == ConstructClass::Compute
                    && c.parent.is_none()
                    && c.device_type() != Some(crate::model::ACC_DEVICE_HOST)
                    && run.kernels_of(*id).is_empty()
            })
            .map(|(id, _)| id)
            .collect();
        if unrecorded.is_empty() {
            return None;
        }
        let mut lines: Vec<u32> = unrecorded
            .iter()
            .filter_map(|&id| run.site(run.line_site(id)).line)
            .collect();
        lines.sort_unstable();
        lines.dedup();
        let at = match lines.as_slice() {
            [] => String::new(),
            [one] => format!(" (line {one})"),
            more => format!(
                " (lines {})",
                more.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        Some(format!(
            "{} compute construct{} ran on the device with no kernel record{at}: device records were lost",
            unrecorded.len(),
            if unrecorded.len() == 1 { "" } else { "s" },
        ))
    }

    pub fn hash_mode(&self) -> HashMode {
        self.run.process.header.sources.hashing
    }

    /// How much an equality of hashes proves in this run.
    pub fn hash_confidence(&self) -> Confidence {
        match self.hash_mode() {
            HashMode::Full => Confidence::Certain,
            _ => Confidence::Likely,
        }
    }

    /// One line saying what equal hashes mean in this run.
    pub fn hash_meaning(&self) -> &'static str {
        match self.hash_mode() {
            HashMode::Full => "full-content hashes are equal",
            HashMode::Sampled => {
                "sampled hashes are equal: 16 chunks of 256 B per buffer, so a change outside \
                 them is not seen; --hash full proves it"
            }
            HashMode::Off => "no hashes (hashing was off)",
        }
    }

    /// The class of the origin construct of a transfer.
    pub fn origin_class(&self, x: &Xfer) -> Option<ConstructClass> {
        x.origin.map(|o| self.run.construct(o).class)
    }

    /// The name of the host buffer at `p`, as [`Run::buffer_name`] names
    /// it.
    pub fn buffer_name(&self, p: u64) -> Option<&str> {
        self.run.buffer_name(p).or_else(|| {
            self.unlearned
                .as_ref()
                .and_then(|u| u.buffers.get(&p))
                .map(String::as_str)
        })
    }

    /// The variable a transfer moved, as [`Run::variable`] names it.
    pub fn variable(&self, x: &Xfer) -> Option<&str> {
        match &self.unlearned {
            Some(u) => self.run.variable_named(x.transfer, u),
            None => self.run.variable_from(x.transfer),
        }
        .map(|(n, _)| n)
    }

    pub fn name_of(&self, ptr: Option<u64>) -> Option<String> {
        ptr.and_then(|p| self.buffer_name(p)).map(str::to_string)
    }

    /// Share of the run's wall time.
    pub fn share(&self, ns: u64) -> f64 {
        let wall = self.run.wall_ns();
        if wall == 0 {
            0.0
        } else {
            ns as f64 / wall as f64
        }
    }
}

/// The outermost host loop that repeats the construct at `site`: around
/// it in its function, else around a recorded caller's call. A site keeps
/// the call chain of its first reach, which may be a call outside the loop
/// (a warm-up step before the time loop): a caller's other calls of the
/// same function, inside a loop of the same function, count too.
pub(crate) fn repeating_loop(cx: &Context, site: SiteId) -> Option<(String, u32)> {
    let run = cx.run;
    let s = run.site(site);
    let mut found = None;
    let mut callee: Option<&str> = None;
    let frames = std::iter::once(s).chain(run.callers(site));
    for f in frames {
        if let (Some(line), Some(src)) = (f.line, cx.sources.get(&f.file)) {
            let mut best = src.enclosing_loops(line).last().map(|l| l.header_line);
            if let (None, Some(callee), Some((a, b))) = (best, callee, src.unit_of(line)) {
                best = src
                    .calls_in(a, b, callee)
                    .into_iter()
                    .filter_map(|(l, _)| src.enclosing_loops(l).last().map(|lp| lp.header_line))
                    .min();
            }
            if let Some(header) = best {
                found = Some((f.file.clone(), header));
            }
        }
        callee = Some(f.function.as_str());
    }
    found
}

/// Pairs of consecutive transfers of the same host buffer (same pointer and
/// size) that `keep` accepts, as indices into `cx.xfers`.
pub(crate) fn consecutive_pairs(
    cx: &Context,
    keep: impl Fn(&Xfer, &Xfer) -> bool,
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for list in cx.buffers.values() {
        for w in list.windows(2) {
            let (a, b) = (&cx.xfers[w[0]], &cx.xfers[w[1]]);
            if keep(a, b) {
                out.push((w[0], w[1]));
            }
        }
    }
    out
}

/// Whether the host changed any of [p, p + len) between `t0` and `t1`, as
/// the trace shows it: an MPI call that received into it, or a host write
/// the coherence check caught. Equal hashes around such a change (sampled
/// ones miss a halo) do not make the data unchanged.
pub(crate) fn host_changed(cx: &Context, p: u64, len: u64, t0: u64, t1: u64) -> bool {
    let end = p.saturating_add(len);
    let calls = cx.run.mpi_calls();
    // In start order: those that started by t1 and had not ended by t0.
    let last = calls.partition_point(|c| c.start_ns <= t1);
    let mpi = calls[..last]
        .iter()
        .filter(|c| c.end_ns >= t0)
        .flat_map(|c| c.ranges.iter())
        .any(|r| r.write && r.host_ptr < end && p < r.host_ptr.saturating_add(r.bytes));
    mpi || cx.run.host_accesses().iter().any(|a| {
        a.kind == accprof_trace::CoherenceKind::LostWrite
            && (t0..=t1).contains(&a.time_ns)
            && (p..end).contains(&a.host_addr)
    })
}

/// True when both transfers carry hashes and they are equal.
pub(crate) fn same_hash(a: &Xfer, b: &Xfer) -> bool {
    matches!((a.hash, b.hash), (Some(x), Some(y)) if x == y)
}
