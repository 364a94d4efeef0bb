//! D4: device -> host -> device round trip. A buffer is downloaded and
//! later uploaded again with the same content hash, and nothing else moved
//! it in between: the host sent back exactly what it had received, so the
//! upload was avoidable had the data stayed on the device.
//!
//! A buffer the host changed in between (MPI received into it, or the
//! coherence check caught a host write to it) is no round trip, whatever
//! the hashes say: sampled hashes miss a halo, and dropping the upload
//! would lose it.
//!
//! Evidence needed: content hashes (the download's, taken when it ended,
//! and the upload's, taken when it started). With sampled hashes the
//! finding is "likely". The trace cannot show whether the host read the
//! data in between, so only the upload is counted as saving.

use accprof_trace::HashMode;

use crate::findings::Value;
use crate::model::{Dir, Xfer};
use crate::units;

use super::builders::{add_transfers, pairs_by_site, transfer_finding, xfer_evidence};
use super::context::{consecutive_pairs, host_changed, same_hash, Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    if cx.hash_mode() == HashMode::Off {
        out.note("D1 (duplicate uploads) and D4 (round trips) not checked: hashing was off in this run (record with --hash sampled or --hash full)");
        return out;
    }
    let pairs = consecutive_pairs(cx, |a, b| {
        a.dir == Dir::Download
            && b.dir == Dir::Upload
            && same_hash(a, b)
            && b.start_ns >= a.end_ns
            && !a
                .host_ptr
                .is_some_and(|p| host_changed(cx, p, a.bytes, a.end_ns, b.start_ns))
    });
    for (site, group) in pairs_by_site(cx, &pairs, |p| p.1) {
        let ups: Vec<&Xfer> = group.iter().map(|p| &cx.xfers[p.1]).collect();
        let downs: Vec<&Xfer> = group.iter().map(|p| &cx.xfers[p.0]).collect();
        let mut f = transfer_finding(cx, "D4", "upload", site, &ups, |vars, place| {
            format!(
                "device -> host -> device round trip: {vars} uploaded again unchanged at {place}"
            )
        });
        f.confidence = cx.hash_confidence();
        add_transfers(cx, &mut f, "download", &downs);
        f.evidence
            .field("round_trips", Value::Count(group.len() as u64));
        xfer_evidence(&mut f.evidence, "upload_", &ups);
        xfer_evidence(&mut f.evidence, "download_", &downs);
        if let Some(h) = ups[0].hash {
            f.evidence.field("example_hash", Value::hash(h));
        }
        f.evidence.say(format!(
            "{} times a buffer came back from the device and was sent to it again with the same content, {} re-sent in all; {}.",
            group.len(),
            units::bytes(ups.iter().map(|x| x.bytes).sum()),
            cx.hash_meaning(),
        ));
        f.evidence.say(
            "A trace cannot show whether the host read the data in between; the saving counts only the uploads.",
        );
        f.proposal.text = "Keep the data on the device between these constructs (a data region around both, see D6 where the transfers repeat in a loop); if the host reads it in between, `update host` there instead of the implicit copy out, and drop the upload.".into();
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
    fn unchanged_data_sent_back_is_a_round_trip() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s1 = b.site("a.c", 10);
        let s2 = b.site("a.c", 20);
        let a = b.buf(1 << 20, 0xaaaa);
        b.gcc_compute(s1, &[a], 1_000, 100, &[a]);
        b.gcc_compute(s2, &[a], 1_000, 100, &[a]);
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        let f = &c.findings[0];
        assert_eq!(f.id, "D4");
        assert_eq!(f.evidence.count("round_trips"), Some(1));
        assert_eq!(f.locations[0].line, Some(20));
        assert_eq!(f.locations[1].line, Some(10));
        assert_eq!(f.confidence, crate::findings::Confidence::Certain);
        assert_eq!(f.saved_transfers.len(), 1);
    }

    #[test]
    fn changed_data_is_no_round_trip() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s1 = b.site("a.c", 10);
        let a = b.buf(1 << 20, 1);
        let mut a2 = a;
        a2.hash = 2; // the host changed it before sending it again
        b.gcc_compute(s1, &[a], 1_000, 100, &[a]);
        b.gcc_compute(s1, &[a2], 1_000, 100, &[a2]);
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }

    #[test]
    fn sampled_hashes_make_it_likely_and_off_says_so() {
        let mut b = RunBuilder::new(HashMode::Sampled);
        let s = b.site("a.c", 10);
        let a = b.buf(1 << 20, 7);
        b.gcc_compute(s, &[a], 1_000, 100, &[a]);
        b.gcc_compute(s, &[a], 1_000, 100, &[a]);
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(
            c.findings[0].confidence,
            crate::findings::Confidence::Likely
        );

        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 10);
        let a = b.buf(1 << 20, 7);
        b.gcc_compute(s, &[a], 1_000, 100, &[a]);
        b.gcc_compute(s, &[a], 1_000, 100, &[a]);
        let run = b.build();
        let c = run_rule(&run, check);
        assert!(c.findings.is_empty());
        assert!(c.notes[0].contains("hashing was off"));
    }

    #[test]
    fn small_transfers_are_ignored() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("a.c", 10);
        let a = b.buf(8, 7);
        b.gcc_compute(s, &[a], 1_000, 100, &[a]);
        b.gcc_compute(s, &[a], 1_000, 100, &[a]);
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }
}
