//! Findings on the traces recorded on an NVIDIA H100 of the samples whose
//! proposals must fit how real programs are built (cli/tests/fixtures/h100,
//! recorded with GCC 12's libgomp, CUPTI and the collector of trace format
//! 1.2: call chains above call sites, the collector's hashing time). The
//! binaries in cli/tests/fixtures/h100/bin give the source lines; the
//! sources are the repository's samples/.
//!
//! The patches are the golden files the hand-built runs of tests/callers.rs
//! and tests/regions.rs check too: the recorded run and the model of it
//! must propose the same change.

use std::path::Path;

use accprof_analyzer::analysis;
use accprof_analyzer::findings::{Analysis, Category, Finding};
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::testkit;
use accprof_analyzer::testkit::findings::{patch_text, places, with_id};
use accprof_analyzer::Run;

fn analyze(name: &str) -> (Run, SourceSet, Analysis) {
    let run = testkit::fixtures::load("h100", name);
    assert!(
        run.process.notes.is_empty(),
        "{name}: every site should have a line: {:?}",
        run.process.notes
    );
    let src = SourceSet::load(&run, &[testkit::fixtures::samples()]);
    let a = analysis::analyze(&run, &src, &Options::default());
    (run, src, a)
}

fn golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    testkit::golden::check(&path, got, "cargo test -p accprof-analyzer --test h100");
}

fn the_only_d6(a: &Analysis) -> &Finding {
    let d6 = with_id(a, "D6");
    assert_eq!(d6.len(), 1, "{:#?}", a.findings);
    d6[0]
}

#[test]
fn caller_loop_c() {
    let (run, src, a) = analyze("caller_loop");
    let f = the_only_d6(&a);
    // Heap arrays named from the construct's clauses (in its first
    // instance each clause item is one buffer).
    // 40 reaches of the construct, 2 per iteration of main's loop (advance
    // calls heat_step twice): 20 iterations, as the program ran.
    assert!(
        f.title
            .ends_with(": u, unew moved 40 times in 20 iterations"),
        "{}",
        f.title
    );
    assert_eq!(f.evidence.count("iterations"), Some(20));
    let said = f.evidence.text.join("\n");
    assert!(
        said.contains("reached 40 times (2 per iteration: the calls in the loop)"),
        "{said}"
    );
    assert!(said.contains("(1 up and 1 down per reach)"), "{said}");
    assert_eq!(
        places(f),
        ["host loop caller_loop.c:134", "construct caller_loop.c:78"]
    );
    // 20 iterations of main's loop, 2 calls each.
    let moved = run.totals().transfers;
    assert_eq!(f.evidence.count("upload_transfers"), Some(40));
    assert!(moved >= 80, "{moved}");
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc data copy(u[0:nx*ny], unew[0:nx*ny])")
    );
    golden("caller_loop_c.patch", &patch_text(&a, &src));
}

/// default_async 4096 10 1 ran 10 rounds, each entering and leaving the
/// `data` region of line 74 once: 10 iterations, one upload (a and b in
/// one block) and one download (c) per reach, not 20 "instances" with
/// none each.
#[test]
fn default_async_counts_rounds_not_region_entries_and_exits() {
    let (_, _, a) = analyze("default_async_fail");
    let f = the_only_d6(&a);
    assert_eq!(f.evidence.count("iterations"), Some(10));
    assert!(f.title.ends_with(" moved 10 times"), "{}", f.title);
    let said = f.evidence.text.join("\n");
    assert!(
        said.contains("default_async.c:74: reached 10 times; 10 uploads and 10 downloads"),
        "{said}"
    );
    assert!(said.contains("(1 up and 1 down per reach)"), "{said}");
}

/// On the run whose check failed, the race (S4) comes first; D6 there can
/// save nothing (every upload carries new host data, every download is
/// read by the host inside the loop) and ranks after every other finding.
#[test]
fn a_finding_that_saves_nothing_ranks_last() {
    let (_, _, a) = analyze("default_async_fail");
    let ids: Vec<&str> = a.findings.iter().map(|f| f.id).collect();
    assert_eq!(ids.first(), Some(&"S4"), "{ids:?}");
    let d6 = the_only_d6(&a);
    assert_eq!(d6.saving_ns, Some(0));
    let first_nothing = a
        .findings
        .iter()
        .position(|f| f.saving_ns == Some(0))
        .expect("D6 saves nothing");
    assert!(
        a.findings[first_nothing..]
            .iter()
            .all(|f| f.saving_ns == Some(0)),
        "{ids:?}"
    );
}

