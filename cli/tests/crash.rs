//! A program that crashes keeps its trace: the events up to the crash, the
//! signal it died of, where it faulted, the construct (and on a GPU the
//! CUDA driver call) it died in, whatever signal handler the program or
//! its runtime installed after the collector's (libgfortran's backtrace
//! handler, a program's own with SA_RESETHAND or a re-raise); and `report`
//! and `analyze` say so.
//!
//! The GPU recordings of the crash samples (tests/fixtures/h200-crash,
//! recorded by its record.sh) are read by the tests at the end.

mod support;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use accprof_analyzer::{load_run, ConstructClass, Run};
use accprof_trace::{Crash, Ending, Record};
use support::*;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The one trace in `dir`.
fn only_trace(dir: &Path) -> PathBuf {
    let t = traces(dir);
    assert_eq!(t.len(), 1, "expected one trace in {}: {t:?}", dir.display());
    t[0].clone()
}

fn load(path: &Path) -> Run {
    load_run(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The trace's Crash records.
fn crashes(path: &Path) -> Vec<Crash> {
    let t = accprof_trace::read_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    t.records
        .into_iter()
        .filter_map(|r| match r {
            Record::Crash(c) => Some(c),
            _ => None,
        })
        .collect()
}

fn computes(run: &Run) -> usize {
    run.constructs()
        .map(|(_, x)| x)
        .filter(|c| c.class == ConstructClass::Compute)
        .count()
}

/// `accprof SUBCOMMAND TRACE`'s stdout and stderr together; exit 0.
fn accprof_on(subcommand: &str, trace: &Path) -> String {
    let out = Command::new(accprof())
        .arg(subcommand)
        .arg(trace)
        .output()
        .expect("accprof runs");
    assert!(out.status.success(), "{subcommand}: {}", stderr(&out));
    format!("{}{}", stdout(&out), stderr(&out))
}

/// Runs `program args` bare and under `accprof run`: the program's stdout
/// and its death by SIGSEGV are the same; returns the trace and the
/// collected run's stderr.
fn crash_under_accprof(program: &Path, args: &[&str]) -> (tempfile::TempDir, PathBuf, String) {
    let bare = Command::new(program)
        .args(args)
        .output()
        .expect("program runs");
    assert_eq!(
        bare.status.signal(),
        Some(libc::SIGSEGV),
        "bare: {}",
        stderr(&bare)
    );
    let dir = tempdir();
    let out = accprof_run(dir.path(), &[], program, args);
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGSEGV),
        "accprof run: {}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), stdout(&bare));
    let trace = only_trace(dir.path());
    (dir, trace, stderr(&out))
}

/// The trace of a program that died of SIGSEGV at 0x1000 in the compute
/// construct at `file:line`: its constructs before the crash, the Crash
/// record, End(Signal), and the ending in report and analyze.
fn check_crash_trace(trace: &Path, file: &str, line: u32, computes_before: usize) {
    let run = load(trace);
    assert_eq!(
        run.process.ending.map(|e| e.how),
        Some(Ending::Signal(libc::SIGSEGV))
    );
    assert_eq!(
        computes(&run),
        computes_before + 1,
        "the constructs up to the crash"
    );
    let c = crashes(trace);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].signal, libc::SIGSEGV);
    assert!(c[0].code > 0, "a fault, not a kill: {c:?}");
    assert_eq!(c[0].address, Some(0x1000));
    assert_eq!(c[0].driver_call, None, "no CUPTI here");
    let want = "ending: the program died of signal 11 (SIGSEGV) at address 0x1000, during the compute region (parallel) at ";
    for sub in ["report", "analyze"] {
        let text = accprof_on(sub, trace);
        let ending = text
            .lines()
            .find(|l| l.trim_start().starts_with("ending:"))
            .unwrap_or_else(|| panic!("{sub}: no ending line in\n{text}"));
        assert!(ending.trim_start().starts_with(want), "{sub}: {ending}");
        assert!(
            ending.ends_with(&format!("{file}:{line}")),
            "{sub}: {ending}"
        );
        assert!(!text.contains("no end record"), "{sub}: {text}");
    }
    let json = Command::new(accprof())
        .args(["analyze", "--json"])
        .arg(trace)
        .output()
        .expect("accprof runs");
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(doc["ending"]["signal"], "SIGSEGV", "{doc}");
    assert_eq!(doc["ending"]["address"], 0x1000, "{doc}");
    // The timeline says so in its header.
    let session = accprof_tui::Session::open(vec![(trace.to_path_buf(), run)], &[]);
    let state = accprof_tui::state::State::new(&session);
    let screen = render_text(&session, &state, 400, 30);
    let header = screen.lines().next().unwrap_or_default();
    assert!(
        header.starts_with(&format!("✕ {}", want.trim_start_matches("ending: ")))
            && header.contains(&format!("{file}:{line}  │  wall ")),
        "{header}"
    );
}

