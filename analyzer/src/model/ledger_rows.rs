//! The ledger's table: which rows a thread's ledger shows, in which order,
//! under which key and label. Every view of the ledger reads these rows
//! (`analyze`'s opening table, `report --extended`, `export --what ledger`,
//! the JSON's `ledger`, the timeline's header), so a part added to the
//! ledger, or a label changed, is so in all of them.

use super::ledger_types::{Ledger, Part, ThreadLedger};

/// What a row of the ledger stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Account {
    /// The program's own host code: the wall time less everything below.
    Program,
    /// Inside top-level OpenACC constructs.
    Constructs,
    /// A part of the time inside constructs, as the driver timed it.
    Inside(Part),
    /// accprof's own work inside constructs.
    Collector,
    /// Inside constructs, what no driver call and no collector work
    /// explains.
    Runtime,
    /// accprof's coherence check outside constructs.
    CollectorOutside,
    Mpi,
    /// CUDA driver calls outside every construct.
    CudaOutside,
    /// A part of those.
    Outside(Part),
}

impl Account {
    /// Stable name for exports.
    pub fn key(self) -> &'static str {
        match self {
            Account::Program => "program",
            Account::Constructs => "constructs",
            Account::Inside(p) => p.key(),
            Account::Collector => "collector",
            Account::Runtime => "runtime",
            Account::CollectorOutside => "collector_outside",
            Account::Mpi => "mpi",
            Account::CudaOutside => "cuda_outside",
            Account::Outside(p) => p.outside_key(),
        }
    }

    /// The row's label in a table.
    pub fn label(self) -> &'static str {
        match self {
            Account::Program => "the program's own host code",
            Account::Constructs => "inside OpenACC constructs",
            Account::Inside(p) | Account::Outside(p) => p.label(),
            Account::Collector => "accprof's own work (hashing, coherence check)",
            Account::Runtime => "the runtime's own work between driver calls",
            Account::CollectorOutside => "accprof's coherence check outside constructs",
            Account::Mpi => "MPI calls",
            Account::CudaOutside => "CUDA driver calls outside constructs",
        }
    }

    /// The row's name in a one-line summary ("MPI 4%").
    pub fn short(self) -> &'static str {
        match self {
            Account::Mpi => "MPI",
            Account::CudaOutside => "CUDA outside",
            a => a.key(),
        }
    }

    /// What the row's calls count, in the singular.
    pub fn calls_noun(self) -> &'static str {
        match self {
            Account::Constructs => "construct",
            Account::Mpi => "call",
            _ => "driver call",
        }
    }

    /// 0 for a part of the wall time, 1 for a part of the row of depth 0
    /// above it (inside constructs, or the driver calls outside them).
    pub fn depth(self) -> u8 {
        match self {
            Account::Inside(_) | Account::Collector | Account::Runtime | Account::Outside(_) => 1,
            _ => 0,
        }
    }

    /// A part of the time inside constructs.
    pub fn in_constructs(self) -> bool {
        matches!(
            self,
            Account::Inside(_) | Account::Collector | Account::Runtime
        )
    }
}

/// One row of a thread's ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerRow {
    pub thread: u32,
    pub account: Account,
    pub ns: u64,
    /// Calls (driver calls, MPI calls, constructs), where counted.
    pub calls: Option<u64>,
}

impl LedgerRow {
    pub fn key(&self) -> &'static str {
        self.account.key()
    }

    pub fn label(&self) -> &'static str {
        self.account.label()
    }

    pub fn depth(&self) -> u8 {
        self.account.depth()
    }
}

