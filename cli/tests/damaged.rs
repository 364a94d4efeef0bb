//! Damaged and odd traces, and runs that did not end well: what `report`
//! and `analyze` say about them.
//!
//! - Damage: a truncated trace (warned of in text and JSON, on stderr, and
//!   never taken for a run without CUPTI), one flipped byte (costs one
//!   block), several traces with an unreadable one, traces that should not
//!   be merged, crafted records whose numbers would wrap.
//! - Odd inputs: a directory, a missing file, a pipe, `-` for stdin.
//! - Runs: no OpenACC events, how the process ended (End record), the
//!   construct a program died in (a real program that calls abort() inside
//!   a compute construct), constructs whose end callbacks the program
//!   toggled off (a real program using acc_prof_unregister with
//!   acc_toggle).
//!
//! Damaged traces are copies of the H200 fixtures cut or flipped in a
//! temporary directory; other odd traces are written here with
//! `accprof_trace::Writer`.

mod support;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use accprof_analyzer::testkit::trace;
use accprof_trace::{
    AccDetail, AccEventKind, CopyKind, DropSource, EndRecord, Ending, HashMode, Header, Record,
    RegionId, SourceState, Sources, StringId,
};
use support::*;

fn fixture(name: &str) -> PathBuf {
    h200_fixtures().join(format!("{name}.trace"))
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

fn run_cmd(sub: &str, args: &[&std::ffi::OsStr]) -> Output {
    accprof_on_fixtures(sub)
        .args(args)
        .output()
        .expect("accprof runs")
}

fn report(paths: &[&Path], extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = extra.iter().map(std::ffi::OsStr::new).collect();
    args.extend(paths.iter().map(|p| p.as_os_str()));
    run_cmd("report", &args)
}

fn analyze(path: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = extra.iter().map(std::ffi::OsStr::new).collect();
    args.push(path.as_os_str());
    run_cmd("analyze", &args)
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

/// (offset, payload length) of each data block of a trace file: after the
/// 12-byte prefix and the header block, blocks of a 16-byte header (magic,
/// payload length, record count, crc; u32 each) and the payload.
fn data_blocks(bytes: &[u8]) -> Vec<(usize, usize)> {
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let mut at = 12;
    let mut blocks = Vec::new();
    let mut first = true;
    while at + 16 <= bytes.len() {
        let len = word(at + 4) as usize;
        if !first {
            blocks.push((at, len));
        }
        first = false;
        at += 16 + len;
    }
    blocks
}

/// laplace_bad_c cut in the middle of its last data block: CUPTI's kernel
/// and memcpy records (flushed at the end) are lost.
fn cut_laplace(dir: &Path) -> PathBuf {
    let bytes = std::fs::read(fixture("laplace_bad_c")).expect("fixture");
    let blocks = data_blocks(&bytes);
    let (start, len) = blocks[blocks.len() / 2];
    let path = dir.join("cut.trace");
    std::fs::write(&path, &bytes[..start + 16 + len / 2]).expect("write");
    path
}

// ------------------------------------------------------------- damage

#[test]
fn analyze_warns_of_a_truncated_trace_in_text_and_json_and_knows_cupti_was_on() {
    let dir = tempdir();
    let path = cut_laplace(dir.path());

    let out = analyze(&path, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let err = stderr(&out);
    assert!(!text.contains("warning:"), "warnings go to stderr: {text}");
    let warning = err
        .lines()
        .find(|l| l.starts_with("accprof: warning: trace damaged at byte"))
        .unwrap_or_else(|| panic!("a damage warning on stderr: {err}"));
    assert!(warning.contains("bytes not read"), "{warning}");
    // CUPTI was on: a cut trace must not be reasoned about as if it was off.
    assert!(!text.contains("no CUPTI"), "{text}");
    assert!(!text.contains("Without CUPTI"), "{text}");
    assert!(text.contains("the trace was cut"), "{text}");
    // No allocation is "unused" just because its kernels were lost.
    assert!(!text.contains(" A2 "), "{text}");

    let out = analyze(&path, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["cupti"], true);
    assert!(doc["lost_bytes"].as_u64().is_some_and(|b| b > 0), "{doc}");
    let warnings = doc["warnings"].as_array().expect("warnings array");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("trace damaged"))),
        "{warnings:?}"
    );
    assert!(stderr(&out).contains("trace damaged"), "{}", stderr(&out));

    // report: the same warning, on stderr only.
    let out = report(&[&path], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!stdout(&out).contains("warning"), "{}", stdout(&out));
    assert!(stderr(&out).contains("accprof: warning: trace damaged at byte"));
}

