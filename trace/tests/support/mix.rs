//! A realistic record mix, shared by the size-budget test and the codec
//! benchmark (included with `#[path]`).
//!
//! One tiny OpenACC compute construct as the collector sees it: 17 acc_prof
//! events (compute construct, implicit enter/exit data, alloc/create/upload
//! of two arrays, the launch, delete/free), 1 kernel and 2 memcpy records from
//! CUPTI, 3 driver calls tying CUPTI correlation ids to the construct, and 2
//! buffer hashes. Times move forward by 100..3000 ns per event.

#![allow(dead_code)]

use accprof_trace::*;

/// Which runtime the events look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// GCC libgomp: no source locations or variable names; call sites found
    /// by the collector instead.
    Gcc,
    /// NVHPC: file, function, lines and variable names filled in.
    Nvhpc,
}

/// Records per construct that are events (everything but definitions).
pub const EVENTS_PER_CONSTRUCT: usize = 25;

/// A small deterministic generator (xorshift64*), so runs are comparable.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

pub fn sample_header() -> Header {
    Header {
        host: "gpu-node-17".into(),
        pid: 48_213,
        rank: Some(3),
        command_line: vec!["./laplace".into(), "4096".into(), "4096".into()],
        executable: "/home/user/laplace/laplace".into(),
        start_unix_ns: 1_763_000_000_123_456_789,
        start_clock_ns: 81_234_567_890_123,
        clock: Clock::Monotonic,
        runtime: "libgomp (GCC 12.2.0)".into(),
        collector: "accprof 0.1.0".into(),
        sources: Sources {
            acc_prof: SourceState::Active,
            cupti: SourceState::Active,
            hashing: HashMode::Sampled,
            coherence: false,
        },
        process_start_ns: Some(999_000),
    }
}

/// The definitions a trace starts with (strings, module, call sites, device).
pub fn definitions() -> Vec<Record> {
    let mut v = Vec::new();
    for (i, s) in [
        "laplace2d.c",
        "main",
        "A",
        "Anew",
        "main$_omp_fn$0",
        "main$_omp_fn$1",
    ]
    .iter()
    .enumerate()
    {
        v.push(Record::String {
            id: StringId(i as u32 + 1),
            text: (*s).into(),
        });
    }
    v.push(Record::Module(Module {
        id: ModuleId(1),
        path: "/home/user/laplace/laplace".into(),
        build_id: vec![0x5a; 20],
        base: 0x5555_5555_4000,
        text_start: 0x1000,
        text_end: 0x9000,
    }));
    for i in 0..4u32 {
        v.push(Record::CallSite(CallSite {
            id: CallSiteId(i + 1),
            module: ModuleId(1),
            return_offset: 0x1a40 + u64::from(i) * 0x60,
        }));
    }
    v.push(Record::CallChain(CallChain {
        site: CallSiteId(2),
        callers: vec![
            Frame {
                module: ModuleId(1),
                return_offset: 0x2210,
            },
            Frame {
                module: ModuleId(1),
                return_offset: 0x2c04,
            },
        ],
    }));
    v.push(Record::Device(Device {
        id: 0,
        name: "NVIDIA H200".into(),
        sm_count: 132,
        compute_capability: (9, 0),
        global_memory_bytes: 150_000_000_000,
    }));
    v
}

/// Generates the records of consecutive constructs.
pub struct Mix {
    rng: Rng,
    flavor: Flavor,
    t: u64,
    construct: u64,
    correlation: u32,
    thread: u32,
}

impl Mix {
    pub fn new(flavor: Flavor, seed: u64) -> Self {
        Mix {
            rng: Rng::new(seed),
            flavor,
            t: 81_234_600_000_000,
            construct: 0,
            correlation: 1000,
            thread: 48_213,
        }
    }

    fn tick(&mut self) -> u64 {
        self.t += self.rng.range(100, 3000);
        self.t
    }

