//! MPI calls wrapped through the profiling interface: the collector records
//! the host ranges each point-to-point and collective call reads and
//! writes, found only when the program calls MPI (the library's entries are
//! looked up at the first call), so a program without MPI looks up no MPI
//! symbol at all. The Fortran bindings (`use mpi`, `mpif.h`, `use mpi_f08`)
//! reach the library through its `PMPI_` entries, which the collector takes
//! too, so their calls are recorded as C's are, each once. Host fallback:
//! the samples' MPI calls are the same on any machine. These tests need
//! mpicc, mpif90 and mpirun and fail without them.

mod support;

use std::path::Path;
use std::process::Command;

use accprof_analyzer::{load_run, MpiCall, Run};
use accprof_trace::contract::env;
use support::*;

/// Fails the test when `tool` is not installed.

#[test]
fn a_program_without_mpi_looks_up_no_mpi_symbol() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = preloaded(&program("host_data"), &dir.path().join("t.trace"))
        .env("LD_DEBUG", "libs,symbols")
        .current_dir(dir.path())
        .output()
        .expect("program runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let debug = stderr(&out);
    // The loader did report its lookups (so the check below can fail).
    assert!(debug.contains("symbol=acc_prof_register"), "{debug}");
    let mpi: Vec<&str> = debug
        .lines()
        .filter(|l| l.contains("symbol=MPI") || l.contains("symbol=PMPI") || l.contains("libmpi"))
        .collect();
    assert!(mpi.is_empty(), "{mpi:#?}");
}

