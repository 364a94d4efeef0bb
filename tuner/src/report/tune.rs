//! The results of `accprof tune`: the table (configuration, median,
//! interval, speed-up, launched shape, registers), every sample as CSV and
//! the whole result as JSON, and a plot of time against each parameter
//! (SVG, plotters).

use std::fmt::Write as _;

use crate::space::Param;
use crate::tune::{Outcome, Tuned};
use accprof_analyzer::units;
use plotters::prelude::*;

fn ns(v: f64) -> String {
    units::duration_ns(v.round().max(0.0) as u64)
}

/// The report of one sweep, as text.
pub fn render(t: &Tuned) -> Vec<u8> {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\ntune: {}:{}  {}",
        t.source.display(),
        t.line,
        t.directive
    );
    if let Some(b) = &t.build {
        let _ = writeln!(s, "  build: {b}");
    }
    let _ = writeln!(s, "  run:   {}", t.run);
    let device = match t.sm_count {
        Some(n) => format!("{} ({n} SMs)", t.device),
        None => t.device.clone(),
    };
    let _ = writeln!(
        s,
        "  device: {device}; time: {} per launch of the construct; search: {}",
        t.timing.label(),
        t.search
    );
    for (p, how) in &t.how {
        let _ = writeln!(s, "  {p}: {how}");
    }
    if let Some(why) = &t.budget_ended {
        let _ = writeln!(s, "  the budget ended the sweep: {why}");
    }
    if let Some(j) = t.jit.mismatch() {
        let _ = writeln!(s, "  warning: {j}");
    }
    let _ = writeln!(s);
    let width = t
        .outcomes
        .iter()
        .map(|o| o.key.len())
        .max()
        .unwrap_or(7)
        .max(13);
    let _ = writeln!(
        s,
        "  {:<width$}  {:>10}  {:>23}  {:>8}  {:<24}  {:>4}  note",
        "configuration", "median", "interval", "speed-up", "launched grid / block", "regs"
    );
    // The sweep's winner, when the re-check did not confirm it.
    let unconfirmed = t
        .recheck
        .as_ref()
        .filter(|r| !r.confirmed)
        .map(|r| r.candidate.as_str());
    for o in &t.outcomes {
        let _ = writeln!(s, "  {}", row(o, width, unconfirmed));
    }
    let ties: Vec<&str> = t
        .outcomes
        .iter()
        .filter(|o| o.tie)
        .map(|o| o.key.as_str())
        .collect();
    if ties.len() > 1 {
        let _ = writeln!(
            s,
            "\n  tied (intervals overlap the best one's): {}; the one closest to the default is the candidate",
            ties.join(", ")
        );
    }
    let speedup =
        |r: &crate::tune::Recheck| r.speedup.map(|x| format!(", {x:.2}x")).unwrap_or_default();
    match (t.recommended(), &t.recheck) {
        (Some(o), Some(r)) if o.key == "default" && !r.confirmed => {
            let _ = writeln!(
                s,
                "\n  recommended: keep the default: the re-check did not confirm {}{} (no patch written)",
                r.candidate,
                speedup(r)
            );
        }
        (Some(o), _) if o.key == "default" => {
            let _ = writeln!(s, "\n  recommended: keep the default (nothing measured is faster beyond the intervals)");
        }
        (Some(o), Some(_)) => {
            let _ = writeln!(s, "\n  recommended: {}", o.key);
        }
        (Some(o), None) => {
            let _ = writeln!(s, "\n  recommended: {} (not re-checked)", o.key);
        }
        (None, _) => {
            let _ = writeln!(s, "\n  no configuration could be measured");
        }
    }
    if let Some(r) = &t.recheck {
        let (d, w) = (r.default.map(|x| x.median), r.winner.map(|x| x.median));
        let _ = writeln!(
            s,
            "  re-check ({} rounds, interleaved, fresh processes): default {}, {} {}{}{}",
            r.rounds,
            d.map(ns).unwrap_or_else(|| "-".into()),
            r.candidate,
            w.map(ns).unwrap_or_else(|| "-".into()),
            speedup(r),
            if r.confirmed {
                ", confirmed (intervals apart)"
            } else {
                ", NOT confirmed (not faster beyond the intervals)"
            }
        );
    }
    if !t.patch_defines.is_empty() {
        let d: Vec<String> = t
            .patch_defines
            .iter()
            .map(|(k, v)| format!("-D{k}={v}"))
            .collect();
        let _ = writeln!(s, "  build with: {}", d.join(" "));
    }
    if !t.patch_env.is_empty() {
        let e: Vec<String> = t
            .patch_env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(s, "  run with: {}", e.join(" "));
    }
    if t.source_left_newer {
        let _ = writeln!(
            s,
            "  {} is restored with a new modification time: the build left its program in place, built from a patched text; rebuild it",
            t.source.display()
        );
    }
    let c = &t.cost;
    let _ = writeln!(
        s,
        "  cost: {} builds {}, {} runs {}, overhead {}, total {}{}",
        c.builds,
        units::duration_ns(c.build_ns),
        c.runs,
        units::duration_ns(c.run_ns),
        units::duration_ns(c.overhead_ns()),
        units::duration_ns(c.total_ns),
        if c.cached > 0 {
            format!(
                "; {} samples from the cache {}",
                c.cached,
                t.cache.display()
            )
        } else {
            String::new()
        }
    );
    s.into_bytes()
}

