//! `accprof analyze`: findings of one trace as text or JSON, their patch,
//! a patched copy of the source, and `--verify`: the original and the
//! patched program built and run under the collector, outputs compared,
//! times side by side.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use accprof_analyzer::analysis::{self, Combined};
use accprof_analyzer::findings::Analysis;
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::summary::RunFacts;
use accprof_analyzer::Run;

use crate::run::HashArg;

#[derive(clap::Args)]
pub struct AnalyzeArgs {
    /// The trace to analyze.
    pub trace: PathBuf,
    /// Print the findings as JSON (with the combined patch).
    #[arg(long)]
    pub json: bool,
    /// Print the unified diff that implements the proposals.
    #[arg(long, conflicts_with = "json")]
    pub patch: bool,
    /// Write a patched copy of each source (default FILE.accprof.EXT next to it).
    #[arg(long)]
    pub apply: bool,
    /// Where --apply writes (one patched file only).
    #[arg(long, requires = "apply", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Overwrite the sources themselves.
    #[arg(long, conflicts_with_all = ["out", "apply"])]
    pub in_place: bool,
    /// Build and run the original and the patched program under the
    /// collector; compare outputs and times (needs --build and --run, or
    /// --prebuild here and --prebuilt there).
    #[arg(long)]
    pub verify: bool,
    /// Build command for --verify; {src} is the source file, {out} the
    /// program. {dir} is a directory holding a copy of every file the patch
    /// changes (original or patched) and the files they include with
    /// quotes; {src} is then the copy of the first patched file (the diff's
    /// order) in it, and sources the patch leaves alone stay where they
    /// are. A patch that changes several files needs {dir}:
    /// 'gcc -fopenacc {dir}/main.c {dir}/step.c -o {out}'.
    #[arg(
        long,
        value_name = "CMD",
        requires = "verify",
        conflicts_with = "prebuilt"
    )]
    pub build: Option<String>,
    /// Run command for --verify; {out} is the program ("{out} 1024 20 0").
    #[arg(
        long = "run",
        value_name = "CMD",
        requires = "verify",
        conflicts_with = "prebuild"
    )]
    pub run_cmd: Option<String>,
    /// Lines of the program's output that start with TEXT (after leading
    /// blanks) are not compared, as lines that start with "time:" never
    /// are (repeatable): a program's own timings, as NPB's
    /// --ignore-lines 'Time in seconds' --ignore-lines Mop/s.
    #[arg(
        long = "ignore-lines",
        value_name = "TEXT",
        requires = "verify",
        conflicts_with = "prebuild"
    )]
    pub ignore_lines: Vec<String>,
    /// Only build the original and the patched program into DIR (for a
    /// machine that cannot build), then stop.
    #[arg(long, value_name = "DIR", requires_all = ["verify", "build"],
          conflicts_with_all = ["prebuilt", "keep"])]
    pub prebuild: Option<PathBuf>,
    /// Run the programs --prebuild left in DIR instead of building.
    #[arg(long, value_name = "DIR", requires_all = ["verify", "run_cmd"])]
    pub prebuilt: Option<PathBuf>,
    /// Content hashing in the --verify runs.
    #[arg(long, value_enum, default_value_t = HashArg::Sampled)]
    pub hash: HashArg,
    /// Keep the --verify builds, traces and outputs (before.out,
    /// after.out) in this directory.
    #[arg(long, value_name = "DIR", requires = "verify")]
    pub keep: Option<PathBuf>,
    /// The collector library for --verify (default as for `accprof run`).
    #[arg(long)]
    pub lib: Option<PathBuf>,
    /// Another place to look for source files (repeatable).
    #[arg(long = "source-dir", value_name = "DIR")]
    pub source_dirs: Vec<PathBuf>,
    /// Read sources recorded under FROM from TO instead (FROM=TO, repeatable).
    #[arg(long = "source-map", value_name = "FROM=TO", value_parser = parse_map)]
    pub source_maps: Vec<(PathBuf, PathBuf)>,
    /// A directory with copies of the program's binaries (repeatable).
    #[arg(long = "symbols", value_name = "DIR")]
    pub symbols: Vec<PathBuf>,
    /// Transfers and allocations smaller than this are not examined.
    #[arg(long, default_value_t = 1024, value_name = "BYTES")]
    pub min_bytes: u64,
}

