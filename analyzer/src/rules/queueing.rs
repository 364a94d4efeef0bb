//! The async-queue proposal of L5 and R1: what queueing their constructs
//! would save in this run, and the patch
//! ([`crate::proposals::queue`]).
//!
//! Queueing saves the host's waits for the kernels that no longer need
//! waiting, less what the runtime charges more for an async construct than
//! for a synchronous one. A run with async constructs shows that charge:
//! the async constructs' host time per construct against the synchronous
//! ones' host time less their waits. The net per construct is then the
//! synchronous host time less the async one (the wait cancels out). A run
//! without them shows nothing of it: the saving is not estimated, and
//! what was measured for the runtime elsewhere is quoted
//! ([`crate::runtime_facts`]).

use crate::ledger::Part;
use crate::proposals::queue::{self, At, QueuePlan};
use crate::runtime_facts::{self, Topic};
use crate::units;

use super::context::{Context, LaunchSite};

/// Async sites with fewer constructs than this say too little of the cost.
const MIN_ASYNC: usize = 100;

/// What to say about queueing a set of synchronous constructs.
pub(crate) enum Verdict {
    /// The run's async constructs cost the host more than queueing would
    /// save: the sentence says so. No proposal, no patch.
    NoCure(String),
    /// Propose it: the net saving (None: not estimated), the sentences
    /// that back it, and the patch's plan.
    Propose {
        saving_ns: Option<u64>,
        said: Vec<String>,
        plan: QueuePlan,
    },
}

/// The verdict on queueing the constructs of `sites`; `host_loop` is the
/// loop that repeats them.
pub(crate) fn verdict(cx: &Context, sites: &[&LaunchSite], host_loop: Option<At>) -> Verdict {
    verdict_with(cx, sites, sites, host_loop)
}

/// As [`verdict`], with the patch planned over `plan_over` (`sites` and the
/// other synchronous constructs the same host loop repeats: queueing one of
/// them alone leaves no place for a single wait when the loop calls the
/// others), while the estimate stays about `sites`.
pub(crate) fn verdict_with(
    cx: &Context,
    sites: &[&LaunchSite],
    plan_over: &[&LaunchSite],
    host_loop: Option<At>,
) -> Verdict {
    let run = cx.run;
    let named: Vec<At> = plan_over
        .iter()
        .filter_map(|ls| {
            let s = run.site(ls.site);
            Some((s.file.clone(), s.line?))
        })
        .collect();
    let plan = queue::plan(cx.sources, &named, host_loop.as_ref());
    // The estimate is about the constructs the patch queues (all of them
    // when it queues none).
    let queued: Vec<&LaunchSite> = sites
        .iter()
        .copied()
        .filter(|ls| {
            let s = run.site(ls.site);
            s.line
                .is_some_and(|l| plan.queued.contains(&(s.file.clone(), l)))
        })
        .collect();
    let queued = if queued.is_empty() {
        sites.to_vec()
    } else {
        queued
    };
    let n: u64 = queued.iter().map(|ls| ls.constructs.len() as u64).sum();
    let host: u64 = queued.iter().map(|ls| ls.host_ns).sum();
    let ledger = run.ledger();
    let wait: Option<u64> = ledger.timed.then(|| {
        queued
            .iter()
            .filter_map(|ls| ledger.site(ls.site))
            .map(|s| s.parts.ns(Part::Wait))
            .sum()
    });
    let asyncs: Vec<&LaunchSite> = cx
        .launch_sites()
        .iter()
        .filter(|o| o.asynchronous && o.constructs.len() >= MIN_ASYNC)
        .collect();
    let mut said = Vec::new();
    let saving_ns = if asyncs.is_empty() || n == 0 {
        said.push("This run has no async construct, so it shows nothing of what the runtime charges for one: the saving is not estimated; `accprof analyze --verify` measures it.".to_string());
        if let Some(f) = runtime_facts::about(run, Topic::AsyncLaunch) {
            said.push(format!(
                "With {} it was measured on {}: {}; so the patch is offered for measurement, not as a saving.",
                f.name, f.measured_on, f.text
            ));
        }
        None
    } else {
        let a_n: u64 = asyncs.iter().map(|o| o.constructs.len() as u64).sum();
        let a_host: u64 = asyncs.iter().map(|o| o.host_ns).sum();
        let a_per = a_host / a_n.max(1);
        let per = host / n;
        let places: Vec<String> = asyncs
            .iter()
            .map(|o| cx.location("construct", Some(o.site), None).place())
            .collect();
        let waiting = match wait {
            Some(w) => format!(
                ", {} of it waiting for the kernel",
                units::duration_ns(w / n)
            ),
            None => String::new(),
        };
        let net = host as i128 - i128::from(a_per) * i128::from(n);
        if net <= 0 {
            return Verdict::NoCure(format!(
                "An async queue is no cure in this run: the async construct{} at {} cost {} of host time per construct, more than the {} here{waiting}: what queueing would save in waits the runtime charges again for each async construct.",
                if places.len() == 1 { "" } else { "s" },
                places.join(", "),
                units::duration_ns(a_per),
                units::duration_ns(per)
            ));
        }
        let net = u64::try_from(net).unwrap_or(u64::MAX);
        said.push(format!(
            "Queueing saves the host's waits less what the runtime charges per async construct: this run's async construct{} at {} cost {} of host time per construct against {} here{waiting}; about {} for the {n} constructs queued.",
            if places.len() == 1 { "" } else { "s" },
            places.join(", "),
            units::duration_ns(a_per),
            units::duration_ns(per),
            units::duration_ns(net)
        ));
        Some(net)
    };
    if !plan.edits.is_empty() && !plan.notes.is_empty() {
        said.push(format!("Left as they are: {}.", plan.notes.join("; ")));
    }
    Verdict::Propose {
        saving_ns,
        said,
        plan,
    }
}

/// What the patch of `plan` does, as a clause: "the patch adds `async(1)`
/// to small_kernels.c:72, :75 and `wait(1)` after line 80".
pub(crate) fn describe(plan: &QueuePlan) -> String {
    fn places(v: &[At]) -> String {
        let mut out: Vec<String> = Vec::new();
        let mut last: Option<&str> = None;
        for (file, line) in v {
            if last == Some(file.as_str()) {
                out.push(format!(":{line}"));
            } else {
                let name = std::path::Path::new(file)
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or(file);
                out.push(format!("{name}:{line}"));
                last = Some(file);
            }
        }
        out.join(", ")
    }
    let after = match &plan.host_loop {
        Some(lp) if plan.waits.len() == 1 => format!(
            "after the host loop at {}",
            places(std::slice::from_ref(lp))
        ),
        _ => format!("after {}", places(&plan.waits)),
    };
    format!(
        "the patch adds `async(1)` to {} and `wait(1)` {after}",
        places(&plan.queued)
    )
}
