//! The collector's record of real GPU runs: traces recorded on an NVIDIA
//! H200 (CUDA 13.0, CUPTI 13.0, GCC 12 nvptx offload) by
//! tests/fixtures/record.sh, read back and checked against what the
//! programs do. Source lines come from the binaries in
//! tests/fixtures/h200/bin only, so the tests read the same on every machine.

mod support;

use std::path::Path;

use accprof_analyzer::{ConstructClass, Run};
use accprof_trace::CopyKind;

fn fixture(name: &str) -> Run {
    support::h200_fixture(name)
}

fn line_of(run: &Run, c: accprof_analyzer::ConstructId) -> (String, Option<u32>) {
    let s = run.site(run.construct(run.top_level(c)).site);
    let file = Path::new(&s.file)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    (file, s.line)
}

/// laplace_bad.c ran 20 iterations (record.sh: N=256, ITERS=20, TOL=0).
/// Each iteration runs two `kernels` regions (lines 148 and 154); each
/// region copies both global arrays A and Anew in and out implicitly, each
/// 8*(LAPLACE_NMAX+2)^2 bytes with LAPLACE_NMAX=1024, whatever N is.
#[test]
fn laplace_bad_c_every_kernel_and_copy_is_recorded_and_attributed() {
    const ITERS: usize = 20;
    const ARRAY: u64 = 8 * 1026 * 1026;
    let run = fixture("laplace_bad_c");
    assert!(run.cupti_active(), "{:?}", run.process.header.sources);
    assert!(run.process.losses.is_empty());
    assert!(
        run.process.dropped.iter().all(|(_, n)| *n == 0),
        "{:?}",
        run.process.dropped
    );
    assert_eq!(run.process.devices.len(), 1);
    assert!(
        run.process.devices[0].name.contains("H200"),
        "{:?}",
        run.process.devices
    );

    // Kernels: one per compute region, all device-timed, all joined.
    assert_eq!(run.kernels().len(), 2 * ITERS);
    for (_, k) in run.kernels() {
        let c = k.construct.expect("kernel joined to its construct");
        assert_eq!(
            line_of(&run, c),
            ("laplace_bad.c".into(), Some(k_line(&run, &k)))
        );
        assert!(k.end_ns > k.start_ns);
        assert!(k.grid.iter().all(|&g| g >= 1) && k.block[0] >= 32);
    }
    let at = |line: u32| {
        run.kernels()
            .map(|(_, x)| x)
            .filter(|k| line_of(&run, k.construct.expect("joined")).1 == Some(line))
            .collect::<Vec<_>>()
    };
    assert_eq!(at(148).len(), ITERS);
    assert_eq!(at(154).len(), ITERS);
    // GCC 12 could not parallelize the fmax loop: it runs on one gang.
    assert!(at(154).iter().all(|k| k.grid == [1, 1, 1]));
    assert!(at(148).iter().all(|k| k.grid[0] > 1));

    // Copies: libgomp reports none of the array copies through acc_prof;
    // CUPTI sees them all, each joined to its region's line.
    let big: Vec<_> = run
        .transfers()
        .map(|(_, x)| x)
        .filter(|c| c.bytes == ARRAY)
        .collect();
    let up = big
        .iter()
        .filter(|c| c.kind == CopyKind::HostToDevice)
        .count();
    let down = big
        .iter()
        .filter(|c| c.kind == CopyKind::DeviceToHost)
        .count();
    assert_eq!(
        (up, down),
        (4 * ITERS, 4 * ITERS),
        "2 arrays x 2 regions per iteration"
    );
    for (_, c) in run.transfers() {
        let owner = c.construct.expect("every copy joined to its construct");
        let (file, line) = line_of(&run, owner);
        assert_eq!(file, "laplace_bad.c");
        assert!(matches!(line, Some(148) | Some(154)), "{line:?}");
        assert!(c.end_ns > c.start_ns, "device-timed");
    }
    for line in [148, 154] {
        let n = big
            .iter()
            .filter(|c| line_of(&run, c.construct.expect("joined")).1 == Some(line))
            .count();
        assert_eq!(n, 4 * ITERS, "line {line}");
    }
}

fn k_line(run: &Run, k: &accprof_analyzer::Kernel) -> u32 {
    line_of(run, k.construct.expect("joined")).1.expect("line")
}

