//! The timeline of the recorded fixtures, drawn on ratatui's TestBackend at
//! 120x40 and compared with golden text files (ACCPROF_BLESS=1 rewrites
//! them), and what the keys do to the state on real traces.

use std::path::{Path, PathBuf};

use accprof_analyzer::testkit::{fixtures, golden};
use accprof_tui::lanes::{Item, LaneKind, Tag};
use accprof_tui::state::{Focus, Panel, Row, State};
use accprof_tui::style::Palette;
use accprof_tui::update::{update, Control};
use accprof_tui::{view, Session};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::Terminal;

const W: u16 = 120;
const H: u16 = 40;

fn h200(names: &[&str]) -> Session {
    let runs = names
        .iter()
        .map(|n| {
            let path = fixtures::dir("h200").join(format!("{n}.trace"));
            (path, fixtures::load("h200", n))
        })
        .collect();
    Session::open(runs, &[fixtures::samples()])
}

fn mpi() -> Session {
    let dir = fixtures::dir("mpi_host");
    let opts = accprof_analyzer::LoadOptions::only_in(vec![dir.join("bin")]);
    let runs = (0..4)
        .map(|r| {
            let path = dir.join(format!("rank{r}.trace"));
            let run = accprof_analyzer::load_run_with(&path, &opts).expect("rank trace");
            (path, run)
        })
        .collect();
    Session::open(runs, &[fixtures::samples()])
}

