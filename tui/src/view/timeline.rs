//! The ruler, the row of finding marks and the lanes. Every lane is drawn
//! column by column from its aggregated cells ([`crate::lanes::Lane::cells`]):
//! the cost follows the screen, not the number of events.

use accprof_analyzer::ledger::{Account, Ledger, LedgerRow};
use accprof_analyzer::units;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use super::layout::{first_row, Areas};
use crate::data::Session;
use crate::lanes::{Cell, LaneKind, Side, Tag};
use crate::state::{Focus, Row, State};
use crate::style::{full_glyph, Palette, LEVELS};

pub fn render(session: &Session, state: &State, palette: Palette, a: &Areas, buf: &mut Buffer) {
    let width = a.lanes.width as usize;
    let per_col = state.width_ns / width.max(1) as f64;
    header(session, state, palette, a.header, buf);
    ruler(state, palette, a.ruler, per_col, buf);

    let first = first_row(state, a.lanes.height as usize);
    let mut cells = vec![Cell::default(); width];
    let mut memory = vec![0u64; width];
    // Which columns hold an event some finding names, or a highlighted one.
    let mut marked = vec![false; width];
    let mut lit = vec![false; width];
    for (i, &row) in state
        .rows
        .iter()
        .enumerate()
        .skip(first)
        .take(a.lanes.height as usize)
    {
        let y = a.lanes.y + (i - first) as u16;
        let on_cursor = i == state.cursor && state.focus == Focus::Timeline;
        match row {
            Row::Group(g) if state.collapsed[g] && session.groups[g].busiest.is_some() => {
                // One row for the trace: its busiest lane, shaded by how
                // busy each column is.
                let gr = &session.groups[g];
                let l = gr.busiest.unwrap_or(0);
                let lane = &gr.lanes.lanes[l];
                let busy = lane.busy_cells(state.t0, per_col, &mut cells);
                let share = busy / state.width_ns.max(1.0);
                let text = format!("▸ {} {}\t{}", gr.short, lane.label, percent(share));
                label(buf, a.labels, y, &text, on_cursor, false, palette);
                for (c, cell) in cells.iter().enumerate() {
                    if cell.first != u32::MAX {
                        let x = a.lanes.x + c as u16;
                        let style = palette.tag(lane.tag(cell.first));
                        buf.set_string(x, y, device_glyph(cell), style);
                    }
                }
            }
            Row::Group(g) => {
                let gr = &session.groups[g];
                let sign = if state.collapsed[g] { "▸" } else { "▾" };
                let n = gr.lanes.lanes.len() + usize::from(!gr.lanes.memory.is_empty());
                // How the program ended, when it did not end well (the
                // signal, the driver call and the construct it died in).
                let ending = gr
                    .run
                    .facts()
                    .ending_text()
                    .map(|e| format!("  ✕ {e}"))
                    .unwrap_or_default();
                let text = format!(
                    "{sign} {}  pid {}  {n} lane{}{ending}",
                    gr.label,
                    gr.run.process.header.pid,
                    if n == 1 { "" } else { "s" }
                );
                let style = if on_cursor {
                    palette.cursor()
                } else {
                    palette.group()
                };
                buf.set_stringn(
                    a.labels.x,
                    y,
                    &text,
                    (a.labels.width + a.lanes.width) as usize,
                    style,
                );
            }
            Row::Lane(g, l) => {
                let gr = &session.groups[g];
                let lane = &gr.lanes.lanes[l];
                let sel = state.selected.filter(|e| e.group == g && e.lane == l);
                // How busy the lane is in the window, from its index.
                let busy = lane.busy_cells(state.t0, per_col, &mut cells);
                let share = busy / state.width_ns.max(1.0);
                let text = format!("{}\t{}", lane.label, percent(share));
                label(buf, a.labels, y, &text, on_cursor, sel.is_some(), palette);
                // A device lane holds one kind of event: its shades tell
                // how busy each column is (a host thread's tell kinds).
                let device = !matches!(lane.kind, LaneKind::Thread { .. });
                let marks = gr.derived().map_or(&[][..], |d| d.marks[l].as_slice());
                let lit_marks = state
                    .highlight
                    .as_ref()
                    .map(|h| h.marks[g][l].as_slice())
                    .unwrap_or(&[]);
                for (c, cell) in cells.iter().enumerate() {
                    if cell.first == u32::MAX {
                        continue;
                    }
                    let x = a.lanes.x + c as u16;
                    let (lo, hi) = (cell.first, cell.end.max(cell.first + 1));
                    // A host access shows over whatever else starts there.
                    let col_start = state.t0 + c as f64 * per_col;
                    let instant = lane.instant_in(lo, hi, col_start, col_start + per_col);
                    let tag = lane.tag(instant.unwrap_or(cell.first));
                    let glyph = if device {
                        device_glyph(cell)
                    } else if cell.fill >= 5 || tag == Tag::Mpi || instant.is_some() {
                        // (An MPI call or an instant keeps its own glyph
                        // however short.)
                        full_glyph(tag)
                    } else {
                        half_glyph(cell).unwrap_or(full_glyph(tag))
                    };
                    let mut style = palette.tag(tag);
                    if any_in(marks, lo, hi) {
                        style = palette.marked(style);
                        marked[c] = true;
                    }
                    if any_in(lit_marks, lo, hi) {
                        style = palette.highlighted(style);
                        lit[c] = true;
                    }
                    if sel.is_some_and(|e| e.pos >= lo && e.pos < hi) {
                        style = palette.selected(style);
                    }
                    buf.set_string(x, y, glyph, style);
                }
            }
            Row::Memory(g) => {
                let gr = &session.groups[g];
                label(buf, a.labels, y, "device memory", on_cursor, false, palette);
                gr.lanes.memory.columns(state.t0, per_col, &mut memory);
                let peak = gr.lanes.memory.peak.max(1);
                for (c, &v) in memory.iter().enumerate() {
                    let level = ((v as f64 / peak as f64) * 8.0).ceil() as usize;
                    let level = if v > 0 { level.clamp(1, 8) } else { 0 };
                    if level > 0 {
                        buf.set_string(a.lanes.x + c as u16, y, LEVELS[level], palette.memory());
                    }
                }
            }
        }
    }
    // The marks row sums up the lanes that are off screen too: it is made
    // of every lane, not only those drawn.
    for (g, gr) in session.groups.iter().enumerate() {
        if state.collapsed[g] {
            continue;
        }
        for (l, lane) in gr.lanes.lanes.iter().enumerate() {
            let lit_marks = state
                .highlight
                .as_ref()
                .map(|h| h.marks[g][l].as_slice())
                .unwrap_or(&[]);
            let marks = gr.derived().map_or(&[][..], |d| d.marks[l].as_slice());
            if marks.is_empty() && lit_marks.is_empty() {
                continue;
            }
            lane.cells(state.t0, per_col, &mut cells);
            for (c, cell) in cells.iter().enumerate() {
                if cell.first == u32::MAX {
                    continue;
                }
                let (lo, hi) = (cell.first, cell.end.max(cell.first + 1));
                marked[c] |= any_in(marks, lo, hi);
                lit[c] |= any_in(lit_marks, lo, hi);
            }
        }
    }
    for c in 0..width {
        let x = a.marks.x + c as u16;
        if lit[c] {
            buf.set_string(x, a.marks.y, "◆", palette.highlight_glyph());
        } else if marked[c] {
            buf.set_string(x, a.marks.y, "▾", palette.mark_glyph());
        }
    }
    let note = "findings ▾";
    if a.marks.width as usize > note.len() + 2 {
        buf.set_string(
            a.marks.x.saturating_sub(note.chars().count() as u16 + 1),
            a.marks.y,
            note,
            palette.dim(),
        );
    }
}

