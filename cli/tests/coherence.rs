//! The coherence check (`--check coherence`, `ACCPROF_CHECK=coherence`)
//! end to end on the host: a program playing a runtime with device memory
//! of its own (a second buffer) drives the real collector through its
//! stale reads, the programs' own SIGSEGV handlers and genuine faults; the
//! OpenACC sample runs on the host fallback, where the check does not
//! apply; bad values are refused.

mod support;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

use accprof_trace::{CoherenceKind, Ending, Record};
use support::*;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The records of the only trace in `dir`.
fn records(dir: &Path) -> Vec<Record> {
    let t = traces(dir);
    assert_eq!(t.len(), 1, "one trace in {}: {t:?}", dir.display());
    accprof_trace::read_file(&t[0])
        .expect("trace reads")
        .records
}

fn coherence(records: &[Record]) -> Vec<accprof_trace::Coherence> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Coherence(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// The two addresses the driver prints: the array and the element it reads.
fn addresses(out: &str) -> (u64, u64) {
    let line = out
        .lines()
        .find(|l| l.starts_with("range "))
        .expect("range line");
    let hex = |w: &str| u64::from_str_radix(w.trim_start_matches("0x"), 16).expect("hex");
    let w: Vec<&str> = line.split_whitespace().collect();
    (hex(w[1]), hex(w[3]))
}

#[test]
fn a_stale_read_is_recorded_once_and_the_program_reads_what_it_would_have() {
    let dir = tempdir();
    let out = drive(dir.path(), "stale", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // The host copy's value, not the device's (1001): unchanged by the check.
    assert!(text.contains("host read 1000\n"), "{text}");
    assert!(text.contains("other read 7\n"), "{text}");
    assert!(text.contains("a[1000] after exit data 1001\n"), "{text}");
    assert!(
        stderr(&out).contains("coherence check: watched 1 host ranges (16.0 KiB); 1 faults (")
            && stderr(&out)
                .contains("stale host reads: 1 confirmed, 0 found current, 0 unconfirmed"),
        "{}",
        stderr(&out)
    );
    let (range, read) = addresses(&text);
    let recs = records(dir.path());
    let found = coherence(&recs);
    assert_eq!(found.len(), 1, "{found:?}");
    let c = &found[0];
    assert_eq!(c.kind, CoherenceKind::StaleRead);
    assert_eq!((c.range_start, c.range_bytes), (range, 2048 * 8));
    assert_eq!(c.host_addr, read);
    assert!(c.confirmed);
    let name = recs.iter().find_map(|r| match r {
        Record::String { id, text } if Some(*id) == c.variable => Some(text.clone()),
        _ => None,
    });
    assert_eq!(name.as_deref(), Some("a"));
    assert_ne!(c.code_addr, 0);
}

#[test]
fn the_stale_read_is_c1_at_the_line_that_read() {
    let dir = tempdir();
    let out = drive(dir.path(), "stale", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let trace = &traces(dir.path())[0];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/coherence_driver.c");
    let line = std::fs::read_to_string(&src)
        .expect("source")
        .lines()
        .position(|l| l.contains("    v = va[1000];"))
        .expect("the read")
        + 1;
    let a = Command::new(accprof())
        .args(["analyze", "--json"])
        .arg(trace)
        .output()
        .expect("analyze runs");
    assert!(a.status.success(), "{}", stderr(&a));
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).expect("json");
    let f = &v["findings"][0];
    assert_eq!(f["rule"], "C1", "{v}");
    assert_eq!(f["category"], "correctness");
    let title = f["title"].as_str().expect("title");
    assert!(
        title.starts_with(&format!(
            "stale host read of a at coherence_driver.c:{line}:"
        )),
        "{title}"
    );
    assert_eq!(evidence_u64(f, "reads"), 1);
    // The CSV export takes it through the common path.
    let csv = Command::new(accprof())
        .args(["export", "-f", "csv", "--what", "findings"])
        .arg(trace)
        .output()
        .expect("export runs");
    assert!(csv.status.success(), "{}", stderr(&csv));
    let rows = stdout(&csv);
    let first = rows.lines().nth(1).expect("a finding row");
    assert!(
        first.contains("C1") && first.contains("correctness"),
        "{rows}"
    );
}

#[test]
fn a_read_on_another_thread_is_recorded_on_that_thread() {
    let dir = tempdir();
    let out = drive(dir.path(), "thread", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("host read 1000\n"), "{text}");
    let reader: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("reader "))
        .and_then(|t| t.parse().ok())
        .expect("reader line");
    let (_, read) = addresses(&text);
    let found = coherence(&records(dir.path()));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].thread, reader);
    assert_eq!(found[0].host_addr, read);
    assert!(found[0].confirmed);
}

