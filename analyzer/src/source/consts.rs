//! Named integer constants: C object-like macros (with those of the
//! quoted headers a file includes), C/C++ `const`/`constexpr` integers,
//! Fortran `parameter`s, and integer arithmetic of literals and such names.
//!
//! A name gets a value only where the text says it for certain. A macro
//! that is function-like, redefined with another body, defined or undefined
//! under an `#if` (other than an include guard), or possibly changed by a
//! header that could not be read has none; so has a name whose nearest
//! declaration is a variable, or that is assigned anywhere it could be.

use std::path::Path;

use super::lex::c_statement_end;
use super::lex::{matching, strip_f_comment, tokenize_c, tokenize_fortran, Tok, Token};
use super::lex::{C_KEYWORDS, C_TYPES};
use super::syntax::IntExpr;
use super::{Lang, SourceFile};

/// How deep names may refer to names, and headers include headers.
const MAX_DEPTH: usize = 16;

/// Reads a file (a header) by its path.
pub(super) type Reader<'a> = &'a dyn Fn(&Path) -> std::io::Result<String>;

/// A preprocessor line that changes what a name means, in the order the
/// preprocessor meets it.
#[derive(Debug, Clone)]
pub(super) enum Pp {
    /// `#define NAME body`.
    Define {
        line: u32,
        name: String,
        body: Vec<Token>,
    },
    /// `#undef NAME`.
    Undef { line: u32, name: String },
    /// A line after which NAME means nothing certain: a function-like
    /// `#define NAME(x)`, or a define or undef under a condition.
    Opaque { line: u32, name: String },
    /// `#include "file"`: the header's lines, or None where it was not read.
    Include { line: u32, header: Option<Vec<Pp>> },
}

impl Pp {
    fn line(&self) -> u32 {
        match self {
            Pp::Define { line, .. }
            | Pp::Undef { line, .. }
            | Pp::Opaque { line, .. }
            | Pp::Include { line, .. } => *line,
        }
    }
}

/// What a name is as a macro at some point of the file.
enum Macro<'a> {
    NotOne,
    Body(&'a [Token]),
    Unknown,
}

/// The preprocessor lines of C source `lines` (a file in `dir`) that
/// define, undefine or include; quoted includes are read with `read`
/// (none is read without it). `conditional`: the file is included under
/// an `#if`.
pub(super) fn c_preprocessor(
    lines: &[String],
    dir: &Path,
    read: Option<Reader<'_>>,
    depth: usize,
    conditional: bool,
) -> Vec<Pp> {
    let directives = c_directives(lines);
    let mut out = Vec::new();
    // One entry per open #if group: whether it is an include guard.
    let mut groups: Vec<bool> = Vec::new();
    for (k, (line, text)) in directives.iter().enumerate() {
        let (word, rest) = split_word(text);
        let (name, after) = split_word(rest);
        let under_if = conditional || groups.iter().any(|guard| !guard);
        match word {
            "if" | "ifdef" | "ifndef" => {
                // `#ifndef G` then `#define G` with no body guards a header.
                let guard = word == "ifndef"
                    && directives.get(k + 1).is_some_and(|(_, next)| {
                        let (w, r) = split_word(next);
                        let (n, body) = split_word(r);
                        w == "define" && n == name && body.trim().is_empty()
                    });
                groups.push(guard);
            }
            "elif" | "else" => {
                if let Some(g) = groups.last_mut() {
                    *g = false;
                }
            }
            "endif" => {
                groups.pop();
            }
            "define" if !name.is_empty() => {
                let name = name.to_string();
                if after.starts_with('(') || under_if {
                    out.push(Pp::Opaque { line: *line, name });
                } else {
                    let body = tokenize_c(&[after.to_string()]);
                    out.push(Pp::Define {
                        line: *line,
                        name,
                        body,
                    });
                }
            }
            "undef" if !name.is_empty() => {
                let name = name.to_string();
                out.push(if under_if {
                    Pp::Opaque { line: *line, name }
                } else {
                    Pp::Undef { line: *line, name }
                });
            }
            "include" => {
                let Some(file) = rest
                    .trim()
                    .strip_prefix('"')
                    .and_then(|r| r.split('"').next())
                else {
                    // <system> headers define none of the program's names.
                    continue;
                };
                let path = dir.join(file);
                let header = read
                    .filter(|_| depth < MAX_DEPTH)
                    .and_then(|r| r(&path).ok())
                    .map(|text| {
                        let lines: Vec<String> = text.lines().map(str::to_string).collect();
                        let dir = path.parent().unwrap_or(Path::new(""));
                        c_preprocessor(&lines, dir, read, depth + 1, under_if)
                    });
                out.push(Pp::Include {
                    line: *line,
                    header,
                });
            }
            _ => {}
        }
    }
    out
}

