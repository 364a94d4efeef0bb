//! A configuration's runs, through the [`Runner`]: each one measured from
//! its trace ([`crate::measure`]: the construct's kernel device time and
//! the shape it launched) and its output compared with the default's;
//! warm-up runs, then repeats until the median's interval is narrow
//! enough ([`super::Repeats`]); and the re-check of the sweep's winner
//! against the default, alternately, each run a fresh process. A sweep
//! stopped by a signal ends here, between a build and a run or after a run.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::measure::{self, Sample};
use crate::runner::Runner;
use crate::stats;
use crate::verify::compared_lines;
use crate::{command, stderr_tail, text_hash, Error};

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
        let lines = compared_lines(&out.stdout);
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
