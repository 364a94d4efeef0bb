//! The run as a timeline for Perfetto's UI (ui.perfetto.dev) and
//! chrome://tracing: per rank, one track per host thread (the OpenACC
//! constructs, nested, the MPI calls, and as instants the host accesses
//! of `--check coherence`), one per device stream (kernels) and one per copy
//! direction and stream (transfers), with a flow arrow from each construct
//! to each kernel and copy it caused, and the source line, variable, bytes
//! and launch shape as arguments.
//!
//! Two encodings of the same events:
//! - Chrome trace-event JSON ([`write_chrome`]): readable, and what most
//!   tools take, but about 85 bytes per event of the trace (17 GB for 200 M
//!   events; measured on bench/eventstorm.c's trace) and slow to parse.
//! - Perfetto's protobuf trace ([`write_perfetto`]): about 50 bytes per
//!   event, and what the UI loads fastest. It is written by hand with a
//!   small varint writer ([`Proto`]): the few messages needed (`Trace`,
//!   `TracePacket`, `TrackDescriptor`, `TrackEvent`, `DebugAnnotation`)
//!   use a dozen stable fields, while the crates that carry Perfetto's
//!   schema (generated with prost from the full protos) bring prost, its
//!   build step and thousands of generated types for those dozen fields,
//!   and would buffer each message as a struct of owned `String`s.
//!
//! Both stream: events go out as the model's tables are walked, and what
//! is held besides the model is one event and, per track, the ends of the
//! slices still open on it (the nesting depth).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::{self, Write};

use accprof_analyzer::model::{ConstructRow, CopyDirection, KernelRow, TransferRow};
use accprof_analyzer::Track as Lane;
use accprof_analyzer::{
    Construct, ConstructClass, ConstructId, HostAccess, HostAccessId, Item, Kernel, KernelId,
    KernelSource, MpiCall, MpiCallId, Run, Transfer, TransferId,
};

use accprof_analyzer::vocabulary::CoherenceKind;

use crate::export::{copy_label, RunInput};

/// An argument of an event.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Str(&'a str),
    Int(u64),
}

/// A track: its id, the rank it belongs to, its kind and its name.
#[derive(Debug, Clone)]
pub struct Track {
    /// Unique over the whole export.
    pub id: u64,
    /// The rank's process track it sits under.
    pub process: u64,
    pub name: String,
    /// Order in the UI (host threads first).
    pub sort: u32,
}

/// One slice on a track.
pub struct Slice<'a> {
    pub track: u64,
    pub name: &'a str,
    pub category: &'static str,
    pub start_ns: u64,
    pub end_ns: u64,
    pub args: &'a [(&'static str, Arg<'a>)],
    /// Flows that start at this slice (a construct's kernels and copies).
    pub flows_out: &'a [u64],
    /// The flow that ends at this slice.
    pub flow_in: Option<u64>,
}

/// An event without duration on a track (a host access the coherence
/// check caught).
pub struct Instant<'a> {
    pub track: u64,
    pub name: &'a str,
    pub category: &'static str,
    pub at_ns: u64,
    pub args: &'a [(&'static str, Arg<'a>)],
}

