//! `accprof diff` as text, JSON and CSV, and the parts of its text that
//! the before/after of `analyze --verify` shares with it: the totals
//! ([`render_totals`]) and the per-line rows ([`render_lines`]).

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use accprof_analyzer::compare::{Amount, Comparison, Entry, Matched, Row, Totals};
use accprof_analyzer::units;

use crate::table::{col, Cell, Column, CsvSink, Dtype, RowSink};

/// "3.0x less", "1.5x more", "-" (both zero), "all of it gone".
fn ratio_text(before: u64, after: u64) -> String {
    match accprof_analyzer::compare::ratio(before, after) {
        None => "-".to_string(),
        Some(r) if r.is_infinite() => "all of it gone".to_string(),
        Some(r) if r >= 1.0 => format!("{r:.1}x less"),
        Some(_) => format!("{:.1}x more", after as f64 / before.max(1) as f64),
    }
}

/// One totals row: label, before, after, ratio.
fn totals_row(s: &mut String, label: &str, before: &str, after: &str, note: &str) {
    let _ = writeln!(s, "  {label:<28} {before:>12} {after:>12}   {note}");
}

/// The run totals side by side, for `accprof diff` and `analyze
/// --verify` alike: transfer, kernel and wall time with their ratio, the
/// wall time less the CUDA start-up (when either run has one: what
/// compares a run that compiled its device code with one that did not),
/// and the constructs reached. `not_measured` says why the runs have no
/// device times (verify's runs without CUPTI): their rows then say n/a
/// and why.
pub fn render_totals(s: &mut String, a: &Totals, b: &Totals, not_measured: Option<&str>) {
    totals_row(s, "", "before", "after", "ratio");
    match not_measured {
        None => {
            totals_row(
                s,
                "host<->device transfer time",
                &units::duration_ns(a.transfer_ns),
                &units::duration_ns(b.transfer_ns),
                &ratio_text(a.transfer_ns, b.transfer_ns),
            );
            totals_row(
                s,
                "  transfers",
                &a.transfers.to_string(),
                &b.transfers.to_string(),
                "",
            );
            totals_row(
                s,
                "  bytes moved",
                &units::bytes(a.transfer_bytes),
                &units::bytes(b.transfer_bytes),
                "",
            );
            totals_row(
                s,
                "kernel time",
                &units::duration_ns(a.kernel_ns),
                &units::duration_ns(b.kernel_ns),
                &ratio_text(a.kernel_ns, b.kernel_ns),
            );
        }
        Some(why) => {
            totals_row(
                s,
                "host<->device transfer time",
                "n/a",
                "n/a",
                &format!("not measured: {why}"),
            );
            totals_row(s, "kernel time", "n/a", "n/a", "not measured (same reason)");
        }
    }
    totals_row(
        s,
        "wall time (process)",
        &units::duration_ns(a.wall_ns),
        &units::duration_ns(b.wall_ns),
        &ratio_text(a.wall_ns, b.wall_ns),
    );
    if a.startup.ns > 0 || b.startup.ns > 0 {
        let (x, y) = (
            a.wall_ns.saturating_sub(a.startup.ns),
            b.wall_ns.saturating_sub(b.startup.ns),
        );
        totals_row(
            s,
            "  without CUDA start-up",
            &units::duration_ns(x),
            &units::duration_ns(y),
            &ratio_text(x, y),
        );
    }
    let _ = writeln!(
        s,
        "  {:<28} {:>12} {:>12}",
        "OpenACC constructs reached", a.constructs, b.constructs
    );
}

fn base(file: &str) -> &str {
    Path::new(file)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or(file)
}

fn line_text(l: Option<u32>) -> String {
    l.map_or("?".to_string(), |l| l.to_string())
}

/// "laplace_bad.c:154 -> laplace_good.c:142", "f.c:10 -> 12", "f.c:10".
fn place(r: &Row) -> String {
    let before = format!("{}:{}", base(&r.file), line_text(r.before_line));
    match r.matched {
        Matched::Gone => before,
        Matched::New => format!(
            "{}:{}",
            base(r.after_file.as_deref().unwrap_or(&r.file)),
            line_text(r.after_line)
        ),
        Matched::Line => before,
        Matched::Order => match &r.after_file {
            Some(f) => format!("{before} -> {}:{}", base(f), line_text(r.after_line)),
            None => format!("{before} -> {}", line_text(r.after_line)),
        },
    }
}

