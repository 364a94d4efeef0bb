//! R1: a runtime-bound loop. The compute constructs one host loop repeats
//! (in its own function, or in the functions it calls, through the
//! recorded call chains) spend most of their host time in what the OpenACC
//! runtime does for every construct, as the CUDA driver timed it: the
//! device blocks it allocates and frees, the small copies of kernel
//! arguments, its other driver calls and its own work between them. Not
//! the launches and the waits for short kernels (L5's) and not the
//! program's data (the data findings'), so the findings claim disjoint
//! time.
//!
//! Evidence needed: the wall-time ledger with driver timings
//! ([`crate::ledger`]); without them the rule says it could not look.
//! Proposals from what the parts show: fewer constructs where the
//! per-construct cost dominates (neighbouring constructs over the same
//! iteration space, named with their lines), costed from the measured
//! per-construct cost; where the waits dominate, what queueing would and
//! would not remove.

use std::collections::BTreeMap;

use crate::findings::{Category, Confidence, Finding, Value};
use crate::ledger::{Part, SiteLedger};
use crate::source::syntax::fusion::{self, Chain, CopyBack};
use crate::units;

use super::context::{Checked, Context, LaunchSite};
use super::queueing::{self, Verdict};

/// Fewer constructs than this in a loop are not worth a finding.
const MIN_CONSTRUCTS: u64 = 100;
/// Kernels shorter than this on average are short (as for L5).
const SHORT_KERNEL_NS: u64 = 20_000;

/// What the runtime spent on one line's constructs beyond the launches,
/// the waits for short kernels and the program's data.
#[derive(Default, Clone, Copy)]
struct Cost {
    constructs: u64,
    host_ns: u64,
    allocation_ns: u64,
    allocation_calls: u64,
    copies_ns: u64,
    copies_calls: u64,
    other_ns: u64,
    rest_ns: u64,
    launch_ns: u64,
    wait_ns: u64,
    kernel_ns: u64,
}

impl Cost {
    fn of(ls: &LaunchSite, s: &SiteLedger) -> Cost {
        let data = ls.moves_data();
        Cost {
            constructs: s.constructs,
            host_ns: s.host_ns,
            allocation_ns: if data {
                0
            } else {
                s.parts.ns(Part::Allocation)
            },
            allocation_calls: if data {
                0
            } else {
                s.parts.calls(Part::Allocation)
            },
            copies_ns: if data { 0 } else { s.parts.ns(Part::Transfer) },
            copies_calls: if data {
                0
            } else {
                s.parts.calls(Part::Transfer)
            },
            other_ns: s.parts.ns(Part::OtherDriver) + s.parts.ns(Part::StartUp),
            rest_ns: s.runtime_rest_ns(),
            launch_ns: s.parts.ns(Part::Launch),
            wait_ns: s.parts.ns(Part::Wait),
            kernel_ns: ls.device_ns,
        }
    }

    fn add(&mut self, o: &Cost) {
        self.constructs += o.constructs;
        self.host_ns += o.host_ns;
        self.allocation_ns += o.allocation_ns;
        self.allocation_calls += o.allocation_calls;
        self.copies_ns += o.copies_ns;
        self.copies_calls += o.copies_calls;
        self.other_ns += o.other_ns;
        self.rest_ns += o.rest_ns;
        self.launch_ns += o.launch_ns;
        self.wait_ns += o.wait_ns;
        self.kernel_ns += o.kernel_ns;
    }

    /// The runtime's per-construct work this rule claims.
    fn runtime_ns(&self) -> u64 {
        self.allocation_ns + self.copies_ns + self.other_ns + self.rest_ns
    }
}

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let run = cx.run;
    let ledger = run.ledger();
    if !ledger.timed {
        if run.cupti_active() && !cx.launch_sites().is_empty() {
            out.note("R1 (runtime-bound loops) not checked: the trace holds no CUDA driver timings (recorded before format 1.4, or with ACCPROF_DRIVER=0)");
        }
        untimed(cx, &mut out);
        return out;
    }
    // The compute sites by the outermost host loop that repeats them; those
    // of no loop the sources show (or whose sources were not read) are the
    // program's, together: what the runtime spends per construct is a cost
    // of the program whether or not a loop is known.
    let mut loops: BTreeMap<Option<HostLoop>, Vec<(&LaunchSite, Cost)>> = BTreeMap::new();
    for ls in cx.launch_sites() {
        let Some(s) = ledger.site(ls.site) else {
            continue;
        };
        let key = super::context::repeating_loop(cx, ls.site);
        loops.entry(key).or_default().push((ls, Cost::of(ls, s)));
    }
    for (at, sites) in loops {
        let mut total = Cost::default();
        for (_, c) in &sites {
            total.add(c);
        }
        let runtime = total.runtime_ns();
        if total.constructs < MIN_CONSTRUCTS
            || 2 * runtime < total.host_ns
            || cx.share(runtime) < cx.opts.min_share
        {
            continue;
        }
        out.findings.push(finding(cx, at.as_ref(), &sites, &total));
    }
    out
}

