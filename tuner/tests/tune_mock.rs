//! `tune` with the mock runner: each configuration's runs play traces
//! written here with chosen kernel times and launch shapes, so the search,
//! the statistics, ties, exclusions, caching, resume, restore and patching
//! are checked without a GPU.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use accprof_analyzer::testkit::trace::{header, write_trace, TraceBuilder};
use accprof_trace::{Device, Record};
use accprof_tuner::space::{Param, Space};
use accprof_tuner::tune::{prebuild, tune, Prebuilt, Repeats, SearchMode, TunePlan, Tuned};
use accprof_tuner::{Error, MockProgram, MockRunner};

const LINE: u32 = 3;
const SOURCE: &str = "int main(void) {\n  double a[64];\n#pragma acc parallel loop present(a) // hot\n  for (int i = 0; i < 64; i++) a[i] = i;\n  return 0;\n}\n";

/// A trace of two launches of the construct at app.c:LINE, each `ns` on
/// the device with blocks of `block` threads, on a 132-SM device.
fn trace(dir: &Path, ns: u64, block: u32) -> PathBuf {
    trace_with(dir, ns, block, Vec::new())
}

/// As [`trace`], beginning with `first`.
fn trace_with(dir: &Path, ns: u64, block: u32, first: Vec<Record>) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = dir.join(format!("t{}.trace", N.fetch_add(1, Ordering::SeqCst)));
    let mut b = TraceBuilder::new();
    b.records.extend(first);
    b.records.push(Record::Device(Device {
        id: 0,
        name: "Test GPU".into(),
        sm_count: 132,
        compute_capability: (9, 0),
        global_memory_bytes: 1 << 34,
    }));
    b.compute(1, 1, LINE, ns);
    b.compute(2, 2, LINE, ns);
    for r in &mut b.records {
        if let Record::Kernel(k) = r {
            k.block = [block, 1, 1];
        }
    }
    write_trace(&path, &header(), &b.records);
    path
}

/// A program whose successive runs take these kernel times.
fn program(dir: &Path, stdout: &str, block: u32, times: &[u64]) -> MockProgram {
    let repeats: Vec<PathBuf> = times.iter().map(|&t| trace(dir, t, block)).collect();
    MockProgram {
        repeats,
        ..MockProgram::new(stdout, &trace(dir, times[0], block))
    }
}

struct Setup {
    dir: tempfile::TempDir,
    source: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("app.c");
    std::fs::write(&source, SOURCE).expect("source");
    Setup { dir, source }
}

fn space(specs: &[&str]) -> Space {
    let s: Vec<String> = specs.iter().map(|x| x.to_string()).collect();
    Space::parse(&s, &[]).expect("space")
}

fn plan<'a>(s: &'a Setup, space: &'a Space, work: &'a Path) -> TunePlan<'a> {
    TunePlan {
        source: &s.source,
        line: LINE,
        build: Some("gcc -fopenacc {src} -o {out}"),
        run: "{out} 64",
        ignore: &[],
        space,
        prebuilt: None,
        repeats: Repeats {
            warmup: 1,
            min: 3,
            max: 6,
            spread: 0.05,
            config_time: Duration::from_secs(60),
        },
        mode: SearchMode::Auto,
        max_runs: None,
        max_time: None,
        recheck: 2,
        work,
        stop: None,
    }
}

fn outcome<'t>(t: &'t Tuned, key: &str) -> &'t accprof_tuner::tune::Outcome {
    t.outcomes
        .iter()
        .find(|o| o.key == key)
        .unwrap_or_else(|| panic!("no outcome {key}: {:?}", t.outcomes))
}

