//! L2: more vector lanes than the vector loop has iterations. A gang's
//! vector lanes share its loop marked `vector`; when that loop runs fewer
//! iterations than there are lanes (16 under vector_length(128)), the
//! other lanes idle through every launch.
//!
//! Evidence: the vector length launched (CUPTI's block width, or the
//! runtime's) or the clause's; the trip count of the vector loop from the
//! source (bounds of literals and named constants: `for (int j = 0; j < 16;
//! j++)`, `j < COLS` with `#define COLS 16` or `const int COLS = 16`,
//! `do j = 1, n` with `integer, parameter :: n = 16`); the construct's
//! measured kernel time.

use crate::findings::{Category, Confidence, Finding, Value};
use crate::patch::Edit;
use crate::units;

use super::context::{Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    for ls in cx.launch_sites() {
        let Some((src, d)) = cx.directive_at(ls.site) else {
            continue;
        };
        let clause = d
            .clause("vector_length")
            .and_then(|c| c.args.as_deref())
            .and_then(|a| a.trim().parse::<u64>().ok());
        let Some(lanes) = ls.launched_vector().or(clause) else {
            continue;
        };
        // The vector loop: the construct's own when it says `vector`, else
        // a `loop vector` inside its block.
        let Some((first, last, _)) = src.block_of(&d) else {
            continue;
        };
        let mut vector_dirs = Vec::new();
        if d.has_loop() && d.clause("vector").is_some() {
            vector_dirs.push(d.clone());
        }
        vector_dirs.extend(
            src.directives_in(first, last)
                .into_iter()
                .filter(|x| x.has_loop() && x.clause("vector").is_some()),
        );
        // The loop each `vector` directive governs, as the parser read it.
        let syn = src.syntax();
        let found = vector_dirs.iter().find_map(|v| {
            let i = syn.loop_of_directive(v.line)?;
            let lp = src.loops().iter().find(|l| l.syntax == i)?;
            let trips = src.trip_count(lp)?;
            Some((v.line, lp.header_line, trips))
        });
        let Some((vector_line, loop_line, trips)) = found else {
            continue;
        };
        if trips == 0 || trips >= lanes {
            continue;
        }
        let here = cx.location("construct", Some(ls.site), None);
        let (cost, what) = ls.time();
        let idle = lanes - trips;
        let mut f = Finding::new(
            "L2",
            Category::Launch,
            format!(
                "vector of {lanes} lanes over a loop of {trips} iterations at {}: {idle} lanes idle",
                here.place()
            ),
        );
        f.confidence = Confidence::Certain;
        f.cost_ns = Some(cost);
        f.locations.push(here.clone());
        let mut vector_loop = here.clone().source_line(loop_line);
        vector_loop.role = "vector loop".into();
        f.locations.push(vector_loop);
        f.subjects.constructs = ls.constructs.clone();
        f.subjects.kernels = ls.kernels.clone();
        f.evidence
            .field("vector_lanes", Value::Count(lanes))
            .field("vector_loop_trips", Value::Count(trips))
            .field("idle_share", Value::Ratio(idle as f64 / lanes as f64))
            .field("launches", Value::Count(ls.launches()))
            .field(
                if ls.kernels.is_empty() {
                    "host_time"
                } else {
                    "device_time"
                },
                Value::Ns(cost),
            );
        f.evidence.say(format!(
            "The `loop vector` at line {vector_line} runs {trips} iterations (line {loop_line}) on {lanes} lanes{}: {:.0}% of the lanes do nothing in each of {} launches, which took {} ({what}).",
            if ls.grid_block.is_some() {
                " (CUPTI's block width)"
            } else if ls.dims.is_some() {
                " (the runtime's vector length)"
            } else {
                " (the clause)"
            },
            100.0 * idle as f64 / lanes as f64,
            ls.launches(),
            units::duration_ns(cost)
        ));
        let fit = trips.div_ceil(32) * 32;
        f.proposal.text = format!(
            "Match the vector to the loop: vector_length({fit}) (the smallest multiple of 32 that covers {trips} iterations), and spread the rest of the work over more gangs; or make the {trips}-iteration loop `seq` and put the vector on a longer loop."
        );
        if clause.is_some() {
            let (directive, edit) = Edit::set_clause(src, &d, "vector_length", fit);
            f.proposal.directive = Some(directive);
            f.proposal.edits.push(edit);
        } else {
            f.proposal.no_patch = Some(format!(
                "the vector length is not set at line {}: add vector_length({fit}) to the directive",
                d.line
            ));
        }
        f.proposal.tune = cx.tune_command(
            ls.site,
            &format!("--space vector_length=32..{}", lanes.max(64)),
        );
        out.findings.push(f);
    }
    out
}
