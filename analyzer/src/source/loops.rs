//! Loops and program units: host loops, C functions, Fortran units.

use std::collections::BTreeSet;

use super::consts::At;
use super::lex::{c_statement_end, matching, strip_f_comment, tokenize_fortran, Tok, Token};
use super::{Lang, SourceFile};

/// A loop statement in the host code (or inside a region: callers decide).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    /// "for", "while", "do" (C do-while or Fortran do), "do while".
    pub kind: String,
    pub header_line: u32,
    /// Last line of the loop (closing brace, `end do`, or `while (...);`).
    pub end_line: u32,
    /// Token index of the keyword, and of the first token after the loop.
    pub first_tok: usize,
    pub end_tok: usize,
    /// Index of the first token of the body.
    pub body_tok: usize,
}

impl SourceFile {
    /// Loops that contain line `n` in their body, innermost first.
    pub fn enclosing_loops(&self, n: u32) -> Vec<&Loop> {
        let mut v: Vec<&Loop> = self
            .loops
            .iter()
            .filter(|l| l.header_line < n && n <= l.end_line)
            .collect();
        v.sort_by_key(|l| std::cmp::Reverse(l.header_line));
        v
    }

    /// The loop whose header is at line `n`.
    pub fn loop_at(&self, n: u32) -> Option<&Loop> {
        self.loops.iter().find(|l| l.header_line == n)
    }

    /// How many loops starting with `lp` are perfectly nested (each body is
    /// exactly the next loop), at most `max`.
    pub fn perfect_depth(&self, lp: &Loop, max: usize) -> usize {
        let mut depth = 1;
        let mut cur = lp.clone();
        while depth < max {
            let inner = match self.lang {
                Lang::C => {
                    // Body is a loop, or `{ loop }`.
                    let mut b = cur.body_tok;
                    let mut end = cur.end_tok;
                    if self.tokens.get(b).map(|t| t.text.as_str()) == Some("{") {
                        b += 1;
                        end -= 1;
                    }
                    self.loops
                        .iter()
                        .find(|l| l.first_tok == b && l.end_tok == end && l.kind == "for")
                }
                Lang::Fortran => self.loops.iter().find(|l| {
                    l.kind == "do"
                        && l.header_line == next_code_line(&self.lines, cur.header_line)
                        && next_code_line(&self.lines, l.end_line) == cur.end_line
                }),
            };
            match inner {
                Some(l) => {
                    depth += 1;
                    cur = l.clone();
                }
                None => break,
            }
        }
        depth
    }

    /// The function (C) or program unit (Fortran) containing line `n`:
    /// (first line, last line of its executable part).
    pub fn unit_of(&self, n: u32) -> Option<(u32, u32)> {
        self.units
            .iter()
            .filter(|(a, b)| *a <= n && n <= *b)
            .min_by_key(|(a, b)| b - a)
            .copied()
    }

    /// The index variable of a `for`/`do` loop.
    pub fn loop_index(&self, lp: &Loop) -> Option<String> {
        let t = &self.tokens;
        match self.lang {
            Lang::C if lp.kind == "for" => {
                // for ( [type] i = ...
                let open = lp.first_tok + 1;
                let semi = (open..lp.body_tok).find(|&k| t[k].text == ";")?;
                let eq = (open..semi).find(|&k| t[k].text == "=")?;
                (eq > open + 1).then(|| t[eq - 1].key.clone())
            }
            Lang::Fortran if lp.kind == "do" => {
                let k = lp.first_tok;
                (t.get(k + 2).map(|x| x.text.as_str()) == Some("=")).then(|| t[k + 1].key.clone())
            }
            _ => None,
        }
    }

    /// The trip count of a loop whose bounds are integer constants: C
    /// `for (int j = 0; j < 16; j++)` (`<`, `<=`, `++`, `+= 1`), Fortran
    /// `do j = 1, 16`. A bound may be an expression of literals and named
    /// constants (`j < COLS - 1` with `#define COLS 16`, a `const int`, a
    /// Fortran `parameter`: see [`SourceFile::constant`]). None for any
    /// other form, or a name without a certain value.
    pub fn trip_count(&self, lp: &Loop) -> Option<u64> {
        let (a, b) = self.unit_bounds(lp)?;
        let b = b?;
        (b >= a).then(|| b.abs_diff(a))
    }

