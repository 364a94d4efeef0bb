//! S4: async queues not ordered as the program expects. A construct waits
//! for queues (`wait(q)`) that received no work before it, while kernels
//! launched earlier on other queues had not been waited for: the program
//! meant those kernels to come first, and nothing orders them before the
//! construct. The usual cause is `async` without a queue after
//! `set default_async(q)`, a directive GCC ignores: the work goes to
//! acc_async_noval instead of queue q.
//!
//! Evidence needed: the queue of each construct (acc_prof) and the `wait`
//! clauses at the construct's source line. With CUPTI the device times
//! show how often the construct's kernel started before an earlier kernel
//! had ended; without it the hazard is reported with no observed count.
//!
//! A synchronous construct ends the window of unwaited work: the runtimes
//! run synchronous work on the CUDA default stream, which waits for the
//! queues' streams, so work from before one is not counted as unordered.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::findings::{Category, Confidence, Finding, Value};
use crate::idhash::IdHashMap;
use crate::model::{group_by, ConstructClass, ConstructId, KernelId, Run, SiteId};
use crate::patch::Edit;
use crate::source::{queue_number, Directive, SourceFile};
use crate::units;

use super::context::{Checked, Context};

/// `acc_async_sync` and `acc_async_noval` in the OpenACC API.
const SYNC: i32 = -2;
const NOVAL: i32 = -1;

/// One time a waiting construct was reached with unordered work before it.
struct Reach {
    construct: ConstructId,
    /// The waited-for queues that had received no work.
    empty: Vec<i32>,
    /// Earlier constructs with kernels on other queues, not waited for.
    pending: Vec<ConstructId>,
}

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let run = cx.run;
    let queues = queues(run);
    let first_work = first_work(run, &queues);
    // Built the first time an async construct or a finding needs it.
    let kernels = std::cell::OnceCell::new();
    let kernels = || kernels.get_or_init(|| kernels_by_construct(run));
    let launched =
        |id: ConstructId| run.launches_of(id).next().is_some() || kernels().contains_key(&id);
    if run
        .constructs_of_class(ConstructClass::Wait)
        .next()
        .is_none()
    {
        out.findings
            .extend(source_waits(cx, &queues, &first_work, &launched));
    }
    // Without work on an async queue nothing is ever pending, so no
    // construct can be reached with unordered work before it.
    if !queues.0.iter().any(|&q| q != Queues::NONE && q != SYNC) {
        return out;
    }
    let reaches = find_reaches(cx, &queues, &first_work, &launched);
    if reaches.is_empty() {
        return out;
    }
    let groups = group_by(
        reaches
            .into_iter()
            .map(|r| (run.construct(r.construct).site, r)),
    );
    for (site, reaches) in groups {
        out.findings
            .push(finding(cx, &queues, kernels(), site, &reaches));
    }
    out
}

/// The queue of every construct, by construct index (`i32::MIN`, which
/// no construct's queue is, for none: four bytes a construct).
struct Queues(Vec<i32>);

impl Queues {
    const NONE: i32 = i32::MIN;

    fn of(&self, id: ConstructId) -> Option<i32> {
        let q = self.0[id.index()];
        (q != Self::NONE).then_some(q)
    }
}

/// The queue of every construct. GCC's libgomp says `acc_async_sync` at the
/// start of every compute construct (it reads the `async` clause later) and
/// the real queue on the implicit data parts inside it, so a compute
/// construct takes the queue of its first nested construct unless its own
/// names one.
fn queues(run: &Run) -> Queues {
    // Innermost first (nested constructs start after their parent): when
    // a construct comes, those nested in it have come, and the earliest
    // of them with a queue has been seen last. Until then its slot holds
    // that nested queue; then its own.
    let mut queues = vec![Queues::NONE; run.constructs().len()];
    for (id, c) in run.constructs().rev() {
        let own = c.async_queue();
        if let (Some(p), Some(q)) = (c.parent, own) {
            queues[p.index()] = q;
        }
        let nested = queues[id.index()];
        let nested = (nested != Queues::NONE).then_some(nested);
        let q = match own {
            Some(q) if q != SYNC => Some(q),
            own if c.class == ConstructClass::Compute => nested.or(own),
            own => own,
        };
        queues[id.index()] = q.unwrap_or(Queues::NONE);
    }
    Queues(queues)
}