#[test]
fn exhaustive_sweep_patches_builds_measures_and_restores() {
    let s = setup();
    let work = s.dir.path().join("work");
    let sp = space(&["vector_length=32,64,128"]);
    let d = s.dir.path();
    // default (launches 32 wide), 32 (same launch as the default), 64, 128.
    let mut runner = MockRunner::new(vec![
        program(
            d,
            "sum 1\n",
            32,
            &[100_000, 100_000, 101_000, 99_000, 100_000],
        ),
        program(d, "sum 1\n", 32, &[100_000]),
        program(d, "sum 1\n", 64, &[60_000, 60_000, 61_000, 59_000, 60_000]),
        program(d, "sum 1\n", 128, &[80_000, 80_000, 80_500, 79_500, 80_000]),
    ]);
    let t = tune(&mut runner, &plan(&s, &sp, &work), &mut |_| {}).expect("tunes");
    assert_eq!(t.search, "exhaustive");
    assert_eq!(std::fs::read_to_string(&s.source).expect("source"), SOURCE);
    // Each configuration was built from its patched text, one build each.
    let texts: Vec<bool> = runner
        .builds
        .iter()
        .map(|b| b.text.contains("vector_length("))
        .collect();
    assert_eq!(texts, [false, true, true, true]);
    assert!(runner.builds[2]
        .text
        .contains("#pragma acc parallel loop present(a) vector_length(64) // hot"));
    assert_eq!(runner.builds[2].src, s.source, "built in place");
    // Medians are per launch (two launches per run), from the traces.
    let def = outcome(&t, "default");
    let st = def.stats.expect("default measured");
    assert_eq!(st.median, 100_000.0);
    assert_eq!(st.n, 3);
    assert_eq!(
        outcome(&t, "vector_length=32").same_as.as_deref(),
        Some("default")
    );
    let w = outcome(&t, "vector_length=64");
    assert!(w.recommended && w.tie, "{w:?}");
    assert_eq!(w.stats.map(|s| s.median), Some(60_000.0));
    assert!((w.speedup.unwrap_or(0.0) - 100.0 / 60.0).abs() < 1e-9);
    assert_eq!(
        w.shape.map(|s| s.to_string()).as_deref(),
        Some("4x1x1 / 64x1x1")
    );
    assert!(!outcome(&t, "vector_length=128").tie);
    // The re-check ran default and winner alternately.
    let r = t.recheck.as_ref().expect("re-checked");
    assert!(r.confirmed, "{r:?}");
    let phases: Vec<(&str, &str)> = t
        .samples
        .iter()
        .filter(|x| x.phase == "recheck")
        .map(|x| (x.config.as_str(), x.phase.as_str()))
        .collect();
    assert_eq!(
        phases.iter().map(|p| p.0).collect::<Vec<_>>(),
        ["default", "vector_length=64", "default", "vector_length=64"]
    );
    let patch = t.patch.as_deref().expect("patch");
    assert!(
        patch.contains("-#pragma acc parallel loop present(a) // hot")
            && patch.contains("+#pragma acc parallel loop present(a) vector_length(64) // hot"),
        "{patch}"
    );
    assert_eq!(t.device, "Test GPU");
    assert!(t.cost.builds == 4 && t.cost.runs as usize == runner.runs.len());
}

#[test]
fn a_winner_the_recheck_does_not_confirm_keeps_the_default_and_no_patch() {
    let s = setup();
    let work = s.dir.path().join("work");
    let sp = space(&["vector_length=64"]);
    let d = s.dir.path();
    // 64 is faster in its warm-up and three measured runs, slower in the
    // two rounds of the re-check.
    let mut runner = MockRunner::new(vec![
        program(d, "x\n", 32, &[100_000; 6]),
        program(
            d,
            "x\n",
            64,
            &[60_000, 60_000, 60_000, 60_000, 107_000, 108_000],
        ),
    ]);
    let t = tune(&mut runner, &plan(&s, &sp, &work), &mut |_| {}).expect("tunes");
    let r = t.recheck.as_ref().expect("re-checked");
    assert_eq!(r.candidate, "vector_length=64");
    assert!(!r.confirmed, "{r:?}");
    assert!(r.speedup.is_some_and(|x| x < 1.0), "{r:?}");
    assert_eq!(t.recommended().map(|o| o.key.as_str()), Some("default"));
    let w = outcome(&t, "vector_length=64");
    assert!(w.tie && !w.recommended, "{w:?}");
    assert_eq!(t.patch, None);
    assert!(t.patch_defines.is_empty() && t.patch_env.is_empty());
}

