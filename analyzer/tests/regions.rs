//! Proposals around data regions the program already has: an enclosing
//! `data` region gets the clauses it lacks instead of a second region
//! around the same loop. Runs built by hand as GCC 12's libgomp and CUPTI
//! record the samples on a GPU; sources from samples/; patches are golden
//! files in tests/golden (rewrite with
//! `ACCPROF_BLESS=1 cargo test -p accprof-analyzer --test regions`).

use std::path::Path;

use accprof_analyzer::analysis;
use accprof_analyzer::findings::{Analysis, Category};
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::testkit;
use accprof_analyzer::testkit::findings::{patch_text, with_id};
use accprof_analyzer::testkit::runs::RunBuilder;
use accprof_analyzer::Run;
use accprof_trace::HashMode;

fn analyze(run: &Run) -> (SourceSet, Analysis) {
    let src = SourceSet::load(run, &[testkit::fixtures::samples()]);
    let a = analysis::analyze(run, &src, &Options::default());
    (src, a)
}

fn golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    testkit::golden::check(&path, got, "cargo test -p accprof-analyzer --test regions");
}

/// partial_region: the region at line 102 holds u and unew; the construct
/// at line 104 uploads q on every step.
fn partial_region(steps: usize) -> Run {
    let mut b = RunBuilder::new(HashMode::Sampled);
    let site = b.site("partial_region.c", 104);
    let q = b.buf(8 << 20, 7);
    for _ in 0..steps {
        b.gcc_compute(site, &[q], 400_000, 4096, &[]);
    }
    b.build()
}

#[test]
fn an_existing_region_gets_the_missing_copyin() {
    let run = partial_region(20);
    let (src, a) = analyze(&run);
    let d6 = with_id(&a, "D6");
    assert_eq!(d6.len(), 1, "{:#?}", a.findings);
    let f = d6[0];
    assert_eq!(f.locations[0].role, "host loop");
    assert_eq!(f.locations[0].line, Some(103));
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc data copy(u[0:n], unew[0:n]) copyin(q[0:n])")
    );
    assert!(
        f.proposal
            .text
            .contains("add `copyin(q[0:n])` to the `data` region at line 102"),
        "{}",
        f.proposal.text
    );
    // 20 uploads of q, 19 avoidable.
    assert_eq!(f.evidence.count("avoidable_transfers"), Some(19));
    let p = patch_text(&a, &src);
    // No second region: the existing directive changes, nothing is inserted.
    assert_eq!(p.matches("\n+#pragma acc data").count(), 1, "{p}");
    assert_eq!(p.matches("\n-#pragma acc data").count(), 1, "{p}");
    golden("partial_region.patch", &p);
    // Besides D6, only D1 (the same q sent again unchanged) speaks of data
    // movement, and it proposes no region of its own.
    for f in a
        .findings
        .iter()
        .filter(|f| f.category == Category::DataMovement && f.id != "D6")
    {
        assert_eq!(f.id, "D1", "{}", f.title);
        assert!(f
            .proposal
            .edits
            .iter()
            .all(|e| !matches!(e, accprof_analyzer::patch::Edit::InsertBefore { .. })));
    }
}

/// cond_update: `update device(src[0:n])` on every step; the host rewrote
/// src (new hash) on steps 0, 4, 8, ...
fn cond_update(steps: u64, every: u64) -> Run {
    use accprof_analyzer::ConstructClass;
    let mut b = RunBuilder::new(HashMode::Full);
    let update = b.site("cond_update.c", 118);
    let compute = b.site("cond_update.c", 119);
    let mut src = b.buf(8 << 20, 1);
    for step in 0..steps {
        if step % every == 0 {
            src.hash = 100 + step;
        }
        let c = b.open(ConstructClass::Update, update, None);
        b.copy(c, accprof_trace::CopyKind::HostToDevice, src, 600_000);
        b.close(c);
        b.gcc_compute(compute, &[], 400_000, 4096, &[]);
    }
    b.build()
}

#[test]
fn an_update_repeated_with_the_same_bytes_gets_the_writes_condition() {
    let run = cond_update(20, 4);
    let (src, a) = analyze(&run);
    let d1 = with_id(&a, "D1");
    assert_eq!(d1.len(), 1, "{:#?}", a.findings);
    let f = d1[0];
    // Named from the clause text, not "a buffer of 8.00 MiB".
    assert_eq!(
        f.title,
        "duplicate upload: src sent again unchanged at cond_update.c:118"
    );
    assert_eq!(f.evidence.count("duplicates"), Some(15));
    assert_eq!(f.evidence.count("uploads_at_update"), Some(20));
    assert!(
        f.proposal
            .text
            .starts_with("15 of the 20 updates were redundant."),
        "{}",
        f.proposal.text
    );
    assert!(
        f.proposal
            .text
            .contains("only when `step % every == 0` (the `if` at line 113, writes at line 116)"),
        "{}",
        f.proposal.text
    );
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc update device(src[0:n]) if(step % every == 0)")
    );
    golden("cond_update.patch", &patch_text(&a, &src));
}
