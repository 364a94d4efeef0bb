//! Planning a `data` region around a host loop: which arrays, with which
//! clauses, where the host needs `update`s, and how the constructs inside
//! change. Proposed by D6; everything here reads the source, and every choice
//! carries its reason so the proposal can say why.
//!
//! Clause choice per array (from the source of the loop and of the rest of
//! the function or program unit after it):
//! - the host swaps the array's pointer inside the loop: `copy` (both
//!   buffers stay mapped and both come back);
//! - written on the device and read by the host after the loop: `copy`;
//! - written on the device, not read after the loop, and written before it
//!   is read in the first construct that touches it: `create`;
//! - written on the device otherwise: `copyin`;
//! - only read on the device: `copyin`.
//!
//! Host reads of an array inside the loop get an `update host` before them;
//! host writes inside the loop need an `update device` after them, which is
//! proposed in words only.

use std::collections::{BTreeMap, HashMap};

use super::key;
use crate::patch::Edit;
use crate::source::{ArrayDecl, Directive, Lang, Loop, SourceFile};

/// One array of the region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayChoice {
    /// As written in the source.
    pub name: String,
    /// "copy", "copyin" or "create".
    pub clause: String,
    /// The clause item ("A", "u[0:n]").
    pub item: String,
    pub reason: String,
    pub host_reads_in_loop: Vec<u32>,
    pub host_writes_in_loop: Vec<u32>,
}

/// The region to propose.
#[derive(Debug, Clone, Default)]
pub struct RegionPlan {
    pub file: String,
    pub loop_line: u32,
    pub loop_end: u32,
    pub loop_text: String,
    pub arrays: Vec<ArrayChoice>,
    /// The `data` directive, as it would be written.
    pub directive: String,
    pub edits: Vec<Edit>,
    /// Caveats and the reasons there is no patch.
    pub notes: Vec<String>,
    /// False when the source does not allow a safe mechanical edit.
    pub patchable: bool,
    /// For a region in a caller: the constructs in the called functions
    /// that get `present`, as "`name` (file:line)".
    pub callees: Vec<String>,
    /// The line of an existing `data` region around the loop that gets the
    /// clauses (`added`) instead of a second region.
    pub extends: Option<u32>,
    pub added: Vec<String>,
}

/// The innermost `data` region in the loop's function whose block holds
/// the whole loop.
pub fn enclosing_data(src: &SourceFile, lp: &Loop) -> Option<Directive> {
    let unit = src.unit_of(lp.header_line)?;
    src.directives_in(unit.0, lp.header_line.saturating_sub(1))
        .into_iter()
        .rev()
        .filter(|d| d.construct_name() == "data")
        .find(|d| {
            src.block_of(d)
                .is_some_and(|(a, b, _)| a <= lp.header_line && lp.end_line <= b)
        })
}

/// The innermost host loop around the construct at `line`.
pub fn host_loop(src: &SourceFile, line: u32) -> Option<Loop> {
    src.enclosing_loops(line).first().map(|l| (*l).clone())
}

/// A compute construct inside the loop, with its block.
struct Inner {
    d: Directive,
    first: u32,
    last: u32,
    closing: Option<u32>,
}

fn inner_constructs(src: &SourceFile, lp: &Loop) -> Vec<Inner> {
    src.directives_in(lp.header_line + 1, lp.end_line)
        .into_iter()
        .filter(|d| d.is_compute() && d.construct.first().map(String::as_str) != Some("end"))
        .filter_map(|d| {
            let (first, last, closing) = src.block_of(&d)?;
            Some(Inner {
                d,
                first,
                last,
                closing,
            })
        })
        .collect()
}

