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

use crate::measure::Sample;
use crate::runner::Runner;
use crate::{text_hash, Error};

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
            run: self.plan.run.to_string(),
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
