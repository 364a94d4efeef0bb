//! Uses of names, and the reductions and scalar writes of a loop body,
//! read from the parse tree.
//!
//! The whole file is read once, with the rest of the tree
//! ([`super::syntax::parse`]): every identifier that names a variable
//! (not a function called, a type, a member or a keyword argument's name),
//! what the statement around it does with it, and for each assignment
//! to a bare name the reduction it performs, if it is one.

use std::collections::{BTreeSet, HashMap};

use tree_sitter::Node;

use super::pos::Pos;
use super::{Lang, SourceFile};

/// One use of a name in a range of code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// Lookup key (lower case in Fortran).
    pub key: String,
    /// The name as written.
    pub name: String,
    pub line: u32,
    /// Column of the name in its line, in characters (0-based).
    pub col: u32,
    /// Assigned to (the left side of `=`, `+=`, ..., or `++`/`--`).
    pub write: bool,
    /// Read (the right side, an index, or a compound assignment).
    pub read: bool,
    /// Followed by an index (`a[i]`, `a(i)`).
    pub indexed: bool,
    /// Passed to a call or used as a whole (the callee may read or write it).
    pub whole: bool,
    /// The function or subroutine the name is an argument of (Fortran:
    /// or the array it indexes: the grammar cannot tell them apart).
    pub callee: Option<String>,
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

/// The names of a file: every use in the order written, and the
/// reductions the assignments to bare names perform, by the name's place.
#[derive(Debug, Clone, Default)]
pub struct Names {
    pub uses: Vec<Use>,
    pub reductions: HashMap<Pos, Reduction>,
}

impl SourceFile {
    /// Uses of names on the lines `a..=b`, skipping the lines in `skip`
    /// (inclusive ranges).
    pub fn uses(&self, a: u32, b: u32, skip: &[(u32, u32)]) -> Vec<Use> {
        let all = &self.syntax().names.uses;
        let lo = all.partition_point(|u| u.line < a);
        let hi = all.partition_point(|u| u.line <= b);
        all[lo..hi]
            .iter()
            .filter(|u| !skip.iter().any(|(x, y)| *x <= u.line && u.line <= *y))
            .cloned()
            .collect()
    }

    /// Scalars the code in `a..=b` writes, and whether each write is a
    /// reduction. `locals` are names declared inside the region or loop
    /// indices (private anyway); `arrays` are array names (their element
    /// writes are not scalar writes).
    pub fn loop_body(&self, a: u32, b: u32, locals: &[String], arrays: &[String]) -> LoopBody {
        let mut body = LoopBody::default();
        let uses = self.uses(a, b, &[]);
        let reductions = &self.syntax().names.reductions;
        let mut seen: Vec<(String, Option<&Reduction>)> = Vec::new();
        for u in uses.iter().filter(|u| u.write && !u.indexed) {
            if locals.contains(&u.key) || arrays.contains(&u.key) {
                continue;
            }
            seen.push((u.key.clone(), reductions.get(&(u.line, u.col))));
        }
        let names: BTreeSet<&String> = seen.iter().map(|(k, _)| k).collect();
        for n in names {
            let writes: Vec<Option<&Reduction>> = seen
                .iter()
                .filter(|(k, _)| k == n)
                .map(|(_, r)| *r)
                .collect();
            let ops: BTreeSet<&str> = writes.iter().flatten().map(|r| r.op.as_str()).collect();
            match writes.first() {
                Some(Some(r)) if writes.iter().all(Option::is_some) && ops.len() == 1 => {
                    body.reductions.push((*r).clone());
                }
                _ => {
                    let line = uses
                        .iter()
                        .find(|u| u.key == *n && u.write)
                        .map_or(a, |u| u.line);
                    body.other_scalar_writes.push((n.clone(), line));
                }
            }
        }
        body
    }
}

/// Fortran functions a name followed by `(` may call rather than index.
const F_FUNCTIONS: &[&str] = &[
    "abs",
    "sqrt",
    "sin",
    "cos",
    "tan",
    "exp",
    "log",
    "log10",
    "max",
    "min",
    "mod",
    "real",
    "dble",
    "int",
    "nint",
    "floor",
    "ceiling",
    "sign",
    "atan",
    "atan2",
    "asin",
    "acos",
    "sinh",
    "cosh",
    "tanh",
    "maxval",
    "minval",
    "sum",
    "product",
    "size",
    "kind",
    "huge",
    "tiny",
    "epsilon",
    "merge",
    "float",
    "modulo",
    "cmplx",
    "aimag",
    "conjg",
    "len",
    "trim",
    "adjustl",
    "present",
    "allocated",
    "associated",
    "lbound",
    "ubound",
    "shape",
    "transpose",
    "matmul",
    "dot_product",
    "system_clock",
];