/// Where the events go.
pub trait TimelineSink {
    fn process(&mut self, id: u64, pid: u32, name: &str) -> io::Result<()>;
    fn track(&mut self, t: &Track) -> io::Result<()>;
    fn slice(&mut self, s: &Slice<'_>) -> io::Result<()>;
    fn instant(&mut self, i: &Instant<'_>) -> io::Result<()>;
    fn finish(&mut self) -> io::Result<()>;
}

/// Counts of what a timeline holds (for tests and the CLI's message).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub constructs: u64,
    pub kernels: u64,
    pub copies: u64,
    pub mpi_calls: u64,
    pub host_accesses: u64,
    pub flows: u64,
}

/// Ids: each rank's tracks live in its own block of ids.
const RANK_BLOCK: u64 = 1 << 32;

fn flow_id(rank_index: u64, kind: u64, number: u32) -> u64 {
    // Flow ids are unique over the export: rank, entity kind, entity.
    (rank_index << 40) | (kind << 36) | u64::from(number)
}

fn copy_lane(d: CopyDirection) -> (u64, &'static str) {
    match d {
        CopyDirection::Upload => (1, "copies host->device"),
        CopyDirection::Download => (2, "copies device->host"),
        CopyDirection::Other => (3, "copies other"),
    }
}

/// One rank's entities, each table in start order.
struct Walk<'a> {
    run: &'a Run,
    rank: u32,
    /// The rank's position among the inputs.
    index: u64,
    /// Its block of track ids.
    base: u64,
    /// The Unix time ([`Run::unix_ns`]) of the export's 0: the earliest
    /// first event of all ranks.
    origin: i128,
    constructs: std::iter::Peekable<
        accprof_analyzer::model::Rows<'a, ConstructId, ConstructRow, Construct>,
    >,
    kernels: std::iter::Peekable<accprof_analyzer::model::Rows<'a, KernelId, KernelRow, Kernel>>,
    transfers:
        std::iter::Peekable<accprof_analyzer::model::Rows<'a, TransferId, TransferRow, Transfer>>,
    mpi_calls: std::iter::Peekable<Box<dyn Iterator<Item = (MpiCallId, &'a MpiCall)> + 'a>>,
    accesses: std::iter::Peekable<Box<dyn Iterator<Item = (HostAccessId, &'a HostAccess)> + 'a>>,
}

impl Walk<'_> {
    /// A trace time on the export's time line.
    fn at(&self, t: u64) -> u64 {
        (self.run.unix_ns(t) - self.origin).clamp(0, i128::from(u64::MAX)) as u64
    }

    /// The start of the next entity of each table (on the export's time line).
    fn next_starts(&mut self) -> [Option<u64>; 5] {
        let c = self.constructs.peek().map(|(_, c)| c.start_ns);
        let k = self.kernels.peek().map(|(_, k)| k.start_ns);
        let t = self.transfers.peek().map(|(_, t)| t.start_ns);
        let m = self.mpi_calls.peek().map(|(_, m)| m.start_ns);
        let a = self.accesses.peek().map(|(_, a)| a.time_ns);
        [c, k, t, m, a].map(|x| x.map(|x| self.at(x)))
    }
}

/// What `write` keeps between slices: declared tracks and scratch text.
struct State {
    tracks: HashSet<u64>,
    flows: Vec<u64>,
    place: String,
    grid: String,
    block: String,
    counts: Counts,
}

impl State {
    fn track(
        &mut self,
        sink: &mut dyn TimelineSink,
        w: &Walk<'_>,
        id: u64,
        name: impl FnOnce() -> String,
        sort: u32,
    ) -> io::Result<u64> {
        if self.tracks.insert(id) {
            sink.track(&Track {
                id,
                process: w.base,
                name: name(),
                sort,
            })?;
        }
        Ok(id)
    }

    /// "file:line" of a construct's reported line into `place`.
    fn place_of(&mut self, run: &Run, c: Option<ConstructId>) {
        self.place_at(run, c.map(|c| run.line_site(c)));
    }

