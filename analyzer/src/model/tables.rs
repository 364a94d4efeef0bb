//! The run's packed tables: each entity a row of its own numbers and the
//! index of the shape it shares with others.

use accprof_trace::{ConstructKind, CopyKind, MemoryKind};

use crate::idhash::IdHashMap;

use super::entities::*;

/// The numbers of an entity that a run repeats (a kernel's name, launch
/// shape and stream; a transfer's buffer and direction; an allocation's
/// size and device pointer), each kept once: an entity holds the index of
/// its shape. The lookup from shape to index lives only while the run is
/// built; the shapes used last are tried first (a launch storm repeats
/// the few shapes of its constructs over and over).
#[derive(Debug, Clone)]
pub(crate) struct Shapes<S> {
    pub(super) list: Vec<S>,
    pub(super) index: IdHashMap<S, u32>,
    pub(super) recent: [Option<(S, u32)>; 4],
    pub(super) next: usize,
}

impl<S> Default for Shapes<S> {
    fn default() -> Self {
        Shapes {
            list: Vec::new(),
            index: Default::default(),
            recent: [None, None, None, None],
            next: 0,
        }
    }
}

impl<S: Copy + Eq + std::hash::Hash> Shapes<S> {
    /// The index of `shape`, added when new. A run holds fewer than 2^32
    /// shapes (each is an entity's).
    pub(super) fn intern(&mut self, shape: S) -> u32 {
        for (s, i) in self.recent.iter().flatten() {
            if *s == shape {
                return *i;
            }
        }
        let list = &mut self.list;
        let i = *self.index.entry(shape).or_insert_with(|| {
            list.push(shape);
            (list.len() - 1) as u32
        });
        self.recent[self.next] = Some((shape, i));
        self.next = (self.next + 1) % self.recent.len();
        i
    }

    #[inline]
    pub(super) fn get(&self, i: u32) -> S {
        self.list[i as usize]
    }

    /// Done adding: the lookup goes, the list takes no more than it holds.
    pub(super) fn seal(&mut self) {
        self.index = Default::default();
        self.list.shrink_to_fit();
    }
}

/// What a [`Construct`] shares with the other times the same construct
/// ran on its thread, device and queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ConstructShape {
    pub(super) site: SiteId,
    pub(super) line_site: SiteId,
    pub(super) class: ConstructClass,
    pub(super) kind: Option<ConstructKind>,
    pub(super) implicit: bool,
    pub(super) cut: bool,
    pub(super) device_type: u8,
    pub(super) depth: u8,
    pub(super) thread: u32,
    pub(super) async_queue: i32,
    pub(super) device: u32,
}

/// A [`Construct`] as the run keeps it: times, parent and shape (24
/// bytes).
#[derive(Debug, Clone, Copy)]
pub struct ConstructRow {
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
    pub(super) parent: Option<ConstructId>,
    pub(super) shape: u32,
}

/// What a [`Kernel`] shares with the other launches of the same kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct KernelShape {
    pub(super) name: NameId,
    pub(super) grid: [u32; 3],
    pub(super) block: [u32; 3],
    pub(super) registers: u32,
    pub(super) shared_bytes: u32,
    pub(super) local_bytes_per_thread: u32,
    pub(super) device: u32,
    pub(super) stream: u32,
    pub(super) source: KernelSource,
    pub(super) launch: u8,
}

/// A [`Kernel`] as the run keeps it: times, construct and shape (24
/// bytes).
#[derive(Debug, Clone, Copy)]
pub struct KernelRow {
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) construct: Option<ConstructId>,
    pub(super) shape: u32,
}

/// What a [`Transfer`] shares with the other transfers of the same buffer
/// the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TransferShape {
    pub(super) kind: CopyKind,
    pub(super) src: MemoryKind,
    pub(super) dst: MemoryKind,
    pub(super) source: TransferSource,
    pub(super) hashed: bool,
    pub(super) variable: Option<NameId>,
    pub(super) bytes: u64,
    pub(super) host_ptr: u64,
    pub(super) device: u32,
    pub(super) stream: u32,
}

/// A [`Transfer`] as the run keeps it (40 bytes).
#[derive(Debug, Clone, Copy)]
pub struct TransferRow {
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(super) hash: u64,
    pub(crate) construct: Option<ConstructId>,
    pub(super) correlation: u32,
    pub(super) shape: u32,
}

/// What a [`DeviceAlloc`] shares with the other allocations of the same
/// block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct AllocShape {
    pub(super) bytes: u64,
    pub(super) device_ptr: u64,
    pub(super) variable: Option<NameId>,
}

/// A [`DeviceAlloc`] as the run keeps it (24 bytes).
#[derive(Debug, Clone, Copy)]
pub struct AllocRow {
    pub(super) alloc_ns: u64,
    pub(crate) free_ns: u64,
    pub(crate) construct: Option<ConstructId>,
    pub(super) shape: u32,
}

