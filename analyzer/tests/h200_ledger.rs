//! The wall-time ledger and the rules that draw on it, on traces recorded
//! on an H200 with CUDA driver timings (cli/tests/fixtures/h200-ledger, see
//! its README), and the ledger on every older fixture: each host thread's
//! parts sum to the wall time.

use accprof_analyzer::analysis;
use accprof_analyzer::findings::{Analysis, Value};
use accprof_analyzer::ledger::{Ledger, Part};
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::testkit;
use accprof_analyzer::Run;

const DIR: &str = "h200-ledger";

/// The compute constructs of these move the program's data.
const DATA_SHAPES: [&str; 5] = [
    "data_shapes_helper",
    "data_shapes_table",
    "data_shapes_update",
    "data_shapes_clean",
    "laplace_bad_f90_256",
];

fn analyze(name: &str) -> (Run, Analysis) {
    let run = testkit::fixtures::load(DIR, name);
    let src = SourceSet::load(&run, &[testkit::fixtures::samples()]);
    let a = analysis::analyze(&run, &src, &Options::default());
    (run, a)
}

fn ids(a: &Analysis) -> Vec<&str> {
    a.findings.iter().map(|f| f.id).collect()
}

/// Every thread's top-level parts, summed, against the wall time.
fn assert_sums_to_wall(name: &str, l: &Ledger) {
    for t in &l.threads {
        let sum = t.program_ns(l.wall_ns) + t.inside_ns + t.mpi_ns + t.outside.total_ns();
        let off = sum.abs_diff(l.wall_ns) as f64 / l.wall_ns.max(1) as f64;
        assert!(
            off <= 0.01,
            "{name}: thread {} parts sum to {sum} ns, wall {} ns",
            t.thread,
            l.wall_ns
        );
        let inside = t.inside.total_ns() + t.collector_ns + t.runtime_rest_ns();
        if l.timed {
            assert!(
                inside.abs_diff(t.inside_ns) as f64 <= 0.01 * t.inside_ns as f64,
                "{name}: thread {} inside parts {inside} ns, inside {} ns",
                t.thread,
                t.inside_ns
            );
        }
    }
}

#[test]
fn every_fixture_ledger_sums_to_the_wall_time() {
    let root = testkit::fixtures::dir(DIR);
    let root = root.parent().expect("fixtures");
    let mut seen = 0;
    for dir in ["h100", "h200", DIR] {
        for e in std::fs::read_dir(root.join(dir)).expect("fixture dir") {
            let p = e.expect("entry").path();
            if p.extension().and_then(|x| x.to_str()) != Some("trace") {
                continue;
            }
            let name = p.file_stem().and_then(|s| s.to_str()).expect("name");
            let run = testkit::fixtures::load(dir, name);
            assert_sums_to_wall(name, run.ledger());
            seen += 1;
        }
    }
    assert!(seen >= 30, "only {seen} fixtures");
}

#[test]
fn the_recorded_traces_are_timed_by_the_driver() {
    let others = ["small_kernels_16_100", "launch_storm_2000"];
    for name in DATA_SHAPES.into_iter().chain(others) {
        let run = testkit::fixtures::load(DIR, name);
        let l = run.ledger();
        assert!(l.timed, "{name}");
        let t = l.main_thread().expect("a thread");
        // Every construct launched a kernel through the driver.
        assert!(t.inside.calls(Part::Launch) > 0, "{name}");
        assert!(l.before_first_record_ns.is_some(), "{name}");
    }
}

#[test]
fn data_movement_inside_compute_constructs_is_not_launch_bound() {
    for name in DATA_SHAPES {
        let (_, a) = analyze(name);
        assert!(
            !ids(&a).contains(&"L5") && !ids(&a).contains(&"R1"),
            "{name}: {:?}",
            ids(&a)
        );
    }
    // The bad shapes still get their data findings.
    assert!(ids(&analyze("data_shapes_helper").1).contains(&"D6"));
    assert!(ids(&analyze("data_shapes_table").1).contains(&"D6"));
    assert!(ids(&analyze("data_shapes_update").1).contains(&"D1"));
}

