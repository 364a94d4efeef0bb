//! Shared by the end-to-end tests: the accprof binary, the collector library,
//! the compiled samples and the small test programs, each built once.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The variable that lets a run pass tests whose tool is missing, named
/// one by one (`gfortran,tmux`); CI sets none, so there every test runs.
pub const ALLOW_MISSING: &str = "ACCPROF_TEST_ALLOW_MISSING";

/// Whether a test that needs `tool` goes on. A tool that is there: true.
/// A missing one fails the test, unless the run allows it by name in
/// `ACCPROF_TEST_ALLOW_MISSING`: then the test says it did not run and
/// passes (false), so a machine without the tool never goes green having
/// tested less without saying so.
pub fn need(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool} >/dev/null 2>&1"))
        .status()
        .is_ok_and(|s| s.success());
    found || allowed_missing(tool)
}

/// A missing `tool` (a command, or `pandas`): allowed by name in
/// `ACCPROF_TEST_ALLOW_MISSING` (said, and false), else the test fails.
pub fn allowed_missing(tool: &str) -> bool {
    let allowed = std::env::var(ALLOW_MISSING).unwrap_or_default();
    assert!(
        allowed.split(',').any(|t| t.trim() == tool),
        "{tool} not found: this test needs it (scripts/setup.sh installs it; \
         {ALLOW_MISSING}={tool} lets the tests pass without it, untested)"
    );
    eprintln!("{tool} not found: this test did not run ({ALLOW_MISSING} allows it)");
    false
}

pub fn accprof() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_accprof"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where this test run's builds go (inside the cargo target directory).
pub fn build_dir() -> PathBuf {
    accprof()
        .parent()
        .expect("binary has a directory")
        .join("accprof-tests")
}

/// libaccprof.so next to the accprof binary, built with the same profile.
pub fn collector_lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = accprof().parent().expect("binary dir").to_path_buf();
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-q", "-p", "accprof-collector"])
            .current_dir(repo());
        if dir.ends_with("release") {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("cargo runs");
        assert!(st.success(), "building the collector failed");
        let lib = dir.join("libaccprof.so");
        assert!(lib.is_file(), "{} missing after build", lib.display());
        lib
    })
    .clone()
}

/// The samples, built once with the samples Makefile.
pub fn samples() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = build_dir().join("samples");
        let st = Command::new("make")
            .args(["-s", "-C"])
            .arg(repo().join("samples"))
            .arg(format!("BUILD={}", out.display()))
            .status()
            .expect("make runs");
        assert!(st.success(), "building the samples failed");
        out
    })
    .clone()
}

/// Compiles one of cli/tests/programs/*.c with GCC's OpenACC support, once
/// per test process (tests run in parallel and share the binaries).
pub fn program(name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let exe = build_dir().join("programs").join(name);
    if built.iter().any(|b| b == name) {
        return exe;
    }
    let exe = compile(name);
    built.push(name.to_string());
    exe
}

