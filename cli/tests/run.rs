//! `accprof run` as a user meets it: the traces it names are the ones
//! written, mistakes are caught before the program starts, no trace is
//! replaced unasked, the collector's environment variables are honoured,
//! and the observed program's output and exit status never change.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::*;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// `accprof run --lib <collector> EXTRA -- PROGRAM ARGS` in `dir`, with
/// none of the collector's variables from the test's environment.
fn run_in(dir: &Path, extra: &[&str], program: &Path, args: &[&str]) -> Output {
    run_cmd(dir, extra, program, args)
        .output()
        .expect("accprof runs")
}

fn run_cmd(dir: &Path, extra: &[&str], program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(accprof());
    cmd.current_dir(dir)
        .arg("run")
        .arg("--lib")
        .arg(collector_lib())
        .args(extra)
        .arg("--")
        .arg(program)
        .args(args);
    for v in [
        "ACCPROF_OUTPUT",
        "ACCPROF_HASH",
        "ACCPROF_CUPTI",
        "ACCPROF_LIB",
        "LD_PRELOAD",
    ] {
        cmd.env_remove(v);
    }
    cmd
}

/// The program on its own.
fn direct(program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .expect("program runs")
}

/// stderr without the launcher's and the collector's own lines.
fn program_stderr(o: &Output) -> String {
    stderr(o)
        .lines()
        .filter(|l| !l.starts_with("accprof:"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The program printed and returned under `accprof run` what it does on
/// its own. With the summary on, the summary follows the program's stderr.
fn assert_unchanged(bare: &Output, watched: &Output, summary: bool) {
    assert_eq!(bare.status.code(), watched.status.code(), "exit status");
    assert_eq!(stdout(bare), stdout(watched), "stdout");
    let ours = program_stderr(watched);
    if summary {
        assert!(
            ours.starts_with(&stderr(bare)),
            "stderr:\n{ours}\nexpected to start with:\n{}",
            stderr(bare)
        );
    } else {
        assert_eq!(stderr(bare), ours, "stderr");
    }
}

/// A refused run: one line naming `what`, exit code 2, nothing from the
/// program (it never started).
fn assert_refused(out: &Output, what: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(what), "{what} not named in: {err}");
    assert!(stdout(out).is_empty(), "the program ran: {}", stdout(out));
}

fn header(path: &Path) -> accprof_trace::Header {
    let f = std::fs::File::open(path).expect("trace opens");
    accprof_trace::Reader::new(f)
        .expect("trace reads")
        .header()
        .clone()
}

#[test]
fn numbered_names_are_reported_as_written() {
    let dir = tempdir();
    let exe = program("echo_acc");
    let bare = direct(&exe, &["3"]);
    for n in 0..2 {
        let out = run_in(
            dir.path(),
            &["-o", "x%n.trace", "--no-summary"],
            &exe,
            &["3"],
        );
        assert_unchanged(&bare, &out, false);
        let err = stderr(&out);
        assert!(
            err.contains(&format!("accprof: trace written to x{n}.trace\n")),
            "{err}"
        );
        assert!(!err.contains("left no trace"), "{err}");
        assert!(dir.path().join(format!("x{n}.trace")).is_file());
    }
}

#[test]
fn unusable_outputs_are_refused_before_the_program_starts() {
    let dir = tempdir();
    let exe = program("echo_acc");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    for (output, named) in [
        ("missing/t.trace", "missing"),
        ("/proc/accprof-t.trace", "/proc"),
        ("/sys/accprof-t.trace", "/sys"),
        ("sub", "sub"),
        ("sub/", "sub"),
        ("", "--output"),
    ] {
        let out = run_in(dir.path(), &["-o", output], &exe, &[]);
        assert_refused(&out, named);
    }
    // Names the system cannot create: a component over NAME_MAX (255),
    // a path over PATH_MAX (4096), with or without %p.
    let long_name = format!("{}.trace", "n".repeat(300));
    let deep = format!("{}/t.trace", ["sub"; 1400].join("/"));
    let long_p = format!("{}-%p.trace", "p".repeat(300));
    for (output, named) in [
        (long_name.as_str(), "more than the 255"),
        (deep.as_str(), "more than the 4095"),
        (long_p.as_str(), "more than the 255"),
    ] {
        let out = run_in(dir.path(), &["-o", output], &exe, &[]);
        assert_refused(&out, named);
    }
    // A directory without write permission (root writes anyway: then the
    // run is a fair one and is not refused).
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).expect("mkdir");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    if std::fs::write(ro.join("probe"), b"").is_err() {
        let out = run_in(dir.path(), &["-o", "ro/t.trace"], &exe, &[]);
        assert_refused(&out, "ro");
    }
    assert!(
        traces(dir.path()).is_empty() && traces(&dir.path().join("sub")).is_empty(),
        "nothing ran, nothing was written"
    );
}

#[test]
fn a_library_that_cannot_be_preloaded_is_refused() {
    let dir = tempdir();
    let exe = program("echo_acc");
    let text = dir.path().join("libnot.so");
    std::fs::write(&text, "not a library\n").expect("write");
    // An ELF file that is not a shared object: a relocatable object.
    let obj = dir.path().join("obj.o");
    let cc = Command::new("gcc")
        .args(["-c", "-x", "c", "-", "-o"])
        .arg(&obj)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(b"int f(void){return 1;}\n")?;
            c.wait()
        })
        .expect("gcc runs");
    assert!(cc.success());
    for lib in [text.as_path(), obj.as_path(), dir.path()] {
        let mut cmd = Command::new(accprof());
        let out = cmd
            .current_dir(dir.path())
            .args(["run", "--lib"])
            .arg(lib)
            .arg("--")
            .arg(&exe)
            .output()
            .expect("accprof runs");
        assert_refused(&out, &lib.display().to_string());
    }
    let out = Command::new(accprof())
        .current_dir(dir.path())
        .env("ACCPROF_LIB", &text)
        .args(["run", "--"])
        .arg(&exe)
        .output()
        .expect("accprof runs");
    assert_refused(&out, "ACCPROF_LIB");
    assert!(traces(dir.path()).is_empty());
}

