//! The joined model of one process's run: OpenACC constructs with their
//! source sites, and the kernels and copies the device did for each.
//!
//! The model is filled by the join ([`crate::join`]): this module holds
//! the entities, the run's tables and the views' accessors.

use std::collections::HashMap;

use accprof_trace::{
    BufferHash, ConstructKind, CopyKind, Device, DropSource, Header, Level, Loss, MemoryKind, Trace,
};

use crate::join::{At, Order, RunInfo, Sink};
use crate::symbolize::Symbolizer;

pub use crate::join::MAX_DEVICE_RECORD_NS;

/// Declares an opaque handle to one entity of a [`Run`]: only the model
/// makes them, views get them from the run's iterators and look the entity
/// up with the run's accessors. Handles order as their entities do in the
/// run (constructs by start, kernels and transfers by start time, ...).
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        /// (Its position plus one: an `Option` of it takes four bytes.)
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(std::num::NonZeroU32);

        impl $name {
            /// The handle of the entity at `index` in its table. A run holds
            /// fewer than 2^32 - 1 entities of a kind (each takes tens of
            /// bytes).
            #[inline]
            pub(crate) fn at(index: usize) -> Self {
                $name(std::num::NonZeroU32::MIN.saturating_add(index as u32))
            }

            /// The entity's position in its table, for tables kept beside
            /// the model (one slot per entity).
            #[inline]
            pub(crate) fn index(self) -> usize {
                self.0.get() as usize - 1
            }

            /// The handle as a number (1, 2, ...), the same for the same
            /// trace every time it is read: exports name entities by it so
            /// that their tables join.
            #[inline]
            pub fn number(self) -> u32 {
                self.0.get()
            }
        }
    };
}

handle!(
    /// A source [`Site`] of a [`Run`] ([`Run::site`]).
    SiteId
);
handle!(
    /// A [`Construct`] of a [`Run`] ([`Run::construct`]).
    ConstructId
);
handle!(
    /// A [`Kernel`] of a [`Run`] ([`Run::kernel`]).
    KernelId
);
handle!(
    /// A [`Transfer`] of a [`Run`] ([`Run::transfer`]).
    TransferId
);
handle!(
    /// A [`DeviceAlloc`] of a [`Run`] ([`Run::alloc`]).
    AllocId
);
handle!(
    /// A [`Memset`] of a [`Run`] ([`Run::memset`]).
    MemsetId
);
handle!(
    /// A name of a [`Run`] (kernel, variable): [`Run::name`].
    NameId
);

/// A place in the source, as precise as the run allowed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Site {
    /// Source file, or the module path when there is no line information.
    pub file: String,
    /// Function name, or "?" when unknown.
    pub function: String,
    /// Source line; None when only an address is known.
    pub line: Option<u32>,
    /// Module and offset when the site came from a call site (for messages
    /// when the source is missing).
    pub address: Option<(String, u64)>,
}

impl Site {
    pub fn unknown() -> Site {
        Site {
            file: "(unknown file)".into(),
            function: "?".into(),
            line: None,
            address: None,
        }
    }
}

/// A call of an MPI routine, as the collector's PMPI wrappers saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpiCall {
    /// "MPI_Sendrecv", ...
    pub routine: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub thread: u32,
    /// Whether the MPI library said it takes device memory; None when it
    /// has no such query.
    pub cuda_aware: Option<bool>,
    /// The host ranges the call reads (sends) and writes (receives).
    pub ranges: Vec<accprof_trace::MpiRange>,
}

/// An OpenACC API routine (its name is [`Run::routine`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApiRoutine(pub(crate) u16);

/// What kind of OpenACC construct this was, as the summary groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConstructClass {
    /// parallel, kernels, serial: device code runs.
    Compute,
    /// Entering a data region or `enter data` (or the implicit data part of
    /// a compute construct).
    EnterData,
    /// Leaving a data region or `exit data`.
    ExitData,
    Update,
    Wait,
    /// A call of an OpenACC API routine (`acc_copyin`, `acc_wait`, ...).
    ApiCall(ApiRoutine),
}

/// An OpenACC construct: its start and end events as one entry. What a
/// trace may leave out is packed (read through the methods).
#[derive(Debug, Clone)]
pub struct Construct {
    pub class: ConstructClass,
    /// The construct as the runtime named it (parallel, kernels, data, ...);
    /// for the exit of a structured `data` or `host_data` region, its
    /// entry's (libgomp names a `host_data` region's exit `data`).
    pub kind: Option<ConstructKind>,
    pub implicit: bool,
    pub site: SiteId,
    /// The site views report it at ([`Run::line_site`]).
    pub(crate) line_site: SiteId,
    pub thread: u32,
    pub start_ns: u64,
    /// [`Construct::end_ns`]; `u64::MAX` for none.
    end_ns: u64,
    pub parent: Option<ConstructId>,
    /// How many constructs it runs in (0 at top level; 255 and deeper
    /// read 255).
    pub depth: u8,
    /// [`Construct::async_queue`]; `i32::MIN` for none.
    async_queue: i32,
    /// [`Construct::device`]; `u32::MAX` for none.
    device: u32,
    /// [`Construct::device_type`]; `u8::MAX` for none.
    device_type: u8,
    /// No end event came: a later start closed it (callbacks toggled off
    /// with `acc_prof_unregister(..., acc_toggle)`), or it was still open
    /// when the trace ended (the program died inside it). `end_ns` is None.
    pub cut: bool,
}

impl Construct {
    /// A construct started at `start_ns`, not ended, on no known device
    /// or queue.
    pub(crate) fn new(
        class: ConstructClass,
        kind: Option<ConstructKind>,
        site: SiteId,
        thread: u32,
        start_ns: u64,
        parent: Option<ConstructId>,
    ) -> Construct {
        Construct {
            class,
            kind,
            implicit: false,
            site,
            line_site: site,
            thread,
            start_ns,
            end_ns: u64::MAX,
            parent,
            depth: 0,
            async_queue: i32::MIN,
            device: u32::MAX,
            device_type: u8::MAX,
            cut: false,
        }
    }

    pub fn host_ns(&self) -> Option<u64> {
        self.end_ns().map(|e| e.saturating_sub(self.start_ns))
    }

    /// None when the end event never came (the program died inside).
    pub fn end_ns(&self) -> Option<u64> {
        (self.end_ns != u64::MAX).then_some(self.end_ns)
    }

    pub fn async_queue(&self) -> Option<i32> {
        (self.async_queue != i32::MIN).then_some(self.async_queue)
    }

    /// `acc_device_t` as the runtime numbered it (values past 254, which
    /// no runtime uses, read as 254).
    pub fn device_type(&self) -> Option<u32> {
        (self.device_type != u8::MAX).then_some(u32::from(self.device_type))
    }

    pub fn device(&self) -> Option<u32> {
        (self.device != u32::MAX).then_some(self.device)
    }

    pub(crate) fn set_end_ns(&mut self, t: Option<u64>) {
        self.end_ns = t.unwrap_or(u64::MAX);
    }

    pub(crate) fn set_async_queue(&mut self, q: Option<i32>) {
        self.async_queue = q.unwrap_or(i32::MIN);
    }

    pub(crate) fn set_device(&mut self, device_type: Option<u32>, device: Option<u32>) {
        self.device_type = device_type.map_or(u8::MAX, |t| t.min(254) as u8);
        self.device = device.unwrap_or(u32::MAX);
    }
}

/// One enqueue_launch as the runtime reported it ([`Run::launches_of`]).
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub construct: ConstructId,
    pub kernel_name: Option<NameId>,
    /// [`LaunchRequest::gangs`], [`LaunchRequest::workers`],
    /// [`LaunchRequest::vector_length`], [`LaunchRequest::end_ns`];
    /// `u64::MAX` for none.
    dims: [u64; 3],
    pub start_ns: u64,
    end_ns: u64,
}

/// `u64::MAX` stands for none in packed fields.
fn unpack(v: u64) -> Option<u64> {
    (v != u64::MAX).then_some(v)
}

impl LaunchRequest {
    pub(crate) fn new(
        construct: ConstructId,
        kernel_name: Option<NameId>,
        gangs: Option<u64>,
        workers: Option<u64>,
        vector_length: Option<u64>,
        start_ns: u64,
    ) -> LaunchRequest {
        let pack = |v: Option<u64>| v.unwrap_or(u64::MAX);
        LaunchRequest {
            construct,
            kernel_name,
            dims: [pack(gangs), pack(workers), pack(vector_length)],
            start_ns,
            end_ns: u64::MAX,
        }
    }

    pub fn gangs(&self) -> Option<u64> {
        unpack(self.dims[0])
    }

    pub fn workers(&self) -> Option<u64> {
        unpack(self.dims[1])
    }

    pub fn vector_length(&self) -> Option<u64> {
        unpack(self.dims[2])
    }

    /// None while (or when) its end event did not come.
    pub fn end_ns(&self) -> Option<u64> {
        unpack(self.end_ns)
    }

    pub(crate) fn set_end_ns(&mut self, t: u64) {
        self.end_ns = t;
    }

