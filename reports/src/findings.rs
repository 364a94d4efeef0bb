//! Findings as text and JSON.
//!
//! Text: a short run header, the findings ranked by cost (place, cost and
//! saving, evidence, proposal with its directive), then the notes on what
//! could not be checked. JSON: the same, typed, with the combined patch.

use std::fmt::Write as _;

use accprof_analyzer::findings::{Analysis, Confidence, Finding, Location, Value};
use accprof_analyzer::summary::RunFacts;
use accprof_analyzer::units;
use accprof_analyzer::Run;
use serde::Serialize;

/// What the text shows.
#[derive(Debug, Clone, Default)]
pub struct FindingsOptions {
    /// The trace's path as the user gave it.
    pub trace: String,
    /// Column to wrap prose at (0: no wrapping).
    pub width: usize,
}

/// The findings of one run as readable text. `facts` (from the run's
/// summary) say how the run ended; the warnings about the trace itself are
/// the caller's to print (on stderr).
pub fn render_text(
    run: &Run,
    analysis: &Analysis,
    facts: &RunFacts,
    opts: &FindingsOptions,
) -> Vec<u8> {
    let mut s = String::new();
    let width = if opts.width == 0 {
        usize::MAX
    } else {
        opts.width
    };
    let _ = writeln!(s, "accprof analyze: {}", opts.trace);
    let _ = writeln!(
        s,
        "  program: {}",
        run.process.header.command_line.join(" ")
    );
    let totals = run.totals();
    let (kernel_ns, copy_ns) = (totals.kernel_ns, totals.transfer_ns);
    let times = if run.cupti_active() && !run.process.losses.is_empty() {
        format!(
            "kernels {}, host<->device transfers {} (device times, CUPTI; the trace was cut, so only those of the part read)",
            units::duration_ns(kernel_ns),
            units::duration_ns(copy_ns)
        )
    } else if run.cupti_active() {
        format!(
            "kernels {}, host<->device transfers {} (device times, CUPTI)",
            units::duration_ns(kernel_ns),
            units::duration_ns(copy_ns)
        )
    } else {
        "no device times (no CUPTI in this run)".to_string()
    };
    let hashing = match run.process.header.sources.hashing {
        accprof_analyzer::vocabulary::HashMode::Off => "off",
        accprof_analyzer::vocabulary::HashMode::Sampled => "sampled",
        accprof_analyzer::vocabulary::HashMode::Full => "full",
    };
    let _ = writeln!(
        s,
        "  wall {}, {times}; content hashing {hashing}",
        units::duration_ns(analysis.wall_ns)
    );
    for l in crate::text::run_end_text(facts).lines() {
        let _ = writeln!(s, "  {l}");
    }
    let _ = writeln!(s, "  {}", facts.check.line());
    let _ = writeln!(s);
    if !facts.ledger.threads.is_empty() {
        crate::ledger::render(&mut s, &facts.ledger);
        let _ = writeln!(s);
    }
    if analysis.findings.is_empty() {
        let _ = writeln!(s, "No findings.");
    } else {
        let share = |ns: u64, beside: bool| shares(analysis, ns, beside);
        let n = analysis.findings.len();
        let plural = if n == 1 { "" } else { "s" };
        let estimated = analysis.estimated();
        let _ = if estimated == 0 {
            writeln!(
                s,
                "{n} finding{plural}, ranked by the time they cost; what they could save is not estimated (the run does not show what {} would save).",
                if n == 1 { "its proposal" } else { "their proposals" }
            )
        } else {
            writeln!(
                s,
                "{n} finding{plural}, ranked by the time they cost; together they could save about {} ({}, each transfer counted once){}.",
                units::duration_ns(analysis.total_saving_ns),
                share(analysis.total_saving_ns, true),
                match n - estimated {
                    0 => String::new(),
                    1 => ", not counting the one whose saving is not estimated".to_string(),
                    k => format!(", not counting the {k} whose saving is not estimated"),
                }
            )
        };
        for (i, f) in analysis.findings.iter().enumerate() {
            let _ = writeln!(s);
            finding_text(&mut s, run, i + 1, f, width, &share);
        }
    }
    if !analysis.notes.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "Not checked, or limited:");
        for n in &analysis.notes {
            wrap(&mut s, n, "  - ", "    ", width);
        }
    }
    s.into_bytes()
}