fn key(c: KeyCode) -> Event {
    Event::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

fn keys(s: &Session, st: &mut State, list: &[KeyCode]) {
    let area = Rect::new(0, 0, W, H);
    for &k in list {
        assert_eq!(update(s, st, area, &key(k)), Control::Continue);
    }
}

/// The screen as text, drawn through a ratatui Terminal on a TestBackend.
fn screen(s: &Session, st: &State, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    term.draw(|f| {
        let area = f.area();
        view::render(s, st, Palette { color: true }, area, f.buffer_mut());
    })
    .expect("draw");
    view::buffer_text(term.backend().buffer())
}

fn check(name: &str, got: &str) {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.txt"));
    golden::check(&path, got, "cargo test -p accprof-tui --test render");
}

fn lane_of(s: &Session, g: usize, kind: impl Fn(LaneKind) -> bool) -> usize {
    s.groups[g]
        .lanes
        .lanes
        .iter()
        .position(|l| kind(l.kind))
        .expect("lane")
}

#[test]
fn laplace_bad_shows_the_lanes_the_single_gang_kernel_and_its_findings() {
    let s = h200(&["laplace_bad_c"]);
    let mut st = State::new(&s);
    let text = screen(&s, &st, W, H);
    for lane in [
        "thread",
        "dev 0 queue",
        "host->device",
        "device->host",
        "device memory",
    ] {
        assert!(text.contains(lane), "{lane}:\n{text}");
    }
    let ids: Vec<&str> = st
        .findings
        .iter()
        .map(|f| s.groups[f.group].finding(f.index).expect("finding").id)
        .collect();
    assert_eq!(ids.first(), Some(&"L3"), "{ids:?}");
    assert!(ids.contains(&"D6"), "{ids:?}");
    assert!(text.contains(" L3 ") && text.contains(" D6 "), "{text}");
    check("laplace_bad_c", &text);

    // Choosing the L3 finding highlights its kernels and zooms to them.
    keys(&s, &mut st, &[KeyCode::Tab, KeyCode::Enter]);
    let h = st.highlight.as_ref().expect("highlight");
    let f = s.groups[0].finding(st.findings[0].index).expect("finding");
    assert_eq!(h.count, f.subjects.kernels.len());
    assert!(h.count > 0);
    let dev = lane_of(&s, 0, |k| matches!(k, LaneKind::Stream { .. }));
    let lane = &s.groups[0].lanes.lanes[dev];
    let (first, last) = (h.marks[0][dev][0], *h.marks[0][dev].last().expect("marks"));
    assert!(st.t0 <= lane.start(first) as f64 && lane.end(last) as f64 <= st.t1());
    let e = st.selected.expect("selected");
    assert_eq!((e.lane, e.pos), (dev, first));
    let text = screen(&s, &st, W, H);
    assert!(
        text.contains("kernel ") && text.contains("laplace_bad.c:154"),
        "{text}"
    );
    assert!(
        text.contains("> 154 |") || text.contains(">  154 |"),
        "{text}"
    );
    check("laplace_bad_c.l3", &text);
}

#[test]
fn laplace_bad_single_gang_kernel_dominates_the_device_lane() {
    let s = h200(&["laplace_bad_c"]);
    let g = &s.groups[0];
    let dev = lane_of(&s, 0, |k| matches!(k, LaneKind::Stream { .. }));
    let lane = &g.lanes.lanes[dev];
    // Device time of the kernels at line 154 against all kernels.
    let mut at_154 = 0u64;
    let mut all = 0u64;
    for p in 0..lane.len() as u32 {
        let d = lane.end(p) - lane.start(p);
        all += d;
        let key = g.line_of(lane.item(p)).and_then(|k| g.line_key(k).cloned());
        if key.is_some_and(|(_, l)| l == Some(154)) {
            at_154 += d;
        }
    }
    assert!(at_154 * 10 > all * 9, "{at_154} of {all}");
}

#[test]
fn laplace_good_has_its_own_picture() {
    let s = h200(&["laplace_good_c"]);
    let mut st = State::new(&s);
    check("laplace_good_c", &screen(&s, &st, W, H));
    // The summary by line, by bytes.
    keys(
        &s,
        &mut st,
        &[KeyCode::Char('l'), KeyCode::Char('o'), KeyCode::Char('o')],
    );
    assert_eq!(st.panel, Some(Panel::Lines));
    let bytes: Vec<u64> = st
        .lines
        .iter()
        .map(|&(g, i)| s.groups[g].derived().expect("analyzed").lines[i].bytes)
        .collect();
    assert!(bytes.windows(2).all(|w| w[0] >= w[1]), "{bytes:?}");
    check("laplace_good_c.lines", &screen(&s, &st, W, H));
}

#[test]
fn heat2d_with_a_data_region() {
    let s = h200(&["heat2d_data"]);
    let mut st = State::new(&s);
    check("heat2d_data", &screen(&s, &st, W, H));
    // Down to the device queue, select the kernel in the middle and
    // step to the next launch of the same kernel.
    let dev = lane_of(&s, 0, |k| matches!(k, LaneKind::Stream { .. }));
    let row = st
        .rows
        .iter()
        .position(|&r| r == Row::Lane(0, dev))
        .expect("row");
    for _ in 0..row {
        keys(&s, &mut st, &[KeyCode::Down]);
    }
    keys(&s, &mut st, &[KeyCode::Enter]);
    let e = st.selected.expect("selected");
    let lane = &s.groups[0].lanes.lanes[dev];
    let Item::Kernel(k) = lane.item(e.pos) else {
        panic!("not a kernel")
    };
    keys(&s, &mut st, &[KeyCode::Char('k')]);
    let next = st.selected.expect("selected");
    assert!(lane.start(next.pos) > lane.start(e.pos));
    let Item::Kernel(k2) = s.groups[0].lanes.lanes[next.lane].item(next.pos) else {
        panic!("not a kernel")
    };
    let run = &s.groups[0].run;
    assert_eq!(run.kernel(k).name, run.kernel(k2).name);
    // No launch of that kernel in between.
    for p in e.pos + 1..next.pos {
        if let Item::Kernel(o) = lane.item(p) {
            assert_ne!(run.kernel(o).name, run.kernel(k).name);
        }
    }
    keys(&s, &mut st, &[KeyCode::Char('z')]);
    check("heat2d_data.kernel", &screen(&s, &st, W, H));
}

#[test]
fn launch_storm_jumps_by_kind_and_by_line() {
    let s = h200(&["launch_storm"]);
    let mut st = State::new(&s);
    check("launch_storm", &screen(&s, &st, W, H));
    keys(&s, &mut st, &[KeyCode::Enter]);
    let e = st.selected.expect("selected");
    let g = &s.groups[0];
    let lane = &g.lanes.lanes[e.lane];
    let tag = lane.tag(e.pos);
    keys(&s, &mut st, &[KeyCode::Char('n')]);
    let n = st.selected.expect("selected");
    assert_eq!(n.lane, e.lane);
    assert!(n.pos > e.pos);
    assert_eq!(lane.tag(n.pos), tag);
    assert!((e.pos + 1..n.pos).all(|p| lane.tag(p) != tag));
    keys(&s, &mut st, &[KeyCode::Char('N')]);
    assert_eq!(st.selected, Some(e));

    let line = g.line_of(lane.item(e.pos)).expect("line");
    keys(&s, &mut st, &[KeyCode::Char('s')]);
    let l = st.selected.expect("selected");
    let here = lane.start(e.pos);
    let there = g.lanes.lanes[l.lane].start(l.pos);
    assert!(there >= here && l != e);
    assert_eq!(g.line_of(g.lanes.lanes[l.lane].item(l.pos)), Some(line));
    // Nothing of the same line starts strictly between the two.
    for lane in &g.lanes.lanes {
        for p in 0..lane.len() as u32 {
            let t = lane.start(p);
            if t > here && t < there {
                assert_ne!(g.line_of(lane.item(p)), Some(line));
            }
        }
    }
}

#[test]
fn four_mpi_ranks_open_as_groups_on_one_clock() {
    let s = mpi();
    assert_eq!(s.groups.len(), 4);
    let mut st = State::new(&s);
    let text = screen(&s, &st, W, H);
    for r in 0..4 {
        assert!(text.contains(&format!("rank {r}  rank{r}.trace")), "{text}");
    }
    check("mpi_halo_4_ranks", &text);
    // The ranks ran side by side: their first constructs lie within the
    // run of any one of them, not seconds apart as their clocks' bases are.
    let firsts: Vec<u64> = s
        .groups
        .iter()
        .map(|g| g.lanes.lanes[0].first_start())
        .collect();
    let spread = firsts.iter().max().expect("max") - firsts.iter().min().expect("min");
    assert!(spread < s.span.1 - s.span.0, "{firsts:?}");
    // A line chosen in the summary is lit in every rank.
    keys(&s, &mut st, &[KeyCode::Char('l'), KeyCode::Enter]);
    let h = st.highlight.as_ref().expect("highlight");
    for (g, lanes) in h.marks.iter().enumerate() {
        assert!(lanes.iter().any(|m| !m.is_empty()), "rank {g}");
    }
    keys(
        &s,
        &mut st,
        &[KeyCode::Esc, KeyCode::Esc, KeyCode::Char('p')],
    );
    assert!(st.highlight.is_none());
    // Collapsing rank 0 leaves its header row only.
    keys(&s, &mut st, &[KeyCode::Char('c')]);
    assert!(st.collapsed[0]);
    assert!(!st.rows.iter().any(|r| matches!(r, Row::Lane(0, _))));
    check("mpi_halo_4_ranks.collapsed", &screen(&s, &st, W, H));
}

#[test]
fn search_highlights_a_line_and_a_variable() {
    let s = h200(&["laplace_bad_c"]);
    let mut st = State::new(&s);
    keys(&s, &mut st, &[KeyCode::Char('/')]);
    assert_eq!(st.focus, Focus::Search);
    for c in "laplace_bad.c:154".chars() {
        keys(&s, &mut st, &[KeyCode::Char(c)]);
    }
    keys(&s, &mut st, &[KeyCode::Enter]);
    let h = st.highlight.as_ref().expect("highlight");
    let g = &s.groups[0];
    let mut want = 0;
    for lane in &g.lanes.lanes {
        for p in 0..lane.len() as u32 {
            let l = g.line_of(lane.item(p)).and_then(|k| g.line_key(k).cloned());
            if l.is_some_and(|(f, l)| f.ends_with("laplace_bad.c") && l == Some(154)) {
                want += 1;
            }
        }
    }
    assert!(want > 0);
    assert_eq!(h.count, want);

    keys(
        &s,
        &mut st,
        &[KeyCode::Char('/'), KeyCode::Char('A'), KeyCode::Enter],
    );
    let h = st.highlight.as_ref().expect("highlight");
    assert!(h.count > 0);
    for (l, marks) in h.marks[0].iter().enumerate() {
        for &p in marks {
            let item = g.lanes.lanes[l].item(p);
            assert!(g.name_of(item).is_some_and(|n| n.contains('A')));
        }
    }
    // ] walks the highlighted events in time.
    let before = st.selected.expect("selected");
    keys(&s, &mut st, &[KeyCode::Char(']')]);
    let after = st.selected.expect("selected");
    let t = |e: accprof_tui::state::Ev| g.lanes.lanes[e.lane].start(e.pos);
    assert!(t(after) >= t(before) && after != before);
}

#[test]
fn zoom_pan_and_fit_keep_the_window_sane() {
    let s = h200(&["laplace_bad_c"]);
    let mut st = State::new(&s);
    let (t0, w) = (st.t0, st.width_ns);
    keys(&s, &mut st, &[KeyCode::Char('+'), KeyCode::Char('+')]);
    assert!((st.width_ns - w / 4.0).abs() < 1.0);
    let mid = st.t0 + st.width_ns / 2.0;
    assert!((mid - (t0 + w / 2.0)).abs() < 1.0);
    keys(&s, &mut st, &[KeyCode::Right]);
    assert!((st.t0 + st.width_ns / 2.0 - mid - st.width_ns / 8.0).abs() < 1.0);
    keys(&s, &mut st, &[KeyCode::Char('0')]);
    assert_eq!((st.t0, st.width_ns), (t0, w));
    // Zoomed far in, the screen still draws and the ruler has units.
    for _ in 0..40 {
        keys(&s, &mut st, &[KeyCode::Char('+')]);
    }
    let text = screen(&s, &st, W, H);
    assert!(text.contains(" ns") || text.contains(" us"), "{text}");
}

#[test]
fn the_first_frame_comes_before_the_findings_and_they_follow() {
    let path = fixtures::dir("h200").join("laplace_bad_c.trace");
    let run = fixtures::load("h200", "laplace_bad_c");
    let s = Session::new(vec![(path, run)], &[fixtures::samples()]);
    assert!(!s.analyzed());
    let mut st = State::new(&s);
    assert!(st.findings.is_empty());
    let text = screen(&s, &st, W, H);
    assert!(text.contains("findings (analyzing)"), "{text}");
    assert!(text.contains("dev 0 queue"), "{text}");
    s.analyze();
    st.analyzed(&s);
    assert!(!st.findings.is_empty());
    assert!(!st.lines.is_empty());
    let text = screen(&s, &st, W, H);
    assert!(text.contains(" L3 "), "{text}");
}

#[test]
fn a_small_terminal_says_so_and_help_lists_the_keys() {
    let s = h200(&["laplace_bad_c"]);
    let mut st = State::new(&s);
    let text = screen(&s, &st, 60, 20);
    assert!(text.contains("Terminal too small: 60x20"), "{text}");
    keys(&s, &mut st, &[KeyCode::Char('?')]);
    let text = screen(&s, &st, W, H);
    for (k, _) in view::KEYS {
        assert!(text.contains(k), "{k}:\n{text}");
    }
    check("help", &text);
    keys(&s, &mut st, &[KeyCode::Esc]);
    assert!(!st.help);
}

#[test]
fn every_finding_event_is_marked_and_the_present_table_names_the_arrays() {
    let s = h200(&["laplace_bad_c"]);
    let g = &s.groups[0];
    let d = g.derived().expect("analyzed");
    for f in &d.analysis.findings {
        for (lane, pos) in g.positions_of(&f.subjects) {
            assert!(d.marks[lane].binary_search(&pos).is_ok(), "{}", f.id);
        }
    }
    let mut st = State::new(&s);
    keys(&s, &mut st, &[KeyCode::Tab, KeyCode::Enter]);
    let p = st.present.as_ref().expect("present");
    assert!(p.bytes > 0);
    assert!(
        p.rows
            .iter()
            .any(|r| r.name.contains('A') && r.place.ends_with(":154")),
        "{:?}",
        p.rows
    );
    let tag = {
        let e = st.selected.expect("selected");
        g.lanes.lanes[e.lane].tag(e.pos)
    };
    assert_eq!(tag, Tag::Kernel);
}

#[test]
fn the_mouse_wheel_zooms_at_the_pointer_and_a_drag_pans() {
    use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let s = h200(&["laplace_bad_c"]);
    let mut st = State::new(&s);
    let area = Rect::new(0, 0, W, H);
    let a = view::layout(area, &st).expect("layout");
    let mouse = |kind, column, row| {
        Event::Mouse(MouseEvent {
            kind,
            column,
            row,
            modifiers: KeyModifiers::NONE,
        })
    };
    // The instant under the pointer stays under it.
    let col = a.lanes.x + a.lanes.width / 4;
    let share = (f64::from(col - a.lanes.x) + 0.5) / f64::from(a.lanes.width);
    let under = st.t0 + st.width_ns * share;
    let w = st.width_ns;
    update(
        &s,
        &mut st,
        area,
        &mouse(MouseEventKind::ScrollUp, col, a.lanes.y),
    );
    assert!(st.width_ns < w);
    assert!((st.t0 + st.width_ns * share - under).abs() < 1.0);
    // A click on the device lane selects the kernel there; a drag pans.
    let dev = st
        .rows
        .iter()
        .position(|r| matches!(r, Row::Lane(0, l) if matches!(s.groups[0].lanes.lanes[*l].kind, LaneKind::Stream { .. })))
        .expect("device row");
    let row = a.lanes.y + dev as u16;
    let mid = a.lanes.x + a.lanes.width / 2;
    update(
        &s,
        &mut st,
        area,
        &mouse(MouseEventKind::Down(MouseButton::Left), mid, row),
    );
    let e = st.selected.expect("selected");
    assert_eq!(s.groups[0].lanes.lanes[e.lane].tag(e.pos), Tag::Kernel);
    let t0 = st.t0;
    let per_col = st.width_ns / f64::from(a.lanes.width);
    update(
        &s,
        &mut st,
        area,
        &mouse(MouseEventKind::Drag(MouseButton::Left), mid - 10, row),
    );
    assert!((st.t0 - (t0 + 10.0 * per_col)).abs() < 1.0);
    update(
        &s,
        &mut st,
        area,
        &mouse(MouseEventKind::Up(MouseButton::Left), mid - 10, row),
    );
    assert!(st.drag.is_none());
}

#[test]
fn without_color_the_kinds_keep_their_glyphs_and_no_color_is_set() {
    let none = Palette { color: false };
    let some = Palette { color: true };
    for tag in [
        Tag::Compute,
        Tag::EnterData,
        Tag::Update,
        Tag::Kernel,
        Tag::Upload,
        Tag::Download,
    ] {
        assert_eq!(none.tag(tag).fg, None);
        assert!(some.tag(tag).fg.is_some());
    }
    // The selection and the highlight still show, by reverse video.
    let m = ratatui::style::Modifier::REVERSED;
    assert!(none
        .selected(none.tag(Tag::Kernel))
        .add_modifier
        .contains(m));
    assert!(none
        .highlighted(none.tag(Tag::Kernel))
        .add_modifier
        .contains(m));
    assert_ne!(
        accprof_tui::style::full_glyph(Tag::Compute),
        accprof_tui::style::full_glyph(Tag::Update)
    );
}

/// A device that is busy about 7% of a long compute phase: `n` kernels of
/// 10 us, 130 us apart.
fn sparse_kernels(n: usize) -> Session {
    use accprof_analyzer::testkit::runs::RunBuilder;
    use accprof_analyzer::ConstructClass;
    let mut b = RunBuilder::new(accprof_trace::HashMode::Off);
    let site = b.site("sparse.c", 12);
    let c = b.open(ConstructClass::Compute, site, None);
    for _ in 0..n {
        b.kernel(c, 1, 10_000);
        b.t += 119_000;
    }
    b.close(c);
    Session::open(vec![(PathBuf::from("sparse.trace"), b.build())], &[])
}

/// The row of the lane whose label starts with `name`: its label part and
/// its lane part.
fn row<'a>(text: &'a str, name: &str) -> (&'a str, String) {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no {name} row:\n{text}"));
    let cut = line
        .char_indices()
        .nth(view::LABEL_WIDTH as usize)
        .map_or(line.len(), |(i, _)| i);
    let lanes: String = line[cut..].chars().take_while(|&c| c != '│').collect();
    (&line[..cut], lanes)
}

