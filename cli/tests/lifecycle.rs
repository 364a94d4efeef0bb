//! The collector never loses or replaces a trace, whichever way a process
//! ends or is replaced: exit, return, `_exit`, signals, exec, fork; and a
//! process that made no OpenACC call leaves no trace and touches none.
//!
//! The collector is driven directly (`LD_PRELOAD` and `ACCPROF_*`), and
//! every run is compared with the same run without it: the program's stdout,
//! its stderr less the collector's `accprof:` lines, and its exit status
//! must be the same.

mod support;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use accprof_analyzer::{load_run, ConstructClass, Run};
use accprof_trace::contract::{self, env};
use accprof_trace::Ending;
use support::*;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// `cmd` as a test runs it: default dispositions for the signals a shell
/// may have left ignored in a background job, and no core files.
fn prepared(mut cmd: Command) -> Command {
    // SAFETY: between fork and exec the closure only calls signal(2) and
    // setrlimit(2), which are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            Ok(())
        });
    }
    cmd
}

/// Runs `program args` in `cwd`, once bare and once with the collector
/// (`output` pattern, extra variables `envs`), checks the program cannot
/// tell, and returns the collected run's output.
fn run_both(
    cwd: &Path,
    program: &Path,
    args: &[&str],
    output: &str,
    envs: &[(&str, &str)],
) -> Output {
    run_both_with(cwd, program, args, output, envs, &[])
}

