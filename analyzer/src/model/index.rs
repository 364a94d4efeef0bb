//! Indices decided once while the run is built: each construct's line,
//! and what each construct caused.

use std::collections::HashMap;

use accprof_trace::{BufferHash, ConstructKind};

use super::entities::*;

/// Each construct's [`Run::line_site`], decided in start order: a
/// nested construct (the implicit data part of a compute construct, what
/// the runtime does inside an API routine) at its top-level construct's
/// site; the exit of a structured `data` or `host_data` region at the
/// site of its entry, with its entry's kind (GCC reports the region's end
/// from the last or first line of its body, PGI at the pragma: the pragma
/// line is the one users look for; libgomp names a `host_data` region's
/// exit `data`); any other construct at its own site. Per thread, an exit
/// closes the innermost open region.
#[derive(Debug, Clone, Default)]
pub(crate) struct LineSites {
    /// Open structured regions per thread (line site and kind), innermost
    /// last.
    pub(super) open: HashMap<u32, Vec<(SiteId, Option<ConstructKind>)>>,
}

impl LineSites {
    /// The line site and kind of construct `c`, started now; `top_line`
    /// is its top-level construct's line site when it is nested.
    pub(crate) fn assign(
        &mut self,
        c: &Construct,
        top_line: Option<SiteId>,
    ) -> (SiteId, Option<ConstructKind>) {
        if c.parent.is_some() {
            return (top_line.unwrap_or(c.site), c.kind);
        }
        if !matches!(c.kind, Some(ConstructKind::Data | ConstructKind::HostData)) {
            return (c.site, c.kind);
        }
        match c.class {
            ConstructClass::EnterData => {
                self.open
                    .entry(c.thread)
                    .or_default()
                    .push((c.site, c.kind));
                (c.site, c.kind)
            }
            ConstructClass::ExitData => match self.open.get_mut(&c.thread).and_then(|s| s.pop()) {
                Some(entry) => entry,
                None => (c.site, c.kind),
            },
            _ => (c.site, c.kind),
        }
    }
}

/// The kernels, transfers, allocations, memsets and launches of every
/// construct.
#[derive(Debug, Clone, Default)]
pub(crate) struct Related {
    pub(super) kernels: ByConstruct<KernelId>,
    pub(super) transfers: ByConstruct<TransferId>,
    pub(super) allocs: ByConstruct<AllocId>,
    pub(super) memsets: ByConstruct<MemsetId>,
    pub(super) launches: ByConstruct<u32>,
}

/// Entities of one kind grouped by the construct they belong to: their
/// handles ordered by construct, then as the run orders them, beside
/// their owners; a construct's are found by binary search on the owners
/// (eight bytes an entity, nothing per construct).
#[derive(Debug, Clone)]
pub(super) struct ByConstruct<I> {
    pub(super) ids: Vec<I>,
    pub(super) owners: Vec<ConstructId>,
}

impl<I> Default for ByConstruct<I> {
    fn default() -> Self {
        ByConstruct {
            ids: Vec::new(),
            owners: Vec::new(),
        }
    }
}

impl<I: Copy> ByConstruct<I> {
    pub(super) fn new<T>(
        entities: &[T],
        id: fn(usize) -> I,
        owner: impl Fn(&T) -> Option<ConstructId>,
    ) -> Self {
        // Entities in their owners' order (the usual case): the index is
        // made in one pass, with no pairs to sort. Room is asked for every
        // entity: what no owner takes is never touched, so it takes no
        // memory (shrinking would copy the index where the allocator
        // serves the smaller size from its heap).
        let mut ids = Vec::with_capacity(entities.len());
        let mut owners = Vec::with_capacity(entities.len());
        let mut last = None;
        let in_order = entities.iter().enumerate().all(|(i, x)| {
            let Some(c) = owner(x) else {
                return true;
            };
            if last.is_some_and(|l| l > c) {
                return false;
            }
            last = Some(c);
            ids.push(id(i));
            owners.push(c);
            true
        });
        if in_order {
            return ByConstruct { ids, owners };
        }
        drop((ids, owners));
        let mut owned: Vec<(ConstructId, u32)> = entities
            .iter()
            .enumerate()
            .filter_map(|(i, x)| owner(x).map(|c| (c, i as u32)))
            .collect();
        owned.sort_unstable();
        let ids: Vec<I> = owned.iter().map(|&(_, i)| id(i as usize)).collect();
        let owners: Vec<ConstructId> = owned.into_iter().map(|(c, _)| c).collect();
        ByConstruct { ids, owners }
    }

