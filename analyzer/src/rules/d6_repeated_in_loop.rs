//! D6: transfers repeated in every iteration of a host loop. The same place
//! (a compute construct's implicit or explicit data clauses, or a data
//! construct) moves the same host buffers again and again: a `data` region
//! around the loop would move them once.
//!
//! Evidence: counts, bytes and times from the trace (certain), the host
//! pointer of each transfer (a buffer that never repeats is a different
//! array each time, so hoisting would not help), and, when hashed, whether
//! the host changed a buffer between iterations (such uploads stay as
//! `update device`). The enclosing loop, the arrays and the clauses come
//! from the source ([`crate::proposals::data_region`]); without it the finding still
//! stands with its lines and counts. `update` constructs are not D6: the
//! user asked for those transfers explicitly (D1, D2, D5 judge them).

use std::collections::BTreeMap;

use accprof_trace::ConstructKind;

use crate::findings::{Category, Confidence, Finding, Value};
use crate::model::{group_by, ConstructClass, ConstructId, Dir, SiteId, Xfer};
use crate::proposals::caller_region::{self, Lifted};
use crate::proposals::data_region::{self, RegionPlan};
use crate::units;

use super::builders::xfer_evidence;
use super::context::{Checked, Context};

/// The repeated transfers of one site.
struct SiteGroup<'a> {
    site: SiteId,
    /// How often the program reached the construct: a structured `data`
    /// region's entry and exit are one reach.
    reaches: usize,
    xfers: Vec<&'a Xfer>,
}

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let movable = cx.xfers.iter().filter(|x| {
        matches!(
            cx.origin_class(x),
            Some(ConstructClass::Compute | ConstructClass::EnterData | ConstructClass::ExitData)
        )
    });
    let mut groups = Vec::new();
    for (site, xs) in group_by(movable.filter_map(|x| Some((x.site?, x)))) {
        if let Some(g) = site_group(cx, site, xs) {
            groups.push(g);
        }
    }
    // One finding per host loop (or per site when the loop is unknown): a
    // loop around the construct in its own function, else a loop in a
    // caller that repeats it.
    let mut by_loop: BTreeMap<(String, u32, bool), Group> = BTreeMap::new();
    for g in groups {
        let s = cx.run.site(g.site);
        let src = cx.sources.get(&s.file);
        let lp = s
            .line
            .and_then(|l| src.and_then(|src| data_region::host_loop(src, l)));
        if let Some(lp) = lp {
            let e = by_loop
                .entry((s.file.clone(), lp.header_line, false))
                .or_default();
            e.sites.push(g);
            continue;
        }
        let lifted = match src {
            Some(_) => caller_region::lift(cx.sources, s, cx.run.callers(g.site)),
            None => Err(not_read(cx, &s.file)),
        };
        match lifted {
            Ok(l) => {
                let e = by_loop
                    .entry((l.file.clone(), l.loop_line, true))
                    .or_default();
                e.sites.push(g);
                e.lifted.push(l);
            }
            Err(why) => {
                // Read from a source edited since the build, the reason may
                // be the edit's, not the run's.
                let why = match cx.sources.newer(&s.file) {
                    Some(newer) => format!("{why} (but {newer}: it may not be what ran)"),
                    None => why,
                };
                // No loop known: keyed by the site itself (line 0 never clashes).
                let e = by_loop
                    .entry((format!("{}#{}", s.file, g.site.index()), 0, false))
                    .or_default();
                e.sites.push(g);
                e.why = Some(why);
            }
        }
    }
    for ((file, loop_line, _), g) in by_loop {
        out.findings.push(finding(cx, &file, loop_line, &g));
    }
    out
}

/// The sites repeated by one host loop, and how the loop was found.
#[derive(Default)]
struct Group<'a> {
    sites: Vec<SiteGroup<'a>>,
    /// The constructs carried up to a caller's loop (empty for a loop in
    /// the constructs' own function).
    lifted: Vec<Lifted>,
    /// Why no loop was found (sites without a loop).
    why: Option<String>,
}

/// Why a source is not there: unread, set aside as another version, or a
/// language this reader does not read.
fn not_read(cx: &Context, file: &str) -> String {
    match cx.sources.stale().find(|(f, _)| *f == file) {
        Some((_, why)) => format!("source {file} set aside: {why}"),
        None if crate::source::Lang::of(file).is_none() => {
            format!("{file} is not a C or Fortran source this reader reads")
        }
        None => format!("source {file} not read"),
    }
}