const MAX_FNS: &[&str] = &[
    "fmax",
    "fmaxf",
    "fmaxl",
    "max",
    "amax1",
    "dmax1",
    "std::max",
    "std::fmax",
];
const MIN_FNS: &[&str] = &[
    "fmin",
    "fminf",
    "fminl",
    "min",
    "amin1",
    "dmin1",
    "std::min",
    "std::fmin",
];

/// What the code around a name does with it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Read,
    Write,
    Update,
}

/// Reads the names of the tree under `root`.
pub(super) fn names(lang: Lang, src: &[u8], root: Node) -> Names {
    let mut r = Reader {
        lang,
        src,
        out: Names::default(),
    };
    r.node(root, Role::Read);
    r.out.uses.sort_by_key(|u| (u.line, u.col));
    r.out
}

struct Reader<'a> {
    lang: Lang,
    src: &'a [u8],
    out: Names,
}

impl Reader<'_> {
    fn text(&self, n: Node) -> &str {
        n.utf8_text(self.src).unwrap_or("")
    }

    fn key(&self, n: Node) -> String {
        super::lang_key(self.lang, self.text(n))
    }

    /// Line and column (in characters) where `n` starts.
    fn pos(&self, n: Node) -> Pos {
        let p = n.start_position();
        let b = n.start_byte();
        let col = String::from_utf8_lossy(&self.src[b - p.column..b])
            .chars()
            .count();
        (p.row as u32 + 1, col as u32)
    }

    fn push(&mut self, n: Node, role: Role, indexed: bool, callee: Option<String>) {
        let (line, col) = self.pos(n);
        self.out.uses.push(Use {
            key: self.key(n),
            name: self.text(n).to_string(),
            line,
            col,
            write: role != Role::Read,
            read: role != Role::Write,
            indexed,
            whole: callee.is_some() && !indexed,
            callee,
        });
    }

    fn children(&mut self, n: Node, role: Role) {
        let mut c = n.walk();
        let kids: Vec<Node> = n.named_children(&mut c).collect();
        for k in kids {
            self.node(k, role);
        }
    }

    fn field(&mut self, n: Node, name: &str, role: Role) {
        if let Some(k) = n.child_by_field_name(name) {
            self.node(k, role);
        }
    }

    /// The names under `n`, which the code uses as `role` says.
    fn node(&mut self, n: Node, role: Role) {
        match n.kind() {
            "identifier" => self.push(n, role, false, None),
            "comment"
            | "string_literal"
            | "char_literal"
            | "raw_string_literal"
            | "preproc_def"
            | "preproc_function_def"
            | "preproc_call"
            | "preproc_include"
            | "preproc_directive"
            | "preproc_arg" => {}
            // Conditional compilation: the code in it, not the condition.
            "preproc_if" | "preproc_ifdef" | "preproc_elif" | "preproc_else"
            | "preproc_elifdef" => {
                let mut c = n.walk();
                let kids: Vec<Node> = n.named_children(&mut c).collect();
                for (i, k) in kids.into_iter().enumerate() {
                    let field = n.field_name_for_named_child(i as u32);
                    if !matches!(field, Some("condition" | "name")) {
                        self.node(k, Role::Read);
                    }
                }
            }
            // C: the body; the header declares, it does not use.
            "function_definition" => self.field(n, "body", Role::Read),
            // Fortran: the header names the arguments.
            "subroutine_statement"
            | "function_statement"
            | "program_statement"
            | "module_statement"
            | "end_subroutine_statement"
            | "end_function_statement"
            | "end_program_statement"
            | "end_module_statement"
            | "use_statement"
            | "implicit_statement"
            | "intrinsic_type"
            | "type_qualifier" => {}
            "parameter_declaration" | "optional_parameter_declaration" => {}
            "declaration" | "field_declaration" => self.c_declaration(n),
            "variable_declaration" => self.f_declaration(n),
            "for_range_loop" => {
                if let Some(d) = n.child_by_field_name("declarator") {
                    self.declarator(d, Role::Write);
                }
                self.field(n, "right", Role::Read);
                self.field(n, "body", Role::Read);
            }
            "assignment_expression" | "assignment_statement" => self.assignment(n),
            "update_expression" => self.field(n, "argument", Role::Update),
            "pointer_expression" | "parenthesized_expression" if self.lang == Lang::C => {
                // `*p = x` writes through p; `&x` passes x.
                self.children(n, role)
            }
            // Members: only the base is a name of the program.
            "field_expression" => self.field(n, "argument", Role::Read),
            "derived_type_member_expression" => {
                if let Some(b) = n.named_child(0) {
                    self.node(b, Role::Read);
                }
            }
            "qualified_identifier" => {}
            "subscript_expression" => self.subscript(n, role),
            "call_expression" => self.call(n, role),
            "subroutine_call" => {
                let name = n
                    .child_by_field_name("subroutine")
                    .map(|s| self.key(s))
                    .unwrap_or_default();
                let mut c = n.walk();
                let kids: Vec<Node> = n.named_children(&mut c).collect();
                for k in kids.into_iter().filter(|k| k.kind() == "argument_list") {
                    self.arguments(k, &name);
                }
            }
            "keyword_argument" => self.field(n, "value", Role::Read),
            "loop_control_expression" => {
                let mut c = n.walk();
                let kids: Vec<Node> = n.named_children(&mut c).collect();
                for (i, k) in kids.into_iter().enumerate() {
                    self.node(k, if i == 0 { Role::Write } else { Role::Read });
                }
            }
            "deallocate_statement" | "nullify_statement" => {
                let word = if n.kind() == "nullify_statement" {
                    "nullify"
                } else {
                    "deallocate"
                };
                let mut c = n.walk();
                let kids: Vec<Node> = n.named_children(&mut c).collect();
                for k in kids {
                    if k.kind() == "identifier" {
                        self.push(k, Role::Read, false, Some(word.into()));
                    } else {
                        self.node(k, Role::Read);
                    }
                }
            }
            _ => self.children(n, Role::Read),
        }
    }

    /// C declarations: the names they initialize are written; array
    /// extents are read.
    fn c_declaration(&mut self, n: Node) {
        let mut c = n.walk();
        let kids: Vec<Node> = n.children_by_field_name("declarator", &mut c).collect();
        for d in kids {
            self.declarator(d, Role::Read);
        }
    }

    /// A declarator: its name is used only when `role` says so (an
    /// initializer writes it); sizes and initial values are read.
    fn declarator(&mut self, d: Node, role: Role) {
        match d.kind() {
            "identifier" => {
                if role == Role::Write {
                    self.push(d, Role::Write, false, None);
                }
            }
            "init_declarator" => {
                if let Some(x) = d.child_by_field_name("declarator") {
                    self.declarator(x, Role::Write);
                }
                self.field(d, "value", Role::Read);
            }
            "array_declarator" => {
                if let Some(x) = d.child_by_field_name("declarator") {
                    self.declarator(x, role);
                }
                self.field(d, "size", Role::Read);
            }
            "pointer_declarator" | "reference_declarator" | "parenthesized_declarator" => {
                let mut c = d.walk();
                let kids: Vec<Node> = d.named_children(&mut c).collect();
                for k in kids {
                    self.declarator(k, role);
                }
            }
            "function_declarator" => {}
            _ => self.node(d, Role::Read),
        }
    }

    /// Fortran declarations: the names declared are not used; extents
    /// and initial values are read.
    fn f_declaration(&mut self, n: Node) {
        let mut c = n.walk();
        let kids: Vec<Node> = n.children_by_field_name("declarator", &mut c).collect();
        for d in kids {
            match d.kind() {
                "identifier" => {}
                "sized_declarator" => {
                    let mut c = d.walk();
                    let sizes: Vec<Node> = d
                        .named_children(&mut c)
                        .filter(|k| k.kind() == "size")
                        .collect();
                    for s in sizes {
                        self.node(s, Role::Read);
                    }
                }
                "init_declarator" | "pointer_init_declarator" => self.field(d, "right", Role::Read),
                _ => self.node(d, Role::Read),
            }
        }
    }

    fn assignment(&mut self, n: Node) {
        let (Some(l), Some(r)) = (
            n.child_by_field_name("left"),
            n.child_by_field_name("right"),
        ) else {
            return self.children(n, Role::Read);
        };
        let op = n
            .child_by_field_name("operator")
            .map_or("=", |o| self.text(o));
        let role = if op == "=" { Role::Write } else { Role::Update };
        if l.kind() == "identifier" {
            if let Some(red) = self.reduction(n, l, op, r) {
                self.out.reductions.insert(self.pos(l), red);
            }
        }
        self.node(l, role);
        self.node(r, Role::Read);
    }

    /// C `a[i][j]`: `a` is indexed, the subscripts are read.
    fn subscript(&mut self, n: Node, role: Role) {
        let mut at = n;
        while at.kind() == "subscript_expression" {
            for f in ["index", "indices"] {
                self.field(at, f, Role::Read);
            }
            match at.child_by_field_name("argument") {
                Some(a) => at = a,
                None => return,
            }
        }
        if at.kind() == "identifier" {
            self.push(at, role, true, None);
        } else {
            self.node(at, Role::Read);
        }
    }

    /// A call, or (Fortran) an array element: the grammar reads `a(i)` as
    /// a call, so a name not known as a function is indexed.
    fn call(&mut self, n: Node, role: Role) {
        let f = n
            .child_by_field_name("function")
            .or_else(|| n.named_child(0));
        let Some(f) = f else {
            return self.children(n, Role::Read);
        };
        let name = self.key(f);
        match (self.lang, f.kind()) {
            (Lang::Fortran, "identifier") if !F_FUNCTIONS.contains(&name.as_str()) => {
                self.push(f, role, true, None)
            }
            (_, "identifier" | "qualified_identifier") => {}
            _ => self.node(f, Role::Read),
        }
        let mut c = n.walk();
        let kids: Vec<Node> = n.named_children(&mut c).collect();
        for k in kids.into_iter().filter(|k| k.kind() == "argument_list") {
            self.arguments(k, &name);
        }
    }

    /// A call's arguments: a bare name is passed whole.
    fn arguments(&mut self, list: Node, callee: &str) {
        let mut c = list.walk();
        let kids: Vec<Node> = list.named_children(&mut c).collect();
        for k in kids {
            if k.kind() == "identifier" {
                self.push(k, Role::Read, false, Some(callee.to_string()));
            } else {
                self.node(k, Role::Read);
            }
        }
    }

    /// The reduction `lhs op rhs` performs on the bare name `lhs`.
    fn reduction(&self, n: Node, lhs: Node, op: &str, rhs: Node) -> Option<Reduction> {
        let var = self.key(lhs);
        let make = |op: &str| Reduction {
            op: op.to_string(),
            var: self.text(lhs).to_string(),
            line: self.pos(lhs).0,
            statement: self.statement_text(n),
        };
        match op {
            "+=" | "-=" => return Some(make("+")),
            "*=" => return Some(make("*")),
            "=" => {}
            _ => return None,
        }
        // v = max(v, ...), fmax(...), min(...)
        if rhs.kind() == "call_expression" {
            let f = rhs
                .child_by_field_name("function")
                .or_else(|| rhs.named_child(0))?;
            let f = self.text(f).to_ascii_lowercase();
            let op = if MAX_FNS.contains(&f.as_str()) {
                Some("max")
            } else if MIN_FNS.contains(&f.as_str()) {
                Some("min")
            } else {
                None
            };
            if let Some(op) = op {
                let args = rhs
                    .child_by_field_name("arguments")
                    .or_else(|| rhs.named_child(1))?;
                if self.mentions(args, &var) {
                    return Some(make(op));
                }
            }
        }
        // v = v + e, v = e + v, v = v - e; v = v * e, v = e * v: the name
        // a term of the sum (product) once, and nowhere else.
        for (ops, red) in [(&["+", "-"][..], "+"), (&["*"][..], "*")] {
            let mut terms = Vec::new();
            self.terms(rhs, ops, false, &mut terms);
            if terms.len() < 2 {
                continue;
            }
            let own: Vec<&(Node, bool)> = terms
                .iter()
                .filter(|(t, _)| t.kind() == "identifier" && self.key(*t) == var)
                .collect();
            let others_clean = terms
                .iter()
                .filter(|(t, _)| !(t.kind() == "identifier" && self.key(*t) == var))
                .all(|(t, _)| !self.mentions(*t, &var));
            if own.len() == 1 && !own[0].1 && others_clean {
                return Some(make(red));
            }
        }
        // v = a > b ? a : b (C)
        if rhs.kind() == "conditional_expression" {
            let cond = strip_parens(rhs.child_by_field_name("condition")?);
            let (l, cmp, r) = self.comparison(cond)?;
            let a = self.flat(rhs.child_by_field_name("consequence")?);
            let b = self.flat(rhs.child_by_field_name("alternative")?);
            let (ls, rs) = (self.flat(l), self.flat(r));
            let greater = matches!(cmp.as_str(), ">" | ">=");
            if self.mentions(l, &var) || self.mentions(r, &var) {
                if a == ls && b == rs {
                    return Some(make(if greater { "max" } else { "min" }));
                }
                if a == rs && b == ls {
                    return Some(make(if greater { "min" } else { "max" }));
                }
            }
        }
        // if (x > v) v = x;   if (v < x) v = x
        let mut up = n.parent()?;
        while matches!(
            up.kind(),
            "expression_statement" | "compound_statement" | "block"
        ) {
            up = up.parent()?;
        }
        if up.kind() == "if_statement" && !self.has_else(up) {
            let cond = up
                .child_by_field_name("condition")
                .or_else(|| up.named_child(0))?;
            let (l, cmp, r) = self.comparison(strip_parens(cond))?;
            let gt = matches!(cmp.as_str(), ">" | ">=" | ".gt." | ".ge.");
            let x = self.flat(rhs);
            let is_v = |s: Node| s.kind() == "identifier" && self.key(s) == var;
            if is_v(r) && self.flat(l) == x {
                return Some(make(if gt { "max" } else { "min" }));
            }
            if is_v(l) && self.flat(r) == x {
                return Some(make(if gt { "min" } else { "max" }));
            }
        }
        None
    }

    fn has_else(&self, n: Node) -> bool {
        let mut c = n.walk();
        let found = n
            .children(&mut c)
            .any(|k| matches!(k.kind(), "else_clause" | "elseif_clause" | "else"));
        found
    }

    /// `n` as a comparison: left, operator (lower case), right.
    fn comparison<'t>(&self, n: Node<'t>) -> Option<(Node<'t>, String, Node<'t>)> {
        if !matches!(n.kind(), "binary_expression" | "relational_expression") {
            return None;
        }
        let op = self
            .text(n.child_by_field_name("operator")?)
            .to_ascii_lowercase();
        matches!(
            op.as_str(),
            ">" | ">=" | "<" | "<=" | ".gt." | ".lt." | ".ge." | ".le."
        )
        .then(|| {
            Some((
                n.child_by_field_name("left")?,
                op,
                n.child_by_field_name("right")?,
            ))
        })?
    }

    /// The terms of the sum (`ops` "+", "-") or product (`ops` "*") `n`
    /// is, each with whether it is subtracted.
    fn terms<'t>(&self, n: Node<'t>, ops: &[&str], neg: bool, out: &mut Vec<(Node<'t>, bool)>) {
        if matches!(n.kind(), "binary_expression" | "math_expression") {
            if let (Some(l), Some(o), Some(r)) = (
                n.child_by_field_name("left"),
                n.child_by_field_name("operator"),
                n.child_by_field_name("right"),
            ) {
                let o = self.text(o);
                if ops.contains(&o) {
                    self.terms(l, ops, neg, out);
                    self.terms(r, ops, neg ^ (o == "-"), out);
                    return;
                }
            }
        }
        out.push((n, neg));
    }

    /// `n` names `key` somewhere.
    fn mentions(&self, n: Node, key: &str) -> bool {
        if n.kind() == "identifier" {
            return self.key(n) == key;
        }
        let mut c = n.walk();
        let found = n
            .named_children(&mut c)
            .any(|k| k.kind() != "field_identifier" && self.mentions(k, key));
        found
    }

    /// The text of `n` without whitespace, for comparing expressions.
    fn flat(&self, n: Node) -> String {
        self.text(strip_parens(n))
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect()
    }

    /// A statement as written, on one line: whitespace runs as one space,
    /// Fortran continuation marks and a C statement's `;` left out.
    fn statement_text(&self, n: Node) -> String {
        let t = self.text(n);
        let mut parts: Vec<&str> = Vec::new();
        for l in t.lines() {
            let l = l.trim();
            let l = if self.lang == Lang::Fortran {
                l.trim_end_matches('&').trim_start_matches('&').trim()
            } else {
                l
            };
            if !l.is_empty() {
                parts.push(l);
            }
        }
        let joined = parts.join(" ");
        let words: Vec<&str> = joined.split_whitespace().collect();
        words.join(" ").trim_end_matches(';').trim_end().to_string()
    }
}

fn strip_parens(mut n: Node) -> Node {
    while matches!(n.kind(), "parenthesized_expression" | "condition_clause") {
        match n.named_child(0) {
            Some(k) => n = k,
            None => break,
        }
    }
    n
}