#[test]
fn a_fortran_program_dying_under_libgfortrans_handler_keeps_its_trace_and_the_signal() {
    if !need("gfortran") {
        return;
    }
    let exe = samples().join("launch_crash_f90");
    let (_dir, trace, err) = crash_under_accprof(&exe, &["1000"]);
    // libgfortran's handler ran (it was installed after the collector's).
    assert!(
        err.contains("Program received signal SIGSEGV"),
        "libgfortran's backtrace handler did not run: {err}"
    );
    let src = repo_samples().join("launch_crash.f90");
    let line = directive_lines(&src, &["parallel loop deviceptr"])[0];
    check_crash_trace(&trace, "launch_crash.f90", line, 1);
}

#[test]
fn a_c_program_dying_in_a_construct_keeps_its_trace_and_the_signal() {
    let exe = samples().join("launch_crash");
    let (_dir, trace, _) = crash_under_accprof(&exe, &["1000"]);
    let src = repo_samples().join("launch_crash.c");
    let line = directive_lines(&src, &["parallel loop deviceptr"])[0];
    check_crash_trace(&trace, "launch_crash.c", line, 1);
}

#[test]
fn a_handler_installed_after_the_collector_is_chained_as_the_program_set_it() {
    let exe = program("late_handler");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/late_handler.c");
    let line = directive_lines(&src, &["parallel loop deviceptr"])[0];
    for (mode, says) in [
        (
            "sigaction",
            "read back own handler: yes, flags kept: yes, mask kept: yes\nx[1] = 2\n\
             handler: SIGUSR1 blocked\nhandler: SIGSEGV blocked\nhandler: reset to default\n",
        ),
        (
            "nodefer",
            "read back own handler: yes, flags kept: yes, mask kept: yes\nx[1] = 2\n\
             handler: SIGUSR1 blocked\nhandler: SIGSEGV not blocked\nhandler: reset to default\n",
        ),
        (
            "signal",
            "read back own handler: yes\nx[1] = 2\nhandler: re-raising\n",
        ),
    ] {
        let (_dir, trace, _) = crash_under_accprof(&exe, &[mode]);
        let out = Command::new(&exe).arg(mode).output().expect("runs");
        assert_eq!(
            stdout(&out),
            format!("old handler default: yes\n{says}"),
            "{mode}"
        );
        check_crash_trace(&trace, "late_handler.c", line, 1);
    }
}

fn repo_samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples")
}

/// The GPU recordings of the crash samples, when they are there.
fn h200_crash() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200-crash");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "{} is absent: the GPU crash recordings were not made yet \
             (tests/fixtures/h200-crash/record.sh); this test did not run",
            dir.display()
        );
        None
    }
}

