//! The record model: everything a trace can say about one process.
//!
//! Records refer to each other by small integer ids (strings, modules, call
//! sites, regions) so that repeated values cost a varint, not a copy. A string,
//! module or call site is always defined before the first record that uses it.

/// Id of an interned string (defined by [`Record::String`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StringId(pub u32);

/// Id of a loaded module (defined by [`Record::Module`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModuleId(pub u32);

/// Id of an interned call site (defined by [`Record::CallSite`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallSiteId(pub u32);

/// Id the collector gives each OpenACC construct instance (a compute
/// construct, data construct, enter/exit data, update, wait, ...). Its start
/// and end events, and every event, kernel and copy it causes, carry it.
/// Unique within one trace; 0 is never used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(pub u64);

/// Which clock the timestamps of a trace are taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// CLOCK_MONOTONIC, nanoseconds. CUPTI is given the same clock.
    Monotonic,
    /// Any clock this reader does not know (value kept as read).
    Other(u8),
}

/// Whether a data source was recording, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceState {
    Active,
    /// The source was not used; the text says why (shown to users as is).
    Inactive(String),
}

impl SourceState {
    pub fn is_active(&self) -> bool {
        matches!(self, SourceState::Active)
    }
}

/// How host buffers were hashed around transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashMode {
    Off,
    /// A fixed number of evenly spaced chunks plus the length.
    Sampled,
    /// Every byte.
    Full,
}

/// The data sources of a run, as known when the trace was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    pub acc_prof: SourceState,
    pub cupti: SourceState,
    pub hashing: HashMode,
    /// The coherence check was asked for (`accprof run --check
    /// coherence`; since format 1.6, false in older traces).
    pub coherence: bool,
}

/// The process header: written once at the start of every trace file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub host: String,
    pub pid: u32,
    /// MPI rank, when the launcher exported one.
    pub rank: Option<u32>,
    pub command_line: Vec<String>,
    pub executable: String,
    /// Wall-clock time at the start, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// The trace clock's reading at the same instant as `start_unix_ns`.
    pub start_clock_ns: u64,
    pub clock: Clock,
    /// The OpenACC runtime, e.g. "libgomp (GCC 12.2.0)", or "unknown".
    pub runtime: String,
    /// Name and version of the collector that wrote the trace.
    pub collector: String,
    pub sources: Sources,
    /// When the process started, on the trace clock (since format 1.4;
    /// `None` in older traces and where the collector could not tell):
    /// the kernel's start time of the process, to its clock tick
    /// (`sysconf(_SC_CLK_TCK)`, 10 ms on Linux), so the time before the
    /// collector loaded (exec, dynamic loading, static constructors) can be
    /// told apart from the program's run.
    pub process_start_ns: Option<u64>,
}

/// One accelerator, as the device-side source described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub id: u32,
    pub name: String,
    pub sm_count: u32,
    pub compute_capability: (u32, u32),
    pub global_memory_bytes: u64,
}

/// A loaded ELF object (executable or shared library).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    pub id: ModuleId,
    pub path: String,
    /// GNU build id, empty when the object has none.
    pub build_id: Vec<u8>,
    /// Load bias: the run-time address of the object's virtual address 0.
    pub base: u64,
    /// Extent of the object's executable mapping, relative to `base`.
    pub text_start: u64,
    pub text_end: u64,
}

/// A place in the application that called into the OpenACC runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSite {
    pub id: CallSiteId,
    pub module: ModuleId,
    /// A return address, relative to the module's load bias (look it up at
    /// `offset - 1` to land inside the call instruction).
    pub return_offset: u64,
}

/// One frame of a call chain: a return address in a loaded object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Frame {
    pub module: ModuleId,
    /// Relative to the module's load bias, as in [`CallSite`].
    pub return_offset: u64,
}

/// The callers above a call site, as the first call through the site found
/// them on the stack (since format 1.2): the return address into the
/// function that called the site's function first, then into its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallChain {
    pub site: CallSiteId,
    pub callers: Vec<Frame>,
}

/// A host range an MPI call reads (a send buffer) or writes (a receive
/// buffer), as its arguments give it (count times the datatype's size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpiRange {
    pub host_ptr: u64,
    pub bytes: u64,
    pub write: bool,
}

