//! The OpenACC sample programs in samples/: they build with their Makefile
//! (with GPU offload when the compiler has it, and host-only with
//! OFFLOAD=no), every one of them reproduces its plain CPU reference with
//! small arguments (the coherence samples in their variants that are right
//! on a GPU too), the MPI samples do so on 2 and 4 ranks, and the source lines
//! their header comments name are the constructs they claim.
//!
//! Needs make and gcc (gfortran, mpicc and mpirun for some samples); a
//! missing tool fails the test unless ACCPROF_TEST_ALLOW_MISSING names it.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::need;

/// C samples and their small (CI) arguments.
const C_SAMPLES: &[(&str, &[&str])] = &[
    ("heat2d_naive", &["96", "80", "20"]),
    ("heat2d_data", &["96", "80", "20", "6"]),
    ("heat2d_collapse", &["96", "80", "10"]),
    ("laplace_bad", &["128", "50"]),
    ("laplace_good", &["128", "50"]),
    // Stops at the tolerance long before the iteration limit.
    ("laplace_good", &["16", "100000", "1e-3"]),
    ("launch_storm", &["2000", "64"]),
    ("launch_shapes", &["256", "10"]),
    ("async", &["100000", "7", "3", "3"]),
    ("async", &["10", "4", "8", "2"]),
    ("threads", &["3", "20000", "20"]),
    ("default_async", &["1000", "3", "2"]),
    ("small_kernels", &["8", "20"]),
    ("caller_loop", &["64", "48", "10"]),
    ("caller_files", &["64", "48", "10"]),
    ("partial_region", &["64", "48", "20"]),
    ("partial_region", &["64", "48", "7"]),
    ("cond_update", &["64", "48", "20", "4"]),
    // The coherence samples: the variants that are right on a GPU too.
    ("lost_write", &["64", "48", "20", "5", "fixed"]),
    ("unread_download", &["64", "48", "20", "5"]),
    ("unread_download", &["64", "48", "20", "5", "fixed"]),
    ("shared_page", &["4500", "20", "fixed"]),
    ("own_handler", &["64", "48", "20", "5"]),
    ("coherence_threads", &["20000", "20", "5", "0"]),
    ("coherence_vector", &["64", "48", "20", "5", "fixed"]),
    ("coherence_lib", &["65536", "fixed"]),
    ("coherence_globals", &["4096", "20", "fixed"]),
    ("coherence_enter", &["4096", "20", "5", "fixed"]),
    ("coherence_declare", &["4096", "20", "5"]),
    ("coherence_declare", &["4096", "20", "5", "fixed"]),
    ("coherence_api", &["4096", "20", "map", "fixed"]),
    ("coherence_api", &["4096", "20", "create", "fixed"]),
    ("coherence_api", &["4096", "20", "copyin", "fixed"]),
    ("coherence_vector_enter", &["4096", "20", "fixed"]),
    ("deep_copy", &["4096", "5", "2"]),
    ("deep_copy", &["4096", "5", "2", "fixed"]),
];

/// Fortran samples (binary names end in _f90) and their small arguments.
const FORTRAN_SAMPLES: &[(&str, &[&str])] = &[
    ("laplace_bad_f90", &["128", "50"]),
    ("laplace_good_f90", &["128", "50"]),
    ("laplace_good_f90", &["16", "100000", "1e-3"]),
    ("jacobi_f90", &["128", "50"]),
    ("caller_loop_f90", &["64", "48", "10"]),
    ("coherence_norm_f90", &["64", "48", "20", "5", "fixed"]),
    ("coherence_print_f90", &["65536", "fixed"]),
    ("coherence_module_f90", &["4096", "20", "fixed"]),
];

const MPI_ARGS: &[&str] = &["64", "48", "20"];

/// Source files whose headers document expected profiles.
const SOURCES: &[&str] = &[
    "heat2d_naive.c",
    "heat2d_data.c",
    "heat2d_collapse.c",
    "laplace_bad.c",
    "laplace_good.c",
    "laplace_bad.f90",
    "laplace_good.f90",
    "jacobi.f90",
    "launch_storm.c",
    "launch_shapes.c",
    "async.c",
    "threads.c",
    "mpi_halo.c",
    "mpi_halo_whole.c",
    "mpi_slab.f90",
    "default_async.c",
    "small_kernels.c",
    "device_fault.c",
    "caller_loop.c",
    "caller_loop.f90",
    "caller_files.c",
    "caller_files_step.c",
    "partial_region.c",
    "cond_update.c",
    "coherence_norm.c",
    "coherence_norm.f90",
    "lost_write.c",
    "unread_download.c",
    "shared_page.c",
    "own_handler.c",
    "coherence_threads.c",
    "mpi_halo_stale.c",
    "coherence_vector.cpp",
    "coherence_lib.c",
    "coherence_print.f90",
    "coherence_globals.c",
    "coherence_enter.c",
    "coherence_declare.c",
    "coherence_api.c",
    "coherence_module.f90",
    "coherence_vector_enter.cpp",
    "deep_copy.c",
];

const RUN_TIMEOUT: Duration = Duration::from_secs(120);

fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples")
}

