//! Tests of the lanes (lanes.rs).

use super::*;

use accprof_analyzer::testkit::runs::RunBuilder;
use accprof_analyzer::vocabulary::HashMode;
use accprof_analyzer::ConstructClass;

/// The lane of a host thread whose top-level constructs ran at `spans`
/// (start, end), in that order.
fn lane(spans: &[(u64, u64)]) -> Lane {
    let mut b = RunBuilder::new(HashMode::Off);
    let site = b.site("a.c", 10);
    for &(s, e) in spans {
        let id = b.open(ConstructClass::Compute, site, None);
        b.set_span(id, s, Some(e));
    }
    let run = Arc::new(b.build());
    let mut lanes = RunLanes::thread_lanes(&run, 0);
    assert_eq!(lanes.len(), 1);
    lanes.remove(0)
}

/// The lane of a device queue whose kernels ran at `spans` (start, end),
/// in that order: events of one lane that overlap (a trace never has a
/// thread's top-level constructs overlap: the join nests them).
fn queue_lane(spans: &[(u64, u64)]) -> Lane {
    let mut b = RunBuilder::new(HashMode::Off);
    let site = b.site("a.c", 10);
    let c = b.open(ConstructClass::Compute, site, None);
    for &(s, e) in spans {
        let k = b.kernel(c, 1, 1).expect("CUPTI records the kernels");
        let k = b.kernel_mut(k);
        (k.start_ns, k.end_ns) = (s, e);
    }
    b.close(c);
    let run = Arc::new(b.build());
    let mut lanes = RunLanes::device_lanes(&run, 0);
    assert!(matches!(lanes[0].kind, LaneKind::Stream { .. }));
    lanes.remove(0)
}

#[test]
fn a_column_counts_the_events_starting_in_it_and_sees_longer_ones_through() {
    let l = queue_lane(&[(0, 35), (12, 13), (14, 15), (50, 51)]);
    let mut cells = [Cell::default(); 6];
    l.cells(0.0, 10.0, &mut cells);
    let counts: Vec<u32> = cells.iter().map(|c| c.count).collect();
    assert_eq!(counts, [1, 2, 0, 0, 0, 1]);
    let covered: Vec<bool> = cells.iter().map(|c| c.covered).collect();
    assert_eq!(covered, [false, true, true, true, false, false]);
    // Column 3 (30..40) is covered by the first event only up to 35.
    assert_eq!(cells[3].first, 0);
    assert_eq!(cells[3].fill, 4);
    assert_eq!(cells[3].side, Side::Left);
    assert_eq!(cells[4].first, u32::MAX);
    assert_eq!(cells[5].fill, 1);
}

#[test]
fn lanes_keep_handles_and_read_times_from_the_model() {
    // Non-overlapping events: a handle each, no reach, one kind.
    let l = lane(&[(0, 10), (20, 30)]);
    assert!(l.reach.is_empty() && l.tags.is_empty());
    // A handle each, and one entry of the busy index.
    assert_eq!(l.heap_bytes(), 2 * 4 + 8);
    assert_eq!(
        (l.start(1), l.end(0), l.end(1), l.last_end()),
        (20, 10, 30, 30)
    );
    // An event of 5 s with a short one inside: the reach is kept.
    let long = 5_000_000_000;
    let l = queue_lane(&[(0, long), (10, 20)]);
    assert!(!l.reach.is_empty());
    assert_eq!((l.end(0), l.end(1), l.last_end()), (long, 20, long));
    let mut cells = [Cell::default(); 2];
    l.cells(1e9, 1e9, &mut cells);
    assert!(cells[0].covered && cells[1].covered);
    assert_eq!(cells[0].first, 0);
}

#[test]
fn a_lane_keeps_kinds_only_once_it_has_two() {
    let mut b = RunBuilder::new(HashMode::Off);
    let site = b.site("a.c", 10);
    let c = b.open(ConstructClass::Compute, site, None);
    b.close(c);
    let u = b.open(ConstructClass::Update, site, None);
    b.close(u);
    let run = Arc::new(b.build());
    let l = RunLanes::thread_lanes(&run, 0).remove(0);
    assert_eq!((l.tag(0), l.tag(1)), (Tag::Compute, Tag::Update));
    assert_eq!(l.tags.len(), 2);
    let one = lane(&[(0, 1), (2, 3), (4, 5)]);
    assert!(one.tags.is_empty());
    assert_eq!(one.tag(2), Tag::Compute);
}

