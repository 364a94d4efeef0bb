//! What the timeline shows, made once when the traces are opened: each
//! run's model, sources and lanes on one clock ([`Session::new`], enough
//! for the first frame), then its findings, summary by line and finding
//! marks ([`Session::analyze`], on a thread of its own while the screen is
//! up). Nothing else changes while the screen is up.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use accprof_analyzer::analysis;
use accprof_analyzer::findings::Analysis;
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::{ConstructId, Run, SiteId};

use crate::lanes::{Item, RunLanes};

/// One line of the summary by source line.
#[derive(Debug, Clone)]
pub struct LineRow {
    pub file: String,
    pub function: String,
    pub line: Option<u32>,
    /// What the line costs (device time, else host time: the summary's rank).
    pub time_ns: u64,
    /// Constructs reached and API routines called there.
    pub count: u64,
    /// Bytes its host<->device transfers moved.
    pub bytes: u64,
}

/// What the rules and the summary say of a run: made after the first frame.
pub struct Derived {
    pub analysis: Analysis,
    pub lines: Vec<LineRow>,
    /// Per lane, the positions of the events some finding names, sorted.
    pub marks: Vec<Vec<u32>>,
}

/// One trace: a group of lanes.
pub struct Group {
    pub path: PathBuf,
    /// "rank 2  r2.trace" for an MPI rank, else the trace's file name.
    pub label: String,
    /// "rank 2" for an MPI rank, else the trace's file name.
    pub short: String,
    /// The lane busy the longest, which stands for the group in one row.
    pub busiest: Option<usize>,
    pub run: Arc<Run>,
    pub sources: SourceSet,
    pub lanes: RunLanes,
    /// Added to the run's times to put them on the common clock.
    pub shift: i128,
    /// Set once by [`Group::analyze`].
    derived: OnceLock<Derived>,
    /// Each site's line, as an index into `line_keys`.
    line_of_site: HashMap<SiteId, u32>,
    line_keys: Vec<(String, Option<u32>)>,
}

/// All traces, aligned on a common clock whose 0 is the earliest start.
pub struct Session {
    pub groups: Vec<Group>,
    /// The first start and the last end of the events of all lanes, on
    /// the common clock.
    pub span: (u64, u64),
}

/// A finding of one group, in the ranked list of all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FindingRef {
    pub group: usize,
    pub index: usize,
}

impl Session {
    /// Builds the session from loaded runs (each with the path it came
    /// from); sources are looked for as `accprof analyze` does.
    pub fn new(mut runs: Vec<(PathBuf, Run)>, source_dirs: &[PathBuf]) -> Session {
        // MPI ranks by number (a shell's glob gives r10 before r2); other
        // traces after them, as given.
        runs.sort_by_key(|(_, r)| (r.process.header.rank.is_none(), r.process.header.rank));
        // The common clock: the model's Unix time, 0 at the earliest
        // first event.
        let origin = runs
            .iter()
            .map(|(_, r)| r.unix_ns(r.process.span_ns.0))
            .min()
            .unwrap_or(0);
        let several = runs.len() > 1;
        let groups: Vec<Group> = runs
            .into_iter()
            .map(|(path, run)| {
                let shift = run.unix_ns(0) - origin;
                Group::new(path, run, source_dirs, shift, several)
            })
            .collect();
        let mut span = (u64::MAX, 0u64);
        for g in &groups {
            for l in g.lanes.lanes.iter().filter(|l| !l.is_empty()) {
                span.0 = span.0.min(l.first_start());
                span.1 = span.1.max(l.last_end());
            }
        }
        // A run without events shows its whole span.
        if span.0 > span.1 {
            for g in &groups {
                let (a, b) = g.run.process.span_ns;
                span.0 = span.0.min(g.at(a));
                span.1 = span.1.max(g.at(b));
            }
        }
        if span.0 > span.1 {
            span = (0, 1);
        }
        Session { groups, span }
    }

    /// Runs the rules and the summary of every group (where not done yet).
    pub fn analyze(&self) {
        for g in &self.groups {
            g.analyze();
        }
    }

