//! End to end: programs run under `accprof run` with the collector preloaded
//! (host fallback here: no GPU), their traces read back and checked against
//! what the source says they do.

mod support;

use std::path::Path;
use std::process::Command;

use accprof_analyzer::{load_run, ConstructClass, Run};
use support::*;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn only_trace(dir: &Path) -> Run {
    let t = traces(dir);
    assert_eq!(t.len(), 1, "expected one trace in {}: {t:?}", dir.display());
    load_run(&t[0]).expect("trace loads")
}

/// Top-level compute constructs, as (file name, line).
fn compute_sites(run: &Run) -> Vec<(String, Option<u32>)> {
    run.constructs()
        .map(|(_, x)| x)
        .filter(|c| c.class == ConstructClass::Compute && c.parent.is_none())
        .map(|c| {
            let s = run.site(c.site);
            let name = Path::new(&s.file)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, s.line)
        })
        .collect()
}

/// Runs a sample under the collector and checks it still computes the right
/// result, that its compute constructs were all seen, and that each is
/// attributed to a line of its source that holds a compute directive.
fn check_sample(exe: &str, src: &str, args: &[&str], expected_computes: usize) -> Run {
    let dir = tempdir();
    let bin = samples().join(exe);
    let out = accprof_run(dir.path(), &["--no-summary"], &bin, args);
    assert!(out.status.success(), "{exe}: {}", stderr(&out));
    assert!(
        stdout(&out).contains("reference: match"),
        "{exe}: {}",
        stdout(&out)
    );
    let run = only_trace(dir.path());
    assert!(run.process.header.sources.acc_prof.is_active());
    let sites = compute_sites(&run);
    assert_eq!(sites.len(), expected_computes, "{exe}: compute constructs");
    let src_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../samples")
        .join(src);
    let lines = directive_lines(&src_path, &["parallel", "kernels", "serial"]);
    for (file, line) in &sites {
        assert_eq!(file, src, "{exe}: attributed to {file}");
        let line = line.unwrap_or_else(|| panic!("{exe}: no line for a compute construct"));
        assert!(
            lines.contains(&line),
            "{exe}: compute construct at line {line}, directives at {lines:?}"
        );
    }
    run
}

#[test]
fn laplace_bad_c_two_kernels_regions_per_iteration() {
    // laplace_bad.c: two `kernels` regions in the iteration loop.
    let run = check_sample("laplace_bad", "laplace_bad.c", &["64", "5", "0"], 2 * 5);
    let distinct: std::collections::BTreeSet<_> = compute_sites(&run).into_iter().collect();
    assert_eq!(
        distinct.len(),
        2,
        "two distinct compute lines: {distinct:?}"
    );
}

#[test]
fn laplace_good_c_attributed() {
    check_sample("laplace_good", "laplace_good.c", &["64", "5", "0"], 2 * 5);
}

#[test]
fn laplace_fortran_attributed() {
    check_sample(
        "laplace_bad_f90",
        "laplace_bad.f90",
        &["64", "5", "0"],
        2 * 5,
    );
    check_sample(
        "laplace_good_f90",
        "laplace_good.f90",
        &["64", "5", "0"],
        2 * 5,
    );
}

#[test]
fn nvhpc_style_fields_are_recorded() {
    let dir = tempdir();
    let exe = program("nvhpc_driver");
    let out = accprof_run(dir.path(), &["--no-summary"], &exe, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("registered events: 25"),
        "{}",
        stdout(&out)
    );
    let run = only_trace(dir.path());
    let sites = compute_sites(&run);
    assert_eq!(sites, vec![("solver.c".to_string(), Some(42)); 3]);
    let (first_id, first) = run.constructs().next().expect("a construct");
    let site = run.site(first.site);
    assert_eq!(site.function, "solve");
    // Without CUPTI the runtime's upload events are the copies; the
    // download's struct was cut before var_name, which must stay unread.
    let uploads: Vec<_> = run
        .transfers()
        .map(|(_, x)| x)
        .filter(|c| c.kind == accprof_trace::CopyKind::HostToDevice)
        .collect();
    assert_eq!(uploads.len(), 3);
    assert_eq!(uploads[0].variable.map(|v| run.name(v)), Some("a[0:1000]"));
    assert_eq!(uploads[0].bytes, 8000);
    let downloads: Vec<_> = run
        .transfers()
        .map(|(_, x)| x)
        .filter(|c| c.kind == accprof_trace::CopyKind::DeviceToHost)
        .collect();
    assert_eq!(downloads.len(), 3);
    assert!(downloads
        .iter()
        .all(|d| d.variable.is_none() && d.bytes == 0));
    let launch = run.launches_of(first_id).next().expect("a launch");
    assert_eq!(
        launch.kernel_name.map(|n| run.name(n)),
        Some("solve_42_gpu")
    );
    assert_eq!(
        (launch.gangs(), launch.vector_length()),
        (Some(7813), Some(128))
    );
}

#[test]
fn fork_leaves_one_trace_per_process() {
    let dir = tempdir();
    let exe = program("fork");
    let out = accprof_run(dir.path(), &["--no-summary"], &exe, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("child-status=0"));
    let t = traces(dir.path());
    assert_eq!(t.len(), 2, "{t:?}");
    let mut computes: Vec<usize> = t
        .iter()
        .map(|p| compute_sites(&load_run(p).expect("loads")).len())
        .collect();
    computes.sort();
    // The child did one construct of its own; the parent two.
    assert_eq!(computes, vec![1, 2]);
}

