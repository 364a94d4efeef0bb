//! Where the wall time went: the ledger's rows, as every view shows them
//! (analyze's opening table, `report --extended`, `export --what ledger`).
//! The numbers are the model's ([`accprof_analyzer::ledger`]); this only
//! lays them out.

use std::fmt::Write as _;

use accprof_analyzer::ledger::{Ledger, Part, ThreadLedger};
use accprof_analyzer::units;

/// One row of a thread's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    pub thread: u32,
    /// Stable name for exports: program, constructs, allocation, transfer,
    /// launch, wait, startup, other_driver, runtime, collector,
    /// collector_outside, mpi, cuda_outside.
    pub key: &'static str,
    pub label: &'static str,
    /// 0 for the parts of the wall time, 1 for the parts of the row of
    /// depth 0 above it (inside constructs, or the driver calls outside
    /// them).
    pub depth: u8,
    pub ns: u64,
    /// Calls (driver calls, MPI calls, constructs), where counted.
    pub calls: Option<u64>,
}

/// The rows of one thread: the top-level rows sum to the wall time, the
/// nested ones to the time inside constructs.
pub fn thread_rows(l: &Ledger, t: &ThreadLedger) -> Vec<LedgerRow> {
    let row = |key, label, depth, ns, calls| LedgerRow {
        thread: t.thread,
        key,
        label,
        depth,
        ns,
        calls,
    };
    let mut rows = vec![
        row(
            "program",
            "the program's own host code",
            0,
            t.program_ns(l.wall_ns),
            None,
        ),
        row(
            "constructs",
            "inside OpenACC constructs",
            0,
            t.inside_ns,
            Some(t.constructs),
        ),
    ];
    if l.timed {
        for p in Part::ALL {
            if t.inside.calls(p) > 0 {
                rows.push(row(
                    p.key(),
                    p.label(),
                    1,
                    t.inside.ns(p),
                    Some(t.inside.calls(p)),
                ));
            }
        }
    }
    if t.collector_ns > 0 {
        rows.push(row(
            "collector",
            "accprof's own work (hashing, coherence check)",
            1,
            t.collector_ns,
            None,
        ));
    }
    if l.timed {
        rows.push(row(
            "runtime",
            "the runtime's own work between driver calls",
            1,
            t.runtime_rest_ns(),
            None,
        ));
    }
    if t.collector_outside_ns > 0 {
        rows.push(row(
            "collector_outside",
            "accprof's coherence check outside constructs",
            0,
            t.collector_outside_ns,
            None,
        ));
    }
    if t.mpi_calls > 0 {
        rows.push(row("mpi", "MPI calls", 0, t.mpi_ns, Some(t.mpi_calls)));
    }
    if t.outside.total_ns() > 0 {
        let calls: u64 = Part::ALL.iter().map(|&p| t.outside.calls(p)).sum();
        rows.push(row(
            "cuda_outside",
            "CUDA driver calls outside constructs",
            0,
            t.outside.total_ns(),
            Some(calls),
        ));
        for p in Part::ALL {
            if t.outside.calls(p) > 0 {
                rows.push(row(
                    p.outside_key(),
                    p.label(),
                    1,
                    t.outside.ns(p),
                    Some(t.outside.calls(p)),
                ));
            }
        }
    }
    rows
}

/// Every thread's rows, the busiest thread first.
pub fn rows(l: &Ledger) -> Vec<LedgerRow> {
    l.threads.iter().flat_map(|t| thread_rows(l, t)).collect()
}

/// The ledger as text: the busiest thread's table (and one line for each
/// other thread), with each row's share of the wall time.
pub fn render(out: &mut String, l: &Ledger) {
    let Some(main) = l.main_thread() else {
        return;
    };
    let share = |ns: u64| {
        if l.wall_ns == 0 {
            0.0
        } else {
            100.0 * ns as f64 / l.wall_ns as f64
        }
    };
    let _ = writeln!(
        out,
        "Where the wall time went (host thread {}, wall {}):",
        main.thread,
        units::duration_ns(l.wall_ns)
    );
    for r in thread_rows(l, main) {
        let indent = if r.depth == 0 { "  " } else { "    " };
        let label = format!("{indent}{}", r.label);
        let calls = match (r.key, r.calls) {
            (_, None) | (_, Some(0)) => String::new(),
            ("constructs", Some(n)) => format!("  ({n} construct{})", plural(n)),
            ("mpi", Some(n)) => format!("  ({n} call{})", plural(n)),
            (_, Some(n)) => format!("  ({n} driver call{})", plural(n)),
        };
        let _ = writeln!(
            out,
            "{label:<50} {:>10} {:>4.0}%{calls}",
            units::duration_ns(r.ns),
            share(r.ns)
        );
    }
    if let Some(ns) = l.before_first_record_ns {
        let _ = writeln!(
            out,
            "  (before that: {} from the process's start to its first record)",
            units::duration_ns(ns)
        );
    }
    if !l.timed && main.inside_ns > 0 {
        let _ = writeln!(
            out,
            "  (the trace has no CUDA driver timings, so the time inside constructs is not split)"
        );
    }
    // MPI is named only for a run that made MPI calls.
    let mpi = l.threads.iter().any(|t| t.mpi_calls > 0);
    for t in &l.threads[1..] {
        let _ = writeln!(
            out,
            "  host thread {}: inside OpenACC constructs {} ({:.0}%){}",
            t.thread,
            units::duration_ns(t.inside_ns),
            share(t.inside_ns),
            if mpi {
                format!(", MPI calls {}", units::duration_ns(t.mpi_ns))
            } else {
                String::new()
            }
        );
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
