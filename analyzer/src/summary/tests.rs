use super::*;
use crate::model::ConstructClass;
use accprof_trace::CopyKind;

#[test]
fn in_flight_transfers_give_their_sizes_as_every_view_does() {
    use crate::testkit::runs::RunBuilder;
    let mut b = RunBuilder::new(accprof_trace::HashMode::Off);
    let site = b.site("app.c", 20);
    let c = b.open(ConstructClass::Compute, site, None);
    let small = b.buf(88, 1);
    let big = b.buf(8_421_408, 2);
    b.copy(c, CopyKind::HostToDevice, small, 1_000);
    b.copy(c, CopyKind::DeviceToHost, big, 2_000);
    let run = b.build();
    let f = run.in_flight().expect("a construct in flight");
    assert_eq!(
        f.transfers,
        ["host->device 88 B", "device->host 8.03 MiB"],
        "{f:?}"
    );
}

#[test]
fn stats_merge_and_average() {
    let mut a = Stats::default();
    a.add(10);
    a.add(30);
    let mut b = Stats::default();
    b.add(5);
    a.merge(&b);
    assert_eq!(
        (a.count, a.total_ns, a.min_ns, a.max_ns, a.avg_ns()),
        (3, 45, 5, 30, 15)
    );
    let mut empty = Stats::default();
    empty.merge(&a);
    assert_eq!(empty, a);
    assert_eq!(Stats::default().avg_ns(), 0);
}

#[test]
fn sizes_are_counted_then_the_largest_kept_in_any_order() {
    let sizes: Vec<u64> = (0..(MAX_SIZES as u64 + 3)).map(|i| 100 + i).collect();
    for order in [sizes.clone(), sizes.iter().rev().copied().collect()] {
        let mut t = TransferLine::default();
        for &b in &order {
            t.add_size(b, 2);
        }
        t.add_size(118, 1);
        t.add_size(100, 1);
        assert_eq!(t.count_of_size(118), 3);
        assert_eq!(t.count_of_size(100), 0);
        assert_eq!(t.sizes.len(), MAX_SIZES);
        assert_eq!(t.sizes.iter().map(|s| s.bytes).min(), Some(103));
        // 100, 101 and 102 twice each, and 100 once more.
        assert_eq!(t.other_sizes, 7);
    }
}
