//! Fusion decided from the read and write sets: compute constructs that
//! follow each other over the same iteration space are fusable when no
//! array one of them writes is read or written by another at another index
//! (in one construct the iterations are unordered, so any such access
//! crosses iterations). Subscripts are compared as affine expressions of
//! the loop variables; what cannot be compared is "not proven".
//!
//! A construct whose body only copies one array into another that the
//! construct before it read is a copy-back: swapping the two arrays removes
//! it, fusing it would be wrong.

use std::collections::BTreeMap;

use super::{Access, SLoop, Syntax};
use crate::patch::Edit;
use crate::source::{is_data_clause, Directive, Lang, SourceFile};

/// Whether two constructs may be fused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Fusable,
    /// Not the same iteration space.
    Different(String),
    /// Fusing would change what the program computes.
    Illegal(String),
    /// The sets could not be compared.
    NotProven(String),
}

/// A copy-back construct: `into[..] = from[..]` after a construct that
/// read `into` and wrote `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyBack {
    /// Directive line of the construct before it.
    pub before: u32,
    /// Directive line of the copy-back.
    pub line: u32,
    pub into: String,
    pub from: String,
}

/// Constructs to fuse into one, by directive line, with the patch.
#[derive(Debug, Clone)]
pub struct Chain {
    pub lines: Vec<u32>,
    pub edits: Vec<Edit>,
    /// Why there is no patch, when there is none.
    pub no_patch: Option<String>,
}

/// What the sources say about a group of compute constructs.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub chains: Vec<Chain>,
    pub copy_backs: Vec<CopyBack>,
    /// Pairs in sequence that are not proposed, with the reason.
    pub refused: Vec<(u32, u32, String)>,
}

/// Judges the compute constructs whose directives start at `lines` in `src`.
pub fn plan(src: &SourceFile, lines: &[u32]) -> Plan {
    let syn = src.syntax();
    let mut lines = lines.to_vec();
    lines.sort_unstable();
    lines.dedup();
    // (directive line, loop, directive) of the loop constructs.
    let mut members = Vec::new();
    for &l in &lines {
        let Some(d) = src.directive_at(l).filter(|d| d.line == l) else {
            continue;
        };
        if !d.is_compute() {
            continue;
        }
        if let Some(i) = syn.loop_of_directive(l) {
            members.push((l, i, d));
        }
    }
    let mut out = Plan::default();
    let mut chain: Vec<usize> = Vec::new();
    let close = |chain: &mut Vec<usize>, out: &mut Plan| {
        if chain.len() > 1 {
            let ms: Vec<&(u32, usize, Directive)> = chain.iter().map(|&k| &members[k]).collect();
            out.chains.push(patch(src, syn, &ms));
        }
        chain.clear();
    };
    for k in 0..members.len() {
        let (line, li, _) = &members[k];
        let Some(&prev) = chain.last() else {
            chain.push(k);
            continue;
        };
        let (pline, pli, _) = &members[prev];
        if syn.loops[*pli].next != Some(*li) {
            close(&mut chain, &mut out);
            chain.push(k);
            continue;
        }
        if let Some(c) = copy_back(syn, *pli, *li) {
            out.copy_backs.push(CopyBack {
                before: *pline,
                line: *line,
                ..c
            });
            close(&mut chain, &mut out);
            chain.push(k);
            continue;
        }
        let mut refused = None;
        for &c in chain.iter() {
            let v = judge(syn, &members[c], &members[k]);
            if v != Verdict::Fusable {
                refused = Some((members[c].0, v));
                break;
            }
        }
        match refused {
            None => chain.push(k),
            Some((at, v)) => {
                let why = match v {
                    Verdict::Illegal(s) => format!("not fusable: {s}"),
                    Verdict::NotProven(s) => format!("not proven fusable: {s}"),
                    Verdict::Different(s) => format!("not fusable: {s}"),
                    Verdict::Fusable => String::new(),
                };
                out.refused.push((at, *line, why));
                close(&mut chain, &mut out);
                chain.push(k);
            }
        }
    }
    close(&mut chain, &mut out);
    out
}