/// A host loop's header: file and line.
type HostLoop = (String, u32);

fn per(ns: u64, n: u64) -> String {
    units::duration_ns(ns / n.max(1))
}

fn finding(
    cx: &Context,
    at: Option<&HostLoop>,
    sites: &[(&LaunchSite, Cost)],
    total: &Cost,
) -> Finding {
    let n = total.constructs;
    let runtime = total.runtime_ns();
    let what = match at {
        Some((file, line)) => format!("runtime-bound loop at {file}:{line}: its"),
        None => "runtime-bound program (no host loop around them was found in the sources read):"
            .to_string(),
    };
    let mut f = Finding::new(
        "R1",
        Category::Launch,
        format!(
            "{what} {} compute construct{} ({n} reaches) spent {} of their {} of host time in the runtime's per-construct work, {} per construct",
            sites.len(),
            if sites.len() == 1 { "" } else { "s" },
            units::duration_ns(runtime),
            units::duration_ns(total.host_ns),
            per(runtime, n)
        ),
    );
    f.confidence = Confidence::Certain;
    f.cost_ns = Some(runtime);
    if let Some((file, line)) = at {
        f.locations.push(cx.loop_location(file, *line));
    }
    let mut by_time: Vec<&(&LaunchSite, Cost)> = sites.iter().collect();
    by_time.sort_by_key(|(_, c)| std::cmp::Reverse(c.runtime_ns()));
    for (ls, c) in by_time.iter().take(5) {
        let mut l = cx.location("construct", Some(ls.site), None);
        l.role = format!(
            "construct: {} reaches, {} each in the runtime",
            c.constructs,
            per(c.runtime_ns(), c.constructs)
        );
        f.locations.push(l);
    }
    for (ls, _) in sites {
        f.subjects.constructs.extend(ls.constructs.iter().copied());
    }
    f.evidence
        .field("constructs", Value::Count(n))
        .field("sites", Value::Count(sites.len() as u64))
        .field("host_time", Value::Ns(total.host_ns))
        .field("runtime_time", Value::Ns(runtime))
        .field("allocation_time", Value::Ns(total.allocation_ns))
        .field("allocation_calls", Value::Count(total.allocation_calls))
        .field("argument_copy_time", Value::Ns(total.copies_ns))
        .field("other_driver_time", Value::Ns(total.other_ns))
        .field("between_driver_calls", Value::Ns(total.rest_ns))
        .field("launch_time", Value::Ns(total.launch_ns))
        .field("wait_time", Value::Ns(total.wait_ns))
        .field("share_of_wall", Value::Ratio(cx.share(runtime)));
    let mut parts = Vec::new();
    if total.allocation_calls > 0 {
        parts.push(format!(
            "allocates and frees device memory {:.1} times, {}",
            total.allocation_calls as f64 / n as f64,
            per(total.allocation_ns, n)
        ));
    }
    if total.copies_calls > 0 {
        parts.push(format!(
            "copies its small blocks (kernel arguments) {:.1} times, {}",
            total.copies_calls as f64 / n as f64,
            per(total.copies_ns, n)
        ));
    }
    if total.other_ns > 0 {
        parts.push(format!(
            "makes other driver calls, {}",
            per(total.other_ns, n)
        ));
    }
    parts.push(format!(
        "works between driver calls, {}",
        per(total.rest_ns, n)
    ));
    f.evidence.say(format!(
        "For each construct the runtime {} (the CUDA driver's timings; {:.0}% of the run's wall time in all).",
        parts.join("; "),
        100.0 * cx.share(runtime)
    ));
    f.evidence.say(format!(
        "Besides that, per construct: the launch call {} and the wait for the kernel {} (kernels {} on the device on average).",
        per(total.launch_ns, n),
        per(total.wait_ns, n),
        per(total.kernel_ns, n)
    ));
    let per_construct = runtime / n.max(1);
    let st = structure(cx, sites);
    for r in &st.refused {
        f.evidence.say(r.clone());
    }
    let mut text = Vec::new();
    let mut saving = 0u64;
    if !st.chains.is_empty() {
        let removed: u64 = st.chains.iter().map(|c| c.removed).sum();
        saving += per_construct.saturating_mul(removed);
        text.push(format!(
            "Fewer constructs: what the runtime spends is per construct ({per_c}), so each construct less saves it. {} ({removed} reaches in all go)",
            st.fusion_text(),
            per_c = units::duration_ns(per_construct)
        ));
    }
    for c in &st.copy_backs {
        saving += c.cost.runtime_ns() + c.cost.kernel_ns + c.cost.wait_ns;
        text.push(c.text(Some(&c.cost)));
    }
    if saving > 0 {
        f.saving_ns = Some(saving.min(total.host_ns));
    }
    if text.is_empty() {
        text.push(format!(
            "Fewer constructs: what the runtime spends is per construct ({}), so each construct less saves it: merge constructs that run one after another over the same data ({})",
            units::duration_ns(per_construct),
            if st.refused.is_empty() {
                "no neighbours over the same range were found in the sources read"
            } else {
                "the neighbours found are not proven fusable: see the evidence"
            }
        ));
    }
    let pairs = st.edits();
    let structural = !st.chains.is_empty() || !st.copy_backs.is_empty();
    let short = total.kernel_ns / n.max(1) < SHORT_KERNEL_NS;
    let mut edits = Vec::new();
    if short && 3 * total.wait_ns >= total.host_ns {
        let list: Vec<&LaunchSite> = sites.iter().map(|(ls, _)| *ls).collect();
        match queueing::verdict(cx, &list, at.cloned()) {
            Verdict::NoCure(said) => {
                f.evidence.say(said);
            }
            Verdict::Propose { said, plan, .. } => {
                for s in said {
                    f.evidence.say(s);
                }
                // The waits are the launch finding's (L5) to claim: this
                // finding's saving stays the runtime's per-construct work.
                // The patch goes with it only where no fusion is proposed,
                // so that the saving and the patch speak of the same change.
                let patch = if plan.edits.is_empty() || structural {
                    String::new()
                } else {
                    format!(" ({})", queueing::describe(&plan))
                };
                text.push(format!(
                    "queueing the constructs (`async(1)`, one `wait(1)` before the host runs anything else) would take the waits for the kernels ({} per construct) off the host, not the runtime's per-construct work above{patch}",
                    per(total.wait_ns, n)
                ));
                if !structural {
                    edits = plan.edits;
                }
            }
        }
    }
    if !pairs.is_empty() {
        edits = pairs;
    }
    f.proposal.text = format!("{}.", text.join("; "));
    f.proposal.no_patch = if edits.is_empty() {
        Some(st.no_patch())
    } else {
        None
    };
    f.proposal.edits = edits;
    f
}

