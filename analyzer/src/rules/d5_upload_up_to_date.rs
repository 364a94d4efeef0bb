//! D5: upload into an up-to-date device copy. An `update device` sends a
//! buffer whose previous transfer (either way) had the same content hash,
//! with no kernel and no device allocation or free in between: the device
//! copy already held these bytes.
//!
//! Evidence needed: full-content hashes (removing an `update device` the
//! device needs corrupts results, and a sample can miss the change) and
//! kernel activity (CUPTI, or at least the runtime's launch events).

use accprof_trace::HashMode;

use crate::findings::Value;
use crate::model::{ConstructClass, Dir, Xfer};

use super::builders::{pairs_by_site, transfer_finding, xfer_evidence};
use super::context::{consecutive_pairs, same_hash, Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    if cx.hash_mode() != HashMode::Full {
        // D2 says why, once.
        return out;
    }
    if !cx.knows_kernels() {
        out.note("D5 not checked: the run recorded no kernel activity");
        return out;
    }
    let allocs_between = |t0: u64, t1: u64| {
        cx.run.allocs().any(|(_, a)| {
            (t0 < a.alloc_ns && a.alloc_ns < t1) || a.free_ns().is_some_and(|f| t0 < f && f < t1)
        })
    };
    let pairs = consecutive_pairs(cx, |a, b| {
        b.dir == Dir::Upload
            && cx.origin_class(b) == Some(ConstructClass::Update)
            && same_hash(a, b)
            && !cx.kernel_between(a.start_ns, b.start_ns)
            && !allocs_between(a.start_ns, b.start_ns)
    });
    for (site, group) in pairs_by_site(cx, &pairs, |p| p.1) {
        let ups: Vec<&Xfer> = group.iter().map(|p| &cx.xfers[p.1]).collect();
        let mut f = transfer_finding(cx, "D5", "update", site, &ups, |vars, place| {
            format!("`update device` of data the device already has: {vars} at {place}")
        });
        let earlier: Vec<&Xfer> = group.iter().map(|p| &cx.xfers[p.0]).collect();
        f.subjects
            .transfers
            .extend(earlier.iter().map(|x| x.transfer));
        f.evidence
            .field("redundant_updates", Value::Count(group.len() as u64));
        xfer_evidence(&mut f.evidence, "", &ups);
        f.evidence.say(format!(
            "Each of these uploads sent the same bytes as the buffer's previous transfer ({}), and no kernel ran and no device memory was allocated or freed in between: the device copy was up to date.",
            cx.hash_meaning()
        ));
        f.proposal.text = "Remove this `update device` (or make it conditional on the host having changed the data).".into();
        out.findings.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use accprof_trace::{CopyKind, HashMode};

    use super::*;
    use crate::testkit::runs::{run_rule, RunBuilder};

    #[test]
    fn update_device_right_after_copyin() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s0 = b.site("a.c", 3);
        let s1 = b.site("a.c", 4);
        let a = b.buf(1 << 20, 6);
        let d = b.open(ConstructClass::EnterData, s0, None);
        b.copy(d, CopyKind::HostToDevice, a, 1_000);
        b.close(d);
        let u = b.open(ConstructClass::Update, s1, None);
        b.copy(u, CopyKind::HostToDevice, a, 1_000);
        b.close(u);
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        assert_eq!(c.findings[0].locations[0].line, Some(4));
    }

    #[test]
    fn a_kernel_in_between_may_have_changed_it() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s0 = b.site("a.c", 3);
        let s1 = b.site("a.c", 4);
        let a = b.buf(1 << 20, 6);
        let d = b.open(ConstructClass::EnterData, s0, None);
        b.copy(d, CopyKind::HostToDevice, a, 1_000);
        b.close(d);
        let k = b.open(ConstructClass::Compute, s0, None);
        b.kernel(k, 10, 1_000);
        b.close(k);
        let u = b.open(ConstructClass::Update, s1, None);
        b.copy(u, CopyKind::HostToDevice, a, 1_000);
        b.close(u);
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }
}
