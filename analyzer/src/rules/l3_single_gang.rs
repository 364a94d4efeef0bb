//! L3: a kernel launched as a single gang. GCC compiles a `kernels` loop
//! nest it cannot parallelize (a reduction written as `dt = fmax(dt, ...)`,
//! or arrays it cannot prove independent) as one gang of 32 threads; the
//! launch then costs orders of magnitude more than a parallel one.
//!
//! Evidence: CUPTI's grid (product of its dimensions = 1) and measured
//! device time; without CUPTI, the runtime's num_gangs = 1 and the
//! construct's host time (the finding then says so). Source: the directive
//! at the construct's line, its loop nest (perfectly nested levels give
//! `collapse`), and the scalars the body writes: a max/min/sum/product
//! reduction becomes `reduction(op:var)`; no reduction gives
//! `gang vector`; any other scalar write means no patch.
//!
//! Beyond one gang: a kernel launched on more than one gang but fewer than
//! the device has SMs (the trace's device record) leaves SMs idle for its
//! whole run; it is reported with the SM count and the gang counts to try.

use crate::findings::{Category, Confidence, Finding, Proposal, Value};
use crate::model::{group_by, ConstructClass, ConstructId, KernelId, SiteId};
use crate::patch::Edit;
use crate::proposals::parallel_loop::rewrite_as_parallel_loop;
use crate::units;

use super::context::{Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let run = cx.run;
    // Single-gang launches: (site, (device or host ns, the kernel when
    // CUPTI recorded it, the construct)).
    type Launch = (u64, Option<KernelId>, Option<ConstructId>);
    let mut single: Vec<(Option<SiteId>, Launch)> = Vec::new();
    let mut measured_on_device = true;
    if run.kernels().any(|(_, k)| k.device_timed()) {
        for (id, k) in run.kernels().filter(|(_, k)| k.device_timed()) {
            if k.grid.iter().map(|&g| g as u64).product::<u64>() == 1 {
                let site = k.construct.map(|c| run.line_site(c));
                single.push((site, (k.device_ns(), Some(id), k.construct)));
            }
        }
    } else {
        measured_on_device = false;
        let mut launches = Vec::new();
        for (id, c) in run.constructs_of_class(ConstructClass::Compute) {
            launches.clear();
            launches.extend(run.launches_of(id));
            for l in &launches {
                if l.gangs() == Some(1) {
                    let ns = run.program_host_ns(&c).unwrap_or(0) / launches.len().max(1) as u64;
                    single.push((Some(c.site), (ns, None, Some(id))));
                }
            }
        }
    }
    let sms = run
        .process
        .devices
        .first()
        .map(|d| d.sm_count)
        .filter(|&n| n > 0);
    // A single gang that costs nothing (a scalar `serial` region) is fine.
    let groups: Vec<_> = group_by(single)
        .into_iter()
        .map(|(site, group)| (site, group.iter().map(|l| l.0).sum::<u64>(), group))
        .filter(|&(_, cost, _)| cx.share(cost) >= cx.opts.min_share / 5.0)
        .collect();
    let all_launches = if groups.is_empty() {
        Default::default()
    } else {
        launches_by_site(run, measured_on_device)
    };
    for (site, cost, group) in groups {
        let here = cx.location("construct", site, None);
        let launches = group.len() as u64;
        let mut f = Finding::new(
            "L3",
            Category::Launch,
            format!(
                "single-gang launch at {}: {launches} launches on 1 gang took {}",
                here.place(),
                units::duration_ns(cost)
            ),
        );
        f.confidence = if measured_on_device {
            Confidence::Certain
        } else {
            Confidence::Likely
        };
        f.cost_ns = Some(cost);
        if let Some(n) = sms {
            f.saving_ns = Some(cost - cost / n as u64);
            f.evidence.say(format!(
                "The saving assumes the loop spreads over the device's {n} SMs at least (one gang runs on one SM)."
            ));
        }
        f.locations.push(here);
        f.subjects.kernels = group.iter().filter_map(|l| l.1).collect();
        f.subjects.constructs = group.iter().filter_map(|l| l.2).collect();
        f.evidence
            .field("single_gang_launches", Value::Count(launches));
        f.evidence.field(
            "launches_here",
            Value::Count(*all_launches.get(&site).unwrap_or(&0) as u64),
        );
        if measured_on_device {
            f.evidence.field("device_time", Value::Ns(cost));
            f.evidence
                .field("avg_launch", Value::Ns(cost / launches.max(1)));
            let k = run.kernels().map(|(_, x)| x).find(|k| {
                k.device_timed()
                    && k.construct.map(|c| run.line_site(c)) == site
                    && k.grid.iter().product::<u32>() == 1
            });
            if let Some(k) = k {
                f.evidence
                    .field("grid", Value::Text(format!("{:?}", k.grid)));
                f.evidence
                    .field("block", Value::Text(format!("{:?}", k.block)));
                f.evidence.say(format!(
                    "CUPTI: {} ran with grid {:?} and block {:?}, {} per launch on average ({:.0}% of the wall time).",
                    run.name(k.name),
                    k.grid,
                    k.block,
                    units::duration_ns(cost / launches.max(1)),
                    100.0 * cx.share(cost)
                ));
            }
        } else {
            f.evidence.say(if run.cupti_active() {
                "CUPTI was recording, but the trace was cut before its kernel records: the runtime's num_gangs = 1 is the evidence and the cost is the construct's host time."
            } else {
                "Without CUPTI the runtime's num_gangs = 1 is the evidence and the cost is the construct's host time."
            });
        }
        let (proposal, source_lines) = propose(cx, site);
        for l in source_lines {
            f.evidence.say(l);
        }
        f.proposal = proposal;
        out.findings.push(f);
    }
    too_few_gangs(cx, sms, &mut out);
    out
}

