//! Findings on the traces recorded on an NVIDIA H200 (cli/tests/fixtures/h200,
//! recorded by cli/tests/fixtures/record.sh with GCC 12's libgomp, CUPTI and
//! sampled hashes). The binaries in cli/tests/fixtures/h200/bin give the
//! source lines; the sources are the repository's samples/.
//!
//! - The "bad" samples get the findings their header comments announce, at
//!   the lines they name, with the proposals and patches in tests/golden
//!   (rewrite with `ACCPROF_BLESS=1 cargo test -p accprof-analyzer --test h200`).
//! - The "good" samples and the data-region samples get no data-movement
//!   finding at all.
//! - Without the sources, the findings stay, without patches, with a note.

use std::path::{Path, PathBuf};

use accprof_analyzer::analysis;
use accprof_analyzer::findings::{Analysis, Category, Confidence, Finding};
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::testkit;
use accprof_analyzer::testkit::findings::{patch_text, with_id};
use accprof_analyzer::{LoadOptions, Run};

fn fixtures() -> PathBuf {
    testkit::fixtures::dir("h200")
}

fn load(name: &str) -> Run {
    let run = testkit::fixtures::load("h200", name);
    assert!(
        run.process.notes.is_empty(),
        "{name}: every site should have a line: {:?}",
        run.process.notes
    );
    run
}

/// The recorded sample paths are those of the recording machine; the
/// repository's samples/ stands in for them.
fn sources(run: &Run) -> SourceSet {
    SourceSet::load(run, &[testkit::fixtures::samples()])
}

fn analyze(name: &str) -> (Run, SourceSet, Analysis) {
    let run = load(name);
    let src = sources(&run);
    let a = analysis::analyze(&run, &src, &Options::default());
    (run, src, a)
}

fn file_name(p: &str) -> &str {
    Path::new(p)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(p)
}

/// `role file:line [variable]` of each location, with file names only.
fn places(f: &Finding) -> Vec<String> {
    f.locations
        .iter()
        .map(|l| {
            let var = l
                .variable
                .as_deref()
                .map(|v| format!(" [{v}]"))
                .unwrap_or_default();
            format!(
                "{} {}:{}{var}",
                l.role,
                file_name(&l.file),
                l.line.unwrap_or(0)
            )
        })
        .collect()
}

fn golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    testkit::golden::check(&path, got, "cargo test -p accprof-analyzer --test h200");
}

#[test]
fn laplace_bad_c() {
    let (run, src, a) = analyze("laplace_bad_c");
    // L3 costs the most: the update kernel on one gang.
    assert_eq!(a.findings[0].id, "L3");
    let l3 = with_id(&a, "L3");
    assert_eq!(l3.len(), 1, "only the update kernel runs on one gang");
    assert_eq!(places(l3[0]), ["construct laplace_bad.c:154"]);
    let single: u64 = run
        .kernels()
        .map(|(_, x)| x)
        .filter(|k| k.grid == [1, 1, 1])
        .map(|k| k.device_ns())
        .sum();
    assert_eq!(l3[0].cost_ns, Some(single));
    assert_eq!(l3[0].evidence.count("single_gang_launches"), Some(20));
    assert_eq!(
        l3[0].proposal.directive.as_deref(),
        Some("#pragma acc parallel loop collapse(2) reduction(max:dt) // update and max change")
    );

    let d6 = with_id(&a, "D6");
    assert_eq!(d6.len(), 1, "one finding for the one host loop");
    assert_eq!(
        places(d6[0]),
        [
            "host loop laplace_bad.c:147",
            "construct laplace_bad.c:148 [A, Anew]",
            "construct laplace_bad.c:154 [A, Anew]"
        ]
    );
    // 20 iterations x 2 constructs x 2 arrays, each way.
    assert_eq!(d6[0].evidence.count("iterations"), Some(20));
    assert_eq!(d6[0].evidence.count("upload_transfers"), Some(80));
    assert_eq!(d6[0].evidence.count("download_transfers"), Some(80));
    // Kept: the first upload and the last download of each array.
    assert_eq!(d6[0].evidence.count("avoidable_transfers"), Some(160 - 4));
    assert_eq!(
        d6[0].proposal.directive.as_deref(),
        Some("#pragma acc data copy(A) create(Anew)")
    );

    // The hashes (sampled) support round trips: what came back was sent again.
    let d4 = with_id(&a, "D4");
    assert_eq!(d4.len(), 2);
    assert!(d4.iter().all(|f| f.confidence == Confidence::Likely));
    let mut ups: Vec<String> = d4.iter().map(|f| places(f)[0].clone()).collect();
    ups.sort();
    assert_eq!(
        ups,
        [
            "upload laplace_bad.c:148 [A, Anew]",
            "upload laplace_bad.c:154 [A, Anew]"
        ]
    );
    // Sampled hashes are not enough to claim that a download was useless.
    assert!(with_id(&a, "D2").is_empty() && with_id(&a, "D3").is_empty());
    assert!(a.notes.iter().any(|n| n.contains("full-content")));
    golden("laplace_bad_c.patch", &patch_text(&a, &src));
}

