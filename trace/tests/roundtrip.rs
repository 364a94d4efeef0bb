//! Every record variant and the header survive a write and a read, edge
//! values included.

#[path = "support/mix.rs"]
mod mix;

use accprof_trace::*;

fn all_none_event(kind: AccEventKind) -> AccEvent {
    AccEvent {
        time_ns: 0,
        kind,
        thread: 0,
        region: RegionId(0),
        device_type: None,
        device_number: None,
        async_queue: None,
        construct: None,
        implicit: false,
        location: SourceLocation::default(),
        call_site: None,
        detail: AccDetail::None,
    }
}

fn max_event(kind: AccEventKind) -> AccEvent {
    AccEvent {
        time_ns: u64::MAX,
        kind,
        thread: u32::MAX,
        region: RegionId(u64::MAX),
        device_type: Some(u32::MAX),
        device_number: Some(u32::MAX),
        async_queue: Some(i32::MIN),
        construct: Some(ConstructKind::Serial),
        implicit: true,
        location: SourceLocation {
            file: Some(StringId(u32::MAX)),
            function: Some(StringId(0)),
            line: Some(u32::MAX),
            end_line: Some(0),
            function_line: None,
            function_end_line: Some(u32::MAX),
        },
        call_site: Some(CallSiteId(u32::MAX)),
        detail: AccDetail::Data(DataInfo {
            var_name: Some(StringId(u32::MAX)),
            bytes: Some(u64::MAX),
            host_ptr: Some(u64::MAX),
            device_ptr: Some(0),
        }),
    }
}