/// A call of an MPI point-to-point or collective routine (since format
/// 1.2), recorded by the collector's PMPI wrappers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpiCall {
    pub start_ns: u64,
    pub end_ns: u64,
    pub thread: u32,
    /// The routine's name ("MPI_Sendrecv").
    pub routine: StringId,
    /// Whether the MPI library says it takes device memory
    /// (`MPIX_Query_cuda_support`); None when it has no such query.
    pub cuda_aware: Option<bool>,
    /// At most [`MAX_MPI_RANGES`].
    pub ranges: Vec<MpiRange>,
    /// The program's call into MPI (since format 1.6; None in older traces
    /// and when the collector found no application frame).
    pub call_site: Option<CallSiteId>,
}

/// Ranges an [`MpiCall`] holds at most.
pub const MAX_MPI_RANGES: usize = 16;

/// Callers a [`CallChain`] holds at most.
pub const MAX_CALLERS: usize = 8;

/// The OpenACC 2.6+ profiling events (`acc_event_t`), numbered as the
/// specification numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AccEventKind {
    DeviceInitStart = 1,
    DeviceInitEnd = 2,
    DeviceShutdownStart = 3,
    DeviceShutdownEnd = 4,
    RuntimeShutdown = 5,
    Create = 6,
    Delete = 7,
    Alloc = 8,
    Free = 9,
    EnterDataStart = 10,
    EnterDataEnd = 11,
    ExitDataStart = 12,
    ExitDataEnd = 13,
    UpdateStart = 14,
    UpdateEnd = 15,
    ComputeConstructStart = 16,
    ComputeConstructEnd = 17,
    EnqueueLaunchStart = 18,
    EnqueueLaunchEnd = 19,
    EnqueueUploadStart = 20,
    EnqueueUploadEnd = 21,
    EnqueueDownloadStart = 22,
    EnqueueDownloadEnd = 23,
    WaitStart = 24,
    WaitEnd = 25,
}

impl AccEventKind {
    pub const ALL: [AccEventKind; 25] = [
        AccEventKind::DeviceInitStart,
        AccEventKind::DeviceInitEnd,
        AccEventKind::DeviceShutdownStart,
        AccEventKind::DeviceShutdownEnd,
        AccEventKind::RuntimeShutdown,
        AccEventKind::Create,
        AccEventKind::Delete,
        AccEventKind::Alloc,
        AccEventKind::Free,
        AccEventKind::EnterDataStart,
        AccEventKind::EnterDataEnd,
        AccEventKind::ExitDataStart,
        AccEventKind::ExitDataEnd,
        AccEventKind::UpdateStart,
        AccEventKind::UpdateEnd,
        AccEventKind::ComputeConstructStart,
        AccEventKind::ComputeConstructEnd,
        AccEventKind::EnqueueLaunchStart,
        AccEventKind::EnqueueLaunchEnd,
        AccEventKind::EnqueueUploadStart,
        AccEventKind::EnqueueUploadEnd,
        AccEventKind::EnqueueDownloadStart,
        AccEventKind::EnqueueDownloadEnd,
        AccEventKind::WaitStart,
        AccEventKind::WaitEnd,
    ];