fn site_group<'a>(cx: &Context, site: SiteId, xs: Vec<&'a Xfer>) -> Option<SiteGroup<'a>> {
    let mut origins: Vec<_> = xs.iter().filter_map(|x| x.origin).collect();
    origins.sort_unstable();
    origins.dedup();
    let reaches = origins.iter().filter(|&&c| is_reach(cx, c)).count();
    if reaches < cx.opts.min_repeats {
        return None;
    }
    if avoidable(cx, &xs).0.is_empty() {
        return None;
    }
    Some(SiteGroup {
        site,
        reaches,
        xfers: xs,
    })
}

/// False for the exit of a structured `data` region: the program reached
/// the region once, at its entry (an `exit data` directive is a reach of
/// its own).
fn is_reach(cx: &Context, c: ConstructId) -> bool {
    let c = cx.run.construct(c);
    !(c.class == ConstructClass::ExitData && c.kind != Some(ConstructKind::ExitData))
}

/// `n` per reach, whole when it divides evenly.
fn per_reach(n: usize, reaches: usize) -> String {
    match reaches {
        0 => "?".to_string(),
        r if n % r == 0 => (n / r).to_string(),
        r => format!("{:.1}", n as f64 / r as f64),
    }
}

/// The transfers a region around all of `xs` would not need: every upload
/// of a buffer after its first (unless its hash shows new host data, which
/// is counted apart), every download before its last.
fn avoidable<'a>(cx: &Context, xs: &[&'a Xfer]) -> (Vec<&'a Xfer>, usize) {
    let mut saved = Vec::new();
    let mut host_changed = 0;
    let per_buffer = group_by(xs.iter().map(|x| ((x.host_ptr, x.bytes, x.dir), *x)));
    for ((ptr, bytes, dir), mut list) in per_buffer {
        if ptr.is_none() || list.len() < 2 {
            continue;
        }
        list.sort_by_key(|x| x.start_ns);
        match dir {
            Dir::Upload => {
                for x in &list[1..] {
                    if host_changed_before(cx, x, ptr, bytes) {
                        host_changed += 1;
                    } else {
                        saved.push(*x);
                    }
                }
            }
            Dir::Download => saved.extend(list[..list.len() - 1].iter().copied()),
        }
    }
    (saved, host_changed)
}

/// True when the buffer's previous transfer had another hash than this
/// upload: the host wrote new data in between.
fn host_changed_before(cx: &Context, x: &Xfer, ptr: Option<u64>, bytes: u64) -> bool {
    let Some(p) = ptr else { return false };
    let Some(list) = cx.buffers.get(&(p, bytes)) else {
        return false;
    };
    let pos = list
        .iter()
        .position(|&i| cx.xfers[i].transfer == x.transfer);
    let prev = pos
        .and_then(|k| k.checked_sub(1))
        .map(|k| &cx.xfers[list[k]]);
    matches!((prev.and_then(|p| p.hash), x.hash), (Some(a), Some(b)) if a != b)
}

