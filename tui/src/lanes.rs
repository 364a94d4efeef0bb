//! The timeline's lanes: per lane, the events' times in time-sorted arrays
//! built once at load, so that any window of any width is drawn by one
//! binary search per screen column (level of detail: a column shows how
//! many events start in it, the earliest start and the latest end among
//! them, and whether an earlier event still runs through it).

use accprof_analyzer::{ConstructClass, ConstructId, KernelId, MemsetId, Run, TransferId};
use accprof_trace::{ConstructKind, CopyKind};

/// What an event is, for its color, its glyph and "the next of the same kind".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Tag {
    Compute,
    Data,
    EnterData,
    ExitData,
    Update,
    Wait,
    Api,
    Kernel,
    Upload,
    Download,
    Memset,
}

impl Tag {
    pub fn label(self) -> &'static str {
        match self {
            Tag::Compute => "compute",
            Tag::Data => "data",
            Tag::EnterData => "enter data",
            Tag::ExitData => "exit data",
            Tag::Update => "update",
            Tag::Wait => "wait",
            Tag::Api => "API call",
            Tag::Kernel => "kernel",
            Tag::Upload => "host->device copy",
            Tag::Download => "device->host copy",
            Tag::Memset => "memset",
        }
    }

    fn of_construct(class: ConstructClass, kind: Option<ConstructKind>) -> Tag {
        match (class, kind) {
            (ConstructClass::Compute, _) => Tag::Compute,
            (_, Some(ConstructKind::Data | ConstructKind::HostData)) => Tag::Data,
            (ConstructClass::EnterData, _) => Tag::EnterData,
            (ConstructClass::ExitData, _) => Tag::ExitData,
            (ConstructClass::Update, _) => Tag::Update,
            (ConstructClass::Wait, _) => Tag::Wait,
            (ConstructClass::ApiCall(_), _) => Tag::Api,
        }
    }
}

/// One event of the model a lane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    Construct(ConstructId),
    Kernel(KernelId),
    Transfer(TransferId),
    Memset(MemsetId),
}

/// The model's handles of a lane's events, by position.
#[derive(Debug, Clone)]
enum Ids {
    Constructs(Vec<ConstructId>),
    Kernels(Vec<KernelId>),
    Transfers(Vec<TransferId>),
    Memsets(Vec<MemsetId>),
}

/// What a lane holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneKind {
    /// A host thread's constructs nested `depth` deep (the deepest row
    /// takes every deeper one too).
    Thread {
        thread: u32,
        depth: u8,
    },
    /// A device queue's kernels.
    Stream {
        device: u32,
        stream: u32,
    },
    Upload,
    Download,
    Memset,
}

/// One row of events that do not (much) overlap, sorted by start.
#[derive(Debug, Clone)]
pub struct Lane {
    pub kind: LaneKind,
    pub label: String,
    /// Start on the common clock (ns since the earliest trace's start).
    starts: Vec<u64>,
    /// The events' ends: while the lane is built, and after [`Lane::seal`]
    /// only when some event lasts 2^32 ns (4.3 s) or more.
    ends: Vec<u64>,
    /// Otherwise their durations, in half the memory.
    durations: Vec<u32>,
    /// The latest end among the events up to each position; empty when
    /// no event ends after a later one (then it is the end itself).
    reach: Vec<u64>,
    tags: Vec<Tag>,
    ids: Ids,
    /// The events came out of start order and were sorted: the handles
    /// are not in order.
    reordered: bool,
}

/// What one screen column of a lane shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cell {
    /// Events starting in the column.
    pub count: u32,
    /// An earlier event still runs at the column's start.
    pub covered: bool,
    /// Share of the column between the earliest start and the latest end
    /// of the events in it (and the covering one), in eighths: 0 for an
    /// empty column.
    pub fill: u8,
    /// Whether that extent sits in the column's left or right half only.
    pub side: Side,
    /// The event that speaks for the column (the first starting in it, else
    /// the covering one), by position; `u32::MAX` for none.
    pub first: u32,
    /// Positions `first..end` are the events starting in the column.
    pub end: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Side {
    #[default]
    Both,
    Left,
    Right,
}

