//! `accprof tune`: a sweep of launch settings over one compute construct,
//! in the user's own build. Each configuration is patched into the source
//! (or passed as a macro, or set at run time with `GOMP_OPENACC_DIM`),
//! built with the user's command, run under the collector and timed from
//! its trace (the construct's kernel device time, from the analyzer's
//! model). The source's text is put back after every build; its original
//! is kept beside it from the first patch until the sweep ends, when it is
//! restored with its times whatever happened ([`crate::backup`]: a sweep
//! that was killed is repaired by the next run).
//!
//! Measurement: warm-up runs, then repeats until the median's interval is
//! narrow enough or the configuration's time is up; configurations whose
//! intervals overlap the best one's are ties, and the one closest to the
//! default is the candidate; it is then re-checked against the default,
//! interleaved, in fresh processes, and recommended only when the re-check
//! confirms it (else the default is kept). A configuration whose output differs
//! from the default's is excluded; one that launched the same shape as
//! another is not measured again. Small spaces are swept exhaustively,
//! larger ones on a coarse grid followed by a local search, under budgets.
//!
//! One sweep's state is shared by its parts, each in a module of its own:
//! - `search`: which configurations are tried, in what order, and which
//!   one is recommended;
//! - `build`: a configuration's program, patched in and built through the
//!   [`Runner`], or picked among programs built ahead of time;
//! - `execute`: a configuration's runs through the [`Runner`], measured,
//!   compared with the default's output, repeated, and the re-check;
//! - [`cache`]: what is reused instead of done again (samples of earlier
//!   sweeps, programs already built).
//!
//! This module holds the plan, each configuration's state and the
//! [`Tuned`] result. Nothing here renders: [`crate::report::tune`] does.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use accprof_analyzer::source::{Directive, Lang, SourceFile};

pub use crate::outcome::{Cost, JitRuns, Outcome, Progress, Recheck, Tuned};
pub use build::{prebuild, with_defines, Prebuilt, PREBUILT_LIST};
pub use search::{SearchMode, EXHAUSTIVE_UP_TO};

use crate::backup::{InPlace, Times};
use crate::error::Error;
use crate::key::text_hash;
use crate::measure::{self, DeviceInfo, Sample, Shape, Timing};
use crate::runner::Runner;
use crate::space::{self, Applied, Config, How, Param, Space};
use crate::stats::{self, Stats};

mod build;
pub mod cache;
mod execute;
mod search;
#[cfg(test)]
mod testing;

/// When to stop repeating one configuration.
#[derive(Debug, Clone, Copy)]
pub struct Repeats {
    pub warmup: u32,
    pub min: u32,
    pub max: u32,
    /// Stop once the median's interval is narrower than this share of it.
    pub spread: f64,
    /// Stop repeating one configuration after this long.
    pub config_time: Duration,
}

impl Default for Repeats {
    fn default() -> Self {
        Repeats {
            warmup: 1,
            min: 3,
            max: 10,
            spread: 0.05,
            config_time: Duration::from_secs(120),
        }
    }
}

/// What to tune and how.
#[derive(Debug, Clone)]
pub struct TunePlan<'a> {
    /// The source file and the line of the construct's directive.
    pub source: &'a Path,
    pub line: u32,
    /// Build command template (`{src}`, `{out}`); None with `prebuilt`.
    pub build: Option<&'a str>,
    /// Run command template (`{out}` the program).
    pub run: &'a str,
    /// Lines of stdout that start with one of these (after leading
    /// blanks) are not compared with the default's, besides "time:".
    pub ignore: &'a [String],
    pub space: &'a Space,
    pub prebuilt: Option<(&'a Path, &'a Prebuilt)>,
    pub repeats: Repeats,
    pub mode: SearchMode,
    /// Budgets of the whole sweep: process runs, and time.
    pub max_runs: Option<u64>,
    pub max_time: Option<Duration>,
    /// Rounds of the interleaved re-check (one default and one winner run
    /// each); 0 skips it.
    pub recheck: u32,
    /// Where programs, traces and the cache go.
    pub work: &'a Path,
    /// Set by a signal handler: stop, restore, keep the cache.
    pub stop: Option<&'a AtomicBool>,
}

