//! Fusion and copy-back advice from the parsed sources, on host-fallback
//! recordings of samples/fuse_triple.c and samples/jacobi_copy.{c,f90}
//! (no GPU here: libgomp runs the constructs on the host, and the collector
//! still sees each of them).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn ps(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Copies `name` from samples/ into `dir`, builds it for the host and
/// records it with `args`: (the copy, the build command, the trace).
fn record(dir: &Path, name: &str, args: &[&str]) -> (PathBuf, String, PathBuf) {
    let src = dir.join(name);
    std::fs::copy(repo().join("samples").join(name), &src).expect("copy sample");
    let compiler = if name.ends_with(".f90") {
        "gfortran"
    } else {
        "gcc"
    };
    let build = format!("{compiler} -g -O1 -fopenacc -foffload=disable {{src}} -o {{out}}");
    let exe = dir.join("prog");
    let cmd = build.replace("{src}", ps(&src)).replace("{out}", ps(&exe));
    let out = Command::new("sh")
        .arg("-c")
        .arg(&cmd)
        .output()
        .expect("compiler");
    assert!(out.status.success(), "{cmd}: {}", stderr(&out));
    let traces_dir = dir.join("traces");
    std::fs::create_dir_all(&traces_dir).expect("mkdir");
    let out = accprof_run(&traces_dir, &[], &exe, args);
    assert!(out.status.success(), "{}", stderr(&out));
    let t = traces(&traces_dir);
    assert_eq!(t.len(), 1, "{t:?}");
    (src, build, t[0].clone())
}

/// Text with its line wrapping undone.
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn analyze(args: &[&str]) -> Output {
    Command::new(accprof())
        .arg("analyze")
        .args(args)
        .output()
        .expect("accprof runs")
}

#[test]
fn one_line_triple_gets_a_fusion_patch_that_verify_confirms() {
    if !need("gcc") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, build, trace) = record(dir.path(), "fuse_triple.c", &["256", "200"]);
    let lines = directive_lines(&src, &["parallel loop"]);
    assert_eq!(lines.len(), 3);
    let out = analyze(&[ps(&trace)]);
    let s = flat(&stdout(&out));
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", stderr(&out));
    let fuse = format!(
        "Fuse fuse_triple.c:{} with :{}, :{} into one construct each",
        lines[0], lines[1], lines[2]
    );
    assert!(s.contains(&fuse), "{s}");
    assert!(s.contains("(400 reaches in all go)"), "{s}");
    let out = analyze(&["--patch", ps(&trace)]);
    let s = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", stderr(&out));
    assert!(
        s.contains("+#pragma acc parallel loop present(a[0:n], b[0:n], c[0:n])"),
        "{s}"
    );
    assert!(
        s.contains("+            for (int i = 0; i < n; i++) {"),
        "{s}"
    );
    assert!(s.contains("+                b[i] = 2.0 * i - s;"), "{s}");

    let keep = dir.path().join("verify");
    let out = analyze(&[
        "--verify",
        "--lib",
        ps(&collector_lib()),
        "--keep",
        ps(&keep),
        "--build",
        &build,
        "--run",
        "{out} 256 200",
        ps(&trace),
    ]);
    let s = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", stderr(&out));
    assert!(s.contains("patched with #"), "{s}");
    assert!(s.contains("R1"), "{s}");
    assert!(s.contains("output: identical"), "{s}");
    // 200 steps of three constructs, then of one; the data region and the
    // update add the same to both.
    assert!(
        s.contains("OpenACC constructs reached            603          203"),
        "{s}"
    );
}

fn copy_back(name: &str, compiler: &str) {
    if !need(compiler) {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, _, trace) = record(dir.path(), name, &["64", "100"]);
    let lines = directive_lines(&src, &["parallel loop"]);
    assert_eq!(lines.len(), 2);
    let out = analyze(&[ps(&trace)]);
    let s = flat(&stdout(&out));
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", stderr(&out));
    assert!(
        s.contains(&format!(
            "Copy-back: the construct at {name}:{} only copies b into a, which the construct before it ({name}:{}) reads",
            lines[1], lines[0]
        )),
        "{s}"
    );
    assert!(
        s.contains("swap the two arrays instead of copying back"),
        "{s}"
    );
    assert!(!s.contains("Fuse "), "{s}");
}

#[test]
fn jacobi_copy_back_gets_the_swap_not_fusion_c() {
    copy_back("jacobi_copy.c", "gcc");
}

#[test]
fn jacobi_copy_back_gets_the_swap_not_fusion_fortran() {
    copy_back("jacobi_copy.f90", "gfortran");
}