/// `word rest`: the leading identifier (after blanks) and what follows it.
fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// The preprocessor directives of C lines outside comments: (line, the
/// text after `#`, continuations joined, comments removed).
fn c_directives(lines: &[String]) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let mut in_comment = false;
    let mut k = 0;
    while k < lines.len() {
        let line = k as u32 + 1;
        let starts_in_comment = in_comment;
        let trimmed = lines[k].trim_start();
        if !starts_in_comment && trimmed.starts_with('#') {
            let mut text = trimmed[1..].to_string();
            while text.trim_end().ends_with('\\') && k + 1 < lines.len() {
                text.truncate(text.trim_end().len() - 1);
                k += 1;
                text.push(' ');
                text.push_str(&lines[k]);
            }
            let (code, comment_open) = strip_c_comments(&text, false);
            in_comment = comment_open;
            out.push((line, code));
        } else {
            in_comment = strip_c_comments(&lines[k], starts_in_comment).1;
        }
        k += 1;
    }
    out
}

/// `s` without its comments, and whether a `/*` is left open at its end.
fn strip_c_comments(s: &str, mut in_comment: bool) -> (String, bool) {
    let b: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if in_comment {
            if c == '*' && next == Some('/') {
                in_comment = false;
                out.push(' ');
                i += 1;
            }
        } else if let Some(q) = quote {
            out.push(c);
            if c == '\\' {
                out.extend(next);
                i += 1;
            } else if c == q {
                quote = None;
            }
        } else if c == '/' && next == Some('/') {
            break;
        } else if c == '/' && next == Some('*') {
            in_comment = true;
            i += 1;
        } else {
            if c == '"' || c == '\'' {
                quote = Some(c);
            }
            out.push(c);
        }
        i += 1;
    }
    (out, in_comment)
}

/// Where a name is read: its line, and (C) the index of a token there.
#[derive(Debug, Clone, Copy)]
pub(super) struct At {
    pub line: u32,
    pub tok: usize,
}

impl SourceFile {
    /// Reads the quoted headers the file includes (C), relative to the
    /// directory it was found in, with `read`: their macros count from the
    /// `#include` line on.
    pub fn read_includes(&mut self, read: Reader<'_>) {
        if !self.pp.iter().any(|p| matches!(p, Pp::Include { .. })) {
            return;
        }
        let dir = self
            .found_at
            .parent()
            .unwrap_or(Path::new(""))
            .to_path_buf();
        self.pp = c_preprocessor(&self.lines, &dir, Some(read), 0, false);
    }

    /// The value of the integer constant `name` as the code at line `n`
    /// reads it: an object-like macro, a `const`/`constexpr` integer, a
    /// Fortran `parameter`, or arithmetic of those and literals. None
    /// where the text does not say it for certain.
    pub fn constant(&self, name: &str, n: u32) -> Option<i64> {
        self.resolve(name, self.at_line(n), 0)
    }

    /// The value of the integer expression `e` (a loop bound the parser
    /// read) as the code at line `n` reads it.
    pub fn int_expr(&self, e: &IntExpr, n: u32) -> Option<i64> {
        self.expr_value(e, self.at_line(n))
    }

    /// Where code at line `n` reads a name (C: at the line's first token;
    /// Fortran scopes go by lines alone).
    fn at_line(&self, n: u32) -> At {
        let tok = match self.lang {
            Lang::C => self.tokens().partition_point(|t| t.line < n),
            Lang::Fortran => 0,
        };
        At { line: n, tok }
    }

    fn expr_value(&self, e: &IntExpr, at: At) -> Option<i64> {
        match e {
            IntExpr::Lit(s) => int_literal(s, self.lang),
            IntExpr::Name(n) => self.resolve(n, at, 0),
            IntExpr::Neg(a) => self.expr_value(a, at)?.checked_neg(),
            IntExpr::Bin(op, a, b) => {
                let (a, b) = (self.expr_value(a, at)?, self.expr_value(b, at)?);
                match op {
                    '+' => a.checked_add(b),
                    '-' => a.checked_sub(b),
                    '*' => a.checked_mul(b),
                    '/' => a.checked_div(b),
                    '%' => a.checked_rem(b),
                    '^' => a.checked_pow(u32::try_from(b).ok()?),
                    _ => None,
                }
            }
        }
    }

    fn eval(&self, toks: &[Token], at: At, depth: usize) -> Option<i64> {
        if depth > MAX_DEPTH || toks.is_empty() {
            return None;
        }
        let mut e = Eval {
            src: self,
            toks,
            i: 0,
            at,
            depth,
        };
        let v = e.sum()?;
        (e.i == toks.len()).then_some(v)
    }