impl Lane {
    fn new(kind: LaneKind, label: String, ids: Ids) -> Lane {
        Lane {
            kind,
            label,
            starts: Vec::new(),
            ends: Vec::new(),
            durations: Vec::new(),
            reach: Vec::new(),
            tags: Vec::new(),
            ids,
            reordered: false,
        }
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    pub fn start(&self, pos: u32) -> u64 {
        self.starts[pos as usize]
    }

    pub fn end(&self, pos: u32) -> u64 {
        self.end_at(pos as usize)
    }

    fn end_at(&self, i: usize) -> u64 {
        match self.durations.get(i) {
            Some(&d) => self.starts[i] + u64::from(d),
            None => self.ends[i],
        }
    }

    fn reach_at(&self, i: usize) -> u64 {
        match self.reach.get(i) {
            Some(&r) => r,
            None => self.end_at(i),
        }
    }

    pub fn tag(&self, pos: u32) -> Tag {
        self.tags[pos as usize]
    }

    pub fn item(&self, pos: u32) -> Item {
        let i = pos as usize;
        match &self.ids {
            Ids::Constructs(v) => Item::Construct(v[i]),
            Ids::Kernels(v) => Item::Kernel(v[i]),
            Ids::Transfers(v) => Item::Transfer(v[i]),
            Ids::Memsets(v) => Item::Memset(v[i]),
        }
    }

    /// The position of `item` in this lane, if it is here.
    pub fn find(&self, item: Item) -> Option<u32> {
        fn look<T: Ord>(v: &[T], x: &T, scan: bool) -> Option<usize> {
            if scan {
                v.iter().position(|y| y == x)
            } else {
                v.binary_search(x).ok()
            }
        }
        let scan = self.reordered;
        let at = match (&self.ids, item) {
            (Ids::Constructs(v), Item::Construct(c)) => look(v, &c, scan),
            (Ids::Kernels(v), Item::Kernel(k)) => look(v, &k, scan),
            (Ids::Transfers(v), Item::Transfer(t)) => look(v, &t, scan),
            (Ids::Memsets(v), Item::Memset(m)) => look(v, &m, scan),
            _ => None,
        };
        at.map(|p| p as u32)
    }

    fn push(&mut self, start: u64, end: u64, tag: Tag) {
        self.starts.push(start);
        self.ends.push(end.max(start));
        self.tags.push(tag);
    }

    /// Sorts by start when the events came out of order (handles and the
    /// other arrays move with them), then recomputes the reach.
    fn seal(&mut self) {
        if self.starts.windows(2).any(|w| w[0] > w[1]) {
            let mut order: Vec<u32> = (0..self.starts.len() as u32).collect();
            order.sort_by_key(|&i| self.starts[i as usize]);
            let take = |v: &Vec<u64>| order.iter().map(|&i| v[i as usize]).collect::<Vec<_>>();
            self.starts = take(&self.starts);
            self.ends = take(&self.ends);
            self.tags = order.iter().map(|&i| self.tags[i as usize]).collect();
            fn permute<T: Copy>(v: &mut Vec<T>, order: &[u32]) {
                // (A lane made by hand in a unit test has no handles.)
                if v.len() == order.len() {
                    *v = order.iter().map(|&i| v[i as usize]).collect();
                }
            }
            match &mut self.ids {
                Ids::Constructs(v) => permute(v, &order),
                Ids::Kernels(v) => permute(v, &order),
                Ids::Transfers(v) => permute(v, &order),
                Ids::Memsets(v) => permute(v, &order),
            }
            // The handles are no longer in order: `find` scans.
            self.reordered = true;
        }
        let mut r = 0;
        let mut overlap = false;
        let reach: Vec<u64> = self
            .ends
            .iter()
            .map(|&e| {
                overlap |= e < r;
                r = r.max(e);
                r
            })
            .collect();
        self.reach = if overlap { reach } else { Vec::new() };
        let long = self
            .starts
            .iter()
            .zip(&self.ends)
            .any(|(&s, &e)| e - s > u64::from(u32::MAX));
        if !long {
            self.durations = self
                .starts
                .iter()
                .zip(&self.ends)
                .map(|(&s, &e)| (e - s) as u32)
                .collect();
            self.ends = Vec::new();
        }
        match &mut self.ids {
            Ids::Constructs(v) => v.shrink_to_fit(),
            Ids::Kernels(v) => v.shrink_to_fit(),
            Ids::Transfers(v) => v.shrink_to_fit(),
            Ids::Memsets(v) => v.shrink_to_fit(),
        }
        self.starts.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.tags.shrink_to_fit();
    }

    /// The first position whose event starts at or after `t`.
    pub fn first_at_or_after(&self, t: u64) -> u32 {
        self.starts.partition_point(|&s| s < t) as u32
    }

    /// The event running at `t` or, failing that, the nearest one starting
    /// after it, else the last one before it.
    pub fn at_or_near(&self, t: u64) -> Option<u32> {
        if self.is_empty() {
            return None;
        }
        let after = self.first_at_or_after(t.saturating_add(1));
        // The latest-starting event before t that still runs at t.
        let mut j = after as usize;
        let mut steps = 0;
        while j > 0 && steps < 64 {
            j -= 1;
            steps += 1;
            if self.end_at(j) > t || self.starts[j] == t {
                return Some(j as u32);
            }
            if self.reach_at(j) <= t {
                break;
            }
        }
        if (after as usize) < self.len() {
            Some(after)
        } else {
            Some(self.len() as u32 - 1)
        }
    }

    /// The columns of the window starting at `t0`, `per_col` ns wide each.
    pub fn cells(&self, t0: f64, per_col: f64, out: &mut [Cell]) {
        let n = self.starts.len();
        let mut lo = self.starts.partition_point(|&s| (s as f64) < t0);
        for (c, cell) in out.iter_mut().enumerate() {
            let a = t0 + c as f64 * per_col;
            let b = a + per_col;
            let hi = lo + self.starts[lo..n].partition_point(|&s| (s as f64) < b);
            let covered = lo > 0 && self.reach_at(lo - 1) as f64 > a;
            *cell = Cell {
                count: (hi - lo) as u32,
                covered,
                first: u32::MAX,
                end: hi as u32,
                ..Cell::default()
            };
            if hi > lo || covered {
                let from = if covered { a } else { self.starts[lo] as f64 };
                let to = if hi > lo {
                    self.reach_at(hi - 1) as f64
                } else {
                    self.reach_at(lo - 1) as f64
                };
                let (from, to) = (from.max(a), to.min(b).max(from.max(a)));
                let share = if per_col > 0.0 {
                    (to - from) / per_col
                } else {
                    1.0
                };
                cell.fill = ((share * 8.0).ceil() as u8).clamp(1, 8);
                if cell.fill <= 4 {
                    let mid = (from + to) / 2.0;
                    cell.side = if mid < a + per_col / 2.0 {
                        Side::Left
                    } else {
                        Side::Right
                    };
                }
                cell.first = if hi > lo {
                    lo as u32
                } else {
                    self.covering(lo, a) as u32
                };
            }
            lo = hi;
        }
    }

    /// The event before position `lo` that runs past `t` (a short look
    /// back; events of one lane rarely overlap).
    fn covering(&self, lo: usize, t: f64) -> usize {
        let mut j = lo;
        for _ in 0..64 {
            if j == 0 {
                break;
            }
            j -= 1;
            if self.end_at(j) as f64 > t {
                return j;
            }
        }
        lo.saturating_sub(1)
    }

    /// The next (or previous) position after `from` whose event `keep`s.
    pub fn seek(&self, from: u32, forward: bool, mut keep: impl FnMut(u32) -> bool) -> Option<u32> {
        if forward {
            ((from + 1)..self.len() as u32).find(|&p| keep(p))
        } else {
            (0..from).rev().find(|&p| keep(p))
        }
    }

    /// The latest end of the lane's events.
    pub fn last_end(&self) -> u64 {
        match self.starts.len() {
            0 => 0,
            n => self.reach_at(n - 1),
        }
    }

    pub fn first_start(&self) -> u64 {
        self.starts.first().copied().unwrap_or(0)
    }

    /// Bytes the lane's arrays take.
    pub fn heap_bytes(&self) -> usize {
        let ids = match &self.ids {
            Ids::Constructs(v) => v.capacity() * 4,
            Ids::Kernels(v) => v.capacity() * 4,
            Ids::Transfers(v) => v.capacity() * 4,
            Ids::Memsets(v) => v.capacity() * 4,
        };
        (self.starts.capacity() + self.ends.capacity() + self.reach.capacity()) * 8
            + self.durations.capacity() * 4
            + self.tags.capacity()
            + ids
    }
}

/// Device memory in use over time: a step function of the allocations.
#[derive(Debug, Clone, Default)]
pub struct Counter {
    /// Each time the bytes in use changed, and the bytes from then on (in
    /// the memory the changes were gathered in: no second copy).
    steps: Vec<(u64, u64)>,
    /// The largest value in each block of `BLOCK` steps.
    block_max: Vec<u64>,
    pub peak: u64,
}

const BLOCK: usize = 256;

impl Counter {
    /// From the changes (time, bytes added or, negative, freed), in any order.
    fn build(mut changes: Vec<(u64, i64)>) -> Counter {
        changes.sort_unstable_by_key(|s| s.0);
        let mut now: i64 = 0;
        // The running total, in place; several changes at one time leave
        // the last total.
        let mut steps: Vec<(u64, u64)> = changes
            .into_iter()
            .map(|(t, d)| {
                now = now.saturating_add(d).max(0);
                (t, now as u64)
            })
            .collect();
        steps.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 = later.1;
            }
            same
        });
        steps.shrink_to_fit();
        let block_max: Vec<u64> = steps
            .chunks(BLOCK)
            .map(|b| b.iter().map(|s| s.1).max().unwrap_or(0))
            .collect();
        let peak = block_max.iter().copied().max().unwrap_or(0);
        Counter {
            steps,
            block_max,
            peak,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Bytes in use at `t`.
    pub fn at(&self, t: u64) -> u64 {
        match self.steps.partition_point(|&(x, _)| x <= t) {
            0 => 0,
            i => self.steps[i - 1].1,
        }
    }

    /// The most bytes in use during each column of the window.
    pub fn columns(&self, t0: f64, per_col: f64, out: &mut [u64]) {
        let n = self.steps.len();
        let mut lo = self.steps.partition_point(|&(s, _)| (s as f64) < t0);
        for (c, v) in out.iter_mut().enumerate() {
            let b = t0 + (c + 1) as f64 * per_col;
            let hi = lo + self.steps[lo..n].partition_point(|&(s, _)| (s as f64) < b);
            let before = if lo > 0 { self.steps[lo - 1].1 } else { 0 };
            *v = before.max(self.max_in(lo, hi));
            lo = hi;
        }
    }

    fn max_in(&self, lo: usize, hi: usize) -> u64 {
        let mut m = 0;
        let mut i = lo;
        while i < hi {
            if i % BLOCK == 0 && i + BLOCK <= hi {
                m = m.max(self.block_max[i / BLOCK]);
                i += BLOCK;
            } else {
                m = m.max(self.steps[i].1);
                i += 1;
            }
        }
        m
    }

    pub fn heap_bytes(&self) -> usize {
        self.steps.capacity() * 16 + self.block_max.capacity() * 8
    }
}

