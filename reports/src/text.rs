//! The text summary in the layout PGI_ACC_TIME / NV_ACC_TIME users know,
//! and an extended view with bytes, bandwidth, sizes, variables, memory
//! kinds, kernel resources, time shares, the data sources and losses. For
//! several traces (MPI ranks): the merged summary, then a per-rank table and
//! the lines whose time is most unevenly spread over the ranks.

use std::fmt::Write as _;

use accprof_analyzer::summary::{
    FunctionSummary, InFlight, KernelLine, LineSummary, MergedSummary, RunFacts, Stats, Summary,
    TransferLine,
};
use accprof_analyzer::units::{self, micros, thousands};
use accprof_analyzer::vocabulary::{CopyKind, SourceState};
use accprof_analyzer::Run;

#[derive(Debug, Clone, Copy, Default)]
pub struct TextOptions {
    /// Bytes, bandwidth, variables, memory kinds, resources, shares, sources.
    pub extended: bool,
    /// List lines by cost instead of by line number.
    pub sort_by_time: bool,
}

/// How many lines the imbalance table of a merged summary lists.
pub const IMBALANCE_ROWS: usize = 10;

fn stats_line(label: &str, s: &Stats) -> String {
    format!(
        "{label}(us): total={} max={} min={} avg={}",
        micros(s.total_ns),
        micros(s.max_ns),
        micros(s.min_ns),
        micros(s.avg_ns())
    )
}

/// The line number, or the call address when the binary had no line for it.
fn line_label(l: &LineSummary) -> String {
    match (l.line, l.address) {
        (Some(n), _) => n.to_string(),
        (None, Some(a)) => format!("{a:#x}"),
        (None, None) => "?".into(),
    }
}

