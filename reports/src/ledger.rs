//! Where the wall time went: the ledger's rows, as every view shows them
//! (analyze's opening table, `report --extended`, `export --what ledger`).
//! The numbers and the rows are the model's
//! ([`accprof_analyzer::ledger::Ledger::rows_of`]); this only lays them out.

use std::fmt::Write as _;

use accprof_analyzer::ledger::Ledger;
use accprof_analyzer::units;

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
    for r in l.rows_of(main) {
        let indent = if r.depth() == 0 { "  " } else { "    " };
        let label = format!("{indent}{}", r.label());
        let calls = match r.calls {
            None | Some(0) => String::new(),
            Some(n) => format!("  ({n} {}{})", r.account.calls_noun(), plural(n)),
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
