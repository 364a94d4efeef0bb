//! A configuration's runs, through the [`Runner`]: each one measured from
//! its trace ([`crate::measure`]: the construct's kernel device time and
//! the shape it launched) and its output compared with the default's;
//! warm-up runs, then repeats until the median's interval is narrow
//! enough ([`super::Repeats`]); and the re-check of the sweep's winner
//! against the default, alternately, each run a fresh process. A sweep
//! stopped by a signal ends here, between a build and a run or after a run.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::command;
use crate::error::{stderr_tail, Error};
use crate::key::text_hash;
use crate::measure::{self, Sample};
use crate::runner::Runner;
use crate::stats;
use crate::verify::compared_lines;

use super::{Recheck, Sweep};

impl<R: Runner + ?Sized> Sweep<'_, '_, R> {
    /// A signal asked the sweep to stop.
    pub(super) fn stopped(&self) -> bool {
        self.plan.stop.is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// The error that ends a stopped sweep, with what its cache holds.
    pub(super) fn interrupted(&self) -> Error {
        Error::Interrupted {
            samples: self.results.stored(),
            cache: self.results.path().to_path_buf(),
        }
    }

    /// One run of configuration `i` (its program built first when needed):
    /// the sample its trace gives, or why it gives none (the build failed,
    /// the run left no trace or never reached the construct). A run whose
    /// output or exit code is not the default's excludes its configuration.
    fn run_once(&mut self, i: usize, phase: &str) -> Result<Result<Sample, String>, Error> {
        let program = match self.program(i)? {
            Ok(p) => p,
            Err(_) if self.stopped() => return Err(self.interrupted()),
            Err(why) => return Ok(Err(why)),
        };
        if self.stopped() {
            return Err(self.interrupted());
        }
        let words = match &program {
            Some(p) => command::run_words(self.plan.run, p)?,
            None => command::split_words(self.plan.run)?,
        };
        if words.is_empty() {
            return Err(Error::EmptyCommand {
                template: self.plan.run.to_string(),
            });
        }
        self.trace_n += 1;
        let trace = self
            .plan
            .work
            .join(format!("run-{}.trace", self.trace_n % 4));
        let _ = std::fs::remove_file(&trace);
        let env = self.states[i].applied.env.clone();
        let t0 = Instant::now();
        let out = self.runner.run(&words, &trace, &env);
        self.cost.run_ns += t0.elapsed().as_nanos() as u64;
        self.cost.runs += 1;
        let out = out?;
        if self.stopped() {
            return Err(self.interrupted());
        }
        if !out.trace.is_file() {
            let tail = stderr_tail(&out.stderr);
            return Ok(Err(format!(
                "the run left no trace ({}){}",
                measure::describe_exit(out.code),
                tail.last().map(|l| format!(": {l}")).unwrap_or_default()
            )));
        }
        let run = accprof_analyzer::load_run(&out.trace)?;
        let _ = std::fs::remove_file(&out.trace);
        if phase != "warmup" {
            match run.ledger().paid_jit() {
                Some(true) => self.jit.paid += 1,
                Some(false) => self.jit.warm += 1,
                None => {}
            }
        }
        let key = self.states[i].config.key();
        let summary = run.summary();
        let Some(t) = measure::measure_site(summary, self.plan.source, self.plan.line) else {
            return Ok(Err(format!(
                "the run ({}) never reached {}:{}",
                measure::describe_exit(out.code),
                self.plan.source.display(),
                self.plan.line
            )));
        };
        if i == 0 && !self.device_known {
            self.device = measure::device_of(&run);
        }
        let lines = compared_lines(&out.stdout, self.plan.ignore);
        let (timing, total, launches) = t.time();
        let sample = Sample {
            config: key,
            phase: phase.to_string(),
            timing,
            per_launch_ns: total / launches.max(1),
            total_ns: total,
            launches,
            shape: t.shape,
            registers: t.registers,
            wall_ns: out.wall_ns,
            code: out.code,
            output: text_hash(&lines.join("\n")),
            cached: false,
        };
        if i == 0 && self.reference.is_none() {
            self.reference = Some((lines, out.code));
        } else if let Some((ref_lines, ref_code)) = &self.reference {
            if let Some(why) = output_difference(ref_lines, *ref_code, &lines, out.code) {
                self.states[i].excluded = Some(why);
            }
        }
        self.all.push(sample.clone());
        Ok(Ok(sample))
    }

    /// Warm-up, then repeats of configuration `i` until its interval is
    /// narrow enough, its time is up or a budget ends.
    pub(super) fn measure(&mut self, i: usize) -> Result<(), Error> {
        let r = self.plan.repeats;
        let key = self.states[i].config.key();
        self.order += 1;
        self.states[i].measured_order = Some(self.order);
        // The default is warmed up first: its trace names the device, part
        // of the cache's key.
        if i != 0 {
            self.use_cache(i);
        }
        let t0 = Instant::now();
        while !self.states[i].warm {
            let warmups = self
                .all
                .iter()
                .filter(|s| s.config == key && s.phase == "warmup")
                .count() as u32;
            let sample = match self.run_once(i, "warmup")? {
                Ok(s) => s,
                Err(why) => {
                    self.states[i].failed = Some(why);
                    self.report(&key);
                    return Ok(());
                }
            };
            if i == 0 {
                self.device_known = true;
            }
            self.states[i].shape = sample.shape;
            self.states[i].registers = sample.registers;
            self.report(&key);
            if warmups + 1 >= r.warmup {
                self.states[i].warm = true;
            }
            if self.states[i].excluded.is_some() {
                return Ok(());
            }
        }
        if i == 0 {
            self.device_known = true;
            self.use_cache(0);
        }
        if self.states[i].excluded.is_some() {
            return Ok(());
        }
        // The same launch as a configuration measured before: the same
        // kernel, nothing new to learn.
        if i != 0 && self.states[i].cached == 0 {
            if let Some(shape) = self.states[i].shape {
                let twin = (0..self.states.len()).find(|&j| {
                    j != i
                        && self.states[j].shape == Some(shape)
                        && self.states[j].usable()
                        && self.states[j].measured_order.is_some()
                        && !self.states[j].samples.is_empty()
                });
                if let Some(j) = twin {
                    self.states[i].same_as = Some(self.states[j].config.key());
                    return Ok(());
                }
            }
        }
        loop {
            let s = &self.states[i];
            let n = s.samples.len() as u32;
            if n >= r.max {
                break;
            }
            if n >= r.min {
                if s.stats().is_some_and(|st| st.spread() <= r.spread) {
                    break;
                }
                if t0.elapsed() >= r.config_time {
                    break;
                }
            }
            if i != 0 && self.over_budget() && n >= 1 {
                break;
            }
            let sample = match self.run_once(i, "measure")? {
                Ok(s) => s,
                Err(why) => {
                    self.states[i].failed = Some(why);
                    break;
                }
            };
            if self.states[i].excluded.is_some() {
                break;
            }
            self.remember(&key, &sample)?;
            self.states[i].samples.push(sample);
            self.report(&key);
        }
        Ok(())
    }

    /// Default and winner alternately, each run a fresh process.
    pub(super) fn recheck(&mut self, w: usize) -> Result<Recheck, Error> {
        let mut d = Vec::new();
        let mut x = Vec::new();
        let rounds = self.plan.recheck;
        self.planned += 2 * u64::from(rounds);
        for _ in 0..rounds {
            for (i, into) in [(0, &mut d), (w, &mut x)] {
                if let Ok(s) = self.run_once(i, "recheck")? {
                    into.push(s.per_launch_ns as f64);
                }
                let key = self.states[i].config.key();
                self.report(&key);
            }
        }
        let (ds, ws) = (stats::stats(&d), stats::stats(&x));
        let speedup = match (ds, ws) {
            (Some(a), Some(b)) if b.median > 0.0 => Some(a.median / b.median),
            _ => None,
        };
        Ok(Recheck {
            candidate: self.states[w].config.key(),
            rounds,
            default: ds,
            winner: ws,
            speedup,
            confirmed: matches!((ds, ws), (Some(a), Some(b)) if b.hi < a.lo),
        })
    }
}

/// Why a run's output is not the default's, if it is not.
fn output_difference(a: &[String], code_a: u8, b: &[String], code_b: u8) -> Option<String> {
    if let Some((n, (x, y))) = a.iter().zip(b).enumerate().find(|(_, (x, y))| x != y) {
        return Some(format!(
            "output differs from the default's at line {}: `{y}` instead of `{x}`",
            n + 1
        ));
    }
    if a.len() != b.len() {
        return Some(format!(
            "output has {} lines, the default's {}",
            b.len(),
            a.len()
        ));
    }
    if code_a != code_b {
        return Some(format!(
            "{}, the default's {}",
            measure::describe_exit(code_b),
            measure::describe_exit(code_a)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::super::testing::{program, ran, runs_of, with_sweep, Fixture, SOURCE};
    use super::*;
    use crate::runner::{MockProgram, MockRunner};

    #[test]
    fn repeats_stop_at_the_minimum_once_the_interval_is_narrow_else_at_the_maximum() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let plan = f.plan();
        let mut runner = MockRunner::new(vec![program(d, "x\n", 32, &[100_000; 8])]);
        let n = with_sweep(&mut runner, &plan, |s| {
            s.measure(0).expect("measures");
            s.states[0].samples.len()
        });
        assert_eq!((runner.runs.len(), n), (4, 3), "a warm-up and three runs");

        // A fresh work directory: the first sweep's samples are cached.
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let plan = f.plan();
        let noisy = [100_000, 50_000, 150_000, 60_000, 140_000, 55_000, 145_000];
        let mut runner = MockRunner::new(vec![program(d, "x\n", 32, &noisy)]);
        let n = with_sweep(&mut runner, &plan, |s| {
            s.measure(0).expect("measures");
            s.states[0].samples.len()
        });
        assert_eq!((runner.runs.len(), n), (7, 6), "a warm-up and six runs");
    }

    #[test]
    fn a_launch_like_one_measured_before_is_not_measured_again() {
        let f = Fixture::new(&["vector_length=32"]);
        let d = f.path();
        let plan = f.plan();
        // The default launched 32 wide too.
        let mut runner = MockRunner::new(vec![
            program(d, "x\n", 32, &[100_000; 4]),
            program(d, "x\n", 32, &[90_000; 4]),
        ]);
        let same_as = with_sweep(&mut runner, &plan, |s| {
            s.measure(0).expect("measures");
            s.measure(1).expect("measures");
            s.states[1].same_as.clone()
        });
        assert_eq!(same_as.as_deref(), Some("default"));
        assert_eq!(runs_of(&runner, "vector_length_32"), 1, "its warm-up only");
    }

    #[test]
    fn the_recheck_alternates_default_and_winner_without_building_again() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let mut plan = f.plan();
        plan.recheck = 3;
        let mut runner = MockRunner::new(vec![
            program(d, "x\n", 32, &[100_000; 7]),
            program(d, "x\n", 64, &[60_000; 7]),
        ]);
        let (r, before, rechecked) = with_sweep(&mut runner, &plan, |s| {
            s.measure(0).expect("measures");
            s.measure(1).expect("measures");
            let before = s.runner.runs.len();
            let r = s.recheck(1).expect("re-checks");
            let rechecked: Vec<String> = s
                .all
                .iter()
                .filter(|x| x.phase == "recheck")
                .map(|x| x.config.clone())
                .collect();
            (r, before, rechecked)
        });
        assert_eq!(before, 8);
        assert_eq!(
            ran(&runner)[before..],
            [
                "default",
                "vector_length_64",
                "default",
                "vector_length_64",
                "default",
                "vector_length_64"
            ]
        );
        assert_eq!(
            rechecked,
            [
                "default",
                "vector_length=64",
                "default",
                "vector_length=64",
                "default",
                "vector_length=64"
            ]
        );
        assert_eq!(runner.builds.len(), 2, "the programs built for the sweep");
        assert_eq!(r.candidate, "vector_length=64");
        assert_eq!(r.rounds, 3);
        assert_eq!(r.default.map(|x| x.median), Some(100_000.0));
        assert_eq!(r.winner.map(|x| x.median), Some(60_000.0));
        assert!(r.confirmed, "{r:?}");

        // Slower in the re-check than in the sweep: not confirmed. A
        // fresh work directory: the first sweep's samples are cached.
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let mut plan = f.plan();
        plan.recheck = 3;
        let mut runner = MockRunner::new(vec![
            program(d, "x\n", 32, &[100_000; 7]),
            program(
                d,
                "x\n",
                64,
                &[60_000, 60_000, 60_000, 60_000, 107_000, 108_000, 107_000],
            ),
        ]);
        let r = with_sweep(&mut runner, &plan, |s| {
            s.measure(0).expect("measures");
            s.measure(1).expect("measures");
            s.recheck(1).expect("re-checks")
        });
        assert!(!r.confirmed, "{r:?}");
        assert!(r.speedup.is_some_and(|x| x < 1.0), "{r:?}");
    }

    /// A program killed by SIGSEGV; with `trace`, after it wrote its trace.
    fn crashing(d: &std::path::Path, trace: bool) -> MockProgram {
        let mut p = program(d, "x\n", 64, &[60_000; 4]);
        p.code = 139;
        p.stderr = "Segmentation fault\n".to_string();
        if !trace {
            p.trace = None;
            p.repeats.clear();
        }
        p
    }

    #[test]
    fn a_run_that_crashed_without_a_trace_fails_its_configuration_after_one_run() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let plan = f.plan();
        let mut runner = MockRunner::new(vec![
            program(d, "x\n", 32, &[100_000; 4]),
            crashing(d, false),
        ]);
        let (failed, usable) = with_sweep(&mut runner, &plan, |s| {
            s.measure(0).expect("measures");
            s.measure(1).expect("a crash does not end the sweep");
            (s.states[1].failed.clone(), s.states[1].usable())
        });
        assert_eq!(
            failed.as_deref(),
            Some("the run left no trace (killed by SIGSEGV (exit code 139)): Segmentation fault")
        );
        assert!(!usable);
        assert_eq!(runs_of(&runner, "vector_length_64"), 1);
    }

    #[test]
    fn a_run_that_crashed_after_its_trace_is_excluded_by_its_exit_code() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let plan = f.plan();
        let mut runner = MockRunner::new(vec![
            program(d, "x\n", 32, &[100_000; 4]),
            crashing(d, true),
        ]);
        let excluded = with_sweep(&mut runner, &plan, |s| {
            s.measure(0).expect("measures");
            s.measure(1).expect("measures");
            (s.states[1].excluded.clone(), s.recommend())
        });
        assert_eq!(
            excluded.0.as_deref(),
            Some("killed by SIGSEGV (exit code 139), the default's exit code 0")
        );
        assert_eq!(excluded.1, Some(0), "the default stays");
        assert_eq!(runs_of(&runner, "vector_length_64"), 1, "its warm-up only");
    }

