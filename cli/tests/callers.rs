//! Call chains: the collector keeps the application's callers above each
//! call site (from the unwind that found it) and the analyzer symbolizes
//! them, inlined functions included, so a construct in a function called
//! from a loop knows that loop's line. Host fallback: the runtime still
//! reports the constructs.

mod support;

use std::path::Path;

use accprof_analyzer::{load_run, ConstructClass, Run};
use support::*;

/// Runs a sample under the collector and loads its trace.
fn traced(dir: &Path, name: &str, args: &[&str]) -> Run {
    let trace = dir.join(format!("{name}.trace"));
    let out = preloaded(&samples().join(name), &trace)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("sample runs");
    assert!(out.status.success(), "{name}: {}", stderr(&out));
    assert!(stdout(&out).contains("reference: match"), "{name}");
    load_run(&trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display()))
}

/// (file name, function, line) of each frame above the sites of the
/// compute constructs at `line` of `file`, one list per distinct site.
fn chains(run: &Run, file: &str, line: u32) -> Vec<Vec<(String, String, u32)>> {
    let mut sites: Vec<_> = run
        .constructs()
        .filter(|(_, c)| c.class == ConstructClass::Compute)
        .map(|(_, c)| c.site)
        .filter(|&s| {
            let site = run.site(s);
            site.file.ends_with(file) && site.line == Some(line)
        })
        .collect();
    sites.sort();
    sites.dedup();
    sites
        .into_iter()
        .map(|s| {
            run.callers(s)
                .iter()
                .map(|f| {
                    let name = f.file.rsplit('/').next().unwrap_or(&f.file).to_string();
                    (name, f.function.clone(), f.line.unwrap_or(0))
                })
                .collect()
        })
        .collect()
}

fn has_frame(chain: &[(String, String, u32)], file: &str, function: &str, line: u32) -> bool {
    chain
        .iter()
        .any(|(f, func, l)| f == file && func == function && *l == line)
}

#[test]
fn a_construct_called_from_another_file_knows_its_callers_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = traced(dir.path(), "caller_files", &["16", "12", "3"]);
    let line = directive_lines(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/caller_files_step.c"),
        &["parallel"],
    )[0];
    let chains = chains(&run, "caller_files_step.c", line);
    assert_eq!(chains.len(), 1, "one call site: {chains:?}");
    // heat_step is called from main at two lines; the site's chain is the
    // one the first call saw.
    let c = &chains[0];
    assert_eq!(
        c.first().map(|f| (f.0.as_str(), f.1.as_str())),
        Some(("caller_files.c", "main")),
        "{c:?}"
    );
    assert!(has_frame(c, "caller_files.c", "main", 111), "{c:?}");
}

#[test]
fn inlined_callers_count_as_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = traced(dir.path(), "caller_loop", &["16", "12", "3"]);
    let chains = chains(&run, "caller_loop.c", 78);
    assert!(!chains.is_empty(), "no site at line 78");
    // Whether GCC inlined heat_step and advance or not, each site's frames
    // lead through advance (line 93 or 94) to main's call at line 135.
    for c in &chains {
        assert!(
            has_frame(c, "caller_loop.c", "advance", 93)
                || has_frame(c, "caller_loop.c", "advance", 94),
            "{c:?}"
        );
        assert!(has_frame(c, "caller_loop.c", "main", 135), "{c:?}");
    }
}

#[test]
fn fortran_callers_are_found_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = traced(dir.path(), "caller_loop_f90", &["16", "12", "3"]);
    let chains = chains(&run, "caller_loop.f90", 37);
    assert!(!chains.is_empty(), "no site at line 37");
    for c in &chains {
        assert!(
            c.iter()
                .any(|(f, _, l)| f == "caller_loop.f90" && (*l == 77 || *l == 78)),
            "{c:?}"
        );
    }
}

