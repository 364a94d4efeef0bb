//! `accprof tune`: a sweep of launch settings over one construct, built
//! with the user's command and timed from the collector's traces; the
//! table on stdout, samples, JSON, plots and the winner's patch in the
//! output directory. SIGINT, SIGTERM, SIGHUP (a closed terminal or SSH
//! session) and SIGQUIT stop it cleanly: the source is restored and the
//! cache keeps what was measured. After SIGKILL, which cannot be caught,
//! the next run restores the source from the original kept beside it.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use accprof_tuner::backup;
use accprof_tuner::space::{Param, Space};
use accprof_tuner::tune::{self, Prebuilt, Repeats, SearchMode, TunePlan};

use crate::run::HashArg;
use crate::stop::{self, say};

#[derive(clap::Args)]
pub struct TuneArgs {
    /// The construct to tune: the line of its directive.
    #[arg(long, value_name = "FILE:LINE", value_parser = parse_at)]
    pub at: (PathBuf, u32),
    /// Build command: {src} the source file (patched in place while it
    /// builds), {out} the program, {defines} the -D flags of macro
    /// clauses (else appended).
    #[arg(long, value_name = "CMD", required_unless_present = "prebuilt")]
    pub build: Option<String>,
    /// Run command: {out} the program ("{out} 2048 2048 100").
    #[arg(long = "run", value_name = "CMD", required_unless_present = "prebuild")]
    pub run_cmd: Option<String>,
    /// Lines of the program's output that start with TEXT (after leading
    /// blanks) are not compared with the default's, as lines that start
    /// with "time:" never are (repeatable): a program's own timings.
    #[arg(
        long = "ignore-lines",
        value_name = "TEXT",
        conflicts_with = "prebuild"
    )]
    pub ignore_lines: Vec<String>,
    /// Values to try: NAME=V1,V2,... or NAME=A..B (powers of two); names
    /// vector_length, num_gangs, num_workers.
    #[arg(long, value_name = "NAME=VALUES", num_args = 1..)]
    pub space: Vec<String>,
    /// Another directive to try in place of the construct's own
    /// ("parallel loop collapse(2) reduction(max:dt)"); repeatable.
    #[arg(long, value_name = "DIRECTIVE")]
    pub variant: Vec<String>,
    /// Exactly this many measured runs per configuration (at least 1).
    #[arg(long, value_name = "N", conflicts_with_all = ["min_repeats", "max_repeats"],
          value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: Option<u32>,
    /// At least this many measured runs per configuration (at least 1).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub min_repeats: u32,
    /// At most this many measured runs per configuration (raised to
    /// --min-repeats when below it).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_repeats: u32,
    /// Stop repeating once the median's 95% interval is narrower than this
    /// share of it.
    #[arg(long, value_name = "SHARE", default_value_t = 0.05)]
    pub spread: f64,
    /// Warm-up runs per configuration, not counted (at least 1: the first
    /// run's output is checked and its launch shape recorded).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub warmup: u32,
    /// Stop repeating one configuration after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value = "120")]
    pub config_time: String,
    /// Try every configuration (default for up to 8).
    #[arg(long)]
    pub exhaustive: bool,
    /// Coarse grid, then local search (default above 8 configurations).
    #[arg(long, conflicts_with = "exhaustive")]
    pub search: bool,
    /// Budget: at most this many program runs in the sweep.
    #[arg(long, value_name = "N")]
    pub max_runs: Option<u64>,
    /// Budget: stop starting runs after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub max_time: Option<String>,
    /// Rounds of the interleaved re-check of the winner against the default.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub recheck: u32,
    /// Where the programs, the cache, samples, plots and the patch go.
    #[arg(long, value_name = "DIR", default_value = "accprof-tune")]
    pub out: PathBuf,
    /// Only build every configuration's program into DIR (for a machine
    /// that cannot build), then stop.
    #[arg(long, value_name = "DIR", conflicts_with = "prebuilt")]
    pub prebuild: Option<PathBuf>,
    /// Run the programs --prebuild left in DIR instead of building.
    #[arg(long, value_name = "DIR")]
    pub prebuilt: Option<PathBuf>,
    /// Content hashing in the runs (off: it does not change kernel times,
    /// but costs host time).
    #[arg(long, value_enum, default_value_t = HashArg::Off)]
    pub hash: HashArg,
    /// The collector library (default as for `accprof run`).
    #[arg(long)]
    pub lib: Option<PathBuf>,
}

