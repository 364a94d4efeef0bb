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
use crate::source::{is_data_clause, Directive, Edit, Lang, SourceFile};

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
    /// Pairs in sequence proven fusable (in `chains`), with what was proven.
    pub fused: Vec<(u32, u32, String)>,
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
    // The parallel loops the chain's constructs share (fused at that depth).
    let mut depth = usize::MAX;
    let close = |chain: &mut Vec<usize>, depth: &mut usize, out: &mut Plan| {
        if chain.len() > 1 {
            let ms: Vec<&(u32, usize, Directive)> = chain.iter().map(|&k| &members[k]).collect();
            let nest = par_nest(src, syn, ms[0].1, &ms[0].2);
            let shared: Vec<String> = nest
                .iter()
                .take(*depth)
                .map(|&l| space_text(&syn.loops[l]))
                .collect();
            let below = if nest.len() > *depth {
                ", each keeping its own loops below"
            } else {
                ""
            };
            for w in ms.windows(2) {
                out.fused.push((
                    w[0].0,
                    w[1].0,
                    format!(
                        "fusable (proven): the same parallel loops ({}){below}, and no element or scalar one writes is used by the other in another iteration",
                        shared.join(", ")
                    ),
                ));
            }
            out.chains.push(patch(src, syn, &ms, *depth));
        }
        chain.clear();
        *depth = usize::MAX;
    };
    for k in 0..members.len() {
        let (line, li, _) = &members[k];
        let Some(&prev) = chain.last() else {
            chain.push(k);
            continue;
        };
        let (pline, pli, _) = &members[prev];
        if syn.loops[*pli].next != Some(*li) {
            close(&mut chain, &mut depth, &mut out);
            chain.push(k);
            continue;
        }
        if let Some(c) = copy_back(syn, *pli, *li) {
            out.copy_backs.push(CopyBack {
                before: *pline,
                line: *line,
                ..c
            });
            close(&mut chain, &mut depth, &mut out);
            chain.push(k);
            continue;
        }
        let d = match common_depth(src, syn, &members[chain[0]], &members[k]) {
            Ok(d) => d.min(depth),
            Err(_) => 0,
        };
        // Judged at the depth the chain would be fused at: all pairs again
        // when that is less than before.
        // The neighbour first, so that a reason of the pair itself is said
        // as such.
        let mut pairs: Vec<(usize, usize)> = chain.iter().rev().map(|&c| (c, k)).collect();
        if d < depth && depth != usize::MAX {
            for (x, &c1) in chain.iter().enumerate() {
                for &c2 in &chain[x + 1..] {
                    pairs.push((c1, c2));
                }
            }
        }
        let mut refused = None;
        for (c1, c2) in pairs {
            let v = judge_at(src, syn, &members[c1], &members[c2], d.max(1));
            if v != Verdict::Fusable {
                refused = Some((members[c1].0, members[c2].0, v));
                break;
            }
        }
        match refused {
            None => {
                chain.push(k);
                depth = d;
            }
            Some((at, to, v)) => {
                let why = match v {
                    Verdict::Illegal(s) => format!("not fusable: {s}"),
                    Verdict::NotProven(s) => format!("not proven fusable: {s}"),
                    Verdict::Different(s) => format!("not fusable: {s}"),
                    Verdict::Fusable => String::new(),
                };
                // Listed as the neighbours; the construct it clashes with named
                // when that is another of the chain.
                let why = if at != *pline && to == *line {
                    format!("{why} (judged with :{at}, which :{pline} fuses with)")
                } else if to != *line {
                    format!("{why} (between :{at} and :{to}, which fusing :{line} too would fuse over fewer loops)")
                } else {
                    why
                };
                out.refused.push((*pline, *line, why));
                close(&mut chain, &mut depth, &mut out);
                chain.push(k);
            }
        }
    }
    close(&mut chain, &mut depth, &mut out);
    out
}

fn reductions(d: &Directive) -> Vec<String> {
    d.clauses
        .iter()
        .filter(|c| c.name == "reduction")
        .flat_map(|c| c.vars())
        .collect()
}

