//! Reading the program's source at the lines a run attributes to its
//! constructs: C/C++ and Fortran free form.
//!
//! This is a deliberately small reader, not a compiler front end: it masks
//! comments and literals, tokenizes, and finds statements, loops, OpenACC
//! directives with their clauses, array declarations and the names a region
//! reads and writes. Every answer is about the text as written (macros are
//! not expanded, but a loop bound named by an object-like macro, a constant
//! or a Fortran parameter is read: see `consts`); callers treat a missing
//! answer as "unknown" and say so.
//!
//! [`syntax`] reads the same file with tree-sitter's C, C++ and Fortran
//! grammars (loops, nests, per-statement read/write sets with affine
//! subscripts) for the structural advice (fusion, copy-backs); the rest of
//! the readers here still answer the other rules.

mod calls;
mod consts;
mod decl;
mod directive;
mod lex;
mod loops;
mod set;
mod stmts;
pub mod syntax;
mod uses;

use std::path::{Path, PathBuf};

pub use calls::{rewrite_in_caller, FunctionHeader, Guard};
pub use decl::ArrayDecl;
pub use directive::{is_data_clause, queue_number, Clause, Directive};
pub use lex::{Tok, Token};
pub use loops::Loop;
pub use set::SourceSet;
pub use uses::{LoopBody, Reduction, Use};

use lex::{tokenize_c, tokenize_fortran};
use loops::{c_functions, c_loops, fortran_loops, fortran_units};

/// Lookup key of a name in `lang`: Fortran names are case-insensitive.
pub(crate) fn lang_key(lang: Lang, name: &str) -> String {
    match lang {
        Lang::Fortran => name.to_ascii_lowercase(),
        Lang::C => name.to_string(),
    }
}

/// Source language, from the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    C,
    Fortran,
}

impl Lang {
    pub fn of(path: &str) -> Option<Lang> {
        let ext = Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "c" | "h" | "cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" | "cu" => Some(Lang::C),
            "f90" | "f95" | "f03" | "f08" | "f18" => Some(Lang::Fortran),
            _ => None,
        }
    }

    /// The directive sentinel as written in new lines.
    pub fn sentinel(self) -> &'static str {
        match self {
            Lang::C => "#pragma acc",
            Lang::Fortran => "!$acc",
        }
    }
}

/// One source file, masked and tokenized.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as the trace records it.
    pub path: String,
    /// Where it was read from.
    pub found_at: PathBuf,
    pub lang: Lang,
    pub text: String,
    pub lines: Vec<String>,
    pub tokens: Vec<Token>,
    pub loops: Vec<Loop>,
    /// Fortran: lines that end a program unit's executable part
    /// (`contains`, `end program/subroutine/function`); C: function ends.
    units: Vec<(u32, u32)>,
    /// C: the lines that define, undefine or include macros.
    pp: Vec<consts::Pp>,
    /// The parse tree's reading, made on the first question.
    syntax: std::sync::OnceLock<syntax::Syntax>,
}

impl SourceFile {
    pub fn new(path: &str, found_at: PathBuf, lang: Lang, text: String) -> SourceFile {
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let tokens = match lang {
            Lang::C => tokenize_c(&lines),
            Lang::Fortran => tokenize_fortran(&lines),
        };
        let mut f = SourceFile {
            path: path.to_string(),
            found_at,
            lang,
            text,
            lines,
            tokens,
            loops: Vec::new(),
            units: Vec::new(),
            pp: Vec::new(),
            syntax: std::sync::OnceLock::new(),
        };
        match lang {
            Lang::C => {
                f.loops = c_loops(&f.tokens);
                f.units = c_functions(&f.tokens);
                f.pp = consts::c_preprocessor(&f.lines, Path::new(""), None, 0, false);
            }
            Lang::Fortran => {
                f.loops = fortran_loops(&f.lines);
                f.units = fortran_units(&f.lines);
            }
        }
        f
    }

    /// Line `n` (1-based), or "" past the end.
    pub fn line(&self, n: u32) -> &str {
        self.lines
            .get((n as usize).wrapping_sub(1))
            .map(String::as_str)
            .unwrap_or("")
    }

    pub fn indent_of(&self, n: u32) -> String {
        self.line(n)
            .chars()
            .take_while(|c| c.is_whitespace())
            .collect()
    }
}

#[cfg(test)]
mod tests;