#[test]
fn one_flipped_byte_costs_one_block_not_the_rest() {
    let bytes = std::fs::read(fixture("launch_storm")).expect("fixture");
    let blocks = data_blocks(&bytes);
    assert!(blocks.len() >= 4, "launch_storm spans several blocks");
    let (start, len) = blocks[blocks.len() / 2];
    let mut flipped = bytes.clone();
    flipped[start + 16 + len / 2] ^= 0x40;
    let dir = tempdir();
    let path = dir.path().join("flipped.trace");
    std::fs::write(&path, &flipped).expect("write");
    // What was there before the damaged block alone.
    let head = dir.path().join("head.trace");
    std::fs::write(&head, &bytes[..start]).expect("write");

    let load = |p: &Path| {
        accprof_analyzer::load_run_with(
            p,
            &accprof_analyzer::testkit::fixtures::load_options("h200"),
        )
        .expect("loads")
    };
    let whole = load(&fixture("launch_storm"));
    let damaged = load(&path);
    let before = load(&head);
    let count = |r: &accprof_analyzer::Run| (r.constructs().len(), r.process.acc_events);
    assert!(count(&damaged).1 < count(&whole).1, "the bad block is lost");
    assert!(
        count(&damaged).1 > count(&before).1,
        "blocks after the bad one are read: {:?} vs {:?}",
        count(&damaged),
        count(&before)
    );
    assert_eq!(
        damaged.process.losses.len(),
        1,
        "{:?}",
        damaged.process.losses
    );
    assert_eq!(damaged.process.losses[0].offset, start as u64);
    assert_eq!(
        damaged.process.losses[0].bytes,
        (16 + len) as u64,
        "one block"
    );

    let out = report(&[&path], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{} bytes not read", 16 + len))
            && err.contains("reading went on at the next intact block"),
        "{err}"
    );
}

