//! Several runs (MPI ranks) merged into one summary, with per-rank totals
//! and the imbalance of each line across ranks.

use std::collections::{BTreeMap, HashMap};

use crate::model::summary_types::*;

/// One rank's totals in a merged summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankRow {
    /// The rank the launcher gave (trace header), else the trace's position
    /// among the inputs.
    pub rank: u32,
    /// False when `rank` is the input position (the header had none).
    pub rank_known: bool,
    pub pid: u32,
    pub host: String,
    pub wall_ns: u64,
    pub host_construct_ns: u64,
    pub kernel_ns: u64,
    pub transfer_ns: u64,
}

/// How unevenly one source line's time is spread over the ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct LineImbalance {
    pub file: String,
    pub function: String,
    pub line: Option<u32>,
    pub address: Option<u64>,
    /// The line's cost ([`LineSummary::cost_ns`]) on the rank where it is largest.
    pub max_ns: u64,
    pub max_rank: u32,
    /// Mean over all ranks (a rank that never reached the line counts 0).
    pub mean_ns: u64,
    /// max / mean (1.0 = perfectly even).
    pub ratio: f64,
}

/// Several runs (MPI ranks) summarized together.
#[derive(Debug, Clone, Default)]
pub struct MergedSummary {
    /// Every line's statistics over all ranks, in the one-run layout.
    pub merged: Summary,
    /// One row per input, ordered by rank.
    pub ranks: Vec<RankRow>,
    /// Lines by imbalance: largest `max - mean` (the time the other ranks
    /// would wait for the slowest one) first; lines with no spread left out.
    pub imbalance: Vec<LineImbalance>,
}

/// Merges the summaries of several runs given in input order.
pub fn merge(summaries: &[Summary]) -> MergedSummary {
    let mut ranks = Vec::with_capacity(summaries.len());
    // Rank of each summary, and each line's cost per rank.
    type LineKey = (String, String, Option<u32>, Option<u64>);
    let mut costs: HashMap<LineKey, Vec<u64>> = HashMap::new();
    let mut funcs: BTreeMap<(String, String), FunctionSummary> = BTreeMap::new();
    let mut merged = Summary {
        cupti: !summaries.is_empty(),
        ..Default::default()
    };
    for (i, s) in summaries.iter().enumerate() {
        let facts = s.runs.first();
        let rank = facts.and_then(|f| f.rank);
        ranks.push(RankRow {
            rank: rank.unwrap_or(i as u32),
            rank_known: rank.is_some(),
            pid: facts.map_or(0, |f| f.pid),
            host: facts.map(|f| f.host.clone()).unwrap_or_default(),
            wall_ns: s.wall_ns,
            host_construct_ns: s.host_construct_ns,
            kernel_ns: s.kernel_ns,
            transfer_ns: s.transfer_ns,
        });
        merged.cupti &= s.cupti;
        merged.wall_ns = merged.wall_ns.max(s.wall_ns);
        merged.kernel_ns = merged.kernel_ns.saturating_add(s.kernel_ns);
        merged.transfer_ns = merged.transfer_ns.saturating_add(s.transfer_ns);
        merged.transfers = merged.transfers.saturating_add(s.transfers);
        merged.transfer_bytes = merged.transfer_bytes.saturating_add(s.transfer_bytes);
        merged.constructs = merged.constructs.saturating_add(s.constructs);
        merged.host_fallback |= s.host_fallback;
        merged.host_construct_ns = merged.host_construct_ns.saturating_add(s.host_construct_ns);
        merged.runs.extend(s.runs.iter().cloned());
        for f in &s.functions {
            let m = funcs
                .entry((f.file.clone(), f.function.clone()))
                .or_insert_with(|| FunctionSummary {
                    file: f.file.clone(),
                    function: f.function.clone(),
                    device_label: f.device_label.clone(),
                    ..Default::default()
                });
            for &n in &f.device_numbers {
                if let Err(at) = m.device_numbers.binary_search(&n) {
                    m.device_numbers.insert(at, n);
                }
            }
            m.time_ns = m.time_ns.saturating_add(f.time_ns);
            for l in &f.lines {
                match m.lines.iter_mut().find(|x| x.key() == l.key()) {
                    Some(x) => x.merge(l),
                    None => m.lines.push(l.clone()),
                }
                let per_rank = costs
                    .entry((f.file.clone(), f.function.clone(), l.line, l.address))
                    .or_insert_with(|| vec![0; summaries.len()]);
                per_rank[i] = per_rank[i].saturating_add(l.cost_ns());
            }
        }
    }
    merged.functions = funcs
        .into_values()
        .map(|mut f| {
            f.lines.sort_by_key(|l| l.key());
            for l in &mut f.lines {
                finish_line(l);
            }
            f
        })
        .collect();
    let mut imbalance: Vec<LineImbalance> = costs
        .into_iter()
        .filter_map(|((file, function, line, address), per_rank)| {
            let n = per_rank.len() as u64;
            let total: u64 = per_rank.iter().fold(0u64, |a, v| a.saturating_add(*v));
            let (max_i, &max_ns) = per_rank
                .iter()
                .enumerate()
                .max_by_key(|(i, v)| (**v, std::cmp::Reverse(*i)))?;
            let mean_ns = total / n.max(1);
            if max_ns == 0 || max_ns <= mean_ns {
                return None;
            }
            Some(LineImbalance {
                file,
                function,
                line,
                address,
                max_ns,
                max_rank: ranks[max_i].rank,
                mean_ns,
                ratio: max_ns as f64 * n as f64 / total as f64,
            })
        })
        .collect();
    imbalance.sort_by(|a, b| {
        (b.max_ns - b.mean_ns)
            .cmp(&(a.max_ns - a.mean_ns))
            .then_with(|| (&a.file, &a.function, a.line).cmp(&(&b.file, &b.function, b.line)))
    });
    ranks.sort_by_key(|r| r.rank);
    MergedSummary {
        merged,
        ranks,
        imbalance,
    }
}