#[test]
fn ties_recommend_the_setting_closest_to_the_default() {
    let s = setup();
    let work = s.dir.path().join("work");
    let sp = space(&["vector_length=64,128,256"]);
    let d = s.dir.path();
    let mut runner = MockRunner::new(vec![
        program(d, "x\n", 32, &[100_000, 100_000, 102_000, 98_000]),
        program(d, "x\n", 64, &[70_000, 70_000, 73_000, 67_000]),
        program(d, "x\n", 128, &[69_000, 69_000, 72_000, 66_000]),
        program(d, "x\n", 256, &[90_000, 90_000, 90_500, 89_500]),
    ]);
    let mut p = plan(&s, &sp, &work);
    p.recheck = 0;
    let t = tune(&mut runner, &p, &mut |_| {}).expect("tunes");
    // 128 has the lowest median, but 64 is within its interval and one
    // doubling from the default's 32 lanes.
    let (a, b) = (
        outcome(&t, "vector_length=64"),
        outcome(&t, "vector_length=128"),
    );
    assert!(a.tie && b.tie);
    assert!(a.recommended && !b.recommended);
    assert!(!outcome(&t, "vector_length=256").tie);
    assert!(t.recheck.is_none());
}

#[test]
fn a_configuration_that_changes_the_output_is_excluded() {
    let s = setup();
    let work = s.dir.path().join("work");
    let sp = space(&["vector_length=64,128"]);
    let d = s.dir.path();
    let mut runner = MockRunner::new(vec![
        program(d, "sum 1\ntime: 3 s\n", 32, &[100_000; 4]),
        program(d, "sum 2\ntime: 1 s\n", 64, &[10_000; 4]),
        program(
            d,
            "sum 1\ntime: 2 s\n",
            128,
            &[90_000, 90_000, 91_000, 89_000],
        ),
    ]);
    let t = tune(&mut runner, &plan(&s, &sp, &work), &mut |_| {}).expect("tunes");
    let bad = outcome(&t, "vector_length=64");
    assert_eq!(
        bad.excluded.as_deref(),
        Some("output differs from the default's at line 1: `sum 2` instead of `sum 1`")
    );
    assert!(bad.stats.is_none() && !bad.recommended);
    assert!(outcome(&t, "vector_length=128").recommended);
    // Only its warm-up ran.
    let runs = t
        .samples
        .iter()
        .filter(|x| x.config == "vector_length=64")
        .count();
    assert_eq!(runs, 1);
}

#[test]
fn gangs_left_open_are_swept_at_run_time_without_rebuilding() {
    let s = setup();
    let work = s.dir.path().join("work");
    let sp = space(&["num_gangs=132,264,200"]);
    let d = s.dir.path();
    let mut prog = program(d, "x\n", 32, &[100_000; 4]);
    prog.env_repeats = vec![
        (
            "GOMP_OPENACC_DIM=132::".into(),
            [90_000, 90_000, 91_000, 89_000]
                .iter()
                .map(|&t| trace(d, t, 64))
                .collect(),
        ),
        (
            "GOMP_OPENACC_DIM=264::".into(),
            [50_000, 50_000, 51_000, 49_000]
                .iter()
                .map(|&t| trace(d, t, 128))
                .collect(),
        ),
    ];
    let mut runner = MockRunner::new(vec![prog]);
    let t = tune(&mut runner, &plan(&s, &sp, &work), &mut |_| {}).expect("tunes");
    assert_eq!(runner.builds.len(), 1, "one build for a run-time sweep");
    assert_eq!(t.how[0].0, Param::NumGangs);
    assert!(t.how[0].1.contains("GOMP_OPENACC_DIM"), "{:?}", t.how);
    // 200 gangs are not whole waves of 132 SMs.
    let p = outcome(&t, "num_gangs=200");
    assert!(
        p.pruned.as_deref().unwrap_or("").contains("132 SMs"),
        "{p:?}"
    );
    assert!(outcome(&t, "num_gangs=264").recommended);
    assert_eq!(t.patch, None, "nothing to patch in the source");
    assert_eq!(
        t.patch_env,
        [("GOMP_OPENACC_DIM".to_string(), "264::".to_string())]
    );
    assert!(runner
        .envs
        .iter()
        .any(|e| e.contains(&("GOMP_OPENACC_DIM".to_string(), "264::".to_string()))));
}

