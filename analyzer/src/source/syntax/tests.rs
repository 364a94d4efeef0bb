use super::fusion::{plan, Plan};
use crate::patch::Edit;
use crate::source::SourceSet;

fn judge(path: &str, text: &str, lines: &[u32]) -> Plan {
    let set = SourceSet::with_text(path, text);
    plan(set.get(path).expect("source"), lines)
}

const TRIPLE_C: &str = "\
void f(int n, double *a, double *b, double *c, double *x) {
    #pragma acc parallel loop copyout(a[0:n]) copyin(x[0:n])
    for (int i = 0; i < n; i++) a[i] = 2.0 * x[i];
    #pragma acc parallel loop copyout(b[0:n])
    for (int i = 0; i < n; i++) b[i] = i;
    // third
    #pragma acc parallel loop copyout(c[0:n]) copyin(x[0:n]) vector_length(64)
    for (int i = 0; i < n; i++) {
        c[i] = x[i] + 1.0;
    }
}
";

#[test]
fn c_one_line_loops_fuse_into_one_construct() {
    let p = judge("t.c", TRIPLE_C, &[2, 4, 7]);
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    assert_eq!(p.chains.len(), 1);
    let c = &p.chains[0];
    assert_eq!(c.lines, vec![2, 4, 7]);
    assert!(c.no_patch.is_none());
    let Edit::InsertBefore { lines, .. } = &c.edits[0] else {
        panic!("{:?}", c.edits)
    };
    assert_eq!(
        lines,
        &vec![
            "    #pragma acc parallel loop copyout(a[0:n], b[0:n], c[0:n]) copyin(x[0:n]) vector_length(64)".to_string(),
            "    for (int i = 0; i < n; i++) {".into(),
            "        a[i] = 2.0 * x[i];".into(),
            "        b[i] = i;".into(),
            "        c[i] = x[i] + 1.0;".into(),
            "    }".into(),
        ]
    );
    // Every line of the three constructs goes; the comment between stays.
    let deleted: Vec<u32> = c
        .edits
        .iter()
        .filter_map(|e| match e {
            Edit::Delete { line, .. } => Some(*line),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, vec![2, 3, 4, 5, 7, 8, 9, 10]);
}

#[test]
fn c_neighbour_reading_another_iteration_is_illegal() {
    let text = "\
void f(int n, double *a, double *b) {
#pragma acc parallel loop
for (int i = 1; i < n; i++) a[i] = b[i];
#pragma acc parallel loop
for (int i = 1; i < n; i++) b[i] = a[i-1] + a[i+1];
}
";
    let p = judge("t.c", text, &[2, 4]);
    assert!(p.chains.is_empty());
    assert_eq!(p.refused.len(), 1);
    assert!(
        p.refused[0]
            .2
            .starts_with("not fusable: the second reads a[i-1] where the first writes a[i]"),
        "{:?}",
        p.refused
    );
}

#[test]
fn c_subscripts_that_are_not_affine_are_not_proven() {
    let text = "\
void f(int n, int *idx, double *a, double *b) {
#pragma acc parallel loop
for (int i = 0; i < n; i++) a[idx[i]] = 1.0;
#pragma acc parallel loop
for (int i = 0; i < n; i++) b[i] = a[i];
}
";
    let p = judge("t.c", text, &[2, 4]);
    assert!(p.chains.is_empty());
    assert!(
        p.refused[0].2.starts_with("not proven fusable"),
        "{:?}",
        p.refused
    );
}

#[test]
fn c_different_ranges_or_code_between_are_not_fused() {
    let text = "\
void f(int n, double *a, double *b) {
#pragma acc parallel loop
for (int i = 0; i < n; i++) a[i] = 1.0;
#pragma acc parallel loop
for (int i = 0; i < n - 1; i++) b[i] = 2.0;
n = n + 1;
#pragma acc parallel loop
for (int i = 0; i < n - 1; i++) b[i] = 2.0;
}
";
    let p = judge("t.c", text, &[2, 4, 7]);
    assert!(p.chains.is_empty());
    assert_eq!(p.refused.len(), 1);
    assert!(
        p.refused[0].2.contains("different ranges"),
        "{:?}",
        p.refused
    );
}

