//! The coherence check on every mapping kind the OpenACC runtime makes,
//! recorded on an NVIDIA H200 (tests/fixtures/h200-coherence2/record.sh):
//! static globals with `data create` + `update device`, `enter data
//! create` of malloc'd arrays, `declare create` globals, the API routines
//! (acc_malloc + acc_map_data, acc_create, acc_copyin), Fortran module
//! arrays, `std::vector` data, small arrays staged through the runtime's
//! buffer, and NPB SP class W. Each defect is found and each `fixed`
//! variant reports nothing; the check's exit note (kept in NAME.log) says
//! what it watched. A test whose recording the directory does not hold
//! says so and passes.

mod support;

use accprof_trace::CoherenceKind;

const GPU: &str = "h200-coherence2";

/// Whether the recording of `name` is here; says why not when it is
/// absent (the directory holds only the recordings kept).
fn recorded(name: &str) -> bool {
    let dir = accprof_analyzer::testkit::fixtures::dir(GPU);
    let here = dir.join(format!("{name}.trace")).is_file();
    if !here {
        eprintln!(
            "skipped: {} holds no {name}.trace (run its record.sh on a GPU machine and copy the traces, logs and bin/ there)",
            dir.display()
        );
    }
    here
}

fn analyze(name: &str) -> String {
    support::on_fixture(GPU, name, &["analyze"])
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
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

/// The check's exit note in NAME.log.
fn note(name: &str) -> String {
    let path = accprof_analyzer::testkit::fixtures::dir(GPU).join(format!("{name}.log"));
    let log = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    log.lines()
        .find(|l| l.contains("coherence check:"))
        .unwrap_or_else(|| panic!("{}: no exit note of the check", path.display()))
        .to_string()
}

/// How many host ranges the note says were watched.
fn watched(name: &str) -> u64 {
    let n = note(name);
    let Some(rest) = n.split("coherence check: watched ").nth(1) else {
        panic!("{name}: the note names no watched ranges: {n}");
    };
    rest.split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("{name}: {n}"))
}

/// A correct run: no C1 or C2, no stale read or lost write recorded, and
/// something watched.
fn clean(name: &str) {
    let s = analyze(name);
    let rules = coherence_rules(&s);
    assert!(
        !rules.iter().any(|r| *r == "C1" || *r == "C2"),
        "{name}: {s}"
    );
    assert_eq!(accesses(name, CoherenceKind::StaleRead), 0, "{name}");
    assert_eq!(accesses(name, CoherenceKind::LostWrite), 0, "{name}");
    assert!(watched(name) > 0, "{name}: {}", note(name));
}

/// `data create(u, un)` of static globals (no copy), `update device`,
/// compute under `data present`: u is watched from the update's copy, and
/// the checksum read after the loop without `update self` is C1.
#[test]
fn globals_made_by_data_create_and_filled_by_update_are_watched() {
    if !recorded("globals_bad") {
        return;
    }
    let s = analyze("globals_bad");
    assert!(
        s.contains("C1 stale host read of u at coherence_globals.c:108"),
        "{s}"
    );
    assert!(s.contains("#pragma acc update self(u"), "{s}");
    clean("globals_fixed");
    assert!(watched("globals_fixed") >= 2, "{}", note("globals_fixed"));
}

/// Arrays only `data create` maps and the device alone fills (rhs,
/// forcing, square: no copy ever names their host addresses): the
/// runtime's mapping table names all four arrays of the block, so the
/// host's read of rhs after the loop without `update self` is C1 naming
/// rhs, with the update as its patch; the fixed variant reports nothing.
#[test]
fn arrays_no_copy_names_are_watched_through_the_mapping_table() {
    let s = analyze("create_bad");
    assert!(
        s.contains("C1 stale host read of rhs at coherence_create.c:98"),
        "{s}"
    );
    assert!(s.contains("#pragma acc update self(rhs"), "{s}");
    assert!(accesses("create_bad", CoherenceKind::StaleRead) > 0);
    for name in ["create_bad", "create_fixed"] {
        let n = note(name);
        assert!(n.contains("arrays named by the runtime"), "{name}: {n}");
        assert!(watched(name) >= 4, "{name}: {n}");
    }
    clean("create_fixed");
}

