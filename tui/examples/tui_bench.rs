//! The timeline's speed on a trace: load, index, first frame and redraws
//! on ratatui's TestBackend at 120x40 (`bench/tui.sh` runs it on generated
//! traces).
//!
//! Usage: tui_bench [--redraws N] TRACE...
//!
//! Prints the trace's events, the time to the first frame from opening
//! the trace, split into the load (reading and joining the model) and
//! the time to the first frame after loading (lane index and the
//! first draw), the time the findings take after it (the timeline works
//! them out on a thread while it is up), the lanes' index size, and the
//! redraw times (median and p99) over N windows from the whole run down to
//! a few microseconds at positions across it, with a selection and a
//! highlight drawn too.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use accprof_tui::state::State;
use accprof_tui::style::Palette;
use accprof_tui::{view, Session};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::Terminal;

fn main() {
    if let Err(e) = run() {
        eprintln!("tui_bench: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let mut redraws = 500usize;
    let mut paths = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--redraws" => {
                redraws = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or("--redraws needs a number")?
            }
            _ => paths.push(PathBuf::from(a)),
        }
    }
    if paths.is_empty() {
        return Err("usage: tui_bench [--redraws N] TRACE...".into());
    }
    let t = Instant::now();
    let mut runs = Vec::new();
    for p in &paths {
        let run = accprof_analyzer::load_run(p).map_err(|e| e.to_string())?;
        runs.push((p.clone(), run));
    }
    let load = t.elapsed();
    let events: u64 = runs.iter().map(|(_, r)| r.process.acc_events).sum();
    let entities: usize = runs
        .iter()
        .map(|(_, r)| r.constructs().len() + r.kernels().len() + r.transfers().len())
        .sum();

    let (w, h) = (120u16, 40u16);
    let area = Rect::new(0, 0, w, h);
    let mut term = Terminal::new(TestBackend::new(w, h)).map_err(|e| e.to_string())?;
    let palette = Palette { color: true };
    let t = Instant::now();
    let session = Session::new(runs, &[]);
    let mut state = State::new(&session);
    draw(&mut term, &session, &state, palette)?;
    let first = t.elapsed();
    let t = Instant::now();
    session.analyze();
    state.analyzed(&session);
    let analysis = t.elapsed();

    // Choose the first finding (if any) so highlights are drawn, and
    // select the event at the center.
    let key = |c| Event::Key(KeyEvent::new(c, KeyModifiers::NONE));
    accprof_tui::update::update(&session, &mut state, area, &key(KeyCode::Enter));
    if !state.findings.is_empty() {
        for k in [KeyCode::Tab, KeyCode::Enter, KeyCode::Tab] {
            accprof_tui::update::update(&session, &mut state, area, &key(k));
        }
    }
    let (a, b) = session.span;
    let span = (b - a).max(1) as f64;
    let mut times: Vec<Duration> = Vec::with_capacity(redraws);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..redraws {
        // Window widths from the whole run down to ~2 us, log-spaced,
        // at pseudo-random positions.
        let f = i as f64 / redraws.max(2) as f64;
        let width = (span * 1.02 * (2000.0 / span).powf(f)).max(2000.0);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let at = (seed % 1_000_000) as f64 / 1e6;
        state.width_ns = width;
        state.t0 = a as f64 + (span - width).max(0.0) * at;
        let t = Instant::now();
        draw(&mut term, &session, &state, palette)?;
        times.push(t.elapsed());
    }
    times.sort_unstable();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    println!(
        "{} acc_prof events ({} constructs, kernels and transfers) in {} trace(s)",
        events,
        entities,
        paths.len()
    );
    println!(
        "first frame         {:>10.3} s (from opening the trace)",
        (load + first).as_secs_f64()
    );
    println!("load (read + join)   {:>10.3} s", load.as_secs_f64());
    println!(
        "first frame after load {:>8.3} s (lane index and the first draw)",
        first.as_secs_f64()
    );
    println!(
        "findings after that {:>9.3} s (rules, summary by line, marks; on a thread of their own)",
        analysis.as_secs_f64()
    );
    println!(
        "lane index          {:>10.1} MB",
        session.heap_bytes() as f64 / 1e6
    );
    println!(
        "redraw 120x40       median {:.3} ms, p99 {:.3} ms, max {:.3} ms ({} redraws)",
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        times.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        times.len()
    );
    if let Some(rss) = peak_rss_mb() {
        println!("peak RSS            {rss:>10.0} MB");
    }
    Ok(())
}

fn draw(
    term: &mut Terminal<TestBackend>,
    session: &Session,
    state: &State,
    palette: Palette,
) -> Result<(), String> {
    term.draw(|f| {
        let area = f.area();
        view::render(session, state, palette, area, f.buffer_mut());
    })
    .map(|_| ())
    .map_err(|e| e.to_string())
}

/// VmHWM of /proc/self/status, in MB.
fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
