//! `accprof export` and `accprof diff` on the H200 fixture traces: CSV and
//! JSON goldens, the diff of the laplace samples before and after their
//! fix, the Chrome and Perfetto timelines read back and counted against
//! the model, the plots' structure, pandas reading every CSV with the
//! documented dtypes, and the one-line errors.
//!
//! Goldens live in tests/golden/export; rewrite them with
//! `ACCPROF_BLESS=1 cargo test -p accprof --test export`.

mod support;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use accprof_reports::export::What;
use accprof_trace::CopyKind;

fn golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/export")
        .join(name);
    accprof_analyzer::testkit::golden::check(&path, got, "cargo test -p accprof --test export");
}

/// `accprof SUBCOMMAND ARGS...` run in the fixture folder (so trace names
/// in the output are relative and the same on every machine), with the
/// sources read from the repository's samples (the fixtures recorded them
/// under `support::H200_SAMPLES`) so the findings read the same everywhere.
fn on_fixtures(subcommand: &str, args: &[&str]) -> Output {
    let mut cmd = support::accprof_on_fixtures(subcommand);
    cmd.current_dir(support::h200_fixtures());
    if subcommand != "report" {
        let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples");
        cmd.arg("--source-map")
            .arg(format!("{}={}", support::H200_SAMPLES, samples.display()));
    }
    cmd.args(args);
    cmd.output().expect("run accprof")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        support::stdout(o),
        support::stderr(o)
    );
    support::stdout(o)
}

fn trace(name: &str) -> String {
    format!("{name}.trace")
}

// ------------------------------------------------------------------- CSV

const TABLES: [&str; 7] = [
    "summary",
    "constructs",
    "kernels",
    "transfers",
    "allocations",
    "findings",
    "ranks",
];

#[test]
fn csv_tables_of_laplace_bad_c_match_their_goldens() {
    for what in TABLES {
        let o = on_fixtures(
            "export",
            &[&trace("laplace_bad_c"), "--format", "csv", "--what", what],
        );
        golden(&format!("laplace_bad_c.{what}.csv"), &ok(&o));
    }
}

/// Every table of the reports crate is one `--what` takes, by its name,
/// and written with its documented columns; `accprof --help` names each
/// among export's tables.
#[test]
fn every_table_of_the_reports_is_one_export_writes() {
    for what in What::ALL {
        let o = on_fixtures(
            "export",
            &[
                &trace("laplace_bad_c"),
                "--format",
                "csv",
                "--what",
                what.name(),
            ],
        );
        let text = ok(&o);
        let header: Vec<&str> = what.columns().iter().map(|c| c.name).collect();
        assert_eq!(
            text.lines().next(),
            Some(header.join(",").as_str()),
            "{}",
            what.name()
        );
    }
    let help = support::stdout(
        &Command::new(support::accprof())
            .arg("--help")
            .output()
            .expect("run accprof"),
    );
    let export = help
        .lines()
        .find(|l| l.trim_start().starts_with("export "))
        .unwrap_or_else(|| panic!("no export in {help}"));
    for what in What::ALL {
        assert!(
            export.contains(what.name()),
            "{} not named in {export}",
            what.name()
        );
    }
}

/// The entity tables hold one row per entity of the model, and their ids
/// join: every construct a kernel or transfer names is a construct row.
/// The constructs table's `async_queue` holds what the runtime gave, as
/// its column says: -2 (acc_async_sync) for every construct of a program
/// with no async clause, and the queue (or -1, acc_async_noval) where GCC
/// queued the data of an `async` construct.
#[test]
fn async_queue_holds_the_runtimes_value_for_synchronous_and_queued_constructs() {
    fn queues(o: &Output) -> Vec<String> {
        let csv = ok(o);
        let mut rows = csv::Reader::from_reader(csv.as_bytes());
        let col = rows
            .headers()
            .expect("a header")
            .iter()
            .position(|h| h == "async_queue")
            .expect("an async_queue column");
        rows.records()
            .map(|r| r.expect("a row")[col].to_string())
            .collect()
    }
    let sync = queues(&on_fixtures(
        "export",
        &[
            &trace("laplace_bad_c"),
            "--format",
            "csv",
            "--what",
            "constructs",
        ],
    ));
    assert!(!sync.is_empty());
    assert!(sync.iter().all(|q| q == "-2"), "{sync:?}");
    let h100 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h100");
    let queued = support::accprof_on_fixtures("export")
        .arg("--symbols")
        .arg(h100.join("bin"))
        .arg(h100.join("default_async_fail.trace"))
        .args(["--format", "csv", "--what", "constructs"])
        .output()
        .expect("accprof runs");
    let queued = queues(&queued);
    for q in ["-2", "-1", "1"] {
        assert!(queued.iter().any(|v| v == q), "{q} in {queued:?}");
    }
}

