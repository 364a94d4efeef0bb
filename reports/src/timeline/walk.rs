//! The walk: each rank's constructs, kernels, transfers, MPI calls and
//! host accesses, read from the model's tables (each in start order) and
//! merged as they are read, so that every slice reaches the sink in start
//! order over all ranks and tables. It decides what the timeline shows:
//! the tracks and their ids, names and order, each event's name, category
//! and arguments, the flows from a construct to what it caused; and it
//! leaves the encoding to the sink.

use std::collections::HashSet;
use std::io;

use accprof_analyzer::model::{ConstructRow, CopyDirection, KernelRow, TransferRow};
use accprof_analyzer::Track as Lane;
use accprof_analyzer::{
    Construct, ConstructClass, ConstructId, HostAccess, HostAccessId, Item, Kernel, KernelId,
    KernelSource, MpiCall, MpiCallId, Run, Transfer, TransferId,
};

use accprof_analyzer::vocabulary::CoherenceKind;

use super::sink::{Arg, Counts, Instant, Slice, TimelineSink, Track};
use crate::export::{copy_label, RunInput};

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