/// Every kernel and every copy of every GPU fixture is joined to the
/// construct that caused it, and every compute construct has a source line.
#[test]
fn all_fixtures_join_completely() {
    for name in [
        "laplace_bad_c",
        "laplace_good_c",
        "laplace_bad_f90",
        "laplace_good_f90",
        "heat2d_naive",
        "heat2d_data",
        "jacobi_f90",
        "launch_storm",
    ] {
        let run = fixture(name);
        assert!(run.cupti_active(), "{name}");
        assert!(!run.kernels().is_empty(), "{name}");
        assert!(
            run.kernels().all(|(_, k)| k.construct.is_some()),
            "{name}: kernels"
        );
        assert!(
            run.transfers().all(|(_, c)| c.construct.is_some()),
            "{name}: copies"
        );
        for c in run
            .constructs()
            .map(|(_, x)| x)
            .filter(|c| c.class == ConstructClass::Compute)
        {
            assert!(
                run.site(c.site).line.is_some(),
                "{name}: compute construct without a line"
            );
        }
    }
}

/// heat2d_naive (record.sh: 256 x 256, 20 steps): one compute construct per
/// step with copyin(u) and copyout(unew) of the whole grid.
#[test]
fn heat2d_naive_moves_the_grid_every_step() {
    let run = fixture("heat2d_naive");
    let grid = 8 * 256 * 256;
    let up = run
        .transfers()
        .map(|(_, x)| x)
        .filter(|c| c.kind == CopyKind::HostToDevice && c.bytes == grid)
        .count();
    let down = run
        .transfers()
        .map(|(_, x)| x)
        .filter(|c| c.kind == CopyKind::DeviceToHost && c.bytes == grid)
        .count();
    assert_eq!(run.kernels().len(), 20);
    assert_eq!((up, down), (20, 20));
}

/// Lines of tests/programs/api_routines.c marked `api: NAME`, with NAME.
fn api_marks() -> Vec<(u32, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/api_routines.c");
    std::fs::read_to_string(src)
        .expect("source")
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let name = l.split("/* api: ").nth(1)?.split([' ', '*']).next()?;
            Some((i as u32 + 1, name.to_string()))
        })
        .collect()
}

/// tests/programs/api_routines.c run on the H200 (the binary in
/// fixtures/h200/bin): every copy CUPTI saw belongs to a construct, and the
/// copies the API routines made belong to the call of that routine at the
/// line that called it.
#[test]
fn api_routine_copies_are_attributed_to_their_calling_lines() {
    let run = fixture("api_routines");
    assert!(run.cupti_active(), "{:?}", run.process.header.sources);
    let marks = api_marks();
    assert!(marks.len() >= 10, "{marks:?}");
    let mut copies_at: std::collections::BTreeMap<u32, usize> = Default::default();
    for (_, c) in run.transfers() {
        let k = c.construct.expect("every copy joined to a construct");
        let top = run.top_level(k);
        if let ConstructClass::ApiCall(r) = run.construct(top).class {
            let (file, line) = line_of(&run, top);
            assert_eq!(file, "api_routines.c");
            let line = line.expect("a line");
            let name = &marks
                .iter()
                .find(|(l, _)| *l == line)
                .unwrap_or_else(|| panic!("copy of {} at unmarked line {line}", run.routine(r)))
                .1;
            assert_eq!(run.routine(r), name, "line {line}");
            *copies_at.entry(line).or_default() += 1;
        }
    }
    // The routines that move data moved it at their own lines.
    for (line, name) in &marks {
        let moves = matches!(
            name.as_str(),
            "acc_copyin"
                | "acc_update_device"
                | "acc_update_self"
                | "acc_copyout"
                | "acc_memcpy_to_device"
                | "acc_memcpy_from_device"
                | "acc_copyin_async"
        );
        let n = copies_at.get(line).copied().unwrap_or(0);
        if moves {
            let want = if name == "acc_update_device" { 3 } else { 1 };
            assert_eq!(n, want, "{name} at line {line}: {copies_at:?}");
        } else {
            assert_eq!(n, 0, "{name} at line {line} moves nothing");
        }
    }
}

