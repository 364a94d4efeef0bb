//! One line-based change to a source file: what a proposal asks of the
//! text. It sits with the source it edits so that the source's own
//! analyses (fusion) can build edits; [`crate::patch`] merges and applies
//! them.

use serde::Serialize;

use super::{Directive, SourceFile};

/// One change to a source file, by 1-based line of the original.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Edit {
    /// Rewrite the OpenACC directive starting at `line` (whose original text
    /// is `original`): change the construct, drop and add clauses.
    Directive {
        file: String,
        line: u32,
        /// Last line of the original directive (continuations).
        end_line: u32,
        original: String,
        /// New construct words, e.g. "parallel loop"; None keeps them.
        construct: Option<String>,
        /// Clause names to drop (all clauses of that name).
        remove: Vec<String>,
        /// Clauses to add, as written ("present(A, Anew)").
        add: Vec<String>,
    },
    /// Insert lines before `line`.
    InsertBefore {
        file: String,
        line: u32,
        lines: Vec<String>,
    },
    /// Insert lines after `line`.
    InsertAfter {
        file: String,
        line: u32,
        lines: Vec<String>,
    },
    /// Delete `line`, which must read `expect` (trimmed).
    Delete {
        file: String,
        line: u32,
        expect: String,
    },
}

impl Edit {
    /// Rewrites directive `d` of `src` (named in the patch by its recorded
    /// path): `construct` replaces its construct words (None keeps them),
    /// every clause named in `remove` goes and `add` is appended as
    /// written. The directive's line as read now is kept to check the file
    /// before the patch applies.
    pub fn rewrite(
        src: &SourceFile,
        d: &Directive,
        construct: Option<String>,
        remove: Vec<String>,
        add: Vec<String>,
    ) -> Edit {
        Edit::Directive {
            file: src.path.clone(),
            line: d.line,
            end_line: d.end_line,
            original: src.line(d.line).trim().to_string(),
            construct,
            remove,
            add,
        }
    }

    /// Sets clause `name` of directive `d` of `src` to `name(value)`, in
    /// place of every clause of that name: the directive as it reads then,
    /// for the proposal, and the edit.
    pub fn set_clause(
        src: &SourceFile,
        d: &Directive,
        name: &str,
        value: impl std::fmt::Display,
    ) -> (String, Edit) {
        let set = format!("{name}({value})");
        let clauses: Vec<String> = d
            .clauses
            .iter()
            .map(|c| {
                if c.name == name {
                    set.clone()
                } else {
                    c.text()
                }
            })
            .collect();
        let directive = d.render(&d.construct_name(), &clauses).trim().to_string();
        let edit = Edit::rewrite(src, d, None, vec![name.to_string()], vec![set]);
        (directive, edit)
    }

    pub fn file(&self) -> &str {
        match self {
            Edit::Directive { file, .. }
            | Edit::InsertBefore { file, .. }
            | Edit::InsertAfter { file, .. }
            | Edit::Delete { file, .. } => file,
        }
    }

    pub fn line(&self) -> u32 {
        match self {
            Edit::Directive { line, .. }
            | Edit::InsertBefore { line, .. }
            | Edit::InsertAfter { line, .. }
            | Edit::Delete { line, .. } => *line,
        }
    }
}
