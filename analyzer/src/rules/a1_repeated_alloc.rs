//! A1: repeated allocation and free. Device memory of the same size is
//! allocated and freed again and again at one place (each block freed before
//! the next is allocated): the runtime allocates per construct instance
//! what could be allocated once.
//!
//! Evidence needed: the runtime's alloc/free events (acc_prof). They are
//! points in time: where the trace has the CUDA driver's timings, the cost
//! is the host time of the allocation and free calls at the place
//! ([`super::host_cost`]), and allocating once saves all but one pair;
//! without them the cost is not measured and the finding gives counts. A
//! block that also holds the construct's own block
//! ([`super::host_cost::holds_construct_block`]) is allocated at every
//! reach anyway: its cost is shown, no saving claimed.

use crate::findings::Value;
use crate::model::{group_by, AllocId, DeviceAlloc};
use crate::units;

use super::builders::{alloc_cost_evidence, alloc_finding};
use super::context::{Checked, Context};
use super::host_cost::holds_construct_block;

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let run = cx.run;
    if run.allocs().is_empty() {
        if run.process.header.sources.acc_prof.is_active() && !run.constructs().is_empty() {
            out.note("A1/A2 (allocations) not checked: the runtime reported no device allocations");
        }
        return out;
    }
    let big = run
        .allocs()
        .filter(|(_, a)| a.bytes >= cx.opts.min_bytes)
        .map(|(id, a)| {
            let site = a.construct.map(|c| run.line_site(c));
            ((site, a.bytes), (id, a))
        });
    for ((site, bytes), group) in group_by(big) {
        if group.len() < cx.opts.min_repeats || !disjoint(&group) {
            continue;
        }
        let ids: Vec<AllocId> = group.iter().map(|&(id, _)| id).collect();
        let mut f = alloc_finding(cx, "A1", site, None, &ids, |place| {
            format!(
                "device memory allocated and freed {} times at {place}",
                ids.len()
            )
        });
        f.evidence.field("bytes_each", Value::Bytes(bytes));
        if ids.iter().all(|&id| holds_construct_block(run, id)) {
            // The calls stay whatever the data clauses say: the cost is
            // measured, nothing of it is saved by allocating the data once.
            if let Some(all) = cx.host.as_ref().and_then(|h| h.allocs_ns(run, &ids)) {
                f.cost_ns = Some(all.ns);
                alloc_cost_evidence(&mut f, &all);
            }
            f.evidence.say(format!(
                "{} allocations of {} at the same place, each freed before the next one. Each is larger than the data the construct moved: it also holds the construct's own block (with GCC's libgomp, the kernel's argument pointers), which is allocated at every reach whatever the data clauses say, so keeping the data on the device makes these blocks smaller, not fewer, and saves no allocation call",
                group.len(),
                units::bytes(bytes)
            ));
            f.proposal.text = "Keep the data on the device for the whole loop (a data region, see D6 or D1 for the same place): the per-reach block stays, smaller; only fewer constructs make fewer of them.".into();
            out.findings.push(f);
            continue;
        }
        let measured = cx.host.as_ref().and_then(|h| {
            let all = h.allocs_ns(run, &ids)?;
            let kept = h.allocs_ns(run, &ids[..1]).map_or(0, |c| c.ns);
            Some((all, all.ns.saturating_sub(kept)))
        });
        match measured {
            Some((all, saving)) => {
                f.cost_ns = Some(all.ns);
                f.saving_ns = Some(saving);
                f.saved_allocs = ids[1..].to_vec();
                alloc_cost_evidence(&mut f, &all);
                f.evidence.say(format!(
                    "{} allocations of {} at the same place, each freed before the next one; the CUDA driver's allocation and free calls there took {} each on average, {} for these {} allocations and {} frees; allocating once saves all but one of them",
                    group.len(),
                    units::bytes(bytes),
                    units::duration_ns(all.per_call_ns()),
                    units::duration_ns(all.ns),
                    all.allocations,
                    all.frees,
                ));
            }
            None => {
                f.evidence.say(format!(
                "{} allocations of {} at the same place, each freed before the next one; the runtime reports allocations as points in time, so their cost is not measured",
                group.len(),
                    units::bytes(bytes)
                ));
            }
        }
        f.proposal.text = "Allocate once: a data region (or `enter data create`) around the loop keeps the device memory for all iterations (see D6 when the same place also repeats transfers).".into();
        out.findings.push(f);
    }
    out
}

fn disjoint(group: &[(AllocId, DeviceAlloc)]) -> bool {
    group
        .windows(2)
        .all(|w| w[0].1.free_ns().is_some_and(|f| f <= w[1].1.alloc_ns))
}

#[cfg(test)]
mod tests {
    use accprof_trace::HashMode;

    use super::*;
    use crate::testkit::runs::{run_rule, RunBuilder};

    #[test]
    fn allocation_per_instance() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 40);
        let a = b.buf(1 << 20, 0);
        for _ in 0..3 {
            b.gcc_compute(s, &[a], 1_000, 10, &[a]);
        }
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        assert_eq!(c.findings[0].evidence.count("allocations"), Some(3));
        assert_eq!(c.findings[0].cost_ns, None);
    }

    #[test]
    fn twice_is_not_repeated() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 40);
        let a = b.buf(1 << 20, 0);
        for _ in 0..2 {
            b.gcc_compute(s, &[a], 1_000, 10, &[a]);
        }
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }
}