#[test]
fn the_launch_storm_is_launch_bound_and_runtime_bound() {
    let (run, a) = analyze("launch_storm_2000");
    let l5 = a.findings.iter().find(|f| f.id == "L5").expect("L5");
    let l = run.ledger();
    // L5 claims the launch calls and the waits of its line, R1 the rest of
    // the runtime's per-construct work: together no more than the
    // constructs' host time.
    let Some(Value::Ns(launch)) = l5.evidence.get("launch_calls_time") else {
        panic!("launch time")
    };
    let Some(Value::Ns(wait)) = l5.evidence.get("wait_time") else {
        panic!("wait time")
    };
    assert_eq!(l5.cost_ns, Some(launch + wait));
    let r1: Vec<_> = a.findings.iter().filter(|f| f.id == "R1").collect();
    assert_eq!(r1.len(), 2, "the sync and the async loop");
    let claimed: u64 = a
        .findings
        .iter()
        .filter(|f| f.id == "R1" || f.id == "L5")
        .filter_map(|f| f.cost_ns)
        .sum();
    let inside = l.main_thread().expect("thread").inside_ns;
    assert!(claimed <= inside, "{claimed} > {inside}");
    // R1 names the allocations the driver timed.
    let alloc: u64 = r1
        .iter()
        .filter_map(|f| match f.evidence.get("allocation_calls") {
            Some(Value::Count(n)) => Some(*n),
            _ => None,
        })
        .sum();
    // All but those of the few data constructs around the loops.
    let all = l
        .main_thread()
        .expect("thread")
        .inside
        .calls(Part::Allocation);
    assert!(alloc <= all && 100 * alloc >= 99 * all, "{alloc} of {all}");
}

#[test]
fn a_loop_of_several_tiny_synchronous_kernels_is_launch_bound() {
    let (run, a) = analyze("small_kernels_8_300");
    let l5: Vec<_> = a.findings.iter().filter(|f| f.id == "L5").collect();
    assert_eq!(l5.len(), 1, "{:?}", ids(&a));
    let f = l5[0];
    assert!(f.title.contains("launch-bound loop"), "{}", f.title);
    // Its cost is the launch calls and waits of the lines it names, as the
    // ledger has them.
    let l = run.ledger();
    let mut sum = 0;
    for loc in f.locations.iter().filter(|l| l.role == "construct") {
        let site = loc.site.expect("a construct's site");
        let s = l.site(site).expect("timed site");
        sum += s.parts.ns(Part::Launch) + s.parts.ns(Part::Wait);
    }
    assert_eq!(f.cost_ns, Some(sum));
    assert!(ids(&a).contains(&"R1"), "{:?}", ids(&a));
}

