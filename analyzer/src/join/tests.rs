use super::*;

fn live(start_ns: u64) -> Live {
    let c = Construct::new(
        ConstructClass::Compute,
        None,
        SiteId::at(0),
        1,
        start_ns,
        None,
    );
    Live {
        c,
        top: ConstructId::at(0),
        top_class: ConstructClass::Compute,
        launches: Vec::new(),
        waiting: Vec::new(),
        refs: 1,
        fin: false,
    }
}

/// Constructs kept live while many later ones come and go leave the
/// window for the hash map and are still found there; the window stays
/// within its size.
#[test]
fn live_map_keeps_long_lived_constructs_past_its_window() {
    let mut m = LiveMap::new();
    let n = 5 * LiveMap::WINDOW;
    let kept = |i: usize| i % 700 == 3;
    for i in 0..n {
        m.insert(ConstructId::at(i), live(i as u64));
        // Most are let go a few constructs later, pairs swapped.
        if let Some(j) = i.checked_sub(5).map(|k| k ^ 1) {
            if !kept(j) {
                m.remove(&ConstructId::at(j));
            }
        }
        assert!(m.window.len() <= LiveMap::WINDOW);
    }
    for i in 0..n {
        let got = m.get(&ConstructId::at(i)).map(|l| l.c.start_ns);
        if kept(i) {
            assert_eq!(got, Some(i as u64), "construct {i}");
        } else if i + 6 < n {
            assert_eq!(got, None, "construct {i}");
        }
    }
    assert!(!m.old.is_empty());
    for i in (0..n).filter(|&i| kept(i)) {
        assert!(m.get(&ConstructId::at(i)).is_some());
        m.get_mut(&ConstructId::at(i)).expect("kept").refs += 1;
        m.remove(&ConstructId::at(i));
        assert!(m.get(&ConstructId::at(i)).is_none());
    }
}

/// The sets of starting and ending kinds say of every kind what the
/// kind's name says.
#[test]
fn starts_and_ends_are_told_by_their_kinds() {
    use accprof_trace::AccEventKind;
    for k in AccEventKind::ALL {
        let name = format!("{k:?}");
        let start =
            name.ends_with("Start") && !name.starts_with("Enqueue") && !name.starts_with("Device");
        let end =
            name.ends_with("End") && !name.starts_with("Enqueue") && !name.starts_with("Device");
        assert_eq!(class_of(k).is_some(), start, "{name}");
        assert_eq!(is_end(k), end, "{name}");
    }
}
