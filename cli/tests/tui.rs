//! `accprof tui` and `accprof run --tui`: the refusals that come before the
//! screen is taken (no terminal, an unreadable trace), and smoke tests that
//! drive the real binary in a tmux pane (send-keys, capture-pane).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

fn tui_on_fixtures() -> Command {
    let mut cmd = accprof_on_fixtures("tui");
    cmd.arg("--source-dir").arg(samples_src());
    cmd
}

fn samples_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples")
}

#[test]
fn without_a_terminal_it_says_so_and_exits_2() {
    let out = tui_on_fixtures()
        .arg(h200_fixtures().join("laplace_bad_c.trace"))
        .output()
        .expect("accprof runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("needs a terminal"), "{err}");
    // Nothing was drawn.
    assert!(out.stdout.is_empty());
}

#[test]
fn an_unreadable_trace_is_named_on_one_line_before_anything_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let junk = dir.path().join("junk.trace");
    std::fs::write(&junk, b"not a trace at all, just words").expect("write");
    for bad in [dir.path().join("missing.trace"), junk] {
        let out = tui_on_fixtures()
            .arg(h200_fixtures().join("laplace_bad_c.trace"))
            .arg(&bad)
            .output()
            .expect("accprof runs");
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&bad.display().to_string()), "{err}");
        assert!(!err.contains("terminal"), "{err}");
    }
}

#[test]
fn run_tui_without_a_terminal_refuses_before_the_program_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("ran");
    let out = Command::new(accprof())
        .arg("run")
        .arg("--tui")
        .arg("--lib")
        .arg(collector_lib())
        .arg("--output")
        .arg(dir.path().join("t-%p.trace"))
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .expect("accprof runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("needs a terminal"),
        "{}",
        stderr(&out)
    );
    assert!(!marker.exists());
}

/// A tmux server of this test's own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
    /// The screen just before the last keys were sent: what is waited for
    /// after them must be on another screen (the keys' effect, not what
    /// was shown already).
    before: std::cell::RefCell<Option<String>>,
}

