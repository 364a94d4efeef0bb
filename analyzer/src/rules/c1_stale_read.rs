//! C1: stale host reads. The host read its copy of an array while the
//! device copy was newer: a compute construct may have written it and no
//! `update self` (or copyout) brought it back, so the program computed
//! with old values. An error, not a cost: it ranks before every
//! performance finding.
//!
//! Evidence needed: the coherence check's records (`accprof run --check
//! coherence`), each a host read that faulted on a protected page, with
//! the bytes it read compared with the device copy's at the next construct
//! boundary (equal bytes are not recorded). One finding per source line
//! and variable, with the number of reads. The proposal puts `update self`
//! for the range before the statement that read (before the host loops
//! around it that hold no OpenACC directive). A read made inside an MPI
//! call (a send of the stale buffer) is named with the call.

use accprof_trace::CoherenceKind;

use super::coherence::{
    access_count, access_evidence, construct_line, grouped, here, mpi_routine, propose_update, Side,
};
use super::context::Checked;
use super::context::Context;
use crate::findings::{Category, Finding, Value};
use crate::model::{HostAccess, SiteId};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    for ((site, var), accesses) in grouped(cx, CoherenceKind::StaleRead, |a| a.site) {
        out.findings.push(finding(cx, site, &var, &accesses));
    }
    out
}

fn finding(cx: &Context, site: Option<SiteId>, var: &str, accesses: &[&HostAccess]) -> Finding {
    let place = site.map_or_else(|| "an unknown place".to_string(), |s| here(cx, s));
    let writer = accesses.iter().rev().find_map(|a| a.construct);
    let by_text = match writer.and_then(|c| construct_line(cx, c)) {
        Some(at) => format!(" (written by the compute construct at {at})"),
        None => String::new(),
    };
    let mpi = mpi_routine(cx, accesses);
    let by_mpi = mpi.as_ref().map_or(String::new(), |r| format!(" by {r}"));
    let mut f = Finding::new(
        "C1",
        Category::Correctness,
        format!("stale host read of {var}{by_mpi} at {place}: the device copy is newer{by_text}"),
    );
    f.locations
        .push(cx.location("host read", site, Some(var.to_string())));
    if let Some(c) = writer {
        f.locations.push(cx.location(
            "compute construct",
            Some(cx.run.line_site(c)),
            Some(var.to_string()),
        ));
        f.subjects.constructs.push(c);
    }
    let first = accesses[0];
    // Each access against its own range: the host may swap the buffers
    // the ranges hold between constructs.
    let (lo, hi) = accesses.iter().fold((u64::MAX, 0), |(lo, hi), a| {
        (lo.min(a.offset()), hi.max(a.offset()))
    });
    let (confirmed, unconfirmed) = access_evidence(&mut f, accesses, var, "reads", mpi.as_deref());
    f.evidence
        .field("first_offset_read", Value::Bytes(lo))
        .field("last_offset_read", Value::Bytes(hi));
    f.evidence.say(format!(
        "The host read {var} here{} {} while the device copy of its {} was newer; {}.",
        mpi.as_ref().map_or(String::new(), |r| format!(" (inside {r}, which read the host buffer)")),
        access_count(accesses, "read"),
        crate::units::bytes(first.range_bytes),
        if unconfirmed == 0 {
            "each read's bytes differ from the device copy's".to_string()
        } else if confirmed == 0 {
            "the device copy could not be read to compare the bytes, so the values may still agree".to_string()
        } else {
            format!("{confirmed} read(s) differ from the device copy; {unconfirmed} could not be compared")
        }
    ));
    propose_update(
        cx,
        &mut f,
        site,
        var,
        "self",
        Side::Before,
        &format!("bring the device copy of {var} back before the host reads it"),
    );
    f
}
