//! The tables of `accprof export` and `accprof report --csv/--json`: one
//! table per kind of entity, each a pure function of the analyzer's model
//! (or, for the summary and the ranks, of its summaries), written row by
//! row as CSV or JSON.
//!
//! Ids join across tables: a kernel, transfer or allocation row names its
//! `construct_id`; a construct row its `parent_id`. Ids are those of the
//! model ([`accprof_analyzer::ConstructId::number`]), the same every time
//! the same trace is read; with several traces (MPI ranks) they are per
//! trace, and `(rank, construct_id)` is the key. Times (`*_us`) are in
//! microseconds; points in time (`start_us`, `end_us`) count from the
//! trace's first event.

use std::io::{self, Write};

use accprof_analyzer::findings::Analysis;
use accprof_analyzer::summary::{MergedSummary, Reached, Stats, Summary};
use accprof_analyzer::vocabulary::{CoherenceKind, MemoryKind};
use accprof_analyzer::{ConstructClass, KernelSource, Run, TransferSource};

use crate::table::{col, json_str, Cell, Column, CsvSink, Dtype, JsonRows, RowSink};

/// Version of the JSON documents' layout; raised when a column changes
/// meaning or goes away (new columns do not raise it).
pub const SCHEMA_VERSION: u32 = 1;

/// The tables, as `--what` names them (the CLI takes its values from
/// [`What::ALL`], [`What::name`] and [`What::about`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    Summary,
    Constructs,
    Kernels,
    Transfers,
    Allocations,
    Findings,
    Ranks,
    Ledger,
    Coherence,
}

impl What {
    pub const ALL: [What; 9] = [
        What::Summary,
        What::Constructs,
        What::Kernels,
        What::Transfers,
        What::Allocations,
        What::Findings,
        What::Ranks,
        What::Ledger,
        What::Coherence,
    ];

    pub fn name(self) -> &'static str {
        match self {
            What::Summary => "summary",
            What::Constructs => "constructs",
            What::Kernels => "kernels",
            What::Transfers => "transfers",
            What::Allocations => "allocations",
            What::Findings => "findings",
            What::Ranks => "ranks",
            What::Ledger => "ledger",
            What::Coherence => "coherence",
        }
    }

    /// What the table holds, where its name does not say (`--what`'s
    /// help).
    pub fn about(self) -> Option<&'static str> {
        match self {
            What::Ledger => Some("Where the wall time went, per host thread (and rank)"),
            What::Coherence => {
                Some("The host accesses `run --check coherence` caught (C1, C2, C3)")
            }
            _ => None,
        }
    }

    /// The table's columns, documented.
    pub fn columns(self) -> &'static [Column] {
        match self {
            What::Summary => SUMMARY,
            What::Constructs => CONSTRUCTS,
            What::Kernels => KERNELS,
            What::Transfers => TRANSFERS,
            What::Allocations => ALLOCATIONS,
            What::Findings => FINDINGS,
            What::Ranks => RANKS,
            What::Ledger => LEDGER,
            What::Coherence => COHERENCE,
        }
    }

    /// Tables that read only the summaries (no model needed).
    pub fn summary_only(self) -> bool {
        matches!(self, What::Summary | What::Ranks | What::Ledger)
    }
}

/// One trace's model, its rank and (for the findings table) its analysis.
pub struct RunInput<'a> {
    pub rank: u32,
    pub run: &'a Run,
    pub analysis: Option<&'a Analysis>,
}

/// What the tables are made of: the summaries of all traces merged
/// (`accprof_analyzer::summary::merge`, also for one trace), and the
/// models when the entity tables are asked for.
pub struct Input<'a> {
    pub merged: &'a MergedSummary,
    pub runs: &'a [RunInput<'a>],
}

use Dtype::{Bool, Float, Int, OptInt, Str};