#[test]
fn constructs_lie_inside_the_programs_own_clock_readings() {
    // The program reads CLOCK_MONOTONIC just before and just after each of
    // its compute constructs; the trace's times are on that clock, whether
    // the collector stamped them with clock_gettime or the TSC.
    for clock in ["auto", "monotonic"] {
        let dir = tempdir();
        let exe = program("clock");
        let out = Command::new(accprof())
            .arg("run")
            .arg("--lib")
            .arg(collector_lib())
            .arg("--no-summary")
            .arg("--output")
            .arg(dir.path().join("t-%p.trace"))
            .arg("--")
            .arg(&exe)
            .env("ACCPROF_CLOCK", clock)
            .output()
            .expect("accprof runs");
        assert!(out.status.success(), "{}", stderr(&out));
        let brackets: Vec<(u64, u64)> = stdout(&out)
            .lines()
            .filter_map(|l| {
                let mut w = l.strip_prefix("bracket ")?.split(' ');
                Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
            })
            .collect();
        assert_eq!(brackets.len(), 8);
        let run = only_trace(dir.path());
        let mut computes: Vec<(u64, u64)> = run
            .constructs()
            .map(|(_, x)| x)
            .filter(|c| c.class == ConstructClass::Compute && c.parent.is_none())
            .map(|c| (c.start_ns, c.end_ns().expect("construct ended")))
            .collect();
        computes.sort();
        assert_eq!(computes.len(), 8);
        // Readings of the counter and the clock agree to well under a
        // microsecond; allow 2 us for the clock's own read time.
        const SLACK: u64 = 2_000;
        for ((start, end), (before, after)) in computes.iter().zip(&brackets) {
            assert!(
                before.saturating_sub(SLACK) <= *start && start <= end && *end <= after + SLACK,
                "ACCPROF_CLOCK={clock}: construct {start}..{end} outside {before}..{after}"
            );
        }
    }
}

#[test]
fn exit_from_a_thread_keeps_the_trace() {
    let dir = tempdir();
    let exe = program("thread_exit");
    let out = accprof_run(dir.path(), &["--no-summary"], &exe, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(compute_sites(&only_trace(dir.path())).len(), 1);
}

fn check_signal(how: &str, handled: bool, want_code: Option<i32>, want_signal: Option<i32>) {
    let dir = tempdir();
    let exe = program("signal");
    // Run directly (not through `accprof run`) to see the raw wait status.
    let mut cmd = Command::new(&exe);
    cmd.arg(how)
        .env("LD_PRELOAD", collector_lib())
        .env("ACCPROF_OUTPUT", dir.path().join("t-%p.trace"));
    if handled {
        cmd.arg("handled");
    }
    // A shell starts background jobs with SIGINT and SIGQUIT ignored, and
    // the collector rightly leaves ignored signals alone: give the program
    // the default dispositions a terminal would.
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the closure only calls signal(2), which
    // is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    let out = cmd.output().expect("runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.code(), want_code, "{how}: {:?}", out.status);
    assert_eq!(out.status.signal(), want_signal, "{how}: {:?}", out.status);
    assert!(stdout(&out).contains("sum: 2497500"));
    if handled {
        assert!(stdout(&out).contains("own handler ran"));
    }
    let run = only_trace(dir.path());
    assert_eq!(compute_sites(&run).len(), 5, "{how}");
}

#[test]
fn sigterm_flushes_then_dies_of_sigterm() {
    check_signal("TERM", false, None, Some(libc_sig::TERM));
}

#[test]
fn sigint_flushes_then_dies_of_sigint() {
    check_signal("INT", false, None, Some(libc_sig::INT));
}

#[test]
fn abort_flushes_then_dies_of_sigabrt() {
    check_signal("ABRT", false, None, Some(libc_sig::ABRT));
}

#[test]
fn the_programs_own_handler_still_runs() {
    check_signal("TERM", true, Some(7), None);
}

mod libc_sig {
    pub const INT: i32 = 2;
    pub const ABRT: i32 = 6;
    pub const TERM: i32 = 15;
}

#[test]
fn a_program_without_openacc_gets_a_clear_message() {
    let dir = tempdir();
    let exe = program("plain");
    let out = accprof_run(dir.path(), &[], &exe, &[]);
    assert_eq!(out.status.code(), Some(4), "exit code passes through");
    assert_eq!(stdout(&out), "plain program\n");
    // A process that made no OpenACC call leaves no trace; the launcher
    // says so, naming the program.
    assert_eq!(traces(dir.path()), Vec::<std::path::PathBuf>::new());
    let err = stderr(&out);
    assert!(err.contains(&exe.display().to_string()), "{err}");
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let dir = tempdir();
    let out = accprof_run(dir.path(), &[], Path::new("./no-such-program"), &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("no-such-program") && err.contains("not found"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn output_is_unchanged_by_the_collector() {
    let bin = samples().join("heat2d_data");
    let bare = Command::new(&bin)
        .args(["64", "64", "20", "5"])
        .output()
        .expect("runs");
    let dir = tempdir();
    let watched = accprof_run(
        dir.path(),
        &["--no-summary"],
        &bin,
        &["64", "64", "20", "5"],
    );
    assert_eq!(bare.status.code(), watched.status.code());
    // Everything but the program's own timing line must be identical.
    let strip = |s: String| {
        s.lines()
            .filter(|l| !l.starts_with("time:"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(stdout(&bare)), strip(stdout(&watched)));
}