fn finding(cx: &Context, file: &str, loop_line: u32, group: &Group) -> Finding {
    let gs = &group.sites;
    let all: Vec<&Xfer> = gs.iter().flat_map(|g| g.xfers.iter().copied()).collect();
    // Across all constructs of the loop: one upload and one download of
    // each buffer remain.
    let (mut saved, changed) = avoidable(cx, &all);
    // The loop's iterations: the reaches of a construct in the loop's own
    // body, divided by the calls one iteration makes where the loop is in
    // a caller (`advance` calls `heat_step` twice per iteration). Where
    // that count varies, a reach stands for an iteration.
    let reaches = gs.iter().map(|g| g.reaches).max().unwrap_or(0);
    let per_iteration = |k: usize| -> Option<u64> {
        match group.lifted.get(k) {
            Some(l) => l.calls_per_iteration,
            None if group.lifted.is_empty() => Some(1),
            None => None,
        }
    };
    let iterations = gs
        .iter()
        .enumerate()
        .map(|(k, g)| match per_iteration(k) {
            Some(n) if n > 0 && g.reaches as u64 % n == 0 => g.reaches / n as usize,
            _ => g.reaches,
        })
        .max()
        .unwrap_or(0);
    let src = cx.sources.get(file);
    let lp = src.and_then(|s| s.loop_at(loop_line).cloned());
    let plan: Option<RegionPlan> = match (src, &lp) {
        (Some(_), Some(_)) if !group.lifted.is_empty() => {
            let distinct = |xs: &mut dyn Iterator<Item = &&Xfer>| {
                let mut p: Vec<u64> = xs.filter_map(|x| x.host_ptr).collect();
                p.sort_unstable();
                p.dedup();
                p.len()
            };
            let mut lifted = group.lifted.clone();
            for (l, g) in lifted.iter_mut().zip(gs) {
                l.buffers_in = distinct(&mut g.xfers.iter().filter(|x| x.dir == Dir::Upload));
                l.buffers_out = distinct(&mut g.xfers.iter().filter(|x| x.dir == Dir::Download));
            }
            let moved = distinct(&mut all.iter());
            let lifted: Vec<&Lifted> = lifted.iter().collect();
            caller_region::plan(cx.sources, &lifted, moved)
        }
        (Some(s), Some(l)) => {
            let ptrs: Vec<u64> = all.iter().filter_map(|x| x.host_ptr).collect();
            Some(data_region::plan(s, l, &ptrs))
        }
        _ => None,
    };
    // Downloads of arrays the host reads inside the loop stay (as updates).
    if let Some(p) = &plan {
        let read_in_loop: Vec<String> = p
            .arrays
            .iter()
            .filter(|a| !a.host_reads_in_loop.is_empty())
            .map(|a| a.name.clone())
            .collect();
        if !read_in_loop.is_empty() {
            saved.retain(|x| {
                x.dir == Dir::Upload
                    || cx
                        .name_of(x.host_ptr)
                        .is_some_and(|n| !read_in_loop.contains(&n))
            });
        }
    }
    let mut cost = cx.xfers_cost(&all);
    let mut saving = cx.xfers_cost(&saved);
    // A region keeps the arrays mapped: the constructs' per-reach
    // allocations and frees go too, where the driver timed them.
    let removed = match (&cx.host, &plan) {
        (Some(h), Some(_)) => {
            let ids = repeated_allocs(cx, &all);
            h.allocs_ns(cx.run, &ids).map(|c| (ids, c))
        }
        _ => None,
    };
    if let Some((_, c)) = &removed {
        cost = cost.saturating_add(c.ns);
        saving = saving.saturating_add(c.ns);
    }
    let first_site = cx.location("construct", Some(gs[0].site), None);
    let caller = group.lifted.first();
    let where_ = match (&lp, caller) {
        (Some(l), Some(c)) => format!(
            "the `{}` loop at {file}:{} in `{}`, which calls `{}`{}",
            l.kind,
            l.header_line,
            c.function,
            c.construct_function,
            if c.depth > 1 {
                " through its callers"
            } else {
                ""
            },
        ),
        (Some(l), None) => format!("the `{}` loop at {file}:{}", l.kind, l.header_line),
        (None, _) => format!("{} ({reaches} times)", first_site.place()),
    };
    let times = if reaches == iterations {
        format!("{reaches} times")
    } else {
        format!("{reaches} times in {iterations} iterations")
    };
    let mut f = Finding::new(
        "D6",
        Category::DataMovement,
        format!(
            "transfers repeated in every iteration of {where_}: {} moved {times}",
            super::builders::vars_label(cx, &all),
        ),
    );
    f.confidence = Confidence::Certain;
    f.cost_ns = Some(cost);
    f.saving_ns = Some(saving);
    f.saved_transfers = saved.iter().map(|x| x.transfer).collect();
    f.subjects.transfers = all.iter().map(|x| x.transfer).collect();
    if let Some(l) = &lp {
        let mut at = cx.location("host loop", Some(gs[0].site), None);
        if let Some(c) = caller {
            at.file = file.to_string();
            at.function = c.function.clone();
        }
        f.locations.push(at.source_line(l.header_line));
    }
    let ups: Vec<&Xfer> = all
        .iter()
        .copied()
        .filter(|x| x.dir == Dir::Upload)
        .collect();
    let downs: Vec<&Xfer> = all
        .iter()
        .copied()
        .filter(|x| x.dir == Dir::Download)
        .collect();
    f.evidence
        .field("iterations", Value::Count(iterations as u64));
    xfer_evidence(&mut f.evidence, "upload_", &ups);
    xfer_evidence(&mut f.evidence, "download_", &downs);
    f.evidence
        .field("avoidable_transfers", Value::Count(saved.len() as u64));
    f.evidence
        .field("uploads_of_new_host_data", Value::Count(changed as u64));
    for (k, g) in gs.iter().enumerate() {
        let here: Vec<&Xfer> = g.xfers.clone();
        let u = here.iter().filter(|x| x.dir == Dir::Upload).count();
        let d = here.len() - u;
        let label = super::builders::vars_label(cx, &here);
        f.locations
            .push(cx.location("construct", Some(g.site), Some(label.clone())));
        let loc = cx.location("", Some(g.site), None);
        let calls = match (per_iteration(k), group.lifted.is_empty()) {
            (_, true) => String::new(),
            (Some(n), false) => format!(" ({n} per iteration: the calls in the loop)"),
            (None, false) => {
                " (the calls per iteration could not be counted from the source: each reach is counted as an iteration)".to_string()
            }
        };
        f.evidence.say(format!(
            "{}: reached {} times{calls}; {u} uploads and {d} downloads of {} ({} up and {} down per reach), {} in all",
            loc.place(),
            g.reaches,
            label,
            per_reach(u, g.reaches),
            per_reach(d, g.reaches),
            units::bytes(here.iter().map(|x| x.bytes).sum()),
        ));
    }
    if changed > 0 {
        f.evidence.say(format!(
            "{changed} uploads carried data the host had changed since the buffer's previous transfer (hash changed): they stay, as `update device` inside the loop."
        ));
    }
    f.evidence.say(match cx.hash_mode() {
        accprof_trace::HashMode::Off => "Hashing was off: the saving assumes the host does not change these buffers between iterations.".to_string(),
        _ => "The saving counts every upload after a buffer's first (unless its hash shows new host data) and every download before its last.".to_string(),
    });
    if let Some((ids, c)) = removed {
        f.evidence
            .field("allocations_removed", Value::Count(c.allocations));
        super::builders::alloc_cost_evidence(&mut f, &c);
        f.evidence.say(format!(
            "The region also removes {} allocations and {} frees the constructs made per reach: {} (the CUDA driver's allocation and free calls there took {} each on average).",
            c.allocations,
            c.frees,
            units::duration_ns(c.ns),
            units::duration_ns(c.per_call_ns()),
        ));
        f.subjects.allocs = ids.clone();
        f.saved_allocs = ids;
    }
    if let Some(why) = cx.xfers_cost_meaning() {
        f.evidence.field(
            "device_time_saved",
            Value::Ns(saved.iter().map(|x| x.duration_ns()).sum()),
        );
        f.evidence.say(why);
    }
    match plan {
        Some(p) => apply_plan(cx, &mut f, p),
        None => {
            f.proposal.text = match &lp {
                None if group.why.as_deref().is_some_and(|w| w.starts_with("no host loop")) => format!(
                    "No loop around {} in its function: the repetition comes from the callers. Put a `data` region around the calling loop, with `present` on this construct.",
                    first_site.place()
                ),
                _ => "Put a `data` region around the host loop that repeats these constructs, keeping the arrays on the device, with `present` on the constructs inside.".to_string(),
            };
            f.proposal.no_patch = Some(match &group.why {
                Some(why) => why.clone(),
                None => format!("no host loop found around {}", first_site.place()),
            });
        }
    }
    f
}

