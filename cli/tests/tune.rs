//! `accprof tune` on real programs in OpenACC host fallback (no GPU here):
//! the sweep completes and says its times are host construct times, writes
//! its files, runs prebuilt programs; a SIGINT or SIGHUP in the middle of a
//! build leaves the source byte for byte as it was, with its times, and the
//! cache to resume from; after a SIGKILL the next run restores it from the
//! original kept beside it.

mod support;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use support::{accprof, collector_lib, stderr, stdout};

const BUILD: &str = "gcc -g -O1 -fopenacc -foffload=disable {src} -o {out} -lm";

/// A copy of samples/launch_shapes.c in a fresh directory (the tuner
/// patches the source in place while it builds).
fn sample(dir: &Path) -> (PathBuf, Vec<u8>) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/launch_shapes.c");
    let bytes = std::fs::read(&from).expect("sample");
    let to = dir.join("launch_shapes.c");
    std::fs::write(&to, &bytes).expect("copy");
    (to, bytes)
}

/// `accprof tune` of launch_shapes.c's `loop vector` construct (line 86),
/// built with [`BUILD`], run as `{out} 64 4`.
fn tune_launch_shapes(dir: &Path) -> Command {
    let mut c = tune(dir);
    c.args([
        "--at",
        "launch_shapes.c:86",
        "--build",
        BUILD,
        "--run",
        "{out} 64 4",
    ]);
    c
}

/// Gives `path` access and modification times long past (with
/// nanoseconds) and returns them, as [`times`] reads them.
fn age(path: &Path) -> (SystemTime, SystemTime) {
    let at = SystemTime::UNIX_EPOCH + Duration::new(1_600_000_000, 123_456_789);
    let mt = SystemTime::UNIX_EPOCH + Duration::new(1_500_000_000, 987_654_321);
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open");
    f.set_times(std::fs::FileTimes::new().set_accessed(at).set_modified(mt))
        .expect("set times");
    times(path)
}

/// Access and modification times (read from the metadata: reading the
/// file itself may set its access time).
fn times(path: &Path) -> (SystemTime, SystemTime) {
    let m = std::fs::metadata(path).expect("metadata");
    (m.accessed().expect("atime"), m.modified().expect("mtime"))
}

/// Where the tuner keeps the original of `src` while it is patched.
fn backup(src: &Path) -> PathBuf {
    let name = src.file_name().expect("name").to_string_lossy();
    src.with_file_name(format!(".{name}.accprof-orig"))
}

