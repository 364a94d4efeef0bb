//! Findings: what the rules conclude about a run, with the evidence that
//! supports each conclusion and a proposal to act on it. The types only:
//! [`crate::analysis`] runs the rules and ranks what they find.
//!
//! A finding never claims more than its evidence shows. Where a rule needs
//! data the run did not collect (content hashes, CUPTI), it either says so in
//! a note of the [`Analysis`] or marks the finding [`Confidence::Likely`]
//! with the reason.

use serde::Serialize;

use crate::model::{AllocId, ConstructId, KernelId, SiteId, TransferId};
use crate::patch::Edit;

/// What a finding is about (reports group and filter by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// The host and device copies of data out of step: the program
    /// computes with stale values (C1) or without the host's writes (C2).
    /// Errors: they rank before every performance finding.
    Correctness,
    /// Host <-> device transfers that could be avoided (D1-D6, U1, P1,
    /// C3).
    DataMovement,
    /// Device allocations (A1, A2).
    Allocation,
    /// How host memory is set up for transfers (S1).
    Memory,
    /// Host and device waiting on each other, and the order of queues (S2, S3, S4).
    Synchronization,
    /// Launch shapes and launch costs (L1-L5).
    Launch,
}

impl Category {
    /// True for the categories that are about moving or placing data.
    pub fn is_data_movement(self) -> bool {
        matches!(self, Category::DataMovement | Category::Allocation)
    }

    /// True for the categories whose findings are errors, not costs.
    pub fn is_error(self) -> bool {
        matches!(self, Category::Correctness)
    }
}

/// How strong the evidence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Shown by the trace: measured counts and times, full-content hashes,
    /// or the absence of any kernel in a window.
    Certain,
    /// Indicated but not proven (e.g. sampled hashes); the finding says why.
    Likely,
}

/// A place the finding is about: the model's site, and its text as the
/// finding shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    /// What this place is: "construct", "host loop", "upload", "download", ...
    pub role: String,
    /// The site this place is; None for a place the run has no site for
    /// (a host loop or a directive found in the source, see
    /// [`Location::source_line`]) or when the run did not say where.
    #[serde(serialize_with = "index::opt")]
    pub site: Option<SiteId>,
    /// The place's text, rendered once for display (from the site, or from
    /// the source for a place the run has no site for).
    pub file: String,
    pub line: Option<u32>,
    pub function: String,
    pub variable: Option<String>,
    /// Module and offset when there is no line (for the user to look up).
    pub address: Option<String>,
}

impl Location {
    /// Site `site` of `run` as the place of a finding, in `role`; with an
    /// unknown place when the run did not say where.
    pub fn of_site(
        run: &crate::Run,
        role: &str,
        site: Option<SiteId>,
        variable: Option<String>,
    ) -> Location {
        let unknown;
        let s = match site {
            Some(id) => run.site(id),
            None => {
                unknown = crate::model::Site::unknown();
                &unknown
            }
        };
        Location {
            role: role.to_string(),
            site,
            file: s.file.clone(),
            line: s.line,
            function: s.function.clone(),
            variable,
            address: s.address.as_ref().map(|(m, off)| format!("{m}+{off:#x}")),
        }
    }

    /// Another line of the same source file and function: a place that only
    /// the source shows (the host loop around a construct, a directive the
    /// runtime did not report), which is no site of the run.
    pub fn source_line(mut self, line: u32) -> Location {
        self.site = None;
        self.line = Some(line);
        self.address = None;
        self
    }

    /// `file:line` (or the address when there is no line).
    pub fn place(&self) -> String {
        match (self.line, &self.address) {
            (Some(l), _) => format!("{}:{l}", self.file),
            (None, Some(a)) => format!("{} ({a})", self.file),
            (None, None) => self.file.clone(),
        }
    }
}

/// One measured or derived fact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Field {
    pub name: String,
    #[serde(flatten)]
    pub value: Value,
}