/// Every variant, with minimum, maximum and awkward values.
fn edge_records() -> Vec<Record> {
    let mut v = vec![
        Record::String {
            id: StringId(0),
            text: String::new(),
        },
        Record::String {
            id: StringId(u32::MAX),
            text: "héllo, 世界 🚀 ∂x/∂t\0nul\ninside".into(),
        },
        Record::String {
            id: StringId(9),
            text: "long ".repeat(10_000),
        },
        Record::Module(Module {
            id: ModuleId(0),
            path: String::new(),
            build_id: Vec::new(),
            base: 0,
            text_start: 0,
            text_end: 0,
        }),
        Record::Module(Module {
            id: ModuleId(u32::MAX),
            path: "/opt/nvidia/hpc_sdk/Linux_x86_64/24.5/compilers/lib/libacccuda.so".into(),
            build_id: (0..=255).collect(),
            base: u64::MAX,
            text_start: u64::MAX - 1,
            text_end: u64::MAX,
        }),
        Record::CallSite(CallSite {
            id: CallSiteId(u32::MAX),
            module: ModuleId(u32::MAX),
            return_offset: u64::MAX,
        }),
        Record::CallSite(CallSite {
            id: CallSiteId(0),
            module: ModuleId(0),
            return_offset: 0,
        }),
        Record::Device(Device {
            id: u32::MAX,
            name: "NVIDIA H200 — ünïcode".into(),
            sm_count: u32::MAX,
            compute_capability: (u32::MAX, 0),
            global_memory_bytes: u64::MAX,
        }),
        Record::Device(Device {
            id: 0,
            name: String::new(),
            sm_count: 0,
            compute_capability: (0, u32::MAX),
            global_memory_bytes: 0,
        }),
    ];
    for kind in AccEventKind::ALL {
        v.push(Record::Acc(all_none_event(kind)));
        v.push(Record::Acc(max_event(kind)));
    }
    for construct in ConstructKind::ALL {
        let mut e = all_none_event(AccEventKind::ComputeConstructStart);
        e.construct = Some(construct);
        e.time_ns = 1 << 40;
        e.async_queue = Some(i32::MAX);
        v.push(Record::Acc(e));
    }
    // Launch detail, all present and all absent; data detail all absent;
    // each single location field alone.
    let mut e = all_none_event(AccEventKind::EnqueueLaunchStart);
    e.detail = AccDetail::Launch(LaunchInfo {
        kernel_name: Some(StringId(3)),
        num_gangs: Some(u64::MAX),
        num_workers: Some(0),
        vector_length: Some(128),
    });
    v.push(Record::Acc(e));
    e.detail = AccDetail::Launch(LaunchInfo::default());
    v.push(Record::Acc(e));
    e.detail = AccDetail::Data(DataInfo::default());
    v.push(Record::Acc(e));
    for i in 0..6 {
        let mut loc = SourceLocation::default();
        match i {
            0 => loc.file = Some(StringId(1)),
            1 => loc.function = Some(StringId(1)),
            2 => loc.line = Some(1),
            3 => loc.end_line = Some(1),
            4 => loc.function_line = Some(1),
            _ => loc.function_end_line = Some(1),
        }
        let mut e = all_none_event(AccEventKind::WaitStart);
        e.location = loc;
        e.thread = i;
        v.push(Record::Acc(e));
    }
    v.extend([
        Record::Kernel(KernelRecord {
            start_ns: u64::MAX,
            end_ns: 0, // before its start: kept as is
            name: StringId(u32::MAX),
            grid: [u32::MAX, 0, 1],
            block: [1024, 1, u32::MAX],
            registers: u32::MAX,
            static_shared_bytes: u32::MAX,
            dynamic_shared_bytes: 0,
            local_bytes_per_thread: u32::MAX,
            device: u32::MAX,
            context: u32::MAX,
            stream: u32::MAX,
            correlation: u32::MAX,
        }),
        Record::Kernel(KernelRecord {
            start_ns: 0,
            end_ns: u64::MAX,
            name: StringId(0),
            grid: [0; 3],
            block: [0; 3],
            registers: 0,
            static_shared_bytes: 0,
            dynamic_shared_bytes: 0,
            local_bytes_per_thread: 0,
            device: 0,
            context: 0,
            stream: 0,
            correlation: 0,
        }),
        Record::Memcpy(MemcpyRecord {
            start_ns: u64::MAX,
            end_ns: u64::MAX,
            bytes: u64::MAX,
            kind: CopyKind::PeerToPeer,
            src: MemoryKind::Managed,
            dst: MemoryKind::Array,
            device: u32::MAX,
            context: 0,
            stream: u32::MAX,
            correlation: 1,
        }),
        Record::Memset(MemsetRecord {
            start_ns: 5,
            end_ns: 4,
            bytes: u64::MAX,
            value: u32::MAX,
            memory: MemoryKind::Pinned,
            device: 0,
            context: u32::MAX,
            stream: 0,
            correlation: u32::MAX,
        }),
        Record::Memset(MemsetRecord {
            start_ns: 0,
            end_ns: 0,
            bytes: 0,
            value: 0,
            memory: MemoryKind::Unknown,
            device: 0,
            context: 0,
            stream: 0,
            correlation: 0,
        }),
    ]);
    for (i, api) in [
        DriverApi::Launch,
        DriverApi::CopyHostToDevice,
        DriverApi::CopyDeviceToHost,
        DriverApi::CopyOther,
        DriverApi::Memset,
        DriverApi::Other,
    ]
    .into_iter()
    .enumerate()
    {
        v.push(Record::DriverCall(DriverCall {
            time_ns: if i % 2 == 0 { u64::MAX } else { 0 },
            thread: if i < 3 { u32::MAX } else { 0 },
            region: RegionId(u64::MAX - i as u64),
            correlation: if i % 2 == 0 { 0 } else { u32::MAX },
            api,
            host_ptr: [None, Some(u64::MAX), Some(0)][i % 3],
            bytes: [Some(u64::MAX), None][i % 2],
        }));
    }
    // Every op with each of cbid and correlation absent (0) or present,
    // whether or not the collector would keep it for that op.
    for (i, op) in DriverOp::ALL.into_iter().enumerate() {
        for (j, (cbid, correlation)) in [(0, 0), (439, 0), (0, u32::MAX), (u32::MAX, 1)]
            .into_iter()
            .enumerate()
        {
            let start_ns = [u64::MAX, 0, 1 << 40][(i + j) % 3];
            v.push(Record::DriverSpan(DriverSpan {
                thread: if i < 5 { u32::MAX } else { j as u32 },
                start_ns,
                end_ns: start_ns.saturating_add([0, 1, 1 << 33][(i + j) % 3]),
                op,
                cbid,
                correlation,
            }));
        }
    }
    // Every kind, with and without a variable, confirmed or not, at the
    // edges of every field.
    for (i, kind) in CoherenceKind::ALL.into_iter().enumerate() {
        for j in 0..4u64 {
            let edge = [u64::MAX, 0, 1 << 47, 4095][((i as u64 + j) % 4) as usize];
            v.push(Record::Coherence(Coherence {
                kind,
                time_ns: edge,
                thread: [u32::MAX, 0][(j % 2) as usize],
                code_addr: edge.wrapping_add(1),
                host_addr: edge,
                range_start: edge.wrapping_sub(j),
                range_bytes: [0, 1, u64::MAX, 8 << 20][j as usize],
                variable: (j % 2 == 1).then_some(StringId([1, u32::MAX][i % 2])),
                construct: RegionId(edge.rotate_left(j as u32)),
                confirmed: j >= 2,
                // None, one, and as many as the format keeps.
                callers: (0..[0, 1, MAX_ACCESS_FRAMES, 2][j as usize])
                    .map(|n| Frame {
                        module: ModuleId([1, u32::MAX][n % 2]),
                        return_offset: edge.wrapping_add(n as u64),
                    })
                    .collect(),
            }));
        }
    }
    // A crash with and without its address and driver call, at the edges.
    for j in 0..4u64 {
        v.push(Record::Crash(Crash {
            time_ns: [u64::MAX, 0, 1 << 40, 7][j as usize],
            thread: [u32::MAX, 0][(j % 2) as usize],
            signal: [11, i32::MIN, i32::MAX, 0][j as usize],
            code: [1, -6, 0, i32::MIN][j as usize],
            address: (j % 2 == 0).then_some([0x1000, u64::MAX][(j / 2) as usize]),
            driver_call: (j >= 2).then(|| {
                (
                    "cuLaunchKernel".to_string(),
                    [u32::MAX, 0][(j % 2) as usize],
                )
            }),
        }));
    }
    for edge in [0, 1, u64::MAX, 1 << 47] {
        v.push(Record::OwnWork(OwnWork {
            thread: [u32::MAX, 0][(edge % 2) as usize],
            start_ns: edge,
            end_ns: edge.wrapping_add(12_345),
        }));
        v.push(Record::CheckSummary(CheckSummary {
            time_ns: edge,
            applied: edge % 2 == 1,
            ranges: edge.rotate_left(3),
            bytes: edge.wrapping_mul(3),
            faults: edge ^ 1,
            handler_ns: edge.wrapping_add(7),
            work_ns: edge >> 1,
        }));
    }
    for mode in [HashMode::Off, HashMode::Sampled, HashMode::Full] {
        for direction in [Direction::Upload, Direction::Download] {
            v.push(Record::Hash(BufferHash {
                time_ns: u64::MAX,
                region: RegionId(0),
                correlation: u32::MAX,
                direction,
                host_ptr: u64::MAX,
                bytes: 0,
                mode,
                hash: u64::MAX,
                hash_ns: [None, Some(u64::MAX - 1), Some(0)][v.len() % 3],
            }));
        }
    }
    v.push(Record::CallChain(CallChain {
        site: CallSiteId(u32::MAX),
        callers: vec![
            Frame {
                module: ModuleId(u32::MAX),
                return_offset: u64::MAX,
            };
            MAX_CALLERS
        ],
    }));
    v.push(Record::CallChain(CallChain {
        site: CallSiteId(0),
        callers: Vec::new(),
    }));
    for (i, cuda_aware) in [None, Some(false), Some(true)].into_iter().enumerate() {
        v.push(Record::MpiCall(MpiCall {
            start_ns: u64::MAX - i as u64,
            end_ns: i as u64,
            thread: u32::MAX,
            routine: StringId(u32::MAX),
            cuda_aware,
            ranges: (0..[0, 1, MAX_MPI_RANGES][i])
                .map(|k| MpiRange {
                    host_ptr: u64::MAX - k as u64,
                    bytes: k as u64,
                    write: k % 2 == 0,
                })
                .collect(),
            call_site: [None, Some(CallSiteId(0)), Some(CallSiteId(u32::MAX))][i],
        }));
    }
    for source in [
        DropSource::AccProf,
        DropSource::Cupti,
        DropSource::Collector,
    ] {
        v.push(Record::Dropped { source, count: 0 });
        v.push(Record::Dropped {
            source,
            count: u64::MAX,
        });
    }
    for level in [Level::Info, Level::Warning, Level::Error] {
        v.push(Record::Diagnostic {
            time_ns: u64::MAX,
            level,
            message: String::new(),
        });
        v.push(Record::Diagnostic {
            time_ns: 1,
            level,
            message: "CUPTI is held by another tool; kernels and copies are not recorded ⚠".into(),
        });
    }
    for how in [
        Ending::Exit(Some(0)),
        Ending::Exit(Some(-1)),
        Ending::Exit(None),
        Ending::QuickExit(255),
        Ending::Signal(13),
        Ending::Exec,
        Ending::RuntimeError(700),
        Ending::Exit(Some(i32::MIN)),
    ] {
        v.push(Record::End(EndRecord { time_ns: 7, how }));
        v.push(Record::End(EndRecord {
            time_ns: u64::MAX,
            how,
        }));
    }
    for phase in [ApiPhase::Start, ApiPhase::End] {
        v.push(Record::Api(ApiCall {
            time_ns: 0,
            thread: 0,
            region: RegionId(0),
            phase,
            routine: StringId(0),
            call_site: None,
            host_ptr: None,
            bytes: None,
            async_queue: None,
        }));
        v.push(Record::Api(ApiCall {
            time_ns: u64::MAX,
            thread: u32::MAX,
            region: RegionId(u64::MAX),
            phase,
            routine: StringId(u32::MAX),
            call_site: Some(CallSiteId(u32::MAX)),
            host_ptr: Some(u64::MAX),
            bytes: Some(0),
            async_queue: Some(i32::MIN),
        }));
        v.push(Record::Api(ApiCall {
            time_ns: 12,
            thread: 7,
            region: RegionId(3),
            phase,
            routine: StringId(2),
            call_site: None,
            host_ptr: Some(0x7fff_0000_1000),
            bytes: None,
            async_queue: Some(-1),
        }));
    }
    v
}