    fn resolve(&self, name: &str, at: At, depth: usize) -> Option<i64> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.lang {
            Lang::C => {
                let mut state = Macro::NotOne;
                macro_at(&self.pp, name, Some(at.line), &mut state);
                match state {
                    Macro::Body(body) => self.eval(body, at, depth + 1),
                    Macro::Unknown => None,
                    Macro::NotOne => self.c_const(name, at, depth),
                }
            }
            Lang::Fortran => self.f_parameter(&name.to_ascii_lowercase(), at.line, depth),
        }
    }

    /// A C/C++ `const` or `constexpr` integer named `name` in scope at
    /// token `at.tok`: the nearest declaration must be a constant with an
    /// initializer, and no statement may assign the name.
    fn c_const(&self, name: &str, at: At, depth: usize) -> Option<i64> {
        let t = self.tokens();
        let mut nearest: Option<(usize, usize, CDecl)> = None;
        for k in 0..t.len() {
            if t[k].kind != Tok::Ident || t[k].text != name {
                continue;
            }
            match c_declarator(t, k) {
                Some(d)
                    if k < at.tok
                        && at.tok <= d.scope.1
                        && nearest
                            .as_ref()
                            .map_or(true, |(s, j, _)| (d.scope.0, k) > (*s, *j)) =>
                {
                    nearest = Some((d.scope.0, k, d));
                }
                Some(_) => {}
                None if c_assigns(t, k) => return None,
                None => {}
            }
        }
        let (_, k, d) = nearest?;
        let init = d.init.filter(|_| d.constant)?;
        let at = At {
            line: t[k].line,
            tok: k,
        };
        self.eval(&t[init.0..init.1], at, depth + 1)
    }

    /// A Fortran `parameter` named `name` (lower case) seen from line `n`:
    /// declared in the program unit holding the line or a unit around it,
    /// or taken by `use` from a module of this file. A nearer declaration
    /// as a variable, a module of another file that may hold the name, or
    /// an assignment to it in the unit gives None.
    fn f_parameter(&self, name: &str, n: u32, depth: usize) -> Option<i64> {
        let (stmts, units) = fortran_scopes(&self.lines);
        let mut chain: Vec<usize> = (0..units.len())
            .filter(|&u| stmts[units[u].start].line <= n && n <= units[u].end_line)
            .collect();
        chain.sort_by_key(|&u| std::cmp::Reverse(units[u].start));
        let inner = *chain.first()?;
        // A parameter is never assigned: a name that is, is a variable.
        if stmts
            .iter()
            .any(|s| s.unit == Some(inner) && f_assigns(&s.toks, name))
        {
            return None;
        }
        for u in chain {
            match f_declared(&stmts, &units, u, name, 0) {
                FDecl::Parameter(s, range) => {
                    let st = &stmts[s];
                    return self.eval(&st.toks[range.0..range.1], at_line(st.line), depth + 1);
                }
                FDecl::Unknown => return None,
                FDecl::None => {}
            }
        }
        None
    }
}

fn at_line(line: u32) -> At {
    At { line, tok: 0 }
}

/// The macro state of `name` after the lines of `pp` before `before`
/// (all of them where None).
fn macro_at<'a>(pp: &'a [Pp], name: &str, before: Option<u32>, state: &mut Macro<'a>) {
    for p in pp {
        if before.is_some_and(|b| p.line() >= b) {
            break;
        }
        match p {
            Pp::Define { name: n, body, .. } if n == name => {
                *state = match state {
                    Macro::NotOne => Macro::Body(body),
                    Macro::Body(old) if same_tokens(old, body) => Macro::Body(old),
                    _ => Macro::Unknown,
                };
            }
            Pp::Undef { name: n, .. } if n == name => *state = Macro::NotOne,
            Pp::Opaque { name: n, .. } if n == name => *state = Macro::Unknown,
            Pp::Include {
                header: Some(h), ..
            } => macro_at(h, name, None, state),
            Pp::Include { header: None, .. } => {
                // A header not read may redefine or undefine it.
                if matches!(state, Macro::Body(_)) {
                    *state = Macro::Unknown;
                }
            }
            _ => {}
        }
    }
}

fn same_tokens(a: &[Token], b: &[Token]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.text == y.text)
}

/// Integer arithmetic over tokens: `+ - * / %` (C), `+ - * / **`
/// (Fortran), unary signs, parentheses, literals and names.
struct Eval<'a> {
    src: &'a SourceFile,
    toks: &'a [Token],
    i: usize,
    at: At,
    depth: usize,
}

