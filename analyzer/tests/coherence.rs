//! C1 on a real binary: the coherence check's records of a hand-built
//! trace point at an instruction of samples/coherence_norm.c built here
//! with GCC (the norm's read of `u`), so the finding's line comes from
//! symbolizing the binary as `accprof analyze` does, and its patch from
//! the sample's own source.

use std::path::{Path, PathBuf};
use std::process::Command;

use accprof_analyzer::analysis;
use accprof_analyzer::findings::Category;
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::symbolize::{build_id, SymbolizedSite, Symbolizer};
use accprof_analyzer::testkit;
use accprof_analyzer::testkit::trace::TraceBuilder;
use accprof_trace::{
    AccEventKind, Coherence, CoherenceKind, ConstructKind, Module, ModuleId, Record, RegionId,
    StringId,
};

const SOURCE: StringId = StringId(20);
const VARIABLE: StringId = StringId(21);
const BASE: u64 = 0x5555_0000_0000;

fn sample() -> PathBuf {
    testkit::fixtures::samples().join("coherence_norm.c")
}

/// The sample built as the samples Makefile builds it (-g -O2).
fn build(dir: &Path) -> PathBuf {
    let exe = dir.join("coherence_norm");
    let out = Command::new("gcc")
        .args(["-g", "-O2", "-fopenacc"])
        .arg(sample())
        .arg("-o")
        .arg(&exe)
        .arg("-lm")
        .output()
        .expect("gcc runs (the test needs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The 1-based line of the sample that `needle` starts.
fn line_of(needle: &str) -> u32 {
    let text = std::fs::read_to_string(sample()).expect("sample");
    let i = text
        .lines()
        .position(|l| l.trim_start().starts_with(needle))
        .expect("line in the sample");
    i as u32 + 1
}

/// A run of the sample built here whose coherence records are `kind`
/// accesses at `line` of the sample, one per `confirmed` entry, 4 KiB
/// apart in u, after the data construct and the copy-back construct
/// (region 2) started; `more` adds records after them.
fn norm_run(
    dir: &Path,
    kind: CoherenceKind,
    line: u32,
    confirmed: &[bool],
    more: impl FnOnce(&mut TraceBuilder),
) -> accprof_analyzer::Run {
    let exe = build(dir);
    let size = std::fs::metadata(&exe).expect("binary").len();
    let module = Module {
        id: ModuleId(1),
        path: exe.display().to_string(),
        build_id: build_id(&exe).unwrap_or_default(),
        base: BASE,
        text_start: 0,
        text_end: size,
    };
    let copy_line = line_of("#pragma acc parallel loop present(u[0:n], unew[0:n])");
    let data_line = line_of("#pragma acc data copy");
    let code = BASE + testkit::lines::instruction_at(&module, "coherence_norm.c", line);

    let mut t = TraceBuilder::new();
    t.records.push(Record::String {
        id: SOURCE,
        text: sample().display().to_string(),
    });
    t.records.push(Record::String {
        id: VARIABLE,
        text: "u".into(),
    });
    t.records.push(Record::Module(module));
    t.construct(
        AccEventKind::EnterDataStart,
        1,
        1,
        ConstructKind::Data,
        data_line,
    );
    t.construct(
        AccEventKind::ComputeConstructStart,
        1,
        2,
        ConstructKind::Parallel,
        copy_line,
    );
    // The builder's events are in app.c: these are in the sample.
    for r in &mut t.records {
        if let Record::Acc(e) = r {
            e.location.file = Some(SOURCE);
        }
    }
    let range_start = 0x7f00_0000_0000u64;
    for (i, &confirmed) in confirmed.iter().enumerate() {
        t.t += 1000;
        t.records.push(Record::Coherence(Coherence {
            kind,
            time_ns: t.t,
            thread: 1,
            code_addr: code,
            host_addr: range_start + 4096 * i as u64,
            range_start,
            range_bytes: 8 << 20,
            variable: Some(VARIABLE),
            construct: RegionId(2),
            confirmed,
            callers: Vec::new(),
        }));
    }
    more(&mut t);
    t.build(testkit::trace::header())
}

#[test]
fn a_stale_read_is_an_error_at_the_line_that_read_with_an_update_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let read_line = line_of("for (long k = 0; k < n; k++) sum += u[k] * u[k];");
    let copy_line = line_of("#pragma acc parallel loop present(u[0:n], unew[0:n])");
    let run = norm_run(
        dir.path(),
        CoherenceKind::StaleRead,
        read_line,
        &[true, true, false],
        |_| {},
    );
    assert_eq!(run.host_accesses().len(), 3);
    let sources = SourceSet::load(&run, &[]);
    let a = analysis::analyze(&run, &sources, &Options::default());
    let f = &a.findings[0];
    assert_eq!(f.id, "C1", "{:#?}", a.findings);
    assert_eq!(f.category, Category::Correctness);
    assert_eq!(
        f.title,
        format!(
            "stale host read of u at coherence_norm.c:{read_line}: the device copy is newer (written by the compute construct at coherence_norm.c:{copy_line})"
        )
    );
    assert_eq!(f.evidence.count("reads"), Some(3));
    assert_eq!(f.evidence.count("confirmed"), Some(2));
    assert_eq!(f.evidence.count("unconfirmed"), Some(1));
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc update self(u[0:n])")
    );
    let patch = f.proposal.patch.as_deref().expect("a patch");
    assert!(
        patch.contains(
            "+                #pragma acc update self(u[0:n])\n                 for (long k = 0; k < n; k++) sum += u[k] * u[k];"
        ),
        "{patch}"
    );
    assert!(patch.contains(&format!("@@ -{}", read_line - 3)), "{patch}");
}

