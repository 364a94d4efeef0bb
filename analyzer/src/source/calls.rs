//! Functions and the calls between them: a function's name and parameters,
//! and the arguments of a call, so that an expression written in a callee
//! (`u[0:nx*ny]`) can be written in its caller's names.

use tree_sitter::Node;

use super::pos::{end_line, line};

use super::{Lang, SourceFile};

/// A function (C) or subroutine/function (Fortran) as its header declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionHeader {
    /// As written.
    pub name: String,
    /// Parameter names in order, as lookup keys (lower case in Fortran).
    pub params: Vec<String>,
    /// First and last line of the body (as [`SourceFile::unit_of`] gives).
    pub unit: (u32, u32),
}

/// The functions and calls of a file, as the parse tree has them.
#[derive(Debug, Clone, Default)]
pub struct Calls {
    /// Every function, subroutine and program unit, in the order they
    /// start (one holding others first).
    pub headers: Vec<Header>,
    /// Every call (Fortran: and every array element, which the grammar
    /// cannot tell from a function call), in the order they start.
    pub calls: Vec<Call>,
    /// Fortran program units (programs, modules, subroutines, functions):
    /// from the header to the line that ends the executable part
    /// (`contains`, or the unit's `end`).
    pub units: Vec<(u32, u32)>,
}

/// A function's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub params: Vec<String>,
    /// First and last line of the whole definition.
    pub start: u32,
    pub end: u32,
    /// C: first and last line of the body (its braces).
    pub body: Option<(u32, u32)>,
    /// A Fortran main program (no header to call it by).
    pub program: bool,
}

/// One call: the callee's lookup key, where it starts, the line of the
/// argument list's `)`, and the arguments as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub key: String,
    pub line: u32,
    pub end_line: u32,
    pub args: Vec<String>,
}

impl SourceFile {
    /// The header of the function or subprogram holding line `n`.
    pub fn function_at(&self, n: u32) -> Option<FunctionHeader> {
        let unit = self.unit_of(n)?;
        let h = self
            .syntax()
            .calls
            .headers
            .iter()
            .rfind(|h| h.start <= n && n <= h.end)
            .filter(|h| !h.program)?;
        Some(FunctionHeader {
            name: h.name.clone(),
            params: h.params.clone(),
            unit,
        })
    }

    /// The arguments, as written, of the call to `callee` that covers line
    /// `n` (the line a return address into the caller symbolizes to: the
    /// call's first line, or one of its continuation lines).
    pub fn call_args(&self, n: u32, callee: &str) -> Option<Vec<String>> {
        self.call_at(n, callee).map(|c| c.0)
    }

    /// [`SourceFile::call_args`], with the first and last line of the call.
    pub fn call_at(&self, n: u32, callee: &str) -> Option<(Vec<String>, u32, u32)> {
        let want = super::lang_key(self.lang, callee);
        // The last call of `callee` that starts at or before `n` and whose
        // argument list reaches `n`.
        let calls = &self.syntax().calls.calls;
        let hi = calls.partition_point(|c| c.line <= n);
        calls[..hi]
            .iter()
            .rfind(|c| c.key == want && c.end_line >= n)
            .map(|c| (c.args.clone(), c.line, c.end_line))
    }

    /// First and last line of every call of `callee` starting in lines
    /// `a..=b`.
    pub fn calls_in(&self, a: u32, b: u32, callee: &str) -> Vec<(u32, u32)> {
        let want = super::lang_key(self.lang, callee);
        let calls = &self.syntax().calls.calls;
        let lo = calls.partition_point(|c| c.line < a);
        let hi = calls.partition_point(|c| c.line <= b);
        calls[lo..hi]
            .iter()
            .filter(|c| c.key == want)
            .map(|c| (c.line, c.end_line))
            .collect()
    }
}

/// Reads the functions and calls of the tree under `root`.
pub(super) fn calls(lang: Lang, src: &[u8], root: Node) -> Calls {
    let mut r = Reader {
        lang,
        src,
        out: Calls::default(),
    };
    r.node(root);
    r.out.calls.sort_by_key(|c| c.line);
    r.out
}

