//! The PGI_ACC_TIME-style summary on real traces.
//!
//! - Counts on the H200 fixture traces (cli/tests/fixtures/h200, recorded by
//!   cli/tests/fixtures/record.sh): regions reached, kernel launches and
//!   host<->device transfers per source line equal what each sample does.
//!   The expected numbers are derived here from the samples' sources (their
//!   directive lines, array sizes and loop structure) and from the arguments
//!   record.sh ran them with, never from the output.
//! - Full-text goldens of `accprof report` (cli/tests/golden; rewrite them
//!   with `ACCPROF_BLESS=1 cargo test -p accprof --test summary`).
//! - Bad input, --sort time, the extended view, several traces (MPI ranks,
//!   recorded here with mpirun), and the summary printed at exit by the
//!   preloaded library alone.
//!
//! The fixtures name their binaries by paths on the recording machine; the
//! copies in cli/tests/fixtures/h200/bin (same build ids) give the source
//! lines anywhere (`--symbols`).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use accprof_analyzer::summary::{LineSummary, Reached, Summary};
use accprof_trace::CopyKind;
use support::*;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    h200_fixtures()
}

fn fixture(name: &str) -> PathBuf {
    fixtures().join(format!("{name}.trace"))
}

fn symbols() -> PathBuf {
    fixtures().join("bin")
}

fn source(name: &str) -> PathBuf {
    manifest().join("../samples").join(name)
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// `accprof report ARGS`, reading binaries from the fixture copies only.
fn report(args: &[&std::ffi::OsStr]) -> Output {
    accprof_on_fixtures("report")
        .args(args)
        .output()
        .expect("accprof runs")
}

/// `accprof report ARGS` on traces recorded here: binaries at their
/// recorded paths.
fn report_here(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(accprof())
        .arg("report")
        .args(args)
        .env_remove("ACCPROF_SYMBOL_PATH")
        .output()
        .expect("accprof runs")
}

fn report_of(path: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = extra.iter().map(std::ffi::OsStr::new).collect();
    args.push(path.as_os_str());
    report(&args)
}

fn summary_of(name: &str) -> Summary {
    let run = h200_fixture(name);
    assert!(
        run.process.losses.is_empty(),
        "{name}: {:?}",
        run.process.losses
    );
    assert!(
        run.process.notes.is_empty(),
        "{name}: every site should have a source line: {:?}",
        run.process.notes
    );
    run.summary().clone()
}

/// The arguments record.sh ran a fixture's program with.
fn recorded_args(name: &str) -> Vec<u64> {
    let script =
        std::fs::read_to_string(manifest().join("tests/fixtures/record.sh")).expect("record.sh");
    let line = script
        .lines()
        .find(|l| l.split_whitespace().take(2).eq(["rec", name]))
        .unwrap_or_else(|| panic!("record.sh has no `rec {name}` line"));
    line.split_whitespace()
        .skip(3)
        .map(|a| a.parse().expect("numeric argument"))
        .collect()
}

/// `LAPLACE_NMAX ?= N` from the samples Makefile (the size of the global
/// arrays of the C laplace samples).
fn laplace_nmax() -> u64 {
    let mk = std::fs::read_to_string(source("Makefile")).expect("Makefile");
    mk.lines()
        .find_map(|l| l.strip_prefix("LAPLACE_NMAX ?= "))
        .and_then(|v| v.trim().parse().ok())
        .expect("LAPLACE_NMAX in the Makefile")
}

/// The default of argument `index` (1-based) from the "Usage: ...
/// defaults: a b c" line of a sample's header.
fn usage_default(file: &str, index: usize) -> u64 {
    let text = std::fs::read_to_string(source(file)).expect("source");
    let usage = text
        .lines()
        .find(|l| l.contains("Usage:") && l.contains("defaults:"))
        .expect("usage line");
    let defaults = usage.split("defaults:").nth(1).expect("defaults");
    defaults
        .split_whitespace()
        .nth(index - 1)
        .and_then(|v| v.parse().ok())
        .expect("numeric default")
}

/// The one summary line for `line` of the source file ending in `file`.
fn line<'a>(s: &'a Summary, file: &str, line: u32) -> &'a LineSummary {
    let found: Vec<&LineSummary> = s
        .functions
        .iter()
        .filter(|f| f.file.ends_with(file))
        .flat_map(|f| f.lines.iter())
        .filter(|l| l.line == Some(line))
        .collect();
    assert_eq!(found.len(), 1, "{file}:{line} should appear once");
    found[0]
}

