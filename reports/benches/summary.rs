//! Summary throughput on one core: `cargo bench -p accprof-reports --bench summary`.
//!
//! Generates a trace of about 10 million events shaped like the H200
//! recording of samples/launch_storm.c (GCC libgomp with CUPTI): a data
//! region around a host loop of tiny `parallel loop`s at two source lines,
//! each construct with its implicit enter/exit data, an upload of the
//! kernel-argument block, a launch, driver calls, buffer hashes, and the
//! CUPTI kernel and memcpy records arriving later in buffers; every 1000th
//! iteration an `update host`. The trace is written with the real
//! `accprof_trace::Writer` into a temporary file, then `load_run`,
//! `summarize` and the text rendering are timed together, the way
//! `accprof report` runs them (one thread).
//!
//! Prints events, seconds and events/s for each repetition and the best.
//! Options (after `--`): `--events N` (default 10,000,000), `--reps N`
//! (default 3), `--keep PATH` (write the trace there and keep it; then
//! `time accprof report PATH` measures a fresh process too).
//!
//! Measured on the 2-core AMD EPYC development VM (taskset -c 1): 10.0 M
//! events (135 MB) in 0.84 s best, 0.94-1.4 s typical in-process; a fresh
//! `accprof report` process 1.1 s with 0.74 GB peak memory.

use std::io::BufWriter;
use std::path::PathBuf;
use std::time::Instant;

use accprof_trace::*;

/// Events (not definitions) one loop iteration produces.
const EVENTS_PER_ITERATION: u64 = 20;
/// CUPTI hands its records over in buffers: one flush per this many iterations.
const CUPTI_BATCH: u64 = 512;
const THREAD: u32 = 48_213;

struct Gen<W: std::io::Write> {
    w: Writer<W>,
    t: u64,
    region: u64,
    corr: u32,
    rng: u64,
    events: u64,
    /// CUPTI records waiting for the next buffer flush.
    pending: Vec<Record>,
    /// Async queue of the events being generated (-2: synchronous).
    queue: i32,
}

