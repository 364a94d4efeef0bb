//! Uses of names, and the reductions and scalar writes of a loop body.

use std::collections::BTreeSet;

use super::lex::{matching, Tok, Token, C_KEYWORDS, F_KEYWORDS};
use super::{Lang, SourceFile};

/// One use of a name in a range of code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// Lookup key (lower case in Fortran).
    pub key: String,
    pub line: u32,
    /// Assigned to (the left side of `=`, `+=`, ..., or `++`/`--`).
    pub write: bool,
    /// Read (the right side, an index, or a compound assignment).
    pub read: bool,
    /// Followed by an index (`a[i]`, `a(i)`).
    pub indexed: bool,
    /// Passed to a call or used as a whole (the callee may read or write it).
    pub whole: bool,
    /// Token index of the name.
    pub tok: usize,
}

/// A reduction found in a loop body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reduction {
    /// "max", "min", "+", "*".
    pub op: String,
    pub var: String,
    pub line: u32,
    /// The statement, trimmed, for the evidence.
    pub statement: String,
}

/// What a compute region's loop nest does with scalars.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoopBody {
    pub reductions: Vec<Reduction>,
    /// Scalars written in a way that is not a recognized reduction.
    pub other_scalar_writes: Vec<(String, u32)>,
}

impl SourceFile {
    /// Uses of names in tokens whose line is in `a..=b`, skipping the lines
    /// in `skip` (inclusive ranges).
    pub fn uses(&self, a: u32, b: u32, skip: &[(u32, u32)]) -> Vec<Use> {
        let lo = self.tokens.partition_point(|t| t.line < a);
        let hi = self.tokens.partition_point(|t| t.line <= b);
        let mut out = Vec::new();
        for i in lo..hi {
            let t = &self.tokens[i];
            if t.kind != Tok::Ident || skip.iter().any(|(x, y)| *x <= t.line && t.line <= *y) {
                continue;
            }
            if self.is_keyword(&t.key) {
                continue;
            }
            // Member access (a.b, a->b, a%b): only the base counts.
            if i > 0 && matches!(self.tokens[i - 1].text.as_str(), "." | "->" | "%") {
                continue;
            }
            let next = self.tokens.get(i + 1).map(|t| t.text.as_str());
            let open = match self.lang {
                Lang::C => "[",
                Lang::Fortran => "(",
            };
            // A C function call is not a variable use.
            if self.lang == Lang::C && next == Some("(") {
                continue;
            }
            let mut j = i + 1;
            let mut indexed = false;
            while self.tokens.get(j).map(|t| t.text.as_str()) == Some(open) {
                match matching(&self.tokens, j) {
                    Some(k) => {
                        j = k + 1;
                        indexed = true;
                    }
                    None => break,
                }
            }
            // Fortran: `name(` could be a call; with a declaration it is an
            // index. Callers check declarations; keep it as indexed here.
            let after = self.tokens.get(j).map(|t| t.text.as_str()).unwrap_or("");
            let before = if i > 0 {
                self.tokens[i - 1].text.as_str()
            } else {
                ""
            };
            let line_start = i == 0
                || self.tokens[i - 1].line != t.line
                || before == ";"
                || before == "{"
                || before == "}"
                || before == ")";
            let assign = matches!(
                after,
                "=" | "+=" | "-=" | "*=" | "/=" | "%=" | "&=" | "|=" | "^=" | "<<=" | ">>="
            );
            let compound = assign && after != "=";
            let incdec = matches!(after, "++" | "--") || matches!(before, "++" | "--");
            let write = (assign
                && (self.lang == Lang::C || line_start || before == "then" || before == ")"))
                || incdec;
            let in_call = matches!(before, "(" | ",") && matches!(after, ")" | ",") && !indexed;
            out.push(Use {
                key: t.key.clone(),
                line: t.line,
                write,
                read: !write || compound || incdec,
                indexed,
                whole: in_call,
                tok: i,
            });
        }
        out
    }

    fn is_keyword(&self, k: &str) -> bool {
        match self.lang {
            Lang::C => C_KEYWORDS.contains(&k),
            Lang::Fortran => F_KEYWORDS.contains(&k),
        }
    }

