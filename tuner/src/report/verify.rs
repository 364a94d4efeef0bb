//! The before/after table of `accprof analyze --verify`: what was built
//! and run, whether the outputs agree (and if not, where), and the device
//! and wall times of both runs with their ratio, and per source line the
//! comparison of `accprof diff` (the same wording and layout).

use std::fmt::Write as _;

use accprof_analyzer::compare::{jit_mismatch, StartUp, Totals};
use accprof_reports::diff::{render_lines, render_totals};

use crate::verify::{Difference, Measured, NotMeasured, Verified};

fn not_measured(n: &NotMeasured) -> String {
    let mut why = format!(
        "no CUPTI in this run ({}); device times need it",
        n.no_cupti
    );
    if n.host_fallback {
        why.push_str("; the program ran on the host fallback, where nothing is transferred");
    }
    why
}

/// A run's totals as `accprof diff` shows them: its device times (0
/// when not measured), wall time and constructs reached.
fn totals(m: &Measured, startup: StartUp) -> Totals {
    let d = m.device.as_ref().ok();
    Totals {
        wall_ns: m.wall_ns,
        kernel_ns: d.map_or(0, |d| d.kernel_ns),
        transfer_ns: d.map_or(0, |d| d.transfer_ns),
        transfers: d.map_or(0, |d| d.transfers),
        transfer_bytes: d.map_or(0, |d| d.transfer_bytes),
        constructs: m.constructs,
        cupti: d.is_some(),
        startup,
    }
}