fn how(r: &Row) -> String {
    let mut s = match r.matched {
        Matched::Line => "same line".to_string(),
        Matched::Order => format!("{} in order", r.construct),
        Matched::New => "new".to_string(),
        Matched::Gone => "gone".to_string(),
    };
    if let (Some(f), Matched::Line) = (&r.after_file, r.matched) {
        s.push_str(&format!(" of {}", base(f)));
    }
    s
}

fn amount_count(a: &Option<Amount>) -> String {
    a.map_or("-".to_string(), |a| a.count.to_string())
}

fn amount_time(a: &Option<Amount>) -> String {
    a.map_or("-".to_string(), |a| units::duration_ns(a.time_ns))
}

fn amount_bytes(a: &Option<Amount>) -> String {
    match a {
        Some(Amount { bytes: Some(b), .. }) => units::bytes(*b),
        _ => "-".to_string(),
    }
}

fn name(r: &Row) -> &str {
    match &r.entry {
        Entry::Kernel(n) => n,
        _ => "",
    }
}

/// The per-line rows as text, largest change first.
pub fn render_lines(s: &mut String, c: &Comparison) {
    let _ = writeln!(
        s,
        "\n  by source line, largest change in time first (times: device for kernels and transfers, host for constructs):"
    );
    let mut table: Vec<[String; 9]> = vec![[
        "place".into(),
        "what".into(),
        "count before".into(),
        "after".into(),
        "time before".into(),
        "after".into(),
        "ratio".into(),
        "bytes before -> after".into(),
        "matched by".into(),
    ]];
    for r in &c.rows {
        let what = match &r.entry {
            Entry::Kernel(_) => format!("kernel {}", name(r)),
            e => e.label().to_string(),
        };
        let bytes = match (&r.entry, r.before, r.after) {
            (Entry::Transfer(_), _, _) => {
                format!("{} -> {}", amount_bytes(&r.before), amount_bytes(&r.after))
            }
            _ => String::new(),
        };
        let t = |a: &Option<Amount>| a.map_or(0, |a| a.time_ns);
        let ratio = match r.matched {
            Matched::New => "new".to_string(),
            Matched::Gone => "gone".to_string(),
            _ => ratio_text(t(&r.before), t(&r.after)),
        };
        table.push([
            place(r),
            what,
            amount_count(&r.before),
            amount_count(&r.after),
            amount_time(&r.before),
            amount_time(&r.after),
            ratio,
            bytes,
            how(r),
        ]);
    }
    let mut widths = [0usize; 9];
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in &table {
        let mut line = String::from("  ");
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            // Text columns left, numbers right.
            if matches!(i, 0 | 1 | 7 | 8) {
                let _ = write!(line, "{cell:<w$}  ");
            } else {
                let _ = write!(line, "{cell:>w$}  ");
            }
        }
        let _ = writeln!(s, "{}", line.trim_end());
    }
}

/// What the reader of a comparison must be told, one line each, for
/// stderr (and the JSON's `warnings`).
pub fn warnings(c: &Comparison) -> Vec<String> {
    let mut w = Vec::new();
    if let Some((b, a)) = &c.unrelated {
        w.push(format!(
            "warning: before and after look like different programs ({b}, {a}: no executable or source file name in common): their lines are paired by construct order alone and may not correspond"
        ));
    }
    if let Some(j) = accprof_analyzer::compare::jit_mismatch(&c.before.startup, &c.after.startup) {
        w.push(format!("warning: {j}"));
    }
    w
}