/// Programs for vector lengths 32..1024 with a minimum at 256.
fn curve(d: &Path) -> Vec<MockProgram> {
    let time = |vl: u64| 50_000 + (vl as i64 - 256).unsigned_abs() * 100;
    let mut v = vec![program(d, "x\n", 32, &[time(32); 4])];
    for vl in [32u32, 64, 128, 256, 512, 1024] {
        // The default launched 32 wide too: give the 32 build another shape
        // so that it is measured.
        let block = if vl == 32 { 33 } else { vl };
        v.push(program(d, "x\n", block, &[time(u64::from(vl)); 4]));
    }
    v
}

#[test]
fn the_search_finds_the_best_in_fewer_runs_than_exhaustive() {
    let s = setup();
    let sp = space(&["vector_length=32..1024"]);
    let d = s.dir.path();
    let work = d.join("exhaustive");
    let mut p = plan(&s, &sp, &work);
    p.mode = SearchMode::Exhaustive;
    p.recheck = 0;
    let mut runner = MockRunner::new(curve(d));
    let all = tune(&mut runner, &p, &mut |_| {}).expect("exhaustive");
    let work = d.join("search");
    let mut p = plan(&s, &sp, &work);
    p.mode = SearchMode::Search;
    p.recheck = 0;
    let mut order = Vec::new();
    let mut runner = MockRunner::new({
        // Builds happen in the search's order: default, 32, 128, 512, then
        // the neighbours of 128: 64 and 256, then 256's: 512 is known.
        let c = curve(d);
        [0, 1, 3, 5, 2, 4].iter().map(|&i| c[i].clone()).collect()
    });
    let found = tune(&mut runner, &p, &mut |pr| order.push(pr.config.clone())).expect("search");
    assert_eq!(found.search, "coarse grid + local search");
    let best = |t: &Tuned| t.recommended().map(|o| o.key.clone());
    assert_eq!(best(&all).as_deref(), Some("vector_length=256"));
    assert_eq!(best(&found), best(&all));
    assert!(
        found.cost.runs < all.cost.runs,
        "{} vs {}",
        found.cost.runs,
        all.cost.runs
    );
    assert!(!order.contains(&"vector_length=1024".to_string()));
    assert!(!outcome(&found, "vector_length=1024").measured);
    assert!(outcome(&all, "vector_length=1024").measured);
}

#[test]
fn a_run_budget_ends_the_sweep_and_says_so() {
    let s = setup();
    let sp = space(&["vector_length=32..1024"]);
    let d = s.dir.path();
    let work = d.join("w");
    let mut p = plan(&s, &sp, &work);
    p.mode = SearchMode::Exhaustive;
    p.max_runs = Some(9);
    p.recheck = 0;
    let mut runner = MockRunner::new(curve(d));
    let t = tune(&mut runner, &p, &mut |_| {}).expect("tunes");
    assert_eq!(t.budget_ended.as_deref(), Some("--max-runs 9 reached"));
    assert!(t.cost.runs <= 10, "{}", t.cost.runs);
    assert!(outcome(&t, "vector_length=1024").stats.is_none());
}