/// `accprof tune` of launch_shapes.c:86 in a process group of its own (a
/// terminal's job), with a build that marks its start and sleeps; returns
/// once the build of `vector_length=32` has started: the source is
/// patched then, and the build still sleeping.
fn tune_until_patched_build(dir: &Path) -> Child {
    let build = format!("touch {{out}}.started; sleep 3; {BUILD}");
    let mut cmd = tune(dir);
    cmd.args([
        "--at",
        "launch_shapes.c:86",
        "--build",
        &build,
        "--run",
        "{out} 64 2",
    ])
    .args([
        "--space",
        "vector_length=32,64",
        "--repeats",
        "1",
        "--recheck",
        "0",
        "--out",
        "t",
    ])
    .process_group(0)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("accprof starts");
    let started = dir.join("t/bin/vector_length_32.started");
    let start = Instant::now();
    while !started.exists() {
        if let Some(status) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            panic!(
                "accprof ended ({status}) before its patched build:\n{}",
                stderr(&out)
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no patched build in 120 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Sends `sig` to the whole process group of `child` (accprof, its build
/// and the build's compiler), as a closed terminal or `kill -9 -PGID` does.
fn signal_group(child: &Child, sig: i32) {
    // SAFETY: kill(2) of the process group this test started.
    let rc = unsafe { libc::kill(-(child.id() as i32), sig) };
    assert_eq!(rc, 0);
}

fn tune(dir: &Path) -> Command {
    let mut c = Command::new(accprof());
    c.arg("tune")
        .arg("--lib")
        .arg(collector_lib())
        .current_dir(dir)
        .stdin(Stdio::null());
    c
}

#[test]
fn a_host_fallback_sweep_completes_on_host_construct_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, original) = sample(dir.path());
    let before = age(&src);
    let out = tune_launch_shapes(dir.path())
        .args([
            "--space",
            "vector_length=32,64",
            "--repeats",
            "2",
            "--recheck",
            "1",
        ])
        .args(["--out", "t"])
        .output()
        .expect("accprof runs");
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    // Its times as they were (a build that compares them sees no change),
    // then its bytes.
    assert_eq!(times(&src), before, "times restored");
    assert_eq!(
        std::fs::read(&src).expect("source"),
        original,
        "source restored"
    );
    assert!(!backup(&src).exists(), "no original left beside it");
    assert!(
        text.contains("device: host; time: host construct time (no device time in these runs)"),
        "{text}"
    );
    assert!(
        text.contains("vector_length: `vector_length(N)` patched into the source"),
        "{text}"
    );
    for row in ["default ", "vector_length=32 ", "vector_length=64 "] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(row)),
            "{row}: {text}"
        );
    }
    assert!(text.contains("cost: 3 builds"), "{text}");
    // Every sample is in the CSV: 3 warm-ups, 3 x 2 measured, maybe a re-check.
    let csv = std::fs::read_to_string(dir.path().join("t/samples.csv")).expect("csv");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert!(rows.len() >= 9, "{csv}");
    assert!(
        rows.iter().all(|r| r.split(',').nth(2) == Some("host")),
        "{csv}"
    );
    assert_eq!(
        rows.iter().filter(|r| r.contains(",measure,")).count(),
        6,
        "{csv}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("t/result.json")).expect("json"))
            .expect("parses");
    assert_eq!(json["timing"], "host");
    assert_eq!(json["outcomes"].as_array().map(Vec::len), Some(3));
    let svg = std::fs::read_to_string(dir.path().join("t/time-vs-vector_length.svg")).expect("svg");
    assert!(
        svg.starts_with("<svg") && svg.contains("vector_length"),
        "{svg:.200}"
    );
}

#[test]
fn prebuilt_programs_run_without_a_build() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, original) = sample(dir.path());
    let pre = tune(dir.path())
        .args(["--at", "launch_shapes.c:82", "--build", BUILD])
        .args(["--space", "vector_length=32,64,96", "--prebuild", "pre"])
        .output()
        .expect("accprof runs");
    assert!(pre.status.success(), "{}", stderr(&pre));
    assert_eq!(std::fs::read(&src).expect("source"), original);
    assert!(
        stdout(&pre).starts_with("prebuilt 4 programs"),
        "{}",
        stdout(&pre)
    );
    let out = tune(dir.path())
        .args([
            "--at",
            "launch_shapes.c:82",
            "--prebuilt",
            "pre",
            "--run",
            "{out} 64 2",
        ])
        .args([
            "--space",
            "vector_length=32,64,96",
            "--repeats",
            "1",
            "--recheck",
            "0",
        ])
        .args(["--out", "t"])
        .output()
        .expect("accprof runs");
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(
        text.contains("vector_length: programs built ahead of time"),
        "{text}"
    );
    assert!(text.contains("cost: 0 builds"), "{text}");
    // While a sweep that builds holds the source, prebuilt programs still
    // run (they only read it); another sweep that builds is refused.
    let held = accprof_tuner::backup::claim(&src).expect("claims");
    let again = tune(dir.path())
        .args(["--at", "launch_shapes.c:82", "--prebuilt", "pre"])
        .args(["--run", "{out} 64 2", "--space", "vector_length=32"])
        .args(["--repeats", "1", "--recheck", "0", "--out", "t2"])
        .output()
        .expect("accprof runs");
    assert!(again.status.success(), "{}", stderr(&again));
    let building = tune(dir.path())
        .args(["--at", "launch_shapes.c:82", "--build", BUILD])
        .args(["--run", "{out} 64 2", "--space", "vector_length=32"])
        .output()
        .expect("accprof runs");
    assert_eq!(building.status.code(), Some(2), "{}", stderr(&building));
    assert!(
        stderr(&building).contains("is being patched by another accprof run"),
        "{}",
        stderr(&building)
    );
    drop(held);
    // A source that changed since the prebuild is refused.
    std::fs::write(&src, [original.as_slice(), b"\n"].concat()).expect("edit");
    let stale = tune(dir.path())
        .args([
            "--at",
            "launch_shapes.c:82",
            "--prebuilt",
            "pre",
            "--run",
            "{out} 64 2",
        ])
        .args(["--space", "vector_length=32"])
        .output()
        .expect("accprof runs");
    assert_eq!(stale.status.code(), Some(2));
    assert!(
        stderr(&stale).contains("built from another version"),
        "{}",
        stderr(&stale)
    );
}

