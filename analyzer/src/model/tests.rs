use crate::builder::build;
use crate::symbolize::Symbolizer;

use super::index::{lower_bound, ByConstruct};
use super::*;

use accprof_trace::{
    AccDetail, AccEventKind, Clock, ConstructKind, CopyKind, DropSource, HashMode, Header,
    MemoryKind, Record, RegionId, SourceLocation, SourceState, Sources, Trace,
};

fn header() -> Header {
    Header {
        host: "h".into(),
        pid: 1,
        rank: None,
        command_line: vec!["./a".into()],
        executable: "./a".into(),
        start_unix_ns: 0,
        start_clock_ns: 0,
        clock: Clock::Monotonic,
        runtime: "libgomp".into(),
        collector: "test".into(),
        sources: Sources {
            acc_prof: SourceState::Active,
            cupti: SourceState::Inactive("test".into()),
            hashing: HashMode::Off,
            coherence: false,
        },
        process_start_ns: None,
    }
}

/// An event of `region` on thread 1 at `line` (NVHPC-style location).
fn ev(t: u64, kind: AccEventKind, region: u64, line: u32) -> Record {
    Record::Acc(accprof_trace::AccEvent {
        time_ns: t,
        kind,
        thread: 1,
        region: RegionId(region),
        device_type: None,
        device_number: None,
        async_queue: None,
        construct: None,
        implicit: false,
        location: SourceLocation {
            line: Some(line),
            ..SourceLocation::default()
        },
        call_site: None,
        detail: AccDetail::None,
    })
}

fn build_of(records: Vec<Record>) -> Run {
    let trace = Trace {
        version: (1, 1),
        header: header(),
        records,
        losses: Vec::new(),
        skipped_unknown: 0,
    };
    build(trace, &mut Symbolizer::new())
}

fn lines(run: &Run) -> Vec<(Option<u32>, bool, bool)> {
    run.constructs()
        .map(|(_, c)| (run.site(c.site).line, c.parent.is_some(), c.cut))
        .collect()
}

fn on(device_type: u32, r: Record) -> Record {
    match r {
        Record::Acc(mut e) => {
            e.device_type = Some(device_type);
            Record::Acc(e)
        }
        r => r,
    }
}

#[test]
fn where_the_constructs_ran_is_read_once_from_their_device_types() {
    use AccEventKind::*;
    let host = |r| on(ACC_DEVICE_HOST, r);
    let mixed = build_of(vec![
        host(ev(1, ComputeConstructStart, 1, 10)),
        host(ev(2, ComputeConstructEnd, 1, 10)),
        on(5, ev(3, ComputeConstructStart, 2, 20)),
        on(5, ev(4, ComputeConstructEnd, 2, 20)),
    ]);
    assert!(mixed.ran_on_host() && !mixed.ran_only_on_host());
    assert!(mixed.runtime_is_libgomp());
    let all = build_of(vec![
        host(ev(1, ComputeConstructStart, 1, 10)),
        host(ev(2, ComputeConstructEnd, 1, 10)),
    ]);
    assert!(all.ran_on_host() && all.ran_only_on_host());
    let none = build_of(Vec::new());
    assert!(!none.ran_on_host() && !none.ran_only_on_host());
}

#[test]
fn the_totals_count_kernels_and_host_device_transfers_only() {
    use crate::testkit::runs::RunBuilder;
    let mut b = RunBuilder::new(HashMode::Off);
    let site = b.site("a.c", 1);
    let c = b.open(ConstructClass::Compute, site, None);
    let (x, y) = (b.buf(4096, 1), b.buf(100, 2));
    b.copy(c, CopyKind::HostToDevice, x, 300);
    b.kernel(c, 8, 1_000);
    b.kernel(c, 8, 2_000);
    b.copy(c, CopyKind::DeviceToDevice, y, 50);
    b.copy(c, CopyKind::DeviceToHost, y, 70);
    b.close(c);
    // Constructs: top-level ones and their host time; the nested one
    // counts with its parent; one never ended is counted as cut.
    let inner = b.open(ConstructClass::EnterData, site, Some(c));
    let d = b.open(ConstructClass::Update, site, None);
    let e = b.open(ConstructClass::Compute, site, None);
    b.set_span(c, 0, Some(5_000));
    b.set_span(inner, 100, Some(200));
    b.set_span(d, 6_000, Some(6_500));
    b.set_span(e, 7_000, None);
    b.construct_mut(e).cut = true;
    let run = b.build();
    assert_eq!(
        run.totals(),
        Totals {
            kernel_ns: 3_000,
            kernels: 2,
            transfer_ns: 370,
            transfers: 2,
            transfer_bytes: 4196,
            constructs: 3,
            host_construct_ns: 5_500,
            cut_constructs: 1,
        }
    );
}

