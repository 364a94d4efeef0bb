//! Options, read once from the environment into a frozen config.

use std::sync::OnceLock;

use accprof_trace::HashMode;

#[derive(Debug, Clone)]
pub struct Config {
    /// Output file pattern (ACCPROF_OUTPUT): %p pid, %h host, %r MPI rank,
    /// %n smallest number that makes the name new, %% a percent sign.
    pub output: String,
    /// ACCPROF_HASH=off|sampled|full (default sampled).
    pub hash: HashMode,
    /// ACCPROF_CUPTI=0 turns the device side off.
    pub cupti: bool,
    /// Print the summary at exit: ACCPROF_TIME, PGI_ACC_TIME or NV_ACC_TIME = 1.
    pub summary: bool,
    /// ACCPROF_DISABLE=1: load but record nothing.
    pub disabled: bool,
    /// ACCPROF_QUIET=1: no notes on stderr (errors still print).
    pub quiet: bool,
    /// ACCPROF_CLOCK=monotonic: stamp host events with clock_gettime even
    /// where the time-stamp counter could be used (see `clock`).
    pub allow_tsc: bool,
    /// Problems with the options themselves, reported once at start.
    pub warnings: Vec<String>,
}

pub const DEFAULT_OUTPUT: &str = "accprof-%p.trace";

fn flag(name: &str) -> bool {
    matches!(
        std::env::var(name).as_deref(),
        Ok("1") | Ok("yes") | Ok("true") | Ok("on")
    )
}

impl Config {
    pub fn from_env() -> Config {
        let mut warnings = Vec::new();
        let hash = match std::env::var("ACCPROF_HASH").as_deref() {
            Err(_) | Ok("") | Ok("sampled") => HashMode::Sampled,
            Ok("full") => HashMode::Full,
            Ok("off") => HashMode::Off,
            Ok(other) => {
                warnings.push(format!(
                    "ACCPROF_HASH={other} is not one of off, sampled, full; using sampled"
                ));
                HashMode::Sampled
            }
        };
        let output = match std::env::var("ACCPROF_OUTPUT") {
            Ok(s) if !s.is_empty() => s,
            _ => DEFAULT_OUTPUT.to_string(),
        };
        let allow_tsc = match std::env::var("ACCPROF_CLOCK").as_deref() {
            Err(_) | Ok("") | Ok("auto") => true,
            Ok("monotonic") => false,
            Ok(other) => {
                warnings.push(format!(
                    "ACCPROF_CLOCK={other} is not one of auto, monotonic; using auto"
                ));
                true
            }
        };
        Config {
            output,
            hash,
            cupti: !matches!(
                std::env::var("ACCPROF_CUPTI").as_deref(),
                Ok("0") | Ok("off")
            ),
            summary: flag("ACCPROF_TIME") || flag("PGI_ACC_TIME") || flag("NV_ACC_TIME"),
            disabled: flag("ACCPROF_DISABLE"),
            quiet: flag("ACCPROF_QUIET"),
            allow_tsc,
            warnings,
        }
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::from_env)
}

/// MPI rank from the variables launchers export.
pub fn mpi_rank() -> Option<u32> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
        "MV2_COMM_WORLD_RANK",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// Expands an output pattern. `exists` tells whether a candidate name is
/// taken (for %n).
pub fn expand_output(
    pattern: &str,
    pid: u32,
    host: &str,
    rank: Option<u32>,
    exists: impl Fn(&str) -> bool,
) -> String {
    let render = |n: u32| {
        let mut out = String::with_capacity(pattern.len() + 16);
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('p') => out.push_str(&pid.to_string()),
                Some('h') => out.push_str(host),
                Some('r') => out.push_str(&rank.unwrap_or(0).to_string()),
                Some('n') => out.push_str(&n.to_string()),
                Some('%') => out.push('%'),
                Some(other) => {
                    out.push('%');
                    out.push(other);
                }
                None => out.push('%'),
            }
        }
        out
    };
    if !pattern.contains("%n") {
        return render(0);
    }
    (0..10_000)
        .map(render)
        .find(|name| !exists(name))
        .unwrap_or_else(|| render(10_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_expand() {
        let name = expand_output("t-%h-%r-%p-%%.trace", 42, "node1", Some(3), |_| false);
        assert_eq!(name, "t-node1-3-42-%.trace");
        let taken = ["x0", "x1"];
        let name = expand_output("x%n", 1, "h", None, |n| taken.contains(&n));
        assert_eq!(name, "x2");
        assert_eq!(expand_output("a%qb%", 1, "h", None, |_| false), "a%qb%");
    }
}
