//! The model's relations on every recorded fixture (cli/tests/fixtures/h200
//! and h100): each kernel, transfer and allocation joined to a construct is
//! among that construct's own (`kernels_of`, `transfers_of`, `allocs_of`),
//! everything a construct lists points back at it, each construct lists its
//! entities once in the run's order, and the counts add up.

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use accprof_analyzer::testkit::fixtures;
use accprof_analyzer::{ConstructId, Run};

/// Every trace of a fixture directory, loaded with the fixture's copies of
/// the binaries only.
fn fixtures(gpu: &str) -> Vec<(String, Run)> {
    let dir = fixtures::dir(gpu);
    let opts = fixtures::load_options(gpu);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixture directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "trace"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let run = accprof_analyzer::load_run_with(&p, &opts).expect("fixture loads");
            let file = p.file_name().map(|f| f.to_string_lossy().into_owned());
            (format!("{gpu}/{}", file.unwrap_or_default()), run)
        })
        .collect()
}

/// Checks one relation both ways and returns how many entities are joined
/// to a construct. `entities` are all of one kind with their construct,
/// `of` a construct's own as the model indexes them.
fn check_relation<I: Copy + Ord + Debug>(
    name: &str,
    what: &str,
    run: &Run,
    entities: &[(I, Option<ConstructId>)],
    of: impl Fn(ConstructId) -> Vec<I>,
) -> usize {
    // The iterators yield handles in ascending order.
    assert!(entities.windows(2).all(|w| w[0].0 < w[1].0), "{name}");
    let owner = |id: I| match entities.binary_search_by_key(&id, |&(x, _)| x) {
        Ok(i) => entities[i].1,
        Err(_) => panic!("{name}: {what} {id:?} is not in the run"),
    };
    let mut joined = 0;
    for &(id, c) in entities {
        let Some(c) = c else { continue };
        joined += 1;
        let own = of(c);
        assert_eq!(
            own.iter().filter(|&&x| x == id).count(),
            1,
            "{name}: {what} {id:?} of {c:?} is not listed once by it: {own:?}"
        );
    }
    let mut listed = 0;
    for (c, _) in run.constructs() {
        let own = of(c);
        assert!(
            own.windows(2).all(|w| w[0] < w[1]),
            "{name}: {what}s of {c:?} out of the run's order: {own:?}"
        );
        for &id in &own {
            assert_eq!(owner(id), Some(c), "{name}: {what} {id:?} listed by {c:?}");
        }
        listed += own.len();
    }
    assert_eq!(listed, joined, "{name}: {what}s listed by constructs");
    joined
}

#[test]
fn every_joined_kernel_transfer_and_allocation_is_reachable_both_ways() {
    let runs: Vec<(String, Run)> = fixtures("h200")
        .into_iter()
        .chain(fixtures("h100"))
        .collect();
    assert!(runs.len() >= 12, "fixtures found: {}", runs.len());
    let (mut kernels, mut transfers, mut allocs) = (0, 0, 0);
    for (name, run) in &runs {
        let ks: Vec<_> = run.kernels().map(|(id, k)| (id, k.construct)).collect();
        let ts: Vec<_> = run.transfers().map(|(id, t)| (id, t.construct)).collect();
        let as_: Vec<_> = run.allocs().map(|(id, a)| (id, a.construct)).collect();
        let k = check_relation(name, "kernel", run, &ks, |c| run.kernels_of(c).to_vec());
        let t = check_relation(name, "transfer", run, &ts, |c| run.transfers_of(c).to_vec());
        let a = check_relation(name, "allocation", run, &as_, |c| run.allocs_of(c).to_vec());
        // The handles lead to the entities the iterators yield (read
        // back whole from the same rows).
        for (id, x) in run.kernels() {
            assert_eq!(
                format!("{:?}", run.kernel(id)),
                format!("{x:?}"),
                "{name}: kernel {id:?}"
            );
        }
        for (id, x) in run.transfers() {
            assert_eq!(
                format!("{:?}", run.transfer(id)),
                format!("{x:?}"),
                "{name}: transfer {id:?}"
            );
        }
        for (id, x) in run.allocs() {
            assert_eq!(
                format!("{:?}", run.alloc(id)),
                format!("{x:?}"),
                "{name}: allocation {id:?}"
            );
        }
        for (id, x) in run.constructs() {
            assert_eq!(
                format!("{:?}", run.construct(id)),
                format!("{x:?}"),
                "{name}: construct {id:?}"
            );
        }
        kernels += k;
        transfers += t;
        allocs += a;
    }
    // The recorded runs joined device work to their constructs.
    assert!(kernels > 0 && transfers > 0 && allocs > 0);
}

/// The CUPTI memcpy records (by correlation id) and memset records of a
/// fixture, read straight from the trace.
fn device_records(
    path: &Path,
) -> (
    std::collections::HashMap<u32, accprof_trace::MemcpyRecord>,
    Vec<accprof_trace::MemsetRecord>,
) {
    let file = std::fs::File::open(path).expect("fixture opens");
    let mut reader =
        accprof_trace::Reader::new(std::io::BufReader::new(file)).expect("fixture reads");
    let (mut memcpys, mut memsets) = (std::collections::HashMap::new(), Vec::new());
    while let Some(rec) = reader.next_record() {
        match rec {
            accprof_trace::Record::Memcpy(m) => {
                memcpys.insert(m.correlation, m);
            }
            accprof_trace::Record::Memset(m) => memsets.push(m),
            _ => {}
        }
    }
    (memcpys, memsets)
}