#[test]
fn without_cupti_the_launch_events_are_the_kernels_with_host_times() {
    use AccEventKind::*;
    let launch = |t, kind, gangs, workers| match ev(t, kind, 1, 10) {
        Record::Acc(mut e) => {
            e.detail = AccDetail::Launch(accprof_trace::LaunchInfo {
                kernel_name: None,
                num_gangs: Some(gangs),
                num_workers: Some(workers),
                vector_length: Some(32),
            });
            Record::Acc(e)
        }
        r => r,
    };
    let run = build_of(vec![
        ev(1, ComputeConstructStart, 1, 10),
        launch(2, EnqueueLaunchStart, 4, 1),
        ev(5, EnqueueLaunchEnd, 1, 10),
        launch(6, EnqueueLaunchStart, 1, 8),
        ev(7, ComputeConstructEnd, 1, 10),
    ]);
    let c = ConstructId::at(0);
    let ks: Vec<_> = run
        .kernels()
        .map(|(_, k)| (k.construct, k.grid, k.block, k.start_ns, k.end_ns, k.source))
        .collect();
    assert_eq!(
        ks,
        [
            (Some(c), [4, 1, 1], [32, 1, 1], 2, 5, KernelSource::AccProf),
            // The second launch's end never came.
            (Some(c), [1, 1, 1], [32, 8, 1], 6, 6, KernelSource::AccProf),
        ]
    );
    assert_eq!(run.kernels_of(c).len(), 2);
    // Host times are no device time.
    assert_eq!((run.totals().kernels, run.totals().kernel_ns), (2, 0));
}

