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

use super::queueing::{self, Verdict};
use super::{Checked, Context, LaunchSite};
use crate::findings::{Category, Confidence, Finding, Value};
use crate::ledger::{Part, SiteLedger};
use crate::units;

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
        let key = super::repeating_loop(cx, ls.site);
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
    let pairs = fusable_neighbours(cx, sites);
    let mut text = Vec::new();
    if !pairs.is_empty() {
        let removed: u64 = pairs.iter().map(|p| p.3).sum();
        f.saving_ns = Some(per_construct.saturating_mul(removed).min(runtime));
        let names: Vec<String> = pairs
            .iter()
            .map(|(file, a, b, _)| {
                let name = std::path::Path::new(file)
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or(file);
                format!("{name}:{a} and :{b}")
            })
            .collect();
        text.push(format!(
            "Fewer constructs: what the runtime spends is per construct ({per_c}), so each construct less saves it. Neighbouring constructs loop over the same range: {} ({} reaches in all could go); fuse each pair into one construct (one loop, both bodies) where the second does not read what another iteration of the first writes",
            names.join(", "),
            removed,
            per_c = units::duration_ns(per_construct)
        ));
    } else {
        text.push(format!(
            "Fewer constructs: what the runtime spends is per construct ({}), so each construct less saves it: merge constructs that run one after another over the same data (no neighbours over the same range were found in the sources read)",
            units::duration_ns(per_construct)
        ));
    }
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
                let patch = if plan.edits.is_empty() || !pairs.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", queueing::describe(&plan))
                };
                text.push(format!(
                    "queueing the constructs (`async(1)`, one `wait(1)` before the host runs anything else) would take the waits for the kernels ({} per construct) off the host, not the runtime's per-construct work above{patch}",
                    per(total.wait_ns, n)
                ));
                if pairs.is_empty() {
                    edits = plan.edits;
                }
            }
        }
    }
    f.proposal.text = format!("{}.", text.join("; "));
    f.proposal.no_patch = if edits.is_empty() {
        Some("fusing constructs changes the program's structure: not a mechanical edit".to_string())
    } else {
        None
    };
    f.proposal.edits = edits;
    f
}

/// Pairs of compute constructs of `sites` that follow each other in one
/// function with nothing but their blocks between them and loop over the
/// same range (the same loop header after the directive, spaces aside):
/// (file, first line, second line, reaches of the second).
fn fusable_neighbours<'a>(
    cx: &'a Context,
    sites: &[(&LaunchSite, Cost)],
) -> Vec<(&'a str, u32, u32, u64)> {
    let run = cx.run;
    let mut by_file: BTreeMap<&'a str, Vec<(u32, u64)>> = BTreeMap::new();
    for (ls, c) in sites {
        let s = run.site(ls.site);
        if let Some(l) = s.line {
            by_file
                .entry(s.file.as_str())
                .or_default()
                .push((l, c.constructs));
        }
    }
    let mut out = Vec::new();
    for (file, mut lines) in by_file {
        let Some(src) = cx.sources.get(file) else {
            continue;
        };
        lines.sort_unstable();
        for w in lines.windows(2) {
            let ((a, _), (b, reaches)) = (w[0], w[1]);
            let (Some(da), Some(db)) = (src.directive_at(a), src.directive_at(b)) else {
                continue;
            };
            let (Some((fa, la, ca)), Some((fb, _, _))) = (src.block_of(&da), src.block_of(&db))
            else {
                continue;
            };
            // Nothing but blank lines, comments and braces between them.
            let after = ca.unwrap_or(la) + 1;
            let between_ok = (after..db.line).all(|n| {
                let t = src.line(n).trim();
                t.is_empty() || t.starts_with("//") || t.starts_with('!') || t == "{" || t == "}"
            });
            let header =
                |n: u32| -> String { src.line(n).chars().filter(|c| !c.is_whitespace()).collect() };
            if between_ok
                && header(fa) == header(fb)
                && src.function_at(a).map(|f| f.name) == src.function_at(b).map(|f| f.name)
            {
                out.push((file, a, b, reaches));
            }
        }
    }
    out
}
