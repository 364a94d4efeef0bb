//! C3: downloads nobody read. A construct (an `update self`, or a data
//! construct's exit) brought an array back to the host, and the host read
//! none of it before the next download or the end: the transfer was
//! waste. A performance finding: its cost is the unread downloads' time.
//!
//! Evidence needed: the coherence check's records (`accprof run --check
//! coherence`), one per unread download, naming the construct that made
//! it. One finding per downloading construct (its source line) and
//! variable, counting the construct's downloads of the range from the run
//! and which of them the host read. When the read ones come every k-th
//! execution, the update gets an `if(...)` clause: the condition that
//! guards the host's reads in the source, else `i % k == r` on the index
//! of the host loop around the update; when no period fits, the proposal
//! is to move the download next to the host code that reads it.

use accprof_trace::{CoherenceKind, CopyKind};

use crate::findings::{Category, Finding, Value};
use crate::model::{ConstructId, HostAccess, SiteId, TransferId};
use crate::proposals::update_guard;
use crate::source::SourceFile;

use super::coherence::{base_name, grouped, short};
use super::context::{Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let by_construct = |a: &HostAccess| a.construct.map(|c| cx.run.line_site(c));
    for ((site, var), unread) in grouped(cx, CoherenceKind::UnreadDownload, by_construct) {
        out.findings.push(finding(cx, site, &var, &unread));
    }
    out
}

/// One execution of the downloading construct: the construct and its
/// downloads of the range.
struct Download {
    construct: ConstructId,
    transfers: Vec<TransferId>,
}

/// The downloads of the range `[start, start + bytes)` that constructs at
/// `site` of the class of `like` made, in time order: each construct with
/// a device-to-host transfer into the range, or, in a run that recorded
/// no transfer of such a construct, every construct there.
fn downloads(
    cx: &Context,
    site: SiteId,
    like: ConstructId,
    start: u64,
    bytes: u64,
) -> Vec<Download> {
    let run = cx.run;
    let class = run.construct_class(like);
    let end = start.saturating_add(bytes);
    let mut all: Vec<(u64, Download)> = Vec::new();
    let mut any_transfer = false;
    for (id, c) in run.constructs() {
        if c.class != class || run.line_site(id) != site {
            continue;
        }
        let ts: Vec<TransferId> = run
            .transfers_of(id)
            .iter()
            .copied()
            .filter(|&t| {
                let x = run.transfer(t);
                x.kind == CopyKind::DeviceToHost
                    && x.host_ptr()
                        .is_some_and(|p| p < end && p.saturating_add(x.bytes) > start)
            })
            .collect();
        any_transfer |= !run.transfers_of(id).is_empty();
        all.push((
            c.start_ns,
            Download {
                construct: id,
                transfers: ts,
            },
        ));
    }
    if any_transfer {
        all.retain(|(_, d)| !d.transfers.is_empty() || d.construct == like);
    }
    all.sort_by_key(|(t, d)| (*t, d.construct));
    all.into_iter().map(|(_, d)| d).collect()
}

/// The period of the read executions, when they are exactly every k-th
/// one (k >= 2) from execution r: (k, r). At least two reads.
pub(crate) fn period(read: &[bool]) -> Option<(usize, usize)> {
    let first = read.iter().position(|&r| r)?;
    if read.iter().filter(|&&r| r).count() < 2 {
        return None;
    }
    (2..=read.len() / 2)
        .filter(|&k| first < k)
        .find(|&k| read.iter().enumerate().all(|(i, &r)| r == (i % k == first)))
        .map(|k| (k, first))
}