    /// The kernel a launch event tells of, for a run without CUPTI: host
    /// times of the enqueue, gangs as the grid, vector length and workers
    /// as the block (`unnamed` when the runtime gave no name).
    pub(crate) fn kernel(&self, c: &Construct, unnamed: NameId) -> Kernel {
        let workers = self.workers().filter(|&w| w > 1).unwrap_or(1);
        let none = |v: Option<u64>, bit: u8| if v.is_none() { bit } else { 0 };
        let mut launch = none(self.kernel_name.map(|_| 0), launch_bits::NO_NAME)
            | none(self.gangs(), launch_bits::NO_GANGS)
            | none(self.vector_length(), launch_bits::NO_VECTOR)
            | none(self.end_ns(), launch_bits::NO_END)
            | match self.workers() {
                None => 0,
                Some(0) => 1 << launch_bits::WORKERS_SHIFT,
                Some(1) => 2 << launch_bits::WORKERS_SHIFT,
                Some(_) => 3 << launch_bits::WORKERS_SHIFT,
            };
        if !self.fits_kernel() {
            launch |= launch_bits::KEPT;
        }
        Kernel {
            launch,
            construct: Some(self.construct),
            name: self.kernel_name.unwrap_or(unnamed),
            grid: [self.gangs().unwrap_or(0) as u32, 1, 1],
            block: [self.vector_length().unwrap_or(0) as u32, workers as u32, 1],
            registers: 0,
            shared_bytes: 0,
            local_bytes_per_thread: 0,
            start_ns: self.start_ns,
            end_ns: self.end_ns().unwrap_or(self.start_ns),
            device: c.device().unwrap_or(0),
            stream: 0,
            source: KernelSource::AccProf,
        }
    }

    /// Whether the kernel made of this launch can tell it back: no
    /// number past 32 bits (else the run keeps the launch itself).
    pub(crate) fn fits_kernel(&self) -> bool {
        let fits = |v: Option<u64>| v.map_or(true, |v| v <= u64::from(u32::MAX));
        fits(self.gangs()) && fits(self.workers()) && fits(self.vector_length())
    }

    /// Whether the launch a kernel was made of is kept in the run's table.
    pub(crate) fn kept(k: &Kernel) -> bool {
        k.launch & launch_bits::KEPT != 0
    }

    /// The launch event a kernel was made of (see [`LaunchRequest::kernel`]).
    fn of_kernel(k: &Kernel, construct: ConstructId) -> LaunchRequest {
        let b = k.launch;
        let has = |bit: u8| b & bit == 0;
        let mut l = LaunchRequest::new(
            construct,
            has(launch_bits::NO_NAME).then_some(k.name),
            has(launch_bits::NO_GANGS).then_some(u64::from(k.grid[0])),
            match (b >> launch_bits::WORKERS_SHIFT) & 3 {
                0 => None,
                1 => Some(0),
                2 => Some(1),
                _ => Some(u64::from(k.block[1])),
            },
            has(launch_bits::NO_VECTOR).then_some(u64::from(k.block[0])),
            k.start_ns,
        );
        if has(launch_bits::NO_END) {
            l.set_end_ns(k.end_ns);
        }
        l
    }
}

/// What a kernel made of a launch event keeps of the event's own numbers
/// ([`Kernel::launch`]), so a run without CUPTI holds each launch once.
mod launch_bits {
    pub const NO_NAME: u8 = 1;
    pub const NO_GANGS: u8 = 2;
    pub const NO_VECTOR: u8 = 4;
    /// Workers: 0 none, 1 zero, 2 one, 3 the block's second dimension.
    pub const WORKERS_SHIFT: u8 = 3;
    pub const NO_END: u8 = 32;
    /// The launch is kept in the run's table (its numbers did not fit).
    pub const KEPT: u8 = 64;
}

/// Where a kernel's numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelSource {
    /// CUPTI kernel record: device start/end, launch shape, resources.
    Cupti,
    /// acc_prof enqueue_launch start/end (CUPTI did not record): host times
    /// of the enqueue, gangs as the grid and vector length and workers as
    /// the block; no resources.
    AccProf,
}

/// A kernel the device ran (CUPTI), or, when CUPTI did not record, one the
/// runtime launched.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub construct: Option<ConstructId>,
    /// [`Run::name`] reads it.
    pub name: NameId,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers: u32,
    pub shared_bytes: u32,
    pub local_bytes_per_thread: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub device: u32,
    pub stream: u32,
    pub source: KernelSource,
    /// For a kernel made of a launch event (no CUPTI), what the event
    /// said that the kernel's numbers do not (`launch_bits`); 0 otherwise.
    pub(crate) launch: u8,
}

impl Kernel {
    /// Start to end: on the device for a CUPTI kernel, the enqueue on the
    /// host for a launch event.
    pub fn device_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// CUPTI timed it on the device.
    pub fn device_timed(&self) -> bool {
        self.source == KernelSource::Cupti
    }
}

/// Where a transfer's numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransferSource {
    /// CUPTI memcpy record: device start/end.
    Cupti,
    /// acc_prof enqueue_upload/download pair: host times only.
    AccProf,
}

/// One host<->device transfer. What a trace may leave out is packed (read
/// through the methods).
#[derive(Debug, Clone)]
pub struct Transfer {
    pub construct: Option<ConstructId>,
    pub kind: CopyKind,
    pub bytes: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub src: MemoryKind,
    pub dst: MemoryKind,
    pub source: TransferSource,
    /// [`Run::name`] reads it.
    pub variable: Option<NameId>,
    /// [`Transfer::host_ptr`]; `u64::MAX` for none.
    host_ptr: u64,
    /// [`Transfer::hash`], when `hashed`.
    hash: u64,
    hashed: bool,
    /// [`Transfer::device`], [`Transfer::stream`],
    /// [`Transfer::correlation`]; `u32::MAX` for none.
    device: u32,
    stream: u32,
    correlation: u32,
}

impl Transfer {
    /// A transfer with no host pointer, hash, device or stream known.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        construct: Option<ConstructId>,
        kind: CopyKind,
        bytes: u64,
        start_ns: u64,
        end_ns: u64,
        src: MemoryKind,
        dst: MemoryKind,
        source: TransferSource,
    ) -> Transfer {
        Transfer {
            construct,
            kind,
            bytes,
            start_ns,
            end_ns,
            src,
            dst,
            source,
            variable: None,
            host_ptr: u64::MAX,
            hash: 0,
            hashed: false,
            device: u32::MAX,
            stream: u32::MAX,
            correlation: u32::MAX,
        }
    }

    pub fn host_ptr(&self) -> Option<u64> {
        (self.host_ptr != u64::MAX).then_some(self.host_ptr)
    }

    /// Content hash of the host buffer, when one was taken.
    pub fn hash(&self) -> Option<u64> {
        self.hashed.then_some(self.hash)
    }

    /// Device, stream and correlation id of a CUPTI memcpy (None for the
    /// runtime's transfer events).
    pub fn device(&self) -> Option<u32> {
        (self.device != u32::MAX).then_some(self.device)
    }

    pub fn stream(&self) -> Option<u32> {
        (self.stream != u32::MAX).then_some(self.stream)
    }

    pub fn correlation(&self) -> Option<u32> {
        (self.correlation != u32::MAX).then_some(self.correlation)
    }

    pub(crate) fn set_host_ptr(&mut self, p: Option<u64>) {
        self.host_ptr = p.unwrap_or(u64::MAX);
    }

    pub(crate) fn set_hash(&mut self, h: Option<u64>) {
        self.hash = h.unwrap_or(0);
        self.hashed = h.is_some();
    }

    pub(crate) fn set_device(&mut self, device: u32, stream: u32, correlation: u32) {
        (self.device, self.stream, self.correlation) = (device, stream, correlation);
    }

    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// An upload or a download (not a device-to-device or other copy).
    pub fn is_host_device(&self) -> bool {
        matches!(self.kind, CopyKind::HostToDevice | CopyKind::DeviceToHost)
    }
}

/// A device allocation the runtime reported (acc_prof alloc/free events).
/// GCC allocates one block per group of mapped variables, so `bytes` may
/// cover several variables.
#[derive(Debug, Clone)]
pub struct DeviceAlloc {
    pub construct: Option<ConstructId>,
    pub bytes: u64,
    /// [`DeviceAlloc::device_ptr`]; `u64::MAX` for none.
    device_ptr: u64,
    /// [`Run::name`] reads it.
    pub variable: Option<NameId>,
    pub alloc_ns: u64,
    /// [`DeviceAlloc::free_ns`]; `u64::MAX` for none.
    free_ns: u64,
}

impl DeviceAlloc {
    pub(crate) fn new(
        construct: Option<ConstructId>,
        bytes: u64,
        device_ptr: Option<u64>,
        variable: Option<NameId>,
        alloc_ns: u64,
    ) -> DeviceAlloc {
        DeviceAlloc {
            construct,
            bytes,
            device_ptr: device_ptr.unwrap_or(u64::MAX),
            variable,
            alloc_ns,
            free_ns: u64::MAX,
        }
    }

    pub fn device_ptr(&self) -> Option<u64> {
        (self.device_ptr != u64::MAX).then_some(self.device_ptr)
    }

    /// None when no free with the same device pointer came.
    pub fn free_ns(&self) -> Option<u64> {
        (self.free_ns != u64::MAX).then_some(self.free_ns)
    }

    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn set_free_ns(&mut self, t: Option<u64>) {
        self.free_ns = t.unwrap_or(u64::MAX);
    }
}

/// A memset CUPTI recorded.
#[derive(Debug, Clone)]
pub struct Memset {
    pub construct: Option<ConstructId>,
    pub bytes: u64,
    pub value: u32,
    pub memory: MemoryKind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub device: u32,
    pub stream: u32,
    pub correlation: u32,
}

