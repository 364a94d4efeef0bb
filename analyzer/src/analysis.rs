//! Running the findings rules over a run: every rule once, the findings
//! ranked by cost, each proposal's own patch rendered, and the saving of
//! all findings together with every transfer counted once.

use crate::findings::{Analysis, Finding};
use crate::model::TransferId;
use crate::patch::Edit;
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
    }
}

/// The findings' order. A finding that can save nothing (its saving
/// measured as zero) costs time it cannot give back: it ranks after every
/// other, however large its cost, so that what can be won, or what is
/// not measured yet (a race, say), comes first.
pub fn rank(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        let saves_nothing = |f: &Finding| f.saving_ns == Some(0);
        saves_nothing(a)
            .cmp(&saves_nothing(b))
            .then(b.cost_ns.is_some().cmp(&a.cost_ns.is_some()))
            .then(b.cost_ns.cmp(&a.cost_ns))
            .then(a.id.cmp(b.id))
    });
}

/// Sum of savings with every transfer counted once: findings that save
/// transfers contribute the union of their transfers' times, the others
/// their own estimate.
fn total_saving(run: &Run, findings: &[Finding]) -> u64 {
    let mut transfers: Vec<TransferId> = Vec::new();
    let mut other = 0u64;
    for f in findings {
        if f.saved_transfers.is_empty() {
            other += f.saving_ns.unwrap_or(0);
        } else {
            transfers.extend(&f.saved_transfers);
        }
    }
    transfers.sort_unstable();
    transfers.dedup();
    let moved: u64 = transfers
        .iter()
        .map(|&id| run.transfer(id).duration_ns())
        .sum();
    moved + other
}