impl Ledger {
    /// The rows of one thread: the top-level rows sum to the wall time,
    /// the nested ones to the row above them. A part the driver was never
    /// called for has no row; without the driver's timings the time inside
    /// constructs is not split.
    pub fn rows_of(&self, t: &ThreadLedger) -> Vec<LedgerRow> {
        let row = |account, ns, calls| LedgerRow {
            thread: t.thread,
            account,
            ns,
            calls,
        };
        let mut rows = vec![
            row(Account::Program, t.program_ns(self.wall_ns), None),
            row(Account::Constructs, t.inside_ns, Some(t.constructs)),
        ];
        if self.timed {
            for p in Part::ALL {
                if t.inside.calls(p) > 0 {
                    rows.push(row(
                        Account::Inside(p),
                        t.inside.ns(p),
                        Some(t.inside.calls(p)),
                    ));
                }
            }
        }
        if t.collector_ns > 0 {
            rows.push(row(Account::Collector, t.collector_ns, None));
        }
        if self.timed {
            rows.push(row(Account::Runtime, t.runtime_rest_ns(), None));
        }
        if t.collector_outside_ns > 0 {
            rows.push(row(Account::CollectorOutside, t.collector_outside_ns, None));
        }
        if t.mpi_calls > 0 {
            rows.push(row(Account::Mpi, t.mpi_ns, Some(t.mpi_calls)));
        }
        if t.outside.total_ns() > 0 {
            let calls: u64 = Part::ALL.iter().map(|&p| t.outside.calls(p)).sum();
            rows.push(row(Account::CudaOutside, t.outside.total_ns(), Some(calls)));
            for p in Part::ALL {
                if t.outside.calls(p) > 0 {
                    rows.push(row(
                        Account::Outside(p),
                        t.outside.ns(p),
                        Some(t.outside.calls(p)),
                    ));
                }
            }
        }
        rows
    }

    /// Every thread's rows, the busiest thread first.
    pub fn rows(&self) -> Vec<LedgerRow> {
        self.threads.iter().flat_map(|t| self.rows_of(t)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ledger_types::Parts;

    fn parts(list: &[(Part, u64, u64)]) -> Parts {
        let mut p = Parts::default();
        for &(part, ns, calls) in list {
            p.ns[part as usize] = ns;
            p.calls[part as usize] = calls;
        }
        p
    }

    /// A timed thread with every kind of row: the rows come in the
    /// table's order with their keys and labels, the top-level ones sum to
    /// the wall time and the nested ones to the row above them; a part
    /// never called has no row.
    #[test]
    fn a_threads_rows_partition_its_wall_time() {
        let t = ThreadLedger {
            thread: 7,
            inside_ns: 600,
            constructs: 3,
            inside: parts(&[(Part::Transfer, 200, 4), (Part::Launch, 100, 3)]),
            outside: parts(&[(Part::StartUp, 50, 2)]),
            mpi_ns: 80,
            mpi_calls: 5,
            collector_ns: 40,
            collector_outside_ns: 10,
        };
        let l = Ledger {
            wall_ns: 1000,
            timed: true,
            threads: vec![t.clone()],
            ..Ledger::default()
        };
        let rows = l.rows();
        let got: Vec<(&str, &str, u8, u64, Option<u64>)> = rows
            .iter()
            .map(|r| (r.key(), r.label(), r.depth(), r.ns, r.calls))
            .collect();
        assert_eq!(
            got,
            [
                ("program", "the program's own host code", 0, 260, None),
                ("constructs", "inside OpenACC constructs", 0, 600, Some(3)),
                ("transfer", "transfers", 1, 200, Some(4)),
                ("launch", "kernel launches", 1, 100, Some(3)),
                (
                    "collector",
                    "accprof's own work (hashing, coherence check)",
                    1,
                    40,
                    None
                ),
                (
                    "runtime",
                    "the runtime's own work between driver calls",
                    1,
                    260,
                    None
                ),
                (
                    "collector_outside",
                    "accprof's coherence check outside constructs",
                    0,
                    10,
                    None
                ),
                ("mpi", "MPI calls", 0, 80, Some(5)),
                (
                    "cuda_outside",
                    "CUDA driver calls outside constructs",
                    0,
                    50,
                    Some(2)
                ),
                (
                    "outside_startup",
                    "CUDA start-up and code loading",
                    1,
                    50,
                    Some(2)
                ),
            ]
        );
        assert!(rows.iter().all(|r| r.thread == 7));
        let sum = |f: fn(&Account) -> bool| -> u64 {
            rows.iter().filter(|r| f(&r.account)).map(|r| r.ns).sum()
        };
        assert_eq!(sum(|a| a.depth() == 0), l.wall_ns);
        assert_eq!(sum(|a| a.in_constructs()), t.inside_ns);
        assert_eq!(sum(|a| matches!(a, Account::Outside(_))), 50);

        // Without the driver's timings the time inside constructs is not
        // split (the collector's work still shows).
        let untimed = Ledger {
            timed: false,
            ..l.clone()
        };
        let keys: Vec<&str> = untimed.rows().iter().map(LedgerRow::key).collect();
        assert_eq!(
            keys,
            [
                "program",
                "constructs",
                "collector",
                "collector_outside",
                "mpi",
                "cuda_outside",
                "outside_startup"
            ]
        );
    }
}