impl Eval<'_> {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.i).map(|t| t.text.as_str())
    }

    fn sum(&mut self) -> Option<i64> {
        let mut v = self.product()?;
        while let Some(op @ ("+" | "-")) = self.peek() {
            let plus = op == "+";
            self.i += 1;
            let r = self.product()?;
            v = if plus {
                v.checked_add(r)?
            } else {
                v.checked_sub(r)?
            };
        }
        Some(v)
    }

    fn product(&mut self) -> Option<i64> {
        let c = self.src.lang == Lang::C;
        let mut v = self.power()?;
        loop {
            let op = match self.peek() {
                Some(op @ ("*" | "/")) => op.to_string(),
                Some("%") if c => "%".to_string(),
                _ => return Some(v),
            };
            self.i += 1;
            let r = self.power()?;
            v = match op.as_str() {
                "*" => v.checked_mul(r)?,
                "/" => v.checked_div(r)?,
                _ => v.checked_rem(r)?,
            };
        }
    }

    fn power(&mut self) -> Option<i64> {
        let base = self.unary()?;
        if self.src.lang == Lang::Fortran && self.peek() == Some("**") {
            self.i += 1;
            let e = self.power()?;
            return base.checked_pow(u32::try_from(e).ok()?);
        }
        Some(base)
    }

    fn unary(&mut self) -> Option<i64> {
        match self.peek()? {
            "-" => {
                self.i += 1;
                self.unary()?.checked_neg()
            }
            "+" => {
                self.i += 1;
                self.unary()
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Option<i64> {
        let t = self.toks.get(self.i)?;
        match t.kind {
            Tok::Number => {
                self.i += 1;
                int_literal(&t.text, self.src.lang)
            }
            Tok::Ident => {
                self.i += 1;
                self.src.resolve(&t.key, self.at, self.depth + 1)
            }
            Tok::Punct if t.text == "(" => {
                self.i += 1;
                let v = self.sum()?;
                (self.peek() == Some(")")).then_some(())?;
                self.i += 1;
                Some(v)
            }
            Tok::Punct => None,
        }
    }
}

/// An integer literal: C decimal, hex or octal with `u`/`l` suffixes;
/// Fortran digits with an optional `_kind`.
fn int_literal(s: &str, lang: Lang) -> Option<i64> {
    match lang {
        Lang::C => {
            let s = s.trim_end_matches(['u', 'U', 'l', 'L']);
            if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                i64::from_str_radix(h, 16).ok()
            } else if s.len() > 1 && s.starts_with('0') {
                i64::from_str_radix(&s[1..], 8).ok()
            } else {
                s.parse().ok()
            }
        }
        Lang::Fortran => {
            let digits = s.split('_').next()?;
            digits.parse().ok()
        }
    }
}

/// A C declaration of the name at token `k`.
struct CDecl {
    /// `const`/`constexpr`, not a pointer or array, not floating point.
    constant: bool,
    /// The initializer's tokens.
    init: Option<(usize, usize)>,
    /// The tokens it is visible over (its block, the function for a
    /// parameter, the `for` for its header, the file).
    scope: (usize, usize),
}

/// Words a declaration's specifiers may hold besides type names.
fn type_word(t: &Token) -> bool {
    t.kind == Tok::Ident
        && (!C_KEYWORDS.contains(&t.text.as_str())
            || C_TYPES.contains(&t.text.as_str())
            || matches!(t.text.as_str(), "struct" | "union" | "enum" | "extern"))
}

/// The declaration the name at token `k` is declared by, if it is a
/// declarator (`T name`, `T a, name = 3`, a parameter `(T name)`).
fn c_declarator(t: &[Token], k: usize) -> Option<CDecl> {
    // The statement's start: after `;`, `{`, `}`, or an open `(`.
    let mut depth = 0i32;
    let mut opener = None;
    let mut s = 0;
    for j in (0..k).rev() {
        match t[j].text.as_str() {
            ")" | "]" => depth += 1,
            // Inside brackets: an index, not a declaration.
            "[" if depth == 0 => return None,
            "(" if depth == 0 => {
                opener = Some(j);
                s = j + 1;
                break;
            }
            "(" | "[" => depth -= 1,
            ";" | "{" | "}" if depth == 0 => {
                s = j + 1;
                break;
            }
            _ => {}
        }
    }
    // Walk the statement to k: segments split by top-level commas.
    let mut depth = 0i32;
    let mut seg = s;
    let mut first_seg_end = None;
    for (j, x) in t.iter().enumerate().take(k).skip(s) {
        match x.text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            "," if depth == 0 => {
                first_seg_end.get_or_insert(j);
                seg = j + 1;
            }
            "=" if depth == 0 => {
                first_seg_end.get_or_insert(j);
            }
            _ => {}
        }
    }
    if depth != 0 {
        return None;
    }
    // An `=` in this segment before the name: the name is in an initializer.
    if t[seg..k].iter().any(|x| x.text == "=") {
        return None;
    }
    let declarator_part = |a: usize, b: usize| {
        t[a..b]
            .iter()
            .all(|x| type_word(x) || matches!(x.text.as_str(), "*" | "&" | "&&"))
    };
    let next = t.get(k + 1).map(|x| x.text.as_str());
    if !matches!(next, Some("=" | ";" | "," | "[" | ")" | "{")) {
        return None;
    }
    let first_end = first_seg_end.unwrap_or(k);
    let idents_before = t[s..first_end.min(k)]
        .iter()
        .filter(|x| x.kind == Tok::Ident)
        .count();
    let spec_ok = if seg == s {
        idents_before >= 1 && declarator_part(s, k)
    } else {
        // `T a = 1, name`: the first declarator has a type before it.
        let end_of_first_declarator = t[s..first_end]
            .iter()
            .rposition(|x| x.kind == Tok::Ident)
            .map(|p| s + p)
            .unwrap_or(s);
        end_of_first_declarator > s
            && declarator_part(s, first_end.min(end_of_first_declarator + 1))
            && declarator_part(seg, k)
    };
    if !spec_ok {
        return None;
    }
    let specs: Vec<&str> = t[s..first_end.min(k)]
        .iter()
        .map(|x| x.text.as_str())
        .collect();
    let constant = specs.iter().any(|w| matches!(*w, "const" | "constexpr"))
        && !specs.iter().any(|w| matches!(*w, "float" | "double"))
        && !t[seg..k].iter().any(|x| x.text == "*")
        && next != Some("[");
    let init = (next == Some("=")).then(|| {
        let mut d = 0i32;
        let mut e = k + 2;
        while e < t.len() {
            match t[e].text.as_str() {
                "(" | "[" | "{" => d += 1,
                ")" | "]" | "}" if d == 0 => break,
                ")" | "]" | "}" => d -= 1,
                "," | ";" if d == 0 => break,
                _ => {}
            }
            e += 1;
        }
        (k + 2, e)
    });
    let scope = match opener {
        Some(o) if o > 0 && t[o - 1].text == "for" => {
            (o, c_statement_end(t, o - 1).unwrap_or(t.len()))
        }
        Some(o) => {
            let close = matching(t, o)?;
            match t.get(close + 1) {
                Some(x) if x.text == "{" => (close + 1, matching(t, close + 1)?),
                _ => (o, close),
            }
        }
        None => {
            // The innermost block around the statement, else the file.
            let mut d = 0i32;
            let mut block = None;
            for j in (0..s).rev() {
                match t[j].text.as_str() {
                    "}" => d += 1,
                    "{" if d == 0 => {
                        block = Some(j);
                        break;
                    }
                    "{" => d -= 1,
                    _ => {}
                }
            }
            match block {
                Some(b) => (b, matching(t, b)?),
                None => (0, t.len()),
            }
        }
    };
    Some(CDecl {
        constant,
        init,
        scope,
    })
}