/// `enter data create` of malloc'd arrays: the host write after `update
/// self` without `update device` is C2 at the write.
#[test]
fn a_lost_write_to_an_entered_array_is_c2() {
    if !recorded("enter_bad") {
        return;
    }
    let s = analyze("enter_bad");
    assert!(
        s.contains("C2 lost host write of u at coherence_enter.c:97"),
        "{s}"
    );
    clean("enter_fixed");
}

/// `declare create` globals: their device copies are globals of the
/// loaded code, found by the updates' copies; 90 of 100 downloads unread.
#[test]
fn declared_globals_are_watched_and_unread_downloads_counted() {
    if !recorded("declare_bad") {
        return;
    }
    let s = analyze("declare_bad");
    assert!(
        s.contains("C3 90 of 100 downloads of g at coherence_declare.c:95"),
        "{s}"
    );
    assert_eq!(accesses("declare_bad", CoherenceKind::UnreadDownload), 90);
    assert_eq!(accesses("declare_fixed", CoherenceKind::UnreadDownload), 0);
    clean("declare_fixed");
}

/// acc_malloc + acc_map_data, acc_create, acc_copyin: each mapping is
/// watched, the checksum read without acc_update_self is a stale read.
#[test]
fn arrays_mapped_by_the_api_routines_are_watched() {
    if !recorded("api_map_bad") {
        return;
    }
    for routine in ["map", "create", "copyin"] {
        let bad = format!("api_{routine}_bad");
        let s = analyze(&bad);
        assert!(coherence_rules(&s).contains(&"C1"), "{bad}: {s}");
        assert!(s.contains("at coherence_api.c:122"), "{bad}: {s}");
        assert!(accesses(&bad, CoherenceKind::StaleRead) > 0, "{bad}");
        clean(&format!("api_{routine}_fixed"));
    }
}

/// Fortran module arrays with `enter data copyin` and a partial `update
/// host(p(1:10))`: the stale p(n/2) that `print` reads is found (the read
/// is inside libgfortran).
#[test]
fn module_arrays_after_a_partial_update_are_watched() {
    if !recorded("module_f90_bad") {
        return;
    }
    assert!(accesses("module_f90_bad", CoherenceKind::StaleRead) > 0);
    assert!(coherence_rules(&analyze("module_f90_bad")).contains(&"C1"));
    clean("module_f90_fixed");
}

/// A std::vector's data() mapped by `enter data create`: std::accumulate
/// of the stale vector is found.
#[test]
fn vector_data_entered_by_create_is_watched() {
    if !recorded("vector_enter_bad") {
        return;
    }
    let s = analyze("vector_enter_bad");
    assert!(coherence_rules(&s).contains(&"C1"), "{s}");
    assert!(accesses("vector_enter_bad", CoherenceKind::StaleRead) > 0);
    clean("vector_enter_fixed");
}

/// u, forcing and norm staged through libgomp's buffer: the note counts
/// the staging copy and the arrays of it watched (found from libgomp's
/// copies into the buffer, or norm from its update every step).
#[test]
fn staged_small_arrays_are_counted_and_watched_from_their_own_copy() {
    if !recorded("small_arrays") {
        return;
    }
    let n = note("small_arrays");
    assert!(n.contains("from the runtime's staging buffer"), "{n}");
    let learned: u64 = n
        .split("staging buffer")
        .nth(1)
        .and_then(|t| t.split("): ").nth(1))
        .and_then(|t| t.split_whitespace().next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("{n}"));
    assert!(learned >= 1, "{n}");
    clean("small_arrays");
}

/// NPB SP class W: the ten arrays of its data region (and more) are
/// watched, and nothing is reported.
#[test]
fn npb_sp_keeps_its_arrays_watched_and_clean() {
    if !recorded("sp_W") {
        return;
    }
    let run = accprof_analyzer::testkit::fixtures::load(GPU, "sp_W");
    assert!(
        run.process.header.executable.ends_with("sp.W.x"),
        "{}",
        run.process.header.executable
    );
    assert!(watched("sp_W") >= 10, "{}", note("sp_W"));
    clean("sp_W");
}