    /// [`Session::new`] and [`Session::analyze`].
    pub fn open(runs: Vec<(PathBuf, Run)>, source_dirs: &[PathBuf]) -> Session {
        let s = Session::new(runs, source_dirs);
        s.analyze();
        s
    }

    /// Whether every group is analyzed.
    pub fn analyzed(&self) -> bool {
        self.groups.iter().all(|g| g.derived().is_some())
    }

    /// The findings of the analyzed groups in the analyzer's rank order
    /// ([`analysis::rank_together`]).
    pub fn ranked_findings(&self) -> Vec<FindingRef> {
        let analyses = self.groups.iter().map(|g| g.derived().map(|d| &d.analysis));
        analysis::rank_together(analyses)
            .into_iter()
            .map(|(group, index)| FindingRef { group, index })
            .collect()
    }

    pub fn heap_bytes(&self) -> usize {
        self.groups.iter().map(|g| g.lanes.heap_bytes()).sum()
    }
}

impl Group {
    fn new(
        path: PathBuf,
        mut run: Run,
        source_dirs: &[PathBuf],
        shift: i128,
        several: bool,
    ) -> Group {
        let sources = SourceSet::load_with(&run, source_dirs, &[], &|p: &Path| {
            std::fs::read_to_string(p)
        });
        run.learn_names(&sources);
        let run = Arc::new(run);
        let lanes = RunLanes::build(&run, shift);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let (label, short) = match run.process.header.rank {
            Some(r) if several => (format!("rank {r}  {name}"), format!("rank {r}")),
            _ => (name.clone(), name),
        };
        let busiest = lanes.busiest();
        let mut line_keys: Vec<(String, Option<u32>)> = Vec::new();
        let mut key_of: HashMap<(String, Option<u32>), u32> = HashMap::new();
        let mut line_of_site = HashMap::new();
        for (id, s) in run.sites() {
            let key = (s.file.clone(), s.line);
            let n = *key_of.entry(key.clone()).or_insert_with(|| {
                line_keys.push(key);
                line_keys.len() as u32 - 1
            });
            line_of_site.insert(id, n);
        }
        Group {
            path,
            label,
            short,
            busiest,
            run,
            sources,
            lanes,
            shift,
            derived: OnceLock::new(),
            line_of_site,
            line_keys,
        }
    }

    /// The findings, the summary by line and the finding marks; None until
    /// [`Group::analyze`] is done.
    pub fn derived(&self) -> Option<&Derived> {
        self.derived.get()
    }

    /// Finding `i`, once the group is analyzed.
    pub fn finding(&self, i: usize) -> Option<&accprof_analyzer::findings::Finding> {
        self.derived()?.analysis.findings.get(i)
    }

    /// Runs the rules and the summary (once: a second call does nothing).
    pub fn analyze(&self) {
        if self.derived.get().is_some() {
            return;
        }
        let analysis = analysis::analyze(&self.run, &self.sources, &Options::default());
        let lines = line_rows(&self.run);
        let mut marks = vec![Vec::new(); self.lanes.lanes.len()];
        for f in &analysis.findings {
            for (lane, pos) in self.positions_of(&f.subjects) {
                marks[lane].push(pos);
            }
        }
        for m in &mut marks {
            m.sort_unstable();
            m.dedup();
        }
        let _ = self.derived.set(Derived {
            analysis,
            lines,
            marks,
        });
    }

    /// A time of the run on the common clock.
    pub fn at(&self, t: u64) -> u64 {
        crate::lanes::on_clock(t, self.shift)
    }

    /// The lanes and positions of a finding's events: its kernels and
    /// transfers, and its constructs when it names neither.
    pub fn positions_of(&self, s: &accprof_analyzer::findings::Subjects) -> Vec<(usize, u32)> {
        let mut items: Vec<Item> = Vec::new();
        items.extend(s.kernels.iter().map(|&k| Item::Kernel(k)));
        items.extend(s.transfers.iter().map(|&t| Item::Transfer(t)));
        if items.is_empty() {
            items.extend(s.constructs.iter().map(|&c| Item::Construct(c)));
        }
        self.locate(&items)
    }

