//! D1: duplicate upload. A host buffer is uploaded again with the same
//! content hash as its previous upload, and no download came in between:
//! the device was sent bytes it had been sent before.
//!
//! Evidence needed: content hashes. When no kernel ran between the two
//! uploads the device copy cannot have changed ("certain" with full hashes);
//! when kernels ran, the trace cannot show whether one of them wrote the
//! device copy (it was never downloaded), so the finding is "likely" and
//! says so. Sampled hashes make it "likely" too.

use accprof_trace::HashMode;

use crate::findings::{Confidence, Finding, Value};
use crate::model::{ConstructClass, Dir, SiteId, Xfer};
use crate::proposals::update_guard;
use crate::units;

use super::builders::{add_transfers, pairs_by_site, transfer_finding, xfer_evidence};
use super::context::{consecutive_pairs, same_hash, Checked, Context};

/// An `update device` that sent the same bytes again: how many of its
/// uploads did, and, from the source, the condition under which the host
/// changes the data (its `if` clause) or where the update belongs.
fn update_proposal(cx: &Context, f: &mut Finding, site: Option<SiteId>, redundant: usize) {
    let Some(site) = site else { return };
    let s = cx.run.site(site);
    let total = cx
        .xfers
        .iter()
        .filter(|x| x.site == Some(site) && x.dir == Dir::Upload)
        .count();
    f.evidence
        .field("uploads_at_update", Value::Count(total as u64));
    f.evidence.say(format!(
        "{redundant} of the {total} uploads of this `update device` carried the same bytes as the buffer's previous upload; {} carried new data.",
        total.saturating_sub(redundant)
    ));
    let (Some(line), Some(src)) = (s.line, cx.sources.get(&s.file)) else {
        return;
    };
    let Some(p) = update_guard::plan(src, line) else {
        return;
    };
    f.proposal.text = format!(
        "{redundant} of the {total} updates were redundant. {}",
        p.text
    );
    f.proposal.directive = p.directive;
    f.proposal.edits = p.edits;
    f.proposal.no_patch = p.no_patch;
}

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    if cx.hash_mode() == HashMode::Off {
        out.note("D1 (duplicate uploads) and D4 (round trips) not checked: hashing was off in this run (record with --hash sampled or --hash full)");
        return out;
    }
    let pairs = consecutive_pairs(cx, |a, b| {
        a.dir == Dir::Upload && b.dir == Dir::Upload && same_hash(a, b)
    });
    for (site, group) in pairs_by_site(cx, &pairs, |p| p.1) {
        let ups: Vec<&Xfer> = group.iter().map(|p| &cx.xfers[p.1]).collect();
        let firsts: Vec<&Xfer> = group.iter().map(|p| &cx.xfers[p.0]).collect();
        let with_kernels = group
            .iter()
            .filter(|p| cx.kernel_between(cx.xfers[p.0].end_ns, cx.xfers[p.1].start_ns))
            .count();
        let mut f = transfer_finding(cx, "D1", "upload", site, &ups, |vars, place| {
            format!("duplicate upload: {vars} sent again unchanged at {place}")
        });
        f.confidence = if with_kernels == 0 && cx.knows_kernels() {
            cx.hash_confidence()
        } else {
            Confidence::Likely
        };
        add_transfers(cx, &mut f, "earlier upload", &firsts);
        f.evidence
            .field("duplicates", Value::Count(group.len() as u64));
        f.evidence
            .field("kernels_between", Value::Count(with_kernels as u64));
        xfer_evidence(&mut f.evidence, "", &ups);
        if let Some(h) = ups[0].hash {
            f.evidence.field("example_hash", Value::hash(h));
        }
        f.evidence.say(format!(
            "{} uploads sent the same bytes as the buffer's previous upload ({}), {} in all, with no download in between",
            group.len(),
            cx.hash_meaning(),
            units::bytes(ups.iter().map(|x| x.bytes).sum())
        ));
        if with_kernels > 0 {
            f.evidence.say(format!(
                "In {with_kernels} of them kernels ran in between and the device copy was never downloaded: the trace cannot show whether a kernel wrote it. If none does, keeping it on the device is safe."
            ));
        }
        f.proposal.text = "Upload once and keep the data on the device (a data region around the code that uses it, `copyin` for data the device only reads).".into();
        if cx.origin_class(ups[0]) == Some(ConstructClass::Update) {
            update_proposal(cx, &mut f, site, group.len());
        }
        out.findings.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use accprof_trace::{CopyKind, HashMode};

    use super::*;
    use crate::model::ConstructClass;
    use crate::testkit::runs::{run_rule, RunBuilder};

    #[test]
    fn same_bytes_uploaded_twice_without_kernels_is_certain() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("a.c", 5);
        let a = b.buf(1 << 20, 9);
        for _ in 0..2 {
            let c = b.open(ConstructClass::EnterData, s, None);
            b.copy(c, CopyKind::HostToDevice, a, 5_000);
            b.close(c);
        }
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        assert_eq!(c.findings[0].confidence, Confidence::Certain);
        assert_eq!(c.findings[0].evidence.count("duplicates"), Some(1));
        // It saves the second upload and is about both.
        let ids: Vec<_> = run.transfers().map(|(id, _)| id).collect();
        assert_eq!(c.findings[0].saved_transfers, [ids[1]]);
        assert_eq!(c.findings[0].subjects.transfers, [ids[1], ids[0]]);
        let roles: Vec<_> = c.findings[0]
            .locations
            .iter()
            .map(|l| l.role.as_str())
            .collect();
        assert_eq!(roles, ["upload", "earlier upload"]);
        assert!(c.findings[0].locations.iter().all(|l| l.site == Some(s)));
    }

    #[test]
    fn copyin_every_iteration_with_kernels_is_likely() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("a.c", 5);
        let coef = b.buf(1 << 16, 3);
        for _ in 0..4 {
            b.gcc_compute(s, &[coef], 10_000, 80, &[]);
        }
        let run = b.build();
        let c = run_rule(&run, check);
        let f = &c.findings[0];
        assert_eq!(f.confidence, Confidence::Likely);
        assert_eq!(f.evidence.count("duplicates"), Some(3));
        assert_eq!(f.evidence.count("kernels_between"), Some(3));
    }

    #[test]
    fn a_download_in_between_is_not_a_duplicate_upload() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("a.c", 5);
        let a = b.buf(1 << 16, 3);
        b.gcc_compute(s, &[a], 10_000, 80, &[a]);
        b.gcc_compute(s, &[a], 10_000, 80, &[a]);
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }
}