#[test]
fn sigint_mid_sweep_restores_the_source_and_the_next_run_resumes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, original) = sample(dir.path());
    // A slow build, so that the signal comes while the source is patched.
    let build = format!("sleep 1; {BUILD}");
    let args = |c: &mut Command| {
        c.args([
            "--at",
            "launch_shapes.c:86",
            "--build",
            &build,
            "--run",
            "{out} 64 2",
        ])
        .args([
            "--space",
            "vector_length=32,64,256",
            "--repeats",
            "2",
            "--recheck",
            "0",
        ])
        .args(["--out", "t"]);
    };
    let mut cmd = tune(dir.path());
    args(&mut cmd);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("accprof starts");
    // Wait for the second patched build (the default and the first
    // configuration are measured by then).
    let start = Instant::now();
    let mut patched = 0;
    let mut was_patched = false;
    while patched < 2 {
        if let Some(status) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            panic!(
                "accprof ended ({status}) before its second patched build:\n{}",
                stderr(&out)
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no second patched build in 120 s"
        );
        let now = std::fs::read(&src).expect("source") != original;
        if now && !was_patched {
            patched += 1;
        }
        was_patched = now;
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) with the pid of the child this test started.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0);
    let out = child.wait_with_output().expect("accprof ends");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted: the source is restored"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(&src).expect("source"),
        original,
        "byte-identical"
    );
    let cached = std::fs::read_to_string(dir.path().join("t/cache.jsonl")).expect("cache");
    assert!(cached.lines().count() >= 4, "{cached}");

    // The same command again reuses what was measured.
    let mut cmd = tune(dir.path());
    args(&mut cmd);
    let out = cmd.output().expect("accprof runs");
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(text.contains("samples from the cache"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("vector_length=32") && l.contains("cached")),
        "{text}"
    );
    assert_eq!(std::fs::read(&src).expect("source"), original);
}

#[test]
fn sighup_mid_build_restores_the_source_and_its_times() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, original) = sample(dir.path());
    let before = age(&src);
    let child = tune_until_patched_build(dir.path());
    assert_ne!(std::fs::read(&src).expect("source"), original, "patched");
    // A second tune of the same file meanwhile is refused, and leaves the
    // first one's patch and original alone.
    let second = tune_launch_shapes(dir.path())
        .args(["--space", "vector_length=64", "--out", "t3"])
        .output()
        .expect("accprof runs");
    assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    assert_eq!(
        stderr(&second).trim_end(),
        "accprof: launch_shapes.c is being patched by another accprof run (a tune running now): wait for it to end"
    );
    assert!(backup(&src).exists());
    // A closed terminal: SIGHUP to the job, the build's sleep included.
    signal_group(&child, libc::SIGHUP);
    let out = child.wait_with_output().expect("accprof ends");
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGHUP),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("interrupted: the source is restored"),
        "{}",
        stderr(&out)
    );
    assert_eq!(times(&src), before, "times restored");
    assert_eq!(std::fs::read(&src).expect("source"), original);
    assert!(!backup(&src).exists());
    // The next run finds nothing to repair and measures the original.
    let out = tune_launch_shapes(dir.path())
        .args(["--space", "vector_length=32", "--repeats", "1"])
        .args(["--recheck", "0", "--out", "t2"])
        .output()
        .expect("accprof runs");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("killed"), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("gang vector_length(128) present"),
        "{}",
        stdout(&out)
    );
}