fn row(o: &Outcome, width: usize, unconfirmed: Option<&str>) -> String {
    let (median, interval) = match &o.stats {
        Some(st) => (ns(st.median), format!("[{}, {}]", ns(st.lo), ns(st.hi))),
        None => ("-".to_string(), "-".to_string()),
    };
    let speedup = o
        .speedup
        .map(|x| format!("{x:.2}x"))
        .unwrap_or_else(|| "-".into());
    let shape = o.shape.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
    let regs = o
        .registers
        .map(|r| r.to_string())
        .unwrap_or_else(|| "-".into());
    let mut note = Vec::new();
    if o.recommended {
        note.push("RECOMMENDED".to_string());
    } else if unconfirmed == Some(o.key.as_str()) {
        note.push("best in the sweep, not confirmed by the re-check".to_string());
    } else if o.tie {
        note.push("tie".to_string());
    }
    if let Some(st) = &o.stats {
        note.push(format!("n={}", st.n));
    }
    if o.cached > 0 {
        note.push(format!("{} cached", o.cached));
    }
    if let Some(x) = &o.same_as {
        note.push(format!("same launch as {x}"));
    }
    if let Some(x) = &o.pruned {
        note.push(format!("pruned: {x}"));
    }
    if let Some(x) = &o.excluded {
        note.push(format!("excluded: {x}"));
    }
    if let Some(x) = &o.failed {
        note.push(format!("failed: {x}"));
    }
    if !o.measured && o.pruned.is_none() {
        note.push("not run (the search or the budget left it out)".to_string());
    }
    format!(
        "{:<width$}  {median:>10}  {interval:>23}  {speedup:>8}  {shape:<24}  {regs:>4}  {}",
        o.key,
        note.join("; ")
    )
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Every sample, one row each; `cached` says which came from the cache
/// of an earlier sweep.
pub fn samples_csv(t: &Tuned) -> Vec<u8> {
    let mut s = String::from(
        "config,phase,timing,per_launch_ns,total_ns,launches,shape,registers,wall_ns,exit_code,cached\n",
    );
    for x in &t.samples {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&x.config),
            x.phase,
            match x.timing {
                crate::measure::Timing::Device => "device",
                crate::measure::Timing::Host => "host",
            },
            x.per_launch_ns,
            x.total_ns,
            x.launches,
            csv_field(&x.shape.map(|v| v.to_string()).unwrap_or_default()),
            x.registers.map(|r| r.to_string()).unwrap_or_default(),
            x.wall_ns,
            x.code,
            x.cached
        );
    }
    s.into_bytes()
}

/// The whole result, samples included.
pub fn json(t: &Tuned) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(t).unwrap_or_default();
    v.push(b'\n');
    v
}

