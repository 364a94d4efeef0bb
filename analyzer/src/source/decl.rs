//! Declarations: arrays, pointers with a known extent, and locals.

use std::collections::HashMap;

use tree_sitter::Node;

use super::pos::line;

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
        let mut all: Vec<(String, ArrayDecl)> = self.syntax().decls.arrays.clone();
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
        let locals = &self.syntax().decls.locals;
        let lo = locals.partition_point(|(l, _)| *l < a);
        let hi = locals.partition_point(|(l, _)| *l <= b);
        out.extend(locals[lo..hi].iter().map(|(_, k)| k.clone()));
        out.sort();
        out.dedup();
        out
    }
}

/// The declarations of a file, as the parse tree has them.
#[derive(Debug, Clone, Default)]
pub struct Decls {
    /// Arrays and pointers, by lookup key, in the order declared.
    pub arrays: Vec<(String, ArrayDecl)>,
    /// C: every name a declaration or parameter declares, by line.
    pub locals: Vec<(u32, String)>,
}

/// Reads the declarations of the tree under `root`.
pub(super) fn decls(lang: Lang, src: &[u8], root: Node) -> Decls {
    let mut r = Reader {
        lang,
        src,
        out: Decls::default(),
    };
    r.node(root);
    r.out.locals.sort();
    r.out
}

struct Reader<'a> {
    lang: Lang,
    src: &'a [u8],
    out: Decls,
}

/// Text with whitespace removed, except one space between two words.
fn compact(t: &str) -> String {
    let mut out = String::new();
    let mut gap = false;
    for c in t.chars() {
        if c.is_whitespace() {
            gap = true;
            continue;
        }
        let word = |c: char| c.is_alphanumeric() || c == '_';
        if gap && out.chars().last().is_some_and(word) && word(c) {
            out.push(' ');
        }
        gap = false;
        out.push(c);
    }
    out
}