pub fn analyze(args: &AnalyzeArgs) -> anyhow::Result<u8> {
    let (run, sources, analysis, facts) = load(args)?;
    let trace = args.trace.display().to_string();
    let combined = analysis::combined_patch(&analysis, &sources);
    let warnings = accprof_reports::text::run_warnings(&facts, "", false);
    let mut out = Vec::new();
    if args.json {
        let diff = combined.patched.as_ref().map(|p| p.diff.as_str());
        out = accprof_reports::findings::render_json(
            &run, &analysis, &facts, &warnings, &trace, diff,
        );
    } else if args.patch {
        match &combined.patched {
            Some(p) => out.extend_from_slice(p.diff.as_bytes()),
            None => {
                eprintln!("accprof: no finding of {trace} comes with a patch");
                for (i, f) in analysis.findings.iter().enumerate() {
                    if let Some(why) = &f.proposal.no_patch {
                        eprintln!("accprof: #{} {}: {why}", i + 1, f.id);
                    }
                }
            }
        }
    } else {
        let opts = accprof_reports::findings::FindingsOptions {
            trace: trace.clone(),
            width: 100,
        };
        out = accprof_reports::findings::render_text(&run, &analysis, &facts, &opts);
    }
    crate::stdout::write_stdout(&out)?;
    for w in &warnings {
        eprintln!("accprof: {w}");
    }
    for (f, why) in sources.newer_than_binary() {
        eprintln!("accprof: warning: source {f}: {why}: the findings read it as it is now, which may not be what ran");
    }
    for s in &combined.skipped {
        eprintln!("accprof: left out of the patch: {s}");
    }
    if args.apply || args.in_place {
        apply(args, &sources, &combined)?;
    }
    let code = if args.verify {
        verify(args, &sources, &analysis, &combined)?
    } else {
        0
    };
    // The process ends next and its memory goes back whole: freeing a
    // large model piece by piece first only costs time.
    std::mem::forget(run);
    Ok(code)
}

/// The run, its sources, its findings and its facts (what the summary
/// says of the run as a whole; the summary by line is not needed).
fn load(args: &AnalyzeArgs) -> anyhow::Result<(Run, SourceSet, Analysis, RunFacts)> {
    let (opts, bar) =
        crate::progress::with_bar(&args.trace, &crate::symbols::symbol_options(&args.symbols));
    let run = accprof_analyzer::load_run_with(&args.trace, &opts);
    drop(bar);
    let mut run = run?;
    // --apply and --verify patch and build the sources: one that a tune
    // killed mid-build left patched is repaired before it is read. Only
    // reading, analyze says so and leaves it.
    let repair = args.apply || args.in_place || args.verify;
    let failed = std::cell::RefCell::new(None);
    let sources = SourceSet::load_with(&run, &args.source_dirs, &args.source_maps, &|p| {
        use accprof_tuner::backup;
        let kept = backup::backup_path(p);
        if repair && p.is_file() {
            match backup::claim(p) {
                Ok((_, Some(r))) => eprintln!("accprof: {r}"),
                Ok((_, None)) => {}
                Err(e) => {
                    failed.borrow_mut().get_or_insert(e);
                }
            }
        } else if p.is_file() && kept.is_file() {
            let by = if backup::in_use(p) {
                "a tune running now patches it"
            } else {
                "an accprof run that was killed left it patched: `accprof analyze --apply` or `accprof tune` restores it"
            };
            eprintln!(
                "accprof: warning: {} holds the original of {}: {by}; the findings read it as it is now",
                kept.display(),
                p.display()
            );
        }
        std::fs::read_to_string(p)
    });
    if let Some(e) = failed.into_inner() {
        return Err(e.into());
    }
    run.learn_names(&sources);
    let opts = Options {
        min_bytes: args.min_bytes,
        ..Options::default()
    };
    let analysis = analysis::analyze(&run, &sources, &opts);
    let facts = run.facts().clone();
    Ok((run, sources, analysis, facts))
}