#[test]
fn csv_rows_are_the_model_entities_and_ids_join() {
    let run = support::h200_fixture("laplace_bad_c");
    let rows = |what: &str| -> Vec<HashMap<String, String>> {
        let text = ok(&on_fixtures(
            "export",
            &[&trace("laplace_bad_c"), "-f", "csv", "--what", what],
        ));
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let headers = r.headers().expect("header").clone();
        r.records()
            .map(|rec| {
                let rec = rec.expect("record");
                headers
                    .iter()
                    .zip(rec.iter())
                    .map(|(h, v)| (h.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    };
    let constructs = rows("constructs");
    let kernels = rows("kernels");
    let transfers = rows("transfers");
    assert_eq!(constructs.len(), run.constructs().len());
    assert_eq!(kernels.len(), run.kernels().len());
    assert_eq!(transfers.len(), run.transfers().len());
    assert_eq!(rows("allocations").len(), run.allocs().len());
    let ids: HashSet<&str> = constructs
        .iter()
        .map(|r| r["construct_id"].as_str())
        .collect();
    for r in kernels.iter().chain(&transfers) {
        assert!(ids.contains(r["construct_id"].as_str()), "{r:?}");
    }
    // The kernel time of the table is the model's.
    let ns: u64 = kernels
        .iter()
        .map(|r| {
            let (us, frac) = r["device_time_us"].split_once('.').expect("us.ns");
            us.parse::<u64>().expect("us") * 1000 + frac.parse::<u64>().expect("ns")
        })
        .sum();
    assert_eq!(ns, run.kernels().map(|(_, k)| k.device_ns()).sum::<u64>());
    // Each kernel row names the line of its construct.
    for r in &kernels {
        let c = &constructs
            .iter()
            .find(|c| c["construct_id"] == r["construct_id"])
            .expect("construct");
        assert_eq!((&c["file"], &c["line"]), (&r["file"], &r["line"]));
    }
}

// ------------------------------------------------------------------ JSON

#[test]
fn json_of_laplace_good_c_matches_its_golden_and_the_csv_tables() {
    let text = ok(&on_fixtures(
        "export",
        &[&trace("laplace_good_c"), "--format", "json"],
    ));
    golden("laplace_good_c.json", &text);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON parses");
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["traces"][0], "laplace_good_c.trace");
    for what in TABLES {
        let csv = ok(&on_fixtures(
            "export",
            &[&trace("laplace_good_c"), "-f", "csv", "--what", what],
        ));
        let rows = doc["tables"][what].as_array().expect("table");
        assert_eq!(rows.len(), csv.lines().count() - 1, "{what}");
        let columns: Vec<&str> = What::ALL
            .iter()
            .find(|w| w.name() == what)
            .expect("table")
            .columns()
            .iter()
            .map(|c| c.name)
            .collect();
        for r in rows {
            let keys: Vec<&str> = r
                .as_object()
                .expect("row object")
                .keys()
                .map(String::as_str)
                .collect();
            let mut want = columns.clone();
            want.sort_unstable();
            let mut got = keys.clone();
            got.sort_unstable();
            assert_eq!(got, want, "{what}");
        }
    }
    let run = support::h200_fixture("laplace_good_c");
    let t = run.totals();
    assert_eq!(
        doc["totals"]["transfer_time_us"].as_f64(),
        Some(t.transfer_ns as f64 / 1000.0)
    );
}

/// `report --json` and `report --csv` give the summary tables of `export`.
#[test]
fn report_json_and_csv_are_the_export_summary() {
    let t = trace("laplace_bad_c");
    let csv = ok(&on_fixtures("report", &["--csv", &t]));
    let exported = ok(&on_fixtures(
        "export",
        &[&t, "-f", "csv", "--what", "summary"],
    ));
    assert_eq!(csv, exported);
    let json = ok(&on_fixtures("report", &["--json", &t]));
    let doc: serde_json::Value = serde_json::from_str(&json).expect("parses");
    let full: serde_json::Value =
        serde_json::from_str(&ok(&on_fixtures("export", &[&t, "-f", "json"]))).expect("parses");
    assert_eq!(doc["tables"]["summary"], full["tables"]["summary"]);
    assert_eq!(doc["tables"]["ranks"], full["tables"]["ranks"]);
    assert_eq!(doc["totals"], full["totals"]);
    assert!(doc["tables"].get("kernels").is_none());
}

// ------------------------------------------------------------------- MPI

/// Several traces: per-rank rows in every entity table, a ranks table
/// with one row per trace and a total with its imbalance, and the
/// imbalance of each line in the summary.
#[test]
fn several_traces_give_per_rank_rows_totals_and_imbalance() {
    let traces = [trace("laplace_bad_c"), trace("laplace_good_c")];
    let args = |extra: &[&'static str]| {
        let mut v: Vec<&str> = traces.iter().map(String::as_str).collect();
        v.extend_from_slice(extra);
        v
    };
    let ranks = ok(&on_fixtures(
        "export",
        &args(&["-f", "csv", "--what", "ranks"]),
    ));
    golden("two_ranks.ranks.csv", &ranks);
    let lines: Vec<&str> = ranks.lines().collect();
    assert_eq!(lines.len(), 1 + 2 + 1, "{ranks}");
    assert!(lines[3].starts_with("total,"), "{ranks}");
    let kernels = ok(&on_fixtures(
        "export",
        &args(&["-f", "csv", "--what", "kernels"]),
    ));
    let per_rank: Vec<usize> = ["0,", "1,"]
        .iter()
        .map(|r| kernels.lines().filter(|l| l.starts_with(r)).count())
        .collect();
    let bad = support::h200_fixture("laplace_bad_c").kernels().len();
    let good = support::h200_fixture("laplace_good_c").kernels().len();
    assert_eq!(per_rank, vec![bad, good]);
    let summary = ok(&on_fixtures(
        "export",
        &args(&["-f", "csv", "--what", "summary"]),
    ));
    let mut r = csv::Reader::from_reader(summary.as_bytes());
    let h = r.headers().expect("header").clone();
    let imb = h.iter().position(|c| c == "imbalance").expect("column");
    assert!(
        r.records()
            .any(|x| x.expect("row").get(imb).is_some_and(|v| !v.is_empty())),
        "no line has an imbalance:\n{summary}"
    );
    let json = ok(&on_fixtures(
        "export",
        &args(&["-f", "json", "--what", "ranks"]),
    ));
    let doc: serde_json::Value = serde_json::from_str(&json).expect("parses");
    assert_eq!(doc["totals"]["ranks"], 2);
    assert_eq!(doc["tables"]["ranks"].as_array().map(Vec::len), Some(3));
}

// ------------------------------------------------------------------ diff

/// Transfer time of the rows of lines found in both runs (the compute
/// regions), before and after.
fn matched_transfer_times(doc: &serde_json::Value) -> (f64, f64) {
    let mut sums = (0.0, 0.0);
    for r in doc["rows"].as_array().expect("rows") {
        let entry = r["entry"].as_str().expect("entry");
        let matched = r["matched"].as_str().expect("matched");
        if (entry == "copyin" || entry == "copyout") && (matched == "line" || matched == "order") {
            sums.0 += r["before"]["time_us"].as_f64().unwrap_or(0.0);
            sums.1 += r["after"]["time_us"].as_f64().unwrap_or(0.0);
        }
    }
    sums
}

/// laplace_bad.c against laplace_good.c: the data region takes the array
/// copies out of the loop, so the transfers at the two compute regions
/// (matched in order: the patch moved them from lines 148 and 154 to 134
/// and 142) take over 50 times less time; the single-gang kernel of line
/// 154 became a parallel one.
#[test]
fn diff_of_laplace_c_before_and_after_its_fix() {
    let (b, a) = (trace("laplace_bad_c"), trace("laplace_good_c"));
    let text = ok(&on_fixtures("diff", &[&b, &a]));
    golden("laplace_c.diff.txt", &text);
    assert!(
        text.contains("laplace_bad.c:154 -> laplace_good.c:142"),
        "{text}"
    );
    assert!(text.contains("laplace_good.c:132"), "{text}");
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&on_fixtures("diff", &["--json", &b, &a]))).expect("parses");
    golden(
        "laplace_c.diff.json",
        &serde_json::to_string_pretty(&doc).expect("json"),
    );
    let (before, after) = matched_transfer_times(&doc);
    assert!(
        before > 50.0 * after && after > 0.0,
        "transfer time at the compute regions {before} us -> {after} us"
    );
    let totals = &doc["totals"];
    let ratio = totals["ratio"]["transfer_time"].as_f64().expect("ratio");
    let (tb, ta) = (
        totals["before"]["transfer_time_us"]
            .as_f64()
            .expect("before"),
        totals["after"]["transfer_time_us"].as_f64().expect("after"),
    );
    assert!(
        (ratio - tb / ta).abs() < 1e-9 * ratio,
        "{ratio} vs {tb}/{ta}"
    );
    assert!(ratio > 10.0, "total transfer time ratio {ratio}");
    let bytes = |s: &str| totals[s]["transfer_bytes"].as_f64().expect("bytes");
    assert!(bytes("before") > 50.0 * bytes("after"));
    // How each row was matched is said; the new data region is new.
    let rows = doc["rows"].as_array().expect("rows");
    assert!(rows.iter().any(|r| r["matched"] == "new"
        && r["after_line"] == 132
        && r["construct"] == "data region"));
    assert!(rows.iter().all(|r| r["matched"] != "gone"), "{text}");
    let kernel154 = rows
        .iter()
        .find(|r| r["entry"] == "kernel" && r["before_line"] == 154)
        .expect("kernel row of line 154");
    assert_eq!(kernel154["after_line"], 142);
    assert_eq!(kernel154["matched"], "order");
    assert!(kernel154["time_ratio"].as_f64().expect("ratio") > 100.0);
}

/// The Fortran samples: the same fix. Their arrays are small (N = 256 at
/// run time in an array sized for it), so the copies were already quick:
/// the bytes moved drop over 50 times, the time less.
#[test]
fn diff_of_laplace_fortran_before_and_after_its_fix() {
    let (b, a) = (trace("laplace_bad_f90"), trace("laplace_good_f90"));
    let text = ok(&on_fixtures("diff", &[&b, &a]));
    golden("laplace_f90.diff.txt", &text);
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&on_fixtures("diff", &["--json", &b, &a]))).expect("parses");
    let totals = &doc["totals"];
    let bytes = |s: &str| totals[s]["transfer_bytes"].as_f64().expect("bytes");
    assert!(
        bytes("before") > 50.0 * bytes("after"),
        "{} -> {} bytes",
        bytes("before"),
        bytes("after")
    );
    let (before, after) = matched_transfer_times(&doc);
    assert!(before > 5.0 * after, "{before} us -> {after} us");
    // Program units differ in name (laplace_bad, laplace_good): the lines
    // are still matched, in order, and none vanishes.
    let rows = doc["rows"].as_array().expect("rows");
    assert!(rows.iter().all(|r| r["matched"] != "gone"), "{text}");
    assert!(rows
        .iter()
        .any(|r| r["entry"] == "kernel" && r["before_line"] == 65 && r["matched"] == "order"));
}

/// At 1024 points a copy's time is its bandwidth: the fixes of laplace,
/// in C and in Fortran, cut the transfer time more than 50-fold (the
/// H200 fixtures are too small for that: their copies are latency).
#[test]
fn diff_of_laplace_at_1024_points_cuts_transfer_time_more_than_50x() {
    let dir = accprof_analyzer::testkit::fixtures::dir("h100");
    for lang in ["c", "f90"] {
        let (b, a) = (
            dir.join(format!("laplace_bad_{lang}_1024.trace")),
            dir.join(format!("laplace_good_{lang}_1024.trace")),
        );
        let out = Command::new(support::accprof())
            .arg("diff")
            .arg("--json")
            .arg("--symbols")
            .arg(dir.join("bin"))
            .env("ACCPROF_SYMBOLS_ONLY", "1")
            .arg(&b)
            .arg(&a)
            .output()
            .expect("run accprof");
        let doc: serde_json::Value = serde_json::from_str(&ok(&out)).expect("parses");
        let time = |s: &str| doc["totals"][s]["transfer_time_us"].as_f64().expect("time");
        assert!(
            time("before") > 50.0 * time("after"),
            "{lang}: {} us -> {} us",
            time("before"),
            time("after")
        );
        let rows = doc["rows"].as_array().expect("rows");
        assert!(rows.iter().all(|r| r["matched"] != "gone"), "{lang}: {doc}");
    }
}