    /// The lanes and positions of `items` (those shown on some lane).
    pub fn locate(&self, items: &[Item]) -> Vec<(usize, u32)> {
        items
            .iter()
            .filter_map(|&it| {
                self.lanes
                    .lanes
                    .iter()
                    .enumerate()
                    .find_map(|(l, lane)| lane.find(it).map(|p| (l, p)))
            })
            .collect()
    }

    /// The construct an event belongs to.
    pub fn construct_of(&self, item: Item) -> Option<ConstructId> {
        match item {
            Item::Construct(c) => Some(c),
            Item::Kernel(k) => self.run.kernel(k).construct,
            Item::Transfer(t) => self.run.transfer(t).construct,
            Item::Memset(m) => self.run.memset(m).construct,
            Item::MpiCall(_) => None,
            // The compute construct that made the device copy newer, or
            // the download nobody read.
            Item::HostAccess(a) => self.run.host_access(a).construct,
        }
    }

    /// The source line an event is reported at, as a key equal for equal
    /// lines ([`Group::line_key`] reads it back).
    pub fn line_of(&self, item: Item) -> Option<u32> {
        let site = self.site_of(item)?;
        self.line_of_site.get(&site).copied()
    }

    /// The source site an event is shown at: a host access's own
    /// ([`Run::access_site`]), an MPI call's ([`Run::mpi_site`]), else its
    /// construct's line.
    pub fn site_of(&self, item: Item) -> Option<SiteId> {
        match item {
            Item::HostAccess(a) => self.run.access_site(a),
            Item::MpiCall(m) => self.run.mpi_site(m),
            _ => self.construct_of(item).map(|c| self.run.line_site(c)),
        }
    }

    pub fn line_key(&self, key: u32) -> Option<&(String, Option<u32>)> {
        self.line_keys.get(key as usize)
    }

    /// The key of `file:line` as [`Group::line_of`] gives it.
    pub fn key_of_line(&self, file: &str, line: Option<u32>) -> Option<u32> {
        self.line_keys
            .iter()
            .position(|(f, l)| f == file && *l == line)
            .map(|p| p as u32)
    }

    /// The line keys whose `file:line` text matches `pattern`: "154",
    /// ":154", "laplace_bad.c:154" or a file name.
    pub fn keys_matching(&self, pattern: &str) -> Vec<u32> {
        let (file, line) = match pattern.rsplit_once(':') {
            Some((f, l)) => (f, l.parse::<u32>().ok()),
            None => match pattern.parse::<u32>() {
                Ok(n) => ("", Some(n)),
                Err(_) => (pattern, None),
            },
        };
        self.line_keys
            .iter()
            .enumerate()
            .filter(|(_, (f, l))| {
                (file.is_empty() || f.ends_with(file)) && (line.is_none() || *l == line)
            })
            .map(|(i, _)| i as u32)
            .collect()
    }

    /// The kernel name or variable of an event, for search.
    pub fn name_of(&self, item: Item) -> Option<&str> {
        match item {
            Item::Kernel(k) => Some(self.run.name(self.run.kernel(k).name)),
            Item::Transfer(t) => self.run.variable(t),
            Item::MpiCall(m) => Some(&self.run.mpi_call(m).routine),
            Item::HostAccess(a) => self.run.access_variable(a),
            _ => None,
        }
    }
}

/// The summary by source line, in the summary's own numbers.
fn line_rows(run: &Run) -> Vec<LineRow> {
    let summary = run.summary();
    let mut rows = Vec::new();
    for f in &summary.functions {
        for l in &f.lines {
            let reached: u64 = l.reached.values().map(|s| s.count).sum();
            let calls: u64 = l.api_calls.values().map(|s| s.count).sum();
            rows.push(LineRow {
                file: f.file.clone(),
                function: f.function.clone(),
                line: l.line,
                time_ns: l.cost_ns(),
                count: reached + calls,
                bytes: l.transfers.iter().map(|t| t.bytes).sum(),
            });
        }
    }
    rows
}
