//! The selected event: what it is, where in the source (with the lines
//! around it when the source was found), its numbers and its findings.

use accprof_analyzer::units;
use accprof_analyzer::vocabulary::CoherenceKind;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use crate::data::{Group, Session};
use crate::lanes::Item;
use crate::state::{short, State};
use crate::style::Palette;

pub fn render(session: &Session, state: &State, palette: Palette, area: Rect, buf: &mut Buffer) {
    let block = Block::default()
        .borders(Borders::TOP)
        .title(" selected ")
        .title_style(palette.title());
    let inner = block.inner(area);
    block.render(area, buf);
    let lines = match state.selected {
        None => overview(session, state, palette, inner.height as usize),
        Some(e) => {
            let g = &session.groups[e.group];
            let lane = &g.lanes.lanes[e.lane];
            describe(
                g,
                lane.item(e.pos),
                lane.start(e.pos),
                palette,
                inner.height as usize,
            )
        }
    };
    Paragraph::new(lines).render(inner, buf);
}

/// With nothing selected: whether the coherence check ran, and where the
/// time goes, by source line.
fn overview(session: &Session, state: &State, palette: Palette, rows: usize) -> Vec<Line<'static>> {
    let mut out = vec![Line::from(
        " Nothing selected: Enter or a click selects an event; ? lists the keys.",
    )];
    out.extend(check_lines(session).into_iter().map(Line::from));
    if !session.analyzed() {
        out.push(Line::from(
            " (working out the findings and the time by line ...)",
        ));
        return out;
    }
    let mut by_time: Vec<(usize, usize)> = state.lines.clone();
    let time = |&(g, i): &(usize, usize)| {
        session.groups[g]
            .derived()
            .and_then(|d| d.lines.get(i))
            .map_or(0, |r| r.time_ns)
    };
    by_time.sort_by_key(|x| std::cmp::Reverse(time(x)));
    out.push(Line::styled(
        " Where the time goes (device time by source line, else host time):",
        palette.title(),
    ));
    let several = session.groups.len() > 1;
    for &(g, i) in by_time.iter().take(rows.saturating_sub(2)) {
        let gr = &session.groups[g];
        let Some(r) = gr.derived().and_then(|d| d.lines.get(i)) else {
            continue;
        };
        let place = match r.line {
            Some(l) => format!("{}:{l}", short(&r.file)),
            None => short(&r.file).to_string(),
        };
        let rank = if several {
            format!("  {}", gr.label)
        } else {
            String::new()
        };
        out.push(Line::from(format!(
            "  {:>9}  {place:<24} x{:<6} {:>10}{rank}",
            units::duration_ns(r.time_ns),
            r.count,
            units::bytes(r.bytes)
        )));
    }
    out
}

/// The coherence check's state: one line when every run says the same,
/// else one per run.
fn check_lines(session: &Session) -> Vec<String> {
    let lines: Vec<String> = session
        .groups
        .iter()
        .map(|g| g.run.facts().check.line())
        .collect();
    if lines.windows(2).all(|w| w[0] == w[1]) {
        return lines.into_iter().take(1).map(|l| format!(" {l}")).collect();
    }
    session
        .groups
        .iter()
        .zip(lines)
        .map(|(g, l)| format!(" {}: {l}", g.label))
        .collect()
}