/// Lines of `file` with a compute region in the summary.
fn compute_lines(s: &Summary, file: &str) -> Vec<u32> {
    s.functions
        .iter()
        .filter(|f| f.file.ends_with(file))
        .flat_map(|f| f.lines.iter())
        .filter(|l| l.reached.contains_key(&Reached::ComputeRegion))
        .filter_map(|l| l.line)
        .collect()
}

/// What one line is expected to show.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    compute: u64,
    launches: u64,
    /// Data region entries plus exits (and the implicit ones of compute
    /// constructs: GCC opens an enter and an exit data event inside each).
    data: u64,
    update: u64,
    /// Transfers of exactly one whole array.
    big_in: u64,
    big_out: u64,
}

fn reached(l: &LineSummary, r: Reached) -> u64 {
    l.reached.get(&r).map_or(0, |s| s.count)
}

fn transfers(l: &LineSummary, dir: CopyKind) -> Option<&accprof_analyzer::summary::TransferLine> {
    l.transfers.iter().find(|t| t.direction == Some(dir))
}

/// Small transfers are what GCC moves besides the arrays: scalars (dt, n)
/// and the kernel-argument block, and Fortran array descriptors.
const SMALL: u64 = 1024;

fn counts(l: &LineSummary, array_bytes: u64) -> Counts {
    let big = |dir| {
        transfers(l, dir).map_or(0, |t| {
            assert_eq!(t.other_sizes, 0);
            for s in &t.sizes {
                assert!(
                    s.bytes == array_bytes || s.bytes < SMALL,
                    "line {:?}: a {dir:?} transfer of {} bytes is neither the array ({array_bytes}) nor small",
                    l.line,
                    s.bytes
                );
            }
            t.count_of_size(array_bytes)
        })
    };
    Counts {
        compute: reached(l, Reached::ComputeRegion),
        launches: l.kernels.iter().map(|k| k.launches).sum(),
        data: reached(l, Reached::DataRegion),
        update: reached(l, Reached::Update),
        big_in: big(CopyKind::HostToDevice),
        big_out: big(CopyKind::DeviceToHost),
    }
}

/// A compute construct reached `n` times with no array transfers.
fn compute_only(n: u64) -> Counts {
    Counts {
        compute: n,
        launches: n,
        data: 2 * n,
        ..Default::default()
    }
}

#[test]
fn laplace_bad_c_counts() {
    let s = summary_of("laplace_bad_c");
    // record.sh: laplace_bad N ITERS TOL = 256 20 0. With TOL 0 the loop
    // runs all ITERS iterations (the max change never reaches 0 in 20).
    let [_n, iters, _tol] = recorded_args("laplace_bad_c")[..] else {
        panic!("three arguments")
    };
    // The arrays are global, sized by LAPLACE_NMAX whatever N is.
    let a = 8 * (laplace_nmax() + 2).pow(2);
    let kernels = directive_lines(&source("laplace_bad.c"), &["kernels"]);
    assert_eq!(kernels.len(), 2, "two kernels regions per iteration");
    assert_eq!(compute_lines(&s, "laplace_bad.c"), kernels);
    for k in kernels {
        // No data clauses: each region copies A and Anew in and out.
        assert_eq!(
            counts(line(&s, "laplace_bad.c", k), a),
            Counts {
                big_in: 2 * iters,
                big_out: 2 * iters,
                ..compute_only(iters)
            },
            "laplace_bad.c:{k}"
        );
    }
}

#[test]
fn laplace_good_c_counts() {
    let s = summary_of("laplace_good_c");
    let [_n, iters, _tol] = recorded_args("laplace_good_c")[..] else {
        panic!("three arguments")
    };
    let a = 8 * (laplace_nmax() + 2).pow(2);
    let data = directive_lines(&source("laplace_good.c"), &["data"]);
    assert_eq!(data.len(), 1);
    // `data copy(A) create(Anew)`: entered and left once; A goes up at the
    // entry and down at the exit; Anew is only allocated.
    assert_eq!(
        counts(line(&s, "laplace_good.c", data[0]), a),
        Counts {
            data: 2,
            big_in: 1,
            big_out: 1,
            ..Default::default()
        }
    );
    let parallel = directive_lines(&source("laplace_good.c"), &["parallel"]);
    assert_eq!(parallel.len(), 2);
    assert_eq!(compute_lines(&s, "laplace_good.c"), parallel);
    for p in parallel {
        assert_eq!(
            counts(line(&s, "laplace_good.c", p), a),
            compute_only(iters),
            "laplace_good.c:{p}"
        );
    }
}