#[test]
fn an_existing_trace_is_kept_unless_forced() {
    let dir = tempdir();
    let exe = program("echo_acc");
    let bare = direct(&exe, &["5"]);
    let out = run_in(
        dir.path(),
        &["-o", "same.trace", "--no-summary"],
        &exe,
        &["5"],
    );
    assert_unchanged(&bare, &out, false);
    let trace = dir.path().join("same.trace");
    let first = std::fs::read(&trace).expect("first trace");

    let out = run_in(dir.path(), &["-o", "same.trace"], &exe, &["5"]);
    assert_refused(&out, "same.trace");
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(&trace).expect("kept"),
        first,
        "trace untouched"
    );

    let out = run_in(
        dir.path(),
        &["-o", "same.trace", "--force", "--no-summary"],
        &exe,
        &["5"],
    );
    assert_unchanged(&bare, &out, false);
    assert!(stderr(&out).contains("trace written to same.trace"));
    let second = header(&trace);
    assert_ne!(second.pid, header_pid_of(&first), "a new trace");
    assert_eq!(traces(dir.path()).len(), 1);

    // %p names a new file each run: nothing to refuse.
    for _ in 0..2 {
        let out = run_in(
            dir.path(),
            &["-o", "p-%p.trace", "--no-summary"],
            &exe,
            &["5"],
        );
        assert_unchanged(&bare, &out, false);
    }
    assert_eq!(traces(dir.path()).len(), 3);
}

fn header_pid_of(bytes: &[u8]) -> u32 {
    accprof_trace::Reader::new(bytes)
        .expect("trace reads")
        .header()
        .pid
}

/// A shell between the launcher and the OpenACC program: the program's
/// trace is found, summarised and named, and so is every other trace the
/// run left.
#[test]
fn traces_of_the_whole_process_tree_are_named() {
    let dir = tempdir();
    let exe = program("echo_acc");
    let script = format!("{} 6", exe.display());
    let sh = Path::new("/bin/sh");
    let bare = direct(sh, &["-c", &script]);
    let out = run_in(dir.path(), &["-o", "t-%p.trace"], sh, &["-c", &script]);
    assert_unchanged(&bare, &out, true);
    let err = stderr(&out);
    assert!(err.contains("Accelerator Kernel Timing data"), "{err}");
    assert!(!err.contains("left no trace"), "{err}");
    assert!(!err.contains("made no OpenACC calls"), "{err}");
    let written = traces(dir.path());
    assert!(!written.is_empty());
    for t in &written {
        let name = t.file_name().expect("name").to_string_lossy().into_owned();
        assert!(err.contains(&name), "{name} not named in: {err}");
    }
    // The OpenACC process is the one named as such.
    let acc = written
        .iter()
        .find(|t| header(t).executable.ends_with("echo_acc"))
        .expect("echo_acc's trace");
    let name = acc
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(
        err.contains(&format!("trace written to {name}\n"))
            || err.contains(&format!("{name} (pid {}, OpenACC)", header(acc).pid)),
        "{err}"
    );
}

