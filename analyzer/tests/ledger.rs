//! The time ledger on hand-built traces: driver calls counted in the
//! construct they ran in (also when CUPTI hands them over before the
//! construct ended, or long after), outside ones apart, MPI calls and the
//! collector's hashing, and every thread's parts summing to the wall time.

use accprof_analyzer::ledger::{Ledger, Part};
use accprof_analyzer::testkit::trace::{acc_event, build, header, names};
use accprof_trace::{AccEventKind, DriverOp, DriverSpan, MpiCall, Record, StringId};

fn span(thread: u32, start_ns: u64, end_ns: u64, op: DriverOp) -> Record {
    Record::DriverSpan(DriverSpan {
        thread,
        start_ns,
        end_ns,
        op,
        cbid: 0,
        correlation: 0,
    })
}

fn compute(thread: u32, region: u64, line: u32, start: u64, end: u64) -> [Record; 2] {
    [
        Record::Acc(acc_event(
            start,
            AccEventKind::ComputeConstructStart,
            thread,
            region,
            Some(line),
        )),
        Record::Acc(acc_event(
            end,
            AccEventKind::ComputeConstructEnd,
            thread,
            region,
            Some(line),
        )),
    ]
}

/// Sums the top-level rows of a thread: they must give the wall time.
fn top_sum(l: &Ledger, thread: u32) -> u64 {
    let t = l
        .threads
        .iter()
        .find(|t| t.thread == thread)
        .expect("thread");
    t.program_ns(l.wall_ns) + t.inside_ns + t.mpi_ns + t.outside.total_ns()
}

#[test]
fn driver_calls_fall_in_their_constructs_and_the_parts_sum_to_the_wall() {
    let mut r = names();
    r.push(Record::String {
        id: StringId(9),
        text: "MPI_Allreduce".into(),
    });
    // First construct, line 10: [10_000, 20_000).
    r.extend(compute(1, 1, 10, 10_000, 20_000));
    // CUDA start-up before any construct: outside.
    r.push(span(1, 2_000, 6_000, DriverOp::Init));
    // Second construct, line 20: [30_000, 60_000); one of its calls comes
    // before its end (a buffer flushed while it ran).
    let [start2, end2] = compute(1, 2, 20, 30_000, 60_000);
    r.push(start2);
    r.push(span(1, 31_000, 33_000, DriverOp::Alloc));
    r.push(end2);
    // The calls of the first construct, handed over late.
    r.push(span(1, 11_000, 12_000, DriverOp::Alloc));
    r.push(span(1, 12_000, 12_500, DriverOp::CopyHostToDevice));
    r.push(span(1, 12_500, 13_000, DriverOp::Launch));
    r.push(span(1, 13_000, 18_000, DriverOp::Synchronize));
    r.push(span(1, 18_000, 19_000, DriverOp::Free));
    // The rest of the second's.
    r.push(span(1, 33_000, 34_000, DriverOp::Launch));
    r.push(span(1, 34_000, 54_000, DriverOp::Synchronize));
    // An MPI call between them, and a driver call of another thread at
    // the same time as the first construct (not inside it).
    r.push(Record::MpiCall(MpiCall {
        start_ns: 21_000,
        end_ns: 29_000,
        thread: 1,
        routine: StringId(9),
        cuda_aware: None,
        ranges: Vec::new(),
        call_site: None,
    }));
    r.push(span(2, 12_000, 16_000, DriverOp::Other));
    r.push(Record::Acc(acc_event(
        70_000,
        AccEventKind::ComputeConstructStart,
        1,
        3,
        Some(30),
    )));
    r.push(Record::Acc(acc_event(
        70_500,
        AccEventKind::ComputeConstructEnd,
        1,
        3,
        Some(30),
    )));
    let run = build(header(), r);
    let l = run.ledger();
    assert!(l.timed);
    assert_eq!(l.driver_calls, 10);
    // The first record is the Init call at 2 us, the last the end at 70.5 us.
    assert_eq!(l.wall_ns, 68_500);
    let t = &l.threads[0];
    assert_eq!(t.thread, 1);
    assert_eq!(t.constructs, 3);
    assert_eq!(t.inside_ns, 10_000 + 30_000 + 500);
    assert_eq!(t.inside.ns(Part::Allocation), 1_000 + 1_000 + 2_000);
    assert_eq!(t.inside.calls(Part::Allocation), 3);
    assert_eq!(t.inside.ns(Part::Transfer), 500);
    assert_eq!(t.inside.ns(Part::Launch), 500 + 1_000);
    assert_eq!(t.inside.ns(Part::Wait), 5_000 + 20_000);
    assert_eq!(t.outside.ns(Part::StartUp), 4_000);
    assert_eq!(t.mpi_ns, 8_000);
    assert_eq!(t.mpi_calls, 1);
    assert_eq!(t.runtime_rest_ns(), 40_500 - 4_000 - 500 - 1_500 - 25_000);
    assert_eq!(t.program_ns(l.wall_ns), 68_500 - 40_500 - 8_000 - 4_000);
    assert_eq!(top_sum(l, 1), l.wall_ns);
    // The other thread ran no construct: its call is not in thread 1's.
    assert!(l.threads.iter().all(|t| t.thread != 2));
    // By line: the first construct's parts at line 10, the second's at 20.
    let site = |line: u32| {
        run.constructs()
            .find(|(_, c)| run.site(c.site).line == Some(line))
            .map(|(id, _)| run.line_site(id))
            .expect("site")
    };
    let s10 = l.site(site(10)).expect("line 10");
    assert_eq!(s10.constructs, 1);
    assert_eq!(s10.host_ns, 10_000);
    assert_eq!(s10.parts.ns(Part::Wait), 5_000);
    assert_eq!(s10.runtime_rest_ns(), 10_000 - 8_000);
    let s20 = l.site(site(20)).expect("line 20");
    assert_eq!(s20.parts.ns(Part::Allocation), 2_000);
    assert_eq!(s20.parts.ns(Part::Wait), 20_000);
}