    /// "file:line" of a site into `place`.
    fn place_at(&mut self, run: &Run, site: Option<accprof_analyzer::SiteId>) {
        use std::fmt::Write as _;
        self.place.clear();
        let Some(site) = site else { return };
        let s = run.site(site);
        match s.line {
            Some(l) => {
                let _ = write!(self.place, "{}:{l}", s.file);
            }
            None => self.place.push_str(&s.file),
        }
    }
}

/// Walks the runs and writes their timelines to `sink`, every slice in
/// start order over all ranks and tables (constructs, kernels and
/// transfers each come in start order from the model; they are merged as
/// they are read).
pub fn write(runs: &[RunInput<'_>], sink: &mut dyn TimelineSink) -> io::Result<Counts> {
    // Ranks on the model's one clock, 0 at the earliest first event.
    let origin = runs
        .iter()
        .map(|r| r.run.unix_ns(r.run.process.span_ns.0))
        .min()
        .unwrap_or(0);
    let mut walks: Vec<Walk<'_>> = Vec::with_capacity(runs.len());
    for (i, r) in runs.iter().enumerate() {
        let run = r.run;
        let index = i as u64;
        let w = Walk {
            run,
            rank: r.rank,
            index,
            base: (index + 1) * RANK_BLOCK,
            origin,
            constructs: run.constructs().peekable(),
            kernels: run.kernels().peekable(),
            transfers: run.transfers().peekable(),
            mpi_calls: (Box::new(run.mpi_call_ids()) as Box<dyn Iterator<Item = _>>).peekable(),
            accesses: (Box::new(run.host_access_ids()) as Box<dyn Iterator<Item = _>>).peekable(),
        };
        let exe = std::path::Path::new(&run.process.header.executable)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        sink.process(
            w.base,
            run.process.header.pid,
            &format!("rank {} {} (pid {})", w.rank, exe, run.process.header.pid),
        )?;
        walks.push(w);
    }
    let mut st = State {
        tracks: HashSet::new(),
        flows: Vec::new(),
        place: String::new(),
        grid: String::new(),
        block: String::new(),
        counts: Counts::default(),
    };
    loop {
        // The earliest next slice of all ranks and tables; on a tie the
        // construct first (it encloses what it caused).
        let mut best: Option<(u64, usize, usize)> = None;
        for (wi, w) in walks.iter_mut().enumerate() {
            for (table, start) in w.next_starts().into_iter().enumerate() {
                if let Some(t) = start {
                    match best {
                        Some((bt, _, _)) if bt <= t => {}
                        _ => best = Some((t, wi, table)),
                    }
                }
            }
        }
        let Some((_, wi, table)) = best else { break };
        let w = &mut walks[wi];
        match table {
            0 => {
                if let Some((id, c)) = w.constructs.next() {
                    construct(sink, &mut st, w, id, &c)?;
                }
            }
            1 => {
                if let Some((id, k)) = w.kernels.next() {
                    kernel(sink, &mut st, w, id, &k)?;
                }
            }
            2 => {
                if let Some((id, t)) = w.transfers.next() {
                    transfer(sink, &mut st, w, id, &t)?;
                }
            }
            3 => {
                if let Some((id, m)) = w.mpi_calls.next() {
                    mpi_call(sink, &mut st, w, id, m)?;
                }
            }
            _ => {
                if let Some((id, a)) = w.accesses.next() {
                    host_access(sink, &mut st, w, id, a)?;
                }
            }
        }
    }
    sink.finish()?;
    Ok(st.counts)
}

fn construct(
    sink: &mut dyn TimelineSink,
    st: &mut State,
    w: &Walk<'_>,
    id: ConstructId,
    c: &Construct,
) -> io::Result<()> {
    let run = w.run;
    // The model's track: the thread's; deeper constructs nest in their
    // parents' slices on it.
    let Lane::Thread { thread, .. } = run.track(Item::Construct(id)) else {
        return Ok(());
    };
    let track = thread_track(sink, st, w, thread)?;
    st.flows.clear();
    st.flows.extend(
        run.kernels_of(id)
            .iter()
            .map(|k| flow_id(w.index, 1, k.number())),
    );
    st.flows.extend(
        run.transfers_of(id)
            .iter()
            .map(|t| flow_id(w.index, 2, t.number())),
    );
    st.counts.flows += st.flows.len() as u64;
    st.place_of(run, Some(id));
    let name = match c.class {
        ConstructClass::ApiCall(routine) => run.routine(routine),
        _ => c.kind.map_or("construct", |k| k.name()),
    };
    let s = run.site(c.site);
    let end = c.end_ns().unwrap_or(run.process.span_ns.1).max(c.start_ns);
    sink.slice(&Slice {
        track,
        name,
        category: "construct",
        start_ns: w.at(c.start_ns),
        end_ns: w.at(end),
        args: &[
            ("source", Arg::Str(&st.place)),
            ("function", Arg::Str(&s.function)),
            ("construct_id", Arg::Int(u64::from(id.number()))),
        ],
        flows_out: &st.flows,
        flow_in: None,
    })?;
    st.counts.constructs += 1;
    Ok(())
}

/// A host thread's track (its constructs and MPI calls).
fn thread_track(
    sink: &mut dyn TimelineSink,
    st: &mut State,
    w: &Walk<'_>,
    thread: u32,
) -> io::Result<u64> {
    st.track(
        sink,
        w,
        w.base + 1 + u64::from(thread),
        || format!("host thread {thread}"),
        thread.min(999),
    )
}

fn mpi_call(
    sink: &mut dyn TimelineSink,
    st: &mut State,
    w: &Walk<'_>,
    id: MpiCallId,
    m: &MpiCall,
) -> io::Result<()> {
    // The model's track: the host thread's, beside its constructs.
    let Lane::Thread { thread, .. } = w.run.track(Item::MpiCall(id)) else {
        return Ok(());
    };
    let track = thread_track(sink, st, w, thread)?;
    st.place_at(w.run, w.run.mpi_site(id));
    sink.slice(&Slice {
        track,
        name: &m.routine,
        category: "mpi",
        start_ns: w.at(m.start_ns),
        end_ns: w.at(m.end_ns.max(m.start_ns)),
        args: &[
            ("source", Arg::Str(&st.place)),
            ("bytes", Arg::Int(m.bytes())),
            ("mpi_call_id", Arg::Int(u64::from(id.number()))),
        ],
        flows_out: &[],
        flow_in: None,
    })?;
    st.counts.mpi_calls += 1;
    Ok(())
}

fn host_access(
    sink: &mut dyn TimelineSink,
    st: &mut State,
    w: &Walk<'_>,
    id: HostAccessId,
    a: &HostAccess,
) -> io::Result<()> {
    let run = w.run;
    // The model's track: the thread that made the access.
    let Lane::Thread { thread, .. } = run.track(Item::HostAccess(id)) else {
        return Ok(());
    };
    let track = thread_track(sink, st, w, thread)?;
    st.place_at(run, run.access_site(id));
    let touched = a.kind != CoherenceKind::UnreadDownload;
    let mut args = vec![
        ("source", Arg::Str(&st.place)),
        ("kind", Arg::Str(a.kind.key())),
        ("variable", Arg::Str(run.access_variable(id).unwrap_or(""))),
        ("range_start", Arg::Int(a.range_start)),
        ("range_bytes", Arg::Int(a.range_bytes)),
    ];
    if touched {
        args.push((
            "offset",
            Arg::Int(a.host_addr.saturating_sub(a.range_start)),
        ));
        args.push(("confirmed", Arg::Int(u64::from(a.confirmed))));
    }
    args.push(("access_id", Arg::Int(u64::from(id.number()))));
    args.push((
        "construct_id",
        Arg::Int(a.construct.map_or(0, |c| u64::from(c.number()))),
    ));
    sink.instant(&Instant {
        track,
        name: a.kind.label(),
        category: if touched { "coherence" } else { "waste" },
        at_ns: w.at(a.time_ns),
        args: &args,
    })?;
    st.counts.host_accesses += 1;
    Ok(())
}

fn kernel(
    sink: &mut dyn TimelineSink,
    st: &mut State,
    w: &Walk<'_>,
    id: KernelId,
    k: &Kernel,
) -> io::Result<()> {
    use std::fmt::Write as _;
    let run = w.run;
    let Lane::Queue { device, stream } = run.track(Item::Kernel(id)) else {
        return Ok(());
    };
    let track = st.track(
        sink,
        w,
        w.base + (1 << 24) + (u64::from(device) << 16) + u64::from(stream & 0xffff),
        || match k.source {
            KernelSource::Cupti => format!("GPU {device} stream {stream} kernels"),
            KernelSource::AccProf => "kernel launches (host, no CUPTI)".to_string(),
        },
        1000 + device * 100,
    )?;
    st.grid.clear();
    st.block.clear();
    let _ = write!(st.grid, "{}x{}x{}", k.grid[0], k.grid[1], k.grid[2]);
    let _ = write!(st.block, "{}x{}x{}", k.block[0], k.block[1], k.block[2]);
    st.place_of(run, k.construct);
    sink.slice(&Slice {
        track,
        name: run.name(k.name),
        category: "kernel",
        start_ns: w.at(k.start_ns),
        end_ns: w.at(k.end_ns.max(k.start_ns)),
        args: &[
            ("source", Arg::Str(&st.place)),
            ("grid", Arg::Str(&st.grid)),
            ("block", Arg::Str(&st.block)),
            ("registers", Arg::Int(u64::from(k.registers))),
            ("kernel_id", Arg::Int(u64::from(id.number()))),
            (
                "construct_id",
                Arg::Int(k.construct.map_or(0, |c| u64::from(c.number()))),
            ),
        ],
        flows_out: &[],
        flow_in: k.construct.map(|_| flow_id(w.index, 1, id.number())),
    })?;
    st.counts.kernels += 1;
    Ok(())
}

fn transfer(
    sink: &mut dyn TimelineSink,
    st: &mut State,
    w: &Walk<'_>,
    id: TransferId,
    t: &Transfer,
) -> io::Result<()> {
    let run = w.run;
    let Lane::Copies(direction) = run.track(Item::Transfer(id)) else {
        return Ok(());
    };
    let (lane, lane_name) = copy_lane(direction);
    let track = st.track(
        sink,
        w,
        w.base + (2 << 24) + (lane << 20),
        || lane_name.to_string(),
        2000 + lane as u32,
    )?;
    st.place_of(run, t.construct);
    let kind = copy_label(Some(t.kind));
    let variable = run.variable(id).unwrap_or("");
    sink.slice(&Slice {
        track,
        name: if variable.is_empty() { kind } else { variable },
        category: kind,
        start_ns: w.at(t.start_ns),
        end_ns: w.at(t.end_ns.max(t.start_ns)),
        args: &[
            ("source", Arg::Str(&st.place)),
            ("kind", Arg::Str(kind)),
            ("variable", Arg::Str(variable)),
            ("bytes", Arg::Int(t.bytes)),
            ("transfer_id", Arg::Int(u64::from(id.number()))),
            (
                "construct_id",
                Arg::Int(t.construct.map_or(0, |c| u64::from(c.number()))),
            ),
        ],
        flows_out: &[],
        flow_in: t.construct.map(|_| flow_id(w.index, 2, id.number())),
    })?;
    st.counts.copies += 1;
    Ok(())
}

// ------------------------------------------------------------ Chrome JSON

/// Chrome trace-event JSON: `{"traceEvents": [...]}` with one complete
/// ("X") event per slice, flow events ("s", "f") and name metadata.
pub struct ChromeSink<W: Write> {
    out: W,
    first: bool,
    /// Track id -> (pid, tid) of the Chrome format.
    tids: HashMap<u64, (u64, u64)>,
    pids: HashMap<u64, u64>,
}

impl<W: Write> ChromeSink<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
        Ok(ChromeSink {
            out,
            first: true,
            tids: HashMap::new(),
            pids: HashMap::new(),
        })
    }

