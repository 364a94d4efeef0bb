use super::*;

const LAPLACE_C: &str = include_str!("../../../samples/laplace_bad.c");
const LAPLACE_F: &str = include_str!("../../../samples/laplace_bad.f90");
const HEAT_C: &str = include_str!("../../../samples/heat2d_naive.c");

fn c() -> SourceFile {
    SourceFile::new(
        "laplace_bad.c",
        "laplace_bad.c".into(),
        Lang::C,
        LAPLACE_C.into(),
    )
}

fn f() -> SourceFile {
    SourceFile::new(
        "laplace_bad.f90",
        "laplace_bad.f90".into(),
        Lang::Fortran,
        LAPLACE_F.into(),
    )
}

#[test]
fn languages_from_names() {
    assert_eq!(Lang::of("/x/a.c"), Some(Lang::C));
    assert_eq!(Lang::of("a.F90"), Some(Lang::Fortran));
    assert_eq!(Lang::of("a.cpp"), Some(Lang::C));
    assert_eq!(Lang::of("a.f"), None);
}

#[test]
fn c_directive_with_comment() {
    let s = c();
    let d = s.directive_at(148).expect("directive");
    assert_eq!(d.construct, ["kernels"]);
    assert!(d.clauses.is_empty());
    assert_eq!(d.comment.as_deref(), Some("// stencil"));
    assert_eq!(d.sentinel, "#pragma acc");
    assert_eq!(
        d.render("kernels", &["present(A, Anew)".into()]),
        "#pragma acc kernels present(A, Anew) // stencil"
    );
    assert_eq!(s.block_of(&d), Some((149, 151, None)));
}

#[test]
fn clauses_and_their_variables() {
    let s = SourceFile::new("h.c", "h.c".into(), Lang::C, HEAT_C.into());
    let d = s.directive_at(111).expect("directive");
    assert_eq!(d.construct, ["parallel", "loop"]);
    let names: Vec<_> = d.clauses.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["collapse", "copyin", "copyout"]);
    assert_eq!(d.data_vars(), ["u", "unew"]);
    assert_eq!(
        d.clause("copyin").map(|c| c.items()),
        Some(vec!["u[0:n]".to_string()])
    );
    let arrays = s.arrays(Some(111));
    assert_eq!(arrays["u"].extent.as_deref(), Some("n"));
    assert!(arrays["unew"].pointer);
    let lp = s.enclosing_loops(111);
    assert_eq!(lp[0].header_line, 110);
    assert_eq!(lp[0].kind, "for");
}

#[test]
fn c_loops_and_nests() {
    let s = c();
    let outer = s.enclosing_loops(148);
    assert_eq!(outer.len(), 1);
    assert_eq!(outer[0].kind, "while");
    assert_eq!((outer[0].header_line, outer[0].end_line), (147, 161));
    assert_eq!(s.enclosing_loops(154)[0].header_line, 147);
    let nest = s.loop_at(149).expect("loop");
    assert_eq!(s.perfect_depth(nest, 3), 2);
    let nest2 = s.loop_at(155).expect("loop");
    assert_eq!(s.perfect_depth(nest2, 3), 2);
    assert_eq!(s.loop_index(nest2).as_deref(), Some("i"));
    let (a, b) = s.unit_of(148).expect("main");
    assert!(a < 147 && b > 190, "{a}..{b}");
}

#[test]
fn c_reduction_by_fmax() {
    let s = c();
    let locals = s.locals_in(155, 159);
    assert!(locals.contains(&"i".to_string()) && locals.contains(&"j".to_string()));
    let body = s.loop_body(155, 159, &locals, &["A".into(), "Anew".into()]);
    assert_eq!(body.reductions.len(), 1, "{body:?}");
    assert_eq!(body.reductions[0].op, "max");
    assert_eq!(body.reductions[0].var, "dt");
    assert_eq!(body.reductions[0].line, 157);
    assert!(body.other_scalar_writes.is_empty());
    // The stencil writes no scalar.
    let body = s.loop_body(
        149,
        151,
        &s.locals_in(149, 151),
        &["A".into(), "Anew".into()],
    );
    assert!(body.reductions.is_empty() && body.other_scalar_writes.is_empty());
}

