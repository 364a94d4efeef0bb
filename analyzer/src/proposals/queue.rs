//! Queueing: synchronous compute constructs launched on one async queue
//! (`async(1)`) with one `wait(1)` before the host runs anything else, so
//! that the host does not wait for every kernel. Proposed by L5 and R1
//! for the constructs they name; planned from the source alone, and only
//! where the change cannot alter what the program computes:
//!
//! - a run of two or more constructs that follow each other in one block
//!   (nothing but blank lines and comments between one's statement and
//!   the next directive) gets `async(1)` on each and one `wait(1)` right
//!   after the last one's statement, before anything else runs (the end of
//!   a data region, host code, an `update`, an MPI call);
//! - a host loop whose body holds nothing but such constructs, or calls of
//!   functions (in any file) whose bodies hold nothing but such constructs
//!   and declarations, gets `async(1)` on all of them and one `wait(1)`
//!   right after the loop.
//!
//! A construct that already names a queue (`async`, `wait`), reduces into
//! a variable the host reads, or brings data back (`copy`, `copyout`)
//! stays as it is; its directive on several lines too (the patch rewrites
//! one-line directives only).

use crate::patch::Edit;
use crate::source::{lang_key, Block, Directive, Lang, SourceFile, SourceSet};

/// A construct (or a host loop) by its file and directive (header) line.
pub type At = (String, u32);

/// The queueing change for a set of constructs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QueuePlan {
    pub edits: Vec<Edit>,
    /// The constructs that get `async(1)`.
    pub queued: Vec<At>,
    /// Each `wait(1)`: after this line of this file.
    pub waits: Vec<At>,
    /// The host loop after which the one `wait(1)` goes, when its body
    /// holds nothing else.
    pub host_loop: Option<At>,
    /// Why constructs were left as they are, as sentences.
    pub notes: Vec<String>,
}

/// Clauses that bring data back to the host at the construct's end.
const COPY_BACK: &[&str] = &[
    "copy",
    "copyout",
    "pcopy",
    "pcopyout",
    "present_or_copy",
    "present_or_copyout",
];

/// The async queue the patch uses.
const QUEUE: &str = "1";

/// Plans the queueing of the constructs `named`; `host_loop` is the loop
/// that repeats them, when the finding knows it.
pub fn plan(sources: &SourceSet, named: &[At], host_loop: Option<&At>) -> QueuePlan {
    let mut out = QueuePlan::default();
    let mut left: Vec<At> = named.to_vec();
    left.sort();
    left.dedup();
    if let Some(lp) = host_loop {
        match whole_loop(sources, named, lp) {
            Ok((constructs, wait)) => {
                for (file, d) in &constructs {
                    if let Some(src) = sources.get(file) {
                        out.edits.push(async_edit(src, d));
                    }
                    out.queued.push((file.clone(), d.line));
                }
                out.edits.push(wait);
                out.waits.push(lp.clone());
                out.host_loop = Some(lp.clone());
                left.retain(|c| !out.queued.contains(c));
            }
            Err(why) => out.notes.push(why),
        }
    }
    let mut files: Vec<&str> = left.iter().map(|c| c.0.as_str()).collect();
    files.dedup();
    for file in files {
        let Some(src) = sources.get(file) else {
            out.notes.push(format!("source {file} not read"));
            continue;
        };
        let lines: Vec<u32> = left.iter().filter(|c| c.0 == file).map(|c| c.1).collect();
        runs(src, &lines, &mut out);
    }
    out
}

/// `async(1)` added to directive `d`.
fn async_edit(src: &SourceFile, d: &Directive) -> Edit {
    Edit::rewrite(src, d, None, Vec::new(), vec![format!("async({QUEUE})")])
}

/// The `wait(1)` line, inserted after line `after`.
fn wait_edit(src: &SourceFile, after: u32, indent: &str) -> Edit {
    Edit::InsertAfter {
        file: src.path.clone(),
        line: after,
        lines: vec![format!("{indent}{} wait({QUEUE})", src.lang.sentinel())],
    }
}