/// The loops of construct `l` (directive `d`) whose iterations run in
/// parallel, outermost first: the construct's loop with those its
/// `collapse` takes, then, while a loop's body is one loop, that loop when
/// a `loop` directive other than `loop seq` partitions it (NPB's
/// `parallel loop gang` over k, `loop worker` over j, `loop vector` over i).
pub fn par_nest(src: &SourceFile, syn: &Syntax, l: usize, d: &Directive) -> Vec<usize> {
    let nest = syn.nest(l);
    let mut out: Vec<usize> = nest.iter().take(collapse(d)).copied().collect();
    while let Some(&last) = out.last() {
        let Some(i) = syn.loops[last].inner else {
            break;
        };
        let Some(ld) = syn.loops[i]
            .directive
            .and_then(|n| src.directive_at(n))
            .filter(|x| x.construct_name() == "loop" && x.clause("seq").is_none())
        else {
            break;
        };
        let more: Vec<usize> = syn.nest(i).into_iter().take(collapse(&ld)).collect();
        out.extend(more);
    }
    out
}

fn collapse(d: &Directive) -> usize {
    d.clause("collapse")
        .and_then(|c| c.args.as_deref())
        .and_then(|x| x.trim().parse::<usize>().ok())
        .unwrap_or(1)
}

/// How many of the parallel loops of `a` and `b`, outermost first, can be
/// one: the same ranges, and past the first the same `loop` directives.
/// Fused at that depth, the loops below stay each construct's own. Err
/// when not even the outermost can be, with the reason.
pub fn common_depth(
    src: &SourceFile,
    syn: &Syntax,
    a: &(u32, usize, Directive),
    b: &(u32, usize, Directive),
) -> Result<usize, String> {
    let (na, nb) = (par_nest(src, syn, a.1, &a.2), par_nest(src, syn, b.1, &b.2));
    let mut depth = 0;
    let mut why = String::new();
    for (k, (x, y)) in na.iter().zip(&nb).enumerate() {
        let (lx, ly) = (&syn.loops[*x], &syn.loops[*y]);
        if !same_space(lx, ly) {
            why = format!(
                "they loop over different ranges ({} and {})",
                space_text(lx),
                space_text(ly)
            );
            break;
        }
        if k > 0 && level_directive(src, syn, *x) != level_directive(src, syn, *y) {
            break;
        }
        depth += 1;
    }
    if depth == 0 {
        return Err(why);
    }
    if depth < collapse(&a.2) || depth < collapse(&b.2) {
        return Err("they collapse different numbers of loops".into());
    }
    Ok(depth)
}

/// The text of the `loop` directive on loop `l` of a parallel nest, spaces
/// folded, or "" without one.
fn level_directive(src: &SourceFile, syn: &Syntax, l: usize) -> String {
    syn.loops[l]
        .directive
        .and_then(|n| src.directive_at(n))
        .map(|d| {
            let mut c: Vec<String> = d.clauses.iter().map(|c| c.text()).collect();
            c.sort();
            format!("{} {}", d.construct_name(), c.join(" "))
        })
        .unwrap_or_default()
}

/// How one construct uses a scalar it does not declare.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ScalarUse {
    /// Every use reads the value assigned earlier in the same iteration:
    /// assigned first, unconditionally (or as an inner loop's variable).
    Private,
    /// Some use reads the value from before the construct.
    Reads,
}

/// How the statements (and inner loops) of construct loop `l` use scalar
/// `name`: None when they do not.
fn scalar_use(syn: &Syntax, l: usize, inner: &[usize], name: &str) -> Option<ScalarUse> {
    // (line, order, writes first) of each statement or loop header naming it.
    let mut firsts: Vec<(u32, u8, bool)> = Vec::new();
    for s in &syn.loops[l].stmts {
        let reads = s.reads.iter().any(|x| x.name == name && !x.is_array());
        let writes = s.writes.iter().any(|x| x.name == name && !x.is_array());
        if reads || writes {
            firsts.push((s.line, 1, writes && !reads && !s.guarded));
        }
    }
    for &i in inner {
        if syn.loops[i].var.as_deref() == Some(name) {
            firsts.push((syn.loops[i].start, 0, true));
        }
    }
    firsts.sort();
    firsts.first().map(|f| {
        if f.2 {
            ScalarUse::Private
        } else {
            ScalarUse::Reads
        }
    })
}

