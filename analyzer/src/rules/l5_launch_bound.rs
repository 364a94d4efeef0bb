//! L5: launch-bound constructs. A construct whose kernels are short spends
//! most of its host time on the launch itself (the runtime's bookkeeping,
//! the launch, and for a synchronous construct the wait): thousands of
//! such launches cost far more host time than device time.
//!
//! Evidence: the host time of the compute constructs at one site against
//! their kernels' device time (CUPTI), the number of launches, and the
//! share of the run's wall time. Proposals from the source and the run:
//! an async queue with one wait (unless this run shows async launches
//! costing more), fusing with neighbouring constructs in the same host
//! loop, more work per launch.

use crate::findings::{Category, Confidence, Finding, Value};
use crate::ledger::Part;
use crate::units;

use super::context::{Checked, Context};
use super::queueing::{self, Verdict};

/// Fewer launches than this at a site are not a storm.
const MIN_LAUNCHES: u64 = 100;
/// Host time must be at least this many times the device time.
const MIN_RATIO: u64 = 3;
/// Kernels shorter than this on average are "little work per launch".
const SHORT_KERNEL_NS: u64 = 20_000;

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let sites = cx.launch_sites();
    let ledger = cx.run.ledger();
    let mut reported = Vec::new();
    for ls in sites {
        let launches = ls.kernels.len() as u64;
        if launches < MIN_LAUNCHES || ls.host_ns < MIN_RATIO * ls.device_ns.max(1) {
            continue;
        }
        // Constructs that move the program's data spend their host time on
        // it: the data findings claim that time, with the host's part.
        if ls.moves_data() {
            continue;
        }
        let per_host = ls.host_ns / launches;
        let per_device = ls.device_ns / launches;
        // What launching costs: with the driver's timings, the launch calls
        // and, for short kernels, the waits for them; the runtime's other
        // per-construct work is not the launches'. Without them, the host
        // time beyond the kernels.
        let timed = if ledger.timed {
            ledger.site(ls.site)
        } else {
            None
        };
        let over = match timed {
            Some(s) => {
                let wait = if per_device < SHORT_KERNEL_NS {
                    s.parts.ns(Part::Wait)
                } else {
                    0
                };
                s.parts.ns(Part::Launch) + wait
            }
            None => ls.host_ns - ls.device_ns,
        };
        if cx.share(over) < cx.opts.min_share {
            continue;
        }
        reported.push(ls.site);
        let here = cx.location("construct", Some(ls.site), None);
        let mut f = Finding::new(
            "L5",
            Category::Launch,
            format!(
                "launch-bound construct at {}: {launches} launches took {} of host time around {} of kernels ({} against {} per launch)",
                here.place(),
                units::duration_ns(ls.host_ns),
                units::duration_ns(ls.device_ns),
                units::duration_ns(per_host),
                units::duration_ns(per_device)
            ),
        );
        f.confidence = Confidence::Certain;
        f.cost_ns = Some(over);
        f.locations.push(here.clone());
        f.subjects.constructs = ls.constructs.clone();
        f.subjects.kernels = ls.kernels.clone();
        f.evidence
            .field("launches", Value::Count(launches))
            .field("host_time", Value::Ns(ls.host_ns))
            .field("device_time", Value::Ns(ls.device_ns))
            .field("host_per_launch", Value::Ns(per_host))
            .field("device_per_launch", Value::Ns(per_device))
            .field("share_of_wall", Value::Ratio(cx.share(ls.host_ns)));
        match timed {
            Some(s) => {
                f.evidence
                    .field("launch_calls_time", Value::Ns(s.parts.ns(Part::Launch)))
                    .field("wait_time", Value::Ns(s.parts.ns(Part::Wait)));
                f.evidence.say(format!(
                    "The CUDA driver's timings: the launch calls took {} and the host waited {} for these short kernels ({:.0}% of the run's wall time together); the rest of the constructs' host time is the runtime's own per-construct work ({} of allocation and free, {} of copies, {} between driver calls).",
                    units::duration_ns(s.parts.ns(Part::Launch)),
                    units::duration_ns(s.parts.ns(Part::Wait)),
                    100.0 * cx.share(over),
                    units::duration_ns(s.parts.ns(Part::Allocation)),
                    units::duration_ns(s.parts.ns(Part::Transfer)),
                    units::duration_ns(s.runtime_rest_ns())
                ));
            }
            None => {
                f.evidence.say(format!(
                "The constructs here spent {} on the host beyond their kernels' {} on the device ({:.0}% of the run's wall time): the launches, not the kernels, cost the time.",
                units::duration_ns(over),
                units::duration_ns(ls.device_ns),
                100.0 * cx.share(ls.host_ns)
                ));
            }
        }
        let mut proposals = Vec::new();
        let site = cx.run.site(ls.site);
        let src = cx.sources.get(&site.file);
        let host_loop = site
            .line
            .and_then(|l| src.and_then(|s| s.enclosing_loops(l).first().copied().cloned()));
        if let Some(lp) = &host_loop {
            let mut l = here.clone().source_line(lp.header_line);
            l.role = "host loop".into();
            f.locations.push(l);
        }
        // Neighbours: other compute sites of the same file in the same host loop.
        let neighbours: Vec<u32> = match &host_loop {
            Some(lp) => sites
                .iter()
                .filter(|o| o.site != ls.site)
                .map(|o| cx.run.site(o.site))
                .filter(|s| s.file == site.file)
                .filter_map(|s| s.line)
                .filter(|&l| lp.header_line < l && l <= lp.end_line)
                .collect(),
            None => Vec::new(),
        };
        if !neighbours.is_empty() {
            let lines: Vec<String> = neighbours.iter().map(|l| l.to_string()).collect();
            proposals.push(format!(
                "fuse it with the compute construct{} at line {} in the same host loop, so that each iteration launches once",
                if lines.len() == 1 { "" } else { "s" },
                lines.join(", ")
            ));
        }
        if per_device < SHORT_KERNEL_NS {
            proposals.push(format!(
                "give each launch more work: each kernel ran {} on the device; a larger trip count per launch (several {} in one construct, as an inner `seq` loop) divides the launch cost",
                units::duration_ns(per_device),
                match &host_loop {
                    Some(lp) => format!("iterations of the host loop at line {}", lp.header_line),
                    None => "calls".to_string(),
                }
            ));
        }
        let mut edits = Vec::new();
        let mut why_no_patch = None;
        if !ls.asynchronous {
            let host_key = super::context::repeating_loop(cx, ls.site);
            // The other synchronous constructs the same loop repeats: the
            // patch queues them too, or it finds no place for one wait.
            let siblings: Vec<&super::context::LaunchSite> = match &host_key {
                Some(key) => sites
                    .iter()
                    .filter(|o| {
                        o.site == ls.site
                            || (!o.asynchronous
                                && !o.kernels.is_empty()
                                && !o.moves_data()
                                && super::context::repeating_loop(cx, o.site).as_ref() == Some(key))
                    })
                    .collect(),
                None => vec![ls],
            };
            match queueing::verdict_with(cx, &[ls], &siblings, host_key) {
                Verdict::NoCure(said) => {
                    f.evidence.say(said);
                }
                Verdict::Propose {
                    saving_ns,
                    said,
                    plan,
                } => {
                    for s in said {
                        f.evidence.say(s);
                    }
                    f.saving_ns = saving_ns.map(|s| s.min(over));
                    let how = if plan.edits.is_empty() {
                        why_no_patch = Some(format!(
                            "no place for one wait was found that nothing else runs before: {}",
                            plan.notes.join("; ")
                        ));
                        match &host_loop {
                            Some(lp) => {
                                format!(" after the host loop ending at line {}", lp.end_line)
                            }
                            None => String::new(),
                        }
                    } else {
                        String::new()
                    };
                    let patch = if plan.edits.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", queueing::describe(&plan))
                    };
                    proposals.insert(
                        0,
                        format!(
                            "launch it on an async queue (`async(1)`) and wait once{how} (`wait(1)`), so that the host does not wait for every kernel{patch}"
                        ),
                    );
                    edits = plan.edits;
                }
            }
        }
        if proposals.is_empty() {
            proposals.push("launch less often: fewer, larger kernels".to_string());
        }
        f.proposal.text = format!("{}.", capitalize(&proposals.join("; or ")));
        f.proposal.no_patch = if edits.is_empty() {
            Some(why_no_patch.unwrap_or_else(|| {
                "fusing loops or batching work changes the program's structure: not a mechanical edit"
                    .to_string()
            }))
        } else {
            None
        };
        f.proposal.edits = edits;
        // No `measure:` line: `accprof tune` times the kernels on the
        // device, and the cost here is the host's around them. A sweep of
        // gangs, or an async variant, would time the same kernels and say
        // nothing of the launches.
        f.proposal.tune = None;
        out.findings.push(f);
    }
    if ledger.timed {
        out.findings.extend(loops(cx, &reported));
    }
    out
}