#[test]
fn laplace_bad_f90() {
    let (_, src, a) = analyze("laplace_bad_f90");
    assert_eq!(a.findings[0].id, "L3");
    let l3 = with_id(&a, "L3");
    assert_eq!(l3.len(), 1, "here the stencil is the single-gang kernel");
    assert_eq!(places(l3[0]), ["construct laplace_bad.f90:65"]);
    assert_eq!(
        l3[0].proposal.directive.as_deref(),
        Some("!$acc parallel loop collapse(2) gang vector ! stencil")
    );
    let d6 = with_id(&a, "D6");
    assert_eq!(d6.len(), 1);
    // No symbols for allocatables: the names come from the source and
    // from which buffer the stencil changed.
    assert_eq!(
        places(d6[0]),
        [
            "host loop laplace_bad.f90:64",
            "construct laplace_bad.f90:65 [a, anew]",
            "construct laplace_bad.f90:74 [a, anew]"
        ]
    );
    assert_eq!(
        d6[0].proposal.directive.as_deref(),
        Some("!$acc data copy(a) create(anew)")
    );
    assert_eq!(with_id(&a, "D4").len(), 2);
    golden("laplace_bad_f90.patch", &patch_text(&a, &src));
}

#[test]
fn heat2d_naive() {
    let (_, src, a) = analyze("heat2d_naive");
    let d6 = with_id(&a, "D6");
    assert_eq!(d6.len(), 1);
    assert_eq!(places(d6[0])[0], "host loop heat2d_naive.c:110");
    assert!(places(d6[0])[1].starts_with("construct heat2d_naive.c:111"));
    assert_eq!(d6[0].evidence.count("iterations"), Some(20));
    // The loop swaps u and unew: both stay mapped and both come back.
    assert_eq!(
        d6[0].proposal.directive.as_deref(),
        Some("#pragma acc data copy(u[0:n], unew[0:n])")
    );
    // Each downloaded unew goes up again as the next step's u.
    assert_eq!(with_id(&a, "D4").len(), 1);
    assert!(with_id(&a, "L3").is_empty());
    golden("heat2d_naive.patch", &patch_text(&a, &src));
}

/// Zero false positives: the repaired variants and the samples that already
/// use data regions get no data-movement or allocation finding.
#[test]
fn good_samples_get_no_data_movement_finding() {
    for name in [
        "laplace_good_c",
        "laplace_good_f90",
        "heat2d_data",
        "jacobi_f90",
        "launch_storm",
    ] {
        let (_, _, a) = analyze(name);
        let dm: Vec<String> = a
            .data_movement()
            .map(|f| format!("{} {}", f.id, f.title))
            .collect();
        assert!(dm.is_empty(), "{name}: {dm:?}");
        // Launch findings: none, but the launch storm's (L5).
        let launch: Vec<&str> = a
            .findings
            .iter()
            .filter(|f| f.category == Category::Launch)
            .map(|f| f.id)
            .collect();
        let expected: &[&str] = if name == "launch_storm" {
            &["L5", "L5"]
        } else {
            &[]
        };
        assert_eq!(
            launch, expected,
            "{name}: parallel loops are not single-gang"
        );
    }
}

#[test]
fn missing_sources_keep_the_findings_without_patches() {
    let run = load("laplace_bad_c");
    let none = |_: &Path| Err(std::io::Error::from(std::io::ErrorKind::NotFound));
    let src = SourceSet::load_with(&run, &[], &[], &none);
    let a = analysis::analyze(&run, &src, &Options::default());
    let ids: Vec<&str> = a.findings.iter().map(|f| f.id).collect();
    assert!(ids.contains(&"L3") && ids.contains(&"D6"), "{ids:?}");
    assert!(a.findings.iter().all(|f| f.proposal.edits.is_empty()));
    // One D6 per construct when the loop is unknown, still at their lines.
    let d6 = with_id(&a, "D6");
    assert_eq!(d6.len(), 2);
    assert!(d6.iter().all(|f| f
        .proposal
        .no_patch
        .as_deref()
        .is_some_and(|w| w.contains("not read"))));
    assert!(a
        .notes
        .iter()
        .any(|n| n.contains("laplace_bad.c not found")));
    assert!(analysis::combined_patch(&a, &src).patched.is_none());
}