/// A GPU crash recording: it keeps its constructs, the signal, and with
/// CUPTI the driver call it died in; report and analyze say so.
fn check_gpu_crash(name: &str, file: &str, cupti: bool) {
    let Some(dir) = h200_crash() else { return };
    let trace = dir.join(format!("{name}.trace"));
    let run = accprof_analyzer::testkit::fixtures::load("h200-crash", name);
    assert!(
        computes(&run) >= 1,
        "{name}: the constructs before the crash are kept"
    );
    assert_eq!(run.cupti_active(), cupti, "{name}: CUPTI recording");
    let ending = run.process.ending.map(|e| e.how);
    assert!(
        matches!(
            ending,
            Some(Ending::Signal(_) | Ending::RuntimeError(_) | Ending::Exit(Some(_)))
        ),
        "{name}: {ending:?}"
    );
    let text = on_fixture("h200-crash", name, &["analyze"]);
    let ending_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("ending:"))
        .unwrap_or_else(|| panic!("{name}: no ending line in\n{text}"));
    assert!(
        text.lines().any(|l| (l.contains("ending:")
            || l.contains("running when the program ended:"))
            && l.contains(file)),
        "{name}: the construct it died in:\n{text}"
    );
    if let Some(Ending::Signal(sig)) = ending {
        let c = crashes(&trace);
        assert_eq!(c.first().map(|c| c.signal), Some(sig), "{name}: {c:?}");
        if cupti {
            assert!(
                c[0].driver_call.is_some() && ending_line.contains("in the CUDA driver call cu"),
                "{name}: the driver call in flight: {ending_line}"
            );
        }
    }
}

#[test]
fn gpu_c_crash_with_cupti_names_the_signal_the_driver_call_and_the_construct() {
    check_gpu_crash("launch_crash_c", "launch_crash.c", true);
}

#[test]
fn gpu_c_crash_without_cupti_keeps_the_constructs_and_the_signal() {
    check_gpu_crash("launch_crash_c_no_cupti", "launch_crash.c", false);
}

#[test]
fn gpu_fortran_crash_with_cupti_names_the_signal_the_driver_call_and_the_construct() {
    check_gpu_crash("launch_crash_f90", "launch_crash.f90", true);
}

#[test]
fn gpu_fortran_crash_without_cupti_keeps_the_constructs_and_the_signal() {
    check_gpu_crash("launch_crash_f90_no_cupti", "launch_crash.f90", false);
}

#[test]
fn a_signal_sent_by_a_process_is_a_kill_not_a_fault() {
    let exe = program("lifecycle");
    let dir = tempdir();
    let out = accprof_run(dir.path(), &[], &exe, &["signal", "TERM"]);
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGTERM),
        "{}",
        stderr(&out)
    );
    let trace = only_trace(dir.path());
    let c = crashes(&trace);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!((c[0].signal, c[0].address), (libc::SIGTERM, None));
    assert!(c[0].code <= 0, "sent, not raised by a fault: {c:?}");
    let text = accprof_on("report", &trace);
    assert!(
        text.contains("ending: the program was killed by signal 15 (SIGTERM)"),
        "{text}"
    );
}

#[test]
fn a_death_the_collector_cannot_see_is_named_by_the_launcher() {
    let exe = program("lifecycle");
    let dir = tempdir();
    let out = accprof_run(dir.path(), &[], &exe, &["late-kill"]);
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGKILL),
        "{}",
        stderr(&out)
    );
    let trace = only_trace(dir.path());
    assert_eq!(
        load(&trace).process.ending,
        None,
        "SIGKILL cannot be caught"
    );
    let err = stderr(&out);
    assert!(
        err.contains(" died of signal 9 (SIGKILL) and its trace has no end record"),
        "{err}"
    );
}

/// UK-MAC TeaLeaf_OpenACC (gfortran 12, nvptx offload, tea_bm_2) dies of
/// SIGSEGV inside the CUDA driver on an H200, bare too, with libgfortran's
/// backtrace handler installed after the collector's (bench/tealeaf.sh).
/// Its traces keep the constructs before the crash, the signal and, with
/// CUPTI, the driver call it died in. (The binary is not kept: the lines
/// are not asked for.)
fn check_tealeaf(name: &str, cupti: bool) {
    let Some(dir) = h200_crash() else { return };
    let run = accprof_analyzer::testkit::fixtures::load("h200-crash", name);
    assert!(
        computes(&run) >= 3,
        "{name}: the constructs before the crash"
    );
    assert_eq!(run.cupti_active(), cupti, "{name}: CUPTI recording");
    assert_eq!(
        run.process.ending.map(|e| e.how),
        Some(Ending::Signal(libc::SIGSEGV)),
        "{name}"
    );
    let c = crashes(&dir.join(format!("{name}.trace")));
    assert_eq!(c.len(), 1, "{name}: {c:?}");
    assert!(c[0].address.is_some(), "{name}: {c:?}");
    let text = on_fixture("h200-crash", name, &["analyze"]);
    let ending = text
        .lines()
        .find(|l| l.trim_start().starts_with("ending:"))
        .unwrap_or_else(|| panic!("{name}: no ending line in\n{text}"));
    assert!(
        ending.contains("died of signal 11 (SIGSEGV)")
            && ending.contains("during the compute region (parallel)"),
        "{name}: {ending}"
    );
    assert_eq!(
        ending.contains("in the CUDA driver call cuMemcpyDtoH_v2"),
        cupti,
        "{name}: {ending}"
    );
}