fn edge_headers() -> Vec<Header> {
    let full = mix::sample_header();
    let empty = Header {
        host: String::new(),
        pid: 0,
        rank: None,
        command_line: Vec::new(),
        executable: String::new(),
        start_unix_ns: 0,
        start_clock_ns: 0,
        clock: Clock::Other(255),
        runtime: String::new(),
        collector: String::new(),
        sources: Sources {
            acc_prof: SourceState::Inactive(String::new()),
            cupti: SourceState::Inactive("another CUPTI subscriber: 🔒".into()),
            hashing: HashMode::Off,
            coherence: false,
        },
        process_start_ns: None,
    };
    let max = Header {
        host: "nœud-ü".into(),
        pid: u32::MAX,
        rank: Some(u32::MAX),
        command_line: vec![String::new(); 3],
        executable: "x".repeat(5000),
        start_unix_ns: u64::MAX,
        start_clock_ns: u64::MAX,
        clock: Clock::Other(1),
        runtime: "unknown".into(),
        collector: "accprof".into(),
        sources: Sources {
            acc_prof: SourceState::Active,
            cupti: SourceState::Active,
            hashing: HashMode::Full,
            coherence: true,
        },
        process_start_ns: Some(u64::MAX),
    };
    vec![full, empty, max]
}