    fn sep(&mut self) -> io::Result<()> {
        self.out
            .write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        Ok(())
    }
}

impl<W: Write> ChromeSink<W> {
    /// `,"args":{...}` of an event.
    fn args(&mut self, args: &[(&'static str, Arg<'_>)]) -> io::Result<()> {
        self.out.write_all(b",\"args\":{")?;
        for (i, (k, v)) in args.iter().enumerate() {
            if i > 0 {
                self.out.write_all(b",")?;
            }
            write!(self.out, "\"{k}\":")?;
            match v {
                Arg::Str(x) => crate::table::json_str(&mut self.out, x)?,
                Arg::Int(x) => write!(self.out, "{x}")?,
            }
        }
        self.out.write_all(b"}")
    }
}

fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

impl<W: Write> TimelineSink for ChromeSink<W> {
    fn process(&mut self, id: u64, _pid: u32, name: &str) -> io::Result<()> {
        // Chrome pids: the rank's position, so two ranks with one pid stay apart.
        let pid = self.pids.len() as u64 + 1;
        self.pids.insert(id, pid);
        self.sep()?;
        write!(
            self.out,
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"args\":{{\"name\":"
        )?;
        crate::table::json_str(&mut self.out, name)?;
        self.out.write_all(b"}}")
    }