#[test]
fn caller_files_two_files() {
    let (_, src, a) = analyze("caller_files");
    let f = the_only_d6(&a);
    assert_eq!(
        places(f),
        [
            "host loop caller_files.c:110",
            "construct caller_files_step.c:19"
        ]
    );
    golden("caller_files.patch", &patch_text(&a, &src));
}

#[test]
fn caller_loop_f90() {
    let (_, src, a) = analyze("caller_loop_f90");
    let f = the_only_d6(&a);
    assert_eq!(
        places(f),
        [
            "host loop caller_loop.f90:76",
            "construct caller_loop.f90:37"
        ]
    );
    golden("caller_loop_f90.patch", &patch_text(&a, &src));
}

#[test]
fn partial_region_extends_the_region() {
    let (_, src, a) = analyze("partial_region");
    let f = the_only_d6(&a);
    assert_eq!(places(f)[0], "host loop partial_region.c:103");
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc data copy(u[0:n], unew[0:n]) copyin(q[0:n])")
    );
    golden("partial_region.patch", &patch_text(&a, &src));
}

#[test]
fn cond_update_with_full_hashes() {
    let (_, src, a) = analyze("cond_update_full");
    let d1 = with_id(&a, "D1");
    assert_eq!(d1.len(), 1, "{:#?}", a.findings);
    let f = d1[0];
    // Named from the update's clause, not "a buffer of 8.00 MiB".
    assert!(
        f.title
            .starts_with("duplicate upload: src sent again unchanged at ")
            && f.title.ends_with("cond_update.c:118"),
        "{}",
        f.title
    );
    // 40 steps, the source moved on steps 0, 10, 20 and 30.
    assert_eq!(f.evidence.count("uploads_at_update"), Some(40));
    assert_eq!(f.evidence.count("duplicates"), Some(36));
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc update device(src[0:n]) if(step % every == 0)")
    );
    golden("cond_update.patch", &patch_text(&a, &src));
}

#[test]
fn heat2d_data_has_no_data_movement_finding_and_hashing_is_not_idleness() {
    let (run, _, a) = analyze("heat2d_data_full");
    let moving: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.category == Category::DataMovement)
        .map(|f| &f.title)
        .collect();
    assert!(moving.is_empty(), "{moving:#?}");
    // Full hashing kept the host busy between constructs; S3 leaves that
    // time out.
    assert!(run.collector_time_recorded());
    let own = run.collector_ns();
    assert!(own > 0);
    for f in with_id(&a, "S3") {
        let excluded = f
            .evidence
            .fields
            .iter()
            .find(|x| x.name == "collector_time_excluded")
            .map(|x| format!("{:?}", x.value))
            .unwrap_or_default();
        assert!(!excluded.is_empty() && excluded != "Ns(0)", "{excluded}");
    }
}

fn bytes_field(f: &Finding, name: &str) -> u64 {
    match f
        .evidence
        .fields
        .iter()
        .find(|x| x.name == name)
        .map(|x| &x.value)
    {
        Some(accprof_analyzer::findings::Value::Bytes(b)) => *b,
        other => panic!("{}: {name} is {other:?}", f.title),
    }
}

/// The halo exchange staged through the host, recorded at 2 and 4 ranks
/// with the MPI calls wrapped: on every rank of mpi_halo_whole the `update
/// host` before the sends and the `update device` after the receives move
/// whole blocks where MPI used two rows of each (P1, with both byte
/// counts); mpi_halo, which updates only those rows, gets no P1.
#[test]
fn mpi_halo_whole_moves_whole_blocks_where_mpi_uses_two_rows() {
    for np in [2, 4] {
        for r in 0..np {
            let (run, _, a) = analyze(&format!("mpi_halo_whole_np{np}.r{r}"));
            assert!(!run.mpi_calls().is_empty(), "np {np} rank {r}");
            let p1 = with_id(&a, "P1");
            assert_eq!(p1.len(), 2, "np {np} rank {r}: {:#?}", a.findings);
            let mut dirs: Vec<String> = p1
                .iter()
                .map(|f| {
                    let (moved, used) = (
                        bytes_field(f, "bytes_moved"),
                        bytes_field(f, "bytes_mpi_used"),
                    );
                    assert!(
                        used > 0 && moved >= 50 * used,
                        "{}: {moved} moved, {used} used",
                        f.title
                    );
                    places(f)[0].clone()
                })
                .collect();
            dirs.sort();
            assert_eq!(
                dirs,
                ["update mpi_halo_whole.c:149", "update mpi_halo_whole.c:156"],
                "np {np} rank {r}"
            );
            let (run, _, good) = analyze(&format!("mpi_halo_np{np}.r{r}"));
            assert!(!run.mpi_calls().is_empty());
            assert!(
                with_id(&good, "P1").is_empty(),
                "np {np} rank {r}: {:#?}",
                good.findings
            );
        }
    }
}