/// Runs `sample` on `np` ranks with the collector preloaded; one trace per
/// rank, in rank order.
fn ranks(dir: &Path, sample: &str, np: usize, args: &[&str]) -> Vec<Run> {
    let bin = samples().join(sample);
    assert!(bin.is_file(), "{} was not built", bin.display());
    let mut cmd = Command::new("mpirun");
    cmd.current_dir(dir)
        .env("LD_PRELOAD", collector_lib())
        .env(env::OUTPUT, dir.join("t-%r.trace"))
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-x", "LD_PRELOAD", "-x", env::OUTPUT])
        .arg("-np")
        .arg(np.to_string())
        .arg(&bin)
        .args(args);
    let out = cmd.output().expect("mpirun runs");
    assert!(
        out.status.success() && stdout(&out).contains("reference: match"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    (0..np)
        .map(|r| {
            let p = dir.join(format!("t-{r}.trace"));
            load_run(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}

fn calls<'a>(run: &'a Run, routine: &str) -> Vec<&'a MpiCall> {
    run.mpi_calls()
        .iter()
        .filter(|c| c.routine == routine)
        .collect()
}

/// (address, bytes) of the one range of `c` that is read (false) or
/// written (true).
fn range(c: &MpiCall, write: bool) -> (u64, u64) {
    let r: Vec<_> = c.ranges.iter().filter(|r| r.write == write).collect();
    assert_eq!(r.len(), 1, "{c:?}");
    (r[0].host_ptr, r[0].bytes)
}

fn halo_ranges(np: usize) {
    if !need("mpicc") || !need("mpirun") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (nx, ny, steps) = (64u64, 48u64, 20usize);
    let runs = ranks(dir.path(), "mpi_halo", np, &["64", "48", "20"]);
    let row = 8 * ny;
    let rows = nx / np as u64;
    for (rank, run) in runs.iter().enumerate() {
        let sr = calls(run, "MPI_Sendrecv");
        // On the trace's clock: every exchange lies inside the data region
        // around the time loop, between the first and the last construct.
        let first = run
            .constructs()
            .map(|(_, c)| c.start_ns)
            .min()
            .expect("constructs");
        let last = run
            .constructs()
            .filter_map(|(_, c)| c.end_ns())
            .max()
            .expect("constructs");
        for c in &sr {
            assert!(
                first <= c.start_ns && c.start_ns <= c.end_ns && c.end_ns <= last,
                "rank {rank}: {c:?} outside [{first}, {last}]"
            );
        }
        // Two exchanges per step: up (send the first owned row, receive
        // the bottom halo), then down (send the last owned row, receive the
        // top halo), each one row of NY doubles, in the block u points to.
        assert_eq!(sr.len(), 2 * steps, "rank {rank}");
        for pair in sr.chunks(2) {
            let (up_send, up_recv) = (range(pair[0], false), range(pair[0], true));
            let (down_send, down_recv) = (range(pair[1], false), range(pair[1], true));
            for (_, bytes) in [up_send, up_recv, down_send, down_recv] {
                assert_eq!(bytes, row, "rank {rank}");
            }
            let u = down_recv.0; // &u[0]
            assert_eq!(up_send.0, u + row, "rank {rank}");
            assert_eq!(up_recv.0, u + (rows + 1) * row, "rank {rank}");
            assert_eq!(down_send.0, u + rows * row, "rank {rank}");
            assert!(pair[0].end_ns <= pair[1].start_ns);
        }
        // The final reductions: the slowest time and the two sums.
        let reduce: Vec<(u64, u64)> = calls(run, "MPI_Reduce")
            .iter()
            .map(|c| (range(c, false).1, range(c, true).1))
            .collect();
        assert_eq!(reduce, [(8, 8), (16, 16)], "rank {rank}");
        // And the final broadcast: each call once, through MPI_ or PMPI_.
        assert_eq!(calls(run, "MPI_Bcast").len(), 1, "rank {rank}");
        assert_eq!(run.mpi_calls().len(), 2 * steps + 3, "rank {rank}");
    }
}

#[test]
fn halo_exchange_ranges_on_2_ranks() {
    halo_ranges(2);
}

#[test]
fn halo_exchange_ranges_on_4_ranks() {
    halo_ranges(4);
}

/// The Fortran slab sample built with `binding`, on 2 ranks: each rank's
/// two MPI_SENDRECV calls per step are recorded once each, with the planes
/// of s they send and receive, and so are its MPI_REDUCE and MPI_BCAST.
fn slab_ranges(binding: &str) {
    if !need("mpif90") || !need("mpirun") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (nx, ny, nz, steps, np) = (16u64, 12u64, 8u64, 5usize, 2usize);
    let runs = ranks(
        dir.path(),
        &format!("mpi_slab_{binding}"),
        np,
        &["16", "12", "8", "5"],
    );
    let plane = 8 * nx * ny;
    let nzl = nz / np as u64;
    for (rank, run) in runs.iter().enumerate() {
        let sr = calls(run, "MPI_Sendrecv");
        assert_eq!(sr.len(), 2 * steps, "rank {rank}: {:#?}", run.mpi_calls());
        for pair in sr.chunks(2) {
            // s(:,:,1) down and s(:,:,nzl+1) from above, then s(:,:,nzl)
            // up and s(:,:,0) from below, in the block s(:,:,0) starts.
            let (up_send, up_recv) = (range(pair[0], false), range(pair[0], true));
            let (down_send, down_recv) = (range(pair[1], false), range(pair[1], true));
            for (_, bytes) in [up_send, up_recv, down_send, down_recv] {
                assert_eq!(bytes, plane, "rank {rank}");
            }
            let s = down_recv.0;
            assert_eq!(up_send.0, s + plane, "rank {rank}");
            assert_eq!(up_recv.0, s + (nzl + 1) * plane, "rank {rank}");
            assert_eq!(down_send.0, s + nzl * plane, "rank {rank}");
            assert!(pair[0].end_ns <= pair[1].start_ns);
        }
        let reduce: Vec<(u64, u64)> = calls(run, "MPI_Reduce")
            .iter()
            .map(|c| (range(c, false).1, range(c, true).1))
            .collect();
        assert_eq!(reduce, [(16, 16)], "rank {rank}");
        let bcast: Vec<u64> = calls(run, "MPI_Bcast")
            .iter()
            .map(|c| range(c, true).1)
            .collect();
        assert_eq!(bcast, [4], "rank {rank}");
        assert_eq!(run.mpi_calls().len(), 2 * steps + 2, "rank {rank}");
    }
}

#[test]
fn fortran_use_mpi_calls_are_recorded() {
    slab_ranges("f90");
}

#[test]
fn fortran_mpif_h_calls_are_recorded() {
    slab_ranges("fh");
}

#[test]
fn fortran_use_mpi_f08_calls_are_recorded() {
    slab_ranges("f08");
}

/// `accprof analyze --json` of an H100 fixture trace, reading the binary
/// from the fixture folder only and the source from samples/.
fn analyze_h100(name: &str) -> serde_json::Value {
    let fixtures = accprof_analyzer::testkit::fixtures::dir("h100");
    let trace = fixtures.join(format!("{name}.trace"));
    let out = Command::new(accprof())
        .arg("analyze")
        .arg("--json")
        .arg("--symbols")
        .arg(fixtures.join("bin"))
        .arg("--source-dir")
        .arg(accprof_analyzer::testkit::fixtures::samples())
        .arg(&trace)
        .env_remove("ACCPROF_SYMBOL_PATH")
        .env("ACCPROF_SYMBOLS_ONLY", "1")
        .output()
        .expect("accprof runs");
    assert!(out.status.success(), "{name}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The Fortran slab sample (`use mpi`) recorded on an H100 with 2 ranks:
/// on each rank the whole-array `update host(s)` before the MPI_SENDRECV
/// calls and `update device(s)` after them are P1, named by the variable
/// and the lines of mpi_slab.f90, with the bytes MPI used: two planes of
/// 128 x 128 doubles of the 66 planes moved.
#[test]
fn fortran_slab_on_h100_moves_whole_arrays_for_mpi() {
    let src = accprof_analyzer::testkit::fixtures::samples().join("mpi_slab.f90");
    let [host] = directive_lines(&src, &["update host(s)"])[..] else {
        panic!("one `update host(s)` in {}", src.display());
    };
    let [device] = directive_lines(&src, &["update device(s)"])[..] else {
        panic!("one `update device(s)` in {}", src.display());
    };
    let plane = 8 * 128 * 128u64;
    for rank in 0..2 {
        let v = analyze_h100(&format!("mpi_slab_f90_np2.r{rank}"));
        let p1: Vec<&serde_json::Value> = v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["rule"] == "P1")
            .collect();
        let mut got: Vec<(String, u64, String, u64, u64)> = p1
            .iter()
            .map(|f| {
                let at = &f["locations"][0];
                let field = |name: &str| evidence_u64(f, name);
                let moved = field("bytes_moved");
                let used = field("bytes_mpi_used");
                let file = at["file"].as_str().expect("file");
                (
                    file.rsplit('/').next().unwrap_or(file).to_string(),
                    at["line"].as_u64().expect("line"),
                    at["variable"].as_str().expect("variable").to_string(),
                    moved,
                    used,
                )
            })
            .collect();
        got.sort();
        assert_eq!(got.len(), 2, "rank {rank}: {:#}", v["findings"]);
        for (i, line) in [host, device].into_iter().enumerate() {
            let (file, at, var, moved, used) = &got[i];
            assert_eq!(
                (file.as_str(), *at, var.as_str()),
                ("mpi_slab.f90", line as u64, "s"),
                "rank {rank}"
            );
            // 20 steps of the whole array (64 owned planes and 2 halos)
            // against one plane each way per exchange, where a neighbour
            // is.
            assert_eq!(*moved, 20 * 66 * plane, "rank {rank} line {line}");
            assert!(
                *used >= 20 * plane && *used <= 40 * plane,
                "rank {rank}: {used}"
            );
        }
    }
}

/// On each rank of the Fortran slab, MPI receives the halo into `s`
/// between its `update host(s)` and `update device(s)`: the sampled
/// hashes of both transfers agree (the halo falls outside their chunks),
/// yet dropping the upload would lose the halo, so there is no D4. The P1
/// findings that act on those transfers rank before S1, whose saving is
/// not estimated.
#[test]
fn fortran_slab_halo_is_no_round_trip_and_what_can_be_done_ranks_first() {
    for rank in 0..2 {
        let v = analyze_h100(&format!("mpi_slab_f90_np2.r{rank}"));
        let rules: Vec<&str> = v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| f["rule"].as_str().expect("rule"))
            .collect();
        assert!(!rules.contains(&"D4"), "rank {rank}: {rules:?}");
        let s1 = rules.iter().position(|&r| r == "S1").expect("S1");
        let p1 = rules.iter().rposition(|&r| r == "P1").expect("P1");
        assert!(p1 < s1, "rank {rank}: {rules:?}");
    }
}

/// The lines of each statement of `file` that calls `routine` (C
/// `MPI_X(...);` or Fortran `call MPI_X(..., &` continued), in order: the
/// debug information may put the call on any of them (gfortran puts it on
/// the statement's last line).
fn call_statements(file: &Path, routine: &str) -> Vec<std::ops::RangeInclusive<u32>> {
    let text = std::fs::read_to_string(file).expect("source readable");
    let lines: Vec<&str> = text.lines().collect();
    let call = format!("{}(", routine.to_ascii_lowercase());
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start().to_ascii_lowercase();
        if !(t.starts_with(&call)
            || t.strip_prefix("call ")
                .is_some_and(|b| b.starts_with(&call)))
        {
            continue;
        }
        // To the line that ends the statement.
        let end = (i..lines.len())
            .find(|&j| {
                let t = lines[j].trim_end();
                t.ends_with(';') || !(t.ends_with('&') || t.ends_with(','))
            })
            .unwrap_or(i);
        out.push(i as u32 + 1..=end as u32 + 1);
    }
    out
}

/// "file:line" of each MPI call of `run`, in start order, from the model
/// ([`Run::mpi_site`]); every call has a line.
fn mpi_places(run: &Run) -> Vec<(String, String)> {
    run.mpi_call_ids()
        .map(|(id, c)| {
            let site = run
                .mpi_site(id)
                .unwrap_or_else(|| panic!("{} has no call site", c.routine));
            let s = run.site(site);
            let line = s.line.unwrap_or_else(|| panic!("{c:?} at {s:?}"));
            (c.routine.clone(), format!("{}:{line}", s.file))
        })
        .collect()
}

/// Each recorded MPI call of a `-g` build is at the source line of the
/// program's call into MPI: `sample`'s calls of each routine in `source`
/// on `np` ranks, each call site used.
fn check_mpi_sites(dir: &Path, sample: &str, source: &str, np: usize, args: &[&str]) -> Vec<Run> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../samples")
        .join(source);
    let runs = ranks(dir, sample, np, args);
    for (rank, run) in runs.iter().enumerate() {
        let places = mpi_places(run);
        assert!(!places.is_empty(), "rank {rank}");
        for routine in ["MPI_Sendrecv", "MPI_Reduce", "MPI_Bcast"] {
            let statements = call_statements(&src, routine);
            assert!(!statements.is_empty(), "{routine} in {source}");
            // The statement each call is at, by its first line.
            let got: std::collections::BTreeSet<u32> = places
                .iter()
                .filter(|(r, _)| r == routine)
                .map(|(_, p)| {
                    let (file, line) = p.rsplit_once(':').expect("file:line");
                    assert!(file.ends_with(source), "rank {rank}: {routine} at {p}");
                    let line: u32 = line.parse().expect("line");
                    let s = statements.iter().find(|s| s.contains(&line));
                    *s.unwrap_or_else(|| {
                        panic!("rank {rank}: {routine} at {p}, not a call of it in {statements:?}")
                    })
                    .start()
                })
                .collect();
            let want: std::collections::BTreeSet<u32> =
                statements.iter().map(|s| *s.start()).collect();
            assert_eq!(got, want, "rank {rank}: {routine}: {places:#?}");
        }
    }
    runs
}

/// A C program's MPI calls are at their lines in the model, in the
/// timeline's detail of the selected call and in the Chrome export.
#[test]
fn mpi_calls_show_their_source_line() {
    if !need("mpicc") || !need("mpirun") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let runs = check_mpi_sites(dir.path(), "mpi_halo", "mpi_halo.c", 2, &["64", "48", "4"]);
    // Chrome: each MPI slice's source is its call's line in the model.
    let paths: Vec<_> = (0..2)
        .map(|r| dir.path().join(format!("t-{r}.trace")))
        .collect();
    let out = dir.path().join("t.json");
    let st = Command::new(accprof())
        .arg("export")
        .args(&paths)
        .args(["-f", "chrome", "-o"])
        .arg(&out)
        .output()
        .expect("accprof runs");
    assert!(st.status.success(), "{}", stderr(&st));
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("read")).expect("parses");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    for (rank, run) in runs.iter().enumerate() {
        let pid = rank as u64 + 1;
        let mut got: Vec<(String, String)> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "mpi" && e["pid"] == pid)
            .map(|e| {
                (
                    e["name"].as_str().expect("name").to_string(),
                    e["args"]["source"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        let mut want = mpi_places(run);
        got.sort();
        want.sort();
        assert_eq!(got, want, "rank {rank}");
    }
    // Perfetto: the MPI call lines are written (no construct is at one:
    // they are the slices' source annotations).
    let out = dir.path().join("t.pftrace");
    let st = Command::new(accprof())
        .arg("export")
        .args(&paths)
        .args(["-f", "perfetto", "-o"])
        .arg(&out)
        .output()
        .expect("accprof runs");
    assert!(st.status.success(), "{}", stderr(&st));
    let bytes = std::fs::read(&out).expect("read");
    let construct_lines: Vec<u32> = runs[0]
        .constructs()
        .filter_map(|(_, c)| runs[0].site(c.site).line)
        .collect();
    for (routine, place) in runs.iter().flat_map(mpi_places) {
        let line: u32 = place
            .rsplit_once(':')
            .expect("file:line")
            .1
            .parse()
            .expect("line");
        assert!(!construct_lines.contains(&line), "{place}");
        assert!(
            bytes.windows(place.len()).any(|w| w == place.as_bytes()),
            "{routine} at {place} not in the Perfetto export"
        );
    }
    // The timeline: the selected MPI_Sendrecv's detail names its line.
    let session = accprof_tui::Session::open(
        paths.iter().cloned().zip(runs).collect(),
        &[Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples")],
    );
    let g = &session.groups[0];
    let (id, _) = g
        .run
        .mpi_call_ids()
        .find(|(_, c)| c.routine == "MPI_Sendrecv")
        .expect("an MPI_Sendrecv");
    let site = g.run.mpi_site(id).expect("a call site");
    let line = g.run.site(site).line.expect("a line");
    let (lane, pos) = g.locate(&[accprof_analyzer::Item::MpiCall(id)])[0];
    let mut state = accprof_tui::state::State::new(&session);
    state.select_and_show(
        &session,
        accprof_tui::state::Ev {
            group: 0,
            lane,
            pos,
        },
    );
    let screen = render_text(&session, &state, 200, 50);
    assert!(
        screen.contains(&format!("MPI_Sendrecv  at mpi_halo.c:{line} (main)")),
        "{screen}"
    );
}

/// A Fortran program's MPI calls, through each binding, are at their lines:
/// the bindings' own frames are passed over.
#[test]
fn fortran_mpi_calls_are_at_their_source_lines() {
    if !need("mpif90") || !need("mpirun") {
        return;
    }
    for binding in ["f90", "fh", "f08"] {
        let dir = tempfile::tempdir().expect("tempdir");
        check_mpi_sites(
            dir.path(),
            &format!("mpi_slab_{binding}"),
            "mpi_slab.f90",
            2,
            &["16", "12", "8", "5"],
        );
    }
}