    fn track(&mut self, t: &Track) -> io::Result<()> {
        let pid = self.pids.get(&t.process).copied().unwrap_or(0);
        let tid = self.tids.len() as u64 + 1;
        self.tids.insert(t.id, (pid, tid));
        self.sep()?;
        write!(
            self.out,
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
        )?;
        crate::table::json_str(&mut self.out, &t.name)?;
        self.out.write_all(b"}},")?;
        write!(
            self.out,
            "\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{}}}}}",
            t.sort
        )
    }

    fn slice(&mut self, s: &Slice<'_>) -> io::Result<()> {
        let (pid, tid) = self.tids.get(&s.track).copied().unwrap_or((0, 0));
        self.sep()?;
        self.out.write_all(b"{\"ph\":\"X\",\"name\":")?;
        crate::table::json_str(&mut self.out, s.name)?;
        write!(
            self.out,
            ",\"cat\":\"{}\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{}",
            s.category,
            us(s.start_ns),
            us(s.end_ns.saturating_sub(s.start_ns))
        )?;
        self.args(s.args)?;
        self.out.write_all(b"}")?;
        for f in s.flows_out {
            write!(
                self.out,
                ",\n{{\"ph\":\"s\",\"name\":\"caused\",\"cat\":\"flow\",\"id\":{f},\"pid\":{pid},\"tid\":{tid},\"ts\":{}}}",
                us(s.start_ns)
            )?;
        }
        if let Some(f) = s.flow_in {
            write!(
                self.out,
                ",\n{{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"caused\",\"cat\":\"flow\",\"id\":{f},\"pid\":{pid},\"tid\":{tid},\"ts\":{}}}",
                us(s.start_ns)
            )?;
        }
        Ok(())
    }