    /// The text of tokens `a..b` joined with single spaces where needed.
    pub fn tokens_text(&self, a: usize, b: usize) -> String {
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

    /// Scalars the code in `a..=b` writes, and whether each write is a
    /// reduction. `locals` are names declared inside the region or loop
    /// indices (private anyway); `arrays` are array names (their element
    /// writes are not scalar writes).
    pub fn loop_body(&self, a: u32, b: u32, locals: &[String], arrays: &[String]) -> LoopBody {
        let mut body = LoopBody::default();
        let uses = self.uses(a, b, &[]);
        let mut seen: Vec<(String, Option<Reduction>)> = Vec::new();
        for u in uses.iter().filter(|u| u.write && !u.indexed) {
            if locals.contains(&u.key) || arrays.contains(&u.key) {
                continue;
            }
            let red = self.reduction_at(u);
            seen.push((u.key.clone(), red));
        }
        // Also `if (x > v) v = x` is caught by reduction_at through the
        // preceding `if`.
        let mut names: Vec<String> = seen.iter().map(|(k, _)| k.clone()).collect();
        names.dedup();
        names.sort();
        names.dedup();
        for n in names {
            let writes: Vec<&Option<Reduction>> = seen
                .iter()
                .filter(|(k, _)| *k == n)
                .map(|(_, r)| r)
                .collect();
            let ops: BTreeSet<&str> = writes
                .iter()
                .filter_map(|r| r.as_ref().map(|r| r.op.as_str()))
                .collect();
            if writes.iter().all(|r| r.is_some()) && ops.len() == 1 {
                if let Some(Some(r)) = writes.first() {
                    body.reductions.push(r.clone());
                }
            } else {
                let line = uses
                    .iter()
                    .find(|u| u.key == n && u.write)
                    .map(|u| u.line)
                    .unwrap_or(a);
                body.other_scalar_writes.push((n, line));
            }
        }
        body
    }

    /// The reduction a write of a scalar performs, if it is one.
    fn reduction_at(&self, u: &Use) -> Option<Reduction> {
        let t = &self.tokens;
        let i = u.tok;
        let var = &u.key;
        let op_tok = t.get(i + 1)?.text.as_str();
        let stmt_end = self.statement_end(i);
        let rhs = (i + 2)..stmt_end;
        let shown = t[i].text.clone();
        let statement = self.tokens_text(self.statement_start(i), stmt_end);
        let make = |op: &str| Reduction {
            op: op.to_string(),
            var: shown.clone(),
            line: u.line,
            statement: statement.clone(),
        };
        match op_tok {
            "+=" | "-=" => return Some(make("+")),
            "*=" => return Some(make("*")),
            "=" => {}
            _ => return None,
        }
        let r: Vec<&Token> = t[rhs.clone()].iter().collect();
        if r.is_empty() {
            return None;
        }
        let is_var = |tk: &Token| tk.kind == Tok::Ident && tk.key == *var;
        // v = max(v, ...), fmax(...), min(...)
        if r.len() >= 3 && r[0].kind == Tok::Ident && r[1].text == "(" {
            let f = r[0].key.to_ascii_lowercase();
            let op = match f.as_str() {
                "fmax" | "fmaxf" | "fmaxl" | "max" | "amax1" | "dmax1" | "std::max" => Some("max"),
                "fmin" | "fminf" | "fminl" | "min" | "amin1" | "dmin1" => Some("min"),
                _ => None,
            };
            if let Some(op) = op {
                let close = matching(t, rhs.start + 1)?;
                if close + 1 == stmt_end && t[rhs.start + 2..close].iter().any(&is_var) {
                    return Some(make(op));
                }
            }
        }
        // v = v + e, v = e + v (top level only), v = v * e
        let depth0: Vec<(usize, &Token)> = {
            let mut d = 0i32;
            let mut v = Vec::new();
            for (k, tk) in r.iter().enumerate() {
                match tk.text.as_str() {
                    "(" | "[" => d += 1,
                    ")" | "]" => d -= 1,
                    _ => {}
                }
                if d == 0 {
                    v.push((k, *tk));
                }
            }
            v
        };
        let top_ops: BTreeSet<&str> = depth0
            .iter()
            .filter(|(_, tk)| tk.kind == Tok::Punct && !matches!(tk.text.as_str(), ")" | "]"))
            .map(|(_, tk)| tk.text.as_str())
            .collect();
        let first_is_v = is_var(r[0])
            && r.get(1)
                .is_some_and(|x| x.kind == Tok::Punct && x.text != "(" && x.text != "[");
        let last_is_v = r.len() >= 2 && is_var(r[r.len() - 1]);
        if (first_is_v || last_is_v) && !top_ops.is_empty() {
            if top_ops.iter().all(|o| matches!(*o, "+"))
                || (first_is_v && top_ops.iter().all(|o| matches!(*o, "+" | "-")))
            {
                return Some(make("+"));
            }
            if top_ops.iter().all(|o| *o == "*") {
                return Some(make("*"));
            }
        }
        // v = a > b ? a : b (C)
        if self.lang == Lang::C && top_ops.contains("?") {
            let q = depth0
                .iter()
                .find(|(_, x)| x.text == "?")
                .map(|(k, _)| *k)?;
            let c = depth0
                .iter()
                .find(|(_, x)| x.text == ":")
                .map(|(k, _)| *k)?;
            let cmp = depth0
                .iter()
                .find(|(k, x)| *k < q && matches!(x.text.as_str(), ">" | ">=" | "<" | "<="))?;
            let lhs = &r[..cmp.0];
            let rhs_c = &r[cmp.0 + 1..q];
            let a_txt = &r[q + 1..c];
            let b_txt = &r[c + 1..];
            let same = |x: &[&Token], y: &[&Token]| {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.text == q.text)
            };
            let greater = matches!(cmp.1.text.as_str(), ">" | ">=");
            let mentions_v = lhs.iter().chain(rhs_c).any(|x| is_var(x));
            if mentions_v {
                if same(a_txt, lhs) && same(b_txt, rhs_c) {
                    return Some(make(if greater { "max" } else { "min" }));
                }
                if same(a_txt, rhs_c) && same(b_txt, lhs) {
                    return Some(make(if greater { "min" } else { "max" }));
                }
            }
        }
        // if (x > v) v = x;   if (v < x) v = x;
        let start = self.statement_start(i);
        if start >= 1 && t[start - 1].text == ")" {
            let open = (0..start - 1)
                .rev()
                .find(|&k| matching(t, k) == Some(start - 1))?;
            if open >= 1 && t[open - 1].key == "if" {
                let cond = &t[open + 1..start - 1];
                let pos = cond.iter().position(|x| {
                    matches!(
                        x.text.as_str(),
                        ">" | ">=" | "<" | "<=" | ".gt." | ".lt." | ".ge." | ".le."
                    )
                })?;
                let (l, rr) = (&cond[..pos], &cond[pos + 1..]);
                let rhs_t: Vec<&Token> = r.clone();
                let same = |x: &[Token], y: &[&Token]| {
                    x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.text == q.text)
                };
                let gt = matches!(cond[pos].text.as_str(), ">" | ">=" | ".gt." | ".ge.");
                let v_left = l.len() == 1 && is_var(&l[0]);
                let v_right = rr.len() == 1 && is_var(&rr[0]);
                // (x > v) v = x  -> max;  (v < x) v = x -> max
                if v_right && same(l, &rhs_t) {
                    return Some(make(if gt { "max" } else { "min" }));
                }
                if v_left && same(rr, &rhs_t) {
                    return Some(make(if gt { "min" } else { "max" }));
                }
            }
        }
        None
    }

    /// First token of the statement holding token `i`.
    fn statement_start(&self, i: usize) -> usize {
        let t = &self.tokens;
        match self.lang {
            Lang::C => {
                let mut k = i;
                while k > 0 && !matches!(t[k - 1].text.as_str(), ";" | "{" | "}") {
                    // Stop after `if (...)`, `else`, `for (...)` heads.
                    if t[k - 1].text == ")" {
                        if let Some(open) =
                            (0..k - 1).rev().find(|&o| matching(t, o) == Some(k - 1))
                        {
                            if open >= 1
                                && matches!(t[open - 1].key.as_str(), "if" | "for" | "while")
                            {
                                break;
                            }
                        }
                    }
                    if t[k - 1].key == "else" {
                        break;
                    }
                    k -= 1;
                }
                k
            }
            Lang::Fortran => {
                let line = t[i].line;
                let mut k = i;
                while k > 0 && t[k - 1].line == line && t[k - 1].text != ";" {
                    // `if (cond) v = x` on one line: the statement is after `)`.
                    if t[k - 1].text == ")" {
                        if let Some(open) =
                            (0..k - 1).rev().find(|&o| matching(t, o) == Some(k - 1))
                        {
                            if open >= 1 && t[open - 1].key == "if" && t[open - 1].line == line {
                                break;
                            }
                        }
                    }
                    k -= 1;
                }
                k
            }
        }
    }

    /// One past the last token of the statement holding token `i`.
    fn statement_end(&self, i: usize) -> usize {
        let t = &self.tokens;
        match self.lang {
            Lang::C => {
                let mut d = 0i32;
                let mut k = i;
                while k < t.len() {
                    match t[k].text.as_str() {
                        "(" | "[" | "{" => d += 1,
                        ")" | "]" | "}" => d -= 1,
                        ";" if d <= 0 => return k,
                        _ => {}
                    }
                    k += 1;
                }
                k
            }
            Lang::Fortran => {
                let line = t[i].line;
                let mut k = i;
                while k < t.len() && t[k].line == line && t[k].text != ";" {
                    k += 1;
                }
                k
            }
        }
    }
}