#[test]
fn an_interrupted_sweep_restores_the_source_and_resumes_from_the_cache() {
    let s = setup();
    let sp = space(&["vector_length=64,128"]);
    let d = s.dir.path();
    let work = d.join("w");
    let programs = vec![
        program(d, "x\n", 32, &[100_000; 4]),
        program(d, "x\n", 64, &[60_000, 60_000, 61_000, 59_000]),
        program(d, "x\n", 128, &[80_000; 4]),
    ];
    let stop = AtomicBool::new(false);
    let mut p = plan(&s, &sp, &work);
    p.stop = Some(&stop);
    p.recheck = 0;
    let mut runner = MockRunner::new(programs.clone());
    // Stop once the first measured run of vector_length=64 is in.
    let err = tune(&mut runner, &p, &mut |pr| {
        if pr.config == "vector_length=64" && pr.runs >= 6 {
            stop.store(true, Ordering::SeqCst);
        }
    })
    .expect_err("interrupted");
    assert!(matches!(err, Error::Interrupted { .. }), "{err}");
    assert!(
        err.to_string().contains("the same command resumes"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&s.source).expect("source"), SOURCE);
    let first_runs = runner.runs.len();

    // The same sweep again: the cached samples are reused.
    let p = plan(&s, &sp, &work);
    let mut runner = MockRunner::new(programs.clone());
    let t = tune(&mut runner, &p, &mut |_| {}).expect("resumes");
    assert_eq!(outcome(&t, "default").cached, 3);
    assert!(outcome(&t, "vector_length=64").cached >= 1);
    assert!(t.cost.cached >= 4);
    assert!(outcome(&t, "vector_length=64").recommended);
    // A third time everything comes from the cache, but the default's
    // warm-up and the re-check.
    let mut runner = MockRunner::new(programs);
    let again = tune(&mut runner, &p, &mut |_| {}).expect("cached");
    assert!(
        runner.runs.len() < first_runs + 6,
        "{} runs",
        runner.runs.len()
    );
    assert_eq!(
        again.recommended().map(|o| o.key.as_str()),
        Some("vector_length=64")
    );
    // Another build command is another key: nothing is reused.
    let mut p2 = plan(&s, &sp, &work);
    p2.build = Some("clang -fopenacc {src} -o {out}");
    let mut runner = MockRunner::new(vec![
        program(d, "x\n", 32, &[100_000; 4]),
        program(d, "x\n", 64, &[60_000; 4]),
        program(d, "x\n", 128, &[80_000; 4]),
    ]);
    let other = tune(&mut runner, &p2, &mut |_| {}).expect("tunes");
    assert_eq!(other.cost.cached, 0);
}

#[test]
fn prebuilt_programs_are_listed_and_picked_per_configuration() {
    let s = setup();
    let sp = space(&["vector_length=64,128,48"]);
    let d = s.dir.path();
    let pre_dir = d.join("pre");
    // Builds that write a file, as a compiler would.
    struct Copying(MockRunner);
    impl accprof_tuner::Runner for Copying {
        fn build(
            &mut self,
            t: &str,
            src: &Path,
            out: &Path,
        ) -> Result<accprof_tuner::BuildOutput, Error> {
            let b = self.0.build(t, src, out)?;
            std::fs::write(out, std::fs::read(src).expect("src")).expect("out");
            Ok(b)
        }
        fn run(
            &mut self,
            c: &[String],
            t: &Path,
            e: &[(String, String)],
        ) -> Result<accprof_tuner::RunOutput, Error> {
            self.0.run(c, t, e)
        }
    }
    let mut r = Copying(MockRunner::new(vec![
        program(d, "x\n", 32, &[1]),
        program(d, "x\n", 64, &[1]),
        program(d, "x\n", 128, &[1]),
    ]));
    let pre = prebuild(
        &mut r,
        &s.source,
        LINE,
        "cc {src} -o {out}",
        &sp,
        &pre_dir,
        None,
    )
    .expect("prebuilds");
    assert_eq!(std::fs::read_to_string(&s.source).expect("source"), SOURCE);
    let keys: Vec<&str> = pre.variants.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["default", "vector_length=64", "vector_length=128"]);
    for (k, f) in &pre.variants {
        let text = std::fs::read_to_string(pre_dir.join(f)).expect("program");
        assert_eq!(text.contains("vector_length("), *k != "default", "{k}");
    }
    assert_eq!(Prebuilt::read(&pre_dir).expect("list"), pre);
}