#[test]
fn tealeaf_dying_in_the_driver_keeps_its_trace_with_cupti() {
    check_tealeaf("tealeaf_cupti", true);
}

#[test]
fn tealeaf_dying_in_the_driver_keeps_its_trace_without_cupti() {
    check_tealeaf("tealeaf_no_cupti", false);
}

/// `accprof run EXTRA -- program args` into `dir`, given at most 60 s: a
/// program that hangs in the collector's signal handler (a note written
/// to a full pipe) fails the test instead of holding it, and it and
/// everything it started are killed (they run in a process group of their
/// own).
fn accprof_run_within_a_minute(
    dir: &Path,
    extra: &[&str],
    program: &Path,
    args: &[&str],
) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let child = accprof_run_command(dir, extra, program, args)
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("accprof runs");
    let group = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(out) => out.expect("accprof output"),
        Err(_) => {
            // SAFETY: a signal to the process group this test started.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            panic!(
                "{} {args:?} under accprof did not end in 60 s",
                program.display()
            );
        }
    }
}

/// A program that dies of SIGSEGV, SIGBUS or SIGPIPE while its stderr is a
/// full pipe that nobody reads, with the coherence check on (whose handler
/// has a note to write about a SIGSEGV that is not its own): it dies of
/// that signal as it does bare, with the same output, and keeps its trace,
/// which ends with the signal. A note that cannot be written without
/// waiting is dropped: the handler never waits on stderr.
#[test]
fn a_signal_while_stderr_is_a_full_pipe_ends_the_program_as_it_would_and_keeps_the_trace() {
    let exe = program("stderr_crash");
    for (mode, sig) in [
        ("segv", libc::SIGSEGV),
        ("bus", libc::SIGBUS),
        ("pipe", libc::SIGPIPE),
    ] {
        let bare = Command::new(&exe)
            .args([mode, "full"])
            .output()
            .expect("program runs");
        assert_eq!(bare.status.signal(), Some(sig), "bare {mode}");
        let dir = tempdir();
        let out = accprof_run_within_a_minute(
            dir.path(),
            &["--check", "coherence"],
            &exe,
            &[mode, "full"],
        );
        assert_eq!(
            out.status.code(),
            Some(128 + sig),
            "{mode}: {}",
            stderr(&out)
        );
        assert_eq!(stdout(&out), stdout(&bare), "{mode}");
        let trace = only_trace(dir.path());
        let run = load(&trace);
        assert_eq!(
            run.process.ending.map(|e| e.how),
            Some(Ending::Signal(sig)),
            "{mode}"
        );
        assert_eq!(computes(&run), 1, "{mode}");
        let c = crashes(&trace);
        assert_eq!(c.len(), 1, "{mode}: {c:?}");
        assert_eq!(c[0].signal, sig, "{mode}");
    }
}

/// The collector's own lines on stderr, the fault handler's included, are
/// written with the raw system call: they never enter a `write` defined in
/// the process (the library's exported wrapper, or, as here, the
/// program's own, which comes first and reports any line of ours).
#[test]
fn the_handlers_note_on_stderr_does_not_go_through_write() {
    let exe = program("stderr_crash");
    let dir = tempdir();
    let out = accprof_run_within_a_minute(
        dir.path(),
        &["--check", "coherence"],
        &exe,
        &["segv", "open"],
    );
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGSEGV),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("is not on a page the check watches: passed on to the program"),
        "the handler's note: {}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "x[1] = 2\n", "{}", stderr(&out));
}