#[test]
fn laplace_bad_f90_counts() {
    let s = summary_of("laplace_bad_f90");
    let [n, iters, _tol] = recorded_args("laplace_bad_f90")[..] else {
        panic!("three arguments")
    };
    // Allocatable arrays of (N+2)^2 doubles.
    let a = 8 * (n + 2).pow(2);
    let kernels = directive_lines(&source("laplace_bad.f90"), &["kernels"]);
    assert_eq!(kernels.len(), 2);
    assert_eq!(compute_lines(&s, "laplace_bad.f90"), kernels);
    for k in kernels {
        assert_eq!(
            counts(line(&s, "laplace_bad.f90", k), a),
            Counts {
                big_in: 2 * iters,
                big_out: 2 * iters,
                ..compute_only(iters)
            },
            "laplace_bad.f90:{k}"
        );
    }
}

#[test]
fn laplace_good_f90_counts() {
    let s = summary_of("laplace_good_f90");
    let [n, iters, _tol] = recorded_args("laplace_good_f90")[..] else {
        panic!("three arguments")
    };
    let a = 8 * (n + 2).pow(2);
    let data = directive_lines(&source("laplace_good.f90"), &["data"]);
    assert_eq!(data.len(), 1);
    assert_eq!(
        counts(line(&s, "laplace_good.f90", data[0]), a),
        Counts {
            data: 2,
            big_in: 1,
            big_out: 1,
            ..Default::default()
        }
    );
    let parallel = directive_lines(&source("laplace_good.f90"), &["parallel"]);
    assert_eq!(parallel.len(), 2);
    assert_eq!(compute_lines(&s, "laplace_good.f90"), parallel);
    for p in parallel {
        assert_eq!(
            counts(line(&s, "laplace_good.f90", p), a),
            compute_only(iters)
        );
    }
}

#[test]
fn heat2d_naive_counts() {
    let s = summary_of("heat2d_naive");
    let [nx, ny, steps] = recorded_args("heat2d_naive")[..] else {
        panic!("three arguments")
    };
    let b = 8 * nx * ny;
    let parallel = directive_lines(&source("heat2d_naive.c"), &["parallel"]);
    assert_eq!(parallel.len(), 1);
    assert_eq!(compute_lines(&s, "heat2d_naive.c"), parallel);
    // copyin(u) copyout(unew) on the construct inside the time loop.
    assert_eq!(
        counts(line(&s, "heat2d_naive.c", parallel[0]), b),
        Counts {
            big_in: steps,
            big_out: steps,
            ..compute_only(steps)
        }
    );
}

#[test]
fn heat2d_data_counts() {
    let s = summary_of("heat2d_data");
    let [nx, ny, steps, every] = recorded_args("heat2d_data")[..] else {
        panic!("four arguments")
    };
    let b = 8 * nx * ny;
    let src = source("heat2d_data.c");
    let data = directive_lines(&src, &["data"]);
    let parallel = directive_lines(&src, &["parallel"]);
    let update = directive_lines(&src, &["update"]);
    assert_eq!((data.len(), parallel.len(), update.len()), (1, 1, 1));
    // copyin(u) create(unew): one upload, nothing comes back at the exit.
    assert_eq!(
        counts(line(&s, "heat2d_data.c", data[0]), b),
        Counts {
            data: 2,
            big_in: 1,
            ..Default::default()
        }
    );
    assert_eq!(compute_lines(&s, "heat2d_data.c"), parallel);
    assert_eq!(
        counts(line(&s, "heat2d_data.c", parallel[0]), b),
        compute_only(steps)
    );
    // `update host(u)` after every EVERY-th step and after the last one.
    let r = steps.div_ceil(every);
    assert_eq!(
        counts(line(&s, "heat2d_data.c", update[0]), b),
        Counts {
            update: r,
            big_out: r,
            ..Default::default()
        }
    );
}

#[test]
fn jacobi_f90_counts() {
    let s = summary_of("jacobi_f90");
    // record.sh: jacobi_f90 N ITERS = 256 20; TOL keeps its default 1e-12,
    // far below the change of any of the first 20 iterations at N = 256,
    // so all 20 run.
    let [n, iters] = recorded_args("jacobi_f90")[..] else {
        panic!("two arguments")
    };
    let a = 8 * (n + 2).pow(2);
    let src = source("jacobi.f90");
    let data = directive_lines(&src, &["data"]);
    let parallel = directive_lines(&src, &["parallel"]);
    assert_eq!((data.len(), parallel.len()), (1, 2));
    // `data copyin(f) copy(u) create(unew)`: f and u up, u down at `end data`.
    assert_eq!(
        counts(line(&s, "jacobi.f90", data[0]), a),
        Counts {
            data: 2,
            big_in: 2,
            big_out: 1,
            ..Default::default()
        }
    );
    assert_eq!(compute_lines(&s, "jacobi.f90"), parallel);
    // The first parallel loop is in sweep(), called twice per iteration; the
    // second is the boundary loop of the main program, run once.
    assert_eq!(
        counts(line(&s, "jacobi.f90", parallel[0]), a),
        compute_only(2 * iters)
    );
    assert_eq!(
        counts(line(&s, "jacobi.f90", parallel[1]), a),
        compute_only(1)
    );
    let sweep = s
        .functions
        .iter()
        .find(|f| f.lines.iter().any(|l| l.line == Some(parallel[0])))
        .expect("sweep's function");
    assert!(sweep.function.contains("sweep"), "{}", sweep.function);
}

