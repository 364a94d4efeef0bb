//! Whether the coherence check ran and what it watched, derived once from
//! the trace (its header's flag, the check's closing counts and the host
//! accesses it caught) for every view to state the same way.

use accprof_trace::CheckSummary;

use crate::units;

/// The coherence check's state in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckState {
    /// The trace says the check was not asked for.
    #[default]
    NotRun,
    /// Asked for, but no construct ran on a device with memory of its own
    /// (the host fallback): there were no device copies to compare with.
    DidNotApply,
    /// It ran on the device's copies.
    On {
        ranges: u64,
        bytes: u64,
        faults: u64,
        handler_ns: u64,
        work_ns: u64,
        /// Host accesses it caught (C1, C2, C3).
        found: u64,
    },
    /// Asked for, but the trace ends before the check's closing counts
    /// (the program died, or the trace was cut).
    Cut { found: u64 },
    /// A trace written before format 1.6 does not say whether the check
    /// ran; host accesses it holds (`found` > 0) say it did.
    Unknown { found: u64 },
}

impl CheckState {
    /// The state of a trace of format `version` whose header says
    /// `asked`, with the check's closing counts `summary` and `found`
    /// host accesses.
    pub fn of(
        version: (u16, u16),
        asked: bool,
        summary: Option<&CheckSummary>,
        found: u64,
    ) -> CheckState {
        match summary {
            Some(s) if !s.applied => CheckState::DidNotApply,
            Some(s) => CheckState::On {
                ranges: s.ranges,
                bytes: s.bytes,
                faults: s.faults,
                handler_ns: s.handler_ns,
                work_ns: s.work_ns,
                found,
            },
            None if asked => CheckState::Cut { found },
            None if version < (1, 6) => CheckState::Unknown { found },
            None => CheckState::NotRun,
        }
    }

    /// The check's own time the trace gives as a total only (its fault
    /// handler, which runs inside the program's code and records nothing
    /// there).
    pub fn handler_ns(&self) -> u64 {
        match *self {
            CheckState::On { handler_ns, .. } => handler_ns,
            _ => 0,
        }
    }

    /// One line for people: "coherence check: on, 10 ranges watched (5.2
    /// MiB), 0 faults, nothing found", "did not apply (host fallback)",
    /// "not run (...)".
    pub fn line(&self) -> String {
        const HOW: &str = "`accprof run --check coherence` finds stale host data";
        match *self {
            CheckState::NotRun => format!("coherence check: not run ({HOW})"),
            CheckState::DidNotApply => "coherence check: did not apply (host fallback: the OpenACC device was the host, so there were no device copies to compare with)".into(),
            CheckState::On {
                ranges,
                bytes,
                faults,
                handler_ns,
                work_ns,
                found,
            } => {
                let found = match found {
                    0 => "nothing found".to_string(),
                    1 => "1 host access found".to_string(),
                    n => format!("{n} host accesses found"),
                };
                format!(
                    "coherence check: on, {ranges} range{} watched ({}), {faults} fault{}, {found} (its own time: {} in the handler, {} at construct boundaries)",
                    plural(ranges),
                    units::bytes(bytes),
                    plural(faults),
                    units::duration_ns(handler_ns),
                    units::duration_ns(work_ns),
                )
            }
            CheckState::Cut { found } => format!(
                "coherence check: on, but the trace ends before its counts (the program did not exit normally); {found} host access{} found",
                if found == 1 { "" } else { "es" }
            ),
            CheckState::Unknown { found: 0 } => format!(
                "coherence check: not known (a trace before format 1.6 does not say; {HOW})"
            ),
            CheckState::Unknown { found } => format!(
                "coherence check: on, {found} host access{} found (traces before format 1.6 hold no count of the ranges watched or the faults: record again for them)",
                if found == 1 { "" } else { "es" }
            ),
        }
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(applied: bool) -> CheckSummary {
        CheckSummary {
            time_ns: 1,
            applied,
            ranges: 10,
            bytes: 3 << 20,
            faults: 0,
            handler_ns: 0,
            work_ns: 2_500_000,
        }
    }

    #[test]
    fn each_state_reads_as_one_line() {
        let on = CheckState::of((1, 6), true, Some(&summary(true)), 0);
        assert!(
            on.line().starts_with(
                "coherence check: on, 10 ranges watched (3.00 MiB), 0 faults, nothing found"
            ),
            "{}",
            on.line()
        );
        let host = CheckState::of((1, 6), true, Some(&summary(false)), 0);
        assert!(host
            .line()
            .starts_with("coherence check: did not apply (host fallback"));
        let off = CheckState::of((1, 6), false, None, 0);
        assert_eq!(
            off.line(),
            "coherence check: not run (`accprof run --check coherence` finds stale host data)"
        );
        assert!(matches!(
            CheckState::of((1, 6), true, None, 2),
            CheckState::Cut { found: 2 }
        ));
        assert!(CheckState::of((1, 5), false, None, 3)
            .line()
            .starts_with("coherence check: on, 3 host accesses found (traces before format 1.6"));
        assert!(CheckState::of((1, 5), false, None, 0)
            .line()
            .starts_with("coherence check: not known"));
    }
}