/// Median per launch (with its interval) against the values of `param`,
/// one point per measured configuration; SVG. None when no configuration
/// with a numeric value of `param` was measured.
pub fn plot_svg(t: &Tuned, param: Param) -> Option<String> {
    let mut points: Vec<(f64, f64, f64, f64)> = t
        .outcomes
        .iter()
        .filter_map(|o| {
            let st = o.stats?;
            let x = o.config.number(param)? as f64;
            Some((x.log2(), st.median / 1e3, st.lo / 1e3, st.hi / 1e3))
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let default = t
        .default_outcome()
        .and_then(|o| o.stats)
        .map(|s| s.median / 1e3);
    let x0 = points.first().map(|p| p.0).unwrap_or(0.0) - 0.5;
    let x1 = points.last().map(|p| p.0).unwrap_or(0.0) + 0.5;
    let ymax = points
        .iter()
        .map(|p| p.3)
        .chain(default)
        .fold(0.0f64, f64::max)
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 440)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let caption = format!(
            "{}:{} time per launch against {param}",
            t.source
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            t.line
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, (accprof_reports::plot::font(), 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, 0.0..ymax.max(1e-3))
            .ok()?;
        chart
            .configure_mesh()
            .label_style((accprof_reports::plot::font(), 13))
            .x_desc(format!("{param} (log2 scale)"))
            .y_desc(match t.timing {
                crate::measure::Timing::Device => "kernel device time per launch (us)",
                crate::measure::Timing::Host => "host construct time per launch (us)",
            })
            .x_label_formatter(&|x| format!("{}", 2f64.powf(*x).round()))
            .draw()
            .ok()?;
        chart
            .draw_series(LineSeries::new(points.iter().map(|p| (p.0, p.1)), &BLUE))
            .ok()?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|p| PathElement::new(vec![(p.0, p.2), (p.0, p.3)], BLUE.stroke_width(2))),
            )
            .ok()?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|p| Circle::new((p.0, p.1), 4, BLUE.filled())),
            )
            .ok()?;
        if let Some(d) = default {
            chart
                .draw_series(LineSeries::new(vec![(x0, d), (x1, d)], &RED))
                .ok()?
                .label("default")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED));
            chart
                .configure_series_labels()
                .label_font((accprof_reports::plot::font(), 13))
                .border_style(BLACK)
                .draw()
                .ok()?;
        }
        root.present().ok()?;
    }
    Some(svg)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::measure::{Sample, Shape, Timing};
    use crate::space::Config;
    use crate::stats;
    use crate::tune::{Cost, Outcome, Recheck};

    use super::*;

    fn outcome(key: &str, vl: Option<&str>, xs: &[f64], block: u32) -> Outcome {
        Outcome {
            key: key.to_string(),
            config: Config {
                values: vl
                    .map(|v| vec![(Param::VectorLength, v.to_string())])
                    .unwrap_or_default(),
            },
            stats: stats::stats(xs),
            shape: Some(Shape::Cuda {
                grid: [8448, 1, 1],
                block: [block, 1, 1],
            }),
            registers: Some(32),
            speedup: None,
            tie: false,
            recommended: false,
            same_as: None,
            pruned: None,
            excluded: None,
            failed: None,
            cached: 0,
            measured: true,
        }
    }

    fn tuned() -> Tuned {
        let mut d = outcome("default", None, &[98e3, 100e3, 102e3], 32);
        d.speedup = Some(1.0);
        let mut a = outcome("vector_length=128", Some("128"), &[47e3, 48e3, 49e3], 128);
        a.speedup = Some(100.0 / 48.0);
        a.tie = true;
        a.recommended = true;
        let mut b = outcome(
            "vector_length=1024",
            Some("1024"),
            &[97e3, 98e3, 99e3],
            1024,
        );
        b.speedup = Some(100.0 / 98.0);
        let mut c = outcome("vector_length=32", Some("32"), &[], 32);
        c.same_as = Some("default".into());
        let mut e = outcome("vector_length=48", Some("48"), &[], 32);
        e.shape = None;
        e.registers = None;
        e.pruned = Some("vector_length 48 is not a multiple of the warp size 32".into());
        e.measured = false;
        let mut f = outcome("vector_length=512", Some("512"), &[], 512);
        f.stats = None;
        f.measured = false;
        Tuned {
            source: PathBuf::from("heat2d_data.c"),
            line: 129,
            directive: "#pragma acc parallel loop collapse(2)".into(),
            build: Some("gcc {src} -o {out}".into()),
            run: "{out} 2048 2048 100 0".into(),
            how: vec![(Param::VectorLength, "`vector_length(N)` patched".into())],
            device: "NVIDIA H200".into(),
            sm_count: Some(132),
            timing: Timing::Device,
            search: "exhaustive".into(),
            budget_ended: None,
            jit: Default::default(),
            outcomes: vec![d, a, b, c, e, f],
            recheck: Some(Recheck {
                candidate: "vector_length=128".into(),
                rounds: 3,
                default: stats::stats(&[99e3, 100e3, 101e3]),
                winner: stats::stats(&[47e3, 48e3, 49e3]),
                speedup: Some(100.0 / 48.0),
                confirmed: true,
            }),
            patch: Some("--- a\n+++ b\n".into()),
            patch_defines: Vec::new(),
            patch_env: Vec::new(),
            samples: vec![Sample {
                config: "vector_length=128".into(),
                phase: "measure".into(),
                timing: Timing::Device,
                per_launch_ns: 48_000,
                total_ns: 4_800_000,
                launches: 100,
                shape: Some(Shape::Cuda {
                    grid: [8448, 1, 1],
                    block: [128, 1, 1],
                }),
                registers: Some(32),
                wall_ns: 900_000_000,
                code: 0,
                output: 7,
                cached: false,
            }],
            cost: Cost {
                builds: 4,
                build_ns: 8_000_000_000,
                runs: 20,
                run_ns: 18_000_000_000,
                total_ns: 27_000_000_000,
                cached: 0,
            },
            cache: PathBuf::from("accprof-tune/cache.jsonl"),
            source_left_newer: false,
        }
    }

    #[test]
    fn the_table_has_every_configuration_with_its_numbers() {
        let text = String::from_utf8(render(&tuned())).expect("utf-8");
        let row = |key: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(&format!("{key} ")))
                .unwrap_or_else(|| panic!("no row {key}: {text}"))
                .to_string()
        };
        let best = row("vector_length=128");
        assert!(best.contains("48.0 us"), "{best}");
        assert!(best.contains("[47.0 us, 49.0 us]"), "{best}");
        assert!(
            best.contains("2.08x") && best.contains("8448x1x1 / 128x1x1"),
            "{best}"
        );
        assert!(best.contains("RECOMMENDED; n=3"), "{best}");
        assert!(row("vector_length=32").contains("same launch as default"));
        assert!(row("vector_length=48").contains("pruned: vector_length 48"));
        assert!(!row("vector_length=48").contains("not run"));
        assert!(row("vector_length=512").contains("not run (the search or the budget left it out)"));
        assert!(
            text.contains("device: NVIDIA H200 (132 SMs); time: kernel device time (CUPTI)"),
            "{text}"
        );
        assert!(text.contains("recommended: vector_length=128"), "{text}");
        assert!(
            text.contains("2.08x, confirmed (intervals apart)"),
            "{text}"
        );
        assert!(
            text.contains("cost: 4 builds 8.00 s, 20 runs 18.0 s, overhead 1.00 s, total 27.0 s"),
            "{text}"
        );
    }

    #[test]
    fn a_winner_the_recheck_does_not_confirm_is_not_recommended() {
        let mut t = tuned();
        // As the tuner leaves it: the default recommended, no patch.
        for o in &mut t.outcomes {
            o.recommended = o.key == "default";
        }
        t.patch = None;
        t.recheck = Some(Recheck {
            candidate: "vector_length=128".into(),
            rounds: 3,
            default: stats::stats(&[99e3, 100e3, 101e3]),
            winner: stats::stats(&[106e3, 107e3, 108e3]),
            speedup: Some(100.0 / 107.0),
            confirmed: false,
        });
        let text = String::from_utf8(render(&t)).expect("utf-8");
        assert!(
            text.contains(
                "recommended: keep the default: the re-check did not confirm vector_length=128, 0.93x (no patch written)"
            ),
            "{text}"
        );
        assert!(!text.contains("recommended: vector_length=128"), "{text}");
        assert!(
            text.contains("default 100 us, vector_length=128 107 us, 0.93x, NOT confirmed"),
            "{text}"
        );
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("vector_length=128 "))
            .unwrap_or_default();
        assert!(
            row.contains("best in the sweep, not confirmed by the re-check")
                && !row.contains("RECOMMENDED"),
            "{row}"
        );
        let default = text
            .lines()
            .find(|l| l.trim_start().starts_with("default "))
            .unwrap_or_default();
        assert!(default.contains("RECOMMENDED"), "{default}");
    }

    #[test]
    fn samples_json_and_the_plot() {
        let t = tuned();
        let csv = String::from_utf8(samples_csv(&t)).expect("utf-8");
        assert_eq!(
            csv.lines().nth(1),
            Some("vector_length=128,measure,device,48000,4800000,100,8448x1x1 / 128x1x1,32,900000000,0,false")
        );
        let json: serde_json::Value = serde_json::from_slice(&json(&t)).expect("json");
        assert_eq!(json["outcomes"][1]["stats"]["median"], 48000.0);
        let svg = plot_svg(&t, Param::VectorLength).expect("plot");
        assert!(svg.starts_with("<svg") && svg.contains("time per launch against vector_length"));
        // Measured values only: 128 and 1024 (32 launched as the default).
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
        assert!(plot_svg(&t, Param::NumGangs).is_none());
    }
}
