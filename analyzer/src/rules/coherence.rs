//! What the coherence rules (C1 stale reads, C2 lost writes, C3 unread
//! downloads) share: the name of the array an access fell in, the array
//! section the data clauses give it, where an `update` goes in the host
//! code, and the MPI call an access was made by.

use std::collections::BTreeMap;

use accprof_trace::CoherenceKind;

use crate::findings::{Confidence, Finding, Value};
use crate::model::{HostAccess, MpiCall, SiteId};
use crate::patch::Edit;
use crate::source::{Lang, SourceFile};

use super::context::Context;

/// The run's accesses of `kind`, grouped by the site `site_of` gives
/// each and the variable.
pub(crate) type Groups<'r> = BTreeMap<(Option<SiteId>, String), Vec<&'r HostAccess>>;

pub(crate) fn grouped<'r>(
    cx: &Context<'r>,
    kind: CoherenceKind,
    site_of: impl Fn(&HostAccess) -> Option<SiteId>,
) -> Groups<'r> {
    let mut groups: Groups<'r> = BTreeMap::new();
    for a in cx.run.host_accesses().iter().filter(|a| a.kind == kind) {
        groups
            .entry((site_of(a), variable(cx, a)))
            .or_default()
            .push(a);
    }
    groups
}

/// What C1 and C2 findings share: the confidence (certain when some
/// access was compared with the device copy and differs), and the
/// evidence of the accesses (`what`: "reads", "writes"), with the MPI
/// routine they were made in. Returns (confirmed, unconfirmed).
pub(crate) fn access_evidence(
    f: &mut Finding,
    accesses: &[&HostAccess],
    var: &str,
    what: &str,
    mpi: Option<&str>,
) -> (u64, u64) {
    let confirmed = accesses.iter().filter(|a| a.confirmed).count() as u64;
    let unconfirmed = accesses.len() as u64 - confirmed;
    f.confidence = if confirmed > 0 {
        Confidence::Certain
    } else {
        Confidence::Likely
    };
    let first = accesses[0];
    f.evidence
        .field(what, Value::Count(accesses.len() as u64))
        .field("confirmed", Value::Count(confirmed))
        .field("unconfirmed", Value::Count(unconfirmed))
        .field("variable", Value::Text(var.to_string()))
        .field(
            "range_start",
            Value::Text(format!("{:#x}", first.range_start)),
        )
        .field("range_bytes", Value::Bytes(first.range_bytes));
    if let Some(r) = mpi {
        f.evidence.field("mpi_call", Value::Text(r.to_string()));
    }
    (confirmed, unconfirmed)
}

/// How many times the host made these accesses, with what the count
/// means: the check records the first access to each protected page and
/// then opens the page until a construct protects it again, so a count
/// is of pages, of constructs between the accesses, or of both.
pub(crate) fn access_count(accesses: &[&HostAccess], verb: &str) -> String {
    const PAGE: u64 = 4096;
    let n = accesses.len();
    let mut pages: Vec<u64> = accesses.iter().map(|a| a.offset() / PAGE).collect();
    pages.sort_unstable();
    pages.dedup();
    let times = format!("{n} times");
    if n == 1 {
        "once".to_string()
    } else if pages.len() == n {
        format!("{times} (one per page {verb})")
    } else if pages.len() == 1 {
        format!("{times} (the same page each time, {verb} again after a construct)")
    } else {
        format!(
            "{times} ({} pages {verb}, each again after a construct)",
            pages.len()
        )
    }
}

/// The name of the array an access fell in: the runtime's, the run's
/// name for the buffer, or the one array of the file's data clauses that
/// the statement which touched it names (GCC's libgomp names none of
/// them).
pub(crate) fn variable(cx: &Context, a: &HostAccess) -> String {
    match a.variable {
        Some(n) => base_name(cx.run.name(n)).to_string(),
        None => cx
            .run
            .named_start_within(
                a.range_start,
                a.named_at(),
                cx.unlearned.as_ref().map(|u| &u.buffers),
            )
            .and_then(|p| cx.buffer_name(p))
            .map(|n| base_name(n).to_string())
            .unwrap_or_else(|| format!("the array at {:#x}", a.range_start)),
    }
}

/// `u` of `u[0:n]` or `u(1:n)`.
pub(crate) fn base_name(item: &str) -> &str {
    item.split(['[', '(']).next().unwrap_or(item).trim()
}