fn dims(d: &[u32]) -> String {
    d.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Renders the summary of one run followed by its [`warnings`], for a
/// launcher that prints everything on stderr and saw the process end
/// itself (so a missing end record is not worth a warning). (`run` is not
/// needed any more: the summary carries what the text shows.)
pub fn render(_run: &Run, summary: &Summary, opts: &TextOptions) -> Vec<u8> {
    let mut out = render_summary(summary, opts);
    for w in warnings(summary, true) {
        out.extend_from_slice(w.as_bytes());
        out.push(b'\n');
    }
    out
}

/// Renders a summary (of one run, or of several merged).
pub fn render_summary(summary: &Summary, opts: &TextOptions) -> Vec<u8> {
    let mut out = String::new();
    write_summary(&mut out, summary, opts);
    out.into_bytes()
}

/// Renders several runs: the merged summary, the per-rank table and the
/// most imbalanced lines.
pub fn render_merged(m: &MergedSummary, opts: &TextOptions) -> Vec<u8> {
    let mut out = String::new();
    write_summary(&mut out, &m.merged, opts);
    write_ranks(&mut out, m);
    out.into_bytes()
}

fn write_summary(out: &mut String, summary: &Summary, opts: &TextOptions) {
    out.push_str("\nAccelerator Kernel Timing data\n");
    if !summary.cupti {
        let why: Vec<String> = summary
            .runs
            .iter()
            .filter_map(|r| match &r.sources.cupti {
                SourceState::Inactive(why) => Some(why.clone()),
                SourceState::Active => None,
            })
            .collect();
        let why = if why.is_empty() {
            String::new()
        } else {
            let mut w = why.clone();
            w.dedup();
            format!(" ({})", w.join("; "))
        };
        let _ = writeln!(
            out,
            "Host times only: CUPTI was not recording{why}, so there are no kernel or transfer device times; \
             elapsed times are host times of the OpenACC constructs."
        );
    }
    let total_cost: u64 = summary
        .functions
        .iter()
        .flat_map(|f| f.lines.iter())
        .map(LineSummary::cost_ns)
        .sum();
    let mut last_file = None;
    for f in &summary.functions {
        if last_file != Some(&f.file) {
            let _ = writeln!(out, "{}", f.file);
            last_file = Some(&f.file);
        }
        render_function(out, f, opts, total_cost, summary.cupti);
    }
    render_run_ends(out, summary);
    render_checks(out, summary);
    if opts.extended {
        render_footer(out, summary);
        let several = summary.runs.len() > 1;
        for (i, r) in summary.runs.iter().enumerate() {
            if r.ledger.threads.is_empty() {
                continue;
            }
            let _ = writeln!(out);
            if several {
                let _ = writeln!(out, "{}:", run_name(r, i));
            }
            crate::ledger::render(out, &r.ledger);
        }
    }
}

/// Whether the coherence check ran in each run, and what it watched: one
/// line when every run says the same.
fn render_checks(out: &mut String, summary: &Summary) {
    let lines: Vec<String> = summary.runs.iter().map(|r| r.check.line()).collect();
    if lines.windows(2).all(|w| w[0] == w[1]) {
        if let Some(l) = lines.first() {
            let _ = writeln!(out, "{l}");
        }
        return;
    }
    for (i, (r, l)) in summary.runs.iter().zip(&lines).enumerate() {
        let _ = writeln!(out, "{}: {l}", run_name(r, i));
    }
}

/// What the table cannot show: runs without OpenACC events, constructs
/// without an end, how a process ended and what it was running then.
fn render_run_ends(out: &mut String, summary: &Summary) {
    let several = summary.runs.len() > 1;
    for (i, r) in summary.runs.iter().enumerate() {
        let who = if several {
            format!("{}: ", run_name(r, i))
        } else {
            String::new()
        };
        write_run_end(out, r, &who);
    }
}

/// How one run ended, in the words of the summary: no OpenACC events,
/// constructs without an end, the ending and the construct in flight. One
/// line each (the construct in flight may add indented lines); empty for a
/// run that ended normally.
pub fn run_end_text(r: &RunFacts) -> String {
    let mut out = String::new();
    write_run_end(&mut out, r, "");
    out
}

fn write_run_end(out: &mut String, r: &RunFacts, who: &str) {
    {
        if r.acc_events == 0 {
            let why = r
                .no_acc_reason()
                .map(|w| format!(" ({w})"))
                .unwrap_or_default();
            let _ = writeln!(out, "{who}no OpenACC events were recorded{why}");
        }
        if r.cut_constructs > 0 {
            let them = if r.cut_constructs == 1 { "it" } else { "them" };
            let why = if r.running && r.ending.is_none() {
                "not ended when the trace was read".to_string()
            } else {
                format!("callbacks toggled off, or the program died inside {them}")
            };
            let _ = writeln!(
                out,
                "{who}{} construct{} without an end event ({why}); {} host time is not counted",
                r.cut_constructs,
                plural(r.cut_constructs),
                if r.cut_constructs == 1 {
                    "its"
                } else {
                    "their"
                },
            );
        }
        for e in &r.errors {
            let _ = writeln!(out, "{who}error: {e}");
        }
        if let Some(e) = r.ending_text() {
            let _ = writeln!(out, "{who}ending: {e}");
        }
        if let Some(f) = &r.in_flight {
            write_in_flight(out, who, f, r.ending.is_none(), r.running);
        }
    }
}

fn write_in_flight(out: &mut String, who: &str, f: &InFlight, no_end: bool, running: bool) {
    let line = f.line.map_or("?".to_string(), |l| l.to_string());
    let when = match (no_end, running) {
        (true, true) => "running when the trace was read (the program is still running)",
        (true, false) => "running when the trace ends (the program may have died there)",
        (false, _) => "running when the program ended",
    };
    let inside = f
        .inside
        .as_deref()
        .map(|i| format!(", inside {i}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{who}{when}: {}:{line} ({}) {}{inside}",
        f.file, f.function, f.what
    );
    if let Some(k) = &f.kernel {
        let _ = writeln!(out, "    last kernel: {k}");
    }
    if !f.transfers.is_empty() {
        let _ = writeln!(out, "    last transfers: {}", f.transfers.join(", "));
    }
}

/// What the reader of a summary must be told about the traces themselves
/// (damage, records left out, binaries not found, a trace that may have
/// been cut), one line each, for stderr. `still_running`: the summary is
/// made while the process runs (at exit), so no end record is expected.
pub fn warnings(summary: &Summary, still_running: bool) -> Vec<String> {
    let several = summary.runs.len() > 1;
    let mut w = Vec::new();
    for (i, r) in summary.runs.iter().enumerate() {
        let who = if several {
            format!("{}: ", run_name(r, i))
        } else {
            String::new()
        };
        w.extend(run_warnings(r, &who, still_running));
    }
    w
}

/// The warnings of one run, each starting with `who`.
pub fn run_warnings(r: &RunFacts, who: &str, still_running: bool) -> Vec<String> {
    let mut w = Vec::new();
    let n = r.losses.len();
    let cupti = if r.sources.cupti.is_active() {
        " (CUPTI was recording: its records of the lost part are missing, not absent)"
    } else {
        ""
    };
    for (k, l) in r.losses.iter().enumerate() {
        let tail = if k + 1 == n && l.reason.starts_with("truncated") {
            "the trace was cut there"
        } else {
            "reading went on at the next intact block"
        };
        w.push(format!(
            "warning: {who}trace damaged at byte {}: {}; {} bytes not read, {tail}; the summary covers what was read{cupti}",
            l.offset, l.reason, l.bytes
        ));
    }
    if r.running && r.ending.is_none() {
        w.push(format!(
            "note: {who}the program (pid {}) is still running: the trace ends where it was read, and its totals are so far",
            r.pid
        ));
    } else if !still_running && r.no_end_record() {
        w.push(format!(
            "warning: {who}the trace has no end record: it may have been cut (the program killed with SIGKILL, or the collector stopped before writing it)"
        ));
    }
    for note in &r.notes {
        w.push(format!("note: {who}{note}"));
    }
    w
}

fn run_name(r: &RunFacts, index: usize) -> String {
    match r.rank {
        Some(rank) => format!("rank {rank} (pid {})", r.pid),
        None => format!("trace {} (pid {})", index + 1, r.pid),
    }
}

fn render_function(
    out: &mut String,
    f: &FunctionSummary,
    opts: &TextOptions,
    total_cost: u64,
    cupti: bool,
) {
    let _ = writeln!(
        out,
        "  {}  {}  devicenum={}",
        f.function,
        f.device_label,
        f.device_numbers
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    let _ = writeln!(out, "    time(us): {}", micros(f.time_ns));
    let mut lines: Vec<&LineSummary> = f.lines.iter().collect();
    if opts.sort_by_time {
        // Stable: equal costs keep line order.
        lines.sort_by_key(|l| std::cmp::Reverse(l.cost_ns()));
    }
    for l in lines {
        let n = line_label(l);
        let share = if opts.extended && total_cost > 0 {
            format!(
                "  [{:.1}% of {} time]",
                100.0 * l.cost_ns() as f64 / total_cost as f64,
                if cupti { "device" } else { "host" }
            )
        } else {
            String::new()
        };
        let mut first = true;
        for (what, s) in &l.reached {
            let _ = writeln!(
                out,
                "    {n}: {} reached {} time{}{}",
                what.label(),
                s.count,
                plural(s.count),
                if first { share.as_str() } else { "" }
            );
            first = false;
        }
        for (routine, s) in &l.api_calls {
            let _ = writeln!(
                out,
                "    {n}: {routine} reached {} time{}{}",
                s.count,
                plural(s.count),
                if first { share.as_str() } else { "" }
            );
            first = false;
        }
        if opts.extended && !(l.reached.is_empty() && l.api_calls.is_empty()) {
            let _ = writeln!(
                out,
                "         host time in constructs(us): {}",
                micros(l.host_ns)
            );
        }
        for k in &l.kernels {
            render_kernel(out, &n, k, opts);
        }
        for t in &l.transfers {
            render_transfer(out, &n, t, opts);
        }
    }
}

fn render_kernel(out: &mut String, n: &str, k: &KernelLine, opts: &TextOptions) {
    let _ = writeln!(
        out,
        "        {n}: kernel launched {} time{}",
        k.launches,
        plural(k.launches)
    );
    let _ = writeln!(
        out,
        "            grid: [{}]  block: [{}]",
        dims(&k.grid),
        dims(&k.block)
    );
    if opts.extended {
        let threads: u64 = k.block.iter().map(|&b| u64::from(b)).product();
        let mut line = format!("            kernel: {}  threads/block: {threads}", k.name);
        if k.device.count > 0 {
            let _ = write!(
                line,
                "  registers/thread: {}  shared memory: {} B  local memory: {} B/thread",
                k.registers, k.shared_bytes, k.local_bytes_per_thread
            );
        }
        let _ = writeln!(out, "{line}");
    }
    if k.device.count > 0 {
        let _ = writeln!(out, "             {}", stats_line("device time", &k.device));
    }
    if k.elapsed.count > 0 {
        let _ = writeln!(
            out,
            "            {}",
            stats_line("elapsed time", &k.elapsed)
        );
    }
}

fn render_transfer(out: &mut String, n: &str, t: &TransferLine, opts: &TextOptions) {
    let dir = match t.direction {
        Some(CopyKind::HostToDevice) => "copyin",
        Some(CopyKind::DeviceToHost) => "copyout",
        _ => "copy",
    };
    let _ = writeln!(out, "        {n}: data {dir} transfers: {}", t.count);
    let label = if t.device_timed {
        "device time"
    } else {
        "elapsed time"
    };
    let _ = writeln!(out, "             {}", stats_line(label, &t.time));
    if opts.extended {
        let bw = units::rate(t.bytes, t.time.total_ns).unwrap_or_else(|| "-".into());
        let mut extra = format!(
            "             bytes: {} ({})  bandwidth: {bw}{}",
            thousands(t.bytes),
            units::bytes(t.bytes),
            if t.device_timed { "" } else { " (host-timed)" }
        );
        if t.pageable + t.pinned > 0 {
            let _ = write!(extra, "  pageable: {}  pinned: {}", t.pageable, t.pinned);
        }
        if !t.variables.is_empty() {
            let _ = write!(extra, "  variables: {}", t.variables.join(", "));
        }
        let _ = writeln!(out, "{extra}");
        if !t.sizes.is_empty() {
            let mut sizes: Vec<String> = t
                .sizes
                .iter()
                .map(|s| format!("{} x {} B", s.count, thousands(s.bytes)))
                .collect();
            if t.other_sizes > 0 {
                sizes.push(format!("{} of other sizes", t.other_sizes));
            }
            let _ = writeln!(out, "             sizes: {}", sizes.join(", "));
        }
    }
}

fn source_state(st: &SourceState) -> String {
    match st {
        SourceState::Active => "active".to_string(),
        SourceState::Inactive(r) => format!("inactive ({r})"),
    }
}

fn render_footer(out: &mut String, s: &Summary) {
    let _ = writeln!(out, "\nRun");
    if s.runs.len() > 1 {
        let _ = writeln!(
            out,
            "    traces: {} (times below are sums over them; wall time is the longest)",
            s.runs.len()
        );
    }
    let _ = writeln!(out, "    wall time covered(us): {}", micros(s.wall_ns));
    let _ = writeln!(
        out,
        "    host time in OpenACC constructs(us): {}",
        micros(s.host_construct_ns)
    );
    if s.runs.len() == 1 {
        let _ = writeln!(
            out,
            "    host time outside OpenACC constructs(us): {}",
            micros(s.wall_ns.saturating_sub(s.host_construct_ns))
        );
    }
    if s.cupti {
        let _ = writeln!(out, "    kernel device time(us): {}", micros(s.kernel_ns));
        let _ = writeln!(
            out,
            "    transfer device time(us): {}",
            micros(s.transfer_ns)
        );
    } else {
        let _ = writeln!(
            out,
            "    device times: none (CUPTI was not recording; host times only)"
        );
    }
    // Sources, runtime and devices: once when every run agrees.
    let mut seen: Vec<String> = Vec::new();
    for (i, r) in s.runs.iter().enumerate() {
        let src = &r.sources;
        let mut block = format!(
            "    sources: acc_prof {}, CUPTI {}, hashing {:?}\n    runtime: {}\n",
            source_state(&src.acc_prof),
            source_state(&src.cupti),
            src.hashing,
            r.runtime
        );
        for d in &r.devices {
            let _ = writeln!(
                block,
                "    device {}: {} ({} SMs, compute capability {}.{})",
                d.id, d.name, d.sm_count, d.compute_capability.0, d.compute_capability.1
            );
        }
        if !seen.contains(&block) {
            if s.runs.len() > 1 {
                let _ = writeln!(out, "    {}:", run_name(r, i));
            }
            out.push_str(&block);
            seen.push(block);
        }
    }
    let mut dropped: Vec<(String, u64)> = Vec::new();
    for r in &s.runs {
        for (source, count) in &r.dropped {
            let name = format!("{source:?}");
            match dropped.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => *c += count,
                None => dropped.push((name, *count)),
            }
        }
    }
    dropped.retain(|(_, c)| *c > 0);
    if dropped.is_empty() {
        let _ = writeln!(out, "    dropped records: none");
    }
    for (source, count) in dropped {
        let _ = writeln!(out, "    dropped records ({source}): {}", thousands(count));
    }
}

fn write_ranks(out: &mut String, m: &MergedSummary) {
    let cupti = m.merged.cupti;
    let _ = writeln!(out, "\nRanks ({} traces)", m.ranks.len());
    let _ = writeln!(
        out,
        "  {:>6}  {:>9}  {:<16}  {:>14}  {:>16}  {:>16}  {:>18}",
        "rank", "pid", "host", "wall(us)", "constructs(us)", "kernel dev(us)", "transfer dev(us)"
    );
    for r in &m.ranks {
        let dev = |ns: u64| if cupti { micros(ns) } else { "-".into() };
        let rank = if r.rank_known {
            r.rank.to_string()
        } else {
            format!("#{}", r.rank)
        };
        let _ = writeln!(
            out,
            "  {:>6}  {:>9}  {:<16}  {:>14}  {:>16}  {:>16}  {:>18}",
            rank,
            r.pid,
            r.host,
            micros(r.wall_ns),
            micros(r.host_construct_ns),
            dev(r.kernel_ns),
            dev(r.transfer_ns)
        );
    }
    if m.ranks.iter().any(|r| !r.rank_known) {
        let _ = writeln!(
            out,
            "  (#N: the trace had no MPI rank; N is its position among the inputs)"
        );
    }
    let what = if cupti { "device" } else { "host" };
    if m.imbalance.is_empty() {
        let _ = writeln!(
            out,
            "\nImbalance: every line's {what} time is the same on every rank"
        );
        return;
    }
    let _ = writeln!(
        out,
        "\nImbalance per line ({what} time across ranks; largest max - mean first, top {})",
        IMBALANCE_ROWS.min(m.imbalance.len())
    );
    for l in m.imbalance.iter().take(IMBALANCE_ROWS) {
        let line = match (l.line, l.address) {
            (Some(n), _) => n.to_string(),
            (None, Some(a)) => format!("{a:#x}"),
            (None, None) => "?".into(),
        };
        let _ = writeln!(
            out,
            "  {}:{} ({})  max/mean={:.2}  max(us)={} (rank {})  mean(us)={}",
            l.file,
            line,
            l.function,
            l.ratio,
            micros(l.max_ns),
            l.max_rank,
            micros(l.mean_ns)
        );
    }
}