    /// The event with the specification's number, if it is one.
    pub fn from_raw(v: i64) -> Option<Self> {
        if (1..=25).contains(&v) {
            Some(Self::ALL[(v - 1) as usize])
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        use AccEventKind::*;
        match self {
            DeviceInitStart => "device_init_start",
            DeviceInitEnd => "device_init_end",
            DeviceShutdownStart => "device_shutdown_start",
            DeviceShutdownEnd => "device_shutdown_end",
            RuntimeShutdown => "runtime_shutdown",
            Create => "create",
            Delete => "delete",
            Alloc => "alloc",
            Free => "free",
            EnterDataStart => "enter_data_start",
            EnterDataEnd => "enter_data_end",
            ExitDataStart => "exit_data_start",
            ExitDataEnd => "exit_data_end",
            UpdateStart => "update_start",
            UpdateEnd => "update_end",
            ComputeConstructStart => "compute_construct_start",
            ComputeConstructEnd => "compute_construct_end",
            EnqueueLaunchStart => "enqueue_launch_start",
            EnqueueLaunchEnd => "enqueue_launch_end",
            EnqueueUploadStart => "enqueue_upload_start",
            EnqueueUploadEnd => "enqueue_upload_end",
            EnqueueDownloadStart => "enqueue_download_start",
            EnqueueDownloadEnd => "enqueue_download_end",
            WaitStart => "wait_start",
            WaitEnd => "wait_end",
        }
    }

    /// Events whose info block is `acc_data_event_info`.
    pub fn is_data(self) -> bool {
        use AccEventKind::*;
        matches!(
            self,
            Create
                | Delete
                | Alloc
                | Free
                | EnqueueUploadStart
                | EnqueueUploadEnd
                | EnqueueDownloadStart
                | EnqueueDownloadEnd
        )
    }

    /// Events whose info block is `acc_launch_event_info`.
    pub fn is_launch(self) -> bool {
        matches!(
            self,
            AccEventKind::EnqueueLaunchStart | AccEventKind::EnqueueLaunchEnd
        )
    }
}

/// `acc_construct_t`: the construct an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConstructKind {
    Parallel = 0,
    Kernels = 1,
    Loop = 2,
    Data = 3,
    EnterData = 4,
    ExitData = 5,
    HostData = 6,
    Atomic = 7,
    Declare = 8,
    Init = 9,
    Shutdown = 10,
    Set = 11,
    Update = 12,
    Routine = 13,
    Wait = 14,
    RuntimeApi = 15,
    Serial = 16,
}

impl ConstructKind {
    pub const ALL: [ConstructKind; 17] = [
        ConstructKind::Parallel,
        ConstructKind::Kernels,
        ConstructKind::Loop,
        ConstructKind::Data,
        ConstructKind::EnterData,
        ConstructKind::ExitData,
        ConstructKind::HostData,
        ConstructKind::Atomic,
        ConstructKind::Declare,
        ConstructKind::Init,
        ConstructKind::Shutdown,
        ConstructKind::Set,
        ConstructKind::Update,
        ConstructKind::Routine,
        ConstructKind::Wait,
        ConstructKind::RuntimeApi,
        ConstructKind::Serial,
    ];

    pub fn from_raw(v: i64) -> Option<Self> {
        if (0..=16).contains(&v) {
            Some(Self::ALL[v as usize])
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        use ConstructKind::*;
        match self {
            Parallel => "parallel",
            Kernels => "kernels",
            Loop => "loop",
            Data => "data",
            EnterData => "enter data",
            ExitData => "exit data",
            HostData => "host_data",
            Atomic => "atomic",
            Declare => "declare",
            Init => "init",
            Shutdown => "shutdown",
            Set => "set",
            Update => "update",
            Routine => "routine",
            Wait => "wait",
            RuntimeApi => "runtime api",
            Serial => "serial",
        }
    }
}

/// Where the runtime said an event comes from (NVHPC fills these; GCC does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SourceLocation {
    pub file: Option<StringId>,
    pub function: Option<StringId>,
    pub line: Option<u32>,
    pub end_line: Option<u32>,
    pub function_line: Option<u32>,
    pub function_end_line: Option<u32>,
}

/// Fields of `acc_data_event_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataInfo {
    pub var_name: Option<StringId>,
    pub bytes: Option<u64>,
    pub host_ptr: Option<u64>,
    pub device_ptr: Option<u64>,
}

/// Fields of `acc_launch_event_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaunchInfo {
    pub kernel_name: Option<StringId>,
    pub num_gangs: Option<u64>,
    pub num_workers: Option<u64>,
    pub vector_length: Option<u64>,
}

/// Event-specific part of an OpenACC event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccDetail {
    None,
    Data(DataInfo),
    Launch(LaunchInfo),
}

/// One OpenACC profiling callback, with every field the runtime gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccEvent {
    pub time_ns: u64,
    pub kind: AccEventKind,
    /// OS thread id of the host thread that got the callback.
    pub thread: u32,
    /// The construct instance this event belongs to.
    pub region: RegionId,
    /// `acc_device_t` as sent.
    pub device_type: Option<u32>,
    pub device_number: Option<u32>,
    /// Async queue (`acc_async_sync` is -2, `acc_async_noval` -1).
    pub async_queue: Option<i32>,
    pub construct: Option<ConstructKind>,
    pub implicit: bool,
    pub location: SourceLocation,
    /// Application call site of the runtime entry point, when found.
    pub call_site: Option<CallSiteId>,
    pub detail: AccDetail,
}

