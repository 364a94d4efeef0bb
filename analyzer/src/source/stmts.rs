//! Statements of a block, from the parse tree: what a host loop's body or
//! a function's body holds, one statement at a time, and whether other
//! code shares a statement's last line.

use tree_sitter::{Node, Point};

use super::pos::end_line;

use super::pos::Pos;
use super::{Lang, SourceFile};

/// One statement of a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockStmt {
    pub first: u32,
    pub last: u32,
    /// The line of the code right before it (the block's opening, or the
    /// statement before: comments and directives are not code).
    pub after: u32,
    /// The function the statement does nothing but call (`f(...);` in C,
    /// `call f(...)` in Fortran), as written.
    pub call: Option<String>,
    /// A declaration the host runs nothing for: C without a call in it;
    /// Fortran declarations, `implicit` and `use`.
    pub declaration: bool,
}

/// The statements of a loop's or a function's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The line of the code right before the first statement (the `{`,
    /// the loop's or the function's header).
    pub open: u32,
    /// The line that closes the block (`}`, `end do`, `contains` or
    /// `end subroutine`); None for a C body without braces.
    pub close: Option<u32>,
    pub stmts: Vec<BlockStmt>,
}

/// Comments and preprocessor lines: not code.
fn aside(n: Node) -> bool {
    n.kind() == "comment" || n.kind().starts_with("preproc_") || n.kind() == "statement_label"
}

/// The first leaf of the code after `n`, comments and preprocessor lines
/// aside.
fn next_leaf(n: Node) -> Option<Node> {
    let mut at = n;
    let mut sib = loop {
        match at.next_sibling() {
            Some(s) if aside(s) && !s.kind().starts_with("preproc_if") => at = s,
            Some(s) => break s,
            None => at = at.parent()?,
        }
    };
    while let Some(k) = sib.child(0) {
        sib = k;
    }
    Some(sib)
}

impl SourceFile {
    /// The tree node that starts at `p` and satisfies `want` (the
    /// largest that does).
    fn node_at<'t>(&self, root: Node<'t>, p: Pos, want: impl Fn(Node) -> bool) -> Option<Node<'t>> {
        let line = self.line(p.0);
        let col = line
            .char_indices()
            .nth(p.1 as usize)
            .map_or(line.len(), |(b, _)| b);
        let point = Point::new(p.0 as usize - 1, col);
        let mut n = root.descendant_for_point_range(point, point)?;
        let mut found = None;
        loop {
            if n.start_position() != point {
                break;
            }
            if want(n) {
                found = Some(n);
            }
            match n.parent() {
                Some(x) => n = x,
                None => break,
            }
        }
        found
    }

    /// The statements of the body of the loop `lp`.
    pub fn loop_block(&self, lp: &super::Loop) -> Option<Block> {
        let syn = self.syntax();
        let root = syn.tree.as_ref()?.root_node();
        let from = syn.loops[lp.syntax].from;
        let node = self.node_at(root, from, |n| {
            matches!(
                n.kind(),
                "for_statement" | "for_range_loop" | "while_statement" | "do_statement" | "do_loop"
            )
        })?;
        match self.lang {
            Lang::C => {
                let body = node.child_by_field_name("body")?;
                if body.kind() == "compound_statement" {
                    Some(self.block(body, |_| true))
                } else {
                    let after = body.prev_sibling().map_or(lp.header_line, end_line);
                    Some(Block {
                        open: after,
                        close: None,
                        stmts: vec![self.block_stmt(body, after)],
                    })
                }
            }
            Lang::Fortran => Some(self.block(node, |k| {
                !matches!(k.kind(), "do_statement" | "end_do_loop_statement")
            })),
        }
    }

    /// The statements of the body of the function holding line `n` (a
    /// Fortran unit's up to its `contains` or `end`).
    pub fn function_block(&self, n: u32) -> Option<Block> {
        self.unit_of(n)?;
        let root = self.syntax().tree.as_ref()?.root_node();
        let row = n as usize - 1;
        let mut at = root;
        let mut found = None;
        'down: loop {
            let mut c = at.walk();
            for k in at.named_children(&mut c) {
                if k.start_position().row <= row && row <= k.end_position().row {
                    if matches!(
                        k.kind(),
                        "function_definition" | "subroutine" | "function" | "program"
                    ) {
                        found = Some(k);
                    }
                    at = k;
                    continue 'down;
                }
            }
            break;
        }
        let f = found?;
        match self.lang {
            Lang::C => Some(self.block(f.child_by_field_name("body")?, |_| true)),
            Lang::Fortran => Some(self.block(f, |k| {
                !k.kind().ends_with("_statement")
                    || !matches!(
                        k.kind(),
                        "subroutine_statement"
                            | "function_statement"
                            | "program_statement"
                            | "end_subroutine_statement"
                            | "end_function_statement"
                            | "end_program_statement"
                    )
            })),
        }
    }

    /// The statements among the children of `n` that `keep` keeps (C: the
    /// items between a block's braces), with the line that closes it.
    fn block(&self, n: Node, keep: impl Fn(Node) -> bool) -> Block {
        let mut kids = Vec::new();
        flatten(n, &mut kids);
        let first = kids
            .iter()
            .position(|k| k.is_named() && !aside(*k) && keep(*k));
        let open = match first.and_then(|i| i.checked_sub(1)) {
            Some(i) => kids[..=i]
                .iter()
                .rev()
                .find(|k| !aside(**k))
                .map_or(n.start_position().row as u32 + 1, |k| end_line(*k)),
            None => n.start_position().row as u32 + 1,
        };
        let mut stmts = Vec::new();
        let mut close = None;
        let mut after = open;
        for k in kids {
            if aside(k) {
                continue;
            }
            let closing = match self.lang {
                Lang::C => k.kind() == "}",
                Lang::Fortran => k.kind() == "internal_procedures" || k.kind().starts_with("end_"),
            };
            if closing {
                close = Some(k.start_position().row as u32 + 1);
                break;
            }
            if k.is_named() && keep(k) {
                stmts.push(self.block_stmt(k, after));
            }
            after = end_line(k);
        }
        Block { open, close, stmts }
    }

    fn block_stmt(&self, n: Node, after: u32) -> BlockStmt {
        let text = |x: Node| x.utf8_text(self.text.as_bytes()).unwrap_or("").to_string();
        let call = match n.kind() {
            "expression_statement" => n
                .named_child(0)
                .filter(|c| c.kind() == "call_expression" && n.named_child_count() == 1)
                .and_then(|c| c.child_by_field_name("function"))
                .filter(|f| f.kind() == "identifier")
                .map(text),
            "subroutine_call" => n.child_by_field_name("subroutine").map(text),
            _ => None,
        };
        let declaration = match self.lang {
            Lang::C => n.kind() == "declaration" && !calls_in(n),
            Lang::Fortran => matches!(
                n.kind(),
                "variable_declaration"
                    | "implicit_statement"
                    | "use_statement"
                    | "parameter_statement"
                    | "derived_type_definition"
                    | "interface"
            ),
        };
        BlockStmt {
            first: n.start_position().row as u32 + 1,
            last: end_line(n),
            after,
            call,
            declaration,
        }
    }

    /// Code (not comments or preprocessor lines) on lines `a..=b`.
    pub fn code_on_lines(&self, a: u32, b: u32) -> bool {
        let Some(tree) = self.syntax().tree.as_ref() else {
            return false;
        };
        if a > b {
            return false;
        }
        code_in(tree.root_node(), a as usize - 1, b as usize - 1)
    }

    /// Whether other code shares the last line of the loop `lp` (or an
    /// `else` follows it).
    pub fn loop_shares_last_line(&self, lp: &super::Loop) -> bool {
        let syn = self.syntax();
        let Some(tree) = syn.tree.as_ref() else {
            return true;
        };
        let node = self.node_at(tree.root_node(), syn.loops[lp.syntax].from, |n| {
            n.start_position().row as u32 + 1 == lp.header_line && end_line(n) == lp.end_line
        });
        let Some(node) = node else {
            return true;
        };
        next_leaf(node)
            .is_some_and(|x| x.start_position().row as u32 + 1 == lp.end_line || x.kind() == "else")
    }

    /// Whether other code shares the last line of the statement (C) a
    /// directive ending at line `n` applies to; None when there is none.
    pub fn statement_shares_last_line(&self, n: u32) -> Option<bool> {
        let syn = self.syntax();
        let s = syn.statement_after(n)?;
        let node = self.node_at(syn.tree.as_ref()?.root_node(), s.from, |x| {
            end_line(x) == s.last && x.is_named()
        })?;
        Some(next_leaf(node).is_some_and(|x| (x.start_position().row as u32) < s.last))
    }

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
}

