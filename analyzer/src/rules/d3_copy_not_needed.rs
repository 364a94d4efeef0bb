//! D3: `copy` where `copyin` suffices. Within one construct a buffer is
//! uploaded at the start and downloaded at the end with the same full
//! content hash, in every instance at that place, and kernels ran in
//! between: the device never changed it, so the copy back was useless.
//!
//! Evidence needed: full-content hashes (a sample could miss the part a
//! kernel wrote, and dropping the copy-out would lose results). What a trace
//! cannot prove is the other half of the catalogue entry, "never read by the
//! host": host reads are invisible, so this rule does not claim it.

use accprof_trace::HashMode;

use crate::findings::Value;
use crate::model::{group_by, Dir, Xfer};

use super::builders::{transfer_finding, vars_label, xfer_evidence};
use super::context::{consecutive_pairs, same_hash, Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    if cx.hash_mode() != HashMode::Full {
        // D2 says why, once.
        return out;
    }
    // Every upload -> download pair within one construct instance.
    let pairs = consecutive_pairs(cx, |a, b| {
        a.dir == Dir::Upload && b.dir == Dir::Download && a.origin.is_some() && a.origin == b.origin
    });
    // Per buffer and place: D3 holds only when every instance agrees.
    let per_buffer = group_by(pairs.iter().map(|p| {
        (
            (
                cx.xfers[p.1].site,
                cx.xfers[p.1].host_ptr,
                cx.xfers[p.1].bytes,
            ),
            *p,
        )
    }));
    let mut qualifying = Vec::new();
    for ((site, _, _), group) in per_buffer {
        let unchanged = group
            .iter()
            .all(|p| same_hash(&cx.xfers[p.0], &cx.xfers[p.1]));
        let used = group
            .iter()
            .all(|p| cx.kernel_between(cx.xfers[p.0].end_ns, cx.xfers[p.1].start_ns));
        if !unchanged || !used {
            // Changed somewhere (the copy-out is needed), or no kernel ran
            // (U1 reports that).
            continue;
        }
        qualifying.extend(group.into_iter().map(|p| (site, p)));
    }
    for (site, group) in group_by(qualifying) {
        let downs: Vec<&Xfer> = group.iter().map(|p| &cx.xfers[p.1]).collect();
        let vars = vars_label(cx, &downs);
        let mut f = transfer_finding(cx, "D3", "construct", site, &downs, |vars, place| {
            format!("copy where copyin suffices: {vars} comes back unchanged from {place}")
        });
        let ups: Vec<&Xfer> = group.iter().map(|p| &cx.xfers[p.0]).collect();
        f.subjects.transfers.extend(ups.iter().map(|x| x.transfer));
        f.evidence
            .field("instances", Value::Count(group.len() as u64));
        xfer_evidence(&mut f.evidence, "download_", &downs);
        f.evidence.say(format!(
            "In all {} instances the data went to the device and came back with the same content ({}), with kernels running in between: the device did not change it in this run.",
            group.len(),
            cx.hash_meaning()
        ));
        f.evidence.say("Whether the host reads it afterwards is not visible in a trace; copyin keeps the host's copy, which already holds these values.");
        f.proposal.text = format!("Map {vars} with `copyin` instead of `copy` at this construct.");
        f.proposal.directive = Some(format!("copyin({vars})"));
        out.findings.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use accprof_trace::HashMode;

    use super::*;
    use crate::testkit::runs::{run_rule, RunBuilder};

    #[test]
    fn read_only_data_copied_back() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("a.c", 12);
        let a = b.buf(1 << 20, 1);
        let x = b.buf(1 << 20, 2);
        let mut x_out = x;
        for i in 0..3 {
            x_out.hash = 100 + i;
            b.gcc_compute(s, &[a, x], 1_000, 100, &[a, x_out]);
        }
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1, "{:?}", c.findings);
        assert_eq!(c.findings[0].evidence.count("instances"), Some(3));
    }

    #[test]
    fn one_changed_instance_means_copy_is_needed() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("a.c", 12);
        let a = b.buf(1 << 20, 1);
        let mut changed = a;
        changed.hash = 3;
        b.gcc_compute(s, &[a], 1_000, 100, &[a]);
        b.gcc_compute(s, &[a], 1_000, 100, &[changed]);
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }

    #[test]
    fn needs_full_hashes() {
        let mut b = RunBuilder::new(HashMode::Sampled);
        let s = b.site("a.c", 12);
        let a = b.buf(1 << 20, 1);
        b.gcc_compute(s, &[a], 1_000, 100, &[a]);
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }
}
