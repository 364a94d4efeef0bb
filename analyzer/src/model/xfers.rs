//! The large host <-> device transfers of a run in time order ([`Xfer`]):
//! what the buffers' names are inferred from ([`super::names`]) and what
//! the findings rules examine.

use std::collections::BTreeMap;

use accprof_trace::CopyKind;

use super::entities::{ConstructId, SiteId, TransferId};
use super::run::Run;

/// Transfers smaller than this are scalars, Fortran descriptors and kernel
/// argument blocks: the rules do not examine them by default, and the
/// sources' names are not inferred from them.
pub const LARGE_XFER_BYTES: u64 = 1024;

/// Direction of a host <-> device transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    Upload,
    Download,
}

impl Dir {
    pub fn word(self) -> &'static str {
        match self {
            Dir::Upload => "upload",
            Dir::Download => "download",
        }
    }
}

/// One large host <-> device transfer, as the rules see it.
#[derive(Debug, Clone)]
pub struct Xfer {
    pub transfer: TransferId,
    pub dir: Dir,
    pub host_ptr: Option<u64>,
    pub bytes: u64,
    pub hash: Option<u64>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The construct the transfer belongs to, and the outermost construct
    /// around it (GCC's implicit data part sits inside the compute construct).
    pub construct: Option<ConstructId>,
    pub origin: Option<ConstructId>,
    /// The origin's source site.
    pub site: Option<SiteId>,
}

impl Xfer {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// The host <-> device transfers of at least `min_bytes`, in time order,
/// and how many were smaller.
pub(crate) fn large_xfers(run: &Run, min_bytes: u64) -> (Vec<Xfer>, usize) {
    let mut xfers = Vec::new();
    let mut small = 0;
    for (id, c) in run.transfers() {
        let dir = match c.kind {
            CopyKind::HostToDevice => Dir::Upload,
            CopyKind::DeviceToHost => Dir::Download,
            _ => continue,
        };
        if c.bytes < min_bytes {
            small += 1;
            continue;
        }
        let origin = c.construct.map(|id| run.top_level(id));
        xfers.push(Xfer {
            transfer: id,
            dir,
            host_ptr: c.host_ptr(),
            bytes: c.bytes,
            hash: c.hash(),
            start_ns: c.start_ns,
            end_ns: c.end_ns,
            construct: c.construct,
            origin,
            site: c.construct.map(|id| run.line_site(id)),
        });
    }
    xfers.sort_by_key(|x| (x.start_ns, x.transfer));
    (xfers, small)
}

/// Groups items by key, in key order, each group keeping its items' order.
pub(crate) fn group_by<K: Ord + Clone, T>(
    items: impl IntoIterator<Item = (K, T)>,
) -> Vec<(K, Vec<T>)> {
    let mut map: BTreeMap<K, Vec<T>> = BTreeMap::new();
    for (k, t) in items {
        map.entry(k).or_default().push(t);
    }
    map.into_iter().collect()
}