/// The source directive of a construct, when it is of the construct's kind.
fn directive_of(cx: &Context, id: ConstructId) -> Option<Directive> {
    let c = cx.run.construct(id);
    let site = cx.run.site(c.site);
    let src = cx.sources.get(&site.file)?;
    let d = src.directive_at(site.line?)?;
    let fits = match c.class {
        ConstructClass::Compute => d.is_compute(),
        ConstructClass::Wait => d.construct == ["wait"],
        _ => false,
    };
    fits.then_some(d)
}

/// What a directive waits for: None when it waits for nothing, Some(None)
/// for every queue (a bare `wait`, or queues the source names by variable),
/// Some(Some(queues)) for the numbered queues.
fn waits_for(d: &Directive) -> Option<Option<Vec<i32>>> {
    let c = d.clause("wait");
    if c.is_none() && d.construct == ["wait"] {
        return Some(None);
    }
    let args = c?.queue_args();
    let nums: Option<Vec<i32>> = args.iter().map(|a| queue_number(a)).collect();
    Some(nums.filter(|n| !n.is_empty()))
}

/// When each queue first received work (any construct on it).
fn first_work(run: &Run, queues: &Queues) -> IdHashMap<i32, u64> {
    let mut first: IdHashMap<i32, u64> = IdHashMap::default();
    // Constructs mostly follow others on the same queue: the earliest
    // start of such a run is kept, and the map updated once per run.
    let mut run_of: Option<(i32, u64)> = None;
    let keep = |first: &mut IdHashMap<i32, u64>, (q, start): (i32, u64)| {
        let t = first.entry(q).or_insert(start);
        *t = (*t).min(start);
    };
    for (i, &q) in queues.0.iter().enumerate() {
        if q != Queues::NONE {
            let (start, _) = run.construct_span(ConstructId::at(i));
            match &mut run_of {
                Some((rq, min)) if *rq == q => *min = (*min).min(start),
                _ => {
                    if let Some(done) = run_of.replace((q, start)) {
                        keep(&mut first, done);
                    }
                }
            }
        }
    }
    if let Some(done) = run_of {
        keep(&mut first, done);
    }
    first
}

fn find_reaches(
    cx: &Context,
    queues: &Queues,
    first_work: &IdHashMap<i32, u64>,
    launched: &dyn Fn(ConstructId) -> bool,
) -> Vec<Reach> {
    let run = cx.run;
    // What each site waits for, read once per site and kind of construct.
    type Waits = Option<Option<Vec<i32>>>;
    let mut waits_at: IdHashMap<(SiteId, ConstructClass), Waits> = IdHashMap::default();
    let mut top: Vec<ConstructId> = run.top_level_constructs().collect();
    let key = |id: ConstructId| (run.construct_thread(id), run.construct_span(id).0, id);
    // Constructs are in start order: on one thread, so are these.
    if !top.windows(2).all(|w| key(w[0]) <= key(w[1])) {
        top.sort_by_cached_key(|&id| key(id));
    }
    let mut out = Vec::new();
    let mut thread = None;
    // Constructs with kernels on a queue, not waited for yet, with the queue.
    let mut pending: Vec<(ConstructId, i32)> = Vec::new();
    for id in top {
        let c = run.construct(id);
        if thread != Some(c.thread) {
            thread = Some(c.thread);
            pending.clear();
        }
        let q = queues.of(id);
        let waits = waits_at
            .entry((c.site, c.class))
            .or_insert_with(|| directive_of(cx, id).and_then(|d| waits_for(&d)));
        match &*waits {
            Some(Some(ws)) => {
                let empty: Vec<i32> = ws
                    .iter()
                    .copied()
                    .filter(|w| !first_work.get(w).is_some_and(|&t| t < c.start_ns))
                    .collect();
                if !empty.is_empty() {
                    let unordered: Vec<ConstructId> = pending
                        .iter()
                        .filter(|(_, p)| Some(*p) != q && !ws.contains(p))
                        .map(|(p, _)| *p)
                        .collect();
                    if !unordered.is_empty() {
                        out.push(Reach {
                            construct: id,
                            empty,
                            pending: unordered,
                        });
                    }
                }
                if c.class == ConstructClass::Wait {
                    pending.retain(|(_, p)| !ws.contains(p));
                }
            }
            // Waits for every queue.
            Some(None) => pending.clear(),
            // A wait whose source cannot be read may wait for anything.
            None if c.class == ConstructClass::Wait => pending.clear(),
            None => {}
        }
        match q {
            Some(SYNC) if c.class != ConstructClass::Wait => pending.clear(),
            Some(q) if q != SYNC && launched(id) => pending.push((id, q)),
            _ => {}
        }
    }
    out
}