impl Memset {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// The numbers of an entity that a run repeats (a kernel's name, launch
/// shape and stream; a transfer's buffer and direction; an allocation's
/// size and device pointer), each kept once: an entity holds the index of
/// its shape. The lookup from shape to index lives only while the run is
/// built; the shapes used last are tried first (a launch storm repeats
/// the few shapes of its constructs over and over).
#[derive(Debug, Clone)]
pub(crate) struct Shapes<S> {
    list: Vec<S>,
    index: crate::join::IdHashMap<S, u32>,
    recent: [Option<(S, u32)>; 4],
    next: usize,
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
    fn intern(&mut self, shape: S) -> u32 {
        if let Some((_, i)) = self.recent.iter().flatten().find(|(s, _)| *s == shape) {
            return *i;
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
    fn get(&self, i: u32) -> S {
        self.list[i as usize]
    }

    /// Done adding: the lookup goes, the list takes no more than it holds.
    fn seal(&mut self) {
        self.index = Default::default();
        self.list.shrink_to_fit();
    }
}

/// What a [`Construct`] shares with the other times the same construct
/// ran on its thread, device and queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ConstructShape {
    site: SiteId,
    line_site: SiteId,
    class: ConstructClass,
    kind: Option<ConstructKind>,
    implicit: bool,
    cut: bool,
    device_type: u8,
    depth: u8,
    thread: u32,
    async_queue: i32,
    device: u32,
}

/// A [`Construct`] as the run keeps it: times, parent and shape (24
/// bytes).
#[derive(Debug, Clone, Copy)]
pub struct ConstructRow {
    start_ns: u64,
    end_ns: u64,
    parent: Option<ConstructId>,
    shape: u32,
}

/// What a [`Kernel`] shares with the other launches of the same kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct KernelShape {
    name: NameId,
    grid: [u32; 3],
    block: [u32; 3],
    registers: u32,
    shared_bytes: u32,
    local_bytes_per_thread: u32,
    device: u32,
    stream: u32,
    source: KernelSource,
    launch: u8,
}

/// A [`Kernel`] as the run keeps it: times, construct and shape (24
/// bytes).
#[derive(Debug, Clone, Copy)]
pub struct KernelRow {
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) construct: Option<ConstructId>,
    shape: u32,
}

/// What a [`Transfer`] shares with the other transfers of the same buffer
/// the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TransferShape {
    kind: CopyKind,
    src: MemoryKind,
    dst: MemoryKind,
    source: TransferSource,
    hashed: bool,
    variable: Option<NameId>,
    bytes: u64,
    host_ptr: u64,
    device: u32,
    stream: u32,
}

/// A [`Transfer`] as the run keeps it (40 bytes).
#[derive(Debug, Clone, Copy)]
pub struct TransferRow {
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    hash: u64,
    pub(crate) construct: Option<ConstructId>,
    correlation: u32,
    shape: u32,
}

/// What a [`DeviceAlloc`] shares with the other allocations of the same
/// block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct AllocShape {
    bytes: u64,
    device_ptr: u64,
    variable: Option<NameId>,
}

/// A [`DeviceAlloc`] as the run keeps it (24 bytes).
#[derive(Debug, Clone, Copy)]
pub struct AllocRow {
    alloc_ns: u64,
    free_ns: u64,
    pub(crate) construct: Option<ConstructId>,
    shape: u32,
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
    construct_shapes: Shapes<ConstructShape>,
    kernel_shapes: Shapes<KernelShape>,
    transfer_shapes: Shapes<TransferShape>,
    alloc_shapes: Shapes<AllocShape>,
}