/// A build without `{out}` leaves its program where it puts it; when
/// that one was built from a patched text, the restored source keeps a
/// new modification time (its own would tell `make` that the tuned
/// program is up to date), and the report says so.
#[test]
fn a_program_built_in_place_from_a_patch_leaves_the_source_newer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, original) = sample(dir.path());
    let before = age(&src);
    let build = BUILD.replace("{out}", "ls");
    let out = tune(dir.path())
        .args(["--at", "launch_shapes.c:86", "--build", &build])
        .args(["--run", "./ls 64 2", "--space", "vector_length=32"])
        .args(["--repeats", "1", "--recheck", "0", "--out", "t"])
        .output()
        .expect("accprof runs");
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(times(&src).1 > before.1, "newer than the program");
    assert_eq!(std::fs::read(&src).expect("source"), original);
    assert!(!backup(&src).exists());
    assert!(
        text.contains("launch_shapes.c is restored with a new modification time: the build left its program in place, built from a patched text; rebuild it"),
        "{text}"
    );
}

/// SIGKILL cannot be caught: the source stays patched, with its original
/// beside it, and the next run that touches it (`analyze --apply`, then
/// `tune`) restores the original, bytes and times, and says so.
#[test]
fn after_sigkill_the_next_run_restores_the_original() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, original) = sample(dir.path());
    // A trace of the program built from the original, for `analyze`.
    let exe = dir.path().join("launch_shapes");
    let built = Command::new("sh")
        .arg("-c")
        .arg(
            BUILD
                .replace("{src}", "launch_shapes.c")
                .replace("{out}", "launch_shapes"),
        )
        .current_dir(dir.path())
        .output()
        .expect("gcc runs");
    assert!(built.status.success(), "{}", stderr(&built));
    let trace = dir.path().join("ls.trace");
    let ran = Command::new(accprof())
        .args(["run", "--no-summary", "--lib"])
        .arg(collector_lib())
        .arg("--output")
        .arg(&trace)
        .arg("--")
        .arg(&exe)
        .args(["64", "2"])
        .output()
        .expect("accprof runs");
    assert!(ran.status.success(), "{}", stderr(&ran));
    let mut before = age(&src);
    let killed = |what: &str, before: (SystemTime, SystemTime)| {
        let child = tune_until_patched_build(dir.path());
        signal_group(&child, libc::SIGKILL);
        let out = child.wait_with_output().expect("accprof ends");
        assert_eq!(out.status.code(), None, "{what}: killed");
        assert_ne!(
            std::fs::read(&src).expect("source"),
            original,
            "{what}: left patched"
        );
        // The original beside it, with its times (compared first: reading
        // it would set the access time kept there).
        assert_eq!(times(&backup(&src)), before, "{what}");
        let _ = std::fs::remove_dir_all(dir.path().join("t/bin"));
    };
    // The source as the trace names it.
    let repaired = |err: &str| {
        assert!(
            err.lines().any(|l| l.starts_with("accprof: ")
                && l.contains("launch_shapes.c was left patched by an accprof run that was killed: restored the original from ")
                && l.ends_with(".launch_shapes.c.accprof-orig")),
            "{err}"
        );
    };

    killed("first kill", before);
    assert_eq!(
        std::fs::read(backup(&src)).expect("the original beside it"),
        original
    );
    // Only reading, analyze says so and leaves the file as it is.
    let out = Command::new(accprof())
        .arg("analyze")
        .arg(&trace)
        .current_dir(dir.path())
        .output()
        .expect("accprof runs");
    assert!(
        stderr(&out)
            .lines()
            .any(|l| l.starts_with("accprof: warning: ")
                && l.contains(".launch_shapes.c.accprof-orig holds the original of ")
                && l.contains("an accprof run that was killed left it patched")),
        "{}",
        stderr(&out)
    );
    assert_ne!(std::fs::read(&src).expect("source"), original);
    let out = Command::new(accprof())
        .args(["analyze", "--apply"])
        .arg(&trace)
        .current_dir(dir.path())
        .output()
        .expect("accprof runs");
    repaired(&stderr(&out));
    // (analyze then read it, as any reader sets its access time.)
    assert_eq!(times(&src).1, before.1, "modification time restored");
    assert_eq!(std::fs::read(&src).expect("source"), original);
    assert!(!backup(&src).exists());
    assert!(
        !stderr(&out).contains("modified"),
        "the source is as old as it was: {}",
        stderr(&out)
    );

    // Its times again after this test read it.
    before = age(&src);
    killed("second kill", before);
    let src_arg = "launch_shapes.c";
    let out = tune(dir.path())
        .args(["--at", &format!("{src_arg}:86"), "--build", BUILD])
        .args(["--run", "{out} 64 2", "--space", "vector_length=32"])
        .args(["--repeats", "1", "--recheck", "0", "--out", "t"])
        .output()
        .expect("accprof runs");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let says = format!(
        "accprof: {src_arg} was left patched by an accprof run that was killed: restored the original from {}",
        backup(Path::new(src_arg)).display()
    );
    assert!(err.lines().any(|l| l == says), "{err}");
    // The default measured is the original directive, not the patch.
    assert!(
        stdout(&out).contains("gang vector_length(128) present"),
        "{}",
        stdout(&out)
    );
    assert_eq!(times(&src), before, "times restored");
    assert_eq!(std::fs::read(&src).expect("source"), original);
    assert!(!backup(&src).exists());
}

