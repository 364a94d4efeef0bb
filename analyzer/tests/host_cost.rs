//! Costs and savings from the CUDA driver's timings (the time ledger) on
//! the traces recorded with driver spans (cli/tests/fixtures/h200-ledger),
//! and the device-time costs of traces without them
//! (cli/tests/fixtures/h100) left as they were.

use accprof_analyzer::analysis;
use accprof_analyzer::findings::{Analysis, Finding, Value};
use accprof_analyzer::ledger::Part;
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::testkit;
use accprof_analyzer::Run;

fn analyze(gpu: &str, name: &str) -> (Run, Analysis) {
    let run = testkit::fixtures::load(gpu, name);
    let src = SourceSet::load(&run, &[testkit::fixtures::samples()]);
    let a = analysis::analyze(&run, &src, &Options::default());
    (run, a)
}

fn with_id<'a>(a: &'a Analysis, id: &str) -> Vec<&'a Finding> {
    a.findings.iter().filter(|f| f.id == id).collect()
}

fn said(f: &Finding) -> String {
    f.evidence.text.join("\n")
}

/// The finding's construct site.
fn construct_site(f: &Finding) -> accprof_analyzer::model::SiteId {
    f.locations
        .iter()
        .find(|l| l.role == "construct")
        .and_then(|l| l.site)
        .unwrap_or_else(|| panic!("{}: no construct site", f.id))
}

/// small_kernels allocates a block per construct at lines 70 and 90: A1
/// costs the driver's allocation and free calls there, the site's
/// allocation time per call times the allocations and frees, and saves all
/// but one pair.
#[test]
fn a1_costs_the_allocation_calls_the_driver_timed() {
    let (run, a) = analyze("h200-ledger", "small_kernels_16_100");
    let ledger = run.ledger();
    assert!(ledger.timed);
    let a1 = with_id(&a, "A1");
    assert_eq!(a1.len(), 2, "{:?}", a.findings);
    for f in a1 {
        let site = ledger.site(construct_site(f)).expect("site in the ledger");
        let (ns, calls) = (
            site.parts.ns(Part::Allocation),
            site.parts.calls(Part::Allocation),
        );
        assert!(calls > 0 && ns > 0, "{site:?}");
        let allocations = f.evidence.count("allocations").expect("allocations");
        let frees = f
            .subjects
            .allocs
            .iter()
            .filter(|&&id| run.alloc(id).free_ns().is_some())
            .count() as u64;
        let expected = |n: u64| (ns as u128 * n as u128 / calls as u128) as u64;
        assert_eq!(
            f.cost_ns,
            Some(expected(allocations + frees)),
            "{}",
            f.title
        );
        // All but one allocation and its free.
        let one = 1 + u64::from(run.alloc(f.subjects.allocs[0]).free_ns().is_some());
        let saving = f.saving_ns.expect("saving");
        assert!(
            saving.abs_diff(expected(allocations + frees) - expected(one)) <= 1,
            "{}: {saving}",
            f.title
        );
        assert_eq!(f.saved_allocs.len() as u64, allocations - 1);
        assert_eq!(
            f.evidence.get("allocation_call_time"),
            Some(&Value::Ns(ns / calls))
        );
        assert!(!said(f).contains("not measured"), "{}", said(f));
    }
    assert!(a.total_saving_ns > 0);
}

/// Without the driver's timings, A1 says its cost is not measured and the
/// D findings save their transfers' device time, as before.
#[test]
fn untimed_traces_keep_device_time_and_unmeasured_allocations() {
    let (run, a) = analyze("h100", "laplace_bad_c_1024");
    assert!(!run.ledger().timed);
    let a1 = with_id(&a, "A1");
    assert!(!a1.is_empty(), "{:?}", a.findings);
    for f in a1 {
        assert_eq!((f.cost_ns, f.saving_ns), (None, None));
        assert!(f.saved_allocs.is_empty());
        // The compute construct's blocks hold its two grids (16 MiB, more
        // than either grid's transfers) and its own argument pointers: a
        // data region would leave a smaller block per reach.
        assert!(said(f).contains("saves no allocation call"), "{}", said(f));
    }
    let ds: Vec<&Finding> = a
        .findings
        .iter()
        .filter(|f| f.id.starts_with('D'))
        .collect();
    assert!(!ds.is_empty());
    for f in ds {
        let device: u64 = f
            .saved_transfers
            .iter()
            .map(|&t| run.transfer(t).duration_ns())
            .sum();
        assert_eq!(f.saving_ns, Some(device), "{}", f.title);
        assert!(f.saved_allocs.is_empty());
    }
}