    #[test]
    fn a_difference_in_lines_not_compared_does_not_exclude_a_configuration() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let runs = || {
            MockRunner::new(vec![
                program(d, "x\n Mop/s total = 6945.98\n", 32, &[100_000; 4]),
                program(d, "x\n Mop/s total = 7099.20\n", 64, &[90_000; 4]),
            ])
        };
        let excluded = |plan: &super::super::TunePlan<'_>| {
            let mut runner = runs();
            with_sweep(&mut runner, plan, |s| {
                s.measure(0).expect("measures");
                s.measure(1).expect("measures");
                s.states[1].excluded.clone()
            })
        };
        assert!(excluded(&f.plan()).is_some(), "compared, the lines differ");
        let ignore = ["Mop/s".to_string()];
        let mut plan = f.plan();
        plan.ignore = &ignore;
        assert_eq!(excluded(&plan), None);
    }

    #[test]
    fn a_sweep_whose_every_run_crashed_recommends_nothing() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let mut plan = f.plan();
        plan.recheck = 2;
        let mut default = crashing(d, true);
        default.repeats = vec![super::super::testing::trace(d, 100_000, 32)];
        let mut runner = MockRunner::new(vec![default, crashing(d, true)]);
        let err = super::super::tune(&mut runner, &plan, &mut |_| {}).expect_err("all died");
        assert!(
            matches!(&err, Error::AllDied { runs: 8, how, .. } if how == "killed by SIGSEGV (exit code 139)"),
            "{err}"
        );
        assert_eq!(runner.runs.len(), 8, "no re-check of a crashing program");
        assert_eq!(std::fs::read_to_string(&f.source).expect("source"), SOURCE);
    }

    #[test]
    fn a_stop_before_a_build_ends_the_sweep_without_building_or_running() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let stop = AtomicBool::new(true);
        let mut plan = f.plan();
        plan.stop = Some(&stop);
        let mut runner = MockRunner::new(vec![program(d, "x\n", 32, &[100_000; 4])]);
        let err = with_sweep(&mut runner, &plan, |s| s.measure(0).expect_err("stopped"));
        assert!(
            matches!(err, Error::Interrupted { samples: 0, .. }),
            "{err}"
        );
        assert!(runner.builds.is_empty() && runner.runs.is_empty());
    }
}