fn reductions(d: &Directive) -> Vec<String> {
    d.clauses
        .iter()
        .filter(|c| c.name == "reduction")
        .flat_map(|c| c.vars())
        .collect()
}

/// Whether `b` (after `a` in the program) may be fused with `a`.
pub fn judge(syn: &Syntax, a: &(u32, usize, Directive), b: &(u32, usize, Directive)) -> Verdict {
    let (na, nb) = (syn.nest(a.1), syn.nest(b.1));
    let depth = |d: &Directive| {
        d.clause("collapse")
            .and_then(|c| c.args.as_deref())
            .and_then(|x| x.trim().parse::<usize>().ok())
            .unwrap_or(1)
    };
    if depth(&a.2) != depth(&b.2) {
        return Verdict::Different("they collapse different numbers of loops".into());
    }
    if na.len() != nb.len()
        || na
            .iter()
            .zip(&nb)
            .any(|(x, y)| syn.loops[*x].space != syn.loops[*y].space)
    {
        return Verdict::Different("they loop over different ranges".into());
    }
    let mut rename = BTreeMap::new();
    let mut vars = Vec::new();
    for (x, y) in na.iter().zip(&nb) {
        let (Some(vx), Some(vy)) = (&syn.loops[*x].var, &syn.loops[*y].var) else {
            return Verdict::NotProven("a loop without a loop variable".into());
        };
        rename.insert(vy.clone(), vx.clone());
        vars.push(vx.clone());
    }
    let side = |l: &SLoop, d: &Directive, map: &BTreeMap<String, String>| {
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut locals = Vec::new();
        for s in &l.stmts {
            locals.extend(s.locals.iter().cloned());
            let r = |x: &Access| Access {
                name: map.get(&x.name).cloned().unwrap_or_else(|| x.name.clone()),
                subs: x
                    .subs
                    .iter()
                    .map(|s| s.as_ref().map(|a| a.renamed(map)))
                    .collect(),
            };
            reads.extend(s.reads.iter().map(r));
            writes.extend(s.writes.iter().map(r));
        }
        (reads, writes, locals, reductions(d))
    };
    for (l, which) in [(a.1, "the first"), (b.1, "the second")] {
        if let Some(f) = syn.loops[l].stmts.iter().flat_map(|s| &s.calls).next() {
            return Verdict::NotProven(format!(
                "{which} calls {f}, whose reads and writes are not known"
            ));
        }
    }
    let none = BTreeMap::new();
    let first = side(&syn.loops[a.1], &a.2, &none);
    let second = side(&syn.loops[b.1], &b.2, &rename);
    let inner_vars = |l: usize| -> Vec<String> {
        let mut v = Vec::new();
        let mut stack = vec![l];
        while let Some(x) = stack.pop() {
            v.extend(syn.loops[x].var.clone());
            stack.extend(
                syn.loops
                    .iter()
                    .enumerate()
                    .filter(|(_, y)| {
                        y.start > syn.loops[x].start
                            && y.end <= syn.loops[x].end
                            && y.function == syn.loops[x].function
                    })
                    .map(|(i, _)| i),
            );
        }
        v
    };
    let own = [inner_vars(a.1), inner_vars(b.1)];
    let names = ["the first", "the second"];
    let sides = [&first, &second];
    for w in 0..2 {
        let o = 1 - w;
        let (_, writes, locals, red) = sides[w];
        let (oreads, owrites, olocals, ored) = sides[o];
        for x in writes {
            let accesses = oreads
                .iter()
                .map(|y| ("reads", y))
                .chain(owrites.iter().map(|y| ("writes", y)))
                .filter(|(_, y)| y.name == x.name);
            if !x.is_array() {
                if own[w].contains(&x.name) || locals.contains(&x.name) || vars.contains(&x.name) {
                    continue;
                }
                for (verb, y) in accesses {
                    if olocals.contains(&y.name) || own[o].contains(&y.name) {
                        continue;
                    }
                    if red.contains(&x.name) {
                        if ored.contains(&x.name) && verb == "writes" {
                            continue;
                        }
                        return Verdict::Illegal(format!(
                            "{} {verb} {}, the reduction of {}, complete only after it",
                            names[o], x.name, names[w]
                        ));
                    }
                    return Verdict::NotProven(format!(
                        "{} writes the scalar {} and {} {verb} it",
                        names[w], x.name, names[o]
                    ));
                }
                continue;
            }
            for (verb, y) in accesses {
                if !y.is_array() {
                    return Verdict::NotProven(format!(
                        "{} writes {} and {} uses it whole",
                        names[w],
                        x.text(),
                        names[o]
                    ));
                }
                if x.subs.iter().chain(&y.subs).any(Option::is_none) || x.subs.len() != y.subs.len()
                {
                    return Verdict::NotProven(format!(
                        "{} writes {} and {} {verb} {}: subscripts that are not affine in the loop variables",
                        names[w],
                        x.text(),
                        names[o],
                        y.text()
                    ));
                }
                if x.subs != y.subs {
                    return Verdict::Illegal(format!(
                        "{} {verb} {} where {} writes {}: an element of another iteration",
                        names[o],
                        y.text(),
                        names[w],
                        x.text()
                    ));
                }
            }
        }
    }
    Verdict::Fusable
}