struct Reader<'a> {
    lang: Lang,
    src: &'a [u8],
    out: Calls,
}

impl Reader<'_> {
    fn text(&self, n: Node) -> &str {
        n.utf8_text(self.src).unwrap_or("")
    }

    fn key(&self, n: Node) -> String {
        super::lang_key(self.lang, self.text(n))
    }

    fn node(&mut self, n: Node) {
        match n.kind() {
            "comment"
            | "string_literal"
            | "preproc_def"
            | "preproc_function_def"
            | "preproc_call"
            | "preproc_include" => return,
            "function_definition" => self.c_function(n),
            "subroutine" | "function" | "program" => {
                self.f_unit(n);
                self.f_span(n);
            }
            "module" => self.f_span(n),
            "call_expression" => {
                self.call(n, n.child_by_field_name("function").or(n.named_child(0)))
            }
            "subroutine_call" => self.call(n, n.child_by_field_name("subroutine")),
            _ => {}
        }
        let mut c = n.walk();
        let kids: Vec<Node> = n.named_children(&mut c).collect();
        for k in kids {
            self.node(k);
        }
    }

    fn c_function(&mut self, n: Node) {
        let mut name = String::new();
        let mut params = Vec::new();
        let mut d = n.child_by_field_name("declarator");
        while let Some(x) = d {
            if x.kind() == "function_declarator" {
                if let Some(list) = x.child_by_field_name("parameters") {
                    let mut c = list.walk();
                    let ps: Vec<Node> = list.named_children(&mut c).collect();
                    for p in ps {
                        let id = p.child_by_field_name("declarator").and_then(declared);
                        if let Some(id) = id {
                            params.push(self.key(id));
                        }
                    }
                }
            }
            if matches!(
                x.kind(),
                "identifier" | "field_identifier" | "qualified_identifier"
            ) || x.kind().ends_with("identifier")
            {
                name = self.text(x).to_string();
                break;
            }
            d = x.child_by_field_name("declarator");
        }
        let body = n
            .child_by_field_name("body")
            .map(|b| (line(b), end_line(b)));
        self.out.headers.push(Header {
            name,
            params,
            start: line(n),
            end: end_line(n),
            body,
            program: false,
        });
    }

    fn f_unit(&mut self, n: Node) {
        let stmt = n.named_child(0);
        let mut name = String::new();
        let mut params = Vec::new();
        if let Some(s) = stmt {
            if let Some(x) = s.child_by_field_name("name") {
                name = self.text(x).to_string();
            }
            if let Some(ps) = s.child_by_field_name("parameters") {
                let mut c = ps.walk();
                let ids: Vec<Node> = ps.named_children(&mut c).collect();
                params = ids
                    .into_iter()
                    .filter(|k| k.kind() == "identifier")
                    .map(|k| self.key(k))
                    .collect();
            }
        }
        self.out.headers.push(Header {
            name,
            params,
            start: line(n),
            end: end_line(n),
            body: None,
            program: n.kind() == "program",
        });
    }

    /// A Fortran unit's lines, to `contains` or its `end`.
    fn f_span(&mut self, n: Node) {
        let mut c = n.walk();
        let end = n
            .named_children(&mut c)
            .find(|k| k.kind() == "internal_procedures" || k.kind().starts_with("end_"))
            .map_or_else(|| end_line(n), line);
        self.out.units.push((line(n), end));
    }

    fn call(&mut self, n: Node, f: Option<Node>) {
        let Some(f) = f else { return };
        let key = match f.kind() {
            "field_expression" => f.child_by_field_name("field").map(|x| self.key(x)),
            "identifier" | "qualified_identifier" => Some(self.key(f)),
            _ => None,
        };
        let Some(key) = key else { return };
        let mut c = n.walk();
        let list = n
            .named_children(&mut c)
            .find(|k| k.kind() == "argument_list");
        let Some(list) = list else { return };
        let mut c = list.walk();
        let args = list
            .named_children(&mut c)
            .filter(|k| k.kind() != "comment")
            .map(|k| self.as_written(k))
            .collect();
        self.out.calls.push(Call {
            key,
            line: line(f),
            end_line: end_line(list),
            args,
        });
    }

    /// `n`'s text on one line: whitespace runs as one space, Fortran
    /// continuation marks left out.
    fn as_written(&self, n: Node) -> String {
        let mut parts: Vec<&str> = Vec::new();
        for l in self.text(n).lines() {
            let mut l = l.trim();
            if self.lang == Lang::Fortran {
                l = l.trim_end_matches('&').trim_start_matches('&').trim();
            }
            if !l.is_empty() {
                parts.push(l);
            }
        }
        parts
            .join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The name a declarator declares (through pointers, arrays, references).
fn declared(d: Node) -> Option<Node> {
    match d.kind() {
        "identifier" => Some(d),
        _ => {
            if let Some(x) = d.child_by_field_name("declarator") {
                return declared(x);
            }
            let mut c = d.walk();
            let found = d.named_children(&mut c).find_map(declared);
            found
        }
    }
}

/// Rewrites `expr` (a clause item or an extent written in a callee) with
/// each name in `map` replaced by its text in the caller; replacements
/// that are not a plain name or number are parenthesized. The item's
/// leading name (the array) must map to a plain name. Err names the first
/// name that cannot be written in the caller (a local of the callee).
pub fn rewrite_in_caller(
    lang: Lang,
    expr: &str,
    map: &[(String, String)],
    callee_locals: &[String],
) -> Result<String, String> {
    let simple = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    };
    let mut out = String::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut first = true;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let key = super::lang_key(lang, &word);
            // A member after `.`, `->` or `%` is not a name of its own.
            let member = out.ends_with('.') || out.ends_with("->") || out.ends_with('%');
            match map.iter().find(|(p, _)| *p == key) {
                Some((_, arg)) if !member => {
                    if first && !simple(arg) {
                        return Err(format!(
                            "the caller passes `{arg}` for `{word}`, not an array by its name"
                        ));
                    }
                    if simple(arg) {
                        out.push_str(arg);
                    } else {
                        out.push('(');
                        out.push_str(arg);
                        out.push(')');
                    }
                }
                None if !member && callee_locals.contains(&key) => {
                    return Err(format!(
                        "`{word}` in `{expr}` is local to the called function"
                    ));
                }
                _ => out.push_str(&word),
            }
            first = false;
        } else if c.is_ascii_digit() {
            // A number (with any letters of its suffix or exponent).
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                out.push(chars[i]);
                i += 1;
            }
            first = false;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: &str = "static void heat_step(int nx, int ny, const double *restrict u, double unew[])\n{\n#pragma acc parallel loop copyin(u[0:nx*ny])\n  for (int i = 0; i < nx; i++) unew[i] = u[i];\n}\nint main(void)\n{\n  double *a = 0, *b = 0;\n  for (int s = 0; s < 3; s++) {\n    heat_step(64,\n              n + 1, a, b);\n  }\n}\n";

    fn c() -> SourceFile {
        SourceFile::new("x.c", "x.c".into(), Lang::C, C.to_string())
    }

    #[test]
    fn c_header_and_call() {
        let f = c().function_at(4).expect("function");
        assert_eq!(f.name, "heat_step");
        assert_eq!(f.params, ["nx", "ny", "u", "unew"]);
        assert_eq!(f.unit.0, 2);
        // The call covers lines 10 and 11.
        for line in [10, 11] {
            assert_eq!(
                c().call_args(line, "heat_step"),
                Some(vec!["64".into(), "n + 1".into(), "a".into(), "b".into()])
            );
        }
        assert_eq!(c().call_args(9, "heat_step"), None);
        assert_eq!(c().calls_in(1, 13, "heat_step"), [(10, 11)]);
        assert_eq!(c().function_at(9).map(|f| f.params), Some(Vec::new()));
    }

    #[test]
    fn fortran_header_and_call() {
        let text = "module m\ncontains\n  subroutine Step(NX, ny, u)\n    integer :: nx, ny\n    real :: u(ny, nx)\n    u = 0\n  end subroutine Step\nend module m\nprogram p\n  use m\n  do i = 1, 3\n    call step(n, n, grid)\n  end do\nend program p\n";
        let f = SourceFile::new("x.f90", "x.f90".into(), Lang::Fortran, text.to_string());
        let h = f.function_at(6).expect("subroutine");
        assert_eq!(h.name, "Step");
        assert_eq!(h.params, ["nx", "ny", "u"]);
        assert_eq!(
            f.call_args(12, "STEP"),
            Some(vec!["n".into(), "n".into(), "grid".into()])
        );
    }

    /// C++: a `const` member function defined in a namespace, and a call
    /// to it through an object over two lines.
    #[test]
    fn cpp_method_in_a_namespace() {
        let text = "#include <vector>\nnamespace heat {\nstruct Grid { void step(double *u, int n) const; };\nvoid Grid::step(double *u, int n) const {\n#pragma acc parallel loop copy(u[0:n])\n  for (int i = 0; i < n; i++) u[i] += 1;\n}\n}\nint main() {\n  heat::Grid g;\n  double *a = nullptr;\n  for (int s = 0; s < 3; s++)\n    g.step(a,\n           64);\n}\n";
        let f = SourceFile::new("x.cpp", "x.cpp".into(), Lang::C, text.to_string());
        assert_eq!(f.unit_of(6), Some((4, 7)));
        let h = f.function_at(6).expect("method");
        assert_eq!(h.name, "Grid::step");
        assert_eq!(h.params, ["u", "n"]);
        assert_eq!(f.call_args(14, "step"), Some(vec!["a".into(), "64".into()]));
        assert_eq!(f.calls_in(9, 15, "step"), [(13, 14)]);
    }

    /// A C function whose header is broken over lines with a comment
    /// between the parameter list and the body, and the calls of a
    /// ping-pong: one in each branch of an `if`, the second after `else`.
    #[test]
    fn c_header_over_lines_and_calls_after_else() {
        let text = "void\nscale(double *restrict v, /* values */\n      int n)\n/* body */\n{\n  for (int i = 0; i < n; i++) v[i] *= 2;\n}\nvoid run(double *a, double *b, int n) {\n  for (int s = 0; s < 8; s++)\n    if (s % 2 == 0) scale(a, n); else scale(b, n);\n}\n";
        let f = SourceFile::new("x.c", "x.c".into(), Lang::C, text.to_string());
        let h = f.function_at(6).expect("function");
        assert_eq!((h.name.as_str(), h.unit), ("scale", (5, 7)));
        assert_eq!(h.params, ["v", "n"]);
        assert_eq!(f.calls_in(8, 11, "scale"), [(10, 10), (10, 10)]);
        assert_eq!(f.call_args(10, "scale"), Some(vec!["b".into(), "n".into()]));
    }

    #[test]
    fn items_are_rewritten_in_the_callers_names() {
        let map = vec![
            ("u".to_string(), "unew".to_string()),
            ("nx".to_string(), "nx".to_string()),
            ("ny".to_string(), "n + 1".to_string()),
        ];
        assert_eq!(
            rewrite_in_caller(Lang::C, "u[0:nx*ny]", &map, &[]),
            Ok("unew[0:nx*(n + 1)]".to_string())
        );
        // Names that are not parameters stay (globals), unless local.
        assert_eq!(
            rewrite_in_caller(Lang::C, "u[0:N]", &map, &[]),
            Ok("unew[0:N]".to_string())
        );
        assert!(rewrite_in_caller(Lang::C, "u[0:n]", &map, &["n".to_string()]).is_err());
        let bad = vec![("u".to_string(), "&a[4]".to_string())];
        assert!(rewrite_in_caller(Lang::C, "u[0:10]", &bad, &[]).is_err());
        // Fortran names are case-insensitive; a number keeps its exponent.
        let map = vec![("u".to_string(), "grid".to_string())];
        assert_eq!(
            rewrite_in_caller(Lang::Fortran, "U(1:1e3)", &map, &[]),
            Ok("grid(1:1e3)".to_string())
        );
    }
}

