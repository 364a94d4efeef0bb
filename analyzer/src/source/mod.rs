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
//! [`SourceFile::loop_body`]; `uses`), the functions (C bodies and
//! Fortran program units as [`SourceFile::unit_of`] gives them, headers
//! with their parameters) and calls with their arguments as written ([`SourceFile::function_at`],
//! [`SourceFile::call_at`], [`SourceFile::calls_in`]; `calls`), and the
//! declarations: arrays and pointers with their extents (C `malloc` and
//! `calloc` counts, Fortran shapes, `allocatable` and `pointer`) and the
//! names a C block declares ([`SourceFile::arrays`],
//! [`SourceFile::locals_in`]; `decl`), and the statements of a loop's or
//! a function's body for the queue proposals ([`SourceFile::loop_block`],
//! [`SourceFile::function_block`]; `stmts`).
//!
//! A small hand-written layer stays, for what the grammars do not know:
//! OpenACC directives and their clauses (`directive`: to the grammars a
//! directive is a preprocessor line or a comment, whose text they do not
//! parse); and the values of named constants (`consts`: object-like
//! macros read through quoted headers, `const` integers, Fortran
//! parameters). Those are the preprocessor's view, which the parse tree
//! does not have: a macro's body is a line of text to it, and whether a
//! name is a constant where a loop reads it depends on the macros, `const`
//! declarations and assignments of every scope around the line. `consts`
//! evaluates over a token stream (`lex`: `SourceFile::tokens`; the
//! tokenizers also read macro bodies and Fortran statements for it, and
//! `directive` takes comments apart with `lex`'s helpers). Nothing else
//! walks the tokens. Every answer is about the text as written; callers
//! treat a missing answer as "unknown" and say so.

mod calls;
mod consts;
mod decl;
mod directive;
mod edit;
mod lex;
mod loops;
mod pos;
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
pub use stmts::{Block, BlockStmt};
pub use uses::{LoopBody, Reduction, Use};

use lex::{tokenize_c, tokenize_fortran};

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

/// One source file, as read.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as the trace records it.
    pub path: String,
    /// Where it was read from.
    pub found_at: PathBuf,
    pub lang: Lang,
    pub text: String,
    pub lines: Vec<String>,
    /// The tokens the constants are evaluated over (made on the first
    /// question; see [`SourceFile::tokens`]).
    tokens: std::sync::OnceLock<Vec<Token>>,
    /// The loops, from the parse tree (see [`SourceFile::loops`]).
    loops: std::sync::OnceLock<Vec<Loop>>,
    /// C: the lines that define, undefine or include macros.
    pp: Vec<consts::Pp>,
    /// The parse tree's reading, made on the first question.
    syntax: std::sync::OnceLock<syntax::Syntax>,
}

impl SourceFile {
    pub fn new(path: &str, found_at: PathBuf, lang: Lang, text: String) -> SourceFile {
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut f = SourceFile {
            path: path.to_string(),
            found_at,
            lang,
            text,
            lines,
            tokens: std::sync::OnceLock::new(),
            loops: std::sync::OnceLock::new(),
            pp: Vec::new(),
            syntax: std::sync::OnceLock::new(),
        };
        if lang == Lang::C {
            f.pp = consts::c_preprocessor(&f.lines, Path::new(""), None, 0, false);
        }
        f
    }

    /// The file's tokens, comments and preprocessor lines left out: what
    /// `consts` evaluates `const` initializers over.
    pub fn tokens(&self) -> &[Token] {
        self.tokens.get_or_init(|| match self.lang {
            Lang::C => tokenize_c(&self.lines),
            Lang::Fortran => tokenize_fortran(&self.lines),
        })
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
