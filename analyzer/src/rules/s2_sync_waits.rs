//! S2: synchronous waits. Time the host spends in `wait` directives (and
//! `acc_wait` calls) blocked on the device, when it is a real share of the
//! run: overlapping that time with host work needs `async` queues and a
//! later wait.
//!
//! Evidence needed: wait events (acc_prof), or `acc_wait` / `acc_wait_all`
//! calls (interposed by the collector). GCC's libgomp sends no wait events,
//! so under GCC a program that only uses `wait` directives is not checked,
//! and the rule says so.

use crate::findings::{Category, Confidence, Finding, Value};
use crate::model::{group_by, ConstructClass, Run};
use crate::units;

use super::context::{Checked, Context};

/// A `wait` directive, or a call of an API routine that blocks until
/// queues finish (not the `_async` forms, which only queue the wait).
fn blocks_on_the_device(run: &Run, class: ConstructClass) -> bool {
    match class {
        ConstructClass::Wait => true,
        ConstructClass::ApiCall(r) => matches!(
            run.routine(r),
            "acc_wait" | "acc_wait_all" | "acc_async_wait" | "acc_async_wait_all"
        ),
        _ => false,
    }
}

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let run = cx.run;
    let (ids, waits): (Vec<_>, Vec<_>) = run
        .top_level_constructs()
        .filter(|&id| blocks_on_the_device(run, run.construct_class(id)))
        .map(|id| (id, run.construct(id)))
        .unzip();
    if waits.is_empty() {
        if run.runtime_is_libgomp() {
            out.note("S2 (synchronous waits) not checked: GCC's libgomp sends no wait events");
        }
        return out;
    }
    // The collector's own time inside a wait (hashing what a download
    // brought back) is not the program's.
    let total: u64 = waits.iter().filter_map(|c| run.program_host_ns(c)).sum();
    if cx.share(total) < cx.opts.min_share {
        return out;
    }
    let mut f = Finding::new(
        "S2",
        Category::Synchronization,
        format!(
            "host blocked {} in waits for the device",
            units::duration_ns(total)
        ),
    );
    f.confidence = Confidence::Certain;
    f.cost_ns = Some(total);
    let mut by_site = group_by(
        waits
            .iter()
            .map(|c| (c.site, run.program_host_ns(c).unwrap_or(0))),
    );
    by_site.sort_by_key(|(_, t)| std::cmp::Reverse(t.iter().sum::<u64>()));
    for (site, times) in by_site.iter().take(3) {
        let mut loc = cx.location("wait", Some(*site), None);
        loc.role = format!(
            "wait ({} times, {})",
            times.len(),
            units::duration_ns(times.iter().sum())
        );
        f.locations.push(loc);
    }
    f.subjects.constructs = ids;
    f.evidence.field("waits", Value::Count(waits.len() as u64));
    f.evidence.field("wait_time", Value::Ns(total));
    f.evidence.say(format!(
        "{:.0}% of the wall time is spent waiting for the device.",
        100.0 * cx.share(total)
    ));
    f.evidence.say("How much of it could overlap depends on host work that does not need the results; the saving is not estimated.");
    f.proposal.text = "Launch the device work with `async(q)` and move the `wait(q)` to the point where the host needs the results, doing independent host work in between.".into();
    out.findings.push(f);
    out
}

#[cfg(test)]
mod tests {
    use accprof_trace::HashMode;

    use super::*;
    use crate::testkit::runs::{run_rule, RunBuilder};

    #[test]
    fn long_waits() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 9);
        let w = b.open(ConstructClass::Wait, s, None);
        b.t += 1_000_000;
        b.close(w);
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        assert!(c.findings[0].cost_ns.unwrap_or(0) >= 1_000_000);
    }

    #[test]
    fn acc_wait_calls_count_and_their_async_forms_do_not() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 12);
        for (name, ns) in [("acc_wait", 50_000_000), ("acc_wait_async", 20_000_000)] {
            let r = b.routine(name);
            let w = b.open(ConstructClass::ApiCall(r), s, None);
            b.t += ns;
            b.close(w);
        }
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        let cost = c.findings[0].cost_ns.unwrap_or(0);
        assert!((50_000_000..70_000_000).contains(&cost), "{cost}");
        // About the blocking call only.
        let first = run.constructs().map(|(id, _)| id).next();
        assert_eq!(
            c.findings[0].subjects.constructs,
            first.into_iter().collect::<Vec<_>>()
        );
    }

    #[test]
    fn libgomp_has_no_wait_events() {
        let b = RunBuilder::new(HashMode::Off);
        let run = b.build();
        let c = run_rule(&run, check);
        assert!(c.notes[0].contains("libgomp"));
    }
}