#[test]
fn without_the_check_there_is_no_c1() {
    let mut t = TraceBuilder::new();
    t.compute(1, 1, 10, 1000);
    let run = t.build(testkit::trace::header());
    let a = analysis::analyze(&run, &SourceSet::default(), &Options::default());
    assert!(a.findings.iter().all(|f| f.id != "C1"));
}

/// Recorded on an H200 with `accprof run --check coherence --
/// coherence_norm 256 256 10 5` (cli/tests/fixtures/h200-coherence): the
/// norm's host reads of u faulted and their bytes differed from the device
/// copy's; C1 comes first, at line 98, names u (from the source: libgomp
/// gives its arrays no names), the construct at line 92 that wrote it, and
/// puts `update self(u[0:n])` before the read.
#[test]
fn on_the_gpu_the_norm_reads_stale_u_and_the_patch_updates_it_first() {
    let run = testkit::fixtures::load("h200-coherence", "coherence_norm_256");
    let src = SourceSet::load(&run, &[testkit::fixtures::samples()]);
    let a = analysis::analyze(&run, &src, &Options::default());
    let f = &a.findings[0];
    assert_eq!(
        f.id,
        "C1",
        "{:?}",
        a.findings.iter().map(|f| f.id).collect::<Vec<_>>()
    );
    assert!(
        f.title
            .starts_with("stale host read of u at coherence_norm.c:98: ")
            && f.title
                .contains("written by the compute construct at coherence_norm.c:92"),
        "{}",
        f.title
    );
    let reads = f.evidence.count("reads").expect("reads");
    assert!(reads > 0);
    assert_eq!(f.evidence.count("confirmed"), Some(reads));
    let patched = accprof_analyzer::patch::render(&src, &f.proposal.edits).expect("patch");
    assert_eq!(patched.files.len(), 1);
    let lines: Vec<&str> = patched.files[0].1.lines().collect();
    assert_eq!(lines[97].trim(), "#pragma acc update self(u[0:n])");
    assert!(lines[98].contains("sum += u[k] * u[k]"), "{}", lines[98]);
}

/// A read made inside an MPI call on the same thread is named with the
/// call, in the title and the evidence.
#[test]
fn a_stale_read_inside_an_mpi_call_names_the_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let read_line = line_of("for (long k = 0; k < n; k++) sum += u[k] * u[k];");
    let run = norm_run(
        dir.path(),
        CoherenceKind::StaleRead,
        read_line,
        &[true],
        |t| {
            t.records.push(Record::String {
                id: StringId(22),
                text: "MPI_Send".into(),
            });
            let at = t.t;
            t.records.push(Record::MpiCall(accprof_trace::MpiCall {
                start_ns: at - 500,
                end_ns: at + 500,
                thread: 1,
                routine: StringId(22),
                cuda_aware: None,
                ranges: Vec::new(),
                call_site: None,
            }));
            t.t += 1000;
        },
    );
    let a = analysis::analyze(&run, &SourceSet::load(&run, &[]), &Options::default());
    let f = &a.findings[0];
    assert!(
        f.title.starts_with(&format!(
            "stale host read of u by MPI_Send at coherence_norm.c:{read_line}:"
        )),
        "{}",
        f.title
    );
    assert_eq!(
        f.evidence.get("mpi_call"),
        Some(&accprof_analyzer::findings::Value::Text("MPI_Send".into()))
    );
}

