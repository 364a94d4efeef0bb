//! Findings: what the rules conclude about a run, with the evidence that
//! supports each conclusion and a proposal to act on it. The types only:
//! [`crate::analysis`] runs the rules and ranks what they find.
//!
//! A finding never claims more than its evidence shows. Where a rule needs
//! data the run did not collect (content hashes, CUPTI), it either says so in
//! a note of the [`Analysis`] or marks the finding [`Confidence::Likely`]
//! with the reason.

use serde::Serialize;

use crate::model::TransferId;
use crate::patch::Edit;

/// What a finding is about (reports group and filter by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Host <-> device transfers that could be avoided (D1-D6, U1, P1).
    DataMovement,
    /// Device allocations (A1, A2).
    Allocation,
    /// How host memory is set up for transfers (S1).
    Memory,
    /// Host and device waiting on each other, and the order of queues (S2, S3, S4).
    Synchronization,
    /// Launch shapes (L3).
    Launch,
}

impl Category {
    /// True for the categories that are about moving or placing data.
    pub fn is_data_movement(self) -> bool {
        matches!(self, Category::DataMovement | Category::Allocation)
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

/// A place the finding is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    /// What this place is: "construct", "host loop", "upload", "download", ...
    pub role: String,
    pub file: String,
    pub line: Option<u32>,
    pub function: String,
    pub variable: Option<String>,
    /// Module and offset when there is no line (for the user to look up).
    pub address: Option<String>,
}

impl Location {
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
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Catalogue id: "D6", "L3", ...
    pub id: &'static str,
    pub title: String,
    pub category: Category,
    pub confidence: Confidence,
    /// Time the problem costs in this run; None when the run cannot say.
    pub cost_ns: Option<u64>,
    /// Time the proposal could save; None when it cannot be estimated.
    pub saving_ns: Option<u64>,
    pub locations: Vec<Location>,
    pub evidence: Evidence,
    pub proposal: Proposal,
    /// The transfers whose time `saving_ns` counts, so that overlapping
    /// findings are not added twice.
    #[serde(skip)]
    pub saved_transfers: Vec<TransferId>,
}

impl Finding {
    pub fn new(id: &'static str, category: Category, title: impl Into<String>) -> Finding {
        Finding {
            id,
            title: title.into(),
            category,
            confidence: Confidence::Certain,
            cost_ns: None,
            saving_ns: None,
            locations: Vec::new(),
            evidence: Evidence::default(),
            proposal: Proposal::default(),
            saved_transfers: Vec::new(),
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
}

impl Analysis {
    /// Findings about data movement and allocation.
    pub fn data_movement(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.category.is_data_movement())
    }
}