impl Tables {
    fn construct_row(&mut self, c: &Construct) -> ConstructRow {
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

    fn construct(&self, r: &ConstructRow) -> Construct {
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

    fn kernel_row(&mut self, k: &Kernel) -> KernelRow {
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

    fn kernel(&self, r: &KernelRow) -> Kernel {
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

    fn transfer_row(&mut self, t: &Transfer) -> TransferRow {
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

    fn transfer(&self, r: &TransferRow) -> Transfer {
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

    fn alloc_row(&mut self, a: &DeviceAlloc) -> AllocRow {
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

    fn alloc(&self, r: &AllocRow) -> DeviceAlloc {
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
    fn seal(&mut self) {
        self.construct_shapes.seal();
        self.kernel_shapes.seal();
        self.transfer_shapes.seal();
        self.alloc_shapes.seal();
    }
}

/// One process's run, joined.
#[derive(Debug, Clone)]
pub struct Run {
    pub header: Header,
    pub version: (u16, u16),
    pub losses: Vec<Loss>,
    pub devices: Vec<Device>,
    /// The entities, read through their handles ([`Run::sites`],
    /// [`Run::construct`], ...): their positions are the model's business.
    pub(crate) sites: Vec<Site>,
    /// The source frames above a site, innermost first ([`Run::callers`]).
    pub(crate) callers: std::collections::BTreeMap<SiteId, Vec<Site>>,
    /// The constructs in start order (read back whole through
    /// [`Run::construct`]).
    /// The kernels in device start order (launch start order when CUPTI
    /// did not record: see [`KernelSource`]), the transfers in start
    /// order, the device allocations in allocation order.
    pub(crate) tables: Tables,
    /// In start order.
    pub(crate) memsets: Vec<Memset>,
    /// The runtime's launch events, by construct: all of them when CUPTI
    /// recorded; without CUPTI (`launches_in_kernels`) each kernel is its
    /// launch, and only those whose numbers a kernel cannot hold are here.
    pub(crate) launches: Vec<LaunchRequest>,
    pub(crate) launches_in_kernels: bool,
    /// Kernel and variable names, indexed by [`NameId`].
    pub(crate) names: Vec<String>,
    /// Loaded modules (to map host addresses to symbols).
    pub modules: Vec<accprof_trace::Module>,
    pub hashes: Vec<BufferHash>,
    /// When the collector itself kept the host busy (hashing buffers), as
    /// sorted, disjoint [start, end) spans ([`Run::collector_ns_in`]).
    pub(crate) collector_spans: Vec<(u64, u64)>,
    /// MPI calls in start order ([`Run::mpi_calls`]).
    pub(crate) mpi_calls: Vec<MpiCall>,
    pub acc_events: u64,
    pub dropped: Vec<(DropSource, u64)>,
    pub diagnostics: Vec<(Level, String)>,
    /// Things the analyzer could not do (e.g. a binary missing for symbols).
    pub notes: Vec<String>,
    /// Records of kinds this reader does not know, skipped.
    pub skipped_unknown: u64,
    /// First and last timestamp seen.
    pub span_ns: (u64, u64),
    /// The constructs still open when the trace ended, per thread from the
    /// outermost to the innermost (what was running when the program
    /// stopped, or constructs whose end callbacks were toggled off).
    pub open_at_end: Vec<ConstructId>,
    /// How the process ended, when the collector saw it end; None for a
    /// trace that was cut (or written by a collector before format 1.1).
    pub ending: Option<accprof_trace::EndRecord>,
    /// Names of the OpenACC API routines called, indexed by [`ApiRoutine`].
    pub routines: Vec<String>,
    /// Where the executable's binary was found for reading (its recorded
    /// path or a copy in a search directory, same build); None when it was
    /// not found.
    pub executable_binary: Option<std::path::PathBuf>,
    /// Names of the executable's data objects (globals, statics) at the host
    /// addresses the transfers moved, from its symbol table: what the
    /// findings call a buffer the runtime did not name.
    pub data_names: std::collections::BTreeMap<u64, String>,
    /// Each construct's own kernels, transfers, allocations, memsets and
    /// launches (the other way round from their `construct` fields), made
    /// by [`Run::derive`].
    pub(crate) related: Related,
    /// Summed once the tables are complete ([`Run::totals`]).
    pub(crate) totals: Totals,
    /// Where the constructs ran and which runtime ran them, read once.
    pub(crate) placement: Placement,
}

/// The device time and host<->device traffic of a run, summed once by the
/// builder: every view reads these, none adds them up again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Device time of the kernels CUPTI timed (start to end of each).
    pub kernel_ns: u64,
    /// Kernels the run holds (launch events too when CUPTI did not record).
    pub kernels: u64,
    /// Host<->device transfers (uploads and downloads; device-to-device and
    /// other copies are not counted): their time, number and bytes.
    pub transfer_ns: u64,
    pub transfers: u64,
    pub transfer_bytes: u64,
    /// Top-level constructs (nested ones count with their parent) and
    /// their host time, start to end of each.
    pub constructs: u64,
    pub host_construct_ns: u64,
    /// Constructs whose end event never came ([`Construct::cut`]).
    pub cut_constructs: u64,
}

impl Totals {
    #[cfg(any(test, feature = "testkit"))]
    fn of(run: &Run) -> Totals {
        let mut t = Totals::default();
        run.kernels().for_each(|(_, k)| t.add_kernel(&k));
        run.transfers().for_each(|(_, x)| t.add_transfer(&x));
        run.constructs().for_each(|(_, c)| t.add_construct(&c));
        t
    }

    pub(crate) fn add_construct(&mut self, c: &Construct) {
        if c.cut {
            self.cut_constructs += 1;
        }
        if c.parent.is_none() {
            self.constructs += 1;
            self.host_construct_ns = self
                .host_construct_ns
                .saturating_add(c.host_ns().unwrap_or(0));
        }
    }

    pub(crate) fn add_kernel(&mut self, k: &Kernel) {
        if k.device_timed() {
            self.kernel_ns = self.kernel_ns.saturating_add(k.device_ns());
        }
        self.kernels += 1;
    }

    pub(crate) fn add_transfer(&mut self, x: &Transfer) {
        if x.is_host_device() {
            self.transfer_ns = self.transfer_ns.saturating_add(x.duration_ns());
            self.transfers += 1;
            self.transfer_bytes = self.transfer_bytes.saturating_add(x.bytes);
        }
    }
}

/// `acc_device_host` in the OpenACC API's numbering of `acc_device_t`.
pub const ACC_DEVICE_HOST: u32 = 2;

/// Where the constructs ran and which runtime ran them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Placement {
    /// Some construct ran on the host (OpenACC host fallback).
    some_on_host: bool,
    /// There were constructs and every one ran on the host.
    all_on_host: bool,
    /// The OpenACC runtime is GCC's libgomp.
    libgomp: bool,
    /// Constructs were seen.
    any: bool,
}

impl Placement {
    pub(crate) fn new(header: &Header) -> Placement {
        Placement {
            libgomp: header.runtime.contains("libgomp"),
            ..Placement::default()
        }
    }

    pub(crate) fn add(&mut self, c: &Construct) {
        let on_host = c.device_type() == Some(ACC_DEVICE_HOST);
        self.some_on_host |= on_host;
        self.all_on_host = on_host && (self.all_on_host || !self.any);
        self.any = true;
    }

    /// Some construct ran on the host.
    pub(crate) fn some_on_host(&self) -> bool {
        self.some_on_host
    }

    /// The OpenACC runtime is GCC's libgomp.
    pub(crate) fn libgomp(&self) -> bool {
        self.libgomp
    }

    #[cfg(any(test, feature = "testkit"))]
    fn of(run: &Run) -> Placement {
        let mut p = Placement::new(&run.header);
        run.constructs().for_each(|(_, c)| p.add(&c));
        p
    }
}

/// Each construct's [`Run::line_site`], decided in start order: a
/// nested construct (the implicit data part of a compute construct, what
/// the runtime does inside an API routine) at its top-level construct's
/// site; the exit of a structured `data` or `host_data` region at the
/// site of its entry, with its entry's kind (GCC reports the region's end
/// from the last or first line of its body, PGI at the pragma: the pragma
/// line is the one users look for; libgomp names a `host_data` region's
/// exit `data`); any other construct at its own site. Per thread, an exit
/// closes the innermost open region.
#[derive(Debug, Clone, Default)]
pub(crate) struct LineSites {
    /// Open structured regions per thread (line site and kind), innermost
    /// last.
    open: HashMap<u32, Vec<(SiteId, Option<ConstructKind>)>>,
}

impl LineSites {
    /// The line site and kind of construct `c`, started now; `top_line`
    /// is its top-level construct's line site when it is nested.
    pub(crate) fn assign(
        &mut self,
        c: &Construct,
        top_line: Option<SiteId>,
    ) -> (SiteId, Option<ConstructKind>) {
        if c.parent.is_some() {
            return (top_line.unwrap_or(c.site), c.kind);
        }
        if !matches!(c.kind, Some(ConstructKind::Data | ConstructKind::HostData)) {
            return (c.site, c.kind);
        }
        match c.class {
            ConstructClass::EnterData => {
                self.open
                    .entry(c.thread)
                    .or_default()
                    .push((c.site, c.kind));
                (c.site, c.kind)
            }
            ConstructClass::ExitData => match self.open.get_mut(&c.thread).and_then(|s| s.pop()) {
                Some(entry) => entry,
                None => (c.site, c.kind),
            },
            _ => (c.site, c.kind),
        }
    }
}

/// The kernels, transfers, allocations, memsets and launches of every
/// construct.
#[derive(Debug, Clone, Default)]
pub(crate) struct Related {
    kernels: ByConstruct<KernelId>,
    transfers: ByConstruct<TransferId>,
    allocs: ByConstruct<AllocId>,
    memsets: ByConstruct<MemsetId>,
    launches: ByConstruct<u32>,
}

/// Entities of one kind grouped by the construct they belong to: their
/// handles ordered by construct, then as the run orders them, beside
/// their owners; a construct's are found by binary search on the owners
/// (eight bytes an entity, nothing per construct).
#[derive(Debug, Clone)]
struct ByConstruct<I> {
    ids: Vec<I>,
    owners: Vec<ConstructId>,
}

impl<I> Default for ByConstruct<I> {
    fn default() -> Self {
        ByConstruct {
            ids: Vec::new(),
            owners: Vec::new(),
        }
    }
}

impl<I: Copy> ByConstruct<I> {
    fn new<T>(
        entities: &[T],
        id: fn(usize) -> I,
        owner: impl Fn(&T) -> Option<ConstructId>,
    ) -> Self {
        // Entities in their owners' order (the usual case): the index is
        // made in one pass, with no pairs to sort.
        let mut count = 0;
        let mut last = None;
        let in_order = entities.iter().filter_map(&owner).all(|c| {
            count += 1;
            let ok = last.map_or(true, |l| l <= c);
            last = Some(c);
            ok
        });
        if in_order {
            let mut ids = Vec::with_capacity(count);
            let mut owners = Vec::with_capacity(count);
            for (i, x) in entities.iter().enumerate() {
                if let Some(c) = owner(x) {
                    ids.push(id(i));
                    owners.push(c);
                }
            }
            return ByConstruct { ids, owners };
        }
        let mut owned: Vec<(ConstructId, u32)> = entities
            .iter()
            .enumerate()
            .filter_map(|(i, x)| owner(x).map(|c| (c, i as u32)))
            .collect();
        owned.sort_unstable();
        let ids: Vec<I> = owned.iter().map(|&(_, i)| id(i as usize)).collect();
        let owners: Vec<ConstructId> = owned.into_iter().map(|(c, _)| c).collect();
        ByConstruct { ids, owners }
    }

    /// The handles owned by `c`. The search starts where `c` would be if
    /// the owners were spread evenly and gallops from there: constant
    /// time on the usual tables (a kernel or two per compute construct),
    /// logarithmic at worst.
    fn of(&self, c: ConstructId) -> &[I] {
        let v = &self.owners;
        let n = v.len();
        let Some(last) = v.last() else {
            return &[];
        };
        let span = last.index() as u128 + 1;
        let guess = ((c.index() as u128 * n as u128) / span).min(n as u128) as usize;
        let lo = lower_bound(v, c, guess);
        let len = v[lo..].iter().take_while(|&&o| o == c).count();
        &self.ids[lo..lo + len]
    }
}

/// The first position in sorted `v` whose owner is not below `c`,
/// galloping from `guess`.
fn lower_bound(v: &[ConstructId], c: ConstructId, guess: usize) -> usize {
    let n = v.len();
    let g = guess.min(n);
    let (mut lo, mut hi, mut step) = (g, g, 1);
    if g < n && v[g] < c {
        // The answer lies right of `g`.
        lo = g + 1;
        hi = lo;
        while hi < n && v[hi] < c {
            lo = hi + 1;
            hi = (hi + step).min(n);
            step *= 2;
        }
    } else {
        // The answer is `g` or left of it.
        while lo > 0 && v[lo - 1] >= c {
            hi = lo - 1;
            lo = lo.saturating_sub(step);
            step *= 2;
        }
    }
    lo + v[lo..hi].partition_point(|&o| o < c)
}

impl Run {
    /// The name of an API routine (`acc_copyin`, ...).
    pub fn routine(&self, r: ApiRoutine) -> &str {
        self.routines.get(r.0 as usize).map_or("?", String::as_str)
    }

    // The accessors take handles this run handed out; a handle of another
    // run is a bug in the caller and panics when out of range.

    pub fn site(&self, id: SiteId) -> &Site {
        &self.sites[id.index()]
    }

    pub fn construct(&self, id: ConstructId) -> Construct {
        self.tables.construct(&self.tables.constructs[id.index()])
    }

    pub fn kernel(&self, id: KernelId) -> Kernel {
        self.tables.kernel(&self.tables.kernels[id.index()])
    }

    pub fn transfer(&self, id: TransferId) -> Transfer {
        self.tables.transfer(&self.tables.transfers[id.index()])
    }

    pub fn alloc(&self, id: AllocId) -> DeviceAlloc {
        self.tables.alloc(&self.tables.allocs[id.index()])
    }

    /// A construct's start and end (`None`: the end never came), read
    /// from its row without making the whole construct: for views that
    /// look up many times, such as the timeline's lanes.
    pub fn construct_span(&self, id: ConstructId) -> (u64, Option<u64>) {
        let r = &self.tables.constructs[id.index()];
        (r.start_ns, (r.end_ns != u64::MAX).then_some(r.end_ns))
    }

    /// A kernel's start and end, read from its row.
    pub fn kernel_span(&self, id: KernelId) -> (u64, u64) {
        let r = &self.tables.kernels[id.index()];
        (r.start_ns, r.end_ns)
    }

    /// A transfer's start and end, read from its row.
    pub fn transfer_span(&self, id: TransferId) -> (u64, u64) {
        let r = &self.tables.transfers[id.index()];
        (r.start_ns, r.end_ns)
    }

    /// An allocation's time and its free's (`None`: never freed), read
    /// from its row.
    pub fn alloc_span(&self, id: AllocId) -> (u64, Option<u64>) {
        let r = &self.tables.allocs[id.index()];
        (r.alloc_ns, (r.free_ns != u64::MAX).then_some(r.free_ns))
    }

    /// An allocation's bytes, without making the whole allocation.
    pub fn alloc_bytes(&self, id: AllocId) -> u64 {
        let r = &self.tables.allocs[id.index()];
        self.tables.alloc_shapes.get(r.shape).bytes
    }

    pub fn memset(&self, id: MemsetId) -> &Memset {
        &self.memsets[id.index()]
    }

    /// The memsets with their handles, in start order.
    pub fn memsets(&self) -> Entities<'_, MemsetId, Memset> {
        Entities::of(&self.memsets, MemsetId::at)
    }

    /// The source frames above a site, innermost first: the function that
    /// called the site's function (where the call is written), then its
    /// caller, ... (functions inlined into others count as frames of their
    /// own). Empty when the trace recorded no callers (the runtime named
    /// the line itself, or the trace is older than format 1.2).
    pub fn callers(&self, site: SiteId) -> &[Site] {
        self.callers.get(&site).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Records the frames above a site (for runs made by hand).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn set_callers(&mut self, site: SiteId, callers: Vec<Site>) {
        self.callers.insert(site, callers);
    }

    /// The source sites with their handles.
    pub fn sites(&self) -> Entities<'_, SiteId, Site> {
        Entities::of(&self.sites, SiteId::at)
    }

    /// The constructs with their handles, in start order.
    pub fn constructs(&self) -> Rows<'_, ConstructId, ConstructRow, Construct> {
        Rows::of(
            &self.tables.constructs,
            &self.tables,
            ConstructId::at,
            Tables::construct,
        )
    }

    /// The kernels with their handles, in device start order.
    pub fn kernels(&self) -> Rows<'_, KernelId, KernelRow, Kernel> {
        Rows::of(
            &self.tables.kernels,
            &self.tables,
            KernelId::at,
            Tables::kernel,
        )
    }

    /// The transfers with their handles, in start order.
    pub fn transfers(&self) -> Rows<'_, TransferId, TransferRow, Transfer> {
        Rows::of(
            &self.tables.transfers,
            &self.tables,
            TransferId::at,
            Tables::transfer,
        )
    }

    /// The device allocations with their handles, in allocation order.
    pub fn allocs(&self) -> Rows<'_, AllocId, AllocRow, DeviceAlloc> {
        Rows::of(
            &self.tables.allocs,
            &self.tables,
            AllocId::at,
            Tables::alloc,
        )
    }

    /// The kernels of construct `c` itself (not of constructs nested in
    /// it), in device start order.
    pub fn kernels_of(&self, c: ConstructId) -> &[KernelId] {
        self.related.kernels.of(c)
    }

    /// The transfers of construct `c` itself, in start order.
    pub fn transfers_of(&self, c: ConstructId) -> &[TransferId] {
        self.related.transfers.of(c)
    }

    /// The device allocations of construct `c` itself, in allocation order.
    pub fn allocs_of(&self, c: ConstructId) -> &[AllocId] {
        self.related.allocs.of(c)
    }

    /// The memsets of construct `c` itself, in start order.
    pub fn memsets_of(&self, c: ConstructId) -> &[MemsetId] {
        self.related.memsets.of(c)
    }

    /// The launch events the runtime reported for construct `c`, in the
    /// order they came.
    pub fn launches_of(&self, c: ConstructId) -> impl Iterator<Item = LaunchRequest> + '_ {
        let mut kept = self
            .related
            .launches
            .of(c)
            .iter()
            .map(move |&l| self.launches[l as usize].clone());
        let kernels: &[KernelId] = if self.launches_in_kernels {
            self.kernels_of(c)
        } else {
            &[]
        };
        let mut from_kernels = kernels.iter().map(|&k| self.kernel(k));
        std::iter::from_fn(move || {
            if !self.launches_in_kernels {
                return kept.next();
            }
            let k = from_kernels.next()?;
            if LaunchRequest::kept(&k) {
                kept.next()
            } else {
                Some(LaunchRequest::of_kernel(&k, c))
            }
        })
    }

