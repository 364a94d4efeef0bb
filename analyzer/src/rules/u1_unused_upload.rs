//! U1: upload never used. No kernel ran between an upload and the next
//! upload of the same buffer (or the end of the run): whatever it sent, no
//! device code could have read it.
//!
//! Evidence needed: kernel activity (CUPTI kernels, or the runtime's launch
//! events). Certain when present; not checked when the trace shows that
//! device records are missing ([`Context::kernel_records_incomplete`]).

use crate::findings::Value;
use crate::model::{group_by, Dir, Xfer};

use super::builders::{transfer_finding, xfer_evidence};
use super::context::{Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    if !cx.knows_kernels() {
        out.note("U1/A2 (unused uploads and allocations) not checked: the run recorded no kernel activity");
        return out;
    }
    if let Some(why) = cx.kernel_records_incomplete() {
        out.note(format!(
            "U1/A2 (unused uploads and allocations) not checked: {why}, so a missing kernel proves nothing"
        ));
        return out;
    }
    let end_of_run = cx.run.process.span_ns.1;
    let mut unused = Vec::new();
    for list in cx.buffers.values() {
        for (k, &i) in list.iter().enumerate() {
            let x = &cx.xfers[i];
            if x.dir != Dir::Upload {
                continue;
            }
            let until = list[k + 1..]
                .iter()
                .map(|&j| &cx.xfers[j])
                .find(|y| y.dir == Dir::Upload)
                .map(|y| y.start_ns)
                .unwrap_or(end_of_run);
            if !cx.kernel_between(x.start_ns, until) {
                unused.push(i);
            }
        }
    }
    for (site, group) in group_by(unused.iter().map(|&i| (cx.xfers[i].site, i))) {
        let ups: Vec<&Xfer> = group.iter().map(|&i| &cx.xfers[i]).collect();
        let mut f = transfer_finding(cx, "U1", "upload", site, &ups, |vars, place| {
            format!("upload never used: {vars} sent at {place} before any kernel ran")
        });
        f.evidence
            .field("unused_uploads", Value::Count(ups.len() as u64));
        xfer_evidence(&mut f.evidence, "", &ups);
        f.evidence.say(format!(
            "No kernel ran between these uploads and the buffer's next upload (or the end of the run), per {}.",
            cx.kernel_source.unwrap_or("the run")
        ));
        f.proposal.text = "Use `create` instead of `copyin`/`copy` for this data, or move the upload next to the kernels that need it.".into();
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
    fn upload_with_no_kernel_after_it() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 8);
        let used = b.buf(1 << 20, 0);
        let idle = b.buf(1 << 20, 0);
        let d = b.open(ConstructClass::EnterData, s, None);
        b.copy(d, CopyKind::HostToDevice, idle, 1_000);
        b.close(d);
        b.gcc_compute(s, &[used], 1_000, 10, &[]);
        // `idle` was sent before the kernel: that kernel could have used it.
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());

        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("a.c", 8);
        let k = b.site("a.c", 9);
        let idle = b.buf(1 << 20, 0);
        b.gcc_compute(k, &[], 1_000, 10, &[]);
        let d = b.open(ConstructClass::EnterData, s, None);
        b.copy(d, CopyKind::HostToDevice, idle, 1_000);
        b.close(d);
        let run = b.build();
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 1);
        assert_eq!(c.findings[0].id, "U1");
    }

    #[test]
    fn without_kernel_records_it_says_so() {
        let mut b = RunBuilder::new(HashMode::Off).no_cupti();
        let s = b.site("a.c", 8);
        let a = b.buf(1 << 20, 0);
        let d = b.open(ConstructClass::EnterData, s, None);
        b.copy(d, CopyKind::HostToDevice, a, 1_000);
        b.close(d);
        let run = b.build();
        let c = run_rule(&run, check);
        assert!(c.findings.is_empty());
        assert!(c.notes[0].contains("no kernel activity"));
    }
}