/// Whether the name at token `k` (not a declarator) is written there:
/// assigned, incremented, or its address taken.
fn c_assigns(t: &[Token], k: usize) -> bool {
    let next = t.get(k + 1).map(|x| x.text.as_str());
    let prev = k.checked_sub(1).map(|j| t[j].text.as_str());
    // `&name` after an operator or bracket (not `a & name`): its address.
    let unary = k.checked_sub(2).map_or(true, |j| {
        (t[j].kind == Tok::Punct && t[j].text != "]") || t[j].text == "return"
    });
    matches!(
        next,
        Some(
            "=" | "+="
                | "-="
                | "*="
                | "/="
                | "%="
                | "&="
                | "|="
                | "^="
                | "<<="
                | ">>="
                | "++"
                | "--"
        )
    ) || matches!(prev, Some("++" | "--"))
        || (prev == Some("&") && unary)
}

/// One Fortran statement: continuations joined, comments removed.
struct FStmt {
    line: u32,
    toks: Vec<Token>,
    /// The innermost program unit it belongs to.
    unit: Option<usize>,
}

/// A Fortran program unit, by statement indices.
struct FUnit {
    kind: String,
    name: String,
    start: usize,
    contains: Option<usize>,
    end: usize,
    end_line: u32,
}

const F_UNITS: &[&str] = &["program", "module", "subroutine", "function"];

