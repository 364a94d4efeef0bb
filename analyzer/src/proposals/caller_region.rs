//! A `data` region in a caller: the construct's function has no host loop
//! around it, the repetition comes from a loop in a function that calls
//! it (or calls its caller). Proposed by D6 from the call chain the trace
//! recorded ([`crate::Run::callers`]) and the source of every function on
//! it.
//!
//! The construct's data clauses are written in its own function's names
//! (`copyin(u[0:nx*ny])`); each call on the chain maps parameters to the
//! caller's arguments, so the same clause reads `copyin(unew[0:nx*ny])` in
//! the caller that passes `unew` for `u`. The first caller with a host loop
//! around the call gets the region; the construct keeps its items under
//! `present(...)`.
//!
//! Clause choice per array of the caller, from all the constructs the loop
//! reaches: copied in by any (copy, copyin) and out by any (copy, copyout):
//! `copy`; only in: `copyin`; only out: `copyout`; neither: `create`; an
//! array whose pointer the host swaps inside the loop: `copy` (both
//! buffers stay mapped and both come back). Host reads of an array inside
//! the loop get an `update host` before them; host writes mean no patch.

use std::collections::BTreeMap;

use super::key;
use crate::model::Site;
use crate::patch::Edit;
use crate::proposals::data_region::{order_clauses, ArrayChoice, RegionPlan};
use crate::source::{rewrite_in_caller, Lang, SourceFile, SourceSet};

/// One item of a construct's data clause, in the callee's and the caller's
/// names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    /// copy, copyin, copyout or create.
    clause: String,
    /// As the construct writes it.
    callee: String,
    /// As the caller with the loop would write it.
    caller: String,
}

/// A construct's data clauses carried up its call chain to the first
/// caller with a host loop around the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifted {
    /// The caller's file and its loop's header line.
    pub file: String,
    pub loop_line: u32,
    /// The caller's function as its source names it.
    pub function: String,
    /// How many calls up (1: the construct's caller).
    pub depth: usize,
    /// The construct: its file and directive line.
    pub construct_file: String,
    pub construct_line: u32,
    /// The construct's function as its source names it.
    pub construct_function: String,
    /// Each call on the way up: (file, line) of the call, innermost first.
    pub calls: Vec<(String, u32)>,
    /// The function the loop's function calls (the construct's, or one
    /// that leads to it).
    loop_callee: String,
    items: Vec<Item>,
    /// How often one iteration of the loop reaches the construct, as the
    /// source counts the calls on the way (`advance` calling `heat_step`
    /// twice: 2); None where a call sits in another loop of its own, so
    /// the count varies.
    pub calls_per_iteration: Option<u64>,
    /// Distinct host buffers the run uploaded and downloaded at the
    /// construct (set by the rule from the trace): more than its clauses
    /// name means it is also called with other arrays than the recorded
    /// call passes.
    pub buffers_in: usize,
    pub buffers_out: usize,
}

/// The clause a data clause name stands for here (None: not moved).
fn movement(name: &str) -> Option<&'static str> {
    Some(match name {
        "copy" | "pcopy" | "present_or_copy" => "copy",
        "copyin" | "pcopyin" | "present_or_copyin" => "copyin",
        "copyout" | "pcopyout" | "present_or_copyout" => "copyout",
        "create" | "pcreate" | "present_or_create" => "create",
        _ => return None,
    })
}

