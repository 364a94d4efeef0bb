//! S1: transfers from or to pageable host memory. The driver stages
//! pageable memory through a pinned buffer, which costs bandwidth and makes
//! asynchronous copies synchronous.
//!
//! Evidence needed: CUPTI memcpy records (they say pageable or pinned).
//! Reported when pageable transfers take at least `min_share` of the wall
//! time. The saving is estimated only when the run also has pinned
//! transfers to compare bandwidths; otherwise it is left open.

use accprof_trace::MemoryKind;

use super::{group_by, xfer_evidence, Checked, Context, Dir, Xfer};
use crate::findings::{fmt_ns, Category, Confidence, Finding, Value};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    if !cx.run.cupti_active() {
        out.note("S1 (pageable memory) not checked: without CUPTI the run does not say which memory kind a transfer used");
        return out;
    }
    let host_side = |x: &Xfer| {
        let c = &cx.run.copies[x.copy];
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
    let bw = |xs: &[&Xfer]| {
        let b: u64 = xs.iter().map(|x| x.bytes).sum();
        let t: u64 = xs.iter().map(|x| x.duration_ns()).sum();
        (t > 0).then(|| b as f64 / t as f64)
    };
    let mut f = Finding::new(
        "S1",
        Category::Memory,
        format!("{} of transfers from pageable host memory", fmt_ns(cost)),
    );
    f.confidence = Confidence::Certain;
    f.cost_ns = Some(cost);
    let mut sites = group_by(pageable.iter().map(|x| (x.site, x.duration_ns())));
    sites.sort_by_key(|(_, t)| std::cmp::Reverse(t.iter().sum::<u64>()));
    for (site, _) in sites.iter().take(3) {
        f.locations.push(cx.location("transfers", *site, None));
    }
    xfer_evidence(&mut f.evidence, "pageable_", &pageable);
    if let Some(b) = bw(&pageable) {
        f.evidence.field("pageable_GB/s", Value::Ratio(b));
    }
    match (bw(&pageable), bw(&pinned)) {
        (Some(p), Some(q)) if q > p => {
            let bytes: u64 = pageable.iter().map(|x| x.bytes).sum();
            let at_pinned = (bytes as f64 / q) as u64;
            f.saving_ns = Some(cost.saturating_sub(at_pinned));
            f.evidence.field("pinned_GB/s", Value::Ratio(q));
            f.evidence.say(format!(
                "Pinned transfers in this run moved {q:.2} GB/s against {p:.2} GB/s for pageable ones; the saving assumes the pinned rate."
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
    use accprof_trace::HashMode;

    use super::*;
    use crate::rules::testutil::{run_rule, RunBuilder};

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
}