#[test]
fn without_driver_records_the_time_inside_constructs_is_not_split() {
    let mut r = names();
    r.extend(compute(1, 1, 10, 10_000, 20_000));
    r.extend(compute(1, 2, 10, 30_000, 40_000));
    let run = build(header(), r);
    let l = run.ledger();
    assert!(!l.timed);
    let t = &l.threads[0];
    assert_eq!(t.inside_ns, 20_000);
    assert_eq!(t.inside.total_ns(), 0);
    assert_eq!(top_sum(l, 1), l.wall_ns);
}

/// `n` compute constructs at line 10, one after another from 10 us on,
/// each `host` ns long on the host around a kernel of `kernel` ns, with
/// the driver calls GCC's runtime makes for each (an argument block
/// allocated, copied and freed, the launch, the wait), handed over after
/// all the constructs as CUPTI would; `data` adds a 64 KiB upload of the
/// program's data to each.
fn storm(n: u32, host: u64, kernel: u64, data: bool) -> Vec<Record> {
    use accprof_analyzer::testkit::trace::{driver_call, kernel as kernel_record, memcpy};
    use accprof_trace::{CopyKind, DriverApi};
    let mut r = names();
    let mut spans = Vec::new();
    for i in 0..n {
        let t = 10_000 + u64::from(i) * (host + 1_000);
        let region = u64::from(i) + 1;
        let corr = 2 * i + 1;
        let [start, end] = compute(1, region, 10, t, t + host);
        r.push(start);
        r.push(driver_call(
            t + 5_000,
            region,
            corr,
            DriverApi::Launch,
            None,
            None,
        ));
        r.push(kernel_record(t + 6_000, t + 6_000 + kernel, corr));
        if data {
            r.push(driver_call(
                t + 1_000,
                region,
                corr + 1,
                DriverApi::CopyHostToDevice,
                Some(0x10_0000),
                Some(65_536),
            ));
            r.push(memcpy(
                t + 1_000,
                t + 1_500,
                65_536,
                CopyKind::HostToDevice,
                corr + 1,
            ));
        }
        r.push(end);
        spans.push(span(1, t + 1_000, t + 2_000, DriverOp::Alloc));
        spans.push(span(1, t + 2_000, t + 4_000, DriverOp::CopyHostToDevice));
        spans.push(span(1, t + 5_000, t + 8_000, DriverOp::Launch));
        spans.push(span(1, t + 8_000, t + 12_000, DriverOp::Synchronize));
        spans.push(span(1, t + 12_000, t + 27_000, DriverOp::Free));
    }
    r.extend(spans);
    r
}

#[test]
fn launch_bound_counts_the_launch_calls_and_the_waits_for_short_kernels() {
    use accprof_analyzer::findings::Value;
    use accprof_analyzer::rules::l5_launch_bound;
    use accprof_analyzer::testkit::runs::run_rule;
    let run = build(header(), storm(200, 40_000, 2_000, false));
    let found = run_rule(&run, l5_launch_bound::check);
    assert_eq!(found.findings.len(), 1, "{:?}", found.findings);
    let f = &found.findings[0];
    // 3 us of launch call and 4 us of waiting, 200 times; not the
    // argument blocks' 18 us or the 15 us of runtime work between calls.
    assert_eq!(f.cost_ns, Some(200 * 7_000));
    assert_eq!(
        f.evidence.get("launch_calls_time"),
        Some(&Value::Ns(200 * 3_000))
    );
    let l = run.ledger();
    let site = l.sites.iter().find(|s| s.constructs == 200).expect("site");
    assert_eq!(site.parts.ns(Part::Allocation), 200 * 16_000);
    assert_eq!(site.runtime_rest_ns(), 200 * (40_000 - 25_000));
}