/// Carries the construct at `site` up the frames above it (`callers`,
/// innermost first) to the first caller with a host loop around its call.
/// Err says, as a sentence, what was missing.
pub fn lift(sources: &SourceSet, site: &Site, callers: &[Site]) -> Result<Lifted, String> {
    let Some(line) = site.line else {
        return Err("the construct has no source line".to_string());
    };
    let Some(src) = sources.get(&site.file) else {
        return Err(format!("source {} not read", site.file));
    };
    let Some(d) = src.directive_at(line) else {
        return Err(format!("no OpenACC directive at {}:{line}", site.file));
    };
    let mut items: Vec<Item> = Vec::new();
    for cl in &d.clauses {
        if let Some(m) = movement(&cl.name) {
            for it in cl.items() {
                items.push(Item {
                    clause: m.to_string(),
                    callee: it.clone(),
                    caller: it,
                });
            }
        }
    }
    let Some(f) = src.function_at(line) else {
        return Err(format!(
            "no host loop around {}:{line}, and the function around it was not recognised",
            site.file
        ));
    };
    if callers.is_empty() {
        return Err(format!(
            "no host loop around {}:{line} in `{}`, and the trace holds no callers for it (recorded before trace format 1.2, or the runtime named the line itself)",
            site.file, f.name
        ));
    }
    if items.is_empty() {
        return Err(format!(
            "the loop is in a caller of `{}`, but the construct at {}:{line} has no data clauses to move there (its arrays are mapped implicitly: name them in `copyin`/`copyout` clauses with their extents first)",
            f.name, site.file
        ));
    }
    let construct_function = f.name.clone();
    let mut cur_src: &SourceFile = src;
    let mut cur = f;
    let mut calls = Vec::new();
    let mut seen = Vec::new();
    let mut per_iteration = Some(1u64);
    for (k, frame) in callers.iter().enumerate() {
        let Some(fline) = frame.line else {
            return Err(format!(
                "no host loop in `{}`; its caller `{}` has no line information",
                cur.name, frame.function
            ));
        };
        let Some(fsrc) = sources.get(&frame.file) else {
            return Err(format!(
                "no host loop in `{}`; the loop would be in its caller `{}` ({}:{fline}), whose source was not read",
                cur.name, frame.function, frame.file
            ));
        };
        let Some((args, _, _)) = fsrc.call_at(fline, &cur.name) else {
            return Err(format!(
                "no host loop in `{}`; its call at {}:{fline} was not found in the source",
                cur.name, frame.file
            ));
        };
        let map: Vec<(String, String)> = cur.params.iter().cloned().zip(args).collect();
        let locals = cur_src.locals_in(cur.unit.0, cur.unit.1);
        for it in &mut items {
            it.caller = rewrite_in_caller(cur_src.lang, &it.caller, &map, &locals)
                .map_err(|why| format!("the loop is in a caller, but {why}"))?;
        }
        calls.push((frame.file.clone(), fline));
        let caller_fn = fsrc.function_at(fline);
        seen.push(format!(
            "`{}` ({}:{fline})",
            caller_fn
                .as_ref()
                .map(|h| h.name.clone())
                .unwrap_or_else(|| frame.function.clone()),
            frame.file
        ));
        let lp = fsrc.enclosing_loops(fline).first().copied();
        // The calls of this function one pass through the loop's body (or
        // through the caller, further down the chain) makes.
        let (a, b) = match lp {
            Some(lp) => (lp.header_line + 1, lp.end_line),
            None => fsrc.unit_of(fline).unwrap_or((fline, fline)),
        };
        let here = fsrc.calls_in(a, b, &cur.name);
        let straight = here.iter().all(|&(line, _)| {
            fsrc.enclosing_loops(line).first().map(|l| l.header_line) == lp.map(|l| l.header_line)
        });
        per_iteration = match per_iteration {
            Some(n) if straight && !here.is_empty() => Some(n * here.len() as u64),
            _ => None,
        };
        if let Some(lp) = lp {
            return Ok(Lifted {
                file: frame.file.clone(),
                loop_line: lp.header_line,
                function: caller_fn
                    .map(|h| h.name)
                    .unwrap_or_else(|| frame.function.clone()),
                depth: k + 1,
                construct_file: site.file.clone(),
                construct_line: d.line,
                construct_function: construct_function.clone(),
                calls,
                loop_callee: cur.name.clone(),
                items,
                calls_per_iteration: per_iteration,
                buffers_in: 0,
                buffers_out: 0,
            });
        }
        let Some(next) = caller_fn else {
            return Err(format!(
                "no host loop in `{}` nor around its call in {}:{fline}, and the function there was not recognised",
                cur.name, frame.file
            ));
        };
        cur_src = fsrc;
        cur = next;
    }
    Err(format!(
        "no host loop around the construct in `{construct_function}` nor around its calls in {} (the recorded callers)",
        seen.join(", ")
    ))
}