    /// A kernel or variable name.
    pub fn name(&self, id: NameId) -> &str {
        self.names.get(id.index()).map_or("?", String::as_str)
    }

    /// The source site every view reports construct `c` at: a nested
    /// construct (the implicit data part of a compute construct, what the
    /// runtime does inside an API routine) at its top-level construct's
    /// site; the exit of a structured `data` or `host_data` region at the
    /// site of its entry (GCC reports the region's end from the last or
    /// first line of its body, PGI at the pragma: the pragma line is the
    /// one users look for); any other construct at its own site.
    pub fn line_site(&self, c: ConstructId) -> SiteId {
        self.construct_shape(c).line_site
    }

    /// What construct `id` shares with others, read from its row.
    fn construct_shape(&self, id: ConstructId) -> ConstructShape {
        let t = &self.tables;
        t.construct_shapes.get(t.constructs[id.index()].shape)
    }

    /// Derives, once the tables are complete, what the views read instead
    /// of working it out each: each construct's reporting site and each
    /// structured region's exit's kind (for a run made by hand, in the
    /// join's order), the kernels, transfers, allocations, memsets and
    /// launches of each construct, the totals, and where the constructs
    /// ran.
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn derive(&mut self) {
        self.derive_indices();
        self.collector_spans = collector_spans(&self.hashes);
        self.totals = Totals::of(self);
        self.placement = Placement::of(self);
    }

    /// Sets the constructs of a run made by hand (in start order), with
    /// each one's reporting site and each structured region's exit's kind
    /// worked out as the join does.
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn set_constructs(&mut self, constructs: &[Construct]) {
        let mut cs = constructs.to_vec();
        let mut line_sites = LineSites::default();
        for i in 0..cs.len() {
            cs[i].depth = match cs[i].parent {
                Some(p) if p.index() < i => cs[p.index()].depth.saturating_add(1),
                _ => 0,
            };
            let top_line = cs[i].parent.map(|_| {
                let mut top = i;
                while let Some(p) = cs[top].parent {
                    top = p.index();
                }
                cs[top].line_site
            });
            let (line, kind) = line_sites.assign(&cs[i], top_line);
            cs[i].line_site = line;
            cs[i].kind = kind;
        }
        self.tables.constructs = cs.iter().map(|c| self.tables.construct_row(c)).collect();
    }

    /// The construct -> entity indices.
    fn derive_indices(&mut self) {
        self.related = Related {
            kernels: ByConstruct::new(&self.tables.kernels, KernelId::at, |k| k.construct),
            transfers: ByConstruct::new(&self.tables.transfers, TransferId::at, |t| t.construct),
            allocs: ByConstruct::new(&self.tables.allocs, AllocId::at, |a| a.construct),
            memsets: ByConstruct::new(&self.memsets, MemsetId::at, |m| m.construct),
            launches: ByConstruct::new(&self.launches, |i| i as u32, |l| Some(l.construct)),
        };
    }

    /// A construct's class, read from its row without making the whole
    /// construct.
    pub fn construct_class(&self, id: ConstructId) -> ConstructClass {
        self.construct_shape(id).class
    }

    /// The host thread a construct ran on, read from its row without
    /// making the whole construct.
    pub fn construct_thread(&self, id: ConstructId) -> u32 {
        self.construct_shape(id).thread
    }

    /// The top-level constructs (those no other construct holds), in start
    /// order, read from the rows without making each construct.
    pub fn top_level_constructs(&self) -> impl Iterator<Item = ConstructId> + '_ {
        self.tables
            .constructs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.parent.is_none())
            .map(|(i, _)| ConstructId::at(i))
    }

    /// The outermost construct containing `id` (itself when top-level).
    pub fn top_level(&self, mut id: ConstructId) -> ConstructId {
        while let Some(p) = self.tables.constructs[id.index()].parent {
            id = p;
        }
        id
    }

    pub fn cupti_active(&self) -> bool {
        self.header.sources.cupti.is_active()
    }

    /// Host time in [t0, t1) that the collector spent itself (hashing
    /// host buffers), not the program: 0 when none, and for traces written
    /// before format 1.2, which did not record it
    /// ([`Run::collector_time_recorded`]).
    pub fn collector_ns_in(&self, t0: u64, t1: u64) -> u64 {
        let spans = &self.collector_spans;
        let first = spans.partition_point(|&(_, e)| e <= t0);
        spans[first..]
            .iter()
            .take_while(|&&(s, _)| s < t1)
            .map(|&(s, e)| e.min(t1).saturating_sub(s.max(t0)))
            .sum()
    }

    /// The MPI calls the collector recorded, in start order (empty for a
    /// program without MPI and for traces before format 1.2).
    pub fn mpi_calls(&self) -> &[MpiCall] {
        &self.mpi_calls
    }

    /// Adds an MPI call (for runs made by hand).
    #[cfg(any(test, feature = "testkit"))]
    pub fn push_mpi_call(&mut self, call: MpiCall) {
        let at = self
            .mpi_calls
            .partition_point(|c| c.start_ns <= call.start_ns);
        self.mpi_calls.insert(at, call);
    }

    /// All the host time the collector spent hashing.
    pub fn collector_ns(&self) -> u64 {
        self.collector_spans.iter().map(|&(s, e)| e - s).sum()
    }

    /// Whether the trace says how long the collector hashed: false when it
    /// hashed without recording the time (format 1.1 and older), so host
    /// times include it unseen.
    pub fn collector_time_recorded(&self) -> bool {
        self.hashes.iter().all(|h| h.hash_ns.is_some())
    }

    /// A construct's host time without the collector's own time inside it.
    pub fn program_host_ns(&self, c: &Construct) -> Option<u64> {
        let end = c.end_ns()?;
        Some(
            c.host_ns()?
                .saturating_sub(self.collector_ns_in(c.start_ns, end)),
        )
    }

    /// Kernel time and host<->device transfers, summed once.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// Some construct ran on the host (OpenACC host fallback).
    pub fn ran_on_host(&self) -> bool {
        self.placement.some_on_host
    }

    /// The run had constructs and all of them ran on the host: there was
    /// no device.
    pub fn ran_only_on_host(&self) -> bool {
        self.placement.all_on_host
    }

    /// The OpenACC runtime is GCC's libgomp (its numbering of devices and
    /// the events it sends differ from other runtimes').
    pub fn runtime_is_libgomp(&self) -> bool {
        self.placement.libgomp
    }

    pub fn wall_ns(&self) -> u64 {
        self.span_ns.1.saturating_sub(self.span_ns.0)
    }

    /// The executable's module: the one whose path is the traced
    /// executable, else the first one loaded.
    pub fn executable_module(&self) -> Option<&accprof_trace::Module> {
        self.modules
            .iter()
            .find(|m| m.path == self.header.executable)
            .or_else(|| self.modules.first())
    }
}

/// The entities of one kind of a [`Run`] with their handles, in the
/// run's order.
#[derive(Clone)]
pub struct Entities<'a, I, T> {
    inner: std::iter::Enumerate<std::slice::Iter<'a, T>>,
    id: fn(usize) -> I,
}