#[test]
fn a_host_write_is_no_stale_read() {
    let dir = tempdir();
    let out = drive(dir.path(), "write", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("stale host reads: 0 confirmed, 0 found current, 0 unconfirmed")
            && err.contains("; 1 host writes into stale ranges (not checked)"),
        "{err}"
    );
    assert!(coherence(&records(dir.path())).is_empty());
}

#[test]
fn a_read_the_kernel_left_current_is_counted_not_recorded() {
    let dir = tempdir();
    let out = drive(dir.path(), "current", true);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stale host reads: 0 confirmed, 1 found current, 0 unconfirmed"),
        "{}",
        stderr(&out)
    );
    assert!(coherence(&records(dir.path())).is_empty());
}

#[test]
fn the_programs_own_handler_installed_later_still_handles_its_faults() {
    let dir = tempdir();
    let out = drive(dir.path(), "handler", true);
    assert!(out.status.success(), "{:?} {}", out.status, stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("own handler ran\n"), "{text}");
    assert!(text.contains("done\n"), "{text}");
    assert_eq!(coherence(&records(dir.path())).len(), 1);
}

#[test]
fn a_genuine_fault_still_kills_the_program_and_the_trace_is_kept() {
    let dir = tempdir();
    let out = drive(dir.path(), "null", true);
    assert_eq!(out.status.signal(), Some(11), "{:?}", out.status);
    assert!(!stdout(&out).contains("done"));
    let recs = records(dir.path());
    assert_eq!(coherence(&recs).len(), 1);
    let end = recs.iter().find_map(|r| match r {
        Record::End(e) => Some(e.how),
        _ => None,
    });
    assert_eq!(end, Some(Ending::Signal(11)));
}

#[test]
fn without_host_addresses_the_check_says_it_checked_nothing() {
    let dir = tempdir();
    let out = drive(dir.path(), "unnamed", true);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("host read 1000\n"));
    assert!(
        stderr(&out).contains("coherence check: watched nothing: no host <-> device copy was seen"),
        "{}",
        stderr(&out)
    );
    assert!(coherence(&records(dir.path())).is_empty());
}

#[test]
fn off_by_default() {
    let dir = tempdir();
    let out = drive(dir.path(), "stale", false);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("coherence"), "{}", stderr(&out));
    let recs = records(dir.path());
    assert!(coherence(&recs).is_empty());
    // The trace says the check was not asked for, and every view says so.
    let trace = accprof_trace::read_file(&traces(dir.path())[0]).expect("trace reads");
    assert!(!trace.header.sources.coherence);
    assert!(!recs
        .iter()
        .any(|r| matches!(r, Record::CheckSummary(_) | Record::OwnWork(_))));
    let not_run =
        "coherence check: not run (`accprof run --check coherence` finds stale host data)";
    let (text, _) = analyze(dir.path());
    assert!(text.contains(not_run), "{text}");
    assert!(report(dir.path()).contains(not_run));
}

