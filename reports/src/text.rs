//! The text summary in the layout PGI_ACC_TIME / NV_ACC_TIME users know,
//! and an extended view with bytes, bandwidth, variables, memory kinds,
//! kernel resources and time shares.

use std::fmt::Write as _;

use accprof_analyzer::summary::{FunctionSummary, KernelLine, LineSummary, Stats, Summary, TransferLine};
use accprof_analyzer::Run;
use accprof_trace::CopyKind;

#[derive(Debug, Clone, Copy, Default)]
pub struct TextOptions {
    /// Bytes, bandwidth, variables, memory kinds, resources, shares, sources.
    pub extended: bool,
    /// List lines by cost instead of by line number.
    pub sort_by_time: bool,
}

/// Formats an integer with thousands separators: 10852003 -> "10,852,003".
pub fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn us(ns: u64) -> String {
    thousands((ns + 500) / 1000)
}

fn stats_line(label: &str, s: &Stats) -> String {
    format!(
        "{label}(us): total={} max={} min={} avg={}",
        us(s.total_ns),
        us(s.max_ns),
        us(s.min_ns),
        us(s.avg_ns())
    )
}

fn line_no(l: Option<u32>) -> String {
    l.map(|l| l.to_string()).unwrap_or_else(|| "?".into())
}

fn dims(d: &[u32]) -> String {
    d.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Time a line costs: device time of its kernels and transfers, or host
/// time of its constructs when nothing was device-timed.
fn line_cost(l: &LineSummary) -> u64 {
    let k: u64 = l.kernels.iter().map(|k| k.device.total_ns).sum();
    let t: u64 = l.transfers.iter().map(|t| t.time.total_ns).sum();
    if k + t > 0 {
        k + t
    } else {
        l.reached.values().map(|s| s.total_ns).sum()
    }
}

/// Renders the summary of one run.
pub fn render(run: &Run, summary: &Summary, opts: &TextOptions) -> Vec<u8> {
    let mut out = String::new();
    out.push_str("\nAccelerator Kernel Timing data\n");
    if !summary.cupti {
        let why = match &run.header.sources.cupti {
            accprof_trace::SourceState::Inactive(r) => r.as_str(),
            accprof_trace::SourceState::Active => "",
        };
        let _ = writeln!(
            out,
            "(host times only: no device times without CUPTI: {why})"
        );
    }
    let total_cost: u64 = summary
        .functions
        .iter()
        .flat_map(|f| f.lines.iter())
        .map(line_cost)
        .sum();
    let mut last_file = None;
    for f in &summary.functions {
        if last_file != Some(&f.file) {
            let _ = writeln!(out, "{}", f.file);
            last_file = Some(&f.file);
        }
        render_function(&mut out, f, opts, total_cost);
    }
    if opts.extended {
        render_footer(&mut out, run, summary);
    }
    for l in &run.losses {
        let _ = writeln!(
            out,
            "warning: trace damaged at byte {}: {} ({} bytes not read); the summary covers what was read",
            l.offset, l.reason, l.bytes
        );
    }
    for n in &run.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out.into_bytes()
}

fn render_function(out: &mut String, f: &FunctionSummary, opts: &TextOptions, total_cost: u64) {
    let _ = writeln!(
        out,
        "  {}  {}  devicenum={}",
        f.function, f.device_label, f.device_number
    );
    let _ = writeln!(out, "    time(us): {}", us(f.time_ns));
    let mut lines: Vec<&LineSummary> = f.lines.iter().collect();
    if opts.sort_by_time {
        lines.sort_by_key(|l| std::cmp::Reverse(line_cost(l)));
    }
    for l in lines {
        let n = line_no(l.line);
        let share = if opts.extended && total_cost > 0 {
            format!(
                "  [{:.1}% of device time]",
                100.0 * line_cost(l) as f64 / total_cost as f64
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
                if s.count == 1 { "" } else { "s" },
                if first { share.as_str() } else { "" }
            );
            first = false;
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
        if k.launches == 1 { "" } else { "s" }
    );
    let _ = writeln!(out, "            grid: [{}]  block: [{}]", dims(&k.grid), dims(&k.block));
    if opts.extended {
        let _ = writeln!(
            out,
            "            kernel: {}  registers: {}  shared memory: {} B",
            k.name, k.registers, k.shared_bytes
        );
    }
    if k.device.count > 0 {
        let _ = writeln!(out, "             {}", stats_line("device time", &k.device));
    }
    if k.elapsed.count > 0 {
        let _ = writeln!(out, "            {}", stats_line("elapsed time", &k.elapsed));
    }
}

fn render_transfer(out: &mut String, n: &str, t: &TransferLine, opts: &TextOptions) {
    let dir = match t.direction {
        Some(CopyKind::HostToDevice) => "copyin",
        Some(CopyKind::DeviceToHost) => "copyout",
        _ => "copy",
    };
    let _ = writeln!(out, "        {n}: data {dir} transfers: {}", t.count);
    let label = if t.device_timed { "device time" } else { "elapsed time" };
    let _ = writeln!(out, "             {}", stats_line(label, &t.time));
    if opts.extended {
        let secs = t.time.total_ns as f64 / 1e9;
        let bw = if secs > 0.0 {
            format!("{:.2} GB/s", t.bytes as f64 / secs / 1e9)
        } else {
            "-".into()
        };
        let mut extra = format!(
            "             bytes: {} ({})  bandwidth: {bw}",
            thousands(t.bytes),
            human_bytes(t.bytes)
        );
        if t.pageable + t.pinned > 0 {
            let _ = write!(extra, "  pageable: {}  pinned: {}", t.pageable, t.pinned);
        }
        if !t.variables.is_empty() {
            let _ = write!(extra, "  variables: {}", t.variables.join(", "));
        }
        let _ = writeln!(out, "{extra}");
    }
}

fn render_footer(out: &mut String, run: &Run, s: &Summary) {
    let src = &run.header.sources;
    let state = |st: &accprof_trace::SourceState| match st {
        accprof_trace::SourceState::Active => "active".to_string(),
        accprof_trace::SourceState::Inactive(r) => format!("inactive ({r})"),
    };
    let _ = writeln!(out, "\nRun");
    let _ = writeln!(out, "    wall time covered(us): {}", us(s.wall_ns));
    let _ = writeln!(out, "    host time in OpenACC constructs(us): {}", us(s.host_construct_ns));
    let _ = writeln!(
        out,
        "    host time outside OpenACC constructs(us): {}",
        us(s.wall_ns.saturating_sub(s.host_construct_ns))
    );
    if s.cupti {
        let _ = writeln!(out, "    kernel device time(us): {}", us(s.kernel_ns));
        let _ = writeln!(out, "    transfer device time(us): {}", us(s.transfer_ns));
    }
    let _ = writeln!(out, "    sources: acc_prof {}, CUPTI {}, hashing {:?}", state(&src.acc_prof), state(&src.cupti), src.hashing);
    let _ = writeln!(out, "    runtime: {}", run.header.runtime);
    for d in &run.devices {
        let _ = writeln!(
            out,
            "    device {}: {} ({} SMs, compute capability {}.{})",
            d.id, d.name, d.sm_count, d.compute_capability.0, d.compute_capability.1
        );
    }
    for (source, count) in &run.dropped {
        let _ = writeln!(out, "    dropped records ({source:?}): {}", thousands(*count));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(10852003), "10,852,003");
    }
}
