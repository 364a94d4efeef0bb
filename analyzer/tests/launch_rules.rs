//! The launch-shape rules (L1, L2, L4, L5 and L3's too-few-gangs case) on
//! hand-built runs with their sources: what each finds, where, with which
//! numbers, and what it leaves alone.

use accprof_analyzer::findings::Value;
use accprof_analyzer::model::{ConstructClass, Run, SiteId};
use accprof_analyzer::rules::{
    l1_vector_multiple, l2_vector_trip, l3_single_gang, l4_launch_differs, l5_launch_bound,
};
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::testkit::runs::{run_rule_with, RunBuilder};
use accprof_trace::HashMode;

const SRC: &str = "\
int main(void) {
  int n = 4096, rows = 256;
  double x[4096];
#pragma acc parallel loop vector_length(48) present(x)
  for (int i = 0; i < n; i++) x[i] = 1;
#pragma acc parallel loop gang vector_length(128) present(x)
  for (int r = 0; r < rows; r++) {
#pragma acc loop vector
    for (int j = 0; j < 16; j++) x[16 * r + j] = 2;
  }
#pragma acc parallel loop vector_length(64) num_gangs(8) present(x)
  for (int i = 0; i < n; i++) x[i] = 3;
#pragma acc parallel loop gang vector_length(32) present(x)
  for (int r = 0; r < rows; r++) {
#pragma acc loop vector
    for (int j = 0; j < n; j++) x[j] = 4;
  }
  return 0;
}
";

/// `count` launches at `site`, each `ns` on the device with this grid and
/// block, and `host_extra` more host time around each.
fn launches(
    b: &mut RunBuilder,
    site: SiteId,
    count: usize,
    ns: u64,
    grid: u32,
    block: [u32; 3],
    host_extra: u64,
) {
    for _ in 0..count {
        let c = b.open(ConstructClass::Compute, site, None);
        if let Some(k) = b.kernel(c, grid, ns) {
            b.kernel_mut(k).block = block;
        }
        b.t += host_extra;
        b.close(c);
    }
}

fn run() -> Run {
    let mut b = RunBuilder::new(HashMode::Off);
    let s4 = b.site("t.c", 4);
    let s6 = b.site("t.c", 6);
    let s11 = b.site("t.c", 11);
    let s13 = b.site("t.c", 13);
    launches(&mut b, s4, 10, 40_000, 8448, [32, 1, 1], 0);
    launches(&mut b, s6, 10, 30_000, 256, [128, 1, 1], 0);
    launches(&mut b, s11, 10, 900_000, 8, [64, 1, 1], 0);
    launches(&mut b, s13, 10, 20_000, 256, [32, 1, 1], 0);
    b.build()
}

fn sources() -> SourceSet {
    SourceSet::with_text("t.c", SRC)
}

#[test]
fn l1_a_vector_length_of_48_and_what_ran() {
    let c = run_rule_with(&run(), &sources(), l1_vector_multiple::check);
    assert_eq!(c.findings.len(), 1, "only line 4 asks for 48");
    let f = &c.findings[0];
    assert_eq!(f.locations[0].line, Some(4));
    assert_eq!(
        f.title,
        "vector_length(48) at t.c:4 is not a multiple of 32: 32 lanes were launched"
    );
    assert_eq!(f.cost_ns, Some(400_000), "the measured kernel time");
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc parallel loop vector_length(64) present(x)")
    );
    assert_eq!(f.proposal.edits.len(), 1);
    let tune = f.proposal.tune.as_deref().unwrap_or("");
    assert!(
        tune.starts_with("accprof tune --at t.c:4 --build "),
        "{tune}"
    );
    assert!(
        tune.ends_with("--space vector_length=32,64,128,256"),
        "{tune}"
    );
}