/// `accprof report` of the only trace in `dir`.
fn report(dir: &Path) -> String {
    let out = Command::new(accprof())
        .arg("report")
        .arg(&traces(dir)[0])
        .output()
        .expect("report runs");
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// The check's state is in the trace (the header's flag, its closing
/// counts, its own work at construct boundaries) and `analyze` and
/// `report` say it: one array watched, one fault, one stale read.
#[test]
fn the_check_says_what_it_watched_in_the_trace_analyze_and_report() {
    let dir = tempdir();
    let out = drive(dir.path(), "stale", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let trace = accprof_trace::read_file(&traces(dir.path())[0]).expect("trace reads");
    assert!(trace.header.sources.coherence);
    let summaries: Vec<accprof_trace::CheckSummary> = trace
        .records
        .iter()
        .filter_map(|r| match r {
            Record::CheckSummary(s) => Some(*s),
            _ => None,
        })
        .collect();
    assert_eq!(summaries.len(), 1, "{summaries:?}");
    let s = summaries[0];
    assert!(s.applied);
    assert_eq!((s.ranges, s.bytes, s.faults), (1, 2048 * 8, 1), "{s:?}");
    assert!(s.handler_ns > 0 && s.work_ns > 0, "{s:?}");
    // The spans recorded are part of the check's time.
    let spans: u64 = trace
        .records
        .iter()
        .filter_map(|r| match r {
            Record::OwnWork(w) => Some(w.end_ns - w.start_ns),
            _ => None,
        })
        .sum();
    assert!(spans > 0 && spans <= s.work_ns, "{spans} of {}", s.work_ns);
    let said = "coherence check: on, 1 range watched (16.0 KiB), 1 fault, 1 host access found";
    let (text, json) = analyze(dir.path());
    assert!(text.contains(said), "{text}");
    let check = &json["coherence_check"];
    assert_eq!(check["state"], "on", "{check}");
    assert_eq!(check["ranges"], 1, "{check}");
    assert_eq!(check["bytes"], 2048 * 8, "{check}");
    assert_eq!(check["faults"], 1, "{check}");
    assert_eq!(check["found"], 1, "{check}");
    // Its fault handler's time is accprof's, not the program's.
    assert!(
        text.contains("  accprof's coherence check outside constructs"),
        "{text}"
    );
    let report = report(dir.path());
    assert!(report.contains(said), "{report}");
}

#[test]
fn on_the_host_fallback_the_check_says_it_does_not_apply() {
    let dir = tempdir();
    let bin = samples().join("coherence_norm");
    let args = ["64", "48", "20", "5"];
    let bare = Command::new(&bin).args(args).output().expect("runs");
    let out = accprof_run(
        dir.path(),
        &["--no-summary", "--check", "coherence"],
        &bin,
        &args,
    );
    assert_eq!(out.status.code(), bare.status.code(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&bare));
    assert!(stdout(&out).contains("reference: match"));
    assert!(
        stderr(&out).contains(
            "coherence check: does not apply: no device copies (the OpenACC device is the host, or shares its memory)"
        ),
        "{}",
        stderr(&out)
    );
    let t = traces(dir.path());
    assert_eq!(t.len(), 1);
    accprof_analyzer::load_run(&t[0]).expect("trace loads");
    let said = "coherence check: did not apply (host fallback";
    let (text, json) = analyze(dir.path());
    assert!(text.contains(said), "{text}");
    assert_eq!(json["coherence_check"]["state"], "did_not_apply");
    assert!(report(dir.path()).contains(said));
    // Without the check, the same run says how to ask for it.
    let bare_dir = tempdir();
    let out = accprof_run(bare_dir.path(), &["--no-summary"], &bin, &args);
    assert_eq!(out.status.code(), bare.status.code(), "{}", stderr(&out));
    let (text, json) = analyze(bare_dir.path());
    assert_eq!(json["coherence_check"]["state"], "not_run");
    assert!(
        text.contains(
            "coherence check: not run (`accprof run --check coherence` finds stale host data)"
        ),
        "{text}"
    );
}

/// The samples of each mapping kind (globals + `data create`, `enter
/// data create`, `declare create`, the API routines, Fortran module
/// arrays, `std::vector`), both variants: on the host fallback the check
/// changes neither their output nor their exit status, and says it does
/// not apply.
#[test]
fn the_mapping_kind_samples_run_unchanged_under_the_check_on_the_host() {
    let runs: &[(&str, &[&str])] = &[
        ("coherence_globals", &["4096", "20"]),
        ("coherence_enter", &["4096", "20", "5"]),
        ("coherence_declare", &["4096", "20", "5"]),
        ("coherence_api", &["4096", "20", "map"]),
        ("coherence_api", &["4096", "20", "create"]),
        ("coherence_api", &["4096", "20", "copyin"]),
        ("coherence_module_f90", &["4096", "20"]),
        ("coherence_vector_enter", &["4096", "20"]),
    ];
    for (name, args) in runs {
        for variant in ["bad", "fixed"] {
            let bin = samples().join(name);
            let mut args = args.to_vec();
            args.push(variant);
            let bare = Command::new(&bin).args(&args).output().expect("runs");
            assert!(bare.status.success(), "{name} {args:?}: {}", stderr(&bare));
            let dir = tempdir();
            let out = accprof_run(
                dir.path(),
                &["--no-summary", "--check", "coherence"],
                &bin,
                &args,
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "{name} {args:?}: {}",
                stderr(&out)
            );
            assert_eq!(stdout(&out), stdout(&bare), "{name} {args:?}");
            assert!(stdout(&out).contains("reference: match"), "{name} {args:?}");
            assert!(
                stderr(&out).contains("coherence check: does not apply"),
                "{name} {args:?}: {}",
                stderr(&out)
            );
            assert!(
                coherence(&records(dir.path())).is_empty(),
                "{name} {args:?}"
            );
        }
    }
}

#[test]
fn bad_check_values_are_refused_by_name() {
    let dir = tempdir();
    let bin = samples().join("coherence_norm");
    for (flag, env) in [(Some("coherence,races"), None), (None, Some("Coherence"))] {
        let mut cmd = Command::new(accprof());
        cmd.arg("run")
            .arg("--output")
            .arg(dir.path().join("t-%p.trace"));
        if let Some(f) = flag {
            cmd.args(["--check", f]);
        }
        match env {
            Some(e) => cmd.env("ACCPROF_CHECK", e),
            None => cmd.env_remove("ACCPROF_CHECK"),
        };
        let out = cmd.arg("--").arg(&bin).output().expect("accprof runs");
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        let said = if flag.is_some() {
            "--check coherence,races: races is not a check"
        } else {
            "ACCPROF_CHECK=Coherence: Coherence is not a check"
        };
        assert!(err.contains(said), "{err}");
        assert!(traces(dir.path()).is_empty(), "the program must not start");
    }
}

#[test]
fn a_host_write_the_next_kernel_does_not_see_is_a_lost_write() {
    let dir = tempdir();
    let out = drive(dir.path(), "lost", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let (range, written) = addresses(&text);
    assert!(
        stderr(&out).contains("lost host writes: 1;"),
        "{}",
        stderr(&out)
    );
    let found = coherence(&records(dir.path()));
    let lost: Vec<_> = found
        .iter()
        .filter(|c| c.kind == CoherenceKind::LostWrite)
        .collect();
    assert_eq!(lost.len(), 1, "{found:?}");
    assert_eq!((lost[0].range_start, lost[0].host_addr), (range, written));
    assert!(lost[0].confirmed);
    assert_ne!(lost[0].code_addr, 0);
    // The write itself went through: the host reads what it wrote.
    assert!(text.contains("done"), "{text}");
}

#[test]
fn a_host_write_followed_by_an_update_device_is_not_lost() {
    let dir = tempdir();
    let out = drive(dir.path(), "updated", true);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("lost host writes: 0;"),
        "{}",
        stderr(&out)
    );
    let found = coherence(&records(dir.path()));
    assert!(
        found.iter().all(|c| c.kind != CoherenceKind::LostWrite),
        "{found:?}"
    );
}

#[test]
fn downloads_the_host_never_reads_are_counted_per_update() {
    let dir = tempdir();
    let out = drive(dir.path(), "unread", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let (range, _) = addresses(&text);
    assert!(
        stderr(&out).contains("downloads nobody read: 2"),
        "{}",
        stderr(&out)
    );
    let found = coherence(&records(dir.path()));
    let unread: Vec<_> = found
        .iter()
        .filter(|c| c.kind == CoherenceKind::UnreadDownload)
        .collect();
    assert_eq!(unread.len(), 2, "{found:?}");
    assert!(unread.iter().all(|c| c.range_start == range));
    // The two first updates, not the third (read) one.
    assert!(unread[0].construct != unread[1].construct);
    // The program computes what it would have: the third download's value.
    assert!(text.contains("host read 1001\n"), "{text}");
}

#[test]
fn a_stale_array_written_out_with_fwrite_is_a_stale_read_and_the_write_succeeds() {
    let dir = tempdir();
    let out = drive(dir.path(), "fwrite", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("fwrite wrote 2048\n"), "{text}");
    let found = coherence(&records(dir.path()));
    assert!(
        found
            .iter()
            .any(|c| c.kind == CoherenceKind::StaleRead && c.confirmed),
        "{found:?}"
    );
}

/// `write` is async-signal-safe, so a program may call it from its own
/// handler on a watched array: the check's wrapper still sees the stale
/// read, opens the pages (the write succeeds with the host's bytes) and
/// allocates nothing there (no walk to the program's call: the handler may
/// have interrupted malloc). The handler, run from the collector's so that
/// the wrapper knows, behaves as the program installed it.
#[test]
fn a_stale_array_written_from_the_programs_signal_handler_is_seen_without_allocating() {
    let dir = tempdir();
    let out = drive(dir.path(), "sigwrite", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("handler wrote 8 (1000), 0 allocations\n"),
        "{text}"
    );
    // Run from the collector's handler, the program's keeps its flags: no
    // SA_RESTART, so the alarm interrupts a blocking read.
    assert!(text.contains("blocked read interrupted\n"), "{text}");
    let (_, read) = addresses(&text);
    let found = coherence(&records(dir.path()));
    assert!(
        found
            .iter()
            .any(|c| c.kind == CoherenceKind::StaleRead && c.confirmed && c.host_addr == read),
        "{found:?}"
    );
}

/// The 1-based line of the driver's source holding `needle`.
fn driver_line(needle: &str) -> usize {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/coherence_driver.c");
    std::fs::read_to_string(&src)
        .expect("source")
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} in the driver"))
        + 1
}

/// `accprof analyze` of the only trace in `dir`, as text and as JSON.
fn analyze(dir: &Path) -> (String, serde_json::Value) {
    let trace = &traces(dir)[0];
    let text = Command::new(accprof())
        .arg("analyze")
        .arg(trace)
        .output()
        .expect("analyze runs");
    assert!(text.status.success(), "{}", stderr(&text));
    let json = Command::new(accprof())
        .args(["analyze", "--json"])
        .arg(trace)
        .output()
        .expect("analyze runs");
    assert!(json.status.success(), "{}", stderr(&json));
    let v = serde_json::from_slice(&json.stdout).expect("json");
    (stdout(&text), v)
}

#[test]
fn a_lost_write_is_c2_at_the_line_that_wrote_naming_the_construct_and_ranks_with_the_errors() {
    let dir = tempdir();
    let out = drive(dir.path(), "lost", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let wrote = driver_line("    va[1000] = 42;");
    let kernel = driver_line("  AT(kernel(strcmp(mode, \"current\") != 0));");
    let (text, v) = analyze(dir.path());
    let findings = v["findings"].as_array().expect("findings");
    // The mode's later read of the array is a stale read too: both errors
    // come first, C1 before C2.
    let rules: Vec<&str> = findings.iter().filter_map(|f| f["rule"].as_str()).collect();
    assert_eq!(&rules[..2], ["C1", "C2"], "{v}");
    let f = &findings[1];
    assert_eq!(f["category"], "correctness");
    let title = format!(
        "lost host write of a at coherence_driver.c:{wrote}: the compute construct at coherence_driver.c:{kernel} used the device copy"
    );
    assert_eq!(f["title"], title.as_str(), "{v}");
    assert_eq!(evidence_u64(f, "writes"), 1);
    assert_eq!(evidence_u64(f, "confirmed"), 1);
    assert_eq!(evidence_u64(f, "range_bytes"), 2048 * 8);
    // The driver's source holds no directive at the construct's line, so
    // analyze does not place one in it: the proposal says what to write.
    let proposal = f["proposal"]["text"].as_str().expect("proposal");
    assert!(
        proposal.contains("`#pragma acc update device(a)` (with its bounds) after the write"),
        "{proposal}"
    );
    assert!(text.contains(&format!("#2 C2  {title}")), "{text}");
}

#[test]
fn a_lost_write_followed_by_the_update_gives_no_c2() {
    let dir = tempdir();
    let out = drive(dir.path(), "updated", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let (_, v) = analyze(dir.path());
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["rule"].as_str())
        .collect();
    assert!(!rules.contains(&"C2"), "{v}");
}

#[test]
fn downloads_read_every_tenth_step_are_c3_with_their_period() {
    let dir = tempdir();
    let out = drive(dir.path(), "every10", true);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("seen 10470\n"), "{}", stdout(&out));
    let update = driver_line("      AT(update(0));");
    let (text, v) = analyze(dir.path());
    let findings = v["findings"].as_array().expect("findings");
    let f = findings
        .iter()
        .find(|f| f["rule"] == "C3")
        .unwrap_or_else(|| panic!("a C3 in {v}"));
    let title = format!(
        "90 of 100 downloads of a at coherence_driver.c:{update} were not read by the host"
    );
    assert_eq!(f["title"], title.as_str(), "{v}");
    assert_eq!(f["category"], "data_movement");
    assert_eq!(evidence_u64(f, "downloads"), 100);
    assert_eq!(evidence_u64(f, "unread"), 90);
    assert_eq!(evidence_u64(f, "read_every"), 10);
    assert_eq!(evidence_u64(f, "read_first"), 0);
    // The driver plays its updates without a directive in its source:
    // the proposal says what to do, with the period, and has no patch.
    assert!(f["proposal"]["no_patch"].is_string(), "{f}");
    let proposal = f["proposal"]["text"].as_str().expect("proposal");
    assert!(
        proposal.contains("the host read every 10th download: `if(i % 10 == 0)`"),
        "{proposal}"
    );
    assert!(text.contains(&format!("C3  {title}")), "{text}");
}

#[test]
fn each_unread_update_is_its_own_c3_after_no_error() {
    let dir = tempdir();
    let out = drive(dir.path(), "unread", true);
    assert!(out.status.success(), "{}", stderr(&out));
    let first = driver_line("    AT(update(0));");
    let (_, v) = analyze(dir.path());
    let c3: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["rule"] == "C3")
        .collect();
    assert_eq!(c3.len(), 2, "{v}");
    // Ranked by the time each download took: in either order.
    let mut titles: Vec<&str> = c3.iter().filter_map(|f| f["title"].as_str()).collect();
    titles.sort_unstable();
    let want: Vec<String> = (0..2)
        .map(|i| {
            format!(
                "1 of 1 downloads of a at coherence_driver.c:{} were not read by the host",
                first + i
            )
        })
        .collect();
    assert_eq!(titles, want);
}