#[test]
fn c_reduction_forms() {
    let cases = [
        ("s += a[i];", "+"),
        ("s = s + a[i];", "+"),
        ("s = a[i] + s;", "+"),
        ("s -= a[i];", "+"),
        ("p *= a[i];", "*"),
        ("m = m > a[i] ? m : a[i];", "max"),
        ("m = a[i] < m ? a[i] : m;", "min"),
        ("if (a[i] > m) m = a[i];", "max"),
        ("if (m > a[i]) m = a[i];", "min"),
        ("m = fminf(m, a[i]);", "min"),
    ];
    for (stmt, op) in cases {
        let text = format!("void f(float *a, int n) {{\n  float s = 0, p = 1, m = 0;\n  for (int i = 0; i < n; i++)\n    {stmt}\n}}\n");
        let s = SourceFile::new("t.c", "t.c".into(), Lang::C, text);
        let body = s.loop_body(3, 4, &s.locals_in(3, 4), &["a".into()]);
        assert_eq!(body.reductions.len(), 1, "{stmt}: {body:?}");
        assert_eq!(body.reductions[0].op, op, "{stmt}");
    }
    // Not a reduction: a scalar carried from one iteration to the next.
    let text = "void f(float *a, int n) {\n  float t = 0;\n  for (int i = 0; i < n; i++)\n    { a[i] = t; t = a[i] * 2; }\n}\n";
    let s = SourceFile::new("t.c", "t.c".into(), Lang::C, text.into());
    let body = s.loop_body(3, 4, &s.locals_in(3, 4), &["a".into()]);
    assert!(body.reductions.is_empty());
    assert_eq!(body.other_scalar_writes, [("t".to_string(), 4)]);
}

fn body_of(name: &str, lang: Lang, text: &str, a: u32, b: u32) -> LoopBody {
    let s = SourceFile::new(name, name.into(), lang, text.into());
    s.loop_body(a, b, &s.locals_in(a, b), &["a".into(), "b".into()])
}

fn only_reduction(body: &LoopBody) -> (&str, &str, &str) {
    assert_eq!(body.reductions.len(), 1, "{body:?}");
    let r = &body.reductions[0];
    (r.op.as_str(), r.var.as_str(), r.statement.as_str())
}

/// C++: `std::min` is the qualified name of a minimum.
#[test]
fn cpp_reduction_by_std_min() {
    let cpp = "#include <algorithm>\nvoid f(const float *a, int n) {\n  float m = 1e30f;\n  for (int i = 0; i < n; i++)\n    m = std::min(m, a[i]);\n}\n";
    let body = body_of("t.cpp", Lang::C, cpp, 4, 5);
    assert_eq!(only_reduction(&body), ("min", "m", "m = std::min(m, a[i])"));
}

/// A dot product: a product among the terms of the sum is still a sum
/// into `s`; the name in another term is no reduction.
#[test]
fn c_reduction_of_a_dot_product() {
    let c = "double dot(const double *a, const double *b, int n) {\n  double s = 0;\n  for (int i = 0; i < n; i++)\n    s = s + a[i] * b[i];\n  return s;\n}\n";
    let body = body_of("t.c", Lang::C, c, 3, 4);
    assert_eq!(only_reduction(&body), ("+", "s", "s = s + a[i] * b[i]"));
    let c2 = c.replace("s + a[i] * b[i]", "s + s * a[i]");
    let body = body_of("t.c", Lang::C, &c2, 3, 4);
    assert!(body.reductions.is_empty());
    assert_eq!(body.other_scalar_writes, [("s".to_string(), 4)]);
}

/// Fortran: a `max` continued on the next line.
#[test]
fn fortran_reduction_over_a_continuation_line() {
    let f = "subroutine r(a, b, n, dt)\n  integer :: n, i\n  real :: a(n), b(n), dt\n  do i = 1, n\n    dt = max(dt, &\n             abs(a(i) - b(i)))\n  end do\nend subroutine r\n";
    let body = body_of("t.f90", Lang::Fortran, f, 4, 7);
    assert_eq!(
        only_reduction(&body),
        ("max", "dt", "dt = max(dt, abs(a(i) - b(i)))")
    );
}