/// Every launch's site, counted: the device's kernels when CUPTI timed
/// them, else the runtime's launch events.
fn launches_by_site(
    run: &crate::model::Run,
    on_device: bool,
) -> crate::idhash::IdHashMap<Option<SiteId>, usize> {
    let mut all: crate::idhash::IdHashMap<Option<SiteId>, usize> = Default::default();
    if on_device {
        for (_, k) in run.kernels().filter(|(_, k)| k.device_timed()) {
            *all.entry(k.construct.map(|c| run.line_site(c)))
                .or_default() += 1;
        }
    } else {
        for (id, c) in run
            .constructs()
            .filter(|(_, c)| c.class == ConstructClass::Compute)
        {
            *all.entry(Some(c.site)).or_default() += run.launches_of(id).count();
        }
    }
    all
}

/// Kernels on more than one gang but fewer than the device's SMs.
fn too_few_gangs(cx: &Context, sms: Option<u32>, out: &mut Checked) {
    let Some(sms) = sms else {
        return;
    };
    for ls in cx.launch_sites() {
        let Some((grid, block)) = ls.grid_block else {
            continue;
        };
        let gangs: u64 = grid.iter().map(|&g| u64::from(g)).product();
        if gangs <= 1 || gangs >= u64::from(sms) {
            continue;
        }
        if cx.share(ls.device_ns) < cx.opts.min_share / 5.0 {
            continue;
        }
        let here = cx.location("construct", Some(ls.site), None);
        let launches = ls.kernels.len() as u64;
        let mut f = Finding::new(
            "L3",
            Category::Launch,
            format!(
                "too few gangs at {}: {launches} launches on {gangs} gangs, on a device of {sms} SMs, took {}",
                here.place(),
                units::duration_ns(ls.device_ns)
            ),
        );
        f.confidence = Confidence::Certain;
        f.cost_ns = Some(ls.device_ns);
        // One gang runs on one SM: the others idle.
        f.saving_ns = Some(ls.device_ns - ls.device_ns * gangs / u64::from(sms));
        f.locations.push(here);
        f.subjects.constructs = ls.constructs.clone();
        f.subjects.kernels = ls.kernels.clone();
        f.evidence
            .field("gangs", Value::Count(gangs))
            .field("sm_count", Value::Count(u64::from(sms)))
            .field("launches_here", Value::Count(launches))
            .field("device_time", Value::Ns(ls.device_ns))
            .field("grid", Value::Text(format!("{grid:?}")))
            .field("block", Value::Text(format!("{block:?}")));
        f.evidence.say(format!(
            "CUPTI: grid {grid:?}, block {block:?}: {gangs} gangs keep at most {gangs} of the device's {sms} SMs busy ({:.0}% idle); the saving assumes the work spreads over all of them.",
            100.0 * (1.0 - gangs as f64 / f64::from(sms))
        ));
        let clause = cx.directive_at(ls.site).and_then(|(_, d)| {
            d.clause("num_gangs")
                .and_then(|c| c.args.clone())
                .map(|a| (d.line, a))
        });
        f.proposal.text = match &clause {
            Some((line, a)) => format!(
                "`num_gangs({a})` at line {line} limits the launch: drop it (the runtime sizes the grid from the device) or give at least {sms}, a whole wave of the SMs."
            ),
            None => format!(
                "Give the loop at least {sms} gangs (a whole wave of the SMs): a longer gang loop (`collapse`), or `num_gangs({sms})` when the runtime picks too few."
            ),
        };
        f.proposal.no_patch =
            Some("the gang count that is fastest is a measurement: tune it".to_string());
        f.proposal.tune = cx.tune_command(
            ls.site,
            &format!("--space num_gangs={sms},{},{}", 2 * sms, 4 * sms),
        );
        out.findings.push(f);
    }
}

