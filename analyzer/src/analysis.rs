//! Running the findings rules over a run: every rule once, the findings
//! ranked by cost, each proposal's own patch rendered, and the saving of
//! all findings together with every transfer counted once.

use std::cmp::Ordering;

use crate::findings::{Analysis, Finding};
use crate::model::{AllocId, TransferId};
use crate::patch::Edit;
use crate::rules::host_cost::HostCosts;
use crate::rules::{self, Options};
use crate::source::SourceSet;
use crate::Run;

/// The edits of all findings together.
#[derive(Debug, Clone, Default)]
pub struct Combined {
    pub patched: Option<crate::patch::Patched>,
    /// Indices (into `Analysis::findings`) of the findings whose edits it holds.
    pub applied: Vec<usize>,
    /// Findings left out because their edits clash with earlier ones, and why.
    pub skipped: Vec<String>,
}

/// The edits of every finding together, in rank order. A finding whose
/// edits cannot be combined with those before it is left out.
pub fn combined_patch(analysis: &Analysis, sources: &SourceSet) -> Combined {
    let mut out = Combined::default();
    let mut edits: Vec<Edit> = Vec::new();
    for (i, f) in analysis.findings.iter().enumerate() {
        if f.proposal.edits.is_empty() {
            continue;
        }
        let mut trial = edits.clone();
        trial.extend(f.proposal.edits.iter().cloned());
        match crate::patch::render(sources, &trial) {
            Ok(p) => {
                edits = trial;
                out.applied.push(i);
                out.patched = Some(p);
            }
            Err(e) => out.skipped.push(format!("#{} {}: {e}", i + 1, f.id)),
        }
    }
    out
}

/// Runs every rule on `run`, ranks the findings by cost (largest first;
/// unmeasured last; those whose saving is known to be nothing after all
/// others) and fills in each proposal's own patch.
pub fn analyze(run: &Run, sources: &SourceSet, opts: &Options) -> Analysis {
    let out = rules::run_all(run, sources, opts);
    let mut findings = out.findings;
    rank(&mut findings);
    for f in &mut findings {
        if !f.proposal.edits.is_empty() {
            match crate::patch::render(sources, &f.proposal.edits) {
                Ok(p) => f.proposal.patch = Some(p.diff),
                Err(e) => {
                    f.proposal.no_patch = Some(e.to_string());
                    f.proposal.edits.clear();
                }
            }
        }
    }
    let total_saving_ns = total_saving(run, &findings);
    let mut notes = run.process.notes.clone();
    notes.extend(out.notes);
    notes.extend(sources.notes());
    Analysis {
        findings,
        notes,
        wall_ns: run.wall_ns(),
        total_saving_ns,
        startup_ns: run.ledger().startup_ns(),
        paid_jit: run.ledger().paid_jit(),
    }
}

/// The findings' order. A finding that can save nothing (its saving
/// measured as zero) costs time it cannot give back: it ranks after every
/// other, however large its cost, so that what can be won, or what is
/// not measured yet (a race, say), comes first. A finding whose saving is
/// not estimated ranks after the findings with an estimated saving over
/// the same transfers (S1's pageable copies after the P1 that removes
/// most of them): what the user can act on, and knows the worth of,
/// comes first.
pub fn rank(findings: &mut [Finding]) {
    let actionable: Vec<(u64, Vec<TransferId>)> = findings
        .iter()
        .filter(|f| f.saving_ns.is_some_and(|s| s > 0) && !f.category.is_error())
        .filter_map(|f| {
            let mut t: Vec<TransferId> = f
                .subjects
                .transfers
                .iter()
                .chain(&f.saved_transfers)
                .copied()
                .collect();
            t.sort_unstable();
            t.dedup();
            Some((f.cost_ns?, t))
        })
        .filter(|(_, t)| !t.is_empty())
        .collect();
    for f in findings.iter_mut() {
        f.ranks_after_ns = None;
        if f.saving_ns.is_some() || f.category.is_error() {
            continue;
        }
        let cost = f.cost_ns.unwrap_or(0);
        f.ranks_after_ns = actionable
            .iter()
            .filter(|(c, t)| {
                *c <= cost
                    && f.subjects
                        .transfers
                        .iter()
                        .any(|x| t.binary_search(x).is_ok())
            })
            .map(|(c, _)| *c)
            .min();
    }
    findings.sort_by(rank_order);
}