/// The kernels of every top-level construct that has any (its own and its
/// nested ones').
fn kernels_by_construct(run: &Run) -> HashMap<ConstructId, Vec<KernelId>> {
    let mut m: HashMap<ConstructId, Vec<KernelId>> = HashMap::new();
    if !run.kernels().any(|(_, k)| k.device_timed()) {
        return m;
    }
    for (id, _) in run.constructs() {
        let own: Vec<KernelId> = run
            .kernels_of(id)
            .iter()
            .copied()
            .filter(|&k| run.kernel(k).device_timed())
            .collect();
        if !own.is_empty() {
            m.entry(run.top_level(id)).or_default().extend(own);
        }
    }
    m
}

/// First start and last end of a construct's kernels on the device.
fn device_span(
    run: &Run,
    kernels: &HashMap<ConstructId, Vec<KernelId>>,
    id: ConstructId,
) -> Option<(u64, u64)> {
    let ks = kernels.get(&id)?;
    let start = ks.iter().map(|&i| run.kernel(i).start_ns).min()?;
    let end = ks.iter().map(|&i| run.kernel(i).end_ns).max()?;
    Some((start, end))
}

fn queue_name(q: i32) -> String {
    match q {
        NOVAL => "acc_async_noval (-1)".into(),
        SYNC => "acc_async_sync".into(),
        q => format!("queue {q}"),
    }
}

