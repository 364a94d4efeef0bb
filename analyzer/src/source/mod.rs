//! Reading the program's source at the lines a run attributes to its
//! constructs: C/C++ and Fortran free form.
//!
//! [`syntax`] parses each file with tree-sitter's C, C++ and Fortran
//! grammars (on the first question). From its tree come the loops
//! ([`SourceFile::loops`]: kinds, nests, index variables, bounds and trip
//! counts), the `if` statements that guard host code
//! ([`SourceFile::guard_of`]), the statement a directive applies to and
//! where a statement ends ([`SourceFile::block_of`],
//! [`SourceFile::statement_end_line`]), per-statement read/write sets
//! with affine subscripts for the structural advice (fusion, copy-backs),
//! every use of a name with what the code does with it and the
//! reductions of loop bodies ([`SourceFile::uses`],
//! [`SourceFile::loop_body`]; `uses`), and the functions (C bodies as
//! [`SourceFile::unit_of`] gives them, headers with their parameters) and
//! calls with their arguments as written ([`SourceFile::function_at`],
//! [`SourceFile::call_at`], [`SourceFile::calls_in`]; `calls`), and the
//! declarations: arrays and pointers with their extents (C `malloc` and
//! `calloc` counts, Fortran shapes, `allocatable` and `pointer`) and the
//! names a C block declares ([`SourceFile::arrays`],
//! [`SourceFile::locals_in`]; `decl`).
//!
//! A small hand-written layer stays, for what the grammars do not know or
//! what is not yet moved: OpenACC directives and their clauses (to the
//! grammars a directive is a preprocessor line or a comment); the values
//! of named constants (object-like macros read through quoted headers,
//! `const` integers, Fortran parameters: the preprocessor's view, which
//! the parse tree does not have; `consts`); Fortran program units
//! (`loops::fortran_units`, a line scan that `consts` shares the view
//! of); and a token stream (`lex`) that `consts` reads `const`
//! initializers from, and that the statement lists (`stmts`, and the
//! loops' token indices they start from) of the queue proposals still
//! walk, matched to the tree's nodes by line and column. Every answer is about the text as written; callers
//! treat a missing answer as "unknown" and say so.

mod calls;
mod consts;
mod decl;
mod directive;
mod edit;
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
pub use edit::Edit;
pub use lex::{Tok, Token};
pub use loops::Loop;
pub use set::{SourceSet, Wanted};
pub use uses::{LoopBody, Reduction, Use};

use lex::{tokenize_c, tokenize_fortran};
use loops::fortran_units;

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
    /// The loops, from the parse tree (see [`SourceFile::loops`]).
    loops: std::sync::OnceLock<Vec<Loop>>,
    /// Fortran: program units, from the header to the line that ends
    /// the executable part (`contains`, `end program/subroutine/function`).
    /// (C: the functions' bodies, from the parse tree.)
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
            loops: std::sync::OnceLock::new(),
            units: Vec::new(),
            pp: Vec::new(),
            syntax: std::sync::OnceLock::new(),
        };
        match lang {
            Lang::C => {
                f.pp = consts::c_preprocessor(&f.lines, Path::new(""), None, 0, false);
            }
            Lang::Fortran => {
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