impl Tmux {
    /// Starts `command` in a detached 120x40 pane.
    fn start(name: &str, command: &str) -> Tmux {
        let t = Tmux {
            socket: format!("accprof-test-{name}-{}", std::process::id()),
            before: std::cell::RefCell::new(None),
        };
        let st = t
            .cmd()
            .args(["new-session", "-d", "-x", "120", "-y", "40", "-s", "t"])
            .arg(command)
            .status()
            .expect("tmux runs");
        assert!(st.success());
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]);
        c
    }

    /// Sends the keys in order (the pane reads them in order); what they
    /// do is waited for with `wait_for` or `wait_until`, never a sleep.
    fn keys(&self, keys: &[&str]) {
        *self.before.borrow_mut() = Some(self.screen());
        for k in keys {
            let st = self
                .cmd()
                .args(["send-keys", "-t", "t", k])
                .status()
                .expect("tmux send-keys");
            assert!(st.success());
        }
    }

    fn resize(&self, w: u16, h: u16) {
        let st = self
            .cmd()
            .args([
                "resize-window",
                "-t",
                "t",
                "-x",
                &w.to_string(),
                "-y",
                &h.to_string(),
            ])
            .status()
            .expect("tmux resize-window");
        assert!(st.success());
        *self.before.borrow_mut() = None;
    }

    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "t"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen once `want` is on it (within 20 s), after the last keys
    /// took effect.
    fn wait_for(&self, want: &str) -> String {
        self.wait_until(&format!("{want:?}"), |s| s.contains(want))
    }

    /// The first screen, after the last keys took effect, that `ok`
    /// accepts (within 20 s); `what` names it in the failure.
    fn wait_until(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            let changed = self.before.borrow().as_ref().map_or(true, |b| *b != s);
            if changed && ok(&s) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{what} never showed:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // The server is gone already when the pane's command ended.
        let _ = self
            .cmd()
            .arg("kill-server")
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// The exit status the pane's shell wrote to `file`, once written.
fn exit_status(file: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(file) {
            if !s.is_empty() {
                return s.trim().to_string();
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the timeline did not exit"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn window(screen: &str) -> String {
    screen
        .lines()
        .last()
        .unwrap_or("")
        .split('│')
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

#[test]
fn smoke_open_zoom_select_a_kernel_open_the_findings_jump_and_quit() {
    if !need("tmux") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let status = dir.path().join("status");
    let command = format!(
        "env ACCPROF_SYMBOLS_ONLY=1 {} tui {} --symbols {} --source-dir {}; echo $? > {}",
        accprof().display(),
        h200_fixtures().join("laplace_bad_c.trace").display(),
        h200_fixtures().join("bin").display(),
        samples_src().display(),
        status.display()
    );
    let tmux = Tmux::start("smoke", &command);
    // The findings come once the analysis thread is done.
    let first = tmux.wait_for(") by cost");
    for lane in ["thread", "dev 0 queue", "host->device", "device->host"] {
        assert!(first.contains(lane), "{lane}:\n{first}");
    }
    assert!(first.contains(" L3 ") && first.contains(" D6 "), "{first}");

    // Zoom in: the window is narrower.
    let before = window(&first);
    tmux.keys(&["+"]);
    tmux.wait_until("a narrower window", |s| window(s) != before);

    // Down to the device lane (thread, nested, queue) and select there.
    tmux.keys(&["Down", "Down", "Enter"]);
    let selected = tmux.wait_for("selected: kernel");
    assert!(selected.contains("grid "), "{selected}");

    // The findings: choose the first (L3); the timeline zooms to its kernels.
    tmux.keys(&["f", "Enter"]);
    let lit = tmux.wait_for("lit: L3");
    assert!(lit.contains("◆"), "{lit}");
    assert!(lit.contains("laplace_bad.c:154"), "{lit}");
    // Jump to the next of the finding's events.
    let at = |s: &str| {
        s.lines()
            .find(|l| l.contains(" start "))
            .map(str::to_string)
            .unwrap_or_default()
    };
    let here = at(&lit);
    tmux.keys(&["Tab", "]"]);
    let next = tmux.wait_until("the finding's next event", |s| at(s) != here);
    assert!(next.contains("kernel "), "{next}");

    // Too small a window says so; back to size, the timeline is back.
    tmux.resize(60, 20);
    tmux.wait_for("Terminal too small: 60x20");
    tmux.resize(120, 40);
    tmux.wait_for(") by cost");

    tmux.keys(&["q"]);
    assert_eq!(exit_status(&status), "0");
}

#[test]
fn run_tui_opens_the_timeline_when_the_program_ends() {
    if !need("tmux") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let status = dir.path().join("status");
    let command = format!(
        "{} run --tui --lib {} --output {} -- {} 50; echo $? > {}",
        accprof().display(),
        collector_lib().display(),
        dir.path().join("t-%p.trace").display(),
        program("storm").display(),
        status.display()
    );
    let tmux = Tmux::start("run", &command);
    let screen = tmux.wait_for(") by cost");
    assert!(screen.contains("thread"), "{screen}");
    // The summary by line names the program's construct.
    tmux.keys(&["l"]);
    tmux.wait_for("storm.c:");
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&status), "0");
    assert_eq!(traces(dir.path()).len(), 1);
}

#[test]
fn thirty_two_ranks_open_in_rank_order_one_row_each() {
    use accprof_analyzer::testkit::trace;
    use accprof_trace::{AccEventKind, Header, Record};
    if !need("tmux") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // Rank r ran one compute construct, on a clock of its own.
    for r in 0..32u32 {
        let mut recs = trace::names();
        for (t, kind) in [
            (1_000, AccEventKind::ComputeConstructStart),
            (900_000, AccEventKind::ComputeConstructEnd),
        ] {
            recs.push(Record::Acc(trace::acc_event(t, kind, 7, 1, Some(10))));
        }
        let header = Header {
            rank: Some(r),
            pid: 1000 + r,
            ..trace::header()
        };
        trace::write_trace(&dir.path().join(format!("r{r}.trace")), &header, &recs);
    }
    let status = dir.path().join("status");
    // The shell's glob gives r0 r1 r10 r11 ... r19 r2 r20 ...
    let command = format!(
        "cd {} && {} tui r*.trace; echo $? > {}",
        dir.path().display(),
        accprof().display(),
        status.display()
    );
    let tmux = Tmux::start("ranks", &command);
    let first = tmux.wait_for("▸ rank 0 ");
    let ranks: Vec<u32> = first
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("▸ rank "))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    // One row each, in number order, as many as the 40-row pane holds.
    assert!(ranks.len() >= 20, "{first}");
    assert_eq!(
        ranks,
        (0..ranks.len() as u32).collect::<Vec<_>>(),
        "{first}"
    );
    // Enter opens rank 0's lanes.
    tmux.keys(&["Enter"]);
    let open = tmux.wait_for("▾ rank 0  r0.trace");
    assert!(open.contains("▸ rank 1 "), "{open}");
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&status), "0");
}