#[test]
fn a_failed_prebuild_names_its_first_error_and_its_log() {
    let s = setup();
    let sp = space(&["vector_length=64"]);
    let d = s.dir.path();
    let pre_dir = d.join("pre");
    let stderr = "/usr/bin/ld: /tmp/cc.o: in function `main':\n\
        app.c:(.text+0x7fa): undefined reference to `fmax'\n\
        collect2: error: ld returned 1 exit status\n";
    let mut runner = MockRunner::new(vec![MockProgram {
        build_code: 1,
        build_stderr: stderr.to_string(),
        ..MockProgram::default()
    }]);
    let err = prebuild(
        &mut runner,
        &s.source,
        LINE,
        "cc {src} -o {out}",
        &sp,
        &pre_dir,
        None,
    )
    .expect_err("the build fails");
    let log = pre_dir.join("build-default.log");
    assert_eq!(
        err.to_string(),
        format!(
            "building the default version failed (exit code 1): `cc {} -o {}`: \
             app.c:(.text+0x7fa): undefined reference to `fmax'; full log: {}",
            s.source.display(),
            pre_dir.join("default").display(),
            log.display()
        )
    );
    let text = std::fs::read_to_string(&log).expect("the log");
    assert!(
        text.starts_with("$ cc ") && text.ends_with(stderr),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&s.source).expect("source"), SOURCE);
}

#[test]
fn a_macro_clause_is_set_with_defines_and_the_source_is_left_alone() {
    let s = setup();
    std::fs::write(
        &s.source,
        SOURCE.replace("present(a) // hot", "present(a) vector_length(VL) // hot"),
    )
    .expect("source");
    let work = s.dir.path().join("work");
    let sp = space(&["vector_length=64,128"]);
    let d = s.dir.path();
    let mut runner = MockRunner::new(vec![
        program(d, "x\n", 32, &[100_000; 4]),
        program(d, "x\n", 64, &[60_000; 4]),
        program(d, "x\n", 128, &[80_000; 4]),
    ]);
    let mut p = plan(&s, &sp, &work);
    p.build = Some("gcc {defines} -fopenacc {src} -o {out}");
    p.recheck = 0;
    let t = tune(&mut runner, &p, &mut |_| {}).expect("tunes");
    let commands: Vec<&str> = runner.builds.iter().map(|b| b.command.as_str()).collect();
    assert!(commands[0].starts_with("gcc  -fopenacc"), "{commands:?}");
    assert!(
        commands[1].starts_with("gcc -DVL=64 -fopenacc"),
        "{commands:?}"
    );
    assert!(
        commands[2].starts_with("gcc -DVL=128 -fopenacc"),
        "{commands:?}"
    );
    assert!(runner
        .builds
        .iter()
        .all(|b| b.text.contains("vector_length(VL)")));
    assert!(
        t.how[0].1.contains("macro VL passed as -DVL=N"),
        "{:?}",
        t.how
    );
    assert_eq!(t.patch, None);
    assert_eq!(t.patch_defines, [("VL".to_string(), "64".to_string())]);
}