/// The rows count what the totals count: the constructs reached at each
/// line (a compute construct's implicit data regions are its own), so the
/// host rows add up to "OpenACC constructs reached".
#[test]
fn diff_rows_count_the_constructs_the_totals_count() {
    for (b, a) in [
        ("laplace_bad_c", "laplace_good_c"),
        ("laplace_bad_f90", "laplace_good_f90"),
        ("heat2d_naive", "heat2d_data"),
    ] {
        let doc: serde_json::Value =
            serde_json::from_str(&ok(&on_fixtures("diff", &["--json", &trace(b), &trace(a)])))
                .expect("parses");
        let rows = doc["rows"].as_array().expect("rows");
        for side in ["before", "after"] {
            let counted: u64 = rows
                .iter()
                .filter(|r| r["entry"] == "host")
                .filter_map(|r| r[side]["count"].as_u64())
                .sum();
            let total = doc["totals"][side]["constructs"].as_u64().expect("total");
            assert_eq!(counted, total, "{b} -> {a}, {side}");
        }
    }
    // laplace_bad.c line 154: 20 iterations reach its compute region once
    // each (its data clauses' implicit data regions are not counted apart).
    let doc: serde_json::Value = serde_json::from_str(&ok(&on_fixtures(
        "diff",
        &["--json", &trace("laplace_bad_c"), &trace("laplace_good_c")],
    )))
    .expect("parses");
    let host154 = doc["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["entry"] == "host" && r["before_line"] == 154)
        .expect("host row of line 154");
    assert_eq!(host154["before"]["count"], 20, "{host154}");
}

/// Two unrelated programs: warned of on stderr (and in the JSON), since
/// their lines can only be paired by construct order. A program and its
/// fix under another name (laplace_bad, laplace_good) are not.
#[test]
fn diff_of_unrelated_programs_warns() {
    let out = on_fixtures("diff", &[&trace("heat2d_naive"), &trace("launch_storm")]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: before and after look like different programs (heat2d_naive, launch_storm: no executable or source file name in common)"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_str(&ok(&on_fixtures(
        "diff",
        &["--json", &trace("heat2d_naive"), &trace("launch_storm")],
    )))
    .expect("parses");
    let warnings = doc["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    // One program before and after its fix, under other names.
    for (b, a) in [
        ("heat2d_naive", "heat2d_data"),
        ("laplace_bad_c", "laplace_good_c"),
    ] {
        let out = on_fixtures("diff", &[&trace(b), &trace(a)]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        assert!(!err.contains("different programs"), "{b} -> {a}: {err}");
    }
}

/// The note on CUPTI names the run without it, or says neither has it.
#[test]
fn diff_says_which_run_has_no_cupti() {
    let dir = tempfile::tempdir().expect("tmp");
    let bad = dir.path().join("bad.trace");
    let good = dir.path().join("good.trace");
    for (from, to) in [("laplace_bad_c", &bad), ("laplace_good_c", &good)] {
        let t =
            accprof_trace::read_file(&support::h200_fixtures().join(trace(from))).expect("reads");
        let mut header = t.header.clone();
        header.sources.cupti = accprof_trace::SourceState::Inactive("off for the test".into());
        let records: Vec<accprof_trace::Record> = t
            .records
            .into_iter()
            .filter(|r| {
                !matches!(
                    r,
                    accprof_trace::Record::Kernel(_)
                        | accprof_trace::Record::Memcpy(_)
                        | accprof_trace::Record::Memset(_)
                )
            })
            .collect();
        accprof_analyzer::testkit::trace::write_trace(to, &header, &records);
    }
    let (b, g) = (bad.to_str().expect("utf-8"), good.to_str().expect("utf-8"));
    let (cb, cg) = (trace("laplace_bad_c"), trace("laplace_good_c"));
    let cases = [
        ([b, g], "note: neither run has CUPTI device times"),
        ([b, cg.as_str()], "note: before has no CUPTI device times"),
        ([cb.as_str(), g], "note: after has no CUPTI device times"),
    ];
    for (args, says) in cases {
        let text = ok(&on_fixtures("diff", &args));
        let notes: Vec<&str> = text.lines().filter(|l| l.contains("note:")).collect();
        assert_eq!(notes.len(), 1, "{text}");
        assert!(notes[0].contains(says), "{text}");
    }
    let text = ok(&on_fixtures("diff", &[&cb, &cg]));
    assert!(!text.contains("CUPTI"), "{text}");
}

#[test]
fn diff_csv_has_the_rows_and_the_totals() {
    let (b, a) = (trace("laplace_bad_c"), trace("laplace_good_c"));
    let csv = ok(&on_fixtures("diff", &["--csv", &b, &a]));
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&on_fixtures("diff", &["--json", &b, &a]))).expect("parses");
    let rows = doc["rows"].as_array().expect("rows").len();
    assert_eq!(csv.lines().count(), 1 + rows + 3, "{csv}");
    for total in ["wall_time", "kernel_time", "transfer_time"] {
        assert!(
            csv.lines()
                .any(|l| l.contains(&format!(",{total},,total,"))),
            "{csv}"
        );
    }
}

// -------------------------------------------------------------- timelines

#[test]
fn chrome_trace_holds_every_kernel_copy_and_construct_of_the_model() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("t.json");
    let run = support::h200_fixture("laplace_bad_c");
    ok(&on_fixtures(
        "export",
        &[
            &trace("laplace_bad_c"),
            "-f",
            "chrome",
            "-o",
            out.to_str().expect("utf-8"),
        ],
    ));
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("read")).expect("Chrome JSON parses");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let count = |ph: &str, cat: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == ph && (cat.is_empty() || e["cat"] == cat))
            .count()
    };
    let by_kind = |k: CopyKind| run.transfers().filter(|(_, t)| t.kind == k).count();
    assert_eq!(count("X", "kernel"), run.kernels().len());
    assert_eq!(count("X", "copyin"), by_kind(CopyKind::HostToDevice));
    assert_eq!(count("X", "copyout"), by_kind(CopyKind::DeviceToHost));
    assert_eq!(count("X", "construct"), run.constructs().len());
    let caused = run.kernels().filter(|(_, k)| k.construct.is_some()).count()
        + run
            .transfers()
            .filter(|(_, t)| t.construct.is_some())
            .count();
    assert_eq!(count("s", "flow"), caused);
    assert_eq!(count("f", "flow"), caused);
    // Args: source line and launch shape.
    let k = events
        .iter()
        .find(|e| e["cat"] == "kernel" && e["args"]["grid"] == "1x1x1")
        .expect("the single-gang kernel");
    assert!(
        k["args"]["source"]
            .as_str()
            .is_some_and(|s| s.ends_with("laplace_bad.c:154")),
        "{k}"
    );
    assert_eq!(k["args"]["block"], "32x1x1");
}

/// Two ranks: two processes, each with its own kernels, in one time line.
#[test]
fn chrome_trace_of_two_ranks_has_a_process_each() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("t.json");
    ok(&on_fixtures(
        "export",
        &[
            &trace("laplace_bad_c"),
            &trace("laplace_good_c"),
            "-f",
            "chrome",
            "-o",
            out.to_str().expect("utf-8"),
        ],
    ));
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("read")).expect("parses");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let processes: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .collect();
    assert_eq!(processes.len(), 2);
    assert!(processes[0]["args"]["name"]
        .as_str()
        .is_some_and(|n| n.starts_with("rank 0 laplace_bad")));
    for (pid, name) in [(1, "laplace_bad_c"), (2, "laplace_good_c")] {
        let kernels = events
            .iter()
            .filter(|e| e["cat"] == "kernel" && e["pid"] == pid)
            .count();
        assert_eq!(kernels, support::h200_fixture(name).kernels().len());
    }
}

/// A protobuf field: varint, fixed64 or bytes.
#[derive(Debug, Clone, Copy)]
enum Val<'a> {
    Int(u64),
    Bytes(&'a [u8]),
}

fn varint(b: &[u8], i: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*i];
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn fields(b: &[u8]) -> Vec<(u64, Val<'_>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i);
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push((field, Val::Int(varint(b, &mut i)))),
            1 => {
                let v = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
                i += 8;
                out.push((field, Val::Int(v)));
            }
            2 => {
                let n = varint(b, &mut i) as usize;
                out.push((field, Val::Bytes(&b[i..i + n])));
                i += n;
            }
            w => panic!("wire type {w} at {i}"),
        }
    }
    out
}