pub fn parse_map(s: &str) -> Result<(PathBuf, PathBuf), String> {
    match s.split_once('=') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((PathBuf::from(a), PathBuf::from(b))),
        _ => Err(format!("`{s}` is not FROM=TO")),
    }
}

/// The patched files, or one clear error when there are none.
fn patched_files<'a>(
    sources: &'a SourceSet,
    combined: &'a Combined,
    what: &str,
) -> anyhow::Result<Vec<(&'a accprof_analyzer::source::SourceFile, &'a str)>> {
    let Some(p) = &combined.patched else {
        if let Some((f, why)) = sources.stale().next() {
            bail!("cannot {what}: source {f} changed since the run ({why})");
        }
        if let Some(m) = sources.missing().next() {
            bail!("cannot {what}: source {m} not found (give its directory with --source-dir DIR or --source-map FROM=TO)");
        }
        bail!("nothing to {what}: no finding comes with a patch");
    };
    p.files
        .iter()
        .map(|(path, text)| {
            let src = sources.get(path).with_context(|| {
                format!("cannot {what}: source {path} not found (--source-dir DIR)")
            })?;
            Ok((src, text.as_str()))
        })
        .collect()
}

/// FILE.c -> FILE.accprof.c next to it.
fn default_out(src: &Path) -> PathBuf {
    let stem = src
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match src.extension() {
        Some(e) => format!("{stem}.accprof.{}", e.to_string_lossy()),
        None => format!("{stem}.accprof"),
    };
    src.with_file_name(name)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

fn apply(args: &AnalyzeArgs, sources: &SourceSet, combined: &Combined) -> anyhow::Result<()> {
    let files = patched_files(sources, combined, "apply")?;
    if args.out.is_some() && files.len() > 1 {
        bail!(
            "--out names one file but the patch changes {} files; leave --out out",
            files.len()
        );
    }
    for (src, text) in files {
        let dest = match (&args.out, args.in_place) {
            (_, true) => src.found_at.clone(),
            (Some(o), _) => o.clone(),
            (None, _) => default_out(&src.found_at),
        };
        if !args.in_place && same_file(&dest, &src.found_at) {
            bail!(
                "{} is the source itself: use --in-place to overwrite it",
                dest.display()
            );
        }
        std::fs::write(&dest, text).with_context(|| format!("cannot write {}", dest.display()))?;
        // The file read is named: the recorded path, a --source-dir or a
        // --source-map may each hold a copy.
        let from = if args.in_place {
            "in place".to_string()
        } else {
            format!("from {}", src.found_at.display())
        };
        eprintln!(
            "accprof: wrote {} {from} ({} of {} findings applied)",
            dest.display(),
            combined.applied.len(),
            combined.applied.len() + combined.skipped.len()
        );
    }
    Ok(())
}

/// Builds and runs the original and the patched program with the tuner,
/// prints the before/after table, and exits 1 when the patched program
/// printed something else or exited otherwise. With --prebuild it only
/// builds both into a directory and says how to run them; with
/// --prebuilt it runs the programs of such a directory.
fn verify(
    args: &AnalyzeArgs,
    sources: &SourceSet,
    analysis: &Analysis,
    combined: &Combined,
) -> anyhow::Result<u8> {
    let prebuilt = match &args.prebuilt {
        Some(dir) => Some((dir.as_path(), accprof_tuner::VerifyPrebuilt::read(dir)?)),
        None => None,
    };
    let build = match (&args.build, &prebuilt) {
        (Some(b), _) => b.as_str(),
        (None, Some((_, pre))) => pre.build.as_str(),
        (None, None) => bail!("--verify needs --build CMD (or --prebuilt DIR)"),
    };
    let run_cmd = match (&args.run_cmd, &args.prebuild) {
        (Some(r), _) => r.as_str(),
        (None, Some(_)) => "",
        (None, None) => bail!("--verify needs --run CMD (or --prebuild DIR)"),
    };
    let files = patched_files(sources, combined, "verify")?;
    let Some(&(src, text)) = files.first() else {
        bail!("nothing to verify: no finding comes with a patch");
    };
    let lib = crate::run::find_collector(args.lib.as_deref())?;
    let mut runner = accprof_tuner::ProcessRunner::new(lib, args.hash.mode());
    let patch = combined
        .applied
        .iter()
        .map(|&i| format!("#{} {}", i + 1, analysis.findings[i].id))
        .collect::<Vec<_>>()
        .join(", ");
    let plan = accprof_tuner::VerifyPlan {
        source: &src.found_at,
        source_text: &src.text,
        patched_text: text,
        patch,
        also: files[1..]
            .iter()
            .map(|(f, t)| accprof_tuner::PatchedFile {
                source: &f.found_at,
                source_text: &f.text,
                patched_text: t,
            })
            .collect(),
        build,
        run: run_cmd,
        ignore: &args.ignore_lines,
        keep: args.keep.as_deref(),
        stop: Some(&crate::stop::STOP),
    };
    // A signal stops it after the build or run under way, so that the
    // patched copy it may write beside the source is removed.
    crate::stop::catch();
    if let Some(dir) = &args.prebuild {
        let pre = match accprof_tuner::verify::prebuild(&mut runner, &plan, dir) {
            Ok(p) => p,
            Err(e) => return verify_error(e),
        };
        crate::stdout::write_stdout(prebuilt_text(args, &plan, dir, &pre).as_bytes())?;
        return Ok(0);
    }
    let verified = match &prebuilt {
        Some((dir, pre)) => accprof_tuner::verify::verify_prebuilt(&mut runner, &plan, dir, pre),
        None => accprof_tuner::verify(&mut runner, &plan),
    };
    let verified = match verified {
        Ok(v) => v,
        Err(e) => return verify_error(e),
    };
    crate::stdout::write_stdout(&accprof_tuner::report::verify::render(&verified))?;
    Ok(if verified.ok() { 0 } else { 1 })
}

/// A signal's stop said with its exit code; a failed build with the
/// compiler's own words first, then the one-line error.
fn verify_error(e: accprof_tuner::Error) -> anyhow::Result<u8> {
    if let accprof_tuner::Error::VerifyInterrupted { .. } = e {
        crate::stop::say(&e.to_string());
        return Ok(crate::stop::exit_code());
    }
    if let accprof_tuner::Error::Build { stderr_tail, .. } = &e {
        for line in stderr_tail {
            eprintln!("{line}");
        }
    }
    Err(e.into())
}

/// What --prebuild built and the command that runs it on the other
/// machine: the flags that find the sources and binaries again, and the
/// trace.
fn prebuilt_text(
    args: &AnalyzeArgs,
    plan: &accprof_tuner::VerifyPlan<'_>,
    dir: &Path,
    pre: &accprof_tuner::VerifyPrebuilt,
) -> String {
    let mut s = format!(
        "prebuilt the original and the patched program of {} (patched with {}) into {}:\n",
        plan.source.display(),
        pre.patch,
        dir.display()
    );
    s.push_str(&format!("  {:<10} {}\n", "original", pre.before));
    s.push_str(&format!("  {:<10} {}\n", "patched", pre.after));
    let mut again: Vec<String> = Vec::new();
    again.extend(
        args.source_dirs
            .iter()
            .map(|d| format!("--source-dir {}", d.display())),
    );
    again.extend(
        args.source_maps
            .iter()
            .map(|(a, b)| format!("--source-map {}={}", a.display(), b.display())),
    );
    again.extend(
        args.symbols
            .iter()
            .map(|d| format!("--symbols {}", d.display())),
    );
    if args.min_bytes != 1024 {
        again.push(format!("--min-bytes {}", args.min_bytes));
    }
    again.push(args.trace.display().to_string());
    s.push_str(&format!(
        "run them with: accprof analyze --verify --prebuilt {} --run '{{out}} ARGS' {}\n",
        dir.display(),
        again.join(" ")
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patched_copy_name() {
        assert_eq!(
            default_out(Path::new("/x/laplace_bad.c")),
            Path::new("/x/laplace_bad.accprof.c")
        );
        assert_eq!(default_out(Path::new("a.f90")), Path::new("a.accprof.f90"));
    }
}