/// Plans the region at one caller's loop for every construct lifted to it;
/// `moved` is the number of distinct host buffers the run moved at those
/// constructs.
pub fn plan(sources: &SourceSet, lifted: &[&Lifted], moved: usize) -> Option<RegionPlan> {
    let first = lifted.first()?;
    let src = sources.get(&first.file)?;
    let lp = src.loop_at(first.loop_line)?.clone();
    let lang = src.lang;
    let mut plan = RegionPlan {
        file: src.path.clone(),
        loop_line: lp.header_line,
        loop_end: lp.end_line,
        loop_text: src.header_text(&lp),
        patchable: true,
        ..RegionPlan::default()
    };
    // Per array of the caller: in, out, the item and the clauses seen.
    struct Acc {
        name: String,
        item: String,
        copied_in: bool,
        copied_out: bool,
        /// Passed in other roles too (the trace saw more buffers).
        other_roles: bool,
        seen: Vec<String>,
    }
    let mut arrays: Vec<Acc> = Vec::new();
    for l in lifted {
        // The trace saw more buffers go one way than the clauses name: the
        // function is also called with its arrays in other roles (the
        // recorded chain is the first call's). Moving them both ways is
        // right whatever the roles.
        let named_in = l
            .items
            .iter()
            .filter(|i| matches!(i.clause.as_str(), "copy" | "copyin"))
            .count();
        let named_out = l
            .items
            .iter()
            .filter(|i| matches!(i.clause.as_str(), "copy" | "copyout"))
            .count();
        let other_roles = l.buffers_in > named_in || l.buffers_out > named_out;
        if other_roles {
            plan.notes.push(format!(
                "the run moved {} buffers up and {} down at {}:{} where its clauses name {named_in} and {named_out}: `{}` is called with its arrays in other roles too, so they all get `copy`",
                l.buffers_in, l.buffers_out, l.construct_file, l.construct_line, l.construct_function
            ));
        }
        for it in &l.items {
            let name = it
                .caller
                .split(['[', '('])
                .next()
                .unwrap_or("")
                .trim()
                .to_string();
            let k = key(lang, &name);
            let at = format!(
                "`{}` at {}:{}",
                it.callee.split(['[', '(']).next().unwrap_or("").trim(),
                l.construct_file,
                l.construct_line
            );
            let seen = format!("{} of {at}", it.clause);
            let a = match arrays.iter_mut().position(|a| key(lang, &a.name) == k) {
                Some(i) => &mut arrays[i],
                None => {
                    arrays.push(Acc {
                        name: name.clone(),
                        item: it.caller.clone(),
                        copied_in: false,
                        copied_out: false,
                        other_roles: false,
                        seen: Vec::new(),
                    });
                    arrays.last_mut()?
                }
            };
            a.other_roles |= other_roles;
            a.copied_in |= other_roles || matches!(it.clause.as_str(), "copy" | "copyin");
            a.copied_out |= other_roles || matches!(it.clause.as_str(), "copy" | "copyout");
            if !a.seen.contains(&seen) {
                a.seen.push(seen);
            }
        }
    }
    // Arrays an existing region around the loop holds stay as they are.
    if let Some(r) = crate::proposals::data_region::enclosing_data(src, &lp) {
        let held: Vec<String> = r
            .clauses
            .iter()
            .filter(|c| crate::source::is_data_clause(&c.name))
            .flat_map(|c| c.items())
            .map(|i| key(lang, i.split(['[', '(']).next().unwrap_or("").trim()))
            .collect();
        let before = arrays.len();
        arrays.retain(|a| !held.contains(&key(lang, &a.name)));
        if arrays.is_empty() && before > 0 {
            plan.patchable = false;
            plan.notes.push(format!(
                "the `data` region at line {} already holds every array the calls pass: the constructs need `present` only",
                r.line
            ));
        }
    }
    if moved > arrays.len() {
        plan.patchable = false;
        plan.notes.push(format!(
            "the run moved {moved} different buffers at these constructs but the calls pass {} arrays ({}): the functions are also called with other arrays, which a region here would not hold",
            arrays.len(),
            arrays.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    // Host uses inside the loop, the calls themselves left out.
    let mut skip: Vec<(u32, u32)> = Vec::new();
    for l in lifted {
        skip.extend(src.calls_in(lp.header_line, lp.end_line, &l.loop_callee));
    }
    let skip: Vec<(u32, u32)> = skip
        .into_iter()
        .chain(
            src.directives_in(lp.header_line + 1, lp.end_line)
                .iter()
                .map(|d| (d.line, d.end_line)),
        )
        .collect();
    let in_loop = src.uses(lp.header_line + 1, lp.end_line, &skip);
    for a in &arrays {
        let k = key(lang, &a.name);
        let mine: Vec<_> = in_loop.iter().filter(|u| u.key == k).collect();
        let swapped = lang == Lang::C && mine.iter().any(|u| u.write && !u.indexed && !u.whole);
        let reads: Vec<u32> = mine
            .iter()
            .filter(|u| (u.indexed || u.whole || lang == Lang::Fortran) && u.read && !u.write)
            .map(|u| u.line)
            .collect();
        let writes: Vec<u32> = mine
            .iter()
            .filter(|u| (u.indexed || lang == Lang::Fortran) && u.write)
            .map(|u| u.line)
            .collect();
        let (clause, reason) = if swapped {
            ("copy", format!("the host swaps `{}` with another array inside the loop, so both buffers stay mapped and both come back", a.name))
        } else {
            let clause = match (a.copied_in, a.copied_out) {
                (true, true) => "copy",
                (true, false) => "copyin",
                (false, true) => "copyout",
                (false, false) => "create",
            };
            let why = format!("the called constructs have {}", a.seen.join(" and "));
            if a.other_roles {
                (
                    clause,
                    format!("{why}, and the function is called with its arrays in other roles too, so it moves both ways"),
                )
            } else {
                (clause, why)
            }
        };
        plan.arrays.push(ArrayChoice {
            name: a.name.clone(),
            clause: clause.to_string(),
            item: a.item.clone(),
            reason,
            host_reads_in_loop: reads,
            host_writes_in_loop: writes,
        });
    }
    let clauses = order_clauses(&mut plan.arrays);
    // C: as the directives of the loop's function are indented, else as
    // the construct's; Fortran: as the loop.
    let indent = match lang {
        Lang::C => {
            let unit = src.unit_of(lp.header_line).unwrap_or((1, 1));
            src.directives_in(unit.0, unit.1)
                .first()
                .map(|d| d.indent.clone())
                .or_else(|| {
                    let l = lifted.first()?;
                    Some(
                        sources
                            .get(&l.construct_file)?
                            .directive_at(l.construct_line)?
                            .indent,
                    )
                })
                .unwrap_or_default()
        }
        Lang::Fortran => src.indent_of(lp.header_line),
    };
    let region = crate::proposals::data_region::enclosing_data(src, &lp);
    crate::proposals::data_region::place_region(
        &mut plan,
        src,
        &lp,
        lang,
        region.as_ref(),
        &clauses,
        &indent,
    );
    // Host reads inside the loop: refresh the host copy first.
    let mut reads: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for a in &plan.arrays {
        if let Some(&l) = a.host_reads_in_loop.first() {
            reads.entry(l).or_default().push(a.item.clone());
        }
        if let Some(&l) = a.host_writes_in_loop.first() {
            plan.patchable = false;
            plan.notes.push(format!(
                "the host writes `{}` at line {l} inside the loop: add `{} update device({})` after it",
                a.name,
                lang.sentinel(),
                a.item
            ));
        }
    }
    for (line, items) in reads {
        plan.edits.push(Edit::InsertBefore {
            file: src.path.clone(),
            line,
            lines: vec![format!(
                "{}{} update host({})",
                match lang {
                    Lang::C => indent.clone(),
                    Lang::Fortran => src.indent_of(line),
                },
                lang.sentinel(),
                items.join(", ")
            )],
        });
    }
    // The constructs: their moved clauses become `present`.
    let mut done: Vec<(String, u32)> = Vec::new();
    for l in lifted {
        let at = (l.construct_file.clone(), l.construct_line);
        if done.contains(&at) {
            continue;
        }
        done.push(at);
        plan.callees.push(format!(
            "`{}` ({}:{})",
            l.construct_function, l.construct_file, l.construct_line
        ));
        let Some(csrc) = sources.get(&l.construct_file) else {
            plan.patchable = false;
            continue;
        };
        let Some(d) = csrc.directive_at(l.construct_line) else {
            plan.patchable = false;
            continue;
        };
        if d.end_line != d.line {
            plan.patchable = false;
            plan.notes.push(format!(
                "the directive at {}:{} continues over several lines: replace its data clauses by `present(...)` by hand",
                l.construct_file, d.line
            ));
            continue;
        }
        let mut remove: Vec<String> = Vec::new();
        for cl in &d.clauses {
            if movement(&cl.name).is_some() && !remove.contains(&cl.name) {
                remove.push(cl.name.clone());
            }
        }
        let items: Vec<String> = l.items.iter().map(|i| i.callee.clone()).collect();
        if d.construct_name() == "kernels" {
            plan.notes.push(format!(
                "`kernels` at {}:{} keeps its construct; check after the change that the compiler still parallelizes it",
                l.construct_file, d.line
            ));
        }
        plan.edits.push(Edit::rewrite(
            csrc,
            &d,
            None,
            remove,
            vec![format!("present({})", items.join(", "))],
        ));
    }
    if let Some(outer) = src.enclosing_loops(lp.header_line).first() {
        plan.notes.push(format!(
            "this loop is inside the loop at line {}; if the host does not use these arrays there either, the region can go around that one",
            outer.header_line
        ));
    }
    Some(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALLER_WITH_REGION: &str = "void step(int n, const double *restrict a, double *restrict b)\n{\n#pragma acc parallel loop copyin(a[0:n]) copyout(b[0:n])\n  for (int i = 0; i < n; i++) b[i] = 2 * a[i];\n}\nint main(void)\n{\n  int n = 10; double x[10] = {0}, y[10], c[10];\n#pragma acc data copyin(c[0:n])\n  for (int s = 0; s < 5; s++)\n    step(n, x, y);\n  return y[0] > 0;\n}\n";

    fn site(line: u32) -> Site {
        Site {
            file: "r.c".into(),
            function: "step".into(),
            line: Some(line),
            address: None,
        }
    }

    #[test]
    fn a_region_around_the_callers_loop_gets_the_clauses() {
        let set = SourceSet::with_text("r.c", CALLER_WITH_REGION);
        let callers = [Site {
            function: "main".into(),
            line: Some(11),
            ..site(0)
        }];
        let mut l = lift(&set, &site(3), &callers).expect("lifted");
        assert_eq!((l.file.as_str(), l.loop_line, l.depth), ("r.c", 10, 1));
        l.buffers_in = 1;
        l.buffers_out = 1;
        let p = plan(&set, &[&l], 2).expect("a plan");
        assert_eq!(p.extends, Some(9));
        assert_eq!(
            p.directive,
            "#pragma acc data copyin(c[0:n]) copyin(x[0:n]) copyout(y[0:n])"
        );
        assert!(p.patchable, "{:?}", p.notes);
        let patched = crate::patch::render(&set, &p.edits).expect("patch");
        let text = &patched.files[0].1;
        assert!(
            text.contains(
                "#pragma acc data copyin(c[0:n]) copyin(x[0:n]) copyout(y[0:n])\n  for (int s"
            ),
            "{text}"
        );
        assert!(
            text.contains("#pragma acc parallel loop present(a[0:n], b[0:n])"),
            "{text}"
        );
    }

    #[test]
    fn a_callee_local_in_a_clause_cannot_go_up() {
        let text = CALLER_WITH_REGION
            .replace("copyin(a[0:n])", "copyin(a[0:m])")
            .replace(
                "{\n#pragma acc parallel",
                "{\n  int m = n;\n#pragma acc parallel",
            );
        let set = SourceSet::with_text("r.c", &text);
        let callers = [Site {
            function: "main".into(),
            line: Some(12),
            ..site(0)
        }];
        let why = lift(&set, &site(4), &callers).expect_err("not lifted");
        assert!(
            why.contains("`m` in `a[0:m]` is local to the called function"),
            "{why}"
        );
    }
}