/// An `if` that guards a line: its condition as written and the lines of
/// the `if` and of the end of the code it guards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    pub line: u32,
    pub end_line: u32,
    pub condition: String,
}

impl SourceFile {
    /// The innermost `if` (without an `else` branch) whose guarded code
    /// holds line `n`, looking only at `if`s that start in lines `a..=b`
    /// (as the parser reads them).
    pub fn guard_of(&self, n: u32, a: u32, b: u32) -> Option<Guard> {
        // In the order they start: a later one that holds `n` is inside.
        self.syntax()
            .ifs
            .iter()
            .rfind(|g| (a..=b).contains(&g.line) && !g.has_else && g.first <= n && n <= g.last)
            .map(|g| Guard {
                line: g.line,
                end_line: g.last,
                condition: g.condition.clone(),
            })
    }
}

#[cfg(test)]
mod guard_tests {
    use super::*;

    #[test]
    fn c_guards() {
        let text = "void f(int n, double *a) {\n  for (int s = 0; s < n; s++) {\n    if (s % 4 == 0) {\n      for (int i = 0; i < n; i++)\n        a[i] = s;\n    }\n    if (s > 2) a[0] = 1; else a[0] = 2;\n    a[1] = 3;\n  }\n}\n";
        let f = SourceFile::new("g.c", "g.c".into(), Lang::C, text.to_string());
        let g = f.guard_of(5, 2, 9).expect("guarded");
        assert_eq!(
            (g.line, g.end_line, g.condition.as_str()),
            (3, 6, "s % 4 == 0")
        );
        assert_eq!(f.guard_of(7, 2, 9), None, "an if with an else");
        assert_eq!(f.guard_of(8, 2, 9), None);
    }