/// `accprof analyze --patch` on the H100 recording of caller_files: one
/// diff over both files, which applies to the repository's samples and
/// builds (host code: the patched program still matches its reference).
#[test]
fn the_patch_for_a_caller_in_another_file_applies_and_builds() {
    let fixtures = accprof_analyzer::testkit::fixtures::dir("h100");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new(accprof())
        .arg("analyze")
        .arg("--patch")
        .arg("--symbols")
        .arg(fixtures.join("bin"))
        .arg("--source-dir")
        .arg(repo.join("samples"))
        .arg(fixtures.join("caller_files.trace"))
        .env_remove("ACCPROF_SYMBOL_PATH")
        .env("ACCPROF_SYMBOLS_ONLY", "1")
        .output()
        .expect("accprof runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let diff = stdout(&out);
    assert_eq!(
        diff.matches("\n+++ ").count() + usize::from(diff.starts_with("+++ ")),
        2,
        "{diff}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    for f in ["caller_files.c", "caller_files_step.c", "caller_files.h"] {
        std::fs::copy(repo.join("samples").join(f), dir.path().join(f)).expect("copy");
    }
    // The diff names the files by their recorded paths; their names here.
    let mut p = std::process::Command::new("patch")
        .args(["-p0", "-s", "-d"])
        .arg(dir.path())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("patch runs");
    let local: String = diff
        .lines()
        .map(
            |l| match l.strip_prefix("--- ").or_else(|| l.strip_prefix("+++ ")) {
                Some(path) => format!(
                    "{} {}\n",
                    &l[..3],
                    Path::new(path.split('\t').next().unwrap_or(path))
                        .file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or(path)
                ),
                None => format!("{l}\n"),
            },
        )
        .collect();
    use std::io::Write;
    p.stdin
        .take()
        .expect("stdin")
        .write_all(local.as_bytes())
        .expect("diff written");
    assert!(p.wait().expect("patch ends").success(), "{local}");
    let bin = dir.path().join("cf");
    let cc = std::process::Command::new("gcc")
        .args(["-fopenacc", "-foffload=disable", "-O2"])
        .arg(dir.path().join("caller_files.c"))
        .arg(dir.path().join("caller_files_step.c"))
        .arg("-o")
        .arg(&bin)
        .arg("-lm")
        .output()
        .expect("gcc runs");
    assert!(cc.status.success(), "{}", stderr(&cc));
    let run = std::process::Command::new(&bin)
        .args(["16", "12", "3"])
        .output()
        .expect("patched program runs");
    assert!(
        stdout(&run).contains("reference: match"),
        "{}",
        stdout(&run)
    );
    let step = std::fs::read_to_string(dir.path().join("caller_files_step.c")).expect("read");
    assert!(
        step.contains("present(u[0:nx*ny], unew[0:nx*ny])"),
        "{step}"
    );
}

/// `accprof analyze --verify` of the two-file patch of caller_files (its
/// H100 recording, sources from samples/): both versions built for the
/// host from {dir}, a directory of copies of both files and the header
/// they include; same output before and after, both files named.
#[test]
fn verify_builds_a_patch_over_two_files_from_dir() {
    if !need("gcc-12") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let keep = dir.path().join("verify");
    let out = verify_caller_files(
        &keep,
        "gcc-12 -fopenacc -foffload=disable -O1 {dir}/caller_files.c {dir}/caller_files_step.c -o {out} -lm",
    );
    let s = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", stderr(&out));
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples");
    let first = s.lines().find(|l| l.starts_with("verify: ")).unwrap_or("");
    assert!(
        first.contains("caller_files.c, ") && first.contains("caller_files_step.c patched with "),
        "{s}"
    );
    assert!(first.contains(" D6"), "{s}");
    assert!(
        s.contains("output: identical (stdout compared line by line, "),
        "{s}"
    );
    assert!(s.contains("exit codes 0 and 0"), "{s}");
    // Each version's directory: both files, original or patched, and the
    // header beside them; the samples themselves are untouched.
    for f in ["caller_files.c", "caller_files_step.c", "caller_files.h"] {
        let orig = std::fs::read_to_string(samples.join(f)).expect("sample");
        let before = std::fs::read_to_string(keep.join("before").join(f)).expect("before copy");
        assert_eq!(before, orig, "{f}");
        assert!(keep.join("after").join(f).is_file(), "{f}");
    }
    let step = std::fs::read_to_string(keep.join("after/caller_files_step.c")).expect("after");
    assert!(
        step.contains("present(u[0:nx*ny], unew[0:nx*ny])"),
        "{step}"
    );
    let main = std::fs::read_to_string(keep.join("after/caller_files.c")).expect("after");
    assert!(main.contains("#pragma acc data"), "{main}");
    assert!(keep.join("before.trace").is_file() && keep.join("after.trace").is_file());
}

/// A two-file patch with a build command that does not use {dir}, or a
/// build that fails: one clear error, exit code 2, nothing measured.
#[test]
fn verify_of_two_files_fails_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keep = dir.path().join("verify");
    let out = verify_caller_files(&keep, "gcc-12 -fopenacc {src} -o {out}");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("the patch changes 2 files (caller_files.c, caller_files_step.c): the build command must build their copies in {dir} (`cc {dir}/caller_files.c {dir}/caller_files_step.c -o {out}`)"),
        "{err}"
    );
    assert!(!stdout(&out).contains("verify:"), "nothing measured");

    let out = verify_caller_files(&keep, "echo \"cc: error: no {dir}\" >&2; exit 3");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("accprof: building the before version failed (exit code 3): ")
            && last.ends_with(&format!(
                "`: cc: error: no {}",
                keep.join("before").display()
            )),
        "{err}"
    );
    assert!(!stdout(&out).contains("verify:"), "nothing measured");
}

