//! Loops and program units: host loops, C functions, Fortran units.

use super::syntax::{IntExpr, LoopKind};
use super::{Lang, SourceFile};

/// A loop statement in the host code (or inside a region: callers decide),
/// as the parser found it ([`super::syntax`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    /// "for", "while", "do" (C do-while or Fortran do), "do while".
    pub kind: String,
    pub header_line: u32,
    /// Last line of the loop (closing brace, `end do`, or `while (...);`).
    pub end_line: u32,
    /// The loop in [`SourceFile::syntax`]'s loops.
    pub syntax: usize,
}

impl SourceFile {
    /// Every loop of the file, in the order they start (read on the
    /// first question).
    pub fn loops(&self) -> &[Loop] {
        self.loops.get_or_init(|| {
            let syn = self.syntax();
            let mut v: Vec<Loop> = syn
                .loops
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let kind = match (self.lang, l.kind) {
                        (Lang::C, LoopKind::For) => "for",
                        (Lang::C, LoopKind::While) => "while",
                        (Lang::C, LoopKind::DoWhile) => "do",
                        (Lang::Fortran, LoopKind::While) => "do while",
                        (Lang::Fortran, _) => "do",
                    };
                    Loop {
                        kind: kind.to_string(),
                        header_line: l.start,
                        end_line: l.end,
                        syntax: i,
                    }
                })
                .collect();
            v.sort_by_key(|l| (l.header_line, syn.loops[l.syntax].from));
            v
        })
    }

    /// Loops that contain line `n` in their body, innermost first.
    pub fn enclosing_loops(&self, n: u32) -> Vec<&Loop> {
        let mut v: Vec<&Loop> = self
            .loops()
            .iter()
            .filter(|l| l.header_line < n && n <= l.end_line)
            .collect();
        v.sort_by_key(|l| std::cmp::Reverse(l.header_line));
        v
    }

    /// The loop whose header is at line `n`.
    pub fn loop_at(&self, n: u32) -> Option<&Loop> {
        self.loops().iter().find(|l| l.header_line == n)
    }

    /// How many loops starting with `lp` are perfectly nested (each body is
    /// exactly the next counted loop, comments and directives aside), at
    /// most `max`.
    pub fn perfect_depth(&self, lp: &Loop, max: usize) -> usize {
        let syn = self.syntax();
        let mut depth = 1;
        let mut at = lp.syntax;
        while depth < max {
            match syn.loops[at].inner {
                Some(i) => {
                    depth += 1;
                    at = i;
                }
                None => break,
            }
        }
        depth
    }

    /// The function (C) or program unit (Fortran) containing line `n`:
    /// (first line, last line of its executable part).
    pub fn unit_of(&self, n: u32) -> Option<(u32, u32)> {
        let inside = |&(a, b): &(u32, u32)| a <= n && n <= b;
        match self.lang {
            // C: a function's body, its braces included.
            Lang::C => self
                .syntax()
                .calls
                .headers
                .iter()
                .filter_map(|h| h.body)
                .filter(inside)
                .min_by_key(|(a, b)| b - a),
            Lang::Fortran => self
                .syntax()
                .calls
                .units
                .iter()
                .copied()
                .filter(inside)
                .min_by_key(|(a, b)| b - a),
        }
    }

    /// The index variable of a counted loop.
    pub fn loop_index(&self, lp: &Loop) -> Option<String> {
        let l = &self.syntax().loops[lp.syntax];
        (l.kind == LoopKind::For).then(|| l.var.clone()).flatten()
    }

    /// The trip count of a counted loop whose bounds and step are integer
    /// constants: C `for (int j = 0; j < 16; j++)` (any of `<`, `<=`, `>`,
    /// `>=` with a constant step), Fortran `do j = 1, 16[, step]`. A bound
    /// may be an expression of literals and named constants (`j < COLS -
    /// 1` with `#define COLS 16`, a `const int`, a Fortran `parameter`:
    /// see [`SourceFile::constant`]). None for any other form, or a name
    /// without a certain value.
    pub fn trip_count(&self, lp: &Loop) -> Option<u64> {
        let b = self.syntax().loops[lp.syntax].bounds.as_ref()?;
        let v = |e: &IntExpr| self.int_expr(e, lp.header_line);
        let (first, last, step) = (v(&b.first)?, v(b.last.as_ref()?)?, v(&b.step)?);
        let span = if step > 0 {
            last.checked_sub(first)?
        } else if step < 0 {
            first.checked_sub(last)?
        } else {
            return None;
        };
        Some(if span < 0 {
            0
        } else {
            span.unsigned_abs() / step.unsigned_abs() + 1
        })
    }

    /// The first value of the index of a loop that counts up by one from
    /// an integer constant (`for (int s = 1; ...; s++)`, `do s = 1, n`),
    /// whatever its end.
    pub fn unit_start(&self, lp: &Loop) -> Option<i64> {
        let b = self.syntax().loops[lp.syntax].bounds.as_ref()?;
        let v = |e: &IntExpr| self.int_expr(e, lp.header_line);
        (v(&b.step)? == 1).then(|| v(&b.first)).flatten()
    }

    /// Text of the loop header (first line), trimmed.
    pub fn header_text(&self, lp: &Loop) -> String {
        self.line(lp.header_line).trim().to_string()
    }
}