impl<'a, I, T> Entities<'a, I, T> {
    fn of(items: &'a [T], id: fn(usize) -> I) -> Self {
        Entities {
            inner: items.iter().enumerate(),
            id,
        }
    }

    /// Whether no entities are left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a, I, T> Iterator for Entities<'a, I, T> {
    type Item = (I, &'a T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(i, x)| ((self.id)(i), x))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<I, T> DoubleEndedIterator for Entities<'_, I, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(i, x)| ((self.id)(i), x))
    }
}

impl<I, T> ExactSizeIterator for Entities<'_, I, T> {}

/// The kernels, transfers or allocations of a [`Run`] with their
/// handles, in the run's order, each read back whole from its row.
#[derive(Clone)]
pub struct Rows<'a, I, R, T> {
    inner: std::iter::Enumerate<std::slice::Iter<'a, R>>,
    tables: &'a Tables,
    id: fn(usize) -> I,
    read: fn(&Tables, &R) -> T,
}

impl<'a, I, R, T> Rows<'a, I, R, T> {
    fn of(
        rows: &'a [R],
        tables: &'a Tables,
        id: fn(usize) -> I,
        read: fn(&Tables, &R) -> T,
    ) -> Self {
        Rows {
            inner: rows.iter().enumerate(),
            tables,
            id,
            read,
        }
    }

    /// Whether no entities are left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<I, R, T> Iterator for Rows<'_, I, R, T> {
    type Item = (I, T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.inner
            .next()
            .map(|(i, r)| ((self.id)(i), (self.read)(self.tables, r)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<I, R, T> DoubleEndedIterator for Rows<'_, I, R, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner
            .next_back()
            .map(|(i, r)| ((self.id)(i), (self.read)(self.tables, r)))
    }
}

impl<I, R, T> ExactSizeIterator for Rows<'_, I, R, T> {}

/// The sink that keeps everything: the full [`Run`].
pub(crate) struct RunSink {
    /// The kernels are the launches (no CUPTI): keep only the launches
    /// they cannot tell back.
    launches_in_kernels: bool,
    launches: Vec<LaunchRequest>,
    kernels: Vec<(Order, KernelRow)>,
    transfers: Vec<(Order, TransferRow)>,
    memsets: Vec<(Order, Memset)>,
    /// The shapes of the rows, and the allocations (by handle).
    tables: Tables,
    hashes: Vec<BufferHash>,
}

impl RunSink {
    pub(crate) fn new(header: &Header) -> Self {
        RunSink {
            launches_in_kernels: !header.sources.cupti.is_active(),
            launches: Vec::new(),
            kernels: Vec::new(),
            transfers: Vec::new(),
            memsets: Vec::new(),
            tables: Tables::default(),
            hashes: Vec::new(),
        }
    }
}

/// Puts `x` at `index`, growing the table with `x` as needed (the join
/// hands every index below the last over once).
fn place<T: Clone>(table: &mut Vec<T>, index: usize, x: T) {
    if table.len() <= index {
        table.resize(index + 1, x);
    } else {
        table[index] = x;
    }
}

/// The entities in the run's order, their keys dropped, the table no
/// larger than it holds.
fn in_order<T>(mut v: Vec<(Order, T)>) -> Vec<T> {
    if !v.windows(2).all(|w| w[0].0 <= w[1].0) {
        v.sort_by_key(|(o, _)| *o);
    }
    let mut out: Vec<T> = v.into_iter().map(|(_, x)| x).collect();
    out.shrink_to_fit();
    out
}

impl Sink for RunSink {
    type Output = Run;

    fn construct(
        &mut self,
        id: ConstructId,
        c: Construct,
        launches: &[LaunchRequest],
        _at: &At,
        _open_at_end: bool,
    ) {
        let row = self.tables.construct_row(&c);
        place(&mut self.tables.constructs, id.index(), row);
        if self.launches_in_kernels {
            let kept = launches.iter().filter(|l| !l.fits_kernel()).cloned();
            self.launches.extend(kept);
        } else {
            self.launches.extend_from_slice(launches);
        }
    }

    fn kernel(&mut self, k: Kernel, order: Order, _at: Option<&At>) {
        let row = self.tables.kernel_row(&k);
        self.kernels.push((order, row));
    }

    fn transfer(&mut self, t: Transfer, order: Order, _at: Option<&At>) {
        let row = self.tables.transfer_row(&t);
        self.transfers.push((order, row));
    }

    fn memset(&mut self, m: Memset, order: Order, _at: Option<&At>) {
        self.memsets.push((order, m));
    }

    fn alloc(&mut self, id: AllocId, a: DeviceAlloc) {
        let row = self.tables.alloc_row(&a);
        place(&mut self.tables.allocs, id.index(), row);
    }

    fn freed(&mut self, id: AllocId, free_ns: u64) {
        if let Some(r) = self.tables.allocs.get_mut(id.index()) {
            r.free_ns = free_ns;
        }
    }

    fn hash(&mut self, h: &BufferHash) {
        self.hashes.push(*h);
    }

    fn finish(self, info: RunInfo) -> Run {
        // Every construct and allocation the join started came back.
        let mut tables = self.tables;
        tables.constructs.truncate(info.constructs as usize);
        tables.constructs.shrink_to_fit();
        tables.allocs.truncate(info.allocs as usize);
        tables.allocs.shrink_to_fit();
        tables.kernels = in_order(self.kernels);
        tables.transfers = in_order(self.transfers);
        tables.seal();
        let mut launches = self.launches;
        if !launches
            .windows(2)
            .all(|w| w[0].construct <= w[1].construct)
        {
            launches.sort_by_key(|l| l.construct);
        }
        launches.shrink_to_fit();
        let mut hashes = self.hashes;
        hashes.shrink_to_fit();
        let mut run = Run {
            header: info.header,
            version: info.version,
            losses: info.losses,
            devices: info.devices,
            sites: info.sites,
            callers: info.callers,
            tables,
            memsets: in_order(self.memsets),
            launches,
            launches_in_kernels: self.launches_in_kernels,
            names: info.names,
            modules: info.modules,
            collector_spans: collector_spans(&hashes),
            hashes,
            mpi_calls: info.mpi_calls,
            acc_events: info.acc_events,
            dropped: info.dropped,
            diagnostics: info.diagnostics,
            notes: info.notes,
            skipped_unknown: info.skipped_unknown,
            span_ns: info.span_ns,
            open_at_end: info.open_at_end,
            ending: info.ending,
            routines: info.routines,
            executable_binary: None,
            data_names: Default::default(),
            related: Related::default(),
            totals: info.totals,
            placement: info.placement,
        };
        run.derive_indices();
        run
    }
}

impl Run {
    /// A run with no entities (for runs made by hand).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn empty(header: Header) -> Run {
        Run {
            placement: Placement::new(&header),
            header,
            version: (1, 0),
            losses: Vec::new(),
            devices: Vec::new(),
            sites: Vec::new(),
            callers: Default::default(),
            tables: Tables::default(),
            memsets: Vec::new(),
            launches: Vec::new(),
            launches_in_kernels: false,
            names: Vec::new(),
            modules: Vec::new(),
            hashes: Vec::new(),
            collector_spans: Vec::new(),
            mpi_calls: Vec::new(),
            acc_events: 0,
            dropped: Vec::new(),
            diagnostics: Vec::new(),
            notes: Vec::new(),
            skipped_unknown: 0,
            span_ns: (0, 0),
            open_at_end: Vec::new(),
            ending: None,
            routines: Vec::new(),
            executable_binary: None,
            data_names: Default::default(),
            related: Related::default(),
            totals: Totals::default(),
        }
    }

    /// What a sink gets besides the entities, read from the run.
    pub(crate) fn info(&self) -> RunInfo {
        RunInfo {
            header: self.header.clone(),
            version: self.version,
            losses: self.losses.clone(),
            devices: self.devices.clone(),
            sites: self.sites.clone(),
            callers: self.callers.clone(),
            mpi_calls: self.mpi_calls.clone(),
            names: self.names.clone(),
            routines: self.routines.clone(),
            modules: self.modules.clone(),
            acc_events: self.acc_events,
            dropped: self.dropped.clone(),
            diagnostics: self.diagnostics.clone(),
            notes: self.notes.clone(),
            skipped_unknown: self.skipped_unknown,
            span_ns: self.span_ns,
            open_at_end: self.open_at_end.clone(),
            ending: self.ending,
            constructs: self.tables.constructs.len() as u32,
            allocs: self.tables.allocs.len() as u32,
            totals: self.totals,
            placement: self.placement,
        }
    }

    /// The handle of a name, added when new (for runs made by hand).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn intern_name(&mut self, text: &str) -> NameId {
        match self.names.iter().position(|n| n == text) {
            Some(i) => NameId::at(i),
            None => {
                self.names.push(text.to_string());
                NameId::at(self.names.len() - 1)
            }
        }
    }

    /// Sets the kernels, transfers and allocations of a run made by hand
    /// (each table in the run's order).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn set_entities(
        &mut self,
        kernels: &[Kernel],
        transfers: &[Transfer],
        allocs: &[DeviceAlloc],
    ) {
        let mut t = std::mem::take(&mut self.tables);
        t.kernels = kernels.iter().map(|k| t.kernel_row(k)).collect();
        t.transfers = transfers.iter().map(|x| t.transfer_row(x)).collect();
        t.allocs = allocs.iter().map(|a| t.alloc_row(a)).collect();
        t.seal();
        self.tables = t;
    }

    /// The kernels the runtime's launch events tell of, for a run made by
    /// hand without CUPTI (the join hands them over itself).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn launched_kernels(&mut self) -> Vec<Kernel> {
        let unnamed = self.intern_name("?");
        self.launches
            .iter()
            .map(|l| l.kernel(&self.construct(l.construct), unnamed))
            .collect()
    }
}