/// Runs a command to completion with a time limit, capturing its output.
fn run_with_timeout(cmd: &mut Command, what: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    // Drain the pipes on their own threads so a chatty child cannot block.
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let err_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > RUN_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: still running after {RUN_TIMEOUT:?}, killed");
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("{what}: wait failed: {e}"),
        }
    };
    Output {
        status,
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `make -C samples BUILD=dir OFFLOAD=offload`; returns the make output.
fn build(dir: &Path, offload: &str) -> String {
    let output = run_with_timeout(
        Command::new("make")
            .arg("-C")
            .arg(samples_dir())
            .arg("-j2")
            .arg(format!("BUILD={}", dir.display()))
            .arg(format!("OFFLOAD={offload}")),
        &format!("make OFFLOAD={offload}"),
    );
    let log = text(&output);
    assert!(
        output.status.success(),
        "make OFFLOAD={offload} failed:\n{log}"
    );
    log
}

/// Runs one sample and checks that it matched its CPU reference.
fn check_run(label: &str, cmd: &mut Command) {
    let output = run_with_timeout(cmd, label);
    let log = text(&output);
    assert!(
        output.status.success(),
        "{label}: exit status {:?}\n{log}",
        output.status.code()
    );
    assert!(
        log.lines().any(|l| l == "reference: match"),
        "{label}: no 'reference: match' line\n{log}"
    );
    assert!(
        log.lines().any(|l| l.starts_with("checksum: ")),
        "{label}: no 'checksum:' line\n{log}"
    );
}

fn build_and_run_all(offload: &str) {
    if !need("make") || !need("gcc") {
        return;
    }
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path();
    let log = build(dir, offload);
    eprintln!("samples build (OFFLOAD={offload}):\n{log}");
    assert!(
        !log.contains("warning"),
        "the samples should build without warnings (OFFLOAD={offload}):\n{log}"
    );

    let mut cases: Vec<(&str, &[&str])> = C_SAMPLES.to_vec();
    if need("gfortran") {
        cases.extend_from_slice(FORTRAN_SAMPLES);
    }
    for (name, args) in cases {
        let bin = dir.join(name);
        assert!(bin.is_file(), "{} was not built:\n{log}", bin.display());
        check_run(
            &format!("{name} {}", args.join(" ")),
            Command::new(&bin).args(args),
        );
    }

    if !need("mpicc") {
        return;
    }
    for name in ["mpi_halo", "mpi_halo_whole", "mpi_halo_stale"] {
        let bin = dir.join(name);
        assert!(bin.is_file(), "{} was not built:\n{log}", bin.display());
    }
    if !need("mpirun") {
        return;
    }
    let open_mpi = Command::new("mpirun")
        .arg("--version")
        .output()
        .map(|o| text(&o).contains("Open MPI"))
        .unwrap_or(false);
    for (name, np, variant) in [
        ("mpi_halo", "2", None),
        ("mpi_halo", "4", None),
        ("mpi_halo_whole", "2", None),
        ("mpi_halo_whole", "4", None),
        ("mpi_halo_stale", "2", Some("fixed")),
        ("mpi_halo_stale", "4", Some("fixed")),
    ] {
        let bin = dir.join(name);
        let mut cmd = Command::new("mpirun");
        // Open MPI refuses to run as root and to put more ranks than cores
        // on a node unless told to (CI runs as root on 2 cores).
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        if open_mpi {
            cmd.arg("--oversubscribe");
        }
        cmd.args(["-np", np]).arg(&bin).args(MPI_ARGS).args(variant);
        check_run(
            &format!(
                "mpirun -np {np} {name} {} {}",
                MPI_ARGS.join(" "),
                variant.unwrap_or("")
            ),
            &mut cmd,
        );
    }
}

#[test]
fn default_build_runs_every_sample() {
    // OFFLOAD=auto: GPU code where the compiler can make it (it can in CI).
    build_and_run_all("auto");
}

#[test]
fn host_only_build_runs_every_sample() {
    build_and_run_all("no");
}

/// Every "line N: `text`" in a header names a line of that file holding text.
#[test]
fn header_line_references_are_exact() {
    for name in SOURCES {
        let path = samples_dir().join(name);
        let source =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let lines: Vec<&str> = source.lines().collect();
        let fortran = name.ends_with(".f90");
        let header_len = lines
            .iter()
            .position(|l| {
                if fortran {
                    !l.starts_with('!')
                } else {
                    l.trim() == "*/"
                }
            })
            .unwrap_or_else(|| panic!("{name}: no header comment"));
        let mut found = 0;
        for (i, line) in lines[..header_len].iter().enumerate() {
            let Some((number, quoted)) = line_reference(line) else {
                continue;
            };
            found += 1;
            let target = number
                .checked_sub(1)
                .and_then(|n| lines.get(n))
                .unwrap_or_else(|| panic!("{name}:{}: line {number} does not exist", i + 1));
            assert!(
                number > header_len && target.contains(quoted),
                "{name}:{}: line {number} should hold `{quoted}` but is `{target}`",
                i + 1
            );
        }
        assert!(found >= 2, "{name}: header names only {found} source lines");
    }
}

/// Parses the first "line 123: `text`" in a line into (123, "text").
fn line_reference(line: &str) -> Option<(usize, &str)> {
    line.match_indices("line ").find_map(|(at, _)| {
        let rest = &line[at + 5..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let number = rest[..digits].parse().ok()?;
        let rest = rest[digits..].strip_prefix(": `")?;
        let end = rest.find('`')?;
        Some((number, &rest[..end]))
    })
}