#[test]
fn without_cupti_each_launch_is_held_once_and_read_back_as_it_came() {
    use AccEventKind::*;
    let launch = |t, gangs, workers, vector_length| match ev(t, EnqueueLaunchStart, 1, 10) {
        Record::Acc(mut e) => {
            e.detail = AccDetail::Launch(accprof_trace::LaunchInfo {
                kernel_name: None,
                num_gangs: gangs,
                num_workers: workers,
                vector_length,
            });
            Record::Acc(e)
        }
        r => r,
    };
    let run = build_of(vec![
        ev(1, ComputeConstructStart, 1, 10),
        launch(2, Some(4), None, Some(32)),
        ev(3, EnqueueLaunchEnd, 1, 10),
        launch(4, None, Some(1), None),
        ev(5, EnqueueLaunchEnd, 1, 10),
        launch(6, Some(1 << 40), Some(0), Some(128)),
        ev(7, EnqueueLaunchEnd, 1, 10),
        launch(8, Some(2), Some(8), Some(64)),
        ev(9, ComputeConstructEnd, 1, 10),
    ]);
    let c = ConstructId::at(0);
    let got: Vec<_> = run
        .launches_of(c)
        .map(|l| {
            let name = l.kernel_name.map(|n| run.name(n).to_string());
            (
                name,
                l.gangs(),
                l.workers(),
                l.vector_length(),
                l.start_ns,
                l.end_ns(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (None, Some(4), None, Some(32), 2, Some(3)),
            (None, None, Some(1), None, 4, Some(5)),
            (None, Some(1 << 40), Some(0), Some(128), 6, Some(7)),
            (None, Some(2), Some(8), Some(64), 8, None),
        ]
    );
    // Only the launch whose gangs a kernel cannot hold is kept apart.
    assert_eq!(run.launches.len(), 1);
    assert_eq!(run.kernels_of(c).len(), 4);
}

#[test]
fn a_compute_construct_without_its_end_is_closed_by_the_next_one() {
    use AccEventKind::*;
    // Four reductions; the end of the second was toggled off.
    let mut r = Vec::new();
    for (i, line) in [10u32, 20, 30, 40].into_iter().enumerate() {
        let region = i as u64 + 1;
        let t = 100 * region;
        r.push(ev(t, ComputeConstructStart, region, line));
        r.push(ev(t + 10, EnterDataStart, region + 100, line));
        r.push(ev(t + 20, EnterDataEnd, region + 100, line));
        if line != 20 {
            r.push(ev(t + 50, ComputeConstructEnd, region, line));
        }
    }
    let run = build_of(r);
    let top: Vec<_> = lines(&run)
        .into_iter()
        .filter(|(_, nested, _)| !nested)
        .collect();
    assert_eq!(
        top,
        [
            (Some(10), false, false),
            (Some(20), false, true),
            (Some(30), false, false),
            (Some(40), false, false)
        ]
    );
    assert!(run.process.open_at_end.is_empty());
    assert_eq!(run.construct(ConstructId::at(2)).end_ns(), None);
}

#[test]
fn a_start_at_an_outer_depth_closes_everything_inside() {
    use AccEventKind::*;
    let run = build_of(vec![
        ev(1, ComputeConstructStart, 1, 10),
        ev(2, EnterDataStart, 101, 10),
        // Neither end comes.
        ev(5, ComputeConstructStart, 2, 20),
        ev(6, ComputeConstructEnd, 2, 20),
        ev(7, UpdateStart, 3, 30),
    ]);
    assert_eq!(
        lines(&run),
        [
            (Some(10), false, true),
            (Some(10), true, true),
            (Some(20), false, false),
            (Some(30), false, true)
        ]
    );
    // The update was running when the trace ended.
    assert_eq!(run.process.open_at_end, [ConstructId::at(3)]);
}

#[test]
fn an_end_closes_what_is_still_open_inside_it() {
    use AccEventKind::*;
    let run = build_of(vec![
        ev(1, ComputeConstructStart, 1, 10),
        ev(2, EnterDataStart, 101, 10),
        ev(3, ComputeConstructEnd, 1, 10),
    ]);
    assert_eq!(
        lines(&run),
        [(Some(10), false, false), (Some(10), true, true)]
    );
    assert!(run.process.open_at_end.is_empty());
}

#[test]
fn impossible_device_records_are_left_out_and_said() {
    let rec = |start_ns, end_ns| {
        Record::Memcpy(accprof_trace::MemcpyRecord {
            start_ns,
            end_ns,
            bytes: 8,
            kind: CopyKind::HostToDevice,
            src: MemoryKind::Pageable,
            dst: MemoryKind::Device,
            device: 0,
            context: 0,
            stream: 0,
            correlation: 0,
        })
    };
    let run = build_of(vec![
        rec(10, 20),
        rec(30, 5),
        rec(0, u64::MAX),
        Record::Dropped {
            source: DropSource::Cupti,
            count: u64::MAX,
        },
        Record::Dropped {
            source: DropSource::Cupti,
            count: 1,
        },
    ]);
    assert_eq!(run.transfers().len(), 1);
    assert_eq!(run.process.span_ns, (10, 20));
    assert_eq!(run.process.dropped, [(DropSource::Cupti, u64::MAX)]);
    assert_eq!(run.process.notes.len(), 2, "{:?}", run.process.notes);
}

#[test]
fn the_galloping_search_finds_what_a_binary_search_finds() {
    // Owners with gaps, runs and a skew, searched from every guess.
    let owners: Vec<ConstructId> = [0usize, 0, 2, 3, 3, 3, 7, 8, 20, 21, 21, 40]
        .iter()
        .map(|&i| ConstructId::at(i))
        .collect();
    for c in 0..45 {
        let c = ConstructId::at(c);
        let want = owners.partition_point(|&o| o < c);
        for guess in 0..=owners.len() + 2 {
            assert_eq!(lower_bound(&owners, c, guess), want, "{c:?} from {guess}");
        }
    }
    assert_eq!(lower_bound(&[], ConstructId::at(3), 0), 0);
}

#[test]
fn an_index_by_construct_reads_the_same_in_order_or_not() {
    let c = ConstructId::at;
    // (owner) per entity, some without one.
    let sorted = [Some(c(0)), None, Some(c(0)), Some(c(2)), Some(c(5)), None];
    let mixed = [Some(c(5)), None, Some(c(0)), Some(c(2)), Some(c(0)), None];
    // One each, evenly spread: the first guess is the place.
    let even = [Some(c(0)), Some(c(2)), Some(c(4)), Some(c(6))];
    for owners in [&sorted[..], &mixed[..], &even[..]] {
        let by = ByConstruct::new(owners, |i| i as u32, |o| *o);
        for k in 0..7 {
            let want: Vec<u32> = (0..owners.len() as u32)
                .filter(|&i| owners[i as usize] == Some(c(k)))
                .collect();
            assert_eq!(by.of(c(k)), &want[..], "{owners:?} construct {k}");
        }
    }
}

/// The model's entries stay compact (a launch-storm trace holds about
/// three constructs, a kernel, a launch, a transfer and an allocation
/// per 16 events).
#[test]
fn entries_stay_compact() {
    use std::mem::size_of;
    assert_eq!(size_of::<Option<ConstructId>>(), 4);
    assert_eq!(size_of::<Option<NameId>>(), 4);
    assert!(
        size_of::<LaunchRequest>() <= 48,
        "{}",
        size_of::<LaunchRequest>()
    );
    // What the run keeps of each kernel, transfer and allocation
    // besides the shape it shares with others.
    assert_eq!(size_of::<ConstructRow>(), 24);
    assert_eq!(size_of::<KernelRow>(), 24);
    assert_eq!(size_of::<TransferRow>(), 40);
    assert_eq!(size_of::<AllocRow>(), 24);
}

#[test]
fn memsets_join_their_driver_calls_in_whatever_order_they_come() {
    use AccEventKind::*;
    let call = |t, correlation| {
        Record::DriverCall(accprof_trace::DriverCall {
            time_ns: t,
            thread: 1,
            region: RegionId(1),
            correlation,
            api: accprof_trace::DriverApi::Memset,
            host_ptr: None,
            bytes: Some(64),
        })
    };
    let memset = |start_ns, correlation| {
        Record::Memset(accprof_trace::MemsetRecord {
            start_ns,
            end_ns: start_ns + 5,
            bytes: 64,
            value: 0,
            memory: MemoryKind::Device,
            device: 0,
            context: 1,
            stream: 13,
            correlation,
        })
    };
    let run = build_of(vec![
        ev(1, ComputeConstructStart, 1, 10),
        call(2, 5),
        // Before its construct ends, and before its driver call.
        memset(3, 5),
        memset(4, 6),
        call(5, 6),
        ev(9, ComputeConstructEnd, 1, 10),
        // No driver call names it.
        memset(12, 7),
    ]);
    let c = ConstructId::at(0);
    let ms: Vec<_> = run
        .memsets()
        .map(|(_, m)| (m.start_ns, m.construct, m.stream, m.correlation))
        .collect();
    assert_eq!(
        ms,
        [(3, Some(c), 13, 5), (4, Some(c), 13, 6), (12, None, 13, 7)]
    );
    assert_eq!(run.memsets_of(c), [MemsetId::at(0), MemsetId::at(1)]);
}

/// A `data` region on thread 1 around a `host_data` region whose exit
/// the runtime names `data`, both exits reported from a body line; a
/// `data` region on thread 2 interleaved with them; an implicit part
/// of a compute construct at a line of its own.
#[test]
fn line_sites_follow_entries_and_top_level_constructs() {
    use crate::testkit::runs::RunBuilder;
    let mut b = RunBuilder::new(HashMode::Off);
    let (data, host_data, body) = (b.site("a.c", 10), b.site("a.c", 12), b.site("a.c", 15));
    let (other, compute, part) = (b.site("a.c", 30), b.site("a.c", 40), b.site("a.c", 41));
    let region = |b: &mut RunBuilder, class, kind, site, thread| {
        let id = b.open(class, site, None);
        let c = b.construct_mut(id);
        c.kind = Some(kind);
        c.thread = thread;
        // Each part ends, as the runtime's events say (a part of a class
        // still open would be cut by the next one's start).
        b.close(id);
        id
    };
    let (enter, exit) = (ConstructClass::EnterData, ConstructClass::ExitData);
    let d_in = region(&mut b, enter, ConstructKind::Data, data, 1);
    let o_in = region(&mut b, enter, ConstructKind::Data, other, 2);
    let h_in = region(&mut b, enter, ConstructKind::HostData, host_data, 1);
    let o_out = region(&mut b, exit, ConstructKind::Data, body, 2);
    let h_out = region(&mut b, exit, ConstructKind::Data, body, 1);
    let d_out = region(&mut b, exit, ConstructKind::Data, body, 1);
    let c = b.open(ConstructClass::Compute, compute, None);
    let implicit = b.open(ConstructClass::EnterData, part, Some(c));
    let run = b.build();
    let line = |id| run.site(run.line_site(id)).line;
    assert_eq!(line(d_in), Some(10));
    assert_eq!(line(d_out), Some(10));
    assert_eq!(line(h_in), Some(12));
    assert_eq!(line(h_out), Some(12));
    assert_eq!(line(o_in), Some(30));
    assert_eq!(line(o_out), Some(30));
    assert_eq!(line(implicit), Some(40));
    assert_eq!(run.construct(h_out).kind, Some(ConstructKind::HostData));
    assert_eq!(run.construct(d_out).kind, Some(ConstructKind::Data));
    // The runtime's own sites stay as reported.
    assert_eq!(run.site(run.construct(h_out).site).line, Some(15));
}

/// A transfer is named by the runtime's name for it, else its buffer by the
/// runtime's name for another transfer of it, by the executable's data
/// symbol, then by the source; the summary's lines name them alike.
#[test]
fn a_transfer_is_named_by_the_runtime_then_the_symbol() {
    use crate::testkit::runs::RunBuilder;
    // The runtime names a copy in acc_prof's events, which are the copies
    // when CUPTI does not record.
    let mut b = RunBuilder::new(HashMode::Off).no_cupti();
    let site = b.site("a.c", 10);
    let c = b.open(ConstructClass::Compute, site, None);
    let (a, s, none) = (b.buf(4096, 1), b.buf(4096, 2), b.buf(4096, 3));
    let up = b.copy(c, CopyKind::HostToDevice, a, 100);
    let down = b.copy(c, CopyKind::DeviceToHost, a, 100);
    let by_symbol = b.copy(c, CopyKind::HostToDevice, s, 100);
    let unnamed = b.copy(c, CopyKind::HostToDevice, none, 100);
    b.close(c);
    let name = b.run.intern_name("x");
    b.transfer_mut(down).variable = Some(name);
    let mut run = b.build();
    // The symbols name `a` too: the runtime's name wins.
    run.data_names = [(a.ptr, "a_sym".to_string()), (s.ptr, "s_sym".to_string())].into();
    run.derive_names();
    assert_eq!(run.variable_from(down), Some(("x", NameOrigin::Runtime)));
    assert_eq!(run.variable_from(up), Some(("x", NameOrigin::Runtime)));
    assert_eq!(
        run.variable_from(by_symbol),
        Some(("s_sym", NameOrigin::Symbol))
    );
    assert_eq!(run.variable(unnamed), None);
    let line = &run.summary().functions[0].lines[0];
    let vars: Vec<&Vec<String>> = line.transfers.iter().map(|t| &t.variables).collect();
    assert_eq!(
        vars,
        [
            &vec!["x".to_string(), "s_sym".to_string()],
            &vec!["x".to_string()]
        ]
    );
}

/// Each event's track: a construct's thread and depth, a kernel's device
/// and queue, a copy's direction.
#[test]
fn each_event_has_its_track() {
    use crate::testkit::runs::RunBuilder;
    let mut b = RunBuilder::new(HashMode::Off);
    let site = b.site("a.c", 10);
    let c = b.open(ConstructClass::Compute, site, None);
    let inner = b.open(ConstructClass::EnterData, site, Some(c));
    let buf = b.buf(4096, 1);
    let up = b.copy(inner, CopyKind::HostToDevice, buf, 100);
    let down = b.copy(inner, CopyKind::DeviceToHost, buf, 100);
    b.close(inner);
    let k = b.kernel(c, 4, 1_000).expect("CUPTI kernel");
    b.close(c);
    let mut run = b.build();
    run.push_mpi_call(MpiCall {
        routine: "MPI_Sendrecv".into(),
        start_ns: 5_000,
        end_ns: 6_000,
        thread: 1,
        cuda_aware: None,
        site: None,
        ranges: vec![
            accprof_trace::MpiRange {
                host_ptr: 0x1000,
                bytes: 800,
                write: false,
            },
            accprof_trace::MpiRange {
                host_ptr: 0x2000,
                bytes: 800,
                write: true,
            },
        ],
    });
    let (m, call) = run.mpi_call_ids().next().expect("the call pushed");
    assert_eq!(call.bytes(), 1600);
    // An MPI call goes on its host thread's track, at the top level.
    assert_eq!(
        run.track(Item::MpiCall(m)),
        Track::Thread {
            thread: 1,
            depth: 0
        }
    );
    assert_eq!(
        run.track(Item::Construct(c)),
        Track::Thread {
            thread: 1,
            depth: 0
        }
    );
    assert_eq!(
        run.track(Item::Construct(inner)),
        Track::Thread {
            thread: 1,
            depth: 1
        }
    );
    let kernel = run.kernel(k);
    assert_eq!(
        run.track(Item::Kernel(k)),
        Track::Queue {
            device: kernel.device,
            stream: kernel.stream
        }
    );
    assert_eq!(
        run.track(Item::Transfer(up)),
        Track::Copies(CopyDirection::Upload)
    );
    assert_eq!(
        run.track(Item::Transfer(down)),
        Track::Copies(CopyDirection::Download)
    );
}
