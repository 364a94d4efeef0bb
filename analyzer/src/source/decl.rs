//! Declarations: arrays, pointers with a known extent, and locals.

use std::collections::HashMap;

use super::directive::split_top;
use super::lex::{matching, strip_f_comment, Tok, Token, C_TYPES};
use super::{Lang, SourceFile};

/// An array (or pointer with a known extent) declared in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayDecl {
    /// As declared.
    pub name: String,
    pub line: u32,
    /// C: "[W][W]"; Fortran: "(0:n+1, 0:n+1)" or "(:,:)".
    pub dims: String,
    /// C pointer whose allocation says its element count (`malloc(n * sizeof *u)` -> "n").
    pub extent: Option<String>,
    pub pointer: bool,
    pub allocatable: bool,
}

impl SourceFile {
    /// Arrays declared in the file (C arrays and pointers, Fortran arrays),
    /// by lookup key. A name declared twice keeps the declaration nearest
    /// before `near` (or the first one when `near` is None).
    pub fn arrays(&self, near: Option<u32>) -> HashMap<String, ArrayDecl> {
        let mut all: Vec<(String, ArrayDecl)> = match self.lang {
            Lang::C => c_arrays(&self.tokens),
            Lang::Fortran => fortran_arrays(&self.lines),
        };
        if let Some(n) = near {
            // Prefer declarations in the same unit, before the line.
            let unit = self.unit_of(n);
            all.sort_by_key(|(_, d)| {
                let in_unit = unit.is_some_and(|(a, b)| a <= d.line && d.line <= b);
                (in_unit && d.line <= n, d.line)
            });
        } else {
            all.sort_by_key(|(_, d)| std::cmp::Reverse(d.line));
        }
        all.into_iter().collect()
    }