/// Fortran: a block `if` that keeps the larger value.
#[test]
fn fortran_reduction_in_a_block_if() {
    let f = "subroutine r(a, n, m)\n  integer :: n, i\n  real :: a(n), m\n  do i = 1, n\n    if (a(i) > m) then\n      m = a(i)\n    end if\n  end do\nend subroutine r\n";
    let body = body_of("t.f90", Lang::Fortran, f, 4, 8);
    assert_eq!(only_reduction(&body), ("max", "m", "m = a(i)"));
}

const F_COPY: &str = "subroutine copy(in, out, b, n)\n  integer :: n, i\n  real, intent(in) :: in(n)\n  real, intent(out) :: out(n), b(n)\n  do i = 1, n\n    out(i) = in(i)\n  end do\n  do 10 i = 1, n\n10 b(i) = 2 * b(i)\n  call report(n, &\n              b = 1)\nend subroutine copy\n";

fn f_uses_on(line: u32, key: &str) -> Vec<Use> {
    let s = SourceFile::new("t.f90", "t.f90".into(), Lang::Fortran, F_COPY.into());
    s.uses(line, line, &[])
        .into_iter()
        .filter(|u| u.key == key)
        .collect()
}

/// Fortran arrays named `in` and `out`: words of the language, not
/// reserved ones.
#[test]
fn fortran_arrays_named_like_keywords() {
    let out = f_uses_on(6, "out");
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].write && !out[0].read && out[0].indexed);
    let inn = f_uses_on(6, "in");
    assert_eq!(inn.len(), 1, "{inn:?}");
    assert!(inn[0].read && !inn[0].write && inn[0].indexed);
}

/// `10 b(i) = ...`: a labelled statement writes b(i) and reads it.
#[test]
fn fortran_labelled_statement_writes() {
    let out = f_uses_on(9, "b");
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(out[0].write && !out[0].read);
    assert!(out[1].read && !out[1].write);
}

/// `b = 1` on a continuation line of a call names the callee's
/// argument: nothing of this unit is written.
#[test]
fn fortran_keyword_argument_on_a_continuation_line() {
    assert!(f_uses_on(11, "b").is_empty(), "{:?}", f_uses_on(11, "b"));
    let n = f_uses_on(10, "n");
    assert!(n.len() == 1 && n[0].whole && n[0].callee.as_deref() == Some("report"));
}

/// C++: a range-for's variable is written by the loop, its range read; a
/// member access uses only its base, and a call through a qualified name
/// passes its arguments whole.
#[test]
fn cpp_uses_through_the_tree() {
    let text = "#include <vector>\nvoid f(std::vector<double> &v, double *a) {\n  for (auto &x : v) x = 1; // a[0] = 0\n  v.data()[0] = a[1];\n  std::fill(a, a + 4, 0.0);\n}\n";
    let s = SourceFile::new("t.cpp", "t.cpp".into(), Lang::C, text.into());
    let keys =
        |line: u32| -> Vec<String> { s.uses(line, line, &[]).into_iter().map(|u| u.key).collect() };
    // The comment names `a`; it is not a use.
    assert_eq!(keys(3), ["x", "v", "x"]);
    assert_eq!(keys(4), ["v", "a"]);
    let fill = s.uses(5, 5, &[]);
    assert!(fill[0].whole && fill[0].callee.as_deref() == Some("std::fill"));
    assert!(!fill[1].whole);
}

#[test]
fn c_uses_read_and_write() {
    let s = c();
    let uses = s.uses(149, 151, &[]);
    let anew: Vec<_> = uses.iter().filter(|u| u.key == "Anew").collect();
    assert_eq!(anew.len(), 1);
    assert!(anew[0].write && !anew[0].read && anew[0].indexed);
    assert!(uses
        .iter()
        .filter(|u| u.key == "A")
        .all(|u| u.read && !u.write));
    // After the loop, main reads A, never Anew.
    let (_, end) = s.unit_of(162).expect("main");
    let after = s.uses(162, end, &[]);
    assert!(after.iter().any(|u| u.key == "A"));
    assert!(!after.iter().any(|u| u.key == "Anew"));
}