/// The statements and program units of Fortran `lines`.
fn fortran_scopes(lines: &[String]) -> (Vec<FStmt>, Vec<FUnit>) {
    let mut stmts: Vec<FStmt> = Vec::new();
    let mut k = 0;
    while k < lines.len() {
        let line = k as u32 + 1;
        let mut text = strip_f_comment(&lines[k], false);
        while text.trim_end().ends_with('&') && k + 1 < lines.len() {
            k += 1;
            text = format!(
                "{} {}",
                text.trim_end().trim_end_matches('&'),
                strip_f_comment(&lines[k], false)
            );
        }
        k += 1;
        let toks = tokenize_fortran(&[text]);
        for part in toks.split(|t| t.text == ";") {
            if !part.is_empty() {
                stmts.push(FStmt {
                    line,
                    toks: part.to_vec(),
                    unit: None,
                });
            }
        }
    }
    let mut units: Vec<FUnit> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    for i in 0..stmts.len() {
        let keys: Vec<&str> = stmts[i].toks.iter().map(|t| t.key.as_str()).collect();
        let is_end = matches!(
            keys.as_slice(),
            ["end"]
                | [
                    "endprogram" | "endmodule" | "endsubroutine" | "endfunction",
                    ..
                ]
        ) || (keys.first() == Some(&"end")
            && keys.get(1).is_some_and(|w| F_UNITS.contains(w)));
        if is_end {
            stmts[i].unit = open.last().copied();
            if let Some(u) = open.pop() {
                units[u].end = i;
                units[u].end_line = stmts[i].line;
            }
            continue;
        }
        if keys.as_slice() == ["contains"] {
            if let Some(&u) = open.last() {
                units[u].contains.get_or_insert(i);
            }
        }
        let head = keys.iter().position(|w| F_UNITS.contains(w));
        let header = head.filter(|&h| {
            !keys.contains(&"=")
                && keys.get(h + 1).is_some_and(|w| *w != "procedure")
                && (h == 0 || keys[0] != "end")
        });
        if let Some(h) = header {
            units.push(FUnit {
                kind: keys[h].to_string(),
                name: keys[h + 1].to_string(),
                start: i,
                contains: None,
                end: stmts.len().saturating_sub(1),
                end_line: u32::MAX,
            });
            open.push(units.len() - 1);
        }
        stmts[i].unit = open.last().copied();
    }
    (stmts, units)
}

/// A `use` statement: the module, and its `only` list of (local name,
/// the module's name).
type FUse = (String, Option<Vec<(String, String)>>);

/// What a unit says of a name.
enum FDecl {
    /// A parameter: its statement and the value's token range there.
    Parameter(usize, (usize, usize)),
    /// Declared as a variable, or possibly taken from elsewhere.
    Unknown,
    None,
}