#[test]
fn every_variant_round_trips() {
    let recs = edge_records();
    for header in edge_headers() {
        let bytes = mix::write_all(&header, &recs);
        let t = read_trace(&bytes[..]).expect("reads");
        assert_eq!(t.version, (FORMAT_MAJOR, FORMAT_MINOR));
        assert_eq!(t.header, header);
        assert!(t.losses.is_empty(), "{:?}", t.losses);
        assert_eq!(t.skipped_unknown, 0);
        assert_eq!(t.records.len(), recs.len());
        for (i, (got, want)) in t.records.iter().zip(&recs).enumerate() {
            assert_eq!(got, want, "record {i}");
        }
    }
}

#[test]
fn every_variant_round_trips_alone_in_its_block() {
    // Each record as the first of a block: deltas from the zero state.
    let header = mix::sample_header();
    let recs = edge_records();
    let mut w = Writer::new(Vec::new(), &header).expect("header");
    for r in &recs {
        w.write(r).expect("write");
        w.flush().expect("flush");
    }
    let bytes = w.finish().expect("finish");
    let t = read_trace(&bytes[..]).expect("reads");
    assert!(t.losses.is_empty());
    assert_eq!(t.records, recs);
}

#[test]
fn big_traces_span_many_blocks() {
    let header = mix::sample_header();
    let recs = mix::records(mix::Flavor::Nvhpc, 8_000);
    let mut w = Writer::new(Vec::new(), &header).expect("header");
    for r in &recs {
        w.write(r).expect("write");
    }
    assert_eq!(w.records_written(), recs.len() as u64);
    let sealed = w.bytes_written();
    let bytes = w.finish().expect("finish");
    assert!(sealed > 3 * 64 * 1024, "blocks were sealed on the way");
    assert!(bytes.len() as u64 > sealed);

    let mut r = Reader::new(&bytes[..]).expect("reads");
    assert_eq!(r.header(), &header);
    assert_eq!(r.version(), (FORMAT_MAJOR, FORMAT_MINOR));
    let mut n = 0;
    for (got, want) in r.by_ref().zip(&recs) {
        assert_eq!(&got, want);
        n += 1;
    }
    assert_eq!(n, recs.len());
    assert!(r.next_record().is_none());
    assert!(r.losses().is_empty());
}