fn compile(name: &str) -> PathBuf {
    let dir = build_dir().join("programs");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let src = repo().join("cli/tests/programs").join(format!("{name}.c"));
    let exe = dir.join(name);
    let mut cmd = Command::new("gcc");
    cmd.args(["-g", "-O1", "-fopenacc", "-pthread", "-rdynamic"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-ldl");
    let out = cmd.output().expect("gcc runs");
    assert!(
        out.status.success(),
        "compiling {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The command `accprof run EXTRA -- program args`, traces going to `dir`.
pub fn accprof_run_command(dir: &Path, extra: &[&str], program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(accprof());
    cmd.arg("run")
        .arg("--lib")
        .arg(collector_lib())
        .arg("--output")
        .arg(dir.join("t-%p.trace"))
        .args(extra)
        .arg("--")
        .arg(program)
        .args(args);
    cmd
}

/// Runs `accprof run` with traces going to `dir`.
pub fn accprof_run(dir: &Path, extra: &[&str], program: &Path, args: &[&str]) -> Output {
    accprof_run_command(dir, extra, program, args)
        .output()
        .expect("accprof runs")
}

/// Every trace file in `dir`.
pub fn traces(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "trace"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Lines of `file` (1-based) that hold an OpenACC directive of one of `kinds`.
pub fn directive_lines(file: &Path, kinds: &[&str]) -> Vec<u32> {
    let text = std::fs::read_to_string(file).expect("source readable");
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim_start().to_ascii_lowercase();
            let body = t
                .strip_prefix("#pragma acc ")
                .or_else(|| t.strip_prefix("!$acc "));
            body.is_some_and(|b| kinds.iter().any(|k| b.starts_with(k)))
        })
        .map(|(i, _)| i as u32 + 1)
        .collect()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Where the H200 fixture traces say their sources were: the samples/
/// folder of the checkout they were built in. Tests map it (`--source-map
/// H200_SAMPLES=DIR`) to the samples of this checkout, or to a folder
/// that does not exist; nothing is read at this path itself.
pub const H200_SAMPLES: &str = "/work/main/samples";

/// The samples folder the H100 caller fixtures (caller_loop, caller_files)
/// were built in, as their binaries' line tables name it; as with
/// [`H200_SAMPLES`], tests only map it elsewhere (`--source-map`), nothing
/// is read there.
pub const H100_CALLER_SAMPLES: &str = "/work/snapD/samples";

/// The H200 fixture traces (tests/fixtures/h200).
pub fn h200_fixtures() -> PathBuf {
    accprof_analyzer::testkit::fixtures::dir("h200")
}

/// One H200 fixture trace, loaded with its binaries from the fixture
/// folder only, never from the paths recorded on the GPU machine, so a
/// fixture reads the same on every machine.
pub fn h200_fixture(name: &str) -> accprof_analyzer::Run {
    accprof_analyzer::testkit::fixtures::load("h200", name)
}

/// `accprof SUBCOMMAND` reading binaries from the H200 fixture folder only.
pub fn accprof_on_fixtures(subcommand: &str) -> Command {
    let mut cmd = Command::new(accprof());
    cmd.arg(subcommand)
        .arg("--symbols")
        .arg(h200_fixtures().join("bin"))
        .env_remove("ACCPROF_SYMBOL_PATH")
        .env("ACCPROF_SYMBOLS_ONLY", "1");
    cmd
}

/// `program` set up to run with the collector preloaded directly (no
/// launcher), writing its trace to `output` (a pattern), with no summary at
/// exit and no manifest or base directory inherited from the environment.
pub fn preloaded(program: &Path, output: &Path) -> Command {
    use accprof_trace::contract::env;
    let mut cmd = Command::new(program);
    cmd.env("LD_PRELOAD", collector_lib())
        .env(env::OUTPUT, output)
        .env_remove(env::TIME)
        .env_remove(env::MANIFEST)
        .env_remove(env::BASE_DIR);
    for v in env::TIME_ALIASES {
        cmd.env_remove(v);
    }
    cmd
}

/// The number a finding of `analyze --json` gives as evidence `name`.
pub fn evidence_u64(finding: &serde_json::Value, name: &str) -> u64 {
    finding["evidence"]["fields"]
        .as_array()
        .expect("evidence fields")
        .iter()
        .find(|x| x["name"] == name)
        .and_then(|x| x["value"].as_u64())
        .unwrap_or_else(|| panic!("{name} in {finding}"))
}

/// fake_libcuda.c built as a shared library with the CUDA driver's soname.
pub fn fake_libcuda() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = build_dir().join("programs");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let lib = dir.join("libfakecuda.so");
        let src = repo().join("cli/tests/programs/fake_libcuda.c");
        let out = Command::new("gcc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&lib)
            .arg(&src)
            .output()
            .expect("gcc runs");
        assert!(
            out.status.success(),
            "compiling fake_libcuda.c: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        lib
    })
    .clone()
}

/// The coherence driver (programs/coherence_driver.c) in `mode`,
/// preloaded directly, writing its trace into `dir`, with the check on or
/// off.
pub fn drive(dir: &Path, mode: &str, check: bool) -> Output {
    let exe = program("coherence_driver");
    let mut cmd = preloaded(&exe, &dir.join("t-%p.trace"));
    cmd.arg(mode)
        .env_remove("ACCPROF_QUIET")
        .env("FAKE_LIBCUDA", fake_libcuda());
    if check {
        cmd.env("ACCPROF_CHECK", "coherence");
    } else {
        cmd.env_remove("ACCPROF_CHECK");
    }
    // A check that waits on itself (the runtime's routine it calls sends
    // events of its own) hangs the program: fail instead of waiting.
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("driver runs");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(out) => out.expect("driver output"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("{mode}: the driver did not finish in 60 s");
        }
    }
}

/// The trace of the coherence driver's `all` mode (one stale read, one
/// lost write, two downloads nobody read), recorded into `dir`.
pub fn coherence_trace(dir: &Path) -> PathBuf {
    let out = drive(dir, "all", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let t = traces(dir);
    assert_eq!(t.len(), 1, "one trace in {}: {t:?}", dir.display());
    t[0].clone()
}

/// `accprof ARGS` on fixture `name` of `gpu` (a folder of
/// tests/fixtures) with its binaries and the repository's samples;
/// stdout. Fails unless it exits 0.
pub fn on_fixture(gpu: &str, name: &str, args: &[&str]) -> String {
    let dir = accprof_analyzer::testkit::fixtures::dir(gpu);
    let out = Command::new(accprof())
        .args(args)
        .arg("--symbols")
        .arg(dir.join("bin"))
        .arg("--source-dir")
        .arg(accprof_analyzer::testkit::fixtures::samples())
        .arg(dir.join(format!("{name}.trace")))
        .env_remove("ACCPROF_SYMBOL_PATH")
        .env("ACCPROF_SYMBOLS_ONLY", "1")
        .output()
        .expect("accprof runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?} {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The timeline of `session` in `state` drawn without colour on a
/// `width` x `height` terminal, as text.
pub fn render_text(
    session: &accprof_tui::Session,
    state: &accprof_tui::state::State,
    width: u16,
    height: u16,
) -> String {
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height))
        .expect("terminal");
    term.draw(|f| {
        let area = f.area();
        accprof_tui::view::render(
            session,
            state,
            accprof_tui::style::Palette { color: false },
            area,
            f.buffer_mut(),
        );
    })
    .expect("draw");
    accprof_tui::view::buffer_text(term.backend().buffer())
}
