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
    let v = super::fusion::judge(src, syn, &a, &b);
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

/// The lines of the compute directives in `text`.
fn construct_lines(text: &str) -> Vec<u32> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("#pragma acc parallel"))
        .map(|(i, _)| i as u32 + 1)
        .collect()
}

/// A solver step in the style of NPB's C port (gang over k, worker over j,
/// vector over i, a pointwise sweep over m inside; arrays `a[m][k][j][i]`),
/// written for these tests.
const GRID_C: &str = "\
#define NM 5
void step(int nz, int ny, int nx, double a[NM][8][8][8], double f[NM][8][8][8], double r[8][8][8], double s[8][8][8]) {
  int i, j, k, m, i1;
  double t;
#pragma acc parallel loop gang num_gangs(nz) num_workers(8) vector_length(32)
  for (k = 0; k <= nz-1; k++) {
#pragma acc loop worker
    for (j = 0; j <= ny-1; j++) {
#pragma acc loop vector
      for (i = 0; i <= nx-1; i++) {
        t = 1.0/a[0][k][j][i];
        r[k][j][i] = t;
        s[k][j][i] = a[1][k][j][i] * t;
      }
    }
  }

#pragma acc parallel loop gang num_gangs(nz) num_workers(8) vector_length(32)
  for (k = 0; k < nz; k++) {
#pragma acc loop worker
    for (j = 0; j < ny; j++) {
#pragma acc loop vector
      for (i = 0; i < nx; i++) {
        for (m = 0; m < NM; m++) {
          f[m][k][j][i] = a[m][k][j][i] * r[k][j][i];
        }
      }
    }
  }
#pragma acc parallel loop gang num_gangs(nz) num_workers(8) vector_length(32)
  for (k = 0; k < nz; k++) {
#pragma acc loop worker vector
    for (j = 0; j < ny; j++) {
      f[2][k][j][0] = 0.0;
      f[2][k][j][nx-1] = 0.0;
    }
  }
}
";

#[test]
fn npb_style_nests_with_different_bound_expressions_fuse_level_by_level() {
    let l = construct_lines(GRID_C);
    assert_eq!(l.len(), 3);
    let p = judge("t.c", GRID_C, &l);
    // 5 and 19: k, j, i over 0..nz-1 written `<= nz-1` and `< nz`; the
    // constant first subscripts (a[0], a[1]) and the sweep over m name
    // elements of the same iteration only. 31 partitions j differently:
    // fused with them over k alone, its loop over j kept.
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    assert_eq!(p.chains.len(), 1, "{p:?}");
    assert_eq!(p.chains[0].lines, l);
    assert_eq!(p.fused.len(), 2, "{:?}", p.fused);
    assert!(
        p.fused[0].2.starts_with("fusable (proven): the same parallel loops (k = 0..nz-1), each keeping its own loops below"),
        "{:?}",
        p.fused
    );
    let Edit::InsertBefore { lines, .. } = &p.chains[0].edits[0] else {
        panic!()
    };
    let text = lines.join("\n");
    assert!(
        text.starts_with("#pragma acc parallel loop gang num_gangs(nz) num_workers(8) vector_length(32)\n  for (k = 0; k <= nz-1; k++) {\n"),
        "{text}"
    );
    // Each construct's inner loops with their directives, in order.
    let w = text.find("#pragma acc loop worker\n").expect("worker");
    let wv = text
        .find("#pragma acc loop worker vector")
        .expect("worker vector");
    let m = text.find("for (m = 0; m < NM; m++)").expect("m");
    assert!(w < m && m < wv, "{text}");
    assert_eq!(text.matches("#pragma acc loop vector").count(), 2, "{text}");
}

#[test]
fn npb_style_nests_fuse_over_all_three_loops_when_partitioned_alike() {
    let l = construct_lines(GRID_C);
    let p = judge("t.c", GRID_C, &l[..2]);
    assert_eq!(p.chains.len(), 1, "{p:?}");
    assert!(
        p.fused[0]
            .2
            .contains("(k = 0..nz-1, j = 0..ny-1, i = 0..nx-1)"),
        "{:?}",
        p.fused
    );
    let Edit::InsertBefore { lines, .. } = &p.chains[0].edits[0] else {
        panic!()
    };
    let text = lines.join("\n");
    // One nest: the bodies side by side inside the loop over i.
    assert_eq!(text.matches("for (i = 0;").count(), 1, "{text}");
    assert_eq!(text.matches("#pragma acc loop worker").count(), 1, "{text}");
    let body = text
        .find("s[k][j][i] = a[1][k][j][i] * t;")
        .expect("first body");
    let next = text.find("for (m = 0; m < NM; m++)").expect("second body");
    assert!(body < next, "{text}");
}

