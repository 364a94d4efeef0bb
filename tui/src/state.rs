//! The screen's state: the time window, the rows, what is selected and
//! highlighted, the panels. Plain data plus the operations the keys and
//! the mouse ask for ([`crate::update`] maps input to them); rendering
//! only reads it.

use accprof_analyzer::units;

use crate::data::{FindingRef, Session};
use crate::lanes::{Item, Tag};

/// An event on screen: group, lane and position in the lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ev {
    pub group: usize,
    pub lane: usize,
    pub pos: u32,
}

/// One row of the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    /// A trace's header (shown when several traces are open).
    Group(usize),
    Lane(usize, usize),
    /// Device memory in use.
    Memory(usize),
}

impl Row {
    pub fn group(self) -> usize {
        match self {
            Row::Group(g) | Row::Lane(g, _) | Row::Memory(g) => g,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Panel {
    Findings,
    Lines,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Timeline,
    Panel,
    Search,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineSort {
    Time,
    Count,
    Bytes,
}

impl LineSort {
    pub fn label(self) -> &'static str {
        match self {
            LineSort::Time => "time",
            LineSort::Count => "count",
            LineSort::Bytes => "bytes",
        }
    }
}

/// Events picked out (by a finding, a line or a search): per group, per
/// lane, sorted positions.
#[derive(Debug, Clone, Default)]
pub struct Highlight {
    pub label: String,
    pub marks: Vec<Vec<Vec<u32>>>,
    pub count: usize,
}

/// One array on the device at an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Present {
    pub name: String,
    pub bytes: u64,
    /// Where it was put there: file:line of its construct.
    pub place: String,
}

/// The present table at one instant of one group.
#[derive(Debug, Clone, Default)]
pub struct PresentTable {
    pub group: usize,
    pub at: u64,
    pub rows: Vec<Present>,
    pub bytes: u64,
}

pub struct State {
    /// The window, in ns of the common clock: start and width.
    pub t0: f64,
    pub width_ns: f64,
    pub rows: Vec<Row>,
    pub collapsed: Vec<bool>,
    /// The row the cursor is on, and the first row shown.
    pub cursor: usize,
    pub scroll: usize,
    pub selected: Option<Ev>,
    pub panel: Option<Panel>,
    pub focus: Focus,
    pub findings: Vec<FindingRef>,
    pub finding_cursor: usize,
    /// Rows of the summary by line: (group, index), in `line_sort` order.
    pub lines: Vec<(usize, usize)>,
    pub line_cursor: usize,
    pub line_sort: LineSort,
    pub highlight: Option<Highlight>,
    pub search: String,
    pub help: bool,
    pub present: Option<PresentTable>,
    /// A one-line note for the status line (what the last key did).
    pub message: Option<String>,
    /// Where a mouse drag started: column and window start then.
    pub drag: Option<(u16, f64)>,
}

impl State {
    /// Takes in the findings and the summary by line once the session's
    /// analysis is done.
    pub fn analyzed(&mut self, s: &Session) {
        self.findings = s.ranked_findings();
        self.finding_cursor = self
            .finding_cursor
            .min(self.findings.len().saturating_sub(1));
        self.sort_lines(s);
        self.line_cursor = self.line_cursor.min(self.lines.len().saturating_sub(1));
    }

    pub fn new(s: &Session) -> State {
        let mut st = State {
            t0: 0.0,
            width_ns: 1.0,
            rows: Vec::new(),
            collapsed: vec![false; s.groups.len()],
            cursor: 0,
            scroll: 0,
            selected: None,
            panel: Some(Panel::Findings),
            focus: Focus::Timeline,
            findings: s.ranked_findings(),
            finding_cursor: 0,
            lines: Vec::new(),
            line_cursor: 0,
            line_sort: LineSort::Time,
            highlight: None,
            search: String::new(),
            help: false,
            present: None,
            message: None,
            drag: None,
        };
        st.sort_lines(s);
        st.rebuild_rows(s);
        st.fit_all(s);
        st
    }

    /// Where the groups' lanes do not fit `height` rows, shows each group
    /// as one row (its busiest lane) to be opened one by one.
    pub fn fit_rows(&mut self, s: &Session, height: usize) {
        if s.groups.len() > 1 && self.rows.len() > height {
            self.collapsed.fill(true);
            self.rebuild_rows(s);
            self.cursor = 0;
        }
    }

    pub fn rebuild_rows(&mut self, s: &Session) {
        let several = s.groups.len() > 1;
        let mut rows = Vec::new();
        for (g, gr) in s.groups.iter().enumerate() {
            if several {
                rows.push(Row::Group(g));
                if self.collapsed[g] {
                    continue;
                }
            }
            for l in 0..gr.lanes.lanes.len() {
                rows.push(Row::Lane(g, l));
            }
            if !gr.lanes.memory.is_empty() {
                rows.push(Row::Memory(g));
            }
        }
        self.rows = rows;
        self.cursor = self.cursor.min(self.rows.len().saturating_sub(1));
    }

    // The window.

    pub fn fit_all(&mut self, s: &Session) {
        let (a, b) = s.span;
        let w = (b - a).max(1) as f64;
        self.t0 = a as f64 - w * 0.01;
        self.width_ns = w * 1.02;
    }

    pub fn t1(&self) -> f64 {
        self.t0 + self.width_ns
    }

    /// Zooms by `factor` (< 1 zooms in) keeping the instant at `anchor`
    /// (a share of the window from its left edge) in place.
    pub fn zoom(&mut self, factor: f64, anchor: f64) {
        let at = self.t0 + self.width_ns * anchor;
        // Never narrower than a nanosecond's share of a column.
        self.width_ns = (self.width_ns * factor).clamp(10.0, 1e15);
        self.t0 = at - self.width_ns * anchor;
    }

    /// Pans by `share` of the window (negative: earlier).
    pub fn pan(&mut self, share: f64) {
        self.t0 += self.width_ns * share;
    }

    pub fn zoom_to(&mut self, a: u64, b: u64) {
        let w = (b.saturating_sub(a)).max(10) as f64;
        self.t0 = a as f64 - w * 0.05;
        self.width_ns = w * 1.1;
    }

    pub fn zoom_to_selection(&mut self, s: &Session) {
        if let Some(e) = self.selected {
            let lane = &s.groups[e.group].lanes.lanes[e.lane];
            self.zoom_to(lane.start(e.pos), lane.end(e.pos));
        }
    }

    // Selection.

    pub fn select(&mut self, s: &Session, e: Ev) {
        self.selected = Some(e);
        if let Some(r) = self
            .rows
            .iter()
            .position(|&r| r == Row::Lane(e.group, e.lane))
        {
            self.cursor = r;
        }
        self.update_present(s);
    }

    /// Selects `e` and pans (without zooming) so that it is in view.
    pub fn select_and_show(&mut self, s: &Session, e: Ev) {
        self.select(s, e);
        let lane = &s.groups[e.group].lanes.lanes[e.lane];
        let (a, b) = (lane.start(e.pos) as f64, lane.end(e.pos) as f64);
        if b - a > self.width_ns {
            self.zoom_to(lane.start(e.pos), lane.end(e.pos));
        } else if a < self.t0 || b > self.t1() {
            self.t0 = (a + b) / 2.0 - self.width_ns / 2.0;
        }
    }

    /// The event of the cursor's lane at the window's center (or nearest).
    pub fn select_at_center(&mut self, s: &Session) {
        let t = (self.t0 + self.width_ns / 2.0).max(0.0) as u64;
        self.select_in_row_at(s, self.cursor, t);
    }

    /// The event a click on the screen column `a..b` (ns) of `row`
    /// selects: the host access the column shows, else the event at the
    /// middle of the column (or nearest).
    pub fn select_in_column(&mut self, s: &Session, row: usize, a: f64, b: f64) {
        if let Some(Row::Lane(g, l)) = self.rows.get(row).copied() {
            let lane = &s.groups[g].lanes.lanes[l];
            let at = |t: f64| lane.first_at_or_after(t.max(0.0).ceil() as u64);
            if let Some(pos) = lane.instant_in(at(a), at(b), a, b) {
                self.select(
                    s,
                    Ev {
                        group: g,
                        lane: l,
                        pos,
                    },
                );
                return;
            }
        }
        self.select_in_row_at(s, row, ((a + b) / 2.0).max(0.0) as u64);
    }

    pub fn select_in_row_at(&mut self, s: &Session, row: usize, t: u64) {
        if let Some(Row::Lane(g, l)) = self.rows.get(row).copied() {
            if let Some(pos) = s.groups[g].lanes.lanes[l].at_or_near(t) {
                self.select(
                    s,
                    Ev {
                        group: g,
                        lane: l,
                        pos,
                    },
                );
            }
        }
    }

    /// The previous or next event of the selected one's lane.
    pub fn step(&mut self, s: &Session, forward: bool) {
        let Some(e) = self.current(s) else { return };
        let lane = &s.groups[e.group].lanes.lanes[e.lane];
        if let Some(pos) = lane.seek(e.pos, forward, |_| true) {
            self.select_and_show(s, Ev { pos, ..e });
        }
    }

    /// The selection, else the event at the center of the cursor's lane.
    fn current(&mut self, s: &Session) -> Option<Ev> {
        if self.selected.is_none() {
            self.select_at_center(s);
        }
        self.selected
    }

    /// The next (or previous) event of the selected one's lane of the same
    /// kind.
    pub fn jump_same_kind(&mut self, s: &Session, forward: bool) {
        let Some(e) = self.current(s) else { return };
        let lane = &s.groups[e.group].lanes.lanes[e.lane];
        let tag = lane.tag(e.pos);
        match lane.seek(e.pos, forward, |p| lane.tag(p) == tag) {
            Some(pos) => self.select_and_show(s, Ev { pos, ..e }),
            None => self.say(format!(
                "no {} {}",
                if forward { "later" } else { "earlier" },
                tag.label()
            )),
        }
    }

    /// The next (or previous) event in time, in any lane of the selected
    /// one's group, that `same` says is alike.
    fn jump_alike(&mut self, s: &Session, forward: bool, what: &str, same: impl Fn(Item) -> bool) {
        let Some(e) = self.current(s) else { return };
        let g = &s.groups[e.group];
        let here = g.lanes.lanes[e.lane].start(e.pos);
        let mut best: Option<(u64, Ev)> = None;
        for (l, lane) in g.lanes.lanes.iter().enumerate() {
            // Later (earlier) in time, or at the same time in a later
            // (earlier) position of the lane order.
            let beyond = |p: u32| {
                let k = (lane.start(p), l, p);
                let h = (here, e.lane, e.pos);
                if forward {
                    k > h
                } else {
                    k < h
                }
            };
            let found = if forward {
                (lane.first_at_or_after(here)..lane.len() as u32)
                    .find(|&p| beyond(p) && same(lane.item(p)))
            } else {
                (0..lane.first_at_or_after(here.saturating_add(1)))
                    .rev()
                    .find(|&p| beyond(p) && same(lane.item(p)))
            };
            if let Some(p) = found {
                let ev = Ev {
                    group: e.group,
                    lane: l,
                    pos: p,
                };
                consider(&mut best, forward, lane.start(p), ev);
            }
        }
        fn consider(best: &mut Option<(u64, Ev)>, forward: bool, t: u64, e: Ev) {
            let better = match best {
                None => true,
                Some((bt, _)) => {
                    if forward {
                        t < *bt
                    } else {
                        t > *bt
                    }
                }
            };
            if better {
                *best = Some((t, e));
            }
        }
        match best {
            Some((_, ev)) => self.select_and_show(s, ev),
            None => self.say(format!(
                "no {} {what}",
                if forward { "later" } else { "earlier" }
            )),
        }
    }

    pub fn jump_same_line(&mut self, s: &Session, forward: bool) {
        let Some(e) = self.current(s) else { return };
        let g = &s.groups[e.group];
        let Some(key) = g.line_of(g.lanes.lanes[e.lane].item(e.pos)) else {
            self.say("the selected event has no source line".into());
            return;
        };
        self.jump_alike(s, forward, "event of the same source line", |it| {
            g.line_of(it) == Some(key)
        });
    }

    pub fn jump_same_kernel(&mut self, s: &Session, forward: bool) {
        let Some(e) = self.current(s) else { return };
        let g = &s.groups[e.group];
        let Item::Kernel(k) = g.lanes.lanes[e.lane].item(e.pos) else {
            self.say("the selected event is not a kernel".into());
            return;
        };
        let name = g.run.kernel(k).name;
        self.jump_alike(s, forward, "event of the same kernel", |it| match it {
            Item::Kernel(o) => g.run.kernel(o).name == name,
            _ => false,
        });
    }

    /// The next (or previous) host access the coherence check caught, in
    /// any lane of the selected event's trace.
    /// With nothing selected, the first (last) one of the session.
    pub fn jump_host_access(&mut self, s: &Session, forward: bool) {
        if let Some(e) = self.selected {
            if s.groups[e.group].run.host_accesses().is_empty() {
                self.say(NO_HOST_ACCESS.to_string());
                return;
            }
            self.jump_alike(s, forward, "host access (coherence check)", |it| {
                matches!(it, Item::HostAccess(_))
            });
            return;
        }
        let mut best: Option<((u64, usize, usize, u32), Ev)> = None;
        for (group, g) in s.groups.iter().enumerate() {
            for (lane, l) in g.lanes.lanes.iter().enumerate() {
                let ends = if forward {
                    l.instants().first()
                } else {
                    l.instants().last()
                };
                let Some(&pos) = ends else { continue };
                let key = (l.start(pos), group, lane, pos);
                if best.map_or(true, |(k, _)| if forward { key < k } else { key > k }) {
                    best = Some((key, Ev { group, lane, pos }));
                }
            }
        }
        match best {
            Some((_, ev)) => self.select_and_show(s, ev),
            None => self.say(NO_HOST_ACCESS.to_string()),
        }
    }

    /// The next (or previous) highlighted event after the selection, in time.
    pub fn jump_highlighted(&mut self, s: &Session, forward: bool) {
        let Some(h) = &self.highlight else {
            self.say("nothing is highlighted: choose a finding or a line, or search with /".into());
            return;
        };
        let here = self.selected.map(|e| {
            (
                e.group,
                s.groups[e.group].lanes.lanes[e.lane].start(e.pos),
                e.lane,
                e.pos,
            )
        });
        let mut all: Vec<(u64, usize, usize, u32)> = Vec::new();
        for (g, lanes) in h.marks.iter().enumerate() {
            for (l, marks) in lanes.iter().enumerate() {
                let lane = &s.groups[g].lanes.lanes[l];
                all.extend(marks.iter().map(|&p| (lane.start(p), g, l, p)));
            }
        }
        all.sort_unstable();
        let key = here.map(|(g, t, l, p)| (t, g, l, p));
        let pick = match (key, forward) {
            (None, _) => all.first(),
            (Some(k), true) => all.iter().find(|&&x| x > k),
            (Some(k), false) => all.iter().rev().find(|&&x| x < k),
        };
        if let Some(&(_, g, l, p)) = pick {
            self.select_and_show(
                s,
                Ev {
                    group: g,
                    lane: l,
                    pos: p,
                },
            );
        }
    }

    // Highlights.

    pub fn set_highlight(&mut self, s: &Session, label: String, per_group: Vec<Vec<(usize, u32)>>) {
        let mut marks: Vec<Vec<Vec<u32>>> = s
            .groups
            .iter()
            .map(|g| vec![Vec::new(); g.lanes.lanes.len()])
            .collect();
        let mut count = 0;
        for (g, list) in per_group.into_iter().enumerate() {
            for (l, p) in list {
                marks[g][l].push(p);
                count += 1;
            }
        }
        for lanes in &mut marks {
            for m in lanes {
                m.sort_unstable();
                m.dedup();
            }
        }
        self.highlight = Some(Highlight {
            label,
            marks,
            count,
        });
    }

    /// Highlights the highlighted events' extent into view, selecting the first.
    fn zoom_to_highlight(&mut self, s: &Session) {
        let Some(h) = &self.highlight else { return };
        let mut span: Option<(u64, u64)> = None;
        let mut first: Option<(u64, Ev)> = None;
        for (g, lanes) in h.marks.iter().enumerate() {
            for (l, marks) in lanes.iter().enumerate() {
                let lane = &s.groups[g].lanes.lanes[l];
                for &p in marks {
                    let (a, b) = (lane.start(p), lane.end(p));
                    span = Some(span.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
                    if first.map_or(true, |(t, _)| a < t) {
                        first = Some((
                            a,
                            Ev {
                                group: g,
                                lane: l,
                                pos: p,
                            },
                        ));
                    }
                }
            }
        }
        if let Some((a, b)) = span {
            self.zoom_to(a, b);
        }
        if let Some((_, e)) = first {
            self.select(s, e);
        }
    }

    /// Highlights the events of the finding under the panel's cursor and
    /// zooms to them.
    pub fn choose_finding(&mut self, s: &Session) {
        let Some(&f) = self.findings.get(self.finding_cursor) else {
            return;
        };
        let g = &s.groups[f.group];
        let Some(finding) = g.finding(f.index) else {
            return;
        };
        let mut per_group = vec![Vec::new(); s.groups.len()];
        per_group[f.group] = g.positions_of(&finding.subjects);
        let label = format!("{} {}", finding.id, short_paths(&finding.title));
        self.set_highlight(s, label, per_group);
        self.zoom_to_highlight(s);
    }

    /// Highlights the events of the line under the panel's cursor and
    /// zooms to them.
    pub fn choose_line(&mut self, s: &Session) {
        let Some(&(g, i)) = self.lines.get(self.line_cursor) else {
            return;
        };
        let gr = &s.groups[g];
        let Some(row) = gr.derived().and_then(|d| d.lines.get(i)) else {
            return;
        };
        // The same line in every trace (each MPI rank runs the same code).
        let per_group = s
            .groups
            .iter()
            .enumerate()
            .map(|(g, other)| match other.key_of_line(&row.file, row.line) {
                Some(key) => events_where(s, g, |it| other.line_of(it) == Some(key)),
                None => Vec::new(),
            })
            .collect();
        let label = match row.line {
            Some(l) => format!("{}:{l}", short(&row.file)),
            None => short(&row.file).to_string(),
        };
        self.set_highlight(s, label, per_group);
        self.zoom_to_highlight(s);
    }

    /// Highlights the events whose kernel name, variable or file:line
    /// matches the search text.
    pub fn apply_search(&mut self, s: &Session) {
        let q = self.search.trim().to_string();
        if q.is_empty() {
            self.highlight = None;
            return;
        }
        let per_group: Vec<Vec<(usize, u32)>> = s
            .groups
            .iter()
            .enumerate()
            .map(|(g, gr)| {
                let keys = gr.keys_matching(&q);
                let looks_like_line = q.contains(':') || q.parse::<u32>().is_ok();
                events_where(s, g, |it| {
                    gr.name_of(it).is_some_and(|n| n.contains(q.as_str()))
                        || (looks_like_line && gr.line_of(it).is_some_and(|k| keys.contains(&k)))
                })
            })
            .collect();
        self.set_highlight(s, format!("/{q}"), per_group);
        let n = self.highlight.as_ref().map_or(0, |h| h.count);
        if n == 0 {
            self.say(format!("nothing matches {q}"));
        } else {
            self.zoom_to_highlight(s);
        }
    }

    pub fn sort_lines(&mut self, s: &Session) {
        let mut rows: Vec<(usize, usize)> = s
            .groups
            .iter()
            .enumerate()
            .flat_map(|(g, gr)| {
                let n = gr.derived().map_or(0, |d| d.lines.len());
                (0..n).map(move |i| (g, i))
            })
            .collect();
        let key = |&(g, i): &(usize, usize)| {
            let Some(r) = s.groups[g].derived().and_then(|d| d.lines.get(i)) else {
                return 0;
            };
            match self.line_sort {
                LineSort::Time => r.time_ns,
                LineSort::Count => r.count,
                LineSort::Bytes => r.bytes,
            }
        };
        rows.sort_by(|a, b| key(b).cmp(&key(a)).then(a.cmp(b)));
        self.lines = rows;
    }

    pub fn next_line_sort(&mut self, s: &Session) {
        self.line_sort = match self.line_sort {
            LineSort::Time => LineSort::Count,
            LineSort::Count => LineSort::Bytes,
            LineSort::Bytes => LineSort::Time,
        };
        self.sort_lines(s);
        self.line_cursor = 0;
    }

    /// The arrays on the device in the middle of the selected event.
    pub fn update_present(&mut self, s: &Session) {
        let Some(e) = self.selected else {
            self.present = None;
            return;
        };
        let g = &s.groups[e.group];
        let lane = &g.lanes.lanes[e.lane];
        let at = lane.start(e.pos) + (lane.end(e.pos) - lane.start(e.pos)) / 2;
        if self
            .present
            .as_ref()
            .is_some_and(|p| p.group == e.group && p.at == at)
        {
            return;
        }
        let mut rows = Vec::new();
        let mut bytes = 0u64;
        for (id, a) in g.run.allocs() {
            let from = g.at(a.alloc_ns);
            let to = a.free_ns().map_or(u64::MAX, |f| g.at(f));
            if from <= at && at < to {
                bytes = bytes.saturating_add(a.bytes);
                let place = a.construct.map_or_else(String::new, |c| {
                    let site = g.run.site(g.run.line_site(c));
                    match site.line {
                        Some(l) => format!("{}:{l}", short(&site.file)),
                        None => short(&site.file).to_string(),
                    }
                });
                rows.push(Present {
                    name: match (g.run.alloc_name(id), a.construct) {
                        (Some(n), _) => n,
                        (None, Some(_)) => "(unnamed)".to_string(),
                        (None, None) => "?".to_string(),
                    },
                    bytes: a.bytes,
                    place,
                });
            }
        }
        rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.name.cmp(&b.name)));
        self.present = Some(PresentTable {
            group: e.group,
            at,
            rows,
            bytes,
        });
    }

    pub fn say(&mut self, text: String) {
        self.message = Some(text);
    }

    pub fn toggle_collapse(&mut self, s: &Session) {
        if s.groups.len() < 2 {
            return;
        }
        let Some(row) = self.rows.get(self.cursor) else {
            return;
        };
        let g = row.group();
        self.collapsed[g] = !self.collapsed[g];
        self.rebuild_rows(s);
        if let Some(r) = self.rows.iter().position(|&r| r == Row::Group(g)) {
            self.cursor = r;
        }
        if let Some(e) = self.selected {
            if self.collapsed[e.group] {
                self.selected = None;
            }
        }
    }

    /// The window as text: "1.20 ms .. 3.40 ms (2.20 ms)".
    pub fn window_text(&self) -> String {
        let a = self.t0.max(0.0) as u64;
        let b = self.t1().max(0.0) as u64;
        format!(
            "{} .. {} ({})",
            units::duration_ns(a),
            units::duration_ns(b),
            units::duration_ns(self.width_ns as u64)
        )
    }
}

/// The positions of group `g`'s events that `keep` says.
fn events_where(s: &Session, g: usize, keep: impl Fn(Item) -> bool) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    for (l, lane) in s.groups[g].lanes.lanes.iter().enumerate() {
        for p in 0..lane.len() as u32 {
            if keep(lane.item(p)) {
                out.push((l, p));
            }
        }
    }
    out
}

/// What `h`/`H` say of a trace with no host access.
const NO_HOST_ACCESS: &str = "no host access in this trace: it was recorded without the coherence check (or the check caught none); `accprof run --check coherence -- PROGRAM ARGS` records them";

/// `text` with every absolute path in it cut to its file name.
pub fn short_paths(text: &str) -> String {
    text.split(' ')
        .map(|w| if w.starts_with('/') { short(w) } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A path's file name.
pub fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether `tag` is a construct's.
pub fn is_construct(tag: Tag) -> bool {
    !matches!(tag, Tag::Kernel | Tag::Upload | Tag::Download | Tag::Memset)
}