/// The run totals that `--verify` compares are the sums of what the
/// per-line view shows, and the data-region fix moves fewer bytes.
#[test]
fn transfer_totals_agree_with_the_lines() {
    let mut bytes = Vec::new();
    for name in [
        "laplace_bad_c",
        "laplace_good_c",
        "heat2d_naive",
        "heat2d_data",
    ] {
        let run = load(name);
        let s = run.summary();
        let lines = s.functions.iter().flat_map(|f| &f.lines);
        let transfers = lines.clone().flat_map(|l| &l.transfers);
        assert_eq!(
            s.transfers,
            transfers.clone().map(|t| t.count).sum::<u64>(),
            "{name}"
        );
        assert_eq!(
            s.transfer_bytes,
            transfers.clone().map(|t| t.bytes).sum::<u64>(),
            "{name}"
        );
        assert_eq!(
            s.transfer_ns,
            transfers.map(|t| t.time.total_ns).sum::<u64>(),
            "{name}"
        );
        let reached: u64 = lines
            .flat_map(|l| l.reached.values().map(|r| r.count))
            .sum();
        assert!(
            s.constructs > 0 && s.constructs <= reached,
            "{name}: {} of {reached}",
            s.constructs
        );
        assert!(
            s.cupti && !s.host_fallback,
            "{name}: recorded on the device"
        );
        bytes.push(s.transfer_bytes);
    }
    assert!(bytes[1] < bytes[0] && bytes[3] < bytes[2], "{bytes:?}");
}

/// The data objects at the host buffers a run moved are named once at load,
/// from the binary the symbolizer found (here the fixture's copy), and not
/// at all when no binary is found.
#[test]
fn data_symbols_name_the_buffers_at_load() {
    let run = load("laplace_bad_c");
    let mut names: Vec<&str> = run.data_names.values().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["A", "Anew"]);
    for &p in run.data_names.keys() {
        assert!(
            run.transfers().any(|(_, t)| t.host_ptr() == Some(p)),
            "{p:#x} is a moved buffer"
        );
    }

    let path = fixtures().join("laplace_bad_c.trace");
    let blind = accprof_analyzer::load_run_with(&path, &LoadOptions::only_in(Vec::new()))
        .expect("fixture loads");
    assert!(blind.data_names.is_empty(), "{:?}", blind.data_names);
}

/// Every finding on every fixture points at the entities it is about: a
/// location that is a site reads as that site of the model, the sites of
/// its locations and the constructs of its transfers, kernels and
/// allocations are among its subjects, what it saves is among what it is
/// about, and each kind of finding names the kind of entity it speaks of.
#[test]
fn findings_point_at_their_entities() {
    let mut seen = std::collections::BTreeSet::new();
    for name in [
        "laplace_bad_c",
        "laplace_bad_f90",
        "heat2d_naive",
        "launch_storm",
        "api_routines",
        "device_fault",
    ] {
        let (run, _, a) = analyze(name);
        for f in &a.findings {
            seen.insert(f.id);
            let s = &f.subjects;
            for l in &f.locations {
                if let Some(id) = l.site {
                    let site = run.site(id);
                    assert_eq!(
                        (&l.file, l.line, &l.function),
                        (&site.file, site.line, &site.function),
                        "{name} {}: {}",
                        f.id,
                        l.role
                    );
                    assert!(s.sites.contains(&id), "{name} {}: site of {}", f.id, l.role);
                }
            }
            for &t in &f.saved_transfers {
                assert!(s.transfers.contains(&t), "{name} {}: saved {t:?}", f.id);
            }
            let owners = s
                .transfers
                .iter()
                .filter_map(|&t| run.transfer(t).construct)
                .chain(s.kernels.iter().filter_map(|&k| run.kernel(k).construct))
                .chain(s.allocs.iter().filter_map(|&x| run.alloc(x).construct));
            for c in owners {
                assert!(s.constructs.contains(&c), "{name} {}: {c:?}", f.id);
            }
            let about = match f.id {
                "A1" | "A2" => !s.allocs.is_empty(),
                "L3" => !s.kernels.is_empty(),
                "L1" | "L2" | "L4" | "L5" => !s.constructs.is_empty(),
                "S2" | "S4" => !s.constructs.is_empty(),
                "S3" => !s.kernels.is_empty() || !s.transfers.is_empty(),
                _ => !s.transfers.is_empty(),
            };
            assert!(about, "{name} {}: {s:?}", f.id);
        }
    }
    assert!(seen.len() >= 4, "findings of several kinds: {seen:?}");
}

