//! The program's structure as tree-sitter's C, C++ and Fortran grammars
//! parse it: functions, loops with their bounds, steps and nests, and per
//! statement the arrays read and written with their subscripts, as affine
//! expressions of the loop variables where they are.
//!
//! A file is parsed once, on the first question ([`SourceFile::syntax`]).
//! To the grammars an OpenACC directive is a preprocessor line (C) or a
//! comment (Fortran): accprof's own directive parser reads it, and each
//! loop is attached to the directive right before it (blank lines and
//! comments aside).

pub mod fusion;

use std::collections::BTreeMap;

use tree_sitter::{Node, Parser};

use super::pos::{end_line, line};

use super::{Lang, SourceFile};

/// `sum(coef * name) + konst`: a subscript as an affine expression.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Affine {
    pub terms: BTreeMap<String, i64>,
    pub konst: i64,
}

impl Affine {
    fn konst(k: i64) -> Affine {
        Affine {
            terms: BTreeMap::new(),
            konst: k,
        }
    }

    fn var(name: &str) -> Affine {
        Affine {
            terms: BTreeMap::from([(name.to_string(), 1)]),
            konst: 0,
        }
    }

    fn add(mut self, o: &Affine, sign: i64) -> Affine {
        for (k, v) in &o.terms {
            *self.terms.entry(k.clone()).or_default() += sign * v;
        }
        self.terms.retain(|_, v| *v != 0);
        self.konst += sign * o.konst;
        self
    }

    fn scale(mut self, by: i64) -> Affine {
        for v in self.terms.values_mut() {
            *v *= by;
        }
        self.terms.retain(|_, v| *v != 0);
        self.konst *= by;
        self
    }

    fn as_konst(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.konst)
    }

    /// The expression with the names of `map` renamed.
    pub fn renamed(&self, map: &BTreeMap<String, String>) -> Affine {
        let mut out = Affine::konst(self.konst);
        for (k, v) in &self.terms {
            let k = map.get(k).cloned().unwrap_or_else(|| k.clone());
            *out.terms.entry(k).or_default() += v;
        }
        out
    }

    /// As written in C (`i+1`).
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.terms {
            match *v {
                1 if s.is_empty() => s.push_str(k),
                1 => s.push_str(&format!("+{k}")),
                -1 => s.push_str(&format!("-{k}")),
                v if v > 0 && !s.is_empty() => s.push_str(&format!("+{v}*{k}")),
                v => s.push_str(&format!("{v}*{k}")),
            }
        }
        if self.konst != 0 || s.is_empty() {
            if self.konst > 0 && !s.is_empty() {
                s.push('+');
            }
            s.push_str(&self.konst.to_string());
        }
        s
    }
}

/// One access to a variable: an array with its subscripts (each affine,
/// or None where it is not), or a scalar (no subscripts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub name: String,
    pub subs: Vec<Option<Affine>>,
}

impl Access {
    pub fn is_array(&self) -> bool {
        !self.subs.is_empty()
    }

    /// As written in C (`a[i][j+1]`), `?` for a subscript that is not affine.
    pub fn text(&self) -> String {
        let mut s = self.name.clone();
        for x in &self.subs {
            s.push('[');
            s.push_str(&x.as_ref().map(Affine::text).unwrap_or_else(|| "?".into()));
            s.push(']');
        }
        s
    }
}

/// One statement in a loop: what it writes and reads.
#[derive(Debug, Clone, Default)]
pub struct Stmt {
    pub line: u32,
    pub writes: Vec<Access>,
    pub reads: Vec<Access>,
    /// Scalars the statement declares (C: `double t = ...`).
    pub locals: Vec<String>,
    /// Functions and subroutines the statement calls, whose effects are
    /// not read (C math functions and Fortran intrinsics are not listed).
    pub calls: Vec<String>,
    /// The statement is in a branch of a conditional inside the loop.
    pub guarded: bool,
}

/// What kind of loop: counted (C `for`, Fortran `do`), or run while a
/// condition holds (C `while` and `do ... while`, Fortran `do while`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopKind {
    For,
    While,
    DoWhile,
}

/// An integer expression as written (a loop bound): literals, names and
/// arithmetic. Names get their values from the file's constants
/// ([`SourceFile::int_expr`]), when asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntExpr {
    /// A literal as written (`16`, `0x10`, `16_8`).
    Lit(String),
    /// A name (Fortran: lower case).
    Name(String),
    Neg(Box<IntExpr>),
    /// `+ - * / %`, and `^` for Fortran's `**`.
    Bin(char, Box<IntExpr>, Box<IntExpr>),
}

impl IntExpr {
    fn bin(op: char, l: IntExpr, r: IntExpr) -> IntExpr {
        IntExpr::Bin(op, Box::new(l), Box::new(r))
    }
}

/// A counted loop's index values as written: the first, the last
/// (inclusive: C's `i < n` is `n - 1`; None where the bound is not an
/// integer expression) and the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    pub first: IntExpr,
    pub last: Option<IntExpr>,
    pub step: IntExpr,
}

pub use super::pos::Pos;

/// Where a statement starts and ends (one past its last character), and
/// its last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statement {
    pub from: Pos,
    pub to: Pos,
    pub last: u32,
}