/// The collector's hashing spans of `hashes`, sorted and merged.
fn collector_spans(hashes: &[BufferHash]) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = hashes
        .iter()
        .filter_map(|h| {
            let d = h.hash_ns.filter(|&d| d > 0)?;
            Some((h.time_ns.saturating_sub(d), h.time_ns))
        })
        .collect();
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Builds the model of one trace, symbolizing call sites with `symbolizer`.
pub fn build(trace: Trace, symbolizer: &mut Symbolizer) -> Run {
    let sink = RunSink::new(&trace.header);
    let mut run = crate::join::join_trace(trace, symbolizer, sink);
    read_binaries(&mut run, symbolizer);
    run
}

/// What the analysis reads from the program's executable besides call
/// sites, found once through `symbolizer`: where its file is, and the names
/// of the data objects the transfers moved.
fn read_binaries(run: &mut Run, symbolizer: &mut Symbolizer) {
    let Some(exe) = run.executable_module() else {
        return;
    };
    let binary = symbolizer.locate(exe);
    // Each buffer once: the transfers' shapes hold their host pointers.
    let mut moved: Vec<u64> = run
        .tables
        .transfer_shapes
        .list
        .iter()
        .map(|s| s.host_ptr)
        .filter(|&p| p != u64::MAX)
        .collect();
    moved.sort_unstable();
    moved.dedup();
    let names = symbolizer.data_names(exe, moved);
    run.executable_binary = binary;
    run.data_names = names.into_iter().collect();
}