/// device_fault died of an illegal address: the driver's error broke the
/// context, and CUPTI never delivered the kernel records of lines 55 and
/// 58. The allocation of line 53 was used by both; with the records lost,
/// no kernel in the trace proves nothing, so A2 and U1 are not reported
/// (and the note says why).
#[test]
fn lost_device_records_prove_no_allocation_unused() {
    let (run, _, a) = analyze("device_fault");
    assert!(run.cupti_active());
    assert!(
        run.process
            .diagnostics
            .iter()
            .any(|(_, m)| m.contains("device records not yet delivered by CUPTI are lost")),
        "{:?}",
        run.process.diagnostics
    );
    let ids: Vec<&str> = a.findings.iter().map(|f| f.id).collect();
    assert!(!ids.contains(&"A2") && !ids.contains(&"U1"), "{ids:?}");
    assert!(
        a.notes.iter().any(|n| n.contains(
            "U1/A2 (unused uploads and allocations) not checked: 2 compute constructs ran on the device with no kernel record (lines 55, 58)"
        )),
        "{:?}",
        a.notes
    );
}

/// D6 on laplace_bad_c is about exactly the large transfers of the two
/// constructs in its loop, and its host loop is a place of the source, not
/// a site of the run.
#[test]
fn d6_points_at_the_transfers_of_its_loop() {
    let (run, _, a) = analyze("laplace_bad_c");
    let d6 = with_id(&a, "D6")[0];
    let loop_place = &d6.locations[0];
    assert_eq!(
        (loop_place.role.as_str(), loop_place.site),
        ("host loop", None)
    );
    let construct_sites: Vec<_> = d6.locations[1..].iter().map(|l| l.site).collect();
    assert_eq!(construct_sites.len(), 2);
    let want: Vec<_> = run
        .transfers()
        .filter(|(_, t)| t.is_host_device() && t.bytes >= Options::default().min_bytes)
        .filter(|(_, t)| {
            t.construct
                .is_some_and(|c| construct_sites.contains(&Some(run.line_site(run.top_level(c)))))
        })
        .map(|(id, _)| id)
        .collect();
    assert_eq!(d6.subjects.transfers, want);
    assert_eq!(want.len(), 160);
}

/// L5 on the launch storm: both loops of 1000 launches each, their host
/// time far above their kernels' device time, ranked by the host time
/// beyond the kernels; the synchronous one is not told to go async, since
/// the async loop of the same run costs more per launch.
#[test]
fn launch_storm_is_launch_bound() {
    let (run, _, a) = analyze("launch_storm");
    let l5 = with_id(&a, "L5");
    let lines: Vec<Option<u32>> = l5.iter().map(|f| f.locations[0].line).collect();
    assert_eq!(lines, [Some(95), Some(87)], "the async loop costs more");
    let mut host_total = 0;
    let mut device_total = 0;
    for f in &l5 {
        let ns = |name: &str| match f.evidence.get(name) {
            Some(accprof_analyzer::findings::Value::Ns(v)) => *v,
            other => panic!("{name}: {other:?}"),
        };
        let (host, device) = (ns("host_time"), ns("device_time"));
        assert_eq!(f.evidence.count("launches"), Some(1000));
        assert!(host > 5 * device, "{host} vs {device}");
        assert_eq!(f.cost_ns, Some(host - device));
        // The device time is the model's: the kernels of its constructs.
        let kernels: u64 = f
            .subjects
            .kernels
            .iter()
            .map(|&k| run.kernel(k).device_ns())
            .sum();
        assert_eq!(kernels, device);
        host_total += host;
        device_total += device;
        assert_eq!(
            places(f)[1],
            format!(
                "host loop launch_storm.c:{}",
                f.locations[0].line.unwrap_or(0) - 1
            )
        );
        // The tuner times kernels, not the host time around them.
        assert_eq!(f.proposal.tune, None);
    }
    // 117 ms of host construct time around 12.4 ms of kernels.
    assert_eq!(host_total / 1_000_000, 116, "{host_total}");
    assert_eq!(device_total / 100_000, 123, "{device_total}");
    let sync = l5[1];
    assert!(
        !sync.proposal.text.contains("async queue"),
        "{}",
        sync.proposal.text
    );
    assert!(sync
        .evidence
        .text
        .iter()
        .any(|t| t.starts_with("An async queue is no cure in this run")));
    assert!(l5[0]
        .proposal
        .text
        .starts_with("Give each launch more work"));
}