    /// The handles owned by `c`. The search starts where `c` would be if
    /// the owners were spread evenly and gallops from there: constant
    /// time on the usual tables (a kernel or two per compute construct),
    /// logarithmic at worst.
    pub(super) fn of(&self, c: ConstructId) -> &[I] {
        let v = &self.owners;
        let n = v.len();
        let Some(last) = v.last() else {
            return &[];
        };
        // Handles and counts fit in 32 bits, so the product fits in 64
        // (a 128-bit division is a call where this is one instruction).
        let span = last.index() as u64 + 1;
        let guess = (c.index() as u64)
            .checked_mul(n as u64)
            .map_or(n, |p| (p / span).min(n as u64) as usize);
        // The guess is mostly the very place (one entity per owner, owners
        // evenly spread): then there is nothing to search.
        let lo = if v.get(guess) == Some(&c) && (guess == 0 || v[guess - 1] < c) {
            guess
        } else {
            lower_bound(v, c, guess)
        };
        let len = v[lo..].iter().take_while(|&&o| o == c).count();
        &self.ids[lo..lo + len]
    }
}

/// The first position in sorted `v` whose owner is not below `c`,
/// galloping from `guess`.
pub(super) fn lower_bound(v: &[ConstructId], c: ConstructId, guess: usize) -> usize {
    let n = v.len();
    let g = guess.min(n);
    let (mut lo, mut hi, mut step) = (g, g, 1);
    if g < n && v[g] < c {
        // The answer lies right of `g`.
        lo = g + 1;
        hi = lo;
        while hi < n && v[hi] < c {
            lo = hi + 1;
            hi = (hi + step).min(n);
            step *= 2;
        }
    } else {
        // The answer is `g` or left of it.
        while lo > 0 && v[lo - 1] >= c {
            hi = lo - 1;
            lo = lo.saturating_sub(step);
            step *= 2;
        }
    }
    lo + v[lo..hi].partition_point(|&o| o < c)
}

/// The collector's hashing spans of `hashes` and its other work `own`
/// (the coherence check's), sorted and merged.
pub(super) fn collector_spans(hashes: &[BufferHash], own: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = hashes
        .iter()
        .filter_map(|h| {
            let d = h.hash_ns.filter(|&d| d > 0)?;
            Some((h.time_ns.saturating_sub(d), h.time_ns))
        })
        .chain(own.into_iter().filter(|&(s, e)| e > s))
        .collect();
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// What the sources name: host buffers, and the transfers of an `update`
/// whose clause names one array (what that array pointed to when it ran,
/// whichever buffer that was: the host may swap its arrays).
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceNames {
    pub buffers: HashMap<u64, String>,
    pub transfers: HashMap<TransferId, String>,
}

/// The buffer names the model learned besides its transfers' own.
#[derive(Debug, Clone, Default)]
pub(crate) struct BufferNames {
    /// The runtime's name of each host buffer: the first transfer of it
    /// (in start order) that the runtime named.
    pub(super) runtime: HashMap<u64, NameId>,
    /// Names inferred from the sources ([`Run::learn_names`]).
    pub(super) source: SourceNames,
    /// Whether [`Run::learn_names`] was asked.
    pub(super) learned: bool,
}