    fn instant(&mut self, i: &Instant<'_>) -> io::Result<()> {
        let (pid, tid) = self.tids.get(&i.track).copied().unwrap_or((0, 0));
        self.sep()?;
        self.out.write_all(b"{\"ph\":\"i\",\"s\":\"t\",\"name\":")?;
        crate::table::json_str(&mut self.out, i.name)?;
        write!(
            self.out,
            ",\"cat\":\"{}\",\"pid\":{pid},\"tid\":{tid},\"ts\":{}",
            i.category,
            us(i.at_ns)
        )?;
        self.args(i.args)?;
        self.out.write_all(b"}")
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()
    }
}

/// The runs as Chrome trace-event JSON.
pub fn write_chrome<W: Write>(runs: &[RunInput<'_>], out: W) -> io::Result<Counts> {
    let mut sink = ChromeSink::new(out)?;
    write(runs, &mut sink)
}

// ---------------------------------------------------------- Perfetto proto

/// A protobuf message being built: field keys, varints and
/// length-delimited fields, written into a reusable buffer.
#[derive(Default)]
pub struct Proto {
    pub buf: Vec<u8>,
}

impl Proto {
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }

    pub fn uint(&mut self, field: u32, v: u64) {
        self.key(field, 0);
        self.varint(v);
    }

    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, 1);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn str(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    /// A nested message, written by `f` into `scratch` and copied in with
    /// its length.
    pub fn message(&mut self, field: u32, scratch: &mut Proto, f: impl FnOnce(&mut Proto)) {
        scratch.buf.clear();
        f(scratch);
        self.bytes(field, &scratch.buf);
    }
}

// Field numbers of perfetto/trace/trace_packet.proto and track_event/*.proto.
mod field {
    pub const TRACE_PACKET: u32 = 1;
    pub const PACKET_TIMESTAMP: u32 = 8;
    pub const PACKET_SEQUENCE_ID: u32 = 10;
    pub const PACKET_TRACK_EVENT: u32 = 11;
    pub const PACKET_TRACK_DESCRIPTOR: u32 = 60;
    pub const TRACK_UUID: u32 = 1;
    pub const TRACK_NAME: u32 = 2;
    pub const TRACK_PARENT_UUID: u32 = 5;
    pub const EVENT_DEBUG_ANNOTATIONS: u32 = 4;
    pub const EVENT_TYPE: u32 = 9;
    pub const EVENT_TRACK_UUID: u32 = 11;
    pub const EVENT_CATEGORIES: u32 = 22;
    pub const EVENT_NAME: u32 = 23;
    pub const EVENT_FLOW_IDS: u32 = 47;
    pub const EVENT_TERMINATING_FLOW_IDS: u32 = 48;
    pub const ANNOTATION_UINT: u32 = 3;
    pub const ANNOTATION_STRING: u32 = 6;
    pub const ANNOTATION_NAME: u32 = 10;
    pub const TYPE_SLICE_BEGIN: u64 = 1;
    pub const TYPE_SLICE_END: u64 = 2;
    pub const TYPE_INSTANT: u64 = 3;
}