    /// Appends the 25 records of the next construct to `out`.
    pub fn construct(&mut self, out: &mut Vec<Record>) {
        use AccEventKind::*;
        let i = self.construct;
        self.construct += 1;
        let region = RegionId(i + 1);
        let nv = self.flavor == Flavor::Nvhpc;
        // Host arrays move a little between constructs (as reallocated
        // temporaries do); device memory comes from the runtime's pool.
        let host_a = 0x7f12_3456_7000 + i * 64;
        let host_b = 0x7f12_3c00_0000 + i * 64;
        let dev_a = 0x7f0a_2000_0000 + (i % 8) * 0x10_0000;
        let dev_b = 0x7f0a_4000_0000 + (i % 8) * 0x10_0000;
        let n = [1024u64, 4096, 65_536, 1 << 20][(i % 4) as usize];
        let bytes = n * 8;
        let gangs = n.div_ceil(128);
        let location = if nv {
            let line = 40 + (i % 6) as u32 * 7;
            SourceLocation {
                file: Some(StringId(1)),
                function: Some(StringId(2)),
                line: Some(line),
                end_line: Some(line + 5),
                function_line: Some(12),
                function_end_line: Some(120),
            }
        } else {
            SourceLocation::default()
        };
        let call_site = if nv {
            None
        } else {
            Some(CallSiteId((i % 4) as u32 + 1))
        };
        let var = |id: u32| if nv { Some(StringId(id)) } else { None };
        let data = |var_name, host: Option<u64>, dev: Option<u64>| {
            AccDetail::Data(DataInfo {
                var_name,
                bytes: Some(bytes),
                host_ptr: host,
                device_ptr: dev,
            })
        };
        let launch = AccDetail::Launch(LaunchInfo {
            kernel_name: Some(StringId(5 + (i % 2) as u32)),
            num_gangs: Some(gangs),
            num_workers: Some(1),
            vector_length: Some(128),
        });
        let plan: [(AccEventKind, bool, AccDetail); 17] = [
            (ComputeConstructStart, false, AccDetail::None),
            (EnterDataStart, true, AccDetail::None),
            (Alloc, true, data(var(3), None, Some(dev_a))),
            (Create, true, data(var(3), Some(host_a), Some(dev_a))),
            (
                EnqueueUploadStart,
                true,
                data(var(3), Some(host_a), Some(dev_a)),
            ),
            (
                EnqueueUploadEnd,
                true,
                data(var(3), Some(host_a), Some(dev_a)),
            ),
            (Alloc, true, data(var(4), None, Some(dev_b))),
            (Create, true, data(var(4), Some(host_b), Some(dev_b))),
            (EnterDataEnd, true, AccDetail::None),
            (EnqueueLaunchStart, false, launch),
            (EnqueueLaunchEnd, false, launch),
            (ExitDataStart, true, AccDetail::None),
            (Delete, true, data(var(3), Some(host_a), Some(dev_a))),
            (Free, true, data(var(3), None, Some(dev_a))),
            (Delete, true, data(var(4), Some(host_b), Some(dev_b))),
            (Free, true, data(var(4), None, Some(dev_b))),
            (ComputeConstructEnd, false, AccDetail::None),
        ];
        let corr0 = self.correlation;
        self.correlation += 3;
        for (k, (kind, implicit, detail)) in plan.into_iter().enumerate() {
            let time_ns = self.tick();
            out.push(Record::Acc(AccEvent {
                time_ns,
                kind,
                thread: self.thread,
                region,
                device_type: Some(5),
                device_number: Some(0),
                async_queue: Some(-2),
                construct: Some(if implicit {
                    if k < 9 {
                        ConstructKind::EnterData
                    } else {
                        ConstructKind::ExitData
                    }
                } else {
                    ConstructKind::Parallel
                }),
                implicit,
                location,
                call_site,
                detail,
            }));
            match kind {
                EnqueueUploadStart => {
                    out.push(Record::Hash(BufferHash {
                        time_ns: time_ns + 40,
                        region,
                        correlation: corr0,
                        direction: Direction::Upload,
                        host_ptr: host_a,
                        bytes,
                        mode: HashMode::Sampled,
                        hash: self.rng.next(),
                        hash_ns: Some(1_500),
                    }));
                    out.push(Record::DriverCall(DriverCall {
                        time_ns: time_ns + 300,
                        thread: self.thread,
                        region,
                        correlation: corr0,
                        api: DriverApi::CopyHostToDevice,
                        host_ptr: Some(host_a),
                        bytes: Some(bytes),
                    }));
                }
                EnqueueLaunchStart => out.push(Record::DriverCall(DriverCall {
                    time_ns: time_ns + 500,
                    thread: self.thread,
                    region,
                    correlation: corr0 + 1,
                    api: DriverApi::Launch,
                    host_ptr: None,
                    bytes: None,
                })),
                Delete if k == 12 => {
                    // copyout of A before its delete.
                    out.push(Record::DriverCall(DriverCall {
                        time_ns: time_ns + 200,
                        thread: self.thread,
                        region,
                        correlation: corr0 + 2,
                        api: DriverApi::CopyDeviceToHost,
                        host_ptr: Some(host_a),
                        bytes: Some(bytes),
                    }));
                    out.push(Record::Hash(BufferHash {
                        time_ns: time_ns + 2500,
                        region,
                        correlation: corr0 + 2,
                        direction: Direction::Download,
                        host_ptr: host_a,
                        bytes,
                        mode: HashMode::Sampled,
                        hash: self.rng.next(),
                        hash_ns: None,
                    }));
                }
                _ => {}
            }
        }
        // CUPTI records arrive later, in buffers, for the work above.
        let end = self.t;
        let h2d_start = end - self.rng.range(20_000, 30_000);
        let h2d_dur = self.rng.range(1_000, 3_000);
        out.push(Record::Memcpy(MemcpyRecord {
            start_ns: h2d_start,
            end_ns: h2d_start + h2d_dur,
            bytes,
            kind: CopyKind::HostToDevice,
            src: MemoryKind::Pageable,
            dst: MemoryKind::Device,
            device: 0,
            context: 1,
            stream: 7,
            correlation: corr0,
        }));
        let k_start = h2d_start + h2d_dur + self.rng.range(2_000, 6_000);
        let k_dur = self.rng.range(3_000, 12_000);
        out.push(Record::Kernel(KernelRecord {
            start_ns: k_start,
            end_ns: k_start + k_dur,
            name: StringId(5 + (i % 2) as u32),
            grid: [gangs as u32, 1, 1],
            block: [128, 1, 1],
            registers: 32,
            static_shared_bytes: 0,
            dynamic_shared_bytes: 0,
            local_bytes_per_thread: 0,
            device: 0,
            context: 1,
            stream: 7,
            correlation: corr0 + 1,
        }));
        let d2h_start = k_start + k_dur + self.rng.range(500, 2_000);
        out.push(Record::Memcpy(MemcpyRecord {
            start_ns: d2h_start,
            end_ns: d2h_start + self.rng.range(1_000, 3_000),
            bytes,
            kind: CopyKind::DeviceToHost,
            src: MemoryKind::Device,
            dst: MemoryKind::Pageable,
            device: 0,
            context: 1,
            stream: 7,
            correlation: corr0 + 2,
        }));
    }
}

/// Definitions, then `constructs` constructs of events.
pub fn records(flavor: Flavor, constructs: usize) -> Vec<Record> {
    let mut v = definitions();
    v.reserve(constructs * EVENTS_PER_CONSTRUCT);
    let mut mix = Mix::new(flavor, 0x5eed);
    for _ in 0..constructs {
        mix.construct(&mut v);
    }
    v
}

/// How many of `recs` are events (not definitions).
pub fn event_count(recs: &[Record]) -> usize {
    recs.iter()
        .filter(|r| {
            matches!(
                r,
                Record::Acc(_)
                    | Record::Kernel(_)
                    | Record::Memcpy(_)
                    | Record::Memset(_)
                    | Record::DriverCall(_)
                    | Record::Hash(_)
            )
        })
        .count()
}

/// Writes `recs` after `header` into memory.
pub fn write_all(header: &Header, recs: &[Record]) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), header).expect("header");
    for r in recs {
        w.write(r).expect("write");
    }
    w.finish().expect("finish")
}