/// Why the construct of `d` cannot go on a queue, or None when it can.
fn unqueueable(src: &SourceFile, d: &Directive) -> Option<String> {
    let at = format!("{}:{}", src.path, d.line);
    if !d.is_compute() {
        return Some(format!("{at} is not a compute construct"));
    }
    if d.clause("async").is_some() || d.clause("wait").is_some() {
        return Some(format!("{at} already has an async or wait clause"));
    }
    if let Some(c) = d
        .clauses
        .iter()
        .find(|c| COPY_BACK.contains(&c.name.as_str()))
    {
        return Some(format!(
            "{at} brings data back to the host (`{}`): the host may read it right after the construct",
            c.name
        ));
    }
    let Some((_, last, closing)) = src.block_of(d) else {
        return Some(format!("the block of {at} was not found"));
    };
    let inner = src.directives_in(d.line, closing.unwrap_or(last));
    if inner.iter().any(|x| x.clause("reduction").is_some()) {
        return Some(format!(
            "{at} reduces into a variable the host reads after the construct"
        ));
    }
    if d.end_line != d.line {
        return Some(format!(
            "the directive at {at} continues over several lines: add `async({QUEUE})` by hand"
        ));
    }
    None
}

/// The last line of the construct of `d` (its statement, or its closing
/// directive), when nothing else shares that line.
fn construct_end(src: &SourceFile, d: &Directive) -> Option<u32> {
    let (_, last, closing) = src.block_of(d)?;
    if let Some(c) = closing {
        return Some(c);
    }
    if src.lang == Lang::C && src.statement_shares_last_line(d.end_line)? {
        return None;
    }
    Some(last)
}

/// Header lines of the host loops around line `n`.
fn loops_around(src: &SourceFile, n: u32) -> Vec<u32> {
    src.enclosing_loops(n)
        .iter()
        .map(|l| l.header_line)
        .collect()
}

/// Rule a: runs of two or more queueable constructs of `lines` that follow
/// each other in one block of `src`.
fn runs(src: &SourceFile, lines: &[u32], out: &mut QueuePlan) {
    let mut constructs: Vec<(Directive, u32)> = Vec::new();
    for &l in lines {
        let Some(d) = src.directive_at(l) else {
            out.notes
                .push(format!("no OpenACC directive at {}:{l}", src.path));
            continue;
        };
        if let Some(why) = unqueueable(src, &d) {
            out.notes.push(why);
            continue;
        }
        match construct_end(src, &d) {
            Some(end) => constructs.push((d, end)),
            None => out.notes.push(format!(
                "the statement of {}:{} shares its last line with other code",
                src.path, d.line
            )),
        }
    }
    let follows = |a: &(Directive, u32), b: &(Directive, u32)| {
        b.0.line > a.1
            && !src.code_on_lines(a.1 + 1, b.0.end_line)
            && src.directives_in(a.1 + 1, b.0.line - 1).is_empty()
            && loops_around(src, a.0.line) == loops_around(src, b.0.line)
            && src.function_at(a.0.line).map(|f| f.name)
                == src.function_at(b.0.line).map(|f| f.name)
    };
    let mut run: Vec<&(Directive, u32)> = Vec::new();
    let close = |run: &mut Vec<&(Directive, u32)>, out: &mut QueuePlan| {
        if run.len() >= 2 {
            for (d, _) in run.iter() {
                out.edits.push(async_edit(src, d));
                out.queued.push((src.path.clone(), d.line));
            }
            if let Some((d, end)) = run.last() {
                out.edits.push(wait_edit(src, *end, &d.indent));
                out.waits.push((src.path.clone(), *end));
            }
        } else if let Some((d, _)) = run.first() {
            out.notes.push(format!(
                "{}:{} has no queueable construct right before or after it in its block: a `wait` right after it would wait as long as the construct does",
                src.path, d.line
            ));
        }
        run.clear();
    };
    for c in &constructs {
        if let Some(prev) = run.last() {
            if !follows(prev, c) {
                close(&mut run, out);
            }
        }
        run.push(c);
    }
    close(&mut run, out);
}

