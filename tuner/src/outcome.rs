//! What a sweep found: each configuration's outcome, the re-check, the
//! recommendation and what the tuning cost (read by the tuner's report and
//! the command line); and the progress it tells as it goes.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::measure::{Sample, Shape, Timing};
use crate::space::{Config, Param};
use crate::stats::Stats;

/// Where the tuning time went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    pub builds: u64,
    pub build_ns: u64,
    pub runs: u64,
    pub run_ns: u64,
    pub total_ns: u64,
    /// Samples taken from the cache instead of run.
    pub cached: u64,
}

impl Cost {
    /// Time spent neither building nor running: reading traces, the
    /// tuner's own work.
    pub fn overhead_ns(&self) -> u64 {
        self.total_ns.saturating_sub(self.build_ns + self.run_ns)
    }
}

/// One configuration's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub key: String,
    #[serde(skip)]
    pub config: Config,
    pub stats: Option<Stats>,
    pub shape: Option<Shape>,
    pub registers: Option<u32>,
    /// Default median / this median.
    pub speedup: Option<f64>,
    /// Its interval overlaps the best one's.
    pub tie: bool,
    /// What to use: the sweep's winner when the re-check confirmed it (or
    /// there was none), else the default.
    pub recommended: bool,
    /// It launched the same shape as this configuration: not measured again.
    pub same_as: Option<String>,
    /// Not run: why (hardware limits).
    pub pruned: Option<String>,
    /// Ran but excluded: its output or exit code differs from the default's.
    pub excluded: Option<String>,
    /// Its build or run failed.
    pub failed: Option<String>,
    /// How many of its samples came from the cache.
    pub cached: usize,
    /// The sweep ran it (a search, or a budget, may leave some out).
    pub measured: bool,
}

/// The interleaved re-check of the sweep's winner against the default.
/// Only a confirmed winner is recommended.
#[derive(Debug, Clone, Serialize)]
pub struct Recheck {
    /// The configuration re-checked: the sweep's winner.
    pub candidate: String,
    pub rounds: u32,
    pub default: Option<Stats>,
    pub winner: Option<Stats>,
    /// Default median / winner median in the re-check.
    pub speedup: Option<f64>,
    /// The winner's interval lies wholly below the default's.
    pub confirmed: bool,
}

/// How many of the measured runs (warm-ups left out) compiled their
/// device code at start-up, the CUDA driver's cache missing it
/// ([`accprof_analyzer::ledger::Ledger::paid_jit`]), and how many did not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JitRuns {
    pub paid: u64,
    pub warm: u64,
}

impl JitRuns {
    /// The sentence that says the measured runs are not alike, when some
    /// compiled their code and others did not.
    pub fn mismatch(&self) -> Option<String> {
        (self.paid > 0 && self.warm > 0).then(|| {
            format!(
                "{} of the {} measured runs compiled their device code at start-up (the CUDA driver's cache missed it) and the others did not: their wall times differ by that, and a construct's host time does too where the code is loaded inside it; more warm-up runs (--warmup) let every binary's code reach the cache before it is measured",
                self.paid,
                self.paid + self.warm
            )
        })
    }
}

/// The result of [`tune`](crate::tune::tune).
#[derive(Debug, Clone, Serialize)]
pub struct Tuned {
    pub source: PathBuf,
    pub line: u32,
    pub directive: String,
    pub build: Option<String>,
    pub run: String,
    /// How each parameter was swept.
    pub how: Vec<(Param, String)>,
    pub device: String,
    pub sm_count: Option<u32>,
    pub timing: Timing,
    /// "exhaustive" or "coarse grid + local search".
    pub search: String,
    /// Why the sweep stopped before it was done (a budget).
    pub budget_ended: Option<String>,
    /// The default first, then the configurations in the order measured,
    /// then those pruned or not reached.
    pub outcomes: Vec<Outcome>,
    pub recheck: Option<Recheck>,
    /// The patch of the recommended configuration (a unified diff), with
    /// the `-D` definitions and variables it needs besides.
    pub patch: Option<String>,
    pub patch_defines: Vec<(String, String)>,
    pub patch_env: Vec<(String, String)>,
    /// Every sample taken, warm-ups and re-check included, and those
    /// taken from the cache (marked `cached`).
    pub samples: Vec<Sample>,
    /// Measured runs that compiled their device code at start-up.
    pub jit: JitRuns,
    pub cost: Cost,
    /// The cache file.
    pub cache: PathBuf,
    /// The source was restored with a new modification time instead of
    /// its own: the build (no `{out}`) left its program in place, built
    /// from a patched text, and a build that compares times must remake it.
    pub source_left_newer: bool,
}

impl Tuned {
    pub fn default_outcome(&self) -> Option<&Outcome> {
        self.outcomes.first()
    }

    pub fn recommended(&self) -> Option<&Outcome> {
        self.outcomes.iter().find(|o| o.recommended)
    }
}

/// What the sweep is doing, for a progress bar.
#[derive(Debug, Clone)]
pub struct Progress {
    pub runs: u64,
    /// Runs planned so far (grows as the search goes on).
    pub planned: u64,
    pub config: String,
    /// The best median so far (ns) and its configuration.
    pub best: Option<(String, f64)>,
}