/// The sequence id of every packet (one writer).
const SEQUENCE: u64 = 1;

/// Lanes a track may split into when its slices overlap without nesting
/// (a slice that fits none of them is cut at the end of the one it
/// overlaps).
const MAX_LANES: u64 = 8;

/// Perfetto's protobuf trace: a `Trace` is a sequence of `packet` fields,
/// so each `TracePacket` is written as it comes. Slices become
/// SLICE_BEGIN/SLICE_END pairs, written in time order (slices come in
/// start order; the ends still open wait in a heap until a later start);
/// on each track the open ends form a stack, so the pairs nest as
/// Perfetto requires.
pub struct PerfettoSink<W: Write> {
    out: W,
    packet: Proto,
    msg: Proto,
    inner: Proto,
    /// Per (track, lane): ends of the open slices, innermost last.
    open: HashMap<u64, Vec<u64>>,
    /// Every open slice's end, earliest first; of equal ends, the inner
    /// slice (pushed later) first.
    pending: BinaryHeap<Reverse<(u64, Reverse<u64>, u64)>>,
    pushed: u64,
    /// Tracks known.
    tracks: HashMap<u64, Track>,
}

impl<W: Write> PerfettoSink<W> {
    pub fn new(out: W) -> Self {
        PerfettoSink {
            out,
            packet: Proto::default(),
            msg: Proto::default(),
            inner: Proto::default(),
            open: HashMap::new(),
            pending: BinaryHeap::new(),
            pushed: 0,
            tracks: HashMap::new(),
        }
    }

    fn emit(&mut self) -> io::Result<()> {
        let mut head = Proto::default();
        head.key(field::TRACE_PACKET, 2);
        head.varint(self.packet.buf.len() as u64);
        self.out.write_all(&head.buf)?;
        self.out.write_all(&self.packet.buf)
    }

    fn descriptor(&mut self, uuid: u64, parent: Option<u64>, name: &str) -> io::Result<()> {
        self.packet.buf.clear();
        self.packet.uint(field::PACKET_SEQUENCE_ID, SEQUENCE);
        self.packet
            .message(field::PACKET_TRACK_DESCRIPTOR, &mut self.msg, |m| {
                m.uint(field::TRACK_UUID, uuid);
                m.str(field::TRACK_NAME, name);
                if let Some(p) = parent {
                    m.uint(field::TRACK_PARENT_UUID, p);
                }
            });
        self.emit()
    }

    fn end(&mut self, track: u64, t: u64) -> io::Result<()> {
        self.packet.buf.clear();
        self.packet.uint(field::PACKET_TIMESTAMP, t);
        self.packet.uint(field::PACKET_SEQUENCE_ID, SEQUENCE);
        self.packet
            .message(field::PACKET_TRACK_EVENT, &mut self.msg, |m| {
                m.uint(field::EVENT_TYPE, field::TYPE_SLICE_END);
                m.uint(field::EVENT_TRACK_UUID, track);
            });
        self.emit()
    }

    /// Ends the slices that ended by `t`, in time order.
    fn close_until(&mut self, t: u64) -> io::Result<()> {
        while let Some(&Reverse((end, _, lane))) = self.pending.peek() {
            if end > t {
                break;
            }
            self.pending.pop();
            if let Some(stack) = self.open.get_mut(&lane) {
                stack.pop();
            }
            self.end(lane, end)?;
        }
        Ok(())
    }
}

/// An event's arguments as debug annotations.
fn annotations(m: &mut Proto, inner: &mut Proto, args: &[(&'static str, Arg<'_>)]) {
    for (k, v) in args {
        m.message(field::EVENT_DEBUG_ANNOTATIONS, inner, |a| {
            a.str(field::ANNOTATION_NAME, k);
            match v {
                Arg::Str(x) => a.str(field::ANNOTATION_STRING, x),
                Arg::Int(x) => a.uint(field::ANNOTATION_UINT, *x),
            }
        });
    }
}

