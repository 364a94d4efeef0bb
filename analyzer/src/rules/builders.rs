//! The builders the rules make findings with: where a finding points
//! (locations of sites, host loops and groups of transfers), how it names
//! buffers, the evidence common to groups of transfers and allocations,
//! the whole finding for unneeded transfers and for allocations, and the
//! `accprof tune` command a launch finding proposes. What the findings
//! say comes from the facts [`Context`] derives; these only shape it.

use std::collections::BTreeMap;

use crate::findings::{Category, Evidence, Finding, Location, Value};
use crate::model::{group_by, AllocId, SiteId, Xfer};

use super::context::Context;
use super::host_cost;

impl Context<'_> {
    /// A location for a site.
    pub fn location(&self, role: &str, site: Option<SiteId>, variable: Option<String>) -> Location {
        Location::of_site(self.run, role, site, variable)
    }

    /// The host loop whose header is at `file`:`line` (the run has no
    /// site for it), in the function the source puts it in.
    pub fn loop_location(&self, file: &str, line: u32) -> Location {
        let mut here = self.location("host loop", None, None).source_line(line);
        here.file = file.to_string();
        if let Some(h) = self.sources.get(file).and_then(|src| src.function_at(line)) {
            here.function = h.name;
        }
        here
    }

    /// The buffer's name, or its address and size.
    pub fn buffer_label(&self, ptr: Option<u64>, bytes: u64) -> String {
        match ptr {
            Some(p) => match self.buffer_name(p) {
                Some(n) => n.to_string(),
                None => format!("buffer {p:#x} ({})", crate::units::bytes(bytes)),
            },
            None => format!("a buffer of {}", crate::units::bytes(bytes)),
        }
    }

    /// The `accprof tune` command line for the construct at `site`, with
    /// the run's own arguments and `space` (`--space ...` or `--variant ...`).
    pub fn tune_command(&self, site: SiteId, space: &str) -> Option<String> {
        let s = self.run.site(site);
        let line = s.line?;
        let args: Vec<String> = self
            .run
            .process
            .header
            .command_line
            .iter()
            .skip(1)
            .map(|a| crate::shell::word(a))
            .collect();
        let run = if args.is_empty() {
            "{out}".to_string()
        } else {
            format!("{{out}} {}", args.join(" "))
        };
        Some(format!(
            "accprof tune --at {}:{line} --build 'YOUR BUILD with {{src}} and {{out}}' --run '{run}' {space}",
            s.file
        ))
    }
}

