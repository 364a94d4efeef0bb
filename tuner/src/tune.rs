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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use accprof_analyzer::source::{Lang, SourceFile};

pub use crate::outcome::{Cost, JitRuns, Outcome, Progress, Recheck, Tuned};

use crate::backup::{InPlace, Times};
use crate::cache::{self, Entry, Key};
use crate::measure::{self, DeviceInfo, Sample, Shape, Timing};
use crate::runner::{BuildOutput, Runner};
use crate::space::{self, Applied, Config, How, Param, Space};
use crate::stats::{self, Stats};
use crate::verify::compared_lines;
use crate::{command, first_error, stderr_tail, text_hash, Error};

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

/// Programs built ahead of time (`accprof tune --prebuild DIR`), for a
/// machine that cannot build them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prebuilt {
    pub source: String,
    pub line: u32,
    /// xxh3 of the source they were built from.
    pub source_hash: String,
    pub build: String,
    /// (configuration key, program file name in the directory).
    pub variants: Vec<(String, String)>,
}

/// The file in a prebuild directory that lists its programs.
pub const PREBUILT_LIST: &str = "variants.json";

impl Prebuilt {
    pub fn read(dir: &Path) -> Result<Prebuilt, Error> {
        let path = dir.join(PREBUILT_LIST);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::Io {
            what: format!("cannot read {}", path.display()),
            source: e,
        })?;
        serde_json::from_str(&text)
            .map_err(|e| Error::Tune(format!("{}: not a prebuild list: {e}", path.display())))
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

/// What decides the program a configuration builds into: the source text
/// (None: the original) and the `-D` definitions.
type BuildKey = (Option<String>, Vec<(String, String)>);

struct Sweep<'p, 'r, R: Runner + ?Sized> {
    plan: &'p TunePlan<'p>,
    runner: &'r mut R,
    src: SourceFile,
    restore: InPlace,
    how: Vec<(Param, How)>,
    states: Vec<State>,
    /// Programs built: build key -> program.
    built: HashMap<BuildKey, PathBuf>,
    /// With a build command that has no `{out}`, the program is wherever
    /// the build puts it: the build key whose program is there now.
    in_place: Option<BuildKey>,
    cost: Cost,
    start: Instant,
    all: Vec<Sample>,
    reference: Option<(Vec<String>, u8)>,
    device: DeviceInfo,
    key_base: Option<Key>,
    cache_path: PathBuf,
    cached: Vec<Entry>,
    budget_ended: Option<String>,
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
    let path = plan.source;
    // The times before the read, which may change the access time.
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
    let d = src
        .directive_at(plan.line)
        .ok_or_else(|| Error::Tune(format!("no OpenACC directive at {name}:{}", plan.line)))?;
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
    let cache_path = plan.work.join("cache.jsonl");
    let mut states = Vec::new();
    for c in std::iter::once(Config::default()).chain(plan.space.configs()) {
        let applied = space::apply(&src, plan.line, &c, &how).map_err(Error::Tune)?;
        states.push(State {
            config: c,
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
        });
    }
    let mut sweep = Sweep {
        plan,
        runner,
        restore: InPlace::new(path, original, times),
        src,
        how,
        states,
        built: HashMap::new(),
        in_place: None,
        cost: Cost::default(),
        start: Instant::now(),
        all: Vec::new(),
        reference: None,
        device: DeviceInfo::default(),
        key_base: None,
        cache_path: cache_path.clone(),
        cached: cache::load(&cache_path),
        budget_ended: None,
        order: 0,
        progress,
        planned: 0,
        trace_n: 0,
        jit: Default::default(),
    };
    let result = sweep.go(&d);
    // A program built where the build puts it from a patched text: the
    // source stays newer than it, so that the user's build remakes it.
    let newer = matches!(sweep.in_place, Some((Some(_), _)));
    sweep.restore.keep_newer = newer;
    sweep.restore.restore()?;
    result.map(|t| Tuned {
        source_left_newer: newer,
        ..t
    })
}

impl<R: Runner + ?Sized> Sweep<'_, '_, R> {
    fn go(&mut self, d: &accprof_analyzer::source::Directive) -> Result<Tuned, Error> {
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
        self.all_died()?;
        let best = self.recommend();
        let recheck = match best {
            Some(w) if w != 0 && plan.recheck > 0 => Some(self.recheck(w)?),
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

    fn stopped(&self) -> bool {
        self.plan.stop.is_some_and(|s| s.load(Ordering::SeqCst))
    }

    fn interrupted(&self) -> Error {
        Error::Interrupted {
            samples: cache::load(&self.cache_path).len(),
            cache: self.cache_path.clone(),
        }
    }

    fn over_budget(&mut self) -> bool {
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
    fn best(&self) -> Option<usize> {
        (0..self.states.len())
            .filter(|&i| self.states[i].usable())
            .filter_map(|i| self.states[i].stats().map(|s| (i, s.median)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }

    /// Among the configurations tied with the best, the one closest to
    /// the default.
    fn recommend(&self) -> Option<usize> {
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

    /// The program of configuration `i`, built when needed; the inner
    /// error is why this configuration has none (its build failed), the
    /// outer one ends the sweep (the source cannot be patched or restored).
    fn program(&mut self, i: usize) -> Result<Result<Option<PathBuf>, String>, Error> {
        let plan = self.plan;
        let applied = self.states[i].applied.clone();
        let key = (applied.text.clone(), applied.defines.clone());
        if let Some((dir, pre)) = plan.prebuilt {
            let wanted = self.prebuilt_key(&self.states[i].config);
            return Ok(match pre.variants.iter().find(|(k, _)| *k == wanted) {
                Some((_, file)) => Ok(Some(dir.join(file))),
                None => Err(format!(
                    "no program for `{wanted}` in {} (prebuild it)",
                    dir.display()
                )),
            });
        }
        let Some(template) = plan.build else {
            return Ok(Ok(None));
        };
        let per_config = template.contains("{out}");
        if per_config {
            if let Some(p) = self.built.get(&key) {
                return Ok(Ok(Some(p.clone())));
            }
        } else if self.in_place.as_ref() == Some(&key) {
            return Ok(Ok(None));
        }
        let out = plan.work.join("bin").join(self.states[i].config.slug());
        let template = with_defines(template, &applied.defines);
        if self.stopped() {
            return Err(self.interrupted());
        }
        if let Some(t) = &applied.text {
            self.restore.write(t)?;
        }
        let t0 = Instant::now();
        let built = self.runner.build(&template, plan.source, &out);
        self.cost.build_ns += t0.elapsed().as_nanos() as u64;
        self.cost.builds += 1;
        self.restore.unpatch()?;
        let built = match built {
            Ok(b) => b,
            Err(e) => return Ok(Err(e.to_string())),
        };
        if !built.success {
            let said = first_error(&built.stderr)
                .map(|l| format!(": {l}"))
                .unwrap_or_default();
            let log = build_log(plan.work, &self.states[i].config, &built)
                .map(|p| format!("; full log: {}", p.display()))
                .unwrap_or_default();
            return Ok(Err(format!(
                "build failed (exit code {}): `{}`{said}{log}",
                built.code, built.command
            )));
        }
        if per_config {
            self.built.insert(key, out.clone());
            Ok(Ok(Some(out)))
        } else {
            self.in_place = Some(key);
            Ok(Ok(None))
        }
    }

    /// The configuration restricted to what the programs differ by.
    fn prebuilt_key(&self, c: &Config) -> String {
        Config {
            values: c
                .values
                .iter()
                .filter(|(p, _)| self.how.iter().any(|(q, h)| q == p && *h == How::Prebuilt))
                .cloned()
                .collect(),
        }
        .key()
    }

    /// One run of configuration `i`.
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
        if i == 0 && self.key_base.is_none() {
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

    fn key(&self, config: &str) -> Key {
        Key {
            source: format!("{:016x}", text_hash(&self.src.text)),
            build: self
                .plan
                .build
                .map(str::to_string)
                .or_else(|| {
                    self.plan
                        .prebuilt
                        .map(|(_, p)| format!("prebuilt: {}", p.build))
                })
                .unwrap_or_default(),
            run: self.plan.run.to_string(),
            device: self.device.name.clone(),
            config: config.to_string(),
        }
    }

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

    /// Samples of earlier sweeps of the same source, build, run and device.
    fn use_cache(&mut self, i: usize) {
        let key = self.states[i].config.key();
        let k = self.key(&key);
        let hits: Vec<Sample> = self
            .cached
            .iter()
            .filter(|e| e.key == k)
            .map(|e| e.sample.clone())
            .collect();
        if hits.is_empty() {
            return;
        }
        let ref_hash = self.all.first().map(|x| x.output);
        let ref_code = self.reference.as_ref().map(|r| r.1);
        let s = &mut self.states[i];
        s.cached = hits.len();
        s.warm = true;
        s.shape = hits[0].shape;
        s.registers = hits[0].registers;
        self.cost.cached += hits.len() as u64;
        if i != 0 && (Some(hits[0].output) != ref_hash || Some(hits[0].code) != ref_code) {
            s.excluded = Some("its output differed from the default's (cached result)".to_string());
        }
        // In the sweep's samples too: a sweep answered from the cache
        // writes every sample it decided on, not only what it ran.
        self.all.extend(hits.iter().map(|x| Sample {
            cached: true,
            ..x.clone()
        }));
        s.samples = hits;
    }

    /// Warm-up, then repeats of configuration `i` until its interval is
    /// narrow enough, its time is up or a budget ends.
    fn measure(&mut self, i: usize) -> Result<(), Error> {
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
            if i == 0 && self.key_base.is_none() {
                self.key_base = Some(self.key("default"));
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
        if i == 0 && self.key_base.is_none() {
            self.key_base = Some(self.key("default"));
        }
        if i == 0 {
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
            let entry = Entry {
                key: self.key(&key),
                sample: sample.clone(),
            };
            cache::append(&self.cache_path, &entry)?;
            self.states[i].samples.push(sample);
            self.report(&key);
        }
        Ok(())
    }

    /// Default and winner alternately, each run a fresh process.
    fn recheck(&mut self, w: usize) -> Result<Recheck, Error> {
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

    fn result(
        &mut self,
        d: &accprof_analyzer::source::Directive,
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
            cache: self.cache_path.clone(),
            source_left_newer: false,
        }
    }
}

/// The build command with `-DNAME=VALUE` for each definition: in place of
/// `{defines}` when the template has it, else at its end.
pub fn with_defines(template: &str, defines: &[(String, String)]) -> String {
    let flags: Vec<String> = defines.iter().map(|(k, v)| format!("-D{k}={v}")).collect();
    let flags = flags.join(" ");
    if template.contains("{defines}") {
        template.replace("{defines}", &flags)
    } else if flags.is_empty() {
        template.to_string()
    } else {
        format!("{template} {flags}")
    }
}

/// Writes what a failed build said to `dir/build-SLUG.log`, the command
/// first, and returns its path (None when it cannot be written: the
/// error still names the first error line).
fn build_log(dir: &Path, c: &Config, built: &BuildOutput) -> Option<PathBuf> {
    let path = dir.join(format!("build-{}.log", c.slug()));
    let mut text = format!("$ {}\n", built.command).into_bytes();
    text.extend_from_slice(&built.stderr);
    std::fs::write(&path, text).ok()?;
    Some(path)
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

/// Builds every configuration's program into `dir` (for a machine that
/// cannot build), with [`PREBUILT_LIST`] naming them. Configurations that
/// differ only in run-time settings share a program; hardware limits that
/// need no device prune as in a sweep.
pub fn prebuild<R: Runner + ?Sized>(
    runner: &mut R,
    source: &Path,
    line: u32,
    build: &str,
    space: &Space,
    dir: &Path,
    stop: Option<&AtomicBool>,
) -> Result<Prebuilt, Error> {
    let times = Times::of(source)?;
    let original = std::fs::read(source).map_err(|e| Error::Io {
        what: format!("cannot read {}", source.display()),
        source: e,
    })?;
    let text = String::from_utf8_lossy(&original).into_owned();
    let name = source.display().to_string();
    let lang = Lang::of(&name)
        .ok_or_else(|| Error::Tune(format!("{name}: not a C, C++ or Fortran source")))?;
    let src = SourceFile::new(&name, source.to_path_buf(), lang, text);
    let d = src
        .directive_at(line)
        .ok_or_else(|| Error::Tune(format!("no OpenACC directive at {name}:{line}")))?;
    let how = space::how_applied(space, &d);
    std::fs::create_dir_all(dir).map_err(|e| Error::Io {
        what: format!("cannot create {}", dir.display()),
        source: e,
    })?;
    let mut restore = InPlace::new(source, original, times);
    let mut pre = Prebuilt {
        source: name.clone(),
        line,
        source_hash: format!("{:016x}", text_hash(&src.text)),
        build: build.to_string(),
        variants: Vec::new(),
    };
    let mut seen = Vec::new();
    for c in std::iter::once(Config::default()).chain(space.configs()) {
        if space::pruned(&c, None).is_some() {
            continue;
        }
        let c = Config {
            values: c
                .values
                .into_iter()
                .filter(|(p, _)| how.iter().any(|(q, h)| q == p && h.rebuilds()))
                .collect(),
        };
        if seen.contains(&c) {
            continue;
        }
        seen.push(c.clone());
        if stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            restore.restore()?;
            return Err(Error::Tune(
                "interrupted: the source is restored".to_string(),
            ));
        }
        let a = space::apply(&src, line, &c, &how).map_err(Error::Tune)?;
        let file = c.slug();
        let out = dir.join(&file);
        if let Some(t) = &a.text {
            restore.write(t)?;
        }
        let built = runner.build(&with_defines(build, &a.defines), source, &out);
        restore.unpatch()?;
        let built = built?;
        if !built.success {
            return Err(Error::Build {
                label: c.key(),
                code: built.code,
                stderr_tail: stderr_tail(&built.stderr),
                said: first_error(&built.stderr).map(String::into_boxed_str),
                log: build_log(dir, &c, &built).map(PathBuf::into_boxed_path),
                command: built.command,
            });
        }
        if !out.is_file() {
            return Err(Error::Tune(format!(
                "the build of `{}` did not write {} (the build command needs {{out}})",
                c.key(),
                out.display()
            )));
        }
        pre.variants.push((c.key(), file));
    }
    restore.restore()?;
    let list = dir.join(PREBUILT_LIST);
    let json = serde_json::to_string_pretty(&pre).map_err(|e| Error::Tune(e.to_string()))?;
    std::fs::write(&list, json).map_err(|e| Error::Io {
        what: format!("cannot write {}", list.display()),
        source: e,
    })?;
    Ok(pre)
}