impl Reader<'_> {
    fn text(&self, n: Node) -> &str {
        n.utf8_text(self.src).unwrap_or("")
    }

    fn node(&mut self, n: Node) {
        match n.kind() {
            "comment"
            | "string_literal"
            | "preproc_def"
            | "preproc_function_def"
            | "preproc_call" => return,
            "declaration" | "field_declaration" | "parameter_declaration" => {
                let mut c = n.walk();
                let ds: Vec<Node> = n.children_by_field_name("declarator", &mut c).collect();
                for d in ds {
                    self.c_declarator(d, false, String::new(), None);
                }
            }
            "variable_declaration" if self.lang == Lang::Fortran => self.f_declaration(n),
            "assignment_expression" => self.c_allocation(n),
            _ => {}
        }
        let mut c = n.walk();
        let kids: Vec<Node> = n.named_children(&mut c).collect();
        for k in kids {
            self.node(k);
        }
    }

    /// A C declarator: pointers and array extents on the way to its name;
    /// `init` is the initial value.
    fn c_declarator(&mut self, d: Node, pointer: bool, dims: String, init: Option<Node>) {
        match d.kind() {
            "identifier" | "field_identifier" => {
                let name = self.text(d).to_string();
                self.out.locals.push((line(d), name.clone()));
                if dims.is_empty() && !pointer {
                    return;
                }
                let extent = init.filter(|_| pointer).and_then(|v| self.alloc_extent(v));
                self.out.arrays.push((
                    name.clone(),
                    ArrayDecl {
                        name,
                        line: line(d),
                        dims,
                        extent,
                        pointer,
                        allocatable: false,
                    },
                ));
            }
            "init_declarator" => {
                if let Some(x) = d.child_by_field_name("declarator") {
                    self.c_declarator(x, pointer, dims, d.child_by_field_name("value"));
                }
            }
            "pointer_declarator" => {
                if let Some(x) = d.child_by_field_name("declarator") {
                    self.c_declarator(x, true, dims, init);
                }
            }
            "array_declarator" => {
                let size = d
                    .child_by_field_name("size")
                    .map_or(String::new(), |s| compact(self.text(s)));
                // `a[W][H]`: the outer declarator holds the last extent.
                let dims = format!("[{size}]{dims}");
                if let Some(x) = d.child_by_field_name("declarator") {
                    self.c_declarator(x, pointer, dims, init);
                }
            }
            "parenthesized_declarator" | "attributed_declarator" | "reference_declarator" => {
                if let Some(x) = d.named_child(0) {
                    self.c_declarator(x, pointer, dims, init);
                }
            }
            // Functions are not arrays.
            _ => {}
        }
    }

    /// `u = malloc(...)` gives the pointer `u` declared last its extent.
    fn c_allocation(&mut self, n: Node) {
        let (Some(l), Some(r)) = (
            n.child_by_field_name("left"),
            n.child_by_field_name("right"),
        ) else {
            return;
        };
        if l.kind() != "identifier"
            || self.text(n.child_by_field_name("operator").unwrap_or(n)) != "="
        {
            return;
        }
        let Some(e) = self.alloc_extent(r) else {
            return;
        };
        let name = self.text(l).to_string();
        if let Some((_, d)) = self
            .out
            .arrays
            .iter_mut()
            .rev()
            .find(|(k, d)| *k == name && d.pointer && d.extent.is_none())
        {
            d.extent = Some(e);
        }
    }

    /// `malloc(n * sizeof *u)` -> "n"; `calloc(n, sizeof *u)` -> "n";
    /// `(double *)malloc(sizeof(double) * nx * ny)` -> "nx*ny".
    fn alloc_extent(&self, mut v: Node) -> Option<String> {
        while v.kind() == "cast_expression" {
            v = v.child_by_field_name("value")?;
        }
        if v.kind() != "call_expression" {
            return None;
        }
        let f = self.text(v.child_by_field_name("function")?);
        let args = v.child_by_field_name("arguments")?;
        let mut c = args.walk();
        let first = args
            .named_children(&mut c)
            .find(|k| k.kind() != "comment")?;
        match f {
            "calloc" => Some(compact(self.text(first))),
            "malloc" | "acc_malloc" => {
                let mut factors = Vec::new();
                self.factors(first, &mut factors);
                let sizes = factors
                    .iter()
                    .filter(|x| x.kind() == "sizeof_expression")
                    .count();
                if sizes != 1 || factors.len() < 2 {
                    return None;
                }
                let rest: Vec<String> = factors
                    .iter()
                    .filter(|x| x.kind() != "sizeof_expression")
                    .map(|x| compact(self.text(*x)))
                    .collect();
                Some(rest.join("*"))
            }
            _ => None,
        }
    }

    fn factors<'t>(&self, n: Node<'t>, out: &mut Vec<Node<'t>>) {
        if n.kind() == "binary_expression"
            && n.child_by_field_name("operator").map(|o| self.text(o)) == Some("*")
        {
            if let (Some(l), Some(r)) = (
                n.child_by_field_name("left"),
                n.child_by_field_name("right"),
            ) {
                self.factors(l, out);
                self.factors(r, out);
                return;
            }
        }
        out.push(n);
    }

    /// Fortran: `real(dp), allocatable :: a(:,:), b(:)`,
    /// `real(dp) :: t(0:n+1, 0:n+1)`, `real, dimension(n) :: x`.
    fn f_declaration(&mut self, n: Node) {
        let mut allocatable = false;
        let mut dim_attr = None;
        let mut c = n.walk();
        let attrs: Vec<Node> = n.children_by_field_name("attribute", &mut c).collect();
        for a in attrs {
            let Some(word) = a.child(0) else { continue };
            match word.kind().to_ascii_lowercase().as_str() {
                "allocatable" | "pointer" => allocatable = true,
                "dimension" => {
                    let mut c = a.walk();
                    let list = a
                        .named_children(&mut c)
                        .find(|k| k.kind() == "argument_list");
                    dim_attr = list.map(|l| self.text(l).to_string());
                }
                _ => {}
            }
        }
        let mut c = n.walk();
        let ds: Vec<Node> = n.children_by_field_name("declarator", &mut c).collect();
        for mut d in ds {
            if matches!(d.kind(), "init_declarator" | "pointer_init_declarator") {
                match d.child_by_field_name("left") {
                    Some(l) => d = l,
                    None => continue,
                }
            }
            let (name, dims) = match d.kind() {
                "identifier" => (d, dim_attr.clone()),
                "sized_declarator" => {
                    let Some(id) = d.named_child(0) else { continue };
                    let mut c = d.walk();
                    let size = d.named_children(&mut c).find(|k| k.kind() == "size");
                    (id, size.map(|s| self.text(s).to_string()))
                }
                _ => continue,
            };
            let Some(dims) = dims else { continue };
            let text = self.text(name).to_string();
            self.out.arrays.push((
                text.to_ascii_lowercase(),
                ArrayDecl {
                    name: text,
                    line: line(name),
                    dims,
                    extent: None,
                    pointer: false,
                    allocatable,
                },
            ));
        }
    }
}