fn int(f: &[(u64, Val<'_>)], n: u64) -> Option<u64> {
    f.iter().find_map(|(k, v)| match (k, v) {
        (k, Val::Int(x)) if *k == n => Some(*x),
        _ => None,
    })
}

fn text<'a>(f: &[(u64, Val<'a>)], n: u64) -> Option<&'a str> {
    f.iter().find_map(|(k, v)| match (k, v) {
        (k, Val::Bytes(x)) if *k == n => std::str::from_utf8(x).ok(),
        _ => None,
    })
}

/// Perfetto's trace processor is not available offline (the PyPI package
/// downloads its binary at run time), so the file is decoded back here:
/// every slice begins and ends on a declared track, in time order,
/// properly nested, and the slices are the model's kernels, copies and
/// constructs.
#[test]
fn perfetto_trace_decodes_to_the_model_entities() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("t.pftrace");
    let run = support::h200_fixture("laplace_bad_c");
    ok(&on_fixtures(
        "export",
        &[
            &trace("laplace_bad_c"),
            "-f",
            "perfetto",
            "-o",
            out.to_str().expect("utf-8"),
        ],
    ));
    let bytes = std::fs::read(&out).expect("read");
    let mut tracks: HashMap<u64, String> = HashMap::new();
    // (timestamp, order, track, begin?, category, name)
    let mut events: Vec<(u64, usize, u64, bool, String, String)> = Vec::new();
    let (mut flows_out, mut flows_in) = (HashSet::new(), HashSet::new());
    for (n, (field, v)) in fields(&bytes).into_iter().enumerate() {
        assert_eq!(field, 1, "a Trace holds only packets");
        let Val::Bytes(p) = v else { panic!("packet") };
        let p = fields(p);
        assert_eq!(int(&p, 10), Some(1), "sequence id");
        for (f, v) in &p {
            match (f, v) {
                (60, Val::Bytes(d)) => {
                    let d = fields(d);
                    let uuid = int(&d, 1).expect("uuid");
                    if let Some(parent) = int(&d, 5) {
                        assert!(tracks.contains_key(&parent), "parent declared first");
                    }
                    tracks.insert(uuid, text(&d, 2).expect("name").to_string());
                }
                (11, Val::Bytes(e)) => {
                    let e = fields(e);
                    let track = int(&e, 11).expect("track");
                    assert!(tracks.contains_key(&track), "track {track} declared");
                    let ts = int(&p, 8).expect("timestamp");
                    let begin = match int(&e, 9) {
                        Some(1) => true,
                        Some(2) => false,
                        t => panic!("type {t:?}"),
                    };
                    for (k, v) in &e {
                        match (k, v) {
                            (47, Val::Int(id)) => assert!(flows_out.insert(*id)),
                            (48, Val::Int(id)) => assert!(flows_in.insert(*id)),
                            _ => {}
                        }
                    }
                    events.push((
                        ts,
                        n,
                        track,
                        begin,
                        text(&e, 22).unwrap_or("").to_string(),
                        text(&e, 23).unwrap_or("").to_string(),
                    ));
                }
                _ => {}
            }
        }
    }
    let begins = |cat: &str| events.iter().filter(|e| e.3 && e.4 == cat).count();
    let by_kind = |k: CopyKind| run.transfers().filter(|(_, t)| t.kind == k).count();
    assert_eq!(begins("kernel"), run.kernels().len());
    assert_eq!(begins("copyin"), by_kind(CopyKind::HostToDevice));
    assert_eq!(begins("copyout"), by_kind(CopyKind::DeviceToHost));
    assert_eq!(begins("construct"), run.constructs().len());
    assert_eq!(flows_out, flows_in);
    let caused = run.kernels().filter(|(_, k)| k.construct.is_some()).count()
        + run
            .transfers()
            .filter(|(_, t)| t.construct.is_some())
            .count();
    assert_eq!(flows_out.len(), caused);
    // The file is in time order; every end closes a slice open on its
    // track, and the kernel slices last as long as the model's kernels.
    assert!(
        events.windows(2).all(|w| w[0].0 <= w[1].0),
        "packets out of time order"
    );
    let mut open: HashMap<u64, Vec<(u64, String)>> = HashMap::new();
    let mut kernel_ns = 0;
    for (ts, _, track, begin, cat, _) in &events {
        let stack = open.entry(*track).or_default();
        if *begin {
            stack.push((*ts, cat.clone()));
        } else {
            let (start, cat) = stack.pop().expect("an end closes an open slice");
            if cat == "kernel" {
                kernel_ns += ts - start;
            }
        }
    }
    assert!(open.values().all(Vec::is_empty));
    assert_eq!(
        kernel_ns,
        run.kernels().map(|(_, k)| k.device_ns()).sum::<u64>()
    );
    assert!(tracks
        .values()
        .any(|n| n.contains("stream") && n.contains("kernels")));
    assert!(tracks.values().any(|n| n.contains("host->device")));
}

// ------------------------------------------------------------------ plots

#[test]
fn svg_plot_has_one_bar_segment_per_line_and_series() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("lines.svg");
    ok(&on_fixtures(
        "export",
        &[
            &trace("laplace_bad_c"),
            "-f",
            "svg",
            "--plot",
            "lines",
            "-o",
            out.to_str().expect("utf-8"),
        ],
    ));
    let svg = std::fs::read_to_string(&out).expect("read");
    let doc = roxmltree::Document::parse(&svg).expect("SVG is XML");
    let fills = |colour: &str| {
        doc.descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(colour))
            .count()
    };
    let summary = support::h200_fixture("laplace_bad_c").summary().clone();
    let lines: Vec<_> = summary.functions.iter().flat_map(|f| &f.lines).collect();
    let with_kernels = lines
        .iter()
        .filter(|l| l.kernels.iter().any(|k| k.device.total_ns > 0))
        .count();
    let with_copyin = lines
        .iter()
        .filter(|l| {
            l.transfers
                .iter()
                .any(|t| t.direction == Some(CopyKind::HostToDevice) && t.time.total_ns > 0)
        })
        .count();
    // One segment per line with that share, and one legend box.
    assert_eq!(fills("#1F77B4"), with_kernels + 1, "{svg}");
    assert_eq!(fills("#FF7F0E"), with_copyin + 1, "{svg}");
    assert!(svg.contains("laplace_bad.c:154"), "{svg}");
    let root = doc.root_element();
    assert_eq!(root.attribute("width"), Some("1200"));
}

/// `accprof export TRACE -f svg --plot PLOT`, parsed: every text with its
/// left and right edge as the built-in monospaced font draws it (0.602 of
/// its size per character, from its anchor) and its baseline.
fn svg_texts(trace_name: &str, plot: &str) -> (String, Vec<(String, f64, f64, f64)>) {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("plot.svg");
    ok(&on_fixtures(
        "export",
        &[
            &trace(trace_name),
            "-f",
            "svg",
            "--plot",
            plot,
            "-o",
            out.to_str().expect("utf-8"),
        ],
    ));
    let svg = std::fs::read_to_string(&out).expect("read");
    let doc = roxmltree::Document::parse(&svg).expect("SVG is XML");
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| {
            let num = |a: &str| n.attribute(a).and_then(|v| v.parse::<f64>().ok()).expect(a);
            let text = n.text().unwrap_or("").trim().to_string();
            let w = text.chars().count() as f64 * num("font-size") * 0.602;
            let left = match n.attribute("text-anchor") {
                Some("middle") => num("x") - w / 2.0,
                Some("end") => num("x") - w,
                _ => num("x"),
            };
            (text, left, left + w, num("y"))
        })
        .collect();
    (svg, texts)
}

