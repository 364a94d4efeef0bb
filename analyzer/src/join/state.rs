//! What the join holds while it reads: open regions, ids handed out in
//! sequence, the live constructs, device records waiting for their driver
//! call, allocations not yet freed.

use std::collections::HashMap;

use accprof_trace::{AccEventKind, KernelRecord, MemcpyRecord, MemsetRecord, StringId};

use crate::idhash::IdHashMap;
use crate::model::{AllocId, Construct, ConstructClass, ConstructId, LaunchRequest};

/// The regions of the constructs not yet final, in start order: as many
/// as are in flight (a few per thread), so a scan from the latest beats
/// hashing the region of every event.
#[derive(Default)]
pub(super) struct OpenRegions(Vec<(u64, ConstructId)>);

impl OpenRegions {
    /// The latest-started construct of `region` that is not final.
    #[inline]
    pub(super) fn get(&self, region: &u64) -> Option<&ConstructId> {
        self.0
            .iter()
            .rev()
            .find(|(r, _)| r == region)
            .map(|(_, c)| c)
    }

    pub(super) fn insert(&mut self, region: u64, id: ConstructId) {
        self.0.push((region, id));
    }

    pub(super) fn remove(&mut self, id: ConstructId) {
        if let Some(i) = self.0.iter().rposition(|&(_, c)| c == id) {
            self.0.remove(i);
        }
    }
}

/// A map from ids handed out in sequence (call site ids) to small values:
/// a vector indexed by id while the ids stay dense, a hash map for the
/// ones far outside (a damaged or unusual trace costs speed, never
/// memory).
pub(super) struct IdMap<V> {
    pub(super) dense: Vec<Option<V>>,
    pub(super) sparse: HashMap<u64, V>,
    pub(super) len: usize,
}

impl<V: Copy> IdMap<V> {
    pub(super) fn new() -> Self {
        IdMap {
            dense: Vec::new(),
            sparse: HashMap::new(),
            len: 0,
        }
    }

    pub(super) fn insert(&mut self, id: u64, v: V) {
        self.len += 1;
        if let Some(slot) = self.dense.get_mut(id as usize) {
            *slot = Some(v);
            return;
        }
        // Grow only while the ids are about as many as the entries.
        if id < 4096 || id < 4 * self.len as u64 {
            let want = (id as usize + 1).max(self.dense.len() * 2);
            self.dense.resize(want, None);
            self.dense[id as usize] = Some(v);
        } else {
            self.sparse.insert(id, v);
        }
    }

    pub(super) fn get(&self, id: u64) -> Option<V> {
        match self.dense.get(id as usize) {
            Some(v) => *v,
            None if self.sparse.is_empty() => None,
            None => self.sparse.get(&id).copied(),
        }
    }
}

/// The live constructs, by id. Ids are handed out in sequence and most
/// constructs are let go soon after the ones started before them, so the
/// latest ones sit in a window indexed by id (no hashing); one that stays
/// live while many later ones come and go (open for long, or named by a
/// correlation whose device record never comes) moves to a hash map, so
/// the window never holds more than `WINDOW` slots.
pub(super) struct LiveMap {
    /// Id of the window's first slot.
    pub(super) base: usize,
    pub(super) window: std::collections::VecDeque<Option<Live>>,
    pub(super) old: IdHashMap<ConstructId, Live>,
}

impl LiveMap {
    pub(super) const WINDOW: usize = 1024;

    pub(super) fn new() -> Self {
        LiveMap {
            base: 0,
            window: std::collections::VecDeque::new(),
            old: IdHashMap::default(),
        }
    }

    #[inline]
    pub(super) fn get(&self, id: &ConstructId) -> Option<&Live> {
        match id.index().checked_sub(self.base) {
            Some(i) => self.window.get(i)?.as_ref(),
            None => self.old.get(id),
        }
    }

    #[inline]
    pub(super) fn get_mut(&mut self, id: &ConstructId) -> Option<&mut Live> {
        match id.index().checked_sub(self.base) {
            Some(i) => self.window.get_mut(i)?.as_mut(),
            None => self.old.get_mut(id),
        }
    }

    /// Adds the construct of the next id in sequence (any other id goes
    /// to the hash map).
    pub(super) fn insert(&mut self, id: ConstructId, l: Live) {
        if self.window.is_empty() {
            self.base = id.index();
        }
        if id.index() != self.base + self.window.len() {
            self.old.insert(id, l);
            return;
        }
        if self.window.len() == Self::WINDOW {
            if let Some(Some(first)) = self.window.pop_front() {
                self.old.insert(ConstructId::at(self.base), first);
            }
            self.base += 1;
            self.trim();
        }
        self.window.push_back(Some(l));
    }

    pub(super) fn remove(&mut self, id: &ConstructId) {
        match id.index().checked_sub(self.base) {
            Some(i) => {
                if let Some(slot) = self.window.get_mut(i) {
                    *slot = None;
                    self.trim();
                }
            }
            None => {
                self.old.remove(id);
            }
        }
    }

    /// Drops the empty slots at the front.
    #[inline]
    pub(super) fn trim(&mut self) {
        while let Some(None) = self.window.front() {
            self.window.pop_front();
            self.base += 1;
        }
    }
}

/// The allocations not yet freed at one device pointer: the latest, and
/// those before it (rarely any: a pointer is normally freed before it is
/// handed out again).
pub(super) struct Unfreed {
    pub(super) latest: AllocId,
    pub(super) earlier: Vec<AllocId>,
}

/// What a CUPTI correlation id tells: the construct of the driver call,
/// the host pointer of a copy and the hash of the host buffer.
#[derive(Clone, Copy, Default)]
pub(super) struct Correlated {
    /// The driver call was seen (a hash may come first).
    pub(super) called: bool,
    pub(super) construct: Option<ConstructId>,
    pub(super) host_ptr: Option<u64>,
    pub(super) hash: Option<u64>,
}

/// A CUPTI record, with its place in the trace.
#[derive(Clone, Copy)]
pub(super) enum DeviceRecord {
    Kernel(KernelRecord),
    Memcpy(MemcpyRecord),
    Memset(MemsetRecord),
}

impl DeviceRecord {
    pub(super) fn correlation(&self) -> u32 {
        match self {
            DeviceRecord::Kernel(k) => k.correlation,
            DeviceRecord::Memcpy(m) => m.correlation,
            DeviceRecord::Memset(m) => m.correlation,
        }
    }
}

/// A construct not yet handed over, or one that entities in flight still
/// point at.
pub(super) struct Live {
    pub(super) c: Construct,
    pub(super) top: ConstructId,
    pub(super) top_class: ConstructClass,
    pub(super) launches: Vec<LaunchRequest>,
    /// Joined device records waiting for this construct to end: its
    /// transfers and memsets (a hash of the buffer may still come), and
    /// for a top-level construct the kernels inside it (their elapsed
    /// time is its host time).
    pub(super) waiting: Vec<(DeviceRecord, u64, ConstructId)>,
    /// Itself while not final, the correlations that name it, and the
    /// live constructs nested in it.
    pub(super) refs: u32,
    pub(super) fin: bool,
}

/// An acc_prof upload/download start waiting for its end.
pub(super) struct PendingCopy {
    pub(super) thread: u32,
    pub(super) start_kind: AccEventKind,
    pub(super) start_ns: u64,
    pub(super) bytes: u64,
    pub(super) var: Option<StringId>,
    pub(super) host_ptr: Option<u64>,
}
