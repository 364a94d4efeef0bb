//! S3: GPU idle gaps. Between the first and the last device activity
//! (kernels and copies), stretches longer than `min_gap_ns` in which the
//! device did nothing: the device waited for the host. Shorter gaps are the
//! normal cost of launching. Reported when the gaps add up to `min_share`
//! of the wall time; located at the construct whose device work ended each
//! gap (what the device was waiting for).
//!
//! Evidence needed: CUPTI kernel and memcpy records.

use super::{group_by, Checked, Context};
use crate::findings::{Category, Confidence, Finding, Value};
use crate::model::{ConstructId, KernelId, TransferId};
use crate::units;

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let run = cx.run;
    if !run.cupti_active() {
        out.note("S3 (GPU idle gaps) not checked: device activity needs CUPTI");
        return out;
    }
    // Device activity intervals with the construct that caused them.
    let mut acts: Vec<(u64, u64, Option<ConstructId>, Activity)> = run
        .kernels()
        .map(|(id, k)| (k.start_ns, k.end_ns, k.construct, Activity::Kernel(id)))
        .chain(
            run.transfers()
                .map(|(id, c)| (c.start_ns, c.end_ns, c.construct, Activity::Transfer(id))),
        )
        .collect();
    acts.sort_by_key(|a| a.0);
    // (length, the construct after the gap, the activity that ended it)
    let mut gaps: Vec<(u64, Option<ConstructId>, Activity)> = Vec::new();
    let mut busy_until: Option<u64> = None;
    for &(s, e, c, what) in &acts {
        if let Some(b) = busy_until {
            if s > b && s - b >= cx.opts.min_gap_ns {
                gaps.push((s - b, c.map(|c| run.top_level(c)), what));
            }
        }
        busy_until = Some(busy_until.map_or(e, |b| b.max(e)));
    }
    let total: u64 = gaps.iter().map(|g| g.0).sum();
    if gaps.is_empty() || cx.share(total) < cx.opts.min_share {
        return out;
    }
    let mut f = Finding::new(
        "S3",
        Category::Synchronization,
        format!(
            "GPU idle {} in {} gaps longer than {}",
            units::duration_ns(total),
            gaps.len(),
            units::duration_ns(cx.opts.min_gap_ns)
        ),
    );
    f.confidence = Confidence::Certain;
    f.cost_ns = Some(total);
    let mut by_site = group_by(
        gaps.iter()
            .map(|(d, c, _)| (c.map(|c| run.line_site(c)), *d)),
    );
    by_site.sort_by_key(|(_, t)| std::cmp::Reverse(t.iter().sum::<u64>()));
    for (site, times) in by_site.iter().take(3) {
        let mut loc = cx.location("after the gap", *site, None);
        loc.role = format!(
            "before this construct: {} gaps, {}",
            times.len(),
            units::duration_ns(times.iter().sum())
        );
        f.locations.push(loc);
    }
    for &(_, c, what) in &gaps {
        f.subjects.constructs.extend(c);
        match what {
            Activity::Kernel(k) => f.subjects.kernels.push(k),
            Activity::Transfer(t) => f.subjects.transfers.push(t),
        }
    }
    f.evidence.field("gaps", Value::Count(gaps.len() as u64));
    f.evidence.field("idle_time", Value::Ns(total));
    f.evidence.field(
        "largest_gap",
        Value::Ns(gaps.iter().map(|g| g.0).max().unwrap_or(0)),
    );
    f.evidence.say(format!(
        "{:.0}% of the wall time the device sat idle waiting for the host to reach the next construct.",
        100.0 * cx.share(total)
    ));
    f.evidence.say("Part of this is host time in the runtime itself (staging pageable copies, allocating); the saving is not estimated.");
    f.proposal.text = "Look at the host code before these constructs: move that work to the device, or overlap it with device work through `async` queues.".into();
    out.findings.push(f);
    out
}

/// The device activity that ended a gap.
#[derive(Clone, Copy)]
enum Activity {
    Kernel(KernelId),
    Transfer(TransferId),
}

#[cfg(test)]
mod tests {
    use accprof_trace::HashMode;

    use super::*;
    use crate::testkit::runs::{run_rule, RunBuilder};

    #[test]
    fn host_work_between_kernels() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 2);
        let t = b.site("a.c", 7);
        b.gcc_compute(s, &[], 1_000_000, 100, &[]);
        b.t += 5_000_000; // host work
        let second = b.gcc_compute(t, &[], 1_000_000, 100, &[]);
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        assert_eq!(c.findings[0].locations[0].line, Some(7));
        // About the construct after the gap and the kernel that ended it.
        let f = &c.findings[0];
        assert_eq!(f.subjects.constructs, [second]);
        assert_eq!(f.subjects.kernels, run.kernels_of(second));
    }

    #[test]
    fn launch_overhead_is_not_idleness() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 2);
        for _ in 0..10 {
            b.gcc_compute(s, &[], 1_000_000, 100, &[]);
        }
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }
}