fn queue_list(qs: &BTreeSet<i32>) -> String {
    qs.iter()
        .map(|&q| queue_name(q))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "line 80" or "lines 77, 80", or the sites' places when they have no line.
fn lines_label(cx: &Context, sites: impl IntoIterator<Item = SiteId>) -> String {
    let sites: Vec<SiteId> = sites.into_iter().collect();
    let lines: Option<Vec<u32>> = sites.iter().map(|&s| cx.run.site(s).line).collect();
    match lines {
        Some(l) if l.len() > 1 => format!(
            "lines {}",
            l.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => sites
            .iter()
            .map(|&s| line_label(cx, s))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// "line 80", or the site's place when it has no line.
fn line_label(cx: &Context, site: SiteId) -> String {
    match cx.run.site(site).line {
        Some(l) => format!("line {l}"),
        None => cx.location("", Some(site), None).place(),
    }
}

/// Device evidence for one earlier site: reaches it was unordered in, how
/// often the waiting construct's kernel started before its kernel ended,
/// and before it started.
#[derive(Default)]
struct Observed {
    reaches: u64,
    measured: u64,
    before_end: u64,
    before_start: u64,
}

fn finding(
    cx: &Context,
    queues: &Queues,
    kernels: &HashMap<ConstructId, Vec<KernelId>>,
    site: SiteId,
    reaches: &[Reach],
) -> Finding {
    let run = cx.run;
    let here = line_label(cx, site);
    let is_wait = reaches
        .iter()
        .all(|r| run.construct(r.construct).class == ConstructClass::Wait);
    let (went_on, went_on_not) = if is_wait {
        (
            format!("the host went on from the wait at {here}"),
            format!("the host go on from the wait at {here}"),
        )
    } else {
        (
            format!("the kernel of {here} started"),
            format!("the kernel of {here} start"),
        )
    };
    let empty: BTreeSet<i32> = reaches
        .iter()
        .flat_map(|r| r.empty.iter().copied())
        .collect();
    let mut earlier: BTreeMap<SiteId, Observed> = BTreeMap::new();
    let mut earlier_queues: BTreeSet<i32> = BTreeSet::new();
    let mut own_queues: BTreeSet<i32> = BTreeSet::new();
    let mut counted: BTreeSet<KernelId> = BTreeSet::new();
    let mut unordered_reaches = 0u64;
    let mut inverted_reaches = 0u64;
    for r in reaches {
        own_queues.extend(queues.of(r.construct));
        // When what follows could start: the construct's first kernel, or
        // for a wait directive the host's return from it (one clock).
        let mine = match run.construct(r.construct).class {
            ConstructClass::Wait => run.construct(r.construct).end_ns().map(|e| (e, e)),
            _ => device_span(run, kernels, r.construct),
        };
        let mut unordered = false;
        let mut inverted = false;
        // One count per earlier site and reach, however many launches it had.
        let mut seen: BTreeMap<SiteId, (bool, bool, bool)> = BTreeMap::new();
        for &p in &r.pending {
            earlier_queues.extend(queues.of(p));
            let e = seen.entry(run.construct(p).site).or_default();
            if let (Some((start, _)), Some((ps, pe))) = (mine, device_span(run, kernels, p)) {
                e.0 = true;
                if start < pe {
                    e.1 = true;
                    unordered = true;
                    counted.extend(kernels.get(&p).into_iter().flatten());
                }
                if start < ps {
                    e.2 = true;
                    inverted = true;
                }
            }
        }
        for (s, (measured, before_end, before_start)) in seen {
            let o = earlier.entry(s).or_default();
            o.reaches += 1;
            o.measured += u64::from(measured);
            o.before_end += u64::from(before_end);
            o.before_start += u64::from(before_start);
        }
        if unordered {
            counted.extend(kernels.get(&r.construct).into_iter().flatten());
        }
        unordered_reaches += u64::from(unordered);
        inverted_reaches += u64::from(inverted);
    }
    // The time of the kernels that ran unordered; every kernel involved when
    // none was seen to (the hazard is there, the run got lucky).
    if counted.is_empty() {
        for r in reaches {
            counted.extend(kernels.get(&r.construct).into_iter().flatten());
            for p in &r.pending {
                counted.extend(kernels.get(p).into_iter().flatten());
            }
        }
    }
    let cost: u64 = counted.iter().map(|&i| run.kernel(i).device_ns()).sum();
    let earlier_lines = lines_label(cx, earlier.keys().copied());
    let wait_text = format!(
        "wait({})",
        empty
            .iter()
            .map(|q| q.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut f = Finding::new(
        "S4",
        Category::Synchronization,
        format!(
            "`{wait_text}` at {here} waits for {}, which got no work: nothing orders {here} after the kernels of {earlier_lines}",
            queue_list(&empty),
        ),
    );
    f.confidence = Confidence::Certain;
    f.subjects.kernels.extend(&counted);
    for r in reaches {
        f.subjects.constructs.push(r.construct);
        f.subjects.constructs.extend(&r.pending);
    }
    let mut loc = cx.location("construct", Some(site), None);
    loc.role = format!("construct waiting for {}", queue_list(&empty));
    f.locations.push(loc);
    for &s in earlier.keys() {
        let qs: BTreeSet<i32> = reaches
            .iter()
            .flat_map(|r| r.pending.iter())
            .filter(|&&p| run.construct(p).site == s)
            .filter_map(|&p| queues.of(p))
            .collect();
        let mut loc = cx.location("unordered kernel", Some(s), None);
        loc.role = format!("unordered kernel on {}", queue_list(&qs));
        f.locations.push(loc);
    }
    f.evidence
        .field("reaches", Value::Count(reaches.len() as u64));
    let ran_on = if is_wait {
        String::new()
    } else {
        format!(" ran on {} and", queue_list(&own_queues))
    };
    f.evidence.say(format!(
        "{here}{ran_on} waited for {}, which had received no work before it; the kernels of {earlier_lines} ran earlier on {} and nothing waited for them before {here}.",
        queue_list(&empty),
        queue_list(&earlier_queues),
    ));
    if !cx.run.kernels().any(|(_, k)| k.device_timed()) {
        f.evidence.say(
            "No CUPTI kernel records in this run: whether the kernels actually ran out of order is not known; the cost is counted as zero.",
        );
    } else {
        f.evidence
            .field(
                "reaches_unordered_on_device",
                Value::Count(unordered_reaches),
            )
            .field("reaches_inverted_on_device", Value::Count(inverted_reaches));
        for (&s, o) in &earlier {
            let other = line_label(cx, s);
            if o.before_end == 0 {
                f.evidence.say(format!(
                    "In none of the {} reaches measured did {went_on_not} before the kernel of {other} had ended: launch order and kernel lengths kept them apart, nothing enforces it.",
                    o.measured
                ));
            } else {
                f.evidence.say(format!(
                    "In {} of {} reaches {went_on} before the kernel of {other} had ended ({} of them before it had started).",
                    o.before_end, o.measured, o.before_start
                ));
            }
        }
    }
    f.evidence.field("unordered_kernel_time", Value::Ns(cost));
    f.cost_ns = Some(cost);
    let files: BTreeSet<&str> = std::iter::once(site)
        .chain(earlier.keys().copied())
        .map(|s| run.site(s).file.as_str())
        .collect();
    let gcc = run.runtime_is_libgomp();
    let earlier_sites: Vec<SiteId> = earlier.keys().copied().collect();
    propose(cx, &mut f, &files, &earlier_sites, &here, &empty, gcc);
    if cost > 0 {
        f.evidence.say(format!(
            "The kernels involved ran {} on the device.",
            units::duration_ns(cost)
        ));
    }
    f
}

/// Wait directives the runtime did not report (GCC's libgomp sends no wait
/// events): a `wait(q)` in the source whose queues got no work in the whole
/// run, below async kernels on other queues in the same function. When it
/// ran is not known, so the finding is likely, not certain.
fn source_waits(
    cx: &Context,
    queues: &Queues,
    first_work: &IdHashMap<i32, u64>,
    launched: &dyn Fn(ConstructId) -> bool,
) -> Vec<Finding> {
    let run = cx.run;
    let mut out = Vec::new();
    let files: BTreeSet<&str> = run.sites().map(|(_, s)| s.file.as_str()).collect();
    for file in files {
        let Some(src) = cx.sources.get(file) else {
            continue;
        };
        for d in src.directives_in(1, src.lines.len() as u32) {
            if d.construct != ["wait"] {
                continue;
            }
            let Some(Some(ws)) = waits_for(&d) else {
                continue;
            };
            let empty: BTreeSet<i32> = ws
                .iter()
                .copied()
                .filter(|w| !first_work.contains_key(w))
                .collect();
            let Some((a, _)) = src.unit_of(d.line) else {
                continue;
            };
            if empty.is_empty() {
                continue;
            }
            let earlier: Vec<ConstructId> = run
                .constructs()
                .filter(|&(id, ref c)| {
                    let site = run.site(c.site);
                    c.parent.is_none()
                        && site.file == file
                        && site.line.is_some_and(|l| a <= l && l < d.line)
                        && queues.of(id).is_some_and(|q| q != SYNC && !ws.contains(&q))
                        && launched(id)
                })
                .map(|(id, _)| id)
                .collect();
            if earlier.is_empty() {
                continue;
            }
            out.push(source_wait_finding(cx, queues, src, &d, &empty, &earlier));
        }
    }
    out
}

fn source_wait_finding(
    cx: &Context,
    queues: &Queues,
    src: &SourceFile,
    d: &Directive,
    empty: &BTreeSet<i32>,
    earlier: &[ConstructId],
) -> Finding {
    let run = cx.run;
    let here = format!("line {}", d.line);
    let sites: BTreeSet<SiteId> = earlier.iter().map(|&c| run.construct(c).site).collect();
    let earlier_lines = lines_label(cx, sites.iter().copied());
    let earlier_queues: BTreeSet<i32> = earlier.iter().filter_map(|&c| queues.of(c)).collect();
    let wait_text = src.line(d.line).trim().to_string();
    let mut f = Finding::new(
        "S4",
        Category::Synchronization,
        format!(
            "`{wait_text}` at {here} waits for {}, which got no work in this run: it does not wait for the kernels of {earlier_lines}",
            queue_list(empty)
        ),
    );
    f.confidence = Confidence::Likely;
    let first = sites.iter().next().copied();
    let mut loc = cx
        .location("wait directive", first, None)
        .source_line(d.line);
    loc.role = format!("wait directive for {}", queue_list(empty));
    f.locations.push(loc);
    f.subjects.constructs.extend(earlier);
    for &s in &sites {
        let qs: BTreeSet<i32> = earlier
            .iter()
            .filter(|&&c| run.construct(c).site == s)
            .filter_map(|&c| queues.of(c))
            .collect();
        let mut loc = cx.location("unordered kernel", Some(s), None);
        loc.role = format!("unordered kernel on {}", queue_list(&qs));
        f.locations.push(loc);
    }
    f.evidence
        .field("earlier_constructs", Value::Count(earlier.len() as u64));
    f.evidence.say(format!(
        "{} received no work in the whole run; the kernels of {earlier_lines}, above the wait in the same function, ran {} times on {}.",
        queue_list(empty),
        earlier.len(),
        queue_list(&earlier_queues),
    ));
    f.evidence.say(
        "The runtime sends no wait events, so when the wait ran is not known and whether the host went on before those kernels ended is not measured; the cost is counted as zero.",
    );
    f.cost_ns = Some(0);
    let files: BTreeSet<&str> = std::iter::once(src.path.as_str())
        .chain(sites.iter().map(|&s| run.site(s).file.as_str()))
        .collect();
    let gcc = run.runtime_is_libgomp();
    let sites: Vec<SiteId> = sites.into_iter().collect();
    propose(cx, &mut f, &files, &sites, &here, empty, gcc);
    f
}

/// The bare `async` clauses after a `set default_async(n)`, up to the next
/// one or the end of the function: (directive, n).
fn bare_async_after_sets(src: &SourceFile) -> Vec<(u32, Directive, String)> {
    let sets = src.default_async_sets();
    let mut out = Vec::new();
    for (i, (set, q)) in sets.iter().enumerate() {
        let unit_end = src
            .unit_of(set.line)
            .map(|(_, b)| b)
            .unwrap_or(src.lines.len() as u32);
        let end = sets
            .get(i + 1)
            .map(|(next, _)| next.line.saturating_sub(1))
            .unwrap_or(unit_end)
            .min(unit_end);
        for d in src.directives_in(set.end_line + 1, end) {
            if d.clause("async").is_some_and(|c| c.args.is_none()) {
                out.push((set.line, d, q.clone()));
            }
        }
    }
    out
}

fn propose(
    cx: &Context,
    f: &mut Finding,
    files: &BTreeSet<&str>,
    earlier: &[SiteId],
    here: &str,
    empty: &BTreeSet<i32>,
    gcc: bool,
) {
    let mut directives = Vec::new();
    let mut set_lines = Vec::new();
    let mut bare_lines = Vec::new();
    for &file in files {
        let Some(src) = cx.sources.get(file) else {
            continue;
        };
        for (set_line, d, q) in bare_async_after_sets(src) {
            if !set_lines.contains(&(file, set_line)) {
                set_lines.push((file, set_line));
            }
            bare_lines.push(d.line);
            let (directive, edit) = Edit::set_clause(src, &d, "async", q);
            directives.push(directive);
            f.proposal.edits.push(edit);
        }
    }
    let lines = |v: &[u32]| {
        v.iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !set_lines.is_empty() {
        let sets: Vec<u32> = set_lines.iter().map(|&(_, l)| l).collect();
        for &(file, l) in &set_lines {
            // The function of a construct in the same function as the directive.
            let unit = cx.sources.get(file).and_then(|s| s.unit_of(l));
            let site = cx.run.sites().find_map(|(id, s)| {
                (s.file == file
                    && matches!((s.line, unit), (Some(n), Some((a, b))) if a <= n && n <= b))
                .then_some(id)
            });
            let mut loc = cx.location("set default_async", site, None).source_line(l);
            loc.file = file.to_string();
            loc.role = if gcc {
                "set default_async (ignored by GCC)".into()
            } else {
                "set default_async".into()
            };
            f.locations.push(loc);
        }
        if gcc {
            f.evidence.say(format!(
                "The run's runtime is GCC's libgomp, and GCC ignores `set default_async` (GCC 12 warns \"ignoring '#pragma acc set'\") at line{} {}: the `async` clauses without a queue at line{} {} go to acc_async_noval.",
                if sets.len() == 1 { "" } else { "s" },
                lines(&sets),
                if bare_lines.len() == 1 { "" } else { "s" },
                lines(&bare_lines),
            ));
        }
        f.proposal.text = format!(
            "Name the queues explicitly: write `async(n)` where `set default_async(n)` was meant to choose the queue (line{} {}), so that `wait` at {here} waits for the kernels it expects, under every compiler.",
            if bare_lines.len() == 1 { "" } else { "s" },
            lines(&bare_lines),
        );
        f.proposal.directive = Some(directives.join("\n"));
    } else {
        f.proposal.text = format!(
            "Launch the kernels of {} on the queue {here} waits for ({}), or add their queues to its `wait`.",
            lines_label(cx, earlier.iter().copied()),
            queue_list(empty)
        );
        f.proposal.no_patch = Some(
            "no `set default_async` in the source: which queue each kernel belongs on is the program's choice".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use accprof_trace::HashMode;

    use super::*;
    use crate::source::SourceSet;
    use crate::testkit::runs::{run_rule_with, RunBuilder};

    const SRC: &str = "int main(void)
{
#pragma acc parallel loop async
  for (int i = 0; i < 1; i++) ;
#pragma acc parallel loop async(1)
  for (int i = 0; i < 1; i++) ;
#pragma acc parallel loop async(1) wait(2)
  for (int i = 0; i < 1; i++) ;
#pragma acc wait(2)
#pragma acc parallel loop
  for (int i = 0; i < 1; i++) ;
#pragma acc wait(1)
}
";

    /// A compute construct the GCC way: acc_async_sync at its start, the
    /// queue on its implicit data part, one kernel.
    fn compute(b: &mut RunBuilder, line: u32, queue: i32) -> ConstructId {
        let s = b.site("a.c", line);
        let c = b.open(ConstructClass::Compute, s, None);
        b.construct_mut(c).set_async_queue(Some(SYNC));
        let e = b.open(ConstructClass::EnterData, s, Some(c));
        b.construct_mut(e).set_async_queue(Some(queue));
        b.close(e);
        b.kernel(c, 100, 10_000);
        b.close(c);
        c
    }

    fn wait(b: &mut RunBuilder, line: u32) {
        let s = b.site("a.c", line);
        let w = b.open(ConstructClass::Wait, s, None);
        b.construct_mut(w).set_async_queue(Some(SYNC));
        b.close(w);
    }

    fn certain(c: &Checked) -> Vec<&Finding> {
        c.findings
            .iter()
            .filter(|f| f.confidence == Confidence::Certain)
            .collect()
    }

    fn check_src(b: RunBuilder) -> Checked {
        let run = b.build();
        run_rule_with(&run, &SourceSet::with_text("a.c", SRC), check)
    }

    #[test]
    fn waiting_for_an_empty_queue() {
        let mut b = RunBuilder::new(HashMode::Off).no_cupti();
        compute(&mut b, 3, NOVAL);
        compute(&mut b, 7, 1);
        let c = check_src(b);
        let f = certain(&c);
        assert_eq!(f.len(), 1);
        let f = f[0];
        assert_eq!(f.locations[0].line, Some(7));
        assert_eq!(f.locations[1].line, Some(3));
        // No device times: the hazard, at no measured cost.
        assert_eq!(f.cost_ns, Some(0));
        assert!(f.evidence.text.iter().any(|t| t.contains("No CUPTI")));
        assert!(f.proposal.edits.is_empty() && f.proposal.no_patch.is_some());
    }

    #[test]
    fn waiting_for_a_queue_with_work() {
        // Queue 2 got work first (here through line 3 put on queue 2):
        // `wait(2)` orders line 7 after it.
        let mut b = RunBuilder::new(HashMode::Off);
        compute(&mut b, 3, 2);
        compute(&mut b, 7, 1);
        assert!(check_src(b).findings.is_empty());
        // Independent pieces on their own queues, a wait for each: fine.
        let mut b = RunBuilder::new(HashMode::Off);
        compute(&mut b, 5, 1);
        compute(&mut b, 3, 2);
        wait(&mut b, 12);
        wait(&mut b, 9);
        assert!(check_src(b).findings.is_empty());
    }

    #[test]
    fn synchronous_work_ends_the_window() {
        let mut b = RunBuilder::new(HashMode::Off);
        compute(&mut b, 3, NOVAL);
        compute(&mut b, 10, SYNC);
        compute(&mut b, 7, 1);
        assert!(certain(&check_src(b)).is_empty());
        // A bare `wait` too.
        let mut b = RunBuilder::new(HashMode::Off);
        compute(&mut b, 3, NOVAL);
        let s = b.site("a.c", 13);
        let w = b.open(ConstructClass::Wait, s, None);
        b.close(w);
        compute(&mut b, 7, 1);
        assert!(check_src(b).findings.is_empty());
    }

    #[test]
    fn wait_directive_for_an_empty_queue() {
        // A runtime that sends wait events: the host leaves `wait(2)` while
        // the kernel on acc_async_noval still runs.
        let mut b = RunBuilder::new(HashMode::Off);
        let k = compute(&mut b, 3, NOVAL);
        wait(&mut b, 9);
        // The kernel ran long, past the wait.
        let end = b.t + 50_000;
        let kernel = KernelId::at(0);
        assert_eq!(b.kernels[kernel.index()].construct, Some(k));
        b.kernel_mut(kernel).end_ns = end;
        let c = check_src(b);
        assert_eq!(c.findings.len(), 1);
        let f = &c.findings[0];
        assert_eq!(f.locations[0].line, Some(9));
        assert_eq!(f.evidence.count("reaches_unordered_on_device"), Some(1));
        assert!(f
            .evidence
            .text
            .iter()
            .any(|t| t.contains("the host went on")));
    }

    #[test]
    fn wait_directive_the_runtime_did_not_report() {
        // GCC's libgomp sends no wait events: `wait(2)` at line 9 and
        // `wait(1)` at line 12 are read from the source, below a kernel on
        // acc_async_noval; neither queue got work.
        let mut b = RunBuilder::new(HashMode::Off);
        compute(&mut b, 3, NOVAL);
        let c = check_src(b);
        let waits: Vec<_> = c.findings.iter().map(|f| f.locations[0].line).collect();
        assert_eq!(waits, [Some(9), Some(12)]);
        let f = &c.findings[0];
        assert_eq!(f.confidence, Confidence::Likely);
        assert_eq!(f.locations[1].line, Some(3));
        assert_eq!(f.cost_ns, Some(0));
        // Once queue 2 got work, `wait(2)` waits for something.
        let mut b = RunBuilder::new(HashMode::Off);
        compute(&mut b, 3, NOVAL);
        compute(&mut b, 5, 2);
        let c = check_src(b);
        let waits: Vec<_> = c.findings.iter().map(|f| f.locations[0].line).collect();
        assert_eq!(waits, [Some(12)]);
    }
}