/// samples/device_fault.c on the H200: an async kernel wrote through a bad
/// pointer; libgomp found out at `wait(1)` and exited with status 1. The
/// trace says so: the driver's error, the exit status and the construct
/// the program died in.
#[test]
fn a_device_fault_leaves_its_error_its_status_and_the_construct_it_died_in() {
    let run = fixture("device_fault");
    assert_eq!(
        run.process.ending.map(|e| e.how),
        Some(accprof_trace::Ending::Exit(Some(1)))
    );
    assert!(
        run.process
            .diagnostics
            .iter()
            .any(|(_, m)| m.contains("CUDA_ERROR_ILLEGAL_ADDRESS")),
        "{:?}",
        run.process.diagnostics
    );
    let f = run.in_flight().expect("a construct in flight");
    assert!(f.file.ends_with("device_fault.c"), "{f:?}");
    assert_eq!(f.line, Some(61), "{f:?}");
    let out = support::accprof_on_fixtures("report")
        .arg(support::h200_fixtures().join("device_fault.trace"))
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ending: the program exited with status 1"),
        "{text}"
    );
    assert!(text.contains("device_fault.c:61"), "{text}");
    assert!(text.contains("error: cuStreamSynchronize failed"), "{text}");
}

/// `accprof analyze` of a fixture with its binaries and the repository's
/// samples, as the fixtures' README says; stdout with its wrapped lines
/// read as one.
fn analyze_fixture(gpu: &str, name: &str) -> String {
    on_fixture(gpu, name, &["analyze"])
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// default_async ran 10 rounds of a `data` region: D6 counts 10
/// iterations with one upload and one download each, and, saving nothing,
/// ranks after the race (S4) that made the run fail its check.
#[test]
fn default_async_findings_say_what_the_trace_shows() {
    let s = analyze_fixture("h100", "default_async_fail");
    assert!(s.contains("#1 S4 "), "{s}");
    assert!(s.contains("evidence: iterations 10,"), "{s}");
    assert!(s.contains("reached 10 times;"), "{s}");
    assert!(s.contains("(1 up and 1 down per reach)"), "{s}");
    let d6 = s.find(" D6 ").expect("D6");
    assert!(d6 > s.find(" A1 ").expect("A1"), "{s}");
}

/// device_fault's kernels ran (and faulted) but CUPTI never delivered
/// their records: the allocation they used is not called unused.
#[test]
fn lost_device_records_are_no_evidence_of_unused_memory() {
    let s = analyze_fixture("h200", "device_fault");
    assert!(
        s.contains("device records not yet delivered by CUPTI are lost"),
        "{s}"
    );
    assert!(!s.contains(" A2 ") && !s.contains(" U1 "), "{s}");
    assert!(s.contains("No findings."), "{s}");
    assert!(
        s.contains("U1/A2 (unused uploads and allocations) not checked: 2 compute constructs ran on the device with no kernel record (lines 55, 58)"),
        "{s}"
    );
}

fn on_fixture(gpu: &str, name: &str, args: &[&str]) -> String {
    support::on_fixture(gpu, name, args)
}

/// The findings as `accprof analyze` lists them: (rule, title).
fn findings_in_text(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let (n, rest) = l.strip_prefix('#')?.split_once(' ')?;
            n.parse::<usize>().ok()?;
            let (rule, title) = rest.split_once("  ")?;
            Some((rule.to_string(), title.to_string()))
        })
        .collect()
}

/// The findings as `accprof analyze --json` lists them: (rule, title).
fn findings_in_json(json: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(json).expect("valid JSON");
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().expect(k).to_string();
            (s("rule"), s("title"))
        })
        .collect()
}

/// The findings table of `accprof export`, in its rows' order: (rule, title).
fn findings_in_csv(csv_text: &str) -> Vec<(String, String)> {
    let mut rows = csv::Reader::from_reader(csv_text.as_bytes());
    let headers = rows.headers().expect("a header").clone();
    let col = |name: &str| headers.iter().position(|h| h == name).expect(name);
    let (finding, rule, title) = (col("finding"), col("rule"), col("title"));
    rows.records()
        .enumerate()
        .map(|(i, r)| {
            let r = r.expect("a row");
            assert_eq!(r[finding], (i + 1).to_string(), "rows in rank order");
            (r[rule].to_string(), r[title].to_string())
        })
        .collect()
}

/// The rules of the timeline's findings panel, drawn on a test screen, by
/// the number the panel gives each.
fn rules_in_panel(screen: &str) -> Vec<String> {
    let mut rows: Vec<(usize, String)> = screen
        .lines()
        .filter_map(|l| {
            let panel = l.rsplit('│').next()?;
            let mut words = panel.trim_start_matches('>').split_whitespace();
            let n = words.next()?.parse::<usize>().ok()?;
            let rule = words.next()?;
            let is_rule = rule.len() == 2
                && rule.starts_with(|c: char| c.is_ascii_uppercase())
                && rule.ends_with(|c: char| c.is_ascii_digit());
            is_rule.then(|| (n, rule.to_string()))
        })
        .collect();
    rows.sort();
    let numbers: Vec<usize> = rows.iter().map(|r| r.0).collect();
    assert_eq!(numbers, (1..=rows.len()).collect::<Vec<_>>(), "{screen}");
    rows.into_iter().map(|r| r.1).collect()
}