/// Names of the buffers behind these transfers, in alphabetical order
/// (case aside): "A, Anew", or "2 buffers of 8.03 MiB" when unnamed.
pub(crate) fn vars_label(cx: &Context, xs: &[&Xfer]) -> String {
    let mut names: Vec<String> = Vec::new();
    let mut unnamed: Vec<(u64, u64)> = Vec::new();
    for x in xs {
        match cx.variable(x).map(str::to_string) {
            Some(n) => {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            None => {
                let k = (x.host_ptr.unwrap_or(0), x.bytes);
                if !unnamed.contains(&k) {
                    unnamed.push(k);
                }
            }
        }
    }
    if !unnamed.is_empty() {
        let sizes: BTreeMap<u64, usize> = unnamed.iter().fold(BTreeMap::new(), |mut m, (_, b)| {
            *m.entry(*b).or_default() += 1;
            m
        });
        for (b, n) in sizes {
            names.push(if n == 1 {
                format!("a buffer of {}", crate::units::bytes(b))
            } else {
                format!("{n} buffers of {}", crate::units::bytes(b))
            });
        }
    }
    names.sort_by_key(|n| n.to_lowercase());
    names.join(", ")
}

/// Pairs of transfers (indices into `Context::xfers`) at one site.
pub(crate) type SitePairs = (Option<SiteId>, Vec<(usize, usize)>);

/// Transfers grouped by the site of the transfer at `pick` of each pair.
pub(crate) fn pairs_by_site(
    cx: &Context,
    pairs: &[(usize, usize)],
    pick: impl Fn(&(usize, usize)) -> usize,
) -> Vec<SitePairs> {
    group_by(pairs.iter().map(|p| (cx.xfers[pick(p)].site, *p)))
}

/// Locations of a set of transfers: one per (role, site), with the names
/// of the buffers moved there.
pub(crate) fn xfer_locations(cx: &Context, role: &str, xs: &[&Xfer]) -> Vec<Location> {
    let groups = group_by(xs.iter().map(|x| (x.site, *x)));
    groups
        .into_iter()
        .map(|(site, g)| {
            let label = vars_label(cx, &g);
            cx.location(role, site, (!label.is_empty()).then_some(label))
        })
        .collect()
}

/// The common evidence of a group of transfers.
pub(crate) fn xfer_evidence(ev: &mut Evidence, prefix: &str, xs: &[&Xfer]) {
    ev.field(&format!("{prefix}transfers"), Value::Count(xs.len() as u64));
    ev.field(
        &format!("{prefix}bytes"),
        Value::Bytes(xs.iter().map(|x| x.bytes).sum()),
    );
    ev.field(
        &format!("{prefix}time"),
        Value::Ns(xs.iter().map(|x| x.duration_ns()).sum()),
    );
}

/// The finding about transfers at one site that would not be needed (D1-D5,
/// U1): `title` gets the names of their buffers and the place; the cost and
/// the saving are their time; they are what the finding saves and is about,
/// located per site in `role`. Certain unless the caller says otherwise.
pub(crate) fn transfer_finding(
    cx: &Context,
    id: &'static str,
    role: &str,
    site: Option<SiteId>,
    saved: &[&Xfer],
    title: impl FnOnce(&str, &str) -> String,
) -> Finding {
    let cost = cx.xfers_cost(saved);
    let place = cx.location(role, site, None).place();
    let mut f = Finding::new(
        id,
        Category::DataMovement,
        title(&vars_label(cx, saved), &place),
    );
    f.cost_ns = Some(cost);
    f.saving_ns = Some(cost);
    f.saved_transfers = saved.iter().map(|x| x.transfer).collect();
    add_transfers(cx, &mut f, role, saved);
    if let Some(why) = cx.xfers_cost_meaning() {
        f.evidence.field(
            "device_time",
            Value::Ns(saved.iter().map(|x| x.duration_ns()).sum()),
        );
        f.evidence.say(why);
    }
    f
}

/// Transfers a finding is about, located per site in `role`.
pub(crate) fn add_transfers(cx: &Context, f: &mut Finding, role: &str, xs: &[&Xfer]) {
    f.locations.extend(xfer_locations(cx, role, xs));
    f.subjects.transfers.extend(xs.iter().map(|x| x.transfer));
}

/// The finding about device allocations at one site (A1, A2): located at
/// the construct (with `variable` when the runtime named it), about the
/// allocations, with their count as evidence. `title` gets the place.
pub(crate) fn alloc_finding(
    cx: &Context,
    id: &'static str,
    site: Option<SiteId>,
    variable: Option<String>,
    allocs: &[AllocId],
    title: impl FnOnce(&str) -> String,
) -> Finding {
    let here = cx.location("construct", site, variable);
    let mut f = Finding::new(id, Category::Allocation, title(&here.place()));
    f.locations.push(here);
    f.subjects.allocs = allocs.to_vec();
    f.evidence
        .field("allocations", Value::Count(allocs.len() as u64));
    f
}

/// The measured host time of allocations a finding is about (A1, A2, D6):
/// the mean time of one allocation or free call where they were made, and
/// what their allocations and frees took.
pub(crate) fn alloc_cost_evidence(f: &mut Finding, c: &host_cost::AllocCost) {
    f.evidence
        .field("allocation_call_time", Value::Ns(c.per_call_ns()));
    f.evidence.field("frees", Value::Count(c.frees));
    f.evidence.field("allocation_time", Value::Ns(c.ns));
}
