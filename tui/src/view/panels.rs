//! The side panel (findings ranked by cost, or the summary by source
//! line), the present table and the status line.

use accprof_analyzer::units;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use crate::data::Session;
use crate::state::{short, Focus, Panel, Row, State};
use crate::style::Palette;

pub fn render_panel(
    session: &Session,
    state: &State,
    palette: Palette,
    area: Rect,
    buf: &mut Buffer,
) {
    let focused = state.focus == Focus::Panel;
    let (title, items, cursor) = match state.panel {
        Some(Panel::Lines) => (
            format!(" lines by {} (o) ", state.line_sort.label()),
            line_items(session, state),
            state.line_cursor,
        ),
        _ => (
            if session.analyzed() {
                format!(" findings ({}) by cost ", state.findings.len())
            } else {
                " findings (analyzing) ".to_string()
            },
            finding_items(session, state),
            state.finding_cursor,
        ),
    };
    let block = Block::default()
        .borders(Borders::LEFT | Borders::TOP)
        .title(title)
        .title_style(if focused {
            palette.cursor()
        } else {
            palette.title()
        });
    let inner = block.inner(area);
    block.render(area, buf);
    if items.is_empty() {
        let text = match state.panel {
            _ if !session.analyzed() => " analyzing ...",
            Some(Panel::Lines) => " no source lines",
            _ => " no findings",
        };
        Paragraph::new(text).render(inner, buf);
        return;
    }
    // Each entry takes two rows: what and where.
    let per = 2usize;
    let fit = (inner.height as usize / per).max(1);
    let first = cursor.saturating_sub(fit - 1);
    let w = inner.width as usize;
    for (i, (a, b)) in items.iter().enumerate().skip(first).take(fit) {
        let y = inner.y + ((i - first) * per) as u16;
        let style = if i == cursor && focused {
            palette.cursor()
        } else if i == cursor {
            palette.title()
        } else {
            ratatui::style::Style::default()
        };
        let mark = if i == cursor { ">" } else { " " };
        buf.set_stringn(inner.x, y, format!("{mark}{a:<w$}"), w, style);
        buf.set_stringn(inner.x, y + 1, format!("   {b}"), w, palette.dim());
    }
}

fn finding_items(session: &Session, state: &State) -> Vec<(String, String)> {
    let several = session.groups.len() > 1;
    state
        .findings
        .iter()
        .enumerate()
        .filter_map(|(n, f)| {
            let g = &session.groups[f.group];
            let x = g.finding(f.index)?;
            let cost = x.cost_ns.map_or("-".to_string(), units::duration_ns);
            let first = format!(
                "{:>2} {} {cost:>8} {}",
                n + 1,
                x.id,
                crate::state::short_paths(&x.title)
            );
            let place = x
                .locations
                .first()
                .map(|l| {
                    let mut p = l.place();
                    if let Some((_, name)) = p.rsplit_once('/') {
                        p = name.to_string();
                    }
                    match &l.variable {
                        Some(v) => format!("{p} {v}"),
                        None => p,
                    }
                })
                .unwrap_or_default();
            let second = if several {
                format!("{}  {place}", g.label)
            } else {
                place
            };
            Some((first, second))
        })
        .collect()
}

fn line_items(session: &Session, state: &State) -> Vec<(String, String)> {
    let several = session.groups.len() > 1;
    state
        .lines
        .iter()
        .filter_map(|&(g, i)| {
            let gr = &session.groups[g];
            let r = gr.derived()?.lines.get(i)?;
            let place = match r.line {
                Some(l) => format!("{}:{l}", short(&r.file)),
                None => short(&r.file).to_string(),
            };
            let first = format!("{place}  {}", r.function);
            let mut second = format!(
                "{}  x{}  {}",
                units::duration_ns(r.time_ns),
                r.count,
                units::bytes(r.bytes)
            );
            if several {
                second = format!("{second}  {}", gr.label);
            }
            Some((first, second))
        })
        .collect()
}

pub fn render_present(
    session: &Session,
    state: &State,
    palette: Palette,
    area: Rect,
    buf: &mut Buffer,
) {
    let title = match &state.present {
        Some(p) => format!(
            " on the device at {}: {} ",
            units::duration_ns(p.at),
            units::bytes(p.bytes)
        ),
        None => " on the device ".to_string(),
    };
    let block = Block::default()
        .borders(Borders::LEFT | Borders::TOP)
        .title(title)
        .title_style(palette.title());
    let inner = block.inner(area);
    block.render(area, buf);
    let lines: Vec<Line> = match &state.present {
        None => vec![Line::from(" select an event to see what is present")],
        Some(p) if p.rows.is_empty() => vec![Line::from(" nothing allocated by the runtime")],
        Some(p) => {
            let mut v: Vec<Line> = p
                .rows
                .iter()
                .take(inner.height as usize)
                .map(|r| {
                    Line::from(format!(
                        " {:<12} {:>10}  {}",
                        r.name,
                        units::bytes(r.bytes),
                        r.place
                    ))
                })
                .collect();
            if p.rows.len() > inner.height as usize {
                let more = p.rows.len() - inner.height as usize + 1;
                v.truncate(inner.height as usize - 1);
                v.push(Line::from(format!(" ... {more} more")));
            }
            let _ = session;
            v
        }
    };
    Paragraph::new(lines).render(inner, buf);
}

pub fn render_status(
    session: &Session,
    state: &State,
    palette: Palette,
    area: Rect,
    buf: &mut Buffer,
) {
    if state.focus == Focus::Search {
        let text = format!(
            "/{}▏  (Enter: highlight matches, Esc: cancel; kernel, variable or file:line)",
            state.search
        );
        buf.set_stringn(area.x, area.y, text, area.width as usize, palette.title());
        return;
    }
    // Events in the window, over the lanes of the groups shown.
    let (a, b) = (state.t0.max(0.0) as u64, state.t1().max(0.0) as u64);
    let mut in_view = 0u64;
    let mut total = 0u64;
    for (g, gr) in session.groups.iter().enumerate() {
        for lane in &gr.lanes.lanes {
            total += lane.len() as u64;
            if !state.collapsed[g] {
                in_view += lane.count_in(a, b);
            }
        }
    }
    let mut parts = vec![
        format!(" {}", state.window_text()),
        format!(
            "{} of {} events",
            units::thousands(in_view),
            units::thousands(total)
        ),
    ];
    if let Some(e) = state.selected {
        let lane = &session.groups[e.group].lanes.lanes[e.lane];
        parts.push(format!(
            "selected: {} in {}",
            lane.tag(e.pos).label(),
            lane.label.trim()
        ));
    } else if let Some(Row::Lane(g, l)) = state.rows.get(state.cursor) {
        parts.push(format!(
            "lane: {}",
            session.groups[*g].lanes.lanes[*l].label.trim()
        ));
    }
    if let Some(h) = &state.highlight {
        parts.push(format!("lit: {} ({})", h.label, h.count));
    }
    if let Some(m) = &state.message {
        parts.push(m.clone());
    }
    parts.push("? help  q quit".to_string());
    let text = parts.join(" │ ");
    buf.set_stringn(area.x, area.y, text, area.width as usize, palette.cursor());
}
