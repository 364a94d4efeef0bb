//! Statements of a block, as token ranges: what a host loop's body or a
//! function's body holds, one statement at a time.

use super::lex::{c_statement_end, matching};
use super::{Lang, SourceFile};

impl SourceFile {
    /// The tokens of lines `a..=b`, as a range of token indices.
    pub fn tokens_of_lines(&self, a: u32, b: u32) -> (usize, usize) {
        let t = &self.tokens;
        (
            t.partition_point(|x| x.line < a),
            t.partition_point(|x| x.line <= b),
        )
    }

    /// The statements of tokens `lo..hi`, each as (first token, one past
    /// its last): C statements as the language ends them (a braced block
    /// or a loop with its body is one), Fortran statements one per line
    /// (a parenthesis open at the end of a line carries on). None when a
    /// statement runs past `hi`.
    pub fn statements(&self, lo: usize, hi: usize) -> Option<Vec<(usize, usize)>> {
        let t = &self.tokens;
        let mut out = Vec::new();
        let mut k = lo;
        while k < hi {
            let end = match self.lang {
                Lang::C => c_statement_end(t, k)?,
                Lang::Fortran => {
                    let mut e = k;
                    while e < hi && t[e].line == t[k].line {
                        e = match t[e].text.as_str() {
                            "(" | "[" => matching(t, e)? + 1,
                            _ => e + 1,
                        };
                    }
                    e
                }
            };
            if end > hi || end <= k {
                return None;
            }
            out.push((k, end));
            k = end;
        }
        Some(out)
    }

    /// The tokens of a loop's body (without a C body's braces).
    pub fn loop_body_tokens(&self, lp: &super::Loop) -> (usize, usize) {
        match self.lang {
            Lang::C => {
                if self.tokens.get(lp.body_tok).map(|x| x.text.as_str()) == Some("{") {
                    (lp.body_tok + 1, lp.end_tok.saturating_sub(1))
                } else {
                    (lp.body_tok, lp.end_tok)
                }
            }
            Lang::Fortran => self.tokens_of_lines(lp.header_line + 1, lp.end_line - 1),
        }
    }

    /// The tokens of the body of the function holding line `n` (without a
    /// C body's braces; a Fortran unit's lines after its header, up to its
    /// `end` or `contains`).
    pub fn function_body_tokens(&self, n: u32) -> Option<(usize, usize)> {
        let unit = self.unit_of(n)?;
        let t = &self.tokens;
        match self.lang {
            Lang::C => {
                let (lo, _) = self.tokens_of_lines(unit.0, unit.0);
                let brace = (lo..t.len())
                    .take_while(|&k| t[k].line == unit.0)
                    .find(|&k| t[k].text == "{" && k > 0 && t[k - 1].text == ")")?;
                Some((brace + 1, matching(t, brace)?))
            }
            Lang::Fortran => {
                let (lo, _) = self.tokens_of_lines(unit.0 + 1, unit.0 + 1);
                let (_, hi) = self.tokens_of_lines(unit.0 + 1, unit.1.saturating_sub(1));
                Some((lo, hi.max(lo)))
            }
        }
    }

    /// The statement holds a declaration and nothing the host runs: a
    /// type first (C), or `::`, `implicit` or `use` (Fortran), and no
    /// call.
    pub fn is_plain_declaration(&self, lo: usize, hi: usize) -> bool {
        let t = &self.tokens[lo..hi];
        let Some(first) = t.first() else {
            return false;
        };
        match self.lang {
            Lang::C => {
                let calls = t.windows(2).any(|w| {
                    w[0].kind == super::Tok::Ident
                        && w[1].text == "("
                        && !super::lex::C_TYPES.contains(&w[0].key.as_str())
                });
                (super::lex::C_TYPES.contains(&first.key.as_str()) || first.key == "struct")
                    && !calls
            }
            Lang::Fortran => {
                t.iter().any(|x| x.text == "::") || matches!(first.key.as_str(), "implicit" | "use")
            }
        }
    }
}

impl SourceFile {
    /// The last line of the (outermost) statement that starts on line `n`
    /// as the parser read it (or, in Fortran, that line): where a
    /// directive goes after it.
    pub fn statement_end_line(&self, n: u32) -> u32 {
        if self.lang == Lang::Fortran {
            return n;
        }
        self.syntax()
            .statements
            .iter()
            .find(|s| s.from.0 == n)
            .map_or(n, |s| s.last.max(n))
    }

    /// The statement a directive ending at line `n` applies to, in C, as
    /// the parser read it: (its first token, one past its last).
    pub fn statement_after(&self, n: u32) -> Option<(usize, usize)> {
        let s = self.syntax().statement_after(n)?;
        let at = |p: super::syntax::Pos| self.tokens.partition_point(|t| (t.line, t.col) < p);
        let (a, b) = (at(s.from), at(s.to));
        (a < b).then_some((a, b))
    }

    /// The function a statement (tokens `a..b`) does nothing but call:
    /// `f(...);` in C, `call f(...)` in Fortran.
    pub fn call_statement(&self, a: usize, b: usize) -> Option<String> {
        let t = &self.tokens;
        let name = match self.lang {
            Lang::C => {
                if t.get(b.checked_sub(1)?)?.text != ";" {
                    return None;
                }
                (matching(t, a + 1)? + 2 == b).then_some(a)?
            }
            Lang::Fortran => {
                if t.get(a)?.key != "call" {
                    return None;
                }
                let ok = b == a + 2 || (t.get(a + 2)?.text == "(" && matching(t, a + 2)? + 1 == b);
                ok.then_some(a + 1)?
            }
        };
        let tk = t.get(name)?;
        (tk.kind == super::Tok::Ident
            && (self.lang == Lang::Fortran || t.get(name + 1)?.text == "("))
            .then(|| tk.text.clone())
    }
}
