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
//! around it that hold no OpenACC directive).

use std::collections::BTreeMap;

use accprof_trace::CoherenceKind;

use super::{Checked, Context};
use crate::findings::{Category, Confidence, Finding, Value};
use crate::model::{HostAccess, SiteId};
use crate::patch::Edit;
use crate::source::{Lang, SourceFile};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let reads: Vec<&HostAccess> = cx
        .run
        .host_accesses()
        .iter()
        .filter(|a| a.kind == CoherenceKind::StaleRead)
        .collect();
    let mut groups: BTreeMap<(SiteId, String), Vec<&HostAccess>> = BTreeMap::new();
    for a in reads {
        groups.entry((a.site, variable(cx, a))).or_default().push(a);
    }
    for ((site, var), accesses) in groups {
        out.findings.push(finding(cx, site, &var, &accesses));
    }
    out
}

/// The name of the array an access fell in: the runtime's, the run's
/// name for the buffer, or the one array of the file's data clauses that
/// the statement which read names (GCC's libgomp names none of them).
fn variable(cx: &Context, a: &HostAccess) -> String {
    match a.variable {
        Some(n) => base_name(cx.run.name(n)).to_string(),
        None => cx
            .buffer_name(a.range_start)
            .map(|n| base_name(n).to_string())
            .or_else(|| named_at_the_read(cx, a.site))
            .unwrap_or_else(|| format!("the array at {:#x}", a.range_start)),
    }
}

/// The one array both named in a data clause of the file and read on the
/// access's line.
fn named_at_the_read(cx: &Context, site: SiteId) -> Option<String> {
    let s = cx.run.site(site);
    let (line, src) = (s.line?, cx.sources.get(&s.file)?);
    let lang = src.lang;
    let mapped: Vec<String> = src
        .directives_in(1, src.lines.len() as u32)
        .iter()
        .flat_map(|d| d.data_vars())
        .collect();
    let mut found: Vec<String> = Vec::new();
    for u in src.uses(line, line, &[]) {
        if let Some(m) = mapped
            .iter()
            .find(|m| crate::proposals::key(lang, m) == u.key)
        {
            if !found.contains(m) {
                found.push(m.clone());
            }
        }
    }
    (found.len() == 1).then(|| found.remove(0))
}

/// `u` of `u[0:n]` or `u(1:n)`.
fn base_name(item: &str) -> &str {
    item.split(['[', '(']).next().unwrap_or(item).trim()
}