/// The file name without its directories.
pub(crate) fn short(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

/// `file.c:105` of a site, or its place without a line.
pub(crate) fn here(cx: &Context, site: SiteId) -> String {
    let s = cx.run.site(site);
    match s.line {
        Some(l) => format!("{}:{l}", short(&s.file)),
        None => cx.location("", Some(site), None).place(),
    }
}

/// `file.c:107` of a construct's line, when the trace has it.
pub(crate) fn construct_line(cx: &Context, c: crate::model::ConstructId) -> Option<String> {
    let s = cx.run.site(cx.run.line_site(c));
    s.line.map(|l| format!("{}:{l}", short(&s.file)))
}

/// The MPI call whose span holds the access, on the access's thread: the
/// host touched the array inside MPI (a send reads it, a receive writes
/// it).
pub(crate) fn mpi_call_of<'r>(cx: &Context<'r>, a: &HostAccess) -> Option<&'r MpiCall> {
    let calls = cx.run.mpi_calls();
    // In start order: the last call started at or before the access.
    let n = calls.partition_point(|c| c.start_ns <= a.time_ns);
    calls[..n]
        .iter()
        .rev()
        .take_while(|c| c.end_ns >= a.time_ns || c.thread != a.thread)
        .find(|c| c.thread == a.thread && c.end_ns >= a.time_ns)
}

/// The routine of the MPI call the accesses were made in, when they all
/// were in calls of one routine.
pub(crate) fn mpi_routine(cx: &Context, accesses: &[&HostAccess]) -> Option<String> {
    let mut routine: Option<&str> = None;
    for a in accesses {
        let r = mpi_call_of(cx, a)?.routine.as_str();
        if routine.is_some_and(|x| x != r) {
            return None;
        }
        routine = Some(r);
    }
    routine.map(str::to_string)
}

/// Which side of the host statement the update goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// Before a read: `update self` (C1).
    Before,
    /// After a write: `update device` (C2).
    After,
}

/// The line to put the update before (or after): the statement at `line`,
/// or the outermost of the host loops around it that hold no OpenACC
/// directive (the update would otherwise run once per iteration, or land
/// inside a loop body without braces). After: the statement's last line
/// or the loop's end.
/// Also the line whose indentation the update takes (the statement's or
/// the loop's first).
fn placed(src: &SourceFile, line: u32, side: Side) -> (u32, u32) {
    let mut around = None;
    for lp in src.enclosing_loops(line) {
        if !src.directives_in(lp.header_line, lp.end_line).is_empty() {
            break;
        }
        around = Some(lp);
    }
    match (side, around) {
        (Side::Before, Some(lp)) => (lp.header_line, lp.header_line),
        (Side::Before, None) => (line, line),
        (Side::After, Some(lp)) => (lp.end_line, lp.header_line),
        (Side::After, None) => (src.statement_end_line(line), line),
    }
}