/// Where finding `a` ranks against `b`: errors (wrong results) first;
/// those that can save nothing last; then by cost, largest first,
/// unmeasured after measured (a finding ranked after an actionable one,
/// see [`rank`], at that one's cost and after it); then by rule.
/// Every view that lists findings, of one run or of several, orders them
/// by this alone.
pub fn rank_order(a: &Finding, b: &Finding) -> Ordering {
    let saves_nothing = |f: &Finding| f.saving_ns == Some(0);
    let key = |f: &Finding| f.ranks_after_ns.or(f.cost_ns);
    b.category
        .is_error()
        .cmp(&a.category.is_error())
        .then(saves_nothing(a).cmp(&saves_nothing(b)))
        .then(key(b).is_some().cmp(&key(a).is_some()))
        .then(key(b).cmp(&key(a)))
        .then(a.ranks_after_ns.is_some().cmp(&b.ranks_after_ns.is_some()))
        .then(a.id.cmp(b.id))
}

/// The findings of several runs in one ranked list, as (run, finding)
/// positions into `analyses` (None: a run not analyzed yet, which has
/// none). Each run's findings keep the order [`analyze`] gave them; ties
/// between runs go to the earlier run.
pub fn rank_together<'a>(
    analyses: impl IntoIterator<Item = Option<&'a Analysis>>,
) -> Vec<(usize, usize)> {
    let analyses: Vec<&[Finding]> = analyses
        .into_iter()
        .map(|a| a.map_or(&[][..], |a| &a.findings[..]))
        .collect();
    let mut all: Vec<(usize, usize)> = analyses
        .iter()
        .enumerate()
        .flat_map(|(r, f)| (0..f.len()).map(move |i| (r, i)))
        .collect();
    all.sort_by(|&(ra, ia), &(rb, ib)| {
        rank_order(&analyses[ra][ia], &analyses[rb][ib])
            .then(ra.cmp(&rb))
            .then(ia.cmp(&ib))
    });
    all
}