/// The loops strictly inside loop `l`.
fn loops_inside(syn: &Syntax, l: usize) -> Vec<usize> {
    let x = &syn.loops[l];
    syn.loops
        .iter()
        .enumerate()
        .filter(|(i, y)| {
            *i != l && y.start >= x.start && y.end <= x.end && y.function == x.function
        })
        .map(|(i, _)| i)
        .collect()
}

/// Whether two loops are one iteration space: their ranges as affine
/// expressions, or their headers as written.
fn same_space(x: &SLoop, y: &SLoop) -> bool {
    match (&x.range, &y.range) {
        (Some(a), Some(b)) => a == b,
        _ => x.space == y.space,
    }
}

fn space_text(l: &SLoop) -> String {
    match &l.range {
        Some((lo, hi, st)) => {
            let v = l.var.as_deref().unwrap_or("?");
            if *st == 1 {
                format!("{v} = {}..{}", lo.text(), hi.text())
            } else {
                format!("{v} = {}..{} step {st}", lo.text(), hi.text())
            }
        }
        None => l.header.trim().to_string(),
    }
}

/// What two affine subscript lists say about the elements they name, the
/// first in iteration `P`, the second in iteration `P'` of the parallel
/// loops `par` (other loop variables and the scalars the constructs
/// assign are free on each side, other names are the same on both).
#[derive(Debug, PartialEq, Eq)]
enum Overlap {
    /// Never the same element.
    Disjoint,
    /// The same element only in the same iteration.
    SameIteration,
    /// The same element in another iteration.
    Other,
    /// Not decided.
    Unknown,
}