#[test]
fn c_arrays_with_macro_sizes() {
    let s = c();
    let a = s.arrays(Some(148));
    assert_eq!(a["A"].dims, "[W][W]");
    assert_eq!(a["Anew"].dims, "[W][W]");
    assert!(!a["A"].pointer);
}

/// Extents of `malloc` with more than one factor beside the `sizeof`
/// (laplace_bad.c's `malloc(w * w * sizeof *b)`), and a pointer to rows
/// of a variable length (`double (*a)[n]`).
#[test]
fn c_extents_of_several_factors() {
    let a = c().arrays(Some(112));
    assert_eq!(a["b"].extent.as_deref(), Some("w*w"));
    assert!(a["b"].pointer);
    let text = "void f(int n, int m) {\n  double (*a)[n] = malloc(sizeof(double) * n * m);\n  float *q = (float *)malloc(sizeof(float) * (n + 1));\n}\n";
    let s = SourceFile::new("t.c", "t.c".into(), Lang::C, text.into());
    let a = s.arrays(Some(3));
    assert_eq!((a["a"].dims.as_str(), a["a"].pointer), ("[n]", true));
    assert_eq!(a["a"].extent.as_deref(), Some("n*m"));
    assert_eq!(a["q"].extent.as_deref(), Some("(n+1)"));
}

/// A local of a type the program names (`real_t`) is private to the
/// iteration: writing it is not a scalar the loop carries.
#[test]
fn c_locals_of_a_named_type() {
    let text = "typedef double real_t;\nvoid f(real_t *a, int n) {\n  for (int i = 0; i < n; i++) {\n    real_t t = a[i] * 2;\n    a[i] = t;\n  }\n}\n";
    let s = SourceFile::new("t.c", "t.c".into(), Lang::C, text.into());
    assert!(s.locals_in(3, 6).contains(&"t".to_string()));
    let body = s.loop_body(3, 6, &s.locals_in(3, 6), &["a".into()]);
    assert!(body.other_scalar_writes.is_empty(), "{body:?}");
}

/// Fortran: a declaration continued on the next line declares its arrays
/// there too.
#[test]
fn fortran_declaration_over_two_lines() {
    let text = "program p\n  real, allocatable :: a(:), &\n                       b(:,:)\n  real, dimension(0:n+1) :: c\n  a = 0\nend program p\n";
    let s = SourceFile::new("t.f90", "t.f90".into(), Lang::Fortran, text.into());
    let a = s.arrays(Some(5));
    assert!(a["a"].allocatable && a["b"].allocatable);
    assert_eq!(a["b"].dims, "(:,:)");
    assert_eq!(a["c"].dims, "(0:n+1)");
    assert!(!a["c"].allocatable);
}

/// Fortran units from the tree: a module whose generic interface names a
/// `module procedure` keeps its own unit (to its `contains`), and each
/// subprogram its own, an internal one inside another included.
#[test]
fn fortran_units_with_a_generic_interface() {
    let text = "module m\n  interface step\n    module procedure step_r\n  end interface step\ncontains\n  subroutine step_r(u)\n    real :: u(:)\n    u = 0\n  contains\n    subroutine inner()\n    end subroutine inner\n  end subroutine step_r\nend module m\nprogram p\n  use m\n  call step_r(a)\nend program p\n";
    let s = SourceFile::new("m.f90", "m.f90".into(), Lang::Fortran, text.into());
    assert_eq!(s.unit_of(2), Some((1, 5)));
    assert_eq!(s.unit_of(8), Some((6, 9)));
    assert_eq!(s.unit_of(10), Some((10, 11)));
    assert_eq!(s.unit_of(16), Some((14, 17)));
    assert_eq!(s.function_at(8).map(|f| f.name), Some("step_r".to_string()));
}

#[test]
fn fortran_directive_and_block() {
    let s = f();
    let d = s.directive_at(65).expect("directive");
    assert_eq!(d.construct, ["kernels"]);
    assert_eq!(d.comment.as_deref(), Some("! stencil"));
    assert_eq!(d.indent, "    ");
    assert_eq!(s.block_of(&d), Some((66, 70, Some(71))));
    let lp = s.enclosing_loops(65);
    assert_eq!(lp[0].kind, "do while");
    assert_eq!((lp[0].header_line, lp[0].end_line), (64, 83));
    let nest = s.loop_at(66).expect("loop");
    assert_eq!(s.perfect_depth(nest, 3), 2);
    assert_eq!(s.loop_index(nest).as_deref(), Some("j"));
}

