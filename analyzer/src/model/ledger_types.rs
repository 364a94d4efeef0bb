//! The ledger's figures: each host thread's wall time partitioned, and
//! each line site's host time by part. The run carries them in its facts;
//! the ledger's sink (`ledger`) makes them in the join's pass, and
//! `ledger` re-exports them.

use accprof_trace::DriverOp;

use super::entities::SiteId;

/// The parts a construct's host time is split into, as the driver timed
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// Device and pinned host memory allocated and freed.
    Allocation,
    /// Copies and memsets, host staging and device copy together.
    Transfer,
    Launch,
    /// The host waited for the device (stream, context, event syncs).
    Wait,
    /// The driver, a context or the device code started.
    StartUp,
    /// Every other driver call (queries, streams, events, callbacks).
    OtherDriver,
}

impl Part {
    pub const ALL: [Part; 6] = [
        Part::Allocation,
        Part::Transfer,
        Part::Launch,
        Part::Wait,
        Part::StartUp,
        Part::OtherDriver,
    ];

    pub fn of(op: DriverOp) -> Part {
        match op {
            DriverOp::Alloc | DriverOp::Free | DriverOp::AllocHost | DriverOp::FreeHost => {
                Part::Allocation
            }
            DriverOp::CopyHostToDevice
            | DriverOp::CopyDeviceToHost
            | DriverOp::CopyOther
            | DriverOp::Memset => Part::Transfer,
            DriverOp::Launch => Part::Launch,
            DriverOp::Synchronize => Part::Wait,
            DriverOp::ModuleLoad | DriverOp::Init => Part::StartUp,
            DriverOp::Other => Part::OtherDriver,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Part::Allocation => "allocation and free",
            Part::Transfer => "transfers",
            Part::Launch => "kernel launches",
            Part::Wait => "waiting for the device",
            Part::StartUp => "CUDA start-up and code loading",
            Part::OtherDriver => "other CUDA driver calls",
        }
    }

    /// Short name for tables and exports of the same part outside
    /// constructs.
    pub fn outside_key(self) -> &'static str {
        match self {
            Part::Allocation => "outside_allocation",
            Part::Transfer => "outside_transfer",
            Part::Launch => "outside_launch",
            Part::Wait => "outside_wait",
            Part::StartUp => "outside_startup",
            Part::OtherDriver => "outside_other_driver",
        }
    }

    /// Short name for tables and exports.
    pub fn key(self) -> &'static str {
        match self {
            Part::Allocation => "allocation",
            Part::Transfer => "transfer",
            Part::Launch => "launch",
            Part::Wait => "wait",
            Part::StartUp => "startup",
            Part::OtherDriver => "other_driver",
        }
    }
}

/// Time and calls of each [`Part`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parts {
    pub ns: [u64; 6],
    pub calls: [u64; 6],
}

impl Parts {
    pub(crate) fn add(&mut self, part: Part, ns: u64) {
        let i = part as usize;
        self.ns[i] = self.ns[i].saturating_add(ns);
        self.calls[i] += 1;
    }

    pub fn ns(&self, part: Part) -> u64 {
        self.ns[part as usize]
    }

    pub fn calls(&self, part: Part) -> u64 {
        self.calls[part as usize]
    }

    pub fn total_ns(&self) -> u64 {
        self.ns.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    pub fn merge(&mut self, o: &Parts) {
        for i in 0..self.ns.len() {
            self.ns[i] = self.ns[i].saturating_add(o.ns[i]);
            self.calls[i] += o.calls[i];
        }
    }
}

/// One host thread's wall time, partitioned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadLedger {
    /// OS thread id.
    pub thread: u32,
    /// Host time inside top-level OpenACC constructs (API routine calls
    /// included).
    pub inside_ns: u64,
    /// Top-level constructs.
    pub constructs: u64,
    /// What the driver timed inside them.
    pub inside: Parts,
    /// Driver calls outside every construct (the program's own CUDA
    /// calls, the runtime's start-up before the first construct).
    pub outside: Parts,
    /// MPI calls.
    pub mpi_ns: u64,
    pub mpi_calls: u64,
    /// The collector's own work on this thread inside constructs (hashing
    /// host buffers, the coherence check's work at their boundaries).
    pub collector_ns: u64,
    /// The collector's own work outside constructs: the coherence check's
    /// (at a construct's end, after it; its fault handler, which the
    /// trace times as a total, counted on the busiest thread).
    pub collector_outside_ns: u64,
}

