//! Every view reports a construct at one source line, decided once by the
//! model: a structured region's end at its own pragma line, not at the line
//! of its body the runtime reports the end from. (Host fallback here: the
//! runtime still reports the regions' entries and exits.)

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use accprof_analyzer::{load_run, ConstructClass, Run};
use accprof_trace::ConstructKind;
use support::*;

fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/host_data.c")
}

/// The line of the one directive of `kind` in host_data.c.
fn pragma_line(kind: &str) -> u32 {
    let lines = directive_lines(&source(), &[kind]);
    assert_eq!(lines.len(), 1, "{kind} directives: {lines:?}");
    lines[0]
}

/// Runs host_data under the collector (`LD_PRELOAD`) and returns its trace.
fn traced(dir: &Path) -> PathBuf {
    let out = support::preloaded(&program("host_data"), &dir.join("t.trace"))
        .current_dir(dir)
        .output()
        .expect("program runs");
    assert!(out.status.success(), "host_data: {}", stderr(&out));
    assert_eq!(stdout(&out), "sum: 2017\n");
    dir.join("t.trace")
}

fn load(path: &Path) -> Run {
    load_run(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The source lines of `accprof report`'s summary that report anything.
fn summary_lines(trace: &Path) -> Vec<(u32, String)> {
    let out = Command::new(accprof())
        .arg("report")
        .arg(trace)
        .output()
        .expect("accprof report runs");
    assert!(out.status.success(), "report: {}", stderr(&out));
    stdout(&out)
        .lines()
        .filter_map(|l| {
            let (line, what) = l.trim_start().split_once(": ")?;
            Some((line.parse().ok()?, what.to_string()))
        })
        .collect()
}

#[test]
fn host_data_region_ends_at_its_own_pragma_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = traced(dir.path());
    let run = load(&trace);
    let (data, host_data) = (pragma_line("data"), pragma_line("host_data"));
    let host_data_regions: Vec<_> = run
        .constructs()
        .filter(|(_, c)| c.kind == Some(ConstructKind::HostData) && c.parent.is_none())
        .collect();
    let classes: Vec<ConstructClass> = host_data_regions.iter().map(|(_, c)| c.class).collect();
    assert_eq!(
        classes,
        [ConstructClass::EnterData, ConstructClass::ExitData],
        "the host_data region's entry and exit"
    );
    for (id, c) in &host_data_regions {
        assert_eq!(
            run.site(run.line_site(*id)).line,
            Some(host_data),
            "{:?} of the host_data region (runtime's line {:?})",
            c.class,
            run.site(c.site).line
        );
    }
    let data_lines: Vec<_> = run
        .constructs()
        .filter(|(_, c)| c.kind == Some(ConstructKind::Data) && c.parent.is_none())
        .map(|(id, c)| (c.class, run.site(run.line_site(id)).line))
        .collect();
    assert_eq!(
        data_lines,
        [
            (ConstructClass::EnterData, Some(data)),
            (ConstructClass::ExitData, Some(data))
        ],
        "the data region's entry and exit"
    );
    // One entry for each region, at its pragma line, and nothing at the
    // lines of the bodies.
    assert_eq!(
        summary_lines(&trace),
        [
            (data, "data region reached 2 times".to_string()),
            (host_data, "data region reached 2 times".to_string()),
        ]
    );
}
