//! The coherence check on an NVIDIA H200: traces of the coherence samples
//! recorded there with `accprof run --check coherence`
//! (tests/fixtures/h200-coherence/record.sh; the README there says what
//! each run printed), read back with the binaries that ran. Each defect is
//! found at its line with the patch that the sample's `fixed` variant
//! carries (which printed `reference: match` there), and the correct
//! programs get no finding.

mod support;

use accprof_trace::CoherenceKind;

const GPU: &str = "h200-coherence";

/// `accprof ARGS` on fixture `name`; stdout, its wrapped lines read as
/// one.
fn on(name: &str, args: &[&str]) -> String {
    support::on_fixture(GPU, name, args)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn analyze(name: &str) -> String {
    on(name, &["analyze"])
}

/// The rules of the coherence findings, in the order listed.
fn coherence_rules(text: &str) -> Vec<&str> {
    text.split(" #")
        .filter_map(|f| f.split_whitespace().nth(1))
        .filter(|r| r.starts_with('C'))
        .collect()
}

fn accesses(name: &str, kind: CoherenceKind) -> usize {
    let run = accprof_analyzer::testkit::fixtures::load(GPU, name);
    run.host_accesses()
        .iter()
        .filter(|a| a.kind == kind)
        .count()
}

/// The norm read on the host without `update self`, in C and in Fortran:
/// C1 at the norm loop, first of all findings, naming the construct that
/// wrote u; the patch is the directive the `fixed` variant has, where it
/// has it, and the fixed run takes no stale read.
#[test]
fn a_norm_of_stale_data_is_c1_at_the_norm_loop_with_the_update_that_fixes_it() {
    let c = analyze("coherence_norm_bad");
    assert!(
        c.contains("#1 C1 stale host read of u at coherence_norm.c:98: the device copy is newer (written by the compute construct at coherence_norm.c:92)"),
        "{c}"
    );
    assert!(c.contains("#pragma acc update self(u[0:n])"), "{c}");
    let f = analyze("coherence_norm_f90_bad");
    assert!(
        f.contains("#1 C1 stale host read of u at coherence_norm.f90:85: the device copy is newer (written by the compute construct at coherence_norm.f90:72)"),
        "{f}"
    );
    // The fixed variant updates u inside the `if (mod(s, every) == 0)` that
    // holds the norm loop, before it; the patch puts the same directive
    // before the loop, after the variant's.
    let patch = on("coherence_norm_f90_bad", &["analyze", "--patch"]);
    assert!(
        patch.contains("!$acc update self(u) end if total = 0 + !$acc update self(u) do j = 1, ny"),
        "{patch}"
    );
    assert!(accesses("coherence_norm_f90_bad", CoherenceKind::StaleRead) > 0);
    assert_eq!(
        accesses("coherence_norm_f90_fixed", CoherenceKind::StaleRead),
        0
    );
    assert!(coherence_rules(&analyze("coherence_norm_f90_fixed")).is_empty());
}

/// The host heats one point of u after the `update self`, and the stencil
/// then runs on the device copy: C2 at the write, naming the construct
/// that used the old copy, with `update device` after the write.
#[test]
fn a_host_write_the_device_never_gets_is_c2_with_update_device_after_it() {
    let s = analyze("lost_write_bad");
    assert!(
        s.contains("#1 C2 lost host write of u at lost_write.c:131: the compute construct at lost_write.c:118 used the device copy"),
        "{s}"
    );
    let patch = on("lost_write_bad", &["analyze", "--patch"]);
    assert!(
        patch.contains("u[src] += heat; // the host write + #pragma acc update device(u[0:n])"),
        "{patch}"
    );
    assert_eq!(accesses("lost_write_fixed", CoherenceKind::LostWrite), 0);
    assert!(coherence_rules(&analyze("lost_write_fixed")).is_empty());
}

/// `update self` every step, read every 10th: 90 of 100 downloads unread,
/// and the guard of the reads as the update's `if`.
#[test]
fn downloads_read_every_tenth_step_are_c3_with_the_readers_guard() {
    let s = analyze("unread_download_bad");
    assert!(
        s.contains(
            "C3 90 of 100 downloads of u at unread_download.c:122 were not read by the host"
        ),
        "{s}"
    );
    assert!(
        s.contains("#pragma acc update self(u[0:n]) if(s % every == 0)"),
        "{s}"
    );
    assert_eq!(
        accesses("unread_download_bad", CoherenceKind::UnreadDownload),
        90
    );
    assert_eq!(
        accesses("unread_download_fixed", CoherenceKind::UnreadDownload),
        0
    );
}

/// A small array sharing its first and last pages with other host data
/// the program reads and writes meanwhile (lines 132-134): only the real
/// stale read of the array (line 139) is reported.
#[test]
fn data_sharing_a_page_with_a_stale_array_is_not_reported() {
    let s = analyze("shared_page_bad");
    assert_eq!(coherence_rules(&s), ["C1"], "{s}");
    assert!(
        s.contains("#1 C1 stale host read of a at shared_page.c:139:"),
        "{s}"
    );
    let run = accprof_analyzer::testkit::fixtures::load(GPU, "shared_page_bad");
    assert_eq!(run.host_accesses().len(), 1, "{:?}", run.host_accesses());
}

/// A program that takes and handles SIGSEGVs of its own (before the first
/// construct and inside its data region) runs as it does bare (the README
/// has both outputs): nothing is reported.
#[test]
fn a_programs_own_segfault_handling_is_left_alone() {
    let s = analyze("own_handler");
    assert!(coherence_rules(&s).is_empty(), "{s}");
    let run = accprof_analyzer::testkit::fixtures::load(GPU, "own_handler");
    assert!(run.host_accesses().is_empty());
}

/// Two host threads, each with its own data region; thread 1 leaves out
/// its `update self`: C1 on that thread only, at its norm loop.
#[test]
fn a_stale_read_on_one_of_two_threads_is_that_threads() {
    let s = analyze("coherence_threads_omit");
    assert_eq!(coherence_rules(&s), ["C1"], "{s}");
    assert!(
        s.contains("#1 C1 stale host read of y at coherence_threads.c:122: the device copy is newer (written by the compute construct at coherence_threads.c:114)"),
        "{s}"
    );
    let run = accprof_analyzer::testkit::fixtures::load(GPU, "coherence_threads_omit");
    let threads: std::collections::BTreeSet<u32> =
        run.host_accesses().iter().map(|a| a.thread).collect();
    assert_eq!(threads.len(), 1, "{threads:?}");
    // Not the main thread (the process's id), which ran no norm.
    assert!(!threads.contains(&run.process.header.pid), "{threads:?}");
}

/// The halo exchange through the host: with the boundary rows brought back
/// first (mpi_halo) nothing is reported on either rank; without (the bad
/// mpi_halo_stale), each rank's MPI_Send of a stale row is C1 named with
/// the call.
#[test]
fn an_mpi_send_of_a_stale_row_is_c1_named_with_the_call() {
    for r in 0..2 {
        let s = analyze(&format!("mpi_halo_np2.r{r}"));
        assert!(coherence_rules(&s).is_empty(), "rank {r}: {s}");
    }
    let r0 = analyze("mpi_halo_stale_np2.r0");
    assert!(
        r0.contains("#1 C1 stale host read of u by MPI_Send at mpi_halo_stale.c:188:"),
        "{r0}"
    );
    let r1 = analyze("mpi_halo_stale_np2.r1");
    assert!(
        r1.contains("#1 C1 stale host read of u by MPI_Send at mpi_halo_stale.c:187:"),
        "{r1}"
    );
}

/// The exports carry the accesses the model holds, one row each, the
/// array named as the findings name it (GCC's runtime names none: the
/// statement that read names it).
#[test]
fn the_coherence_table_exports_every_access_named_as_the_finding_names_it() {
    let csv = support::on_fixture(
        GPU,
        "coherence_norm_bad",
        &["export", "--format", "csv", "--what", "coherence"],
    );
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(
        rows.len(),
        accesses("coherence_norm_bad", CoherenceKind::StaleRead),
        "{csv}"
    );
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!((r[2], r[5]), ("stale_read", "u"), "{csv}");
    }
}

