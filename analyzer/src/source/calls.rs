//! Functions and the calls between them: a function's name and parameters,
//! and the arguments of a call, so that an expression written in a callee
//! (`u[0:nx*ny]`) can be written in its caller's names.

use super::lex::{matching, Tok};
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

impl SourceFile {
    /// The header of the function or subprogram holding line `n`.
    pub fn function_at(&self, n: u32) -> Option<FunctionHeader> {
        let unit = self.unit_of(n)?;
        let t = &self.tokens;
        let (name_tok, open) = match self.lang {
            Lang::C => {
                // The body's `{`, right after the parameter list's `)`.
                let lo = t.partition_point(|x| x.line < unit.0);
                let brace = (lo..t.len())
                    .take_while(|&k| t[k].line == unit.0)
                    .find(|&k| t[k].text == "{" && k > 0 && t[k - 1].text == ")")?;
                let open = opening(t, brace - 1)?;
                (open.checked_sub(1)?, open)
            }
            Lang::Fortran => {
                let lo = t.partition_point(|x| x.line < unit.0);
                let kw = (lo..t.len())
                    .take_while(|&k| t[k].line == unit.0)
                    .find(|&k| matches!(t[k].key.as_str(), "subroutine" | "function"))?;
                let open = kw + 2;
                if t.get(open).map(|x| x.text.as_str()) != Some("(") {
                    // No parameter list.
                    return Some(FunctionHeader {
                        name: t.get(kw + 1)?.text.clone(),
                        params: Vec::new(),
                        unit,
                    });
                }
                (kw + 1, open)
            }
        };
        if t[name_tok].kind != Tok::Ident {
            return None;
        }
        let close = matching(t, open)?;
        let params = self
            .split_args(open, close)
            .into_iter()
            .filter_map(|(a, b)| self.param_name(a, b))
            .collect();
        Some(FunctionHeader {
            name: t[name_tok].text.clone(),
            params,
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
        let t = &self.tokens;
        let want = super::lang_key(self.lang, callee);
        let hi = t.partition_point(|x| x.line <= n);
        // The last call of `callee` that starts at or before `n` and whose
        // argument list reaches `n`.
        let open = (0..hi).rev().take(400).find(|&k| {
            t[k].kind == Tok::Ident
                && t[k].key == want
                && t.get(k + 1).map(|x| x.text.as_str()) == Some("(")
                && matching(t, k + 1).is_some_and(|c| t[c].line >= n)
        })? + 1;
        let close = matching(t, open)?;
        let args = self
            .split_args(open, close)
            .into_iter()
            .map(|(a, b)| self.tokens_text(a, b))
            .collect();
        Some((args, t[open - 1].line, t[close].line))
    }

    /// First and last line of every call of `callee` starting in lines
    /// `a..=b`.
    pub fn calls_in(&self, a: u32, b: u32, callee: &str) -> Vec<(u32, u32)> {
        let t = &self.tokens;
        let want = super::lang_key(self.lang, callee);
        let lo = t.partition_point(|x| x.line < a);
        let hi = t.partition_point(|x| x.line <= b);
        (lo..hi)
            .filter(|&k| {
                t[k].kind == Tok::Ident
                    && t[k].key == want
                    && t.get(k + 1).map(|x| x.text.as_str()) == Some("(")
                    // Not a declaration or definition (`void f(`,
                    // `subroutine f(`).
                    && (k == 0
                        || t[k - 1].kind != Tok::Ident
                        || matches!(t[k - 1].key.as_str(), "call" | "return"))
            })
            .filter_map(|k| Some((t[k].line, t[matching(t, k + 1)?].line)))
            .collect()
    }

    /// Token ranges of the comma-separated items between `open` and its
    /// matching `close`.
    fn split_args(&self, open: usize, close: usize) -> Vec<(usize, usize)> {
        let t = &self.tokens;
        let mut out = Vec::new();
        let mut start = open + 1;
        let mut k = open + 1;
        while k < close {
            match t[k].text.as_str() {
                "(" | "[" => match matching(t, k) {
                    Some(m) => k = m,
                    None => return Vec::new(),
                },
                "," => {
                    out.push((start, k));
                    start = k + 1;
                }
                _ => {}
            }
            k += 1;
        }
        if start < close {
            out.push((start, close));
        }
        out
    }

    /// The name a parameter declaration `a..b` declares.
    fn param_name(&self, a: usize, b: usize) -> Option<String> {
        let t = &self.tokens[a..b];
        match self.lang {
            Lang::Fortran => t
                .first()
                .filter(|x| x.kind == Tok::Ident)
                .map(|x| x.key.clone()),
            Lang::C => {
                let end = t.iter().position(|x| x.text == "[").unwrap_or(t.len());
                let name = t[..end].iter().rev().find(|x| x.kind == Tok::Ident)?;
                (name.key != "void").then(|| name.key.clone())
            }
        }
    }
}

/// The `(` that the `)` at `close` closes.
fn opening(t: &[super::Token], close: usize) -> Option<usize> {
    let mut depth = 0i32;
    for k in (0..=close).rev() {
        match t[k].text.as_str() {
            ")" => depth += 1,
            "(" => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
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

impl SourceFile {
    /// The text of tokens `a..b` joined with single spaces where needed.
    fn tokens_text(&self, a: usize, b: usize) -> String {
        let mut s = String::new();
        for t in &self.tokens[a..b.min(self.tokens.len())] {
            if !s.is_empty()
                && (t.kind != Tok::Punct || matches!(t.text.as_str(), "=" | "+" | "-" | "?" | ":"))
                && !s.ends_with(['(', '['])
            {
                s.push(' ');
            }
            s.push_str(&t.text);
        }
        s
    }
}
