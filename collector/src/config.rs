//! Options, read once from the environment into a frozen config.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use accprof_trace::contract::{self, env};
use accprof_trace::HashMode;

#[derive(Debug, Clone)]
pub struct Config {
    /// Output file pattern (ACCPROF_OUTPUT): %p pid, %h host, %r MPI rank,
    /// %n smallest number that makes the name new, %% a percent sign.
    pub output: std::ffi::OsString,
    /// ACCPROF_HASH=off|sampled|full (default sampled).
    pub hash: HashMode,
    /// ACCPROF_CUPTI=0 turns the device side off.
    pub cupti: bool,
    /// ACCPROF_DRIVER=0 turns driver spans off (CUPTI's DRIVER activity
    /// records: every CUDA driver call of the program's threads, timed).
    pub driver: bool,
    /// Print the summary at exit: ACCPROF_TIME, PGI_ACC_TIME or NV_ACC_TIME = 1.
    pub summary: bool,
    /// ACCPROF_DISABLE=1: load but record nothing.
    pub disabled: bool,
    /// ACCPROF_QUIET=1: no notes on stderr (errors still print).
    pub quiet: bool,
    /// ACCPROF_CLOCK=monotonic: stamp host events with clock_gettime even
    /// where the time-stamp counter could be used (see `clock`).
    pub allow_tsc: bool,
    /// What a relative output pattern is relative to: ACCPROF_BASE_DIR
    /// when set, else the working directory when the library was loaded
    /// (the program may change it before it opens its trace). `None` only
    /// when neither can be had.
    pub base_dir: Option<PathBuf>,
    /// ACCPROF_CHECK=coherence: watch host accesses to ranges whose
    /// device copy is newer (see `coherence`). Off by default.
    pub coherence: bool,
    /// ACCPROF_MANIFEST: where to append a line naming each trace opened.
    pub manifest: Option<PathBuf>,
    /// Problems with the options themselves, reported once at start.
    pub warnings: Vec<String>,
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| contract::is_on(&v))
}

impl Config {
    pub fn from_env() -> Config {
        let mut warnings = Vec::new();
        let hash_text = std::env::var(env::HASH).unwrap_or_default();
        let hash = contract::parse_hash(&hash_text).unwrap_or_else(|| {
            warnings.push(format!(
                "{}={hash_text} is not one of off, sampled, full; using sampled",
                env::HASH
            ));
            HashMode::Sampled
        });
        // Its bytes, whatever they are: a file name need not be UTF-8.
        let output = match std::env::var_os(env::OUTPUT) {
            Some(s) if !s.is_empty() => s,
            _ => contract::DEFAULT_OUTPUT.into(),
        };
        let allow_tsc = match std::env::var(env::CLOCK).as_deref() {
            Err(_) | Ok("") | Ok("auto") => true,
            Ok("monotonic") => false,
            Ok(other) => {
                warnings.push(format!(
                    "{}={other} is not one of auto, monotonic; using auto",
                    env::CLOCK
                ));
                true
            }
        };
        let cwd = std::env::current_dir().ok();
        let base_dir = match std::env::var_os(env::BASE_DIR) {
            Some(d) if !d.is_empty() => {
                let d = PathBuf::from(d);
                Some(match &cwd {
                    Some(cwd) if d.is_relative() => cwd.join(d),
                    _ => d,
                })
            }
            _ => cwd,
        };
        let check_text = std::env::var(env::CHECK).unwrap_or_default();
        // A bad value is said at start and the program runs unchecked: the
        // collector never changes how the program ends (`accprof run`
        // refuses the value before it starts anything).
        let checks = contract::parse_checks(&check_text).unwrap_or_else(|bad| {
            warnings.push(format!(
                "{}={check_text}: {bad} is not a check (known: {}); no check runs",
                env::CHECK,
                contract::CHECK_NAMES.join(", ")
            ));
            contract::Checks::default()
        });
        let manifest = std::env::var_os(env::MANIFEST)
            .filter(|m| !m.is_empty())
            .map(|m| resolve_in(base_dir.as_deref(), Path::new(&m)));
        Config {
            output,
            hash,
            cupti: !std::env::var(env::CUPTI).is_ok_and(|v| contract::cupti_off(&v)),
            driver: !std::env::var(env::DRIVER).is_ok_and(|v| contract::is_off(&v)),
            summary: flag(env::TIME) || env::TIME_ALIASES.iter().any(|v| flag(v)),
            disabled: flag(env::DISABLE),
            quiet: flag(env::QUIET),
            allow_tsc,
            coherence: checks.coherence,
            base_dir,
            manifest,
            warnings,
        }
    }

    /// `path` made absolute against the base directory.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        resolve_in(self.base_dir.as_deref(), path)
    }
}

fn resolve_in(base: Option<&Path>, path: &Path) -> PathBuf {
    match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::from_env)
}

/// How long the runtime's device initialization, the trace header and exit
/// wait for the device side (CUPTI) to finish starting.
pub(crate) const DEVICE_START_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// MPI rank from the variables launchers export.
pub fn mpi_rank() -> Option<u32> {
    contract::rank_from_env()
}
