//! The names of the host buffers the transfers moved: one policy for every
//! view (the findings, the summary, the exports and the timeline ask
//! [`Run::variable`] or [`Run::buffer_name`]).
//!
//! A transfer is named by the runtime's name for it; else its host buffer
//! by the runtime's name for another transfer of it, by the executable's
//! data object at its address (globals and statics), or by what the
//! source shows at the constructs that moved it, in that order.

use std::collections::HashMap;

use super::entities::*;
use super::run::Run;
use crate::source::SourceSet;

/// Where a variable's name comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NameOrigin {
    /// The runtime named the variable (`var_name` of its event).
    Runtime,
    /// The executable's symbol table: the data object at the address.
    Symbol,
    /// The clauses and code of the construct that moved it.
    Source,
}

impl Run {
    /// The variable transfer `t` moved, and where its name comes from:
    /// the runtime's name for the transfer, else the name of its host
    /// buffer ([`Run::buffer_name_from`]). None when nothing names it.
    pub fn variable_from(&self, t: TransferId) -> Option<(&str, NameOrigin)> {
        let x = self.transfer(t);
        match x.variable {
            Some(v) => Some((self.name(v), NameOrigin::Runtime)),
            None => self.buffer_name_from(x.host_ptr()?),
        }
    }

    /// The variable transfer `t` moved ([`Run::variable_from`]).
    pub fn variable(&self, t: TransferId) -> Option<&str> {
        self.variable_from(t).map(|(n, _)| n)
    }

    /// The name of the host buffer at `ptr`, and where it comes from: the
    /// runtime's name for a transfer of it, else the executable's data
    /// object at that address, else what the source shows (once
    /// [`Run::learn_names`] read it).
    pub fn buffer_name_from(&self, ptr: u64) -> Option<(&str, NameOrigin)> {
        let b = &self.buffer_names;
        if let Some(&v) = b.runtime.get(&ptr) {
            return Some((self.name(v), NameOrigin::Runtime));
        }
        if let Some(n) = self.data_names.get(&ptr) {
            return Some((n, NameOrigin::Symbol));
        }
        b.source.get(&ptr).map(|n| (n.as_str(), NameOrigin::Source))
    }

    /// The name of the host buffer at `ptr` ([`Run::buffer_name_from`]).
    pub fn buffer_name(&self, ptr: u64) -> Option<&str> {
        self.buffer_name_from(ptr).map(|(n, _)| n)
    }

    /// Learns the names the program's sources give the buffers no runtime
    /// name or symbol names (the clauses and code of the constructs that
    /// moved them), and names the summary's variables with them. Every
    /// view that reads sources asks this once, right after reading them;
    /// asked again, the names come from `sources` anew.
    pub fn learn_names(&mut self, sources: &SourceSet) {
        self.buffer_names.source = crate::rules::names::from_sources(self, sources);
        self.buffer_names.learned = true;
        self.name_summary();
    }

    /// The buffers' names from the runtime and the symbols, each buffer
    /// once (what the sources' names are inferred around).
    pub(crate) fn recorded_buffer_names(&self) -> HashMap<u64, String> {
        let mut names: HashMap<u64, String> = self
            .buffer_names
            .runtime
            .iter()
            .map(|(&p, &v)| (p, self.name(v).to_string()))
            .collect();
        for (&p, n) in &self.data_names {
            names.entry(p).or_insert_with(|| n.clone());
        }
        names
    }

    /// Whether [`Run::learn_names`] was asked.
    pub fn names_learned(&self) -> bool {
        self.buffer_names.learned
    }

    /// Each buffer's runtime name, from the transfers (once they are
    /// complete), and the summary's variables named as the model names
    /// them.
    pub(super) fn derive_names(&mut self) {
        let mut runtime = HashMap::new();
        for r in &self.tables.transfers {
            let s = self.tables.transfer_shapes.get(r.shape);
            if let (Some(v), true) = (s.variable, s.host_ptr != u64::MAX) {
                runtime.entry(s.host_ptr).or_insert(v);
            }
        }
        self.buffer_names.runtime = runtime;
        self.name_summary();
    }

    /// Names the summary's variables as [`Run::buffer_name`] names them.
    pub(crate) fn name_summary(&mut self) {
        let mut summary = std::mem::take(&mut self.summary);
        // The model names them: the summary needs no module of its own.
        summary.executable = None;
        summary.name_buffers(|p| self.buffer_name(p));
        self.summary = summary;
    }
}
