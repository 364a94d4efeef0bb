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

/// `analyze --verify` of `trace` with the program built by `build` and run
/// with `run`: its report, after checking it succeeded.
fn verified(dir: &Path, build: &str, run: &str, trace: &Path) -> String {
    let keep = dir.join("verify");
    let out = analyze(&[
        "--verify",
        "--lib",
        ps(&collector_lib()),
        "--keep",
        ps(&keep),
        "--build",
        build,
        "--run",
        run,
        ps(trace),
    ]);
    let s = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", stderr(&out));
    s
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

    let s = verified(dir.path(), &build, "{out} 256 200", &trace);
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

/// samples/fuse_grid.c, written as NPB's C port writes its constructs:
/// every neighbouring pair is judged in R1's evidence with its reason, the
/// provable ones get one patch, and the patched program prints what the
/// original prints.
#[test]
fn npb_style_grid_pairs_are_each_judged_and_the_provable_ones_fused() {
    if !need("gcc") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, build, trace) = record(dir.path(), "fuse_grid.c", &["12", "40"]);
    let l = directive_lines(&src, &["parallel loop"]);
    assert_eq!(l.len(), 6);
    let out = analyze(&[ps(&trace)]);
    let s = flat(&stdout(&out));
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", stderr(&out));
    for want in [
        format!(
            "fuse_grid.c:{} and :{}: fusable (proven): the same parallel loops (k = 0..n-1), each keeping its own loops below",
            l[0], l[1]
        ),
        format!(
            "fuse_grid.c:{} and :{}: fusable (proven): the same parallel loops (k = 0..n-1)",
            l[1], l[2]
        ),
        format!(
            "fuse_grid.c:{} and :{}: not fusable: the second assigns the scalar i and the first reads the value it had before the construct",
            l[3], l[4]
        ),
        format!(
            "fuse_grid.c:{} and :{}: not fusable: the second reads q[m][k][j+1][i] where the first writes q[m][k][j][i]: an element of another iteration",
            l[4], l[5]
        ),
        format!(
            "Fuse fuse_grid.c:{} with :{}, :{} into one construct each",
            l[0], l[1], l[2]
        ),
    ] {
        assert!(s.contains(&want), "{want}\n{s}");
    }
    // `i = 1;` stands between the third and the fourth: not neighbours.
    assert!(
        !s.contains(&format!("fuse_grid.c:{} and :{}", l[2], l[3])),
        "{s}"
    );
    let out = analyze(&["--patch", ps(&trace)]);
    let p = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{p}\n{}", stderr(&out));
    // Each construct's partitioned loops stay under the one gang loop.
    assert_eq!(
        p.matches("+        #pragma acc loop worker\n").count(),
        2,
        "{p}"
    );
    assert_eq!(
        p.matches("+        #pragma acc loop worker vector\n")
            .count(),
        1,
        "{p}"
    );

    let s = verified(dir.path(), &build, "{out} 12 40", &trace);
    assert!(s.contains("output: identical"), "{s}");
    // 40 steps of six constructs, then of four; the data region adds the
    // same to both.
    let reached = s
        .lines()
        .find(|l| l.contains("OpenACC constructs reached"))
        .map(flat)
        .unwrap_or_default();
    assert!(
        reached.ends_with("OpenACC constructs reached 242 162"),
        "{reached}\n{s}"
    );
}
