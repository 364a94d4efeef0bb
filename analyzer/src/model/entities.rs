//! The entities of a run and their opaque handles.

use accprof_trace::{ConstructKind, CopyKind, MemoryKind};

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
    /// An [`MpiCall`] of a [`Run`] ([`Run::mpi_call`]).
    MpiCallId
);
handle!(
    /// A [`HostAccess`] of a [`Run`] ([`Run::host_access`]).
    HostAccessId
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

/// A host access the coherence check caught (`accprof run --check
/// coherence`). What its fields say depends on its kind:
/// - a stale read (C1): the host read its copy of a range while the
///   device's was newer; `construct` is the compute construct that last
///   made the device copy newer;
/// - a lost write (C2): the host wrote its copy (the first write since
///   both copies agreed) and `construct`, a compute construct, then used
///   the device copy with no upload between;
/// - an unread download (C3): `construct` (an `update self`, or a data
///   construct's exit) downloaded the range and the host read none of it
///   before the next download or the end; `time_ns` and `thread` are the
///   download's, and there is no host instruction (`site` is None).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAccess {
    pub kind: accprof_trace::CoherenceKind,
    pub time_ns: u64,
    pub thread: u32,
    /// The source line of the instruction that made the access; None for
    /// an unread download.
    pub site: Option<SiteId>,
    pub host_addr: u64,
    /// The host range mapped to the device that the access fell in.
    pub range_start: u64,
    pub range_bytes: u64,
    /// The variable's name, when the runtime gave one.
    pub variable: Option<NameId>,
    /// The construct the access is about (see the kinds above), when the
    /// trace still names it.
    pub construct: Option<ConstructId>,
    /// The device copy was read and differs (C1, C2); false when it could
    /// not be read.
    pub confirmed: bool,
}

impl HostAccess {
    /// Where in its mapped range the access fell: bytes from the range's
    /// start (the host may map another buffer at each construct, so only
    /// the access's own range gives it a meaning).
    pub fn offset(&self) -> u64 {
        self.host_addr.saturating_sub(self.range_start)
    }

    /// The address that names the array the access fell in: the one it
    /// touched when that lies in its range, else the range's start (a
    /// download nobody read touched nothing).
    pub fn named_at(&self) -> u64 {
        let inside = self.host_addr >= self.range_start
            && self.host_addr - self.range_start < self.range_bytes.max(1);
        if inside {
            self.host_addr
        } else {
            self.range_start
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
    /// The source line of the program's call into MPI; None when the trace
    /// has no call site for it (a trace before format 1.6). Read it through
    /// [`Run::mpi_site`](crate::Run::mpi_site).
    pub site: Option<SiteId>,
}

impl MpiCall {
    /// The bytes the call moved: the sum of its ranges.
    pub fn bytes(&self) -> u64 {
        self.ranges.iter().map(|r| r.bytes).sum()
    }
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
    pub(super) end_ns: u64,
    pub parent: Option<ConstructId>,
    /// How many constructs it runs in (0 at top level; 255 and deeper
    /// read 255).
    pub depth: u8,
    /// [`Construct::async_queue`]; `i32::MIN` for none.
    pub(super) async_queue: i32,
    /// [`Construct::device`]; `u32::MAX` for none.
    pub(super) device: u32,
    /// [`Construct::device_type`]; `u8::MAX` for none.
    pub(super) device_type: u8,
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
    pub(super) dims: [u64; 3],
    pub start_ns: u64,
    pub(super) end_ns: u64,
}

/// `u64::MAX` stands for none in packed fields.
pub(super) fn unpack(v: u64) -> Option<u64> {
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
    pub(super) fn of_kernel(k: &Kernel, construct: ConstructId) -> LaunchRequest {
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
    pub(super) host_ptr: u64,
    /// [`Transfer::hash`], when `hashed`.
    pub(super) hash: u64,
    pub(super) hashed: bool,
    /// [`Transfer::device`], [`Transfer::stream`],
    /// [`Transfer::correlation`]; `u32::MAX` for none.
    pub(super) device: u32,
    pub(super) stream: u32,
    pub(super) correlation: u32,
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
    pub(super) device_ptr: u64,
    /// [`Run::name`] reads it.
    pub variable: Option<NameId>,
    pub alloc_ns: u64,
    /// [`DeviceAlloc::free_ns`]; `u64::MAX` for none.
    pub(super) free_ns: u64,
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

/// The longest a single kernel or copy is believed to last; a record
/// claiming more (or ending before it starts) is damaged or crafted, and
/// its numbers would swamp every total.
pub const MAX_DEVICE_RECORD_NS: u64 = 7 * 24 * 3600 * 1_000_000_000;