/// A program that dies of SIGSEGV in every run: no table that recommends
/// keeping its default, but one line that says so, and a failure.
#[test]
fn a_sweep_whose_every_run_dies_says_so_and_fails() {
    let dir = tempfile::tempdir().expect("temp dir");
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/signal.c");
    std::fs::copy(&from, dir.path().join("signal.c")).expect("copy");
    let line = support::directive_lines(&from, &["parallel"])[0];
    let out = tune(dir.path())
        .args(["--at", &format!("signal.c:{line}"), "--build", BUILD])
        .args(["--run", "{out} SEGV", "--space", "vector_length=32,64"])
        .args(["--repeats", "1", "--recheck", "0", "--out", "t"])
        .output()
        .expect("accprof runs");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}\n{}", stdout(&out));
    assert_eq!(
        err.trim_end(),
        "accprof: every run died: all 6 runs of `{out} SEGV` were killed by SIGSEGV \
         (exit code 139); nothing is recommended (the program crashes: fix it, or its \
         arguments, before tuning)"
    );
    assert!(!stdout(&out).contains("recommended"), "{}", stdout(&out));
}

/// A second sweep answered wholly from the cache writes the samples it
/// decided on, not one warm-up row.
#[test]
fn a_cached_rerun_keeps_every_sample_in_the_csv() {
    let dir = tempfile::tempdir().expect("temp dir");
    sample(dir.path());
    let sweep = || {
        let out = tune_launch_shapes(dir.path())
            .args(["--space", "vector_length=32,64", "--repeats", "2"])
            .args(["--recheck", "0", "--out", "t"])
            .output()
            .expect("accprof runs");
        assert!(out.status.success(), "{}", stderr(&out));
        let csv = std::fs::read_to_string(dir.path().join("t/samples.csv")).expect("csv");
        (stdout(&out), csv)
    };
    let measured = |csv: &str| -> Vec<String> {
        let mut rows: Vec<String> = csv
            .lines()
            .filter(|r| r.contains(",measure,"))
            .map(|r| r.rsplit_once(',').map_or(r, |(row, _)| row).to_string())
            .collect();
        rows.sort();
        rows
    };
    let (_, first) = sweep();
    assert!(first
        .lines()
        .next()
        .is_some_and(|h| h.ends_with(",exit_code,cached")));
    let (text, again) = sweep();
    assert!(text.contains("samples from the cache"), "{text}");
    assert_eq!(measured(&again), measured(&first), "{first}\n{again}");
    assert!(
        again
            .lines()
            .filter(|r| r.contains(",measure,"))
            .all(|r| r.ends_with(",true")),
        "{again}"
    );
}

