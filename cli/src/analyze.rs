//! `accprof analyze`: findings of one trace as text or JSON, their patch,
//! a patched copy of the source, and `--verify`: the original and the
//! patched program built and run under the collector, outputs compared,
//! times side by side.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};

use accprof_analyzer::findings::{self, Analysis};
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::units;
use accprof_analyzer::Run;

use crate::HashArg;

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
    /// collector; compare outputs and times.
    #[arg(long, requires_all = ["build", "run_cmd"])]
    pub verify: bool,
    /// Build command for --verify; {src} is the source file, {out} the program.
    #[arg(long, value_name = "CMD", requires = "verify")]
    pub build: Option<String>,
    /// Run command for --verify; {out} is the program ("{out} 1024 20 0").
    #[arg(long = "run", value_name = "CMD", requires = "verify")]
    pub run_cmd: Option<String>,
    /// Content hashing in the --verify runs.
    #[arg(long, value_enum, default_value_t = HashArg::Sampled)]
    pub hash: HashArg,
    /// Keep the --verify builds and traces in this directory.
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
    let (run, sources, analysis) = load(args)?;
    let trace = args.trace.display().to_string();
    let combined = findings::combined_patch(&analysis, &sources);
    let summary = accprof_analyzer::summary::summarize(&run);
    let facts = &summary.runs[0];
    let warnings = accprof_reports::text::warnings(&summary, false);
    let mut out = Vec::new();
    if args.json {
        let diff = combined.patched.as_ref().map(|p| p.diff.as_str());
        out =
            accprof_reports::findings::render_json(&run, &analysis, facts, &warnings, &trace, diff);
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
        out = accprof_reports::findings::render_text(&run, &analysis, facts, &opts);
    }
    crate::write_stdout(&out)?;
    for w in &warnings {
        eprintln!("accprof: {w}");
    }
    for s in &combined.skipped {
        eprintln!("accprof: left out of the patch: {s}");
    }
    if args.apply || args.in_place {
        apply(args, &sources, &combined)?;
    }
    if args.verify {
        return verify(args, &sources, &analysis, &combined);
    }
    Ok(0)
}

fn load(args: &AnalyzeArgs) -> anyhow::Result<(Run, SourceSet, Analysis)> {
    let run = accprof_analyzer::load_run_with(&args.trace, &crate::symbol_options(&args.symbols))?;
    let sources = SourceSet::load_with(&run, &args.source_dirs, &args.source_maps, &|p| {
        std::fs::read_to_string(p)
    });
    let opts = Options {
        min_bytes: args.min_bytes,
        ..Options::default()
    };
    let analysis = findings::analyze(&run, &sources, &opts);
    Ok((run, sources, analysis))
}

fn parse_map(s: &str) -> Result<(PathBuf, PathBuf), String> {
    match s.split_once('=') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((PathBuf::from(a), PathBuf::from(b))),
        _ => Err(format!("`{s}` is not FROM=TO")),
    }
}

/// The patched files, or one clear error when there are none.
fn patched_files<'a>(
    sources: &'a SourceSet,
    combined: &'a findings::Combined,
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

fn apply(
    args: &AnalyzeArgs,
    sources: &SourceSet,
    combined: &findings::Combined,
) -> anyhow::Result<()> {
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
        eprintln!(
            "accprof: wrote {} ({} of {} findings applied)",
            dest.display(),
            combined.applied.len(),
            combined.applied.len() + combined.skipped.len()
        );
    }
    Ok(())
}

/// Splits a command line into words: spaces separate, '...' and "..."
/// quote, backslash escapes. No other shell syntax.
pub fn split_words(s: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => bail!("unterminated ' in `{s}`"),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x) => cur.push(x),
                            None => bail!("unterminated \" in `{s}`"),
                        },
                        Some(x) => cur.push(x),
                        None => bail!("unterminated \" in `{s}`"),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(x) = chars.next() {
                    cur.push(x);
                }
            }
            _ => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// Quotes a path for `sh -c`.
fn sh_quote(p: &Path) -> String {
    let s = p.display().to_string();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,".contains(c))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `#include "x.h"` (C) or `include 'x.inc'` (Fortran): files found
/// relative to the source's directory.
fn has_local_includes(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim_start().to_ascii_lowercase();
        let t = t.trim_start_matches('#').trim_start();
        t.strip_prefix("include")
            .is_some_and(|r| r.trim_start().starts_with(['"', '\'']))
    })
}

/// Lines compared between the two runs: stdout without lines that start
/// with "time:" (the samples print their timing there).
fn compared_lines(stdout: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.trim_start().starts_with("time:"))
        .map(str::to_string)
        .collect()
}

