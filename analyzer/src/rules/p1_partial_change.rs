//! P1: whole array sent when only a small range changed. Proving it needs
//! to know which part of a buffer changed between transfers: hashes per
//! range of the buffer. The collector takes one hash per transfer, so this
//! rule reports that it could not check rather than guess from sizes.

use super::{Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    if !cx.xfers.is_empty() {
        out.note("P1 (whole array sent when a small range changed) not checked: the trace has one hash per transfer; which part of a buffer changed needs per-range hashes");
    }
    out
}

#[cfg(test)]
mod tests {
    use accprof_trace::HashMode;

    use super::*;
    use crate::testkit::runs::{run_rule, RunBuilder};

    #[test]
    fn says_it_cannot_check() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("a.c", 1);
        let a = b.buf(1 << 20, 1);
        b.gcc_compute(s, &[a], 1_000, 1, &[a]);
        let run = b.build();
        let c = run_rule(&run, check);
        assert!(c.findings.is_empty());
        assert!(c.notes[0].starts_with("P1"));
    }
}