/// `ns` as a share of the run's wall time, and (`beside`) of the wall
/// time without the start-up where that weighs: "42% of the wall time,
/// 73% without start-up".
fn shares(analysis: &Analysis, ns: u64, beside: bool) -> String {
    let pct = |of: u64| {
        if of == 0 {
            0.0
        } else {
            100.0 * ns as f64 / of as f64
        }
    };
    let mut s = format!("{:.0}% of the wall time", pct(analysis.wall_ns));
    if beside && analysis.startup_weighs() {
        let _ = write!(
            s,
            ", {:.0}% without start-up",
            pct(analysis.wall_without_startup_ns())
        );
    }
    s
}

fn finding_text(
    s: &mut String,
    run: &Run,
    rank: usize,
    f: &Finding,
    width: usize,
    share: &dyn Fn(u64, bool) -> String,
) {
    let _ = writeln!(s, "#{rank} {}  {}", f.id, f.title);
    let cost = match f.cost_ns {
        // The start-up's own cost has no share of the time without it.
        Some(c) => format!(
            "cost {} ({})",
            units::duration_ns(c),
            share(c, !f.is_startup())
        ),
        None => "cost not measured".to_string(),
    };
    let saving = match f.saving_ns {
        Some(v) => format!("could save ~{}", units::duration_ns(v)),
        None => "saving not estimated".to_string(),
    };
    let conf = match f.confidence {
        Confidence::Certain => "certain",
        Confidence::Likely => "likely",
    };
    let _ = writeln!(s, "   {cost}; {saving}; {conf}");
    for l in &f.locations {
        // A place that is a site of the run reads as the model has it; a
        // place only the source shows keeps the text the rule gave it.
        let from_model;
        let l = match l.site {
            Some(_) => {
                from_model = Location::of_site(run, &l.role, l.site, l.variable.clone());
                &from_model
            }
            None => l,
        };
        let var = l
            .variable
            .as_deref()
            .map(|v| format!("  [{v}]"))
            .unwrap_or_default();
        let _ = writeln!(s, "   at {:<12} {}  {}{var}", l.role, l.place(), l.function);
    }
    if !f.evidence.fields.is_empty() {
        let fields: Vec<String> = f
            .evidence
            .fields
            .iter()
            .map(|fd| format!("{} {}", fd.name.replace('_', " "), value_text(&fd.value)))
            .collect();
        wrap(
            s,
            &fields.join(", "),
            "   evidence: ",
            "             ",
            width,
        );
    }
    for t in &f.evidence.text {
        wrap(s, t, "     ", "     ", width);
    }
    wrap(s, &f.proposal.text, "   proposal: ", "             ", width);
    if let Some(d) = &f.proposal.directive {
        // A directive per line (S4 proposes several), each under the first.
        for (i, line) in d.lines().enumerate() {
            let label = if i == 0 {
                "   directive: "
            } else {
                "              "
            };
            let _ = writeln!(s, "{label}{line}");
        }
    }
    if f.proposal.patch.is_some() {
        let _ = writeln!(
            s,
            "   patch: yes (accprof analyze --patch prints it; --apply writes it)"
        );
    } else if let Some(why) = &f.proposal.no_patch {
        wrap(s, why, "   no patch: ", "             ", width);
    }
    if let Some(t) = &f.proposal.tune {
        let _ = writeln!(s, "   measure: {t}");
    }
}

/// A value in its unit.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::Count(c) => c.to_string(),
        Value::Bytes(b) => units::bytes(*b),
        Value::Ns(n) => units::duration_ns(*n),
        Value::Hash(h) => h.clone(),
        Value::Ratio(r) => format!("{r:.2}"),
        Value::BytesPerSec(r) => units::bytes_per_sec(*r),
        Value::Text(t) => t.clone(),
    }
}