/// A kernel execution seen by CUPTI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelRecord {
    pub start_ns: u64,
    pub end_ns: u64,
    pub name: StringId,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers: u32,
    pub static_shared_bytes: u32,
    pub dynamic_shared_bytes: u32,
    pub local_bytes_per_thread: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u32,
}

/// Direction of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CopyKind {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    HostToHost,
    PeerToPeer,
    Other,
}

/// What kind of memory one side of a copy or memset was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    Unknown,
    Pageable,
    Pinned,
    Device,
    Array,
    Managed,
}

/// A memcpy seen by CUPTI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemcpyRecord {
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
    pub kind: CopyKind,
    pub src: MemoryKind,
    pub dst: MemoryKind,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u32,
}

/// A memset seen by CUPTI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemsetRecord {
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
    pub value: u32,
    pub memory: MemoryKind,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u32,
}

/// What a driver API call that CUPTI correlates was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DriverApi {
    Launch,
    CopyHostToDevice,
    CopyDeviceToHost,
    CopyOther,
    Memset,
    Other,
}

/// A driver API call made while a construct was open: ties the CUPTI
/// correlation id (shared by the kernel or memcpy record) to our region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverCall {
    pub time_ns: u64,
    pub thread: u32,
    pub region: RegionId,
    pub correlation: u32,
    pub api: DriverApi,
    /// Host pointer and size of a copy, when the call has them.
    pub host_ptr: Option<u64>,
    pub bytes: Option<u64>,
}

/// What a timed CUDA driver call did, as its CUPTI callback id names it
/// (since format 1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DriverOp {
    /// Device memory allocated (`cuMemAlloc`, `cuMemAllocPitch`, ...).
    Alloc,
    /// Device memory freed (`cuMemFree`, ...).
    Free,
    /// Page-locked host memory allocated or registered (`cuMemAllocHost`,
    /// `cuMemHostAlloc`, `cuMemHostRegister`).
    AllocHost,
    /// Page-locked host memory freed or unregistered.
    FreeHost,
    CopyHostToDevice,
    CopyDeviceToHost,
    /// Device to device, peer and array copies.
    CopyOther,
    Memset,
    Launch,
    /// The host waits for the device (`cuStreamSynchronize`,
    /// `cuCtxSynchronize`, `cuEventSynchronize`).
    Synchronize,
    /// Code loaded onto the device (`cuModuleLoad*`, `cuLink*`,
    /// `cuModuleGetFunction`).
    ModuleLoad,
    /// The driver or a context started (`cuInit`, `cuCtxCreate`,
    /// `cuDevicePrimaryCtxRetain`).
    Init,
    /// Every other call (queries, streams, events, callbacks).
    Other,
}

impl DriverOp {
    pub const ALL: [DriverOp; 13] = [
        DriverOp::Alloc,
        DriverOp::Free,
        DriverOp::AllocHost,
        DriverOp::FreeHost,
        DriverOp::CopyHostToDevice,
        DriverOp::CopyDeviceToHost,
        DriverOp::CopyOther,
        DriverOp::Memset,
        DriverOp::Launch,
        DriverOp::Synchronize,
        DriverOp::ModuleLoad,
        DriverOp::Init,
        DriverOp::Other,
    ];

    /// Whether a call of this op has a device record (kernel, memcpy or
    /// memset) sharing its CUPTI correlation id.
    pub fn has_device_record(self) -> bool {
        matches!(
            self,
            DriverOp::Launch
                | DriverOp::CopyHostToDevice
                | DriverOp::CopyDeviceToHost
                | DriverOp::CopyOther
                | DriverOp::Memset
        )
    }
}

/// A CUDA driver call with its start and end on the host, from CUPTI's
/// driver API activity records (since format 1.4): what the runtime does
/// inside a construct, timed, whichever runtime it is. The collector keeps
/// every call the program's threads make while it records, except
/// [`DriverOp::Other`] calls shorter than a microsecond, which it only
/// counts (an end-of-run Info diagnostic says how many and how long).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverSpan {
    /// OS thread id of the calling host thread (as in every other record).
    pub thread: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub op: DriverOp,
    /// CUPTI's id of the call (`CUpti_driver_api_trace_cbid`), for an
    /// [`DriverOp::Other`] call: which one it was. 0 (CUPTI's invalid id)
    /// when absent: the collector leaves it out for every other op, which
    /// names the call well enough.
    pub cbid: u32,
    /// CUPTI's correlation id, shared with the call's kernel, memcpy or
    /// memset record: kept for launches, copies and memsets only, 0 (no
    /// correlation in CUPTI) otherwise.
    pub correlation: u32,
}

