//! Where each event of a run is drawn, and the one clock of several runs:
//! the questions every timeline (the `tui`, the Chrome and Perfetto
//! exports) asks of the model instead of deciding them each.

use std::collections::BTreeMap;

use accprof_trace::CopyKind;

use super::entities::*;
use super::run::Run;

/// An event a timeline draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Item {
    Construct(ConstructId),
    Kernel(KernelId),
    Transfer(TransferId),
    Memset(MemsetId),
    MpiCall(MpiCallId),
    /// An instant: a host access the coherence check caught.
    HostAccess(HostAccessId),
}

/// The direction of a copy's track.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CopyDirection {
    /// Host to device.
    Upload,
    /// Device to host.
    Download,
    /// Device to device and other copies.
    Other,
}

impl CopyDirection {
    pub fn of(kind: CopyKind) -> CopyDirection {
        match kind {
            CopyKind::HostToDevice => CopyDirection::Upload,
            CopyKind::DeviceToHost => CopyDirection::Download,
            _ => CopyDirection::Other,
        }
    }
}

/// The track an event belongs to ([`Run::track`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Track {
    /// A construct: its host thread, nested `depth` constructs deep (0:
    /// top level); an MPI call: its host thread at depth 0 (MPI is called
    /// outside constructs); a host access: the thread that made it at depth
    /// 0 (the host's own code, or the download nobody read).
    Thread { thread: u32, depth: u8 },
    /// A kernel: its device and queue (CUDA stream); without CUPTI, the
    /// launches on the host, queue as the runtime reported it.
    Queue { device: u32, stream: u32 },
    /// A transfer: the copies in one direction.
    Copies(CopyDirection),
    /// A memset.
    Memsets,
}

impl Run {
    /// The track `item` belongs to, read from its row: every timeline puts
    /// the event there (a view may draw deeper nesting or several tracks
    /// in one row, never another track).
    pub fn track(&self, item: Item) -> Track {
        let t = &self.tables;
        match item {
            Item::Construct(c) => {
                let s = self.construct_shape(c);
                Track::Thread {
                    thread: s.thread,
                    depth: s.depth,
                }
            }
            Item::Kernel(k) => {
                let s = t.kernel_shapes.get(t.kernels[k.index()].shape);
                Track::Queue {
                    device: s.device,
                    stream: s.stream,
                }
            }
            Item::Transfer(x) => {
                let s = t.transfer_shapes.get(t.transfers[x.index()].shape);
                Track::Copies(CopyDirection::of(s.kind))
            }
            Item::Memset(_) => Track::Memsets,
            Item::MpiCall(m) => Track::Thread {
                thread: self.mpi_call(m).thread,
                depth: 0,
            },
            Item::HostAccess(a) => Track::Thread {
                thread: self.host_access(a).thread,
                depth: 0,
            },
        }
    }

    /// When `item` ran, on the run's trace clock: a construct whose end
    /// never came runs to the end of the run; a host access is an instant.
    pub fn span(&self, item: Item) -> (u64, u64) {
        match item {
            Item::Construct(c) => {
                let (s, e) = self.construct_span(c);
                (s, e.unwrap_or(self.process.span_ns.1))
            }
            Item::Kernel(k) => self.kernel_span(k),
            Item::Transfer(t) => self.transfer_span(t),
            Item::Memset(m) => {
                let m = self.memset(m);
                (m.start_ns, m.end_ns)
            }
            Item::MpiCall(m) => {
                let m = self.mpi_call(m);
                (m.start_ns, m.end_ns)
            }
            Item::HostAccess(a) => {
                let t = self.host_access(a).time_ns;
                (t, t)
            }
        }
    }

    /// Every event a timeline draws: constructs, kernels, transfers,
    /// memsets, MPI calls and host accesses.
    pub fn items(&self) -> impl Iterator<Item = Item> + '_ {
        let n = |len: usize| 0..len;
        n(self.tables.constructs.len())
            .map(|i| Item::Construct(ConstructId::at(i)))
            .chain(n(self.tables.kernels.len()).map(|i| Item::Kernel(KernelId::at(i))))
            .chain(n(self.tables.transfers.len()).map(|i| Item::Transfer(TransferId::at(i))))
            .chain(self.memsets().map(|(id, _)| Item::Memset(id)))
            .chain(self.mpi_call_ids().map(|(id, _)| Item::MpiCall(id)))
            .chain(self.host_access_ids().map(|(id, _)| Item::HostAccess(id)))
    }

    /// How busy each track was in each of `columns` equal parts of
    /// `a..b` (the run's clock): the share of the part that at least one
    /// of the track's events covers, 0 to 1. Events that overlap on a
    /// track (nested constructs, concurrent copies) count once.
    pub fn busy_shares(&self, a: u64, b: u64, columns: usize) -> BTreeMap<Track, Vec<f64>> {
        let mut spans: BTreeMap<Track, Vec<(u64, u64)>> = BTreeMap::new();
        for item in self.items() {
            let (s, e) = self.span(item);
            if e > s && e > a && s < b {
                spans.entry(self.track(item)).or_default().push((s, e));
            }
        }
        let width = b.saturating_sub(a).max(1) as f64 / columns.max(1) as f64;
        spans
            .into_iter()
            .map(|(track, mut list)| {
                list.sort_unstable();
                let mut shares = vec![0.0; columns];
                let mut add = |s: u64, e: u64| {
                    let (s, e) = ((s.max(a) - a) as f64, (e.min(b) - a) as f64);
                    let first = (s / width) as usize;
                    let last = ((e / width) as usize).min(columns.saturating_sub(1));
                    for (c, share) in shares.iter_mut().enumerate().take(last + 1).skip(first) {
                        let (lo, hi) = (c as f64 * width, (c + 1) as f64 * width);
                        *share += (e.min(hi) - s.max(lo)).max(0.0) / width;
                    }
                };
                // The union of the spans, a stretch at a time.
                let mut open: Option<(u64, u64)> = None;
                for (s, e) in list {
                    match open {
                        Some((os, oe)) if s <= oe => open = Some((os, oe.max(e))),
                        Some((os, oe)) => {
                            add(os, oe);
                            open = Some((s, e));
                        }
                        None => open = Some((s, e)),
                    }
                }
                if let Some((s, e)) = open {
                    add(s, e);
                }
                for share in &mut shares {
                    *share = share.min(1.0);
                }
                (track, shares)
            })
            .collect()
    }

    /// Time `t` of this run's trace clock as Unix time (ns since the
    /// epoch): the one clock several runs (MPI ranks) are lined up on. The
    /// header says what both clocks read when the collector started; the
    /// trace clock runs on from there.
    pub fn unix_ns(&self, t: u64) -> i128 {
        i128::from(self.process.header.start_unix_ns) + i128::from(t)
            - i128::from(self.process.header.start_clock_ns)
    }
}
