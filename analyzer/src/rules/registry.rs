//! Which rules exist and how they run: [`run_all`] runs every rule, keeps
//! their findings and notes in the rules' fixed order, and adds the notes
//! that concern the whole run. What a rule is given and returns
//! ([`Options`], [`Checked`]) is in `context`.

use crate::model::Run;
use crate::source::SourceSet;

use super::context::{Checked, Context, Options};

use super::{
    a1_repeated_alloc, a2_unused_alloc, c1_stale_read, c2_lost_write, c3_unread_download,
    d1_duplicate_upload, d2_duplicate_download, d3_copy_not_needed, d4_round_trip,
    d5_upload_up_to_date, d6_repeated_in_loop, l1_vector_multiple, l2_vector_trip, l3_single_gang,
    l4_launch_differs, l5_launch_bound, p1_partial_change, r1_runtime_bound, r2_startup,
    s1_pageable, s2_sync_waits, s3_idle_gaps, s4_queue_order, u1_unused_upload,
};

/// Runs every rule.
pub fn run_all(run: &Run, sources: &SourceSet, opts: &Options) -> Checked {
    let cx = Context::new(run, sources, opts);
    let mut all = Checked::default();
    if run.ran_only_on_host() {
        all.note("the program ran on the host (OpenACC host fallback): there was no device, so no transfers or kernels to examine");
    }
    let rules: [fn(&Context) -> Checked; 24] = [
        c1_stale_read::check,
        c2_lost_write::check,
        c3_unread_download::check,
        d6_repeated_in_loop::check,
        d1_duplicate_upload::check,
        d2_duplicate_download::check,
        d3_copy_not_needed::check,
        d4_round_trip::check,
        d5_upload_up_to_date::check,
        u1_unused_upload::check,
        p1_partial_change::check,
        a1_repeated_alloc::check,
        a2_unused_alloc::check,
        s1_pageable::check,
        s2_sync_waits::check,
        s3_idle_gaps::check,
        s4_queue_order::check,
        l3_single_gang::check,
        l1_vector_multiple::check,
        l2_vector_trip::check,
        l4_launch_differs::check,
        l5_launch_bound::check,
        r1_runtime_bound::check,
        r2_startup::check,
    ];
    for mut c in run_each(&rules, &cx) {
        for f in &mut c.findings {
            f.subjects.complete(run, &f.locations);
        }
        all.findings.append(&mut c.findings);
        for n in c.notes {
            all.note(n);
        }
    }
    if cx.small_transfers > 0 {
        all.note(format!(
            "{} transfers smaller than {} (scalars, descriptors, kernel argument blocks) were not examined",
            cx.small_transfers,
            crate::units::bytes(opts.min_bytes)
        ));
    }
    if !run.process.losses.is_empty() {
        let bytes: u64 = run.process.losses.iter().map(|l| l.bytes).sum();
        all.note(format!(
            "the trace was cut or damaged ({bytes} bytes not read): findings cover the part that was read{}",
            if run.cupti_active() {
                "; CUPTI was recording, so its device records of the lost part are missing, not absent"
            } else {
                ""
            }
        ));
    }
    if !run.cupti_active() {
        all.note(
            "no CUPTI in this run: transfer and kernel times are the runtime's host-side times, \
             and GCC's libgomp reports no array transfers without CUPTI",
        );
    }
    all
}

/// Each rule's result, in the order of `rules`. The rules only read the
/// run and the context, so they share the machine's cores: on a large run
/// they take as long as the longest few rather than all of them in turn.
fn run_each(rules: &[fn(&Context) -> Checked], cx: &Context) -> Vec<Checked> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(rules.len());
    if threads <= 1 {
        return rules.iter().map(|rule| rule(cx)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(rule) = rules.get(i) else {
                return done;
            };
            done.push((i, rule(cx)));
        }
    };
    let mut results: Vec<(usize, Checked)> = std::thread::scope(|s| {
        // The launch sites, which the launch rules wait for and which take
        // as long as the longest rule, are made first, beside the first
        // rules, not when the first launch rule comes up.
        let first = s.spawn(|| {
            cx.launch_sites();
            work()
        });
        let helpers: Vec<_> = std::iter::once(first)
            .chain((2..threads).map(|_| s.spawn(work)))
            .collect();
        let mut all = work();
        for h in helpers {
            match h.join() {
                Ok(mut done) => all.append(&mut done),
                // A rule that panics on another thread panics here, as
                // it would have run on this one.
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        all
    });
    results.sort_by_key(|&(i, _)| i);
    results.into_iter().map(|(_, c)| c).collect()
}