const SUMMARY: &[Column] = &[
    col("file", Str, "source file"),
    col("function", Str, "function"),
    col("line", OptInt, "source line (empty: no line information)"),
    col("entry", Str, "what the row counts: compute region, data region, enter data directive, exit data directive, update directive, wait directive, api call, kernel, or a transfer kind (copyin, copyout, device_to_device, ...)"),
    col("name", Str, "kernel name, API routine, or the variables a transfer row moved (space-separated)"),
    col("grid", Str, "kernel grid as x,y,z"),
    col("block", Str, "kernel block as x,y,z"),
    col("count", Int, "regions reached, calls, kernel launches or transfers"),
    col("time_us", Float, "total time: host time for constructs and calls, device time for kernels and transfers (host time of the launch or enqueue without CUPTI, see timed_on)"),
    col("min_time_us", Float, "shortest one"),
    col("max_time_us", Float, "longest one"),
    col("avg_time_us", Float, "mean"),
    col("bytes", OptInt, "bytes moved (transfer rows)"),
    col("timed_on", Str, "device (CUPTI) or host"),
    col("line_host_time_us", Float, "host time of the line's top-level constructs"),
    col("max_rank", OptInt, "several traces: the rank where the line costs most (only lines with a spread)"),
    col("max_rank_time_us", Float, "several traces: the line's cost on that rank"),
    col("imbalance", Float, "several traces: the line's max / mean cost over ranks (1.0 = even)"),
];

const CONSTRUCTS: &[Column] = &[
    col(
        "rank",
        Int,
        "MPI rank (or the trace's position among the inputs)",
    ),
    col("construct_id", Int, "the construct's id in its trace"),
    col("parent_id", OptInt, "the enclosing construct's id"),
    col(
        "class",
        Str,
        "compute, enter_data, exit_data, update, wait, api_call",
    ),
    col(
        "kind",
        Str,
        "the construct as the runtime named it (parallel, kernels, data, ...) or the API routine",
    ),
    col(
        "implicit",
        Bool,
        "made implicitly by the runtime (the data part of a compute construct)",
    ),
    col("file", Str, "source file of the line it is reported at"),
    col("function", Str, "function"),
    col("line", OptInt, "source line"),
    col("thread", Int, "host thread (the collector's number)"),
    col("start_us", Float, "start, from the trace's first event"),
    col("end_us", Float, "end (empty: no end event)"),
    col("host_time_us", Float, "end - start"),
    col(
        "async_queue",
        OptInt,
        "async queue as the runtime gave it: -2 synchronous (acc_async_sync), -1 acc_async_noval, 0 or more a queue; empty: not reported",
    ),
    col("device", OptInt, "device number"),
    col("kernels", Int, "kernels it launched"),
    col("transfers", Int, "transfers it made"),
    col("allocations", Int, "device allocations it made"),
    col("cut", Bool, "no end event came"),
];

const COHERENCE: &[Column] = &[
    col("rank", Int, "MPI rank"),
    col("access_id", Int, "the host access's id in its trace"),
    col(
        "kind",
        Str,
        "stale_read (C1: the host read its copy while the device's was newer), lost_write (C2: the host wrote its copy and the device went on with its own), unread_download (C3: a download the host never read before the next one)",
    ),
    col("time_us", Float, "when the host made the access (C3: when the download ended), from the trace's first event"),
    col("thread", Int, "host thread that made the access (C3: that downloaded)"),
    col("variable", Str, "the array's name, when the runtime or the binary gave one"),
    col("range_start", Int, "host address of the mapped range the access fell in"),
    col("range_bytes", Int, "size of that range"),
    col("host_addr", OptInt, "host address the instruction touched (empty for C3)"),
    col("offset", OptInt, "host_addr - range_start (empty for C3)"),
    col(
        "confirmed",
        Bool,
        "C1, C2: the device copy was read and differs from the host bytes (false: it could not be read); C3: true",
    ),
    col(
        "construct_id",
        OptInt,
        "the construct that made the device copy newer (C1), used it (C2) or downloaded (C3), when the trace names it",
    ),
    col("file", Str, "source file of the instruction that made the access (C3: of the download's construct)"),
    col("function", Str, "function"),
    col("line", OptInt, "source line"),
];