#[test]
fn a_failed_build_names_its_first_error_and_keeps_the_whole_log() {
    let s = setup();
    let work = s.dir.path().join("work");
    let sp = space(&["vector_length=64"]);
    let d = s.dir.path();
    let stderr = "app.c: In function 'main':\n\
        app.c:3:9: error: 'vector_lenght' is not valid for '#pragma acc parallel loop'\n    \
        3 | #pragma acc parallel loop present(a) vector_lenght(64) // hot\n      \
        |         ^~~\n";
    let mut runner = MockRunner::new(vec![
        program(d, "x\n", 32, &[100_000; 4]),
        MockProgram {
            build_code: 1,
            build_stderr: stderr.to_string(),
            ..MockProgram::default()
        },
    ]);
    let t = tune(&mut runner, &plan(&s, &sp, &work), &mut |_| {}).expect("tunes");
    let failed = outcome(&t, "vector_length=64")
        .failed
        .clone()
        .unwrap_or_default();
    let log = work.join("build-vector_length_64.log");
    assert_eq!(
        failed,
        format!(
            "build failed (exit code 1): `gcc -fopenacc {src} -o {out}`: \
             app.c:3:9: error: 'vector_lenght' is not valid for '#pragma acc parallel loop'; \
             full log: {log}",
            src = s.source.display(),
            out = work.join("bin/vector_length_64").display(),
            log = log.display()
        )
    );
    let text = std::fs::read_to_string(&log).expect("the log");
    assert!(text.starts_with("$ gcc -fopenacc "), "{text}");
    assert!(text.ends_with(stderr), "{text}");
    assert_eq!(t.recommended().map(|o| o.key.as_str()), Some("default"));
}

/// As [`program`], each run's trace holding code-loading driver calls of
/// `load_ns` before the constructs: 50 ms is a run that compiled its PTX
/// (the driver's cache missed), 2 ms one that found its code cached.
fn loading_program(dir: &Path, block: u32, times: &[u64], load_ns: u64) -> MockProgram {
    let with_load = |ns: u64| {
        let load = Record::DriverSpan(accprof_trace::DriverSpan {
            thread: 1,
            start_ns: 1_000,
            end_ns: 1_000 + load_ns,
            op: accprof_trace::DriverOp::ModuleLoad,
            cbid: 0,
            correlation: 0,
        });
        trace_with(dir, ns, block, vec![load])
    };
    let repeats: Vec<PathBuf> = times.iter().map(|&t| with_load(t)).collect();
    MockProgram {
        repeats,
        ..MockProgram::new("sum 1\n", &with_load(times[0]))
    }
}

/// The default's runs find their code in the driver's cache, the other
/// configuration's (a binary of its own) compile it at every run: the
/// sweep counts them and the report says its runs are not alike.
#[test]
fn runs_that_compiled_their_code_beside_warm_ones_are_reported() {
    let s = setup();
    let work = s.dir.path().join("work");
    let sp = space(&["vector_length=64"]);
    let d = s.dir.path();
    let mut runner = MockRunner::new(vec![
        loading_program(d, 32, &[100_000; 5], 2_000_000),
        loading_program(d, 64, &[60_000; 5], 50_000_000),
    ]);
    let t = tune(&mut runner, &plan(&s, &sp, &work), &mut |_| {}).expect("tunes");
    assert!(t.jit.paid > 0 && t.jit.warm > 0, "{:?}", t.jit);
    let text = String::from_utf8(accprof_tuner::report::tune::render(&t)).expect("utf-8");
    assert!(
        text.contains("measured runs compiled their device code at start-up"),
        "{text}"
    );

    // All warm: nothing to say.
    let s = setup();
    let work = s.dir.path().join("work");
    let d = s.dir.path();
    let mut runner = MockRunner::new(vec![
        loading_program(d, 32, &[100_000; 5], 2_000_000),
        loading_program(d, 64, &[60_000; 5], 2_000_000),
    ]);
    let t = tune(&mut runner, &plan(&s, &sp, &work), &mut |_| {}).expect("tunes");
    assert_eq!(t.jit.paid, 0);
    assert!(t.jit.warm > 0);
    let text = String::from_utf8(accprof_tuner::report::tune::render(&t)).expect("utf-8");
    assert!(!text.contains("compiled their device code"), "{text}");
}