#[test]
fn l2_sixteen_iterations_under_128_lanes() {
    let c = run_rule_with(&run(), &sources(), l2_vector_trip::check);
    let lines: Vec<Option<u32>> = c.findings.iter().map(|f| f.locations[0].line).collect();
    assert_eq!(lines, [Some(6)], "line 13's vector loop runs n iterations");
    let f = &c.findings[0];
    assert_eq!(f.evidence.count("vector_lanes"), Some(128));
    assert_eq!(f.evidence.count("vector_loop_trips"), Some(16));
    assert_eq!(
        f.evidence.get("idle_share"),
        Some(&Value::Ratio(112.0 / 128.0))
    );
    assert_eq!(f.locations[1].role, "vector loop");
    assert_eq!(f.locations[1].line, Some(9));
    assert_eq!(f.cost_ns, Some(300_000));
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc parallel loop gang vector_length(32) present(x)")
    );
    assert!(f
        .proposal
        .tune
        .as_deref()
        .unwrap_or("")
        .ends_with("--space vector_length=32..128"));
}

/// A C program with `prelude` at file scope, `local` first in `main`, and
/// one gang loop of 128 lanes whose `loop vector` runs while `cond`; and
/// the line of its compute construct.
fn vector_over(prelude: &str, local: &str, cond: &str) -> (String, u32) {
    let text = format!(
        "{prelude}\nint main(void) {{\n{local}\n  double x[4096];\n#pragma acc parallel loop gang vector_length(128) present(x)\n  for (int r = 0; r < 256; r++) {{\n#pragma acc loop vector\n    for (int j = 0; {cond}; j++) x[16 * r + j] = 2;\n  }}\n  return 0;\n}}\n"
    );
    let line = prelude.lines().count() as u32 + local.lines().count() as u32 + 4;
    (text, line)
}

/// L2 on ten launches of 128 lanes at `file`:`line`, whose source is `src`:
/// the trip count of each finding.
fn l2_trips(file: &str, line: u32, src: &SourceSet) -> Vec<Option<u64>> {
    let mut b = RunBuilder::new(HashMode::Off);
    let site = b.site(file, line);
    launches(&mut b, site, 10, 30_000, 256, [128, 1, 1], 0);
    let c = run_rule_with(&b.build(), src, l2_vector_trip::check);
    c.findings
        .iter()
        .map(|f| f.evidence.count("vector_loop_trips"))
        .collect()
}

fn l2_trips_in_c(prelude: &str, local: &str, cond: &str) -> Vec<Option<u64>> {
    let (text, line) = vector_over(prelude, local, cond);
    l2_trips("n.c", line, &SourceSet::with_text("n.c", &text))
}

#[test]
fn l2_a_bound_named_by_a_macro() {
    assert_eq!(l2_trips_in_c("#define COLS 16", "", "j < COLS"), [Some(16)]);
    assert_eq!(
        l2_trips_in_c("#define COLS (16)", "", "j < COLS - 1"),
        [Some(15)]
    );
}

#[test]
fn l2_a_bound_named_by_arithmetic_of_macros() {
    assert_eq!(
        l2_trips_in_c("#define COLS 8\n#define N (4*COLS)", "", "j < N"),
        [Some(32)]
    );
}

