//! No patch accprof proposes for a sample program changes what the
//! program prints. The patches come from two kinds of traces: each sample
//! with quick arguments (`make -C samples args`) built with the samples'
//! Makefile and recorded here (no GPU: libgomp runs the constructs on the
//! host), and every GPU fixture trace of a sample (cli/tests/fixtures),
//! whose transfers give the data and coherence rules their patches. Where
//! `analyze --patch` has a patch, `analyze --verify` builds the original
//! and the patched copy with the same Makefile, runs both on the host with
//! the sample's quick arguments and compares what they print.
//!
//! Here the programs run on the host, where data clauses and updates do
//! nothing: a patch that moves or guards them cannot change the output
//! here, only its structure and compiling are checked. On a GPU machine,
//! `ACCPROF_TEST_OFFLOAD=yes` builds the verified programs for the GPU;
//! there a sample whose point is a coherence bug says so itself
//! (`reference: MISMATCH`, exit status 1), and its patch must make it
//! right (exit status 0) rather than keep its output. On a GPU machine
//! without an offload compiler, bench/patches_gpu.sh builds the GPU
//! fixtures' patched programs here (`prepare`) and checks them there
//! (`run`); which traces it takes is its `list`, read by the test below.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn repo_samples() -> PathBuf {
    // The Makefile names its sources by their absolute path, as the
    // binaries' line tables then do.
    repo()
        .join("samples")
        .canonicalize()
        .expect("samples folder")
}

fn ps(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `make args`: (sample, its quick arguments).
fn quick_samples() -> Vec<(String, Vec<String>)> {
    let out = Command::new("make")
        .args(["-s", "-C"])
        .arg(repo_samples())
        .arg("args")
        .output()
        .expect("make runs");
    assert!(out.status.success(), "make args: {}", stderr(&out));
    stdout(&out)
        .lines()
        .filter(|l| !l.starts_with("samples:"))
        .filter_map(|l| {
            let mut w = l.split_whitespace().map(str::to_string);
            Some((w.next()?, w.collect()))
        })
        .collect()
}

/// A folder in `dir` holding a copy of every file of samples/: the
/// analysis reads the sources there, and --verify copies them from there.
fn samples_copy(dir: &Path) -> PathBuf {
    let copy = dir.join("samples");
    std::fs::create_dir_all(&copy).expect("mkdir");
    for e in std::fs::read_dir(repo_samples()).expect("samples") {
        let p = e.expect("entry").path();
        if p.is_file() {
            std::fs::copy(&p, copy.join(p.file_name().expect("name"))).expect("copy");
        }
    }
    copy
}

/// What became of one trace.
enum Checked {
    /// The patch (its findings) verified: same output, same exit code.
    Same(String),
    /// The original said its result was wrong (`reference: MISMATCH`),
    /// the patched program's own check passed.
    Fixed(String),
    NoPatch,
    /// What went wrong, with accprof's words.
    Failed(String),
}

/// `accprof analyze` of `trace` reading its sources from `copy`, with
/// `symbols` (a fixture's bin/, read alone) when given.
fn analyze(trace: &Path, copy: &Path, symbols: Option<&Path>, extra: &[&str]) -> Output {
    let mut cmd = Command::new(accprof());
    cmd.arg("analyze").arg("--source-dir").arg(copy);
    if let Some(s) = symbols {
        cmd.arg("--symbols")
            .arg(s)
            .env_remove("ACCPROF_SYMBOL_PATH")
            .env("ACCPROF_SYMBOLS_ONLY", "1");
    }
    cmd.args(extra).arg(trace).output().expect("accprof runs")
}

/// Whether the original, as --verify ran it, said its own result was
/// wrong (a coherence bug on a GPU): its output, kept in `keep`.
fn said_mismatch(keep: &Path) -> bool {
    std::fs::read_to_string(keep.join("before.out"))
        .is_ok_and(|o| o.lines().any(|l| l == "reference: MISMATCH"))
}

/// The patch of `trace`, if any, checked by --verify with `program` (a
/// target of the samples' Makefile) run with `args`.
fn check(
    trace: &Path,
    symbols: Option<&Path>,
    program: &str,
    args: &[String],
    copy: &Path,
    keep: &Path,
) -> Checked {
    let out = analyze(trace, copy, symbols, &["--patch"]);
    if out.status.code() != Some(0) {
        return Checked::Failed(format!("analyze --patch: {}", stderr(&out)));
    }
    if stdout(&out).trim().is_empty() {
        return Checked::NoPatch;
    }
    // Each version is built by the samples' Makefile from a folder holding
    // the files the patch changes (original or patched) and the rest of
    // samples/ beside them.
    let offload = std::env::var("ACCPROF_TEST_OFFLOAD").unwrap_or_else(|_| "no".into());
    let build = format!(
        "cp -n {}/* {{dir}}/ 2>/dev/null; make -s -C {{dir}} BUILD=build OFFLOAD={offload} build/{program} >/dev/null && cp {{dir}}/build/{program} {{out}}",
        copy.display()
    );
    let run = format!("{{out}} {}", args.join(" "));
    let lib = collector_lib();
    let out = analyze(
        trace,
        copy,
        symbols,
        &[
            "--verify",
            "--lib",
            ps(&lib),
            "--keep",
            ps(keep),
            "--build",
            &build,
            "--run",
            &run,
        ],
    );
    let s = stdout(&out);
    let patched = s
        .lines()
        .find_map(|l| l.split_once(" patched with "))
        .map(|(_, p)| p.to_string());
    match (out.status.code(), patched) {
        (Some(0), Some(p)) if s.contains("output: identical") => Checked::Same(p),
        (Some(1), Some(p)) if s.contains("exit codes 1 and 0") && said_mismatch(keep) => {
            Checked::Fixed(p)
        }
        _ => Checked::Failed(format!("analyze --verify:\n{s}\n{}", stderr(&out))),
    }
}

/// What was checked, said on stderr; the test fails on any failure.
struct Tally {
    same: Vec<String>,
    fixed: Vec<String>,
    no_patch: Vec<String>,
    failed: Vec<String>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            same: Vec::new(),
            fixed: Vec::new(),
            no_patch: Vec::new(),
            failed: Vec::new(),
        }
    }

    fn add(&mut self, what: String, c: Checked) {
        match c {
            Checked::Same(p) => self.same.push(format!("{what} ({p})")),
            Checked::Fixed(p) => self.fixed.push(format!("{what} ({p})")),
            Checked::NoPatch => self.no_patch.push(what),
            Checked::Failed(why) => self.failed.push(format!("{what}: {why}")),
        }
    }

    /// Says what was checked, fails on a failure, and checks that each of
    /// `want` (a beginning) was among the patched.
    fn finish(&self, want: &[&str]) {
        let report = format!(
            "patched, same output: {}\npatched, a wrong result made right: {}\nno patch: {}\nfailed:\n{}",
            self.same.join(", "),
            self.fixed.join(", "),
            self.no_patch.join(", "),
            self.failed.join("\n")
        );
        eprintln!("{report}");
        assert!(self.failed.is_empty(), "{report}");
        for w in want {
            assert!(self.same.iter().any(|s| s.starts_with(w)), "{w}\n{report}");
        }
    }
}