#[test]
fn columns_find_their_events_in_long_lanes() {
    // 10,000 events of 1 ns every 10 ns: any window counts exactly
    // the events starting in each column, with the galloping search.
    let spans: Vec<(u64, u64)> = (0..10_000u64).map(|i| (i * 10, i * 10 + 1)).collect();
    let l = lane(&spans);
    for (t0, per_col) in [(0.0, 1000.0), (12_345.0, 7.0), (99_000.0, 50.0)] {
        let mut cells = [Cell::default(); 40];
        l.cells(t0, per_col, &mut cells);
        for (c, cell) in cells.iter().enumerate() {
            let a = t0 + c as f64 * per_col;
            let b = a + per_col;
            let want = spans
                .iter()
                .filter(|&&(s, _)| (s as f64) >= a && (s as f64) < b)
                .count();
            assert_eq!(cell.count as usize, want, "column {c} of {t0}+{per_col}");
        }
    }
    assert_eq!(l.first_at_or_after(55), 6);
    assert_eq!(l.first_at_or_after(0), 0);
    assert_eq!(l.first_at_or_after(200_000), 10_000);
}

#[test]
fn busy_time_counts_overlapping_events_once_in_any_window() {
    // Out of order, overlapping, nested, and 300 short ones after: the
    // index is walked across several blocks.
    let mut spans = vec![(50, 60), (0, 30), (10, 20), (25, 40)];
    spans.extend((0..300u64).map(|i| (100 + i * 10, 100 + i * 10 + 3)));
    let l = queue_lane(&spans);
    // Covered: 0..40, 50..60 and 3 ns of every 10 from 100.
    let truth = |a: u64, b: u64| {
        (a..b)
            .filter(|&t| spans.iter().any(|&(s, e)| s <= t && t < e))
            .count() as f64
    };
    for (a, b) in [
        (0, 100),
        (5, 55),
        (35, 37),
        (0, 3100),
        (1234, 2345),
        (99, 101),
        (4000, 5000),
    ] {
        assert_eq!(l.busy_ns(a as f64, b as f64), truth(a, b), "{a}..{b}");
    }
    // A window that starts before the first event.
    assert_eq!(l.busy_ns(-500.0, 100.0), truth(0, 100));
    let mut cells = [Cell::default(); 2];
    l.busy_cells(-100.0, 100.0, &mut cells);
    assert_eq!((cells[0].busy, cells[1].busy), (0, 4));
    let mut cells = [Cell::default(); 4];
    l.busy_cells(0.0, 100.0, &mut cells);
    let busy: Vec<u8> = cells.iter().map(|c| c.busy).collect();
    // 50 of 100 ns, then 30 of 100 in each column of short events.
    assert_eq!(busy, [4, 3, 3, 3]);
    // The extent overstates the short ones: the column looks full.
    assert_eq!(cells[1].fill, 8);
}

#[test]
fn out_of_order_events_are_sorted_with_their_handles() {
    let l = lane(&[(30, 40), (10, 20)]);
    assert_eq!((l.start(0), l.start(1)), (10, 30));
    assert_eq!(l.last_end(), 40);
    // The handle of the event at position 0 is the second one made.
    let Item::Construct(second) = l.item(0) else {
        panic!("a construct lane");
    };
    assert_eq!(l.find(Item::Construct(second)), Some(0));
    assert_eq!(l.run.construct_span(second), (10, Some(20)));
}

#[test]
fn the_event_at_an_instant_is_the_one_running_then() {
    let l = lane(&[(0, 10), (20, 30), (40, 50)]);
    assert_eq!(l.at_or_near(25), Some(1));
    assert_eq!(l.at_or_near(15), Some(1));
    assert_eq!(l.at_or_near(99), Some(2));
}