/// A copy-back construct found in the sources, with its site's cost.
struct CopyBackAt {
    file: String,
    cb: CopyBack,
    cost: Cost,
}

impl CopyBackAt {
    fn text(&self, cost: Option<&Cost>) -> String {
        let name = short_name(&self.file);
        let claim = match cost {
            Some(c) => format!(
                ": that saves the copy-back's runtime per-construct work, its kernels and the waits for them ({})",
                units::duration_ns(c.runtime_ns() + c.kernel_ns + c.wait_ns)
            ),
            None => String::new(),
        };
        format!(
            "Copy-back: the construct at {name}:{} only copies {} into {}, which the construct before it ({name}:{}) reads; do not fuse them (the copy writes what other iterations of the first read): swap the two arrays instead of copying back (C: swap the pointers to {} and {}; Fortran: pointers or move_alloc, or two sweeps per iteration with the roles swapped) and drop the construct at {name}:{}{claim}",
            self.cb.line, self.cb.from, self.cb.into, self.cb.before, self.cb.into, self.cb.from, self.cb.line
        )
    }
}

/// Constructs to fuse, found in the sources, and the reaches fusing removes.
struct ChainAt {
    file: String,
    chain: Chain,
    removed: u64,
}

/// What the sources prove about the constructs of one host loop.
#[derive(Default)]
struct Structure {
    chains: Vec<ChainAt>,
    copy_backs: Vec<CopyBackAt>,
    /// Neighbours judged, fusable or not, with the reason.
    refused: Vec<String>,
}

impl Structure {
    fn fusion_text(&self) -> String {
        let names: Vec<String> = self
            .chains
            .iter()
            .map(|c| {
                let rest: Vec<String> =
                    c.chain.lines[1..].iter().map(|l| format!(":{l}")).collect();
                format!(
                    "{}:{} with {}",
                    short_name(&c.file),
                    c.chain.lines[0],
                    rest.join(", ")
                )
            })
            .collect();
        format!(
            "Fuse {} into one construct each (one loop, the bodies in order, the union of the data clauses, reductions kept): they follow each other over the same iteration space and no array one writes is read or written by another at another index",
            names.join("; ")
        )
    }

