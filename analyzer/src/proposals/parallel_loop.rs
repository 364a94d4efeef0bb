//! Rewriting a `kernels` (or `num_gangs(1)`) region whose block is one
//! loop nest as an explicit `parallel loop`: `collapse` for perfectly
//! nested loops, `reduction(op:var)` for the scalars the body reduces into,
//! `gang vector` when it writes no scalar; any other scalar write means the
//! rewrite is not safe to make mechanically. L3 proposes it; the data
//! region planner uses it for the `kernels` regions inside its loop.

use super::key;
use crate::source::{Directive, Reduction, SourceFile};

/// How a `kernels` (or `num_gangs(1)`) region whose block is one loop nest
/// becomes an explicit `parallel loop`: the clauses to add and drop, the
/// closing directive to delete (Fortran `end kernels`), the reductions found,
/// and why each choice was made.
pub struct LoopRewrite {
    pub add: Vec<String>,
    pub remove: Vec<String>,
    pub closing: Option<u32>,
    pub reductions: Vec<Reduction>,
    pub why: Vec<String>,
}

impl LoopRewrite {
    /// The clauses of the rewritten directive: the added ones, then the
    /// original ones not removed.
    pub fn kept_clauses(&self, d: &Directive) -> Vec<String> {
        let mut kept = self.add.clone();
        kept.extend(
            d.clauses
                .iter()
                .filter(|c| !self.remove.contains(&c.name))
                .map(|c| c.text()),
        );
        kept
    }
}

/// Plans the rewrite of `d` as `parallel loop`, or says why it cannot be
/// done safely from the source.
pub fn rewrite_as_parallel_loop(src: &SourceFile, d: &Directive) -> Result<LoopRewrite, String> {
    let name = d.construct_name();
    let line = d.line;
    let gangs_one = d
        .clause("num_gangs")
        .and_then(|c| c.args.as_deref())
        .map(str::trim)
        == Some("1");
    let Some((a, b, closing)) = src.block_of(d) else {
        return Err(format!(
            "could not find the block of `{name}` at line {line}"
        ));
    };
    let Some(lp) = src.loop_at(a).filter(|l| l.end_line == b) else {
        return Err(format!(
            "the `{name}` region at line {line} is not one loop nest; convert it by hand"
        ));
    };
    let inner_directives = src.directives_in(a, b);
    let depth = if inner_directives.is_empty() {
        src.perfect_depth(lp, 3)
    } else {
        1
    };
    let decls = src.arrays(Some(line));
    let mut arrays: Vec<String> = decls.keys().cloned().collect();
    arrays.extend(d.data_vars().into_iter().map(|v| key(src.lang, &v)));
    let locals = src.locals_in(a, b);
    let body = src.loop_body(a, b, &locals, &arrays);
    if let Some((v, l)) = body.other_scalar_writes.first() {
        return Err(format!(
            "the loop writes the scalar `{v}` at line {l} in a way that is not a reduction: it needs `private({v})` or carries a dependence; convert by hand"
        ));
    }
    let mut add = Vec::new();
    let mut why = Vec::new();
    if depth > 1 {
        add.push(format!("collapse({depth})"));
        why.push(format!(
            "Lines {a}-{b}: {depth} perfectly nested loops (`{}`).",
            src.header_text(lp)
        ));
    }
    for r in &body.reductions {
        add.push(format!("reduction({}:{})", r.op, r.var));
        why.push(format!(
            "Line {}: `{}` is a {} reduction on {}.",
            r.line, r.statement, r.op, r.var
        ));
    }
    if body.reductions.is_empty() {
        add.push("gang vector".into());
        why.push(format!("Lines {a}-{b}: no scalar is written in the loop nest, so its iterations are independent as far as scalars go (the arrays must not overlap)."));
    }
    let mut remove = Vec::new();
    if gangs_one {
        remove.push("num_gangs".to_string());
    }
    Ok(LoopRewrite {
        add,
        remove,
        closing,
        reductions: body.reductions,
        why,
    })
}