#[test]
fn fortran_reduction_and_arrays() {
    let s = f();
    let arrays = s.arrays(Some(65));
    assert!(arrays["a"].allocatable);
    assert_eq!(arrays["anew"].dims, "(:,:)");
    let body = s.loop_body(75, 80, &s.locals_in(75, 80), &["a".into(), "anew".into()]);
    assert_eq!(body.reductions.len(), 1, "{body:?}");
    assert_eq!(body.reductions[0].op, "max");
    assert_eq!(body.reductions[0].var, "dt");
    let (_, end) = s.unit_of(84).expect("program");
    let after = s.uses(84, end, &[]);
    assert!(after.iter().any(|u| u.key == "a"));
    assert!(!after.iter().any(|u| u.key == "anew"));
    let in_stencil = s.uses(66, 70, &[]);
    assert!(in_stencil
        .iter()
        .any(|u| u.key == "anew" && u.write && !u.read));
}

#[test]
fn trip_counts() {
    let text = "void f(int n) {\n  for (int j = 0; j < 16; j++) ;\n  for (j = 1; j <= 8; ++j) ;\n  for (int j = 0; j < n; j++) ;\n  for (int j = 0; j < 16; j += 2) ;\n  for (int j = 4; j < 16; j += 1) ;\n}\n";
    let s = SourceFile::new("t.c", "t.c".into(), Lang::C, text.into());
    let counts: Vec<Option<u64>> = (2..=6)
        .map(|l| s.loop_at(l).and_then(|lp| s.trip_count(lp)))
        .collect();
    // Any constant step counts: 0, 2, ..., 14.
    assert_eq!(counts, [Some(16), Some(8), None, Some(8), Some(12)]);
    let text = "program p\n  integer :: j\n  do j = 1, 16\n  end do\n  do j = 1, n\n  end do\n  do j = 16, 1, -3\n  end do\n  do while (j < 16)\n  end do\nend program p\n";
    let s = SourceFile::new("t.f90", "t.f90".into(), Lang::Fortran, text.into());
    let counts: Vec<Option<u64>> = [3, 5, 7, 9]
        .iter()
        .map(|&l| s.loop_at(l).and_then(|lp| s.trip_count(lp)))
        .collect();
    assert_eq!(counts, [Some(16), None, Some(6), None]);
    assert_eq!(s.loop_at(9).map(|l| l.kind.as_str()), Some("do while"));
}

/// C++ through the C++ grammar: counting down, a `constexpr` bound, a
/// range-for and a `while` are loops, the last two without a count.
#[test]
fn trip_counts_in_cpp() {
    let text = "#include <vector>\nconstexpr int W = 48;\nvoid f(std::vector<double> &v, int n) {\n  for (int j = W - 1; j >= 0; --j) v[j] = 0;\n  for (auto &x : v) x = 1;\n  for (int j = 0; j < W / 2; j += 4) v[j] = 2;\n  while (n > 0) n--;\n}\n";
    let s = SourceFile::new("t.cpp", "t.cpp".into(), Lang::C, text.into());
    let counts: Vec<Option<u64>> = (4..=7)
        .map(|l| s.loop_at(l).and_then(|lp| s.trip_count(lp)))
        .collect();
    assert_eq!(counts, [Some(48), None, Some(6), None]);
    let kinds: Vec<&str> = s.loops().iter().map(|l| l.kind.as_str()).collect();
    assert_eq!(kinds, ["for", "for", "for", "while"]);
    assert_eq!(
        s.loop_index(s.loop_at(4).expect("loop")).as_deref(),
        Some("j")
    );
    assert_eq!(s.loop_index(s.loop_at(7).expect("loop")), None);
}