/// Plans the region around `lp` for the host buffers at `host_ptrs` (those
/// of the repeated transfers at the constructs inside it).
pub fn plan(src: &SourceFile, lp: &Loop, host_ptrs: &[u64]) -> RegionPlan {
    let lang = src.lang;
    let mut plan = RegionPlan {
        file: src.path.clone(),
        loop_line: lp.header_line,
        loop_end: lp.end_line,
        loop_text: src.header_text(lp),
        patchable: true,
        ..RegionPlan::default()
    };
    let inner = inner_constructs(src, lp);
    let decls = src.arrays(Some(lp.header_line));
    // Skip ranges: the constructs (directive to end of block).
    let skip: Vec<(u32, u32)> = inner
        .iter()
        .map(|c| (c.d.line, c.closing.unwrap_or(c.last)))
        .chain(
            src.directives_in(lp.header_line + 1, lp.end_line)
                .iter()
                .map(|d| (d.line, d.end_line)),
        )
        .collect();
    // Arrays the constructs use, in order of first use.
    let mut order: Vec<String> = Vec::new();
    let mut clause_items: HashMap<String, String> = HashMap::new();
    for c in &inner {
        for cl in
            c.d.clauses
                .iter()
                .filter(|cl| crate::source::is_data_clause(&cl.name))
        {
            for item in cl.items() {
                let v = key(lang, item.split(['[', '(']).next().unwrap_or("").trim());
                clause_items.entry(v.clone()).or_insert(item.clone());
                if !order.contains(&v) {
                    order.push(v);
                }
            }
        }
    }
    for c in &inner {
        for u in src.uses(c.first, c.last, &[]) {
            let known = decls.contains_key(&u.key) || clause_items.contains_key(&u.key);
            if known && !order.contains(&u.key) {
                order.push(u.key.clone());
            }
        }
    }
    if order.is_empty() {
        plan.patchable = false;
        plan.notes.push(format!(
            "no array declared in {} is used by the constructs inside the loop at line {}",
            src.path, lp.header_line
        ));
        return plan;
    }
    // A region around the loop already: it gets what it lacks.
    let region = enclosing_data(src, lp);
    if let Some(r) = &region {
        let held: Vec<String> = r
            .clauses
            .iter()
            .filter(|c| crate::source::is_data_clause(&c.name))
            .flat_map(|c| c.items())
            .map(|i| key(lang, i.split(['[', '(']).next().unwrap_or("").trim()))
            .collect();
        order.retain(|k| !held.contains(k));
        if order.is_empty() {
            plan.patchable = false;
            plan.notes.push(format!(
                "the `data` region at line {} already holds every array the constructs inside the loop use",
                r.line
            ));
            return plan;
        }
    }
    // What the trace moved must be covered by the arrays found.
    let mut buffers: Vec<u64> = host_ptrs.to_vec();
    buffers.sort_unstable();
    buffers.dedup();
    if buffers.len() > order.len() {
        plan.patchable = false;
        plan.notes.push(format!(
            "the run moved {} different buffers at these constructs but the source shows {} arrays ({}); some data is mapped in a way this reader does not see",
            buffers.len(),
            order.len(),
            order.join(", ")
        ));
    }
    let unit_end = src
        .unit_of(lp.header_line)
        .map(|u| u.1)
        .unwrap_or(src.lines.len() as u32);
    let after = src.uses(lp.end_line + 1, unit_end, &[]);
    let in_loop = src.uses(lp.header_line + 1, lp.end_line, &skip);
    let is_free = |u: &crate::source::Use| u.callee.as_deref() == Some("free");
    let data_use = |u: &crate::source::Use| match lang {
        Lang::C => u.indexed || (u.whole && !is_free(u)),
        Lang::Fortran => true,
    };
    let swapped: Vec<String> = in_loop
        .iter()
        .filter(|u| lang == Lang::C && u.write && !u.indexed && order.contains(&u.key))
        .map(|u| u.key.clone())
        .collect();
    for k in &order {
        let name = decls.get(k).map(|d| d.name.clone()).unwrap_or_else(|| {
            clause_items
                .get(k)
                .map(|i| i.split(['[', '(']).next().unwrap_or(i).trim().to_string())
                .unwrap_or_else(|| k.clone())
        });
        let mut written = false;
        let mut first_write_only = None;
        for c in &inner {
            let uses: Vec<_> = src
                .uses(c.first, c.last, &[])
                .into_iter()
                .filter(|u| u.key == *k)
                .collect();
            if uses.is_empty() {
                continue;
            }
            written |= uses.iter().any(|u| u.write);
            if first_write_only.is_none() {
                first_write_only = Some((uses.iter().all(|u| u.write && !u.read), c.d.line));
            }
        }
        let read_after = after.iter().any(|u| u.key == *k && data_use(u));
        let host_reads: Vec<u32> = in_loop
            .iter()
            .filter(|u| u.key == *k && data_use(u) && u.read)
            .map(|u| u.line)
            .collect();
        let host_writes: Vec<u32> = in_loop
            .iter()
            .filter(|u| u.key == *k && data_use(u) && u.write)
            .map(|u| u.line)
            .collect();
        let (clause, reason) = if swapped.contains(k) {
            ("copy", format!("the host swaps `{name}` with another array inside the loop, so both buffers stay mapped and both come back"))
        } else if written && read_after {
            (
                "copy",
                format!(
                    "the loop writes `{name}` on the device and the host reads it after the loop"
                ),
            )
        } else if written && first_write_only.is_some_and(|f| f.0) {
            let line = first_write_only.map(|f| f.1).unwrap_or(0);
            ("create", format!("the construct at line {line} writes `{name}` before anything reads it and the host does not read it after the loop: the device needs no initial values (this assumes the loop never reads parts of it that it does not write; --verify checks the output)"))
        } else if written {
            ("copyin", format!("the loop reads `{name}` before writing it on the device and the host does not read it after the loop"))
        } else {
            ("copyin", format!("the device only reads `{name}`"))
        };
        let item = match (lang, clause_items.get(k), decls.get(k)) {
            (Lang::Fortran, _, _) => name.clone(),
            (Lang::C, Some(i), _) if i.contains('[') => i.clone(),
            (Lang::C, _, Some(ArrayDecl { pointer: false, .. })) => name.clone(),
            (
                Lang::C,
                _,
                Some(ArrayDecl {
                    pointer: true,
                    extent: Some(e),
                    ..
                }),
            ) => format!("{name}[0:{e}]"),
            _ => {
                plan.patchable = false;
                plan.notes.push(format!("the size of `{name}` is not known from the source: write its extent in the clause (`{name}[0:n]`)"));
                format!("{name}[0:?]")
            }
        };
        plan.arrays.push(ArrayChoice {
            name,
            clause: clause.to_string(),
            item,
            reason,
            host_reads_in_loop: host_reads,
            host_writes_in_loop: host_writes,
        });
    }
    // copy, copyin, create: the directive and the `present` lists follow it.
    let clauses = order_clauses(&mut plan.arrays);
    let directive_indent = match lang {
        Lang::C => inner
            .first()
            .map(|c| c.d.indent.clone())
            .unwrap_or_else(|| src.indent_of(lp.header_line)),
        Lang::Fortran => src.indent_of(lp.header_line),
    };
    place_region(
        &mut plan,
        src,
        lp,
        lang,
        region.as_ref(),
        &clauses,
        &directive_indent,
    );
    // The constructs inside: data clauses for these arrays become `present`.
    for c in &inner {
        let used: Vec<&ArrayChoice> = plan
            .arrays
            .iter()
            .filter(|a| {
                src.uses(c.first, c.last, &[])
                    .iter()
                    .any(|u| u.key == key(lang, &a.name))
            })
            .collect();
        if used.is_empty() {
            continue;
        }
        if c.d.end_line != c.d.line {
            plan.notes.push(format!(
                "the directive at line {} continues over several lines and was left as it is (its data clauses find the data present)",
                c.d.line
            ));
            continue;
        }
        let ours = |item: &str| {
            let v = item.split(['[', '(']).next().unwrap_or("").trim();
            used.iter().any(|a| key(lang, &a.name) == key(lang, v))
        };
        let mut remove = Vec::new();
        let mut add = Vec::new();
        for cl in
            c.d.clauses
                .iter()
                .filter(|cl| crate::source::is_data_clause(&cl.name) && cl.name != "present")
        {
            let items = cl.items();
            if items.iter().any(|i| ours(i)) {
                remove.push(cl.name.clone());
                let rest: Vec<String> = items.into_iter().filter(|i| !ours(i)).collect();
                if !rest.is_empty() {
                    add.push(format!("{}({})", cl.name, rest.join(", ")));
                }
            }
        }
        let mut items: Vec<String> = used.iter().map(|a| a.item.clone()).collect();
        // One `present` clause: the construct's own items first.
        if let Some(p) = c.d.clause("present") {
            let mut own = p.items();
            own.append(&mut items);
            items = own;
            remove.push("present".to_string());
        }
        add.insert(0, format!("present({})", items.join(", ")));
        // A `kernels` region is parallelized (or not) by the compiler's own
        // analysis, and GCC's changes with the data clauses: a region it ran
        // on many gangs with implicit copies can come out as one gang with
        // `present`. Where the source allows it, make it an explicit
        // `parallel loop`, which does not depend on that analysis.
        let mut construct = None;
        if c.d.construct_name() == "kernels" && !c.d.has_loop() {
            match super::parallel_loop::rewrite_as_parallel_loop(src, &c.d) {
                Ok(rw) => {
                    for a in rw.add.iter().rev() {
                        add.insert(0, a.clone());
                    }
                    remove.extend(rw.remove.iter().cloned());
                    construct = Some("parallel loop".to_string());
                    if let Some(end) = rw.closing {
                        plan.edits.push(Edit::Delete {
                            file: src.path.clone(),
                            line: end,
                            expect: src.line(end).trim().to_string(),
                        });
                    }
                    plan.notes.push(format!(
                        "`kernels` at line {} becomes an explicit `parallel loop`: with `present` clauses GCC may run a `kernels` region on one gang where it parallelized it before",
                        c.d.line
                    ));
                }
                Err(why) => plan.notes.push(format!(
                    "`kernels` at line {} stays `kernels` ({why}); check after the change that the compiler still parallelizes it",
                    c.d.line
                )),
            }
        }
        plan.edits
            .push(Edit::rewrite(src, &c.d, construct, remove, add));
    }
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
                "{directive_indent}{} update host({})",
                lang.sentinel(),
                items.join(", ")
            )],
        });
    }
    if let Some(outer) = src.enclosing_loops(lp.header_line).first() {
        plan.notes.push(format!(
            "this loop is inside the loop at line {}; if the host does not use these arrays there either, the region can go around that one",
            outer.header_line
        ));
    }
    plan
}