/// `b` is a copy-back after `a`: its body is one statement
/// `X[i..] = Y[i..]` over its loop variables, `a` reads X and writes Y.
pub fn copy_back(syn: &Syntax, a: usize, b: usize) -> Option<CopyBack> {
    let nest = syn.nest(b);
    let vars: Vec<String> = nest
        .iter()
        .map(|&l| syn.loops[l].var.clone())
        .collect::<Option<_>>()?;
    let inner = &syn.loops[*nest.last()?];
    if inner.body_text.len() != 1 || syn.loops[b].stmts.len() != 1 {
        return None;
    }
    let s = &syn.loops[b].stmts[0];
    let [w] = s.writes.as_slice() else {
        return None;
    };
    let arrays: Vec<&Access> = s.reads.iter().filter(|r| r.is_array()).collect();
    let [r] = arrays.as_slice() else {
        return None;
    };
    let plain: Vec<Option<super::Affine>> =
        vars.iter().map(|v| Some(super::Affine::var(v))).collect();
    let mut sorted = vars.clone();
    sorted.sort();
    sorted.dedup();
    if w.subs != r.subs || sorted.len() != vars.len() || w.subs.len() != vars.len() {
        return None;
    }
    // The subscripts are the loop variables, in some order.
    if !w.subs.iter().all(|x| plain.contains(x)) {
        return None;
    }
    if s.reads
        .iter()
        .any(|x| !x.is_array() && !vars.contains(&x.name))
        || w.name == r.name
    {
        return None;
    }
    let la = &syn.loops[a];
    let reads_into = la
        .stmts
        .iter()
        .any(|s| s.reads.iter().any(|x| x.name == w.name));
    let writes_from = la
        .stmts
        .iter()
        .any(|s| s.writes.iter().any(|x| x.name == r.name));
    (reads_into && writes_from).then(|| CopyBack {
        before: 0,
        line: 0,
        into: w.name.clone(),
        from: r.name.clone(),
    })
}

/// The data clause rank for merging: a variable in several kinds takes
/// the one that moves what each construct moved.
fn merge_kind(a: &str, b: &str) -> String {
    let rank = |k: &str| match k.trim_start_matches("present_or_").trim_start_matches('p') {
        "resent" => 0,
        "create" => 1,
        "copyin" | "copyout" => 2,
        _ => 3,
    };
    if a == b {
        return a.to_string();
    }
    let pair = [a, b];
    if pair.contains(&"copyin") && pair.contains(&"copyout") {
        return "copy".into();
    }
    if rank(a) >= rank(b) {
        a.to_string()
    } else {
        b.to_string()
    }
}

