//! Input to state: each key or mouse event becomes one of the state's
//! operations. Nothing here draws.

use ratatui::crossterm::event::{
    Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Rect;

use crate::data::Session;
use crate::state::{Focus, Panel, Row, State};
use crate::view;

/// What the loop does after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Continue,
    Quit,
}

/// Applies `event` to the state; `area` is the screen's size now.
pub fn update(s: &Session, st: &mut State, area: Rect, event: &Event) -> Control {
    match event {
        Event::Key(k) if k.kind != KeyEventKind::Release => key(s, st, area, k),
        Event::Mouse(m) => {
            mouse(s, st, area, m);
            Control::Continue
        }
        _ => Control::Continue,
    }
}

fn key(s: &Session, st: &mut State, area: Rect, k: &KeyEvent) -> Control {
    if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
        return Control::Quit;
    }
    st.message = None;
    if st.help {
        if matches!(
            k.code,
            KeyCode::Char('?') | KeyCode::Esc | KeyCode::Char('q')
        ) {
            st.help = false;
        }
        return Control::Continue;
    }
    if st.focus == Focus::Search {
        match k.code {
            KeyCode::Esc => {
                st.focus = Focus::Timeline;
                st.search.clear();
            }
            KeyCode::Enter => {
                st.focus = Focus::Timeline;
                st.apply_search(s);
            }
            KeyCode::Backspace => {
                st.search.pop();
            }
            KeyCode::Char(c) => st.search.push(c),
            _ => {}
        }
        return Control::Continue;
    }
    let lanes_h = view::layout(area, st).map_or(1, |a| a.lanes.height as usize);
    match k.code {
        KeyCode::Char('q') => return Control::Quit,
        KeyCode::Char('?') => st.help = true,
        KeyCode::Esc => {
            if st.focus == Focus::Panel {
                st.focus = Focus::Timeline;
            } else if st.highlight.is_some() {
                st.highlight = None;
            } else {
                st.selected = None;
            }
        }
        KeyCode::Left => st.pan(-0.125),
        KeyCode::Right => st.pan(0.125),
        KeyCode::Char('+') | KeyCode::Char('=') => st.zoom(0.5, 0.5),
        KeyCode::Char('-') | KeyCode::Char('_') => st.zoom(2.0, 0.5),
        KeyCode::Char('0') | KeyCode::Home => st.fit_all(s),
        KeyCode::Char('z') => st.zoom_to_selection(s),
        KeyCode::Char(',') | KeyCode::Char('<') => st.step(s, false),
        KeyCode::Char('.') | KeyCode::Char('>') => st.step(s, true),
        KeyCode::Char('n') => st.jump_same_kind(s, true),
        KeyCode::Char('N') => st.jump_same_kind(s, false),
        KeyCode::Char('s') => st.jump_same_line(s, true),
        KeyCode::Char('S') => st.jump_same_line(s, false),
        KeyCode::Char('k') => st.jump_same_kernel(s, true),
        KeyCode::Char('K') => st.jump_same_kernel(s, false),
        KeyCode::Char('h') => st.jump_host_access(s, true),
        KeyCode::Char('H') => st.jump_host_access(s, false),
        KeyCode::Char(']') => st.jump_highlighted(s, true),
        KeyCode::Char('[') => st.jump_highlighted(s, false),
        KeyCode::Char('f') => open_panel(st, Panel::Findings),
        KeyCode::Char('l') => open_panel(st, Panel::Lines),
        KeyCode::Char('o') if st.panel == Some(Panel::Lines) => st.next_line_sort(s),
        KeyCode::Char('p') => {
            st.panel = None;
            st.focus = Focus::Timeline;
        }
        KeyCode::Tab | KeyCode::BackTab => {
            st.focus = match (st.focus, st.panel) {
                (Focus::Timeline, Some(_)) => Focus::Panel,
                _ => Focus::Timeline,
            }
        }
        KeyCode::Char('/') => {
            st.focus = Focus::Search;
            st.search.clear();
        }
        KeyCode::Char('c') => st.toggle_collapse(s),
        KeyCode::Up => move_cursor(s, st, -1, lanes_h),
        KeyCode::Down => move_cursor(s, st, 1, lanes_h),
        KeyCode::PageUp => move_cursor(s, st, -(lanes_h as i64), lanes_h),
        KeyCode::PageDown => move_cursor(s, st, lanes_h as i64, lanes_h),
        KeyCode::Enter | KeyCode::Char(' ') => match st.focus {
            Focus::Panel => match st.panel {
                Some(Panel::Lines) => st.choose_line(s),
                _ => st.choose_finding(s),
            },
            // A trace's row opens (or closes) its lanes.
            _ if matches!(st.rows.get(st.cursor), Some(Row::Group(_))) => st.toggle_collapse(s),
            _ => st.select_at_center(s),
        },
        _ => {}
    }
    Control::Continue
}

fn open_panel(st: &mut State, p: Panel) {
    st.panel = Some(p);
    st.focus = Focus::Panel;
}

fn move_cursor(s: &Session, st: &mut State, by: i64, lanes_h: usize) {
    if st.focus == Focus::Panel {
        let (cursor, len) = match st.panel {
            Some(Panel::Lines) => (&mut st.line_cursor, st.lines.len()),
            _ => (&mut st.finding_cursor, st.findings.len()),
        };
        *cursor = (*cursor as i64 + by).clamp(0, len.saturating_sub(1) as i64) as usize;
        return;
    }
    let _ = s;
    let last = st.rows.len().saturating_sub(1) as i64;
    st.cursor = (st.cursor as i64 + by).clamp(0, last) as usize;
    st.scroll = view::first_row(st, lanes_h);
}

fn mouse(s: &Session, st: &mut State, area: Rect, m: &MouseEvent) {
    let Some(a) = view::layout(area, st) else {
        return;
    };
    let inside = |r: Rect| {
        m.column >= r.x && m.column < r.x + r.width && m.row >= r.y && m.row < r.y + r.height
    };
    let lanes = a.lanes;
    let share =
        |col: u16| (f64::from(col.saturating_sub(lanes.x)) + 0.5) / f64::from(lanes.width.max(1));
    match m.kind {
        MouseEventKind::ScrollUp if inside(lanes) || inside(a.ruler) => {
            st.zoom(0.8, share(m.column))
        }
        MouseEventKind::ScrollDown if inside(lanes) || inside(a.ruler) => {
            st.zoom(1.25, share(m.column))
        }
        MouseEventKind::ScrollUp if inside(a.labels) => {
            move_cursor(s, st, -1, lanes.height as usize)
        }
        MouseEventKind::ScrollDown if inside(a.labels) => {
            move_cursor(s, st, 1, lanes.height as usize)
        }
        MouseEventKind::Down(MouseButton::Left) if inside(lanes) => {
            st.drag = Some((m.column, st.t0));
            let row = view::first_row(st, lanes.height as usize) + usize::from(m.row - lanes.y);
            if row < st.rows.len() {
                st.cursor = row;
                st.focus = Focus::Timeline;
                let per_col = st.width_ns / f64::from(lanes.width.max(1));
                let a = st.t0 + per_col * f64::from(m.column.saturating_sub(lanes.x));
                st.select_in_column(s, row, a, a + per_col);
            }
        }
        MouseEventKind::Drag(MouseButton::Left) => {
            if let Some((col, t0)) = st.drag {
                let per_col = st.width_ns / f64::from(lanes.width.max(1));
                st.t0 = t0 - (f64::from(m.column) - f64::from(col)) * per_col;
            }
        }
        MouseEventKind::Up(_) => st.drag = None,
        _ => {}
    }
}
