//! The coherence samples (lost_write, unread_download, shared_page,
//! own_handler, coherence_threads, coherence_norm_f90, coherence_vector,
//! coherence_lib, coherence_print_f90, mpi_halo_stale),
//! each variant run bare and under the coherence check on this machine's
//! host fallback: the check must not change the exit status or the output
//! (`time:` lines aside), must say that it does not apply (no device
//! copies), and the program's own SIGSEGV handlers still run.
//!
//! Needs gcc and make (gfortran, mpicc and mpirun for two samples); a
//! missing tool fails the test unless ACCPROF_TEST_ALLOW_MISSING names it.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use accprof_trace::contract::env;
use support::*;

/// What the collector says at exit when the OpenACC device is the host.
const DOES_NOT_APPLY: &str = "coherence check: does not apply: no device copies (the OpenACC device is the host, or shares its memory)";

/// Standard output without its `time:` lines, which change from run to run.
fn without_time(out: &Output) -> String {
    stdout(out)
        .lines()
        .filter(|l| !l.starts_with("time:"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `name args` bare and under `accprof run --check coherence`: same exit
/// status, same output, `reference: match` (one copy: every variant is
/// right), the note that the check does not apply; returns the bare output.
fn bare_and_checked(name: &str, args: &[&str]) -> Output {
    let bin = samples().join(name);
    assert!(bin.is_file(), "{} was not built", bin.display());
    let label = format!("{name} {}", args.join(" "));
    let bare = Command::new(&bin)
        .args(args)
        .env_remove(env::CHECK)
        .output()
        .expect("sample runs");
    let dir = tempfile::tempdir().expect("tempdir");
    let checked = accprof_run(
        dir.path(),
        &["--no-summary", "--check", "coherence"],
        &bin,
        args,
    );
    same_run(&label, &bare, &checked);
    assert!(
        stderr(&checked).contains(DOES_NOT_APPLY),
        "{label}: no note that the check does not apply:\n{}",
        stderr(&checked)
    );
    assert!(
        !stderr(&bare).contains("coherence"),
        "{label}: {}",
        stderr(&bare)
    );
    assert_eq!(traces(dir.path()).len(), 1, "{label}: one trace");
    bare
}

fn same_run(label: &str, bare: &Output, checked: &Output) {
    assert_eq!(
        checked.status.code(),
        bare.status.code(),
        "{label}: exit status bare {:?}, checked {:?}\n{}",
        bare.status,
        checked.status,
        stderr(checked)
    );
    assert_eq!(
        without_time(checked),
        without_time(bare),
        "{label}: the output changed under the check"
    );
    assert!(
        stdout(bare).lines().any(|l| l == "reference: match"),
        "{label}: the host fallback should match its reference:\n{}{}",
        stdout(bare),
        stderr(bare)
    );
    assert!(
        stdout(bare).lines().any(|l| l.starts_with("time:")),
        "{label}: no time: line\n{}",
        stdout(bare)
    );
}

#[test]
fn lost_write_both_variants() {
    for variant in ["bad", "fixed"] {
        let out = bare_and_checked("lost_write", &["64", "48", "20", "5", variant]);
        // Four heatings, each after the centre value it printed.
        let text = stdout(&out);
        let steps = text.lines().filter(|l| l.starts_with("step ")).count();
        assert_eq!(steps, 4, "{text}");
    }
}

#[test]
fn unread_download_both_variants() {
    for variant in ["bad", "fixed"] {
        bare_and_checked("unread_download", &["64", "48", "20", "5", variant]);
    }
}

#[test]
fn shared_page_both_variants() {
    for variant in ["bad", "fixed"] {
        let out = bare_and_checked("shared_page", &["4500", "20", variant]);
        // The unrelated host data went through the host's accesses intact.
        assert!(
            stdout(&out).contains("history: 770\nrecord: 20 105\n"),
            "{}",
            stdout(&out)
        );
    }
}

#[test]
fn own_handler_runs_its_handlers_with_and_without_the_check() {
    let out = bare_and_checked("own_handler", &["64", "48", "20", "5"]);
    let text = stdout(&out);
    for line in [
        "early: guard[0] = 42 after 1 fault(s) in the program's handler\n",
        "late: guard page readable: no, then yes (1 fault(s) in the program's handler)\n",
    ] {
        assert!(text.contains(line), "bare: no `{line}` in\n{text}");
    }
    // The checked run printed the same lines: bare_and_checked compared them.
}

#[test]
fn coherence_threads_with_and_without_the_update() {
    for omit in ["1", "0"] {
        let out = bare_and_checked("coherence_threads", &["20000", "20", "5", omit]);
        for t in ["thread 0 step 20 norm ", "thread 1 step 20 norm "] {
            assert!(stdout(&out).contains(t), "{}", stdout(&out));
        }
    }
}

#[test]
fn coherence_norm_fortran_both_variants() {
    if !need("gfortran") {
        return;
    }
    for variant in ["bad", "fixed"] {
        bare_and_checked("coherence_norm_f90", &["64", "48", "20", "5", variant]);
    }
}

#[test]
fn coherence_lib_both_variants() {
    for variant in ["bad", "fixed"] {
        let out = bare_and_checked("coherence_lib", &["65536", variant]);
        assert!(stdout(&out).contains("text: abcdefghijklmnopqrst\n"));
    }
}

#[test]
fn coherence_print_fortran_both_variants() {
    if !need("gfortran") {
        return;
    }
    for variant in ["bad", "fixed"] {
        bare_and_checked("coherence_print_f90", &["65536", variant]);
    }
}

#[test]
fn coherence_vector_both_variants() {
    for variant in ["bad", "fixed"] {
        bare_and_checked("coherence_vector", &["64", "48", "20", "5", variant]);
    }
}

/// mpirun -np 2 of mpi_halo_stale with the collector preloaded (and the
/// check on when `check`), traces in `dir`.
fn mpi_halo_stale(dir: &Path, variant: &str, check: bool) -> Output {
    let bin = samples().join("mpi_halo_stale");
    assert!(bin.is_file(), "{} was not built", bin.display());
    let mut cmd = Command::new("mpirun");
    cmd.current_dir(dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove(env::QUIET)
        .arg("--oversubscribe");
    if check {
        cmd.env("LD_PRELOAD", collector_lib())
            .env(env::OUTPUT, dir.join("t-%r.trace"))
            .env(env::CHECK, "coherence")
            .args(["-x", "LD_PRELOAD", "-x", env::OUTPUT, "-x", env::CHECK]);
    } else {
        cmd.env_remove(env::CHECK);
    }
    cmd.args(["-np", "2"])
        .arg(&bin)
        .args(["64", "48", "20", variant])
        .output()
        .expect("mpirun runs")
}

#[test]
fn mpi_halo_stale_on_two_ranks_both_variants() {
    if !need("mpicc") || !need("mpirun") {
        return;
    }
    for variant in ["bad", "fixed"] {
        let label = format!("mpirun -np 2 mpi_halo_stale 64 48 20 {variant}");
        let dir = tempfile::tempdir().expect("tempdir");
        let bare = mpi_halo_stale(dir.path(), variant, false);
        let checked = mpi_halo_stale(dir.path(), variant, true);
        same_run(&label, &bare, &checked);
        let err = stderr(&checked);
        assert_eq!(
            err.matches(DOES_NOT_APPLY).count(),
            2,
            "{label}: one note per rank:\n{err}"
        );
        assert_eq!(traces(dir.path()).len(), 2, "{label}: one trace per rank");
    }
}