/// A rerun that keeps the default leaves no earlier winner's patch (nor
/// plot) behind, and a configuration that fails to build says the
/// compiler's first error, not the caret under it, and where its whole
/// log is.
#[test]
fn a_failed_build_names_its_error_and_a_kept_default_leaves_no_old_patch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, original) = sample(dir.path());
    let t = dir.path().join("t");
    std::fs::create_dir_all(&t).expect("out dir");
    // What an earlier sweep that recommended vector_length=64 left.
    std::fs::write(t.join("winner.patch"), "--- a/launch_shapes.c\n").expect("old patch");
    std::fs::write(t.join("time-vs-vector_length.svg"), "<svg/>").expect("old plot");
    let out = tune_launch_shapes(dir.path())
        .args(["--variant", "parallel loop gang vector_lenght(64)"])
        .args(["--repeats", "1", "--recheck", "0", "--out", "t"])
        .output()
        .expect("accprof runs");
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert_eq!(std::fs::read(&src).expect("source"), original);
    assert!(text.contains("recommended: keep the default"), "{text}");
    assert!(!t.join("winner.patch").exists(), "{text}");
    assert!(!t.join("time-vs-vector_length.svg").exists(), "{text}");
    assert!(!text.contains("winner.patch"), "{text}");
    let row = text
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("directive=parallel loop gang vector_lenght(64)")
        })
        .unwrap_or_else(|| panic!("no row: {text}"));
    let (said, log) = row
        .split_once("failed: build failed (exit code 1): `")
        .and_then(|(_, r)| r.split_once("`: "))
        .and_then(|(_, r)| r.split_once("; full log: "))
        .unwrap_or_else(|| panic!("{row}"));
    assert!(
        said.starts_with("launch_shapes.c:86:")
            && said.contains(": error: ")
            && said.contains("vector_lenght"),
        "{said}"
    );
    assert!(
        log.starts_with("t/build-directive_parallel_loop_gang"),
        "{log}"
    );
    let full = std::fs::read_to_string(dir.path().join(log.trim())).expect("the log");
    assert!(full.starts_with("$ gcc "), "{full}");
    assert!(full.contains(said), "{full}");
    // The caret under the quoted source is in the log, not the row.
    assert!(
        full.lines()
            .any(|l| l.trim_start().starts_with("| ") && l.contains('^')),
        "{full}"
    );
    assert!(!row.contains('^'), "{row}");
}

