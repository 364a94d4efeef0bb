//! C1 for reads made inside a shared library: samples/coherence_lib.c
//! built here with GCC; the coherence records of a hand-built trace put
//! each faulting instruction in libc (memcpy, printf) with the return
//! addresses the collector's walk found above it, the program's call
//! among them. The finding must be at the program's statement, the array
//! named from the data clause that mapped it, with the patch before it;
//! without the walk's frames the access stays at libc's code.

use std::path::{Path, PathBuf};
use std::process::Command;

use accprof_analyzer::analysis;
use accprof_analyzer::rules::Options;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::symbolize::build_id;
use accprof_analyzer::testkit;
use accprof_analyzer::testkit::trace::TraceBuilder;
use accprof_trace::{
    AccEventKind, Coherence, CoherenceKind, ConstructKind, Frame, Module, ModuleId, Record,
    RegionId, StringId,
};

const SOURCE: StringId = StringId(20);
const BASE: u64 = 0x5555_0000_0000;
const LIBC_BASE: u64 = 0x7f12_0000_0000;
const PROGRAM: ModuleId = ModuleId(1);
const LIBC: ModuleId = ModuleId(2);

fn sample() -> PathBuf {
    testkit::fixtures::samples().join("coherence_lib.c")
}

/// The sample built as the samples Makefile builds it (-g -O2).
fn build(dir: &Path) -> PathBuf {
    let exe = dir.join("coherence_lib");
    let out = Command::new("gcc")
        .args(["-g", "-O2", "-fopenacc", "-foffload=disable"])
        .arg(sample())
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("gcc runs (the test needs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The 1-based line of the sample's code (not its header) holding
/// `needle`.
fn line_of(needle: &str) -> u32 {
    let text = std::fs::read_to_string(sample()).expect("sample");
    let i = text
        .lines()
        .position(|l| !l.trim_start().starts_with(['*', '/']) && l.contains(needle))
        .expect("line in the sample");
    i as u32 + 1
}

/// A return address into the program after an instruction at `line`:
/// what the walk finds for the call made there.
fn return_offset_at(module: &Module, line: u32) -> u64 {
    testkit::lines::instruction_at(module, "coherence_lib.c", line) + 1
}

fn libc_path() -> String {
    let out = Command::new("gcc")
        .arg("-print-file-name=libc.so.6")
        .output()
        .expect("gcc runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A run of the sample whose coherence records are stale reads made in
/// libc, one per (range, call line), with the walk's frames when `walked`.
fn run(dir: &Path, reads: &[(u64, &str)], walked: bool) -> accprof_analyzer::Run {
    let exe = build(dir);
    let size = std::fs::metadata(&exe).expect("binary").len();
    let program = Module {
        id: PROGRAM,
        path: exe.display().to_string(),
        build_id: build_id(&exe).unwrap_or_default(),
        base: BASE,
        text_start: 0,
        text_end: size,
    };
    let libc = Module {
        id: LIBC,
        path: libc_path(),
        build_id: Vec::new(),
        base: LIBC_BASE,
        text_start: 0x28000,
        text_end: 0x1bd000,
    };
    let mut t = TraceBuilder::new();
    t.records.push(Record::String {
        id: SOURCE,
        text: sample().display().to_string(),
    });
    let frames: Vec<u64> = reads
        .iter()
        .map(|&(_, mark)| return_offset_at(&program, line_of(mark)))
        .collect();
    t.records.push(Record::Module(program));
    t.records.push(Record::Module(libc));
    t.construct(
        AccEventKind::EnterDataStart,
        1,
        1,
        ConstructKind::Data,
        line_of("#pragma acc data copy(a[0:n], t[0:n])"),
    );
    t.construct(
        AccEventKind::ComputeConstructStart,
        1,
        2,
        ConstructKind::Parallel,
        line_of("#pragma acc parallel loop present(a[0:n], t[0:n])"),
    );
    for r in &mut t.records {
        if let Record::Acc(e) = r {
            e.location.file = Some(SOURCE);
        }
    }
    for (i, (&(range_start, _), &ret)) in reads.iter().zip(&frames).enumerate() {
        t.t += 1000;
        let callers = if walked {
            // Inside libc (memcpy called by ..., printf's strnlen called by
            // printf), then the program's call.
            vec![
                Frame {
                    module: LIBC,
                    return_offset: 0x60000 + i as u64,
                },
                Frame {
                    module: PROGRAM,
                    return_offset: ret,
                },
            ]
        } else {
            Vec::new()
        };
        t.records.push(Record::Coherence(Coherence {
            kind: CoherenceKind::StaleRead,
            time_ns: t.t,
            thread: 1,
            code_addr: LIBC_BASE + 0x1a0000 + 16 * i as u64,
            host_addr: range_start + 8,
            range_start,
            range_bytes: 8 << 20,
            variable: None,
            construct: RegionId(2),
            confirmed: true,
            callers,
        }));
    }
    t.build(testkit::trace::header())
}

const A: u64 = 0x7f00_0000_0000;
const T: u64 = 0x7f00_1000_0000;

#[test]
fn a_read_inside_libc_is_reported_at_the_programs_call_with_the_array_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reads = [(A, "libc reads a */"), (T, "printf(\"text: %.20s")];
    let run = run(dir.path(), &reads, true);
    let sources = SourceSet::load(&run, &[]);
    let a = analysis::analyze(&run, &sources, &Options::default());
    let memcpy_line = line_of("memcpy(head, a, h * sizeof *a);");
    let printf_line = line_of("printf(\"text: %.20s");
    let titles: Vec<&str> = a.findings.iter().map(|f| f.title.as_str()).collect();
    for (var, line, update) in [
        ("a", memcpy_line, "#pragma acc update self(a[0:n])"),
        ("t", printf_line, "#pragma acc update self(t[0:n])"),
    ] {
        let want = format!("stale host read of {var} at coherence_lib.c:{line}: ");
        let f = a
            .findings
            .iter()
            .find(|f| f.id == "C1" && f.title.starts_with(&want))
            .unwrap_or_else(|| panic!("no `{want}` in {titles:#?}"));
        assert_eq!(f.proposal.directive.as_deref(), Some(update), "{f:#?}");
        let patch = f.proposal.patch.as_deref().expect("a patch");
        assert!(
            patch
                .lines()
                .any(|l| l.starts_with('+') && l[1..].trim() == update),
            "{patch}"
        );
    }
}

#[test]
fn without_the_walks_frames_a_read_inside_libc_stays_at_libcs_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = run(dir.path(), &[(A, "libc reads a */")], false);
    let sources = SourceSet::load(&run, &[]);
    let a = analysis::analyze(&run, &sources, &Options::default());
    let f = a
        .findings
        .iter()
        .find(|f| f.id == "C1")
        .expect("a C1 finding");
    let memcpy_line = line_of("memcpy(head, a, h * sizeof *a);");
    assert!(
        f.title.contains("libc.so.6") && !f.title.contains(&format!(":{memcpy_line}:")),
        "no frame of the program: {}",
        f.title
    );
}
