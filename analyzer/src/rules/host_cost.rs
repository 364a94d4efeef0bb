//! What the transfers and allocations a finding removes cost on the host,
//! from the time ledger ([`crate::ledger`]) of a trace with the CUDA
//! driver's timings. Without them (traces before format 1.4, or recorded
//! without driver spans) a transfer costs its device copy time and an
//! allocation is not measured.
//!
//! The ledger gives each line site the host time of its copy calls and of
//! its allocation and free calls, not per transfer or per allocation, so:
//!
//! - a site's copy-call time is shared among its transfers and memsets in
//!   proportion to their device times: a copy call's host time is mostly
//!   the device copy it stages and waits for, and the device time tells
//!   what bytes alone do not (a pageable upload of a buffer takes about
//!   twice its download on an H200); its many small copies (kernel
//!   argument blocks, scalars) take little of it. A transfer costs its
//!   share, or its device time where that is longer (an asynchronous copy
//!   the host did not wait for).
//! - a site's allocation time is divided by its allocation and free calls:
//!   a call costs about the same whatever its size. An allocation costs one
//!   call, and one more when it was freed.
//! - a block a compute construct allocates for its data that is larger than
//!   all of that data ([`holds_construct_block`]) holds the construct's own
//!   block too (GCC's libgomp puts the kernel's argument pointers in the
//!   same allocation): keeping the data on the device makes the block
//!   smaller, not gone, so removing it saves no call. Nor does the smaller
//!   size save time: the driver's allocation and free cost the same from a
//!   few bytes to 8 MiB (bench/alloc_sizes.sh on an H200: 70-85 us a
//!   pair bare), so no saving is claimed for it.

use crate::ledger::Part;
use crate::model::{AllocId, Run, SiteId, TransferId};

/// The host costs of one run's transfers and allocations.
pub struct HostCosts {
    /// Per line site (by index): the device time of its top-level
    /// constructs' transfers and memsets, among which its copy-call time
    /// is shared.
    site_device_ns: Vec<u64>,
}

impl HostCosts {
    /// The costs of `run`, when its trace has the driver's timings.
    pub fn of(run: &Run) -> Option<HostCosts> {
        if !run.ledger().timed {
            return None;
        }
        let mut site_device_ns = Vec::new();
        let mut add = |site: SiteId, ns: u64| {
            let i = site.index();
            if site_device_ns.len() <= i {
                site_device_ns.resize(i + 1, 0u64);
            }
            site_device_ns[i] = site_device_ns[i].saturating_add(ns);
        };
        for (_, t) in run.transfers() {
            if let Some(c) = t.construct {
                add(run.line_site(run.top_level(c)), t.duration_ns());
            }
        }
        for (_, m) in run.memsets() {
            if let Some(c) = m.construct {
                add(run.line_site(run.top_level(c)), m.duration_ns());
            }
        }
        Some(HostCosts { site_device_ns })
    }

    /// The host time of the transfer's copy call: its share of its site's
    /// copy-call time, or its device time where that is longer.
    pub fn transfer_ns(&self, run: &Run, id: TransferId) -> u64 {
        let t = run.transfer(id);
        let device = t.duration_ns();
        let Some(c) = t.construct else {
            return device;
        };
        let site = run.line_site(run.top_level(c));
        let total = self.site_device_ns.get(site.index()).copied().unwrap_or(0);
        let Some(s) = run.ledger().site(site) else {
            return device;
        };
        if total == 0 {
            return device;
        }
        let share = u128::from(s.parts.ns(Part::Transfer)) * u128::from(device) / u128::from(total);
        u64::try_from(share).unwrap_or(u64::MAX).max(device)
    }

    /// The host time of the transfers, each counted as [`Self::transfer_ns`].
    pub fn transfers_ns(&self, run: &Run, ids: impl IntoIterator<Item = TransferId>) -> u64 {
        ids.into_iter()
            .map(|id| self.transfer_ns(run, id))
            .fold(0u64, u64::saturating_add)
    }

    /// The mean host time of one allocation or free call at the line site
    /// of the allocation's top-level construct, and that site; None when
    /// the site made no allocation call the driver timed.
    pub fn alloc_call(&self, run: &Run, id: AllocId) -> Option<(SiteId, AllocCall)> {
        let c = run.alloc(id).construct?;
        let site = run.line_site(run.top_level(c));
        let s = run.ledger().site(site)?;
        let calls = s.parts.calls(Part::Allocation);
        (calls > 0).then(|| {
            (
                site,
                AllocCall {
                    ns: s.parts.ns(Part::Allocation),
                    calls,
                },
            )
        })
    }

    /// What the allocations and their frees cost on the host: per site, its
    /// allocation time times the share of its allocation calls they made.
    /// None when none of them was timed.
    pub fn allocs_ns(&self, run: &Run, ids: &[AllocId]) -> Option<AllocCost> {
        let mut by_site: Vec<(SiteId, AllocCall, u64)> = Vec::new();
        let mut out = AllocCost::default();
        for &id in ids {
            let Some((site, call)) = self.alloc_call(run, id) else {
                continue;
            };
            let freed = run.alloc(id).free_ns().is_some();
            out.allocations += 1;
            out.frees += u64::from(freed);
            let n = 1 + u64::from(freed);
            match by_site.iter_mut().find(|(s, ..)| *s == site) {
                Some(e) => e.2 += n,
                None => by_site.push((site, call, n)),
            }
        }
        if by_site.is_empty() {
            return None;
        }
        for (_, call, n) in &by_site {
            out.ns = out.ns.saturating_add(call.times(*n));
            out.site_ns = out.site_ns.saturating_add(call.ns);
            out.site_calls += call.calls;
        }
        Some(out)
    }
}

/// Whether an allocation made for a compute construct's data also holds
/// the construct's own block: it is larger than every transfer the
/// construct made (the data it was allocated for). Such a block is
/// allocated for every reach whatever the data clauses say (the construct's
/// argument pointers live in it), so a data region around the construct
/// leaves the call, with fewer bytes.
pub fn holds_construct_block(run: &Run, id: AllocId) -> bool {
    let a = run.alloc(id);
    let Some(c) = a.construct else {
        return false;
    };
    let top = run.top_level(c);
    if run.construct_class(top) != crate::model::ConstructClass::Compute {
        return false;
    }
    let largest = [c, top]
        .iter()
        .flat_map(|&k| run.transfers_of(k).iter())
        .map(|&t| run.transfer(t).bytes)
        .max();
    largest.is_some_and(|data| a.bytes > data)
}

/// A site's allocation and free calls, as the driver timed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocCall {
    pub ns: u64,
    pub calls: u64,
}

impl AllocCall {
    /// The time of `n` of its calls.
    pub fn times(self, n: u64) -> u64 {
        let t = u128::from(self.ns) * u128::from(n) / u128::from(self.calls.max(1));
        u64::try_from(t).unwrap_or(u64::MAX)
    }
}

/// What a set of allocations cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocCost {
    /// Their host time, allocations and frees.
    pub ns: u64,
    /// Those timed, and how many of them were freed.
    pub allocations: u64,
    pub frees: u64,
    /// The allocation time and calls of their sites, all calls together.
    pub site_ns: u64,
    pub site_calls: u64,
}

impl AllocCost {
    /// The mean time of one allocation or free call at their sites.
    pub fn per_call_ns(&self) -> u64 {
        self.site_ns / self.site_calls.max(1)
    }
}
