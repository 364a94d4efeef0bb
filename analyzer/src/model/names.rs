//! Names of host buffers, for the findings to speak of `A` rather than of
//! an address: the runtime's variable names, the program's data symbols,
//! and what the source shows at the constructs that moved them. The model
//! owns this policy: every view names a buffer the same way, and the rules
//! read the names from here.

use std::collections::HashMap;

use crate::source::{Lang, SourceSet};

use super::entities::{SiteId, TransferId};
use super::index::SourceNames;
use super::run::Run;
use super::xfers::{group_by, large_xfers, Dir, Xfer};

/// Lookup key of a name in `lang`: Fortran names are case-insensitive.
pub fn key(lang: Lang, name: &str) -> String {
    match lang {
        Lang::Fortran => name.to_ascii_lowercase(),
        Lang::C => name.to_string(),
    }
}

/// The names the sources give the host buffers that no runtime name or
/// symbol names ([`Run::learn_names`] keeps them): inferred from the
/// transfers of at least `min_bytes` and the constructs that moved them.
pub(crate) fn from_sources(run: &Run, sources: &SourceSet, min_bytes: u64) -> SourceNames {
    let recorded = run.recorded_buffer_names();
    let (xfers, _) = large_xfers(run, min_bytes);
    let mut names = recorded.clone();
    let mut transfers = HashMap::new();
    // A statement that touched one mapped array names its buffer before
    // any clause's order does: GCC does not move a clause's arrays in the
    // order the clause lists them.
    name_host_accesses(&mut names, run, sources);
    infer_names(&mut names, &mut transfers, run, sources, &xfers);
    // What the host accesses named can name the buffers moved beside
    // them (the other array of a `copy(u, unew)`).
    infer_names(&mut names, &mut transfers, run, sources, &xfers);
    names.retain(|p, _| !recorded.contains_key(p));
    SourceNames {
        buffers: names,
        transfers,
    }
}

/// The ranges the coherence check caught the host touching, still
/// unnamed, named by the statement that touched them: the one array that
/// both a data clause of the file names and the statement uses.
fn name_host_accesses(names: &mut HashMap<u64, String>, run: &Run, sources: &SourceSet) {
    for a in run.host_accesses() {
        if a.variable.is_some() || names.contains_key(&a.range_start) {
            continue;
        }
        if let Some(n) = a.site.and_then(|s| named_at_the_line(run, sources, s)) {
            names.insert(a.range_start, n);
        }
    }
}

/// The one array both named in a data clause of the file and used on the
/// site's line.
fn named_at_the_line(run: &Run, sources: &SourceSet, site: SiteId) -> Option<String> {
    let s = run.site(site);
    let (line, src) = (s.line?, sources.get(&s.file)?);
    let lang = src.lang;
    let mapped: Vec<String> = src
        .directives_in(1, src.lines.len() as u32)
        .iter()
        .flat_map(|d| d.data_vars())
        .collect();
    let mut found: Vec<String> = Vec::new();
    for u in src.uses(line, line, &[]) {
        if let Some(m) = mapped.iter().find(|m| key(lang, m) == u.key) {
            if !found.contains(m) {
                found.push(m.clone());
            }
        }
    }
    (found.len() == 1).then(|| found.remove(0))
}