/// A counter of allocations (time, bytes, free time).
fn counter(allocs: &[(u64, u64, Option<u64>)]) -> Counter {
    let mut b = RunBuilder::new(HashMode::Off);
    let site = b.site("a.c", 10);
    let c = b.open(ConstructClass::EnterData, site, None);
    for &(t, bytes, free) in allocs {
        let id = b.alloc(c, bytes);
        b.set_alloc_span(id, t, free);
    }
    Counter::build(&Arc::new(b.build()), 0)
}

#[test]
fn memory_in_use_peaks_per_column() {
    let c = counter(&[(10, 100, Some(30)), (20, 50, Some(60))]);
    assert_eq!(c.peak, 150);
    assert_eq!(c.at(25), 150);
    assert_eq!(c.at(35), 50);
    assert_eq!(c.at(60), 0);
    let mut cols = [0u64; 7];
    c.columns(0.0, 10.0, &mut cols);
    assert_eq!(cols, [0, 100, 150, 150, 50, 50, 50]);
    // Several blocks of steps, read whole and walked.
    let many: Vec<(u64, u64, Option<u64>)> = (0..2000u64).map(|i| (i * 2, 1, None)).collect();
    let c = counter(&many);
    let mut cols = [0u64; 2];
    c.columns(0.0, 2000.0, &mut cols);
    assert_eq!(cols, [1000, 2000]);
    let mut cols = [0u64; 3];
    c.columns(101.0, 333.0, &mut cols);
    assert_eq!(cols, [51 + 166, 51 + 333, 51 + 499]);
    assert_eq!(c.at(1001), 501);
}

#[test]
fn a_run_without_allocations_has_an_empty_counter() {
    let c = counter(&[]);
    assert!(c.is_empty());
    assert_eq!((c.peak, c.at(5)), (0, 0));
    let mut cols = [7u64; 3];
    c.columns(0.0, 10.0, &mut cols);
    assert_eq!(cols, [0, 0, 0]);
}

#[test]
fn a_free_and_an_allocation_at_one_instant_do_not_add_up() {
    let c = counter(&[(10, 100, Some(20)), (20, 100, Some(40))]);
    assert_eq!(c.peak, 100);
    let mut cols = [0u64; 1];
    c.columns(15.0, 10.0, &mut cols);
    assert_eq!(cols, [100]);
}

/// An MPI call goes on the top row of its host thread among the
/// constructs, in start order, tagged apart, and is found again there.
#[test]
fn mpi_calls_join_their_threads_top_lane_in_start_order() {
    let mut b = RunBuilder::new(HashMode::Off);
    let site = b.site("a.c", 10);
    for (s, e) in [(0, 10), (40, 50)] {
        let id = b.open(ConstructClass::Compute, site, None);
        b.set_span(id, s, Some(e));
    }
    let mut run = b.build();
    let thread = run.constructs().next().map(|(_, c)| c.thread).unwrap_or(0);
    run.push_mpi_call(accprof_analyzer::MpiCall {
        routine: "MPI_Sendrecv".into(),
        start_ns: 20,
        end_ns: 30,
        thread,
        cuda_aware: None,
        site: None,
        ranges: Vec::new(),
    });
    let run = Arc::new(run);
    let lanes = RunLanes::thread_lanes(&run, 0);
    assert_eq!(lanes.len(), 1);
    let l = &lanes[0];
    assert_eq!(l.kind, LaneKind::Thread { thread, depth: 0 });
    assert_eq!((l.len(), l.start(1), l.end(1)), (3, 20, 30));
    assert_eq!(
        (l.tag(0), l.tag(1), l.tag(2)),
        (Tag::Compute, Tag::Mpi, Tag::Compute)
    );
    let Item::MpiCall(m) = l.item(1) else {
        panic!("the MPI call between the constructs");
    };
    assert_eq!(l.find(Item::MpiCall(m)), Some(1));
    let Item::Construct(c) = l.item(2) else {
        panic!("a construct");
    };
    assert_eq!(l.find(Item::Construct(c)), Some(2));
}
