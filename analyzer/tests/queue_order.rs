//! S4 (queues not ordered as the program expects) on the traces recorded on
//! an H100 (cli/tests/fixtures/h100): samples/default_async.c, built by GCC
//! 12, whose `set default_async` directives GCC ignores, so the sum of line
//! 83 (`async(1) wait(2)`) races the squares of lines 77 and 80 on
//! acc_async_noval. One run lost the race (its check failed), one won it;
//! both carry the hazard. No other fixture has it.

use accprof_analyzer::analysis;
use accprof_analyzer::findings::{Analysis, Finding};
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::testkit::findings::places;
use accprof_analyzer::testkit::fixtures;
use accprof_analyzer::Run;

fn load(dir: &str, name: &str) -> Run {
    let run = fixtures::load(dir, name);
    assert!(
        run.process.notes.is_empty(),
        "{name}: {:?}",
        run.process.notes
    );
    run
}

fn analyze(dir: &str, name: &str) -> (Run, SourceSet, Analysis) {
    let run = load(dir, name);
    let src = SourceSet::load(&run, &[fixtures::samples()]);
    let a = analysis::analyze(&run, &src, &Options::default());
    (run, src, a)
}

fn s4(a: &Analysis) -> Vec<&Finding> {
    a.findings.iter().filter(|f| f.id == "S4").collect()
}

/// Per round, straight from the kernel records: did the kernel of line 83
/// start on the device before the kernel of line 80 (the square launched
/// just before it on another queue) had ended?
fn rounds_unordered(run: &Run) -> (usize, usize) {
    let line_of = |k: &accprof_analyzer::Kernel| {
        k.construct
            .and_then(|c| run.site(run.construct(run.top_level(c)).site).line)
    };
    let by_line = |line: u32| {
        let mut v: Vec<(u64, u64)> = run
            .kernels()
            .map(|(_, x)| x)
            .filter(|k| line_of(k) == Some(line))
            .map(|k| (k.start_ns, k.end_ns))
            .collect();
        v.sort_unstable();
        v
    };
    let (squares, sums) = (by_line(80), by_line(83));
    assert_eq!(squares.len(), sums.len(), "one of each per round");
    let early = squares
        .iter()
        .zip(&sums)
        .filter(|((_, square_end), (sum_start, _))| sum_start < square_end)
        .count();
    (early, sums.len())
}

fn check_hazard(name: &str) -> (Run, u64) {
    let (run, src, a) = analyze("h100", name);
    let found = s4(&a);
    assert_eq!(
        found.len(),
        1,
        "{name}: one S4 for the one waiting construct"
    );
    let f = found[0];
    assert_eq!(
        places(f),
        [
            "construct waiting for queue 2 default_async.c:83",
            "unordered kernel on acc_async_noval (-1) default_async.c:77",
            "unordered kernel on acc_async_noval (-1) default_async.c:80",
            "set default_async (ignored by GCC) default_async.c:76",
            "set default_async (ignored by GCC) default_async.c:79",
        ]
    );
    // One reach per round.
    let (early, rounds) = rounds_unordered(&run);
    assert_eq!(f.evidence.count("reaches"), Some(rounds as u64));
    assert_eq!(
        f.evidence.count("reaches_unordered_on_device"),
        Some(early as u64)
    );
    let text = f.evidence.text.join("\n");
    assert!(text.contains("GCC ignores `set default_async`"), "{text}");
    assert!(
        text.contains("without a queue at lines 77, 80 go to acc_async_noval"),
        "{text}"
    );
    assert!(f.cost_ns.unwrap_or(0) > 0, "the kernels' device time");
    // It points at the kernels whose time it counts, at the constructs of
    // line 83 (one per round) and at those left unordered before them; the
    // `set` directives GCC ignored are places of the source, not sites.
    let counted: u64 = f
        .subjects
        .kernels
        .iter()
        .map(|&k| run.kernel(k).device_ns())
        .sum();
    assert_eq!(Some(counted), f.cost_ns);
    let at_line = |line: u32| {
        f.subjects
            .constructs
            .iter()
            .map(|&c| run.construct(c))
            .filter(|c| c.parent.is_none() && run.site(c.site).line == Some(line))
            .count()
    };
    assert_eq!(at_line(83), rounds);
    assert!(at_line(77) > 0 && at_line(80) > 0);
    assert!(f.locations[..3].iter().all(|l| l.site.is_some()));
    assert!(f.locations[3..].iter().all(|l| l.site.is_none()));

    // The patch names the queues: line 77 gets queue 1, line 80 queue 2;
    // line 83 and the set directives stay.
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc parallel loop async(1)\n#pragma acc parallel loop async(2)")
    );
    let patched =
        accprof_analyzer::patch::render(&src, &f.proposal.edits).expect("the patch applies");
    let (_, text) = &patched.files[0];
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[76], "#pragma acc parallel loop async(1)");
    assert_eq!(lines[79], "#pragma acc parallel loop async(2)");
    assert_eq!(lines[82], "#pragma acc parallel loop async(1) wait(2)");
    assert_eq!(lines[75], "#pragma acc set default_async(1)");
    assert!(f.proposal.patch.as_deref().is_some_and(
        |p| p.contains("-#pragma acc parallel loop async\n+#pragma acc parallel loop async(2)")
    ));
    (run, early as u64)
}

#[test]
fn failing_run_shows_the_race() {
    let (run, early) = check_hazard("default_async_fail");
    assert!(early > 0, "the run whose check failed ran line 83 early");
    // Round 1: the sum started before the second square had even started.
    let (_, _, a) = analyze("h100", "default_async_fail");
    let f = s4(&a)[0];
    assert!(f.evidence.count("reaches_inverted_on_device").unwrap_or(0) > 0);
    let text = f.evidence.text.join("\n");
    assert!(
        text.contains(&format!(
            "In {early} of {} reaches the kernel of line 83 started before the kernel of line 80 had ended",
            run.kernels().len() / 3
        )),
        "{text}"
    );
}

#[test]
fn passing_run_still_has_the_hazard() {
    let (_, early) = check_hazard("default_async_pass");
    assert_eq!(early, 0, "the run whose check passed kept the order");
    let (_, _, a) = analyze("h100", "default_async_pass");
    let text = s4(&a)[0].evidence.text.join("\n");
    assert!(
        text.contains("did the kernel of line 83 start before the kernel of line 80"),
        "{text}"
    );
}

#[test]
fn no_other_fixture_has_it() {
    let h200 = [
        "heat2d_data",
        "heat2d_naive",
        "jacobi_f90",
        "laplace_bad_c",
        "laplace_bad_f90",
        "laplace_good_c",
        "laplace_good_f90",
        "launch_storm",
    ];
    for name in h200 {
        let (_, _, a) = analyze("h200", name);
        assert!(s4(&a).is_empty(), "{name}: {:?}", s4(&a));
    }
    let (_, _, a) = analyze("h100", "device_fault");
    assert!(s4(&a).is_empty(), "device_fault: {:?}", s4(&a));
}

#[test]
fn needs_the_source_to_read_the_wait() {
    let run = load("h100", "default_async_fail");
    let a = analysis::analyze(&run, &SourceSet::default(), &Options::default());
    assert!(s4(&a).is_empty());
}