/// Every trace record.sh records, by name.
const RECORDED: [&str; 14] = [
    "coherence_norm_bad",
    "coherence_norm_f90_bad",
    "coherence_norm_f90_fixed",
    "lost_write_bad",
    "lost_write_fixed",
    "unread_download_bad",
    "unread_download_fixed",
    "shared_page_bad",
    "own_handler",
    "coherence_threads_omit",
    "mpi_halo_np2.r0",
    "mpi_halo_np2.r1",
    "mpi_halo_stale_np2.r0",
    "mpi_halo_stale_np2.r1",
];

/// The check's own reads of device copies are not the program's
/// transfers, and the report says the check ran and what it watched.
/// Traces of format 1.5 were recorded before the collector told the
/// check's reads apart: in them those reads stand as the program's (an
/// "(unattributed)" block of 2 copyouts, and copyouts inside the
/// constructs they followed), and nothing in such a trace tells them
/// from the runtime's (the same driver call, outside or inside the
/// program's constructs), so they stay until record.sh records the
/// traces again; the state line then says what the old trace allows.
#[test]
fn reports_of_checked_runs_hold_none_of_the_checks_own_copies_and_say_what_it_watched() {
    let dir = accprof_analyzer::testkit::fixtures::dir(GPU);
    for name in RECORDED {
        let path = dir.join(format!("{name}.trace"));
        let version = accprof_trace::read_file(&path)
            .expect("trace reads")
            .version;
        let out = std::process::Command::new(support::accprof())
            .arg("report")
            .arg("--symbols")
            .arg(dir.join("bin"))
            .arg(&path)
            .env("ACCPROF_SYMBOLS_ONLY", "1")
            .output()
            .expect("report runs");
        assert!(out.status.success(), "{name}");
        let report = String::from_utf8_lossy(&out.stdout);
        let found = accprof_analyzer::testkit::fixtures::load(GPU, name)
            .host_accesses()
            .len();
        if version >= (1, 6) {
            assert!(!report.contains("(unattributed)"), "{name}: {report}");
            assert!(
                report.contains("coherence check: on, ") && report.contains(" watched ("),
                "{name}: {report}"
            );
        } else {
            assert!(report.contains("(unattributed)"), "{name}: {report}");
            let said = if found > 0 {
                format!("coherence check: on, {found} host access")
            } else {
                "coherence check: not known (a trace before format 1.6 does not say".to_string()
            };
            assert!(report.contains(&said), "{name}: {report}");
        }
    }
}