    fn edits(&self) -> Vec<crate::patch::Edit> {
        if self.chains.iter().any(|c| c.chain.no_patch.is_some()) {
            return Vec::new();
        }
        self.chains
            .iter()
            .flat_map(|c| c.chain.edits.iter().cloned())
            .collect()
    }

    fn no_patch(&self) -> String {
        if let Some(why) = self.chains.iter().find_map(|c| c.chain.no_patch.clone()) {
            return format!("fusion without a patch: {why}");
        }
        if !self.copy_backs.is_empty() {
            return "swapping arrays changes how the program names them: not a mechanical edit"
                .to_string();
        }
        "no constructs were proven fusable in the sources read".to_string()
    }
}

fn short_name(file: &str) -> &str {
    std::path::Path::new(file)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(file)
}

/// Registers a block of threads may hold on NVIDIA GPUs (64 K from Kepler
/// to Hopper), and the most a thread may take (the compiler spills
/// beyond): blocks of 256 threads or fewer always launch.
const REGISTERS_PER_BLOCK: u64 = 65536;
const REGISTERS_PER_THREAD: u64 = 255;

/// Why a fused kernel of these parts (each: the most registers a thread
/// its kernels took, and the threads of a block they ran with) may fail to
/// launch, if it may: the fused kernel holds the live values of both
/// bodies, up to their registers together (at most 255), and keeps the
/// launch's block
/// (the constructs' `num_workers` x `vector_length`); when that exceeds
/// what a block may hold the runtime refuses the launch ("insufficient
/// resources"), as NPB BT's fused `compute_rhs` did on an H200 with 16 x
/// 32 threads. Unknown counts (no CUPTI) say nothing.
fn may_not_launch(parts: &[(u32, u64)]) -> Option<String> {
    if parts.iter().any(|p| p.0 == 0 || p.1 == 0) {
        return None;
    }
    let regs: u64 = parts
        .iter()
        .map(|p| u64::from(p.0))
        .sum::<u64>()
        .min(REGISTERS_PER_THREAD);
    let threads = parts.iter().map(|p| p.1).max().unwrap_or(0);
    (regs * threads > REGISTERS_PER_BLOCK).then(|| {
        format!(
            "the fused kernel may need up to {regs} registers a thread (its parts took {}), and {threads} threads a block leave {} each, so its launch may be refused; fuse by hand with a smaller `num_workers` or `vector_length`, and check with --verify",
            parts
                .iter()
                .map(|p| p.0.to_string())
                .collect::<Vec<_>>()
                .join(" + "),
            REGISTERS_PER_BLOCK / threads
        )
    })
}

/// The compute constructs of `sites`, judged from the sources: chains that
/// fuse, copy-backs, and the neighbours refused with the reason.
fn structure(cx: &Context, sites: &[(&LaunchSite, Cost)]) -> Structure {
    let run = cx.run;
    let mut by_file: BTreeMap<&str, Vec<(u32, u64, Cost)>> = BTreeMap::new();
    for (ls, c) in sites {
        let s = run.site(ls.site);
        if let Some(l) = s.line {
            let reaches = c.constructs.max(ls.constructs.len() as u64);
            by_file
                .entry(s.file.as_str())
                .or_default()
                .push((l, reaches, *c));
        }
    }
    // Per source line: the most registers a thread its kernels took, and
    // the threads of a block they ran with (CUPTI), for the launch check.
    let mut launch: BTreeMap<(&str, u32), (u32, u64)> = BTreeMap::new();
    for (ls, _) in sites {
        let s = run.site(ls.site);
        let Some(l) = s.line else { continue };
        let regs = ls
            .kernels
            .iter()
            .map(|&k| run.kernel(k).registers)
            .max()
            .unwrap_or(0);
        let threads = ls
            .grid_block
            .map_or(0, |(_, b)| b.iter().map(|&d| u64::from(d.max(1))).product());
        launch.insert((s.file.as_str(), l), (regs, threads));
    }
    let mut out = Structure::default();
    for (file, lines) in by_file {
        let Some(src) = cx.sources.get(file) else {
            continue;
        };
        let at: Vec<u32> = lines.iter().map(|x| x.0).collect();
        let plan = fusion::plan(src, &at);
        let name = short_name(file);
        // Every neighbouring pair judged, in the order of the sources.
        let mut pairs: Vec<(u32, u32, String)> = plan.refused;
        pairs.extend(plan.fused);
        pairs.sort();
        for (a, b, why) in pairs {
            out.refused.push(format!("{name}:{a} and :{b}: {why}."));
        }
        for chain in plan.chains {
            let parts: Vec<(u32, u64)> = chain
                .lines
                .iter()
                .map(|l| launch.get(&(file, *l)).copied().unwrap_or((0, 0)))
                .collect();
            if let Some(why) = may_not_launch(&parts) {
                let (a, b) = (chain.lines[0], chain.lines[chain.lines.len() - 1]);
                out.refused.push(format!(
                    "{name}:{a} to :{b}: legal to fuse, but not proposed: {why}."
                ));
                continue;
            }
            let removed = chain.lines[1..]
                .iter()
                .filter_map(|l| lines.iter().find(|x| x.0 == *l).map(|x| x.1))
                .sum();
            out.chains.push(ChainAt {
                file: file.to_string(),
                chain,
                removed,
            });
        }
        for cb in plan.copy_backs {
            let cost = lines
                .iter()
                .find(|x| x.0 == cb.line)
                .map(|x| x.2)
                .unwrap_or_default();
            out.copy_backs.push(CopyBackAt {
                file: file.to_string(),
                cb,
                cost,
            });
        }
    }
    out
}