/// Rule b: every construct the loop at `lp` runs, when its body holds
/// nothing but queueable constructs and calls of functions holding
/// nothing but those (and declarations); with the edit of the one wait
/// after the loop. Err says what else the loop runs.
fn whole_loop(
    sources: &SourceSet,
    named: &[At],
    lp: &At,
) -> Result<(Vec<(String, Directive)>, Edit), String> {
    let (file, header) = (lp.0.as_str(), lp.1);
    let src = sources
        .get(file)
        .ok_or_else(|| format!("source {file} not read"))?;
    let l = src
        .loop_at(header)
        .ok_or_else(|| format!("no loop at {file}:{header}"))?;
    let block = src
        .loop_block(l)
        .ok_or_else(|| format!("the body of the loop at {file}:{header} was not read"))?;
    let mut found = Vec::new();
    body(sources, named, src, &block, true, &mut found)
        .map_err(|why| format!("the loop at {file}:{header} {why}: it is not queued as a whole"))?;
    if found.is_empty() {
        return Err(format!(
            "the loop at {file}:{header} runs no compute construct"
        ));
    }
    // After the loop: nothing else on its last line, and not the block
    // of a directive (a `data` region without braces would end before
    // the wait).
    if src.loop_shares_last_line(l) {
        return Err(format!(
            "the loop at {file}:{header} shares its last line with other code"
        ));
    }
    let before = (1..header)
        .rev()
        .find(|&n| !src.line(n).trim().is_empty())
        .and_then(|n| src.directive_at(n));
    if let Some(d) = before {
        if src.block_of(&d).is_some_and(|b| b.0 == header) {
            return Err(format!(
                "the loop at {file}:{header} is the block of the `{}` directive at line {}: a wait after the loop would come after that construct's end; put the loop in braces first",
                d.construct_name(),
                d.line
            ));
        }
    }
    let indent = match src.lang {
        Lang::C => src
            .unit_of(header)
            .and_then(|u| {
                src.directives_in(u.0, u.1)
                    .first()
                    .map(|d| d.indent.clone())
            })
            .or_else(|| found.first().map(|(_, d)| d.indent.clone()))
            .unwrap_or_default(),
        Lang::Fortran => src.indent_of(header),
    };
    Ok((found, wait_edit(src, l.end_line, &indent)))
}

/// The statements of `block` of `src`: queueable constructs go to
/// `found`; with `calls`, calls of functions whose bodies pass with
/// declarations allowed; anything else is an Err saying what it is.
fn body(
    sources: &SourceSet,
    named: &[At],
    src: &SourceFile,
    block: &Block,
    calls: bool,
    found: &mut Vec<(String, Directive)>,
) -> Result<(), String> {
    let mut covered: Vec<(u32, u32)> = Vec::new();
    for s in &block.stmts {
        let line = s.first;
        let directive = src
            .directives_in(s.after + 1, line.saturating_sub(1))
            .into_iter()
            .rev()
            .find(|d| d.is_compute() && src.block_of(d).is_some_and(|b| b.0 == line));
        if let Some(d) = directive {
            if let Some(why) = unqueueable(src, &d) {
                return Err(format!("runs a construct that stays synchronous ({why})"));
            }
            let end = construct_end(src, &d)
                .ok_or_else(|| format!("shares line {line} of {} with other code", src.path))?;
            covered.push((d.line, end));
            found.push((src.path.clone(), d));
            continue;
        }
        if calls {
            if let Some(name) = &s.call {
                let (csrc, at) = callee(sources, named, src.lang, name).ok_or_else(|| {
                    format!(
                        "calls `{name}` ({}:{line}), whose source holds none of the constructs named",
                        src.path
                    )
                })?;
                let cblock = csrc
                    .function_block(at)
                    .ok_or_else(|| format!("calls `{name}`, whose body was not found"))?;
                body(sources, named, csrc, &cblock, false, found)
                    .map_err(|why| format!("calls `{name}`, which {why}"))?;
                continue;
            }
        } else if s.declaration {
            continue;
        }
        return Err(format!("runs host code at {}:{line}", src.path));
    }
    // Any other directive in the body (an `update`, a `data` region, a
    // `wait`) runs on the host too.
    let start = block.open + 1;
    let end = match block.close {
        Some(c) => c.saturating_sub(1),
        None => block.stmts.last().map_or(start, |s| s.last),
    };
    if let Some(d) = src
        .directives_in(start, end)
        .into_iter()
        .find(|d| !covered.iter().any(|&(x, y)| x <= d.line && d.line <= y))
    {
        return Err(format!(
            "runs the `{}` directive at {}:{}",
            d.construct_name(),
            src.path,
            d.line
        ));
    }
    Ok(())
}