/// The MPI halo exchange's two ranks: the header says where rank 0's wall
/// time went, as its ledger has it; its MPI calls are drawn on the host
/// thread's lane, and a selected one is named with its duration and bytes.
#[test]
fn mpi_calls_sit_on_the_host_lane_and_the_header_has_the_ledger() {
    use accprof_analyzer::testkit::fixtures;
    use accprof_analyzer::units;
    if !need("tmux") {
        return;
    }
    let runs: Vec<accprof_analyzer::Run> = (0..2)
        .map(|r| fixtures::load("h100", &format!("mpi_halo_np2.r{r}")))
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let status = dir.path().join("status");
    let command = format!(
        "cd {} && {} tui mpi_halo_np2.r0.trace mpi_halo_np2.r1.trace; echo $? > {}",
        fixtures::dir("h100").display(),
        accprof().display(),
        status.display()
    );
    let tmux = Tmux::start("mpi", &command);
    let first = tmux.wait_for(") by cost");

    // The header: rank 0's ledger, shares of its wall time.
    let l = runs[0].ledger();
    let t = l.main_thread().expect("a host thread");
    let share = |ns: u64| format!("{:.0}%", 100.0 * ns as f64 / l.wall_ns as f64);
    let header = first.lines().next().unwrap_or("");
    for want in [
        format!("rank 0  wall {}: ", units::duration_ns(l.wall_ns)),
        format!("program {}", share(t.program_ns(l.wall_ns))),
        format!("constructs {}", share(t.inside_ns)),
        format!("MPI {}", share(t.mpi_ns)),
    ] {
        assert!(
            header.contains(&want),
            "{want:?} not in the header:\n{first}"
        );
    }

    // Each rank's host lane draws its MPI calls in their own glyph.
    for run in &runs {
        let thread = run.mpi_calls()[0].thread;
        let lane = first
            .lines()
            .find(|l| l.starts_with(&format!(" thread {thread} ")))
            .unwrap_or_else(|| panic!("thread {thread}'s lane:\n{first}"));
        assert!(lane.contains('▚'), "no MPI call on {lane:?}:\n{first}");
    }

    // Select an MPI call: the details name its routine, duration and bytes.
    tmux.keys(&["/", "MPI_", "Enter", "]"]);
    let selected = tmux.wait_for("selected: MPI call in thread");
    let details: Vec<&str> = selected
        .lines()
        .skip_while(|l| !l.contains(" selected ─"))
        .skip(1)
        .take(2)
        .collect();
    assert_eq!(details.len(), 2, "{selected}");
    let shown = runs.iter().flat_map(|r| r.mpi_calls()).any(|c| {
        details[0]
            .trim_start()
            .starts_with(&format!("{}  ", c.routine))
            && details[1].contains(&format!(
                "  host {}  {}  thread {}",
                units::duration_ns(c.end_ns - c.start_ns),
                units::bytes(c.ranges.iter().map(|r| r.bytes).sum()),
                c.thread
            ))
    });
    assert!(shown, "the details are no recorded MPI call:\n{selected}");
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&status), "0");
}

/// The line of the coherence driver's source that holds `text`.
fn driver_line(text: &str) -> u32 {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/coherence_driver.c");
    std::fs::read_to_string(&src)
        .expect("source")
        .lines()
        .position(|l| l.contains(text))
        .expect("line in the driver") as u32
        + 1
}

fn programs_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs")
}