/// Without driver timings (host fallback, or ACCPROF_DRIVER=0) the
/// runtime's per-construct work is not measured, but what the sources
/// prove about a loop's many constructs is still said, with its patch and
/// no saving claimed.
fn untimed(cx: &Context, out: &mut Checked) {
    let mut loops: BTreeMap<(String, u32), Vec<(&LaunchSite, Cost)>> = BTreeMap::new();
    for ls in cx.launch_sites() {
        let Some(key) = super::context::repeating_loop(cx, ls.site) else {
            continue;
        };
        let c = Cost {
            constructs: ls.constructs.len() as u64,
            host_ns: ls.host_ns,
            ..Cost::default()
        };
        loops.entry(key).or_default().push((ls, c));
    }
    for ((file, line), sites) in loops {
        let n: u64 = sites.iter().map(|(_, c)| c.constructs).sum();
        if n < MIN_CONSTRUCTS || sites.len() < 2 {
            continue;
        }
        let st = structure(cx, &sites);
        if st.chains.is_empty() && st.copy_backs.is_empty() {
            continue;
        }
        let mut f = Finding::new(
            "R1",
            Category::Launch,
            format!(
                "constructs that could be fewer in the loop at {file}:{line}: {} compute constructs ({n} reaches); the runtime's per-construct work is not measured (no CUDA driver timings)",
                sites.len()
            ),
        );
        f.confidence = Confidence::Likely;
        f.locations.push(cx.loop_location(&file, line));
        for (ls, _) in &sites {
            f.subjects.constructs.extend(ls.constructs.iter().copied());
        }
        f.evidence
            .field("constructs", Value::Count(n))
            .field("sites", Value::Count(sites.len() as u64));
        f.evidence.say("The trace holds no CUDA driver timings (the program ran on the host, or was recorded with ACCPROF_DRIVER=0): no saving is claimed.".to_string());
        for r in &st.refused {
            f.evidence.say(r.clone());
        }
        let mut text = Vec::new();
        if !st.chains.is_empty() {
            let removed: u64 = st.chains.iter().map(|c| c.removed).sum();
            text.push(format!(
                "{} ({removed} reaches in all go)",
                st.fusion_text()
            ));
        }
        for c in &st.copy_backs {
            text.push(c.text(None));
        }
        f.proposal.text = format!("{}.", text.join("; "));
        f.proposal.edits = st.edits();
        if f.proposal.edits.is_empty() {
            f.proposal.no_patch = Some(st.no_patch());
        }
        out.findings.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::may_not_launch;

    /// NPB BT's pair on an H200: two kernels of 72 and 64 registers in
    /// blocks of 16 x 32 threads; fused they may need 136, more than the
    /// 128 that 512 threads leave. SP's chain of eight (436 registers
    /// together, capped at 255) in blocks of 8 x 32 threads always
    /// launches (it ran fused on the H200), and without register counts
    /// nothing is said.
    #[test]
    fn a_fusion_whose_kernel_may_not_launch_is_said() {
        let why = may_not_launch(&[(72, 512), (64, 512)]).expect("too many registers");
        assert!(
            why.contains("136 registers") && why.contains("leave 128"),
            "{why}"
        );
        let sp = [40, 54, 64, 38, 48, 40, 80, 72].map(|r| (r, 256));
        assert_eq!(may_not_launch(&sp), None);
        assert_eq!(may_not_launch(&[(0, 512), (64, 512)]), None);
    }
}