#[test]
fn constructs_that_move_the_programs_data_are_not_launch_bound() {
    use accprof_analyzer::rules::l5_launch_bound;
    use accprof_analyzer::testkit::runs::run_rule;
    let run = build(header(), storm(200, 40_000, 2_000, true));
    let found = run_rule(&run, l5_launch_bound::check);
    assert!(found.findings.is_empty(), "{:?}", found.findings);
}

#[test]
fn idle_gaps_inside_constructs_are_the_runtimes_not_the_programs() {
    use accprof_analyzer::findings::Value;
    use accprof_analyzer::rules::s3_idle_gaps;
    use accprof_analyzer::testkit::runs::run_rule;
    // 200 us constructs around 2 us kernels, 1 us apart: the device waits
    // while the host is inside the runtime.
    let run = build(header(), storm(200, 200_000, 2_000, false));
    let found = run_rule(&run, s3_idle_gaps::check);
    let f = found.findings.first().expect("S3");
    let Some(Value::Ns(rt)) = f.evidence.get("host_in_runtime") else {
        panic!("host_in_runtime")
    };
    let Some(Value::Ns(prog)) = f.evidence.get("host_in_program") else {
        panic!("host_in_program")
    };
    assert_eq!(Some(rt + prog), f.cost_ns);
    assert!(
        *rt >= 9 * *prog,
        "{rt} in the runtime, {prog} in the program"
    );
    assert!(
        f.proposal.text.contains("runtime's work"),
        "{}",
        f.proposal.text
    );
}

/// A run made by hand with the test kit, as the rules' tests make theirs:
/// its ledger counts each top-level construct's host time inside the
/// constructs, at the construct's line site (the implicit data parts
/// inside a compute construct are not counted again), the collector's
/// hashing inside one as the collector's, and leaves the rest of the wall
/// time to the program; without the driver's timings the time inside is
/// not split, and the table's top-level rows sum to the wall time.
#[test]
fn a_hand_made_run_has_its_ledger() {
    use accprof_analyzer::ledger::Account;
    use accprof_analyzer::testkit::runs::RunBuilder;
    use accprof_analyzer::ConstructClass;
    use accprof_trace::{BufferHash, CopyKind, Direction, HashMode};
    let mut b = RunBuilder::new(HashMode::Full);
    let (s10, s20, s30) = (
        b.site("app.c", 10),
        b.site("app.c", 20),
        b.site("app.c", 30),
    );
    let a = b.buf(1 << 20, 1);
    // The program's own code before the first construct and between them.
    b.t += 50_000;
    let first = b.gcc_compute(s10, &[a], 40_000, 64, &[a]);
    b.t += 30_000;
    let second = b.gcc_compute(s20, &[a], 10_000, 64, &[]);
    b.t += 20_000;
    let update = b.open(ConstructClass::Update, s30, None);
    b.copy(update, CopyKind::DeviceToHost, a, 25_000);
    b.close(update);
    // The collector hashed the buffer for 2 us inside the first construct.
    let (time_ns, region) = (b.construct_mut(first).start_ns + 1_500, b.region(first));
    b.run.hashes.push(BufferHash {
        time_ns,
        region,
        correlation: u32::MAX,
        direction: Direction::Upload,
        host_ptr: a.ptr,
        bytes: a.bytes,
        mode: HashMode::Full,
        hash: 1,
        hash_ns: Some(2_000),
    });
    let run = b.build();
    let host = |c| run.construct(c).host_ns().expect("closed");
    let l = run.ledger();
    assert!(!l.timed);
    assert_eq!(l.wall_ns, run.wall_ns());
    let [t] = &l.threads[..] else {
        panic!("one thread: {:?}", l.threads)
    };
    assert_eq!((t.thread, t.constructs), (1, 3));
    let inside = host(first) + host(second) + host(update);
    assert_eq!(t.inside_ns, inside);
    assert_eq!(t.inside.total_ns(), 0);
    assert_eq!(t.program_ns(l.wall_ns), run.wall_ns() - inside);
    assert_eq!(t.collector_ns, 2_000);
    for (c, hashing) in [(first, 2_000), (second, 0), (update, 0)] {
        let s = l.site(run.line_site(c)).expect("a site with a construct");
        assert_eq!(
            (s.constructs, s.host_ns, s.collector_ns),
            (1, host(c), hashing)
        );
    }
    let rows = l.rows_of(t);
    let accounts: Vec<Account> = rows.iter().map(|r| r.account).collect();
    assert_eq!(
        accounts,
        [Account::Program, Account::Constructs, Account::Collector]
    );
    assert_eq!((rows[1].calls, rows[2].ns), (Some(3), 2_000));
    let top = rows.iter().filter(|r| r.depth() == 0).map(|r| r.ns);
    assert_eq!(top.sum::<u64>(), l.wall_ns);
    assert_eq!(top_sum(l, 1), l.wall_ns);
}