#[test]
fn c_reduction_read_by_the_next_is_illegal() {
    let text = "\
double f(int n, double *a, double *b) {
double s = 0;
#pragma acc parallel loop reduction(+:s)
for (int i = 0; i < n; i++) s += a[i];
#pragma acc parallel loop
for (int i = 0; i < n; i++) b[i] = a[i] / s;
return s;
}
";
    let p = judge("t.c", text, &[3, 5]);
    assert!(p.chains.is_empty());
    assert!(
        p.refused[0].2.contains("the reduction of the first"),
        "{:?}",
        p.refused
    );
}

#[test]
fn c_calls_are_not_proven_and_comments_stay_in_the_patch() {
    let text = "\
void g(double *);
void f(int n, double *a, double *b) {
#pragma acc parallel loop
for (int i = 0; i < n; i++) a[i] = sqrt(1.0 * i);
#pragma acc parallel loop
for (int i = 0; i < n; i++) {
    // twice
    b[i] = 2 * i;
}
#pragma acc parallel loop
for (int i = 0; i < n; i++) g(&a[i]);
}
";
    let p = judge("t.c", text, &[3, 5, 10]);
    assert_eq!(p.chains.len(), 1, "{p:?}");
    assert_eq!(p.chains[0].lines, vec![3, 5]);
    let Edit::InsertBefore { lines, .. } = &p.chains[0].edits[0] else {
        panic!()
    };
    assert!(lines.contains(&"    // twice".to_string()), "{lines:?}");
    assert_eq!(
        p.refused[0].2,
        "not proven fusable: the second calls g, whose reads and writes are not known"
    );
}

const JACOBI_C: &str = "\
void sweep(int n, double a[][64], double b[][64]) {
    #pragma acc parallel loop collapse(2) present(a, b)
    for (int i = 1; i < n - 1; i++)
        for (int j = 1; j < n - 1; j++)
            b[i][j] = 0.25 * (a[i-1][j] + a[i+1][j] + a[i][j-1] + a[i][j+1]);
    #pragma acc parallel loop collapse(2) present(a, b)
    for (int i = 1; i < n - 1; i++)
        for (int j = 1; j < n - 1; j++)
            a[i][j] = b[i][j];
}
";

#[test]
fn c_copy_back_is_a_swap_not_a_fusion() {
    let p = judge("t.c", JACOBI_C, &[2, 6]);
    assert!(p.chains.is_empty());
    assert_eq!(p.copy_backs.len(), 1);
    let c = &p.copy_backs[0];
    assert_eq!(
        (c.before, c.line, c.into.as_str(), c.from.as_str()),
        (2, 6, "a", "b")
    );
}

#[test]
fn c_copy_back_under_a_conditional_is_still_the_neighbour() {
    let text = JACOBI_C.replace(
        "    #pragma acc parallel loop collapse(2) present(a, b)\n    for (int i = 1; i < n - 1; i++)\n        for (int j = 1; j < n - 1; j++)\n            a[i][j]",
        "#ifndef SWAP\n    #pragma acc parallel loop collapse(2) present(a, b)\n    for (int i = 1; i < n - 1; i++)\n        for (int j = 1; j < n - 1; j++)\n            a[i][j]",
    );
    assert!(text.contains("#ifndef SWAP\n"));
    let p = judge("t.c", &text, &[2, 7]);
    assert_eq!(p.copy_backs.len(), 1, "{p:?}");
}

#[test]
fn c_loops_in_conditionals_inside_a_host_loop_are_read() {
    let text = "\
void f(int n, int iters, double *a, double *b) {
    for (int it = 0; it < iters; it++) {
#pragma acc parallel loop
        for (int i = 1; i < n - 1; i++) b[i] = a[i - 1] + a[i + 1];
#ifndef SWAP
#pragma acc parallel loop
        for (int i = 1; i < n - 1; i++) a[i] = b[i];
#else
        double *t = a; a = b; b = t;
#endif
    }
}
";
    let p = judge("t.c", text, &[3, 6]);
    assert_eq!(p.copy_backs.len(), 1, "{p:?}");
}