#[test]
fn host_accesses_are_instants_on_their_thread_lane_and_say_what_they_are() {
    use accprof_analyzer::vocabulary::CoherenceKind;
    use accprof_tui::lanes::{Item, LaneKind, Tag};
    use accprof_tui::state::{Ev, State};
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = coherence_trace(dir.path());
    let run = accprof_analyzer::load_run(&trace).expect("trace loads");
    let session = accprof_tui::Session::open(vec![(trace, run)], &[programs_src()]);
    let g = &session.groups[0];
    let accesses = g.run.host_accesses();
    let kinds: Vec<CoherenceKind> = accesses.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            CoherenceKind::LostWrite,
            CoherenceKind::UnreadDownload,
            CoherenceKind::UnreadDownload,
            CoherenceKind::StaleRead
        ]
    );
    // Each on the top row of the thread that made it, at its time.
    let l = g
        .lanes
        .lanes
        .iter()
        .position(|l| {
            l.kind
                == LaneKind::Thread {
                    thread: accesses[0].thread,
                    depth: 0,
                }
        })
        .expect("the thread's lane");
    let lane = &g.lanes.lanes[l];
    let shown: Vec<u32> = (0..lane.len() as u32)
        .filter(|&p| matches!(lane.item(p), Item::HostAccess(_)))
        .collect();
    assert_eq!(shown.len(), accesses.len());
    for (&p, a) in shown.iter().zip(accesses) {
        assert_eq!(
            (lane.start(p), lane.end(p)),
            (g.at(a.time_ns), g.at(a.time_ns))
        );
        let want = match a.kind {
            CoherenceKind::UnreadDownload => Tag::UnreadDownload,
            _ => Tag::Incoherent,
        };
        assert_eq!(lane.tag(p), want);
    }
    // A column shows an access only at the access's own time: one that a
    // construct started before the access covers (the update that
    // downloaded) holds the access's position but not its time.
    let p = shown[1];
    let t = lane.start(p);
    let q = (0..p)
        .rev()
        .find(|&q| lane.start(q) <= t && lane.end(q) > t + 1)
        .expect("the update around the download");
    let (t, end) = (t as f64, lane.end(q) as f64);
    assert_eq!(lane.instant_in(q, p + 1, t, t + 1.0), Some(p));
    assert_eq!(lane.instant_in(q, p + 1, t + 1.0, end), None);
    // Selected, each says what it is, where, and the construct.
    let mut state = State::new(&session);
    let details = |state: &mut State, pos: u32| {
        state.select(
            &session,
            Ev {
                group: 0,
                lane: l,
                pos,
            },
        );
        accprof_tui::render_text(&session, state, 120, 40)
    };
    let lost = details(&mut state, shown[0]);
    let range = format!("range {:#x} 16.0 KiB  offset 8000", accesses[0].range_start);
    for want in [
        format!(
            "lost host write (C2) of a  at coherence_driver.c:{} (main)",
            driver_line("va[1000] = 42;")
        ),
        range.clone(),
        "confirmed: the device copy differs".to_string(),
        format!(
            "device copy used by parallel at coherence_driver.c:{}",
            driver_line("AT(kernel(strcmp(mode, \"current\") != 0));")
        ),
        "findings: C2 #2".to_string(),
    ] {
        assert!(lost.contains(&want), "{want:?} not in:\n{lost}");
    }
    let stale = details(&mut state, shown[3]);
    for want in [
        format!(
            "stale host read (C1) of a  at coherence_driver.c:{} (main)",
            driver_line("    v = va[1000];")
        ),
        range,
        format!(
            "written by parallel at coherence_driver.c:{}",
            driver_line("if (all) AT(kernel(1));")
        ),
        "findings: C1 #1".to_string(),
    ] {
        assert!(stale.contains(&want), "{want:?} not in:\n{stale}");
    }
    let unread = details(&mut state, shown[1]);
    // The first of the three updates.
    let update = driver_line("AT(update(0));");
    for want in [
        format!("unread download (C3) of a  at coherence_driver.c:{update} (main)"),
        "not read before the next download".to_string(),
        format!("downloaded by update at coherence_driver.c:{update}"),
    ] {
        assert!(unread.contains(&want), "{want:?} not in:\n{unread}");
    }
    assert!(!unread.contains("offset"), "{unread}");
}

#[test]
fn smoke_host_accesses_marked_and_selected_in_the_pane() {
    if !need("tmux") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = coherence_trace(dir.path());
    let status = dir.path().join("status");
    let command = format!(
        "{} tui {} --source-dir {}; echo $? > {}",
        accprof().display(),
        trace.display(),
        programs_src().display(),
        status.display()
    );
    let tmux = Tmux::start("coherence", &command);
    let first = tmux.wait_for(") by cost");
    let lane = first
        .lines()
        .find(|l| l.starts_with(" thread "))
        .unwrap_or_else(|| panic!("no thread lane:\n{first}"));
    // The errors are marked (how many columns they take depends on the
    // run's timing). A download nobody read is marked too unless it falls
    // in a column with another host access, which the column may show
    // instead (one mark a column); h below visits each.
    assert!(lane.contains('!'), "{lane:?}");

    // With nothing selected, h goes to the first host access, then from
    // one to the next.
    tmux.keys(&["h"]);
    let lost = tmux.wait_for("selected: stale read or lost write");
    let line = driver_line("va[1000] = 42;");
    assert!(
        lost.contains(&format!(
            "lost host write (C2) of a  at coherence_driver.c:{line}"
        )),
        "{lost}"
    );
    tmux.keys(&["h"]);
    let unread = tmux.wait_for("selected: unread download");
    assert!(unread.contains("unread download (C3) of a"), "{unread}");
    tmux.keys(&["h", "h"]);
    let stale = tmux.wait_for("stale host read (C1) of a");
    assert!(stale.contains("findings: C1 #1"), "{stale}");
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&status), "0");
}