    /// Names declared inside lines `a..=b` (C declarations in the block,
    /// loop indices of `for (int i ...)`), and loop indices of loops
    /// starting in the range.
    pub fn locals_in(&self, a: u32, b: u32) -> Vec<String> {
        let lo = self.tokens.partition_point(|t| t.line < a);
        let hi = self.tokens.partition_point(|t| t.line <= b);
        let mut out = Vec::new();
        for lp in self
            .loops()
            .iter()
            .filter(|l| a <= l.header_line && l.header_line <= b)
        {
            if let Some(ix) = self.loop_index(lp) {
                out.push(ix);
            }
        }
        if self.lang == Lang::C {
            for i in lo..hi {
                let t = &self.tokens[i];
                if t.kind == Tok::Ident && C_TYPES.contains(&t.key.as_str()) {
                    // type [*] name
                    let mut j = i + 1;
                    while j < hi
                        && (C_TYPES.contains(&self.tokens[j].key.as_str())
                            || self.tokens[j].text == "*")
                    {
                        j += 1;
                    }
                    if j < hi && self.tokens[j].kind == Tok::Ident {
                        out.push(self.tokens[j].key.clone());
                    }
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// C declarations of arrays (`T name[..][..]`) and pointers (`T *name`),
/// with the element count of `malloc(n * sizeof ...)` / `calloc(n, ...)`.
fn c_arrays(t: &[Token]) -> Vec<(String, ArrayDecl)> {
    let mut out: Vec<(String, ArrayDecl)> = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if t[i].kind == Tok::Ident
            && C_TYPES.contains(&t[i].key.as_str())
            && !matches!(
                t[i].key.as_str(),
                "const" | "static" | "register" | "volatile"
            )
        {
            // Declarators separated by commas up to ';'.
            let mut j = i + 1;
            while j < t.len() && C_TYPES.contains(&t[j].key.as_str()) {
                j += 1;
            }
            loop {
                let mut pointer = false;
                while j < t.len()
                    && (t[j].text == "*" || t[j].key == "restrict" || t[j].key == "const")
                {
                    pointer |= t[j].text == "*";
                    j += 1;
                }
                if j >= t.len() || t[j].kind != Tok::Ident {
                    break;
                }
                let name = t[j].text.clone();
                let line = t[j].line;
                j += 1;
                let mut dims = String::new();
                while j < t.len() && t[j].text == "[" {
                    let Some(c) = matching(t, j) else { break };
                    dims.push_str(&join_tokens(&t[j..=c]));
                    j = c + 1;
                }
                // Function declarations are not arrays.
                if j < t.len() && t[j].text == "(" {
                    break;
                }
                let mut extent = None;
                if j < t.len() && t[j].text == "=" && pointer {
                    extent = alloc_extent(t, j + 1);
                }
                // Skip the initializer.
                let mut d = 0;
                while j < t.len() {
                    match t[j].text.as_str() {
                        "(" | "[" | "{" => d += 1,
                        ")" | "]" | "}" => d -= 1,
                        "," | ";" if d == 0 => break,
                        _ => {}
                    }
                    j += 1;
                }
                if !dims.is_empty() || pointer {
                    out.push((
                        name.clone(),
                        ArrayDecl {
                            name,
                            line,
                            dims,
                            extent,
                            pointer,
                            allocatable: false,
                        },
                    ));
                }
                if j < t.len() && t[j].text == "," {
                    j += 1;
                    continue;
                }
                break;
            }
            i = j.max(i + 1);
            continue;
        }
        // Later `u = malloc(...)` assignments give a pointer its extent.
        if t[i].kind == Tok::Ident
            && t.get(i + 1).map(|x| x.text.as_str()) == Some("=")
            && (i == 0 || matches!(t[i - 1].text.as_str(), ";" | "{" | "}"))
        {
            if let Some(e) = alloc_extent(t, i + 2) {
                if let Some((_, d)) = out
                    .iter_mut()
                    .rev()
                    .find(|(n, d)| *n == t[i].text && d.pointer && d.extent.is_none())
                {
                    d.extent = Some(e);
                }
            }
        }
        i += 1;
    }
    out
}

/// `malloc(n * sizeof *u)` -> "n"; `calloc(n, sizeof *u)` -> "n";
/// `(double *)malloc(sizeof(double) * n)` -> "n".
fn alloc_extent(t: &[Token], mut i: usize) -> Option<String> {
    // Skip a cast.
    if t.get(i)?.text == "(" {
        let c = matching(t, i)?;
        if t.get(c + 1).is_some_and(|x| x.kind == Tok::Ident) {
            i = c + 1;
        }
    }
    let f = t.get(i)?.text.as_str();
    if !matches!(f, "malloc" | "calloc" | "acc_malloc" | "aligned_alloc")
        || t.get(i + 1)?.text != "("
    {
        return None;
    }
    let close = matching(t, i + 1)?;
    let args = &t[i + 2..close];
    let parts: Vec<&[Token]> = split_tokens(args, ",");
    let count: Vec<&Token> = match f {
        "calloc" => parts.first()?.iter().collect(),
        "aligned_alloc" => return None,
        _ => {
            // n * sizeof *u  or  sizeof(x) * n
            let a = parts.first()?;
            let star = a.iter().position(|x| x.text == "*")?;
            let (l, r) = (&a[..star], &a[star + 1..]);
            if r.first().is_some_and(|x| x.key == "sizeof") {
                l.iter().collect()
            } else if l.first().is_some_and(|x| x.key == "sizeof") {
                // sizeof(double) * n: the size is a parenthesized type.
                r.iter().collect()
            } else {
                return None;
            }
        }
    };
    if count.is_empty() {
        return None;
    }
    Some(join_tokens(&count.into_iter().cloned().collect::<Vec<_>>()))
}

fn split_tokens<'t>(t: &'t [Token], sep: &str) -> Vec<&'t [Token]> {
    let mut out = Vec::new();
    let mut d = 0;
    let mut st = 0;
    for (k, x) in t.iter().enumerate() {
        match x.text.as_str() {
            "(" | "[" => d += 1,
            ")" | "]" => d -= 1,
            s if s == sep && d == 0 => {
                out.push(&t[st..k]);
                st = k + 1;
            }
            _ => {}
        }
    }
    out.push(&t[st..]);
    out
}

fn join_tokens(t: &[Token]) -> String {
    let mut s = String::new();
    for (k, x) in t.iter().enumerate() {
        if k > 0 && x.kind != Tok::Punct && t[k - 1].kind != Tok::Punct {
            s.push(' ');
        }
        s.push_str(&x.text);
    }
    s
}

/// Fortran declarations with array shapes: `real(dp), allocatable :: a(:,:), b(:)`,
/// `real(dp) :: t(0:n+1, 0:n+1)`, `real, dimension(n) :: x`.
fn fortran_arrays(lines: &[String]) -> Vec<(String, ArrayDecl)> {
    let mut out = Vec::new();
    for (ln, l) in lines.iter().enumerate() {
        let code = strip_f_comment(l, false);
        let Some(dc) = code.find("::") else { continue };
        let (attrs, names) = (&code[..dc], &code[dc + 2..]);
        let attrs_l = attrs.to_ascii_lowercase();
        let first = attrs_l.trim_start();
        if ![
            "real",
            "integer",
            "double",
            "complex",
            "logical",
            "character",
            "type",
        ]
        .iter()
        .any(|k| first.starts_with(k))
        {
            continue;
        }
        let allocatable = attrs_l.contains("allocatable") || attrs_l.contains("pointer");
        let dim_attr = attrs_l.find("dimension").and_then(|i| {
            let rest = &attrs[i + 9..];
            let open = rest.find('(')?;
            let mut d = 0;
            for (k, c) in rest.char_indices().skip(open) {
                if c == '(' {
                    d += 1;
                } else if c == ')' {
                    d -= 1;
                    if d == 0 {
                        return Some(rest[open..=k].to_string());
                    }
                }
            }
            None
        });
        for item in split_top(names, ',') {
            let item = item.trim();
            let item = item.split('=').next().unwrap_or(item).trim();
            let (name, dims) = match item.find('(') {
                Some(i) => (item[..i].trim(), Some(item[i..].trim().to_string())),
                None => (item, dim_attr.clone()),
            };
            if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(dims) = dims {
                out.push((
                    name.to_ascii_lowercase(),
                    ArrayDecl {
                        name: name.to_string(),
                        line: ln as u32 + 1,
                        dims,
                        extent: None,
                        pointer: false,
                        allocatable,
                    },
                ));
            }
        }
    }
    out
}
