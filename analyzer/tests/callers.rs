//! Repetition that comes from a caller's loop: the construct sits in a
//! function without a host loop, the call chain the trace recorded leads
//! to the loop that repeats it, and D6 proposes the `data` region there,
//! with `present` in the construct: one patch across functions and files.
//!
//! The runs are built by hand the way GCC 12's libgomp and CUPTI record
//! the samples on a GPU (one upload per `copyin` item and one download per
//! `copyout` item on every call), with the call chains the collector
//! records; the sources are the repository's samples/. Patches are golden
//! files in tests/golden (rewrite with
//! `ACCPROF_BLESS=1 cargo test -p accprof-analyzer --test callers`).

use std::path::Path;

use accprof_analyzer::analysis;
use accprof_analyzer::findings::{Analysis, Finding};
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::testkit;
use accprof_analyzer::testkit::findings::{patch_text, places};
use accprof_analyzer::testkit::runs::RunBuilder;
use accprof_analyzer::Run;
use accprof_trace::HashMode;

/// One compute site, reached `steps` times through each of `calls` (the
/// arrays it copies in, then those it copies out), with `callers` above it.
fn run(
    file: &str,
    line: u32,
    callers: &[(&str, &str, u32)],
    steps: usize,
    calls: &[(&[usize], &[usize])],
) -> Run {
    let mut b = RunBuilder::new(HashMode::Off);
    let site = b.site(file, line);
    b.callers(site, callers);
    let bufs = [b.buf(8 << 20, 0), b.buf(8 << 20, 0)];
    for _ in 0..steps {
        for (ins, outs) in calls {
            let ins: Vec<_> = ins.iter().map(|&i| bufs[i]).collect();
            let outs: Vec<_> = outs.iter().map(|&i| bufs[i]).collect();
            b.gcc_compute(site, &ins, 400_000, 4096, &outs);
        }
    }
    b.build()
}

fn analyze(run: &Run) -> (SourceSet, Analysis) {
    let src = SourceSet::load(run, &[testkit::fixtures::samples()]);
    let a = analysis::analyze(run, &src, &Options::default());
    (src, a)
}

fn d6(a: &Analysis) -> &Finding {
    let d6: Vec<&Finding> = a.findings.iter().filter(|f| f.id == "D6").collect();
    assert_eq!(d6.len(), 1, "{:#?}", a.findings);
    d6[0]
}

fn golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    testkit::golden::check(&path, got, "cargo test -p accprof-analyzer --test callers");
}

/// heat_step(u, unew) then heat_step(unew, u): buffer 0 in and 1 out, then
/// the other way round.
const SWAPPED: &[(&[usize], &[usize])] = &[(&[0], &[1]), (&[1], &[0])];

#[test]
fn caller_loop_c_region_goes_two_callers_up() {
    // heat_step's site, first reached through advance's first call.
    let run = run(
        "caller_loop.c",
        78,
        &[
            ("caller_loop.c", "advance", 93),
            ("caller_loop.c", "main", 135),
        ],
        10,
        SWAPPED,
    );
    let (src, a) = analyze(&run);
    let f = d6(&a);
    assert_eq!(
        places(f),
        ["host loop caller_loop.c:134", "construct caller_loop.c:78"]
    );
    assert!(
        f.title.contains("the `for` loop at caller_loop.c:134 in `main`, which calls `heat_step` through its callers"),
        "{}",
        f.title
    );
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc data copy(u[0:nx*ny], unew[0:nx*ny])")
    );
    assert_eq!(f.proposal.no_patch, None);
    // 40 transfers of which 36 are avoidable: one upload and one download
    // of each buffer stay.
    assert_eq!(f.evidence.count("avoidable_transfers"), Some(36));
    // 20 reaches, two per step (advance calls heat_step twice): 10 steps.
    assert_eq!(f.evidence.count("iterations"), Some(10));
    golden("caller_loop_c.patch", &patch_text(&a, &src));
}