    /// The first value of the index of a loop that counts up by one from
    /// an integer constant (`for (int s = 1; ...; s++)`, `do s = 1, n`),
    /// whatever its end.
    pub fn unit_start(&self, lp: &Loop) -> Option<i64> {
        self.unit_bounds(lp).map(|(a, _)| a)
    }

    /// The first value and one past the last of a unit-stride loop's
    /// index, when they are integer constants (the end: None when it is
    /// not one).
    fn unit_bounds(&self, lp: &Loop) -> Option<(i64, Option<i64>)> {
        let t = &self.tokens;
        // The header's tokens: C up to the body, Fortran its line.
        let toks: &[Token] = match self.lang {
            Lang::C => t.get(lp.first_tok..lp.body_tok)?,
            Lang::Fortran => {
                let rest = t.get(lp.first_tok..)?;
                let n = rest.iter().take_while(|x| x.line == lp.header_line).count();
                &rest[..n]
            }
        };
        let words: Vec<&str> = toks.iter().map(|x| x.key.as_str()).collect();
        let at = At {
            line: lp.header_line,
            tok: lp.first_tok,
        };
        let value = |a: usize, b: usize| self.int_value(toks.get(a..b)?, at);
        match self.lang {
            Lang::C if lp.kind == "for" => {
                // for ( [type] i = A ; i < B ; i ++ )
                let semi = words.iter().position(|w| *w == ";")?;
                let eq = words[..semi].iter().position(|w| *w == "=")?;
                let var = *words.get(eq.checked_sub(1)?)?;
                let a = value(eq + 1, semi)?;
                let cond_at = semi + 1;
                let semi2 = cond_at + words[cond_at..].iter().position(|w| *w == ";")?;
                let b = match &words[cond_at..semi2] {
                    [v, "<", ..] if v == &var => value(cond_at + 2, semi2),
                    [v, "<=", ..] if v == &var => {
                        value(cond_at + 2, semi2).and_then(|b| b.checked_add(1))
                    }
                    [v, "<", "=", ..] if v == &var => {
                        value(cond_at + 3, semi2).and_then(|b| b.checked_add(1))
                    }
                    _ => return None,
                };
                let inc: Vec<&str> = words[semi2 + 1..]
                    .iter()
                    .copied()
                    .filter(|w| *w != ")" && *w != "{")
                    .collect();
                let unit = matches!(
                    inc.as_slice(),
                    [v, "++"] | ["++", v] | [v, "+", "+"] | ["+", "+", v] if *v == var
                ) || matches!(inc.as_slice(), [v, "+=", "1"] | [v, "+", "=", "1"] if *v == var);
                unit.then_some((a, b))
            }
            Lang::Fortran if lp.kind == "do" => {
                // [label :] do i = A , B
                let d = match words.as_slice() {
                    [_, ":", "do", ..] => 2,
                    ["do", ..] => 0,
                    _ => return None,
                };
                if words.get(d + 2) != Some(&"=") {
                    return None;
                }
                let mut depth = 0i32;
                let commas: Vec<usize> = (d + 3..words.len())
                    .filter(|&k| {
                        match words[k] {
                            "(" => depth += 1,
                            ")" => depth -= 1,
                            _ => {}
                        }
                        depth == 0 && words[k] == ","
                    })
                    .collect();
                let [comma] = commas.as_slice() else {
                    return None;
                };
                let a = value(d + 3, *comma)?;
                let b = value(comma + 1, words.len()).and_then(|b| b.checked_add(1));
                Some((a, b))
            }
            _ => None,
        }
    }

    /// Text of the loop header (first line), trimmed.
    pub fn header_text(&self, lp: &Loop) -> String {
        self.line(lp.header_line).trim().to_string()
    }
}

/// The next line after `n` holding code (not blank, not only a comment).
fn next_code_line(lines: &[String], n: u32) -> u32 {
    let mut k = n + 1;
    while (k as usize) <= lines.len() {
        let l = &lines[k as usize - 1];
        if !strip_f_comment(l, false).trim().is_empty() {
            return k;
        }
        k += 1;
    }
    k
}