/// Word-wraps `text` with `first` before the first line and `rest` before
/// the others.
fn wrap(s: &mut String, text: &str, first: &str, rest: &str, width: usize) {
    let mut line = String::from(first);
    let mut empty = true;
    for w in text.split(' ') {
        if !empty && line.chars().count() + 1 + w.chars().count() > width {
            s.push_str(line.trim_end());
            s.push('\n');
            line = String::from(rest);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(w);
        empty = false;
    }
    s.push_str(line.trim_end());
    s.push('\n');
}

#[derive(Serialize)]
struct JsonDoc<'a> {
    trace: &'a str,
    program: &'a [String],
    runtime: &'a str,
    cupti: bool,
    hashing: &'a str,
    wall_ns: u64,
    total_saving_ns: u64,
    /// CUDA start-up and code loading, part of `wall_ns`.
    startup_ns: u64,
    /// The run compiled its device code at start-up (the driver's cache
    /// missed); null without driver timings.
    paid_jit: Option<bool>,
    findings: &'a [Finding],
    notes: &'a [String],
    /// What the reader must know about the trace itself (damage, records
    /// left out, binaries not found, no end record).
    warnings: &'a [String],
    /// Bytes of the trace that could not be read (damaged or cut).
    lost_bytes: u64,
    /// How the process ended ("exit", "signal", ...), when the trace says.
    ending: Option<JsonEnding>,
    /// Constructs whose end event never came.
    cut_constructs: u64,
    /// The construct running when the program died, when it died in one.
    in_flight: Option<JsonInFlight<'a>>,
    /// Unified diff of every proposal's edits together, when there are any.
    patch: Option<&'a str>,
    /// Where the wall time went, per host thread.
    ledger: JsonLedger,
    /// Whether the coherence check ran and what it watched.
    coherence_check: JsonCheck,
}

/// The coherence check's state ([`accprof_analyzer::check::CheckState`]):
/// on, did_not_apply, not_run, cut or unknown (a trace before format
/// 1.6), with its counts where the trace has them.
#[derive(Serialize)]
struct JsonCheck {
    state: &'static str,
    text: String,
    ranges: Option<u64>,
    bytes: Option<u64>,
    faults: Option<u64>,
    handler_ns: Option<u64>,
    work_ns: Option<u64>,
    found: Option<u64>,
}

impl JsonCheck {
    fn of(c: &accprof_analyzer::check::CheckState) -> JsonCheck {
        use accprof_analyzer::check::CheckState as S;
        let mut j = JsonCheck {
            state: "",
            text: c.line(),
            ranges: None,
            bytes: None,
            faults: None,
            handler_ns: None,
            work_ns: None,
            found: None,
        };
        j.state = match *c {
            S::NotRun => "not_run",
            S::DidNotApply => "did_not_apply",
            S::On {
                ranges,
                bytes,
                faults,
                handler_ns,
                work_ns,
                found,
            } => {
                (j.ranges, j.bytes, j.faults) = (Some(ranges), Some(bytes), Some(faults));
                (j.handler_ns, j.work_ns, j.found) = (Some(handler_ns), Some(work_ns), Some(found));
                "on"
            }
            S::Cut { found } => {
                j.found = Some(found);
                "cut"
            }
            S::Unknown { found } => {
                j.found = Some(found);
                "unknown"
            }
        };
        j
    }
}

/// The ledger's rows ([`accprof_analyzer::ledger::Ledger::rows`]).
#[derive(Serialize)]
struct JsonLedger {
    wall_ns: u64,
    /// The trace holds CUDA driver timings, so the time inside constructs
    /// is split.
    timed: bool,
    rows: Vec<JsonLedgerRow>,
}