#[test]
fn caller_files_patch_spans_both_files() {
    let run = run(
        "caller_files_step.c",
        19,
        &[("caller_files.c", "main", 111)],
        10,
        SWAPPED,
    );
    let (src, a) = analyze(&run);
    let f = d6(&a);
    assert_eq!(
        places(f),
        [
            "host loop caller_files.c:110",
            "construct caller_files_step.c:19"
        ]
    );
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc data copy(u[0:nx*ny], unew[0:nx*ny])")
    );
    let p = patch_text(&a, &src);
    assert!(
        p.contains("+++ b/samples/caller_files.c")
            && p.contains("+++ b/samples/caller_files_step.c"),
        "{p}"
    );
    golden("caller_files.patch", &p);
}

#[test]
fn caller_loop_f90_region_in_the_main_program() {
    let run = run(
        "caller_loop.f90",
        37,
        &[("caller_loop.f90", "caller_loop", 77)],
        10,
        SWAPPED,
    );
    let (src, a) = analyze(&run);
    let f = d6(&a);
    assert_eq!(
        places(f),
        [
            "host loop caller_loop.f90:76",
            "construct caller_loop.f90:37"
        ]
    );
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("!$acc data copy(u, unew)")
    );
    golden("caller_loop_f90.patch", &patch_text(&a, &src));
}

#[test]
fn one_role_per_array_keeps_the_clauses_apart() {
    // Only heat_step(u, unew), never the other way round: u only goes up,
    // unew only comes back.
    let run = run(
        "caller_files_step.c",
        19,
        &[("caller_files.c", "main", 111)],
        10,
        &[(&[0], &[1])],
    );
    let (_, a) = analyze(&run);
    assert_eq!(
        d6(&a).proposal.directive.as_deref(),
        Some("#pragma acc data copyin(u[0:nx*ny]) copyout(unew[0:nx*ny])")
    );
}

#[test]
fn without_callers_it_says_so() {
    let run = run("caller_files_step.c", 19, &[], 10, SWAPPED);
    let (_, a) = analyze(&run);
    let f = d6(&a);
    assert!(f.proposal.edits.is_empty());
    let why = f.proposal.no_patch.as_deref().unwrap_or("");
    assert!(
        why.contains("no host loop around caller_files_step.c:19 in `heat_step`")
            && why.contains("the trace holds no callers"),
        "{why}"
    );
    assert!(!why.contains("not read"), "{why}");
}

#[test]
fn a_caller_without_a_loop_is_named() {
    // Called from a line outside any loop.
    let run = run(
        "caller_files_step.c",
        19,
        &[("caller_files.c", "main", 105)],
        10,
        SWAPPED,
    );
    let (_, a) = analyze(&run);
    let why = d6(&a).proposal.no_patch.clone().unwrap_or_default();
    assert!(
        why.contains("its call at caller_files.c:105 was not found"),
        "{why}"
    );
}

#[test]
fn an_unread_source_is_the_only_not_read() {
    let run = run(
        "missing_kernels.c",
        19,
        &[("caller_files.c", "main", 111)],
        10,
        SWAPPED,
    );
    let (_, a) = analyze(&run);
    let why = d6(&a).proposal.no_patch.clone().unwrap_or_default();
    assert_eq!(why, "source missing_kernels.c not read");
}

#[test]
fn a_caller_whose_source_is_missing_is_named() {
    let run = run(
        "caller_files_step.c",
        19,
        &[("elsewhere/driver.c", "main", 40)],
        10,
        SWAPPED,
    );
    let (_, a) = analyze(&run);
    let why = d6(&a).proposal.no_patch.clone().unwrap_or_default();
    assert_eq!(
        why,
        "no host loop in `heat_step`; the loop would be in its caller `main` (elsewhere/driver.c:40), whose source was not read"
    );
}
