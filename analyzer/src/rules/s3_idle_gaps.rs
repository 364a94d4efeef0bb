//! S3: GPU idle gaps. Between the first and the last device activity
//! (kernels and copies), stretches longer than `min_gap_ns` in which the
//! device did nothing: the device waited for the host. Shorter gaps are the
//! normal cost of launching. Reported when the gaps add up to `min_share`
//! of the wall time; located at the construct whose device work ended each
//! gap (what the device was waiting for).
//!
//! Evidence needed: CUPTI kernel and memcpy records.

use crate::findings::{Category, Confidence, Finding, Value};
use crate::model::{group_by, ConstructId, KernelId, TransferId};
use crate::units;

use super::context::{Checked, Context};

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
    // (length, the construct after the gap, the activity that ended it);
    // the collector's own time inside a gap (hashing host buffers) is not
    // the program's and does not count.
    let mut gaps: Vec<(u64, Option<ConstructId>, Activity)> = Vec::new();
    let mut busy_until: Option<u64> = None;
    let mut collector_ns = 0u64;
    // The host threads' top-level constructs, to tell a gap the host spent
    // inside the runtime from one it spent in the program's own code.
    let mut tops: Vec<(u32, u64, u64)> = run
        .top_level_constructs()
        .map(|id| {
            let (s, e) = run.construct_span(id);
            (run.construct_thread(id), s, e.unwrap_or(s))
        })
        .collect();
    tops.sort_unstable();
    let inside = |thread: u32, b: u64, e: u64| -> u64 {
        let first = tops.partition_point(|&(t, _, end)| (t, end) <= (thread, b));
        tops[first..]
            .iter()
            .take_while(|&&(t, s, _)| t == thread && s < e)
            .map(|&(_, s, end)| end.min(e).saturating_sub(s.max(b)))
            .sum()
    };
    let mut in_runtime = 0u64;
    for &(s, e, c, what) in &acts {
        if let Some(b) = busy_until {
            if s > b {
                let own = run.collector_ns_in(b, s);
                let idle = s - b - own;
                if idle >= cx.opts.min_gap_ns {
                    gaps.push((idle, c.map(|c| run.top_level(c)), what));
                    collector_ns += own;
                    if let Some(c) = c {
                        let t = run.construct_thread(c);
                        in_runtime += inside(t, b, s).min(idle);
                    }
                }
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
    f.evidence
        .field("collector_time_excluded", Value::Ns(collector_ns));
    if collector_ns > 0 {
        f.evidence.say(format!(
            "The profiler's own hashing of host buffers inside these gaps ({}) is not counted: it is not the program's time.",
            units::duration_ns(collector_ns)
        ));
    } else if !run.collector_time_recorded() {
        f.evidence.say(format!(
            "The collector hashed host buffers ({} hashing) and this trace does not record how long that took: part of this idle time may be the profiler's own (record again with this version, or with --hash off).",
            match cx.hash_mode() {
                accprof_trace::HashMode::Full => "full",
                _ => "sampled",
            }
        ));
    }
    f.evidence.field("host_in_runtime", Value::Ns(in_runtime));
    f.evidence.field(
        "host_in_program",
        Value::Ns(total.saturating_sub(in_runtime)),
    );
    f.evidence.say(format!(
        "During these gaps the host was inside OpenACC constructs for {} (the runtime's own work: allocating, copying, launching, waiting) and in the program's own code for {}.",
        units::duration_ns(in_runtime),
        units::duration_ns(total.saturating_sub(in_runtime))
    ));
    f.evidence
        .say("The saving is not estimated: it is the saving of whatever shortens the host's part.");
    f.proposal.text = if 2 * in_runtime >= total {
        "The device waits mostly on the runtime's work inside the constructs, not on the program's host code: the wall-time ledger (and a runtime-bound finding, when one is reported) says what the runtime does per construct; fewer constructs, or less data mapped per construct, shorten these gaps.".into()
    } else {
        "Look at the host code before these constructs: move that work to the device, or overlap it with device work through `async` queues.".into()
    };
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
    fn the_collectors_hashing_is_not_idleness() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("a.c", 2);
        let t = b.site("a.c", 7);
        b.gcc_compute(s, &[], 1_000_000, 100, &[]);
        let gap_start = b.t;
        b.t += 5_000_000;
        b.gcc_compute(t, &[], 1_000_000, 100, &[]);
        // The collector hashed through the whole host stretch between the
        // two constructs (two overlapping spans).
        let hash = |time_ns: u64, hash_ns: u64| accprof_trace::BufferHash {
            time_ns,
            region: accprof_trace::RegionId(1),
            correlation: 0,
            direction: accprof_trace::Direction::Upload,
            host_ptr: 0x1000,
            bytes: 1 << 20,
            mode: HashMode::Full,
            hash: 1,
            hash_ns: Some(hash_ns),
        };
        b.run.hashes.push(hash(gap_start + 2_500_000, 3_500_000));
        b.run.hashes.push(hash(gap_start + 6_000_000, 4_000_000));
        let run = b.build();
        assert_eq!(run.collector_ns(), 7_000_000, "overlapping spans merged");
        assert!(run_rule(&run, check).findings.is_empty());
        // Without the hashing times the gap counts, and the finding says
        // the collector's share is unknown.
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("a.c", 2);
        let t = b.site("a.c", 7);
        b.gcc_compute(s, &[], 1_000_000, 100, &[]);
        b.t += 5_000_000;
        b.gcc_compute(t, &[], 1_000_000, 100, &[]);
        b.run.hashes.push(accprof_trace::BufferHash {
            hash_ns: None,
            ..hash(0, 0)
        });
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        assert!(c.findings[0]
            .evidence
            .text
            .iter()
            .any(|n| n.contains("does not record how long")));
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