/// The allocations a region around the loop would make once: those the
/// constructs that moved `xs` made (the runtime pads a mapping's size, so
/// the constructs, not the sizes, tell them), of at least `min_bytes`, at
/// each place and size all but the first.
fn repeated_allocs(cx: &Context, xs: &[&Xfer]) -> Vec<crate::model::AllocId> {
    let run = cx.run;
    let mut movers: Vec<ConstructId> = xs.iter().filter_map(|x| x.construct).collect();
    movers.sort_unstable();
    movers.dedup();
    let found = run.allocs().filter_map(|(id, a)| {
        let c = a.construct?;
        (a.bytes >= cx.opts.min_bytes
            && movers.binary_search(&c).is_ok()
            && !super::host_cost::holds_construct_block(run, id))
        .then(|| ((run.line_site(run.top_level(c)), a.bytes), (a.alloc_ns, id)))
    });
    let mut out = Vec::new();
    for (_, mut g) in group_by(found) {
        g.sort_unstable();
        out.extend(g.into_iter().skip(1).map(|(_, id)| id));
    }
    out.sort_unstable();
    out
}

fn apply_plan(cx: &Context, f: &mut Finding, p: RegionPlan) {
    let names = p
        .arrays
        .iter()
        .map(|a| a.name.as_str())
        .collect::<Vec<_>>()
        .join(" and ");
    let c_like = p.file.ends_with(".c")
        || p.file.ends_with(".cpp")
        || p.file.ends_with(".cc")
        || p.file.ends_with(".h");
    let mut text = match p.extends {
        Some(line) => format!(
            "Keep {names} on the device for the whole loop too: add `{}` to the `data` region at line {line}, which already holds the others (`{}`), rather than a second region around the loop at line {}.",
            p.added.join(" "),
            p.directive,
            p.loop_line,
        ),
        None => format!(
            "Keep {names} on the device for the whole loop: put `{}` before the `{}` loop at line {}{}",
            p.directive,
            p.loop_text.split(['(', ' ']).next().unwrap_or("loop"),
            p.loop_line,
            if c_like {
                " (it applies to the loop statement)."
            } else {
                " and `!$acc end data` after its `end do`."
            }
        ),
    };
    for a in &p.arrays {
        text.push_str(&format!(" {}({}): {}.", a.clause, a.item, a.reason));
    }
    let reads: Vec<String> = p
        .arrays
        .iter()
        .filter_map(|a| {
            a.host_reads_in_loop
                .first()
                .map(|l| format!("`update host({})` before line {l}", a.item))
        })
        .collect();
    if reads.is_empty() {
        text.push_str(
            " No `update` is needed: the host does not read or write these arrays inside the loop.",
        );
    } else {
        text.push_str(&format!(
            " The host reads them inside the loop: {}.",
            reads.join(", ")
        ));
    }
    if p.callees.is_empty() {
        text.push_str(" The constructs inside get `present(...)` in place of their data clauses for these arrays.");
    } else {
        text.push_str(&format!(
            " The construct{} in the called function{} ({}) get{} `present(...)` in place of {} data clauses.",
            if p.callees.len() == 1 { "" } else { "s" },
            if p.callees.len() == 1 { "" } else { "s" },
            p.callees.join(", "),
            if p.callees.len() == 1 { "s" } else { "" },
            if p.callees.len() == 1 { "its" } else { "their" },
        ));
    }
    for n in &p.notes {
        text.push_str(&format!(" Note: {n}."));
    }
    let _ = cx;
    f.proposal.text = text;
    f.proposal.directive = Some(p.directive.clone());
    if p.patchable {
        f.proposal.edits = p.edits;
    } else {
        f.proposal.no_patch = Some(p.notes.join("; "));
    }
}