/// The header: how the run at the cursor ended when it did not end well,
/// and where its wall time went, from its ledger (the busiest host thread's, as `analyze` opens with).
fn header(session: &Session, state: &State, palette: Palette, area: Rect, buf: &mut Buffer) {
    let g = state.rows.get(state.cursor).map_or(0, |r| r.group());
    let Some(gr) = session.groups.get(g) else {
        return;
    };
    let mut text = String::new();
    if session.groups.len() > 1 {
        text.push_str(&gr.short);
        text.push_str("  ");
    }
    // A run that died says so first: what hit it, where.
    if let Some(e) = gr.run.facts().ending_text() {
        text.push_str(&format!("✕ {e}  │  "));
    }
    text.push_str(&ledger_text(gr.run.ledger()));
    buf.set_stringn(area.x, area.y, &text, area.width as usize, palette.title());
}

/// "wall 3.25 s: program 3%, constructs 93% (allocation 61%, wait 16%,
/// ...), MPI 4%": the ledger's rows ([`Ledger::rows_of`]) in short: the
/// program's and the constructs' and, inside constructs, their three
/// largest parts, then MPI calls and CUDA driver calls outside
/// constructs, each a share of the wall time.
pub fn ledger_text(l: &Ledger) -> String {
    use std::fmt::Write as _;
    let mut out = format!("wall {}", units::duration_ns(l.wall_ns));
    let Some(t) = l.main_thread() else {
        return out;
    };
    let rows = l.rows_of(t);
    let share = |ns: u64| percent(ns as f64 / l.wall_ns.max(1) as f64);
    let short = |r: &LedgerRow| format!("{} {}", r.account.short(), share(r.ns));
    let top: Vec<String> = rows
        .iter()
        .filter(|r| matches!(r.account, Account::Program | Account::Constructs))
        .map(short)
        .collect();
    let _ = write!(out, ": {}", top.join(", "));
    let mut inside: Vec<&LedgerRow> = rows
        .iter()
        .filter(|r| r.account.in_constructs() && r.ns > 0)
        .collect();
    // The largest first (of equal ones, the collector's); the small ones
    // stand in an ellipsis.
    inside.sort_by_key(|r| (std::cmp::Reverse(r.ns), r.account != Account::Collector));
    if !inside.is_empty() {
        let shown: Vec<String> = inside.iter().take(3).map(|r| short(r)).collect();
        let more = if inside.len() > 3 { ", ..." } else { "" };
        let _ = write!(out, " ({}{more})", shown.join(", "));
    }
    for r in &rows {
        if matches!(r.account, Account::Mpi | Account::CudaOutside) {
            let _ = write!(out, ", {}", short(r));
        }
    }
    out
}