/// The array section a data clause of the file gives `var`
/// (`u[0:n]`, `u(1:n)`), preferring a data construct's.
pub(crate) fn clause_item(src: &SourceFile, var: &str) -> Option<String> {
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

/// C: `var` is an array of fixed size (not a pointer), declared in `src`
/// or in a header it includes with quotes, read from beside it (NPB's
/// `extern double u[5][KMAX][JMAXP+1][IMAXP+1];` in header.h): `update
/// self(u)` moves all of it.
fn whole_c_array(src: &SourceFile, var: &str) -> bool {
    if src.lang != Lang::C {
        return false;
    }
    let fixed = |f: &SourceFile| {
        f.arrays(None)
            .get(var)
            .is_some_and(|d| !d.pointer && d.extent.is_none() && d.dims.starts_with('['))
    };
    if fixed(src) {
        return true;
    }
    let Some(dir) = src.found_at.parent() else {
        return false;
    };
    src.lines.iter().any(|l| {
        let Some(rest) = l.trim_start().strip_prefix('#') else {
            return false;
        };
        let Some(name) = rest
            .trim_start()
            .strip_prefix("include")
            .and_then(|r| r.trim().strip_prefix('"'))
            .and_then(|r| r.split('"').next())
        else {
            return false;
        };
        let path = dir.join(name);
        std::fs::read_to_string(&path).is_ok_and(|text| {
            fixed(&SourceFile::new(
                &path.to_string_lossy(),
                path.clone(),
                Lang::C,
                text,
            ))
        })
    })
}

/// The `update` a coherence finding proposes, `clause` (`self` or
/// `device`) of `var` with the bounds the data clauses give it, put on
/// `side` of the host access at `site`: the proposal's directive, text
/// and edit, or why there is no patch. `why` says what the update does
/// ("bring the device copy of u back before the host reads it").
pub(crate) fn propose_update(
    cx: &Context,
    f: &mut Finding,
    site: Option<SiteId>,
    var: &str,
    clause: &str,
    side: Side,
    why: &str,
) {
    let s = site.map(|s| cx.run.site(s));
    let lang = s.and_then(|s| Lang::of(&s.file)).unwrap_or(Lang::C);
    let (which, access) = match side {
        Side::Before => ("before", "read"),
        Side::After => ("after", "write"),
    };
    let located = s.and_then(|s| Some((s.line?, cx.sources.get(&s.file)?)));
    let Some((line, src)) = located else {
        f.proposal.text = format!(
            "{why}: `{} update {clause}({var})` (with its bounds) {which} the {access}",
            lang.sentinel()
        );
        f.proposal.no_patch = Some(match s {
            Some(s) => format!(
                "the source of {} is not at hand to place the directive",
                s.file
            ),
            None => "the trace has no source line for the host access".to_string(),
        });
        return;
    };
    // A Fortran array knows its bounds, and so does a C array of fixed
    // size: the whole of it is a valid item.
    let item = clause_item(src, var)
        .or_else(|| (lang == Lang::Fortran || whole_c_array(src, var)).then(|| var.to_string()));
    let shown = item.clone().unwrap_or_else(|| var.to_string());
    let directive = format!("{} update {clause}({shown})", lang.sentinel());
    let (at, indent_line) = placed(src, line, side);
    f.proposal.text = format!("{why}: `{directive}` {which} line {at}");
    f.proposal.directive = Some(directive.clone());
    if item.is_none() {
        f.proposal.no_patch = Some(format!(
            "no data clause in {} gives the bounds of {var}: write them in the directive",
            src.path
        ));
        return;
    }
    let indent = src.indent_of(indent_line);
    let lines = vec![format!("{indent}{directive}")];
    f.proposal.edits.push(match side {
        Side::Before => Edit::InsertBefore {
            file: src.path.clone(),
            line: at,
            lines,
        },
        Side::After => Edit::InsertAfter {
            file: src.path.clone(),
            line: at,
            lines,
        },
    });
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
      u[3] =
        7;
    }
  }
}
";

    #[test]
    fn the_update_goes_around_the_host_loop_without_directives() {
        let set = SourceSet::with_text("heat.c", SRC);
        let src = set.get("heat.c").expect("loaded");
        assert_eq!(placed(src, 8, Side::Before).0, 7);
        assert_eq!(placed(src, 8, Side::After).0, 8);
        // A statement over two lines: after its last.
        assert_eq!(placed(src, 9, Side::After).0, 10);
        // The time loop holds a directive: it is not crossed.
        assert_eq!(placed(src, 7, Side::Before).0, 7);
        assert_eq!(clause_item(src, "u").as_deref(), Some("u[0:n]"));
        assert_eq!(clause_item(src, "x"), None);
        assert_eq!(base_name("u(1:n)"), "u");
    }

    /// A fixed-size C array declared in an included header (NPB's layout)
    /// or in the file is moved whole; a pointer or an unknown name is not.
    #[test]
    fn fixed_size_c_arrays_are_moved_whole() {
        let dir = std::env::temp_dir().join(format!("accprof-whole-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(
            dir.join("header.h"),
            "#define KMAX 36\nextern double u      [5][KMAX][KMAX+1];\nextern double *p;\n",
        )
        .expect("header");
        let text = "#include \"header.h\"\ndouble w[8];\nvoid f(void) { double s = u[0][1][2] + p[3] + w[1]; }\n";
        let src = SourceFile::new("error.c", dir.join("error.c"), Lang::C, text.to_string());
        assert!(whole_c_array(&src, "u"));
        assert!(whole_c_array(&src, "w"));
        assert!(!whole_c_array(&src, "p"));
        assert!(!whole_c_array(&src, "q"));
        std::fs::remove_dir_all(&dir).ok();
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
        assert_eq!(placed(f, 10, Side::Before).0, 9);
        assert_eq!(placed(f, 10, Side::After).0, 11);
        assert_eq!(placed(f, 8, Side::After).0, 8);
    }
}
