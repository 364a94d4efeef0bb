//! An `update device` inside a host loop that sends the same bytes on most
//! iterations: the host changes the data only on some of them. Proposed by
//! D1 from the source: the condition that guards the host's writes of the
//! arrays becomes the update's `if(...)` clause, when it still holds the
//! same value at the update; otherwise the update should move next to the
//! writes. The mirror for C3: an `update self` whose downloads the host
//! reads only on some iterations takes the condition that guards the
//! host's reads, when it holds the same value from the update to them.

use crate::patch::Edit;
use crate::source::{Lang, SourceFile};

/// What to change about one `update device`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdatePlan {
    /// The proposal, in words (without the counts).
    pub text: String,
    /// The new directive, when there is one.
    pub directive: Option<String>,
    pub edits: Vec<Edit>,
    /// Why there is no patch.
    pub no_patch: Option<String>,
}

/// Plans the change of the `update device` at `line`. None when the line
/// holds no `update` with a `device` clause.
pub fn plan(src: &SourceFile, line: u32) -> Option<UpdatePlan> {
    plan_for(src, line, false)
}

/// Plans the change of the `update self` (or `host`) at `line` from the
/// host's reads of its arrays in the loop around it. None when the line
/// holds no `update` with a `self` or `host` clause.
pub fn plan_download(src: &SourceFile, line: u32) -> Option<UpdatePlan> {
    plan_for(src, line, true)
}

fn plan_for(src: &SourceFile, line: u32, download: bool) -> Option<UpdatePlan> {
    let d = src.directive_at(line)?;
    if d.construct_name() != "update" {
        return None;
    }
    let clause_names: &[&str] = if download {
        &["self", "host"]
    } else {
        &["device"]
    };
    let changes = if download { "reads" } else { "writes" };
    let items: Vec<String> = d
        .clauses
        .iter()
        .filter(|c| clause_names.contains(&c.name.as_str()))
        .flat_map(|c| c.items())
        .collect();
    if items.is_empty() {
        return None;
    }
    let key = |s: &str| super::key(src.lang, s);
    let names: Vec<String> = items
        .iter()
        .map(|i| i.split(['[', '(']).next().unwrap_or("").trim().to_string())
        .collect();
    let keys: Vec<String> = names.iter().map(|n| key(n)).collect();
    let list = names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(" and ");
    let mut plan = UpdatePlan::default();
    let Some(lp) = src.enclosing_loops(line).first().map(|l| (*l).clone()) else {
        plan.text = if download {
            format!("Bring {list} back only when the host reads it.")
        } else {
            format!("Send {list} only after the host changed it.")
        };
        plan.no_patch = Some(format!(
            "the update at line {line} is not inside a host loop"
        ));
        return Some(plan);
    };
    // Host code of the loop: directives and compute regions left out.
    let mut skip: Vec<(u32, u32)> = Vec::new();
    for dd in src.directives_in(lp.header_line + 1, lp.end_line) {
        skip.push((dd.line, dd.end_line));
        if dd.is_compute() {
            if let Some((a, b, c)) = src.block_of(&dd) {
                skip.push((a, c.unwrap_or(b)));
            }
        }
    }
    let uses: Vec<_> = src
        .uses(lp.header_line + 1, lp.end_line, &skip)
        .into_iter()
        .filter(|u| keys.contains(&u.key))
        .collect();
    if let Some(u) = uses.iter().find(|u| u.whole) {
        plan.text = if download {
            format!("Bring {list} back only on the iterations where the host reads it.")
        } else {
            format!("Send {list} only on the iterations where the host changed it.")
        };
        plan.no_patch = Some(format!(
            "the host passes `{}` to a call at line {} inside the loop: which iterations {} it is not visible in the source",
            u.name,
            u.line,
            if download { "read" } else { "change" }
        ));
        return Some(plan);
    }
    let mut writes: Vec<u32> = uses
        .iter()
        .filter(|u| if download { u.read } else { u.write })
        .filter(|u| u.indexed || src.lang == Lang::Fortran)
        .map(|u| u.line)
        .collect();
    // Two uses on one line are one line.
    writes.dedup();
    if writes.is_empty() {
        plan.text = if download {
            format!(
                "The host does not read {list} inside the loop at line {}: one `update self` after the loop is enough.",
                lp.header_line
            )
        } else {
            format!(
                "The host does not write {list} inside the loop at line {}: one `update device` before the loop is enough.",
                lp.header_line
            )
        };
        plan.no_patch = Some("moving a directive out of the loop is left to the user".to_string());
        return Some(plan);
    }
    let lines = writes
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let guards: Vec<_> = writes
        .iter()
        .map(|&w| src.guard_of(w, lp.header_line + 1, lp.end_line))
        .collect();
    let guard = match guards.first() {
        Some(Some(g))
            if guards
                .iter()
                .all(|x| x.as_ref().map(|x| x.line) == Some(g.line)) =>
        {
            g.clone()
        }
        _ => {
            plan.text = format!(
                "The host {changes} {list} inside the loop (line {lines}) but not under one condition: move the update next to those {changes}, so that it runs only when they do."
            );
            plan.no_patch = Some(format!("no single condition guards the host's {changes}"));
            return Some(plan);
        }
    };
    let under = format!(
        "the host {changes} {list} only when `{}` (the `if` at line {}, {changes} at line {lines})",
        guard.condition, guard.line
    );
    if d.clause("if").is_some() {
        plan.text =
            format!("The update already has an `if` clause; {under}: make its condition that one.");
        plan.no_patch = Some(format!(
            "the update at line {line} has an `if` clause already"
        ));
        return Some(plan);
    }
    // The condition must mean the same at the update: the guarded code
    // comes before it in the iteration (after it, for a download) and
    // nothing in between assigns a name the condition reads.
    let cond_names: Vec<String> = guard
        .condition
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
        .map(key)
        .collect();
    let (ordered, from, to) = if download {
        (guard.line > line, line + 1, guard.line)
    } else {
        (guard.end_line < line, guard.line, line.saturating_sub(1))
    };
    let changed_between = ordered
        && src
            .uses(from, to, &[])
            .iter()
            .any(|u| u.write && cond_names.contains(&u.key));
    if !ordered || changed_between {
        plan.text = format!(
            "{} Move the update into that `if` block, {} the {changes}: the condition does not hold the same value at line {line}.",
            capitalized(&under),
            if download { "before" } else { "after" }
        );
        plan.no_patch = Some(format!(
            "`{}` may change between line {} and the update at line {line}",
            guard.condition, guard.line
        ));
        return Some(plan);
    }
    let (directive, edit, no_patch) = with_if(src, &d, &guard.condition);
    plan.text = format!(
        "{}: add `if({})` to the update (`{directive}`), or move the update into that `if` block {} the {changes}.",
        capitalized(&under),
        guard.condition,
        if download { "before" } else { "after" }
    );
    plan.edits.extend(edit);
    plan.no_patch = no_patch;
    plan.directive = Some(directive);
    Some(plan)
}