#[derive(Serialize)]
struct JsonLedgerRow {
    thread: u32,
    part: &'static str,
    /// 0: a part of the wall time; 1: a part of the time inside constructs.
    depth: u8,
    ns: u64,
    calls: Option<u64>,
}

#[derive(Serialize)]
struct JsonEnding {
    how: &'static str,
    /// Exit status, signal number or error code.
    code: Option<i32>,
    /// The signal's name, for a signal.
    signal: Option<&'static str>,
    text: Option<String>,
    /// The fault address of the fatal signal, when the kernel gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<u64>,
    /// The CUDA driver call the crashed thread was inside.
    #[serde(skip_serializing_if = "Option::is_none")]
    driver_call: Option<String>,
}

#[derive(Serialize)]
struct JsonInFlight<'a> {
    file: &'a str,
    function: &'a str,
    line: Option<u32>,
    what: &'a str,
    inside: Option<&'a str>,
    kernel: Option<&'a str>,
    transfers: &'a [String],
}

/// The findings as JSON (one object; `patch` is the combined diff).
pub fn render_json(
    run: &Run,
    analysis: &Analysis,
    facts: &RunFacts,
    warnings: &[String],
    trace: &str,
    patch: Option<&str>,
) -> Vec<u8> {
    use accprof_analyzer::vocabulary::Ending;
    let ending = facts.ending.map(|e| {
        let (how, code, signal) = match e.how {
            Ending::Exit(c) => ("exit", c, None),
            Ending::QuickExit(c) => ("quick_exit", Some(c), None),
            Ending::Signal(n) => (
                "signal",
                Some(n),
                Some(accprof_analyzer::summary::signal_name(n)),
            ),
            Ending::Exec => ("exec", None, None),
            Ending::RuntimeError(c) => ("runtime_error", Some(c), None),
        };
        JsonEnding {
            how,
            code,
            signal,
            text: facts.ending_text(),
            address: facts.crash.as_ref().and_then(|c| c.address),
            driver_call: facts
                .crash
                .as_ref()
                .and_then(|c| c.driver_call.as_ref().map(|(n, _)| n.clone())),
        }
    });
    let in_flight = facts.in_flight.as_ref().map(|f| JsonInFlight {
        file: &f.file,
        function: &f.function,
        line: f.line,
        what: &f.what,
        inside: f.inside.as_deref(),
        kernel: f.kernel.as_deref(),
        transfers: &f.transfers,
    });
    let doc = JsonDoc {
        trace,
        program: &run.process.header.command_line,
        runtime: &run.process.header.runtime,
        cupti: run.cupti_active(),
        hashing: match run.process.header.sources.hashing {
            accprof_analyzer::vocabulary::HashMode::Off => "off",
            accprof_analyzer::vocabulary::HashMode::Sampled => "sampled",
            accprof_analyzer::vocabulary::HashMode::Full => "full",
        },
        wall_ns: analysis.wall_ns,
        total_saving_ns: analysis.total_saving_ns,
        startup_ns: analysis.startup_ns,
        paid_jit: analysis.paid_jit,
        findings: &analysis.findings,
        notes: &analysis.notes,
        warnings,
        lost_bytes: run.process.losses.iter().map(|l| l.bytes).sum(),
        ending,
        cut_constructs: facts.cut_constructs,
        in_flight,
        patch,
        coherence_check: JsonCheck::of(&facts.check),
        ledger: JsonLedger {
            wall_ns: facts.ledger.wall_ns,
            timed: facts.ledger.timed,
            rows: facts
                .ledger
                .rows()
                .into_iter()
                .map(|r| JsonLedgerRow {
                    thread: r.thread,
                    part: r.key(),
                    depth: r.depth(),
                    ns: r.ns,
                    calls: r.calls,
                })
                .collect(),
        },
    };
    // Serializing plain data with string keys cannot fail.
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_words() {
        let mut s = String::new();
        wrap(&mut s, "one two three four", "> ", "  ", 9);
        assert_eq!(s, "> one two\n  three\n  four\n");
    }
}