/// What unit `u`'s own declarations (before its `contains`) and the
/// modules it uses say of `name`.
fn f_declared(stmts: &[FStmt], units: &[FUnit], u: usize, name: &str, depth: usize) -> FDecl {
    if depth > MAX_DEPTH {
        return FDecl::Unknown;
    }
    let unit = &units[u];
    let own_end = unit.contains.unwrap_or(unit.end);
    let mut params = Vec::new();
    let mut variable = false;
    let mut uses: Vec<FUse> = Vec::new();
    for (i, st) in stmts.iter().enumerate().take(own_end).skip(unit.start + 1) {
        if st.unit != Some(u) {
            continue;
        }
        let t = &st.toks;
        let keys: Vec<&str> = t.iter().map(|x| x.key.as_str()).collect();
        match keys.as_slice() {
            ["use", rest @ ..] => {
                // use [, intrinsic ::] m [, only: a, b => c]
                let rest: Vec<&str> = rest.iter().copied().filter(|w| *w != "::").collect();
                let Some(m) = rest.iter().find(|w| !matches!(**w, "," | "intrinsic")) else {
                    continue;
                };
                let only = rest.iter().position(|w| *w == "only").map(|p| {
                    rest[p + 1..]
                        .split(|w| *w == ",")
                        .filter_map(|item| match item {
                            [":", local, "=>", remote] | [local, "=>", remote] => {
                                Some((local.to_string(), remote.to_string()))
                            }
                            [":", n] | [n] => Some((n.to_string(), n.to_string())),
                            _ => None,
                        })
                        .collect()
                });
                uses.push((m.to_string(), only));
            }
            ["parameter", "(", ..] => {
                for (a, b) in top_level_items(t, 2, t.len().saturating_sub(1)) {
                    if t[a].key == name && t.get(a + 1).is_some_and(|x| x.text == "=") {
                        params.push((i, (a + 2, b)));
                    }
                }
            }
            [ty, ..]
                if matches!(
                    *ty,
                    "integer" | "real" | "double" | "logical" | "character" | "complex" | "type"
                ) && !keys.iter().any(|w| matches!(*w, "function" | "subroutine")) =>
            {
                let colons = keys.iter().position(|w| *w == "::");
                let (is_param, from) = match colons {
                    Some(c) => (keys[..c].contains(&"parameter"), c + 1),
                    None => {
                        // `integer n, m`, `real(dp) x`, `character*8 s`
                        let mut j = 1;
                        if keys.get(1) == Some(&"precision") {
                            j = 2;
                        }
                        if keys.get(j) == Some(&"(") {
                            j = matching(t, j).map_or(t.len(), |c| c + 1);
                        } else if keys.get(j) == Some(&"*") {
                            j += 2;
                        }
                        (false, j)
                    }
                };
                for (a, b) in top_level_items(t, from, t.len()) {
                    if t[a].key != name {
                        continue;
                    }
                    if is_param && t.get(a + 1).is_some_and(|x| x.text == "=") {
                        params.push((i, (a + 2, b)));
                    } else {
                        variable = true;
                    }
                }
            }
            _ => {}
        }
    }
    match params.as_slice() {
        [(s, r)] => return FDecl::Parameter(*s, *r),
        [] if variable => return FDecl::Unknown,
        [] => {}
        _ => return FDecl::Unknown,
    }
    for (m, only) in uses {
        let remote = match &only {
            Some(list) => match list.iter().find(|(local, _)| local == name) {
                Some((_, remote)) => remote.clone(),
                None => continue,
            },
            None => name.to_string(),
        };
        let module = units.iter().position(|x| x.kind == "module" && x.name == m);
        match module {
            Some(mu) => match f_declared(stmts, units, mu, &remote, depth + 1) {
                FDecl::None if only.is_none() => {}
                FDecl::None => return FDecl::Unknown,
                found => return found,
            },
            // A module of another file may hold it.
            None => return FDecl::Unknown,
        }
    }
    FDecl::None
}

/// Token ranges of the comma-separated items of `t[a..b]` at depth 0.
fn top_level_items(t: &[Token], a: usize, b: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = a;
    for (j, x) in t.iter().enumerate().take(b).skip(a) {
        match x.text.as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            "," if depth == 0 => {
                if start < j {
                    out.push((start, j));
                }
                start = j + 1;
            }
            _ => {}
        }
    }
    if start < b {
        out.push((start, b));
    }
    out
}