impl ThreadLedger {
    /// Inside constructs, what no driver call and no collector work
    /// explains: the runtime's own bookkeeping.
    pub fn runtime_rest_ns(&self) -> u64 {
        self.inside_ns
            .saturating_sub(self.inside.total_ns())
            .saturating_sub(self.collector_ns)
    }

    /// What is left of `wall_ns` outside constructs, MPI calls and driver
    /// calls: the program's own host code.
    pub fn program_ns(&self, wall_ns: u64) -> u64 {
        wall_ns
            .saturating_sub(self.inside_ns)
            .saturating_sub(self.mpi_ns)
            .saturating_sub(self.outside.total_ns())
            .saturating_sub(self.collector_outside_ns)
    }
}

/// What a line site's top-level constructs spent on the host, by part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteLedger {
    pub constructs: u64,
    pub host_ns: u64,
    pub parts: Parts,
    /// Collector work inside them.
    pub collector_ns: u64,
}

impl SiteLedger {
    pub fn runtime_rest_ns(&self) -> u64 {
        self.host_ns
            .saturating_sub(self.parts.total_ns())
            .saturating_sub(self.collector_ns)
    }
}

/// The run's ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// The wall time every thread's ledger partitions (the run's).
    pub wall_ns: u64,
    /// The trace holds the driver's timings (format 1.4 and CUPTI's
    /// driver records on): without them the time inside constructs is not
    /// split.
    pub timed: bool,
    /// Driver calls recorded.
    pub driver_calls: u64,
    /// From the first start-up call's start to the last one's end
    /// ([`Part::StartUp`]: the driver, a context, the device code
    /// loaded): where the run waited for CUDA before its work; None
    /// without the driver's timings.
    pub startup_span: Option<(u64, u64)>,
    /// Host threads that ran OpenACC constructs or MPI calls, the busiest
    /// first.
    pub threads: Vec<ThreadLedger>,
    /// By line site ([`crate::Run::line_site`]), indexed by site.
    pub sites: Vec<SiteLedger>,
    /// From the process's start to the trace's first record (the loader,
    /// the program's start-up before the collector): outside the wall time
    /// the threads' parts sum to. None when the trace does not say
    /// (before format 1.4).
    pub before_first_record_ns: Option<u64>,
    /// The code-loading calls (`cuModuleLoad*`, `cuLink*`,
    /// `cuModuleGetFunction`) of every thread, inside constructs or not:
    /// their time and count. Part of [`Part::StartUp`]; apart from the
    /// driver's and the context's start, this is where the driver compiles
    /// PTX it has no cached machine code for.
    pub module_load_ns: u64,
    pub module_load_calls: u64,
}

/// Code loading that took longer than this compiled PTX: a module whose
/// machine code the driver's cache holds loads in a few milliseconds (the
/// timed fixtures recorded on the H200 with a warm cache: 1-3 ms of code
/// loading in all, 19 of 21 runs), while compiling the PTX that GCC's
/// nvptx back end emits (for sm_30/sm_35) takes tens of milliseconds for
/// the smallest sample (laplace_bad_f90 32 ms, small_kernels 87 ms, both
/// first runs after a build) and seconds for a real code (NPB FT class W
/// 1.1-1.4 s more with `CUDA_CACHE_DISABLE=1` than with the cache warm).
pub const JIT_MIN_NS: u64 = 20_000_000;

impl Ledger {
    /// CUDA start-up and code loading, of every thread, inside constructs
    /// and outside.
    pub fn startup_ns(&self) -> u64 {
        self.threads
            .iter()
            .map(|t| t.inside.ns(Part::StartUp) + t.outside.ns(Part::StartUp))
            .fold(0u64, u64::saturating_add)
    }

    /// The wall time less the start-up: what a run whose start-up is
    /// cheap (the driver's cache warm) would take, everything else equal.
    pub fn wall_without_startup_ns(&self) -> u64 {
        self.wall_ns.saturating_sub(self.startup_ns())
    }

    /// Whether the run compiled its device code at start-up (the driver
    /// found no machine code for it in its cache): code loading took at
    /// least [`JIT_MIN_NS`]. None when the trace has no driver timings.
    pub fn paid_jit(&self) -> Option<bool> {
        self.timed.then_some(self.module_load_ns >= JIT_MIN_NS)
    }

    /// The line site's parts, when it has any.
    pub fn site(&self, site: SiteId) -> Option<&SiteLedger> {
        self.sites.get(site.index()).filter(|s| s.constructs > 0)
    }

    /// The busiest thread: the one whose table views show first.
    pub fn main_thread(&self) -> Option<&ThreadLedger> {
        self.threads.first()
    }
}