#[test]
fn trip_counts_of_named_bounds() {
    let text = "#define COLS 16\nconst int K = 4;\nvoid f(int n) {\n  for (int j = 0; j < COLS - 1; j++) ;\n  for (int j = 0; j <= COLS; j++) ;\n  for (int j = K; j < COLS; ++j) ;\n  for (int j = 0; j < n; j++) ;\n  for (int j = 0; j < ROWS; j++) ;\n}\n";
    let s = SourceFile::new("t.c", "t.c".into(), Lang::C, text.into());
    let counts: Vec<Option<u64>> = (4..=8)
        .map(|l| s.loop_at(l).and_then(|lp| s.trip_count(lp)))
        .collect();
    assert_eq!(counts, [Some(15), Some(17), Some(12), None, None]);
    let text = "program p\n  integer, parameter :: cols = 16\n  integer :: j, n\n  do j = 1, cols\n  end do\n  inner: do j = 2, COLS - 1\n  end do inner\n  do j = 1, n\n  end do\nend program p\n";
    let s = SourceFile::new("t.f90", "t.f90".into(), Lang::Fortran, text.into());
    let counts: Vec<Option<u64>> = [4, 6, 8]
        .iter()
        .map(|&l| s.loop_at(l).and_then(|lp| s.trip_count(lp)))
        .collect();
    assert_eq!(counts, [Some(16), Some(14), None]);
    // Steps and bounds of named constants, `**` among the arithmetic.
    let text = "program p\n  integer, parameter :: m = 2, s = 3\n  integer :: j\n  do j = 1, m**4, s\n  end do\nend program p\n";
    let s = SourceFile::new("t.f90", "t.f90".into(), Lang::Fortran, text.into());
    assert_eq!(s.loop_at(4).and_then(|lp| s.trip_count(lp)), Some(6));
}

/// What the user names wins over the path the trace recorded: a file
/// under a root (--source-dir) is read before one at the recorded path (a
/// copy in another checkout), and a mapped prefix (--source-map) is never
/// read at the recorded path.
#[test]
fn named_directories_win_over_the_recorded_path() {
    use std::path::Path;
    let mut b = crate::testkit::runs::RunBuilder::new(accprof_trace::HashMode::Off);
    b.site("/other/checkout/laplace_bad.c", 148);
    let run = b.build();
    let read = |p: &Path| -> std::io::Result<String> {
        if p == Path::new("/other/checkout/laplace_bad.c") || p == Path::new("/mine/laplace_bad.c")
        {
            Ok(LAPLACE_C.to_string())
        } else {
            Err(std::io::ErrorKind::NotFound.into())
        }
    };
    let recorded = "/other/checkout/laplace_bad.c";
    let found = |set: &SourceSet| set.get(recorded).map(|f| f.found_at.clone());
    let set = SourceSet::load_with(&run, &[PathBuf::from("/mine")], &[], &read);
    assert_eq!(found(&set), Some(PathBuf::from("/mine/laplace_bad.c")));
    let set = SourceSet::load_with(&run, &[], &[], &read);
    assert_eq!(found(&set), Some(PathBuf::from(recorded)));
    let map = [(PathBuf::from("/other/checkout"), PathBuf::from("/gone"))];
    let set = SourceSet::load_with(&run, &[], &map, &read);
    assert_eq!(found(&set), None);
    assert!(set.is_missing(recorded));
}

/// A loaded source's quoted headers are read the way the source was, from
/// beside where it was found: their macros name loop bounds.
#[test]
fn loaded_sources_read_their_headers() {
    use std::path::Path;
    let mut b = crate::testkit::runs::RunBuilder::new(accprof_trace::HashMode::Off);
    b.site("/build/t.c", 3);
    let run = b.build();
    let main = "#include \"inc/cols.h\"\nvoid f(double *x) {\n#pragma acc parallel loop\n  for (int j = 0; j < COLS; j++) x[j] = 0;\n}\n";
    let read = |p: &Path| -> std::io::Result<String> {
        match p.to_str() {
            Some("/mine/t.c") => Ok(main.to_string()),
            Some("/mine/inc/cols.h") => Ok("#define COLS (2 * 8)\n".to_string()),
            _ => Err(std::io::ErrorKind::NotFound.into()),
        }
    };
    let set = SourceSet::load_with(&run, &[PathBuf::from("/mine")], &[], &read);
    let s = set.get("/build/t.c").expect("loaded");
    let lp = s.loop_at(4).expect("loop");
    assert_eq!(s.trip_count(lp), Some(16));
}