/// The lines describing `item`, `rows` at most.
fn describe(
    g: &Group,
    item: Item,
    start: u64,
    palette: Palette,
    rows: usize,
) -> Vec<Line<'static>> {
    let run = &g.run;
    let head;
    let mut facts: Vec<String> = Vec::new();
    match item {
        Item::Construct(c) => {
            let con = run.construct(c);
            let what = match (con.kind, con.class) {
                (_, accprof_analyzer::ConstructClass::ApiCall(r)) => run.routine(r).to_string(),
                (Some(k), _) => format!("{k:?}").to_lowercase(),
                (None, class) => format!("{class:?}").to_lowercase(),
            };
            head = format!("{what}{}", if con.implicit { " (implicit)" } else { "" });
            let host = con
                .host_ns()
                .map_or("not ended".to_string(), units::duration_ns);
            facts.push(format!(
                "start {}  host {}  thread {}{}",
                units::duration_ns(start),
                host,
                con.thread,
                // Negative queues are the synchronous and default ones.
                con.async_queue()
                    .filter(|&q| q >= 0)
                    .map_or(String::new(), |q| format!("  async {q}"))
            ));
            let k = run.kernels_of(c).len();
            let x = run.transfers_of(c);
            let bytes: u64 = x.iter().map(|&t| run.transfer(t).bytes).sum();
            if k + x.len() > 0 {
                facts.push(format!(
                    "{k} kernels, {} transfers ({})",
                    x.len(),
                    units::bytes(bytes)
                ));
            }
            if let Some(l) = run.launches_of(c).next() {
                facts.push(launch_text(&l));
            }
        }
        Item::Kernel(k) => {
            let ker = run.kernel(k);
            head = format!("kernel {}", run.name(ker.name));
            let dev = if ker.device_timed() {
                units::duration_ns(ker.device_ns())
            } else {
                "not timed (no CUPTI)".to_string()
            };
            let launch = ker.construct.and_then(|c| {
                run.launches_of(c)
                    .find(|l| l.kernel_name == Some(ker.name) || l.kernel_name.is_none())
            });
            let host = launch
                .as_ref()
                .and_then(|l| {
                    l.end_ns()
                        .map(|e| units::duration_ns(e.saturating_sub(l.start_ns)))
                })
                .unwrap_or_else(|| "-".into());
            facts.push(format!(
                "start {}  device {dev}  host (launch) {host}  dev {} queue {}",
                units::duration_ns(start),
                ker.device,
                ker.stream
            ));
            let mut shape = format!(
                "grid {}x{}x{}  block {}x{}x{}",
                ker.grid[0], ker.grid[1], ker.grid[2], ker.block[0], ker.block[1], ker.block[2]
            );
            if let Some(l) = &launch {
                shape.push_str("  ");
                shape.push_str(&launch_text(l));
            }
            if ker.registers > 0 {
                shape.push_str(&format!("  {} regs", ker.registers));
            }
            facts.push(shape);
        }
        Item::Transfer(t) => {
            let x = run.transfer(t);
            let dir = match x.kind {
                accprof_analyzer::vocabulary::CopyKind::HostToDevice => "host->device copy",
                accprof_analyzer::vocabulary::CopyKind::DeviceToHost => "device->host copy",
                _ => "copy",
            };
            let var = run.variable(t).unwrap_or("(unnamed)").to_string();
            head = format!("{dir} of {var}");
            let rate = units::rate(x.bytes, x.duration_ns()).unwrap_or_else(|| "-".into());
            let timed = match x.source {
                accprof_analyzer::TransferSource::Cupti => "device",
                accprof_analyzer::TransferSource::AccProf => "host",
            };
            facts.push(format!(
                "start {}  {timed} {}  {}  {rate}",
                units::duration_ns(start),
                units::duration_ns(x.duration_ns()),
                units::bytes(x.bytes)
            ));
        }
        Item::MpiCall(m) => {
            let call = run.mpi_call(m);
            head = call.routine.clone();
            facts.push(format!(
                "start {}  host {}  {}  thread {}",
                units::duration_ns(start),
                units::duration_ns(call.end_ns.saturating_sub(call.start_ns)),
                units::bytes(call.bytes()),
                call.thread
            ));
        }
        Item::HostAccess(id) => {
            let a = run.host_access(id);
            let var = run.access_variable(id).unwrap_or("(unnamed)");
            head = format!("{} of {var}", a.kind.label());
            let confirmed = match (a.kind, a.confirmed) {
                // (Nothing to compare: the host read none of it.)
                (CoherenceKind::UnreadDownload, _) => "not read before the next download",
                (_, true) => "confirmed: the device copy differs",
                (_, false) => "not confirmed: the device copy was not read",
            };
            facts.push(format!(
                "at {}  thread {}  {confirmed}",
                units::duration_ns(start),
                a.thread,
            ));
            let offset = match a.kind {
                CoherenceKind::UnreadDownload => String::new(),
                _ => format!(
                    "  offset {} ({:#x})",
                    a.host_addr.saturating_sub(a.range_start),
                    a.host_addr
                ),
            };
            facts.push(format!(
                "range {:#x} {}{offset}",
                a.range_start,
                units::bytes(a.range_bytes)
            ));
            let by = match a.kind {
                CoherenceKind::StaleRead => "written by",
                CoherenceKind::LostWrite => "device copy used by",
                CoherenceKind::UnreadDownload => "downloaded by",
            };
            let construct = a.construct.map_or("(not in the trace)".to_string(), |c| {
                let con = run.construct(c);
                let what = con.kind.map_or_else(
                    || format!("{:?}", con.class).to_lowercase(),
                    |k| format!("{k:?}").to_lowercase(),
                );
                format!("{what} at {}", place_of(run.site(run.line_site(c))))
            });
            facts.push(format!("{by} {construct}"));
        }
        Item::Memset(m) => {
            let s = run.memset(m);
            head = "memset".to_string();
            facts.push(format!(
                "start {}  device {}  {}  dev {} queue {}",
                units::duration_ns(start),
                units::duration_ns(s.duration_ns()),
                units::bytes(s.bytes),
                s.device,
                s.stream
            ));
        }
    }
    let site = g.site_of(item).map(|s| run.site(s).clone());
    let place = site
        .as_ref()
        .map_or("(no source line)".to_string(), place_of);
    let mut out = vec![Line::from(vec![
        Span::styled(format!(" {head}"), palette.title()),
        Span::raw(format!("  at {place}")),
    ])];
    out.extend(facts.into_iter().map(|f| Line::from(format!(" {f}"))));
    let findings = findings_of(g, item);
    if !findings.is_empty() {
        out.push(Line::from(format!(" findings: {}", findings.join(", "))));
    }
    // The source around the line, as many lines as fit.
    if let Some(s) = &site {
        if let (Some(line), Some(file)) = (s.line, g.sources.get(&s.file)) {
            let room = rows.saturating_sub(out.len());
            if room > 0 {
                let before = (room.saturating_sub(1) / 2) as u32;
                let from = line.saturating_sub(before).max(1);
                for n in from..from + room as u32 {
                    let text = file.line(n);
                    if text.is_empty() && n > line {
                        break;
                    }
                    let mark = if n == line { ">" } else { " " };
                    let l = Line::from(format!("{mark}{n:>5} | {}", text.trim_end()));
                    out.push(if n == line {
                        l.style(palette.title())
                    } else {
                        l
                    });
                }
            }
        }
    }
    out.truncate(rows);
    out
}