    #[test]
    fn fortran_guards() {
        let text = "program p\n  do s = 1, n\n    if (mod(s, 4) == 0) then\n      a = s\n    end if\n    if (s > 2) b = 1\n    c = 2\n  end do\nend program p\n";
        let f = SourceFile::new("g.f90", "g.f90".into(), Lang::Fortran, text.to_string());
        let g = f.guard_of(4, 2, 8).expect("guarded");
        assert_eq!(
            (g.line, g.end_line, g.condition.as_str()),
            (3, 4, "mod(s, 4) == 0")
        );
        assert_eq!(
            f.guard_of(6, 2, 8).map(|g| g.condition),
            Some("s > 2".to_string())
        );
        assert_eq!(f.guard_of(7, 2, 8), None);
        // An `if` with an `else`, and a condition over two lines.
        let text = "program p\n  do s = 1, n\n    if (s > 2) then\n      a = 1\n    else\n      a = 2\n    end if\n    if (mod(s, 4) == 0 .and. &\n        s > 1) then\n      b = s\n    end if\n  end do\nend program p\n";
        let f = SourceFile::new("g.f90", "g.f90".into(), Lang::Fortran, text.to_string());
        assert_eq!(f.guard_of(4, 2, 12), None, "an if with an else");
        let g = f.guard_of(10, 2, 12).expect("guarded");
        assert_eq!(
            (g.line, g.end_line, g.condition.as_str()),
            (8, 10, "mod(s, 4) == 0 .and. s > 1")
        );
    }

    /// C++ through its grammar: a guard inside a range-for over a
    /// std::vector, the innermost of two, and one that is not the loop's.
    #[test]
    fn cpp_guards() {
        let text = "#include <vector>\nvoid f(std::vector<double> &v, int n) {\n  if (n > 0) {\n    for (int s = 0; s < n; s++) {\n      if (s % 4 == 0)\n        for (auto &x : v) {\n          if (x > 1.0) x = 0;\n        }\n    }\n  }\n}\n";
        let f = SourceFile::new("g.cpp", "g.cpp".into(), Lang::C, text.to_string());
        let g = f.guard_of(7, 4, 9).expect("guarded");
        assert_eq!(
            (g.line, g.end_line, g.condition.as_str()),
            (7, 7, "x > 1.0")
        );
        let g = f.guard_of(6, 4, 9).expect("guarded");
        assert_eq!(
            (g.line, g.end_line, g.condition.as_str()),
            (5, 8, "s % 4 == 0")
        );
        // The `if` at line 3 starts before the loop's lines.
        assert_eq!(f.guard_of(4, 4, 9), None);
        assert_eq!(f.guard_of(4, 2, 9).map(|g| g.line), Some(3));
    }
}
