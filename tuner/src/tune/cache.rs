//! What a sweep reuses instead of doing it again.
//!
//! Samples: the result cache of `accprof tune`, one JSON line per measured
//! sample in the work directory, keyed by the source's hash, the build
//! and run commands, the device and the configuration. A sweep appends as
//! it goes, so an interrupted sweep resumes where it stopped and a
//! repeated one reuses what it measured: a configuration with cached
//! samples is neither built nor run again.
//!
//! Programs: one build serves every run of a configuration, and every
//! configuration that builds the same text with the same definitions.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::key::text_hash;
use crate::measure::Sample;
use crate::runner::Runner;

use super::Sweep;

/// What a cached sample belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    /// xxh3 of the original source text, in hex.
    pub source: String,
    pub build: String,
    pub run: String,
    pub device: String,
    pub config: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub key: Key,
    pub sample: Sample,
}

/// The entries of the cache at `path`; none when it does not exist. Lines
/// that do not parse (a write cut short) are skipped.
pub fn load(path: &Path) -> Vec<Entry> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Appends one entry (one line, written at once).
pub fn append(path: &Path, e: &Entry) -> Result<(), Error> {
    let io = |source| Error::Io {
        what: format!("cannot write the tune cache {}", path.display()),
        source,
    };
    let mut line = serde_json::to_string(e).map_err(|e| io(std::io::Error::other(e)))?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    f.write_all(line.as_bytes()).map_err(io)
}

impl<R: Runner + ?Sized> Sweep<'_, '_, R> {
    /// The cache's key of configuration `config` in this sweep. The
    /// device is part of it: it is read from the default's first run,
    /// which is never answered from the cache.
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
            // The lines not compared decide which outputs are the same:
            // samples taken with other ones are not this sweep's.
            run: if self.plan.ignore.is_empty() {
                self.plan.run.to_string()
            } else {
                format!("{} (not compared: {:?})", self.plan.run, self.plan.ignore)
            },
            device: self.device.name.clone(),
            config: config.to_string(),
        }
    }

    /// Samples of earlier sweeps of the same source, build, run and device.
    /// A configuration with cached samples needs no warm-up; one whose
    /// cached output is not the default's is excluded without a run.
    pub(super) fn use_cache(&mut self, i: usize) {
        let key = self.states[i].config.key();
        let k = self.key(&key);
        let hits = self.results.hits(&k);
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

    /// Appends a sample measured now to the cache file.
    pub(super) fn remember(&self, config: &str, sample: &Sample) -> Result<(), Error> {
        let entry = Entry {
            key: self.key(config),
            sample: sample.clone(),
        };
        append(self.results.path(), &entry)
    }
}

/// The cache file and what it held when the sweep began.
pub(super) struct Results {
    path: PathBuf,
    earlier: Vec<Entry>,
}

impl Results {
    pub(super) fn open(path: PathBuf) -> Results {
        let earlier = load(&path);
        Results { path, earlier }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Samples of earlier sweeps under `key`.
    fn hits(&self, key: &Key) -> Vec<Sample> {
        self.earlier
            .iter()
            .filter(|e| e.key == *key)
            .map(|e| e.sample.clone())
            .collect()
    }

    /// How many samples the file holds now.
    pub(super) fn stored(&self) -> usize {
        load(&self.path).len()
    }
}

/// What decides the program a configuration builds into: the source text
/// (None: the original) and the `-D` definitions.
pub(super) type BuildKey = (Option<String>, Vec<(String, String)>);

/// The programs built so far in a sweep.
#[derive(Default)]
pub(super) struct Programs {
    /// With `{out}` in the build command: each build key's program.
    built: HashMap<BuildKey, PathBuf>,
    /// Without `{out}`, the program is wherever the build puts it: the
    /// build key whose program is there now.
    in_place: Option<BuildKey>,
}

impl Programs {
    /// The program already built for `key`: `Some(Some(path))` with one
    /// program per configuration (`per_config`), `Some(None)` when the one
    /// in place is it; None when it must be built.
    pub(super) fn get(&self, key: &BuildKey, per_config: bool) -> Option<Option<PathBuf>> {
        if per_config {
            self.built.get(key).map(|p| Some(p.clone()))
        } else {
            (self.in_place.as_ref() == Some(key)).then_some(None)
        }
    }

    /// `key` built into `program`, or into the place the build writes to.
    pub(super) fn add(&mut self, key: BuildKey, program: Option<PathBuf>) {
        match program {
            Some(p) => {
                self.built.insert(key, p);
            }
            None => self.in_place = Some(key),
        }
    }