fn parse_at(s: &str) -> Result<(PathBuf, u32), String> {
    let (file, line) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("`{s}`: expected FILE:LINE"))?;
    let line: u32 = line
        .parse()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("`{s}`: `{line}` is not a line number"))?;
    if file.is_empty() {
        return Err(format!("`{s}`: expected FILE:LINE"));
    }
    Ok((PathBuf::from(file), line))
}

pub fn tune(args: &TuneArgs) -> anyhow::Result<u8> {
    let (source, line) = &args.at;
    if !source.is_file() {
        bail!("--at {}: no such file", source.display());
    }
    let space = Space::parse(&args.space, &args.variant)?;
    let lib = crate::run::find_collector(args.lib.as_deref())?;
    let mut runner = accprof_tuner::ProcessRunner::new(lib, args.hash.mode());
    stop::catch();
    // A sweep that builds patches the source: it is this run's until it
    // returns, and what a sweep that was killed left of it is repaired
    // before it is read. One that runs prebuilt programs only reads it.
    let _claim = if args.prebuilt.is_none() {
        let (claim, repaired) = backup::claim(source)?;
        if let Some(r) = repaired {
            say(&r.to_string());
        }
        Some(claim)
    } else {
        if !backup::in_use(source) {
            if let Some(r) = backup::repair(source)? {
                say(&r.to_string());
            }
        }
        None
    };
    if let Some(dir) = &args.prebuild {
        let Some(build) = &args.build else {
            bail!("--prebuild needs --build CMD");
        };
        let pre = tune::prebuild(
            &mut runner,
            source,
            *line,
            build,
            &space,
            dir,
            Some(&stop::STOP),
        )
        .map_err(build_error)?;
        let mut s = format!(
            "prebuilt {} programs of {}:{} into {}:\n",
            pre.variants.len(),
            source.display(),
            line,
            dir.display()
        );
        for (k, f) in &pre.variants {
            s.push_str(&format!("  {k:<40} {f}\n"));
        }
        let mut again: Vec<String> = args.space.iter().map(|x| format!("--space {x}")).collect();
        again.extend(args.variant.iter().map(|v| format!("--variant '{v}'")));
        s.push_str(&format!(
            "run them with: accprof tune --at {}:{line} --prebuilt {} {} --run '{{out}} ARGS'\n",
            source.display(),
            dir.display(),
            again.join(" ")
        ));
        crate::stdout::write_stdout(s.as_bytes())?;
        return Ok(0);
    }
    let Some(run_cmd) = &args.run_cmd else {
        bail!("--run CMD is needed");
    };
    let prebuilt = match &args.prebuilt {
        Some(dir) => Some((dir.as_path(), Prebuilt::read(dir)?)),
        None => None,
    };
    let config_time = seconds("--config-time", &args.config_time)?;
    let max_time = args
        .max_time
        .as_deref()
        .map(|s| seconds("--max-time", s))
        .transpose()?;
    if !(args.spread.is_finite() && args.spread >= 0.0) {
        bail!(
            "--spread {}: not a share (a number of at least 0, as 0.05)",
            args.spread
        );
    }
    let repeats = match args.repeats {
        Some(n) => Repeats {
            warmup: args.warmup,
            min: n,
            max: n,
            spread: 0.0,
            config_time,
        },
        None => Repeats {
            warmup: args.warmup,
            min: args.min_repeats,
            max: args.max_repeats.max(args.min_repeats),
            spread: args.spread,
            config_time,
        },
    };
    let plan = TunePlan {
        source,
        line: *line,
        build: args.build.as_deref().filter(|_| prebuilt.is_none()),
        run: run_cmd,
        ignore: &args.ignore_lines,
        space: &space,
        prebuilt: prebuilt.as_ref().map(|(d, p)| (*d, p)),
        repeats,
        mode: if args.exhaustive {
            SearchMode::Exhaustive
        } else if args.search {
            SearchMode::Search
        } else {
            SearchMode::Auto
        },
        max_runs: args.max_runs,
        max_time,
        recheck: args.recheck,
        work: &args.out,
        stop: Some(&stop::STOP),
    };
    let bar = bar();
    let result = tune::tune(&mut runner, &plan, &mut |p| {
        if let Some(b) = &bar {
            b.set_length(p.planned);
            b.set_position(p.runs);
            let best = p
                .best
                .as_ref()
                .map(|(k, m)| {
                    format!(
                        "best {k} {}",
                        accprof_analyzer::units::duration_ns(*m as u64)
                    )
                })
                .unwrap_or_default();
            b.set_message(format!("{}  {best}", p.config));
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let tuned = match result {
        Ok(t) => t,
        Err(e @ accprof_tuner::Error::Interrupted { .. }) => {
            say(&e.to_string());
            return Ok(stop::exit_code());
        }
        Err(e @ accprof_tuner::Error::AllDied { .. }) => {
            // The sweep ran as asked; the program is what failed.
            say(&e.to_string());
            return Ok(1);
        }
        Err(e) => return Err(build_error(e).into()),
    };
    let files = write_outputs(&tuned, &args.out)?;
    let mut text = accprof_tuner::report::tune::render(&tuned);
    text.extend_from_slice(format!("  files: {}\n", files.join(", ")).as_bytes());
    crate::stdout::write_stdout(&text)?;
    Ok(0)
}

/// A flag's number of seconds as a duration: a finite number, at least 0
/// and within what a duration holds (`inf`, `1e400` and `nan` are not).
/// Read here rather than by clap, so that the error is one line naming
/// the flag and the value as given.
fn seconds(flag: &str, s: &str) -> anyhow::Result<Duration> {
    match s.trim().parse::<f64>().map(Duration::try_from_secs_f64) {
        Ok(Ok(d)) => Ok(d),
        _ => bail!("{flag} {s}: not a number of seconds (a finite number of at least 0)"),
    }
}

/// The compiler's own words first, then the one-line error.
fn build_error(e: accprof_tuner::Error) -> accprof_tuner::Error {
    if let accprof_tuner::Error::Build { stderr_tail, .. } = &e {
        for line in stderr_tail {
            eprintln!("{line}");
        }
    }
    e
}

/// A bar on stderr when it is a terminal: runs done of runs planned, the
/// configuration running and the best so far.
fn bar() -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let b = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("tune {wide_bar} {pos}/{len} runs  {msg}") {
        b.set_style(style);
    }
    Some(b)
}

/// samples.csv, result.json, the winner's patch and a plot per parameter.
/// A patch or plot this sweep has none of is removed, so that what the
/// directory holds is this sweep's (a rerun that keeps the default leaves
/// no earlier winner's patch to apply).
fn write_outputs(t: &tune::Tuned, dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut files = Vec::new();
    let mut put = |name: &str, bytes: Option<&[u8]>| -> anyhow::Result<()> {
        let p = dir.join(name);
        match bytes {
            Some(b) => {
                std::fs::write(&p, b).with_context(|| format!("cannot write {}", p.display()))?;
                files.push(p.display().to_string());
            }
            None => match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("cannot remove the stale {}", p.display()))
                }
            },
        }
        Ok(())
    };
    put(
        "samples.csv",
        Some(&accprof_tuner::report::tune::samples_csv(t)),
    )?;
    put("result.json", Some(&accprof_tuner::report::tune::json(t)))?;
    put("winner.patch", t.patch.as_deref().map(str::as_bytes))?;
    for p in Param::ALL {
        let svg = accprof_tuner::report::tune::plot_svg(t, p);
        put(
            &format!("time-vs-{}.svg", p.name()),
            svg.as_deref().map(str::as_bytes),
        )?;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_finite_and_not_negative() {
        assert_eq!(
            seconds("--max-time", "1.5").ok(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(seconds("--max-time", "0").ok(), Some(Duration::ZERO));
        for bad in ["inf", "1e400", "nan", "-1", "1e30", "ten", ""] {
            let e = seconds("--config-time", bad).err().map(|e| e.to_string());
            assert_eq!(
                e,
                Some(format!(
                    "--config-time {bad}: not a number of seconds (a finite number of at least 0)"
                ))
            );
        }
    }

    #[test]
    fn at_parses() {
        assert_eq!(
            parse_at("samples/heat2d_data.c:129"),
            Ok((PathBuf::from("samples/heat2d_data.c"), 129))
        );
        assert!(parse_at("x.c").is_err());
        assert!(parse_at("x.c:0").is_err());
        assert!(parse_at(":3").is_err());
    }
}
