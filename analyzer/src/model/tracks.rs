//! Where each event of a run is drawn, and the one clock of several runs:
//! the questions every timeline (the `tui`, the Chrome and Perfetto
//! exports) asks of the model instead of deciding them each.

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

    /// Time `t` of this run's trace clock as Unix time (ns since the
    /// epoch): the one clock several runs (MPI ranks) are lined up on. The
    /// header says what both clocks read when the collector started; the
    /// trace clock runs on from there.
    pub fn unix_ns(&self, t: u64) -> i128 {
        i128::from(self.process.header.start_unix_ns) + i128::from(t)
            - i128::from(self.process.header.start_clock_ns)
    }
}
