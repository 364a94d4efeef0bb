//! Stale host reads made inside shared libraries, on an NVIDIA H200:
//! traces of samples/coherence_lib.c (libc's memcpy, fwrite, printf),
//! samples/coherence_print.f90 (libgfortran's print and write) and
//! mpi_halo_stale (MPI_Send) recorded there with `accprof run --check
//! coherence` (tests/fixtures/h200-walk/record.sh), read back with the
//! binaries that ran. The faulting instructions are the libraries'; each
//! finding must be at the program's statement that called the library,
//! the array named from its data clause, with the update before it; the
//! fixed variants get no finding.
//!
//! Until the traces are recorded (the directory holds only record.sh),
//! each test says so and passes untested.

mod support;

use accprof_trace::{CoherenceKind, Record};

const GPU: &str = "h200-walk";

/// Whether the fixture traces are there; says so when not.
fn recorded(name: &str) -> bool {
    let path = accprof_analyzer::testkit::fixtures::dir(GPU).join(format!("{name}.trace"));
    if path.is_file() {
        return true;
    }
    eprintln!(
        "skipped: {} is absent (record it on a GPU with cli/tests/fixtures/{GPU}/record.sh)",
        path.display()
    );
    false
}

/// `accprof ARGS` on fixture `name`; stdout, its wrapped lines read as one.
fn on(name: &str, args: &[&str]) -> String {
    support::on_fixture(GPU, name, args)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The 1-based line of samples/`file`'s code (not its header comment)
/// holding `needle`.
fn line_of(file: &str, needle: &str) -> u32 {
    let path = accprof_analyzer::testkit::fixtures::samples().join(file);
    let text = std::fs::read_to_string(&path).expect("sample");
    text.lines()
        .position(|l| !l.trim_start().starts_with(['*', '/', '!']) && l.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` in {}", path.display())) as u32
        + 1
}

/// The stale reads of trace `name`: the file name of the module whose
/// code made each, and how many frames the walk found above it.
fn stale_reads(name: &str) -> Vec<(String, usize)> {
    let path = accprof_analyzer::testkit::fixtures::dir(GPU).join(format!("{name}.trace"));
    let trace = accprof_trace::read_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let modules: Vec<_> = trace
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Module(m) => Some(m.clone()),
            _ => None,
        })
        .collect();
    trace
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Coherence(k) if k.kind == CoherenceKind::StaleRead => {
                let m = modules.iter().find(|m| {
                    k.code_addr >= m.base + m.text_start && k.code_addr < m.base + m.text_end
                });
                let file = m.map_or("(none)", |m| m.path.rsplit('/').next().unwrap_or(&m.path));
                Some((file.to_string(), k.callers.len()))
            }
            _ => None,
        })
        .collect()
}

fn coherence_rules(text: &str) -> Vec<&str> {
    text.split(" #")
        .filter_map(|f| f.split_whitespace().nth(1))
        .filter(|r| r.starts_with('C'))
        .collect()
}

/// memcpy, fwrite and printf read a and t inside libc: three C1, at the
/// three calls, a and t named from `copy(a[0:n], t[0:n])`.
#[test]
fn reads_inside_libc_are_c1_at_the_programs_calls() {
    if !recorded("coherence_lib_bad") {
        return;
    }
    let reads = stale_reads("coherence_lib_bad");
    assert!(
        reads.iter().any(|(m, n)| m.starts_with("libc") && *n > 0),
        "no stale read made in libc with the walk's frames: {reads:?}"
    );
    let s = on("coherence_lib_bad", &["analyze"]);
    let written = line_of(
        "coherence_lib.c",
        "#pragma acc parallel loop present(a[0:n], t[0:n])",
    );
    for (var, needle) in [
        ("a", "memcpy(head, a, h * sizeof *a);"),
        ("a", "fwrite(a + n / 2, sizeof *a, 64, sink);"),
        ("t", "printf(\"text: %.20s\\n\", t);"),
    ] {
        let line = line_of("coherence_lib.c", needle);
        let want = format!(
            "C1 stale host read of {var} at coherence_lib.c:{line}: the device copy is newer (written by the compute construct at coherence_lib.c:{written})"
        );
        assert!(s.contains(&want), "no `{want}` in {s}");
    }
    let patch = on("coherence_lib_bad", &["analyze", "--patch"]);
    for update in [
        "+ #pragma acc update self(a[0:n])",
        "+ #pragma acc update self(t[0:n])",
    ] {
        assert!(patch.contains(update), "no `{update}` in {patch}");
    }
    assert!(stale_reads("coherence_lib_fixed").is_empty());
    assert!(coherence_rules(&on("coherence_lib_fixed", &["analyze"])).is_empty());
}

/// `print *` and a formatted `write` read the module array p inside
/// libgfortran: C1 at each statement, p named from `enter data copyin(p)`.
#[test]
fn reads_inside_libgfortran_are_c1_at_the_print_and_the_write() {
    if !recorded("coherence_print_f90_bad") {
        return;
    }
    let reads = stale_reads("coherence_print_f90_bad");
    assert!(
        reads
            .iter()
            .any(|(m, n)| m.starts_with("libgfortran") && *n > 0),
        "no stale read made in libgfortran with the walk's frames: {reads:?}"
    );
    let s = on("coherence_print_f90_bad", &["analyze"]);
    for needle in ["print *, 'p(5) ='", "write (*, '(a, es14.7)') 'p(n) = '"] {
        let line = line_of("coherence_print.f90", needle);
        let want = format!("C1 stale host read of p at coherence_print.f90:{line}:");
        assert!(s.contains(&want), "no `{want}` in {s}");
    }
    assert!(s.contains("!$acc update self(p)"), "{s}");
    assert!(stale_reads("coherence_print_f90_fixed").is_empty());
    assert!(coherence_rules(&on("coherence_print_f90_fixed", &["analyze"])).is_empty());
}

/// MPI_Send of a stale row, recorded with the same collector: C1 named
/// with the call at the send's line on each rank.
#[test]
fn an_mpi_send_of_a_stale_row_is_c1_at_the_send() {
    if !recorded("mpi_halo_stale_np2.r0") {
        return;
    }
    // Rank 0 has no rank above: only its send down reads u; rank 1 has
    // none below.
    for (r, needle) in [
        (0, "MPI_Send(&u[(size_t)rows * ny]"),
        (1, "MPI_Send(&u[ny]"),
    ] {
        let s = on(&format!("mpi_halo_stale_np2.r{r}"), &["analyze"]);
        let line = line_of("mpi_halo_stale.c", needle);
        let want = format!("C1 stale host read of u by MPI_Send at mpi_halo_stale.c:{line}:");
        assert!(s.contains(&want), "rank {r}: no `{want}` in {s}");
    }
}
