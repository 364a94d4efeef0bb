//! Which configurations a sweep tries, in what order, and which one it
//! recommends. The default is measured first: its output is the reference
//! the others are compared with, and its trace names the device, whose
//! limits prune the space ([`space::pruned`]). Small spaces are then swept
//! exhaustively in the space's order; larger ones on a coarse grid, then
//! by steps to the best neighbour until no step is better. Budgets of the
//! whole sweep (`--max-runs`, `--max-time`) end either early. Among the
//! configurations whose intervals overlap the fastest one's, the one
//! closest to the default is recommended.
//!
//! Measuring is asked of [`super::execute`]; nothing here runs a program.

use crate::measure::Shape;
use crate::runner::Runner;
use crate::space::{self, Param, Space};
use crate::Error;

use super::Sweep;

/// How configurations are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// Exhaustive up to [`EXHAUSTIVE_UP_TO`] configurations, else search.
    Auto,
    Exhaustive,
    /// Coarse grid, then local search from the best point.
    Search,
}

/// Spaces up to this many configurations are swept exhaustively by default.
pub const EXHAUSTIVE_UP_TO: usize = 8;

/// The points of the coarse grid, as indices into each dimension's values:
/// every other value of each dimension, and the last one when that leaves
/// fewer than three; the first dimension varies slowest.
fn coarse_grid(space: &Space) -> Vec<Vec<usize>> {
    let coarse: Vec<Vec<usize>> = space
        .dims
        .iter()
        .map(|d| {
            let n = d.values.len();
            let mut v: Vec<usize> = (0..n).step_by(2).collect();
            if v.last() != Some(&(n - 1)) && n > 1 && v.len() < 3 {
                v.push(n - 1);
            }
            v
        })
        .collect();
    let mut points: Vec<Vec<usize>> = vec![Vec::new()];
    for c in &coarse {
        points = points
            .iter()
            .flat_map(|p| {
                c.iter().map(move |&i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    points
}

impl<R: Runner + ?Sized> Sweep<'_, '_, R> {
    /// Measures the default, prunes by its device's limits, then measures
    /// the configurations the mode asks for. True when the sweep was
    /// exhaustive.
    pub(super) fn explore(&mut self) -> Result<bool, Error> {
        let plan = self.plan;
        let repeats = plan.repeats;
        let n_configs = self.states.len() as u64;
        self.planned = u64::from(repeats.warmup + repeats.min) * n_configs;
        // The default first: its output is the reference, its trace names
        // the device.
        self.measure(0)?;
        if let Some(why) = &self.states[0].failed {
            return Err(Error::Tune(format!("the default configuration: {why}")));
        }
        for s in self.states.iter_mut().skip(1) {
            s.pruned = space::pruned(&s.config, self.device.sm_count);
        }
        let candidates: Vec<usize> = (1..self.states.len())
            .filter(|&i| self.states[i].pruned.is_none())
            .collect();
        let exhaustive = match plan.mode {
            SearchMode::Exhaustive => true,
            SearchMode::Search => false,
            SearchMode::Auto => candidates.len() <= EXHAUSTIVE_UP_TO,
        };
        if exhaustive {
            self.planned = u64::from(repeats.warmup + repeats.min) * (candidates.len() as u64 + 1);
            for i in candidates {
                if self.over_budget() {
                    break;
                }
                self.measure(i)?;
            }
        } else {
            self.search()?;
        }
        Ok(exhaustive)
    }

    /// Whether a budget of the whole sweep (`--max-runs`, `--max-time`)
    /// has ended it; the first one to end is kept as the reason.
    pub(super) fn over_budget(&mut self) -> bool {
        if self.budget_ended.is_some() {
            return true;
        }
        if let Some(m) = self.plan.max_runs {
            if self.cost.runs >= m {
                self.budget_ended = Some(format!("--max-runs {m} reached"));
            }
        }
        if let Some(t) = self.plan.max_time {
            if self.start.elapsed() >= t {
                self.budget_ended = Some(format!("--max-time {} s reached", t.as_secs()));
            }
        }
        self.budget_ended.is_some()
    }

    /// Coarse grid (every other value of each dimension, and the last),
    /// then steps to the best neighbour until none is better.
    fn search(&mut self) -> Result<(), Error> {
        let space = self.plan.space;
        let points = coarse_grid(space);
        self.planned =
            u64::from(self.plan.repeats.warmup + self.plan.repeats.min) * (points.len() as u64 + 1);
        for p in &points {
            if self.over_budget() {
                return Ok(());
            }
            if let Some(i) = self.index_at(p) {
                self.measure(i)?;
            }
        }
        loop {
            let Some(best) = self.best() else {
                return Ok(());
            };
            let Some(pos) = space.position(&self.states[best].config) else {
                return Ok(());
            };
            let mut improved = false;
            for (k, d) in space.dims.iter().enumerate() {
                for step in [-1i64, 1] {
                    let j = pos[k] as i64 + step;
                    if j < 0 || j as usize >= d.values.len() {
                        continue;
                    }
                    let mut q = pos.clone();
                    q[k] = j as usize;
                    let Some(i) = self.index_at(&q) else { continue };
                    if self.states[i].measured_order.is_some() {
                        continue;
                    }
                    if self.over_budget() {
                        return Ok(());
                    }
                    self.planned += u64::from(self.plan.repeats.warmup + self.plan.repeats.min);
                    self.measure(i)?;
                    if self.best() != Some(best) {
                        improved = true;
                    }
                }
            }
            if !improved {
                return Ok(());
            }
        }
    }

    /// The state of the configuration at `pos`, when it is not pruned.
    fn index_at(&self, pos: &[usize]) -> Option<usize> {
        let c = self.plan.space.at(pos)?;
        self.states
            .iter()
            .position(|s| s.config == c)
            .filter(|&i| self.states[i].pruned.is_none())
    }

    /// The usable configuration with the lowest median.
    pub(super) fn best(&self) -> Option<usize> {
        (0..self.states.len())
            .filter(|&i| self.states[i].usable())
            .filter_map(|i| self.states[i].stats().map(|s| (i, s.median)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }

    /// Among the configurations tied with the best, the one closest to
    /// the default.
    pub(super) fn recommend(&self) -> Option<usize> {
        let best = self.best()?;
        let bs = self.states[best].stats()?;
        let tied: Vec<usize> = (0..self.states.len())
            .filter(|&i| self.states[i].usable())
            .filter(|&i| self.states[i].stats().is_some_and(|s| s.ties(&bs)))
            .collect();
        tied.into_iter().min_by(|&a, &b| {
            let (da, db) = (self.distance(a), self.distance(b));
            da.total_cmp(&db).then_with(|| {
                let m = |i: usize| self.states[i].stats().map_or(f64::MAX, |s| s.median);
                m(a).total_cmp(&m(b))
            })
        })
    }

    /// How far a configuration is from the default: per dimension, the
    /// doublings between its value and what the default launched (1 for
    /// another directive or an unknown default).
    fn distance(&self, i: usize) -> f64 {
        let c = &self.states[i].config;
        let default_shape = self.states[0].shape;
        c.values
            .iter()
            .map(|(p, v)| {
                let v: f64 = match v.parse() {
                    Ok(v) => v,
                    Err(_) => return 1.0,
                };
                let launched = match (p, default_shape) {
                    (Param::VectorLength, Some(Shape::Cuda { block, .. })) => block[0] as f64,
                    (Param::NumWorkers, Some(Shape::Cuda { block, .. })) => block[1] as f64,
                    (Param::NumGangs, Some(Shape::Cuda { grid, .. })) => grid[0] as f64,
                    _ => return 1.0,
                };
                if launched > 0.0 {
                    (v / launched).log2().abs()
                } else {
                    1.0
                }
            })
            .sum()
    }
}