fn verify_caller_files(keep: &Path, build: &str) -> std::process::Output {
    let fixtures = accprof_analyzer::testkit::fixtures::dir("h100");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::process::Command::new(accprof())
        .arg("analyze")
        .arg("--symbols")
        .arg(fixtures.join("bin"))
        .arg("--source-dir")
        .arg(repo.join("samples"))
        .arg("--verify")
        .arg("--lib")
        .arg(collector_lib())
        .arg("--keep")
        .arg(keep)
        .args(["--build", build, "--run", "{out} 64 48 3"])
        .arg(fixtures.join("caller_files.trace"))
        .env_remove("ACCPROF_SYMBOL_PATH")
        .env("ACCPROF_SYMBOLS_ONLY", "1")
        .output()
        .expect("accprof runs")
}

/// queue_files on the host: each step function's construct (in
/// queue_files_step.c) knows its caller's line in the time loop of
/// queue_files.c, which is how the launch-bound loop finding reaches both
/// files. A host run has no device and no driver timings, so no launch
/// finding fires on it: the patch itself is tested on the sources
/// (proposals::queue) until a GPU recording is a fixture.
#[test]
fn queue_files_constructs_know_the_time_loop_in_the_other_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = traced(dir.path(), "queue_files", &["64", "5"]);
    let step = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/queue_files_step.c");
    let lines = directive_lines(&step, &["parallel"]);
    assert_eq!(lines, [17, 25]);
    for (line, call) in lines.into_iter().zip([82, 83]) {
        let chains = chains(&run, "queue_files_step.c", line);
        assert_eq!(chains.len(), 1, "line {line}: {chains:?}");
        assert!(
            has_frame(&chains[0], "queue_files.c", "main", call),
            "line {line}: {:?}",
            chains[0]
        );
    }
    let trace = dir.path().join("queue_files.trace");
    let out = std::process::Command::new(accprof())
        .arg("analyze")
        .arg(&trace)
        .arg("--source-dir")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples"))
        .output()
        .expect("analyze runs");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains(" L5 "), "{}", stdout(&out));
}