/// A lost write: C2 at the line that wrote, naming the construct that
/// used the device copy, with `update device` after the host loop that
/// wrote (it holds no directive) and before the construct.
#[test]
fn a_lost_write_is_an_error_with_an_update_device_after_the_writing_loop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write_line = line_of("u[j * nx + i] = (i == 0 || j == 0) ? 1.0 : 0.0;");
    let copy_line = line_of("#pragma acc parallel loop present(u[0:n], unew[0:n])");
    let run = norm_run(
        dir.path(),
        CoherenceKind::LostWrite,
        write_line,
        &[true],
        |_| {},
    );
    let a = analysis::analyze(&run, &SourceSet::load(&run, &[]), &Options::default());
    let f = &a.findings[0];
    assert_eq!(f.id, "C2", "{:#?}", a.findings);
    assert_eq!(f.category, Category::Correctness);
    assert_eq!(
        f.title,
        format!(
            "lost host write of u at coherence_norm.c:{write_line}: the compute construct at coherence_norm.c:{copy_line} used the device copy"
        )
    );
    assert_eq!(f.evidence.count("writes"), Some(1));
    assert_eq!(
        f.proposal.directive.as_deref(),
        Some("#pragma acc update device(u[0:n])")
    );
    let patch = f.proposal.patch.as_deref().expect("a patch");
    // After the `for (long j ...)` loop of init, at its indentation.
    assert!(
        patch.contains("             u[j * nx + i] = (i == 0 || j == 0) ? 1.0 : 0.0;\n+    #pragma acc update device(u[0:n])\n }"),
        "{patch}"
    );
}

/// C++: the host reads a std::vector's elements inside std::inner_product,
/// libstdc++ code inlined into the statement that calls it. The access is
/// reported at that statement of samples/coherence_vector.cpp (built here
/// with g++ as the samples Makefile builds it), not at the library header
/// the innermost inlined frame is in.
#[test]
fn an_access_inside_inlined_library_code_is_at_the_programs_statement() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = testkit::fixtures::samples().join("coherence_vector.cpp");
    let exe = dir.path().join("coherence_vector");
    let out = Command::new("g++")
        .args(["-g", "-O2", "-fopenacc", "-foffload=disable"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("g++ runs (the test needs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let size = std::fs::metadata(&exe).expect("binary").len();
    let module = Module {
        id: ModuleId(1),
        path: exe.display().to_string(),
        build_id: build_id(&exe).unwrap_or_default(),
        base: BASE,
        text_start: 0,
        text_end: size,
    };
    // An instruction of main's norm whose innermost frame is libstdc++'s.
    let mut s = Symbolizer::new();
    let inlined = (module.text_start..module.text_end)
        .find(|&off| {
            matches!(
                s.lookup(&module, off + 1),
                SymbolizedSite::Found { ref file, .. } if file.ends_with("stl_numeric.h")
            ) && s
                .frames(&module, off + 1)
                .iter()
                .any(|(f, func, _)| f.ends_with("coherence_vector.cpp") && func == "main")
        })
        .expect("inner_product inlined into main");
    let text = std::fs::read_to_string(&src).expect("sample");
    let norm_line = text
        .lines()
        .position(|l| {
            l.trim_start()
                .starts_with("double sum = std::inner_product")
        })
        .expect("the norm's line") as u32
        + 1;
    let mut t = TraceBuilder::new();
    t.records.push(Record::Module(module));
    t.compute(1, 1, 10, 1000);
    t.records.push(Record::Coherence(Coherence {
        kind: CoherenceKind::StaleRead,
        time_ns: t.t + 2000,
        thread: 1,
        code_addr: BASE + inlined,
        host_addr: 0x7f00_0000_1000,
        range_start: 0x7f00_0000_0000,
        range_bytes: 1 << 20,
        variable: None,
        construct: RegionId(1),
        confirmed: true,
        callers: Vec::new(),
    }));
    let run = t.build(testkit::trace::header());
    let a = &run.host_accesses()[0];
    let site = run.site(a.site.expect("a site"));
    assert!(site.file.ends_with("coherence_vector.cpp"), "{site:?}");
    assert_eq!(site.line, Some(norm_line), "{site:?}");
}