/// An `if` statement: its condition, and the lines its first branch
/// guards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct If {
    pub line: u32,
    /// The condition as written, without its parentheses (whitespace
    /// runs as one space).
    pub condition: String,
    /// First and last line of the code the condition guards (a Fortran
    /// block `if`: from its own line to the line before its `end if`).
    pub first: u32,
    pub last: u32,
    /// It has an `else` (or `else if`) branch.
    pub has_else: bool,
}

/// One loop (C `for`, `while`, `do`; Fortran `do`, `do while`).
#[derive(Debug, Clone)]
pub struct SLoop {
    pub kind: LoopKind,
    /// Where the loop statement starts and ends (one past its last
    /// character).
    pub from: Pos,
    pub to: Pos,
    /// The index's first and last values and step, where the header
    /// says them with integer expressions.
    pub bounds: Option<Bounds>,
    /// The loop variable, when the header names one.
    pub var: Option<String>,
    /// Lower bound, bound test and step as written (spaces removed, the
    /// loop variable written `@`), for comparing iteration spaces.
    pub space: String,
    /// The iteration space as affine expressions where the header allows:
    /// first value, last value (inclusive) and step. `i = 0; i < n` and
    /// `i = 0; i <= n - 1` are one range.
    pub range: Option<(Affine, Affine, i64)>,
    /// C: the header declares its variable (`for (int i = ...`).
    pub declares: bool,
    pub start: u32,
    pub end: u32,
    /// The header as written (C: `for (...)`; Fortran: `do i = 1, n`).
    pub header: String,
    /// The one loop that is this loop's whole body (a perfect nest).
    pub inner: Option<usize>,
    /// The loop's body statements as written, one per entry.
    pub body_text: Vec<String>,
    /// Every statement in the loop, nested loops included.
    pub stmts: Vec<Stmt>,
    /// The loop that follows this one with nothing but comments and
    /// directives between them.
    pub next: Option<usize>,
    /// First line of the OpenACC directive right before the loop.
    pub directive: Option<u32>,
    /// Fortran: the `!$acc end ...` line right after the loop.
    pub end_directive: Option<u32>,
    /// The function (index into `functions`) the loop is in.
    pub function: Option<usize>,
}

/// A function, subroutine or program unit.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    pub start: u32,
    pub end: u32,
}

/// What the parser read of one file.
#[derive(Debug, Clone, Default)]
pub struct Syntax {
    pub functions: Vec<Function>,
    pub loops: Vec<SLoop>,
    /// Every `if` statement, in the order they start.
    pub ifs: Vec<If>,
    /// Statements (C), in the order they start; a statement holding
    /// others comes before them.
    pub statements: Vec<Statement>,
    /// The grammar found errors (ERROR or MISSING nodes) on these lines.
    pub error_lines: Vec<u32>,
    /// Every use of a name, and the reductions of assignments.
    pub names: super::uses::Names,
    /// Every function header and call.
    pub calls: super::calls::Calls,
    /// Arrays and C locals as declared.
    pub decls: super::decl::Decls,
    /// The tree itself, for the statement lists of blocks.
    pub tree: Option<tree_sitter::Tree>,
}

impl Syntax {
    /// The first statement (C) that starts after line `n`: the one a
    /// directive ending there applies to.
    pub fn statement_after(&self, n: u32) -> Option<&Statement> {
        self.statements.iter().find(|s| s.from.0 > n)
    }

    /// The counted loop a directive starting at `line` governs.
    pub fn loop_of_directive(&self, line: u32) -> Option<usize> {
        self.loops
            .iter()
            .position(|l| l.directive == Some(line) && l.kind == LoopKind::For)
    }

    /// The loops of the perfect nest starting at `l`, outermost first.
    pub fn nest(&self, l: usize) -> Vec<usize> {
        let mut out = vec![l];
        let mut at = l;
        while let Some(i) = self.loops[at].inner {
            out.push(i);
            at = i;
        }
        out
    }
}

/// Fortran intrinsics that look like array references to the grammar.
const F_INTRINSICS: &[&str] = &[
    "abs", "sqrt", "sin", "cos", "tan", "exp", "log", "log10", "max", "min", "mod", "real", "dble",
    "int", "nint", "floor", "ceiling", "sign", "atan", "atan2", "asin", "acos", "sinh", "cosh",
    "tanh", "maxval", "minval", "sum", "product", "size", "kind", "huge", "tiny", "epsilon",
    "merge", "float", "modulo", "cmplx", "aimag", "conjg",
];

/// C math functions without side effects.
const C_PURE: &[&str] = &[
    "sin", "cos", "tan", "sqrt", "fabs", "abs", "exp", "log", "log10", "pow", "fmax", "fmin",
    "floor", "ceil", "atan", "atan2", "asin", "acos", "sinh", "cosh", "tanh", "fmod", "sinf",
    "cosf", "sqrtf", "fabsf", "expf", "logf", "powf", "fmaxf", "fminf", "hypot", "cbrt",
];

/// Parses `text` as `lang` (`cpp` picks the C++ grammar for C-family files).
pub fn parse(
    lang: Lang,
    cpp: bool,
    text: &str,
    directive_at: &dyn Fn(u32) -> Option<u32>,
) -> Syntax {
    let mut parser = Parser::new();
    let language: tree_sitter::Language = match (lang, cpp) {
        (Lang::Fortran, _) => tree_sitter_fortran::LANGUAGE.into(),
        (Lang::C, false) => tree_sitter_c::LANGUAGE.into(),
        (Lang::C, true) => tree_sitter_cpp::LANGUAGE.into(),
    };
    if parser.set_language(&language).is_err() {
        return Syntax::default();
    }
    let Some(tree) = parser.parse(text, None) else {
        return Syntax::default();
    };
    let mut r = Reader {
        lang,
        src: text.as_bytes(),
        out: Syntax::default(),
        function: None,
        guard: 0,
    };
    r.walk(tree.root_node());
    r.branches(tree.root_node(), false);
    r.link(directive_at, text);
    r.out.names = super::uses::names(lang, text.as_bytes(), tree.root_node());
    r.out.calls = super::calls::calls(lang, text.as_bytes(), tree.root_node());
    r.out.decls = super::decl::decls(lang, text.as_bytes(), tree.root_node());
    r.out.tree = Some(tree);
    r.out
}