fn short(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

fn finding(cx: &Context, site: SiteId, var: &str, accesses: &[&HostAccess]) -> Finding {
    let s = cx.run.site(site);
    let here = match s.line {
        Some(l) => format!("{}:{l}", short(&s.file)),
        None => cx.location("", Some(site), None).place(),
    };
    let writer = accesses.iter().rev().find_map(|a| a.construct);
    let by = writer.map(|c| cx.run.site(cx.run.line_site(c)));
    let by_text = match by.and_then(|b| b.line.map(|l| (short(&b.file), l))) {
        Some((f, l)) => format!(" (written by the compute construct at {f}:{l})"),
        None => String::new(),
    };
    let mut f = Finding::new(
        "C1",
        Category::Correctness,
        format!("stale host read of {var} at {here}: the device copy is newer{by_text}"),
    );
    let confirmed = accesses.iter().filter(|a| a.confirmed).count() as u64;
    let unconfirmed = accesses.len() as u64 - confirmed;
    f.confidence = if confirmed > 0 {
        Confidence::Certain
    } else {
        Confidence::Likely
    };
    f.locations
        .push(cx.location("host read", Some(site), Some(var.to_string())));
    if let Some(c) = writer {
        f.locations.push(cx.location(
            "compute construct",
            Some(cx.run.line_site(c)),
            Some(var.to_string()),
        ));
        f.subjects.constructs.push(c);
    }
    let first = accesses[0];
    let (lo, hi) = accesses.iter().fold((u64::MAX, 0), |(lo, hi), a| {
        (lo.min(a.host_addr), hi.max(a.host_addr))
    });
    f.evidence
        .field("reads", Value::Count(accesses.len() as u64))
        .field("confirmed", Value::Count(confirmed))
        .field("unconfirmed", Value::Count(unconfirmed))
        .field("variable", Value::Text(var.to_string()))
        .field(
            "range_start",
            Value::Text(format!("{:#x}", first.range_start)),
        )
        .field("range_bytes", Value::Bytes(first.range_bytes))
        .field(
            "first_offset_read",
            Value::Bytes(lo.saturating_sub(first.range_start)),
        )
        .field(
            "last_offset_read",
            Value::Bytes(hi.saturating_sub(first.range_start)),
        );
    f.evidence.say(format!(
        "The host read {var} here {} time{} (one per page touched) while the device copy of its {} was newer; {}.",
        accesses.len(),
        if accesses.len() == 1 { "" } else { "s" },
        crate::units::bytes(first.range_bytes),
        if unconfirmed == 0 {
            "each read's bytes differ from the device copy's".to_string()
        } else if confirmed == 0 {
            "the device copy could not be read to compare the bytes, so the values may still agree".to_string()
        } else {
            format!("{confirmed} read(s) differ from the device copy; {unconfirmed} could not be compared")
        }
    ));
    propose(cx, &mut f, site, var);
    f
}

fn propose(cx: &Context, f: &mut Finding, site: SiteId, var: &str) {
    let s = cx.run.site(site);
    let lang = Lang::of(&s.file).unwrap_or(Lang::C);
    let (Some(line), Some(src)) = (s.line, cx.sources.get(&s.file)) else {
        f.proposal.text = format!(
            "bring the device copy of {var} back before the host reads it: `{} update self({var})` (with its bounds) before the read",
            lang.sentinel()
        );
        f.proposal.no_patch = Some(format!(
            "the source of {} is not at hand to place the directive",
            s.file
        ));
        return;
    };
    // A Fortran array knows its bounds: the whole of it is a valid item.
    let item = clause_item(src, var).or_else(|| (lang == Lang::Fortran).then(|| var.to_string()));
    let shown = item.clone().unwrap_or_else(|| var.to_string());
    let directive = format!("{} update self({shown})", lang.sentinel());
    let at = placement(src, line);
    f.proposal.text = format!(
        "bring the device copy of {var} back before the host reads it: `{directive}` before line {at}"
    );
    f.proposal.directive = Some(directive.clone());
    match item {
        Some(_) => f.proposal.edits.push(Edit::InsertBefore {
            file: src.path.clone(),
            line: at,
            lines: vec![format!("{}{directive}", src.indent_of(at))],
        }),
        None => {
            f.proposal.no_patch = Some(format!(
                "no data clause in {} gives the bounds of {var}: write them in the directive",
                s.file
            ));
        }
    }
}

/// The statement to put the update before: the read's line, or the
/// outermost of the host loops around it that hold no OpenACC directive
/// (the update would otherwise run once per iteration, or land inside a
/// loop body without braces).
fn placement(src: &SourceFile, line: u32) -> u32 {
    let mut at = line;
    for lp in src.enclosing_loops(line) {
        if !src.directives_in(lp.header_line, lp.end_line).is_empty() {
            break;
        }
        at = lp.header_line;
    }
    at
}

/// The array section a data clause of the file gives `var`
/// (`u[0:n]`, `u(1:n)`), preferring a data construct's.
fn clause_item(src: &SourceFile, var: &str) -> Option<String> {
    let last = u32::try_from(src.lines.len()).unwrap_or(u32::MAX);
    let mut found: Option<(bool, String)> = None;
    for d in src.directives_in(1, last) {
        let data_construct = matches!(d.construct_name().as_str(), "data" | "enter data");
        for c in d
            .clauses
            .iter()
            .filter(|c| crate::source::is_data_clause(&c.name))
        {
            for it in c.items() {
                let sectioned = it.contains('[') || it.contains('(');
                if base_name(&it) == var && sectioned {
                    match &found {
                        Some((true, _)) => {}
                        Some((false, _)) if !data_construct => {}
                        _ => found = Some((data_construct, it.trim().to_string())),
                    }
                }
            }
        }
    }
    found.map(|(_, it)| it)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceSet;

    const SRC: &str = "\
int main(void) {
#pragma acc data copy(u[0:n], w[0:n])
  {
    for (int s = 0; s < 10; s++) {
#pragma acc parallel loop present(u[0:n])
      for (int k = 0; k < n; k++) u[k] += 1;
      for (int k = 0; k < n; k++)
        sum += u[k];
    }
  }
}
";

    #[test]
    fn the_update_goes_before_the_host_loop_without_directives() {
        let set = SourceSet::with_text("heat.c", SRC);
        let src = set.get("heat.c").expect("loaded");
        assert_eq!(placement(src, 8), 7);
        // The time loop holds a directive: it is not crossed.
        assert_eq!(placement(src, 7), 7);
        assert_eq!(clause_item(src, "u").as_deref(), Some("u[0:n]"));
        assert_eq!(clause_item(src, "x"), None);
        assert_eq!(base_name("u(1:n)"), "u");
    }

    #[test]
    fn fortran_sections_are_read_from_the_clauses() {
        let src = "\
program p
  !$acc data copy(u(1:n))
  do s = 1, 10
    !$acc parallel loop
    do k = 1, n
      u(k) = u(k) + 1
    end do
    t = 0
    do k = 1, n
      t = t + u(k)
    end do
  end do
  !$acc end data
end program
";
        let set = SourceSet::with_text("heat.f90", src);
        let f = set.get("heat.f90").expect("loaded");
        assert_eq!(clause_item(f, "u").as_deref(), Some("u(1:n)"));
        assert_eq!(placement(f, 10), 9);
    }
}