    /// The program left in place was built from a patched text.
    pub(super) fn in_place_patched(&self) -> bool {
        matches!(self.in_place, Some((Some(_), _)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{program, runs_of, with_sweep, Fixture};
    use super::super::tune;
    use super::*;
    use crate::runner::MockRunner;

    /// The default at 100 us, vector_length=64 at 60 us, four runs each.
    fn programs(d: &Path, stdout: &str) -> Vec<crate::runner::MockProgram> {
        vec![
            program(d, stdout, 32, &[100_000; 4]),
            program(d, "x\n", 64, &[60_000; 4]),
        ]
    }

    #[test]
    fn a_cached_configuration_is_neither_built_nor_run_again() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let plan = f.plan();
        let mut runner = MockRunner::new(programs(d, "x\n"));
        let first = tune(&mut runner, &plan, &mut |_| {}).expect("tunes");
        assert_eq!(first.cost.cached, 0);
        // The measured runs are kept, not the warm-ups.
        let kept = load(&f.work.join("cache.jsonl"));
        assert_eq!(kept.len(), 6);
        assert!(kept.iter().all(|e| e.sample.phase == "measure"));

        let mut runner = MockRunner::new(programs(d, "x\n"));
        let (cached, samples, cost) = with_sweep(&mut runner, &plan, |s| {
            s.measure(0).expect("measures");
            s.measure(1).expect("measures");
            let samples: Vec<bool> = s.states[1].samples.iter().map(|x| x.cached).collect();
            (s.states[1].cached, samples, s.cost)
        });
        // Only the default's warm-up ran: its trace names the device, part
        // of the key.
        assert_eq!(runs_of(&runner, "default"), 1);
        assert_eq!(runs_of(&runner, "vector_length_64"), 0);
        assert_eq!(runner.builds.len(), 1);
        assert_eq!(cached, 3);
        assert_eq!(samples.len(), 3);
        assert_eq!((cost.cached, cost.runs, cost.builds), (6, 1, 1));
        assert_eq!(load(&f.work.join("cache.jsonl")).len(), 6, "nothing added");
    }

    #[test]
    fn a_cached_result_whose_output_is_not_the_defaults_is_excluded_without_a_run() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let plan = f.plan();
        let mut runner = MockRunner::new(programs(d, "x\n"));
        tune(&mut runner, &plan, &mut |_| {}).expect("tunes");
        // The default prints something else now (another input, say).
        let mut runner = MockRunner::new(programs(d, "y\n"));
        let excluded = with_sweep(&mut runner, &plan, |s| {
            s.measure(0).expect("measures");
            s.measure(1).expect("measures");
            s.states[1].excluded.clone()
        });
        assert_eq!(
            excluded.as_deref(),
            Some("its output differed from the default's (cached result)")
        );
        assert_eq!(runs_of(&runner, "vector_length_64"), 0);
    }

    #[test]
    fn another_build_command_or_device_is_another_key() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let plan = f.plan();
        let mut runner = MockRunner::new(programs(d, "x\n"));
        tune(&mut runner, &plan, &mut |_| {}).expect("tunes");
        let mut other = f.plan();
        other.build = Some("clang -fopenacc {src} -o {out}");
        let mut runner = MockRunner::new(programs(d, "x\n"));
        let (key, hits, renamed) = with_sweep(&mut runner, &other, |s| {
            s.measure(0).expect("measures");
            s.measure(1).expect("measures");
            let key = s.key("vector_length=64");
            let hits = s.results.hits(&key).len();
            s.device.name = "Other GPU".to_string();
            (key, hits, s.key("vector_length=64"))
        });
        assert_eq!(hits, 0);
        assert_eq!(runs_of(&runner, "vector_length_64"), 4, "measured again");
        assert_eq!(key.build, "clang -fopenacc {src} -o {out}");
        assert_eq!(key.run, "{out} 64");
        assert_eq!(key.device, "Test GPU");
        assert_eq!(
            key.source,
            format!("{:016x}", text_hash(super::super::testing::SOURCE))
        );
        assert_ne!(renamed, key);
    }

    #[test]
    fn other_lines_not_compared_are_another_key() {
        let f = Fixture::new(&["vector_length=64"]);
        let d = f.path();
        let plan = f.plan();
        let mut runner = MockRunner::new(programs(d, "x\n"));
        tune(&mut runner, &plan, &mut |_| {}).expect("tunes");
        let ignore = ["Mop/s".to_string()];
        let mut other = f.plan();
        other.ignore = &ignore;
        let mut runner = MockRunner::new(programs(d, "x\n"));
        let (key, hits) = with_sweep(&mut runner, &other, |s| {
            s.measure(0).expect("measures");
            let key = s.key("vector_length=64");
            let hits = s.results.hits(&key).len();
            (key, hits)
        });
        assert_eq!(hits, 0);
        assert_eq!(key.run, "{out} 64 (not compared: [\"Mop/s\"])");
    }

    #[test]
    fn one_build_serves_every_run_and_every_configuration_that_builds_the_same() {
        // Gangs are set at run time: every configuration runs the default's
        // program.
        let f = Fixture::new(&["num_gangs=132,264"]);
        let d = f.path();
        let plan = f.plan();
        let mut p = program(d, "x\n", 32, &[100_000; 4]);
        let launches = |block| vec![super::super::testing::trace(d, 90_000, block)];
        p.env_repeats = vec![
            ("GOMP_OPENACC_DIM=132::".into(), launches(64)),
            ("GOMP_OPENACC_DIM=264::".into(), launches(128)),
        ];
        let mut runner = MockRunner::new(vec![p]);
        with_sweep(&mut runner, &plan, |s| {
            s.explore().expect("sweeps");
        });
        assert_eq!(runner.builds.len(), 1);
        assert_eq!(
            runs_of(&runner, "default"),
            12,
            "three configurations' runs"
        );
    }
}