/// Sum of savings with every transfer and every allocation counted once:
/// findings that save transfers or allocations contribute the union of
/// them, each at what it costs (the host time of its driver calls where
/// the trace has them, else a transfer's device time), the others their
/// own estimate.
fn total_saving(run: &Run, findings: &[Finding]) -> u64 {
    let mut transfers: Vec<TransferId> = Vec::new();
    let mut allocs: Vec<AllocId> = Vec::new();
    let mut other = 0u64;
    for f in findings {
        if f.saved_transfers.is_empty() && f.saved_allocs.is_empty() {
            other += f.saving_ns.unwrap_or(0);
        } else {
            transfers.extend(&f.saved_transfers);
            allocs.extend(&f.saved_allocs);
        }
    }
    transfers.sort_unstable();
    transfers.dedup();
    allocs.sort_unstable();
    allocs.dedup();
    let host = HostCosts::of(run);
    let moved: u64 = match &host {
        Some(h) => h.transfers_ns(run, transfers.iter().copied()),
        None => transfers
            .iter()
            .map(|&id| run.transfer(id).duration_ns())
            .sum(),
    };
    let allocated = host
        .and_then(|h| h.allocs_ns(run, &allocs))
        .map_or(0, |c| c.ns);
    moved + allocated + other
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Category;

    fn analysis(findings: &[(&'static str, Option<u64>, Option<u64>)]) -> Analysis {
        let mut findings: Vec<Finding> = findings
            .iter()
            .map(|&(id, cost, saving)| {
                let mut f = Finding::new(id, Category::DataMovement, id);
                f.cost_ns = cost;
                f.saving_ns = saving;
                f
            })
            .collect();
        rank(&mut findings);
        Analysis {
            findings,
            notes: Vec::new(),
            wall_ns: 0,
            total_saving_ns: 0,
            startup_ns: 0,
            paid_jit: None,
        }
    }

    /// Several runs' findings rank in one list as one run's do: what saves
    /// nothing after all the others, whatever its cost; then by cost, the
    /// unmeasured after the measured; equal ones by rule, then by run.
    #[test]
    fn findings_of_several_runs_rank_as_those_of_one_run() {
        let a = analysis(&[
            ("D6", Some(900), Some(0)),
            ("S4", Some(50), None),
            ("A1", None, None),
        ]);
        let ids = |f: &[Finding]| f.iter().map(|f| f.id).collect::<Vec<_>>();
        assert_eq!(ids(&a.findings), ["S4", "A1", "D6"]);
        let b = analysis(&[("S4", Some(50), None), ("L3", Some(70), Some(60))]);
        let all = rank_together([Some(&a), None, Some(&b)]);
        let together: Vec<&str> = all
            .iter()
            .map(|&(r, i)| [&a, &a, &b][r].findings[i].id)
            .collect();
        assert_eq!(together, ["L3", "S4", "S4", "A1", "D6"]);
        assert_eq!(all[..3], [(2, 0), (0, 0), (2, 1)]);
        let one = rank_together([Some(&a)]);
        assert_eq!(one, [(0, 0), (0, 1), (0, 2)]);
    }

    /// An error (a stale read: wrong results) comes before every
    /// performance finding, however costly, even unmeasured.
    #[test]
    fn errors_rank_first() {
        let mut findings: Vec<Finding> = [("D6", Some(900)), ("L3", None)]
            .into_iter()
            .map(|(id, cost)| {
                let mut f = Finding::new(id, Category::DataMovement, id);
                f.cost_ns = cost;
                f
            })
            .collect();
        findings.push(Finding::new("C1", Category::Correctness, "C1"));
        rank(&mut findings);
        let ids: Vec<&str> = findings.iter().map(|f| f.id).collect();
        assert_eq!(ids, ["C1", "D6", "L3"]);
    }

    /// S1 (pageable copies, saving not estimated) costs more than the P1
    /// and C3 that remove some of the same transfers: it ranks right after
    /// the cheapest of them, what the user can act on first. A finding
    /// over other transfers keeps its place by cost, and so does one
    /// cheaper than the actionable ones.
    #[test]
    fn what_the_user_can_act_on_ranks_before_an_unestimated_finding_over_the_same_transfers() {
        let t = |i: usize| crate::model::TransferId::at(i);
        let make = |id: &'static str, cost: u64, saving: Option<u64>, ts: &[usize]| {
            let mut f = Finding::new(id, Category::DataMovement, id);
            f.cost_ns = Some(cost);
            f.saving_ns = saving;
            f.subjects.transfers = ts.iter().map(|&i| t(i)).collect();
            f
        };
        let mut findings = vec![
            make("S1", 900, None, &[0, 1, 2, 3]),
            make("P1", 500, Some(450), &[0, 1]),
            make("C3", 300, Some(300), &[2]),
            make("L5", 400, None, &[]),
            make("S3", 700, None, &[9]),
            make("S2", 100, None, &[3]),
        ];
        rank(&mut findings);
        let ids: Vec<&str> = findings.iter().map(|f| f.id).collect();
        assert_eq!(ids, ["S3", "P1", "L5", "C3", "S1", "S2"]);
        let mut again = findings.clone();
        again.reverse();
        rank(&mut again);
        assert_eq!(again, findings);
    }
}