/// The `parallel loop` rewrite of the construct at `site`, with the source
/// lines that justify it.
fn propose(cx: &Context, site: Option<SiteId>) -> (Proposal, Vec<String>) {
    let mut p = Proposal {
        text: "Make the loop nest a `parallel loop` (with `reduction(op:var)` for a scalar it reduces into, `collapse(n)` for perfectly nested loops) so it runs on many gangs.".into(),
        ..Proposal::default()
    };
    let mut why = Vec::new();
    let Some(site) = site.map(|s| cx.run.site(s)) else {
        p.no_patch = Some("the construct has no source location".into());
        return (p, why);
    };
    let Some(line) = site.line else {
        p.no_patch = Some("the construct has no source line (no debug information)".into());
        return (p, why);
    };
    let Some(src) = cx.sources.get(&site.file) else {
        p.no_patch = Some(format!("source {} not read", site.file));
        return (p, why);
    };
    let Some(d) = src.directive_at(line) else {
        p.no_patch = Some(format!("no OpenACC directive at {}:{line}", site.file));
        return (p, why);
    };
    let name = d.construct_name();
    let gangs_one = d
        .clause("num_gangs")
        .and_then(|c| c.args.as_deref())
        .map(str::trim)
        == Some("1");
    if d.has_loop() && !gangs_one {
        p.no_patch = Some(format!(
            "`{name}` at line {line} is a loop construct already; look for `seq` or `num_gangs` on it or inside"
        ));
        return (p, why);
    }
    let rw = match rewrite_as_parallel_loop(src, &d) {
        Ok(rw) => rw,
        Err(why_not) => {
            p.no_patch = Some(why_not);
            return (p, why);
        }
    };
    why.extend(rw.why.iter().cloned());
    let (add, remove, closing) = (rw.add.clone(), rw.remove.clone(), rw.closing);
    let new_construct = "parallel loop".to_string();
    let kept = rw.kept_clauses(&d);
    let directive = d.render(&new_construct, &kept).trim().to_string();
    p.text = match rw.reductions.first() {
        Some(r) => format!(
            "`{name}` at line {line} runs its loop nest on one gang: the compiler did not parallelize the {} reduction on `{}` (line {}). Make it `{}`.",
            r.op, r.var, r.line, directive
        ),
        None => format!(
            "`{name}` at line {line} runs its loop nest on one gang: the compiler could not prove the iterations independent. Assert it with `{directive}` (check that the arrays do not overlap)."
        ),
    };
    p.directive = Some(directive);
    p.edits
        .push(Edit::rewrite(src, &d, Some(new_construct), remove, add));
    if let Some(c) = closing {
        // `!$acc end kernels` does not close a `parallel loop`.
        p.edits.push(Edit::Delete {
            file: site.file.clone(),
            line: c,
            expect: src.line(c).trim().to_string(),
        });
    }
    (p, why)
}

