//! A2: allocation no kernel uses. No kernel ran while a block of device
//! memory was allocated (from its allocation to its free, or to the end of
//! the run).
//!
//! Evidence needed: the runtime's alloc/free events and kernel activity.
//! Certain when both are present. Where the trace has the CUDA driver's
//! timings, the cost and the saving are the host time of the allocation
//! and free calls ([`super::host_cost`]).

use crate::findings::Value;
use crate::model::group_by;
use crate::units;

use super::builders::{alloc_cost_evidence, alloc_finding};
use super::context::{Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let run = cx.run;
    if run.allocs().is_empty() || !cx.knows_kernels() {
        // A1 and U1 say why.
        return out;
    }
    // Kernel records known to be missing (dropped, cut, or lost with a
    // broken device context) prove nothing by their absence (U1 says so).
    if cx.kernel_records_incomplete().is_some() {
        return out;
    }
    let end = run.process.span_ns.1;
    let unused = run.allocs().filter(|(_, a)| {
        a.bytes >= cx.opts.min_bytes && !cx.kernel_between(a.alloc_ns, a.free_ns().unwrap_or(end))
    });
    let groups = group_by(unused.map(|(id, a)| {
        let site = a.construct.map(|c| run.line_site(c));
        (site, (id, a))
    }));
    for (site, group) in groups {
        let bytes: u64 = group.iter().map(|(_, a)| a.bytes).sum();
        let ids: Vec<_> = group.iter().map(|&(id, _)| id).collect();
        let variable = group[0].1.variable.map(|v| run.name(v).to_string());
        let mut f = alloc_finding(cx, "A2", site, variable, &ids, |place| {
            format!(
                "device memory no kernel used: {} allocated at {place}",
                units::bytes(bytes)
            )
        });
        f.evidence.field("bytes", Value::Bytes(bytes));
        if let Some(c) = cx.host.as_ref().and_then(|h| h.allocs_ns(run, &ids)) {
            f.cost_ns = Some(c.ns);
            f.saving_ns = Some(c.ns);
            f.saved_allocs = ids.clone();
            alloc_cost_evidence(&mut f, &c);
        }
        f.evidence.say(format!(
            "No kernel ran between these allocations and their frees (per {}).",
            cx.kernel_source.unwrap_or("the run")
        ));
        f.proposal.text = "Remove the data clause or directive that maps this data, or move it to where kernels use it.".into();
        out.findings.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use accprof_trace::HashMode;

    use super::*;
    use crate::model::ConstructClass;
    use crate::testkit::runs::{run_rule, RunBuilder};

    #[test]
    fn allocation_without_kernels() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 3);
        let d = b.open(ConstructClass::EnterData, s, None);
        let a = b.alloc(d, 1 << 20);
        b.close(d);
        b.free(a);
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        // With a kernel inside its lifetime it is used.
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 3);
        let x = b.buf(1 << 20, 0);
        b.gcc_compute(s, &[x], 1_000, 10, &[]);
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }
}
