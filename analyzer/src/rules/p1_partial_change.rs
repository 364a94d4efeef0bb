//! P1: whole array moved when only a small part of it is used. The part
//! used is known where MPI uses it: an `update host` that stages a buffer
//! for MPI sends, an `update device` that brings back what MPI received.
//! The collector records the host ranges of each MPI call, so the bytes an
//! update moved are set against the bytes of that buffer the MPI calls
//! between it and the buffer's next (or previous) transfer read (or wrote).
//!
//! Without MPI calls, which part of a buffer changed between transfers
//! would need hashes per range of the buffer; the collector takes one hash
//! per transfer, so the rule says it could not check rather than guess.

use crate::findings::{Category, Confidence, Finding, Value};
use crate::model::{group_by, ConstructClass, Dir, Xfer};
use crate::units;

use super::builders::xfer_evidence;
use super::context::{Checked, Context};

/// An update moved more than this many times what MPI used of it.
const WASTE_RATIO: u64 = 2;

/// What MPI used of one update's transfer: bytes, and the used ranges as
/// offsets into the buffer.
struct Used {
    bytes: u64,
    slices: Vec<(u64, u64)>,
}

/// The bytes of [p, p + len) that the MPI calls in (t0, t1) read (`write`
/// false) or wrote (true).
fn used_by_mpi(cx: &Context, p: u64, len: u64, t0: u64, t1: u64, write: bool) -> Used {
    let calls = cx.run.mpi_calls();
    let first = calls.partition_point(|c| c.start_ns < t0);
    let mut slices: Vec<(u64, u64)> = Vec::new();
    for c in calls[first..].iter().take_while(|c| c.end_ns <= t1) {
        for r in c.ranges.iter().filter(|r| r.write == write) {
            let a = r.host_ptr.max(p);
            let b = r
                .host_ptr
                .saturating_add(r.bytes)
                .min(p.saturating_add(len));
            if a < b {
                slices.push((a - p, b - p));
            }
        }
    }
    slices.sort_unstable();
    // Merge overlaps: a byte used twice counts once.
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (a, b) in slices {
        match merged.last_mut() {
            Some(m) if a <= m.1 => m.1 = m.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    Used {
        bytes: merged.iter().map(|(a, b)| b - a).sum(),
        slices: merged,
    }
}

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    if cx.run.mpi_calls().is_empty() {
        if !cx.xfers.is_empty() {
            out.note("P1 (whole array sent when a small range changed) not checked: the trace has one hash per transfer; which part of a buffer changed needs per-range hashes (it is checked for buffers MPI uses, when the program calls MPI)");
        }
        return out;
    }
    // Each update transfer next to MPI calls: (transfer, bytes MPI used).
    let mut staged: Vec<(&Xfer, Used)> = Vec::new();
    for list in cx.buffers.values() {
        for (k, &i) in list.iter().enumerate() {
            let x = &cx.xfers[i];
            if cx.origin_class(x) != Some(ConstructClass::Update) {
                continue;
            }
            let Some(p) = x.host_ptr else { continue };
            let used = match x.dir {
                // Staged for sending: read by MPI until the buffer moves again.
                Dir::Download => {
                    let next = list.get(k + 1).map_or(u64::MAX, |&j| cx.xfers[j].start_ns);
                    used_by_mpi(cx, p, x.bytes, x.end_ns, next, false)
                }
                // Received into: written by MPI since the buffer last moved.
                Dir::Upload => {
                    let prev = k.checked_sub(1).map_or(0, |j| cx.xfers[list[j]].end_ns);
                    used_by_mpi(cx, p, x.bytes, prev, x.start_ns, true)
                }
            };
            if used.bytes > 0 && x.bytes >= WASTE_RATIO * used.bytes {
                staged.push((x, used));
            }
        }
    }
    let cuda_aware = cx.run.mpi_calls().iter().find_map(|c| c.cuda_aware);
    for ((site, dir), group) in group_by(staged.into_iter().map(|(x, u)| ((x.site, x.dir), (x, u))))
    {
        let xs: Vec<&Xfer> = group.iter().map(|(x, _)| *x).collect();
        let moved: u64 = xs.iter().map(|x| x.bytes).sum();
        let used: u64 = group.iter().map(|(_, u)| u.bytes).sum();
        let n = xs.len() as u64;
        let (what, verb) = match dir {
            Dir::Download => ("update host", "sent"),
            Dir::Upload => ("update device", "received"),
        };
        let place = cx.location("update", site, None).place();
        let mut f = Finding::new(
            "P1",
            Category::DataMovement,
            format!(
                "whole buffer moved for MPI: `{what}` at {place} moved {} per call where MPI {verb} {} of it",
                units::bytes(moved / n),
                units::bytes(used / n)
            ),
        );
        f.confidence = Confidence::Certain;
        let cost: u64 = xs.iter().map(|x| x.duration_ns()).sum();
        f.cost_ns = Some(cost);
        // What moving only the used bytes would save, at the same rate.
        f.saving_ns = Some(cost - (cost as u128 * used as u128 / moved.max(1) as u128) as u64);
        f.locations
            .push(cx.location("update", site, Some(super::builders::vars_label(cx, &xs))));
        f.subjects.transfers = xs.iter().map(|x| x.transfer).collect();
        xfer_evidence(&mut f.evidence, "", &xs);
        f.evidence.field("bytes_moved", Value::Bytes(moved));
        f.evidence.field("bytes_mpi_used", Value::Bytes(used));
        let slices = &group[0].1.slices;
        f.evidence.say(format!(
            "{n} transfers moved {} in all; the MPI calls {verb} {} of those bytes ({:.1}%). In the first one MPI used bytes {} of the {}-byte range.",
            units::bytes(moved),
            units::bytes(used),
            100.0 * used as f64 / moved.max(1) as f64,
            slices
                .iter()
                .map(|(a, b)| format!("[{a}, {b})"))
                .collect::<Vec<_>>()
                .join(", "),
            xs[0].bytes
        ));
        let name = super::builders::vars_label(cx, &xs);
        let direct = match cuda_aware {
            Some(true) => format!(
                "This MPI library says it is CUDA-aware (MPIX_Query_cuda_support): pass device addresses to MPI inside `host_data use_device({name})` and drop the update."
            ),
            Some(false) => "This MPI library says it is not CUDA-aware (MPIX_Query_cuda_support returned 0): device addresses cannot go to MPI here.".to_string(),
            None => "Whether this MPI library takes device memory is not known (it has no MPIX_Query_cuda_support); with a CUDA-aware MPI, `host_data use_device` around the MPI calls needs no update.".to_string(),
        };
        f.proposal.text = format!(
            "Move only what MPI uses: `{what}` of the {} slice{} MPI {verb} (as `{what}(u[ny:ny])` for one row of `u`), or pack the halo into a small contiguous buffer on the device and move that. {direct}",
            slices.len(),
            if slices.len() == 1 { "" } else { "s" },
        );
        f.proposal.no_patch = Some(
            "the slices depend on the program's index arithmetic; write them from the ranges above"
                .to_string(),
        );
        out.findings.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use accprof_trace::{CopyKind, HashMode, MpiRange};

    use super::*;
    use crate::model::MpiCall;
    use crate::testkit::runs::{run_rule, RunBuilder};

    #[test]
    fn says_it_cannot_check_without_mpi() {
        let mut b = RunBuilder::new(HashMode::Full);
        let s = b.site("a.c", 1);
        let a = b.buf(1 << 20, 1);
        b.gcc_compute(s, &[a], 1_000, 1, &[a]);
        let run = b.build();
        let c = run_rule(&run, check);
        assert!(c.findings.is_empty());
        assert!(c.notes[0].starts_with("P1"));
    }

    /// mpi_halo_whole's step: the whole block down, two Sendrecv of one
    /// row each way, the whole block up.
    fn halo_run(steps: usize, cuda_aware: Option<bool>) -> crate::Run {
        let mut b = RunBuilder::new(HashMode::Off);
        let down = b.site("h.c", 155);
        let up = b.site("h.c", 162);
        let row = 8 * 512u64;
        let u = b.buf(130 * row, 0);
        let mut calls = Vec::new();
        for _ in 0..steps {
            let c = b.open(ConstructClass::Update, down, None);
            b.copy(c, CopyKind::DeviceToHost, u, 50_000);
            b.close(c);
            for (send, recv) in [(1, 129), (128, 0)] {
                let t = b.t;
                b.t += 10_000;
                calls.push(MpiCall {
                    routine: "MPI_Sendrecv".into(),
                    start_ns: t,
                    end_ns: t + 5_000,
                    thread: 0,
                    cuda_aware,
                    site: None,
                    ranges: vec![
                        MpiRange {
                            host_ptr: u.ptr + send * row,
                            bytes: row,
                            write: false,
                        },
                        MpiRange {
                            host_ptr: u.ptr + recv * row,
                            bytes: row,
                            write: true,
                        },
                    ],
                });
            }
            let c = b.open(ConstructClass::Update, up, None);
            b.copy(c, CopyKind::HostToDevice, u, 50_000);
            b.close(c);
        }
        let mut run = b.build();
        for c in calls {
            run.push_mpi_call(c);
        }
        run
    }

    #[test]
    fn whole_block_updates_around_halo_exchanges() {
        let run = halo_run(5, Some(false));
        let c = run_rule(&run, check);
        assert_eq!(c.findings.len(), 2, "{:#?}", c.findings);
        let down = c
            .findings
            .iter()
            .find(|f| f.title.contains("update host"))
            .expect("download finding");
        assert_eq!(down.evidence.count("transfers"), Some(5));
        // 130 rows moved, 2 rows sent per step.
        assert!(
            down.title
                .contains("moved 520 KiB per call where MPI sent 8.00 KiB of it"),
            "{}",
            down.title
        );
        assert!(
            down.proposal.text.contains("not CUDA-aware"),
            "{}",
            down.proposal.text
        );
        let up = c
            .findings
            .iter()
            .find(|f| f.title.contains("update device"))
            .expect("upload finding");
        assert!(up.title.contains("MPI received 8.00 KiB"), "{}", up.title);
        assert!(
            up.evidence.text[0].contains("[0, 4096), [528384, 532480)"),
            "{:?}",
            up.evidence.text
        );
    }

    #[test]
    fn updating_only_the_rows_mpi_uses_is_fine() {
        // mpi_halo's step: one row down, one Sendrecv sending it and
        // receiving another, that row up.
        let mut b = RunBuilder::new(HashMode::Off);
        let down = b.site("h.c", 156);
        let up = b.site("h.c", 168);
        let row = 8 * 512u64;
        let sent = b.buf(row, 0);
        let received = b.buf(row, 0);
        let mut calls = Vec::new();
        for _ in 0..4 {
            let c = b.open(ConstructClass::Update, down, None);
            b.copy(c, CopyKind::DeviceToHost, sent, 5_000);
            b.close(c);
            let t = b.t;
            b.t += 10_000;
            calls.push(MpiCall {
                routine: "MPI_Sendrecv".into(),
                start_ns: t,
                end_ns: t + 5_000,
                thread: 0,
                cuda_aware: None,
                site: None,
                ranges: vec![
                    MpiRange {
                        host_ptr: sent.ptr,
                        bytes: row,
                        write: false,
                    },
                    MpiRange {
                        host_ptr: received.ptr,
                        bytes: row,
                        write: true,
                    },
                ],
            });
            let c = b.open(ConstructClass::Update, up, None);
            b.copy(c, CopyKind::HostToDevice, received, 5_000);
            b.close(c);
        }
        let mut run = b.build();
        for c in calls {
            run.push_mpi_call(c);
        }
        let c = run_rule(&run, check);
        assert!(c.findings.is_empty(), "{:#?}", c.findings);
        assert!(c.notes.is_empty(), "{:?}", c.notes);
    }

    #[test]
    fn cuda_aware_mpi_gets_host_data() {
        let run = halo_run(3, Some(true));
        let c = run_rule(&run, check);
        assert!(c.findings[0].proposal.text.contains("host_data use_device"));
    }
}