fn fixture_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = ["h200", "h100"]
        .iter()
        .flat_map(|gpu| std::fs::read_dir(fixtures::dir(gpu)).expect("fixture directory"))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "trace"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn cupti_transfers_keep_their_device_stream_and_correlation() {
    let (mut checked, mut queued) = (0, 0);
    for path in fixture_paths() {
        let name = path.display().to_string();
        let run = accprof_analyzer::load_run_with(
            &path,
            &accprof_analyzer::LoadOptions::only_in(Vec::new()),
        )
        .expect("fixture loads");
        let (memcpys, _) = device_records(&path);
        let cupti: Vec<_> = run
            .transfers()
            .filter(|(_, t)| t.source == accprof_analyzer::TransferSource::Cupti)
            .collect();
        assert_eq!(cupti.len(), memcpys.len(), "{name}: CUPTI transfers");
        for (id, t) in cupti {
            let corr = t
                .correlation()
                .expect("a CUPTI transfer has its correlation id");
            let m = &memcpys[&corr];
            assert_eq!(
                (t.device(), t.stream(), t.bytes, t.start_ns),
                (Some(m.device), Some(m.stream), m.bytes, m.start_ns),
                "{name}: transfer {id:?}"
            );
            checked += 1;
        }
        // The transfers of an asynchronous construct go on the stream of
        // its queue: one stream per (thread, queue), as the kernels of
        // that queue run on it.
        let (_, memsets) = device_records(&path);
        assert_eq!(run.memsets().len(), memsets.len(), "{name}: memsets");
        let mut streams: std::collections::HashMap<(u32, i32), u32> = Default::default();
        for (c, x) in run.constructs() {
            let Some(q) = x.async_queue().filter(|&q| q >= 0) else {
                continue;
            };
            let own = run
                .transfers_of(c)
                .iter()
                .map(|&t| run.transfer(t).stream());
            let kernels = run
                .kernels_of(c)
                .iter()
                .map(|&k| Some(run.kernel(k).stream));
            for s in own.chain(kernels).flatten() {
                let first = *streams.entry((x.thread, q)).or_insert(s);
                assert_eq!(first, s, "{name}: queue {q} of construct {c:?}");
                queued += 1;
            }
        }
    }
    assert!(
        checked > 0 && queued > 0,
        "{checked} transfers, {queued} on queues"
    );
}

/// `accprof report` summarizes while reading, never building the model;
/// The summary streamed without the model (`accprof report`) and the one
/// the model carries, made by the same join in one pass with the model,
/// agree field for field on every recorded run (the device faults
/// included: the construct in flight is found both ways).
#[test]
fn the_streamed_summary_is_the_summary_of_the_model() {
    let opts = accprof_analyzer::LoadOptions::only_in(Vec::new());
    let mut in_flight = 0;
    for path in fixture_paths() {
        let name = path.display().to_string();
        let streamed = accprof_analyzer::summarize_run_with(&path, &opts).expect("fixture reads");
        let run = accprof_analyzer::load_run_with(&path, &opts).expect("fixture loads");
        let built = run.summary();
        assert_eq!(
            format!("{streamed:#?}"),
            format!("{built:#?}"),
            "{name}: streamed and built summaries differ"
        );
        in_flight += built.runs.iter().filter(|r| r.in_flight.is_some()).count();
    }
    assert!(in_flight > 0, "no fixture died inside a construct");
}

#[test]
fn a_construct_runs_one_level_deeper_than_its_parent() {
    let mut nested = 0;
    for gpu in ["h200", "h100"] {
        for (name, run) in fixtures(gpu) {
            for (id, c) in run.constructs() {
                match c.parent {
                    Some(p) => {
                        assert!(p < id, "{name}: {id:?} starts before its parent");
                        let parent = run.construct(p);
                        assert_eq!(c.depth, parent.depth + 1, "{name}: {id:?}");
                        nested += 1;
                    }
                    None => assert_eq!(c.depth, 0, "{name}: {id:?}"),
                }
            }
        }
    }
    // GCC's compute constructs hold their implicit enter and exit data.
    assert!(nested > 100, "only {nested} nested constructs");
}

/// The model sits below the join and the rules: no file of it (its unit
/// tests aside) names either, so the naming policy and the large transfers
/// it infers names from are the model's own.
#[test]
fn the_model_imports_neither_the_rules_nor_the_join() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("model directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| p.file_name().is_some_and(|f| f != "tests.rs"))
        .collect();
    files.sort();
    assert!(files.len() > 5, "model files under {}", dir.display());
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("model file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            let grouped =
                code.contains("crate::{") && (code.contains("rules") || code.contains("join"));
            if code.contains("crate::rules") || code.contains("crate::join") || grouped {
                found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the model names the rules or the join:\n{}",
        found.join("\n")
    );
}