#[test]
fn sparse_kernels_shade_the_device_lane_by_its_busy_share() {
    let s = sparse_kernels(2_000);
    let mut st = State::new(&s);
    let text = screen(&s, &st, W, H);
    let (label, lane) = row(&text, "dev 0 queue 7");
    // The label's share is the kernels' time over the window's.
    let run = &s.groups[0].run;
    let kernel_ns: u64 = run.kernels().map(|(_, k)| k.end_ns - k.start_ns).sum();
    let want = format!("{:.0}%", 100.0 * kernel_ns as f64 / st.width_ns);
    assert_eq!(
        label.split_whitespace().last(),
        Some(want.as_str()),
        "{text}"
    );
    assert_eq!(want, "8%");
    // Every column of the compute phase holds kernels, none is drawn
    // full: each is the lightest shade.
    let drawn: Vec<char> = lane.chars().filter(|&c| c != ' ').collect();
    assert!(drawn.len() > 50, "{lane}");
    assert!(drawn.iter().all(|&c| c == '░'), "{lane}\n{text}");
    // The host thread runs the whole phase: full, and 98% of the window.
    let (label, host) = row(&text, "thread");
    assert!(label.trim_end().ends_with("98%"), "{label}");
    assert!(host.contains("████"), "{host}");

    // Zoomed in to 300 us, a kernel fills whole columns, and the gaps
    // between them are empty.
    let lane = &s.groups[0].lanes.lanes[lane_of(&s, 0, |k| matches!(k, LaneKind::Stream { .. }))];
    let a = lane.start(100);
    st.zoom_to(a, a + 300_000);
    let text = screen(&s, &st, W, H);
    let (label, lane) = row(&text, "dev 0 queue 7");
    assert!(lane.contains('█'), "{lane}");
    assert!(lane.contains("     "), "{lane}");
    let share: f64 = label
        .split_whitespace()
        .last()
        .and_then(|p| p.trim_end_matches('%').parse().ok())
        .expect("a share");
    assert!((5.0..=12.0).contains(&share), "{label}");
}

