//! Rendering: reads the session and the state, draws into a buffer, never
//! changes either. [`layout`] is shared with the input handling (the mouse
//! needs to know where the lanes are).

mod details;
mod layout;
mod panels;
mod timeline;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

use crate::data::Session;
use crate::state::{Focus, State};
use crate::style::Palette;

pub use layout::{first_row, layout, open_state, Areas, LABEL_WIDTH, MIN_HEIGHT, MIN_WIDTH};

/// Draws the whole screen.
pub fn render(session: &Session, state: &State, palette: Palette, area: Rect, buf: &mut Buffer) {
    let Some(a) = layout(area, state) else {
        too_small(area, buf);
        return;
    };
    timeline::render(session, state, palette, &a, buf);
    details::render(session, state, palette, a.details, buf);
    if let Some(p) = a.panel {
        panels::render_panel(session, state, palette, p, buf);
    }
    if let Some(p) = a.present {
        panels::render_present(session, state, palette, p, buf);
    }
    panels::render_status(session, state, palette, a.status, buf);
    if state.help {
        help(area, palette, buf);
    }
}

fn too_small(area: Rect, buf: &mut Buffer) {
    let text = format!(
        "Terminal too small: {}x{}; the timeline needs at least {MIN_WIDTH}x{MIN_HEIGHT}. (q quits)",
        area.width, area.height
    );
    Paragraph::new(text)
        .wrap(Wrap { trim: true })
        .render(area, buf);
}

/// The keys, as the help overlay lists them.
pub const KEYS: &[(&str, &str)] = &[
    ("left right", "pan (mouse: drag)"),
    ("+ -", "zoom in, out (mouse: wheel)"),
    ("0 / Home", "fit all"),
    ("z", "zoom to the selected event"),
    ("up down", "move between lanes"),
    ("Enter", "select the event at the center; choose the entry"),
    (", .", "previous, next event in the lane"),
    ("n N", "next, previous event of the same kind"),
    ("s S", "next, previous event of the same source line"),
    ("k K", "next, previous launch of the same kernel"),
    ("h H", "next, previous host access (--check coherence)"),
    ("] [", "next, previous highlighted event"),
    ("f", "findings panel (ranked by cost)"),
    ("l", "summary by source line (o: by time, count, bytes)"),
    ("p", "hide the panel"),
    ("Tab", "move between the timeline and the panel"),
    ("/", "search a kernel, variable or file:line"),
    (
        "c",
        "collapse or expand a trace's lanes (Enter on its row too)",
    ),
    ("Esc", "clear the highlight / close"),
    ("?", "this help"),
    ("q", "quit"),
];

fn help(area: Rect, palette: Palette, buf: &mut Buffer) {
    let texts: Vec<String> = KEYS.iter().map(|(k, v)| format!(" {k:<12} {v}")).collect();
    // As wide as the longest line and the borders, as the terminal allows.
    let widest = texts.iter().map(|t| t.chars().count()).max().unwrap_or(0);
    let w = (widest as u16 + 3).min(area.width);
    let h = (KEYS.len() as u16 + 4).min(area.height);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    Clear.render(r, buf);
    let mut lines: Vec<Line> = texts.into_iter().map(Line::from).collect();
    lines.push(Line::from(""));
    lines.push(Line::from(" Press ? or Esc to close."));
    Paragraph::new(lines)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(" accprof tui: keys ")
                .title_style(palette.title()),
        )
        .render(r, buf);
}

/// Whether the search prompt is open.
pub fn searching(state: &State) -> bool {
    state.focus == Focus::Search
}

/// The buffer's text, one line per row, trailing blanks removed (for tests
/// and the benchmark).
pub fn buffer_text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.y..area.y + area.height {
        let mut line = String::new();
        for x in area.x..area.x + area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