#[test]
fn launch_storm_counts() {
    let s = summary_of("launch_storm");
    let [count] = recorded_args("launch_storm")[..] else {
        panic!("one argument")
    };
    // N is left at its default; x and c are N doubles each.
    let b = 8 * usage_default("launch_storm.c", 2);
    let src = source("launch_storm.c");
    let data = directive_lines(&src, &["data"]);
    let parallel = directive_lines(&src, &["parallel"]);
    assert_eq!((data.len(), parallel.len()), (1, 2));
    // `data copy(x) copyin(c)`: x and c go up (GCC copies adjacent host
    // ranges of one construct in one transfer: the H200 run made one copy
    // of 2*B bytes), x comes back.
    let d = line(&s, "launch_storm.c", data[0]);
    assert_eq!(reached(d, Reached::DataRegion), 2);
    let up = transfers(d, CopyKind::HostToDevice).expect("uploads");
    assert_eq!(up.bytes, 2 * b);
    let down = transfers(d, CopyKind::DeviceToHost).expect("download");
    assert_eq!((down.count, down.bytes), (1, b));
    // COUNT synchronous launches at the first loop, COUNT on queue 1 at the
    // second; nothing but scalars and argument blocks moves there. (The
    // `wait` is not reported: libgomp sends no wait events.)
    assert_eq!(compute_lines(&s, "launch_storm.c"), parallel);
    for p in parallel {
        assert_eq!(
            counts(line(&s, "launch_storm.c", p), b),
            compute_only(count),
            "launch_storm.c:{p}"
        );
    }
}

/// The data region's exit counts at its pragma line, not at the first line
/// of its body where GCC reports GOACC_data_end.
#[test]
fn data_region_exit_counts_at_the_pragma() {
    let s = summary_of("laplace_good_c");
    let data = directive_lines(&source("laplace_good.c"), &["data"])[0];
    let l = line(&s, "laplace_good.c", data);
    assert_eq!(reached(l, Reached::DataRegion), 2);
    assert!(transfers(l, CopyKind::HostToDevice).is_some());
    assert!(transfers(l, CopyKind::DeviceToHost).is_some());
    let body = data + 1;
    assert!(
        !s.functions
            .iter()
            .flat_map(|f| f.lines.iter())
            .any(|l| l.line == Some(body)),
        "nothing should be left at line {body}"
    );
    let out = report_of(&fixture("laplace_good_c"), &[]);
    let text = stdout(&out);
    let data_lines: Vec<&str> = text.lines().filter(|l| l.contains(": data ")).collect();
    assert!(
        data_lines.contains(&format!("    {data}: data region reached 2 times").as_str()),
        "{text}"
    );
    assert!(text.contains(&format!("        {data}: data copyin transfers: 1")));
    assert!(text.contains(&format!("        {data}: data copyout transfers: 1")));
}

// ---------------------------------------------------------------- goldens

fn golden(name: &str, got: &str) {
    let path = manifest().join("tests/golden").join(name);
    accprof_analyzer::testkit::golden::check(&path, got, "cargo test -p accprof --test summary");
}

fn golden_report(fixture_name: &str, extra: &[&str], golden_name: &str) {
    let out = report_of(&fixture(fixture_name), extra);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    golden(golden_name, &stdout(&out));
}

#[test]
fn golden_laplace_bad_c() {
    golden_report("laplace_bad_c", &[], "laplace_bad_c.txt");
}

#[test]
fn golden_laplace_good_c() {
    golden_report("laplace_good_c", &[], "laplace_good_c.txt");
}

#[test]
fn golden_laplace_bad_c_extended() {
    golden_report(
        "laplace_bad_c",
        &["--extended"],
        "laplace_bad_c.extended.txt",
    );
}

#[test]
fn golden_laplace_good_c_extended() {
    golden_report(
        "laplace_good_c",
        &["--extended"],
        "laplace_good_c.extended.txt",
    );
}

