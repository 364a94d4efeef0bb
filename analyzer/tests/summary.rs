//! Summary rules on small hand-written traces: where a structured data
//! region's exit counts, how several runs merge, and that call sites
//! without source lines stay apart.

use accprof_analyzer::model;
use accprof_analyzer::summary::{merge, LineSummary, Reached, Summary};
use accprof_analyzer::testkit::trace::{self, TraceBuilder};
use accprof_trace::*;

/// A run of an NVHPC program (file and line in every event).
fn header(rank: Option<u32>, pid: u32) -> Header {
    Header {
        host: "node1".into(),
        pid,
        rank,
        runtime: "NVHPC test".into(),
        ..trace::header()
    }
}

/// Builds traces event by event, NVHPC style (file and line in every event)
/// or GCC style (call sites).
type T = TraceBuilder;

fn summary(t: T, rank: Option<u32>, pid: u32) -> Summary {
    t.build(header(rank, pid)).summary().clone()
}

fn at(s: &Summary, line: u32) -> Option<&LineSummary> {
    s.functions
        .iter()
        .flat_map(|f| f.lines.iter())
        .find(|l| l.line == Some(line))
}

fn reached(s: &Summary, line: u32, what: Reached) -> u64 {
    at(s, line)
        .and_then(|l| l.reached.get(&what))
        .map_or(0, |st| st.count)
}

#[test]
fn a_data_region_exit_counts_at_its_entry() {
    use AccEventKind::*;
    use ConstructKind::*;
    let mut t = T::new();
    // data at 10 { data at 20 { parallel at 21 } (exit reported at 22) }
    // (exit reported at 30); thread 2 leaves a region it never entered
    // (at 40); `enter data` / `exit data` directives (50, 51) are no
    // structured region.
    t.ev(EnterDataStart, 1, 1, Data, Some(10));
    t.copy(1, 1, CopyKind::HostToDevice, 4096);
    t.ev(EnterDataEnd, 1, 1, Data, Some(10));
    t.construct(EnterDataStart, 1, 2, Data, 20);
    t.compute(3, 2, 21, 1000);
    t.construct(ExitDataStart, 2, 9, Data, 40);
    t.construct(ExitDataStart, 1, 4, Data, 22);
    t.ev(ExitDataStart, 1, 5, Data, Some(30));
    t.copy(5, 3, CopyKind::DeviceToHost, 4096);
    t.ev(ExitDataEnd, 1, 5, Data, Some(30));
    t.construct(EnterDataStart, 1, 6, EnterData, 50);
    t.construct(ExitDataStart, 1, 7, ExitData, 51);
    let s = summary(t, None, 1);

    assert_eq!(reached(&s, 10, Reached::DataRegion), 2);
    assert_eq!(reached(&s, 20, Reached::DataRegion), 2);
    assert_eq!(reached(&s, 21, Reached::ComputeRegion), 1);
    assert!(at(&s, 22).is_none() && at(&s, 30).is_none());
    assert_eq!(reached(&s, 40, Reached::DataRegion), 1);
    assert_eq!(reached(&s, 50, Reached::EnterData), 1);
    assert_eq!(reached(&s, 51, Reached::ExitData), 1);
    // Both of the outer region's copies are under its line.
    let l10 = at(&s, 10).expect("line 10");
    let dirs: Vec<_> = l10.transfers.iter().map(|t| t.direction).collect();
    assert_eq!(
        dirs,
        [Some(CopyKind::HostToDevice), Some(CopyKind::DeviceToHost)]
    );
    assert!(l10.transfers.iter().all(|t| t.count_of_size(4096) == 1));
}

#[test]
fn ranks_merge_and_show_their_imbalance() {
    // Rank 1 (given first) runs the loop at line 10 three times, rank 0
    // once; line 20 runs once on each.
    let mut r1 = T::new();
    for i in 0..3 {
        r1.compute(10 + i, 10 + i as u32, 10, 100);
    }
    r1.compute(20, 20, 20, 50);
    let mut r0 = T::new();
    r0.compute(10, 10, 10, 100);
    r0.compute(20, 20, 20, 50);
    let s1 = summary(r1, Some(1), 101);
    let s0 = summary(r0, Some(0), 100);
    let m = merge(&[s1, s0]);

    assert_eq!(reached(&m.merged, 10, Reached::ComputeRegion), 4);
    let k = &at(&m.merged, 10).expect("line 10").kernels[0];
    assert_eq!((k.launches, k.device.count, k.device.total_ns), (4, 4, 400));
    assert_eq!(reached(&m.merged, 20, Reached::ComputeRegion), 2);
    assert_eq!(m.merged.kernel_ns, 500);
    assert_eq!(m.merged.runs.len(), 2);

    let ranks: Vec<(u32, u32, u64)> = m
        .ranks
        .iter()
        .map(|r| (r.rank, r.pid, r.kernel_ns))
        .collect();
    assert_eq!(ranks, [(0, 100, 150), (1, 101, 350)]);

    // Line 10: 300 ns on rank 1, 100 on rank 0: mean 200, max/mean 1.5.
    // Line 20 is even and not listed.
    assert_eq!(m.imbalance.len(), 1);
    let i = &m.imbalance[0];
    assert_eq!(
        (i.line, i.max_ns, i.max_rank, i.mean_ns),
        (Some(10), 300, 1, 200)
    );
    assert!((i.ratio - 1.5).abs() < 1e-9);
}