const KERNELS: &[Column] = &[
    col("rank", Int, "MPI rank"),
    col("kernel_id", Int, "the kernel's id in its trace"),
    col("construct_id", OptInt, "the construct that launched it"),
    col("name", Str, "kernel name"),
    col("file", Str, "source file of the construct's line"),
    col("function", Str, "function"),
    col("line", OptInt, "source line"),
    col("grid_x", Int, "grid"),
    col("grid_y", Int, "grid"),
    col("grid_z", Int, "grid"),
    col("block_x", Int, "block"),
    col("block_y", Int, "block"),
    col("block_z", Int, "block"),
    col("registers", Int, "registers per thread"),
    col(
        "shared_bytes",
        Int,
        "static + dynamic shared memory per block",
    ),
    col("start_us", Float, "start, from the trace's first event"),
    col("end_us", Float, "end"),
    col(
        "device_time_us",
        Float,
        "end - start (device time with CUPTI, see timed_on)",
    ),
    col("device", Int, "device number"),
    col("stream", Int, "stream"),
    col(
        "timed_on",
        Str,
        "device (CUPTI kernel record) or host (the runtime's launch event)",
    ),
];

const TRANSFERS: &[Column] = &[
    col("rank", Int, "MPI rank"),
    col("transfer_id", Int, "the transfer's id in its trace"),
    col("construct_id", OptInt, "the construct that made it"),
    col("kind", Str, "copyin (host to device), copyout (device to host), device_to_device, host_to_host, peer_to_peer, other"),
    col("variable", Str, "variable name, when known"),
    col("bytes", Int, "bytes moved"),
    col("start_us", Float, "start, from the trace's first event"),
    col("end_us", Float, "end"),
    col("time_us", Float, "end - start"),
    col("bandwidth_gb_per_s", Float, "bytes / time in GB/s (1e9 bytes); empty for a zero time"),
    col("src_memory", Str, "pageable, pinned, device, array, managed, unknown"),
    col("dst_memory", Str, "same for the destination"),
    col("device", OptInt, "device (CUPTI)"),
    col("stream", OptInt, "stream (CUPTI)"),
    col("timed_on", Str, "device (CUPTI memcpy record) or host (the runtime's enqueue events)"),
    col("file", Str, "source file of the construct's line"),
    col("function", Str, "function"),
    col("line", OptInt, "source line"),
];

const ALLOCATIONS: &[Column] = &[
    col("rank", Int, "MPI rank"),
    col("alloc_id", Int, "the allocation's id in its trace"),
    col("construct_id", OptInt, "the construct that made it"),
    col("variable", Str, "variable name, when known"),
    col("bytes", Int, "bytes allocated"),
    col(
        "alloc_us",
        Float,
        "allocated at, from the trace's first event",
    ),
    col("free_us", Float, "freed at (empty: never freed)"),
    col("file", Str, "source file of the construct's line"),
    col("function", Str, "function"),
    col("line", OptInt, "source line"),
];

const FINDINGS: &[Column] = &[
    col("rank", Int, "MPI rank"),
    col(
        "finding",
        Int,
        "its number in `accprof analyze` (ranked by cost)",
    ),
    col("rule", Str, "rule id (D1, L3, ...)"),
    col(
        "category",
        Str,
        "data_movement, allocation, memory, synchronization, launch",
    ),
    col("confidence", Str, "certain or likely"),
    col("title", Str, "what was found"),
    col("cost_time_us", Float, "time it costs"),
    col("saving_time_us", Float, "time the proposal would save"),
    col("file", Str, "source file of its first location"),
    col("function", Str, "function"),
    col("line", OptInt, "source line"),
    col("variable", Str, "variable, when the finding is about one"),
    col("proposal", Str, "what to change"),
    col("directive", Str, "the directive to add or change"),
    col("kernels", Int, "kernels it is about"),
    col("transfers", Int, "transfers it is about"),
];