/// A configuration being measured.
struct State {
    config: Config,
    applied: Applied,
    samples: Vec<Sample>,
    warm: bool,
    shape: Option<Shape>,
    registers: Option<u32>,
    same_as: Option<String>,
    pruned: Option<String>,
    excluded: Option<String>,
    failed: Option<String>,
    cached: usize,
    measured_order: Option<usize>,
}

impl State {
    fn new(config: Config, applied: Applied) -> State {
        State {
            config,
            applied,
            samples: Vec::new(),
            warm: false,
            shape: None,
            registers: None,
            same_as: None,
            pruned: None,
            excluded: None,
            failed: None,
            cached: 0,
            measured_order: None,
        }
    }

    fn stats(&self) -> Option<Stats> {
        let xs: Vec<f64> = self
            .samples
            .iter()
            .map(|s| s.per_launch_ns as f64)
            .collect();
        stats::stats(&xs)
    }

    fn usable(&self) -> bool {
        self.pruned.is_none()
            && self.excluded.is_none()
            && self.failed.is_none()
            && self.same_as.is_none()
    }
}

/// The source to tune as read before anything patches it.
struct Opened {
    /// Its times, read before its text (reading may change the access
    /// time).
    times: Times,
    original: Vec<u8>,
    src: SourceFile,
    directive: Directive,
}

impl Opened {
    fn read(path: &Path, line: u32) -> Result<Opened, Error> {
        let times = Times::of(path)?;
        let original = std::fs::read(path).map_err(|e| Error::Io {
            what: format!("cannot read {}", path.display()),
            source: e,
        })?;
        let text = String::from_utf8_lossy(&original).into_owned();
        let name = path.display().to_string();
        let lang = Lang::of(&name)
            .ok_or_else(|| Error::Tune(format!("{name}: not a C, C++ or Fortran source")))?;
        let src = SourceFile::new(&name, path.to_path_buf(), lang, text);
        let directive = src
            .directive_at(line)
            .ok_or_else(|| Error::Tune(format!("no OpenACC directive at {name}:{line}")))?;
        Ok(Opened {
            times,
            original,
            src,
            directive,
        })
    }
}

/// One sweep: the plan, the runner, every configuration's state and what
/// the runs found so far.
struct Sweep<'p, 'r, R: Runner + ?Sized> {
    plan: &'p TunePlan<'p>,
    runner: &'r mut R,
    src: SourceFile,
    restore: InPlace,
    how: Vec<(Param, How)>,
    /// The default first, then the space's configurations in its order.
    states: Vec<State>,
    programs: cache::Programs,
    results: cache::Results,
    cost: Cost,
    start: Instant,
    /// Every sample of the sweep, in the order taken.
    all: Vec<Sample>,
    /// The default's compared output lines and exit code.
    reference: Option<(Vec<String>, u8)>,
    device: DeviceInfo,
    /// The default's first run named the device: it is part of the
    /// cache's key, and stays as that run said.
    device_known: bool,
    budget_ended: Option<String>,
    /// Configurations measured so far.
    order: usize,
    progress: &'r mut dyn FnMut(&Progress),
    planned: u64,
    trace_n: u64,
    jit: JitRuns,
}

/// Runs the sweep. `progress` is told after every run.
pub fn tune<R: Runner + ?Sized>(
    runner: &mut R,
    plan: &TunePlan<'_>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Tuned, Error> {
    let (mut sweep, d) = Sweep::open(runner, plan, progress)?;
    let result = sweep.go(&d);
    sweep.finish(result)
}