#[cfg(test)]
mod tests {
    use accprof_trace::HashMode;

    use super::*;
    use crate::patch;
    use crate::source::SourceSet;
    use crate::testkit::runs::{run_rule, run_rule_with, RunBuilder};

    const LAPLACE: &str = include_str!("../../../samples/laplace_bad.c");

    /// laplace_bad's pattern: two constructs per iteration, each copying
    /// both arrays in and out.
    fn laplace_run(iters: usize, hashing: HashMode) -> crate::Run {
        let mut b = RunBuilder::new(hashing);
        let s1 = b.site("laplace_bad.c", 148);
        let s2 = b.site("laplace_bad.c", 154);
        let a = b.buf(8_421_408, 1);
        let anew = b.buf(8_421_408, 2);
        for _ in 0..iters {
            b.gcc_compute(s1, &[a, anew], 30_000, 8448, &[a, anew]);
            b.gcc_compute(s2, &[a, anew], 20_000_000, 1, &[a, anew]);
        }
        let (na, nanew) = (b.run.intern_name("A"), b.run.intern_name("Anew"));
        b.transfers.iter_mut().for_each(|c| {
            c.variable = Some(if c.host_ptr() == Some(a.ptr) {
                na
            } else {
                nanew
            })
        });
        b.build()
    }

