//! Hand-written traces: a header, the records of OpenACC events, CUPTI
//! kernels and copies and the driver calls that join them, as the
//! collector writes them, then the model built from them or the trace
//! written to a file. Every event is in `app.c`, function `main`, where it
//! has a line.

use std::path::Path;

use accprof_trace::{
    AccDetail, AccEvent, AccEventKind, Clock, ConstructKind, CopyKind, DriverApi, DriverCall,
    HashMode, Header, KernelRecord, MemcpyRecord, MemoryKind, Record, RegionId, SourceLocation,
    SourceState, Sources, StringId, Trace, Writer, FORMAT_MAJOR, FORMAT_MINOR,
};

use crate::builder;
use crate::model::Run;
use crate::symbolize::Symbolizer;

/// The interned strings of [`names`].
pub const FILE: StringId = StringId(1);
pub const FUNCTION: StringId = StringId(2);
pub const KERNEL: StringId = StringId(3);

/// A run of `./app` on `node-1` under GCC's libgomp, acc_prof and CUPTI
/// recording, hashing off; change the fields a test is about.
pub fn header() -> Header {
    Header {
        host: "node-1".into(),
        pid: 4242,
        rank: None,
        command_line: vec!["./app".into()],
        executable: "/nonexistent/app".into(),
        start_unix_ns: 1_763_000_000_000_000_000,
        start_clock_ns: 1_000,
        clock: Clock::Monotonic,
        runtime: "libgomp (GCC 12.2.0)".into(),
        collector: "accprof test".into(),
        sources: Sources {
            acc_prof: SourceState::Active,
            cupti: SourceState::Active,
            hashing: HashMode::Off,
            coherence: false,
        },
        process_start_ns: None,
    }
}

/// The strings the other records name: `app.c`, `main`, the kernel `kern`.
pub fn names() -> Vec<Record> {
    [(FILE, "app.c"), (FUNCTION, "main"), (KERNEL, "kern")]
        .into_iter()
        .map(|(id, text)| Record::String {
            id,
            text: text.into(),
        })
        .collect()
}

/// An event of `region` on `thread`: a `parallel` construct on an NVIDIA
/// device, at `line` of `app.c` in `main` (no location without a line).
pub fn acc_event(
    time_ns: u64,
    kind: AccEventKind,
    thread: u32,
    region: u64,
    line: Option<u32>,
) -> AccEvent {
    AccEvent {
        time_ns,
        kind,
        thread,
        region: RegionId(region),
        device_type: Some(5),
        device_number: Some(0),
        async_queue: None,
        construct: Some(ConstructKind::Parallel),
        implicit: false,
        location: SourceLocation {
            file: line.map(|_| FILE),
            function: line.map(|_| FUNCTION),
            line,
            ..SourceLocation::default()
        },
        call_site: None,
        detail: AccDetail::None,
    }
}

/// CUPTI's record of a copy between pageable host memory and the device.
pub fn memcpy(start_ns: u64, end_ns: u64, bytes: u64, kind: CopyKind, correlation: u32) -> Record {
    let (src, dst) = match kind {
        CopyKind::DeviceToHost => (MemoryKind::Device, MemoryKind::Pageable),
        _ => (MemoryKind::Pageable, MemoryKind::Device),
    };
    Record::Memcpy(MemcpyRecord {
        start_ns,
        end_ns,
        bytes,
        kind,
        src,
        dst,
        device: 0,
        context: 1,
        stream: 1,
        correlation,
    })
}

/// CUPTI's record of a kernel `kern` of 4 blocks of 128 threads.
pub fn kernel(start_ns: u64, end_ns: u64, correlation: u32) -> Record {
    Record::Kernel(KernelRecord {
        start_ns,
        end_ns,
        name: KERNEL,
        grid: [4, 1, 1],
        block: [128, 1, 1],
        registers: 32,
        static_shared_bytes: 0,
        dynamic_shared_bytes: 0,
        local_bytes_per_thread: 0,
        device: 0,
        context: 1,
        stream: 1,
        correlation,
    })
}

