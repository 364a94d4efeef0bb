//! The timeline's lanes: per lane, the model's handles of its events in
//! start order, built once at load, so that any window of any width is
//! drawn by one search per screen column over the model's times (level of
//! detail: a column shows how many events start in it, the earliest start
//! and the latest end among them, and whether an earlier event still runs
//! through it).

use accprof_analyzer::model::CopyDirection;
use accprof_analyzer::vocabulary::{CoherenceKind, ConstructKind};
use accprof_analyzer::{
    AllocId, ConstructClass, ConstructId, KernelId, MemsetId, Run, Track, TransferId,
};
use std::sync::Arc;

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
    /// An MPI call on a host thread.
    Mpi,
    /// A stale host read or a lost host write (coherence check, C1/C2):
    /// an instant on its host thread's lane.
    Incoherent,
    /// A download the host never read (C3): an instant at its time.
    UnreadDownload,
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
            Tag::Mpi => "MPI call",
            Tag::Incoherent => "stale read or lost write",
            Tag::UnreadDownload => "unread download",
        }
    }

    /// Whether events of this kind are instants (no duration) that a
    /// column shows before anything else starting in it.
    pub fn instant(self) -> bool {
        matches!(self, Tag::Incoherent | Tag::UnreadDownload)
    }

    fn of_access(kind: CoherenceKind) -> Tag {
        match kind {
            CoherenceKind::StaleRead | CoherenceKind::LostWrite => Tag::Incoherent,
            CoherenceKind::UnreadDownload => Tag::UnreadDownload,
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
pub use accprof_analyzer::Item;

/// The model's handles of a lane's events, by position.
#[derive(Debug, Clone)]
enum Ids {
    Constructs(Vec<ConstructId>),
    Kernels(Vec<KernelId>),
    Transfers(Vec<TransferId>),
    Memsets(Vec<MemsetId>),
    /// Several kinds: a host thread's constructs with its MPI calls.
    Mixed(Vec<Item>),
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
///
/// A lane holds the model's handles of its events, nothing else per event
/// but their kinds where it mixes several: their times are the model's,
/// read from its rows (shifted onto the common clock) whenever a column
/// is drawn, so the index adds 4 or 5 bytes per event to the model.
#[derive(Debug, Clone)]
pub struct Lane {
    pub kind: LaneKind,
    pub label: String,
    /// The run the handles belong to.
    run: Arc<Run>,
    /// Added to the run's times to put them on the common clock.
    shift: i128,
    ids: Ids,
    /// Per event its kind, when the lane mixes kinds (a host thread's
    /// constructs); empty while every event is `tag`.
    tags: Vec<Tag>,
    tag: Tag,
    /// The latest end among the events up to each position; empty when
    /// no event ends after a later one (then it is the end itself).
    reach: Vec<u64>,
    /// The events came out of start order and were sorted: the handles
    /// are not in order.
    reordered: bool,
    /// The time covered by at least one event before each block of
    /// [`BUSY_BLOCK`] positions: with a walk of at most one block, the
    /// busy time before any instant (8 bytes per 32 events).
    busy: Vec<u64>,
    /// The positions of the instants ([`Tag::instant`]), sorted: a column
    /// shows one of them before anything else starting in it.
    instants: Vec<u32>,
    building: Building,
}

/// Positions per entry of a lane's busy index.
const BUSY_BLOCK: usize = 32;

/// A walk through a lane's events adding up the time they cover.
#[derive(Debug, Clone, Copy, Default)]
struct BusyWalk {
    /// Events `0..pos` are added up.
    pos: usize,
    /// The time they cover, and the latest end among them.
    busy: u64,
    reach: u64,
}

/// What [`Lane::seal`] needs to know of the events pushed.
#[derive(Debug, Clone, Copy, Default)]
struct Building {
    last_start: u64,
    /// The latest end so far.
    reach: u64,
    /// An event started before the one pushed before it.
    unsorted: bool,
    /// An event ended before an earlier one.
    overlap: bool,
    /// The time covered by the events so far (while they come in order).
    busy: u64,
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
    /// Share of the column some event covers, in eighths rounded up (1
    /// for any busy time at all): how busy the lane was there, which the
    /// extent overstates when short events lie far apart.
    pub busy: u8,
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
    fn new(kind: LaneKind, label: String, run: &Arc<Run>, shift: i128, ids: Ids) -> Lane {
        Lane {
            kind,
            label,
            run: Arc::clone(run),
            shift,
            ids,
            tags: Vec::new(),
            tag: Tag::Compute,
            reach: Vec::new(),
            reordered: false,
            busy: Vec::new(),
            instants: Vec::new(),
            building: Building::default(),
        }
    }

    pub fn len(&self) -> usize {
        match &self.ids {
            Ids::Constructs(v) => v.len(),
            Ids::Kernels(v) => v.len(),
            Ids::Transfers(v) => v.len(),
            Ids::Memsets(v) => v.len(),
            Ids::Mixed(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn start(&self, pos: u32) -> u64 {
        self.start_at(pos as usize)
    }

    pub fn end(&self, pos: u32) -> u64 {
        self.end_at(pos as usize)
    }

    /// The event's start and end in the model, on the common clock; a
    /// construct whose end never came runs to the end of the run, and no
    /// event ends before it starts.
    #[inline]
    fn span_at(&self, i: usize) -> (u64, u64) {
        let run = &*self.run;
        let (s, e) = match &self.ids {
            Ids::Constructs(v) => {
                let (s, e) = run.construct_span(v[i]);
                (s, e.unwrap_or(run.process.span_ns.1))
            }
            Ids::Kernels(v) => run.kernel_span(v[i]),
            Ids::Transfers(v) => run.transfer_span(v[i]),
            Ids::Memsets(v) => {
                let m = run.memset(v[i]);
                (m.start_ns, m.end_ns)
            }
            Ids::Mixed(v) => run.span(v[i]),
        };
        span_on_clock(s, e, self.shift)
    }

    #[inline]
    fn start_at(&self, i: usize) -> u64 {
        self.span_at(i).0
    }

    #[inline]
    fn end_at(&self, i: usize) -> u64 {
        self.span_at(i).1
    }

    fn reach_at(&self, i: usize) -> u64 {
        match self.reach.get(i) {
            Some(&r) => r,
            None => self.end_at(i),
        }
    }

    pub fn tag(&self, pos: u32) -> Tag {
        match self.tags.get(pos as usize) {
            Some(&t) => t,
            None => self.tag,
        }
    }

    pub fn item(&self, pos: u32) -> Item {
        Self::item_of(&self.ids, pos as usize)
    }

    fn item_of(ids: &Ids, i: usize) -> Item {
        match ids {
            Ids::Constructs(v) => Item::Construct(v[i]),
            Ids::Kernels(v) => Item::Kernel(v[i]),
            Ids::Transfers(v) => Item::Transfer(v[i]),
            Ids::Memsets(v) => Item::Memset(v[i]),
            Ids::Mixed(v) => v[i],
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
            // In start order: from the first event starting with it.
            (Ids::Mixed(v), it) => {
                let (s, e) = self.run.span(it);
                let (start, _) = span_on_clock(s, e, self.shift);
                let from = self.first_not(0, v.len(), |s| s < start);
                v[from..].iter().position(|&x| x == it).map(|p| from + p)
            }
            _ => None,
        };
        at.map(|p| p as u32)
    }

    /// Adds an event that runs `start..end` on the common clock: its
    /// handle, and its kind only once the lane has two kinds.
    fn push(&mut self, item: Item, start: u64, end: u64, tag: Tag) {
        let n = self.len();
        match (&mut self.ids, item) {
            (Ids::Constructs(v), Item::Construct(c)) => v.push(c),
            (Ids::Kernels(v), Item::Kernel(k)) => v.push(k),
            (Ids::Transfers(v), Item::Transfer(t)) => v.push(t),
            (Ids::Memsets(v), Item::Memset(m)) => v.push(m),
            (Ids::Mixed(v), it) => v.push(it),
            // A second kind: the lane holds items from now on.
            (ids, it) => {
                let mut v: Vec<Item> = (0..n).map(|i| Self::item_of(ids, i)).collect();
                v.push(it);
                *ids = Ids::Mixed(v);
            }
        }
        let b = &mut self.building;
        b.unsorted |= start < b.last_start;
        b.overlap |= end < b.reach;
        if n % BUSY_BLOCK == 0 {
            self.busy.push(b.busy);
        }
        // (Made anew by `seal` if the events come out of order.)
        b.busy += end.saturating_sub(start.max(b.reach));
        b.last_start = start;
        b.reach = b.reach.max(end);
        if self.tags.is_empty() {
            if n == 0 {
                self.tag = tag;
                return;
            }
            if tag == self.tag {
                return;
            }
            self.tags = vec![self.tag; n];
        }
        self.tags.push(tag);
    }

    /// Sorts by start when the events came out of order (their handles and
    /// kinds move with them), then works out the reach where events
    /// overlap.
    fn seal(&mut self) {
        let n = self.len();
        let Building {
            unsorted, overlap, ..
        } = std::mem::take(&mut self.building);
        if unsorted {
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.sort_by_key(|&i| self.start_at(i as usize));
            fn permute<T: Copy>(v: &mut Vec<T>, order: &[u32]) {
                // (The kinds are kept only when the lane has two.)
                if v.len() == order.len() {
                    *v = order.iter().map(|&i| v[i as usize]).collect();
                }
            }
            permute(&mut self.tags, &order);
            match &mut self.ids {
                Ids::Constructs(v) => permute(v, &order),
                Ids::Kernels(v) => permute(v, &order),
                Ids::Transfers(v) => permute(v, &order),
                Ids::Memsets(v) => permute(v, &order),
                Ids::Mixed(v) => permute(v, &order),
            }
            // The handles are no longer in order: `find` scans.
            self.reordered = true;
        }
        let rebuild_busy = unsorted;
        self.reach = Vec::new();
        // Sorted anew, the events may overlap where they did not before.
        if overlap || unsorted {
            let (mut r, mut earlier) = (0, false);
            let reach: Vec<u64> = (0..n)
                .map(|i| {
                    let e = self.end_at(i);
                    earlier |= e < r;
                    r = r.max(e);
                    r
                })
                .collect();
            if earlier {
                self.reach = reach;
            }
        }
        if rebuild_busy {
            self.busy.clear();
            let mut w = BusyWalk::default();
            while w.pos < n {
                if w.pos % BUSY_BLOCK == 0 {
                    self.busy.push(w.busy);
                }
                self.walk_one(&mut w);
            }
        }
        match &mut self.ids {
            Ids::Constructs(v) => v.shrink_to_fit(),
            Ids::Kernels(v) => v.shrink_to_fit(),
            Ids::Transfers(v) => v.shrink_to_fit(),
            Ids::Memsets(v) => v.shrink_to_fit(),
            Ids::Mixed(v) => v.shrink_to_fit(),
        }
        self.tags.shrink_to_fit();
        self.busy.shrink_to_fit();
        self.instants = (0..n as u32).filter(|&p| self.tag(p).instant()).collect();
    }

    /// The positions of the instants (the host accesses), in time order.
    pub fn instants(&self) -> &[u32] {
        &self.instants
    }

    /// The instant a column holding positions `lo..hi` and the times
    /// `a..b` shows: a stale read or lost write before an unread download,
    /// else the first. Only an instant of the column's own time counts (a
    /// column that an earlier event covers holds the positions since it).
    pub fn instant_in(&self, lo: u32, hi: u32, a: f64, b: f64) -> Option<u32> {
        let from = self.instants.partition_point(|&p| p < lo);
        let inside = self.instants[from..]
            .iter()
            .take_while(|&&p| p < hi)
            .filter(|&&p| {
                let t = self.start_at(p as usize) as f64;
                t >= a && t < b
            });
        let mut first = None;
        for &p in inside {
            if self.tag(p) == Tag::Incoherent {
                return Some(p);
            }
            first = first.or(Some(p));
        }
        first
    }

    /// Adds the event at `w.pos` to the walk.
    #[inline]
    fn walk_one(&self, w: &mut BusyWalk) {
        let (s, e) = self.span_at(w.pos);
        w.busy += e.saturating_sub(s.max(w.reach));
        w.reach = w.reach.max(e);
        w.pos += 1;
    }

    /// Moves the walk on to position `to` (not back): from the index
    /// entry of `to`'s block where that is ahead, then event by event.
    fn walk_to(&self, w: &mut BusyWalk, to: usize) {
        let b = to / BUSY_BLOCK;
        if let Some(&busy) = self.busy.get(b) {
            let at = b * BUSY_BLOCK;
            if at > w.pos {
                *w = BusyWalk {
                    pos: at,
                    busy,
                    reach: if at > 0 { self.reach_at(at - 1) } else { 0 },
                };
            }
        }
        while w.pos < to {
            self.walk_one(w);
        }
    }

    /// The busy time before `t`, with the walk at the first event that
    /// starts at or after `t`: the events before it that run past `t`
    /// cover all of `t..reach`, which is taken off.
    fn busy_before(w: &BusyWalk, t: f64) -> f64 {
        if w.pos == 0 {
            return 0.0;
        }
        w.busy as f64 - (w.reach as f64 - t).max(0.0)
    }

    /// The time in `a..b` (ns of the common clock) that at least one of
    /// the lane's events covers.
    pub fn busy_ns(&self, a: f64, b: f64) -> f64 {
        let n = self.len();
        let mut w = BusyWalk::default();
        let i = self.first_not(0, n, |s| (s as f64) < a);
        self.walk_to(&mut w, i);
        let before = Self::busy_before(&w, a);
        let j = self.first_not(i, n, |s| (s as f64) < b.max(a));
        self.walk_to(&mut w, j);
        (Self::busy_before(&w, b.max(a)) - before).max(0.0)
    }

    /// The first position in `lo..hi` whose event does not start `before`
    /// (the starts rise): a galloping search from `lo`, so that a column
    /// with few events costs a few lookups however long the lane.
    fn first_not(&self, lo: usize, hi: usize, before: impl Fn(u64) -> bool) -> usize {
        let mut step = 1;
        let mut a = lo;
        let mut b = lo;
        while b < hi && before(self.start_at(b)) {
            a = b + 1;
            b = (lo + step).min(hi);
            step *= 2;
        }
        let (mut lo, mut hi) = (a, b.min(hi));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(self.start_at(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// How many events run in `a..b`: those that start in it and those
    /// started before it that run past `a` (a look back of at most 1024
    /// events: events of one lane rarely overlap).
    pub fn count_in(&self, a: u64, b: u64) -> u64 {
        let lo = self.first_at_or_after(a) as usize;
        let hi = self.first_at_or_after(b.max(a)) as usize;
        let mut n = (hi - lo) as u64;
        let mut j = lo;
        for _ in 0..1024 {
            if j == 0 || self.reach_at(j - 1) <= a {
                break;
            }
            j -= 1;
            if self.end_at(j) > a {
                n += 1;
            }
        }
        n
    }

    /// The first position whose event starts at or after `t`.
    pub fn first_at_or_after(&self, t: u64) -> u32 {
        self.first_not(0, self.len(), |s| s < t) as u32
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
            if self.end_at(j) > t || self.start_at(j) == t {
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

    /// The columns of the window starting at `t0`, `per_col` ns wide each
    /// (their busy shares left 0: see [`Lane::busy_cells`]).
    pub fn cells(&self, t0: f64, per_col: f64, out: &mut [Cell]) {
        let _ = self.cells_with(t0, per_col, out, false);
    }

    /// The columns with how busy each is too; returns the busy time of
    /// all of them (ns), as [`Lane::busy_ns`] over the window would.
    pub fn busy_cells(&self, t0: f64, per_col: f64, out: &mut [Cell]) -> f64 {
        self.cells_with(t0, per_col, out, true)
    }

    fn cells_with(&self, t0: f64, per_col: f64, out: &mut [Cell], with_busy: bool) -> f64 {
        let n = self.len();
        let mut lo = self.first_not(0, n, |s| (s as f64) < t0);
        let mut walk = BusyWalk::default();
        if with_busy {
            self.walk_to(&mut walk, lo);
        }
        let mut busy_before = Self::busy_before(&walk, t0);
        let first_busy = busy_before;
        for (c, cell) in out.iter_mut().enumerate() {
            let a = t0 + c as f64 * per_col;
            let b = a + per_col;
            let hi = self.first_not(lo, n, |s| (s as f64) < b);
            let covered = lo > 0 && self.reach_at(lo - 1) as f64 > a;
            let busy_by = if with_busy {
                self.walk_to(&mut walk, hi);
                Self::busy_before(&walk, b)
            } else {
                0.0
            };
            let busy = if per_col > 0.0 {
                (busy_by - busy_before) / per_col
            } else {
                0.0
            };
            busy_before = busy_by;
            *cell = Cell {
                count: (hi - lo) as u32,
                covered,
                first: u32::MAX,
                end: hi as u32,
                busy: if busy > 0.0 {
                    ((busy * 8.0).ceil() as u8).clamp(1, 8)
                } else {
                    0
                },
                ..Cell::default()
            };
            if hi > lo || covered {
                let from = if covered { a } else { self.start_at(lo) as f64 };
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
        (busy_before - first_busy).max(0.0)
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
        match self.len() {
            0 => 0,
            n => self.reach_at(n - 1),
        }
    }

    pub fn first_start(&self) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.start_at(0)
        }
    }

    /// Bytes the lane's arrays take.
    pub fn heap_bytes(&self) -> usize {
        let ids = match &self.ids {
            Ids::Constructs(v) => v.capacity() * 4,
            Ids::Kernels(v) => v.capacity() * 4,
            Ids::Transfers(v) => v.capacity() * 4,
            Ids::Memsets(v) => v.capacity() * 4,
            Ids::Mixed(v) => v.capacity() * std::mem::size_of::<Item>(),
        };
        self.reach.capacity() * 8
            + self.busy.capacity() * 8
            + self.instants.capacity() * 4
            + self.tags.capacity()
            + ids
    }
}

/// Device memory in use over time: a step function of the allocations.
///
/// Each step is an allocation or its free, by handle, in time order; the
/// times and bytes are the model's. The bytes in use are kept only at the
/// start of each block of [`BLOCK`] steps, with the block's largest value:
/// a column reads whole blocks from there and walks the steps of the
/// blocks it cuts.
#[derive(Debug, Clone)]
pub struct Counter {
    /// The run the handles belong to.
    run: Arc<Run>,
    shift: i128,
    steps: Vec<AllocId>,
    /// Bit `i`: step `i` is a free.
    frees: Vec<u64>,
    /// The bytes in use before each block's first step.
    block_start: Vec<u64>,
    /// The largest value in each block (after any of its steps).
    block_max: Vec<u64>,
    pub peak: u64,
}

const BLOCK: usize = 64;

impl Counter {
    /// From the run's allocations and frees. Where several come at one
    /// time the frees go first, so that no value in between exceeds the
    /// ones before and after them.
    fn build(run: &Arc<Run>, shift: i128) -> Counter {
        let n = run.allocs().len();
        let mut allocs: Vec<AllocId> = Vec::with_capacity(n);
        let mut freed: Vec<AllocId> = Vec::new();
        let (mut last_alloc, mut last_free) = (0, 0);
        let (mut allocs_sorted, mut frees_sorted) = (true, true);
        for (id, a) in run.allocs() {
            allocs.push(id);
            allocs_sorted &= a.alloc_ns >= last_alloc;
            last_alloc = a.alloc_ns;
            if let Some(f) = a.free_ns() {
                freed.push(id);
                frees_sorted &= f >= last_free;
                last_free = f;
            }
        }
        let alloc_ns = |id: AllocId| run.alloc_span(id).0;
        let free_ns = |id: AllocId| run.alloc_span(id).1.unwrap_or(u64::MAX);
        if !allocs_sorted {
            allocs.sort_by_cached_key(|&id| alloc_ns(id));
        }
        if !frees_sorted {
            freed.sort_by_cached_key(|&id| free_ns(id));
        }
        let total = allocs.len() + freed.len();
        let mut steps = Vec::with_capacity(total);
        let mut frees = vec![0u64; total.div_ceil(64)];
        let (mut i, mut j) = (0, 0);
        while i < allocs.len() || j < freed.len() {
            let free =
                j < freed.len() && (i == allocs.len() || free_ns(freed[j]) <= alloc_ns(allocs[i]));
            if free {
                frees[steps.len() / 64] |= 1 << (steps.len() % 64);
                steps.push(freed[j]);
                j += 1;
            } else {
                steps.push(allocs[i]);
                i += 1;
            }
        }
        drop(allocs);
        drop(freed);
        let mut c = Counter {
            run: Arc::clone(run),
            shift,
            steps,
            frees,
            block_start: Vec::new(),
            block_max: Vec::new(),
            peak: 0,
        };
        let mut now = 0;
        for b in 0..c.steps.len().div_ceil(BLOCK) {
            c.block_start.push(now);
            let mut max = 0;
            for k in b * BLOCK..((b + 1) * BLOCK).min(c.steps.len()) {
                now = c.after(k, now);
                max = max.max(now);
            }
            c.block_max.push(max);
        }
        c.peak = c.block_max.iter().copied().max().unwrap_or(0);
        c
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    fn is_free(&self, k: usize) -> bool {
        self.frees[k / 64] & (1 << (k % 64)) != 0
    }

    /// Step `k`'s time on the common clock.
    fn time(&self, k: usize) -> u64 {
        let (a, f) = self.run.alloc_span(self.steps[k]);
        let t = if self.is_free(k) { f.unwrap_or(a) } else { a };
        on_clock(t, self.shift)
    }

    /// The bytes in use after step `k`, from `now` before it.
    fn after(&self, k: usize, now: u64) -> u64 {
        let bytes = self.run.alloc_bytes(self.steps[k]);
        if self.is_free(k) {
            now.saturating_sub(bytes)
        } else {
            now.saturating_add(bytes)
        }
    }

    /// The bytes in use after the first `k` steps.
    fn value_after(&self, k: usize) -> u64 {
        if k == 0 {
            return 0;
        }
        let b = (k - 1) / BLOCK;
        let mut now = self.block_start[b];
        for s in b * BLOCK..k {
            now = self.after(s, now);
        }
        now
    }

    /// The number of steps before `t` (at or before, with `inclusive`).
    fn steps_before(&self, t: f64, inclusive: bool) -> usize {
        let (mut lo, mut hi) = (0, self.steps.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let x = self.time(mid) as f64;
            if x < t || (inclusive && x == t) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Bytes in use at `t`.
    pub fn at(&self, t: u64) -> u64 {
        if self.is_empty() {
            return 0;
        }
        self.value_after(self.steps_before(t as f64, true))
    }

    /// The most bytes in use during each column of the window.
    pub fn columns(&self, t0: f64, per_col: f64, out: &mut [u64]) {
        if self.is_empty() {
            out.fill(0);
            return;
        }
        let mut lo = self.steps_before(t0, false);
        let mut before = self.value_after(lo);
        for (c, v) in out.iter_mut().enumerate() {
            let b = t0 + (c + 1) as f64 * per_col;
            let hi = self.steps_before(b, false).max(lo);
            let (max, last) = self.max_in(lo, hi, before);
            *v = before.max(max);
            before = last;
            lo = hi;
        }
    }

    /// The largest value after steps `lo..hi` and the value after the
    /// last of them, from `before` (the value after step `lo - 1`).
    fn max_in(&self, lo: usize, hi: usize, before: u64) -> (u64, u64) {
        let mut m = 0;
        let mut now = before;
        let mut k = lo;
        while k < hi {
            if k % BLOCK == 0 && k + BLOCK <= hi {
                let b = k / BLOCK;
                m = m.max(self.block_max[b]);
                k += BLOCK;
                now = match self.block_start.get(b + 1) {
                    Some(&v) => v,
                    None => self.value_after(k),
                };
            } else {
                now = self.after(k, now);
                m = m.max(now);
                k += 1;
            }
        }
        (m, now)
    }

    pub fn heap_bytes(&self) -> usize {
        self.steps.capacity() * 4
            + self.frees.capacity() * 8
            + (self.block_start.capacity() + self.block_max.capacity()) * 8
    }
}

/// A run's time `t` on the common clock (`shift` added, kept in range).
pub fn on_clock(t: u64, shift: i128) -> u64 {
    (i128::from(t) + shift).clamp(0, i128::from(u64::MAX)) as u64
}

/// An event's start and end on the common clock; it ends no earlier than
/// it starts.
fn span_on_clock(start: u64, end: u64, shift: i128) -> (u64, u64) {
    let s = on_clock(start, shift);
    (s, on_clock(end, shift).max(s))
}

/// The most rows a host thread's nested constructs take.
pub const MAX_DEPTH: u8 = 3;

/// All lanes of one run, on the common clock (`shift` is added to the
/// run's times; see [`crate::data::Session`]).
#[derive(Debug, Clone)]
pub struct RunLanes {
    pub lanes: Vec<Lane>,
    pub memory: Counter,
}

impl RunLanes {
    pub fn build(run: &Arc<Run>, shift: i128) -> RunLanes {
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
        let memory = Counter::build(run, shift);
        RunLanes { lanes, memory }
    }

    /// Per host thread, the constructs by nesting depth.
    fn thread_lanes(run: &Arc<Run>, shift: i128) -> Vec<Lane> {
        let mut lanes: Vec<Lane> = Vec::new();
        let mut threads: Vec<(u32, [Option<usize>; MAX_DEPTH as usize])> = Vec::new();
        for (id, c) in run.constructs() {
            // The model's track; the deepest row takes every deeper one.
            let Track::Thread { thread, depth } = run.track(Item::Construct(id)) else {
                continue;
            };
            let row = depth.min(MAX_DEPTH - 1) as usize;
            let t = match threads.iter().position(|(t, _)| *t == thread) {
                Some(i) => i,
                None => {
                    threads.push((thread, [None; MAX_DEPTH as usize]));
                    threads.len() - 1
                }
            };
            let lane = match threads[t].1[row] {
                Some(l) => l,
                None => {
                    let label = if row == 0 {
                        format!("thread {thread}")
                    } else {
                        format!("  nested {row}")
                    };
                    lanes.push(Lane::new(
                        LaneKind::Thread {
                            thread,
                            depth: row as u8,
                        },
                        label,
                        run,
                        shift,
                        Ids::Constructs(Vec::new()),
                    ));
                    threads[t].1[row] = Some(lanes.len() - 1);
                    lanes.len() - 1
                }
            };
            let (start, end) = span_on_clock(
                c.start_ns,
                c.end_ns().unwrap_or(run.process.span_ns.1),
                shift,
            );
            let tag = Tag::of_construct(c.class, c.kind);
            lanes[lane].push(Item::Construct(id), start, end, tag);
        }
        // The MPI calls and the host accesses the coherence check caught,
        // on the row the model's track names (the top one).
        let mpi = run
            .mpi_call_ids()
            .map(|(id, _)| (Item::MpiCall(id), Tag::Mpi));
        let accesses = run
            .host_access_ids()
            .map(|(id, a)| (Item::HostAccess(id), Tag::of_access(a.kind)));
        for (item, tag) in mpi.chain(accesses) {
            let Track::Thread { thread, depth } = run.track(item) else {
                continue;
            };
            let row = depth.min(MAX_DEPTH - 1);
            let lane = match lanes
                .iter()
                .position(|l| l.kind == LaneKind::Thread { thread, depth: row })
            {
                Some(l) => l,
                None => {
                    lanes.push(Lane::new(
                        LaneKind::Thread { thread, depth: row },
                        format!("thread {thread}"),
                        run,
                        shift,
                        Ids::Mixed(Vec::new()),
                    ));
                    lanes.len() - 1
                }
            };
            let (s, e) = run.span(item);
            let (start, end) = span_on_clock(s, e, shift);
            lanes[lane].push(item, start, end, tag);
        }
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
    fn device_lanes(run: &Arc<Run>, shift: i128) -> Vec<Lane> {
        let mut lanes: Vec<Lane> = Vec::new();
        // Device queues.
        let mut streams: Vec<Lane> = Vec::new();
        for (id, k) in run.kernels() {
            let Track::Queue { device, stream } = run.track(Item::Kernel(id)) else {
                continue;
            };
            let i = match streams
                .iter()
                .position(|l| l.kind == LaneKind::Stream { device, stream })
            {
                Some(i) => i,
                None => {
                    let label = if k.device_timed() {
                        format!("dev {device} queue {stream}")
                    } else {
                        format!("launches dev {device}")
                    };
                    streams.push(Lane::new(
                        LaneKind::Stream { device, stream },
                        label,
                        run,
                        shift,
                        Ids::Kernels(Vec::new()),
                    ));
                    streams.len() - 1
                }
            };
            let (start, end) = span_on_clock(k.start_ns, k.end_ns, shift);
            streams[i].push(Item::Kernel(id), start, end, Tag::Kernel);
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
            run,
            shift,
            Ids::Transfers(Vec::new()),
        );
        let mut down = Lane::new(
            LaneKind::Download,
            "device->host".into(),
            run,
            shift,
            Ids::Transfers(Vec::new()),
        );
        for (id, x) in run.transfers() {
            let (l, tag) = match run.track(Item::Transfer(id)) {
                Track::Copies(CopyDirection::Upload) => (&mut up, Tag::Upload),
                Track::Copies(CopyDirection::Download) => (&mut down, Tag::Download),
                _ => continue,
            };
            let (start, end) = span_on_clock(x.start_ns, x.end_ns, shift);
            l.push(Item::Transfer(id), start, end, tag);
        }
        // A run that moved nothing (host fallback) shows no copy lanes.
        lanes.extend([up, down].into_iter().filter(|l| !l.is_empty()));

        if !run.memsets().is_empty() {
            let mut m = Lane::new(
                LaneKind::Memset,
                "memsets".into(),
                run,
                shift,
                Ids::Memsets(Vec::new()),
            );
            for (id, x) in run.memsets() {
                let (start, end) = span_on_clock(x.start_ns, x.end_ns, shift);
                m.push(Item::Memset(id), start, end, Tag::Memset);
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

    /// The lane whose events cover the most time (the first of equals).
    pub fn busiest(&self) -> Option<usize> {
        let busy = |l: &Lane| l.busy_ns(l.first_start() as f64, l.last_end() as f64);
        let mut best: Option<(usize, f64)> = None;
        for (i, l) in self.lanes.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
            let b = busy(l);
            if best.map_or(true, |(_, m)| b > m) {
                best = Some((i, b));
            }
        }
        best.map(|(i, _)| i)
    }
}

#[cfg(test)]
#[path = "lanes_tests.rs"]
mod tests;