/// Directive `d` of `src` with `if(condition)` added: as it then reads,
/// the edit that makes it so, or why there is none (a directive continued
/// over several lines).
pub fn with_if(
    src: &SourceFile,
    d: &crate::source::Directive,
    condition: &str,
) -> (String, Option<Edit>, Option<String>) {
    let mut clauses: Vec<String> = d.clauses.iter().map(|c| c.text()).collect();
    clauses.push(format!("if({condition})"));
    let directive = d.render(&d.construct_name(), &clauses);
    let directive = match &d.comment {
        Some(c) => directive.trim_end_matches(c.as_str()).trim().to_string(),
        None => directive.trim().to_string(),
    };
    if d.end_line != d.line {
        let why = format!(
            "the directive at line {} continues over several lines: add the clause by hand",
            d.line
        );
        return (directive, None, Some(why));
    }
    let edit = Edit::rewrite(
        src,
        d,
        None,
        d.clauses.iter().map(|c| c.name.clone()).collect(),
        clauses,
    );
    (directive, Some(edit), None)
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> SourceFile {
        SourceFile::new("u.c", "u.c".into(), Lang::C, text.to_string())
    }

    const GUARDED: &str = "void f(int n, int e, double *b) {\n  for (int s = 0; s < n; s++) {\n    if (s % e == 0) {\n      for (int i = 0; i < n; i++)\n        b[i] = s;\n    }\n#pragma acc update device(b[0:n])\n#pragma acc parallel loop present(b[0:n])\n    for (int i = 0; i < n; i++) b[i] += 1;\n  }\n}\n";

    #[test]
    fn the_guard_becomes_the_if_clause() {
        let p = plan(&src(GUARDED), 7).expect("an update");
        assert_eq!(
            p.directive.as_deref(),
            Some("#pragma acc update device(b[0:n]) if(s % e == 0)")
        );
        assert_eq!(p.edits.len(), 1);
        assert!(
            p.text.contains("the `if` at line 3, writes at line 5"),
            "{}",
            p.text
        );
    }

    #[test]
    fn a_condition_changed_before_the_update_means_moving_it() {
        let text = GUARDED.replace("#pragma acc update", "    e++;\n#pragma acc update");
        let p = plan(&src(&text), 8).expect("an update");
        assert!(p.edits.is_empty());
        assert!(
            p.text.contains("Move the update into that `if` block"),
            "{}",
            p.text
        );
    }

    #[test]
    fn unguarded_writes_have_no_condition() {
        let text = GUARDED.replace("if (s % e == 0) {", "{");
        let p = plan(&src(&text), 7).expect("an update");
        assert!(p.edits.is_empty());
        assert_eq!(
            p.no_patch.as_deref(),
            Some("no single condition guards the host's writes")
        );
    }

    /// Fortran: the host loop, the block `if` and the compute construct
    /// left out of the host's writes, as the parser reads them.
    #[test]
    fn a_fortran_guard_becomes_the_if_clause() {
        let text = "subroutine f(n, e, b)\n  integer :: n, e, s, i\n  real :: b(n)\n  do s = 1, n\n    if (mod(s, e) == 0) then\n      do i = 1, n\n        b(i) = s\n      end do\n    end if\n    !$acc update device(b(1:n))\n    !$acc parallel loop present(b)\n    do i = 1, n\n      b(i) = b(i) + 1\n    end do\n  end do\nend subroutine f\n";
        let f = SourceFile::new("u.f90", "u.f90".into(), Lang::Fortran, text.to_string());
        let p = plan(&f, 10).expect("an update");
        assert_eq!(
            p.directive.as_deref(),
            Some("!$acc update device(b(1:n)) if(mod(s, e) == 0)")
        );
        assert_eq!(p.edits.len(), 1);
        assert!(
            p.text.contains("the `if` at line 5, writes at line 7"),
            "{}",
            p.text
        );
        // A `do while` host loop is one too; an `else` branch writing the
        // array leaves no single condition.
        let other = text
            .replace("do s = 1, n", "do while (s < n)")
            .replace("    end if\n", "    else\n      b(1) = 0\n    end if\n");
        let p = plan(
            &SourceFile::new("u.f90", "u.f90".into(), Lang::Fortran, other),
            12,
        )
        .expect("an update");
        assert_eq!(
            p.no_patch.as_deref(),
            Some("no single condition guards the host's writes")
        );
    }

    /// C++: a `while` host loop in a member function, the guarded writes
    /// in a one-line `for` over the vector's size.
    #[test]
    fn a_cpp_guard_becomes_the_if_clause() {
        let text = "#include <vector>\nstruct Heat {\n  std::vector<double> v;\n  void run(int n, int e) {\n    double *b = v.data();\n    int s = 0;\n    while (s < n) {\n      if (s % e == 0) {\n        for (std::size_t i = 0; i < v.size(); i++) b[i] = s;\n      }\n#pragma acc update device(b[0:n])\n#pragma acc parallel loop present(b[0:n])\n      for (int i = 0; i < n; i++) b[i] += 1;\n      s++;\n    }\n  }\n};\n";
        let f = SourceFile::new("u.cpp", "u.cpp".into(), Lang::C, text.to_string());
        let p = plan(&f, 11).expect("an update");
        assert_eq!(
            p.directive.as_deref(),
            Some("#pragma acc update device(b[0:n]) if(s % e == 0)")
        );
        assert!(
            p.text.contains("the `if` at line 8, writes at line 9"),
            "{}",
            p.text
        );
    }

    const READS: &str = "void f(int n, double *u) {\n  double seen = 0;\n  for (int step = 0; step < n; step++) {\n#pragma acc parallel loop present(u[0:n])\n    for (int i = 0; i < n; i++) u[i] += 1;\n#pragma acc update self(u[0:n])\n    if (step % 10 == 0) {\n      for (int i = 0; i < n; i++)\n        seen += u[i];\n    }\n  }\n}\n";

    #[test]
    fn the_reads_guard_becomes_the_downloads_if_clause() {
        let p = plan_download(&src(READS), 6).expect("an update self");
        assert_eq!(
            p.directive.as_deref(),
            Some("#pragma acc update self(u[0:n]) if(step % 10 == 0)")
        );
        assert_eq!(p.edits.len(), 1);
        assert!(
            p.text.contains("The host reads `u` only when `step % 10 == 0` (the `if` at line 7, reads at line 9)"),
            "{}",
            p.text
        );
        // An upload plan does not take a download.
        assert_eq!(plan(&src(READS), 6), None);
        // Reads before the update (of the previous download): move it.
        let before = READS.replace(
            "#pragma acc update self(u[0:n])\n    if (step % 10 == 0) {\n      for (int i = 0; i < n; i++)\n        seen += u[i];\n    }\n",
            "    if (step % 10 == 0) {\n      for (int i = 0; i < n; i++)\n        seen += u[i];\n    }\n#pragma acc update self(u[0:n])\n",
        );
        let p = plan_download(&src(&before), 10).expect("an update self");
        assert!(p.edits.is_empty(), "{p:?}");
    }
}