/// The patch fusing the constructs of `ms` (in order) into the first.
fn patch(src: &SourceFile, syn: &Syntax, ms: &[&(u32, usize, Directive)]) -> Chain {
    let lines: Vec<u32> = ms.iter().map(|m| m.0).collect();
    let mut chain = Chain {
        lines,
        edits: Vec::new(),
        no_patch: None,
    };
    let nests: Vec<Vec<usize>> = ms.iter().map(|m| syn.nest(m.1)).collect();
    let vars = |n: &Vec<usize>| -> Vec<Option<String>> {
        n.iter().map(|&l| syn.loops[l].var.clone()).collect()
    };
    if nests.iter().any(|n| vars(n) != vars(&nests[0])) {
        chain.no_patch = Some("the loops name their variables differently".into());
        return chain;
    }
    // The union of the data clauses; reductions and the other clauses kept.
    let mut data: Vec<(String, String, String)> = Vec::new(); // (var, kind, item)
    let mut other: Vec<String> = Vec::new();
    let mut other_names: Vec<String> = Vec::new();
    for m in ms {
        for c in &m.2.clauses {
            if is_data_clause(&c.name) {
                for (v, item) in c.vars().into_iter().zip(c.items()) {
                    match data.iter_mut().find(|(x, _, _)| *x == v) {
                        Some(e) => e.1 = merge_kind(&e.1, &c.name),
                        None => data.push((v, c.name.clone(), item)),
                    }
                }
            } else if c.name == "reduction" {
                if !other.contains(&c.text()) {
                    other.push(c.text());
                }
            } else if !other_names.contains(&c.name) {
                other_names.push(c.name.clone());
                other.push(c.text());
            }
        }
    }
    let mut clauses = Vec::new();
    let mut kinds: Vec<String> = Vec::new();
    for (_, k, _) in &data {
        if !kinds.contains(k) {
            kinds.push(k.clone());
        }
    }
    for k in &kinds {
        let items: Vec<&str> = data
            .iter()
            .filter(|(_, kk, _)| kk == k)
            .map(|(_, _, i)| i.as_str())
            .collect();
        clauses.push(format!("{k}({})", items.join(", ")));
    }
    clauses.extend(other);
    let d0 = &ms[0].2;
    let mut new = vec![d0.render(&d0.construct_name(), &clauses)];
    let base = src.indent_of(syn.loops[ms[0].1].start);
    let ind = |n: usize| format!("{base}{}", "    ".repeat(n));
    let depth = nests[0].len();
    for (k, &l) in nests[0].iter().enumerate() {
        let h = syn.loops[l].header.trim().to_string();
        let open = if src.lang == Lang::C && k + 1 == depth {
            " {"
        } else {
            ""
        };
        new.push(format!("{}{h}{open}", ind(k)));
    }
    for n in &nests {
        let inner = &syn.loops[*n.last().unwrap_or(&n[0])];
        for t in &inner.body_text {
            for (j, tl) in t.lines().enumerate() {
                if j == 0 {
                    new.push(format!("{}{}", ind(depth), tl.trim()));
                } else {
                    new.push(tl.to_string());
                }
            }
        }
    }
    match src.lang {
        Lang::C => new.push(format!("{}}}", ind(depth - 1))),
        Lang::Fortran => {
            for k in (0..depth).rev() {
                new.push(format!("{}end do", ind(k)));
            }
        }
    }
    if let Some(e) = syn.loops[ms[0].1].end_directive {
        new.push(src.line(e).to_string());
    }
    let mut dels = Vec::new();
    for m in ms {
        let l = &syn.loops[m.1];
        dels.extend(m.2.line..=m.2.end_line);
        dels.extend(l.start..=l.end);
        dels.extend(l.end_directive);
    }
    chain.edits.push(Edit::InsertBefore {
        file: src.path.clone(),
        line: ms[0].0,
        lines: new,
    });
    for n in dels {
        chain.edits.push(Edit::Delete {
            file: src.path.clone(),
            line: n,
            expect: src.line(n).trim().to_string(),
        });
    }
    chain
}