impl<W: std::io::Write> Gen<W> {
    fn rand(&mut self, lo: u64, hi: u64) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        lo + self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % (hi - lo)
    }

    fn tick(&mut self) -> u64 {
        self.t += self.rand(200, 6_000);
        self.t
    }

    fn put(&mut self, r: Record) {
        if !matches!(
            r,
            Record::String { .. } | Record::Module(_) | Record::CallSite(_) | Record::Device(_)
        ) {
            self.events += 1;
        }
        self.w.write(&r).expect("write");
    }

    fn new_region(&mut self) -> RegionId {
        self.region += 1;
        RegionId(self.region)
    }

    fn acc(
        &mut self,
        kind: AccEventKind,
        region: RegionId,
        construct: ConstructKind,
        implicit: bool,
        call_site: Option<CallSiteId>,
        detail: AccDetail,
    ) -> u64 {
        let time_ns = self.tick();
        self.put(Record::Acc(AccEvent {
            time_ns,
            kind,
            thread: THREAD,
            region,
            device_type: Some(5),
            device_number: Some(0),
            async_queue: Some(self.queue),
            construct: Some(construct),
            implicit,
            location: SourceLocation::default(),
            call_site,
            detail,
        }));
        time_ns
    }

    /// A host->device or device->host copy: driver call, hash, and the
    /// CUPTI memcpy record for later.
    fn copy(&mut self, region: RegionId, at: u64, host_ptr: u64, bytes: u64, up: bool) {
        self.corr += 1;
        let corr = self.corr;
        self.put(Record::DriverCall(DriverCall {
            time_ns: at + 300,
            thread: THREAD,
            region,
            correlation: corr,
            api: if up {
                DriverApi::CopyHostToDevice
            } else {
                DriverApi::CopyDeviceToHost
            },
            host_ptr: Some(host_ptr),
            bytes: Some(bytes),
        }));
        let hash = self.rand(0, u64::MAX);
        self.put(Record::Hash(BufferHash {
            time_ns: at + 400,
            region,
            correlation: corr,
            direction: if up {
                Direction::Upload
            } else {
                Direction::Download
            },
            host_ptr,
            bytes,
            mode: HashMode::Sampled,
            hash,
            hash_ns: Some(300),
        }));
        let start = at + 500;
        let dur = 700 + bytes / 40;
        let (kind, src, dst) = if up {
            (
                CopyKind::HostToDevice,
                MemoryKind::Pageable,
                MemoryKind::Device,
            )
        } else {
            (
                CopyKind::DeviceToHost,
                MemoryKind::Device,
                MemoryKind::Pageable,
            )
        };
        self.pending.push(Record::Memcpy(MemcpyRecord {
            start_ns: start,
            end_ns: start + dur,
            bytes,
            kind,
            src,
            dst,
            device: 0,
            context: 1,
            stream: 7,
            correlation: corr,
        }));
    }

    /// One `parallel loop` construct the way libgomp reports it.
    fn compute(&mut self, site: u32, queue: i32) {
        self.queue = queue;
        use AccEventKind::*;
        use ConstructKind::Parallel;
        let none = AccDetail::None;
        let r = self.new_region();
        self.acc(
            ComputeConstructStart,
            r,
            Parallel,
            false,
            Some(CallSiteId(site)),
            none,
        );
        // Implicit enter data: the present check uploads one scalar.
        let e = self.new_region();
        self.acc(EnterDataStart, e, Parallel, true, None, none);
        let data = |bytes| {
            AccDetail::Data(DataInfo {
                var_name: None,
                bytes: Some(bytes),
                host_ptr: Some(0x7ffc_1234_5678),
                device_ptr: Some(0x7f0a_2000_0000),
            })
        };
        let t = self.acc(Alloc, e, Parallel, true, None, data(4));
        self.copy(e, t, 0x7ffc_1234_5678, 4, true);
        self.acc(EnterDataEnd, e, Parallel, true, None, none);
        // The kernel-argument block.
        self.acc(Alloc, r, Parallel, true, None, data(24));
        let t = self.acc(EnqueueUploadStart, r, Parallel, true, None, data(24));
        self.copy(r, t, 0x7ffc_1234_5000, 24, true);
        self.acc(EnqueueUploadEnd, r, Parallel, true, None, data(24));
        let launch = AccDetail::Launch(LaunchInfo {
            kernel_name: Some(StringId(10 + site)),
            num_gangs: Some(8448),
            num_workers: Some(1),
            vector_length: Some(32),
        });
        let t = self.acc(EnqueueLaunchStart, r, Parallel, true, None, launch);
        self.corr += 1;
        let corr = self.corr;
        self.put(Record::DriverCall(DriverCall {
            time_ns: t + 400,
            thread: THREAD,
            region: r,
            correlation: corr,
            api: DriverApi::Launch,
            host_ptr: None,
            bytes: None,
        }));
        let k_start = t + 5_000;
        let k_dur = self.rand(3_000, 9_000);
        self.pending.push(Record::Kernel(KernelRecord {
            start_ns: k_start,
            end_ns: k_start + k_dur,
            name: StringId(10 + site),
            grid: [8448, 1, 1],
            block: [32, 1, 1],
            registers: 40,
            static_shared_bytes: 0,
            dynamic_shared_bytes: 0,
            local_bytes_per_thread: 0,
            device: 0,
            context: 1,
            stream: 7,
            correlation: corr,
        }));
        self.acc(EnqueueLaunchEnd, r, Parallel, true, None, launch);
        let x = self.new_region();
        self.acc(ExitDataStart, x, Parallel, true, None, none);
        self.acc(ExitDataEnd, x, Parallel, true, None, none);
        self.acc(ComputeConstructEnd, r, Parallel, false, None, none);
    }

    fn flush_cupti(&mut self) {
        for r in std::mem::take(&mut self.pending) {
            self.put(r);
        }
    }
}

fn header() -> Header {
    Header {
        host: "gpu-node-17".into(),
        pid: THREAD,
        rank: None,
        command_line: vec!["./launch_storm".into(), "227000".into()],
        executable: "/opt/app/launch_storm".into(),
        start_unix_ns: 1_763_000_000_123_456_789,
        start_clock_ns: 81_234_567_890_123,
        clock: Clock::Monotonic,
        runtime: "GCC libgomp (acc_prof_register from LD_PRELOAD)".into(),
        collector: "accprof bench".into(),
        sources: Sources {
            acc_prof: SourceState::Active,
            cupti: SourceState::Active,
            hashing: HashMode::Sampled,
            coherence: false,
        },
        process_start_ns: None,
    }
}