impl DriverSpan {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Which way a hashed buffer was going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Upload,
    Download,
}

/// Content hash of a host buffer: taken at upload start and download end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferHash {
    pub time_ns: u64,
    pub region: RegionId,
    pub correlation: u32,
    pub direction: Direction,
    pub host_ptr: u64,
    pub bytes: u64,
    pub mode: HashMode,
    pub hash: u64,
    /// How long the collector took to hash the buffer, in ns (since format
    /// 1.2; None in older traces): time the program did not spend itself.
    /// At most `u64::MAX - 1`.
    pub hash_ns: Option<u64>,
}

/// A source of records that can drop some.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropSource {
    AccProf,
    Cupti,
    Collector,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Info,
    Warning,
    Error,
}

/// How the observed process ended, as the collector saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// `exit` or a return from `main`, with the status when the collector
    /// saw it (a return from `main` does not show it).
    Exit(Option<i32>),
    /// `_exit` or `_Exit`: no atexit handlers ran.
    QuickExit(i32),
    /// Killed by this signal (after the collector flushed).
    Signal(i32),
    /// Replaced by another program image (`execve` and friends).
    Exec,
    /// A fatal error of the OpenACC runtime or the CUDA driver, with the
    /// code the driver returned (0 when none), seen before the process ended.
    RuntimeError(i32),
}

/// The last record of a trace whose process ended in a way the collector
/// saw; a trace without one was cut (the process was killed with SIGKILL,
/// or the machine went down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndRecord {
    pub time_ns: u64,
    pub how: Ending,
}

/// A fatal signal as the collector's handler saw it, before the process
/// died of it or handed it to the program's own handler: which thread it
/// hit and, for a fault, where, and the CUDA driver call that thread was
/// inside (its enter seen, its exit not). Written before the `End` record
/// it explains. Since format 1.6.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crash {
    /// When the handler ran (host clock, ns).
    pub time_ns: u64,
    /// OS thread id of the thread the signal was delivered to.
    pub thread: u32,
    pub signal: i32,
    /// The signal's `si_code`: positive when the kernel raised it for a
    /// fault of the thread itself, zero or negative when a process sent it
    /// (`kill`, `raise`, `abort`).
    pub code: i32,
    /// The faulting address the kernel gave (SIGSEGV, SIGBUS, SIGILL, SIGFPE
    /// raised by a fault).
    pub address: Option<u64>,
    /// The driver call in flight on that thread: its name (`cuLaunchKernel`)
    /// and CUPTI correlation id.
    pub driver_call: Option<(String, u32)>,
}

/// Which end of an OpenACC API routine call an [`ApiCall`] marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiPhase {
    Start,
    End,
}

/// A call of an OpenACC API routine (`acc_copyin`, `acc_update_self`,
/// `acc_wait`, ...) made by the application, seen by the collector's
/// interposer: one at the call's start, one at its end, both with the
/// region the call opened (driver calls and acc_prof events made inside the
/// routine carry it, or a region nested in it). Since format 1.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiCall {
    pub time_ns: u64,
    pub thread: u32,
    pub region: RegionId,
    pub phase: ApiPhase,
    /// The routine's name (`acc_copyin`, ...).
    pub routine: StringId,
    /// The application's call into the routine (on the start).
    pub call_site: Option<CallSiteId>,
    /// Host address and size the routine was given, when it takes them.
    pub host_ptr: Option<u64>,
    pub bytes: Option<u64>,
    /// The async queue argument of the `_async` variants and `acc_wait`.
    pub async_queue: Option<i32>,
}

/// What the coherence check (`ACCPROF_CHECK=coherence`) saw the host do
/// with a range whose two copies differ (since format 1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CoherenceKind {
    /// The host read its copy while the device copy was newer (a compute
    /// construct may have written it and no `update self` came between).
    StaleRead,
    /// The host wrote its copy and the device went on using its own.
    LostWrite,
    /// A download whose bytes the host never read before the next one.
    UnreadDownload,
}