/// Builds the model while reading: records are looked at one by one and
/// never held all at once, so memory follows the model, not the trace.
pub fn build_from_reader(
    reader: impl accprof_trace::RecordSource,
    symbolizer: &mut Symbolizer,
) -> Run {
    let sink = RunSink::new(reader.header());
    let mut run = crate::join::join_reader(reader, symbolizer, sink);
    read_binaries(&mut run, symbolizer);
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use accprof_trace::{
        AccDetail, AccEventKind, Clock, DropSource, HashMode, Record, RegionId, SourceLocation,
        SourceState, Sources,
    };

    fn header() -> Header {
        Header {
            host: "h".into(),
            pid: 1,
            rank: None,
            command_line: vec!["./a".into()],
            executable: "./a".into(),
            start_unix_ns: 0,
            start_clock_ns: 0,
            clock: Clock::Monotonic,
            runtime: "libgomp".into(),
            collector: "test".into(),
            sources: Sources {
                acc_prof: SourceState::Active,
                cupti: SourceState::Inactive("test".into()),
                hashing: HashMode::Off,
            },
        }
    }

    /// An event of `region` on thread 1 at `line` (NVHPC-style location).
    fn ev(t: u64, kind: AccEventKind, region: u64, line: u32) -> Record {
        Record::Acc(accprof_trace::AccEvent {
            time_ns: t,
            kind,
            thread: 1,
            region: RegionId(region),
            device_type: None,
            device_number: None,
            async_queue: None,
            construct: None,
            implicit: false,
            location: SourceLocation {
                line: Some(line),
                ..SourceLocation::default()
            },
            call_site: None,
            detail: AccDetail::None,
        })
    }

    fn build_of(records: Vec<Record>) -> Run {
        let trace = Trace {
            version: (1, 1),
            header: header(),
            records,
            losses: Vec::new(),
            skipped_unknown: 0,
        };
        build(trace, &mut Symbolizer::new())
    }

    fn lines(run: &Run) -> Vec<(Option<u32>, bool, bool)> {
        run.constructs()
            .map(|(_, c)| (run.site(c.site).line, c.parent.is_some(), c.cut))
            .collect()
    }

    fn on(device_type: u32, r: Record) -> Record {
        match r {
            Record::Acc(mut e) => {
                e.device_type = Some(device_type);
                Record::Acc(e)
            }
            r => r,
        }
    }

    #[test]
    fn where_the_constructs_ran_is_read_once_from_their_device_types() {
        use AccEventKind::*;
        let host = |r| on(ACC_DEVICE_HOST, r);
        let mixed = build_of(vec![
            host(ev(1, ComputeConstructStart, 1, 10)),
            host(ev(2, ComputeConstructEnd, 1, 10)),
            on(5, ev(3, ComputeConstructStart, 2, 20)),
            on(5, ev(4, ComputeConstructEnd, 2, 20)),
        ]);
        assert!(mixed.ran_on_host() && !mixed.ran_only_on_host());
        assert!(mixed.runtime_is_libgomp());
        let all = build_of(vec![
            host(ev(1, ComputeConstructStart, 1, 10)),
            host(ev(2, ComputeConstructEnd, 1, 10)),
        ]);
        assert!(all.ran_on_host() && all.ran_only_on_host());
        let none = build_of(Vec::new());
        assert!(!none.ran_on_host() && !none.ran_only_on_host());
    }

    #[test]
    fn the_totals_count_kernels_and_host_device_transfers_only() {
        use crate::testkit::runs::RunBuilder;
        let mut b = RunBuilder::new(HashMode::Off);
        let site = b.site("a.c", 1);
        let c = b.open(ConstructClass::Compute, site, None);
        let (x, y) = (b.buf(4096, 1), b.buf(100, 2));
        b.copy(c, CopyKind::HostToDevice, x, 300);
        b.kernel(c, 8, 1_000);
        b.kernel(c, 8, 2_000);
        b.copy(c, CopyKind::DeviceToDevice, y, 50);
        b.copy(c, CopyKind::DeviceToHost, y, 70);
        b.close(c);
        // Constructs: top-level ones and their host time; the nested one
        // counts with its parent; one never ended is counted as cut.
        let inner = b.open(ConstructClass::EnterData, site, Some(c));
        let d = b.open(ConstructClass::Update, site, None);
        let e = b.open(ConstructClass::Compute, site, None);
        b.set_span(c, 0, Some(5_000));
        b.set_span(inner, 100, Some(200));
        b.set_span(d, 6_000, Some(6_500));
        b.set_span(e, 7_000, None);
        b.construct_mut(e).cut = true;
        let run = b.build();
        assert_eq!(
            run.totals(),
            Totals {
                kernel_ns: 3_000,
                kernels: 2,
                transfer_ns: 370,
                transfers: 2,
                transfer_bytes: 4196,
                constructs: 3,
                host_construct_ns: 5_500,
                cut_constructs: 1,
            }
        );
    }

    #[test]
    fn without_cupti_the_launch_events_are_the_kernels_with_host_times() {
        use AccEventKind::*;
        let launch = |t, kind, gangs, workers| match ev(t, kind, 1, 10) {
            Record::Acc(mut e) => {
                e.detail = AccDetail::Launch(accprof_trace::LaunchInfo {
                    kernel_name: None,
                    num_gangs: Some(gangs),
                    num_workers: Some(workers),
                    vector_length: Some(32),
                });
                Record::Acc(e)
            }
            r => r,
        };
        let run = build_of(vec![
            ev(1, ComputeConstructStart, 1, 10),
            launch(2, EnqueueLaunchStart, 4, 1),
            ev(5, EnqueueLaunchEnd, 1, 10),
            launch(6, EnqueueLaunchStart, 1, 8),
            ev(7, ComputeConstructEnd, 1, 10),
        ]);
        let c = ConstructId::at(0);
        let ks: Vec<_> = run
            .kernels()
            .map(|(_, k)| (k.construct, k.grid, k.block, k.start_ns, k.end_ns, k.source))
            .collect();
        assert_eq!(
            ks,
            [
                (Some(c), [4, 1, 1], [32, 1, 1], 2, 5, KernelSource::AccProf),
                // The second launch's end never came.
                (Some(c), [1, 1, 1], [32, 8, 1], 6, 6, KernelSource::AccProf),
            ]
        );
        assert_eq!(run.kernels_of(c).len(), 2);
        // Host times are no device time.
        assert_eq!((run.totals().kernels, run.totals().kernel_ns), (2, 0));
    }

    #[test]
    fn without_cupti_each_launch_is_held_once_and_read_back_as_it_came() {
        use AccEventKind::*;
        let launch = |t, gangs, workers, vector_length| match ev(t, EnqueueLaunchStart, 1, 10) {
            Record::Acc(mut e) => {
                e.detail = AccDetail::Launch(accprof_trace::LaunchInfo {
                    kernel_name: None,
                    num_gangs: gangs,
                    num_workers: workers,
                    vector_length,
                });
                Record::Acc(e)
            }
            r => r,
        };
        let run = build_of(vec![
            ev(1, ComputeConstructStart, 1, 10),
            launch(2, Some(4), None, Some(32)),
            ev(3, EnqueueLaunchEnd, 1, 10),
            launch(4, None, Some(1), None),
            ev(5, EnqueueLaunchEnd, 1, 10),
            launch(6, Some(1 << 40), Some(0), Some(128)),
            ev(7, EnqueueLaunchEnd, 1, 10),
            launch(8, Some(2), Some(8), Some(64)),
            ev(9, ComputeConstructEnd, 1, 10),
        ]);
        let c = ConstructId::at(0);
        let got: Vec<_> = run
            .launches_of(c)
            .map(|l| {
                let name = l.kernel_name.map(|n| run.name(n).to_string());
                (
                    name,
                    l.gangs(),
                    l.workers(),
                    l.vector_length(),
                    l.start_ns,
                    l.end_ns(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (None, Some(4), None, Some(32), 2, Some(3)),
                (None, None, Some(1), None, 4, Some(5)),
                (None, Some(1 << 40), Some(0), Some(128), 6, Some(7)),
                (None, Some(2), Some(8), Some(64), 8, None),
            ]
        );
        // Only the launch whose gangs a kernel cannot hold is kept apart.
        assert_eq!(run.launches.len(), 1);
        assert_eq!(run.kernels_of(c).len(), 4);
    }

    #[test]
    fn a_compute_construct_without_its_end_is_closed_by_the_next_one() {
        use AccEventKind::*;
        // Four reductions; the end of the second was toggled off.
        let mut r = Vec::new();
        for (i, line) in [10u32, 20, 30, 40].into_iter().enumerate() {
            let region = i as u64 + 1;
            let t = 100 * region;
            r.push(ev(t, ComputeConstructStart, region, line));
            r.push(ev(t + 10, EnterDataStart, region + 100, line));
            r.push(ev(t + 20, EnterDataEnd, region + 100, line));
            if line != 20 {
                r.push(ev(t + 50, ComputeConstructEnd, region, line));
            }
        }
        let run = build_of(r);
        let top: Vec<_> = lines(&run)
            .into_iter()
            .filter(|(_, nested, _)| !nested)
            .collect();
        assert_eq!(
            top,
            [
                (Some(10), false, false),
                (Some(20), false, true),
                (Some(30), false, false),
                (Some(40), false, false)
            ]
        );
        assert!(run.open_at_end.is_empty());
        assert_eq!(run.construct(ConstructId::at(2)).end_ns(), None);
    }

    #[test]
    fn a_start_at_an_outer_depth_closes_everything_inside() {
        use AccEventKind::*;
        let run = build_of(vec![
            ev(1, ComputeConstructStart, 1, 10),
            ev(2, EnterDataStart, 101, 10),
            // Neither end comes.
            ev(5, ComputeConstructStart, 2, 20),
            ev(6, ComputeConstructEnd, 2, 20),
            ev(7, UpdateStart, 3, 30),
        ]);
        assert_eq!(
            lines(&run),
            [
                (Some(10), false, true),
                (Some(10), true, true),
                (Some(20), false, false),
                (Some(30), false, true)
            ]
        );
        // The update was running when the trace ended.
        assert_eq!(run.open_at_end, [ConstructId::at(3)]);
    }

    #[test]
    fn an_end_closes_what_is_still_open_inside_it() {
        use AccEventKind::*;
        let run = build_of(vec![
            ev(1, ComputeConstructStart, 1, 10),
            ev(2, EnterDataStart, 101, 10),
            ev(3, ComputeConstructEnd, 1, 10),
        ]);
        assert_eq!(
            lines(&run),
            [(Some(10), false, false), (Some(10), true, true)]
        );
        assert!(run.open_at_end.is_empty());
    }

    #[test]
    fn impossible_device_records_are_left_out_and_said() {
        let rec = |start_ns, end_ns| {
            Record::Memcpy(accprof_trace::MemcpyRecord {
                start_ns,
                end_ns,
                bytes: 8,
                kind: CopyKind::HostToDevice,
                src: MemoryKind::Pageable,
                dst: MemoryKind::Device,
                device: 0,
                context: 0,
                stream: 0,
                correlation: 0,
            })
        };
        let run = build_of(vec![
            rec(10, 20),
            rec(30, 5),
            rec(0, u64::MAX),
            Record::Dropped {
                source: DropSource::Cupti,
                count: u64::MAX,
            },
            Record::Dropped {
                source: DropSource::Cupti,
                count: 1,
            },
        ]);
        assert_eq!(run.transfers().len(), 1);
        assert_eq!(run.span_ns, (10, 20));
        assert_eq!(run.dropped, [(DropSource::Cupti, u64::MAX)]);
        assert_eq!(run.notes.len(), 2, "{:?}", run.notes);
    }

    #[test]
    fn the_galloping_search_finds_what_a_binary_search_finds() {
        // Owners with gaps, runs and a skew, searched from every guess.
        let owners: Vec<ConstructId> = [0usize, 0, 2, 3, 3, 3, 7, 8, 20, 21, 21, 40]
            .iter()
            .map(|&i| ConstructId::at(i))
            .collect();
        for c in 0..45 {
            let c = ConstructId::at(c);
            let want = owners.partition_point(|&o| o < c);
            for guess in 0..=owners.len() + 2 {
                assert_eq!(lower_bound(&owners, c, guess), want, "{c:?} from {guess}");
            }
        }
        assert_eq!(lower_bound(&[], ConstructId::at(3), 0), 0);
    }

    #[test]
    fn an_index_by_construct_reads_the_same_in_order_or_not() {
        let c = ConstructId::at;
        // (owner) per entity, some without one.
        let sorted = [Some(c(0)), None, Some(c(0)), Some(c(2)), Some(c(5)), None];
        let mixed = [Some(c(5)), None, Some(c(0)), Some(c(2)), Some(c(0)), None];
        for owners in [&sorted[..], &mixed[..]] {
            let by = ByConstruct::new(owners, |i| i as u32, |o| *o);
            for k in 0..7 {
                let want: Vec<u32> = (0..owners.len() as u32)
                    .filter(|&i| owners[i as usize] == Some(c(k)))
                    .collect();
                assert_eq!(by.of(c(k)), &want[..], "{owners:?} construct {k}");
            }
        }
    }

    /// The model's entries stay compact (a launch-storm trace holds about
    /// three constructs, a kernel, a launch, a transfer and an allocation
    /// per 16 events).
    #[test]
    fn entries_stay_compact() {
        use std::mem::size_of;
        assert_eq!(size_of::<Option<ConstructId>>(), 4);
        assert_eq!(size_of::<Option<NameId>>(), 4);
        assert!(
            size_of::<LaunchRequest>() <= 48,
            "{}",
            size_of::<LaunchRequest>()
        );
        // What the run keeps of each kernel, transfer and allocation
        // besides the shape it shares with others.
        assert_eq!(size_of::<ConstructRow>(), 24);
        assert_eq!(size_of::<KernelRow>(), 24);
        assert_eq!(size_of::<TransferRow>(), 40);
        assert_eq!(size_of::<AllocRow>(), 24);
    }

    #[test]
    fn memsets_join_their_driver_calls_in_whatever_order_they_come() {
        use AccEventKind::*;
        let call = |t, correlation| {
            Record::DriverCall(accprof_trace::DriverCall {
                time_ns: t,
                thread: 1,
                region: RegionId(1),
                correlation,
                api: accprof_trace::DriverApi::Memset,
                host_ptr: None,
                bytes: Some(64),
            })
        };
        let memset = |start_ns, correlation| {
            Record::Memset(accprof_trace::MemsetRecord {
                start_ns,
                end_ns: start_ns + 5,
                bytes: 64,
                value: 0,
                memory: MemoryKind::Device,
                device: 0,
                context: 1,
                stream: 13,
                correlation,
            })
        };
        let run = build_of(vec![
            ev(1, ComputeConstructStart, 1, 10),
            call(2, 5),
            // Before its construct ends, and before its driver call.
            memset(3, 5),
            memset(4, 6),
            call(5, 6),
            ev(9, ComputeConstructEnd, 1, 10),
            // No driver call names it.
            memset(12, 7),
        ]);
        let c = ConstructId::at(0);
        let ms: Vec<_> = run
            .memsets()
            .map(|(_, m)| (m.start_ns, m.construct, m.stream, m.correlation))
            .collect();
        assert_eq!(
            ms,
            [(3, Some(c), 13, 5), (4, Some(c), 13, 6), (12, None, 13, 7)]
        );
        assert_eq!(run.memsets_of(c), [MemsetId::at(0), MemsetId::at(1)]);
    }

    /// A `data` region on thread 1 around a `host_data` region whose exit
    /// the runtime names `data`, both exits reported from a body line; a
    /// `data` region on thread 2 interleaved with them; an implicit part
    /// of a compute construct at a line of its own.
    #[test]
    fn line_sites_follow_entries_and_top_level_constructs() {
        use crate::testkit::runs::RunBuilder;
        let mut b = RunBuilder::new(HashMode::Off);
        let (data, host_data, body) = (b.site("a.c", 10), b.site("a.c", 12), b.site("a.c", 15));
        let (other, compute, part) = (b.site("a.c", 30), b.site("a.c", 40), b.site("a.c", 41));
        let region = |b: &mut RunBuilder, class, kind, site, thread| {
            let id = b.open(class, site, None);
            let c = b.construct_mut(id);
            c.kind = Some(kind);
            c.thread = thread;
            id
        };
        let (enter, exit) = (ConstructClass::EnterData, ConstructClass::ExitData);
        let d_in = region(&mut b, enter, ConstructKind::Data, data, 1);
        let o_in = region(&mut b, enter, ConstructKind::Data, other, 2);
        let h_in = region(&mut b, enter, ConstructKind::HostData, host_data, 1);
        let o_out = region(&mut b, exit, ConstructKind::Data, body, 2);
        let h_out = region(&mut b, exit, ConstructKind::Data, body, 1);
        let d_out = region(&mut b, exit, ConstructKind::Data, body, 1);
        let c = b.open(ConstructClass::Compute, compute, None);
        let implicit = b.open(ConstructClass::EnterData, part, Some(c));
        let run = b.build();
        let line = |id| run.site(run.line_site(id)).line;
        assert_eq!(line(d_in), Some(10));
        assert_eq!(line(d_out), Some(10));
        assert_eq!(line(h_in), Some(12));
        assert_eq!(line(h_out), Some(12));
        assert_eq!(line(o_in), Some(30));
        assert_eq!(line(o_out), Some(30));
        assert_eq!(line(implicit), Some(40));
        assert_eq!(run.construct(h_out).kind, Some(ConstructKind::HostData));
        assert_eq!(run.construct(d_out).kind, Some(ConstructKind::Data));
        // The runtime's own sites stay as reported.
        assert_eq!(run.site(run.construct(h_out).site).line, Some(15));
    }
}