#[test]
fn bad_arguments_are_one_line_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    sample(dir.path());
    for (args, says) in [
        (
            vec![
                "--at",
                "launch_shapes.c:3",
                "--build",
                BUILD,
                "--run",
                "{out}",
                "--space",
                "vector_length=64",
            ],
            "no OpenACC directive at launch_shapes.c:3",
        ),
        (
            vec![
                "--at",
                "launch_shapes.c:79",
                "--build",
                BUILD,
                "--run",
                "{out}",
                "--space",
                "vector_length=64",
            ],
            "is not a compute construct",
        ),
        (
            vec![
                "--at",
                "nope.c:3",
                "--build",
                BUILD,
                "--run",
                "{out}",
                "--space",
                "vector_length=64",
            ],
            "--at nope.c: no such file",
        ),
        (
            vec![
                "--at",
                "launch_shapes.c:82",
                "--build",
                BUILD,
                "--run",
                "{out}",
                "--space",
                "vl=64",
            ],
            "unknown parameter `vl`",
        ),
        (
            vec![
                "--at",
                "launch_shapes.c:82",
                "--build",
                BUILD,
                "--run",
                "{out}",
                "--space",
                "vector_length=64",
                "--config-time",
                "inf",
            ],
            "--config-time inf: not a number of seconds",
        ),
        (
            vec![
                "--at",
                "launch_shapes.c:82",
                "--build",
                BUILD,
                "--run",
                "{out}",
                "--space",
                "vector_length=64",
                "--config-time",
                "1e400",
            ],
            "--config-time 1e400: not a number of seconds",
        ),
        (
            vec![
                "--at",
                "launch_shapes.c:82",
                "--build",
                BUILD,
                "--run",
                "{out}",
                "--space",
                "vector_length=64",
                "--config-time",
                "nan",
            ],
            "--config-time nan: not a number of seconds",
        ),
        (
            vec![
                "--at",
                "launch_shapes.c:82",
                "--build",
                BUILD,
                "--run",
                "{out}",
                "--space",
                "vector_length=64",
                "--max-time",
                "inf",
            ],
            "--max-time inf: not a number of seconds",
        ),
    ] {
        let out = tune(dir.path()).args(&args).output().expect("accprof runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
}

/// Without a device the launch findings still read the source: L1 at the
/// vector_length(48) loop, L2 at the 16 iterations under 128 lanes, both
/// costed in host construct time; L4 needs launch dimensions, which the
/// host fallback does not report.
#[test]
fn launch_shapes_in_host_fallback_gets_l1_and_l2_from_its_source() {
    let dir = tempfile::tempdir().expect("temp dir");
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples");
    let exe = dir.path().join("launch_shapes");
    let built = Command::new("gcc")
        .args(["-g", "-O1", "-fopenacc", "-foffload=disable"])
        .arg(samples.join("launch_shapes.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-lm")
        .output()
        .expect("gcc runs");
    assert!(built.status.success(), "{}", stderr(&built));
    let trace = dir.path().join("t.trace");
    let ran = Command::new(accprof())
        .args(["run", "--no-summary", "--lib"])
        .arg(collector_lib())
        .arg("--output")
        .arg(&trace)
        .arg("--")
        .arg(&exe)
        .args(["64", "4"])
        .output()
        .expect("accprof runs");
    assert!(ran.status.success(), "{}", stderr(&ran));
    let out = Command::new(accprof())
        .args(["analyze", "--json", "--source-dir"])
        .arg(&samples)
        .arg(&trace)
        .output()
        .expect("accprof runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let findings = json["findings"].as_array().cloned().unwrap_or_default();
    let mut launch: Vec<(String, u64)> = findings
        .iter()
        .filter(|f| f["category"] == "launch")
        .map(|f| {
            (
                f["rule"].as_str().unwrap_or("").to_string(),
                f["locations"][0]["line"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    launch.sort();
    assert_eq!(
        launch,
        [("L1".to_string(), 82), ("L2".to_string(), 86)],
        "{findings:?}"
    );
    for f in findings.iter().filter(|f| f["category"] == "launch") {
        let fields = f["evidence"]["fields"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            fields.iter().any(|x| x["name"] == "host_time"),
            "{} is costed in host time: {fields:?}",
            f["rule"]
        );
        let tune = f["proposal"]["tune"].as_str().unwrap_or("");
        assert!(tune.starts_with("accprof tune --at "), "{tune}");
        assert!(tune.contains("--run '{out} 64 4'"), "{tune}");
    }
}

/// No measured run per configuration is refused as no warm-up is: a
/// median of one sample has an interval of no width.
#[test]
fn zero_repeats_are_refused_as_zero_warmups_are() {
    let dir = tempfile::tempdir().expect("temp dir");
    sample(dir.path());
    for flag in ["--warmup", "--repeats", "--min-repeats", "--max-repeats"] {
        let out = tune(dir.path())
            .args([
                "--at",
                "launch_shapes.c:82",
                "--build",
                BUILD,
                "--run",
                "{out}",
                "--space",
                "vector_length=64",
                flag,
                "0",
            ])
            .output()
            .expect("accprof runs");
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = stderr(&out);
        assert!(
            err.lines()
                .next()
                .is_some_and(|l| l.contains(&format!("invalid value '0' for '{flag} <N>'"))),
            "{flag}: {err}"
        );
        assert!(
            !dir.path().join("accprof-tune").exists(),
            "{flag}: nothing ran"
        );
    }
}
