use super::sink::Arrivals;

/// Kernels, transfers and memsets that come in the run's order stand as
/// they came; others are put in it: by start, then the rest of their
/// order.
#[test]
fn arrivals_are_put_in_the_runs_order() {
    let in_order = [(1, 5), (1, 7), (4, 2), (4, 2), (9, 0)];
    let mut a = Arrivals::default();
    for o in in_order {
        a.push(o, o);
    }
    assert_eq!(a.in_order(|x| x.0), in_order);
    let mut b = Arrivals::default();
    for o in [(4, 1), (1, 9), (4, 0), (1, 3), (2, 8)] {
        b.push(o, o);
    }
    assert_eq!(
        b.in_order(|x| x.0),
        [(1, 3), (1, 9), (2, 8), (4, 0), (4, 1)]
    );
}