#[test]
fn a_lines_plot_of_one_line_gives_it_a_full_row_and_its_label() {
    // heat2d_naive spends all its time at one line.
    let (svg, texts) = svg_texts("heat2d_naive", "lines");
    let label = texts
        .iter()
        .find(|t| t.0 == "heat2d_naive.c:111")
        .unwrap_or_else(|| panic!("the line's label: {svg}"));
    let doc = roxmltree::Document::parse(&svg).expect("SVG is XML");
    // The host segment (the line's largest) and the legend's box.
    let bar = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("#969696"))
        .map(|n| {
            let num = |a: &str| n.attribute(a).and_then(|v| v.parse::<f64>().ok()).expect(a);
            (num("y"), num("height"))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("a bar");
    // One bar in a 168-pixel image: its row is about 70 pixels high.
    assert!(bar.1 >= 40.0, "bar {bar:?}");
    assert!(
        bar.0 < label.3 && label.3 < bar.0 + bar.1,
        "{label:?} beside {bar:?}"
    );
}

#[test]
fn a_sizes_plot_has_a_label_per_size_that_occurs_and_none_overlap() {
    let (svg, texts) = svg_texts("laplace_bad_c", "sizes");
    let run = support::h200_fixture("laplace_bad_c");
    let mut sizes: Vec<u32> = run
        .transfers()
        .filter(|(_, t)| t.is_host_device())
        .map(|(_, t)| 63 - t.bytes.max(1).leading_zeros())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let names: Vec<_> = texts
        .iter()
        .filter(|t| t.0.ends_with(" B") || t.0.ends_with("iB"))
        .collect();
    let want: Vec<String> = sizes
        .iter()
        .map(|&b| accprof_analyzer::units::bytes(1 << b))
        .collect();
    let got: Vec<String> = names.iter().map(|t| t.0.clone()).collect();
    assert_eq!(got, want, "{svg}");
    let rates: Vec<_> = texts.iter().filter(|t| t.0.ends_with("B/s")).collect();
    assert_eq!(rates.len(), sizes.len(), "{svg}");
    for row in [names, rates] {
        for w in row.windows(2) {
            assert!(w[0].2 <= w[1].1, "{:?} overlaps {:?}", w[0], w[1]);
        }
    }
}

#[test]
fn png_plots_are_png_files_of_the_expected_size() {
    let dir = tempfile::tempdir().expect("tmp");
    for (plot, traces) in [
        ("lines", vec!["laplace_bad_c"]),
        ("timeline", vec!["laplace_bad_c"]),
        ("sizes", vec!["laplace_bad_c"]),
        (
            "ranks",
            vec!["laplace_bad_c", "laplace_good_c", "heat2d_naive"],
        ),
    ] {
        let out = dir.path().join(format!("{plot}.png"));
        let mut args: Vec<String> = traces.iter().map(|t| trace(t)).collect();
        args.extend(
            [
                "-f",
                "png",
                "--plot",
                plot,
                "-o",
                out.to_str().expect("utf-8"),
            ]
            .map(String::from),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&on_fixtures("export", &args));
        let png = std::fs::read(&out).expect("read");
        let mut reader = png::Decoder::new(png.as_slice())
            .read_info()
            .unwrap_or_else(|e| panic!("{plot}: not a PNG: {e}"));
        let mut pixels = vec![0; reader.output_buffer_size()];
        let frame = reader.next_frame(&mut pixels).expect("decodes");
        let (w, h) = (frame.width, frame.height);
        // Something is drawn: not every pixel is the white ground.
        let drawn = pixels[..frame.buffer_size()]
            .chunks(3)
            .filter(|p| p.iter().any(|&c| c < 200))
            .count();
        assert!(drawn > 1000, "{plot}: {drawn} pixels drawn");
        assert_eq!(w, 1200, "{plot}");
        if plot == "ranks" {
            // One 28-pixel row per rank below a fixed frame.
            assert_eq!(h, 140 + 28 * 3);
        }
        assert!(
            h >= 150 && png.len() > 5_000,
            "{plot}: {h} px, {} bytes",
            png.len()
        );
    }
}

// ----------------------------------------------------------------- pandas

/// The first python3 that has pandas: $ACCPROF_PYTHON, python3,
/// /usr/bin/python3 (Debian's python3-pandas, which scripts/setup.sh
/// installs).
fn python_with_pandas() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("ACCPROF_PYTHON") {
        candidates.push(p.into());
    }
    candidates.push("python3".into());
    candidates.push("/usr/bin/python3".into());
    candidates.into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import pandas"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// pandas reads every CSV table (and the diff's) with the documented
/// dtypes and as many rows as the file holds.
#[test]
fn pandas_reads_every_csv_with_the_documented_dtypes() {
    let Some(python) = python_with_pandas() else {
        // Set ACCPROF_PYTHON to a python3 with pandas, or allow it missing.
        support::allowed_missing("pandas");
        return;
    };
    let dir = tempfile::tempdir().expect("tmp");
    let mut files: Vec<(PathBuf, &'static [accprof_reports::table::Column], usize)> = Vec::new();
    for what in What::ALL {
        let text = ok(&on_fixtures(
            "export",
            &[
                &trace("laplace_bad_c"),
                &trace("laplace_good_c"),
                "-f",
                "csv",
                "--what",
                what.name(),
            ],
        ));
        let path = dir.path().join(format!("{}.csv", what.name()));
        std::fs::write(&path, &text).expect("write");
        files.push((path, what.columns(), text.lines().count() - 1));
    }
    let diff = ok(&on_fixtures(
        "diff",
        &["--csv", &trace("laplace_bad_c"), &trace("laplace_good_c")],
    ));
    let path = dir.path().join("diff.csv");
    std::fs::write(&path, &diff).expect("write");
    files.push((
        path,
        accprof_reports::diff::DIFF_COLUMNS,
        diff.lines().count() - 1,
    ));
    let mut script = String::from("import pandas as pd\n");
    for (path, columns, rows) in &files {
        let dtypes: Vec<String> = columns
            .iter()
            .map(|c| format!("{:?}: {:?}", c.name, c.dtype.pandas()))
            .collect();
        script.push_str(&format!(
            "d = {{{}}}\ndf = pd.read_csv({:?}, dtype=d)\n\
             assert len(df) == {rows}, ({:?}, len(df))\n\
             assert list(df.columns) == list(d), ({:?}, list(df.columns))\n\
             got = {{c: str(t) for c, t in df.dtypes.items()}}\n\
             want = {{c: ('string' if t == 'string' else t) for c, t in d.items()}}\n\
             assert got == want, ({:?}, got)\n",
            dtypes.join(", "),
            path.to_str().expect("utf-8"),
            path.display().to_string(),
            path.display().to_string(),
            path.display().to_string(),
        ));
    }
    script.push_str("print('ok')\n");
    let o = Command::new(&python)
        .args(["-c", &script])
        .output()
        .expect("python");
    assert!(
        o.status.success() && support::stdout(&o).trim() == "ok",
        "{}\n{}",
        support::stderr(&o),
        script
    );
}

// ----------------------------------------------------------------- errors

fn fails(o: &Output, names: &str) {
    let err = support::stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("accprof: ") || err.starts_with("error: "),
        "{err}"
    );
    assert!(err.contains(names), "{err} does not name {names}");
}

#[test]
fn bad_input_output_and_flags_fail_with_one_line_naming_them() {
    let dir = tempfile::tempdir().expect("tmp");
    let missing = dir.path().join("missing.trace");
    let m = missing.to_str().expect("utf-8");
    fails(&on_fixtures("export", &[m, "-f", "csv"]), "missing.trace");
    fails(
        &on_fixtures("diff", &[m, &trace("laplace_bad_c")]),
        "missing.trace",
    );
    let corrupt = dir.path().join("corrupt.trace");
    std::fs::write(&corrupt, b"this is not a trace at all").expect("write");
    let c = corrupt.to_str().expect("utf-8");
    fails(&on_fixtures("export", &[c, "-f", "json"]), "corrupt.trace");
    fails(
        &on_fixtures("diff", &[&trace("laplace_bad_c"), c]),
        "corrupt.trace",
    );
    let unwritable = dir.path().join("no/such/dir/out.csv");
    fails(
        &on_fixtures(
            "export",
            &[
                &trace("laplace_bad_c"),
                "-f",
                "csv",
                "-o",
                unwritable.to_str().expect("utf-8"),
            ],
        ),
        "out.csv",
    );
    fails(
        &on_fixtures(
            "diff",
            &[
                &trace("laplace_bad_c"),
                &trace("laplace_good_c"),
                "-o",
                dir.path().to_str().expect("utf-8"),
            ],
        ),
        "directory",
    );
    fails(
        &on_fixtures("export", &[&trace("laplace_bad_c"), "-f", "png"]),
        "-o FILE",
    );
    fails(
        &on_fixtures(
            "export",
            &[&trace("laplace_bad_c"), "-f", "chrome", "--what", "kernels"],
        ),
        "--what",
    );
    let o = on_fixtures("export", &[&trace("laplace_bad_c"), "-f", "xml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(support::stderr(&o).contains("invalid value 'xml'"));
}

// ------------------------------------------------------- one name a transfer

/// The variable of transfer `id` in the Perfetto export: the name of its
/// slice and its `variable` annotation, found by its `transfer_id`.
fn perfetto_variable(bytes: &[u8], id: u64) -> Option<(String, String)> {
    for (_, v) in fields(bytes) {
        let Val::Bytes(p) = v else { continue };
        for (f, v) in fields(p) {
            let (11, Val::Bytes(e)) = (f, v) else {
                continue;
            };
            let e = fields(e);
            let mut annotations: HashMap<String, Val<'_>> = HashMap::new();
            for (k, v) in &e {
                if let (4, Val::Bytes(a)) = (k, v) {
                    let a = fields(a);
                    let name = text(&a, 10).expect("annotation name").to_string();
                    let value = a.iter().find(|(k, _)| *k == 3 || *k == 6).expect("value");
                    annotations.insert(name, value.1);
                }
            }
            if matches!(annotations.get("transfer_id"), Some(Val::Int(x)) if *x == id) {
                let Some(Val::Bytes(var)) = annotations.get("variable") else {
                    panic!("transfer {id} without a variable annotation")
                };
                let var = std::str::from_utf8(var).expect("utf-8").to_string();
                return Some((text(&e, 23).unwrap_or("").to_string(), var));
            }
        }
    }
    None
}

/// A transfer is named alike in `analyze` (text and JSON), the CSV and
/// JSON transfers tables, the Perfetto export and the timeline's details:
/// every view asks the model ([`accprof_analyzer::Run::variable`]). The
/// fixtures' runtime (GCC's libgomp) names no variable, so their names come
/// from the executable's symbols (laplace_bad.c's global arrays) or from
/// the source (heat2d_naive.c's and caller_loop.c's heap arrays).
#[test]
fn a_transfer_has_one_name_in_analyze_export_perfetto_and_the_timeline() {
    use accprof_analyzer::{Item, NameOrigin};
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples");
    let cases = [
        ("h200", "laplace_bad_c", "A", NameOrigin::Symbol),
        ("h200", "heat2d_naive", "u", NameOrigin::Source),
        ("h100", "caller_loop", "unew", NameOrigin::Source),
    ];
    for (gpu, name, var, origin) in cases {
        let dir = accprof_analyzer::testkit::fixtures::dir(gpu);
        let path = dir.join(format!("{name}.trace"));
        let mut run = accprof_analyzer::testkit::fixtures::load(gpu, name);
        let sources = accprof_analyzer::source::SourceSet::load_with(
            &run,
            std::slice::from_ref(&samples),
            &[],
            &|p| std::fs::read_to_string(p),
        );
        run.learn_names(&sources);
        let (id, _) = run
            .transfers()
            .find(|(id, _)| run.variable_from(*id) == Some((var, origin)))
            .unwrap_or_else(|| panic!("{name}: no transfer named {var} by {origin:?}"));
        let t = run.transfer(id);
        let site = run.site(run.line_site(t.construct.expect("joined")));
        let line = site.line.expect("line");
        let accprof = |sub: &str, args: &[&str]| {
            let mut cmd = Command::new(support::accprof());
            cmd.arg(sub)
                .arg("--symbols")
                .arg(dir.join("bin"))
                .arg("--source-dir")
                .arg(&samples)
                .env_remove("ACCPROF_SYMBOL_PATH")
                .env("ACCPROF_SYMBOLS_ONLY", "1")
                .arg(&path)
                .args(args);
            ok(&cmd.output().expect("run accprof"))
        };
        let named = |list: &str| list.split(", ").any(|v| v == var);

        // analyze, text: a finding's location at the transfer's line
        // lists it.
        let text = accprof("analyze", &[]);
        let at = format!(":{line}  ");
        assert!(
            text.lines().any(|l| l.contains(&at)
                && l.trim_end().ends_with(']')
                && l.rsplit_once('[')
                    .is_some_and(|(_, v)| named(v.trim_end_matches(']')))),
            "{name}: analyze names no {var} at line {line}:\n{text}"
        );
        // analyze --json: the same location.
        let doc: serde_json::Value =
            serde_json::from_str(&accprof("analyze", &["--json"])).expect("json");
        let locations = doc["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .flat_map(|f| f["locations"].as_array().expect("locations"));
        assert!(
            locations
                .filter(|l| l["line"] == line)
                .any(|l| l["variable"].as_str().is_some_and(named)),
            "{name}: analyze --json names no {var} at line {line}"
        );
        // export, CSV and JSON transfers tables: the row of the transfer.
        let csv = accprof("export", &["-f", "csv", "--what", "transfers"]);
        let row = csv
            .lines()
            .find(|l| l.split(',').nth(1) == Some(&id.number().to_string()))
            .expect("transfer row");
        assert_eq!(row.split(',').nth(4), Some(var), "{name}: {row}");
        let doc: serde_json::Value =
            serde_json::from_str(&accprof("export", &["-f", "json"])).expect("json");
        let row = doc["tables"]["transfers"]
            .as_array()
            .expect("transfers")
            .iter()
            .find(|r| r["transfer_id"] == id.number())
            .expect("transfer row");
        assert_eq!(row["variable"], var, "{name}");
        // Perfetto: the transfer's slice.
        let tmp = tempfile::tempdir().expect("tmp");
        let out = tmp.path().join("t.pftrace");
        accprof(
            "export",
            &["-f", "perfetto", "-o", out.to_str().expect("utf-8")],
        );
        let bytes = std::fs::read(&out).expect("read");
        assert_eq!(
            perfetto_variable(&bytes, u64::from(id.number())),
            Some((var.to_string(), var.to_string())),
            "{name}"
        );
        // The timeline: the details of the selected transfer.
        let fresh = accprof_analyzer::testkit::fixtures::load(gpu, name);
        let s =
            accprof_tui::Session::open(vec![(path.clone(), fresh)], std::slice::from_ref(&samples));
        let (lane, pos) = s.groups[0]
            .lanes
            .lanes
            .iter()
            .enumerate()
            .find_map(|(i, l)| Some((i, l.find(Item::Transfer(id))?)))
            .expect("the transfer's lane");
        let mut st = accprof_tui::state::State::new(&s);
        st.select(
            &s,
            accprof_tui::state::Ev {
                group: 0,
                lane,
                pos,
            },
        );
        let screen = timeline_screen(&s, &st);
        let head = format!("copy of {var} ");
        assert!(
            screen.lines().any(|l| l.contains(&head)),
            "{name}: the details do not say `{head}`:\n{screen}"
        );
    }
}

/// The timeline drawn at 120x40, as text.
fn timeline_screen(s: &accprof_tui::Session, st: &accprof_tui::state::State) -> String {
    use accprof_tui::style::Palette;
    let area = ratatui::layout::Rect::new(0, 0, 120, 40);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    accprof_tui::view::render(s, st, Palette { color: false }, area, &mut buf);
    accprof_tui::view::buffer_text(&buf)
}

// ------------------------------------------------------- ranks on one clock

/// Four MPI ranks whose clocks started at other times and whose first
/// constructs came at other times after their starts line up alike in the
/// timeline and in the Perfetto export: each rank's first construct at its
/// known Unix time, less the earliest one's ([`accprof_analyzer::Run::unix_ns`]).
#[test]
fn four_ranks_line_up_alike_in_the_timeline_and_the_perfetto_export() {
    use accprof_analyzer::testkit::trace::{header, TraceBuilder};
    const UNIX: u64 = 1_763_000_000_000_000_000;
    // The first construct's Unix time after UNIX, the time from the
    // rank's start to it, and its trace clock at the start.
    let ranks: [(u64, u64, u64); 4] = [
        (30_000, 1_000_000, 5_000),
        (0, 200_000, 7_000_000_000),
        (120_000, 3_000_000, 40_000),
        (5_000, 50_000, 2_000_000_000_000),
    ];
    let dir = tempfile::tempdir().expect("tmp");
    let mut paths = Vec::new();
    for (r, &(at, since_start, clock)) in ranks.iter().enumerate() {
        let mut h = header();
        h.rank = Some(r as u32);
        h.pid = 100 + r as u32;
        h.start_unix_ns = UNIX + at - since_start;
        h.start_clock_ns = clock;
        let mut b = TraceBuilder::new();
        // The builder puts each event 100 ns after the one before.
        b.t = clock + since_start - 100;
        b.compute(1, 1, 10, 2_000);
        let path = dir.path().join(format!("r{r}.trace"));
        accprof_analyzer::testkit::trace::write_trace(&path, &h, &b.records);
        paths.push(path);
    }
    let earliest = ranks.iter().map(|r| r.0).min().expect("ranks");
    let expected: Vec<u64> = ranks.iter().map(|r| r.0 - earliest).collect();

    // The timeline: each rank's first construct on the common clock.
    let opts = accprof_analyzer::LoadOptions::default();
    let runs = paths
        .iter()
        .map(|p| {
            let run = accprof_analyzer::load_run_with(p, &opts).expect("rank trace");
            (p.clone(), run)
        })
        .collect();
    let s = accprof_tui::Session::open(runs, &[]);
    let timeline: Vec<u64> = s
        .groups
        .iter()
        .map(|g| {
            let l = g
                .lanes
                .lanes
                .iter()
                .find(|l| matches!(l.kind, accprof_tui::lanes::LaneKind::Thread { .. }))
                .expect("thread lane");
            l.first_start()
        })
        .collect();
    assert_eq!(timeline, expected);

    // The Perfetto export: each rank's first construct slice.
    let out = dir.path().join("t.pftrace");
    let mut cmd = Command::new(support::accprof());
    cmd.arg("export")
        .args(&paths)
        .args(["-f", "perfetto", "-o"])
        .arg(&out)
        .env_remove("ACCPROF_SYMBOL_PATH");
    ok(&cmd.output().expect("run accprof"));
    let bytes = std::fs::read(&out).expect("read");
    // Track uuid -> (name, parent).
    let mut tracks: HashMap<u64, (String, Option<u64>)> = HashMap::new();
    let mut first: HashMap<u32, u64> = HashMap::new();
    for (_, v) in fields(&bytes) {
        let Val::Bytes(p) = v else { panic!("packet") };
        let p = fields(p);
        for (f, v) in &p {
            match (f, v) {
                (60, Val::Bytes(d)) => {
                    let d = fields(d);
                    let name = text(&d, 2).expect("name").to_string();
                    tracks.insert(int(&d, 1).expect("uuid"), (name, int(&d, 5)));
                }
                (11, Val::Bytes(e)) => {
                    let e = fields(e);
                    if int(&e, 9) != Some(1) || text(&e, 22) != Some("construct") {
                        continue;
                    }
                    // The rank of the track's process: "rank R ...".
                    let mut t = int(&e, 11).expect("track");
                    while let Some(parent) = tracks[&t].1 {
                        t = parent;
                    }
                    let rank: u32 = tracks[&t]
                        .0
                        .strip_prefix("rank ")
                        .and_then(|n| n.split(' ').next())
                        .and_then(|n| n.parse().ok())
                        .expect("a rank's process");
                    let ts = int(&p, 8).expect("timestamp");
                    first.entry(rank).or_insert(ts);
                }
                _ => {}
            }
        }
    }
    let perfetto: Vec<u64> = (0..4).map(|r| first[&r]).collect();
    assert_eq!(perfetto, expected);
    assert_eq!(perfetto, timeline);
}

// ------------------------------------------------------------- MPI calls

/// The H100 MPI halo exchange's two ranks, loaded with the fixture's
/// binaries, and the files' paths.
fn mpi_halo_ranks() -> (Vec<PathBuf>, Vec<accprof_analyzer::Run>) {
    let paths: Vec<PathBuf> = (0..2)
        .map(|r| {
            accprof_analyzer::testkit::fixtures::dir("h100")
                .join(format!("mpi_halo_np2.r{r}.trace"))
        })
        .collect();
    let runs = (0..2)
        .map(|r| accprof_analyzer::testkit::fixtures::load("h100", &format!("mpi_halo_np2.r{r}")))
        .collect();
    (paths, runs)
}

fn export_mpi_halo(format: &str, out: &Path) {
    let (paths, _) = mpi_halo_ranks();
    let mut cmd = Command::new(support::accprof());
    cmd.arg("export")
        .args(&paths)
        .args(["-f", format, "-o"])
        .arg(out)
        .env_remove("ACCPROF_SYMBOL_PATH");
    ok(&cmd.output().expect("run accprof"));
}

/// The model's MPI calls of a rank: (routine, bytes), sorted.
fn model_mpi_calls(run: &accprof_analyzer::Run) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = run
        .mpi_calls()
        .iter()
        .map(|c| (c.routine.clone(), c.ranges.iter().map(|r| r.bytes).sum()))
        .collect();
    v.sort();
    v
}

/// Each recorded MPI call is one Chrome slice named by its routine, with
/// its bytes, on the thread of that rank's constructs.
#[test]
fn chrome_trace_has_each_mpi_call_on_its_ranks_host_thread() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("t.json");
    export_mpi_halo("chrome", &out);
    let (_, runs) = mpi_halo_ranks();
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("read")).expect("parses");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let thread_name = |pid: &serde_json::Value, tid: &serde_json::Value| {
        events
            .iter()
            .find(|e| e["name"] == "thread_name" && &e["pid"] == pid && &e["tid"] == tid)
            .and_then(|e| e["args"]["name"].as_str())
            .unwrap_or("")
            .to_string()
    };
    for (i, run) in runs.iter().enumerate() {
        let pid = i as u64 + 1;
        assert!(!run.mpi_calls().is_empty(), "rank {i} recorded MPI calls");
        let mpi: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "mpi" && e["pid"] == pid)
            .collect();
        let mut got: Vec<(String, u64)> = mpi
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().expect("name").to_string(),
                    e["args"]["bytes"].as_u64().expect("bytes"),
                )
            })
            .collect();
        got.sort();
        assert_eq!(got, model_mpi_calls(run), "rank {i}");
        // On the track of the rank's host-thread constructs.
        let construct_tids: HashSet<u64> = events
            .iter()
            .filter(|e| e["cat"] == "construct" && e["pid"] == pid)
            .filter_map(|e| e["tid"].as_u64())
            .collect();
        for e in &mpi {
            let tid = e["tid"].as_u64().expect("tid");
            assert!(construct_tids.contains(&tid), "rank {i}: {e}");
            let thread = run.mpi_calls()[0].thread;
            assert_eq!(
                thread_name(&e["pid"], &e["tid"]),
                format!("host thread {thread}")
            );
        }
    }
}