    #[test]
    fn repeated_transfers_without_source() {
        let run = laplace_run(5, HashMode::Off);
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 2, "one per site when the loop is unknown");
        let f = &c.findings[0];
        assert_eq!(f.evidence.count("iterations"), Some(5));
        assert_eq!(f.evidence.count("upload_transfers"), Some(10));
        // 2 buffers: 4 of 5 uploads and 4 of 5 downloads of each are avoidable.
        assert_eq!(f.evidence.count("avoidable_transfers"), Some(16));
        assert!(f.proposal.edits.is_empty());
    }

    #[test]
    fn one_finding_for_the_loop_with_a_data_region() {
        let run = laplace_run(5, HashMode::Off);
        let set = SourceSet::with_text("laplace_bad.c", LAPLACE);
        let c = run_rule_with(&run, &set, check);
        assert_eq!(c.findings.len(), 1);
        let f = &c.findings[0];
        assert_eq!(f.locations[0].role, "host loop");
        assert_eq!(f.locations[0].line, Some(147));
        assert_eq!(
            f.proposal.directive.as_deref(),
            Some("#pragma acc data copy(A) create(Anew)")
        );
        let p = patch::render(&set, &f.proposal.edits).expect("patch");
        let new = &p.files[0].1;
        assert!(new.contains(
            "#pragma acc data copy(A) create(Anew)\n    while (dt > tol && iter < iters) {"
        ));
        // The `kernels` regions become explicit parallel loops (GCC may
        // serialize a `kernels` region once its data clauses change).
        assert!(new.contains(
            "#pragma acc parallel loop collapse(2) gang vector present(A, Anew) // stencil"
        ));
        assert!(new.contains(
            "#pragma acc parallel loop collapse(2) reduction(max:dt) present(A, Anew) // update and max change"
        ));
    }

    #[test]
    fn three_is_the_minimum() {
        let run = laplace_run(2, HashMode::Off);
        assert!(run_rule(&run, check).findings.is_empty());
    }

    #[test]
    fn new_host_data_every_iteration_is_not_avoidable() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("x.c", 10);
        let mut input = b.buf(1 << 20, 0);
        for i in 0..4 {
            input.hash = 100 + i; // the host reads new input each time
            b.gcc_compute(s, &[input], 1_000, 10, &[]);
        }
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }

    #[test]
    fn updates_are_not_d6() {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("x.c", 10);
        let u = b.buf(1 << 20, 0);
        for _ in 0..4 {
            let c = b.open(ConstructClass::Update, s, None);
            b.copy(c, accprof_trace::CopyKind::DeviceToHost, u, 1_000);
            b.close(c);
        }
        let run = b.build();
        assert!(run_rule(&run, check).findings.is_empty());
    }

    const HOST_USE: &str = "static double a[100], b[100];\nint main(void) {\n  double s = 0;\n  for (int it = 0; it < 10; it++) {\n#pragma acc parallel loop\n    for (int i = 0; i < 100; i++) a[i] = b[i] + it;\n    s += a[0];\n  }\n  return s > 0;\n}\n";

    fn host_use_run() -> crate::Run {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("h.c", 5);
        let a = b.buf(800, 0);
        let bb = b.buf(800, 0);
        for _ in 0..10 {
            b.gcc_compute(s, &[a, bb], 1_000, 10, &[a, bb]);
        }
        let (na, nb) = (b.run.intern_name("a"), b.run.intern_name("b"));
        b.transfers
            .iter_mut()
            .for_each(|c| c.variable = Some(if c.host_ptr() == Some(a.ptr) { na } else { nb }));
        b.build()
    }

    #[test]
    fn host_reads_in_the_loop_get_update_host() {
        let run = host_use_run();
        let set = SourceSet::with_text("h.c", HOST_USE);
        let opts = crate::rules::Options {
            min_bytes: 100,
            ..Default::default()
        };
        let cx = crate::rules::Context::new(&run, &set, &opts);
        let c = check(&cx);
        let f = &c.findings[0];
        assert_eq!(
            f.proposal.directive.as_deref(),
            Some("#pragma acc data copyin(b) create(a)")
        );
        let p = patch::render(&set, &f.proposal.edits).expect("patch");
        assert!(
            p.files[0]
                .1
                .contains("#pragma acc update host(a)\n    s += a[0];"),
            "{}",
            p.diff
        );
        // The downloads of a stay (as the update); only b's are saved.
        assert!(f.proposal.text.contains("`update host(a)` before line 7"));
    }

    #[test]
    fn host_writes_in_the_loop_mean_no_patch() {
        let run = host_use_run();
        let src = HOST_USE.replace("s += a[0];", "b[0] = s;");
        let set = SourceSet::with_text("h.c", &src);
        let opts = crate::rules::Options {
            min_bytes: 100,
            ..Default::default()
        };
        let cx = crate::rules::Context::new(&run, &set, &opts);
        let f = &check(&cx).findings[0];
        assert!(f.proposal.edits.is_empty());
        let why = f.proposal.no_patch.as_deref().unwrap_or("");
        assert!(why.contains("the host writes `b` at line 7"), "{why}");
    }
}