/// An `update`'s buffers named from its clause items: `device(...)` for
/// the uploads, `host(...)`/`self(...)` for the downloads, in the order
/// the clause lists them (the order the runtime moves them in), when the
/// clause names as many arrays as the run moved unnamed buffers that way.
/// A clause of one array names every transfer it made that way, whatever
/// buffer the array pointed to.
fn name_update(
    cx_names: &mut HashMap<u64, String>,
    transfers: &mut HashMap<TransferId, String>,
    src: &crate::source::SourceFile,
    d: &crate::source::Directive,
    xs: &[&Xfer],
) {
    for (clauses, dir) in [
        (&["device"][..], Dir::Upload),
        (&["host", "self"][..], Dir::Download),
    ] {
        let items: Vec<String> = d
            .clauses
            .iter()
            .filter(|c| clauses.contains(&c.name.as_str()))
            .flat_map(|c| c.items())
            .map(|i| i.split(['[', '(']).next().unwrap_or("").trim().to_string())
            .collect();
        if items.is_empty() {
            continue;
        }
        let mut moved: Vec<&Xfer> = xs.iter().copied().filter(|x| x.dir == dir).collect();
        moved.sort_by_key(|x| x.start_ns);
        if let [one] = &items[..] {
            for x in &moved {
                transfers.entry(x.transfer).or_insert_with(|| one.clone());
            }
        }
        let mut ptrs: Vec<u64> = Vec::new();
        for p in moved.iter().filter_map(|x| x.host_ptr) {
            if !ptrs.contains(&p) {
                ptrs.push(p);
            }
        }
        if ptrs.len() != items.len() {
            continue;
        }
        for (p, name) in ptrs.into_iter().zip(items) {
            let taken = cx_names
                .iter()
                .any(|(q, n)| *q != p && key(src.lang, n) == key(src.lang, &name));
            if !taken {
                cx_names.entry(p).or_insert(name);
            }
        }
    }
}