/// A value with its unit, so reports can format it and JSON stays typed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "unit", content = "value", rename_all = "snake_case")]
pub enum Value {
    Count(u64),
    Bytes(u64),
    Ns(u64),
    /// A content hash, as hex.
    Hash(String),
    Ratio(f64),
    /// A bandwidth, in bytes per second.
    BytesPerSec(f64),
    Text(String),
}

impl Value {
    pub fn hash(h: u64) -> Value {
        Value::Hash(format!("{h:016x}"))
    }
}

/// Structured facts plus the sentences that explain them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Evidence {
    pub fields: Vec<Field>,
    pub text: Vec<String>,
}

impl Evidence {
    pub fn field(&mut self, name: &str, value: Value) -> &mut Self {
        self.fields.push(Field {
            name: name.to_string(),
            value,
        });
        self
    }

    pub fn say(&mut self, line: impl Into<String>) -> &mut Self {
        self.text.push(line.into());
        self
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| &f.value)
    }

    pub fn count(&self, name: &str) -> Option<u64> {
        match self.get(name) {
            Some(Value::Count(c)) => Some(*c),
            _ => None,
        }
    }
}

/// What to do about a finding.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Proposal {
    pub text: String,
    /// The directive to write, as it would appear in the source.
    pub directive: Option<String>,
    /// Source edits that implement the proposal (empty when the source
    /// could not be read or the change is not safe to make mechanically).
    pub edits: Vec<Edit>,
    /// Unified diff of `edits` alone, filled by [`crate::analysis::analyze`].
    pub patch: Option<String>,
    /// Why there is no patch, when there is none.
    pub no_patch: Option<String>,
    /// The `accprof tune` command line that measures the alternatives,
    /// for findings about launch shapes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tune: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Catalogue id: "D6", "L3", ... (`rule` in every export, as in the
    /// findings table's CSV).
    #[serde(rename = "rule")]
    pub id: &'static str,
    pub title: String,
    pub category: Category,
    pub confidence: Confidence,
    /// Time the problem costs in this run; None when the run cannot say.
    pub cost_ns: Option<u64>,
    /// Time the proposal could save; None when it cannot be estimated.
    pub saving_ns: Option<u64>,
    pub locations: Vec<Location>,
    /// The entities of the run the finding is about.
    pub subjects: Subjects,
    pub evidence: Evidence,
    pub proposal: Proposal,
    /// The transfers whose time `saving_ns` counts, so that overlapping
    /// findings are not added twice.
    #[serde(serialize_with = "index::many")]
    pub saved_transfers: Vec<TransferId>,
    /// The allocations (with their frees) whose host time `saving_ns`
    /// counts, measured where the trace has the driver's timings.
    #[serde(serialize_with = "index::many", skip_serializing_if = "Vec::is_empty")]
    pub saved_allocs: Vec<AllocId>,
    /// Set when ranked ([`crate::analysis::rank`]), for a finding whose
    /// saving is not estimated: the cost of the cheapest finding with an
    /// estimated saving over some of the same transfers. It ranks right
    /// after that one, whatever its own cost: what the user can act on
    /// comes first.
    #[serde(skip)]
    pub ranks_after_ns: Option<u64>,
}

impl Finding {
    /// A finding about the CUDA start-up itself (R2): its cost is part of
    /// the start-up, not of the time without it.
    pub fn is_startup(&self) -> bool {
        self.id == "R2"
    }

    pub fn new(id: &'static str, category: Category, title: impl Into<String>) -> Finding {
        Finding {
            id,
            title: title.into(),
            category,
            confidence: Confidence::Certain,
            cost_ns: None,
            saving_ns: None,
            locations: Vec::new(),
            subjects: Subjects::default(),
            evidence: Evidence::default(),
            proposal: Proposal::default(),
            saved_transfers: Vec::new(),
            saved_allocs: Vec::new(),
            ranks_after_ns: None,
        }
    }
}