/// C loop statements (Fortran's are all `do_loop`).
fn c_loop(kind: &str) -> Option<LoopKind> {
    match kind {
        "for_statement" | "for_range_loop" => Some(LoopKind::For),
        "while_statement" => Some(LoopKind::While),
        "do_statement" => Some(LoopKind::DoWhile),
        _ => None,
    }
}

struct Reader<'a> {
    lang: Lang,
    src: &'a [u8],
    out: Syntax,
    function: Option<usize>,
    /// Depth of the conditionals around the statement being read.
    guard: u32,
}

impl Reader<'_> {
    fn text(&self, n: Node) -> String {
        n.utf8_text(self.src).unwrap_or("").to_string()
    }

    fn walk(&mut self, n: Node) {
        if n.is_error() || n.is_missing() {
            self.out.error_lines.push(line(n));
        }
        match n.kind() {
            "function_definition" | "subroutine" | "function" | "program" => {
                let name = self.function_name(n);
                self.out.functions.push(Function {
                    name,
                    start: line(n),
                    end: end_line(n),
                });
                let saved = self.function.replace(self.out.functions.len() - 1);
                self.children(n);
                self.function = saved;
            }
            _ if self.is_loop(n) => {
                self.do_loop(n);
            }
            _ => self.children(n),
        }
    }

    fn is_loop(&self, n: Node) -> bool {
        match self.lang {
            Lang::C => c_loop(n.kind()).is_some(),
            Lang::Fortran => n.kind() == "do_loop",
        }
    }

    /// Line and column (in characters) of byte `b` of the text.
    fn pos_of(&self, b: usize, row: usize, col: usize) -> Pos {
        let start = b - col;
        let chars = String::from_utf8_lossy(&self.src[start..b]).chars().count();
        (row as u32 + 1, chars as u32)
    }

    fn start_pos(&self, n: Node) -> Pos {
        let p = n.start_position();
        self.pos_of(n.start_byte(), p.row, p.column)
    }

    fn end_pos(&self, n: Node) -> Pos {
        let p = n.end_position();
        self.pos_of(n.end_byte(), p.row, p.column)
    }

    /// The `if` statements and (C) the statements under `n`, in the
    /// order they start. `stmt`: `n` stands where a statement does.
    fn branches(&mut self, n: Node, stmt: bool) {
        if n.kind() == "if_statement" {
            self.if_statement(n);
        }
        if stmt && self.lang == Lang::C && n.is_named() && !is_aside(n.kind()) {
            self.out.statements.push(Statement {
                from: self.start_pos(n),
                to: self.end_pos(n),
                last: end_line(n),
            });
        }
        // A statement's statements: a block's items, a loop's or a
        // branch's body.
        let holds = matches!(
            n.kind(),
            "compound_statement"
                | "translation_unit"
                | "declaration_list"
                | "else_clause"
                | "case_statement"
                | "labeled_statement"
                | "preproc_if"
                | "preproc_ifdef"
                | "preproc_else"
                | "preproc_elif"
        );
        let mut c = n.walk();
        if !c.goto_first_child() {
            return;
        }
        loop {
            let field = c.field_name();
            let is_stmt = (holds
                && !matches!(field, Some("condition" | "name" | "value" | "label")))
                || matches!(field, Some("body" | "consequence" | "alternative"));
            self.branches(c.node(), is_stmt);
            if !c.goto_next_sibling() {
                break;
            }
        }
    }

    fn if_statement(&mut self, n: Node) {
        let at = line(n);
        let mut c = n.walk();
        let kids: Vec<Node> = n.named_children(&mut c).collect();
        let (cond, first, last, has_else) = match self.lang {
            Lang::C => {
                let Some(cond) = n.child_by_field_name("condition") else {
                    return;
                };
                let Some(body) = n.child_by_field_name("consequence") else {
                    return;
                };
                let has_else = n.child_by_field_name("alternative").is_some();
                (cond, line(body), end_line(body), has_else)
            }
            Lang::Fortran => {
                let Some(cond) = kids
                    .iter()
                    .find(|k| k.kind() == "parenthesized_expression")
                    .copied()
                else {
                    return;
                };
                let has_else = kids
                    .iter()
                    .any(|k| matches!(k.kind(), "else_clause" | "elseif_clause"));
                let last = match kids.iter().find(|k| k.kind() == "end_if_statement") {
                    // A block `if`: up to the line before its `end if`.
                    Some(e) => line(*e).saturating_sub(1).max(at),
                    // `if (c) statement`: its own line.
                    None => end_line(n),
                };
                (cond, at, last, has_else)
            }
        };
        let text = self.text(cond);
        let t = text.trim();
        let t = t
            .strip_prefix('(')
            .and_then(|x| x.strip_suffix(')'))
            .unwrap_or(t);
        let condition = t
            .split_whitespace()
            .filter(|w| !(self.lang == Lang::Fortran && *w == "&"))
            .collect::<Vec<_>>()
            .join(" ");
        self.out.ifs.push(If {
            line: at,
            condition,
            first,
            last,
            has_else,
        });
    }

    fn children(&mut self, n: Node) {
        // A cursor, not a list of the children: every node of the file
        // comes through here.
        let mut c = n.walk();
        if !c.goto_first_child() {
            return;
        }
        loop {
            self.walk(c.node());
            if !c.goto_next_sibling() {
                break;
            }
        }
    }

    fn function_name(&self, n: Node) -> String {
        match self.lang {
            Lang::C => {
                let mut d = n.child_by_field_name("declarator");
                while let Some(x) = d {
                    if x.kind() == "identifier" || x.kind().ends_with("identifier") {
                        return self.text(x);
                    }
                    d = x.child_by_field_name("declarator");
                }
                String::new()
            }
            Lang::Fortran => n
                .named_child(0)
                .and_then(|s| {
                    let mut c = s.walk();
                    let k = s.named_children(&mut c).find(|k| k.kind() == "name");
                    k
                })
                .map(|k| self.text(k))
                .unwrap_or_default(),
        }
    }

    /// Records loop `n` and the loops inside it; returns its index.
    fn do_loop(&mut self, n: Node) -> usize {
        let idx = self.out.loops.len();
        let (var, space, header, body) = match self.lang {
            Lang::C => self.c_header(n),
            Lang::Fortran => self.f_header(n),
        };
        let (range, declares) = match self.lang {
            Lang::C => self.c_range(n, var.as_deref()),
            Lang::Fortran => (self.f_range(n), false),
        };
        let (kind, bounds) = match self.lang {
            Lang::C => (
                c_loop(n.kind()).unwrap_or(LoopKind::For),
                self.c_bounds(n, var.as_deref()),
            ),
            Lang::Fortran => self.f_bounds(n),
        };
        self.out.loops.push(SLoop {
            kind,
            from: self.start_pos(n),
            to: self.end_pos(n),
            bounds,
            var,
            space,
            range,
            declares,
            start: line(n),
            end: end_line(n),
            header,
            inner: None,
            body_text: Vec::new(),
            stmts: Vec::new(),
            next: None,
            directive: None,
            end_directive: None,
            function: self.function,
        });
        let mut stmts = Vec::new();
        let mut body_nodes = Vec::new();
        for b in body {
            if b.kind() == "compound_statement" {
                let mut c = b.walk();
                body_nodes.extend(b.named_children(&mut c));
            } else {
                body_nodes.push(b);
            }
        }
        let mut inner = Vec::new();
        for b in &body_nodes {
            self.statements(*b, &mut stmts, &mut inner);
        }
        // A loop whose body is an OpenACC `loop` directive and one loop is a
        // perfect nest too.
        let code = body_nodes
            .iter()
            .filter(|b| !matches!(b.kind(), "comment" | "preproc_call"))
            .count();
        let only_loop =
            code == 1 && inner.len() == 1 && self.out.loops[inner[0]].kind == LoopKind::For;
        let texts: Vec<String> = body_nodes.iter().map(|b| self.text(*b)).collect();
        let l = &mut self.out.loops[idx];
        l.stmts = stmts;
        if only_loop {
            l.inner = Some(inner[0]);
        }
        l.body_text = texts;
        // Statements of the nested loops are this loop's too.
        let nested: Vec<Stmt> = inner
            .iter()
            .flat_map(|&i| self.out.loops[i].stmts.clone())
            .collect();
        self.out.loops[idx].stmts.extend(nested);
        idx
    }

    /// Walks statement `n` of a loop body: its accesses into `stmts`, the
    /// loops directly in it into `inner`.
    fn statements(&mut self, n: Node, stmts: &mut Vec<Stmt>, inner: &mut Vec<usize>) {
        if self.is_loop(n) {
            inner.push(self.do_loop(n));
            return;
        }
        match n.kind() {
            "comment" | "preproc_call" | "end_do_loop_statement" | "do_statement" => {}
            "preproc_ifdef" | "preproc_if" | "preproc_else" | "preproc_elif"
            | "preproc_elifdef" => {
                // Both branches may be compiled: their statements count.
                let mut c = n.walk();
                let kids: Vec<(Option<&str>, Node)> = n
                    .children(&mut c)
                    .enumerate()
                    .map(|(i, k)| (n.field_name_for_child(i as u32), k))
                    .collect();
                for (field, k) in kids {
                    if k.is_named() && !matches!(field, Some("name" | "condition")) {
                        self.statements(k, stmts, inner);
                    }
                }
            }
            "compound_statement" | "if_statement" | "if_statement_block" | "else_clause"
            | "block" => {
                // Conditions are read; branches are statements.
                let branch = n.kind() != "compound_statement" && n.kind() != "block";
                let mut c = n.walk();
                let kids: Vec<Node> = n.named_children(&mut c).collect();
                for k in kids {
                    if matches!(
                        k.kind(),
                        "parenthesized_expression" | "condition_clause" | "binary_expression"
                    ) {
                        let mut s = Stmt {
                            line: line(k),
                            guarded: self.guard > 0,
                            ..Stmt::default()
                        };
                        self.reads(k, &mut s);
                        stmts.push(s);
                    } else {
                        self.guard += u32::from(branch);
                        self.statements(k, stmts, inner);
                        self.guard -= u32::from(branch);
                    }
                }
            }
            _ => {
                let mut s = Stmt {
                    line: line(n),
                    guarded: self.guard > 0,
                    ..Stmt::default()
                };
                self.statement(n, &mut s);
                stmts.push(s);
            }
        }
    }

    fn statement(&self, n: Node, s: &mut Stmt) {
        match n.kind() {
            "expression_statement" => {
                let mut c = n.walk();
                let kids: Vec<Node> = n.named_children(&mut c).collect();
                for k in kids {
                    self.statement(k, s);
                }
            }
            "assignment_expression" | "assignment_statement" => {
                let (Some(l), Some(r)) = (
                    n.child_by_field_name("left"),
                    n.child_by_field_name("right"),
                ) else {
                    self.reads(n, s);
                    return;
                };
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.text(o))
                    .unwrap_or_else(|| "=".into());
                if let Some(a) = self.access(l) {
                    if op != "=" {
                        s.reads.push(a.clone());
                    }
                    // Subscripts are read.
                    self.subscript_reads(l, s);
                    s.writes.push(a);
                } else {
                    self.reads(l, s);
                }
                self.reads(r, s);
            }
            "update_expression" => {
                if let Some(a) = n
                    .child_by_field_name("argument")
                    .and_then(|x| self.access(x))
                {
                    s.reads.push(a.clone());
                    s.writes.push(a);
                }
            }
            "declaration" => {
                let mut c = n.walk();
                let kids: Vec<Node> = n.named_children(&mut c).collect();
                for k in kids {
                    if k.kind() == "init_declarator" {
                        if let Some(d) = k.child_by_field_name("declarator") {
                            s.locals.push(self.text(d));
                        }
                        if let Some(v) = k.child_by_field_name("value") {
                            self.reads(v, s);
                        }
                    }
                }
            }
            _ => self.reads(n, s),
        }
    }

    /// The variable `n` names, with its subscripts.
    fn access(&self, n: Node) -> Option<Access> {
        match n.kind() {
            "identifier" => Some(Access {
                name: self.key(&self.text(n)),
                subs: Vec::new(),
            }),
            "subscript_expression" => {
                let mut subs = Vec::new();
                let mut at = n;
                while at.kind() == "subscript_expression" {
                    let idx = at
                        .child_by_field_name("index")
                        .or_else(|| at.child_by_field_name("indices"));
                    subs.push(idx.and_then(|i| self.affine(i)));
                    at = at.child_by_field_name("argument")?;
                }
                if at.kind() != "identifier" {
                    return None;
                }
                subs.reverse();
                Some(Access {
                    name: self.key(&self.text(at)),
                    subs,
                })
            }
            "call_expression" if self.lang == Lang::Fortran => {
                let name = n.named_child(0).filter(|x| x.kind() == "identifier")?;
                let name = self.key(&self.text(name));
                if F_INTRINSICS.contains(&name.as_str()) {
                    return None;
                }
                let args = n.named_child(1)?;
                let mut c = args.walk();
                let subs = args
                    .named_children(&mut c)
                    .map(|a| self.affine(a))
                    .collect();
                Some(Access { name, subs })
            }
            "parenthesized_expression" => n.named_child(0).and_then(|x| self.access(x)),
            _ => None,
        }
    }

    fn key(&self, name: &str) -> String {
        super::lang_key(self.lang, name)
    }

    fn subscript_reads(&self, n: Node, s: &mut Stmt) {
        match n.kind() {
            "subscript_expression" => {
                if let Some(i) = n
                    .child_by_field_name("index")
                    .or_else(|| n.child_by_field_name("indices"))
                {
                    self.reads(i, s);
                }
                if let Some(a) = n.child_by_field_name("argument") {
                    self.subscript_reads(a, s);
                }
            }
            "call_expression" => {
                if let Some(a) = n.named_child(1) {
                    self.reads(a, s);
                }
            }
            _ => {}
        }
    }

    /// Every variable expression `n` reads.
    fn reads(&self, n: Node, s: &mut Stmt) {
        match n.kind() {
            "identifier" => s.reads.push(Access {
                name: self.key(&self.text(n)),
                subs: Vec::new(),
            }),
            "subscript_expression" => {
                if let Some(a) = self.access(n) {
                    s.reads.push(a);
                }
                self.subscript_reads(n, s);
            }
            "call_expression" => match self.access(n) {
                Some(a) => {
                    s.reads.push(a);
                    self.subscript_reads(n, s);
                }
                None => {
                    // A call: its arguments are read (C: not its name).
                    let name = n
                        .child_by_field_name("function")
                        .or_else(|| n.named_child(0))
                        .map(|f| self.key(&self.text(f)))
                        .unwrap_or_default();
                    if !C_PURE.contains(&name.as_str()) && !F_INTRINSICS.contains(&name.as_str()) {
                        s.calls.push(name);
                    }
                    let mut c = n.walk();
                    let kids: Vec<Node> = n.named_children(&mut c).collect();
                    for k in kids {
                        if k.kind() == "argument_list" {
                            self.reads(k, s);
                        }
                    }
                }
            },
            "subroutine_call" => {
                let name = n
                    .child_by_field_name("subroutine")
                    .or_else(|| n.named_child(0))
                    .map(|f| self.key(&self.text(f)))
                    .unwrap_or_default();
                s.calls.push(name);
                let mut c = n.walk();
                let kids: Vec<Node> = n.named_children(&mut c).collect();
                for k in kids {
                    if k.kind() == "argument_list" {
                        self.reads(k, s);
                    }
                }
            }
            "field_expression" => {
                if let Some(a) = n.child_by_field_name("argument") {
                    self.reads(a, s);
                }
            }
            "assignment_expression" | "update_expression" => self.statement(n, s),
            _ => {
                let mut c = n.walk();
                let kids: Vec<Node> = n.named_children(&mut c).collect();
                for k in kids {
                    self.reads(k, s);
                }
            }
        }
    }

    fn affine(&self, n: Node) -> Option<Affine> {
        match n.kind() {
            "identifier" => Some(Affine::var(&self.key(&self.text(n)))),
            "number_literal" => self.text(n).parse().ok().map(Affine::konst),
            "parenthesized_expression" => self.affine(n.named_child(0)?),
            "unary_expression" => {
                let op = self.text(n.child(0)?);
                let a = self.affine(n.named_child(0)?)?;
                match op.as_str() {
                    "-" => Some(a.scale(-1)),
                    "+" => Some(a),
                    _ => None,
                }
            }
            "binary_expression" | "math_expression" => {
                let l = self.affine(n.child_by_field_name("left")?)?;
                let r = self.affine(n.child_by_field_name("right")?)?;
                let op = self.text(n.child_by_field_name("operator")?);
                match op.as_str() {
                    "+" => Some(l.add(&r, 1)),
                    "-" => Some(l.add(&r, -1)),
                    "*" => match (l.as_konst(), r.as_konst()) {
                        (Some(k), _) => Some(r.scale(k)),
                        (_, Some(k)) => Some(l.scale(k)),
                        _ => None,
                    },
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// C: (variable, space, header, body).
    fn c_header<'t>(&self, n: Node<'t>) -> (Option<String>, String, String, Vec<Node<'t>>) {
        let init = n.child_by_field_name("initializer");
        let var = init.and_then(|i| match i.kind() {
            "declaration" => i
                .named_child(1)
                .and_then(|d| d.child_by_field_name("declarator"))
                .map(|d| self.text(d)),
            "assignment_expression" => i.child_by_field_name("left").map(|d| self.text(d)),
            _ => None,
        });
        let lower = init
            .and_then(|i| match i.kind() {
                "declaration" => i
                    .named_child(1)
                    .and_then(|d| d.child_by_field_name("value")),
                "assignment_expression" => i.child_by_field_name("right"),
                _ => None,
            })
            .map(|x| self.text(x))
            .unwrap_or_default();
        let cond = n
            .child_by_field_name("condition")
            .map(|x| self.text(x))
            .unwrap_or_default();
        let step = n
            .child_by_field_name("update")
            .map(|x| self.text(x))
            .unwrap_or_default();
        let body = n.child_by_field_name("body");
        let header = match body {
            Some(b) => String::from_utf8_lossy(&self.src[n.start_byte()..b.start_byte()])
                .trim_end()
                .to_string(),
            None => self.text(n),
        };
        let space = normalize(&format!("{lower};{cond};{step}"), var.as_deref());
        (var, space, header, body.into_iter().collect())
    }

    /// C: the parts of a header `v = lo; v < hi; v++` (or `<=`, `>`,
    /// `>=`, a constant step): the first value, the bound, the test as
    /// `v OP bound`, and the step.
    fn c_parts<'t>(&self, n: Node<'t>, v: &str) -> Option<(Node<'t>, Node<'t>, String, i64)> {
        if n.kind() != "for_statement" {
            return None;
        }
        let init = n.child_by_field_name("initializer")?;
        let lower = match init.kind() {
            "declaration" => init
                .named_child(1)
                .and_then(|d| d.child_by_field_name("value"))?,
            "assignment_expression" => init.child_by_field_name("right")?,
            _ => return None,
        };
        let cond = n.child_by_field_name("condition")?;
        if cond.kind() != "binary_expression" {
            return None;
        }
        let (l, r) = (
            cond.child_by_field_name("left")?,
            cond.child_by_field_name("right")?,
        );
        let op = self.text(cond.child_by_field_name("operator")?);
        // `v < hi` or `hi > v`.
        let (bound, op) = if self.text(l) == v {
            (r, op)
        } else if self.text(r) == v {
            let flipped = match op.as_str() {
                "<" => ">",
                "<=" => ">=",
                ">" => "<",
                ">=" => "<=",
                _ => return None,
            };
            (l, flipped.to_string())
        } else {
            return None;
        };
        let step = self.c_step(n.child_by_field_name("update")?, v)?;
        Some((lower, bound, op, step))
    }

    /// C: the loop's range as affine expressions, when its header is
    /// `v = lo; v < hi` (see [`Self::c_parts`]); and whether it declares `v`.
    fn c_range(&self, n: Node, var: Option<&str>) -> (Option<(Affine, Affine, i64)>, bool) {
        let init = n.child_by_field_name("initializer");
        let declares = init.is_some_and(|i| i.kind() == "declaration");
        let range = (|| {
            let (lower, bound, op, step) = self.c_parts(n, var?)?;
            let lower = self.affine(lower)?;
            let bound = self.affine(bound)?;
            let last = match (op.as_str(), step > 0) {
                ("<", true) => bound.add(&Affine::konst(1), -1),
                ("<=", true) | (">=", false) => bound,
                (">", false) => bound.add(&Affine::konst(1), 1),
                _ => return None,
            };
            Some((lower, last, step))
        })();
        (range, declares)
    }

    /// C: the loop's bounds as integer expressions (see [`Self::c_parts`]).
    fn c_bounds(&self, n: Node, var: Option<&str>) -> Option<Bounds> {
        let (lower, bound, op, step) = self.c_parts(n, var?)?;
        let bound = self.int_expr(bound);
        let one = || IntExpr::Lit("1".into());
        let last = match (op.as_str(), step > 0) {
            ("<", true) => bound.map(|b| IntExpr::bin('-', b, one())),
            ("<=", true) | (">=", false) => bound,
            (">", false) => bound.map(|b| IntExpr::bin('+', b, one())),
            _ => return None,
        };
        let size = IntExpr::Lit(step.unsigned_abs().to_string());
        Some(Bounds {
            first: self.int_expr(lower)?,
            last,
            step: if step < 0 {
                IntExpr::Neg(Box::new(size))
            } else {
                size
            },
        })
    }

    /// Fortran: the kind of `do` loop `n` is, and its bounds
    /// (`do v = first, last[, step]`).
    fn f_bounds(&self, n: Node) -> (LoopKind, Option<Bounds>) {
        let mut c = n.walk();
        let Some(ds) = n
            .named_children(&mut c)
            .find(|x| x.kind() == "do_statement")
        else {
            return (LoopKind::For, None);
        };
        let mut c2 = ds.walk();
        let kids: Vec<Node> = ds.named_children(&mut c2).collect();
        if kids.iter().any(|k| k.kind() == "while_statement") {
            return (LoopKind::While, None);
        }
        let bounds = (|| {
            let ctl = kids
                .iter()
                .find(|x| x.kind() == "loop_control_expression")?;
            let mut c3 = ctl.walk();
            let parts: Vec<Node> = ctl.named_children(&mut c3).collect();
            Some(Bounds {
                first: self.int_expr(*parts.get(1)?)?,
                last: self.int_expr(*parts.get(2)?),
                step: match parts.get(3) {
                    Some(s) => self.int_expr(*s)?,
                    None => IntExpr::Lit("1".into()),
                },
            })
        })();
        (LoopKind::For, bounds)
    }

    /// `n` as an integer expression of literals and names.
    fn int_expr(&self, n: Node) -> Option<IntExpr> {
        match n.kind() {
            "number_literal" => Some(IntExpr::Lit(self.text(n))),
            "identifier" => Some(IntExpr::Name(self.key(&self.text(n)))),
            "parenthesized_expression" if n.named_child_count() == 1 => {
                self.int_expr(n.named_child(0)?)
            }
            "unary_expression" => {
                let a = self.int_expr(n.named_child(0)?)?;
                match self.text(n.child(0)?).as_str() {
                    "-" => Some(IntExpr::Neg(Box::new(a))),
                    "+" => Some(a),
                    _ => None,
                }
            }
            "binary_expression" | "math_expression" => {
                let l = self.int_expr(n.child_by_field_name("left")?)?;
                let r = self.int_expr(n.child_by_field_name("right")?)?;
                let op = match (
                    self.text(n.child_by_field_name("operator")?).as_str(),
                    self.lang,
                ) {
                    ("+", _) => '+',
                    ("-", _) => '-',
                    ("*", _) => '*',
                    ("/", _) => '/',
                    ("%", Lang::C) => '%',
                    ("**", Lang::Fortran) => '^',
                    _ => return None,
                };
                Some(IntExpr::bin(op, l, r))
            }
            _ => None,
        }
    }

    /// The constant step of a C loop's update expression over `v`.
    fn c_step(&self, u: Node, v: &str) -> Option<i64> {
        match u.kind() {
            "update_expression" => {
                let t = self.text(u);
                let arg = self.text(u.child_by_field_name("argument")?);
                if arg != v {
                    return None;
                }
                if t.contains("++") {
                    Some(1)
                } else if t.contains("--") {
                    Some(-1)
                } else {
                    None
                }
            }
            "assignment_expression" => {
                if self.text(u.child_by_field_name("left")?) != v {
                    return None;
                }
                let op = self.text(u.child_by_field_name("operator")?);
                let r = self.affine(u.child_by_field_name("right")?)?;
                match op.as_str() {
                    "+=" => r.as_konst(),
                    "-=" => r.as_konst().map(|k| -k),
                    "=" => {
                        let d = r.add(&Affine::var(&self.key(v)), -1);
                        d.as_konst()
                    }
                    _ => None,
                }
            }
            "parenthesized_expression" => self.c_step(u.named_child(0)?, v),
            _ => None,
        }
    }

    /// Fortran: the range of `do v = lo, hi[, step]`.
    fn f_range(&self, n: Node) -> Option<(Affine, Affine, i64)> {
        let mut c = n.walk();
        let ds = n
            .named_children(&mut c)
            .find(|x| x.kind() == "do_statement")?;
        let mut c2 = ds.walk();
        let ctl = ds
            .named_children(&mut c2)
            .find(|x| x.kind() == "loop_control_expression")?;
        let mut c3 = ctl.walk();
        let parts: Vec<Node> = ctl.named_children(&mut c3).collect();
        let lo = self.affine(*parts.get(1)?)?;
        let hi = self.affine(*parts.get(2)?)?;
        let step = match parts.get(3) {
            Some(s) => self.affine(*s)?.as_konst()?,
            None => 1,
        };
        Some((lo, hi, step))
    }

    /// Fortran: (variable, space, header, body).
    fn f_header<'t>(&self, n: Node<'t>) -> (Option<String>, String, String, Vec<Node<'t>>) {
        let mut c = n.walk();
        let kids: Vec<Node> = n.named_children(&mut c).collect();
        let mut var = None;
        let mut space = String::new();
        let mut header = String::new();
        let mut body = Vec::new();
        for k in kids {
            match k.kind() {
                "do_statement" => {
                    header = self.text(k);
                    let mut c2 = k.walk();
                    let ctl = k
                        .named_children(&mut c2)
                        .find(|x| x.kind() == "loop_control_expression");
                    if let Some(ctl) = ctl {
                        let mut c3 = ctl.walk();
                        let parts: Vec<String> =
                            ctl.named_children(&mut c3).map(|x| self.text(x)).collect();
                        var = parts.first().map(|v| self.key(v));
                        let mut rest: Vec<String> = parts.iter().skip(1).cloned().collect();
                        if rest.len() == 2 {
                            rest.push("1".into());
                        }
                        space = normalize(&rest.join(";"), var.as_deref()).to_ascii_lowercase();
                    } else {
                        space = normalize(&header, None).to_ascii_lowercase();
                    }
                }
                "end_do_loop_statement" | "block_label_start_expression" => {}
                _ => body.push(k),
            }
        }
        (var, space, header, body)
    }

    /// Attaches directives and finds the loops that follow each other.
    fn link(&mut self, directive_at: &dyn Fn(u32) -> Option<u32>, text: &str) {
        let lines: Vec<&str> = text.lines().collect();
        let blank = |n: u32| -> bool {
            let t = lines.get(n as usize - 1).map(|l| l.trim()).unwrap_or("");
            t.is_empty()
                || t.starts_with("//")
                || (t.starts_with('!') && !t.to_ascii_lowercase().starts_with("!$acc"))
                || t.starts_with("/*")
                || conditional(t)
        };
        for l in &mut self.out.loops {
            // The directive: the nearest line above that starts one, with
            // only blank lines, comments and the directive's continuation
            // lines between.
            let mut n = l.start;
            while n > 1 {
                n -= 1;
                if let Some(first) = directive_at(n) {
                    l.directive = Some(first);
                    break;
                }
                if !blank(n) {
                    break;
                }
            }
            if self.lang == Lang::Fortran {
                let mut m = l.end + 1;
                while (m as usize) <= lines.len() && blank(m) {
                    m += 1;
                }
                let t = lines
                    .get(m as usize - 1)
                    .map(|x| x.trim().to_ascii_lowercase())
                    .unwrap_or_default();
                if t.starts_with("!$acc end") && t.contains("loop") {
                    l.end_directive = Some(m);
                }
            }
        }
        // Neighbours: a loop whose directive (or first line) follows the
        // end of another with nothing else between.
        let count = self.out.loops.len();
        let counted = |l: &SLoop| l.kind == LoopKind::For;
        for a in 0..count {
            if !counted(&self.out.loops[a]) {
                continue;
            }
            let after = self.out.loops[a]
                .end_directive
                .unwrap_or(self.out.loops[a].end);
            for b in 0..count {
                if a == b {
                    continue;
                }
                let lb = &self.out.loops[b];
                let first = lb.directive.unwrap_or(lb.start);
                if counted(lb)
                    && first > after
                    && lb.function == self.out.loops[a].function
                    && (after + 1..first).all(|n| blank(n) || lines[n as usize - 1].trim() == "")
                {
                    self.out.loops[a].next = Some(b);
                }
            }
        }
    }
}

