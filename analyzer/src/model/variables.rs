//! The names of the host buffers the transfers moved: one policy for every
//! view (the findings, the summary, the exports and the timeline ask
//! [`Run::variable`] or [`Run::buffer_name`]).
//!
//! A transfer is named by the runtime's name for it; else its host buffer
//! by the runtime's name for another transfer of it, by the executable's
//! data object at its address (globals and statics), or by what the
//! source shows at the constructs that moved it, in that order.

use std::collections::HashMap;

use accprof_trace::CopyKind;

use crate::source::SourceSet;

use super::entities::*;
use super::index::SourceNames;
use super::names;
use super::run::Run;

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
    /// An `update` whose clause names one array names its transfers so
    /// before the sources' name for the buffer: the host may swap what the
    /// array points to.
    pub fn variable_from(&self, t: TransferId) -> Option<(&str, NameOrigin)> {
        self.variable_named(t, &self.buffer_names.source)
    }

    /// [`Run::variable_from`] with the sources' names in `learned` (the
    /// rules' own, for a run that did not learn them).
    pub(crate) fn variable_named<'a>(
        &'a self,
        t: TransferId,
        learned: &'a SourceNames,
    ) -> Option<(&'a str, NameOrigin)> {
        let x = self.transfer(t);
        if let Some(v) = x.variable {
            return Some((self.name(v), NameOrigin::Runtime));
        }
        let ptr = x.host_ptr();
        if let Some(n) = ptr.and_then(|p| self.recorded_name_from(p)) {
            return Some(n);
        }
        learned
            .transfers
            .get(&t)
            .or_else(|| ptr.and_then(|p| learned.buffers.get(&p)))
            .map(|n| (n.as_str(), NameOrigin::Source))
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
        self.recorded_name_from(ptr).or_else(|| {
            self.buffer_names
                .source
                .buffers
                .get(&ptr)
                .map(|n| (n.as_str(), NameOrigin::Source))
        })
    }

    /// The runtime's or the executable's name of the host buffer at `ptr`.
    fn recorded_name_from(&self, ptr: u64) -> Option<(&str, NameOrigin)> {
        if let Some(&v) = self.buffer_names.runtime.get(&ptr) {
            return Some((self.name(v), NameOrigin::Runtime));
        }
        self.data_names
            .get(&ptr)
            .map(|n| (n.as_str(), NameOrigin::Symbol))
    }

    /// The name of the host buffer at `ptr` ([`Run::buffer_name_from`]).
    pub fn buffer_name(&self, ptr: u64) -> Option<&str> {
        self.buffer_name_from(ptr).map(|(n, _)| n)
    }

    /// The start of the named buffer that starts last in `lo..=at` (the
    /// run's names, and `also`'s): the one that holds address `at` when
    /// the buffers from `lo` on lie side by side (as two arrays one clause
    /// mapped into one device block).
    pub fn named_start_within(
        &self,
        lo: u64,
        at: u64,
        also: Option<&HashMap<u64, String>>,
    ) -> Option<u64> {
        self.buffer_names
            .runtime
            .keys()
            .chain(self.data_names.keys())
            .chain(self.buffer_names.source.buffers.keys())
            .chain(also.into_iter().flat_map(HashMap::keys))
            .copied()
            .filter(|&p| p >= lo && p <= at)
            .max()
    }

    /// Learns the names the program's sources give the buffers no runtime
    /// name or symbol names (the clauses and code of the constructs that
    /// moved them), and names the summary's variables with them. Every
    /// view that reads sources asks this once, right after reading them;
    /// asked again, the names come from `sources` anew.
    pub fn learn_names(&mut self, sources: &SourceSet) {
        self.buffer_names.source =
            names::from_sources(self, sources, super::xfers::LARGE_XFER_BYTES);
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

    /// The variables device allocation `a` holds: the runtime's name for
    /// it, else (a block the runtime allocated without a name: GCC maps a
    /// construct's variables in one block) the variables its construct
    /// copied to the device, "u+unew", and the bytes of the block they do
    /// not fill ("A+8.03 MiB more": a `create`d array is not copied).
    /// None when nothing names them.
    pub fn alloc_name(&self, a: AllocId) -> Option<String> {
        let alloc = self.alloc(a);
        if let Some(v) = alloc.variable {
            return Some(self.name(v).to_string());
        }
        let mut names: Vec<&str> = Vec::new();
        let mut buffers: Vec<(u64, u64)> = Vec::new();
        for &t in self.transfers_of(alloc.construct?) {
            let x = self.transfer(t);
            if x.kind != CopyKind::HostToDevice {
                continue;
            }
            let Some(n) = self.variable(t) else { continue };
            names.push(n);
            let key = (x.host_ptr().unwrap_or(u64::from(t.number())), x.bytes);
            if !buffers.contains(&key) {
                buffers.push(key);
            }
        }
        names.sort_unstable();
        names.dedup();
        if names.is_empty() {
            return None;
        }
        let named: u64 = buffers.iter().map(|b| b.1).sum();
        // The runtime's own slots (pointers, sizes) fill a few bytes more.
        let rest = alloc.bytes.saturating_sub(named);
        let more = if rest > 4096 {
            format!("+{} more", crate::units::bytes(rest))
        } else {
            String::new()
        };
        Some(format!("{}{more}", names.join("+")))
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