/// A run's time `t` on the common clock (`shift` added, kept in range).
pub fn on_clock(t: u64, shift: i128) -> u64 {
    (i128::from(t) + shift).clamp(0, i128::from(u64::MAX)) as u64
}

/// The most rows a host thread's nested constructs take.
pub const MAX_DEPTH: u8 = 3;

/// All lanes of one run, on the common clock (`shift` is added to the
/// run's times; see [`crate::data::Session`]).
#[derive(Debug, Clone, Default)]
pub struct RunLanes {
    pub lanes: Vec<Lane>,
    pub memory: Counter,
}

impl RunLanes {
    pub fn build(run: &Run, shift: i128) -> RunLanes {
        // The host threads' lanes on one core, the device's on the other.
        let (mut lanes, mut device) = std::thread::scope(|scope| {
            let threads = scope.spawn(|| Self::thread_lanes(run, shift));
            let device = Self::device_lanes(run, shift);
            match threads.join() {
                Ok(t) => (t, device),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        });
        lanes.append(&mut device);
        let at = |t: u64| on_clock(t, shift);
        let mut steps: Vec<(u64, i64)> = Vec::with_capacity(run.allocs().len() * 2);
        for (_, a) in run.allocs() {
            let bytes = a.bytes.min(i64::MAX as u64) as i64;
            steps.push((at(a.alloc_ns), bytes));
            if let Some(f) = a.free_ns() {
                steps.push((at(f), -bytes));
            }
        }
        RunLanes {
            lanes,
            memory: Counter::build(steps),
        }
    }

    /// Per host thread, the constructs by nesting depth.
    fn thread_lanes(run: &Run, shift: i128) -> Vec<Lane> {
        let at = |t: u64| on_clock(t, shift);
        let mut lanes: Vec<Lane> = Vec::new();
        let mut depth: Vec<u8> = Vec::with_capacity(run.constructs().len());
        let mut threads: Vec<(u32, [Option<usize>; MAX_DEPTH as usize])> = Vec::new();
        let mut ids_of: Vec<ConstructId> = Vec::with_capacity(run.constructs().len());
        for (id, c) in run.constructs() {
            ids_of.push(id);
            let d = match c.parent {
                Some(p) => {
                    let at = ids_of.binary_search(&p).ok();
                    at.map_or(0, |i| depth[i].saturating_add(1))
                }
                None => 0,
            };
            depth.push(d);
            let row = d.min(MAX_DEPTH - 1) as usize;
            let t = match threads.iter().position(|(t, _)| *t == c.thread) {
                Some(i) => i,
                None => {
                    threads.push((c.thread, [None; MAX_DEPTH as usize]));
                    threads.len() - 1
                }
            };
            let lane = match threads[t].1[row] {
                Some(l) => l,
                None => {
                    let label = if row == 0 {
                        format!("thread {}", c.thread)
                    } else {
                        format!("  nested {row}")
                    };
                    lanes.push(Lane::new(
                        LaneKind::Thread {
                            thread: c.thread,
                            depth: row as u8,
                        },
                        label,
                        Ids::Constructs(Vec::new()),
                    ));
                    threads[t].1[row] = Some(lanes.len() - 1);
                    lanes.len() - 1
                }
            };
            let l = &mut lanes[lane];
            let end = c.end_ns().unwrap_or(run.span_ns.1);
            l.push(at(c.start_ns), at(end), Tag::of_construct(c.class, c.kind));
            if let Ids::Constructs(v) = &mut l.ids {
                v.push(id);
            }
        }
        drop(ids_of);
        drop(depth);
        // Threads in number order, each thread's rows by depth.
        lanes.sort_by_key(|l| match l.kind {
            LaneKind::Thread { thread, depth } => (thread, depth),
            _ => (u32::MAX, 0),
        });

        for l in &mut lanes {
            l.seal();
        }
        lanes
    }

    /// The device queues, the copies and the memsets.
    fn device_lanes(run: &Run, shift: i128) -> Vec<Lane> {
        let at = |t: u64| on_clock(t, shift);
        let mut lanes: Vec<Lane> = Vec::new();
        // Device queues.
        let mut streams: Vec<Lane> = Vec::new();
        for (id, k) in run.kernels() {
            let i = match streams.iter().position(|l| {
                l.kind
                    == LaneKind::Stream {
                        device: k.device,
                        stream: k.stream,
                    }
            }) {
                Some(i) => i,
                None => {
                    let label = if k.device_timed() {
                        format!("dev {} queue {}", k.device, k.stream)
                    } else {
                        format!("launches dev {}", k.device)
                    };
                    streams.push(Lane::new(
                        LaneKind::Stream {
                            device: k.device,
                            stream: k.stream,
                        },
                        label,
                        Ids::Kernels(Vec::new()),
                    ));
                    streams.len() - 1
                }
            };
            let l = &mut streams[i];
            l.push(at(k.start_ns), at(k.end_ns), Tag::Kernel);
            if let Ids::Kernels(v) = &mut l.ids {
                v.push(id);
            }
        }
        streams.sort_by_key(|l| match l.kind {
            LaneKind::Stream { device, stream } => (device, stream),
            _ => (u32::MAX, 0),
        });
        lanes.extend(streams);

        // Copies, one lane per direction.
        let mut up = Lane::new(
            LaneKind::Upload,
            "host->device".into(),
            Ids::Transfers(Vec::new()),
        );
        let mut down = Lane::new(
            LaneKind::Download,
            "device->host".into(),
            Ids::Transfers(Vec::new()),
        );
        for (id, x) in run.transfers() {
            let (l, tag) = match x.kind {
                CopyKind::HostToDevice => (&mut up, Tag::Upload),
                CopyKind::DeviceToHost => (&mut down, Tag::Download),
                _ => continue,
            };
            l.push(at(x.start_ns), at(x.end_ns), tag);
            if let Ids::Transfers(v) = &mut l.ids {
                v.push(id);
            }
        }
        // A run that moved nothing (host fallback) shows no copy lanes.
        lanes.extend([up, down].into_iter().filter(|l| !l.is_empty()));

        if !run.memsets().is_empty() {
            let mut m = Lane::new(LaneKind::Memset, "memsets".into(), Ids::Memsets(Vec::new()));
            for (id, s) in run.memsets() {
                m.push(at(s.start_ns), at(s.end_ns), Tag::Memset);
                if let Ids::Memsets(v) = &mut m.ids {
                    v.push(id);
                }
            }
            lanes.push(m);
        }

        for l in &mut lanes {
            l.seal();
        }
        lanes
    }

    pub fn heap_bytes(&self) -> usize {
        self.lanes.iter().map(Lane::heap_bytes).sum::<usize>() + self.memory.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(spans: &[(u64, u64)]) -> Lane {
        let mut l = Lane::new(LaneKind::Upload, "x".into(), Ids::Transfers(Vec::new()));
        for &(s, e) in spans {
            l.push(s, e, Tag::Upload);
        }
        l.seal();
        l
    }

    #[test]
    fn a_column_counts_the_events_starting_in_it_and_sees_longer_ones_through() {
        let l = lane(&[(0, 35), (12, 13), (14, 15), (50, 51)]);
        let mut cells = [Cell::default(); 6];
        l.cells(0.0, 10.0, &mut cells);
        let counts: Vec<u32> = cells.iter().map(|c| c.count).collect();
        assert_eq!(counts, [1, 2, 0, 0, 0, 1]);
        let covered: Vec<bool> = cells.iter().map(|c| c.covered).collect();
        assert_eq!(covered, [false, true, true, true, false, false]);
        // Column 3 (30..40) is covered by the first event only up to 35.
        assert_eq!(cells[3].first, 0);
        assert_eq!(cells[3].fill, 4);
        assert_eq!(cells[3].side, Side::Left);
        assert_eq!(cells[4].first, u32::MAX);
        assert_eq!(cells[5].fill, 1);
    }

    #[test]
    fn lanes_keep_what_they_need_and_read_the_same() {
        // Short, non-overlapping events: durations only, no reach.
        let l = lane(&[(0, 10), (20, 30)]);
        assert!(l.reach.is_empty() && l.ends.is_empty());
        assert_eq!((l.end(0), l.end(1), l.last_end()), (10, 30, 30));
        // An event of 5 s: the ends are kept whole.
        let long = 5_000_000_000;
        let l = lane(&[(0, long), (10, 20)]);
        assert!(l.durations.is_empty() && !l.reach.is_empty());
        assert_eq!((l.end(0), l.end(1), l.last_end()), (long, 20, long));
        let mut cells = [Cell::default(); 2];
        l.cells(1e9, 1e9, &mut cells);
        assert!(cells[0].covered && cells[1].covered);
    }

    #[test]
    fn out_of_order_events_are_sorted_with_their_handles() {
        let l = lane(&[(30, 40), (10, 20)]);
        assert_eq!((l.start(0), l.start(1)), (10, 30));
        assert_eq!(l.last_end(), 40);
    }

    #[test]
    fn the_event_at_an_instant_is_the_one_running_then() {
        let l = lane(&[(0, 10), (20, 30), (40, 50)]);
        assert_eq!(l.at_or_near(25), Some(1));
        assert_eq!(l.at_or_near(15), Some(1));
        assert_eq!(l.at_or_near(99), Some(2));
    }

    #[test]
    fn memory_in_use_peaks_per_column() {
        let c = Counter::build(vec![(10, 100), (20, 50), (30, -100), (60, -50)]);
        assert_eq!(c.peak, 150);
        assert_eq!(c.at(25), 150);
        assert_eq!(c.at(35), 50);
        let mut cols = [0u64; 7];
        c.columns(0.0, 10.0, &mut cols);
        assert_eq!(cols, [0, 100, 150, 150, 50, 50, 50]);
        let mut many = Vec::new();
        for i in 0..2000u64 {
            many.push((i * 2, 1));
        }
        let c = Counter::build(many);
        let mut cols = [0u64; 2];
        c.columns(0.0, 2000.0, &mut cols);
        assert_eq!(cols, [1000, 2000]);
    }
}