#[test]
fn l2_a_bound_named_by_a_macro_of_an_included_header() {
    let dir = std::env::temp_dir().join(format!("accprof-l2-include-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("cols.h"),
        "#ifndef COLS_H\n#define COLS_H\n#define COLS 16\n#endif\n",
    )
    .expect("header");
    let (text, line) = vector_over("#include \"cols.h\"", "", "j <= COLS");
    let path = dir.join("n.c").display().to_string();
    let found = l2_trips(&path, line, &SourceSet::with_text(&path, &text));
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert_eq!(found, [Some(17)]);
}

#[test]
fn l2_a_bound_named_by_a_const() {
    assert_eq!(
        l2_trips_in_c("static const int COLS = 16;", "", "j < COLS"),
        [Some(16)]
    );
    assert_eq!(
        l2_trips_in_c("", "  const long COLS = 24;", "j < COLS"),
        [Some(24)]
    );
}

#[test]
fn l2_a_bound_named_by_a_fortran_parameter() {
    let src = "\
module sizes
  integer, parameter :: m = 8, cols = 2*m
end module sizes
program p
  use sizes
  real :: x(4096)
  integer :: r, j
!$acc parallel loop gang vector_length(128) present(x)
  do r = 1, 256
!$acc loop vector
    do j = 1, COLS
      x(16*(r-1)+j) = 2
    end do
  end do
end program p
";
    let found = l2_trips("p.f90", 8, &SourceSet::with_text("p.f90", src));
    assert_eq!(found, [Some(16)]);
    let src = src.replace("use sizes", "integer :: cols");
    let found = l2_trips("p.f90", 8, &SourceSet::with_text("p.f90", &src));
    assert_eq!(found, [], "a variable of the program, not the module's");
}

/// Fortran through the parser: a vector loop with a step, counting down
/// too, its bounds of parameters; a labelled loop.
#[test]
fn l2_a_fortran_vector_loop_with_a_step() {
    let src = "\
program p
  integer, parameter :: cols = 32
  real :: x(4096)
  integer :: r, j
!$acc parallel loop gang vector_length(128) present(x)
  do r = 1, 256
!$acc loop vector
    do j = 1, cols, 2
      x(16*(r-1)+j) = 2
    end do
  end do
end program p
";
    let found = l2_trips("p.f90", 5, &SourceSet::with_text("p.f90", src));
    assert_eq!(found, [Some(16)]);
    let down = src
        .replace("do j = 1, cols, 2", "cols_loop: do j = cols, 1, -4")
        .replace("    end do\n  end do", "    end do cols_loop\n  end do");
    let found = l2_trips("p.f90", 5, &SourceSet::with_text("p.f90", &down));
    assert_eq!(found, [Some(8)]);
}

/// C++ through its grammar: a `constexpr` bound, a loop counting down
/// over a std::vector's data, in a member function.
#[test]
fn l2_a_cpp_vector_loop_counting_down() {
    let src = "\
#include <vector>
struct Grid {
  static constexpr int W = 24;
  std::vector<double> v = std::vector<double>(4096);
  void step() {
    double *x = v.data();
#pragma acc parallel loop gang vector_length(128) copy(x[0:4096])
    for (int r = 0; r < 128; r++) {
#pragma acc loop vector
      for (int j = W - 1; j >= 0; --j) x[W * r + j] *= 2;
    }
  }
};
";
    let found = l2_trips("g.cpp", 7, &SourceSet::with_text("g.cpp", src));
    assert_eq!(found, [Some(24)]);
    let local = src.replace("static constexpr int W = 24;", "int W = 24;");
    let found = l2_trips("g.cpp", 7, &SourceSet::with_text("g.cpp", &local));
    assert_eq!(found, [], "a member that is not a constant");
}

/// Names whose value the text does not say for certain give no finding.
#[test]
fn l2_leaves_names_without_a_certain_value_alone() {
    let none: [Option<u64>; 0] = [];
    assert_eq!(
        l2_trips_in_c("#define COLS(n) (n)", "", "j < COLS(16)"),
        none,
        "function-like"
    );
    assert_eq!(
        l2_trips_in_c(
            "#define COLS 16\n#undef COLS\nextern int COLS;",
            "",
            "j < COLS"
        ),
        none,
        "undefined, then a variable"
    );
    assert_eq!(
        l2_trips_in_c("const int COLS = 16;", "  int COLS = 16;", "j < COLS"),
        none,
        "a variable of main hides the constant"
    );
    assert_eq!(
        l2_trips_in_c("#define COLS 16\n#define COLS 8", "", "j < COLS"),
        none,
        "redefined"
    );
    assert_eq!(l2_trips_in_c("", "", "j < COLS"), none, "unknown");
}

#[test]
fn l4_the_launch_differs_from_the_clauses() {
    let c = run_rule_with(&run(), &sources(), l4_launch_differs::check);
    let lines: Vec<Option<u32>> = c.findings.iter().map(|f| f.locations[0].line).collect();
    // Line 4: 48 asked, 32 launched. Line 11 got the 8 gangs and 64 lanes
    // it asked for; lines 6 and 13 too.
    assert_eq!(lines, [Some(4)]);
    let f = &c.findings[0];
    assert_eq!(f.evidence.count("vector_length_asked"), Some(48));
    assert_eq!(f.evidence.count("vector_length_launched"), Some(32));
    assert!(
        f.title.ends_with("vector_length(48) launched as 32"),
        "{}",
        f.title
    );
    assert!(f.proposal.text.contains("replaced vector_length(48) by 32"));
}

#[test]
fn l3_too_few_gangs_for_the_sms() {
    let c = run_rule_with(&run(), &sources(), l3_single_gang::check);
    let f: Vec<_> = c
        .findings
        .iter()
        .filter(|f| f.title.starts_with("too few gangs"))
        .collect();
    assert_eq!(
        f.len(),
        1,
        "{:?}",
        c.findings.iter().map(|f| &f.title).collect::<Vec<_>>()
    );
    let f = f[0];
    assert_eq!(f.locations[0].line, Some(11));
    assert_eq!(f.evidence.count("gangs"), Some(8));
    assert_eq!(f.evidence.count("sm_count"), Some(100));
    assert_eq!(f.cost_ns, Some(9_000_000));
    assert_eq!(f.saving_ns, Some(9_000_000 - 9_000_000 * 8 / 100));
    assert!(f.proposal.text.contains("`num_gangs(8)` at line 11"));
    assert!(f
        .proposal
        .tune
        .as_deref()
        .unwrap_or("")
        .ends_with("--space num_gangs=100,200,400"));
}

#[test]
fn l5_many_short_launches_with_much_host_time() {
    let src = "int main(void) {\n  double x[64];\n  for (int it = 0; it < 500; it++) {\n#pragma acc parallel loop present(x)\n    for (int i = 0; i < 64; i++) x[i] += 1;\n#pragma acc parallel loop present(x)\n    for (int i = 0; i < 64; i++) x[i] *= 2;\n  }\n  return 0;\n}\n";
    let mut b = RunBuilder::new(HashMode::Off);
    let s4 = b.site("s.c", 4);
    let s6 = b.site("s.c", 6);
    launches(&mut b, s4, 500, 2_000, 8448, [32, 1, 1], 40_000);
    // Few launches: not a storm.
    launches(&mut b, s6, 20, 2_000, 8448, [32, 1, 1], 40_000);
    let run = b.build();
    let c = run_rule_with(
        &run,
        &SourceSet::with_text("s.c", src),
        l5_launch_bound::check,
    );
    assert_eq!(c.findings.len(), 1);
    let f = &c.findings[0];
    assert_eq!(f.locations[0].line, Some(4));
    assert_eq!(f.locations[1].role, "host loop");
    assert_eq!(f.evidence.count("launches"), Some(500));
    let (host, device) = match (f.evidence.get("host_time"), f.evidence.get("device_time")) {
        (Some(Value::Ns(h)), Some(Value::Ns(d))) => (*h, *d),
        other => panic!("{other:?}"),
    };
    assert_eq!(device, 500 * 2_000);
    assert_eq!(f.cost_ns, Some(host - device));
    let p = &f.proposal.text;
    assert!(p.starts_with("Launch it on an async queue"), "{p}");
    assert!(
        p.contains("fuse it with the compute construct at line 6"),
        "{p}"
    );
    assert!(p.contains("give each launch more work"), "{p}");
    // `accprof tune` times kernels on the device: no sweep of it measures
    // the launch cost this finding is about.
    assert_eq!(f.proposal.tune, None);
}

/// samples/launch_shapes.c recorded on an H100 (4096 rows, 20 steps): L1
/// and L4 at the vector_length(48) loop, which launched 32 lanes; L2 at the
/// 16 iterations under 128 lanes; nothing else about launches.
#[test]
fn launch_shapes_recorded_on_an_h100() {
    use accprof_analyzer::analysis;
    use accprof_analyzer::findings::Category;
    use accprof_analyzer::rules::Options;
    use accprof_analyzer::testkit::fixtures;

    let run = fixtures::load("h100", "launch_shapes");
    let src = SourceSet::load(&run, &[fixtures::samples()]);
    let a = analysis::analyze(&run, &src, &Options::default());
    let mut found: Vec<(&str, Option<u32>)> = a
        .findings
        .iter()
        .filter(|f| f.category == Category::Launch)
        .map(|f| (f.id, f.locations[0].line))
        .collect();
    found.sort();
    assert_eq!(
        found,
        [("L1", Some(82)), ("L2", Some(86)), ("L4", Some(82))],
        "{:?}",
        a.findings.iter().map(|f| &f.title).collect::<Vec<_>>()
    );
    let get = |id: &str| a.findings.iter().find(|f| f.id == id).expect("finding");
    // Costs are the kernels' device time, from the model.
    for id in ["L1", "L2", "L4"] {
        let f = get(id);
        let device: u64 = f
            .subjects
            .kernels
            .iter()
            .map(|&k| run.kernel(k).device_ns())
            .sum();
        assert_eq!(f.subjects.kernels.len(), 20, "{id}");
        assert!(device > 0 && f.cost_ns == Some(device), "{id}");
        let tune = f.proposal.tune.as_deref().unwrap_or("");
        assert!(
            tune.contains("launch_shapes.c:") && tune.contains("--run '{out} 4096 20'"),
            "{tune}"
        );
    }
    let l4 = get("L4");
    assert_eq!(l4.evidence.count("vector_length_asked"), Some(48));
    assert_eq!(l4.evidence.count("vector_length_launched"), Some(32));
    let l1 = get("L1");
    assert!(l1.title.ends_with("32 lanes were launched"), "{}", l1.title);
    let l2 = get("L2");
    assert_eq!(
        l2.evidence.count("vector_lanes"),
        Some(128),
        "CUPTI's block"
    );
    assert_eq!(l2.evidence.count("vector_loop_trips"), Some(16));
    // The two patches touch different directives and combine.
    let combined = analysis::combined_patch(&a, &src);
    let diff = combined.patched.map(|p| p.diff).unwrap_or_default();
    assert!(
        diff.contains("+#pragma acc parallel loop vector_length(64) present(x[0:n], c[0:n])"),
        "{diff}"
    );
    assert!(
        diff.contains("+#pragma acc parallel loop gang vector_length(32) present(x[0:n], c[0:n])"),
        "{diff}"
    );
}

/// A launch site's kernel time is one number: the rules read it from the
/// run's summary, and on every recorded GPU fixture it is what the site's
/// kernels took on the device, and, summed over the sites of a line, the
/// kernel time the summary gives that line. L5's device time is the
/// summary's too.
#[test]
fn launch_sites_and_the_summary_agree_on_kernel_time_per_line() {
    use std::collections::BTreeMap;

    use accprof_analyzer::rules::{Context, Options};
    use accprof_analyzer::testkit::fixtures;

    let (mut lines_seen, mut l5_seen) = (0, 0);
    for (gpu, name) in [
        ("h100", "launch_shapes"),
        ("h100", "laplace_bad_f90_1024"),
        ("h100", "default_async_fail"),
        ("h200", "laplace_bad_c"),
        ("h200", "heat2d_naive"),
        ("h200", "jacobi_f90"),
        ("h200", "launch_storm"),
    ] {
        let run = fixtures::load(gpu, name);
        let (sources, opts) = (SourceSet::default(), Options::default());
        let cx = Context::new(&run, &sources, &opts);
        let mut by_line: BTreeMap<(String, String, Option<u32>), u64> = BTreeMap::new();
        for ls in cx.launch_sites() {
            let device: u64 = ls.kernels.iter().map(|&k| run.kernel(k).device_ns()).sum();
            assert_eq!(ls.device_ns, device, "{name}: site {:?}", run.site(ls.site));
            let s = run.site(ls.site);
            *by_line
                .entry((s.file.clone(), s.function.clone(), s.line))
                .or_default() += ls.device_ns;
        }
        let summary = run.summary();
        for ((file, function, line), device) in by_line {
            let l = summary
                .functions
                .iter()
                .filter(|f| f.file == file && f.function == function)
                .flat_map(|f| &f.lines)
                .find(|l| l.line == line)
                .unwrap_or_else(|| panic!("{name}: no summary line {file}:{line:?}"));
            assert_eq!(l.kernel_ns(), device, "{name}: {file}:{line:?}");
            assert!(device > 0, "{name}: {file}:{line:?}");
            lines_seen += 1;
        }
        for f in l5_launch_bound::check(&cx).findings {
            let line = f.locations[0].line;
            let l = summary
                .functions
                .iter()
                .flat_map(|f| &f.lines)
                .find(|l| l.line == line)
                .expect("L5's line");
            assert_eq!(
                f.evidence.get("device_time"),
                Some(&Value::Ns(l.kernel_ns())),
                "{name}"
            );
            l5_seen += 1;
        }
    }
    assert!(lines_seen >= 10 && l5_seen >= 2, "{lines_seen} {l5_seen}");
}

/// Launch sites gather each site's constructs, kernels and most common
/// shapes also when two sites take turns (a loop body launching both)
/// and the shapes change within a site: in start order per site, and the
/// shape most launches got, the smaller on a tie.
#[test]
fn launch_sites_gather_sites_that_take_turns() {
    use accprof_analyzer::rules::{Context, Options};

    let mut b = RunBuilder::new(HashMode::Off);
    let (a, z) = (b.site("t.c", 4), b.site("t.c", 6));
    let at = |b: &mut RunBuilder, site, grid| {
        let c = b.open(ConstructClass::Compute, site, None);
        let k = b.kernel(c, grid, 2_000).expect("CUPTI records");
        b.close(c);
        (c, k)
    };
    // a: grids 8, 8, 4, 4, 4 (4 most); z: grids 2, 3, 3, 2 (a tie: 2).
    let plan = [
        (a, 8),
        (z, 2),
        (a, 8),
        (z, 3),
        (a, 4),
        (a, 4),
        (z, 3),
        (a, 4),
        (z, 2),
    ];
    let made: Vec<_> = plan.iter().map(|&(s, g)| (s, at(&mut b, s, g))).collect();
    let run = b.build();
    let (sources, opts) = (SourceSet::default(), Options::default());
    let cx = Context::new(&run, &sources, &opts);
    let sites = cx.launch_sites();
    assert_eq!(
        sites.iter().map(|ls| ls.site).collect::<Vec<_>>(),
        vec![a, z]
    );
    for (ls, grid) in sites.iter().zip([4, 2]) {
        let own = made.iter().filter(|(s, _)| *s == ls.site);
        assert_eq!(
            ls.constructs,
            own.clone().map(|(_, (c, _))| *c).collect::<Vec<_>>()
        );
        assert_eq!(ls.kernels, own.map(|(_, (_, k))| *k).collect::<Vec<_>>());
        assert_eq!(ls.grid_block, Some(([grid, 1, 1], [32, 1, 1])));
        assert_eq!(ls.dims, Some((u64::from(grid), 1, 32)));
        assert_eq!(ls.launches(), ls.constructs.len() as u64);
    }
}