/// The source and a line of the function `name`, found through the
/// constructs named (the functions the finding's constructs are in).
fn callee<'a>(
    sources: &'a SourceSet,
    named: &[At],
    lang: Lang,
    name: &str,
) -> Option<(&'a SourceFile, u32)> {
    named.iter().find_map(|(file, line)| {
        let src = sources.get(file)?;
        let f = src.function_at(*line)?;
        (lang_key(lang, &f.name) == lang_key(lang, name)).then_some((src, *line))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str) -> String {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../samples")
                .join(path),
        )
        .expect("sample source")
    }

    fn patched(set: &SourceSet, p: &QueuePlan, path: &str) -> Vec<String> {
        let out = crate::patch::render(set, &p.edits).expect("patch");
        let text = &out
            .files
            .iter()
            .find(|f| f.0 == path)
            .expect("patched file")
            .1;
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn runs_in_one_block_are_queued_and_waited_for_after_the_last() {
        let mut set = SourceSet::with_text("small_kernels.c", &c("small_kernels.c"));
        set.insert("x.c", "");
        let named: Vec<At> = [72, 75, 78, 92, 95, 157]
            .iter()
            .map(|&l| ("small_kernels.c".to_string(), l))
            .collect();
        let p = plan(&set, &named, Some(&("small_kernels.c".to_string(), 152)));
        assert_eq!(
            p.queued.iter().map(|q| q.1).collect::<Vec<_>>(),
            [72, 75, 78, 92, 95]
        );
        assert_eq!(p.waits.iter().map(|w| w.1).collect::<Vec<_>>(), [80, 97]);
        assert_eq!(p.host_loop, None);
        assert!(p.notes[0].contains("calls `compute_rhs`"), "{:?}", p.notes);
        let lines = patched(&set, &p, "small_kernels.c");
        assert_eq!(
            lines[71], "#pragma acc parallel loop async(1)",
            "{lines:#?}"
        );
        assert_eq!(lines[80], "#pragma acc wait(1)", "{lines:#?}");
        assert_eq!(lines[81], "    }");
        assert_eq!(lines[98], "#pragma acc wait(1)");
    }

    #[test]
    fn a_loop_calling_one_construct_functions_in_another_file_waits_after_the_loop() {
        let mut set = SourceSet::with_text("queue_files.c", &c("queue_files.c"));
        set.insert("queue_files_step.c", &c("queue_files_step.c"));
        let step = set.get("queue_files_step.c").expect("step");
        let lines: Vec<u32> = step
            .directives_in(1, step.lines.len() as u32)
            .iter()
            .map(|d| d.line)
            .collect();
        assert_eq!(lines.len(), 2);
        let main = set.get("queue_files.c").expect("main");
        let lp = main
            .loops()
            .iter()
            .find(|l| main.line(l.header_line).contains("steps"))
            .expect("the time loop")
            .clone();
        let named: Vec<At> = lines
            .iter()
            .map(|&l| ("queue_files_step.c".to_string(), l))
            .collect();
        let p = plan(
            &set,
            &named,
            Some(&("queue_files.c".to_string(), lp.header_line)),
        );
        assert_eq!(p.queued, named, "{:?}", p.notes);
        assert_eq!(
            p.host_loop,
            Some(("queue_files.c".to_string(), lp.header_line))
        );
        let out = patched(&set, &p, "queue_files.c");
        assert_eq!(out[lp.end_line as usize].trim(), "#pragma acc wait(1)");
        assert_eq!(out[lp.end_line as usize - 1].trim(), "}");
        let step = patched(&set, &p, "queue_files_step.c");
        for l in &lines {
            assert!(
                step[*l as usize - 1].starts_with("#pragma acc parallel loop async(1) "),
                "{}",
                step[*l as usize - 1]
            );
        }
        // Host code in the loop: no whole-loop queueing, and the two
        // constructs are in two functions, so no run either.
        let host = c("queue_files.c").replacen(
            "step_smooth(n, u, v);\n        }",
            "step_smooth(n, u, v);\n            done++;\n        }",
            1,
        );
        let mut set = SourceSet::with_text("queue_files.c", &host);
        set.insert("queue_files_step.c", &c("queue_files_step.c"));
        let p = plan(
            &set,
            &named,
            Some(&("queue_files.c".to_string(), lp.header_line)),
        );
        assert!(p.edits.is_empty(), "{:?}", p.edits);
        assert!(p.notes[0].contains("runs host code"), "{:?}", p.notes);
    }

    #[test]
    fn what_the_host_needs_back_stays_synchronous() {
        let text = "void f(int n, double *a, double *b)\n{\n  double s = 0;\n#pragma acc parallel loop present(a[0:n])\n  for (int i = 0; i < n; i++) a[i] = 1;\n#pragma acc parallel loop copyout(b[0:n])\n  for (int i = 0; i < n; i++) b[i] = 2;\n#pragma acc parallel loop present(a[0:n]) reduction(+:s)\n  for (int i = 0; i < n; i++) s += a[i];\n#pragma acc parallel loop present(a[0:n]) async(2)\n  for (int i = 0; i < n; i++) a[i] = 1;\n#pragma acc parallel loop present(a[0:n])\n  for (int i = 0; i < n; i++) a[i] += 1;\n  b[0] = s;\n}\n";
        let set = SourceSet::with_text("f.c", text);
        let named: Vec<At> = [4, 6, 8, 10, 12]
            .iter()
            .map(|&l| ("f.c".to_string(), l))
            .collect();
        let p = plan(&set, &named, None);
        assert!(p.edits.is_empty(), "{:?}", p.edits);
        assert!(
            p.notes.iter().any(|n| n.contains("`copyout`")),
            "{:?}",
            p.notes
        );
        assert!(
            p.notes.iter().any(|n| n.contains("reduces")),
            "{:?}",
            p.notes
        );
        assert!(
            p.notes.iter().any(|n| n.contains("already has")),
            "{:?}",
            p.notes
        );
    }

    /// Fortran: a time loop calling a subroutine whose header is
    /// continued on a second line; the subroutine's body is read from
    /// after the whole header, so the loop runs nothing but its construct.
    #[test]
    fn fortran_loop_calling_a_subroutine_with_a_continued_header() {
        let text = "module m\ncontains\n  subroutine step(u, &\n                  n)\n    integer :: n, i\n    real(8) :: u(n)\n    !$acc parallel loop present(u)\n    do i = 1, n\n      u(i) = u(i) + 1\n    end do\n  end subroutine step\nend module m\nprogram p\n  use m\n  integer :: s\n  real(8) :: u(64)\n  do s = 1, 10\n    call step(u, 64)\n  end do\nend program p\n";
        let set = SourceSet::with_text("s.f90", text);
        let named: Vec<At> = vec![("s.f90".to_string(), 7)];
        let p = plan(&set, &named, Some(&("s.f90".to_string(), 17)));
        assert_eq!(p.queued, named, "{:?}", p.notes);
        assert_eq!(p.host_loop, Some(("s.f90".to_string(), 17)));
        let out = patched(&set, &p, "s.f90");
        assert_eq!(out[19], "  !$acc wait(1)", "{out:#?}");
    }

    #[test]
    fn fortran_runs_wait_after_the_closing_directive() {
        let text = "subroutine s(n, a)\n  integer :: n, i\n  real(8) :: a(n)\n  !$acc parallel loop present(a)\n  do i = 1, n\n    a(i) = 1\n  end do\n  !$acc end parallel loop\n  ! scale\n  !$acc parallel loop present(a)\n  do i = 1, n\n    a(i) = 2 * a(i)\n  end do\n  print *, a(1)\nend subroutine s\n";
        let set = SourceSet::with_text("s.f90", text);
        let named: Vec<At> = [4, 10].iter().map(|&l| ("s.f90".to_string(), l)).collect();
        let p = plan(&set, &named, None);
        assert_eq!(p.waits, [("s.f90".to_string(), 13)], "{:?}", p.notes);
        let out = patched(&set, &p, "s.f90");
        assert_eq!(out[3], "  !$acc parallel loop async(1) present(a)");
        assert_eq!(out[13], "  !$acc wait(1)");
        assert_eq!(out[14], "  print *, a(1)");
    }
}