/// The report of one verify, as text.
pub fn render(v: &Verified) -> Vec<u8> {
    let mut s = String::new();
    let (a, b) = (&v.before, &v.after);
    let files: Vec<String> = std::iter::once(&v.source)
        .chain(&v.also)
        .map(|p| p.display().to_string())
        .collect();
    let _ = writeln!(s, "\nverify: {} patched with {}", files.join(", "), v.patch);
    let _ = writeln!(s, "  build: {}\n  run:   {}", v.build, v.run);
    let ignored: Vec<String> = v.ignored.iter().map(|x| format!("{x:?}")).collect();
    let _ = writeln!(
        s,
        "  output: {} (stdout compared line by line, {} lines, ignoring lines that start with {}); exit codes {} and {}",
        if v.same_output() { "identical" } else { "DIFFERENT" },
        a.lines.len(),
        ignored.join(" or "),
        a.code,
        b.code
    );
    for d in &v.differences {
        match d {
            Difference::Line {
                number,
                before,
                after,
                others,
            } => {
                let _ = writeln!(
                    s,
                    "    first difference, line {number}:\n      before: {before}\n      after:  {after}"
                );
                if *others > 0 {
                    let lines = if *others == 1 { "line" } else { "lines" };
                    let _ = writeln!(s, "    and {others} more {lines} differ");
                }
            }
            Difference::LineCount { before, after } => {
                let _ = writeln!(s, "    before has {before} lines, after {after}");
            }
            Difference::ExitCode { before, after } => {
                let _ = writeln!(s, "    exit code {before} before, {after} after");
            }
        }
    }
    // The start-up of each run, when both traces were read.
    let startup = a
        .summary
        .as_ref()
        .zip(b.summary.as_ref())
        .map(|(x, y)| (StartUp::of(x), StartUp::of(y)));
    let (x, y) = startup.unwrap_or_default();
    let why = match (&a.device, &b.device) {
        (Ok(_), Ok(_)) => None,
        (Err(n), _) | (_, Err(n)) => Some(not_measured(n)),
    };
    render_totals(&mut s, &totals(a, x), &totals(b, y), why.as_deref());
    if let Some(j) = startup.and_then(|(x, y)| jit_mismatch(&x, &y)) {
        let _ = writeln!(s, "  warning: {j}");
    }
    if let (Some(x), Some(y)) = (&a.summary, &b.summary) {
        render_lines(&mut s, &accprof_analyzer::compare::compare(x, y));
    }
    if let Some(k) = &v.kept {
        let _ = writeln!(s, "  kept: {} (builds, traces and outputs)", k.display());
    }
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::DeviceTimes;
    use std::path::PathBuf;

    fn measured(code: u8, wall_ns: u64, device: Result<DeviceTimes, NotMeasured>) -> Measured {
        Measured {
            code,
            wall_ns,
            lines: vec!["a".to_string(), "b".to_string()],
            trace: PathBuf::from("/w/before.trace"),
            device,
            constructs: 20,
            summary: None,
        }
    }

    fn verified(before: Measured, after: Measured, differences: Vec<Difference>) -> Verified {
        Verified {
            source: PathBuf::from("/src/laplace.c"),
            also: Vec::new(),
            patch: "#1 L3, #2 D6".to_string(),
            build: "gcc {src} -o {out}".to_string(),
            run: "{out} 64".to_string(),
            ignored: vec!["time:".to_string()],
            before,
            after,
            differences,
            kept: Some(PathBuf::from("/w")),
        }
    }

    fn text(v: &Verified) -> String {
        String::from_utf8(render(v)).expect("utf-8")
    }

    #[test]
    fn the_lines_not_compared_are_named() {
        let mut v = verified(
            measured(0, 10, Err(NotMeasured::default())),
            measured(0, 10, Err(NotMeasured::default())),
            Vec::new(),
        );
        v.ignored = vec!["time:".to_string(), "Mop/s".to_string()];
        let s = text(&v);
        assert!(
            s.contains(
                "ignoring lines that start with \"time:\" or \"Mop/s\"); exit codes 0 and 0"
            ),
            "{s}"
        );
    }

    #[test]
    fn device_times_side_by_side_with_ratios() {
        let dev = |transfer_ns, transfers, kernel_ns| {
            Ok(DeviceTimes {
                transfer_ns,
                transfers,
                transfer_bytes: transfers << 20,
                kernel_ns,
            })
        };
        let v = verified(
            measured(0, 3_000_000_000, dev(8_000_000, 40, 2_000_000)),
            measured(0, 1_000_000_000, dev(2_000_000, 4, 2_000_000)),
            Vec::new(),
        );
        let s = text(&v);
        assert!(s.starts_with("\nverify: /src/laplace.c patched with #1 L3, #2 D6\n  build: gcc {src} -o {out}\n  run:   {out} 64\n"), "{s}");
        assert!(s.contains("  output: identical (stdout compared line by line, 2 lines, ignoring lines that start with \"time:\"); exit codes 0 and 0\n"), "{s}");
        let row = |label: &str| {
            s.lines()
                .find(|l| l.trim_start().starts_with(label))
                .unwrap_or_else(|| panic!("no {label} row in {s}"))
                .to_string()
        };
        assert!(
            row("host<->device transfer time").ends_with("   4.0x less"),
            "{s}"
        );
        // The rows of `accprof diff`, in its layout.
        let words = |label: &str| -> Vec<String> {
            row(label).split_whitespace().map(str::to_string).collect()
        };
        assert_eq!(words("transfers"), ["transfers", "40", "4"], "{s}");
        assert_eq!(
            words("bytes moved"),
            ["bytes", "moved", "40.0", "MiB", "4.00", "MiB"],
            "{s}"
        );
        assert!(row("kernel time").ends_with("   1.0x less"), "{s}");
        assert!(row("wall time (process)").ends_with("   3.0x less"), "{s}");
        assert!(
            row("OpenACC constructs reached").ends_with("20           20"),
            "{s}"
        );
        assert!(
            s.ends_with("  kept: /w (builds, traces and outputs)\n"),
            "{s}"
        );
        assert!(!s.contains("difference"), "{s}");
    }

    #[test]
    fn differences_and_missing_device_times_are_spelled_out() {
        let host = || {
            Err(NotMeasured {
                no_cupti: "libcupti.so not found".to_string(),
                host_fallback: true,
            })
        };
        let v = verified(
            measured(0, 10, host()),
            measured(1, 20, host()),
            vec![
                Difference::Line {
                    number: 2,
                    before: "b".to_string(),
                    after: "c".to_string(),
                    others: 3,
                },
                Difference::LineCount {
                    before: 2,
                    after: 5,
                },
                Difference::ExitCode {
                    before: 0,
                    after: 1,
                },
            ],
        );
        let s = text(&v);
        assert!(s.contains("  output: DIFFERENT (stdout"), "{s}");
        assert!(s.contains("    first difference, line 2:\n      before: b\n      after:  c\n    and 3 more lines differ\n    before has 2 lines, after 5\n    exit code 0 before, 1 after\n"), "{s}");
        assert!(s.contains("n/a          n/a   not measured: no CUPTI in this run (libcupti.so not found); device times need it; the program ran on the host fallback"), "{s}");
        assert!(s.contains("kernel time                           n/a          n/a   not measured (same reason)"), "{s}");
        assert!(s.contains("2.0x more"), "{s}");
    }

    /// The original ran right after its build and compiled its PTX at
    /// start-up (small_kernels_16_100: 87 ms of code loading), the patched
    /// one found its code cached (small_kernels_8_300): the report says so
    /// and gives the wall times without start-up beside the process's.
    #[test]
    fn a_run_that_compiled_its_code_against_a_warm_one_is_said() {
        let summary = |name: &str| {
            accprof_analyzer::testkit::fixtures::load("h200-ledger", name)
                .summary()
                .clone()
        };
        let with = |name: &str, wall_ns: u64| Measured {
            summary: Some(summary(name)),
            ..measured(
                0,
                wall_ns,
                Err(NotMeasured {
                    no_cupti: String::new(),
                    host_fallback: false,
                }),
            )
        };
        let v = verified(
            with("small_kernels_16_100", 500_000_000),
            with("small_kernels_8_300", 500_000_000),
            Vec::new(),
        );
        let s = text(&v);
        assert!(
            s.contains("  warning: before compiled its device code at start-up (the CUDA driver's cache missed: 87.1 ms of code loading"),
            "{s}"
        );
        let row = s
            .lines()
            .find(|l| l.trim_start().starts_with("without CUDA start-up"))
            .unwrap_or_else(|| panic!("no row in {s}"));
        assert!(row.contains("309 ms") && row.contains("366 ms"), "{s}");

        let v = verified(
            with("small_kernels_8_300", 500_000_000),
            with("launch_storm_2000", 500_000_000),
            Vec::new(),
        );
        assert!(!text(&v).contains("warning"), "{}", text(&v));
    }
}