/// The whole comparison as text.
pub fn render_text(c: &Comparison, before: &str, after: &str) -> Vec<u8> {
    let mut s = String::new();
    let _ = writeln!(s, "accprof diff\n  before: {before}\n  after:  {after}");
    let without = match (c.before.cupti, c.after.cupti) {
        (false, false) => Some("neither run has CUPTI device times: kernel and transfer times are"),
        (false, true) => {
            Some("before has no CUPTI device times: its kernel and transfer times are")
        }
        (true, false) => Some("after has no CUPTI device times: its kernel and transfer times are"),
        (true, true) => None,
    };
    if let Some(without) = without {
        let _ = writeln!(s, "  note: {without} host times of the runtime's events");
    }
    if let Some(j) = accprof_analyzer::compare::jit_mismatch(&c.before.startup, &c.after.startup) {
        let _ = writeln!(s, "  note: {j}");
    }
    let unknown = |side: fn(&Row) -> (bool, Option<u32>)| {
        let rows: Vec<Option<u32>> = c
            .rows
            .iter()
            .map(side)
            .filter(|(has, _)| *has)
            .map(|(_, l)| l)
            .collect();
        !rows.is_empty() && rows.iter().all(Option::is_none)
    };
    let lineless = match (
        unknown(|r| (r.before.is_some(), r.before_line)),
        unknown(|r| (r.after.is_some(), r.after_line)),
    ) {
        (true, true) => Some("neither run has source lines"),
        (true, false) => Some("before has no source lines"),
        (false, true) => Some("after has no source lines"),
        (false, false) => None,
    };
    if let Some(lineless) = lineless {
        let _ = writeln!(
            s,
            "  note: {lineless} (\"?\"): the binaries that ran were not found, or are other builds; --symbols DIR names a directory with copies of them"
        );
    }
    render_totals(&mut s, &c.before, &c.after, None);
    render_lines(&mut s, c);
    s.into_bytes()
}

fn amount_json(a: &Option<Amount>) -> serde_json::Value {
    match a {
        None => serde_json::Value::Null,
        Some(a) => serde_json::json!({
            "count": a.count,
            "time_us": a.time_ns as f64 / 1000.0,
            "bytes": a.bytes,
        }),
    }
}

fn ratio_json(before: u64, after: u64) -> serde_json::Value {
    match accprof_analyzer::compare::ratio(before, after) {
        Some(r) if r.is_finite() => serde_json::json!(r),
        _ => serde_json::Value::Null,
    }
}

fn totals_json(t: &Totals) -> serde_json::Value {
    serde_json::json!({
        "wall_time_us": t.wall_ns as f64 / 1000.0,
        "kernel_time_us": t.kernel_ns as f64 / 1000.0,
        "transfer_time_us": t.transfer_ns as f64 / 1000.0,
        "transfers": t.transfers,
        "transfer_bytes": t.transfer_bytes,
        "constructs": t.constructs,
        "cupti": t.cupti,
        "startup_time_us": t.startup.ns as f64 / 1000.0,
        "paid_jit": t.startup.paid_jit,
    })
}