#[cfg(test)]
mod tests {
    use accprof_trace::HashMode;

    use super::*;
    use crate::source::SourceSet;
    use crate::testkit::runs::{run_rule, run_rule_with, RunBuilder};

    const SRC: &str = "double a[100][100];\nint main(void) {\n  double m = 0;\n#pragma acc kernels // max\n  for (int i = 0; i < 100; i++)\n    for (int j = 0; j < 100; j++)\n      m = fmax(m, a[i][j]);\n  return m > 0;\n}\n";

    fn run_with_one_gang() -> crate::Run {
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("t.c", 4);
        let k = b.site("t.c", 99);
        b.gcc_compute(k, &[], 1_000, 500, &[]);
        b.gcc_compute(s, &[], 50_000_000, 1, &[]);
        b.build()
    }

    #[test]
    fn measured_single_gang_with_reduction_patch() {
        let run = run_with_one_gang();
        let set = SourceSet::with_text("t.c", SRC);
        let c = run_rule_with(&run, &set, check);
        assert_eq!(c.findings.len(), 1);
        let f = &c.findings[0];
        assert_eq!(f.locations[0].line, Some(4));
        assert_eq!(f.cost_ns, Some(50_000_000));
        assert_eq!(
            f.proposal.directive.as_deref(),
            Some("#pragma acc parallel loop collapse(2) reduction(max:m) // max")
        );
        assert_eq!(f.proposal.edits.len(), 1);
    }

    #[test]
    fn without_source_it_still_reports() {
        let run = run_with_one_gang();
        let c = run_rule(&run, check);
        let f = &c.findings[0];
        assert!(f.proposal.edits.is_empty());
        assert!(f
            .proposal
            .no_patch
            .as_deref()
            .unwrap_or("")
            .contains("not read"));
    }

    #[test]
    fn fortran_kernels_without_reduction() {
        let src = "program p\n  real :: a(10,10), b(10,10)\n  integer :: i, j\n  !$acc kernels\n  do j = 1, 10\n    do i = 1, 10\n      a(i,j) = b(i,j)\n    end do\n  end do\n  !$acc end kernels\nend program p\n";
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("p.f90", 4);
        b.gcc_compute(s, &[], 10_000_000, 1, &[]);
        let run = b.build();
        let set = SourceSet::with_text("p.f90", src);
        let c = run_rule_with(&run, &set, check);
        let f = &c.findings[0];
        assert_eq!(
            f.proposal.directive.as_deref(),
            Some("!$acc parallel loop collapse(2) gang vector")
        );
        assert_eq!(
            f.proposal.edits.len(),
            2,
            "directive + delete of `!$acc end kernels`"
        );
    }

    #[test]
    fn a_carried_scalar_gets_no_patch() {
        let src = "int main(void) {\n  double t = 0, a[10];\n#pragma acc kernels\n  for (int i = 0; i < 10; i++) { a[i] = t; t = a[i] + 1; }\n  return 0;\n}\n";
        let mut b = RunBuilder::new(HashMode::Off);
        let s = b.site("c.c", 3);
        b.gcc_compute(s, &[], 10_000_000, 1, &[]);
        let run = b.build();
        let set = SourceSet::with_text("c.c", src);
        let c = run_rule_with(&run, &set, check);
        let f = &c.findings[0];
        assert!(f.proposal.edits.is_empty());
        assert!(f.proposal.no_patch.as_deref().unwrap_or("").contains("`t`"));
    }
}