const LEDGER: &[Column] = &[
    col(
        "rank",
        OptInt,
        "MPI rank, or the trace's position among the inputs when the launcher gave none",
    ),
    col("thread", Int, "OS thread id of the host thread"),
    col(
        "part",
        Str,
        "program (the program's own host code), constructs (inside OpenACC constructs), collector_outside (the coherence check's own work outside constructs), mpi, cuda_outside (CUDA driver calls outside constructs); inside constructs: allocation, transfer, launch, wait, startup, other_driver (CUDA driver calls), collector (accprof's own work: hashing buffers, the coherence check), runtime (the runtime's own work between driver calls); under cuda_outside: outside_allocation, outside_transfer, outside_launch, outside_wait, outside_startup, outside_other_driver",
    ),
    col(
        "depth",
        Int,
        "0: a part of the wall time (these rows sum to it); 1: a part of the row of depth 0 above it (constructs or cuda_outside; these sum to it)",
    ),
    col("time_us", Float, "host time of the part"),
    col("share_of_wall", Float, "time_us over the run's wall time"),
    col(
        "calls",
        OptInt,
        "driver calls, MPI calls or top-level constructs it counts, where counted",
    ),
];

const RANKS: &[Column] = &[
    col(
        "row",
        Str,
        "rank (one per trace) or total (all ranks: sums, and the longest wall time)",
    ),
    col(
        "rank",
        OptInt,
        "MPI rank (or the trace's position among the inputs); empty on the total row",
    ),
    col(
        "rank_known",
        Bool,
        "the launcher gave the rank (false: the position among the inputs)",
    ),
    col("pid", OptInt, "process id"),
    col("host", Str, "host name"),
    col(
        "wall_time_us",
        Float,
        "the process's time from its first to its last event",
    ),
    col(
        "host_construct_time_us",
        Float,
        "host time inside top-level OpenACC constructs",
    ),
    col("kernel_time_us", Float, "kernel device time"),
    col("transfer_time_us", Float, "transfer time"),
    col(
        "wall_time_imbalance",
        Float,
        "total row: max / mean over ranks (1.0 = even)",
    ),
    col(
        "host_construct_time_imbalance",
        Float,
        "total row: max / mean over ranks",
    ),
    col(
        "kernel_time_imbalance",
        Float,
        "total row: max / mean over ranks",
    ),
    col(
        "transfer_time_imbalance",
        Float,
        "total row: max / mean over ranks",
    ),
];

/// The name a transfer kind has in every export.
pub use accprof_analyzer::compare::copy_kind_label as copy_label;

fn memory_label(m: MemoryKind) -> &'static str {
    match m {
        MemoryKind::Unknown => "unknown",
        MemoryKind::Pageable => "pageable",
        MemoryKind::Pinned => "pinned",
        MemoryKind::Device => "device",
        MemoryKind::Array => "array",
        MemoryKind::Managed => "managed",
    }
}

fn reached_label(r: Reached) -> &'static str {
    r.label()
}

fn class_label(c: ConstructClass) -> &'static str {
    match c {
        ConstructClass::Compute => "compute",
        ConstructClass::EnterData => "enter_data",
        ConstructClass::ExitData => "exit_data",
        ConstructClass::Update => "update",
        ConstructClass::Wait => "wait",
        ConstructClass::ApiCall(_) => "api_call",
    }
}