/// A wrapper that execs the real program (a pyenv shim): its trace is
/// the program's, found and summarised.
#[test]
fn a_wrapper_that_execs_the_program_is_followed() {
    let dir = tempdir();
    let exe = program("echo_acc");
    let shim = dir.path().join("shim");
    std::fs::write(&shim, format!("#!/bin/sh\nexec {} \"$@\"\n", exe.display())).expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let bare = direct(&shim, &["7"]);
    let out = run_in(dir.path(), &["-o", "w-%p.trace"], &shim, &["7"]);
    assert_unchanged(&bare, &out, true);
    let err = stderr(&out);
    assert!(err.contains("Accelerator Kernel Timing data"), "{err}");
    let written = traces(dir.path());
    let acc = written
        .iter()
        .find(|t| header(t).executable.ends_with("echo_acc"))
        .expect("echo_acc's trace");
    let name = acc
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(err.contains(&name), "{name} not named in: {err}");
    assert!(!err.contains("left no trace"), "{err}");
}

/// No trace at all: said with the reason that holds.
#[test]
fn a_run_without_traces_says_why() {
    let dir = tempdir();
    let sh = Path::new("/bin/sh");
    let script = "echo before; kill -9 $$";
    let bare = direct(sh, &["-c", script]);
    let out = run_in(dir.path(), &["-o", "t-%p.trace"], sh, &["-c", script]);
    assert_eq!(out.status.code(), Some(137));
    assert_eq!(bare.status.code(), None, "the bare shell died of SIGKILL");
    assert_eq!(stdout(&bare), stdout(&out));
    assert_eq!(stderr(&bare), program_stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("left no trace: it was killed (SIGKILL)"),
        "{err}"
    );
    assert!(traces(dir.path()).is_empty());
    // An OpenACC program with the collector turned off: that is why.
    let exe = program("echo_acc");
    let bare = direct(&exe, &["3"]);
    let out = run_cmd(dir.path(), &["-o", "t-%p.trace"], &exe, &["3"])
        .env("ACCPROF_DISABLE", "1")
        .output()
        .expect("accprof runs");
    assert_eq!(out.status.code(), bare.status.code(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("left no trace: the collector was disabled by ACCPROF_DISABLE=1"),
        "{err}"
    );
    assert!(!err.contains("made no OpenACC calls"), "{err}");
    assert!(traces(dir.path()).is_empty());
}

#[test]
fn the_collectors_environment_is_honoured_and_flags_win() {
    let dir = tempdir();
    let exe = program("echo_acc");
    let bare = direct(&exe, &["0"]);
    let out = run_cmd(dir.path(), &["--no-summary"], &exe, &["0"])
        .env("ACCPROF_OUTPUT", "env.trace")
        .env("ACCPROF_HASH", "off")
        .env("ACCPROF_CUPTI", "0")
        .output()
        .expect("runs");
    assert_unchanged(&bare, &out, false);
    let h = header(&dir.path().join("env.trace"));
    assert_eq!(h.sources.hashing, accprof_trace::HashMode::Off);
    assert!(
        matches!(&h.sources.cupti, accprof_trace::SourceState::Inactive(why) if why.contains("ACCPROF_CUPTI=0")),
        "{:?}",
        h.sources.cupti
    );

    let out = run_cmd(
        dir.path(),
        &["--no-summary", "-o", "flag.trace", "--hash", "full"],
        &exe,
        &["0"],
    )
    .env("ACCPROF_OUTPUT", "env2.trace")
    .env("ACCPROF_HASH", "off")
    .output()
    .expect("runs");
    assert_unchanged(&bare, &out, false);
    assert!(!dir.path().join("env2.trace").exists());
    let h = header(&dir.path().join("flag.trace"));
    assert_eq!(h.sources.hashing, accprof_trace::HashMode::Full);

    // A value the collector would not understand is named, not ignored.
    let out = run_cmd(dir.path(), &[], &exe, &["0"])
        .env("ACCPROF_HASH", "most")
        .output()
        .expect("runs");
    assert_refused(&out, "ACCPROF_HASH=most");

    let help = Command::new(accprof())
        .args(["run", "--help"])
        .output()
        .expect("runs");
    let help = stdout(&help);
    for v in [
        "$ACCPROF_OUTPUT",
        "$ACCPROF_HASH",
        "ACCPROF_CUPTI=0",
        "$ACCPROF_LIB",
    ] {
        assert!(help.contains(v), "{v} not in --help:\n{help}");
    }
}

/// Peak memory of `cmd` and everything it ran, in KiB.
fn peak_kib(mut cmd: Command) -> (Output, i64) {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawns");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // The pipes are read after the wait: the storm prints one short line.
    // SAFETY: waiting for our own child with valid out-pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    use std::io::Read;
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut child = child;
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_end(&mut out)
        .expect("read");
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_end(&mut err)
        .expect("read");
    use std::os::unix::process::ExitStatusExt;
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: out,
        stderr: err,
    };
    (output, usage.ru_maxrss)
}