/// The Perfetto export: one slice per MPI call per rank, named by its
/// routine with its bytes, on the host-thread track that holds the rank's
/// constructs, at the model's time on the ranks' one clock.
#[test]
fn perfetto_trace_has_each_mpi_call_on_its_ranks_host_thread() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("t.pftrace");
    export_mpi_halo("perfetto", &out);
    let (_, runs) = mpi_halo_ranks();
    let bytes = std::fs::read(&out).expect("read");
    // Track uuid -> (name, parent).
    let mut tracks: HashMap<u64, (String, Option<u64>)> = HashMap::new();
    // Per rank: the tracks of its constructs, its MPI slices as (track,
    // routine, bytes, timestamp).
    let mut construct_tracks: HashMap<u32, HashSet<u64>> = HashMap::new();
    let mut mpi: HashMap<u32, Vec<(u64, String, u64, u64)>> = HashMap::new();
    for (_, v) in fields(&bytes) {
        let Val::Bytes(p) = v else { panic!("packet") };
        let p = fields(p);
        for (f, v) in &p {
            match (f, v) {
                (60, Val::Bytes(d)) => {
                    let d = fields(d);
                    let name = text(&d, 2).expect("name").to_string();
                    tracks.insert(int(&d, 1).expect("uuid"), (name, int(&d, 5)));
                }
                (11, Val::Bytes(e)) => {
                    let e = fields(e);
                    if int(&e, 9) != Some(1) {
                        continue;
                    }
                    let track = int(&e, 11).expect("track");
                    let mut t = track;
                    while let Some(parent) = tracks[&t].1 {
                        t = parent;
                    }
                    let rank: u32 = tracks[&t]
                        .0
                        .strip_prefix("rank ")
                        .and_then(|n| n.split(' ').next())
                        .and_then(|n| n.parse().ok())
                        .expect("a rank's process");
                    match text(&e, 22) {
                        Some("construct") => {
                            construct_tracks.entry(rank).or_default().insert(track);
                        }
                        Some("mpi") => {
                            let arg = |name: &str| {
                                e.iter().find_map(|(k, v)| match (k, v) {
                                    (4, Val::Bytes(a)) => {
                                        let a = fields(a);
                                        (text(&a, 10) == Some(name)).then(|| int(&a, 3))?
                                    }
                                    _ => None,
                                })
                            };
                            mpi.entry(rank).or_default().push((
                                track,
                                text(&e, 23).expect("name").to_string(),
                                arg("bytes").expect("bytes"),
                                int(&p, 8).expect("timestamp"),
                            ));
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
    }
    let origin = runs
        .iter()
        .map(|r| r.unix_ns(r.process.span_ns.0))
        .min()
        .expect("runs");
    for run in &runs {
        let rank = run.process.header.rank.expect("an MPI rank");
        let slices = &mpi[&rank];
        let mut got: Vec<(String, u64)> = slices.iter().map(|s| (s.1.clone(), s.2)).collect();
        got.sort();
        assert_eq!(got, model_mpi_calls(run), "rank {rank}");
        for s in slices {
            assert!(construct_tracks[&rank].contains(&s.0), "rank {rank}: {s:?}");
            assert!(tracks[&s.0].0.starts_with("host thread "), "{s:?}");
        }
        // The first call at its time on the ranks' one clock.
        let first = run.mpi_calls()[0].start_ns;
        let at = (run.unix_ns(first) - origin) as u64;
        assert!(slices.iter().any(|s| s.3 == at), "rank {rank}: {at}");
    }
}

// ------------------------------------------------------------- coherence

/// A trace of the coherence driver (one lost write, two downloads nobody
/// read, one stale read) and its model.
fn coherence_run(dir: &Path) -> (PathBuf, accprof_analyzer::Run) {
    let trace = support::coherence_trace(dir);
    let run = accprof_analyzer::load_run(&trace).expect("trace loads");
    assert_eq!(run.host_accesses().len(), 4);
    (trace, run)
}

fn export_of(trace: &Path, args: &[&str]) -> String {
    let o = Command::new(support::accprof())
        .arg("export")
        .arg(trace)
        .args(args)
        .output()
        .expect("accprof runs");
    ok(&o)
}

#[test]
fn the_coherence_table_has_a_row_per_host_access_of_the_model() {
    let dir = tempfile::tempdir().expect("tmp");
    let (trace, run) = coherence_run(dir.path());
    let csv = export_of(&trace, &["-f", "csv", "--what", "coherence"]);
    let mut r = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = r
        .headers()
        .expect("header")
        .iter()
        .map(String::from)
        .collect();
    let columns: Vec<&str> = What::Coherence.columns().iter().map(|c| c.name).collect();
    assert_eq!(header, columns);
    let rows: Vec<HashMap<String, String>> =
        r.deserialize().collect::<Result<_, _>>().expect("rows");
    assert_eq!(rows.len(), run.host_accesses().len());
    let start = run.process.span_ns.0;
    for (row, (id, a)) in rows.iter().zip(run.host_access_ids()) {
        let site = run.site(run.access_site(id).expect("a site"));
        let us = |ns: u64| format!("{}.{:03}", ns / 1000, ns % 1000);
        let touched = a.kind != accprof_analyzer::vocabulary::CoherenceKind::UnreadDownload;
        let offset = if touched {
            (a.host_addr - a.range_start).to_string()
        } else {
            String::new()
        };
        let want = [
            ("access_id", id.number().to_string()),
            ("kind", a.kind.key().to_string()),
            ("time_us", us(a.time_ns - start)),
            ("thread", a.thread.to_string()),
            ("variable", "a".to_string()),
            ("range_start", a.range_start.to_string()),
            ("range_bytes", "16384".to_string()),
            ("offset", offset),
            ("file", site.file.clone()),
            ("line", site.line.map_or(String::new(), |l| l.to_string())),
        ];
        for (k, v) in want {
            assert_eq!(row[k], v, "{k} of {row:?}");
        }
    }
    // The reads and writes are at the driver's lines, the downloads at
    // their update's.
    let lines: Vec<&str> = rows.iter().map(|r| r["kind"].as_str()).collect();
    assert_eq!(
        lines,
        [
            "lost_write",
            "unread_download",
            "unread_download",
            "stale_read"
        ]
    );
    assert!(rows[0]["file"].ends_with("coherence_driver.c"), "{rows:?}");
    assert!(rows[1]["file"].ends_with("coherence_driver.c"), "{rows:?}");
    // JSON: the same rows.
    let json = export_of(&trace, &["-f", "json", "--what", "coherence"]);
    let doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let table = doc["tables"]["coherence"].as_array().expect("table");
    assert_eq!(table.len(), rows.len());
    assert_eq!(table[3]["kind"], "stale_read");
    assert_eq!(table[1]["offset"], serde_json::Value::Null);
}

#[test]
fn host_accesses_are_instants_on_their_thread_track_in_chrome_and_perfetto() {
    let dir = tempfile::tempdir().expect("tmp");
    let (trace, run) = coherence_run(dir.path());
    let start = run.process.span_ns.0;
    let thread = run.host_accesses()[0].thread;

    let chrome = export_of(&trace, &["-f", "chrome"]);
    let doc: serde_json::Value = serde_json::from_str(&chrome).expect("JSON");
    let events = doc["traceEvents"].as_array().expect("events");
    let tid = events
        .iter()
        .find(|e| {
            e["name"] == "thread_name" && e["args"]["name"] == format!("host thread {thread}")
        })
        .map(|e| e["tid"].clone())
        .expect("the thread's track");
    let instants: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "i").collect();
    assert_eq!(instants.len(), run.host_accesses().len());
    for (e, (id, a)) in instants.iter().zip(run.host_access_ids()) {
        assert_eq!(e["tid"], tid);
        assert_eq!(e["name"], a.kind.label());
        assert_eq!(e["args"]["kind"], a.kind.key());
        assert_eq!(e["args"]["access_id"], id.number());
        let ts = e["ts"].as_f64().expect("ts");
        assert!(
            (ts - (a.time_ns - start) as f64 / 1000.0).abs() < 1e-3,
            "{e}"
        );
    }

    let out = dir.path().join("t.pftrace");
    export_of(
        &trace,
        &["-f", "perfetto", "-o", out.to_str().expect("utf-8")],
    );
    let bytes = std::fs::read(&out).expect("read");
    let mut tracks: HashMap<u64, String> = HashMap::new();
    let mut found: Vec<(u64, String, String)> = Vec::new();
    for (_, v) in fields(&bytes) {
        let Val::Bytes(p) = v else { panic!("packet") };
        let p = fields(p);
        for (f, v) in &p {
            match (f, v) {
                (60, Val::Bytes(d)) => {
                    let d = fields(d);
                    tracks.insert(int(&d, 1).expect("uuid"), text(&d, 2).unwrap_or("").into());
                }
                (11, Val::Bytes(e)) => {
                    let e = fields(e);
                    if int(&e, 9) == Some(3) {
                        let track = int(&e, 11).expect("track");
                        found.push((
                            int(&p, 8).expect("timestamp"),
                            tracks[&track].clone(),
                            text(&e, 22).unwrap_or("").to_string(),
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    let want: Vec<(u64, String, String)> = run
        .host_accesses()
        .iter()
        .map(|a| {
            let cat = match a.kind {
                accprof_analyzer::vocabulary::CoherenceKind::UnreadDownload => "waste",
                _ => "coherence",
            };
            (
                a.time_ns - start,
                format!("host thread {thread}"),
                cat.to_string(),
            )
        })
        .collect();
    assert_eq!(found, want);
}

/// small_kernels_16_100 ran right after its build and compiled its PTX at
/// start-up (87 ms of code loading); small_kernels_8_300 found its code in
/// the driver's cache. `diff` says so, on stderr and in the text, and
/// gives the wall times without start-up beside the process's.
#[test]
fn diff_says_when_one_run_compiled_its_device_code_and_the_other_did_not() {
    let b = "../h200-ledger/small_kernels_16_100.trace";
    let a = "../h200-ledger/small_kernels_8_300.trace";
    let out = on_fixtures("diff", &[b, a]);
    let text = ok(&out);
    let warning = "before compiled its device code at start-up (the CUDA driver's cache missed: 87.1 ms of code loading";
    assert!(text.contains(&format!("  note: {warning}")), "{text}");
    assert!(
        support::stderr(&out).contains(&format!("accprof: warning: {warning}")),
        "{}",
        support::stderr(&out)
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("without CUDA start-up"))
        .unwrap_or_else(|| panic!("no row in {text}"));
    assert!(row.contains("238 ms") && row.contains("440 ms"), "{text}");
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&on_fixtures("diff", &["--json", b, a]))).expect("parses");
    assert_eq!(doc["totals"]["before"]["paid_jit"], true);
    assert_eq!(doc["totals"]["after"]["paid_jit"], false);
    // Both warm: nothing to say.
    let b = "../h200-ledger/launch_storm_2000.trace";
    let out = on_fixtures("diff", &[b, a]);
    assert!(!ok(&out).contains("compiled its device code"));
    assert!(!support::stderr(&out).contains("compiled its device code"));
}