fn dims(d: &[u32]) -> String {
    d.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn ratio(max: u64, mean: f64) -> f64 {
    if mean > 0.0 {
        max as f64 / mean
    } else {
        f64::NAN
    }
}

/// Writes the rows of one table.
pub fn write_rows(what: What, input: &Input<'_>, sink: &mut dyn RowSink) -> io::Result<()> {
    match what {
        What::Summary => summary_rows(input.merged, sink),
        What::Ranks => rank_rows(input.merged, sink),
        What::Ledger => ledger_rows(input.merged, sink),
        What::Constructs => each_run(input, sink, construct_rows),
        What::Kernels => each_run(input, sink, kernel_rows),
        What::Transfers => each_run(input, sink, transfer_rows),
        What::Allocations => each_run(input, sink, alloc_rows),
        What::Findings => each_run(input, sink, finding_rows),
        What::Coherence => each_run(input, sink, coherence_rows),
    }
}

fn each_run(
    input: &Input<'_>,
    sink: &mut dyn RowSink,
    rows: fn(&RunInput<'_>, &mut dyn RowSink) -> io::Result<()>,
) -> io::Result<()> {
    for r in input.runs {
        rows(r, sink)?;
    }
    Ok(())
}

fn stats_cells(s: &Stats) -> [Cell<'static>; 4] {
    if s.count == 0 {
        return [Cell::Us(0), Cell::Null, Cell::Null, Cell::Null];
    }
    [
        Cell::Us(s.total_ns),
        Cell::Us(s.min_ns),
        Cell::Us(s.max_ns),
        Cell::Us(s.avg_ns()),
    ]
}

fn summary_rows(m: &MergedSummary, sink: &mut dyn RowSink) -> io::Result<()> {
    for f in &m.merged.functions {
        for l in &f.lines {
            let imb = m.imbalance.iter().find(|i| {
                i.file == f.file
                    && i.function == f.function
                    && i.line == l.line
                    && i.address == l.address
            });
            let tail = [
                Cell::Us(l.host_ns),
                imb.map_or(Cell::Null, |i| Cell::Int(u64::from(i.max_rank))),
                imb.map_or(Cell::Null, |i| Cell::Us(i.max_ns)),
                imb.map_or(Cell::Null, |i| Cell::Float(i.ratio)),
            ];
            let line = Cell::opt_int(l.line.map(u64::from));
            let head = [Cell::Str(&f.file), Cell::Str(&f.function), line];
            let mut emit = |entry: &str,
                            name: &str,
                            grid: &str,
                            block: &str,
                            count: u64,
                            stats: &Stats,
                            bytes: Option<u64>,
                            device: bool|
             -> io::Result<()> {
                let [t, mn, mx, avg] = stats_cells(stats);
                let mut row = Vec::with_capacity(SUMMARY.len());
                row.extend_from_slice(&head);
                row.extend_from_slice(&[
                    Cell::Str(entry),
                    Cell::Str(name),
                    Cell::Str(grid),
                    Cell::Str(block),
                    Cell::Int(count),
                    t,
                    mn,
                    mx,
                    avg,
                    Cell::opt_int(bytes),
                    Cell::Str(if device { "device" } else { "host" }),
                ]);
                row.extend_from_slice(&tail);
                sink.row(&row)
            };
            for (r, s) in &l.reached {
                emit(reached_label(*r), "", "", "", s.count, s, None, false)?;
            }
            for (name, s) in &l.api_calls {
                emit("api call", name, "", "", s.count, s, None, false)?;
            }
            for k in &l.kernels {
                let device = k.device.count > 0;
                let stats = if device { &k.device } else { &k.elapsed };
                emit(
                    "kernel",
                    &k.name,
                    &dims(&k.grid),
                    &dims(&k.block),
                    k.launches,
                    stats,
                    None,
                    device,
                )?;
            }
            for t in &l.transfers {
                emit(
                    copy_label(t.direction),
                    &t.variables.join(" "),
                    "",
                    "",
                    t.count,
                    &t.time,
                    Some(t.bytes),
                    t.device_timed,
                )?;
            }
        }
    }
    Ok(())
}

fn ledger_rows(m: &MergedSummary, sink: &mut dyn RowSink) -> io::Result<()> {
    for (i, r) in m.merged.runs.iter().enumerate() {
        let rank = u64::from(r.rank.unwrap_or(i as u32));
        let wall = r.ledger.wall_ns;
        for row in r.ledger.rows() {
            sink.row(&[
                Cell::Int(rank),
                Cell::Int(u64::from(row.thread)),
                Cell::Str(row.key()),
                Cell::Int(u64::from(row.depth())),
                Cell::Us(row.ns),
                Cell::Float(if wall == 0 {
                    0.0
                } else {
                    row.ns as f64 / wall as f64
                }),
                Cell::opt_int(row.calls),
            ])?;
        }
    }
    Ok(())
}

fn rank_rows(m: &MergedSummary, sink: &mut dyn RowSink) -> io::Result<()> {
    for r in &m.ranks {
        sink.row(&[
            Cell::Str("rank"),
            Cell::Int(u64::from(r.rank)),
            Cell::Bool(r.rank_known),
            Cell::Int(u64::from(r.pid)),
            Cell::Str(&r.host),
            Cell::Us(r.wall_ns),
            Cell::Us(r.host_construct_ns),
            Cell::Us(r.kernel_ns),
            Cell::Us(r.transfer_ns),
            Cell::Null,
            Cell::Null,
            Cell::Null,
            Cell::Null,
        ])?;
    }
    let n = m.ranks.len().max(1) as f64;
    let col = |f: fn(&accprof_analyzer::summary::RankRow) -> u64| {
        let sum: u64 = m.ranks.iter().map(f).fold(0, u64::saturating_add);
        let max = m.ranks.iter().map(f).max().unwrap_or(0);
        (sum, ratio(max, sum as f64 / n))
    };
    let (wall_sum, wall_i) = col(|r| r.wall_ns);
    let (host, host_i) = col(|r| r.host_construct_ns);
    let (kernel, kernel_i) = col(|r| r.kernel_ns);
    let (transfer, transfer_i) = col(|r| r.transfer_ns);
    let _ = wall_sum;
    sink.row(&[
        Cell::Str("total"),
        Cell::Null,
        Cell::Bool(m.ranks.iter().all(|r| r.rank_known)),
        Cell::Null,
        Cell::Str(""),
        Cell::Us(m.merged.wall_ns),
        Cell::Us(host),
        Cell::Us(kernel),
        Cell::Us(transfer),
        Cell::Float(wall_i),
        Cell::Float(host_i),
        Cell::Float(kernel_i),
        Cell::Float(transfer_i),
    ])
}

/// File, function and line of a construct's reported line.
fn place(run: &Run, c: Option<accprof_analyzer::ConstructId>) -> [Cell<'_>; 3] {
    match c {
        Some(c) => {
            let s = run.site(run.line_site(c));
            [
                Cell::Str(&s.file),
                Cell::Str(&s.function),
                Cell::opt_int(s.line.map(u64::from)),
            ]
        }
        None => [Cell::Str(""), Cell::Str(""), Cell::Null],
    }
}

fn rel(run: &Run, t: u64) -> u64 {
    t.saturating_sub(run.process.span_ns.0)
}

fn construct_rows(r: &RunInput<'_>, sink: &mut dyn RowSink) -> io::Result<()> {
    let run = r.run;
    for (id, c) in run.constructs() {
        let kind = match c.class {
            ConstructClass::ApiCall(routine) => run.routine(routine),
            _ => c.kind.map_or("", |k| k.name()),
        };
        let [file, function, line] = place(run, Some(id));
        sink.row(&[
            Cell::Int(u64::from(r.rank)),
            Cell::Int(u64::from(id.number())),
            Cell::opt_int(c.parent.map(|p| u64::from(p.number()))),
            Cell::Str(class_label(c.class)),
            Cell::Str(kind),
            Cell::Bool(c.implicit),
            file,
            function,
            line,
            Cell::Int(u64::from(c.thread)),
            Cell::Us(rel(run, c.start_ns)),
            Cell::opt_us(c.end_ns().map(|t| rel(run, t))),
            Cell::opt_us(c.host_ns()),
            c.async_queue()
                .map_or(Cell::Null, |q| Cell::SInt(i64::from(q))),
            Cell::opt_int(c.device().map(u64::from)),
            Cell::Int(run.kernels_of(id).len() as u64),
            Cell::Int(run.transfers_of(id).len() as u64),
            Cell::Int(run.allocs_of(id).len() as u64),
            Cell::Bool(c.cut),
        ])?;
    }
    Ok(())
}

fn kernel_rows(r: &RunInput<'_>, sink: &mut dyn RowSink) -> io::Result<()> {
    let run = r.run;
    for (id, k) in run.kernels() {
        let [file, function, line] = place(run, k.construct);
        let g = |i: usize| Cell::Int(u64::from(k.grid[i]));
        let b = |i: usize| Cell::Int(u64::from(k.block[i]));
        sink.row(&[
            Cell::Int(u64::from(r.rank)),
            Cell::Int(u64::from(id.number())),
            Cell::opt_int(k.construct.map(|c| u64::from(c.number()))),
            Cell::Str(run.name(k.name)),
            file,
            function,
            line,
            g(0),
            g(1),
            g(2),
            b(0),
            b(1),
            b(2),
            Cell::Int(u64::from(k.registers)),
            Cell::Int(u64::from(k.shared_bytes)),
            Cell::Us(rel(run, k.start_ns)),
            Cell::Us(rel(run, k.end_ns)),
            Cell::Us(k.device_ns()),
            Cell::Int(u64::from(k.device)),
            Cell::Int(u64::from(k.stream)),
            Cell::Str(match k.source {
                KernelSource::Cupti => "device",
                KernelSource::AccProf => "host",
            }),
        ])?;
    }
    Ok(())
}

/// GB/s (1e9 bytes per second) of `bytes` in `ns`; NaN for no time.
pub fn bandwidth_gb_per_s(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        f64::NAN
    } else {
        bytes as f64 / ns as f64
    }
}

fn transfer_rows(r: &RunInput<'_>, sink: &mut dyn RowSink) -> io::Result<()> {
    let run = r.run;
    for (id, t) in run.transfers() {
        let [file, function, line] = place(run, t.construct);
        sink.row(&[
            Cell::Int(u64::from(r.rank)),
            Cell::Int(u64::from(id.number())),
            Cell::opt_int(t.construct.map(|c| u64::from(c.number()))),
            Cell::Str(copy_label(Some(t.kind))),
            Cell::Str(run.variable(id).unwrap_or("")),
            Cell::Int(t.bytes),
            Cell::Us(rel(run, t.start_ns)),
            Cell::Us(rel(run, t.end_ns)),
            Cell::Us(t.duration_ns()),
            Cell::Float(bandwidth_gb_per_s(t.bytes, t.duration_ns())),
            Cell::Str(memory_label(t.src)),
            Cell::Str(memory_label(t.dst)),
            Cell::opt_int(t.device().map(u64::from)),
            Cell::opt_int(t.stream().map(u64::from)),
            Cell::Str(match t.source {
                TransferSource::Cupti => "device",
                TransferSource::AccProf => "host",
            }),
            file,
            function,
            line,
        ])?;
    }
    Ok(())
}

fn coherence_rows(r: &RunInput<'_>, sink: &mut dyn RowSink) -> io::Result<()> {
    let run = r.run;
    for (id, a) in run.host_access_ids() {
        let site = run.access_site(id).map(|s| run.site(s));
        let touched = a.kind != CoherenceKind::UnreadDownload;
        sink.row(&[
            Cell::Int(u64::from(r.rank)),
            Cell::Int(u64::from(id.number())),
            Cell::Str(a.kind.key()),
            Cell::Us(rel(run, a.time_ns)),
            Cell::Int(u64::from(a.thread)),
            Cell::Str(run.access_variable(id).unwrap_or("")),
            Cell::Int(a.range_start),
            Cell::Int(a.range_bytes),
            Cell::opt_int(touched.then_some(a.host_addr)),
            Cell::opt_int(touched.then(|| a.offset())),
            Cell::Bool(a.confirmed),
            Cell::opt_int(a.construct.map(|c| u64::from(c.number()))),
            site.map_or(Cell::Str(""), |s| Cell::Str(&s.file)),
            site.map_or(Cell::Str(""), |s| Cell::Str(&s.function)),
            Cell::opt_int(site.and_then(|s| s.line).map(u64::from)),
        ])?;
    }
    Ok(())
}

fn alloc_rows(r: &RunInput<'_>, sink: &mut dyn RowSink) -> io::Result<()> {
    let run = r.run;
    for (id, a) in run.allocs() {
        let [file, function, line] = place(run, a.construct);
        sink.row(&[
            Cell::Int(u64::from(r.rank)),
            Cell::Int(u64::from(id.number())),
            Cell::opt_int(a.construct.map(|c| u64::from(c.number()))),
            Cell::Str(run.alloc_name(id).as_deref().unwrap_or("")),
            Cell::Int(a.bytes),
            Cell::Us(rel(run, a.alloc_ns)),
            Cell::opt_us(a.free_ns().map(|t| rel(run, t))),
            file,
            function,
            line,
        ])?;
    }
    Ok(())
}

fn finding_rows(r: &RunInput<'_>, sink: &mut dyn RowSink) -> io::Result<()> {
    let Some(analysis) = r.analysis else {
        return Ok(());
    };
    for (i, f) in analysis.findings.iter().enumerate() {
        let category = serde_json::to_value(f.category)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let confidence = serde_json::to_value(f.confidence)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let loc = f.locations.first();
        sink.row(&[
            Cell::Int(u64::from(r.rank)),
            Cell::Int(i as u64 + 1),
            Cell::Str(f.id),
            Cell::Str(&category),
            Cell::Str(&confidence),
            Cell::Str(&f.title),
            Cell::opt_us(f.cost_ns),
            Cell::opt_us(f.saving_ns),
            Cell::Str(loc.map_or("", |l| l.file.as_str())),
            Cell::Str(loc.map_or("", |l| l.function.as_str())),
            Cell::opt_int(loc.and_then(|l| l.line).map(u64::from)),
            Cell::opt_str(loc.and_then(|l| l.variable.as_deref())),
            Cell::Str(&f.proposal.text),
            Cell::opt_str(f.proposal.directive.as_deref()),
            Cell::Int(f.subjects.kernels.len() as u64),
            Cell::Int(f.subjects.transfers.len() as u64),
        ])?;
    }
    Ok(())
}

/// One table as CSV.
pub fn write_csv<W: Write>(what: What, input: &Input<'_>, out: W) -> io::Result<()> {
    let mut sink = CsvSink::new(out, what.columns())?;
    write_rows(what, input, &mut sink)?;
    sink.finish()
}

/// A JSON document with `tables` (each an array of row objects) and the
/// merged summary's `totals`:
/// `{"schema": "accprof-export", "schema_version": 1, "traces": [...],
/// "totals": {...}, "tables": {"summary": [...], ...}}`.
pub fn write_json<W: Write>(
    tables: &[What],
    input: &Input<'_>,
    traces: &[String],
    mut out: W,
) -> io::Result<()> {
    write!(
        out,
        "{{\"schema\":\"accprof-export\",\"schema_version\":{SCHEMA_VERSION},\"traces\":"
    )?;
    serde_json::to_writer(&mut out, traces).map_err(io::Error::from)?;
    out.write_all(b",\n\"totals\":")?;
    serde_json::to_writer(&mut out, &totals_json(&input.merged.merged)).map_err(io::Error::from)?;
    out.write_all(b",\n\"tables\":{")?;
    for (i, what) in tables.iter().enumerate() {
        if i > 0 {
            out.write_all(b",\n")?;
        }
        json_str(&mut out, what.name())?;
        out.write_all(b":")?;
        let mut sink = JsonRows::new(&mut out, what.columns())?;
        write_rows(*what, input, &mut sink)?;
        sink.finish()?;
    }
    out.write_all(b"}}\n")?;
    out.flush()
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn totals_json(s: &Summary) -> serde_json::Value {
    serde_json::json!({
        "wall_time_us": us(s.wall_ns),
        "host_construct_time_us": us(s.host_construct_ns),
        "kernel_time_us": us(s.kernel_ns),
        "transfer_time_us": us(s.transfer_ns),
        "transfers": s.transfers,
        "transfer_bytes": s.transfer_bytes,
        "constructs": s.constructs,
        "cupti": s.cupti,
        "host_fallback": s.host_fallback,
        "ranks": s.runs.len(),
    })
}

/// The columns of every table (and of `accprof diff --csv`) as Markdown,
/// for the documentation: the README holds this text, and a test keeps
/// the two equal.
pub fn columns_markdown() -> String {
    let mut s = String::new();
    let tables = What::ALL
        .iter()
        .map(|w| (w.name(), w.columns()))
        .chain([("diff", crate::diff::DIFF_COLUMNS)]);
    for (name, columns) in tables {
        s.push_str(&format!(
            "`{name}`:\n\n| column | pandas dtype | meaning |\n| --- | --- | --- |\n"
        ));
        for c in columns {
            s.push_str(&format!(
                "| `{}` | {} | {} |\n",
                c.name,
                c.dtype.pandas(),
                c.doc
            ));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's table of columns is the one the code writes.
    #[test]
    fn readme_documents_every_column() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
            .expect("README.md");
        let want = columns_markdown();
        if !readme.contains(&want) {
            panic!("README.md lacks the current table of export columns; put this in its place:\n\n{want}");
        }
    }
}