/// As [`run_both`], with variables `shared` set in both runs (before the
/// collector's own, which override them). Lines of stdout that start with
/// `time:` (a program's own timing) are not compared.
fn run_both_with(
    cwd: &Path,
    program: &Path,
    args: &[&str],
    output: &str,
    envs: &[(&str, &str)],
    shared: &[(&str, &str)],
) -> Output {
    let command = || {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(cwd)
            .env_remove("LD_PRELOAD")
            .env_remove(env::OUTPUT)
            .env_remove(env::MANIFEST)
            .env_remove(env::BASE_DIR)
            .env_remove(env::QUIET)
            .envs(shared.iter().copied());
        prepared(cmd)
    };
    let bare = command().output().expect("program runs");
    let mut cmd = command();
    cmd.env("LD_PRELOAD", collector_lib())
        .env(env::OUTPUT, output)
        .envs(envs.iter().copied());
    let watched = cmd.output().expect("program runs");
    let what = format!("{} {args:?}", program.display());
    let own_out = |o: &Output| -> Vec<String> {
        stdout(o)
            .lines()
            .filter(|l| !l.starts_with("time:"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(own_out(&bare), own_out(&watched), "{what}: stdout");
    let own = |o: &Output| -> Vec<String> {
        stderr(o)
            .lines()
            .filter(|l| !l.starts_with("accprof:"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(own(&bare), own(&watched), "{what}: stderr");
    assert_eq!(
        (bare.status.code(), bare.status.signal()),
        (watched.status.code(), watched.status.signal()),
        "{what}: exit status; collector said: {}",
        stderr(&watched)
    );
    watched
}

/// Every file in `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("readable dir")
        .map(|e| e.expect("entry").path())
        .collect();
    v.sort();
    v
}

fn load(path: &Path) -> Run {
    load_run(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Top-level compute constructs of a run.
fn computes(run: &Run) -> usize {
    run.constructs()
        .map(|(_, x)| x)
        .filter(|c| c.class == ConstructClass::Compute && c.parent.is_none())
        .count()
}

fn ending(run: &Run) -> Option<Ending> {
    run.process.ending.map(|e| e.how)
}

fn lifecycle() -> PathBuf {
    program("lifecycle")
}

/// The one trace in `dir`, loaded.
fn only_trace(dir: &Path) -> Run {
    let t = traces(dir);
    assert_eq!(t.len(), 1, "expected one trace in {}: {t:?}", dir.display());
    load(&t[0])
}

#[test]
fn a_process_without_openacc_neither_creates_nor_replaces_a_trace() {
    let dir = tempdir();
    let old = dir.path().join("t.trace");
    std::fs::write(&old, b"an earlier trace").expect("write");
    run_both(dir.path(), &lifecycle(), &["none"], "t.trace", &[]);
    assert_eq!(files(dir.path()), vec![old.clone()]);
    assert_eq!(std::fs::read(&old).expect("read"), b"an earlier trace");
    // Nor does a program that is not built for OpenACC at all.
    run_both(dir.path(), &program("plain"), &[], "t-%p.trace", &[]);
    assert_eq!(files(dir.path()), vec![old]);
}

#[test]
fn wrappers_leave_the_programs_trace_alone() {
    let exe = lifecycle();
    let exe = exe.to_str().expect("utf-8 path");
    let script = format!("{exe} exit 3; echo after");
    let subshell = format!("true; ( {exe} exit 3 ); true; echo after");
    let wrapped: [(&str, Vec<&str>); 3] = [
        (
            "/usr/bin/time",
            vec!["-f", "time says %x", exe, "exit", "3"],
        ),
        ("/bin/sh", vec!["-c", &script]),
        ("/bin/sh", vec!["-c", &subshell]),
    ];
    for (wrapper, args) in wrapped {
        if !Path::new(wrapper).exists() {
            continue;
        }
        let dir = tempdir();
        run_both(dir.path(), Path::new(wrapper), &args, "t.trace", &[]);
        let t = traces(dir.path());
        assert_eq!(t, vec![dir.path().join("t.trace")], "{wrapper} {args:?}");
        let run = load(&t[0]);
        assert_eq!(computes(&run), 3, "{wrapper} {args:?}");
        assert_eq!(ending(&run), Some(Ending::Exit(Some(3))));
    }
}

#[test]
fn exit_and_return_say_how_the_process_ended() {
    for (args, want) in [
        (["exit", "3"], Ending::Exit(Some(3))),
        (["exit", "0"], Ending::Exit(Some(0))),
        // A return from main reaches exit inside libc, unseen.
        (["return", "4"], Ending::Exit(None)),
        (["_exit", "5"], Ending::QuickExit(5)),
        (["_Exit", "6"], Ending::QuickExit(6)),
    ] {
        let dir = tempdir();
        run_both(dir.path(), &lifecycle(), &args, "t-%p.trace", &[]);
        let run = only_trace(dir.path());
        assert_eq!(computes(&run), 3, "{args:?}");
        assert_eq!(ending(&run), Some(want), "{args:?}");
    }
}

/// A library of the program starts before the collector (the dynamic
/// linker runs a program's own libraries' constructors before preloaded
/// ones'): its constructor's `sigaction` and `write` reach the collector's
/// interposers before anything of the collector was looked up. They must
/// work as without it, and the trace still says how the process ended.
#[test]
fn calls_from_a_library_that_starts_before_the_collector_work() {
    if !need("gcc") {
        return;
    }
    let dir = build_dir().join("programs");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let gcc = |args: &[&str]| {
        let out = Command::new("gcc")
            .args(["-g", "-O1"])
            .args(args)
            .current_dir(&src)
            .output()
            .expect("gcc runs");
        assert!(out.status.success(), "gcc {args:?}: {}", stderr(&out));
    };
    let lib = dir.join("libearly_lib.so");
    let exe = dir.join("early");
    gcc(&["-shared", "-fPIC", "early_lib.c", "-o", ps(&lib)]);
    let rpath = format!("-Wl,-rpath,{}", ps(&dir));
    gcc(&[
        "-fopenacc",
        "early.c",
        "-o",
        ps(&exe),
        "-L",
        ps(&dir),
        "-learly_lib",
        &rpath,
    ]);
    let t = tempdir();
    let out = run_both(t.path(), &exe, &[], "t-%p.trace", &[]);
    assert_eq!(
        stdout(&out),
        "constructor: handler installed\nx[63] = 126.0, early handler ran: 1\n"
    );
    let run = only_trace(t.path());
    assert_eq!(computes(&run), 1);
    assert_eq!(ending(&run), Some(Ending::Exit(Some(3))));
}

fn ps(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A second thread's `exit` while the first thread's exit handlers run
/// (C leaves two at once undefined; with the trace written at exit the two
/// collided on a GPU: heap corruption, SIGSEGV, traces without their end)
/// waits for the first to end the process: the first status wins, every
/// handler runs once, and the trace ends with that exit.
#[test]
fn a_second_exit_waits_for_the_first() {
    let dir = tempdir();
    let out = prepared(preloaded(
        &program("two_exits"),
        &dir.path().join("t-%p.trace"),
    ))
    .env(env::QUIET, "1")
    .output()
    .expect("runs");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), "sum: 499500\nhandler done\n");
    let run = only_trace(dir.path());
    assert_eq!(computes(&run), 1);
    assert_eq!(ending(&run), Some(Ending::Exit(Some(3))));
}

#[test]
fn terminating_signals_flush_then_kill_as_before() {
    for (name, sig) in [
        ("USR1", libc::SIGUSR1),
        ("USR2", libc::SIGUSR2),
        ("ALRM", libc::SIGALRM),
        ("VTALRM", libc::SIGVTALRM),
        ("PROF", libc::SIGPROF),
        ("TRAP", libc::SIGTRAP),
        ("RTMIN", libc::SIGRTMIN()),
        ("TERM", libc::SIGTERM),
    ] {
        let dir = tempdir();
        let out = run_both(
            dir.path(),
            &lifecycle(),
            &["signal", name],
            "t-%p.trace",
            &[],
        );
        assert_eq!(out.status.signal(), Some(sig), "{name}");
        let run = only_trace(dir.path());
        assert_eq!(computes(&run), 3, "{name}");
        assert_eq!(ending(&run), Some(Ending::Signal(sig)), "{name}");
    }
}

#[test]
fn sigpipe_in_a_pipeline_keeps_the_trace_and_no_other_process_writes_one() {
    let dir = tempdir();
    let script = format!(
        "{} pipe | head -1; echo \"status ${{PIPESTATUS[0]}}\"",
        lifecycle().display()
    );
    let out = run_both(
        dir.path(),
        Path::new("/bin/bash"),
        &["-c", &script],
        "t-%p.trace",
        &[],
    );
    assert!(
        stdout(&out).contains(&format!("status {}", 128 + libc::SIGPIPE)),
        "{}",
        stdout(&out)
    );
    // bash and head made no OpenACC call: the program's is the only trace.
    let run = only_trace(dir.path());
    assert_eq!(computes(&run), 3);
    assert_eq!(ending(&run), Some(Ending::Signal(libc::SIGPIPE)));
}

#[test]
fn exec_keeps_the_trace_of_the_image_it_replaced() {
    let exe = lifecycle();
    let exe = exe.to_str().expect("utf-8 path");
    for how in [
        "execl", "execlp", "execle", "execv", "execvp", "execvpe", "execve", "fexecve",
    ] {
        // The same program again, under the same pid and so the same name.
        let dir = tempdir();
        run_both(
            dir.path(),
            Path::new(exe),
            &["exec", how, exe, "exit", "2"],
            "t-%p.trace",
            &[],
        );
        let mut runs: Vec<Run> = traces(dir.path()).iter().map(|p| load(p)).collect();
        assert_eq!(runs.len(), 2, "{how}");
        runs.sort_by_key(|r| r.process.header.start_unix_ns);
        assert_eq!(
            runs[0].process.header.pid, runs[1].process.header.pid,
            "{how}"
        );
        for r in &runs {
            assert_eq!(computes(r), 3, "{how}");
        }
        assert_eq!(ending(&runs[0]), Some(Ending::Exec), "{how}");
        assert_eq!(ending(&runs[1]), Some(Ending::Exit(Some(2))), "{how}");
    }
    // A program without OpenACC as the new image: it writes nothing, and
    // the old image's trace stays. Eight words exercise the arguments that
    // execl & co take on the stack.
    for how in ["execlp", "execvp"] {
        let dir = tempdir();
        let out = run_both(
            dir.path(),
            Path::new(exe),
            &["exec", how, "echo", "a", "b", "c", "d", "e", "f"],
            "t.trace",
            &[],
        );
        assert!(stdout(&out).ends_with("a b c d e f\n"), "{}", stdout(&out));
        let run = only_trace(dir.path());
        assert_eq!(computes(&run), 3, "{how}");
        assert_eq!(ending(&run), Some(Ending::Exec), "{how}");
    }
}

#[test]
fn a_failed_exec_goes_on_recording() {
    let dir = tempdir();
    run_both(dir.path(), &lifecycle(), &["exec-fail"], "t-%p.trace", &[]);
    let run = only_trace(dir.path());
    assert_eq!(computes(&run), 4);
    // The End(Exec) written before the attempt is superseded.
    assert_eq!(ending(&run), Some(Ending::Exit(None)));
}

#[test]
fn a_forked_child_whose_exec_failed_ends_as_it_really_did() {
    let dir = tempdir();
    run_both(
        dir.path(),
        &lifecycle(),
        &["fork-exec-fail"],
        "t-%p.trace",
        &[],
    );
    let mut endings: Vec<String> = traces(dir.path())
        .iter()
        .map(|p| format!("{:?}", ending(&load(p))))
        .collect();
    endings.sort();
    // The parent returns from main, the child calls exit(0).
    assert_eq!(endings, ["Some(Exit(None))", "Some(Exit(Some(0)))"]);
}

#[test]
fn forked_children_that_quick_exit_keep_their_traces() {
    let dir = tempdir();
    run_both(dir.path(), &lifecycle(), &["forks", "8"], "t-%p.trace", &[]);
    let runs: Vec<Run> = traces(dir.path()).iter().map(|p| load(p)).collect();
    assert_eq!(runs.len(), 9);
    let (parent, children): (Vec<&Run>, Vec<&Run>) = runs
        .iter()
        .partition(|r| ending(r) == Some(Ending::Exit(None)));
    assert_eq!(parent.len(), 1);
    assert_eq!(computes(parent[0]), 4);
    assert_eq!(children.len(), 8);
    for c in children {
        assert_eq!(computes(c), 1);
        assert_eq!(ending(c), Some(Ending::QuickExit(0)));
    }
}

#[test]
fn a_forked_child_killed_by_a_signal_keeps_its_trace() {
    let dir = tempdir();
    let out = run_both(
        dir.path(),
        &lifecycle(),
        &["fork-signal"],
        "t-%p.trace",
        &[],
    );
    assert!(
        stdout(&out).contains(&format!("child 0 signal {}", libc::SIGUSR1)),
        "{}",
        stdout(&out)
    );
    let runs: Vec<Run> = traces(dir.path()).iter().map(|p| load(p)).collect();
    assert_eq!(runs.len(), 2);
    let child = runs
        .iter()
        .find(|r| ending(r) == Some(Ending::Signal(libc::SIGUSR1)))
        .expect("the child's trace ends with its signal");
    assert_eq!(computes(child), 1);
}

#[test]
fn a_forked_child_never_takes_its_parents_file() {
    let dir = tempdir();
    let manifest = dir.path().join("manifest");
    let out = run_both(
        dir.path(),
        &lifecycle(),
        &["fork-exit"],
        "t.trace",
        &[(env::MANIFEST, manifest.to_str().expect("utf-8"))],
    );
    let t = traces(dir.path());
    assert_eq!(t.len(), 2, "{t:?}");
    let parent = load(&dir.path().join("t.trace"));
    assert_eq!(computes(&parent), 4);
    assert_eq!(ending(&parent), Some(Ending::Exit(None)));
    let child_path = t
        .iter()
        .find(|p| !p.ends_with("t.trace"))
        .expect("the child's trace");
    let child = load(child_path);
    assert_eq!(
        child_path,
        &dir.path()
            .join(format!("t.child-{}.trace", child.process.header.pid))
    );
    assert_eq!(computes(&child), 1);
    assert_eq!(ending(&child), Some(Ending::Exit(Some(0))));
    assert!(
        stderr(&out).contains(&child_path.display().to_string()),
        "{}",
        stderr(&out)
    );
    // Both are in the manifest, each with its writer's pid.
    let mut listed = contract::parse_manifest(&std::fs::read(&manifest).expect("manifest"));
    listed.sort();
    let mut want = vec![
        (parent.process.header.pid, dir.path().join("t.trace")),
        (child.process.header.pid, child_path.clone()),
    ];
    want.sort();
    assert_eq!(listed, want);

    // With %n each process takes the next free number, none a numbered
    // variant of another's.
    let dir = tempdir();
    run_both(dir.path(), &lifecycle(), &["forks", "3"], "t-%n.trace", &[]);
    let names: Vec<PathBuf> = (0..4)
        .map(|n| dir.path().join(format!("t-{n}.trace")))
        .collect();
    assert_eq!(traces(dir.path()), names);
}

#[test]
fn an_existing_trace_is_kept_and_the_new_one_named_in_the_manifest() {
    let dir = tempdir();
    let asked = dir.path().join("t.trace");
    std::fs::write(&asked, b"an earlier trace").expect("write");
    let manifest = dir.path().join("manifest");
    let out = run_both(
        dir.path(),
        &lifecycle(),
        &["exit", "0"],
        "t.trace",
        &[(env::MANIFEST, manifest.to_str().expect("utf-8"))],
    );
    assert_eq!(std::fs::read(&asked).expect("read"), b"an earlier trace");
    let got = dir.path().join("t.1.trace");
    assert_eq!(computes(&load(&got)), 3);
    let err = stderr(&out);
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("t.1.trace") && l.contains("exists"))
        .collect();
    assert_eq!(said.len(), 1, "{}", stderr(&out));
    let listed = contract::parse_manifest(&std::fs::read(&manifest).expect("manifest"));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].1, got);
}

#[test]
fn a_relative_output_is_resolved_where_the_program_started() {
    let dir = tempdir();
    let moved_to = dir.path().join("elsewhere");
    std::fs::create_dir(&moved_to).expect("mkdir");
    let moved = moved_to.to_str().expect("utf-8");
    run_both(dir.path(), &lifecycle(), &["chdir", moved], "t.trace", &[]);
    assert_eq!(traces(&moved_to), Vec::<PathBuf>::new());
    assert_eq!(computes(&only_trace(dir.path())), 3);
    // The launcher's directory wins when it says which.
    let base = dir.path().join("base");
    std::fs::create_dir(&base).expect("mkdir");
    run_both(
        dir.path(),
        &lifecycle(),
        &["chdir", moved],
        "sub-%p.trace",
        &[(env::BASE_DIR, base.to_str().expect("utf-8"))],
    );
    assert_eq!(traces(&moved_to), Vec::<PathBuf>::new());
    assert_eq!(computes(&only_trace(&base)), 3);
}

#[test]
fn mpi_launcher_processes_leave_the_ranks_traces_alone() {
    if !need("mpirun") || !need("mpicc") {
        return;
    }
    let bin = samples().join("mpi_halo");
    assert!(bin.is_file(), "{} was not built", bin.display());
    let dir = tempdir();
    let manifest = dir.path().join("manifest");
    // mpirun itself loads the collector too (LD_PRELOAD is in its own
    // environment), and would be rank 0 by the pattern: it made no OpenACC
    // call, so it must not touch rank 0's trace.
    let args = [
        "--oversubscribe",
        "-x",
        "LD_PRELOAD",
        "-x",
        env::OUTPUT,
        "-x",
        env::MANIFEST,
        "-np",
        "2",
        bin.to_str().expect("utf-8"),
        "64",
        "48",
        "20",
    ];
    let out = run_both_with(
        dir.path(),
        Path::new("mpirun"),
        &args,
        "t-%r.trace",
        &[(env::MANIFEST, manifest.to_str().expect("utf-8"))],
        &[
            // The variables mpirun forwards must exist in the bare run too.
            ("LD_PRELOAD", ""),
            (env::OUTPUT, ""),
            (env::MANIFEST, ""),
            // Open MPI refuses to run as root unless told to (CI is root).
            ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
            ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        ],
    );
    assert!(
        stdout(&out).contains("reference: match"),
        "{}",
        stdout(&out)
    );
    let t = traces(dir.path());
    assert_eq!(
        t,
        vec![dir.path().join("t-0.trace"), dir.path().join("t-1.trace")]
    );
    let mut want = Vec::new();
    for (rank, path) in t.iter().enumerate() {
        let run = load(path);
        assert_eq!(run.process.header.rank, Some(rank as u32));
        assert!(computes(&run) > 0, "rank {rank}");
        assert!(
            matches!(ending(&run), Some(Ending::Exit(_))),
            "rank {rank}: {:?}",
            run.process.ending
        );
        want.push((run.process.header.pid, path.clone()));
    }
    let mut listed = contract::parse_manifest(&std::fs::read(&manifest).expect("manifest"));
    listed.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(listed, want);
}

#[test]
fn a_note_to_a_closed_stderr_pipe_does_not_kill_the_program() {
    let dir = tempdir();
    let run = |collect: bool| {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two descriptors it creates; the read end
        // is closed at once, so the program's stderr has no reader.
        let write_end = unsafe {
            assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
            libc::close(fds[0]);
            std::os::fd::OwnedFd::from_raw_fd(fds[1])
        };
        let mut cmd = Command::new(lifecycle());
        cmd.args(["silent", "5"])
            .current_dir(dir.path())
            .env_remove("LD_PRELOAD")
            .env_remove(env::QUIET)
            .stderr(std::process::Stdio::from(write_end));
        if collect {
            cmd.env("LD_PRELOAD", collector_lib())
                .env(env::OUTPUT, "t-%p.trace");
        }
        prepared(cmd).output().expect("program runs")
    };
    use std::os::fd::FromRawFd;
    let bare = run(false);
    let watched = run(true);
    assert_eq!(bare.status.code(), Some(5));
    assert_eq!(
        (watched.status.code(), watched.status.signal()),
        (Some(5), None)
    );
    assert_eq!(stdout(&bare), stdout(&watched));
    let run = only_trace(dir.path());
    assert_eq!(computes(&run), 3);
    assert_eq!(ending(&run), Some(Ending::Exit(None)));
}