/// "laplace.c:154 (main)".
fn place_of(s: &accprof_analyzer::Site) -> String {
    match s.line {
        Some(l) => format!("{}:{l} ({})", short(&s.file), s.function),
        None => format!("{} ({})", short(&s.file), s.function),
    }
}

fn launch_text(l: &accprof_analyzer::model::LaunchRequest) -> String {
    let f = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    format!(
        "gangs {} workers {} vector {}",
        f(l.gangs()),
        f(l.workers()),
        f(l.vector_length())
    )
}

/// "L3 #1" for each finding (rank in its run's list) that names the event.
fn findings_of(g: &Group, item: Item) -> Vec<String> {
    let construct = g.construct_of(item);
    let Some(d) = g.derived() else {
        return vec!["(still analyzing)".to_string()];
    };
    d.analysis
        .findings
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            let s = &f.subjects;
            match item {
                Item::Kernel(k) => s.kernels.binary_search(&k).is_ok(),
                Item::Transfer(t) => s.transfers.binary_search(&t).is_ok(),
                Item::Construct(c) => s.constructs.binary_search(&c).is_ok(),
                Item::Memset(_) | Item::MpiCall(_) | Item::HostAccess(_) => {
                    construct.is_some_and(|c| s.constructs.binary_search(&c).is_ok())
                }
            }
        })
        .map(|(i, f)| format!("{} #{}", f.id, i + 1))
        .collect()
}
