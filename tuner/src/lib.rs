//! accprof-tuner: programs built with the user's command and run under the
//! collector, through the [`Runner`] trait, and what is decided from those
//! runs: [`verify`] of a patch (original against patched: same output?
//! how much faster?), and [`tune::tune`]: sweeps of gang/worker/vector settings over one
//! construct.
//!
//! Programs are run through a trait so verify and the search are testable
//! without a GPU ([`MockRunner`]). The numbers come from the analyzer's
//! summary of each run's trace; this crate never recomputes them, and it
//! renders nothing (the before/after table is in accprof-reports).

pub mod cache;
pub mod command;
pub mod launch;
pub mod measure;
pub mod runner;
pub mod space;
pub mod stats;
pub mod tune;
pub mod verify;

pub use runner::{BuildOutput, MockProgram, MockRunner, ProcessRunner, RunOutput, Runner};
pub use verify::{verify, DeviceTimes, Difference, Measured, NotMeasured, Verified, VerifyPlan};

use std::path::PathBuf;

/// What went wrong building, running or measuring. Each message is one
/// line naming the command, program or file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command template that cannot be split into words.
    #[error("unterminated {quote} in `{template}`")]
    Quote { quote: char, template: String },
    #[error("empty command{}", if template.is_empty() { String::new() } else { format!(" `{template}`") })]
    EmptyCommand { template: String },
    /// The build command exited with a failure. `stderr_tail` holds its
    /// last lines (at most [`STDERR_TAIL`]).
    #[error(
        "building the {label} version failed ({status}): `{command}`{}",
        last_line(stderr_tail)
    )]
    Build {
        label: String,
        command: String,
        status: String,
        stderr_tail: Vec<String>,
    },
    #[error("cannot run {program}: {why}")]
    Spawn { program: String, why: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the {label} run left no trace at {} (exit code {code}){}", trace.display(), last_line(stderr_tail))]
    NoTrace {
        label: String,
        trace: PathBuf,
        code: u8,
        stderr_tail: Vec<String>,
    },
    #[error("cannot create the run's manifest in {}: {source} (set TMPDIR to a writable directory)", dir.display())]
    Manifest {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Load(#[from] accprof_analyzer::LoadError),
    #[error(transparent)]
    Space(#[from] space::SpaceError),
    /// What `accprof tune` was pointed at cannot be tuned.
    #[error("{0}")]
    Tune(String),
    /// Stopped by a signal; the source was restored and what was measured
    /// stays in the cache.
    #[error("interrupted: the source is restored; {samples} samples are in the cache {}: the same command resumes", cache.display())]
    Interrupted { samples: usize, cache: PathBuf },
}

/// A stable hash of a text (cache keys, file names).
pub fn text_hash(s: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(s.as_bytes())
}

/// How many lines of a failing command's stderr an error keeps.
pub const STDERR_TAIL: usize = 15;

/// The last `STDERR_TAIL` lines of `stderr`.
pub fn stderr_tail(stderr: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(STDERR_TAIL);
    lines[from..].iter().map(|l| l.to_string()).collect()
}

/// ": LINE" for the last non-blank line, so that a one-line error names
/// what the command said last.
fn last_line(tail: &[String]) -> String {
    match tail.iter().rev().find(|l| !l.trim().is_empty()) {
        Some(l) => format!(": {}", l.trim()),
        None => String::new(),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