/// A summary of some of the traces would read as the summary of all of
/// them: every input is checked before anything is written, in any order
/// and in every output format.
#[test]
fn several_traces_with_an_unreadable_one_report_nothing_and_exit_2() {
    let dir = tempdir();
    let junk = dir.path().join("junk.trace");
    std::fs::write(&junk, "not a trace").expect("write");
    let missing = dir.path().join("missing.trace");
    let good = fixture("laplace_good_c");
    let also = fixture("laplace_bad_c");
    let cases: [(&[&Path], &str); 4] = [
        (&[&good, &missing], "no such trace file"),
        (&[&missing, &good], "no such trace file"),
        (&[&good, &junk, &also], "not an accprof trace"),
        (&[&junk, &good], "not an accprof trace"),
    ];
    for (paths, says) in cases {
        for extra in [&[][..], &["--json"], &["--csv"], &["--extended"]] {
            let out = report(paths, extra);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{paths:?} {extra:?}: {err}");
            assert_eq!(stdout(&out), "", "{paths:?} {extra:?}: {err}");
            let bad = paths
                .iter()
                .find(|p| **p == missing || **p == junk)
                .expect("one bad input");
            let named: Vec<&str> = err
                .lines()
                .filter(|l| l.contains(&bad.display().to_string()))
                .collect();
            assert_eq!(named.len(), 1, "{err}");
            assert!(named[0].contains(says), "{err}");
            assert_eq!(err.lines().count(), 1, "one line: {err}");
        }
    }
    // Two bad inputs: both named, then what it comes to.
    let out = report(&[&missing, &good, &junk], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert!(
        err.contains("no such trace file") && err.contains("not an accprof trace"),
        "{err}"
    );
    assert!(
        err.contains("2 of 3 traces could not be read; nothing is reported"),
        "{err}"
    );
}

#[test]
fn merging_traces_of_different_programs_or_one_process_twice_is_warned_of() {
    let a = fixture("laplace_good_c");
    let b = fixture("laplace_bad_c");
    let out = report(&[&a, &b], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("warning: the traces are of 2 different programs"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("same process"), "{}", stderr(&out));

    let dir = tempdir();
    let copy = dir.path().join("copy.trace");
    std::fs::copy(&a, &copy).expect("copy");
    let out = report(&[&a, &copy], &[]);
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(err.contains("the same process's trace"), "{err}");
    assert!(!err.contains("different programs"), "{err}");
}

// ------------------------------------------------- traces written here

fn header(cupti: SourceState, acc_prof: SourceState) -> Header {
    Header {
        sources: Sources {
            acc_prof,
            cupti,
            hashing: HashMode::Off,
            coherence: false,
        },
        ..trace::header()
    }
}

/// A `parallel` construct's event on thread 7.
fn acc(time_ns: u64, kind: AccEventKind, region: u64, line: Option<u32>) -> Record {
    Record::Acc(trace::acc_event(time_ns, kind, 7, region, line))
}

fn memcpy(start_ns: u64, end_ns: u64, bytes: u64) -> Record {
    trace::memcpy(start_ns, end_ns, bytes, CopyKind::HostToDevice, 1)
}

#[test]
fn crafted_counts_and_durations_do_not_wrap() {
    let dir = tempdir();
    let path = dir.path().join("crafted.trace");
    let mut recs = trace::names();
    recs.push(acc(1_000, AccEventKind::ComputeConstructStart, 1, Some(10)));
    recs.push(Record::DriverCall(accprof_trace::DriverCall {
        time_ns: 4_000,
        thread: 7,
        region: RegionId(1),
        correlation: 1,
        api: accprof_trace::DriverApi::CopyHostToDevice,
        host_ptr: None,
        bytes: Some(1 << 20),
    }));
    recs.push(acc(9_000, AccEventKind::ComputeConstructEnd, 1, Some(10)));
    for _ in 0..2 {
        recs.push(Record::Dropped {
            source: DropSource::Cupti,
            count: u64::MAX,
        });
    }
    recs.push(memcpy(5_000, 6_000, 1 << 20));
    recs.push(memcpy(8_000, 2_000, 1 << 20)); // ends before it starts
    recs.push(memcpy(0, u64::MAX, 1 << 20)); // lasts u64::MAX ns
    recs.push(memcpy(3_000, 3_000 + (1 << 62), 1 << 20));
    trace::write_trace(
        &path,
        &header(SourceState::Active, SourceState::Active),
        &recs,
    );
    for extra in [&[][..], &["--extended"][..]] {
        let out = report(&[&path], extra);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        // One sane transfer of 1 us is all that is counted.
        assert!(text.contains("10: data copyin transfers: 1"), "{text}");
        assert!(
            text.contains("device time(us): total=1 max=1 min=1 avg=1"),
            "{text}"
        );
        let err = stderr(&out);
        assert!(
            err.contains(
                "3 CUPTI memcpy records left out (end before start, or longer than 7 days"
            ),
            "{err}"
        );
        assert!(err.contains("dropped-record counts add up past"), "{err}");
    }
    let out = analyze(&path, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(json(&out)["wall_ns"]
        .as_u64()
        .is_some_and(|w| w < 1_000_000));
}

#[test]
fn a_run_without_openacc_events_says_so_and_why() {
    let dir = tempdir();
    let path = dir.path().join("none.trace");
    let why = "the runtime has no acc_prof_register";
    trace::write_trace(
        &path,
        &header(
            SourceState::Inactive("no CUDA driver".into()),
            SourceState::Inactive(why.into()),
        ),
        &[],
    );
    let out = report(&[&path], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("no OpenACC events were recorded ({why})")),
        "{}",
        stdout(&out)
    );
    let out = analyze(&path, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("no OpenACC events were recorded"),
        "{}",
        stdout(&out)
    );
}

/// A trace of one compute construct at app.c:10 and a second one at
/// app.c:20 that launched a kernel and never ended, then `end`.
fn ended_trace(path: &Path, end: Option<Ending>) {
    let mut recs = trace::names();
    recs.push(Record::String {
        id: StringId(3),
        text: "main$_omp_fn$1".into(),
    });
    recs.push(acc(1_000, AccEventKind::ComputeConstructStart, 1, Some(10)));
    recs.push(acc(2_000, AccEventKind::ComputeConstructEnd, 1, Some(10)));
    recs.push(acc(3_000, AccEventKind::ComputeConstructStart, 2, Some(20)));
    if let Record::Acc(mut e) = acc(3_500, AccEventKind::EnqueueLaunchStart, 2, Some(20)) {
        e.detail = AccDetail::Launch(accprof_trace::LaunchInfo {
            kernel_name: Some(StringId(3)),
            num_gangs: Some(80),
            num_workers: Some(1),
            vector_length: Some(128),
        });
        recs.push(Record::Acc(e));
    }
    if let Some(how) = end {
        recs.push(Record::End(EndRecord {
            time_ns: 5_000,
            how,
        }));
    }
    trace::write_trace(
        path,
        &header(SourceState::Inactive("test".into()), SourceState::Active),
        &recs,
    );
}

#[test]
fn how_a_run_ended_is_said_with_the_construct_it_died_in() {
    let dir = tempdir();
    let cases: [(Option<Ending>, &str, bool); 6] = [
        (
            Some(Ending::Signal(11)),
            "ending: the program was killed by signal 11 (SIGSEGV)",
            true,
        ),
        (
            Some(Ending::QuickExit(3)),
            "ending: the program ended with _exit(3)",
            true,
        ),
        (
            Some(Ending::RuntimeError(700)),
            "ending: the program stopped on a fatal OpenACC runtime or CUDA error (code 700)",
            true,
        ),
        (
            Some(Ending::Exec),
            "ending: the program replaced itself with another (exec)",
            false,
        ),
        (Some(Ending::Exit(Some(0))), "", false),
        (
            None,
            "running when the trace ends (the program may have died there)",
            true,
        ),
    ];
    for (i, (end, says, in_flight)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("end{i}.trace"));
        ended_trace(&path, end);
        let out = report(&[&path], &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains(says), "{end:?}: {text}");
        assert!(
            text.contains("1 construct without an end event"),
            "{end:?}: {text}"
        );
        let flight = "app.c:20 (main) compute region (parallel)";
        assert_eq!(text.contains(flight), in_flight, "{end:?}: {text}");
        if in_flight {
            assert!(
                text.contains(
                    "last kernel: main$_omp_fn$1 with 80 gangs, 1 workers, vector length 128"
                ),
                "{text}"
            );
        }
        let no_end = stderr(&out).contains("the trace has no end record");
        assert_eq!(no_end, end.is_none(), "{end:?}: {}", stderr(&out));

        let out = analyze(&path, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stdout(&out).contains(says), "{end:?}: {}", stdout(&out));
        assert_eq!(stdout(&out).contains(flight), in_flight, "{}", stdout(&out));
        let doc = json(&analyze(&path, &["--json"]));
        assert_eq!(doc["cut_constructs"], 1);
        assert_eq!(
            doc["in_flight"]["line"].as_u64() == Some(20),
            in_flight,
            "{doc}"
        );
        if let Some(Ending::Signal(_)) = end {
            assert_eq!(doc["ending"]["how"], "signal");
            assert_eq!(doc["ending"]["signal"], "SIGSEGV");
        }
    }
}

// --------------------------------------------------------- odd inputs

/// The first line of stderr, after checking that it is the only one, that
/// nothing went to stdout, and that the exit code is 2.
fn one_line_error(out: &Output, what: &str) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert_eq!(stdout(out), "", "{what}");
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err:?}");
    err
}