#[test]
fn flush_finish_and_counters() {
    let header = mix::sample_header();
    let mut w = Writer::new(Vec::new(), &header).expect("header");
    let after_header = w.bytes_written();
    // An empty flush writes nothing.
    w.flush().expect("flush");
    assert_eq!(w.bytes_written(), after_header);
    let rec = Record::Dropped {
        source: DropSource::Collector,
        count: 1,
    };
    w.write(&rec).expect("write");
    assert_eq!(w.records_written(), 1);
    assert_eq!(w.bytes_written(), after_header, "the block is still open");
    w.flush().expect("flush");
    assert!(w.bytes_written() > after_header);
    let bytes = w.finish().expect("finish");
    assert_eq!(read_trace(&bytes[..]).expect("reads").records, vec![rec]);
}

#[test]
fn dropping_a_writer_seals_its_open_block() {
    let header = mix::sample_header();
    let mut out = Vec::new();
    {
        let mut w = Writer::new(&mut out, &header).expect("header");
        w.write(&Record::Dropped {
            source: DropSource::Cupti,
            count: 7,
        })
        .expect("write");
    }
    assert_eq!(read_trace(&out[..]).expect("reads").records.len(), 1);
}

#[test]
fn read_file_reads_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.accprof");
    let recs = mix::records(mix::Flavor::Gcc, 100);
    std::fs::write(&path, mix::write_all(&mix::sample_header(), &recs)).expect("write");
    let t = read_file(&path).expect("reads");
    assert_eq!(t.records, recs);
    let missing = read_file(&dir.path().join("nope")).expect_err("missing file");
    assert!(matches!(missing, TraceError::Io(_)), "{missing}");
}

#[test]
fn oversized_records_are_refused_and_the_writer_goes_on() {
    let header = mix::sample_header();
    let mut w = Writer::new(Vec::new(), &header).expect("header");
    let small = Record::Dropped {
        source: DropSource::Cupti,
        count: 1,
    };
    w.write(&small).expect("write");
    let huge = Record::String {
        id: StringId(1),
        text: "x".repeat(17 << 20),
    };
    let err = w.write(&huge).expect_err("too large");
    assert!(matches!(err, TraceError::RecordTooLarge { .. }), "{err}");
    // A record just under the limit gets a block of its own.
    let big = Record::String {
        id: StringId(2),
        text: "y".repeat(15 << 20),
    };
    w.write(&big).expect("write big");
    w.write(&small).expect("write");
    let bytes = w.finish().expect("finish");
    let t = read_trace(&bytes[..]).expect("reads");
    assert!(t.losses.is_empty());
    assert_eq!(t.records, vec![small.clone(), big, small]);
}

/// Traces recorded before format 1.4 end their header before the process
/// start: it reads as unknown, and the fields of 1.3 as they were.
#[test]
fn older_headers_read_without_a_process_start() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/h100");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("the H100 fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "trace") {
            continue;
        }
        let file = std::fs::File::open(&path).expect("opens");
        let r = Reader::new(std::io::BufReader::new(file)).expect("header reads");
        let (major, minor) = r.version();
        assert_eq!(major, FORMAT_MAJOR, "{}", path.display());
        assert!(minor < 4, "{} is format 1.{minor}", path.display());
        assert_eq!(r.header().process_start_ns, None, "{}", path.display());
        assert!(r.header().start_clock_ns > 0, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 10, "only {seen} H100 fixtures");
}

/// A 1.4 header without a process start writes a 0 flag, one with it the
/// value; both come back, and the one with it is the longer.
#[test]
fn the_process_start_round_trips() {
    let mut header = mix::sample_header();
    let mut sizes = Vec::new();
    for start in [None, Some(0), Some(81_234_000_000_000)] {
        header.process_start_ns = start;
        let bytes = mix::write_all(&header, &[]);
        let t = read_trace(&bytes[..]).expect("reads");
        assert_eq!(t.header.process_start_ns, start);
        assert_eq!(t.header, header);
        sizes.push(bytes.len());
    }
    assert!(sizes[0] < sizes[1] && sizes[1] < sizes[2], "{sizes:?}");
}