pub(super) fn c_loops(t: &[Token]) -> Vec<Loop> {
    let mut loops = Vec::new();
    let mut do_tails = BTreeSet::new();
    for i in 0..t.len() {
        if t[i].kind != Tok::Ident {
            continue;
        }
        let kind = t[i].text.as_str();
        if !matches!(kind, "for" | "while" | "do") || do_tails.contains(&i) {
            continue;
        }
        let Some(end) = c_statement_end(t, i) else {
            continue;
        };
        let body = match kind {
            "do" => {
                if let Some(bend) = c_statement_end(t, i + 1) {
                    do_tails.insert(bend);
                }
                i + 1
            }
            _ => match matching(t, i + 1) {
                Some(c) => c + 1,
                None => continue,
            },
        };
        loops.push(Loop {
            kind: kind.to_string(),
            header_line: t[i].line,
            end_line: t[end - 1].line,
            first_tok: i,
            end_tok: end,
            body_tok: body,
        });
    }
    loops
}

/// C function bodies: `) {` at brace depth 0 to the matching `}`.
pub(super) fn c_functions(t: &[Token]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut d = 0;
    let mut i = 0;
    while i < t.len() {
        match t[i].text.as_str() {
            "{" => {
                if d == 0 && i > 0 && t[i - 1].text == ")" {
                    if let Some(close) = matching(t, i) {
                        out.push((t[i].line, t[close].line));
                        i = close + 1;
                        continue;
                    }
                }
                d += 1;
            }
            "}" => d -= 1,
            _ => {}
        }
        i += 1;
    }
    out
}

/// Fortran do loops by matching `do` / `end do` lines.
pub(super) fn fortran_loops(lines: &[String]) -> Vec<Loop> {
    let mut loops = Vec::new();
    let mut stack: Vec<(String, u32, usize)> = Vec::new();
    let mut tok_index = 0usize;
    for (ln, l) in lines.iter().enumerate() {
        let line = ln as u32 + 1;
        let code = strip_f_comment(l, false).trim().to_ascii_lowercase();
        let ntok = tokenize_fortran(std::slice::from_ref(l)).len();
        // Strip a construct label "name: do ..."
        let code = match code.find(':') {
            Some(i)
                if !code[..i].contains(['(', '=', ' '])
                    && code[i + 1..].trim_start().starts_with("do")
                    && !code[i..].starts_with("::") =>
            {
                code[i + 1..].trim_start().to_string()
            }
            _ => code,
        };
        let is_do = code == "do" || code.starts_with("do ") || code.starts_with("do(");
        if is_do {
            let kind = if code[2..].trim_start().starts_with("while") {
                "do while"
            } else {
                "do"
            };
            stack.push((kind.to_string(), line, tok_index));
        } else if code == "enddo" || code.starts_with("end do") || code.starts_with("enddo ") {
            if let Some((kind, header, first)) = stack.pop() {
                loops.push(Loop {
                    kind,
                    header_line: header,
                    end_line: line,
                    first_tok: first,
                    end_tok: tok_index + ntok,
                    body_tok: first,
                });
            }
        }
        tok_index += ntok;
    }
    loops.sort_by_key(|l| l.header_line);
    loops
}

/// Fortran program units: header line to the line before `contains` or the `end`.
pub(super) fn fortran_units(lines: &[String]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut stack: Vec<u32> = Vec::new();
    let mut contained: Vec<bool> = Vec::new();
    for (ln, l) in lines.iter().enumerate() {
        let line = ln as u32 + 1;
        let code = strip_f_comment(l, false).trim().to_ascii_lowercase();
        let words: Vec<&str> = code
            .split(|c: char| c.is_whitespace() || c == '(')
            .filter(|w| !w.is_empty())
            .collect();
        let head = words
            .iter()
            .position(|w| matches!(*w, "program" | "subroutine" | "function" | "module"));
        let is_end = words.first() == Some(&"end")
            && matches!(
                words.get(1).copied(),
                None | Some("program" | "subroutine" | "function" | "module")
            );
        if is_end {
            if let Some(start) = stack.pop() {
                let was_contained = contained.pop().unwrap_or(false);
                if !was_contained {
                    out.push((start, line));
                }
            }
        } else if code == "contains" {
            if let (Some(&start), Some(c)) = (stack.last(), contained.last_mut()) {
                if !*c {
                    out.push((start, line));
                    *c = true;
                }
            }
        } else if let Some(h) = head {
            // "end function" handled above; "real function f(x)" is a header.
            if words[..h].iter().all(|w| !w.contains('=')) && !code.contains('=') {
                stack.push(line);
                contained.push(false);
            }
        }
    }
    out
}
