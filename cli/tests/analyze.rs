//! `accprof analyze` end to end on the H200 fixture traces: the text report,
//! JSON, the patch, --apply (the patched laplace_bad compiled for the host
//! with `gcc -fopenacc` still prints `reference: match`), --verify in host
//! fallback (no GPU here: transfer times are absent and the report says
//! so), and bad input (one line, exit code 2).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixtures() -> PathBuf {
    h200_fixtures()
}

fn fixture(name: &str) -> PathBuf {
    fixtures().join(format!("{name}.trace"))
}

/// `accprof analyze` with the fixture binaries and the repository's samples.
fn analyze(args: &[&str]) -> Output {
    let samples = repo().join("samples");
    let mut all = vec!["--source-dir", path_str(&samples)];
    all.extend_from_slice(args);
    analyze_only(&all)
}

/// `accprof analyze` with the fixture binaries, sources only as recorded
/// or as the arguments say.
fn analyze_only(args: &[&str]) -> Output {
    accprof_on_fixtures("analyze")
        .args(args)
        .output()
        .expect("accprof runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A directory holding a copy of `name` from samples/, and the
/// --source-map argument that makes the trace read it from there.
fn sample_copy(dir: &Path, name: &str) -> (PathBuf, String) {
    let dst = dir.join(name);
    std::fs::copy(repo().join("samples").join(name), &dst).expect("copy sample");
    (dst, format!("{H200_SAMPLES}={}", dir.display()))
}

#[test]
fn text_report_ranks_findings_with_lines_and_proposals() {
    let t = fixture("laplace_bad_c");
    let out = analyze(&[path_str(&t)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("#1 L3  single-gang launch at"), "{s}");
    assert!(s.contains("laplace_bad.c:154"), "{s}");
    assert!(s.contains("directive: #pragma acc parallel loop collapse(2) reduction(max:dt) // update and max change"), "{s}");
    assert!(
        s.contains("#2 D6  transfers repeated in every iteration of the `while` loop"),
        "{s}"
    );
    assert!(
        s.contains("directive: #pragma acc data copy(A) create(Anew)"),
        "{s}"
    );
    assert!(s.contains("Not checked, or limited:"), "{s}");
    assert!(
        s.contains("P1 (whole array sent when a small range changed) not checked"),
        "{s}"
    );
}

#[test]
fn json_is_typed_and_carries_the_patch() {
    let t = fixture("laplace_bad_f90");
    let out = analyze(&["--json", path_str(&t)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let findings = v["findings"].as_array().expect("findings");
    assert_eq!(findings[0]["rule"], "L3");
    assert_eq!(findings[0]["locations"][0]["line"], 65);
    let d6 = findings.iter().find(|f| f["rule"] == "D6").expect("D6");
    assert_eq!(d6["category"], "data_movement");
    assert_eq!(
        d6["proposal"]["directive"],
        "!$acc data copy(a) create(anew)"
    );
    let it = d6["evidence"]["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .find(|f| f["name"] == "iterations")
        .expect("iterations");
    assert_eq!(
        (it["unit"].as_str(), it["value"].as_u64()),
        (Some("count"), Some(20))
    );
    assert!(v["patch"]
        .as_str()
        .is_some_and(|p| p.contains("+  !$acc end data")));
    assert_eq!(v["hashing"], "sampled");
}

/// Each finding in JSON carries the handles of what it is about, as indices
/// into the run's tables: its locations' sites, and its sites, constructs,
/// kernels, transfers and allocations; and the transfers it saves (which
/// the text leaves out). The counts agree with the finding's evidence.
#[test]
fn json_findings_carry_the_handles_of_their_entities() {
    let t = fixture("laplace_bad_c");
    let out = analyze(&["--json", path_str(&t)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let indices = |v: &serde_json::Value| -> Vec<u64> {
        v.as_array()
            .unwrap_or_else(|| panic!("an array: {v}"))
            .iter()
            .map(|i| i.as_u64().unwrap_or_else(|| panic!("an index: {i}")))
            .collect()
    };
    let count = evidence_u64;
    let findings = v["findings"].as_array().expect("findings");
    for f in findings {
        let s = &f["subjects"];
        let sites = indices(&s["sites"]);
        for kind in ["constructs", "kernels", "transfers", "allocs"] {
            indices(&s[kind]);
        }
        for l in f["locations"].as_array().expect("locations") {
            match &l["site"] {
                serde_json::Value::Null => {}
                i => assert!(sites.contains(&i.as_u64().expect("an index")), "{f}"),
            }
        }
        let about = indices(&s["transfers"]);
        for t in indices(&f["saved_transfers"]) {
            assert!(about.contains(&t), "{}: saved {t}", f["rule"]);
        }
    }
    let d6 = findings.iter().find(|f| f["rule"] == "D6").expect("D6");
    assert_eq!(
        indices(&d6["subjects"]["transfers"]).len() as u64,
        count(d6, "upload_transfers") + count(d6, "download_transfers")
    );
    assert_eq!(
        indices(&d6["saved_transfers"]).len() as u64,
        count(d6, "avoidable_transfers")
    );
    assert_eq!(d6["locations"][0]["role"], "host loop");
    assert!(d6["locations"][0]["site"].is_null());
    let l3 = findings.iter().find(|f| f["rule"] == "L3").expect("L3");
    assert_eq!(
        indices(&l3["subjects"]["kernels"]).len() as u64,
        count(l3, "single_gang_launches")
    );
    let a1 = findings.iter().find(|f| f["rule"] == "A1").expect("A1");
    assert_eq!(
        indices(&a1["subjects"]["allocs"]).len() as u64,
        count(a1, "allocations")
    );
}

#[test]
fn patch_prints_the_unified_diff() {
    let t = fixture("laplace_bad_c");
    let out = analyze(&["--patch", path_str(&t)]);
    assert_eq!(out.status.code(), Some(0));
    let s = text(&out.stdout);
    assert!(s.starts_with("--- a/"), "{s}");
    assert!(
        s.contains(
            "+#pragma acc data copy(A) create(Anew)\n     while (dt > tol && iter < iters) {"
        ),
        "{s}"
    );
    assert!(s.contains("-#pragma acc kernels // update and max change\n+#pragma acc parallel loop collapse(2) reduction(max:dt) present(A, Anew) // update and max change"), "{s}");
}

/// `accprof analyze --patch` in `cwd`, reading laplace_bad.c from `src_dir`.
fn patch_from(cwd: &Path, src_dir: &Path) -> String {
    let out = Command::new(accprof())
        .current_dir(cwd)
        .arg("analyze")
        .arg("--patch")
        .arg("--symbols")
        .arg(fixtures().join("bin"))
        .arg("--source-map")
        .arg(format!("{H200_SAMPLES}={}", src_dir.display()))
        .arg(fixture("laplace_bad_c"))
        .env_remove("ACCPROF_SYMBOL_PATH")
        .output()
        .expect("accprof runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// Applies `diff` in `dir` with `cmd` (read from stdin); true on success.
fn applies(dir: &Path, cmd: &[&str], diff: &str) -> bool {
    use std::io::Write;
    let mut child = Command::new(cmd[0])
        .args(&cmd[1..])
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(diff.as_bytes())
        .expect("write");
    child.wait().expect("waits").success()
}

/// The patch names the file as `patch -p1` and `git apply` expect: from
/// the current directory when the source is under it, else from the top
/// of the git work tree that holds it.
#[test]
fn patch_paths_apply_with_patch_p1_and_git_apply() {
    if !need("git") || !need("patch") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = dir.path().join("proj");
    let src = repo.join("samples");
    std::fs::create_dir_all(&src).expect("mkdir");
    sample_copy(&src, "laplace_bad.c");
    let git = |args: &[&str]| {
        let st = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git runs");
        assert!(st.status.success(), "git {args:?}: {}", text(&st.stderr));
    };
    git(&["init", "-q"]);
    git(&["add", "."]);

    // From elsewhere: relative to the work tree.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let diff = patch_from(&elsewhere, &src);
    assert!(
        diff.starts_with("--- a/samples/laplace_bad.c\n+++ b/samples/laplace_bad.c\n"),
        "{diff}"
    );
    assert!(applies(&repo, &["git", "apply", "--check"], &diff));
    assert!(applies(&repo, &["patch", "-p1", "--dry-run", "-s"], &diff));

    // From the repository's top: the same names.
    assert_eq!(patch_from(&repo, &src), diff);

    // From the source's own directory: relative to it.
    let diff = patch_from(&src, &src);
    assert!(diff.starts_with("--- a/laplace_bad.c\n"), "{diff}");
    assert!(applies(&src, &["patch", "-p1", "--dry-run", "-s"], &diff));
}

/// The patched laplace_bad.c, compiled for the host with GCC's OpenACC,
/// computes what the CPU reference does.
#[test]
fn applied_patch_compiles_and_matches_the_reference() {
    if !need("gcc") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let patched = dir.path().join("laplace_bad.c");
    let t = fixture("laplace_bad_c");
    let out = analyze(&["--apply", "--out", path_str(&patched), path_str(&t)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("2 of 2 findings applied"),
        "{}",
        text(&out.stderr)
    );
    let src = std::fs::read_to_string(&patched).expect("patched file");
    assert!(src.contains("#pragma acc data copy(A) create(Anew)"));
    let exe = dir.path().join("laplace_bad");
    let cc = Command::new("gcc")
        .args(["-O2", "-fopenacc", "-foffload=disable"])
        .arg(&patched)
        .arg("-o")
        .arg(&exe)
        .arg("-lm")
        .output()
        .expect("gcc runs");
    assert!(cc.status.success(), "{}", text(&cc.stderr));
    let run = Command::new(&exe)
        .args(["128", "50", "0"])
        .output()
        .expect("runs");
    let s = text(&run.stdout);
    assert!(
        run.status.success() && s.contains("reference: match"),
        "{s}"
    );
}

#[test]
fn applied_fortran_patch_compiles_and_matches_the_reference() {
    if !need("gfortran") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let patched = dir.path().join("laplace_bad.f90");
    let t = fixture("laplace_bad_f90");
    let out = analyze(&["--apply", "--out", path_str(&patched), path_str(&t)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let exe = dir.path().join("laplace_bad_f90");
    let fc = Command::new("gfortran")
        .args(["-O2", "-fopenacc", "-foffload=disable"])
        .arg(&patched)
        .arg("-o")
        .arg(&exe)
        .current_dir(dir.path())
        .output()
        .expect("gfortran runs");
    assert!(fc.status.success(), "{}", text(&fc.stderr));
    let run = Command::new(&exe)
        .args(["128", "50", "0"])
        .output()
        .expect("runs");
    assert!(
        text(&run.stdout).contains("reference: match"),
        "{}",
        text(&run.stdout)
    );
}

/// `analyze --verify` of the laplace_bad_c fixture against a copy of its
/// source in `dir`, built with `build`, run as `{out} 64 10 0`, the two
/// versions kept in `dir`/verify (returned with the output).
fn verify_laplace_bad(dir: &Path, build: &str) -> (Output, PathBuf) {
    let lib = collector_lib();
    let (_, map) = sample_copy(dir, "laplace_bad.c");
    let t = fixture("laplace_bad_c");
    let keep = dir.join("verify");
    let out = analyze(&[
        "--source-map",
        &map,
        "--verify",
        "--lib",
        path_str(&lib),
        "--keep",
        path_str(&keep),
        "--build",
        build,
        "--run",
        "{out} 64 10 0",
        path_str(&t),
    ]);
    (out, keep)
}

/// --verify on this machine: no GPU, so libgomp runs the program on the
/// host and CUPTI is absent; the outputs are compared and the missing
/// transfer and kernel times are named as missing.
#[test]
fn verify_in_host_fallback() {
    if !need("gcc") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (out, keep) = verify_laplace_bad(
        dir.path(),
        "gcc -O2 -g -fopenacc -foffload=disable {src} -o {out} -lm",
    );
    let s = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", text(&out.stderr));
    assert!(s.contains("patched with #1 L3, #2 D6"), "{s}");
    assert!(
        s.contains("output: identical (stdout compared line by line, 5 lines, ignoring lines that start with \"time:\"); exit codes 0 and 0"),
        "{s}"
    );
    assert!(
        s.contains(
            "host<->device transfer time           n/a          n/a   not measured: no CUPTI"
        ),
        "{s}"
    );
    assert!(s.contains("host fallback"), "{s}");
    assert!(s.contains("wall time (process)"), "{s}");
    // 10 iterations of 2 constructs; the data region adds its enter and exit.
    assert!(
        s.contains("OpenACC constructs reached             20           22"),
        "{s}"
    );
    assert!(keep.join("before.trace").is_file() && keep.join("after.trace").is_file());
    // What each version printed, whole.
    for out in ["before.out", "after.out"] {
        let printed = std::fs::read_to_string(keep.join(out)).expect("output kept");
        assert!(
            printed.lines().any(|l| l == "reference: match"),
            "{out}: {printed}"
        );
    }
    // The source copy is untouched.
    let orig = std::fs::read_to_string(repo().join("samples/laplace_bad.c")).expect("sample");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("laplace_bad.c")).expect("copy"),
        orig
    );
}

/// `--ignore-lines`: a line that differs from run to run (here the pid of
/// the shell that ran the program, after its output) makes the outputs
/// DIFFERENT; named, it is not compared, and the report says so.
#[test]
fn verify_does_not_compare_the_lines_it_is_told_to_ignore() {
    if !need("gcc") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let lib = collector_lib();
    let (_, map) = sample_copy(dir.path(), "laplace_bad.c");
    let t = fixture("laplace_bad_c");
    let verify = |extra: &[&str]| {
        let mut args = vec![
            "--source-map",
            &map,
            "--verify",
            "--lib",
            path_str(&lib),
            "--build",
            "gcc -O2 -g -fopenacc -foffload=disable {src} -o {out} -lm",
            "--run",
            "sh -c '{out} 64 10 0; echo pid: $$'",
        ];
        args.extend_from_slice(extra);
        args.push(path_str(&t));
        analyze(&args)
    };
    let compared = verify(&[]);
    let s = text(&compared.stdout);
    assert!(s.contains("output: DIFFERENT (stdout compared line by line, 6 lines, ignoring lines that start with \"time:\")"), "{s}\n{}", text(&compared.stderr));
    assert_ne!(compared.status.code(), Some(0), "{s}");
    let ignoring = verify(&["--ignore-lines", "pid:"]);
    let s = text(&ignoring.stdout);
    assert_eq!(
        ignoring.status.code(),
        Some(0),
        "{s}\n{}",
        text(&ignoring.stderr)
    );
    assert!(
        s.contains("output: identical (stdout compared line by line, 5 lines, ignoring lines that start with \"time:\" or \"pid:\"); exit codes 0 and 0"),
        "{s}"
    );
}

/// {dir} with a one-file patch: each version is built from its own
/// directory holding a copy of laplace_bad.c, original or patched.
#[test]
fn verify_builds_a_one_file_patch_from_dir() {
    if !need("gcc") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (out, keep) = verify_laplace_bad(
        dir.path(),
        "gcc -O1 -fopenacc -foffload=disable {dir}/laplace_bad.c -o {out} -lm",
    );
    let s = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", text(&out.stderr));
    let src = dir.path().join("laplace_bad.c");
    assert!(
        s.contains(&format!(
            "verify: {} patched with #1 L3, #2 D6\n",
            src.display()
        )),
        "{s}"
    );
    assert!(s.contains("output: identical"), "{s}");
    assert!(
        s.contains("OpenACC constructs reached             20           22"),
        "{s}"
    );
    let orig = std::fs::read_to_string(&src).expect("source");
    let before = std::fs::read_to_string(keep.join("before/laplace_bad.c")).expect("before");
    let after = std::fs::read_to_string(keep.join("after/laplace_bad.c")).expect("after");
    assert_eq!(before, orig);
    assert!(
        after.contains("#pragma acc data copy(A) create(Anew)"),
        "{after}"
    );
}

/// `analyze --verify --prebuild DIR` of the laplace_bad_c fixture against
/// the copy of its source that `map` names, built with `build`.
fn prebuild_laplace_bad(map: &str, dir: &Path, build: &str) -> Output {
    analyze(&[
        "--source-map",
        map,
        "--verify",
        "--prebuild",
        path_str(dir),
        "--build",
        build,
        path_str(&fixture("laplace_bad_c")),
    ])
}

/// `analyze --verify --prebuilt DIR --run '{out} 64 10 0'` of the
/// laplace_bad_c fixture, with `extra` arguments before the trace.
fn prebuilt_laplace_bad(map: &str, dir: &Path, extra: &[&str]) -> Output {
    let (lib, trace) = (collector_lib(), fixture("laplace_bad_c"));
    let mut args = vec![
        "--source-map",
        map,
        "--verify",
        "--lib",
        path_str(&lib),
        "--prebuilt",
        path_str(dir),
        "--run",
        "{out} 64 10 0",
    ];
    args.extend_from_slice(extra);
    args.push(path_str(&trace));
    analyze(&args)
}

/// The lines of a --verify report that give its verdict and what ran.
fn verdict(report: &str) -> Vec<&str> {
    report
        .lines()
        .filter(|l| {
            l.starts_with("verify: ")
                || l.contains("output: ")
                || l.contains("OpenACC constructs reached")
                || l.starts_with("  run: ")
        })
        .collect()
}

/// Built here with --prebuild, run with --prebuilt (as on a machine
/// without the compiler): the verdict is plain --verify's.
#[test]
fn verify_prebuilt_gives_the_verdict_of_verify() {
    if !need("gcc") {
        return;
    }
    let build = "gcc -O1 -fopenacc -foffload=disable {src} -o {out} -lm";
    let dir = tempfile::tempdir().expect("temp dir");
    let (plain, _) = verify_laplace_bad(dir.path(), build);
    assert_eq!(plain.status.code(), Some(0), "{}", text(&plain.stderr));
    let (src, map) = sample_copy(dir.path(), "laplace_bad.c");
    let pre = dir.path().join("pre");
    let out = prebuild_laplace_bad(&map, &pre, build);
    let s = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", text(&out.stderr));
    assert!(
        s.contains(&format!(
            "prebuilt the original and the patched program of {} (patched with #1 L3, #2 D6) into {}:\n",
            src.display(),
            pre.display()
        )),
        "{s}"
    );
    let again = s
        .lines()
        .find(|l| l.starts_with("run them with: "))
        .unwrap_or_default();
    assert!(
        again.starts_with(&format!(
            "run them with: accprof analyze --verify --prebuilt {} --run '{{out}} ARGS' ",
            pre.display()
        )) && again.contains(&format!(" --source-map {map} "))
            && again.ends_with(path_str(&fixture("laplace_bad_c"))),
        "{s}"
    );
    assert!(!s.contains("\nverify: "), "nothing ran: {s}");
    assert!(pre.join("before.bin").is_file() && pre.join("after.bin").is_file());
    let list = std::fs::read_to_string(pre.join("verify.json")).expect("verify.json");
    assert!(list.contains("\"patch\": \"#1 L3, #2 D6\""), "{list}");

    let keep = dir.path().join("ran");
    let out = prebuilt_laplace_bad(&map, &pre, &["--keep", path_str(&keep)]);
    let s = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        plain.status.code(),
        "{s}\n{}",
        text(&out.stderr)
    );
    assert_eq!(verdict(&s), verdict(&text(&plain.stdout)), "{s}");
    assert!(s.contains(&format!("  build: prebuilt: {build}\n")), "{s}");
    assert!(keep.join("before.trace").is_file() && keep.join("after.trace").is_file());
}

/// Programs prebuilt for another patch, a directory --prebuild did not
/// make, a program missing: one line naming the directory, exit code 2.
#[test]
fn verify_prebuilt_refuses_programs_of_another_patch() {
    if !need("gcc") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (_, map) = sample_copy(dir.path(), "laplace_bad.c");
    let pre = dir.path().join("pre");
    let out = prebuild_laplace_bad(
        &map,
        &pre,
        "gcc -O1 -fopenacc -foffload=disable {src} -o {out} -lm",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let one_line = |out: &Output| {
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
        let err = text(&out.stderr);
        let last = err.lines().last().unwrap_or("").to_string();
        assert!(
            err.lines()
                .filter(|l| !l.contains("warning:") && !l.contains("note:"))
                .count()
                == 1,
            "{err}"
        );
        assert!(!text(&out.stdout).contains("\nverify: "), "nothing ran");
        last
    };
    // Only transfers of 10 MB and more examined: the trace's patch is
    // another one (L3 alone), over the same source.
    let out = prebuilt_laplace_bad(&map, &pre, &["--min-bytes", "10000000"]);
    let err = one_line(&out);
    assert!(
        err.starts_with(&format!(
            "accprof: {}: built for another patch (#1 L3, #2 D6 of laplace_bad.c), not this one (",
            pre.display()
        )) && err.ends_with(" of laplace_bad.c): rebuild them with --prebuild"),
        "{err}"
    );

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let err = one_line(&prebuilt_laplace_bad(&map, &empty, &[]));
    assert_eq!(
        err,
        format!(
            "accprof: {}: not made by `accprof analyze --verify --prebuild` (no verify.json in it)",
            empty.display()
        )
    );
    let none = dir.path().join("none");
    let err = one_line(&prebuilt_laplace_bad(&map, &none, &[]));
    assert_eq!(
        err,
        format!(
            "accprof: {}: not made by `accprof analyze --verify --prebuild` (no such directory)",
            none.display()
        )
    );

    std::fs::remove_file(pre.join("after.bin")).expect("rm");
    let err = one_line(&prebuilt_laplace_bad(&map, &pre, &[]));
    assert_eq!(
        err,
        format!(
            "accprof: {}: the after program is missing (rebuild them with --prebuild)",
            pre.join("after.bin").display()
        )
    );
}

/// A closed terminal (SIGHUP to the job) in the middle of --verify's build
/// stops it with 128 + the signal, and the patched copy it wrote beside a
/// source that includes local files is removed; the source is untouched.
#[test]
fn verify_stopped_by_sighup_leaves_nothing_beside_the_source() {
    use std::os::unix::process::CommandExt as _;
    let lib = collector_lib();
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, map) = sample_copy(dir.path(), "laplace_bad.c");
    // A local include on a blank line (the lines stay where the trace has
    // them): the patched copy is then written beside the source.
    let original = std::fs::read_to_string(&src).expect("source");
    let mut lines: Vec<&str> = original.split_inclusive('\n').collect();
    assert_eq!(lines[50], "\n", "line 51 of laplace_bad.c is blank");
    lines[50] = "#include \"extra.h\"\n";
    let with_include = lines.concat();
    std::fs::write(&src, &with_include).expect("source");
    std::fs::write(dir.path().join("extra.h"), "").expect("header");
    let keep = dir.path().join("verify");
    let mut child = accprof_on_fixtures("analyze")
        .args(["--source-map", &map, "--verify", "--lib"])
        .arg(&lib)
        .arg("--keep")
        .arg(&keep)
        .args([
            "--build",
            "touch {out}.started; sleep 3; gcc -O1 -fopenacc -foffload=disable {src} -o {out} -lm",
            "--run",
            "{out} 64 10 0",
        ])
        .arg(fixture("laplace_bad_c"))
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("accprof starts");
    let copies = || -> Vec<PathBuf> {
        std::fs::read_dir(dir.path())
            .expect("dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().contains(".accprof-verify-"))
            .collect()
    };
    let started = keep.join("before.bin.started");
    let start = std::time::Instant::now();
    while !started.exists() {
        if let Some(status) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            panic!(
                "accprof ended ({status}) before its build:\n{}",
                text(&out.stderr)
            );
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(120));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(copies().len(), 1, "the patched copy beside the source");
    // SAFETY: kill(2) of the process group this test started.
    let rc = unsafe { libc::kill(-(child.id() as i32), libc::SIGHUP) };
    assert_eq!(rc, 0);
    let out = child.wait_with_output().expect("accprof ends");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGHUP), "{err}");
    assert!(
        err.lines().any(|l| l == "accprof: interrupted before the before version was measured: the sources are untouched and no copy is left beside them"),
        "{err}"
    );
    assert_eq!(copies(), Vec::<PathBuf>::new());
    assert_eq!(std::fs::read_to_string(&src).expect("source"), with_include);
}

/// A build that fails stops --verify before anything runs: the compiler's
/// last lines, then one error naming the version, the exit code, the
/// command as run and what it said last; exit code 2.
#[test]
fn verify_names_a_failing_build() {
    let lib = collector_lib();
    let dir = tempfile::tempdir().expect("temp dir");
    let (_, map) = sample_copy(dir.path(), "laplace_bad.c");
    let t = fixture("laplace_bad_c");
    let out = analyze(&[
        "--source-map",
        &map,
        "--verify",
        "--lib",
        path_str(&lib),
        "--build",
        "echo 'first line' >&2; echo \"cc: error: cannot build {src}\" >&2; exit 4",
        "--run",
        "{out} 64 10 0",
        path_str(&t),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let src = dir.path().join("laplace_bad.c");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("accprof: building the before version failed (exit code 4): `echo 'first line' >&2; echo \"cc: error: cannot build ")
            && last.ends_with(&format!("exit 4`: cc: error: cannot build {}", src.display())),
        "{err}"
    );
    assert!(err.contains("first line\ncc: error: cannot build"), "{err}");
    assert!(!text(&out.stdout).contains("verify:"), "nothing measured");
}

#[test]
fn apply_never_overwrites_the_source_without_in_place() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (copy, map) = sample_copy(dir.path(), "laplace_bad.c");
    let t = fixture("laplace_bad_c");
    let out = analyze(&[
        "--source-map",
        &map,
        "--apply",
        "--out",
        path_str(&copy),
        path_str(&t),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("is the source itself: use --in-place"),
        "{err}"
    );
    // Default name next to the source.
    let out = analyze(&["--source-map", &map, "--apply", path_str(&t)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(dir.path().join("laplace_bad.accprof.c").is_file());
    let out = analyze(&["--source-map", &map, "--in-place", path_str(&t)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let patched = std::fs::read_to_string(&copy).expect("source");
    assert!(patched.contains("#pragma acc data copy(A) create(Anew)"));
    // Once patched, the source no longer matches the trace: set aside, not misread.
    let out = analyze_only(&["--source-map", &map, "--apply", path_str(&t)]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("changed since the run (line 148 holds no OpenACC directive"),
        "{err}"
    );
    assert!(text(&out.stdout).contains("does not match the run"));
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let out = analyze(&["/nonexistent/x.trace"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/x.trace"), "{err}");

    // Sources missing: findings still print, with a note; --apply fails clearly.
    let t = fixture("laplace_bad_c");
    let out = analyze_only(&[
        "--source-map",
        &format!("{H200_SAMPLES}=/nonexistent"),
        "--apply",
        path_str(&t),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot apply: source /work/main/samples/laplace_bad.c not found"),
        "{err}"
    );
    let s = text(&out.stdout);
    assert!(s.contains("L3") && s.contains("laplace_bad.c:154"), "{s}");
    assert!(s.contains("not found: its findings show lines only"), "{s}");

    let out = analyze(&["--verify", "--build", "true", path_str(&t)]);
    assert_eq!(out.status.code(), Some(2), "--verify needs --run");
}

/// The same bytes read the same in the extended summary and in the
/// findings: heat2d_naive's copyout at line 111 is the download D6 counts.
#[test]
fn sizes_read_the_same_in_the_summary_and_the_findings() {
    let t = fixture("heat2d_naive");
    let out = accprof_on_fixtures("report")
        .args(["--extended", path_str(&t)])
        .output()
        .expect("accprof runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary = text(&out.stdout);
    let lines: Vec<&str> = summary.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with("111: data copyout transfers"))
        .expect("a copyout line for line 111");
    let bytes_line = lines[at + 1..]
        .iter()
        .find(|l| l.trim_start().starts_with("bytes: "))
        .expect("its bytes");
    // "bytes: 10,485,760 (10.0 MiB)  bandwidth: ...": the exact count,
    // then the same count as the units module writes it.
    let rest = bytes_line.trim_start().trim_start_matches("bytes: ");
    let (exact, shown) = rest.split_once(" (").expect("bytes (size)");
    let exact: u64 = exact.replace(',', "").parse().expect("a byte count");
    let size = accprof_analyzer::units::bytes(exact);
    assert!(shown.starts_with(&format!("{size})")), "{bytes_line}");

    let out = analyze(&[path_str(&t)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The findings wrap their evidence: compare with one space between words.
    let findings = text(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        findings.contains(&format!("download bytes {size},")),
        "{size}: {findings}"
    );
}

/// Buffers the runtime did not name take the names of the executable's data
/// symbols, read from the copy that --symbols gives (ACCPROF_SYMBOLS_ONLY:
/// never from the path the trace recorded), with the sources out of reach
/// so the names cannot come from them. Without the binary they stay sizes.
#[test]
fn buffers_are_named_by_the_symbols_of_the_binary_given() {
    let t = fixture("laplace_bad_c");
    let unmapped = format!("{H200_SAMPLES}=/nonexistent");
    let no_sources = ["--source-map", unmapped.as_str()];
    let d6_title = |out: &Output| {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let s = text(&out.stdout);
        s.lines()
            .find(|l| l.contains(" D6 "))
            .unwrap_or_else(|| panic!("a D6 finding: {s}"))
            .to_string()
    };

    let mut args = no_sources.to_vec();
    args.push(path_str(&t));
    let named = d6_title(&analyze_only(&args));
    assert!(named.ends_with(": A, Anew moved 20 times"), "{named}");

    let unnamed = d6_title(
        &Command::new(accprof())
            .arg("analyze")
            .args(&args)
            .env_remove("ACCPROF_SYMBOL_PATH")
            .env("ACCPROF_SYMBOLS_ONLY", "1")
            .output()
            .expect("accprof runs"),
    );
    assert!(
        unnamed.ends_with(": 2 buffers of 8.03 MiB moved 20 times"),
        "{unnamed}"
    );
}

/// A directory flag that names no directory is an error of one line, exit
/// 2, in every command that takes it, not an empty place to look.
#[test]
fn missing_symbol_and_source_directories_are_errors() {
    let t = fixture("laplace_bad_c");
    let t = path_str(&t);
    let cases: [&[&str]; 8] = [
        &["analyze", "--symbols", "/nonexistent", t],
        &["analyze", "--source-dir", "/nonexistent", t],
        &["report", "--symbols", "/nonexistent", t],
        &["tui", "--symbols", "/nonexistent", t],
        &["tui", "--source-dir", "/nonexistent", t],
        &["export", "--format", "csv", "--symbols", "/nonexistent", t],
        &[
            "export",
            "--format",
            "json",
            "--source-dir",
            "/nonexistent",
            t,
        ],
        &["diff", "--source-dir", "/nonexistent", t, t],
    ];
    for args in cases {
        let out = Command::new(accprof())
            .args(args)
            .env_remove("ACCPROF_SYMBOL_PATH")
            .output()
            .expect("accprof runs");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        let at = args
            .iter()
            .position(|a| *a == "/nonexistent")
            .expect("a missing directory");
        let flag = args[at - 1];
        assert!(
            err.contains(&format!("{flag} /nonexistent: no such directory")),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// --source-dir wins over a file at the recorded path (on the recording
/// machine, or another checkout on this one), and --apply writes the
/// patched copy next to the file it read, naming it.
#[test]
fn source_dir_wins_and_apply_writes_where_it_read() {
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = dir.path().join("laplace_bad.c");
    // Marked, so the patched copy shows which file was read.
    let mut text_in =
        std::fs::read_to_string(repo().join("samples/laplace_bad.c")).expect("sample");
    text_in.push_str("/* the copy under --source-dir */\n");
    std::fs::write(&copy, &text_in).expect("write copy");
    let t = fixture("laplace_bad_c");
    let out = analyze_only(&[
        "--source-dir",
        path_str(dir.path()),
        "--apply",
        path_str(&t),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let written = dir.path().join("laplace_bad.accprof.c");
    let patched = std::fs::read_to_string(&written).expect("patched copy next to the copy");
    assert!(patched.contains("/* the copy under --source-dir */"));
    assert!(
        err.contains(&format!(
            "wrote {} from {} (",
            written.display(),
            copy.display()
        )),
        "{err}"
    );
    assert!(
        !Path::new(H200_SAMPLES)
            .join("laplace_bad.accprof.c")
            .exists(),
        "nothing written at the recorded path"
    );
}

/// Sets a file's modification time.
fn set_mtime(path: &Path, t: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(t))
        .expect("set mtime");
}

/// A source edited after the binary was built (here by --in-place) may
/// not be what ran: the next analysis says so instead of reading its new
/// clauses as the run's. Built and written at the same time, nothing is
/// said.
#[test]
fn a_source_newer_than_the_binary_is_said() {
    let dir = tempfile::tempdir().expect("temp dir");
    let h100 = repo().join("cli/tests/fixtures/h100");
    let (bin, src) = (dir.path().join("bin"), dir.path().join("src"));
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::copy(h100.join("bin/caller_loop"), bin.join("caller_loop")).expect("copy binary");
    std::fs::copy(
        repo().join("samples/caller_loop.c"),
        src.join("caller_loop.c"),
    )
    .expect("copy sample");
    let built = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    set_mtime(&bin.join("caller_loop"), built);
    set_mtime(&src.join("caller_loop.c"), built);
    let map = format!("{H100_CALLER_SAMPLES}={}", src.display());
    let run = |extra: &[&str]| {
        Command::new(accprof())
            .arg("analyze")
            .arg("--symbols")
            .arg(&bin)
            .args(["--source-map", &map])
            .args(extra)
            .arg(h100.join("caller_loop.trace"))
            .env_remove("ACCPROF_SYMBOL_PATH")
            .env("ACCPROF_SYMBOLS_ONLY", "1")
            .output()
            .expect("accprof runs")
    };
    let out = run(&["--in-place"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("after the binary"), "{err}");
    assert!(err.contains("in place"), "{err}");

    let out = run(&[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "warning: source {H100_CALLER_SAMPLES}/caller_loop.c: {} was modified ",
            src.join("caller_loop.c").display()
        )) && err.contains(&format!(
            "after the binary {} was built",
            bin.join("caller_loop").display()
        )),
        "{err}"
    );
    // The finding that read the edited clauses says where its reason
    // may come from (the report's lines wrapped, read as one).
    let s = text(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(s.contains("has no data clauses to move there"), "{s}");
    assert!(
        s.contains(&format!(
            "(but {} was modified",
            src.join("caller_loop.c").display()
        )),
        "{s}"
    );
}

/// A file that only holds a caller of a construct (caller_files.c, whose
/// loop repeats the construct of caller_files_step.c) is a source of the
/// run too: edited after the build, it is said.
#[test]
fn a_caller_only_source_newer_than_the_binary_is_said() {
    let dir = tempfile::tempdir().expect("temp dir");
    let h100 = repo().join("cli/tests/fixtures/h100");
    let (bin, src) = (dir.path().join("bin"), dir.path().join("src"));
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::copy(h100.join("bin/caller_files"), bin.join("caller_files")).expect("copy binary");
    let built = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    set_mtime(&bin.join("caller_files"), built);
    for (name, t) in [
        ("caller_files.c", std::time::SystemTime::now()),
        ("caller_files_step.c", built),
    ] {
        std::fs::copy(repo().join("samples").join(name), src.join(name)).expect("copy sample");
        set_mtime(&src.join(name), t);
    }
    let out = Command::new(accprof())
        .arg("analyze")
        .arg("--symbols")
        .arg(&bin)
        .arg("--source-map")
        .arg(format!("{H100_CALLER_SAMPLES}={}", src.display()))
        .arg(h100.join("caller_files.trace"))
        .env_remove("ACCPROF_SYMBOL_PATH")
        .env("ACCPROF_SYMBOLS_ONLY", "1")
        .output()
        .expect("accprof runs");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("after the binary"))
        .collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(
        said[0].contains(&format!("source {H100_CALLER_SAMPLES}/caller_files.c:")),
        "{err}"
    );
}

/// A finding's rule has one name everywhere: `rule` in `analyze --json`
/// and in the findings table that `export` writes, with the same values in
/// the same order.
#[test]
fn the_rule_key_is_the_same_in_analyze_json_and_the_findings_csv() {
    let t = fixture("laplace_bad_c");
    let json = analyze(&["--json", path_str(&t)]);
    assert_eq!(json.status.code(), Some(0), "{}", text(&json.stderr));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("valid JSON");
    let from_json: Vec<String> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            assert!(f.get("id").is_none(), "no second name for the rule: {f}");
            f["rule"].as_str().expect("a rule").to_string()
        })
        .collect();
    assert!(!from_json.is_empty());
    let csv = accprof_on_fixtures("export")
        .args(["--source-dir", path_str(&repo().join("samples"))])
        .args([path_str(&t), "--format", "csv", "--what", "findings"])
        .output()
        .expect("accprof runs");
    assert_eq!(csv.status.code(), Some(0), "{}", text(&csv.stderr));
    let mut rows = csv::Reader::from_reader(csv.stdout.as_slice());
    let col = rows
        .headers()
        .expect("a header")
        .iter()
        .position(|h| h == "rule")
        .expect("a rule column");
    let from_csv: Vec<String> = rows
        .records()
        .map(|r| r.expect("a row")[col].to_string())
        .collect();
    assert_eq!(from_json, from_csv);
}