fn lane_uuid(track: u64, lane: u64) -> u64 {
    track | (lane << 56)
}

impl<W: Write> TimelineSink for PerfettoSink<W> {
    fn process(&mut self, id: u64, _pid: u32, name: &str) -> io::Result<()> {
        self.descriptor(id, None, name)
    }

    fn track(&mut self, t: &Track) -> io::Result<()> {
        self.descriptor(t.id, Some(t.process), &t.name)?;
        self.tracks.insert(t.id, t.clone());
        Ok(())
    }

    fn slice(&mut self, s: &Slice<'_>) -> io::Result<()> {
        // The first lane where the slice nests in what is open (or where
        // nothing is open once the finished slices are closed).
        self.close_until(s.start_ns)?;
        let mut chosen = None;
        for lane in 0..MAX_LANES {
            let id = lane_uuid(s.track, lane);
            match self.open.get(&id).and_then(|v| v.last()) {
                Some(&e) if e < s.end_ns => continue,
                _ => {
                    chosen = Some(id);
                    break;
                }
            }
        }
        let (id, end_ns) = match chosen {
            Some(id) => (id, s.end_ns),
            None => {
                let id = lane_uuid(s.track, MAX_LANES - 1);
                let cut = self
                    .open
                    .get(&id)
                    .and_then(|v| v.last())
                    .copied()
                    .unwrap_or(s.end_ns);
                (id, cut.min(s.end_ns))
            }
        };
        if id != s.track && !self.open.contains_key(&id) {
            let name = self
                .tracks
                .get(&s.track)
                .map(|t| format!("{} (overlapping)", t.name))
                .unwrap_or_default();
            self.descriptor(id, Some(s.track), &name)?;
        }
        self.packet.buf.clear();
        self.packet.uint(field::PACKET_TIMESTAMP, s.start_ns);
        self.packet.uint(field::PACKET_SEQUENCE_ID, SEQUENCE);
        let inner = &mut self.inner;
        self.packet
            .message(field::PACKET_TRACK_EVENT, &mut self.msg, |m| {
                m.uint(field::EVENT_TYPE, field::TYPE_SLICE_BEGIN);
                m.uint(field::EVENT_TRACK_UUID, id);
                m.str(field::EVENT_CATEGORIES, s.category);
                m.str(field::EVENT_NAME, s.name);
                annotations(m, inner, s.args);
                for f in s.flows_out {
                    m.fixed64(field::EVENT_FLOW_IDS, *f);
                }
                if let Some(f) = s.flow_in {
                    m.fixed64(field::EVENT_TERMINATING_FLOW_IDS, f);
                }
            });
        self.emit()?;
        self.open.entry(id).or_default().push(end_ns);
        self.pushed += 1;
        self.pending
            .push(Reverse((end_ns, Reverse(self.pushed), id)));
        Ok(())
    }

    fn instant(&mut self, i: &Instant<'_>) -> io::Result<()> {
        // Packets go out in time order: the slices ended by now first.
        self.close_until(i.at_ns)?;
        self.packet.buf.clear();
        self.packet.uint(field::PACKET_TIMESTAMP, i.at_ns);
        self.packet.uint(field::PACKET_SEQUENCE_ID, SEQUENCE);
        let inner = &mut self.inner;
        self.packet
            .message(field::PACKET_TRACK_EVENT, &mut self.msg, |m| {
                m.uint(field::EVENT_TYPE, field::TYPE_INSTANT);
                m.uint(field::EVENT_TRACK_UUID, i.track);
                m.str(field::EVENT_CATEGORIES, i.category);
                m.str(field::EVENT_NAME, i.name);
                annotations(m, inner, i.args);
            });
        self.emit()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.close_until(u64::MAX)?;
        self.out.flush()
    }
}

/// The runs as a Perfetto protobuf trace.
pub fn write_perfetto<W: Write>(runs: &[RunInput<'_>], out: W) -> io::Result<Counts> {
    let mut sink = PerfettoSink::new(out);
    write(runs, &mut sink)
}