/// The children of `n`, with those of a preprocessor conditional in
/// their place (its condition left out).
fn flatten<'t>(n: Node<'t>, out: &mut Vec<Node<'t>>) {
    let mut c = n.walk();
    for (i, k) in n.children(&mut c).enumerate() {
        let field = n.field_name_for_child(i as u32);
        if matches!(
            k.kind(),
            "preproc_if" | "preproc_ifdef" | "preproc_else" | "preproc_elif" | "preproc_elifdef"
        ) {
            flatten(k, out);
        } else if !matches!(field, Some("condition" | "name")) && !k.kind().starts_with('#') {
            out.push(k);
        }
    }
}

/// `n` holds a call.
fn calls_in(n: Node) -> bool {
    if n.kind() == "call_expression" {
        return true;
    }
    let mut c = n.walk();
    let found = n.named_children(&mut c).any(calls_in);
    found
}

/// A leaf of code starts on a row in `a..=b` under `n`.
fn code_in(n: Node, a: usize, b: usize) -> bool {
    if n.end_position().row < a || n.start_position().row > b {
        return false;
    }
    if n.kind() == "comment" || n.kind().starts_with('#') {
        return false;
    }
    if n.kind().starts_with("preproc_")
        && !n.kind().starts_with("preproc_if")
        && !matches!(
            n.kind(),
            "preproc_else" | "preproc_elif" | "preproc_elifdef"
        )
    {
        return false;
    }
    if n.child_count() == 0 {
        let r = n.start_position().row;
        return a <= r && r <= b && n.start_byte() < n.end_byte() && n.kind() != "&";
    }
    let mut c = n.walk();
    for (i, k) in n.children(&mut c).enumerate() {
        if n.kind().starts_with("preproc_")
            && matches!(n.field_name_for_child(i as u32), Some("condition" | "name"))
        {
            continue;
        }
        if code_in(k, a, b) {
            return true;
        }
    }
    false
}