/// Comments and preprocessor lines: not statements.
fn is_aside(kind: &str) -> bool {
    kind == "comment" || kind.starts_with("preproc_")
}

/// A preprocessor conditional line (`#ifdef`, `#else`, `#endif`, ...): a
/// construct the trace recorded was compiled in, so a conditional between
/// two recorded constructs does not separate them.
fn conditional(t: &str) -> bool {
    let Some(rest) = t.strip_prefix('#') else {
        return false;
    };
    let word: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    matches!(
        word.as_str(),
        "if" | "ifdef" | "ifndef" | "elif" | "else" | "endif"
    )
}

/// Text with spaces removed and the loop variable written `@`.
fn normalize(s: &str, var: Option<&str>) -> String {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(v) = var else {
        return s;
    };
    // Replace whole-word occurrences of the variable.
    let mut out = String::new();
    let b: Vec<char> = s.chars().collect();
    let w: Vec<char> = v.chars().collect();
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(&w)
            && (i == 0 || !word(b[i - 1]))
            && (i + w.len() >= b.len() || !word(b[i + w.len()]))
        {
            out.push('@');
            i += w.len();
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

impl SourceFile {
    /// The file's structure as the grammars parse it (parsed once).
    pub fn syntax(&self) -> &Syntax {
        self.syntax.get_or_init(|| {
            let cpp = matches!(
                std::path::Path::new(&self.path)
                    .extension()
                    .and_then(|e| e.to_str())
                    .map(str::to_ascii_lowercase)
                    .as_deref(),
                Some("cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" | "cu")
            );
            let is_directive = |n: u32| {
                self.directive_at(n)
                    .filter(|d| d.line <= n && n <= d.end_line)
                    .map(|d| d.line)
            };
            parse(self.lang, cpp, &self.text, &is_directive)
        })
    }
}

#[cfg(test)]
mod tests;