impl<'p, 'r, R: Runner + ?Sized> Sweep<'p, 'r, R> {
    /// Reads the source and checks the plan against it; the sweep and the
    /// directive it tunes.
    fn open(
        runner: &'r mut R,
        plan: &'p TunePlan<'p>,
        progress: &'r mut dyn FnMut(&Progress),
    ) -> Result<(Self, Directive), Error> {
        let path = plan.source;
        let Opened {
            times,
            original,
            src,
            directive: d,
        } = Opened::read(path, plan.line)?;
        let name = src.path.clone();
        if !d.is_compute() {
            return Err(Error::Tune(format!(
                "{name}:{}: `{}` is not a compute construct (parallel, kernels, serial)",
                plan.line,
                d.construct_name()
            )));
        }
        if plan.space.dims.is_empty() {
            return Err(Error::Tune(
                "nothing to tune: give --space NAME=VALUES or --variant DIRECTIVE".to_string(),
            ));
        }
        let mut how = space::how_applied(plan.space, &d);
        if let Some((dir, pre)) = plan.prebuilt {
            if pre.source_hash != format!("{:016x}", text_hash(&src.text)) {
                return Err(Error::Tune(format!(
                    "{}: built from another version of {name} (rebuild them with --prebuild)",
                    dir.display()
                )));
            }
            for (_, h) in how.iter_mut() {
                if h.rebuilds() {
                    *h = How::Prebuilt;
                }
            }
        } else if plan.build.is_none() && how.iter().any(|(_, h)| h.rebuilds()) {
            return Err(Error::Tune(
                "these parameters need a rebuild: give --build (or --prebuilt DIR)".to_string(),
            ));
        }
        std::fs::create_dir_all(plan.work.join("bin")).map_err(|e| Error::Io {
            what: format!("cannot create {}", plan.work.display()),
            source: e,
        })?;
        let mut states = Vec::new();
        for c in std::iter::once(Config::default()).chain(plan.space.configs()) {
            let applied = space::apply(&src, plan.line, &c, &how).map_err(Error::Tune)?;
            states.push(State::new(c, applied));
        }
        let sweep = Sweep {
            plan,
            runner,
            restore: InPlace::new(path, original, times),
            src,
            how,
            states,
            programs: cache::Programs::default(),
            results: cache::Results::open(plan.work.join("cache.jsonl")),
            cost: Cost::default(),
            start: Instant::now(),
            all: Vec::new(),
            reference: None,
            device: DeviceInfo::default(),
            device_known: false,
            budget_ended: None,
            order: 0,
            progress,
            planned: 0,
            trace_n: 0,
            jit: Default::default(),
        };
        Ok((sweep, d))
    }

    /// Restores the source, whatever `result` is.
    fn finish(mut self, result: Result<Tuned, Error>) -> Result<Tuned, Error> {
        // A program built where the build puts it from a patched text: the
        // source stays newer than it, so that the user's build remakes it.
        let newer = self.programs.in_place_patched();
        self.restore.keep_newer = newer;
        self.restore.restore()?;
        result.map(|t| Tuned {
            source_left_newer: newer,
            ..t
        })
    }

    fn go(&mut self, d: &Directive) -> Result<Tuned, Error> {
        let exhaustive = self.explore()?;
        self.all_died()?;
        let best = self.recommend();
        let recheck = match best {
            Some(w) if w != 0 && self.plan.recheck > 0 => Some(self.recheck(w)?),
            _ => None,
        };
        // A winner the re-check does not confirm is not recommended: the
        // default stays, and no patch is written for it.
        let recommended = match &recheck {
            Some(r) if !r.confirmed => Some(0),
            _ => best,
        };
        Ok(self.result(d, exhaustive, recommended, recheck))
    }