fn finding(cx: &Context, site: Option<SiteId>, var: &str, unread: &[&HostAccess]) -> Finding {
    let run = cx.run;
    let first = unread[0];
    let like = unread.iter().find_map(|a| a.construct);
    let all = match (site, like) {
        (Some(s), Some(c)) => downloads(cx, s, c, first.range_start, first.range_bytes),
        _ => Vec::new(),
    };
    let unread_constructs: Vec<ConstructId> = unread.iter().filter_map(|a| a.construct).collect();
    // The records are the truth about what was not read; the run's count
    // of executions can only add read ones.
    let total = all.len().max(unread.len());
    let read: Vec<bool> = all
        .iter()
        .map(|d| !unread_constructs.contains(&d.construct))
        .collect();
    let n_unread = unread.len();
    let (place, kind) = match site {
        Some(s) => {
            let st = run.site(s);
            let place = match st.line {
                Some(l) => format!("{}:{l}", short(&st.file)),
                None => cx.location("", Some(s), None).place(),
            };
            (place, like.map(|c| run.construct_class(c)))
        }
        None => ("an unknown construct".to_string(), None),
    };
    let mut f = Finding::new(
        "C3",
        Category::DataMovement,
        format!("{n_unread} of {total} downloads of {var} at {place} were not read by the host"),
    );
    let wasted: Vec<&crate::model::Xfer> = cx
        .xfers
        .iter()
        .filter(|x| {
            x.dir == crate::model::Dir::Download
                && x.construct.is_some_and(|c| unread_constructs.contains(&c))
                && x.host_ptr.is_some_and(|p| {
                    p < first.range_start.saturating_add(first.range_bytes)
                        && p.saturating_add(x.bytes) > first.range_start
                })
        })
        .collect();
    if !wasted.is_empty() {
        let cost = cx.xfers_cost(&wasted);
        f.cost_ns = Some(cost);
        f.saving_ns = Some(cost);
        f.saved_transfers = wasted.iter().map(|x| x.transfer).collect();
        f.subjects
            .transfers
            .extend(wasted.iter().map(|x| x.transfer));
    }
    f.locations.push(cx.location(
        if kind == Some(crate::model::ConstructClass::Update) {
            "update"
        } else {
            "download"
        },
        site,
        Some(var.to_string()),
    ));
    f.subjects
        .constructs
        .extend(unread_constructs.iter().copied());
    f.evidence
        .field("downloads", Value::Count(total as u64))
        .field("unread", Value::Count(n_unread as u64))
        .field("read", Value::Count(total.saturating_sub(n_unread) as u64))
        .field("variable", Value::Text(var.to_string()))
        .field(
            "range_start",
            Value::Text(format!("{:#x}", first.range_start)),
        )
        .field("range_bytes", Value::Bytes(first.range_bytes))
        .field(
            "unread_bytes",
            Value::Bytes(first.range_bytes.saturating_mul(n_unread as u64)),
        );
    let every = (read.len() == total).then(|| period(&read)).flatten();
    if let Some((k, r)) = every {
        f.evidence
            .field("read_every", Value::Count(k as u64))
            .field("read_first", Value::Count(r as u64));
    }
    f.evidence.say(format!(
        "The host read none of {var}'s {} between {n_unread} of these downloads and the next download (or the end){}.",
        crate::units::bytes(first.range_bytes),
        match every {
            Some((k, r)) => format!(
                "; it read every {k}th one, from the {} on",
                ordinal(r + 1)
            ),
            None => String::new(),
        }
    ));
    propose(cx, &mut f, site, var, every);
    f
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn propose(
    cx: &Context,
    f: &mut Finding,
    site: Option<SiteId>,
    var: &str,
    every: Option<(usize, usize)>,
) {
    let s = site.map(|s| cx.run.site(s));
    let located = s.and_then(|s| Some((s.line?, cx.sources.get(&s.file)?)));
    let guard_words = every.map_or(String::new(), |(k, r)| {
        format!(" (the host read every {k}th download: `if(i % {k} == {r})` with i counting the update's executions from 0)")
    });
    let Some((line, src)) = located else {
        f.proposal.text = format!(
            "download {var} only when the host reads it: guard the update with an `if` clause{guard_words}, or move it next to the host code that reads {var}"
        );
        f.proposal.no_patch = Some(match s {
            Some(s) => format!("the source of {} is not at hand", s.file),
            None => "the trace does not name the construct that downloaded".to_string(),
        });
        return;
    };
    // The source's own condition on the reads, when it has one.
    let plan = update_guard::plan_download(src, line);
    if let Some(p) = plan.as_ref().filter(|p| p.directive.is_some()) {
        f.proposal.text = p.text.clone();
        f.proposal.directive = p.directive.clone();
        f.proposal.edits = p.edits.clone();
        f.proposal.no_patch = p.no_patch.clone();
        return;
    }
    let why_not = plan.map(|p| p.text);
    let synthesized = match every {
        Some((k, r)) => synthesized_guard(src, line, k, r),
        None => Err(
            "the host's reads follow no period a condition could name: moving the update is left to the user"
                .to_string(),
        ),
    };
    match synthesized {
        Ok((condition, directive, edit, no_patch)) => {
            let k = every.map_or(0, |e| e.0);
            f.proposal.text = format!(
                "The host read only every {k}th download: add `if({condition})` to the update, so that it downloads {var} only on those iterations (`{directive}`)."
            );
            f.proposal.directive = Some(directive);
            f.proposal.edits.extend(edit);
            f.proposal.no_patch = no_patch;
        }
        Err(why) => {
            f.proposal.text = format!(
                "Move the download of {var} next to the host code that reads it, so that it runs only when that code does{guard_words}.{}",
                why_not.map_or(String::new(), |w| format!(" {w}"))
            );
            f.proposal.no_patch = Some(why);
        }
    }
}

/// `if(step % k == r')` on the update at `line`: the condition, the
/// directive with it, the edit, why there is none; or why no condition
/// can be written (not a plain `update`, or not inside a loop counting up
/// by one from a constant).
type Synthesized = (String, String, Option<crate::patch::Edit>, Option<String>);

fn synthesized_guard(
    src: &SourceFile,
    line: u32,
    k: usize,
    r: usize,
) -> Result<Synthesized, String> {
    let d = src
        .directive_at(line)
        .filter(|d| d.construct_name() == "update")
        .ok_or_else(|| format!("line {line} of {} holds no `update` directive", src.path))?;
    if d.clause("if").is_some() {
        return Err(format!(
            "the update at line {line} has an `if` clause already"
        ));
    }
    let no_index = || {
        format!("the host loop around line {line} has no index counting up by one from a constant to name the period with")
    };
    let lp = src
        .enclosing_loops(line)
        .into_iter()
        .next()
        .ok_or_else(|| format!("the update at line {line} is not inside a host loop"))?;
    let index = src.loop_index(lp).ok_or_else(no_index)?;
    let start = src.unit_start(lp).ok_or_else(no_index)?;
    // Execution i runs with index start + i: i % k == r.
    let k64 = i64::try_from(k).map_err(|_| no_index())?;
    let rest = (i64::try_from(r).map_err(|_| no_index())? + start).rem_euclid(k64);
    let index = base_name(&index).to_string();
    let condition = match src.lang {
        crate::source::Lang::C => format!("{index} % {k} == {rest}"),
        crate::source::Lang::Fortran => format!("mod({index}, {k}) == {rest}"),
    };
    let (directive, edit, no_patch) = update_guard::with_if(src, &d, &condition);
    Ok((condition, directive, edit, no_patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_exact() {
        let every_tenth: Vec<bool> = (0..100).map(|i| i % 10 == 0).collect();
        assert_eq!(period(&every_tenth), Some((10, 0)));
        let from_the_third: Vec<bool> = (0..30).map(|i| i % 5 == 2).collect();
        assert_eq!(period(&from_the_third), Some((5, 2)));
        let mut broken = every_tenth.clone();
        broken[55] = true;
        assert_eq!(period(&broken), None);
        assert_eq!(period(&[true, false, false]), None, "one read");
        assert_eq!(period(&[false; 4]), None);
    }

    #[test]
    fn without_a_guard_in_the_source_the_period_names_the_loop_index() {
        let text = "void f(int n, double *u) {\n  for (int s = 1; s <= n; s++) {\n#pragma acc update self(u[0:n])\n    g(s, u);\n  }\n}\n";
        let file = SourceFile::new(
            "g.c",
            "g.c".into(),
            crate::source::Lang::C,
            text.to_string(),
        );
        // Executions 0, 10, 20...: s = 1, 11, 21...
        let (cond, directive, edit, why) = synthesized_guard(&file, 3, 10, 0).expect("a guard");
        assert_eq!(cond, "s % 10 == 1");
        assert_eq!(directive, "#pragma acc update self(u[0:n]) if(s % 10 == 1)");
        assert!(edit.is_some() && why.is_none());
        assert!(
            synthesized_guard(&file, 4, 10, 0).is_err(),
            "no directive there"
        );
        let while_loop = text.replace("for (int s = 1; s <= n; s++)", "while (go())");
        let file = SourceFile::new("g.c", "g.c".into(), crate::source::Lang::C, while_loop);
        assert!(synthesized_guard(&file, 3, 10, 0).is_err());
    }
}