/// Whether Fortran statement `t` assigns `name`: `name = ...`,
/// `name(...) = ...`, or a `do name = ...` loop.
fn f_assigns(t: &[Token], name: &str) -> bool {
    let keys: Vec<&str> = t.iter().map(|x| x.key.as_str()).collect();
    let rest = match keys.as_slice() {
        ["do", n, "=", ..] => return *n == name,
        [n, rest @ ..] if *n == name => rest,
        _ => return false,
    };
    match rest.first() {
        Some(&"=") => true,
        Some(&"(") => matching(t, 1).is_some_and(|c| t.get(c + 1).is_some_and(|x| x.text == "=")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(text: &str) -> SourceFile {
        SourceFile::new("t.c", "t.c".into(), Lang::C, text.into())
    }

    fn f(text: &str) -> SourceFile {
        SourceFile::new("t.f90", "t.f90".into(), Lang::Fortran, text.into())
    }

    #[test]
    fn object_like_macros_and_their_arithmetic() {
        let s = c("#define COLS 16\n#define PAREN (16)\n#define N (4*COLS)\n#define M (N - COLS / 2) // half\n#define H 0x10u\nint x;\n");
        let at = |n| s.constant(n, 6);
        assert_eq!(
            [at("COLS"), at("PAREN"), at("N"), at("M"), at("H")],
            [Some(16), Some(16), Some(64), Some(56), Some(16)]
        );
        assert_eq!(s.constant("COLS", 1), None, "not defined before its line");
        assert_eq!(at("ROWS"), None);
    }

    #[test]
    fn macros_that_have_no_certain_value() {
        let s = c("#define F(x) 16\n#define U 16\n#undef U\n#define R 8\n#define R 16\n#define S 4\n#define S 4\n#define Q 2\n#undef Q\n#define Q 3\n#ifndef D\n#define D 16\n#endif\n#ifdef BIG\n#define E 64\n#else\n#define E 16\n#endif\n#define SELF SELF\n#define DIV (1/0)\nint x;\n");
        let at = |n| s.constant(n, 21);
        assert_eq!(at("F"), None, "function-like");
        assert_eq!(at("U"), None, "undefined");
        assert_eq!(at("R"), None, "redefined with another body");
        assert_eq!(at("S"), Some(4), "the same body twice is one macro");
        assert_eq!(at("Q"), Some(3), "undefined, then defined again");
        assert_eq!(at("D"), None, "a default the build may override");
        assert_eq!(at("E"), None, "depends on the build");
        assert_eq!(at("SELF"), None);
        assert_eq!(at("DIV"), None);
        assert_eq!(s.constant("U", 3), Some(16), "before its #undef");
    }

    #[test]
    fn macros_of_included_headers() {
        let dir = std::env::temp_dir().join(format!("accprof-consts-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("inc")).expect("temp dir");
        std::fs::write(
            dir.join("inc/a.h"),
            "#ifndef A_H\n#define A_H\n#include \"b.h\"\n#define COLS (2 * HALF)\n#endif\n",
        )
        .expect("header");
        std::fs::write(dir.join("inc/b.h"), "#define HALF 8\n").expect("header");
        let text = "#define LATER 3\n#include \"inc/a.h\"\n#include \"gone.h\"\nint x;\n";
        let mut s = SourceFile::new("t.c", dir.join("t.c"), Lang::C, text.into());
        assert_eq!(s.constant("COLS", 3), None, "headers not read yet");
        s.read_includes(&|p: &Path| std::fs::read_to_string(p));
        assert_eq!(s.constant("COLS", 3), Some(16));
        assert_eq!(s.constant("COLS", 2), None, "before the #include");
        assert_eq!(s.constant("LATER", 3), Some(3));
        // A header that could not be read may redefine either.
        assert_eq!(s.constant("LATER", 4), None);
        assert_eq!(s.constant("COLS", 4), None);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn c_constants_in_scope() {
        let text = "\
static const int A = 16;
constexpr int B = A / 2;
const long C = 4, D = A + 1;
const int E = 3;
int G = 16;
const int *P = 0;
void f(int E) {
  const int L = 5;
  int B = 2;
  for (int j = 0; j < A; j++) ;
}
void g(void) {
  for (int j = 0; j < B; j++) ;
  { int A = 3;
    for (int j = 0; j < A; j++) ; }
}
";
        let s = c(text);
        let at = |n, l| s.constant(n, l);
        assert_eq!(at("A", 10), Some(16));
        assert_eq!(at("L", 10), Some(5));
        assert_eq!(at("B", 10), None, "a local variable hides it");
        assert_eq!(at("B", 13), Some(8));
        assert_eq!(at("C", 13), Some(4));
        assert_eq!(at("D", 13), Some(17));
        assert_eq!(at("E", 10), None, "a parameter hides it");
        assert_eq!(at("E", 13), Some(3));
        assert_eq!(at("G", 13), None, "not const");
        assert_eq!(at("P", 13), None, "a pointer");
        assert_eq!(at("L", 13), None, "another function's");
        assert_eq!(at("A", 13), Some(16));
        assert_eq!(at("A", 15), None, "the block's own variable");
        let s = c("const int N = 8;\nvoid f(void) {\n  for (int j = 0; j < N; j++) ;\n}\nvoid g(int *p) { *(int *)&N = 3; }\n");
        assert_eq!(s.constant("N", 3), None, "written through its address");
    }

    #[test]
    fn fortran_parameters() {
        let text = "\
module sizes
  implicit none
  integer, parameter :: m = 8, n = 2*m
  integer :: v = 4
end module sizes
program p
  use sizes
  implicit none
  integer :: cols, k
  parameter (cols = 16)
  integer(kind=4), parameter :: rows = n + 1_4
  do k = 1, cols
  end do
contains
  subroutine s()
    integer :: m
    m = 3
  end subroutine s
end program p
subroutine q()
  use sizes, only: n
  integer :: i
  do i = 1, n
  end do
end subroutine q
subroutine w()
  use other
  do i = 1, n
  end do
end subroutine w
";
        let s = f(text);
        let at = |n, l| s.constant(n, l);
        assert_eq!(at("COLS", 12), Some(16), "case-insensitive");
        assert_eq!(at("rows", 12), Some(17));
        assert_eq!(at("m", 12), Some(8));
        assert_eq!(at("v", 12), None, "a module variable");
        assert_eq!(at("m", 17), None, "the subroutine's own variable");
        assert_eq!(at("cols", 17), Some(16), "from its host");
        assert_eq!(at("n", 23), Some(16));
        assert_eq!(at("m", 23), None, "not in the only list");
        assert_eq!(at("n", 28), None, "another file's module may hold it");
        assert_eq!(at("k", 12), None);
    }
}
