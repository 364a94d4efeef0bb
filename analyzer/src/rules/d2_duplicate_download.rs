//! D2: duplicate download. A buffer is downloaded again with the same
//! content hash as its previous download, with no upload in between: the
//! device data did not change, so the second download brought nothing new,
//! unless the host wrote into its copy in between (which no trace sees).
//!
//! Evidence needed: full-content hashes. Sampled hashes are not enough here:
//! dropping a download the host needs corrupts results, and a sample can
//! miss the changed part.

use accprof_trace::HashMode;

use crate::findings::{Confidence, Value};
use crate::model::{Dir, Xfer};
use crate::units;

use super::builders::{add_transfers, pairs_by_site, transfer_finding, xfer_evidence};
use super::context::{consecutive_pairs, same_hash, Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    if cx.hash_mode() != HashMode::Full {
        out.note(match cx.hash_mode() {
            HashMode::Off => "D2 (duplicate downloads), D3 (copy where copyin suffices) and D5 (upload into an up-to-date copy) not checked: they need full-content hashes and hashing was off (record with --hash full)",
            _ => "D2 (duplicate downloads), D3 (copy where copyin suffices) and D5 (upload into an up-to-date copy) not checked: they need full-content hashes (record with --hash full); a sampled hash cannot show that a buffer did not change",
        });
        return out;
    }
    let pairs = consecutive_pairs(cx, |a, b| {
        a.dir == Dir::Download && b.dir == Dir::Download && same_hash(a, b)
    });
    for (site, group) in pairs_by_site(cx, &pairs, |p| p.1) {
        let downs: Vec<&Xfer> = group.iter().map(|p| &cx.xfers[p.1]).collect();
        let mut f = transfer_finding(cx, "D2", "download", site, &downs, |vars, place| {
            format!("duplicate download: {vars} fetched again unchanged at {place}")
        });
        f.confidence = Confidence::Likely;
        let firsts: Vec<&Xfer> = group.iter().map(|p| &cx.xfers[p.0]).collect();
        add_transfers(cx, &mut f, "earlier download", &firsts);
        f.evidence
            .field("duplicates", Value::Count(group.len() as u64));
        xfer_evidence(&mut f.evidence, "", &downs);
        f.evidence.say(format!(
            "{} downloads brought the same bytes as the buffer's previous download ({}), {} in all, with no upload in between",
            group.len(),
            cx.hash_meaning(),
            units::bytes(downs.iter().map(|x| x.bytes).sum())
        ));
        f.evidence.say("The second download is needed only if the host wrote into its copy in between; a trace cannot see host writes.");
        f.proposal.text = "Drop the second download (`update host` or copy-out) when the host did not change its copy since the first one.".into();
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

    fn two_updates(hashing: HashMode, second_hash: u64) -> crate::Run {
        let mut b = RunBuilder::new(hashing);
        let s = b.site("a.c", 30);
        let mut a = b.buf(1 << 20, 4);
        for h in [4, second_hash] {
            a.hash = h;
            let c = b.open(ConstructClass::Update, s, None);
            b.copy(c, CopyKind::DeviceToHost, a, 5_000);
            b.close(c);
        }
        b.build()
    }

    #[test]
    fn same_download_twice() {
        let run = two_updates(HashMode::Full, 4);
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        assert_eq!(c.findings[0].id, "D2");
        let run = two_updates(HashMode::Full, 5);
        assert!(run_rule(&run, check).findings.is_empty());
    }

    #[test]
    fn sampled_hashes_are_not_enough() {
        let run = two_updates(HashMode::Sampled, 4);
        let c = run_rule(&run, check);
        assert!(c.findings.is_empty());
        assert!(c.notes[0].contains("full-content"));
    }
}