/// data_shapes table: a constant table uploaded by every step's construct
/// (line 82). The block each reach allocates holds the table and the
/// kernel's arguments; with the table on the device it stays, smaller,
/// and costs the same (the driver's allocation calls do not depend on the
/// size: bench/alloc_sizes.sh), so D6 claims the copies' host time and
/// nothing for the blocks: on the H200 a line fitted over the run's
/// allocation calls by size claimed twice the measured saving.
#[test]
fn d6_claims_nothing_for_blocks_that_only_get_smaller() {
    let (run, a) = analyze("h200-ledger", "data_shapes_table");
    let d6 = with_id(&a, "D6");
    assert_eq!(d6.len(), 1, "{:?}", a.findings);
    let d6 = d6[0];
    let site = construct_site(d6);
    assert_eq!(run.site(site).line, Some(82));
    let transfer_ns = run
        .ledger()
        .site(site)
        .expect("line 82 in the ledger")
        .parts
        .ns(Part::Transfer);
    let saving = d6.saving_ns.expect("saving");
    assert!(
        saving > 0 && saving <= transfer_ns,
        "saving {saving} against the line's copy time {transfer_ns}"
    );
    assert!(d6.saved_allocs.is_empty());
    assert_eq!(d6.evidence.get("smaller_allocation_time"), None);
}

/// data_shapes helper: a helper's `copy()` at line 73 moves one buffer up
/// and down every step. D6's region saves the host time of those copy
/// calls (more than their device time) but no allocation: the blocks line
/// 73 allocates per reach hold the construct's own argument pointers too
/// (they are larger than the buffer), so they stay, smaller, and A1 there
/// claims no saving (the driver's allocation calls cost the same whatever
/// the size). D4 claims part of the same transfers, which the total
/// counts once.
#[test]
fn d6_saves_the_host_time_of_the_copies_not_the_construct_blocks() {
    let (run, a) = analyze("h200-ledger", "data_shapes_helper");
    let ledger = run.ledger();
    assert!(ledger.timed);
    let d6 = with_id(&a, "D6");
    assert_eq!(d6.len(), 1, "{:?}", a.findings);
    let d6 = d6[0];
    let site = construct_site(d6);
    assert_eq!(run.site(site).line, Some(73));
    let parts = &ledger.site(site).expect("line 73 in the ledger").parts;
    let transfer_ns = parts.ns(Part::Transfer);
    let reaches = d6.evidence.count("iterations").expect("iterations");
    let saving = d6.saving_ns.expect("saving");
    // The buffer's copies, all but one round trip, take most of the line's
    // copy time (the rest is the small argument copies).
    assert!(
        saving <= transfer_ns && saving >= (transfer_ns - transfer_ns / reaches) * 9 / 10,
        "saving {saving} against {transfer_ns} of {reaches} reaches"
    );
    // More than the device copies alone.
    let device: u64 = d6
        .saved_transfers
        .iter()
        .map(|&t| run.transfer(t).duration_ns())
        .sum();
    assert!(saving > device, "{saving} <= {device}");
    // The per-step blocks stay.
    assert!(d6.saved_allocs.is_empty());
    let a1 = with_id(&a, "A1");
    assert_eq!(a1.len(), 1, "{:?}", a.findings);
    assert!(a1[0]
        .subjects
        .allocs
        .iter()
        .all(|&x| accprof_analyzer::rules::host_cost::holds_construct_block(&run, x)));
    assert_eq!(a1[0].saving_ns, None);
    assert!(a1[0].cost_ns.is_some_and(|c| c > 0));
    // D4's uploads are D6's too: counted once.
    for f in with_id(&a, "D4") {
        assert!(f
            .saved_transfers
            .iter()
            .all(|t| d6.saved_transfers.contains(t)));
    }
    let unmeasured: u64 = a
        .findings
        .iter()
        .filter(|f| f.saved_transfers.is_empty() && f.saved_allocs.is_empty())
        .filter_map(|f| f.saving_ns)
        .sum();
    assert_eq!(a.total_saving_ns, saving + unmeasured);
}