/// 32 MPI ranks, given in the order a shell's glob gives r*.trace (r0,
/// r1, r10, ..., r19, r2, r20, ...): rank r ran `r + 1` kernels of 40 us
/// in a construct of 10 ms.
fn ranks_32() -> Session {
    use accprof_analyzer::testkit::runs::RunBuilder;
    use accprof_analyzer::ConstructClass;
    let mut names: Vec<String> = (0..32).map(|r| format!("r{r}.trace")).collect();
    names.sort();
    let runs = names
        .iter()
        .map(|name| {
            let r: u32 = name[1..name.len() - 6].parse().expect("rank");
            let mut b = RunBuilder::new(accprof_trace::HashMode::Off);
            b.run.process.header.rank = Some(r);
            b.run.process.header.pid = 100 + r;
            let site = b.site("halo.c", 30);
            let c = b.open(ConstructClass::Compute, site, None);
            let start = b.t;
            for _ in 0..=r {
                b.kernel(c, 1, 40_000);
            }
            b.t = start + 10_000_000;
            b.close(c);
            (PathBuf::from(name), b.build())
        })
        .collect();
    Session::open(runs, &[])
}

#[test]
fn thirty_two_ranks_open_in_rank_order_one_row_each_and_expand_on_enter() {
    let s = ranks_32();
    let ranks: Vec<Option<u32>> = s.groups.iter().map(|g| g.run.process.header.rank).collect();
    assert_eq!(ranks, (0..32).map(Some).collect::<Vec<_>>());
    // 45 rows: the lanes (a header, a thread and a queue per rank: 96
    // rows) do not fit, so each rank opens as one row.
    let (w, h) = (W, 45);
    let mut st = view::open_state(&s, Rect::new(0, 0, w, h));
    assert!(st.collapsed.iter().all(|&c| c));
    assert_eq!(st.rows, (0..32).map(Row::Group).collect::<Vec<_>>());
    let text = screen(&s, &st, w, h);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("▸ rank"))
        .collect();
    let lanes_h = view::layout(Rect::new(0, 0, w, h), &st)
        .expect("layout")
        .lanes
        .height as usize;
    assert_eq!(rows.len(), lanes_h.min(32), "{text}");
    for (r, line) in rows.iter().enumerate() {
        // In rank order, each drawing its busiest lane: the thread, busy
        // the whole construct.
        assert!(
            line.trim_start().starts_with(&format!("▸ rank {r} thr")),
            "row {r}: {line}\n{text}"
        );
        let thread = lane_of(&s, r, |k| matches!(k, LaneKind::Thread { .. }));
        assert_eq!(s.groups[r].busiest, Some(thread));
        let (_, lane) = row(line, "▸ rank");
        assert!(lane.contains('█'), "row {r}: {line}");
    }
    // Enter opens rank 0's lanes under its row; Enter again closes them.
    keys(&s, &mut st, &[KeyCode::Enter]);
    assert!(!st.collapsed[0] && st.collapsed[1..].iter().all(|&c| c));
    assert_eq!(
        &st.rows[..4],
        &[
            Row::Group(0),
            Row::Lane(0, 0),
            Row::Lane(0, 1),
            Row::Group(1)
        ]
    );
    let text = screen(&s, &st, w, h);
    assert!(text.contains("▾ rank 0  r0.trace"), "{text}");
    let (_, queue) = row(&text, "dev 0 queue 7");
    assert!(queue.chars().any(|c| c != ' '), "{text}");
    keys(&s, &mut st, &[KeyCode::Enter]);
    assert!(st.collapsed.iter().all(|&c| c));
    // Four ranks fit: they open with every lane.
    let s = mpi();
    let st = view::open_state(&s, Rect::new(0, 0, W, H));
    assert!(st.collapsed.iter().all(|&c| !c));
}