/// Writes a launch-storm trace of at least `events` events to `path`;
/// returns the exact event count.
fn generate(path: &std::path::Path, events: u64) -> u64 {
    use AccEventKind::*;
    let file = std::fs::File::create(path).expect("create the trace file");
    let w = Writer::new(BufWriter::with_capacity(1 << 20, file), &header()).expect("header");
    let mut g = Gen {
        w,
        t: 81_234_600_000_000,
        region: 0,
        corr: 0,
        rng: 0x5eed_1234_9876_abcd,
        events: 0,
        pending: Vec::new(),
        queue: -2,
    };
    for (id, text) in [(10, "main$_omp_fn$0"), (11, "main$_omp_fn$1")] {
        g.put(Record::String {
            id: StringId(id),
            text: text.into(),
        });
    }
    // The module is not on this machine: sites stay addresses, as they do
    // when a trace is read away from its binary. One note says so.
    g.put(Record::Module(Module {
        id: ModuleId(1),
        path: "/opt/app/launch_storm".into(),
        build_id: vec![0xab; 20],
        base: 0,
        text_start: 0x401000,
        text_end: 0x409000,
    }));
    for (id, off) in [
        (1, 0x4012a3),
        (2, 0x401386),
        (3, 0x40144f),
        (4, 0x401520),
        (5, 0x401600),
    ] {
        g.put(Record::CallSite(CallSite {
            id: CallSiteId(id),
            module: ModuleId(1),
            return_offset: off,
        }));
    }
    g.put(Record::Device(Device {
        id: 0,
        name: "NVIDIA H200".into(),
        sm_count: 132,
        compute_capability: (9, 0),
        global_memory_bytes: 150_109_880_320,
    }));
    // `#pragma acc data copy(x) copyin(c)` around the loop.
    let data_bytes = 1 << 20;
    let d = g.new_region();
    let t = g.acc(
        EnterDataStart,
        d,
        ConstructKind::Data,
        false,
        Some(CallSiteId(1)),
        AccDetail::None,
    );
    g.copy(d, t, 0x2000_0000, data_bytes, true);
    g.copy(d, t + 1000, 0x2100_0000, data_bytes, true);
    g.acc(
        EnterDataEnd,
        d,
        ConstructKind::Data,
        false,
        None,
        AccDetail::None,
    );
    let iterations = events.saturating_sub(20) / EVENTS_PER_ITERATION + 1;
    for i in 0..iterations {
        // Half synchronous at one line, half on queue 1 at another.
        if i < iterations / 2 {
            g.compute(2, -2);
        } else {
            g.compute(3, 1);
        }
        if i % 1000 == 999 {
            g.queue = -2;
            let u = g.new_region();
            let t = g.acc(
                UpdateStart,
                u,
                ConstructKind::Update,
                false,
                Some(CallSiteId(4)),
                AccDetail::None,
            );
            g.copy(u, t, 0x2000_0000, 4096, false);
            g.acc(
                UpdateEnd,
                u,
                ConstructKind::Update,
                false,
                None,
                AccDetail::None,
            );
        }
        if i % CUPTI_BATCH == CUPTI_BATCH - 1 {
            g.flush_cupti();
        }
    }
    g.queue = -2;
    let x = g.new_region();
    let t = g.acc(
        ExitDataStart,
        x,
        ConstructKind::Data,
        false,
        Some(CallSiteId(5)),
        AccDetail::None,
    );
    g.copy(x, t, 0x2000_0000, data_bytes, false);
    g.acc(
        ExitDataEnd,
        x,
        ConstructKind::Data,
        false,
        None,
        AccDetail::None,
    );
    g.flush_cupti();
    g.put(Record::Dropped {
        source: DropSource::Cupti,
        count: 0,
    });
    let events = g.events;
    g.w.finish().expect("finish the trace");
    events
}

fn main() {
    let mut events: u64 = 10_000_000;
    let mut reps = 3;
    let mut keep: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--events" => {
                events = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--events N")
            }
            "--reps" => reps = args.next().and_then(|v| v.parse().ok()).expect("--reps N"),
            "--keep" => keep = args.next().map(PathBuf::from),
            // cargo bench passes --bench; criterion-style filters are ignored.
            _ => {}
        }
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = keep.unwrap_or_else(|| dir.path().join("storm.trace"));
    let t0 = Instant::now();
    let n = generate(&path, events);
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "generated {n} events ({size} bytes, {:.1} bytes/event) in {:.2} s: {}",
        size as f64 / n as f64,
        t0.elapsed().as_secs_f64(),
        path.display()
    );
    let opts = accprof_reports::text::TextOptions::default();
    let mut best = f64::INFINITY;
    for rep in 0..reps {
        let t = Instant::now();
        let run = accprof_analyzer::load_run(&path).expect("load");
        let t_load = t.elapsed().as_secs_f64();
        let summary = run.summary();
        let t_sum = t.elapsed().as_secs_f64() - t_load;
        let text = accprof_reports::text::render(&run, summary, &opts);
        let total = t.elapsed().as_secs_f64();
        std::hint::black_box(&text);
        best = best.min(total);
        println!(
            "rep {rep}: load {t_load:.3} s, summarize {t_sum:.3} s, total {total:.3} s, {:.2} M events/s",
            n as f64 / total / 1e6
        );
        if rep == 0 {
            print!("{}", String::from_utf8_lossy(&text));
        }
    }
    println!(
        "summary of {n} events: best {best:.3} s, {:.2} M events/s (one thread)",
        n as f64 / best / 1e6
    );
}