#[test]
fn c_stencil_then_copy_back_is_illegal_to_fuse() {
    // Judged as a fusion, the pair is refused with the reason.
    let set = SourceSet::with_text("t.c", JACOBI_C);
    let src = set.get("t.c").expect("source");
    let syn = src.syntax();
    let a = (
        2,
        syn.loop_of_directive(2).expect("loop"),
        src.directive_at(2).expect("d"),
    );
    let b = (
        6,
        syn.loop_of_directive(6).expect("loop"),
        src.directive_at(6).expect("d"),
    );
    let v = super::fusion::judge(syn, &a, &b);
    assert!(
        matches!(&v, super::fusion::Verdict::Illegal(s) if s.contains("a[i-1][j]")),
        "{v:?}"
    );
}

const JACOBI_F: &str = "\
subroutine sweep(n, a, b)
  integer :: n, i, j
  real(8) :: a(n,n), b(n,n)
  !$acc parallel loop collapse(2) present(a, b)
  do j = 2, n - 1
    do i = 2, n - 1
      b(i,j) = 0.25d0 * (a(i-1,j) + a(i+1,j) + a(i,j-1) + a(i,j+1))
    end do
  end do
  !$acc end parallel loop
  !$acc parallel loop collapse(2) present(a, b)
  do j = 2, n - 1
    do i = 2, n - 1
      a(i,j) = b(i,j)
    end do
  end do
end subroutine
";

#[test]
fn fortran_copy_back_is_a_swap() {
    let p = judge("t.f90", JACOBI_F, &[4, 11]);
    assert!(p.chains.is_empty(), "{:?}", p.chains);
    assert_eq!(p.copy_backs.len(), 1, "{p:?}");
    assert_eq!(p.copy_backs[0].into, "a");
    assert_eq!(p.copy_backs[0].from, "b");
}

#[test]
fn fortran_independent_loops_fuse_and_dependent_ones_do_not() {
    let text = "\
subroutine s(n, a, b, c)
  integer :: n, i
  real(8) :: a(n), b(n), c(n)
  !$acc parallel loop copyout(a)
  do i = 1, n
    a(i) = sqrt(real(i, 8))
  end do
  !$acc parallel loop copyout(b)
  do i = 1, n
    b(i) = 2 * i
  end do
  !$acc parallel loop copyin(a) copyout(c)
  do i = 1, n
    c(i) = a(n + 1 - i)
  end do
end subroutine
";
    let p = judge("t.f90", text, &[4, 8, 12]);
    assert_eq!(p.chains.len(), 1, "{p:?}");
    assert_eq!(p.chains[0].lines, vec![4, 8]);
    let Edit::InsertBefore { lines, .. } = &p.chains[0].edits[0] else {
        panic!()
    };
    assert_eq!(
        lines,
        &vec![
            "  !$acc parallel loop copyout(a, b)".to_string(),
            "  do i = 1, n".into(),
            "      a(i) = sqrt(real(i, 8))".into(),
            "      b(i) = 2 * i".into(),
            "  end do".into(),
        ]
    );
    assert_eq!(p.refused.len(), 1);
    assert!(
        p.refused[0]
            .2
            .contains("the second reads a[-i+n+1] where the first writes a[i]"),
        "{:?}",
        p.refused
    );
}

#[test]
fn every_sample_parses_without_errors() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("samples") {
        let p = e.expect("entry").path();
        let name = p.to_string_lossy().to_string();
        if crate::source::Lang::of(&name).is_none() {
            continue;
        }
        let text = std::fs::read_to_string(&p).expect("read");
        let set = SourceSet::with_text(&name, &text);
        let syn = set.get(&name).expect("source").syntax();
        assert!(syn.error_lines.is_empty(), "{name}: {:?}", syn.error_lines);
        n += 1;
    }
    assert!(n > 20, "{n}");
}