/// The entities of a run a finding is about, by handle, so that a view (the
/// timeline, an export) can go from the finding to its events. Each list is
/// in the run's order, without repeats. In JSON a handle is its entity's
/// index in the run's table of that kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Subjects {
    /// The sites of the finding's locations.
    #[serde(serialize_with = "index::many")]
    pub sites: Vec<SiteId>,
    /// The constructs the finding speaks of, and those of its kernels,
    /// transfers and allocations.
    #[serde(serialize_with = "index::many")]
    pub constructs: Vec<ConstructId>,
    #[serde(serialize_with = "index::many")]
    pub kernels: Vec<KernelId>,
    /// The transfers the finding speaks of, saved or not.
    #[serde(serialize_with = "index::many")]
    pub transfers: Vec<TransferId>,
    #[serde(serialize_with = "index::many")]
    pub allocs: Vec<AllocId>,
}

impl Subjects {
    /// Adds what the finding's locations and entities imply (their sites,
    /// the constructs of its kernels, transfers and allocations), then
    /// orders each list and drops repeats.
    pub fn complete(&mut self, run: &crate::Run, locations: &[Location]) {
        self.sites.extend(locations.iter().filter_map(|l| l.site));
        let owners = self
            .kernels
            .iter()
            .map(|&k| run.kernel(k).construct)
            .chain(self.transfers.iter().map(|&t| run.transfer(t).construct))
            .chain(self.allocs.iter().map(|&a| run.alloc(a).construct));
        let owners: Vec<ConstructId> = owners.flatten().collect();
        self.constructs.extend(owners);
        fn tidy<T: Ord>(v: &mut Vec<T>) {
            v.sort_unstable();
            v.dedup();
        }
        tidy(&mut self.sites);
        tidy(&mut self.constructs);
        tidy(&mut self.kernels);
        tidy(&mut self.transfers);
        tidy(&mut self.allocs);
    }
}

/// Handles in JSON: their entities' indices in the run's tables.
mod index {
    use serde::Serializer;

    use crate::model::{AllocId, ConstructId, KernelId, SiteId, TransferId};

    pub(super) trait Handle: Copy {
        fn position(self) -> usize;
    }

    macro_rules! handles {
        ($($t:ty),*) => {$(
            impl Handle for $t {
                fn position(self) -> usize {
                    self.index()
                }
            }
        )*};
    }
    handles!(SiteId, ConstructId, KernelId, TransferId, AllocId);

    pub(super) fn many<H: Handle, S: Serializer>(v: &[H], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|h| h.position()))
    }

    pub(super) fn opt<H: Handle, S: Serializer>(v: &Option<H>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(h) => s.serialize_some(&h.position()),
            None => s.serialize_none(),
        }
    }
}

/// The findings of one run, ranked, with what could not be checked.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    pub findings: Vec<Finding>,
    /// Rules that could not run or were limited, and why; missing sources.
    pub notes: Vec<String>,
    /// Wall time the trace covers.
    pub wall_ns: u64,
    /// Saving of all findings together, each transfer counted once.
    pub total_saving_ns: u64,
    /// CUDA start-up and code loading
    /// ([`crate::ledger::Ledger::startup_ns`]): part of `wall_ns`.
    pub startup_ns: u64,
    /// Whether the run compiled its device code at start-up
    /// ([`crate::ledger::Ledger::paid_jit`]); None without driver timings.
    pub paid_jit: Option<bool>,
}

impl Analysis {
    /// The wall time less the start-up.
    pub fn wall_without_startup_ns(&self) -> u64 {
        self.wall_ns.saturating_sub(self.startup_ns)
    }

    /// Whether the start-up is a large enough part of the wall time that
    /// shares of the wall time without it say more: a tenth of it or more.
    pub fn startup_weighs(&self) -> bool {
        self.startup_ns > 0 && self.startup_ns.saturating_mul(10) >= self.wall_ns
    }

    /// The findings whose saving is estimated (measured as nothing
    /// included).
    pub fn estimated(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.saving_ns.is_some())
            .count()
    }

    /// Findings about data movement and allocation.
    pub fn data_movement(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.category.is_data_movement())
    }
}