/// Launch-bound loops: the short-kernel constructs one host loop repeats
/// (through the call chains), none launch-bound alone, whose launch calls
/// and waits together cost `min_share` of the wall time or more.
fn loops(cx: &Context, reported: &[crate::model::SiteId]) -> Vec<Finding> {
    use std::collections::BTreeMap;
    let ledger = cx.run.ledger();
    type Site<'a> = (&'a super::context::LaunchSite, u64, u64);
    let mut by_loop: BTreeMap<(String, u32), Vec<Site>> = BTreeMap::new();
    for ls in cx.launch_sites() {
        let launches = ls.kernels.len() as u64;
        if launches == 0 || reported.contains(&ls.site) || ls.moves_data() {
            continue;
        }
        if ls.device_ns / launches >= SHORT_KERNEL_NS {
            continue;
        }
        let Some(s) = ledger.site(ls.site) else {
            continue;
        };
        let Some(key) = super::context::repeating_loop(cx, ls.site) else {
            continue;
        };
        by_loop.entry(key).or_default().push((
            ls,
            s.parts.ns(Part::Launch),
            s.parts.ns(Part::Wait),
        ));
    }
    let mut out = Vec::new();
    for ((file, line), sites) in by_loop {
        let launch: u64 = sites.iter().map(|s| s.1).sum();
        let wait: u64 = sites.iter().map(|s| s.2).sum();
        let launches: u64 = sites.iter().map(|s| s.0.kernels.len() as u64).sum();
        let device: u64 = sites.iter().map(|s| s.0.device_ns).sum();
        let cost = launch + wait;
        if sites.len() < 2 || launches < MIN_LAUNCHES || cx.share(cost) < cx.opts.min_share {
            continue;
        }
        let mut f = Finding::new(
            "L5",
            Category::Launch,
            format!(
                "launch-bound loop at {file}:{line}: its {} compute constructs launched {launches} short kernels ({} on the device per launch); the launch calls took {} and the host waited {} for them",
                sites.len(),
                units::duration_ns(device / launches.max(1)),
                units::duration_ns(launch),
                units::duration_ns(wait)
            ),
        );
        f.confidence = Confidence::Certain;
        f.cost_ns = Some(cost);
        f.locations.push(cx.loop_location(&file, line));
        for (ls, ..) in &sites {
            f.locations
                .push(cx.location("construct", Some(ls.site), None));
            f.subjects.constructs.extend(ls.constructs.iter().copied());
            f.subjects.kernels.extend(ls.kernels.iter().copied());
        }
        f.evidence
            .field("launches", Value::Count(launches))
            .field("sites", Value::Count(sites.len() as u64))
            .field("launch_calls_time", Value::Ns(launch))
            .field("wait_time", Value::Ns(wait))
            .field("device_time", Value::Ns(device))
            .field("share_of_wall", Value::Ratio(cx.share(cost)));
        f.evidence.say(format!(
            "No construct here is launch-bound alone, but together the launch calls and the waits for these short kernels took {:.0}% of the run's wall time (the CUDA driver's timings); the runtime's other per-construct work is not counted here.",
            100.0 * cx.share(cost)
        ));
        let list: Vec<&super::context::LaunchSite> = sites.iter().map(|s| s.0).collect();
        match queueing::verdict(cx, &list, Some((file.clone(), line))) {
            Verdict::NoCure(said) => {
                f.evidence.say(said);
                f.proposal.text = "Give each launch more work (fewer, larger kernels).".to_string();
                f.proposal.no_patch = Some(
                    "batching work changes the program's structure: not a mechanical edit"
                        .to_string(),
                );
            }
            Verdict::Propose {
                saving_ns,
                said,
                plan,
            } => {
                for s in said {
                    f.evidence.say(s);
                }
                f.saving_ns = saving_ns.map(|s| s.min(cost));
                if plan.edits.is_empty() {
                    f.proposal.text = format!(
                        "Launch them on one async queue (`async(1)`) and wait once (`wait(1)`) where the host next needs their results, so that the host does not wait for every kernel ({} of waits); or give each launch more work (fewer, larger kernels).",
                        units::duration_ns(wait)
                    );
                    f.proposal.no_patch = Some(format!(
                        "no constructs here follow each other with nothing else between them, and the loop runs more than them: {}",
                        plan.notes.join("; ")
                    ));
                } else {
                    f.proposal.text = format!(
                        "Launch them on one async queue (`async(1)`) and wait once (`wait(1)`) before the host runs anything else, so that the host does not wait for every kernel ({} of waits): {}; or give each launch more work (fewer, larger kernels).",
                        units::duration_ns(wait),
                        queueing::describe(&plan)
                    );
                    f.proposal.edits = plan.edits;
                }
            }
        }
        out.push(f);
    }
    out
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