fn overlap(
    x: &[Option<super::Affine>],
    y: &[Option<super::Affine>],
    par: &[String],
    free_x: &[String],
    free_y: &[String],
) -> Overlap {
    use super::Affine;
    let tag = |a: &Affine, free: &[String], side: &str| -> Affine {
        let mut out = Affine {
            terms: BTreeMap::new(),
            konst: a.konst,
        };
        for (k, v) in &a.terms {
            let k = if par.contains(k) && side == "'" {
                format!("{k}'")
            } else if free.contains(k) && !par.contains(k) {
                format!("{k}#{side}")
            } else {
                k.clone()
            };
            *out.terms.entry(k).or_default() += v;
        }
        out.terms.retain(|_, v| *v != 0);
        out
    };
    let mut diffs = Vec::new();
    for (a, b) in x.iter().zip(y) {
        let (Some(a), Some(b)) = (a, b) else {
            return Overlap::Unknown;
        };
        let d = tag(a, free_x, "").add(&tag(b, free_y, "'"), -1);
        if d.terms.is_empty() {
            if d.konst != 0 {
                return Overlap::Disjoint;
            }
            continue;
        }
        // No integer solution: the gcd of the coefficients does not divide
        // the constant.
        let g = d.terms.values().fold(0i64, |g, v| gcd(g, v.abs()));
        if g > 1 && d.konst % g != 0 {
            return Overlap::Disjoint;
        }
        diffs.push(d);
    }
    // p - p' + c in some dimension fixes p' = p + c.
    let mut shift: BTreeMap<&String, i64> = BTreeMap::new();
    for p in par {
        let pp = format!("{p}'");
        for d in &diffs {
            if d.terms.len() == 2
                && d.terms.get(p).copied() == Some(1)
                && d.terms.get(&pp).copied() == Some(-1)
            {
                shift.insert(p, d.konst);
                break;
            }
            if d.terms.len() == 2
                && d.terms.get(p).copied() == Some(-1)
                && d.terms.get(&pp).copied() == Some(1)
            {
                shift.insert(p, -d.konst);
                break;
            }
        }
    }
    if shift.len() == par.len() && shift.values().all(|v| *v == 0) {
        return Overlap::SameIteration;
    }
    // Every parallel variable fixed at a shift, not all zero, and each
    // other dimension met by some value of a free name (an inner loop's
    // variable, a scalar assigned inside): the same element in another
    // iteration.
    let pure = |d: &super::Affine| {
        d.terms.len() == 2
            && par.iter().any(|p| {
                d.terms.get(p).is_some_and(|v| v.abs() == 1)
                    && d.terms.get(&format!("{p}'")).is_some_and(|v| v.abs() == 1)
            })
    };
    if shift.len() == par.len()
        && diffs
            .iter()
            .all(|d| pure(d) || d.terms.iter().any(|(k, v)| k.contains('#') && v.abs() == 1))
    {
        return Overlap::Other;
    }
    // With names that are the same on both sides only (no scalar either
    // construct assigns), equal subscripts in different iterations.
    if diffs
        .iter()
        .all(|d| d.terms.keys().all(|k| !k.contains('#')))
    {
        return Overlap::Other;
    }
    Overlap::Unknown
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Whether `b` (after `a` in the program) may be fused with `a`: the same
/// parallel loops over the same ranges, and no element or scalar that one
/// writes used by the other in another iteration (in the fused construct
/// the iterations of both run in any order, each with the first's body
/// before the second's).
pub fn judge(
    src: &SourceFile,
    syn: &Syntax,
    a: &(u32, usize, Directive),
    b: &(u32, usize, Directive),
) -> Verdict {
    judge_at(src, syn, a, b, usize::MAX)
}

/// [`judge`], fusing at most `max_depth` parallel loops.
pub fn judge_at(
    src: &SourceFile,
    syn: &Syntax,
    a: &(u32, usize, Directive),
    b: &(u32, usize, Directive),
    max_depth: usize,
) -> Verdict {
    let depth = match common_depth(src, syn, a, b) {
        Ok(d) => d.min(max_depth),
        Err(why) => return Verdict::Different(why),
    };
    let mut na = par_nest(src, syn, a.1, &a.2);
    let mut nb = par_nest(src, syn, b.1, &b.2);
    na.truncate(depth);
    nb.truncate(depth);
    let mut rename = BTreeMap::new();
    let mut par = Vec::new();
    for (x, y) in na.iter().zip(&nb) {
        let (Some(vx), Some(vy)) = (&syn.loops[*x].var, &syn.loops[*y].var) else {
            return Verdict::NotProven("a loop without a loop variable".into());
        };
        rename.insert(vy.clone(), vx.clone());
        par.push(vx.clone());
    }
    for (l, which) in [(a.1, "the first"), (b.1, "the second")] {
        if let Some(f) = syn.loops[l].stmts.iter().flat_map(|s| &s.calls).next() {
            return Verdict::NotProven(format!(
                "{which} calls {f}, whose reads and writes are not known"
            ));
        }
    }
    // Inner loops (not the parallel ones) of each side.
    let inner = |l: usize, nest: &[usize]| -> Vec<usize> {
        loops_inside(syn, l)
            .into_iter()
            .filter(|i| !nest.contains(i))
            .collect()
    };
    let inners = [inner(a.1, &na), inner(b.1, &nb)];
    let side = |l: usize, d: &Directive, inn: &[usize], map: &BTreeMap<String, String>| {
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut locals = Vec::new();
        for s in &syn.loops[l].stmts {
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
        // Inner loops' variables are written by their headers; those the
        // header declares are the loop's own.
        for &i in inn {
            if let Some(v) = &syn.loops[i].var {
                if syn.loops[i].declares {
                    locals.push(v.clone());
                } else {
                    writes.push(Access {
                        name: v.clone(),
                        subs: Vec::new(),
                    });
                }
            }
        }
        (reads, writes, locals, reductions(d))
    };
    let none = BTreeMap::new();
    let first = side(a.1, &a.2, &inners[0], &none);
    let second = side(b.1, &b.2, &inners[1], &rename);
    let names = ["the first", "the second"];
    let sides = [&first, &second];
    let loops = [a.1, b.1];
    // Free names per side: scalars it assigns (not the parallel variables).
    let free: Vec<Vec<String>> = sides
        .iter()
        .map(|(_, w, l, _)| {
            w.iter()
                .filter(|x| !x.is_array())
                .map(|x| x.name.clone())
                .chain(l.iter().cloned())
                .filter(|n| !par.contains(n))
                .collect()
        })
        .collect();
    let mut unknown: Option<String> = None;
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
                if locals.contains(&x.name) || par.contains(&x.name) {
                    continue;
                }
                for (verb, y) in accesses {
                    if olocals.contains(&y.name) {
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
                    let uw = scalar_use(syn, loops[w], &inners[w], &x.name);
                    let orig = if o == 1 {
                        // The second's names before renaming.
                        rename
                            .iter()
                            .find(|(_, v)| **v == x.name)
                            .map(|(k, _)| k.clone())
                            .unwrap_or_else(|| x.name.clone())
                    } else {
                        x.name.clone()
                    };
                    let uo = scalar_use(syn, loops[o], &inners[o], &orig);
                    match (uw, uo) {
                        (Some(ScalarUse::Private), Some(ScalarUse::Private)) => continue,
                        (_, Some(ScalarUse::Reads)) => {
                            return Verdict::Illegal(format!(
                                "{} assigns the scalar {} and {} reads the value it had before the construct (fused, it would read the other's)",
                                names[w], x.name, names[o]
                            ))
                        }
                        _ => {
                            return Verdict::Illegal(format!(
                                "{} reads the scalar {} before assigning it and {} assigns it (fused, it would read the other's value)",
                                names[w], x.name, names[o]
                            ))
                        }
                    }
                }
                continue;
            }
            for (verb, y) in accesses {
                if !y.is_array() {
                    return Verdict::NotProven(format!(
                        "{} writes {} and {} uses {} whole",
                        names[w],
                        x.text(),
                        names[o],
                        y.name
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
                match overlap(&x.subs, &y.subs, &par, &free[w], &free[o]) {
                    Overlap::Disjoint | Overlap::SameIteration => {}
                    Overlap::Other => {
                        return Verdict::Illegal(format!(
                            "{} {verb} {} where {} writes {}: an element of another iteration",
                            names[o],
                            y.text(),
                            names[w],
                            x.text()
                        ));
                    }
                    Overlap::Unknown => {
                        if unknown.is_none() {
                            let why = x
                                .subs
                                .iter()
                                .chain(&y.subs)
                                .flatten()
                                .flat_map(|a| a.terms.keys())
                                .find(|k| free[w].contains(k) || free[o].contains(k))
                                .map(|k| {
                                    format!(
                                        " ({k} is assigned in the construct, its value not known)"
                                    )
                                })
                                .unwrap_or_default();
                            unknown = Some(format!(
                                "{} writes {} and {} {verb} {}: the subscripts do not show that it is the same iteration{why}",
                                names[w],
                                x.text(),
                                names[o],
                                y.text()
                            ));
                        }
                    }
                }
            }
        }
    }
    match unknown {
        Some(u) => Verdict::NotProven(u),
        None => Verdict::Fusable,
    }
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
fn patch(src: &SourceFile, syn: &Syntax, ms: &[&(u32, usize, Directive)], depth: usize) -> Chain {
    let lines: Vec<u32> = ms.iter().map(|m| m.0).collect();
    let mut chain = Chain {
        lines,
        edits: Vec::new(),
        no_patch: None,
    };
    let nests: Vec<Vec<usize>> = ms
        .iter()
        .map(|m| {
            let mut n = par_nest(src, syn, m.1, &m.2);
            n.truncate(depth);
            n
        })
        .collect();
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
        // The inner levels keep their `loop` directives (not those a
        // collapse takes, which have none).
        if k > 0 {
            if let Some(d) = syn.loops[l].directive.and_then(|n| src.directive_at(n)) {
                for n in d.line..=d.end_line {
                    new.push(format!("{}{}", ind(k), src.line(n).trim()));
                }
            }
        }
        let h = syn.loops[l].header.trim().to_string();
        let open = if src.lang == Lang::C { " {" } else { "" };
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
        Lang::C => {
            for k in (0..depth).rev() {
                new.push(format!("{}}}", ind(k)));
            }
        }
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
