//! C2: lost host writes. The host wrote its copy of an array (the first
//! write since both copies agreed) and a compute construct then started
//! and used the device copy, with no `update device` (or copyin) in
//! between: the write never reached the device, and the program computed
//! without it. An error, not a cost: it ranks with C1 before every
//! performance finding.
//!
//! Evidence needed: the coherence check's records (`accprof run --check
//! coherence`), each the first write into a range since its copies
//! agreed, with the written bytes compared with the device copy when the
//! construct started (equal bytes are not recorded). One finding per
//! source line of the write and variable. The proposal puts `update
//! device` for the range after the statement that wrote (after the host
//! loops around it that hold no OpenACC directive), before the construct.

use accprof_trace::CoherenceKind;

use super::coherence::{
    access_evidence, construct_line, grouped, here, mpi_routine, propose_update, Side,
};
use super::context::Checked;
use super::context::Context;
use crate::findings::{Category, Finding, Value};
use crate::model::{HostAccess, SiteId};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    for ((site, var), accesses) in grouped(cx, CoherenceKind::LostWrite, |a| a.site) {
        out.findings.push(finding(cx, site, &var, &accesses));
    }
    out
}

fn finding(cx: &Context, site: Option<SiteId>, var: &str, accesses: &[&HostAccess]) -> Finding {
    let place = site.map_or_else(|| "an unknown place".to_string(), |s| here(cx, s));
    // The constructs that used the device copy, each once, in time order.
    let mut users = Vec::new();
    for c in accesses.iter().filter_map(|a| a.construct) {
        if !users.contains(&c) {
            users.push(c);
        }
    }
    let user_text = match users.first().and_then(|&c| construct_line(cx, c)) {
        Some(at) => format!(": the compute construct at {at} used the device copy"),
        None => ": a compute construct then used the device copy".to_string(),
    };
    let mpi = mpi_routine(cx, accesses);
    let by_mpi = mpi.as_ref().map_or(String::new(), |r| format!(" by {r}"));
    let mut f = Finding::new(
        "C2",
        Category::Correctness,
        format!("lost host write of {var}{by_mpi} at {place}{user_text}"),
    );
    f.locations
        .push(cx.location("host write", site, Some(var.to_string())));
    // One location per line: the constructs are often one line's
    // instances.
    let mut lines = Vec::new();
    for &c in &users {
        let line = cx.run.line_site(c);
        if !lines.contains(&line) {
            lines.push(line);
            f.locations
                .push(cx.location("compute construct", Some(line), Some(var.to_string())));
        }
        f.subjects.constructs.push(c);
    }
    let first = accesses[0];
    let (confirmed, unconfirmed) = access_evidence(&mut f, accesses, var, "writes", mpi.as_deref());
    f.evidence
        .field("first_offset_written", Value::Bytes(first.offset()));
    f.evidence.say(format!(
        "The host wrote {var} here{} {} time{} after both copies of its {} last agreed, and a compute construct then used the device copy with no upload between; {}.",
        mpi.as_ref().map_or(String::new(), |r| format!(" (inside {r}, which wrote the host buffer)")),
        accesses.len(),
        if accesses.len() == 1 { "" } else { "s" },
        crate::units::bytes(first.range_bytes),
        if unconfirmed == 0 {
            "the written bytes differ from the device copy's each time".to_string()
        } else if confirmed == 0 {
            "the device copy could not be read to compare the bytes, so the write may have left them as they were".to_string()
        } else {
            format!("{confirmed} write(s) differ from the device copy; {unconfirmed} could not be compared")
        }
    ));
    propose_update(
        cx,
        &mut f,
        site,
        var,
        "device",
        Side::After,
        &format!("send the host's write of {var} to the device before a construct uses it"),
    );
    f
}