/// What one verify run measured.
struct Measured {
    code: u8,
    wall_ns: u64,
    lines: Vec<String>,
    /// (transfer ns, kernel ns, transfers, bytes) when the trace has CUPTI device times.
    device: Option<(u64, u64, usize, u64)>,
    /// Why there are no device times.
    no_device: Option<String>,
    constructs: usize,
}

/// Removes the patched copy next to the source when verify ends.
struct Remove(PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn verify(
    args: &AnalyzeArgs,
    sources: &SourceSet,
    analysis: &Analysis,
    combined: &findings::Combined,
) -> anyhow::Result<u8> {
    let (Some(build), Some(run_cmd)) = (&args.build, &args.run_cmd) else {
        bail!("--verify needs --build CMD and --run CMD");
    };
    let files = patched_files(sources, combined, "verify")?;
    if files.len() != 1 {
        bail!(
            "--verify handles one patched source; this patch changes {}",
            files.len()
        );
    }
    let (src, text) = files[0];
    let tmp;
    let work: PathBuf = match &args.keep {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            d.clone()
        }
        None => {
            tmp = tempfile::Builder::new()
                .prefix("accprof-verify-")
                .tempdir()
                .context("cannot create a temporary directory")?;
            tmp.path().to_path_buf()
        }
    };
    // The patched copy goes to the work directory, or next to the original
    // when the source includes local files (so that they resolve).
    let ext = src
        .found_at
        .extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = src
        .found_at
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let copy = if has_local_includes(&src.text) {
        src.found_at.with_file_name(format!(
            "{stem}.accprof-verify-{}.{ext}",
            std::process::id()
        ))
    } else {
        work.join(format!("{stem}.accprof.{ext}"))
    };
    std::fs::write(&copy, text).with_context(|| format!("cannot write {}", copy.display()))?;
    let _cleanup = Remove(copy.clone());
    let ids: Vec<String> = combined
        .applied
        .iter()
        .map(|&i| format!("#{} {}", i + 1, analysis.findings[i].id))
        .collect();
    let mut report = String::new();
    report.push_str(&format!(
        "\nverify: {} patched with {}\n",
        src.found_at.display(),
        ids.join(", ")
    ));
    let mut measured = Vec::new();
    for (label, source) in [
        ("before", src.found_at.as_path()),
        ("after", copy.as_path()),
    ] {
        let program = work.join(format!("{label}.bin"));
        let cmd = build
            .replace("{src}", &sh_quote(source))
            .replace("{out}", &sh_quote(&program));
        let out = Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .output()
            .with_context(|| format!("cannot run the build command `{cmd}`"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err
                .lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            eprintln!("{}", tail.join("\n"));
            bail!("building the {label} version failed: `{cmd}`");
        }
        let words = split_words(&run_cmd.replace("{out}", &program.display().to_string()))?;
        let trace = work.join(format!("{label}.trace"));
        let _ = std::fs::remove_file(&trace);
        let c = crate::run::run_collected(&words, args.lib.as_deref(), &trace, args.hash)?;
        measured.push(measure(label, &c)?);
    }
    let (a, b) = (&measured[0], &measured[1]);
    let same_output = a.lines == b.lines;
    report.push_str(&format!("  build: {build}\n  run:   {run_cmd}\n"));
    report.push_str(&format!(
        "  output: {} (stdout compared line by line, {} lines, ignoring lines that start with \"time:\"); exit codes {} and {}\n",
        if same_output { "identical" } else { "DIFFERENT" },
        a.lines.len(),
        a.code,
        b.code
    ));
    if !same_output {
        if let Some((i, (x, y))) = a
            .lines
            .iter()
            .zip(&b.lines)
            .enumerate()
            .find(|(_, (x, y))| x != y)
        {
            report.push_str(&format!(
                "    first difference, line {}:\n      before: {x}\n      after:  {y}\n",
                i + 1
            ));
        } else {
            report.push_str(&format!(
                "    before has {} lines, after {}\n",
                a.lines.len(),
                b.lines.len()
            ));
        }
    }
    let ratio = |x: u64, y: u64| {
        if y == 0 {
            if x == 0 {
                "-".to_string()
            } else {
                "all of it gone".to_string()
            }
        } else if x >= y {
            format!("{:.1}x less", x as f64 / y as f64)
        } else {
            format!("{:.1}x more", y as f64 / x.max(1) as f64)
        }
    };
    report.push_str(&format!(
        "  {:<28} {:>12} {:>12}   {}\n",
        "", "before", "after", "ratio"
    ));
    match (a.device, b.device) {
        (Some(x), Some(y)) => {
            report.push_str(&format!(
                "  {:<28} {:>12} {:>12}   {}\n",
                "host<->device transfer time",
                units::duration_ns(x.0),
                units::duration_ns(y.0),
                ratio(x.0, y.0)
            ));
            report.push_str(&format!(
                "  {:<28} {:>12} {:>12}   {}\n",
                "  transfers (count, bytes)",
                format!("{} {}", x.2, units::bytes(x.3)),
                format!("{} {}", y.2, units::bytes(y.3)),
                ""
            ));
            report.push_str(&format!(
                "  {:<28} {:>12} {:>12}   {}\n",
                "kernel time",
                units::duration_ns(x.1),
                units::duration_ns(y.1),
                ratio(x.1, y.1)
            ));
        }
        _ => {
            let why = a
                .no_device
                .clone()
                .or_else(|| b.no_device.clone())
                .unwrap_or_default();
            report.push_str(&format!(
                "  {:<28} {:>12} {:>12}   not measured: {why}\n",
                "host<->device transfer time", "n/a", "n/a"
            ));
            report.push_str(&format!(
                "  {:<28} {:>12} {:>12}   not measured (same reason)\n",
                "kernel time", "n/a", "n/a"
            ));
        }
    }
    report.push_str(&format!(
        "  {:<28} {:>12} {:>12}   {}\n",
        "wall time (process)",
        units::duration_ns(a.wall_ns),
        units::duration_ns(b.wall_ns),
        ratio(a.wall_ns, b.wall_ns)
    ));
    report.push_str(&format!(
        "  {:<28} {:>12} {:>12}\n",
        "OpenACC constructs reached", a.constructs, b.constructs
    ));
    if args.keep.is_some() {
        report.push_str(&format!("  kept: {} (builds and traces)\n", work.display()));
    }
    crate::write_stdout(report.as_bytes())?;
    Ok(if same_output && a.code == b.code {
        0
    } else {
        1
    })
}

fn measure(label: &str, c: &crate::run::Collected) -> anyhow::Result<Measured> {
    let lines = compared_lines(&c.stdout);
    if !c.trace.is_file() {
        let err = String::from_utf8_lossy(&c.stderr);
        bail!(
            "the {label} run left no trace at {} (exit code {}): {}",
            c.trace.display(),
            c.code,
            err.lines().last().unwrap_or("")
        );
    }
    let run = accprof_analyzer::load_run(&c.trace)?;
    let (device, no_device) = if run.cupti_active() {
        let xfers: Vec<_> = run
            .copies
            .iter()
            .filter(|x| {
                matches!(
                    x.kind,
                    accprof_trace::CopyKind::HostToDevice | accprof_trace::CopyKind::DeviceToHost
                )
            })
            .collect();
        let t: u64 = xfers.iter().map(|x| x.duration_ns()).sum();
        let bytes: u64 = xfers.iter().map(|x| x.bytes).sum();
        let k: u64 = run.kernels.iter().map(|k| k.device_ns()).sum();
        (Some((t, k, xfers.len(), bytes)), None)
    } else {
        let mut why = match &run.header.sources.cupti {
            accprof_trace::SourceState::Inactive(w) => {
                format!("no CUPTI in this run ({w}); device times need it")
            }
            accprof_trace::SourceState::Active => String::new(),
        };
        // acc_device_host is 2 in the OpenACC API.
        if run.constructs.iter().any(|c| c.device_type == Some(2)) {
            why.push_str("; the program ran on the host fallback, where nothing is transferred");
        }
        (None, Some(why))
    };
    Ok(Measured {
        code: c.code,
        wall_ns: c.wall_ns,
        lines,
        device,
        no_device,
        constructs: run.constructs.iter().filter(|x| x.parent.is_none()).count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(
            split_words("a  b 'c d' \"e \\\" f\" g\\ h").unwrap_or_default(),
            ["a", "b", "c d", "e \" f", "g h"]
        );
        assert!(split_words("'x").is_err());
    }

    #[test]
    fn outputs_ignore_timing() {
        assert_eq!(compared_lines(b"a\ntime: 1.0 s\nb\n"), ["a", "b"]);
    }

    #[test]
    fn local_includes() {
        assert!(has_local_includes("#include \"a.h\"\nint x;"));
        assert!(has_local_includes("  include 'consts.inc'"));
        assert!(!has_local_includes("#include <stdio.h>"));
    }

    #[test]
    fn patched_copy_name() {
        assert_eq!(
            default_out(Path::new("/x/laplace_bad.c")),
            Path::new("/x/laplace_bad.accprof.c")
        );
        assert_eq!(default_out(Path::new("a.f90")), Path::new("a.accprof.f90"));
    }
}
