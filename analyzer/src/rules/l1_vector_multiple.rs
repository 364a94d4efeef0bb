//! L1: a `vector_length` that is not a multiple of the warp size (32). A
//! warp runs 32 lanes in lockstep, so any other width leaves lanes idle;
//! GCC does not even try: it replaces the value by 32 (with a warning at
//! compile time), so the loop runs narrower than the source says.
//!
//! Evidence: the clause's literal value in the source at the construct's
//! line; the launched block (CUPTI) or the runtime's vector length; the
//! construct's measured kernel time.

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
        let Some(asked) = d
            .clause("vector_length")
            .and_then(|c| c.args.as_deref())
            .and_then(|a| a.trim().parse::<u64>().ok())
        else {
            continue;
        };
        if asked % 32 == 0 || asked == 0 {
            continue;
        }
        let here = cx.location("construct", Some(ls.site), None);
        let (cost, what) = ls.time();
        let launched = ls.launched_vector();
        let mut f = Finding::new(
            "L1",
            Category::Launch,
            format!(
                "vector_length({asked}) at {} is not a multiple of 32{}",
                here.place(),
                match launched {
                    Some(v) if v != asked => format!(": {v} lanes were launched"),
                    _ => String::new(),
                }
            ),
        );
        f.confidence = Confidence::Certain;
        f.cost_ns = Some(cost);
        f.locations.push(here);
        f.subjects.constructs = ls.constructs.clone();
        f.subjects.kernels = ls.kernels.clone();
        f.evidence
            .field("vector_length_asked", Value::Count(asked))
            .field("launches", Value::Count(ls.launches()))
            .field(
                if ls.kernels.is_empty() {
                    "host_time"
                } else {
                    "device_time"
                },
                Value::Ns(cost),
            );
        if let Some(v) = launched {
            f.evidence.field("vector_length_launched", Value::Count(v));
        }
        f.evidence.say(format!(
            "A warp runs 32 lanes together: {asked} lanes fill {} warps with {} idle lanes; GCC replaces such a width by 32. Its {} launches took {} ({what}).",
            asked.div_ceil(32),
            asked.div_ceil(32) * 32 - asked,
            ls.launches(),
            units::duration_ns(cost)
        ));
        let up = asked.div_ceil(32) * 32;
        let down = (asked / 32 * 32).max(32);
        f.proposal.text = format!(
            "Write a multiple of 32: vector_length({up}) gives each gang at least the {asked} lanes asked for; vector_length({down}) is {}. Which is faster depends on the loop: measure both.",
            if launched == Some(down) {
                "what runs now"
            } else {
                "the narrower choice"
            }
        );
        let (directive, edit) = Edit::set_clause(src, &d, "vector_length", up);
        f.proposal.directive = Some(directive);
        f.proposal.edits.push(edit);
        f.proposal.tune = cx.tune_command(
            ls.site,
            &format!("--space vector_length={down},{up},128,256"),
        );
        out.findings.push(f);
    }
    out
}