/// Names of host buffers inferred from the source at the constructs that
/// moved them: one array and one buffer; arrays listed only in `copyin`
/// (or only `copyout`) and buffers only uploaded (or only downloaded);
/// the one array the construct writes and the one buffer whose content
/// changed between upload and download.
fn infer_names(
    cx_names: &mut HashMap<u64, String>,
    transfers: &mut HashMap<TransferId, String>,
    run: &Run,
    sources: &SourceSet,
    xfers: &[Xfer],
) {
    let by_site = group_by(xfers.iter().filter_map(|x| Some((x.site?, x))));
    for (site, xs) in by_site {
        let s = run.site(site);
        let (Some(line), Some(src)) = (s.line, sources.get(&s.file)) else {
            continue;
        };
        let Some(d) = src.directive_at(line) else {
            continue;
        };
        if d.construct_name() == "update" {
            name_update(cx_names, transfers, src, &d, &xs);
            continue;
        }
        // A compute construct moves its clauses' arrays and those its
        // code uses; a data construct (`data`, `enter data`, `exit data`)
        // its clauses' arrays.
        let uses = if d.is_compute() {
            let Some((a, b, _)) = src.block_of(&d) else {
                continue;
            };
            src.uses(a, b, &[])
        } else if d.is_data() {
            Vec::new()
        } else {
            continue;
        };
        let decls = src.arrays(Some(line));
        // Arrays a clause says are already there (`present`, ...) or only
        // made there (`create`) are not what the construct moved.
        let stay: Vec<String> = d
            .clauses
            .iter()
            .filter(|c| crate::source::is_data_clause(&c.name) && !moves_data(&c.name))
            .flat_map(|c| c.vars())
            .map(|v| key(src.lang, &v))
            .collect();
        let mut arrays: Vec<String> = Vec::new();
        for v in d
            .data_vars()
            .iter()
            .map(|v| key(src.lang, v))
            .chain(uses.iter().map(|u| u.key.clone()))
        {
            if (decls.contains_key(&v) || d.data_vars().iter().any(|x| key(src.lang, x) == v))
                && !arrays.contains(&v)
                && !stay.contains(&v)
            {
                arrays.push(v);
            }
        }
        let display = |k: &str| {
            decls
                .get(k)
                .map(|d| d.name.clone())
                .unwrap_or_else(|| k.to_string())
        };
        let mut ptrs: Vec<u64> = xs.iter().filter_map(|x| x.host_ptr).collect();
        ptrs.sort_unstable();
        ptrs.dedup();
        let unnamed: Vec<u64> = ptrs
            .iter()
            .copied()
            .filter(|p| !cx_names.contains_key(p))
            .collect();
        let free_arrays: Vec<String> = arrays
            .iter()
            .filter(|k| !cx_names.values().any(|n| key(src.lang, n) == **k))
            .cloned()
            .collect();
        if unnamed.is_empty() || free_arrays.is_empty() {
            continue;
        }
        if unnamed.len() == 1 && free_arrays.len() == 1 && ptrs.len() == arrays.len() {
            cx_names.insert(unnamed[0], display(&free_arrays[0]));
            continue;
        }
        // By direction, in the construct's first instance: the host may
        // swap the arrays between instances (a pointer swap, or a function
        // called with its arguments in other roles), but within one
        // instance each clause item is one buffer.
        let first = xs.iter().filter_map(|x| x.origin).min();
        let dirs = |p: u64| {
            let mine = |x: &&&Xfer| x.host_ptr == Some(p) && x.origin == first;
            let up = xs.iter().filter(mine).any(|x| x.dir == Dir::Upload);
            let down = xs.iter().filter(mine).any(|x| x.dir == Dir::Download);
            (up, down)
        };
        let only = |name: &str| -> Vec<String> {
            d.clauses
                .iter()
                .filter(|c| match name {
                    "in" => matches!(c.name.as_str(), "copyin" | "pcopyin" | "present_or_copyin"),
                    _ => matches!(
                        c.name.as_str(),
                        "copyout" | "pcopyout" | "present_or_copyout"
                    ),
                })
                .flat_map(|c| c.vars())
                .map(|v| key(src.lang, &v))
                .filter(|v| free_arrays.contains(v))
                .collect()
        };
        let ups_only: Vec<u64> = unnamed
            .iter()
            .copied()
            .filter(|&p| dirs(p) == (true, false))
            .collect();
        let downs_only: Vec<u64> = unnamed
            .iter()
            .copied()
            .filter(|&p| dirs(p) == (false, true))
            .collect();
        let (ins, outs) = (only("in"), only("out"));
        if ups_only.len() == 1 && ins.len() == 1 {
            cx_names.insert(ups_only[0], display(&ins[0]));
        }
        if downs_only.len() == 1 && outs.len() == 1 {
            cx_names.insert(downs_only[0], display(&outs[0]));
        }
        // By the content that changed: the one array the construct writes.
        if unnamed.len() == 2 && free_arrays.len() == 2 {
            let written: Vec<&String> = free_arrays
                .iter()
                .filter(|k| uses.iter().any(|u| u.key == **k && u.write))
                .collect();
            if written.len() != 1 {
                continue;
            }
            let changed = |p: u64| {
                xs.iter().any(|up| {
                    up.host_ptr == Some(p)
                        && up.dir == Dir::Upload
                        && xs.iter().any(|down| {
                            down.host_ptr == Some(p)
                                && down.dir == Dir::Download
                                && down.origin == up.origin
                                && down.hash.is_some()
                                && up.hash.is_some()
                                && down.hash != up.hash
                        })
                })
            };
            let ch: Vec<u64> = unnamed.iter().copied().filter(|&p| changed(p)).collect();
            if ch.len() == 1 {
                let other = unnamed.iter().copied().find(|&p| p != ch[0]);
                let other_name = free_arrays.iter().find(|k| *k != written[0]);
                cx_names.insert(ch[0], display(written[0]));
                if let (Some(p), Some(n)) = (other, other_name) {
                    cx_names.insert(p, display(n));
                }
            }
        }
    }
}

/// Whether a data clause copies data between host and device.
fn moves_data(clause: &str) -> bool {
    matches!(
        clause,
        "copy"
            | "copyin"
            | "copyout"
            | "pcopy"
            | "pcopyin"
            | "pcopyout"
            | "present_or_copy"
            | "present_or_copyin"
            | "present_or_copyout"
    )
}