#[test]
fn sites_without_lines_stay_apart() {
    let mut t = T::new();
    t.records.push(Record::Module(Module {
        id: ModuleId(1),
        path: "/nonexistent/app".into(),
        build_id: vec![1; 20],
        base: 0,
        text_start: 0x1000,
        text_end: 0x2000,
    }));
    for (id, off) in [(1, 0x1100), (2, 0x1200)] {
        t.records.push(Record::CallSite(CallSite {
            id: CallSiteId(id),
            module: ModuleId(1),
            return_offset: off,
        }));
    }
    for (region, cs) in [(1, 1), (2, 2), (3, 2)] {
        for kind in [
            AccEventKind::ComputeConstructStart,
            AccEventKind::ComputeConstructEnd,
        ] {
            t.t += 10;
            // GCC style: no location, the call site on the start event.
            let mut e = trace::acc_event(t.t, kind, 1, region, None);
            e.call_site = (kind == AccEventKind::ComputeConstructStart).then_some(CallSiteId(cs));
            t.records.push(Record::Acc(e));
        }
    }
    let s = summary(t, None, 1);
    let lines: Vec<(Option<u32>, Option<u64>, u64)> = s
        .functions
        .iter()
        .flat_map(|f| f.lines.iter())
        .map(|l| (l.line, l.address, l.reached[&Reached::ComputeRegion].count))
        .collect();
    // Looked up at the call instruction: return address - 1.
    assert_eq!(lines, [(None, Some(0x10ff), 1), (None, Some(0x11ff), 2)]);
}

#[test]
fn api_routine_calls_are_constructs_at_their_call_sites() {
    let mut t = T::new();
    for (id, text) in [(4, "acc_copyin"), (5, "acc_update_self")] {
        t.records.push(Record::String {
            id: StringId(id),
            text: text.into(),
        });
    }
    t.records.push(Record::Module(Module {
        id: ModuleId(1),
        path: "/nonexistent/app".into(),
        build_id: vec![1; 20],
        base: 0,
        text_start: 0x1000,
        text_end: 0x2000,
    }));
    for (id, off) in [(1, 0x1100), (2, 0x1200)] {
        t.records.push(Record::CallSite(CallSite {
            id: CallSiteId(id),
            module: ModuleId(1),
            return_offset: off,
        }));
    }
    let api = |t: &mut T, region: u64, routine: u32, site: Option<u32>, phase: ApiPhase| {
        t.t += 10;
        t.records.push(Record::Api(ApiCall {
            time_ns: t.t,
            thread: 1,
            region: RegionId(region),
            phase,
            routine: StringId(routine),
            call_site: site.map(CallSiteId),
            host_ptr: Some(0x1000),
            bytes: Some(4096),
            async_queue: None,
        }));
    };
    // acc_copyin twice at one site: the first reports an enter data of its
    // own inside (as NVHPC does) that makes one of its two copies.
    api(&mut t, 10, 4, Some(1), ApiPhase::Start);
    t.ev(
        AccEventKind::EnterDataStart,
        1,
        11,
        ConstructKind::RuntimeApi,
        None,
    );
    t.copy(11, 1, CopyKind::HostToDevice, 4096);
    t.ev(
        AccEventKind::EnterDataEnd,
        1,
        11,
        ConstructKind::RuntimeApi,
        None,
    );
    t.copy(10, 2, CopyKind::HostToDevice, 4096);
    api(&mut t, 10, 4, None, ApiPhase::End);
    api(&mut t, 12, 4, Some(1), ApiPhase::Start);
    api(&mut t, 12, 4, None, ApiPhase::End);
    // acc_update_self at another site, with its download.
    api(&mut t, 13, 5, Some(2), ApiPhase::Start);
    t.copy(13, 3, CopyKind::DeviceToHost, 100);
    api(&mut t, 13, 5, None, ApiPhase::End);
    let run = t.build(header(None, 1));

    let ids: Vec<model::ConstructId> = run.constructs().map(|(id, _)| id).collect();
    let routines: Vec<(&str, Option<model::ConstructId>, bool)> = run
        .constructs()
        .map(|(_, c)| match c.class {
            model::ConstructClass::ApiCall(r) => (run.routine(r), c.parent, c.end_ns().is_some()),
            _ => ("nested", c.parent, c.end_ns().is_some()),
        })
        .collect();
    let first = Some(ids[0]);
    assert_eq!(
        routines,
        [
            ("acc_copyin", None, true),
            ("nested", first, true),
            ("acc_copyin", None, true),
            ("acc_update_self", None, true),
        ]
    );
    let owners: Vec<Option<model::ConstructId>> =
        run.transfers().map(|(_, c)| c.construct).collect();
    // The nested construct's copy is its own; its parent's site counts it.
    let c = |i: usize| Some(ids[i]);
    assert_eq!(owners, [c(1), c(0), c(3)]);

    let s = run.summary();
    /// Address, API calls, constructs reached, transfers of one line.
    type Line = (
        Option<u64>,
        Vec<(String, u64)>,
        usize,
        Vec<(Option<CopyKind>, u64, u64)>,
    );
    let lines: Vec<Line> = s
        .functions
        .iter()
        .flat_map(|f| f.lines.iter())
        .map(|l| {
            (
                l.address,
                l.api_calls
                    .iter()
                    .map(|(n, st)| (n.clone(), st.count))
                    .collect(),
                l.reached.len(),
                l.transfers
                    .iter()
                    .map(|t| (t.direction, t.count, t.bytes))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            (
                Some(0x10ff),
                vec![("acc_copyin".to_string(), 2)],
                0,
                vec![(Some(CopyKind::HostToDevice), 2, 8192)]
            ),
            (
                Some(0x11ff),
                vec![("acc_update_self".to_string(), 1)],
                0,
                vec![(Some(CopyKind::DeviceToHost), 1, 100)]
            ),
        ]
    );
}