impl CoherenceKind {
    pub const ALL: [CoherenceKind; 3] = [
        CoherenceKind::StaleRead,
        CoherenceKind::LostWrite,
        CoherenceKind::UnreadDownload,
    ];

    /// Its name in exports ("stale_read", ...).
    pub fn key(self) -> &'static str {
        match self {
            CoherenceKind::StaleRead => "stale_read",
            CoherenceKind::LostWrite => "lost_write",
            CoherenceKind::UnreadDownload => "unread_download",
        }
    }

    /// Its name for people, with the check's id ("stale host read (C1)").
    pub fn label(self) -> &'static str {
        match self {
            CoherenceKind::StaleRead => "stale host read (C1)",
            CoherenceKind::LostWrite => "lost host write (C2)",
            CoherenceKind::UnreadDownload => "unread download (C3)",
        }
    }
}

/// One host access the coherence check caught (since format 1.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coherence {
    pub kind: CoherenceKind,
    /// When the access faulted (host clock, ns).
    pub time_ns: u64,
    /// OS thread id of the thread that made the access.
    pub thread: u32,
    /// Run-time address of the faulting instruction (not a return
    /// address): the analyzer finds its module among the trace's modules.
    pub code_addr: u64,
    /// The host address the instruction touched.
    pub host_addr: u64,
    /// The tracked host range the address falls in.
    pub range_start: u64,
    pub range_bytes: u64,
    /// The variable's name, when the runtime gave one.
    pub variable: Option<StringId>,
    /// The compute construct that last made the device copy newer.
    pub construct: RegionId,
    /// The device copy was read and differs from the host bytes the access
    /// touched; false when it could not be read (never when it was equal:
    /// such accesses are not recorded).
    pub confirmed: bool,
    /// The return addresses above the faulting instruction, innermost
    /// first (at most [`MAX_ACCESS_FRAMES`]), as the collector's walk out
    /// of the faulting code found them: when the access was made inside a
    /// library (libgfortran's formatted I/O, libc's memcpy), the program's
    /// call into it is among them. Empty when no walk was made (since
    /// format 1.6).
    pub callers: Vec<Frame>,
}

/// Frames kept above a coherence access (see [`Coherence::callers`]).
pub const MAX_ACCESS_FRAMES: usize = 16;
/// A stretch of the collector's own work on a host thread that no other
/// record times: the coherence check's work at a construct boundary (its
/// comparisons, its reads of device copies, page protection). Short
/// stretches are summed into one: it then starts where the first did and
/// lasts as long as they all. Since format 1.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnWork {
    pub thread: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// What the coherence check did, written once when it ends (at exit).
/// Since format 1.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckSummary {
    pub time_ns: u64,
    /// The OpenACC device had memory of its own; false when every
    /// construct ran on the host (host fallback) or shared its memory.
    pub applied: bool,
    /// Host ranges watched (mapped to a device copy and protectable) and
    /// their bytes.
    pub ranges: u64,
    pub bytes: u64,
    /// Faults the check's handler took, and its time in them.
    pub faults: u64,
    pub handler_ns: u64,
    /// The check's work outside the handler, in all (the [`OwnWork`]
    /// spans and the stretches too short to be recorded as one).
    pub work_ns: u64,
}

/// Everything that can follow the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    String {
        id: StringId,
        text: String,
    },
    Module(Module),
    CallSite(CallSite),
    Device(Device),
    Acc(AccEvent),
    Kernel(KernelRecord),
    Memcpy(MemcpyRecord),
    Memset(MemsetRecord),
    DriverCall(DriverCall),
    Hash(BufferHash),
    Dropped {
        source: DropSource,
        count: u64,
    },
    Diagnostic {
        time_ns: u64,
        level: Level,
        message: String,
    },
    /// Since format 1.1.
    End(EndRecord),
    /// Since format 1.1.
    Api(ApiCall),
    /// Since format 1.2.
    CallChain(CallChain),
    /// Since format 1.2.
    MpiCall(MpiCall),
    /// Since format 1.4.
    DriverSpan(DriverSpan),
    /// Since format 1.5.
    Coherence(Coherence),
    /// Since format 1.6.
    Crash(Crash),
    OwnWork(OwnWork),
    /// Since format 1.6.
    CheckSummary(CheckSummary),
}