/// The findings' order has one owner, the analyzer: `analyze` (text and
/// JSON), the export's findings table and the timeline's findings panel
/// list them alike. default_async's D6 saves nothing, so it ranks after
/// the race (S4) and the allocations (A1, unmeasured) in every view,
/// although it costs the most.
#[test]
fn every_view_ranks_the_findings_alike() {
    use accprof_analyzer::testkit::fixtures;
    for (gpu, name) in [
        ("h100", "default_async_fail"),
        ("h100", "default_async_pass"),
        ("h100", "laplace_bad_f90_1024"),
        ("h100", "mpi_slab_f90_np2.r0"),
        ("h200", "api_routines"),
        ("h200", "laplace_bad_c"),
    ] {
        let text = findings_in_text(&on_fixture(gpu, name, &["analyze"]));
        let json = findings_in_json(&on_fixture(gpu, name, &["analyze", "--json"]));
        let table = on_fixture(
            gpu,
            name,
            &["export", "--format", "csv", "--what", "findings"],
        );
        let table = findings_in_csv(&table);
        assert!(text.len() >= 3, "{name}: {text:?}");
        assert_eq!(text, json, "{name}: analyze text and --json");
        assert_eq!(text, table, "{name}: analyze and the findings table");

        let path = fixtures::dir(gpu).join(format!("{name}.trace"));
        let run = fixtures::load(gpu, name);
        let session = accprof_tui::Session::open(vec![(path, run)], &[fixtures::samples()]);
        let state = accprof_tui::state::State::new(&session);
        let listed: Vec<(String, String)> = state
            .findings
            .iter()
            .map(|f| {
                let x = session.groups[f.group].finding(f.index).expect("finding");
                (x.id.to_string(), x.title.clone())
            })
            .collect();
        assert_eq!(text, listed, "{name}: analyze and the timeline");
        let screen = accprof_tui::render_text(&session, &state, 160, 60);
        let rules: Vec<String> = text.iter().map(|(r, _)| r.clone()).collect();
        assert_eq!(rules, rules_in_panel(&screen), "{name}: the panel drawn");
    }
    let order = findings_in_text(&on_fixture("h100", "default_async_fail", &["analyze"]));
    let rules: Vec<&str> = order.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(rules, ["S4", "A1", "D6"]);
}

/// launch_storm's findings (two R1, one L5) estimate no saving: the
/// headline says so instead of "could save about 0 ns".
#[test]
fn a_headline_without_estimated_savings_says_so() {
    let s = analyze_fixture("h200-ledger", "launch_storm_2000");
    assert!(
        s.contains(
            "3 findings, ranked by the time they cost; what they could save is not estimated"
        ),
        "{s}"
    );
    assert!(!s.contains("could save about 0 ns"), "{s}");
    // Where some are estimated, the headline says how many are not.
    let s = analyze_fixture("h100", "mpi_slab_f90_np2.r0");
    assert!(
        s.contains(
            "each transfer counted once), not counting the one whose saving is not estimated."
        ),
        "{s}"
    );
}

/// Analyzed away from its sources (every recorded path mapped to an
/// empty directory), launch_storm still gets its runtime-bound finding,
/// first, for the program as a whole, with both shares of the wall time
/// (its start-up is 28% of it).
#[test]
fn a_runtime_bound_program_needs_no_sources() {
    let empty = tempfile::tempdir().expect("temp dir");
    let dir = accprof_analyzer::testkit::fixtures::dir("h200-ledger");
    let out = std::process::Command::new(support::accprof())
        .arg("analyze")
        .arg("--symbols")
        .arg(dir.join("bin"))
        .arg("--source-map")
        .arg(format!("/={}", empty.path().display()))
        .arg(dir.join("launch_storm_2000.trace"))
        .env_remove("ACCPROF_SYMBOL_PATH")
        .env("ACCPROF_SYMBOLS_ONLY", "1")
        .output()
        .expect("accprof runs");
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(s.contains("not found: its findings show lines only"), "{s}");
    let found = findings_in_text(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(found[0].0, "R1", "{found:?}");
    assert!(found[0].1.starts_with("runtime-bound program"), "{found:?}");
    assert!(
        s.contains("cost 172 ms (46% of the wall time, 64% without start-up)"),
        "{s}"
    );
}