/// Puts the `data` directive of `plan` around the loop `lp` of `src`:
/// `region`, a `data` region already there, gets `clauses` after its own;
/// else a new directive (with `end data` in Fortran) indented by `indent`.
pub(crate) fn place_region(
    plan: &mut RegionPlan,
    src: &SourceFile,
    lp: &Loop,
    lang: Lang,
    region: Option<&Directive>,
    clauses: &[String],
    indent: &str,
) {
    match region {
        Some(r) => {
            let mut all: Vec<String> = r.clauses.iter().map(|c| c.text()).collect();
            all.extend(clauses.iter().cloned());
            plan.directive = r.render(&r.construct_name(), &all).trim().to_string();
            // The comment stays on the line, not in the directive shown.
            if let Some(c) = &r.comment {
                plan.directive = plan
                    .directive
                    .trim_end_matches(c.as_str())
                    .trim()
                    .to_string();
            }
            plan.extends = Some(r.line);
            plan.added = clauses.to_vec();
            if r.end_line != r.line {
                plan.patchable = false;
                plan.notes.push(format!(
                    "the `data` directive at line {} continues over several lines: add {} to it by hand",
                    r.line,
                    clauses.join(" ")
                ));
            }
            // Its own clauses first, as written, then the new ones.
            plan.edits.push(Edit::rewrite(
                src,
                r,
                None,
                r.clauses.iter().map(|c| c.name.clone()).collect(),
                all,
            ));
        }
        None => {
            plan.directive = format!("{} data {}", lang.sentinel(), clauses.join(" "));
            plan.edits.push(Edit::InsertBefore {
                file: src.path.clone(),
                line: lp.header_line,
                lines: vec![format!("{indent}{}", plan.directive)],
            });
            if lang == Lang::Fortran {
                plan.edits.push(Edit::InsertAfter {
                    file: src.path.clone(),
                    line: lp.end_line,
                    lines: vec![format!("{indent}!$acc end data")],
                });
            }
        }
    }
}