/// The loop finding's patch queues the runs of constructs in compute_rhs
/// and solve and waits once after each run's last construct, before the
/// data region's end; with no async construct in the run (and libgomp),
/// the saving is not estimated and the text quotes what was measured.
#[test]
fn the_loop_finding_queues_each_run_and_says_the_saving_is_not_estimated() {
    let run = testkit::fixtures::load(DIR, "small_kernels_8_300");
    let src = SourceSet::load(&run, &[testkit::fixtures::samples()]);
    let a = analysis::analyze(&run, &src, &Options::default());
    let f = a
        .findings
        .iter()
        .find(|f| f.id == "L5" && f.title.contains("launch-bound loop"))
        .expect("L5's loop finding");
    assert_eq!(f.saving_ns, None);
    let said = f.evidence.text.join(" ");
    assert!(said.contains("the saving is not estimated"), "{said}");
    assert!(
        said.contains("With GCC's libgomp it was measured on an NVIDIA H200 (2026-11-26)")
            && said.contains("504 -> 628 ms"),
        "{said}"
    );
    let patched = accprof_analyzer::patch::render(&src, &f.proposal.edits).expect("patch");
    assert_eq!(patched.files.len(), 1);
    let old: Vec<&str> = src
        .get(&patched.files[0].0)
        .expect("source")
        .lines
        .iter()
        .map(String::as_str)
        .collect();
    let new: Vec<&str> = patched.files[0].1.lines().collect();
    // Queued: 72, 75, 78 (compute_rhs) and 92, 95 (solve); one wait after
    // each run's last statement (80 and 97).
    let mut async_lines = Vec::new();
    let mut k = 0;
    for (i, line) in new.iter().enumerate() {
        if *line == "#pragma acc wait(1)" {
            assert!(
                [80, 97].contains(&(i - k)),
                "wait after original line {}",
                i - k
            );
            k += 1;
            continue;
        }
        if line.contains("async(1)") {
            async_lines.push(i - k + 1);
            assert_eq!(line.replace(" async(1)", ""), old[i - k]);
        }
    }
    assert_eq!(k, 2);
    assert_eq!(async_lines, [72, 75, 78, 92, 95]);
    assert!(f.proposal.no_patch.is_none());
    assert!(
        f.proposal
            .text
            .contains("small_kernels.c:72, :75, :78, :92, :95"),
        "{}",
        f.proposal.text
    );
}

/// Sync and async constructs in one run: the async ones cost more host
/// time per construct than the synchronous ones, so queueing is no cure
/// and no finding patches a queue.
#[test]
fn a_run_whose_async_constructs_cost_more_gets_no_queue() {
    let (_, a) = analyze("launch_storm_2000");
    let l5 = a.findings.iter().find(|f| f.id == "L5").expect("L5");
    assert!(
        l5.evidence
            .text
            .iter()
            .any(|t| t.starts_with("An async queue is no cure in this run")),
        "{:?}",
        l5.evidence.text
    );
    assert!(
        !l5.proposal.text.contains("async(1)"),
        "{}",
        l5.proposal.text
    );
    for f in &a.findings {
        assert!(
            !f.proposal
                .edits
                .iter()
                .any(|e| format!("{e:?}").contains("async(1)")
                    || format!("{e:?}").contains("wait(1)")),
            "{}: {:?}",
            f.id,
            f.proposal.edits
        );
    }
    // And with no launch finding, the data shapes get no queue either.
    for name in DATA_SHAPES {
        let (_, a) = analyze(name);
        for f in &a.findings {
            assert!(
                !format!("{:?}", f.proposal.edits).contains("async(1)"),
                "{name} {}",
                f.id
            );
        }
    }
}

/// queue_files: the time loop in queue_files.c calls two step functions of
/// queue_files_step.c, each one short synchronous kernel. Each construct is
/// launch-bound on its own; queueing one alone leaves no place for a single
/// wait, so each finding's patch queues both, in the other file, and waits
/// once after the loop in the caller's file: one patch over both files,
/// offered for measurement (libgomp's async path was measured slower).
#[test]
fn the_queue_patch_spans_the_callers_file_and_the_constructs_file() {
    let (_, a) = analyze("queue_files_4096_2000");
    let l5: Vec<_> = a.findings.iter().filter(|f| f.id == "L5").collect();
    assert_eq!(l5.len(), 2, "{:?}", ids(&a));
    let src = SourceSet::load(
        &testkit::fixtures::load(DIR, "queue_files_4096_2000"),
        &[testkit::fixtures::samples()],
    );
    for f in l5 {
        assert_eq!(f.saving_ns, None, "{}", f.title);
        let patched = accprof_analyzer::patch::render(&src, &f.proposal.edits).expect("patch");
        let mut files: Vec<(&str, &str)> = patched
            .files
            .iter()
            .map(|(p, t)| (p.rsplit('/').next().unwrap_or(p), t.as_str()))
            .collect();
        files.sort();
        let names: Vec<&str> = files.iter().map(|f| f.0).collect();
        assert_eq!(names, ["queue_files.c", "queue_files_step.c"]);
        // The wait right after the loop's closing brace (line 84), before
        // the data region ends.
        let main: Vec<&str> = files[0].1.lines().collect();
        assert_eq!(main[83].trim(), "}");
        assert_eq!(main[84], "#pragma acc wait(1)");
        assert_eq!(main[85].trim(), "}");
        // Both constructs queued, nothing else changed.
        let step: Vec<&str> = files[1].1.lines().collect();
        for n in [17, 25] {
            assert_eq!(
                step[n - 1],
                "#pragma acc parallel loop async(1) present(u[0:n], v[0:n])"
            );
        }
        assert_eq!(step.iter().filter(|l| l.contains("async")).count(), 2);
    }
}