/// The fixture binaries are found by build id when the recorded path is
/// absent, and refused when the build differs.
#[test]
fn symbols_are_found_by_build_id() {
    use accprof_analyzer::symbolize::{build_id, SymbolizedSite, Symbolizer};
    let trace = accprof_trace::read_file(&fixture("laplace_good_c")).expect("fixture");
    let module = trace
        .records
        .iter()
        .find_map(|r| match r {
            accprof_trace::Record::Module(m) if m.path.ends_with("/laplace_good") => {
                Some(m.clone())
            }
            _ => None,
        })
        .expect("the program's module");
    let offset = trace
        .records
        .iter()
        .find_map(|r| match r {
            accprof_trace::Record::CallSite(c) if c.module == module.id => Some(c.return_offset),
            _ => None,
        })
        .expect("a call site");
    assert_eq!(
        build_id(&symbols().join("laplace_good")).as_deref(),
        Some(&module.build_id[..])
    );
    let moved = accprof_trace::Module {
        path: "/nonexistent/recording/machine/laplace_good".into(),
        ..module.clone()
    };
    let mut sym = Symbolizer::with_search_dirs(vec![symbols()]);
    match sym.lookup(&moved, offset) {
        SymbolizedSite::Found { file, line, .. } => {
            assert!(file.ends_with("laplace_good.c"), "{file}");
            assert!(line.is_some());
        }
        SymbolizedSite::NoDebugInfo { .. } => panic!("not found: {:?}", sym.notes),
    }
    let other_build = accprof_trace::Module {
        build_id: vec![0; 20],
        ..moved
    };
    let mut sym = Symbolizer::with_search_dirs(vec![symbols()]);
    assert!(matches!(
        sym.lookup(&other_build, offset),
        SymbolizedSite::NoDebugInfo { .. }
    ));
    assert_eq!(sym.notes.len(), 1, "{:?}", sym.notes);
}

// -------------------------------------------------------------- bad input

/// One line on stderr naming the file, nothing on stdout, exit code 2.
fn assert_clear_error(path: &Path, what: &str) {
    let out = Command::new(accprof())
        .arg("report")
        .arg(path)
        .output()
        .expect("accprof runs");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert_eq!(stdout(&out), "", "{what}");
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err:?}");
    assert!(
        err.contains(&path.display().to_string()),
        "{what}: names the file: {err}"
    );
    assert!(err.starts_with("accprof: "), "{what}: {err}");
}

#[test]
fn a_missing_file_is_one_clear_error() {
    let dir = tempdir();
    let path = dir.path().join("missing.trace");
    assert_clear_error(&path, "missing file");
}

#[test]
fn a_file_that_is_not_a_trace_is_one_clear_error() {
    let dir = tempdir();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "these are not the traces you are looking for\n").expect("write");
    assert_clear_error(&path, "text file");
    let out = Command::new(accprof())
        .arg("report")
        .arg(&path)
        .output()
        .expect("runs");
    assert!(stderr(&out).contains("not an accprof trace"));
}

#[test]
fn an_empty_file_is_one_clear_error() {
    let dir = tempdir();
    let path = dir.path().join("empty.trace");
    std::fs::write(&path, b"").expect("write");
    assert_clear_error(&path, "empty file");
}