/// The comparison as JSON: totals of both runs with before/after ratios
/// (null when the after value is 0), and the rows.
pub fn render_json(c: &Comparison, before: &str, after: &str) -> Vec<u8> {
    let (a, b) = (&c.before, &c.after);
    let rows: Vec<serde_json::Value> = c
        .rows
        .iter()
        .map(|r| {
            let t = |x: &Option<Amount>| x.map_or(0, |x| x.time_ns);
            serde_json::json!({
                "file": r.file,
                "after_file": r.after_file.as_deref().unwrap_or(&r.file),
                "function": r.function,
                "before_line": r.before_line,
                "after_line": r.after_line,
                "construct": r.construct,
                "entry": r.entry.label(),
                "name": name(r),
                "matched": r.matched.label(),
                "before": amount_json(&r.before),
                "after": amount_json(&r.after),
                "time_ratio": ratio_json(t(&r.before), t(&r.after)),
                "change_time_us": r.change_ns() as f64 / 1000.0,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "schema": "accprof-diff",
        "schema_version": 1,
        "before": before,
        "after": after,
        "totals": {
            "before": totals_json(a),
            "after": totals_json(b),
            "ratio": {
                "wall_time": ratio_json(a.wall_ns, b.wall_ns),
                "kernel_time": ratio_json(a.kernel_ns, b.kernel_ns),
                "transfer_time": ratio_json(a.transfer_ns, b.transfer_ns),
            },
        },
        "rows": rows,
        "warnings": warnings(c),
    });
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

use Dtype::{Float, OptInt, Str};

/// The columns of `accprof diff --csv`.
pub const DIFF_COLUMNS: &[Column] = &[
    col(
        "file",
        Str,
        "source file of the first run (empty on total rows)",
    ),
    col("after_file", Str, "source file of the second run"),
    col("function", Str, "function"),
    col("before_line", OptInt, "line in the first run"),
    col("after_line", OptInt, "line in the second run"),
    col("construct", Str, "construct kind the lines were matched by"),
    col(
        "entry",
        Str,
        "host, kernel, copyin, copyout, ...; wall_time, kernel_time, transfer_time on total rows",
    ),
    col("name", Str, "kernel name"),
    col(
        "matched",
        Str,
        "line (same line), order (same kind, in source order), new, gone, total",
    ),
    col(
        "before_count",
        OptInt,
        "constructs reached, launches or transfers in the first run",
    ),
    col("after_count", OptInt, "the same in the second run"),
    col("before_time_us", Float, "time in the first run"),
    col("after_time_us", Float, "time in the second run"),
    col(
        "time_ratio",
        Float,
        "before / after (empty when after is 0)",
    ),
    col("change_time_us", Float, "after - before"),
    col(
        "before_bytes",
        OptInt,
        "bytes moved in the first run (transfer rows)",
    ),
    col("after_bytes", OptInt, "bytes moved in the second run"),
];

/// The rows, then one total row each for wall, kernel and transfer time,
/// as CSV.
pub fn write_csv<W: Write>(c: &Comparison, out: W) -> io::Result<()> {
    let mut sink = CsvSink::new(out, DIFF_COLUMNS)?;
    let ratio = |b: u64, a: u64| match accprof_analyzer::compare::ratio(b, a) {
        Some(r) if r.is_finite() => Cell::Float(r),
        _ => Cell::Null,
    };
    for r in &c.rows {
        let t = |x: &Option<Amount>| x.map_or(0, |x| x.time_ns);
        let change = r.change_ns() as f64 / 1000.0;
        sink.row(&[
            Cell::Str(&r.file),
            Cell::Str(r.after_file.as_deref().unwrap_or(&r.file)),
            Cell::Str(&r.function),
            Cell::opt_int(r.before_line.map(u64::from)),
            Cell::opt_int(r.after_line.map(u64::from)),
            Cell::Str(r.construct),
            Cell::Str(r.entry.label()),
            Cell::Str(name(r)),
            Cell::Str(r.matched.label()),
            Cell::opt_int(r.before.map(|a| a.count)),
            Cell::opt_int(r.after.map(|a| a.count)),
            Cell::opt_us(r.before.map(|a| a.time_ns)),
            Cell::opt_us(r.after.map(|a| a.time_ns)),
            ratio(t(&r.before), t(&r.after)),
            Cell::Float(change),
            Cell::opt_int(r.before.and_then(|a| a.bytes)),
            Cell::opt_int(r.after.and_then(|a| a.bytes)),
        ])?;
    }
    let (a, b) = (&c.before, &c.after);
    for (entry, x, y) in [
        ("wall_time", a.wall_ns, b.wall_ns),
        ("kernel_time", a.kernel_ns, b.kernel_ns),
        ("transfer_time", a.transfer_ns, b.transfer_ns),
    ] {
        sink.row(&[
            Cell::Str(""),
            Cell::Str(""),
            Cell::Str(""),
            Cell::Null,
            Cell::Null,
            Cell::Str(""),
            Cell::Str(entry),
            Cell::Str(""),
            Cell::Str("total"),
            Cell::Null,
            Cell::Null,
            Cell::Us(x),
            Cell::Us(y),
            ratio(x, y),
            Cell::Float((i128::from(y) - i128::from(x)) as f64 / 1000.0),
            Cell::Null,
            Cell::Null,
        ])?;
    }
    sink.finish()
}
