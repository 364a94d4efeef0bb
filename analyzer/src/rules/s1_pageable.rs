//! S1: transfers from or to pageable host memory. The driver stages
//! pageable memory through a pinned buffer, which costs bandwidth and makes
//! asynchronous copies synchronous.
//!
//! Evidence needed: CUPTI memcpy records (they say pageable or pinned).
//! Reported when pageable transfers take at least `min_share` of the wall
//! time. The saving is estimated only when the run also has pinned
//! transfers to compare bandwidths; otherwise it is left open.

use accprof_trace::MemoryKind;

use crate::findings::{Category, Confidence, Finding, Value};
use crate::model::{group_by, Dir, Xfer};
use crate::units;

use super::builders::xfer_evidence;
use super::context::{Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    if !cx.run.cupti_active() {
        out.note("S1 (pageable memory) not checked: without CUPTI the run does not say which memory kind a transfer used");
        return out;
    }
    let host_side = |x: &Xfer| {
        let c = cx.run.transfer(x.transfer);
        match x.dir {
            Dir::Upload => c.src,
            Dir::Download => c.dst,
        }
    };
    let pageable: Vec<&Xfer> = cx
        .xfers
        .iter()
        .filter(|x| host_side(x) == MemoryKind::Pageable)
        .collect();
    let pinned: Vec<&Xfer> = cx
        .xfers
        .iter()
        .filter(|x| host_side(x) == MemoryKind::Pinned)
        .collect();
    let cost: u64 = pageable.iter().map(|x| x.duration_ns()).sum();
    if pageable.is_empty() || cx.share(cost) < cx.opts.min_share {
        return out;
    }
    // Bytes per ns, the rate the saving is computed with.
    let bw = |xs: &[&Xfer]| {
        let b: u64 = xs.iter().map(|x| x.bytes).sum();
        let t: u64 = xs.iter().map(|x| x.duration_ns()).sum();
        (t > 0).then(|| b as f64 / t as f64)
    };
    let mut f = Finding::new(
        "S1",
        Category::Memory,
        format!(
            "{} of transfers from pageable host memory",
            units::duration_ns(cost)
        ),
    );
    f.confidence = Confidence::Certain;
    f.cost_ns = Some(cost);
    let mut sites = group_by(pageable.iter().map(|x| (x.site, x.duration_ns())));
    sites.sort_by_key(|(_, t)| std::cmp::Reverse(t.iter().sum::<u64>()));
    for (site, _) in sites.iter().take(3) {
        f.locations.push(cx.location("transfers", *site, None));
    }
    f.subjects.transfers = pageable.iter().map(|x| x.transfer).collect();
    xfer_evidence(&mut f.evidence, "pageable_", &pageable);
    if let Some(b) = bw(&pageable) {
        f.evidence
            .field("pageable_bandwidth", Value::BytesPerSec(b * 1e9));
    }
    match (bw(&pageable), bw(&pinned)) {
        (Some(p), Some(q)) if q > p => {
            let bytes: u64 = pageable.iter().map(|x| x.bytes).sum();
            let at_pinned = (bytes as f64 / q) as u64;
            f.saving_ns = Some(cost.saturating_sub(at_pinned));
            f.evidence
                .field("pinned_bandwidth", Value::BytesPerSec(q * 1e9));
            f.evidence.say(format!(
                "Pinned transfers in this run moved {} against {} for pageable ones; the saving assumes the pinned rate.",
                units::bytes_per_sec(q * 1e9),
                units::bytes_per_sec(p * 1e9)
            ));
        }
        _ => {
            f.evidence.say(
                "The run has no pinned transfers to compare with, so the saving is not estimated.",
            );
        }
    }
    f.evidence.say(format!(
        "{} transfers used pageable host memory ({:.0}% of the wall time).",
        pageable.len(),
        100.0 * cx.share(cost)
    ));
    f.proposal.text = "First remove transfers that are not needed (D findings). For the rest, use pinned host memory: allocate with cudaMallocHost / cuMemHostAlloc, or register existing arrays with cudaHostRegister (NVHPC: -gpu=pinned).".into();
    out.findings.push(f);
    out
}

#[cfg(test)]
mod tests {
    use accprof_trace::{CopyKind, HashMode};

    use super::*;
    use crate::testkit::runs::{run_rule, RunBuilder};

    #[test]
    fn pageable_transfers_that_matter() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 1);
        let a = b.buf(1 << 20, 0);
        b.gcc_compute(s, &[a], 1_000, 10, &[a]);
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        assert_eq!(c.findings[0].saving_ns, None);
        // Negligible next to a long kernel: not reported.
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 1);
        let a = b.buf(1 << 20, 0);
        b.gcc_compute(s, &[a], 100_000_000, 10, &[a]);
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }

    #[test]
    fn bandwidths_are_typed_and_read_in_units() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 1);
        let c = b.open(crate::ConstructClass::EnterData, s, None);
        let slow = b.buf(1 << 20, 0);
        let fast = b.buf(1 << 20, 1);
        b.copy(c, CopyKind::HostToDevice, slow, 1_000_000);
        let pinned = b.copy(c, CopyKind::HostToDevice, fast, 100_000);
        b.transfer_mut(pinned).src = MemoryKind::Pinned;
        b.close(c);
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        let f = &c.findings[0];
        // 1 MiB in 1 ms against 100 us: 0.9 ms saved (give or take the
        // rounding of the division).
        assert!(
            f.saving_ns.is_some_and(|v| v.abs_diff(900_000) <= 1),
            "{:?}",
            f.saving_ns
        );
        let rate = |name: &str| {
            f.evidence
                .fields
                .iter()
                .find(|x| x.name == name)
                .and_then(|x| match x.value {
                    Value::BytesPerSec(v) => Some(v),
                    _ => None,
                })
        };
        let near = |v: Option<f64>, want: f64| v.is_some_and(|v| (v - want).abs() < 1.0);
        assert!(near(rate("pageable_bandwidth"), 1_048_576_000.0));
        assert!(near(rate("pinned_bandwidth"), 10_485_760_000.0));
        assert!(
            f.evidence
                .text
                .iter()
                .any(|t| t.contains("moved 10.5 GB/s against 1.05 GB/s")),
            "{:?}",
            f.evidence.text
        );
    }
}