#[test]
fn the_help_lines_are_whole_on_wide_terminals() {
    let s = h200(&["laplace_bad_c"]);
    let mut st = State::new(&s);
    keys(&s, &mut st, &[KeyCode::Char('?')]);
    for w in [W, 160, 200] {
        let text = screen(&s, &st, w, H);
        for (k, v) in view::KEYS {
            assert!(
                text.lines().any(|l| l.contains(k) && l.contains(v)),
                "{w} columns: {k} {v}:\n{text}"
            );
        }
    }
}

#[test]
fn the_status_bar_counts_an_event_that_runs_across_the_window() {
    let s = h200(&["laplace_bad_c"]);
    let mut st = State::new(&s);
    keys(
        &s,
        &mut st,
        &[KeyCode::Tab, KeyCode::Enter, KeyCode::Char('z')],
    );
    assert!(st.selected.is_some());
    keys(&s, &mut st, &[KeyCode::Char('+'); 4]);
    let text = screen(&s, &st, W, H);
    let status = text
        .lines()
        .find(|l| l.contains(" events"))
        .expect("status bar");
    assert!(status.contains("selected:"), "{status}");
    assert!(!status.contains(" 0 of "), "{status}");
}

#[test]
fn h_on_a_trace_without_the_coherence_check_says_how_to_record_one() {
    let s = h200(&["laplace_bad_c"]);
    let mut st = State::new(&s);
    for with_selection in [false, true] {
        if with_selection {
            keys(&s, &mut st, &[KeyCode::Tab, KeyCode::Enter]);
            assert!(st.selected.is_some());
        }
        for k in ['h', 'H'] {
            st.message = None;
            keys(&s, &mut st, &[KeyCode::Char(k)]);
            let said = st.message.clone().unwrap_or_default();
            assert!(
                said.contains("recorded without the coherence check")
                    && said.contains("accprof run --check coherence"),
                "{k} (selection: {with_selection}): {said}"
            );
        }
    }
}