/// Orders `arrays` by clause (copy, copyin, copyout, create, then the
/// others) and gives the data directive's clauses in that order, one per
/// kind with its items: the one ranking both region proposals follow.
pub(crate) fn order_clauses(arrays: &mut [ArrayChoice]) -> Vec<String> {
    let rank = |c: &str| {
        ["copy", "copyin", "copyout", "create"]
            .iter()
            .position(|x| *x == c)
            .unwrap_or(9)
    };
    arrays.sort_by_key(|a| rank(&a.clause));
    let mut by_clause: BTreeMap<usize, (String, Vec<String>)> = BTreeMap::new();
    for a in arrays.iter() {
        by_clause
            .entry(rank(&a.clause))
            .or_insert_with(|| (a.clause.clone(), Vec::new()))
            .1
            .push(a.item.clone());
    }
    by_clause
        .values()
        .map(|(c, items)| format!("{c}({})", items.join(", ")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{order_clauses, ArrayChoice};

    fn array(clause: &str, item: &str) -> ArrayChoice {
        ArrayChoice {
            name: item.chars().take_while(|c| c.is_alphanumeric()).collect(),
            clause: clause.into(),
            item: item.into(),
            reason: String::new(),
            host_reads_in_loop: Vec::new(),
            host_writes_in_loop: Vec::new(),
        }
    }

    /// copy before copyin before copyout before create, one clause per
    /// kind holding its items in the order they came.
    #[test]
    fn clauses_come_in_one_order_one_per_kind() {
        let mut a = vec![
            array("create", "t[0:n]"),
            array("copyin", "b[0:n]"),
            array("copy", "u[0:n]"),
            array("copyin", "c[0:n]"),
        ];
        assert_eq!(
            order_clauses(&mut a),
            ["copy(u[0:n])", "copyin(b[0:n], c[0:n])", "create(t[0:n])"]
        );
        assert_eq!(a[0].name, "u");
        assert_eq!(a[3].name, "t");
    }
}