/// The kernels, transfers and allocations of a run, each a row of its
/// own numbers and the index of the shape it shares with others; read
/// back whole through [`Run::kernel`], [`Run::transfer`], [`Run::alloc`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Tables {
    pub(crate) constructs: Vec<ConstructRow>,
    pub(crate) kernels: Vec<KernelRow>,
    pub(crate) transfers: Vec<TransferRow>,
    pub(crate) allocs: Vec<AllocRow>,
    pub(super) construct_shapes: Shapes<ConstructShape>,
    pub(super) kernel_shapes: Shapes<KernelShape>,
    pub(super) transfer_shapes: Shapes<TransferShape>,
    pub(super) alloc_shapes: Shapes<AllocShape>,
}

impl Tables {
    pub(crate) fn construct_row(&mut self, c: &Construct) -> ConstructRow {
        let shape = self.construct_shapes.intern(ConstructShape {
            site: c.site,
            line_site: c.line_site,
            class: c.class,
            kind: c.kind,
            implicit: c.implicit,
            cut: c.cut,
            device_type: c.device_type,
            depth: c.depth,
            thread: c.thread,
            async_queue: c.async_queue,
            device: c.device,
        });
        ConstructRow {
            start_ns: c.start_ns,
            end_ns: c.end_ns,
            parent: c.parent,
            shape,
        }
    }

    pub(super) fn construct(&self, r: &ConstructRow) -> Construct {
        let s = self.construct_shapes.get(r.shape);
        Construct {
            class: s.class,
            kind: s.kind,
            implicit: s.implicit,
            site: s.site,
            line_site: s.line_site,
            thread: s.thread,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            parent: r.parent,
            depth: s.depth,
            async_queue: s.async_queue,
            device: s.device,
            device_type: s.device_type,
            cut: s.cut,
        }
    }

    pub(crate) fn kernel_row(&mut self, k: &Kernel) -> KernelRow {
        let shape = self.kernel_shapes.intern(KernelShape {
            name: k.name,
            grid: k.grid,
            block: k.block,
            registers: k.registers,
            shared_bytes: k.shared_bytes,
            local_bytes_per_thread: k.local_bytes_per_thread,
            device: k.device,
            stream: k.stream,
            source: k.source,
            launch: k.launch,
        });
        KernelRow {
            start_ns: k.start_ns,
            end_ns: k.end_ns,
            construct: k.construct,
            shape,
        }
    }

    pub(super) fn kernel(&self, r: &KernelRow) -> Kernel {
        let s = self.kernel_shapes.get(r.shape);
        Kernel {
            construct: r.construct,
            name: s.name,
            grid: s.grid,
            block: s.block,
            registers: s.registers,
            shared_bytes: s.shared_bytes,
            local_bytes_per_thread: s.local_bytes_per_thread,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            device: s.device,
            stream: s.stream,
            source: s.source,
            launch: s.launch,
        }
    }

    pub(crate) fn transfer_row(&mut self, t: &Transfer) -> TransferRow {
        let shape = self.transfer_shapes.intern(TransferShape {
            kind: t.kind,
            src: t.src,
            dst: t.dst,
            source: t.source,
            hashed: t.hashed,
            variable: t.variable,
            bytes: t.bytes,
            host_ptr: t.host_ptr,
            device: t.device,
            stream: t.stream,
        });
        TransferRow {
            start_ns: t.start_ns,
            end_ns: t.end_ns,
            hash: t.hash,
            construct: t.construct,
            correlation: t.correlation,
            shape,
        }
    }

    pub(super) fn transfer(&self, r: &TransferRow) -> Transfer {
        let s = self.transfer_shapes.get(r.shape);
        Transfer {
            construct: r.construct,
            kind: s.kind,
            bytes: s.bytes,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            src: s.src,
            dst: s.dst,
            source: s.source,
            variable: s.variable,
            host_ptr: s.host_ptr,
            hash: r.hash,
            hashed: s.hashed,
            device: s.device,
            stream: s.stream,
            correlation: r.correlation,
        }
    }

    pub(crate) fn alloc_row(&mut self, a: &DeviceAlloc) -> AllocRow {
        let shape = self.alloc_shapes.intern(AllocShape {
            bytes: a.bytes,
            device_ptr: a.device_ptr,
            variable: a.variable,
        });
        AllocRow {
            alloc_ns: a.alloc_ns,
            free_ns: a.free_ns,
            construct: a.construct,
            shape,
        }
    }

    pub(super) fn alloc(&self, r: &AllocRow) -> DeviceAlloc {
        let s = self.alloc_shapes.get(r.shape);
        DeviceAlloc {
            construct: r.construct,
            bytes: s.bytes,
            device_ptr: s.device_ptr,
            variable: s.variable,
            alloc_ns: r.alloc_ns,
            free_ns: r.free_ns,
        }
    }

    /// Done adding shapes.
    pub(super) fn seal(&mut self) {
        self.construct_shapes.seal();
        self.kernel_shapes.seal();
        self.transfer_shapes.seal();
        self.alloc_shapes.seal();
    }
}