/// --no-summary reads the trace only as far as its first OpenACC record,
/// where loading the model of a large trace takes several times the
/// memory. The large trace is made once; the measured runs are of a shell
/// that copies it and names the copy in the manifest, as a collector
/// would, so the launcher's memory is what is measured.
#[test]
fn no_summary_does_not_load_the_trace() {
    let dir = tempdir();
    let storm = program("storm");
    let n = "300000";
    let out = run_in(
        dir.path(),
        &["-o", "storm.trace", "--no-summary"],
        &storm,
        &[n],
    );
    assert_unchanged(&direct(&storm, &[n]), &out, false);
    let sh = Path::new("/bin/sh");
    let script = |copy: &str| {
        format!(
            "echo copying; cp storm.trace {copy} && printf '%s\\t%s\\n' $$ \"$PWD/{copy}\" >> \"$ACCPROF_MANIFEST\""
        )
    };
    let measure = |extra: &[&str], copy: &str| {
        let script = script(copy);
        let bare = direct(sh, &["-c", "echo copying"]);
        let (out, kib) = peak_kib(run_cmd(dir.path(), extra, sh, &["-c", &script]));
        assert_unchanged(&bare, &out, !extra.contains(&"--no-summary"));
        assert!(stderr(&out).contains(copy), "{}", stderr(&out));
        kib
    };
    let quiet_kib = measure(&["-o", "q-%p.trace", "--no-summary"], "quiet.trace");
    let full_kib = measure(&["-o", "f-%p.trace"], "full.trace");
    assert!(
        quiet_kib * 2 < full_kib,
        "--no-summary peaked at {quiet_kib} KiB, the summary at {full_kib} KiB"
    );
    // Without OpenACC calls the message still comes, as cheaply.
    let plain = program("plain");
    let out = run_in(dir.path(), &["--no-summary"], &plain, &[]);
    assert_unchanged(&direct(&plain, &[]), &out, false);
    let err = stderr(&out);
    assert!(
        err.contains("made no OpenACC calls") || err.contains("left no trace"),
        "{err}"
    );
}

/// The binary on its own, as `cargo install` leaves it: the collector it
/// carries is written to the cache directory and used.
#[test]
fn an_installed_binary_runs_programs_without_a_library_beside_it() {
    let dir = tempdir();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let installed = bin.join("accprof");
    std::fs::copy(accprof(), &installed).expect("copy binary");
    let cache = dir.path().join("cache");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let exe = program("echo_acc");
    let bare = direct(&exe, &["0"]);
    let run = |cache_env: (&str, &Path)| {
        let mut cmd = Command::new(&installed);
        cmd.current_dir(&work)
            .args(["run", "-o", "t-%p.trace", "--no-summary", "--"])
            .arg(&exe)
            .arg("0")
            .env_remove("ACCPROF_LIB")
            .env_remove("ACCPROF_OUTPUT")
            .env_remove("XDG_CACHE_HOME")
            .env("HOME", dir.path().join("home"))
            .env(cache_env.0, cache_env.1);
        cmd.output().expect("accprof runs")
    };
    let out = run(("XDG_CACHE_HOME", &cache));
    assert_unchanged(&bare, &out, false);
    assert_eq!(traces(&work).len(), 1, "{}", stderr(&out));
    let cached: Vec<PathBuf> = std::fs::read_dir(cache.join("accprof"))
        .expect("cache written")
        .map(|e| e.expect("entry").path().join("libaccprof.so"))
        .collect();
    assert!(cached.len() == 1 && cached[0].is_file(), "{cached:?}");
    // Without XDG_CACHE_HOME: ~/.cache.
    let home = dir.path().join("home");
    let out = run(("HOME", &home));
    assert_unchanged(&bare, &out, false);
    assert_eq!(traces(&work).len(), 2, "{}", stderr(&out));
    assert!(home.join(".cache/accprof").is_dir());
}

