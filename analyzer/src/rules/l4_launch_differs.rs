//! L4: the launch differs from what the directive asks for. Compilers and
//! runtimes override clauses: GCC turns vector_length(48) into 32, caps
//! workers, and a runtime may launch other gang counts. The source then
//! says one shape and the device runs another.
//!
//! Evidence: the clauses' literal values (`num_gangs`, `num_workers`,
//! `vector_length`) at the construct's line, against CUPTI's grid and block
//! (GCC's nvptx mapping: gangs = grid x, workers = block y, vector = block
//! x) or, without CUPTI, the runtime's launch dimensions.

use crate::findings::{Category, Confidence, Finding, Value};
use crate::units;

use super::context::{Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    for ls in cx.launch_sites() {
        let Some((_, d)) = cx.directive_at(ls.site) else {
            continue;
        };
        let asked = |name: &str| {
            d.clause(name)
                .and_then(|c| c.args.as_deref())
                .and_then(|a| a.trim().parse::<u64>().ok())
        };
        let launched: [Option<u64>; 3] = match (ls.grid_block, ls.dims) {
            (Some((g, b)), _) => [
                Some(u64::from(g[0])),
                Some(u64::from(b[1])),
                Some(u64::from(b[0])),
            ],
            (None, Some((g, w, v))) => [Some(g), Some(w), Some(v)],
            _ => continue,
        };
        let mut differ = Vec::new();
        for (i, name) in ["num_gangs", "num_workers", "vector_length"]
            .into_iter()
            .enumerate()
        {
            if let (Some(a), Some(l)) = (asked(name), launched[i]) {
                if a != l {
                    differ.push((name, a, l));
                }
            }
        }
        if differ.is_empty() {
            continue;
        }
        let here = cx.location("construct", Some(ls.site), None);
        let (cost, what) = ls.time();
        let said: Vec<String> = differ
            .iter()
            .map(|(n, a, l)| format!("{n}({a}) launched as {l}"))
            .collect();
        let mut f = Finding::new(
            "L4",
            Category::Launch,
            format!(
                "the launch at {} differs from its clauses: {}",
                here.place(),
                said.join(", ")
            ),
        );
        f.confidence = Confidence::Certain;
        f.cost_ns = Some(cost);
        f.locations.push(here);
        f.subjects.constructs = ls.constructs.clone();
        f.subjects.kernels = ls.kernels.clone();
        for (n, a, l) in &differ {
            f.evidence
                .field(&format!("{n}_asked"), Value::Count(*a))
                .field(&format!("{n}_launched"), Value::Count(*l));
        }
        f.evidence.field("launches", Value::Count(ls.launches()));
        match ls.grid_block {
            Some((g, b)) => {
                f.evidence.say(format!(
                    "CUPTI: {} launches with grid {g:?} and block {b:?} took {} ({what}).",
                    ls.launches(),
                    units::duration_ns(cost)
                ));
            }
            None => {
                f.evidence.say(format!(
                    "The runtime's launch dimensions (no CUPTI): {} launches took {} ({what}).",
                    ls.launches(),
                    units::duration_ns(cost)
                ));
            }
        }
        let vector = differ.iter().find(|(n, _, _)| *n == "vector_length");
        f.proposal.text = match vector {
            Some((_, a, l)) if a % 32 != 0 => format!(
                "The compiler replaced vector_length({a}) by {l} (GCC warns \"using vector_length ({l}), ignoring {a}\"): write a width the compiler keeps, a multiple of 32, so that the source says what runs."
            ),
            _ => "Write the clauses the launch actually uses, or find why the compiler or the runtime overrode them (compiler warnings, device limits), so that the source says what runs.".to_string(),
        };
        f.proposal.no_patch =
            Some("which shape is fastest is a measurement, not a rewrite".to_string());
        let space: Vec<String> = differ
            .iter()
            .map(|(n, a, l)| match *n {
                "vector_length" => format!(
                    "vector_length=32,{},{}",
                    a.div_ceil(32) * 32,
                    (l.max(a) * 2).min(1024)
                ),
                "num_workers" => format!("num_workers=1,2,4,{a}"),
                _ => format!("num_gangs={a},{l}"),
            })
            .collect();
        f.proposal.tune = cx.tune_command(ls.site, &format!("--space {}", space.join(" ")));
        out.findings.push(f);
    }
    out
}
