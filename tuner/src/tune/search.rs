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

use crate::error::Error;
use crate::measure::Shape;
use crate::runner::Runner;
use crate::space::{self, Param, Space};

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

#[cfg(test)]
mod tests {
    use super::super::testing::{built, program, ran, runs_of, with_sweep, Fixture};
    use super::*;
    use crate::runner::{MockProgram, MockRunner};

    #[test]
    fn the_coarse_grid_is_every_other_value_and_the_last_of_a_short_dimension() {
        let f = Fixture::new(&["vector_length=32..1024", "num_workers=1,2"]);
        // num_workers first (dimensions in parameter order): 1 and 2, the
        // last added to a dimension that would have one point; then 32,
        // 128 and 512 of the six vector lengths.
        assert_eq!(
            coarse_grid(&f.space),
            [[0, 0], [0, 2], [0, 4], [1, 0], [1, 2], [1, 4]]
        );
        let f = Fixture::new(&["vector_length=32,64,128,256"]);
        assert_eq!(coarse_grid(&f.space), [[0], [2], [3]]);
    }

    #[test]
    fn an_exhaustive_sweep_measures_the_default_first_then_the_space_in_its_order() {
        let f = Fixture::new(&["vector_length=256,64,128"]);
        let d = f.path();
        let mut runner = MockRunner::new(vec![
            program(d, "x\n", 32, &[100_000; 4]),
            program(d, "x\n", 256, &[90_000; 4]),
            program(d, "x\n", 64, &[70_000; 4]),
            program(d, "x\n", 128, &[80_000; 4]),
        ]);
        let plan = f.plan();
        let exhaustive = with_sweep(&mut runner, &plan, |s| s.explore().expect("sweeps"));
        assert!(exhaustive);
        assert_eq!(built(&runner), ["default", "256", "64", "128"]);
        // Each one's warm-up and three measured runs before the next.
        let mut expected = Vec::new();
        for slug in [
            "default",
            "vector_length_256",
            "vector_length_64",
            "vector_length_128",
        ] {
            expected.extend([slug; 4]);
        }
        assert_eq!(ran(&runner), expected);
    }

    /// Programs for vector lengths 32..1024, fastest at 256, in the order
    /// a search builds them: the default, the coarse grid (32, 128, 512),
    /// then 128's neighbours 64 and 256.
    fn curve(d: &std::path::Path) -> Vec<MockProgram> {
        let time = |vl: u64| 50_000 + (vl as i64 - 256).unsigned_abs() * 100;
        let mut v = vec![program(d, "x\n", 32, &[time(32); 4])];
        for vl in [32u32, 128, 512, 64, 256] {
            // 33 wide: not the default's launch, so that 32 is measured.
            let block = if vl == 32 { 33 } else { vl };
            v.push(program(d, "x\n", block, &[time(u64::from(vl)); 4]));
        }
        v
    }

    #[test]
    fn a_search_measures_the_coarse_grid_then_steps_to_better_neighbours() {
        let f = Fixture::new(&["vector_length=32..1024"]);
        let mut runner = MockRunner::new(curve(f.path()));
        let mut plan = f.plan();
        plan.mode = SearchMode::Search;
        let (exhaustive, best, unmeasured) = with_sweep(&mut runner, &plan, |s| {
            let exhaustive = s.explore().expect("searches");
            let best = s.best().map(|b| s.states[b].config.key());
            let unmeasured: Vec<String> = s
                .states
                .iter()
                .filter(|x| x.measured_order.is_none())
                .map(|x| x.config.key())
                .collect();
            (exhaustive, best, unmeasured)
        });
        assert!(!exhaustive);
        // 256 beat 128, and its neighbours 128 and 512 were known: the
        // search stops there, never reaching 1024.
        assert_eq!(built(&runner), ["default", "32", "128", "512", "64", "256"]);
        assert_eq!(best.as_deref(), Some("vector_length=256"));
        assert_eq!(unmeasured, ["vector_length=1024"]);
    }

    #[test]
    fn auto_searches_only_past_the_exhaustive_limit() {
        let mut values: Vec<String> = (1..=EXHAUSTIVE_UP_TO as u32)
            .map(|k| (32 * k).to_string())
            .collect();
        let specs = format!("vector_length={}", values.join(","));
        let f = Fixture::new(&[&specs]);
        let d = f.path();
        let programs: Vec<MockProgram> = (0..=EXHAUSTIVE_UP_TO as u32)
            .map(|k| program(d, "x\n", 32 * k.max(1) + 1, &[100_000; 4]))
            .collect();
        let mut plan = f.plan();
        plan.mode = SearchMode::Auto;
        let mut runner = MockRunner::new(programs.clone());
        assert!(with_sweep(&mut runner, &plan, |s| s
            .explore()
            .expect("sweeps")));
        assert_eq!(runner.builds.len(), EXHAUSTIVE_UP_TO + 1);

        values.push((32 * (EXHAUSTIVE_UP_TO as u32 + 1)).to_string());
        let specs = format!("vector_length={}", values.join(","));
        let f = Fixture::new(&[&specs]);
        let mut plan = f.plan();
        plan.mode = SearchMode::Auto;
        let mut runner = MockRunner::new(programs);
        assert!(!with_sweep(&mut runner, &plan, |s| s
            .explore()
            .expect("searches")));
    }

    #[test]
    fn a_run_budget_ends_the_sweep_before_the_next_configuration() {
        let f = Fixture::new(&["vector_length=64,128,256"]);
        let d = f.path();
        let mut runner = MockRunner::new(vec![
            program(d, "x\n", 32, &[100_000; 4]),
            program(d, "x\n", 64, &[70_000; 4]),
            program(d, "x\n", 128, &[80_000; 4]),
            program(d, "x\n", 256, &[90_000; 4]),
        ]);
        let mut plan = f.plan();
        plan.max_runs = Some(5);
        let ended = with_sweep(&mut runner, &plan, |s| {
            s.explore().expect("sweeps");
            s.budget_ended.clone()
        });
        assert_eq!(ended.as_deref(), Some("--max-runs 5 reached"));
        // The default's four runs; 64 began under the budget and keeps
        // one measured run beside its warm-up; 128 and 256 never start.
        assert_eq!(runs_of(&runner, "default"), 4);
        assert_eq!(runs_of(&runner, "vector_length_64"), 2);
        assert_eq!(built(&runner), ["default", "64"]);
    }

    #[test]
    fn configurations_past_the_devices_limits_are_never_built() {
        // 48 is no multiple of the warp size; 2048 threads overflow a block.
        let f = Fixture::new(&["vector_length=48,64,2048"]);
        let d = f.path();
        let mut runner = MockRunner::new(vec![
            program(d, "x\n", 32, &[100_000; 4]),
            program(d, "x\n", 64, &[70_000; 4]),
        ]);
        let plan = f.plan();
        let pruned = with_sweep(&mut runner, &plan, |s| {
            s.explore().expect("sweeps");
            s.states.iter().filter(|x| x.pruned.is_some()).count()
        });
        assert_eq!(pruned, 2);
        assert_eq!(built(&runner), ["default", "64"]);
    }
}