#[test]
fn help_ends_with_examples_and_completions_cover_the_subcommands() {
    for sub in ["run", "report", "analyze", "completions"] {
        let out = Command::new(accprof())
            .args([sub, "--help"])
            .output()
            .expect("runs");
        let s = stdout(&out);
        let tail = &s[s.rfind("Examples:").expect("examples in help")..];
        assert!(
            tail.lines().filter(|l| l.contains("accprof ")).count() >= 2,
            "{sub}: {tail}"
        );
    }
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(accprof())
            .args(["completions", shell])
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(0));
        let s = stdout(&out);
        assert!(
            s.contains("analyze") && s.contains("no-summary"),
            "{shell}: {s}"
        );
    }
}

/// Names and arguments are bytes on Linux: a program, its arguments and
/// the directory it runs in need not be UTF-8. The trace written in such
/// a directory is found through the manifest and summarized.
#[test]
fn names_arguments_and_directories_that_are_not_utf8_work() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let top = tempdir();
    // "café" in Latin-1.
    let dir = top.path().join(OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&dir).expect("mkdir");
    let exe = dir.join(OsStr::from_bytes(b"echo\xff"));
    std::fs::copy(program("echo_acc"), &exe).expect("copy");
    let arg = OsStr::from_bytes(b"3\xfe");
    let mut cmd = run_cmd(&dir, &[], &exe, &[]);
    let out = cmd.arg(arg).output().expect("accprof runs");
    let err = stderr(&out);
    // atoi("3\xfe") is 3: the argument came through as its bytes.
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(stdout(&out), "sum 499500\n");
    assert!(!err.contains("invalid UTF-8"), "{err}");
    assert!(!err.contains("removed before the run ended"), "{err}");
    assert!(err.contains("Accelerator Kernel Timing data"), "{err}");
    assert!(err.contains("compute region reached 1 time"), "{err}");
    let written = traces(&dir);
    assert_eq!(written.len(), 1, "{written:?}");
    let name = written[0].file_name().expect("name").to_string_lossy();
    assert!(
        err.contains(&format!("accprof: trace written to {name}")),
        "{err}"
    );
}

/// A script without a `#!` line runs under /bin/sh, as a shell runs it;
/// the environment (and so the collector) reaches what it starts.
#[test]
fn a_script_without_a_shebang_runs_under_sh() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let script = dir.path().join("plain-script");
    std::fs::write(
        &script,
        format!(
            "echo \"script got $# args: $*\"\n{} 5\n",
            program("echo_acc").display()
        ),
    )
    .expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = run_in(dir.path(), &["-o", "s-%p.trace"], &script, &["a", "b c"]);
    let err = stderr(&out);
    assert!(!err.contains("Exec format error"), "{err}");
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert_eq!(stdout(&out), "script got 2 args: a b c\nsum 499500\n");
    assert!(err.contains("compute region reached 1 time"), "{err}");
}

/// A directory is not a program: said so, not "Permission denied".
#[test]
fn a_directory_as_the_program_is_refused_as_one() {
    let dir = tempdir();
    let out = run_in(dir.path(), &[], dir.path(), &[]);
    assert_refused(&out, "is a directory, not a program");
    assert!(!stderr(&out).contains("Permission denied"));
    assert!(traces(dir.path()).is_empty());
}