#[test]
fn a_newer_major_version_is_one_clear_error() {
    let dir = tempdir();
    let path = dir.path().join("future.trace");
    let mut bytes = std::fs::read(fixture("laplace_good_c")).expect("fixture");
    // Magic (8 bytes), then the major version as a little-endian u16.
    let major = accprof_trace::FORMAT_MAJOR + 1;
    bytes[8..10].copy_from_slice(&major.to_le_bytes());
    // A newer major's header is not this one's (an intact header of this
    // major behind another version number reads as a damaged version).
    bytes[12..16].copy_from_slice(b"HDR2");
    std::fs::write(&path, &bytes).expect("write");
    assert_clear_error(&path, "newer major");
    let out = Command::new(accprof())
        .arg("report")
        .arg(&path)
        .output()
        .expect("runs");
    assert!(
        stderr(&out).contains(&format!("version {major}."))
            && stderr(&out).contains(&format!("use an accprof that supports {major}.x")),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_directory_is_one_clear_error() {
    let dir = tempdir();
    assert_clear_error(dir.path(), "directory");
}

/// Offsets of the data blocks of a trace file: after the 8-byte magic, the
/// two u16 versions and the header block, blocks of a 16-byte header (magic,
/// payload length, record count, crc; u32 each) and the payload.
fn data_blocks(bytes: &[u8]) -> Vec<(usize, usize)> {
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let mut at = 12;
    let mut blocks = Vec::new();
    let mut first = true;
    while at + 16 <= bytes.len() {
        let len = word(at + 4) as usize;
        if !first {
            blocks.push((at, len));
        }
        first = false;
        at += 16 + len;
    }
    blocks
}

#[test]
fn a_truncated_trace_gives_what_was_read_and_one_warning() {
    let bytes = std::fs::read(fixture("launch_storm")).expect("fixture");
    let blocks = data_blocks(&bytes);
    assert!(blocks.len() >= 4, "launch_storm spans several blocks");
    // Cut in the middle of the payload of the block in the middle.
    let (start, len) = blocks[blocks.len() / 2];
    let cut = start + 16 + len / 2;
    let dir = tempdir();
    let path = dir.path().join("cut.trace");
    std::fs::write(&path, &bytes[..cut]).expect("write");

    let out = report_of(&path, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("Accelerator Kernel Timing data"), "{text}");
    assert!(!text.contains("warning"), "warnings go to stderr: {text}");
    let err = stderr(&out);
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("accprof: warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("truncated"), "{}", warnings[0]);
    assert!(
        warnings[0].contains(&format!("at byte {start}")),
        "{}",
        warnings[0]
    );
    // The blocks before the cut were read: some of the first loop's
    // constructs, not all of them.
    let parallel = directive_lines(&source("launch_storm.c"), &["parallel"]);
    let first = text
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix(&format!("{}: compute region reached ", parallel[0]))
        })
        .expect("the first loop's line is in the partial summary");
    let n: u64 = first.trim_end_matches(" times").parse().expect("a count");
    let [count] = recorded_args("launch_storm")[..] else {
        panic!("one argument")
    };
    assert!(n > 0 && n < count, "{n} of {count}");
}

// ---------------------------------------------------------- views, sorting

/// Source lines of the "N: compute region reached" lines, in output order.
fn compute_order(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|l| {
            let (n, rest) = l.trim().split_once(": ")?;
            rest.starts_with("compute region reached")
                .then(|| n.parse().ok())
                .flatten()
        })
        .collect()
}

#[test]
fn sort_time_lists_lines_by_cost() {
    let s = summary_of("laplace_bad_c");
    let kernels = directive_lines(&source("laplace_bad.c"), &["kernels"]);
    let by_line = compute_order(&stdout(&report_of(&fixture("laplace_bad_c"), &[])));
    assert_eq!(by_line, kernels);
    let out = report_of(&fixture("laplace_bad_c"), &["--sort", "time"]);
    assert_eq!(out.status.code(), Some(0));
    let by_time = compute_order(&stdout(&out));
    let mut want = kernels.clone();
    want.sort_by_key(|&k| std::cmp::Reverse(line(&s, "laplace_bad.c", k).cost_ns()));
    assert_eq!(by_time, want);
    // The second region's reduction runs on one gang (see the sample's
    // header): it costs most and comes first.
    assert_eq!(by_time[0], kernels[1]);
}