/// The driver call on thread 1, inside `region`, that CUPTI's record with
/// `correlation` belongs to.
pub fn driver_call(
    time_ns: u64,
    region: u64,
    correlation: u32,
    api: DriverApi,
    host_ptr: Option<u64>,
    bytes: Option<u64>,
) -> Record {
    Record::DriverCall(DriverCall {
        time_ns,
        thread: 1,
        region: RegionId(region),
        correlation,
        api,
        host_ptr,
        bytes,
    })
}

/// The model of a trace of `records` under `header`, read as `accprof`
/// reads it (no binaries: call sites stay addresses).
pub fn build(header: Header, records: Vec<Record>) -> Run {
    let trace = Trace {
        version: (FORMAT_MAJOR, FORMAT_MINOR),
        header,
        records,
        losses: Vec::new(),
        skipped_unknown: 0,
    };
    builder::build(trace, &mut Symbolizer::new())
}

/// Writes a trace file of `records` under `header`, as the collector would.
pub fn write_trace(path: &Path, header: &Header, records: &[Record]) {
    let mut w = Writer::new(Vec::new(), header).expect("header");
    for r in records {
        w.write(r).expect("write");
    }
    std::fs::write(path, w.finish().expect("finish")).expect("write file");
}

/// Writes records on a clock: each event 100 ns after the one before.
pub struct TraceBuilder {
    pub records: Vec<Record>,
    /// The clock, in ns.
    pub t: u64,
}

impl Default for TraceBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl TraceBuilder {
    /// A trace that starts with [`names`], at 1000 ns.
    pub fn new() -> TraceBuilder {
        TraceBuilder {
            records: names(),
            t: 1000,
        }
    }

    /// An event of `region` on `thread`, construct `construct`, at `line`.
    pub fn ev(
        &mut self,
        kind: AccEventKind,
        thread: u32,
        region: u64,
        construct: ConstructKind,
        line: Option<u32>,
    ) {
        self.t += 100;
        let mut e = acc_event(self.t, kind, thread, region, line);
        e.construct = Some(construct);
        self.records.push(Record::Acc(e));
    }

    /// A construct (start and end) at `line`.
    pub fn construct(
        &mut self,
        start: AccEventKind,
        thread: u32,
        region: u64,
        kind: ConstructKind,
        line: u32,
    ) {
        let end = AccEventKind::from_raw(start as i64 + 1).expect("end event");
        self.ev(start, thread, region, kind, Some(line));
        self.ev(end, thread, region, kind, Some(line));
    }

    /// A copy of `bytes` from host buffer 0x1000 the device made for `region`.
    pub fn copy(&mut self, region: u64, corr: u32, kind: CopyKind, bytes: u64) {
        self.records.push(driver_call(
            self.t,
            region,
            corr,
            DriverApi::CopyOther,
            Some(0x1000),
            Some(bytes),
        ));
        self.records
            .push(memcpy(self.t, self.t + 50, bytes, kind, corr));
    }

    /// A compute construct at `line` whose kernel ran `ns` on the device.
    pub fn compute(&mut self, region: u64, corr: u32, line: u32, ns: u64) {
        use AccEventKind::{ComputeConstructEnd, ComputeConstructStart};
        self.ev(
            ComputeConstructStart,
            1,
            region,
            ConstructKind::Parallel,
            Some(line),
        );
        self.records.push(driver_call(
            self.t,
            region,
            corr,
            DriverApi::Launch,
            None,
            None,
        ));
        self.records.push(kernel(self.t, self.t + ns, corr));
        self.ev(
            ComputeConstructEnd,
            1,
            region,
            ConstructKind::Parallel,
            Some(line),
        );
    }

    /// The model of these records under `header`.
    pub fn build(self, header: Header) -> Run {
        build(header, self.records)
    }
}