/// Killed with SIGKILL, the launcher takes its program with it, and
/// leaves no manifest in the temporary directory.
#[test]
fn a_killed_launcher_takes_its_program_with_it_and_leaves_no_files() {
    let dir = tempdir();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    let mut launcher = run_cmd(
        dir.path(),
        &["-o", "k-%p.trace"],
        Path::new("sleep"),
        &["60"],
    )
    .env("TMPDIR", &tmp)
    .spawn()
    .expect("accprof runs");
    let children = format!("/proc/{0}/task/{0}/children", launcher.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let child: u32 = loop {
        let text = std::fs::read_to_string(&children).unwrap_or_default();
        if let Some(pid) = text.split_whitespace().next() {
            break pid.parse().expect("a pid");
        }
        assert!(std::time::Instant::now() < deadline, "no child started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // The program is running (not the launcher between fork and exec).
    let comm = format!("/proc/{child}/comm");
    while std::fs::read_to_string(&comm).unwrap_or_default().trim() != "sleep" {
        assert!(
            std::time::Instant::now() < deadline,
            "the program never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    launcher.kill().expect("SIGKILL");
    launcher.wait().expect("reaped");
    // Gone, or a zombie until init reaps it.
    let stat = format!("/proc/{child}/stat");
    let gone = || {
        std::fs::read_to_string(&stat).map_or(true, |s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X']))
        })
    };
    while !gone() {
        assert!(
            std::time::Instant::now() < deadline,
            "the program outlived its launcher"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .expect("tmp")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

#[test]
fn paths_that_are_not_utf8_work_end_to_end() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let latin1 = |s: &[u8]| OsString::from_vec(s.to_vec());
    let dir = tempdir();
    // The program, named in Latin-1 ("écho"), in a directory named so too
    // ("café").
    let bin = dir.path().join(latin1(b"caf\xe9"));
    std::fs::create_dir(&bin).expect("mkdir");
    let exe = bin.join(latin1(b"\xe9cho"));
    std::fs::copy(program("echo_acc"), &exe).expect("copy");
    let bare = direct(&exe, &["3"]);
    // -o names the trace in Latin-1 too.
    let out = Command::new(accprof())
        .current_dir(dir.path())
        .args(["run", "--no-summary", "--lib"])
        .arg(collector_lib())
        .arg("-o")
        .arg(latin1(b"t\xe9-%p.trace"))
        .arg("--")
        .arg(&exe)
        .arg("3")
        .env_remove("ACCPROF_OUTPUT")
        .env_remove("LD_PRELOAD")
        .output()
        .expect("accprof runs");
    assert_unchanged(&bare, &out, false);
    let t = traces(dir.path());
    assert_eq!(t.len(), 1, "{t:?}");
    assert!(
        t[0].file_name()
            .is_some_and(|n| n.as_encoded_bytes().starts_with(b"t\xe9-")),
        "{t:?}"
    );
    // ACCPROF_OUTPUT in Latin-1 is honoured, not ignored.
    let out = run_cmd(dir.path(), &["--no-summary"], &exe, &["3"])
        .env("ACCPROF_OUTPUT", latin1(b"e\xe9-%p.trace"))
        .output()
        .expect("accprof runs");
    assert_unchanged(&bare, &out, false);
    let named: Vec<_> = traces(dir.path())
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.as_encoded_bytes().starts_with(b"e\xe9-"))
        })
        .collect();
    assert_eq!(named.len(), 1, "{:?}", traces(dir.path()));
    // The program's source lines, from the binary where it ran...
    let report = |extra: &[&std::ffi::OsStr]| {
        let out = Command::new(accprof())
            .arg("report")
            .args(extra)
            .arg(&t[0])
            .output()
            .expect("accprof runs");
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let lines = |text: &str| {
        text.contains("echo_acc.c\n")
            && text.contains("    10: compute region")
            && !text.contains("  ?  ")
    };
    let text = report(&[]);
    assert!(lines(&text), "{text}");
    // ... and from a copy named the same way once it moved (--symbols).
    let syms = dir.path().join("syms");
    std::fs::create_dir_all(&syms).expect("mkdir");
    std::fs::rename(&exe, syms.join(latin1(b"\xe9cho"))).expect("move");
    std::fs::remove_dir(&bin).expect("rmdir");
    let text = report(&["--symbols".as_ref(), syms.as_os_str()]);
    assert!(lines(&text), "{text}");
}