#[test]
fn every_patch_of_the_samples_recorded_here_keeps_their_output() {
    if !need("gcc") || !need("gfortran") || !need("g++") {
        return;
    }
    let built = samples();
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = samples_copy(dir.path());
    let mut tally = Tally::new();
    for (name, args) in quick_samples() {
        let traces_dir = dir.path().join(&name);
        std::fs::create_dir_all(&traces_dir).expect("mkdir");
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = accprof_run(&traces_dir, &["--no-summary"], &built.join(&name), &a);
        let t = traces(&traces_dir);
        let what = format!("{name} {}", args.join(" "));
        let c = match t.as_slice() {
            // On a GPU a coherence sample's bug shows (exit status 1).
            [trace]
                if out.status.success()
                    || stdout(&out).lines().any(|l| l == "reference: MISMATCH") =>
            {
                check(
                    trace,
                    None,
                    &name,
                    &args,
                    &copy,
                    &dir.path().join(format!("{name}-verify")),
                )
            }
            _ => Checked::Failed(format!("accprof run: {t:?}: {}", stderr(&out))),
        };
        tally.add(what, c);
    }
    // The fusion samples are among those patched, so the list said is
    // what was checked, not an empty pass.
    tally.finish(&["fuse_triple ", "fuse_grid ", "launch_shapes "]);
}

/// The GPU fixture traces whose patch changes a sample, with the
/// sample's program and quick arguments, as bench/patches_gpu.sh selects
/// them for its check on a GPU machine (its `list`, with `copy` as the
/// samples): one rule for both. A line per trace: `sample TRACE PROGRAM
/// ARGS`, `none TRACE`, `other TRACE FILES` or `noargs TRACE PROGRAM`,
/// tab-separated, TRACE relative to the repository.
fn gpu_fixture_selection(copy: &Path) -> Vec<Vec<String>> {
    let out = Command::new("bash")
        .arg(repo().join("bench/patches_gpu.sh"))
        .args(["list", "--accprof"])
        .arg(accprof())
        .arg("--samples")
        .arg(copy)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "patches_gpu.sh list: {}",
        stderr(&out)
    );
    stdout(&out)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

#[test]
fn every_patch_of_the_gpu_fixtures_keeps_the_programs_output() {
    if !need("gcc") || !need("gfortran") || !need("g++") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = samples_copy(dir.path());
    let mut tally = Tally::new();
    let mut others = Vec::new();
    let selection = gpu_fixture_selection(&copy);
    assert!(
        selection.len() > 50,
        "every fixture trace is listed: {selection:?}"
    );
    for line in selection {
        let [kind, rel, rest @ ..] = line.as_slice() else {
            panic!("patches_gpu.sh list: {line:?}");
        };
        let trace = repo().join(rel);
        let gpu = trace.parent().expect("fixture folder");
        let what = format!(
            "{}/{}",
            gpu.file_name().and_then(|n| n.to_str()).unwrap_or(""),
            trace.file_name().and_then(|n| n.to_str()).unwrap_or("")
        );
        match (kind.as_str(), rest) {
            ("none", []) => tally.add(what, Checked::NoPatch),
            // NPB and TeaLeaf: their sources are not in this repository.
            ("other", [files]) => others.push(format!("{what} ({})", files.trim())),
            ("noargs", [program]) => tally.add(
                what,
                Checked::Failed(format!("{program}: no quick arguments in `make args`")),
            ),
            ("sample", [program, args]) => {
                let args: Vec<String> = args.split_whitespace().map(str::to_string).collect();
                let keep = dir.path().join(what.replace('/', "-"));
                let c = check(&trace, Some(&gpu.join("bin")), program, &args, &copy, &keep);
                tally.add(format!("{what} as {program}"), c);
            }
            _ => panic!("patches_gpu.sh list: {line:?}"),
        }
    }
    eprintln!("not samples, not checked: {}", others.join(", "));
    // The data and coherence rules' patches are among those checked.
    tally.finish(&["h100/caller_files.trace", "h200/laplace_bad_c.trace"]);
}