/// A share as a whole percentage; "<1%" for a little busy time, so that
/// only an idle lane reads 0%.
fn percent(share: f64) -> String {
    let p = (share * 100.0).clamp(0.0, 100.0);
    if p > 0.0 && p < 1.0 {
        "<1%".to_string()
    } else {
        format!("{:.0}%", p)
    }
}

/// The half block of a column whose events sit in one half of it.
fn half_glyph(cell: &Cell) -> Option<&'static str> {
    match cell.side {
        Side::Left => Some("▌"),
        Side::Right => Some("▐"),
        Side::Both => None,
    }
}

/// A device lane's column by how much of it the lane was busy: full,
/// a half block where its events fill most of one half, else a shade
/// (light for any busy time at all, dark for most of the column).
fn device_glyph(cell: &Cell) -> &'static str {
    match cell.busy {
        7.. => "█",
        b if (3..=4).contains(&cell.fill) && b + 1 >= cell.fill => half_glyph(cell).unwrap_or("▓"),
        5.. => "▓",
        3.. => "▒",
        _ => "░",
    }
}

/// A lane's label; text after a tab goes to the right edge.
fn label(
    buf: &mut Buffer,
    area: Rect,
    y: u16,
    text: &str,
    cursor: bool,
    selected: bool,
    palette: Palette,
) {
    let mut style = Style::default();
    if selected {
        style = palette.title();
    }
    if cursor {
        style = palette.cursor();
    }
    let w = area.width as usize - 1;
    let lead = if selected { "▶" } else { " " };
    let text = match text.split_once('\t') {
        Some((left, right)) => {
            let room = (w - 1).saturating_sub(right.chars().count() + 1);
            // A cut label says so: "thread 2…" is not thread 2.
            let left: String = if left.chars().count() > room {
                let mut cut: String = left.chars().take(room.saturating_sub(1)).collect();
                cut.push('…');
                cut
            } else {
                left.to_string()
            };
            format!("{lead}{left:<room$} {right}")
        }
        None => format!("{lead}{text:<w$}", w = w - 1),
    };
    buf.set_stringn(area.x, y, &text, w, style);
}

/// Whether a sorted list holds a value in `lo..hi`.
fn any_in(sorted: &[u32], lo: u32, hi: u32) -> bool {
    let i = sorted.partition_point(|&p| p < lo);
    i < sorted.len() && sorted[i] < hi
}

/// Ticks at a round step. The first is labelled with the time since the
/// first trace began, the others with their distance from it, so that
/// ticks microseconds apart late in a long run still read apart.
fn ruler(state: &State, palette: Palette, area: Rect, per_col: f64, buf: &mut Buffer) {
    let min_cols = 14.0;
    let step = nice_step(per_col * min_cols);
    let first = (state.t0.max(0.0) / step).ceil() * step;
    let mut t = first;
    let mut last_end: i64 = -1;
    while t < state.t1() {
        let c = ((t - state.t0) / per_col).round() as i64;
        let text = if t == first {
            format!("|{}", units::duration_ns(t as u64))
        } else {
            format!("|+{}", units::duration_ns((t - first) as u64))
        };
        let len = text.chars().count() as i64;
        if c >= 0 && c + len <= area.width as i64 && c > last_end {
            buf.set_string(area.x + c as u16, area.y, &text, palette.dim());
            last_end = c + len;
        }
        t += step;
    }
}

/// The smallest of 1, 2, 5 times a power of ten at least `min` (ns).
fn nice_step(min: f64) -> f64 {
    let min = min.max(1.0);
    let p = 10f64.powf(min.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if p * m >= min {
            return p * m;
        }
    }
    p * 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ruler_steps_are_round() {
        assert_eq!(nice_step(13.0), 20.0);
        assert_eq!(nice_step(4_100.0), 5_000.0);
        assert_eq!(nice_step(100.0), 100.0);
    }

    #[test]
    fn a_range_holds_a_mark_only_inside() {
        assert!(any_in(&[3, 9], 2, 4));
        assert!(!any_in(&[3, 9], 4, 9));
        assert!(any_in(&[3, 9], 9, 10));
    }
}