#[test]
fn npb_style_scalar_set_before_a_construct_and_an_inner_loop_over_it_are_illegal() {
    // NPB sets `i = 1;` before a construct that reads i, and the next
    // construct runs an inner loop over i: fused, later iterations of the
    // first would read that loop's last value.
    let text = "\
void f(int nz, int ny, int nx, double l[5][8][8][8]) {
  int i, j, k;
  i = 1;
#pragma acc parallel loop gang
  for (k = 1; k <= nz; k++) {
#pragma acc loop worker vector
    for (j = 1; j <= ny; j++) {
      l[2][k][i][j] = l[2][k][i][j] + 1.0;
    }
  }
#pragma acc parallel loop gang
  for (k = 1; k <= nz; k++) {
#pragma acc loop worker vector
    for (j = 1; j <= ny; j++) {
      for (i = 3; i <= nx; i++) {
        l[0][k][i][j] = l[0][k][i][j] + 2.0;
      }
    }
  }
}
";
    let l = construct_lines(text);
    let p = judge("t.c", text, &l);
    assert!(p.chains.is_empty(), "{p:?}");
    assert_eq!(
        p.refused[0].2,
        "not fusable: the second assigns the scalar i and the first reads the value it had before the construct (fused, it would read the other's)"
    );
    // With the inner loop's own variable the pair is fusable.
    let own = text
        .replace(
            "for (i = 3; i <= nx; i++)",
            "for (int ii = 3; ii <= nx; ii++)",
        )
        .replace(
            "l[0][k][i][j] = l[0][k][i][j]",
            "l[0][k][ii][j] = l[0][k][ii][j]",
        );
    let p = judge("t.c", &own, &l);
    assert!(p.refused.is_empty(), "{p:?}");
    assert_eq!(p.chains.len(), 1);
}

#[test]
fn npb_style_temporaries_assigned_first_in_both_are_private() {
    let text = "\
void f(int nz, int ny, double a[8][8], double b[8][8], double c[8][8]) {
  int j, k;
  double fac;
#pragma acc parallel loop gang
  for (k = 1; k <= nz; k++) {
#pragma acc loop vector
    for (j = 1; j <= ny; j++) {
      fac = 1.0/a[k][j];
      b[k][j] = fac * b[k][j];
    }
  }
#pragma acc parallel loop gang
  for (k = 1; k <= nz; k++) {
#pragma acc loop vector
    for (j = 1; j <= ny; j++) {
      fac = 2.0/a[k][j];
      c[k][j] = fac * b[k][j];
    }
  }
#pragma acc parallel loop gang
  for (k = 1; k <= nz; k++) {
#pragma acc loop vector
    for (j = 1; j <= ny; j++) {
      if (a[k][j] > 0) fac = a[k][j];
      c[k][j] = c[k][j] + fac;
    }
  }
}
";
    let l = construct_lines(text);
    let p = judge("t.c", text, &l);
    assert_eq!(p.chains.len(), 1, "{p:?}");
    assert_eq!(p.chains[0].lines, l[..2].to_vec());
    // The third assigns fac only under a condition, then reads it.
    assert_eq!(p.refused.len(), 1, "{:?}", p.refused);
    assert!(
        p.refused[0]
            .2
            .starts_with("not fusable: the first assigns the scalar fac and the third")
            || p.refused[0].2.contains("fac"),
        "{:?}",
        p.refused
    );
}

#[test]
fn npb_style_shifted_and_unknown_subscripts() {
    // rhs[m][k][j+1][i] read where the first wrote rhs[m][k][j][i]: another
    // iteration of j. An index the construct computes (j1 = j + 1) is not
    // known: not proven.
    let text = "\
void f(int nz, int ny, double r[5][8][8][8], double q[5][8][8][8]) {
  int j, k, m, j1;
#pragma acc parallel loop gang
  for (k = 1; k <= nz; k++) {
#pragma acc loop vector
    for (j = 1; j <= ny; j++) {
      for (m = 0; m < 5; m++) r[m][k][j][0] = 1.0;
    }
  }
#pragma acc parallel loop gang
  for (k = 1; k <= nz; k++) {
#pragma acc loop vector
    for (j = 1; j <= ny; j++) {
      for (m = 0; m < 5; m++) q[m][k][j][0] = r[m][k][j+1][0];
    }
  }
#pragma acc parallel loop gang
  for (k = 1; k <= nz; k++) {
#pragma acc loop vector
    for (j = 1; j <= ny; j++) {
      j1 = j + 1;
      q[0][k][j1][1] = 2.0;
    }
  }
#pragma acc parallel loop gang
  for (k = 1; k <= nz; k++) {
#pragma acc loop vector
    for (j = 1; j <= ny; j++) {
      q[0][k][j][1] = q[0][k][j][1] + 1.0;
    }
  }
}
";
    let l = construct_lines(text);
    let p = judge("t.c", text, &l);
    // The second and third write different columns (0 and 1): fusable.
    assert_eq!(p.chains.len(), 1, "{p:?}");
    assert_eq!(p.chains[0].lines, l[1..3].to_vec());
    assert_eq!(p.refused.len(), 2, "{:?}", p.refused);
    assert_eq!(
        p.refused[0].2,
        "not fusable: the second reads r[m][k][j+1][0] where the first writes r[m][k][j][0]: an element of another iteration"
    );
    assert!(
        p.refused[1].2.starts_with("not proven fusable: the first writes q[0][k][j1][1] and the second reads q[0][k][j][1]")
            && p.refused[1].2.contains("j1 is assigned in the construct"),
        "{:?}",
        p.refused
    );
}