    /// An error when every run of the sweep was ended by a signal: there
    /// is no working program to time, whatever the table would say.
    fn all_died(&self) -> Result<(), Error> {
        let mut killed: Vec<(u8, usize)> = Vec::new();
        for x in &self.all {
            if measure::signal_of(x.code).is_none() {
                return Ok(());
            }
            match killed.iter_mut().find(|(c, _)| *c == x.code) {
                Some((_, n)) => *n += 1,
                None => killed.push((x.code, 1)),
            }
        }
        if killed.is_empty() {
            return Ok(());
        }
        killed.sort_by_key(|&(c, n)| (std::cmp::Reverse(n), c));
        let how = killed
            .iter()
            .map(|&(c, n)| {
                if killed.len() == 1 {
                    measure::describe_exit(c)
                } else {
                    format!("{} {n} times", measure::describe_exit(c))
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        Err(Error::AllDied {
            runs: self.all.len(),
            how,
            run: self.plan.run.to_string(),
        })
    }

    /// Tells the progress callback where the sweep is, after a run.
    fn report(&mut self, config: &str) {
        let best = self.best().and_then(|b| {
            self.states[b]
                .stats()
                .map(|s| (self.states[b].config.key(), s.median))
        });
        let p = Progress {
            runs: self.cost.runs,
            planned: self.planned.max(self.cost.runs),
            config: config.to_string(),
            best,
        };
        (self.progress)(&p);
    }

    fn result(
        &mut self,
        d: &Directive,
        exhaustive: bool,
        recommended: Option<usize>,
        recheck: Option<Recheck>,
    ) -> Tuned {
        let plan = self.plan;
        let best = self.best();
        let best_stats = best.and_then(|b| self.states[b].stats());
        let default_median = self.states[0].stats().map(|s| s.median);
        let mut order: Vec<usize> = (0..self.states.len()).collect();
        order.sort_by_key(|&i| (self.states[i].measured_order.unwrap_or(usize::MAX), i));
        let outcomes = order
            .iter()
            .map(|&i| {
                let s = &self.states[i];
                let st = s.stats();
                Outcome {
                    key: s.config.key(),
                    config: s.config.clone(),
                    stats: if s.usable() { st } else { None },
                    shape: s.shape,
                    registers: s.registers,
                    speedup: match (default_median, st) {
                        (Some(dm), Some(x)) if s.usable() && x.median > 0.0 => Some(dm / x.median),
                        _ => None,
                    },
                    tie: s.usable() && matches!((st, best_stats), (Some(a), Some(b)) if a.ties(&b)),
                    recommended: Some(i) == recommended,
                    same_as: s.same_as.clone(),
                    pruned: s.pruned.clone(),
                    excluded: s.excluded.clone(),
                    failed: s.failed.clone(),
                    cached: s.cached,
                    measured: s.measured_order.is_some(),
                }
            })
            .collect();
        let timing = self.all.first().map(|s| s.timing).unwrap_or(Timing::Host);
        let (patch, patch_defines, patch_env) = match recommended {
            Some(w) if w != 0 => {
                let a = &self.states[w].applied;
                let name = plan.source.display().to_string();
                let diff = a.text.as_ref().map(|t| {
                    accprof_analyzer::patch::unified_diff(
                        &format!("a/{name}"),
                        &format!("b/{name}"),
                        &self.src.text,
                        t,
                        3,
                    )
                });
                (diff, a.defines.clone(), a.env.clone())
            }
            _ => (None, Vec::new(), Vec::new()),
        };
        self.cost.total_ns = self.start.elapsed().as_nanos() as u64;
        Tuned {
            source: plan.source.to_path_buf(),
            line: plan.line,
            directive: self.src.line(d.line).trim().to_string(),
            build: plan.build.map(str::to_string),
            run: plan.run.to_string(),
            how: self.how.iter().map(|(p, h)| (*p, h.describe(*p))).collect(),
            device: self.device.name.clone(),
            sm_count: self.device.sm_count,
            timing,
            search: if exhaustive {
                "exhaustive".to_string()
            } else {
                "coarse grid + local search".to_string()
            },
            budget_ended: self.budget_ended.clone(),
            outcomes,
            recheck,
            patch,
            patch_defines,
            patch_env,
            samples: std::mem::take(&mut self.all),
            jit: self.jit,
            cost: self.cost,
            cache: self.results.path().to_path_buf(),
            source_left_newer: false,
        }
    }
}