#[test]
fn a_directory_or_a_missing_file_reads_the_same_in_report_and_analyze() {
    let dir = tempdir();
    let missing = dir.path().join("missing.trace");
    for (path, says) in [
        (dir.path(), "is a directory, not a trace file"),
        (missing.as_path(), "no such trace file"),
    ] {
        let r = one_line_error(&report(&[path], &[]), "report");
        let a = one_line_error(&analyze(path, &[]), "analyze");
        assert_eq!(r, a, "same words");
        assert_eq!(r.trim_end(), format!("accprof: {}: {says}", path.display()));
    }
}

/// `accprof SUB ARG` with the trace's bytes coming through a pipe on stdin.
fn through_a_pipe(sub: &str, arg: &str, bytes: &[u8]) -> Output {
    let mut child = accprof_on_fixtures(sub)
        .arg(arg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("accprof starts");
    let mut input = child.stdin.take().expect("stdin");
    let bytes = bytes.to_vec();
    let feeder = std::thread::spawn(move || {
        // accprof may stop reading early on an error; that is its answer.
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().expect("accprof ends");
    feeder.join().expect("feeder");
    out
}

#[test]
fn a_pipe_and_stdin_are_read_as_streams() {
    let bytes = std::fs::read(fixture("laplace_good_c")).expect("fixture");
    let from_file = stdout(&report(&[&fixture("laplace_good_c")], &[]));
    for arg in ["-", "/dev/stdin"] {
        let out = through_a_pipe("report", arg, &bytes);
        assert_eq!(out.status.code(), Some(0), "{arg}: {}", stderr(&out));
        assert_eq!(stdout(&out), from_file, "{arg}");
        let out = through_a_pipe("analyze", arg, &bytes);
        assert_eq!(out.status.code(), Some(0), "{arg}: {}", stderr(&out));
        assert!(stdout(&out).contains("accprof analyze: "), "{arg}");
    }
    // Junk through a pipe: one line naming standard input.
    let out = through_a_pipe("report", "-", b"junk");
    let err = one_line_error(&out, "junk on stdin");
    assert!(
        err.starts_with("accprof: standard input: not an accprof trace"),
        "{err}"
    );
    let out = through_a_pipe("analyze", "-", b"junk");
    assert_eq!(one_line_error(&out, "junk on stdin (analyze)"), err);
}

// ------------------------------------------------- real programs

/// The lines the test program marks with `/* MARK */`-style comments.
fn marked_line(program: &str, mark: &str) -> u32 {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(format!("{program}.c"));
    let text = std::fs::read_to_string(src).expect("source");
    text.lines()
        .position(|l| l.contains(mark))
        .map(|i| i as u32 + 1)
        .unwrap_or_else(|| panic!("{program}.c has no {mark} line"))
}

#[test]
fn a_program_that_aborts_inside_a_compute_construct_names_it() {
    let dir = tempdir();
    let out = accprof_run(dir.path(), &["--no-summary"], &program("abort_inside"), &[]);
    // SIGABRT: the launcher passes the program's status on as 128 + 6.
    assert_eq!(out.status.code(), Some(134), "{}", stderr(&out));
    let t = traces(dir.path());
    assert_eq!(t.len(), 1, "{t:?}");
    let line = marked_line("abort_inside", "DIES-HERE");
    let here = format!("abort_inside.c:{line} (main) compute region");

    let run = accprof_analyzer::load_run(&t[0]).expect("loads");
    let facts = run.facts().clone();
    let f = facts.in_flight.expect("a construct in flight");
    assert_eq!(f.line, Some(line), "{f:?}");
    // The collector writes an End record for signals only in newer
    // versions: a trace without one ends inside the construct all the same.
    match run.process.ending.map(|e| e.how) {
        None => {}
        Some(Ending::Signal(n)) => assert_eq!(n, 6),
        other => panic!("unexpected ending {other:?}"),
    }

    let out = Command::new(accprof())
        .arg("report")
        .arg(&t[0])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains(&here), "{text}");
    if run.process.ending.is_some() {
        assert!(text.contains("killed by signal 6 (SIGABRT)"), "{text}");
    }
    for extra in [&[][..], &["--json"][..]] {
        let out = Command::new(accprof())
            .arg("analyze")
            .args(extra)
            .arg(&t[0])
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        if extra.is_empty() {
            assert!(stdout(&out).contains(&here), "{}", stdout(&out));
        } else {
            assert_eq!(
                json(&out)["in_flight"]["line"].as_u64(),
                Some(u64::from(line))
            );
        }
    }
}

#[test]
fn a_construct_whose_end_callback_was_toggled_off_does_not_swallow_the_next() {
    let dir = tempdir();
    let out = accprof_run(dir.path(), &["--no-summary"], &program("toggle"), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "sum: 49500");
    let t = traces(dir.path());
    assert_eq!(t.len(), 1, "{t:?}");
    let run = accprof_analyzer::load_run(&t[0]).expect("loads");
    let computes: Vec<_> = run
        .constructs()
        .map(|(_, x)| x)
        .filter(|c| c.class == accprof_analyzer::ConstructClass::Compute)
        .collect();
    assert_eq!(computes.len(), 4, "four compute regions");
    assert!(
        computes.iter().all(|c| c.parent.is_none()),
        "no compute region nested in another"
    );
    let cut: Vec<_> = computes.iter().filter(|c| c.cut).collect();
    assert_eq!(cut.len(), 1, "the one whose end was toggled off");

    let out = Command::new(accprof())
        .arg("report")
        .arg(&t[0])
        .output()
        .expect("runs");
    let text = stdout(&out);
    let reached: Vec<(String, u64)> = text
        .lines()
        .filter_map(|l| {
            let (at, rest) = l.trim().split_once(": compute region reached ")?;
            Some((at.to_string(), rest.split(' ').next()?.parse().ok()?))
        })
        .collect();
    // The program's regions are on the lines of its `parallel` directives.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/toggle.c");
    let lines = directive_lines(&src, &["parallel"]);
    assert_eq!(lines.len(), 4);
    // Every region counted once, at its own line.
    assert_eq!(reached.iter().map(|(_, n)| n).sum::<u64>(), 4, "{text}");
    for (at, n) in &reached {
        let l: u32 = at
            .parse()
            .unwrap_or_else(|_| panic!("a region without a line: {text}"));
        assert!(lines.contains(&l), "{l}: {text}");
        assert_eq!(*n, 1, "each region once, at its own line: {text}");
    }
    for l in &lines {
        assert!(
            reached.iter().any(|(at, _)| *at == l.to_string()),
            "line {l}: {text}"
        );
    }
    assert!(
        text.contains("1 construct without an end event (callbacks toggled off"),
        "{text}"
    );
}

// ------------------------------------------------ the version field

/// A fixture with one byte of its version field changed, in a temporary
/// directory.
fn with_version_byte(dir: &Path, bytes: &[u8], at: usize, x: u8, name: &str) -> PathBuf {
    let mut b = bytes.to_vec();
    b[at] ^= x;
    let path = dir.join(name);
    std::fs::write(&path, b).expect("write");
    path
}

/// A flipped version byte is damage, not a newer format, and not a run
/// killed with SIGKILL: the header says which version the file is. The
/// fixtures are of format 1.0 (no copy of the version in their header);
/// the same trace written again is of this version (with the copy).
#[test]
fn a_flipped_version_byte_is_damage_not_a_newer_format() {
    let dir = tempdir();
    let old = std::fs::read(fixture("laplace_good_c")).expect("fixture");
    assert_eq!(old[8..12], [1, 0, 0, 0], "the fixture is of format 1.0");
    let t = accprof_trace::read_file(&fixture("laplace_good_c")).expect("reads");
    let rewritten = dir.path().join("rewritten.trace");
    trace::write_trace(&rewritten, &t.header, &t.records);
    let new = std::fs::read(&rewritten).expect("read");
    let (major, minor) = (accprof_trace::FORMAT_MAJOR, accprof_trace::FORMAT_MINOR);
    assert_eq!(
        new[8..12],
        [major.to_le_bytes(), minor.to_le_bytes()].concat()
    );

    let cases = [
        (
            &old,
            9,
            0xff,
            "reads 65281.0 but the header after it is an intact format 1 header",
        ),
        (
            &old,
            11,
            0x01,
            "reads 1.256 but the header lacks the copy of the version",
        ),
        (
            &new,
            9,
            0xff,
            &*format!(
                "reads 65281.{minor} but the header, under its checksum, says {major}.{minor}"
            ),
        ),
        (
            &new,
            8,
            0x02,
            &*format!("reads 3.{minor} but the header, under its checksum, says {major}.{minor}"),
        ),
        (
            &new,
            10,
            0x01,
            &*format!(
                "reads {major}.{} but the header, under its checksum, says {major}.{minor}",
                minor ^ 1
            ),
        ),
        (
            &new,
            11,
            0x01,
            &*format!(
                "reads {major}.{} but the header, under its checksum, says {major}.{minor}",
                minor + 256
            ),
        ),
    ];
    for (i, (bytes, at, x, says)) in cases.into_iter().enumerate() {
        let path = with_version_byte(dir.path(), bytes, at, x, &format!("v{i}.trace"));
        for out in [report(&[&path], &[]), analyze(&path, &[])] {
            assert_eq!(out.status.code(), Some(2), "case {i}: {}", stderr(&out));
            let err = one_line_error(&out, "damaged version");
            assert!(err.contains("damaged trace header"), "case {i}: {err}");
            assert!(err.contains(says), "case {i}: {err}");
            assert!(err.contains("a damaged byte, not"), "case {i}: {err}");
            assert!(!err.contains("use an accprof"), "case {i}: {err}");
            assert!(!err.contains("SIGKILL"), "case {i}: {err}");
        }
    }
    // Unchanged, both read.
    for path in [fixture("laplace_good_c"), rewritten] {
        let out = report(&[&path], &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
}

/// A trace of a newer format, whose header is not one this accprof reads,
/// still asks for a newer accprof (the trace crate's tests add one whose
/// header reads, with a copy of the version that says the same).
#[test]
fn a_newer_format_still_asks_for_a_newer_accprof() {
    let dir = tempdir();
    let mut b = std::fs::read(fixture("laplace_good_c")).expect("fixture");
    b[8..12].copy_from_slice(&[2, 0, 0, 0]);
    // Another header layout: the 1.x block framing does not hold.
    b[12..16].copy_from_slice(b"HDR2");
    let path = dir.path().join("newer.trace");
    std::fs::write(&path, &b).expect("write");
    let out = report(&[&path], &[]);
    let err = one_line_error(&out, "newer format");
    assert!(
        err.contains("unsupported trace format version 2.0")
            && err.contains("use an accprof that supports 2.x"),
        "{err}"
    );
}

/// A trace read while its program still runs (inside a compute construct)
/// says so: not that the program may have died there, nor that it was
/// killed with SIGKILL. Once the program has ended, the same trace reads
/// as a finished run.
#[test]
fn a_trace_read_while_its_program_runs_says_it_is_still_running() {
    use std::io::BufRead as _;
    let dir = tempdir();
    let path = dir.path().join("t.trace");
    let mut child = Command::new(accprof())
        .arg("run")
        .arg("--lib")
        .arg(collector_lib())
        .arg("--no-summary")
        .arg("-o")
        .arg(&path)
        .arg("--")
        .arg(program("wait_inside"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("accprof runs");
    let mut ready = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut ready)
        .expect("reads");
    assert!(ready.starts_with("ready"), "{ready:?}");
    let line = marked_line("wait_inside", "WAITS-HERE");
    let here = format!("wait_inside.c:{line} (main) compute region");
    // The collector's writer flushes a few times a second.
    // Read where it was recorded: the binary at its own path.
    let report = |p: &Path| {
        Command::new(accprof())
            .arg("report")
            .arg(p)
            .output()
            .expect("accprof runs")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let out = loop {
        let out = report(&path);
        if stdout(&out).contains(&here) {
            break out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the waiting construct never showed: {}{}",
            stdout(&out),
            stderr(&out)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        text.lines().any(|l| l
            .starts_with("running when the trace was read (the program is still running): ")
            && l.contains(&here)),
        "{text}"
    );
    assert!(
        text.contains("(not ended when the trace was read)"),
        "{text}"
    );
    assert!(!text.contains("may have died"), "{text}");
    assert!(err.contains("is still running"), "{err}");
    assert!(!err.contains("SIGKILL"), "{err}");

    drop(child.stdin.take());
    let status = child.wait().expect("waits");
    assert!(status.success(), "{status:?}");
    let out = report(&path);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!text.contains("running when"), "{text}");
    assert!(!err.contains("still running"), "{err}");
}