/// small_kernels_16_100 ran right after its build: the driver's code
/// loading took 87 ms (it compiled the PTX), against 1-3 ms in the runs
/// recorded with the cache warm. The first is told apart and gets R2,
/// costed at its code loading, with the wall time without start-up; the
/// warm ones get no R2.
#[test]
fn a_run_that_compiled_its_device_code_is_told_from_a_warm_one() {
    let (run, a) = analyze("small_kernels_16_100");
    let l = run.ledger();
    assert_eq!(l.paid_jit(), Some(true));
    assert_eq!(a.paid_jit, Some(true));
    assert!(l.module_load_ns >= 80_000_000, "{}", l.module_load_ns);
    assert!(l.startup_ns() > l.module_load_ns);
    assert_eq!(a.startup_ns, l.startup_ns());
    let r2 = testkit::findings::with_id(&a, "R2");
    assert_eq!(r2.len(), 1, "{:?}", ids(&a));
    assert_eq!(r2[0].cost_ns, Some(l.module_load_ns));
    assert_eq!(
        r2[0].evidence.get("wall_without_startup"),
        Some(&Value::Ns(l.wall_ns - l.startup_ns()))
    );
    assert!(r2[0].proposal.text.contains("CUDA_CACHE_PATH"));
    assert!(r2[0].proposal.text.contains("CUDA_CACHE_MAXSIZE"));
    for warm in [
        "launch_storm_2000",
        "data_shapes_clean",
        "small_kernels_8_300",
    ] {
        let (run, a) = analyze(warm);
        assert_eq!(run.ledger().paid_jit(), Some(false), "{warm}");
        assert!(run.ledger().startup_ns() >= 100_000_000, "{warm}");
        assert!(!ids(&a).contains(&"R2"), "{warm}: {:?}", ids(&a));
    }
}

/// Without the sources no host loop is known, yet the runtime's
/// per-construct work is the program's: launch_storm's constructs are
/// reported as one runtime-bound program, with their lines, costing what
/// the two loops' R1 cost with the sources.
#[test]
fn a_runtime_bound_program_is_reported_without_its_sources() {
    let run = testkit::fixtures::load(DIR, "launch_storm_2000");
    let none = SourceSet::load_with(&run, &[], &[], &|p| {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            p.display().to_string(),
        ))
    });
    let a = analysis::analyze(&run, &none, &Options::default());
    let r1 = testkit::findings::with_id(&a, "R1");
    assert_eq!(r1.len(), 1, "{:?}", ids(&a));
    assert_eq!(a.findings[0].id, "R1", "{:?}", ids(&a));
    assert!(
        r1[0].title.starts_with("runtime-bound program"),
        "{}",
        r1[0].title
    );
    let lines: Vec<Option<u32>> = r1[0].locations.iter().map(|l| l.line).collect();
    assert_eq!(lines, [Some(95), Some(87)]);
    let (_, with) = analyze("launch_storm_2000");
    let loops: u64 = testkit::findings::with_id(&with, "R1")
        .iter()
        .filter_map(|f| f.cost_ns)
        .sum();
    assert_eq!(r1[0].cost_ns, Some(loops));
}