#[test]
fn extended_view_tells_more() {
    let out = report_of(&fixture("laplace_bad_c"), &["--extended"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let transfer_lines = text.lines().filter(|l| l.contains(": data copy")).count();
    let bytes_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("bytes: "))
        .collect();
    assert_eq!(bytes_lines.len(), transfer_lines, "{text}");
    for l in &bytes_lines {
        assert!(l.contains("bandwidth: ") && l.contains(" GB/s"), "{l}");
        assert!(l.contains("pageable: ") && l.contains("pinned: "), "{l}");
    }
    for want in [
        "registers/thread: ",
        "threads/block: ",
        "% of device time]",
        "host time in OpenACC constructs(us): ",
        "host time outside OpenACC constructs(us): ",
        "kernel device time(us): ",
        "sources: acc_prof active, CUPTI active, hashing ",
        "device 0: NVIDIA H200",
        "dropped records",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

/// Records `program args` here under `accprof run` (host fallback: no GPU
/// on the test machine, so CUPTI is inactive) and returns the trace.
fn record_here(dir: &Path, program: &str, args: &[&str]) -> PathBuf {
    let out = accprof_run(dir, &["--no-summary"], &samples().join(program), args);
    assert!(out.status.success(), "{}", stderr(&out));
    let t = traces(dir);
    assert_eq!(t.len(), 1, "{t:?}");
    t[0].clone()
}

#[test]
fn without_cupti_it_says_host_times_only() {
    let dir = tempdir();
    let trace = record_here(dir.path(), "laplace_good", &["32", "5"]);
    let run = accprof_analyzer::load_run(&trace).expect("loads");
    if run.cupti_active() {
        eprintln!("note: CUPTI recorded on this machine; the host-only view is not tested");
        return;
    }
    for extra in [&[][..], &["--extended"][..]] {
        let mut args: Vec<&std::ffi::OsStr> = extra.iter().map(std::ffi::OsStr::new).collect();
        args.push(trace.as_os_str());
        let out = report_here(&args);
        assert_eq!(out.status.code(), Some(0));
        let text = stdout(&out);
        let first: Vec<&str> = text.lines().filter(|l| !l.is_empty()).take(2).collect();
        assert_eq!(first[0], "Accelerator Kernel Timing data");
        assert!(
            first[1].starts_with("Host times only: CUPTI was not recording"),
            "{text}"
        );
        assert!(!text.contains("device time(us)"), "{text}");
        let parallel = directive_lines(&source("laplace_good.c"), &["parallel"]);
        assert_eq!(compute_order(&text), parallel, "{text}");
        if !extra.is_empty() {
            assert!(text.contains("% of host time]"), "{text}");
            assert!(text.contains("device times: none"), "{text}");
            assert!(text.contains("CUPTI inactive ("), "{text}");
        }
    }
}

// ------------------------------------------------------------ MPI ranks

#[test]
fn several_traces_merge_with_a_rank_table() {
    if !need("mpirun") || !need("mpicc") {
        return;
    }
    let samples = samples();
    let halo = samples.join("mpi_halo");
    assert!(halo.is_file(), "{} was not built", halo.display());
    let dir = tempdir();
    let ranks = 4u64;
    let (nx, ny, steps) = (64u64, 48u64, 20u64);
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(ranks.to_string())
        .arg(accprof())
        .arg("run")
        .arg("--lib")
        .arg(collector_lib())
        .arg("--no-summary")
        .arg("--output")
        .arg(dir.path().join("r%r-%p.trace"))
        .arg("--")
        .arg(&halo)
        .args([nx, ny, steps].map(|v| v.to_string()))
        .output()
        .expect("mpirun runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let files = traces(dir.path());
    assert_eq!(files.len(), ranks as usize, "{files:?}");

    let mut args: Vec<&std::ffi::OsStr> = files.iter().map(|p| p.as_os_str()).collect();
    let out = report_here(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);

    // Merged counts, from mpi_halo.c: every rank enters and leaves the data
    // region once and runs the stencil every step; the halo updates go
    // only towards real neighbours: H = 1 for the two edge ranks, 2 for
    // the others, so sum(H) = 2 * (ranks - 1) row updates per step each way.
    let src = source("mpi_halo.c");
    let data = directive_lines(&src, &["data"]);
    let parallel = directive_lines(&src, &["parallel"]);
    let updates = directive_lines(&src, &["update"]);
    assert_eq!((data.len(), parallel.len(), updates.len()), (1, 1, 5));
    let reached_at = |n: u32, what: &str| -> u64 {
        text.lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(&format!("{n}: {what} reached "))
                    .and_then(|r| r.split(' ').next())
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    };
    assert_eq!(reached_at(data[0], "data region"), 2 * ranks, "{text}");
    assert_eq!(reached_at(parallel[0], "compute region"), ranks * steps);
    let text_src = std::fs::read_to_string(&src).expect("source");
    let is = |n: u32, what: &str| {
        text_src
            .lines()
            .nth(n as usize - 1)
            .is_some_and(|l| l.contains(what))
    };
    let halo_host: u64 = updates
        .iter()
        .filter(|&&u| is(u, "update host") && !is(u, "result"))
        .map(|&u| reached_at(u, "update directive"))
        .sum();
    let halo_device: u64 = updates
        .iter()
        .filter(|&&u| is(u, "update device"))
        .map(|&u| reached_at(u, "update directive"))
        .sum();
    assert_eq!(halo_host, steps * 2 * (ranks - 1), "{text}");
    assert_eq!(halo_device, steps * 2 * (ranks - 1), "{text}");
    let result = *updates.iter().find(|&&u| is(u, "result")).expect("result");
    assert_eq!(reached_at(result, "update directive"), ranks);

    // The per-rank table: ranks 0..3 from the traces' headers, each with
    // its pid and host.
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Ranks ("))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), ranks as usize, "{text}");
    let mut pids = Vec::new();
    for f in &files {
        let run = accprof_analyzer::load_run(f).expect("loads");
        pids.push((
            run.process.header.rank.expect("rank in the header"),
            run.process.header.pid,
        ));
    }
    pids.sort();
    for (row, (rank, pid)) in table.iter().zip(&pids) {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[0], rank.to_string(), "{row}");
        assert_eq!(cols[1], pid.to_string(), "{row}");
        assert_eq!(cols.len(), 7, "{row}");
    }
    assert!(text.contains("Imbalance"), "{text}");

    // The merged statistics are the per-rank ones added up, whatever the
    // order the traces are given in.
    args.reverse();
    let again = stdout(&report_here(&args));
    assert_eq!(
        again
            .lines()
            .take_while(|l| !l.starts_with("Ranks ("))
            .collect::<Vec<_>>(),
        text.lines()
            .take_while(|l| !l.starts_with("Ranks ("))
            .collect::<Vec<_>>()
    );
}

#[test]
fn traces_without_ranks_are_numbered_by_position() {
    let out = report(&[
        fixture("laplace_bad_c").as_os_str(),
        fixture("laplace_good_c").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("laplace_bad.c") && text.contains("laplace_good.c"));
    assert!(text.contains("Ranks (2 traces)"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with('#'))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows[0].trim_start().starts_with("#0 "));
    assert!(rows[1].trim_start().starts_with("#1 "));
}

// ------------------------------------------------------ summary at exit

fn run_preloaded(program: &Path, args: &[&str], env: &[(&str, &str)], dir: &Path) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LD_PRELOAD", collector_lib())
        .env("ACCPROF_OUTPUT", dir.join("t-%p.trace"))
        .env_remove("ACCPROF_TIME")
        .env_remove("PGI_ACC_TIME")
        .env_remove("NV_ACC_TIME")
        .env_remove("ACCPROF_BIN")
        .env_remove("ACCPROF_QUIET");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("program runs")
}

/// A sample's output without its "time:" line (which varies run to run).
fn untimed(out: &str) -> Vec<&str> {
    out.lines().filter(|l| !l.starts_with("time:")).collect()
}

/// ACCPROF_TIME=1 (and the PGI and NV names) with the preloaded library
/// alone: the summary on stderr at exit, stdout untouched, exit code kept.
#[test]
fn at_exit_summary_from_the_preloaded_library() {
    let program = samples().join("laplace_good");
    let args = ["32", "5"];
    let plain = Command::new(&program).args(args).output().expect("runs");
    assert!(plain.status.success());
    for var in ["ACCPROF_TIME", "PGI_ACC_TIME", "NV_ACC_TIME"] {
        let dir = tempdir();
        let out = run_preloaded(&program, &args, &[(var, "1")], dir.path());
        assert_eq!(out.status.code(), plain.status.code(), "{var}");
        assert_eq!(
            untimed(&stdout(&out)),
            untimed(&stdout(&plain)),
            "{var}: stdout unchanged"
        );
        let err = stderr(&out);
        assert!(
            err.contains("Accelerator Kernel Timing data"),
            "{var}: {err}"
        );
        let parallel = directive_lines(&source("laplace_good.c"), &["parallel"]);
        assert_eq!(compute_order(&err), parallel, "{var}: {err}");
    }
    // Without the variable: no summary.
    let dir = tempdir();
    let out = run_preloaded(&program, &args, &[], dir.path());
    assert!(!stderr(&out).contains("Accelerator Kernel Timing data"));
}

#[test]
fn at_exit_summary_keeps_exit_codes_and_skips_non_openacc_programs() {
    // plain.c is no OpenACC program and returns 4.
    let dir = tempdir();
    let out = run_preloaded(&program("plain"), &[], &[("ACCPROF_TIME", "1")], dir.path());
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(stdout(&out), "plain program\n");
    assert!(!stderr(&out).contains("Accelerator Kernel Timing data"));
    // An accprof binary that is not there: one note, the program's result.
    let dir = tempdir();
    let out = run_preloaded(
        &samples().join("laplace_good"),
        &["16", "2"],
        &[
            ("ACCPROF_TIME", "1"),
            ("ACCPROF_BIN", "/nonexistent/accprof"),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(!err.contains("Accelerator Kernel Timing data"), "{err}");
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("no summary")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(notes[0].contains("ACCPROF_BIN"), "{err}");
}

#[test]
fn at_exit_mode_of_report_prints_the_summary_and_never_fails() {
    let out = report_of(&fixture("laplace_good_c"), &["--at-exit"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("Accelerator Kernel Timing data"));
    let dir = tempdir();
    let bad = dir.path().join("bad.trace");
    std::fs::write(&bad, "junk").expect("write");
    let out = report_of(&bad, &["--at-exit"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
    // Hidden from the help.
    let help = Command::new(accprof())
        .args(["report", "--help"])
        .output()
        .expect("runs");
    assert!(!stdout(&help).contains("at-exit"));
}
