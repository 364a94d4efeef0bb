//! Reading the program's source at the lines a run attributes to its
//! constructs: C/C++ and Fortran free form.
//!
//! This is a deliberately small reader, not a compiler front end: it masks
//! comments and literals, tokenizes, and finds statements, loops, OpenACC
//! directives with their clauses, array declarations and the names a region
//! reads and writes. Every answer is about the text as written (macros are
//! not expanded); callers treat a missing answer as "unknown" and say so.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::model::Run;

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

/// The sources of a run, read once.
#[derive(Debug, Default)]
pub struct SourceSet {
    /// Path prefixes to replace (recorded prefix -> local directory).
    maps: Vec<(PathBuf, PathBuf)>,
    files: HashMap<String, SourceFile>,
    missing: BTreeSet<String>,
    unsupported: BTreeSet<String>,
    /// Files read but not matching the run, with the reason.
    stale: std::collections::BTreeMap<String, String>,
}

impl SourceSet {
    /// Reads every source file a site of `run` names. A file is looked for at
    /// its recorded path, then under each of `roots` (by its path relative to
    /// the root and by file name).
    pub fn load(run: &Run, roots: &[PathBuf]) -> SourceSet {
        Self::load_with(run, roots, &[], &|p| std::fs::read_to_string(p))
    }

    /// [`SourceSet::load`] with path maps (a recorded path starting with
    /// the first directory is read from the second instead) and the file
    /// reading given (tests use it to make sources missing).
    pub fn load_with(
        run: &Run,
        roots: &[PathBuf],
        maps: &[(PathBuf, PathBuf)],
        read: &dyn Fn(&Path) -> std::io::Result<String>,
    ) -> SourceSet {
        let mut set = SourceSet {
            maps: maps.to_vec(),
            ..SourceSet::default()
        };
        let files: BTreeSet<&str> = run
            .sites
            .iter()
            .filter(|s| s.line.is_some())
            .map(|s| s.file.as_str())
            .collect();
        for f in files {
            set.load_file(f, roots, read);
        }
        set.drop_stale(run);
        set
    }

    /// A source whose compute-construct lines hold no OpenACC directive is
    /// not the source of this run (it changed since, or it is another
    /// file of that name): it is set aside rather than misread.
    fn drop_stale(&mut self, run: &Run) {
        use crate::model::ConstructClass;
        let mut stale: Vec<(String, String)> = Vec::new();
        for c in run
            .constructs
            .iter()
            .filter(|c| c.class == ConstructClass::Compute && c.parent.is_none())
        {
            let site = run.site(c.site);
            let (Some(line), Some(src)) = (site.line, self.files.get(&site.file)) else {
                continue;
            };
            if src.directive_at(line).is_none() && !stale.iter().any(|(f, _)| *f == site.file) {
                let text = src.line(line).trim().to_string();
                stale.push((
                    site.file.clone(),
                    format!("line {line} holds no OpenACC directive (`{text}`)"),
                ));
            }
        }
        for (f, why) in stale {
            self.files.remove(&f);
            self.stale.insert(f, why);
        }
    }

    fn load_file(
        &mut self,
        recorded: &str,
        roots: &[PathBuf],
        read: &dyn Fn(&Path) -> std::io::Result<String>,
    ) {
        let Some(lang) = Lang::of(recorded) else {
            self.unsupported.insert(recorded.to_string());
            return;
        };
        // A mapped prefix replaces the recorded path; roots come after.
        let mapped = self.maps.iter().find_map(|(from, to)| {
            let rest = Path::new(recorded).strip_prefix(from).ok()?;
            Some(to.join(rest))
        });
        let mut candidates = vec![mapped.unwrap_or_else(|| PathBuf::from(recorded))];
        let rel = Path::new(recorded.trim_start_matches('/'));
        for r in roots {
            candidates.push(r.join(rel));
            if let Some(name) = Path::new(recorded).file_name() {
                candidates.push(r.join(name));
            }
        }
        for c in candidates {
            if let Ok(text) = read(&c) {
                self.files.insert(
                    recorded.to_string(),
                    SourceFile::new(recorded, c, lang, text),
                );
                return;
            }
        }
        self.missing.insert(recorded.to_string());
    }

    /// A set holding one file given as text (tests, and callers that have
    /// the text already).
    pub fn with_text(path: &str, text: &str) -> SourceSet {
        let mut set = SourceSet::default();
        set.insert(path, text);
        set
    }

    pub fn insert(&mut self, path: &str, text: &str) {
        if let Some(lang) = Lang::of(path) {
            self.files.insert(
                path.to_string(),
                SourceFile::new(path, PathBuf::from(path), lang, text.to_string()),
            );
        }
    }

    pub fn get(&self, path: &str) -> Option<&SourceFile> {
        self.files.get(path)
    }

    pub fn is_missing(&self, path: &str) -> bool {
        self.missing.contains(path)
    }

    /// Files named by the run that could not be read.
    pub fn missing(&self) -> impl Iterator<Item = &str> {
        self.missing.iter().map(String::as_str)
    }

    /// Files that do not match the run, with the reason.
    pub fn stale(&self) -> impl Iterator<Item = (&str, &str)> {
        self.stale.iter().map(|(f, w)| (f.as_str(), w.as_str()))
    }

    /// One line per file that could not be read.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .missing
            .iter()
            .map(|f| {
                format!(
                    "source {f} not found: its findings show lines only, without source-based proposals (--source-dir DIR or --source-map FROM=TO to look elsewhere)"
                )
            })
            .collect();
        notes.extend(self.stale.iter().map(|(f, why)| {
            format!("source {f} does not match the run: {why}; it changed since the trace was recorded, so its findings show lines only")
        }));
        notes.extend(
            self.unsupported
                .iter()
                .map(|f| format!("source {f}: not C/C++ or Fortran free form; not read")),
        );
        notes
    }
}

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tok {
    Ident,
    Number,
    Punct,
}

/// One token of the masked code.
#[derive(Debug, Clone)]
pub struct Token {
    pub kind: Tok,
    /// As written (Fortran identifiers keep their case here).
    pub text: String,
    /// Lower case for Fortran identifiers, as written for C.
    pub key: String,
    pub line: u32,
}

/// A loop statement in the host code (or inside a region: callers decide).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    /// "for", "while", "do" (C do-while or Fortran do), "do while".
    pub kind: String,
    pub header_line: u32,
    /// Last line of the loop (closing brace, `end do`, or `while (...);`).
    pub end_line: u32,
    /// Token index of the keyword, and of the first token after the loop.
    pub first_tok: usize,
    pub end_tok: usize,
    /// Index of the first token of the body.
    pub body_tok: usize,
}

/// One clause of a directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// Lower case name: "copyin", "present", "num_gangs", ...
    pub name: String,
    /// Text between the parentheses, when there are any.
    pub args: Option<String>,
}

impl Clause {
    /// The variable names the clause lists (text before any `[` or `(`).
    pub fn vars(&self) -> Vec<String> {
        let Some(args) = &self.args else {
            return Vec::new();
        };
        let args = match args.find(':') {
            // reduction(max:dt)
            Some(i) if self.name == "reduction" => &args[i + 1..],
            _ => args.as_str(),
        };
        split_top(args, ',')
            .into_iter()
            .map(|a| {
                let a = a.trim();
                let end = a.find(['[', '(']).unwrap_or(a.len());
                a[..end].trim().to_string()
            })
            .filter(|a| !a.is_empty())
            .collect()
    }

    /// Each listed item as written (`u[0:n]`).
    pub fn items(&self) -> Vec<String> {
        self.args
            .as_deref()
            .map(|a| {
                split_top(a, ',')
                    .into_iter()
                    .map(|s| s.trim().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn text(&self) -> String {
        match &self.args {
            Some(a) => format!("{}({a})", self.name),
            None => self.name.clone(),
        }
    }

    /// The queues an `async(...)` or `wait(...)` clause (or `wait(...)`
    /// directive) names, as written, without a wait's `devnum:n:` and
    /// `queues:` prefixes. Empty when the clause has no parentheses: a bare
    /// `async` means the default queue, a bare `wait` every queue.
    pub fn queue_args(&self) -> Vec<String> {
        let Some(args) = &self.args else {
            return Vec::new();
        };
        let mut rest = args.trim();
        if let Some(r) = strip_word_prefix(rest, "devnum") {
            // devnum:int-expr: queues...
            rest = r.split_once(':').map(|(_, q)| q.trim()).unwrap_or("");
        }
        if let Some(r) = strip_word_prefix(rest, "queues") {
            rest = r;
        }
        split_top(rest, ',')
            .into_iter()
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect()
    }
}

/// `word: rest` (any case, spaces allowed before the colon) -> `rest`.
fn strip_word_prefix<'s>(s: &'s str, word: &str) -> Option<&'s str> {
    let head = s.get(..word.len())?;
    if !head.eq_ignore_ascii_case(word) {
        return None;
    }
    s[word.len()..]
        .trim_start()
        .strip_prefix(':')
        .map(str::trim)
}

/// The queue number an async argument names, when it is a literal or one of
/// the API's named values (`acc_async_noval` -1, `acc_async_sync` -2).
pub fn queue_number(arg: &str) -> Option<i32> {
    let a = arg.trim().trim_matches(|c| c == '(' || c == ')').trim();
    match a.to_ascii_lowercase().as_str() {
        "acc_async_noval" => Some(-1),
        "acc_async_sync" => Some(-2),
        s => s.parse().ok(),
    }
}

/// An OpenACC directive as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    pub line: u32,
    /// Last line, when the directive continues over several.
    pub end_line: u32,
    /// Leading white space of the line.
    pub indent: String,
    /// "#pragma acc" or "!$acc" exactly as written.
    pub sentinel: String,
    /// Construct words in lower case: ["kernels"], ["parallel", "loop"], ["end", "kernels"].
    pub construct: Vec<String>,
    pub clauses: Vec<Clause>,
    /// Trailing comment with its marker ("// stencil", "! stencil").
    pub comment: Option<String>,
}

impl Directive {
    pub fn construct_name(&self) -> String {
        self.construct.join(" ")
    }

    pub fn is_compute(&self) -> bool {
        matches!(
            self.construct.first().map(String::as_str),
            Some("parallel" | "kernels" | "serial")
        )
    }

    pub fn has_loop(&self) -> bool {
        self.construct.iter().any(|w| w == "loop")
    }

    pub fn clause(&self, name: &str) -> Option<&Clause> {
        self.clauses.iter().find(|c| c.name == name)
    }

    /// Variables named in data clauses.
    pub fn data_vars(&self) -> Vec<String> {
        self.clauses
            .iter()
            .filter(|c| is_data_clause(&c.name))
            .flat_map(|c| c.vars())
            .collect()
    }

    /// The directive on one line, with this construct and these clauses.
    pub fn render(&self, construct: &str, clauses: &[String]) -> String {
        let mut s = format!("{}{} {construct}", self.indent, self.sentinel);
        for c in clauses {
            s.push(' ');
            s.push_str(c);
        }
        if let Some(c) = &self.comment {
            s.push(' ');
            s.push_str(c);
        }
        s
    }
}

/// OpenACC data clauses (including the old `present_or_` spellings).
pub fn is_data_clause(name: &str) -> bool {
    matches!(
        name,
        "copy"
            | "copyin"
            | "copyout"
            | "create"
            | "present"
            | "no_create"
            | "deviceptr"
            | "attach"
            | "pcopy"
            | "pcopyin"
            | "pcopyout"
            | "pcreate"
            | "present_or_copy"
            | "present_or_copyin"
            | "present_or_copyout"
            | "present_or_create"
    )
}

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

/// One use of a name in a range of code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// Lookup key (lower case in Fortran).
    pub key: String,
    pub line: u32,
    /// Assigned to (the left side of `=`, `+=`, ..., or `++`/`--`).
    pub write: bool,
    /// Read (the right side, an index, or a compound assignment).
    pub read: bool,
    /// Followed by an index (`a[i]`, `a(i)`).
    pub indexed: bool,
    /// Passed to a call or used as a whole (the callee may read or write it).
    pub whole: bool,
    /// Token index of the name.
    pub tok: usize,
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
        };
        match lang {
            Lang::C => {
                f.loops = c_loops(&f.tokens);
                f.units = c_functions(&f.tokens);
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

    /// The OpenACC directive that starts at line `n` (or whose continuation
    /// covers it).
    pub fn directive_at(&self, n: u32) -> Option<Directive> {
        // Look back over continuation lines to the directive's first line.
        let mut start = n;
        while start > 1 && self.continues(start - 1) {
            start -= 1;
        }
        self.parse_directive(start)
    }

    /// The `set default_async(...)` directives of the file, in line order,
    /// each with the queue it names as written.
    pub fn default_async_sets(&self) -> Vec<(Directive, String)> {
        self.directives_in(1, self.lines.len() as u32)
            .into_iter()
            .filter(|d| d.construct == ["set"])
            .filter_map(|d| {
                let q = d.clause("default_async")?.args.clone()?;
                Some((d, q))
            })
            .collect()
    }

    /// Every OpenACC directive in lines `a..=b`.
    pub fn directives_in(&self, a: u32, b: u32) -> Vec<Directive> {
        let mut out = Vec::new();
        let mut n = a;
        while n <= b {
            match self.parse_directive(n) {
                Some(d) => {
                    n = d.end_line + 1;
                    out.push(d);
                }
                None => n += 1,
            }
        }
        out
    }

    fn continues(&self, n: u32) -> bool {
        let l = self.line(n).trim_end();
        match self.lang {
            Lang::C => is_c_pragma(l) && l.ends_with('\\'),
            Lang::Fortran => {
                is_f_directive(l) && strip_f_comment(l, true).trim_end().ends_with('&')
            }
        }
    }

    fn parse_directive(&self, n: u32) -> Option<Directive> {
        let first = self.line(n);
        let (sentinel, rest) = match self.lang {
            Lang::C => split_c_pragma(first)?,
            Lang::Fortran => split_f_directive(first)?,
        };
        let indent: String = first.chars().take_while(|c| c.is_whitespace()).collect();
        let mut body = String::new();
        let mut comment = None;
        let mut end = n;
        let mut cur = rest.to_string();
        loop {
            let (code, com) = match self.lang {
                Lang::C => split_c_comment(&cur),
                Lang::Fortran => split_f_comment(&cur),
            };
            let code = code.trim_end();
            let cont = match self.lang {
                Lang::C => code.strip_suffix('\\'),
                Lang::Fortran => code.strip_suffix('&'),
            };
            match cont {
                Some(c) if (end as usize) < self.lines.len() => {
                    body.push_str(c);
                    body.push(' ');
                    end += 1;
                    let next = self.line(end).trim_start();
                    cur = match self.lang {
                        Lang::C => next.to_string(),
                        Lang::Fortran => {
                            let (_, r) = split_f_directive(next).unwrap_or(("", next));
                            r.trim_start().trim_start_matches('&').to_string()
                        }
                    };
                }
                _ => {
                    body.push_str(code);
                    if com.is_some() {
                        comment = com;
                    }
                    break;
                }
            }
        }
        let (construct, clauses) = parse_directive_body(&body);
        if construct.is_empty() {
            return None;
        }
        Some(Directive {
            line: n,
            end_line: end,
            indent,
            sentinel: sentinel.to_string(),
            construct,
            clauses,
            comment,
        })
    }

    /// Lines of the structured block a directive applies to: for C the next
    /// statement; for Fortran up to the matching `end` directive, or the
    /// next `do` loop for a `loop` construct (plus an optional
    /// `!$acc end ... loop`). Returns (first line, last line, line of a
    /// closing directive if any).
    pub fn block_of(&self, d: &Directive) -> Option<(u32, u32, Option<u32>)> {
        match self.lang {
            Lang::C => {
                let t = self.tokens.iter().position(|t| t.line > d.end_line)?;
                let end = c_statement_end(&self.tokens, t)?;
                Some((self.tokens[t].line, self.tokens[end - 1].line, None))
            }
            Lang::Fortran => {
                let name = d.construct_name();
                if d.has_loop() {
                    let lp = self
                        .loops
                        .iter()
                        .filter(|l| l.header_line > d.end_line)
                        .min_by_key(|l| l.header_line)?;
                    // Only blank lines or comments may come between.
                    let gap_ok = (d.end_line + 1..lp.header_line)
                        .all(|n| strip_f_comment(self.line(n), false).trim().is_empty());
                    if !gap_ok {
                        return None;
                    }
                    let closing = self.end_directive_after(lp.end_line, &name);
                    return Some((lp.header_line, lp.end_line, closing));
                }
                let words = d.construct.first()?.clone();
                let mut depth = 0;
                for n in d.end_line + 1..=self.lines.len() as u32 {
                    if let Some(dd) = self.parse_directive(n) {
                        if dd.construct.first() == Some(&words) && !dd.has_loop() {
                            depth += 1;
                        }
                        if dd.construct.first().map(String::as_str) == Some("end")
                            && dd.construct.get(1) == Some(&words)
                        {
                            if depth == 0 {
                                return Some((d.end_line + 1, n - 1, Some(n)));
                            }
                            depth -= 1;
                        }
                    }
                }
                None
            }
        }
    }

    fn end_directive_after(&self, line: u32, construct: &str) -> Option<u32> {
        let mut n = line + 1;
        while (n as usize) <= self.lines.len() {
            let l = self.line(n).trim();
            if l.is_empty() {
                n += 1;
                continue;
            }
            let d = self.parse_directive(n)?;
            return (d.construct_name() == format!("end {construct}")).then_some(n);
        }
        None
    }

    /// Loops that contain line `n` in their body, innermost first.
    pub fn enclosing_loops(&self, n: u32) -> Vec<&Loop> {
        let mut v: Vec<&Loop> = self
            .loops
            .iter()
            .filter(|l| l.header_line < n && n <= l.end_line)
            .collect();
        v.sort_by_key(|l| std::cmp::Reverse(l.header_line));
        v
    }

    /// The loop whose header is at line `n`.
    pub fn loop_at(&self, n: u32) -> Option<&Loop> {
        self.loops.iter().find(|l| l.header_line == n)
    }

    /// How many loops starting with `lp` are perfectly nested (each body is
    /// exactly the next loop), at most `max`.
    pub fn perfect_depth(&self, lp: &Loop, max: usize) -> usize {
        let mut depth = 1;
        let mut cur = lp.clone();
        while depth < max {
            let inner = match self.lang {
                Lang::C => {
                    // Body is a loop, or `{ loop }`.
                    let mut b = cur.body_tok;
                    let mut end = cur.end_tok;
                    if self.tokens.get(b).map(|t| t.text.as_str()) == Some("{") {
                        b += 1;
                        end -= 1;
                    }
                    self.loops
                        .iter()
                        .find(|l| l.first_tok == b && l.end_tok == end && l.kind == "for")
                }
                Lang::Fortran => self.loops.iter().find(|l| {
                    l.kind == "do"
                        && l.header_line == next_code_line(&self.lines, cur.header_line)
                        && next_code_line(&self.lines, l.end_line) == cur.end_line
                }),
            };
            match inner {
                Some(l) => {
                    depth += 1;
                    cur = l.clone();
                }
                None => break,
            }
        }
        depth
    }

    /// The function (C) or program unit (Fortran) containing line `n`:
    /// (first line, last line of its executable part).
    pub fn unit_of(&self, n: u32) -> Option<(u32, u32)> {
        self.units
            .iter()
            .filter(|(a, b)| *a <= n && n <= *b)
            .min_by_key(|(a, b)| b - a)
            .copied()
    }

    /// Uses of names in tokens whose line is in `a..=b`, skipping the lines
    /// in `skip` (inclusive ranges).
    pub fn uses(&self, a: u32, b: u32, skip: &[(u32, u32)]) -> Vec<Use> {
        let lo = self.tokens.partition_point(|t| t.line < a);
        let hi = self.tokens.partition_point(|t| t.line <= b);
        let mut out = Vec::new();
        for i in lo..hi {
            let t = &self.tokens[i];
            if t.kind != Tok::Ident || skip.iter().any(|(x, y)| *x <= t.line && t.line <= *y) {
                continue;
            }
            if self.is_keyword(&t.key) {
                continue;
            }
            // Member access (a.b, a->b, a%b): only the base counts.
            if i > 0 && matches!(self.tokens[i - 1].text.as_str(), "." | "->" | "%") {
                continue;
            }
            let next = self.tokens.get(i + 1).map(|t| t.text.as_str());
            let open = match self.lang {
                Lang::C => "[",
                Lang::Fortran => "(",
            };
            // A C function call is not a variable use.
            if self.lang == Lang::C && next == Some("(") {
                continue;
            }
            let mut j = i + 1;
            let mut indexed = false;
            while self.tokens.get(j).map(|t| t.text.as_str()) == Some(open) {
                match matching(&self.tokens, j) {
                    Some(k) => {
                        j = k + 1;
                        indexed = true;
                    }
                    None => break,
                }
            }
            // Fortran: `name(` could be a call; with a declaration it is an
            // index. Callers check declarations; keep it as indexed here.
            let after = self.tokens.get(j).map(|t| t.text.as_str()).unwrap_or("");
            let before = if i > 0 {
                self.tokens[i - 1].text.as_str()
            } else {
                ""
            };
            let line_start = i == 0
                || self.tokens[i - 1].line != t.line
                || before == ";"
                || before == "{"
                || before == "}"
                || before == ")";
            let assign = matches!(
                after,
                "=" | "+=" | "-=" | "*=" | "/=" | "%=" | "&=" | "|=" | "^=" | "<<=" | ">>="
            );
            let compound = assign && after != "=";
            let incdec = matches!(after, "++" | "--") || matches!(before, "++" | "--");
            let write = (assign
                && (self.lang == Lang::C || line_start || before == "then" || before == ")"))
                || incdec;
            let in_call = matches!(before, "(" | ",") && matches!(after, ")" | ",") && !indexed;
            out.push(Use {
                key: t.key.clone(),
                line: t.line,
                write,
                read: !write || compound || incdec,
                indexed,
                whole: in_call,
                tok: i,
            });
        }
        out
    }

    fn is_keyword(&self, k: &str) -> bool {
        match self.lang {
            Lang::C => C_KEYWORDS.contains(&k),
            Lang::Fortran => F_KEYWORDS.contains(&k),
        }
    }

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

    /// The text of tokens `a..b` joined with single spaces where needed.
    pub fn tokens_text(&self, a: usize, b: usize) -> String {
        let mut s = String::new();
        for t in &self.tokens[a..b.min(self.tokens.len())] {
            if !s.is_empty()
                && (t.kind != Tok::Punct || matches!(t.text.as_str(), "=" | "+" | "-" | "?" | ":"))
                && !s.ends_with(['(', '['])
            {
                s.push(' ');
            }
            s.push_str(&t.text);
        }
        s
    }

    /// Scalars the code in `a..=b` writes, and whether each write is a
    /// reduction. `locals` are names declared inside the region or loop
    /// indices (private anyway); `arrays` are array names (their element
    /// writes are not scalar writes).
    pub fn loop_body(&self, a: u32, b: u32, locals: &[String], arrays: &[String]) -> LoopBody {
        let mut body = LoopBody::default();
        let uses = self.uses(a, b, &[]);
        let mut seen: Vec<(String, Option<Reduction>)> = Vec::new();
        for u in uses.iter().filter(|u| u.write && !u.indexed) {
            if locals.contains(&u.key) || arrays.contains(&u.key) {
                continue;
            }
            let red = self.reduction_at(u);
            seen.push((u.key.clone(), red));
        }
        // Also `if (x > v) v = x` is caught by reduction_at through the
        // preceding `if`.
        let mut names: Vec<String> = seen.iter().map(|(k, _)| k.clone()).collect();
        names.dedup();
        names.sort();
        names.dedup();
        for n in names {
            let writes: Vec<&Option<Reduction>> = seen
                .iter()
                .filter(|(k, _)| *k == n)
                .map(|(_, r)| r)
                .collect();
            let ops: BTreeSet<&str> = writes
                .iter()
                .filter_map(|r| r.as_ref().map(|r| r.op.as_str()))
                .collect();
            if writes.iter().all(|r| r.is_some()) && ops.len() == 1 {
                if let Some(Some(r)) = writes.first() {
                    body.reductions.push(r.clone());
                }
            } else {
                let line = uses
                    .iter()
                    .find(|u| u.key == n && u.write)
                    .map(|u| u.line)
                    .unwrap_or(a);
                body.other_scalar_writes.push((n, line));
            }
        }
        body
    }

    /// The reduction a write of a scalar performs, if it is one.
    fn reduction_at(&self, u: &Use) -> Option<Reduction> {
        let t = &self.tokens;
        let i = u.tok;
        let var = &u.key;
        let op_tok = t.get(i + 1)?.text.as_str();
        let stmt_end = self.statement_end(i);
        let rhs = (i + 2)..stmt_end;
        let shown = t[i].text.clone();
        let statement = self.tokens_text(self.statement_start(i), stmt_end);
        let make = |op: &str| Reduction {
            op: op.to_string(),
            var: shown.clone(),
            line: u.line,
            statement: statement.clone(),
        };
        match op_tok {
            "+=" | "-=" => return Some(make("+")),
            "*=" => return Some(make("*")),
            "=" => {}
            _ => return None,
        }
        let r: Vec<&Token> = t[rhs.clone()].iter().collect();
        if r.is_empty() {
            return None;
        }
        let is_var = |tk: &Token| tk.kind == Tok::Ident && tk.key == *var;
        // v = max(v, ...), fmax(...), min(...)
        if r.len() >= 3 && r[0].kind == Tok::Ident && r[1].text == "(" {
            let f = r[0].key.to_ascii_lowercase();
            let op = match f.as_str() {
                "fmax" | "fmaxf" | "fmaxl" | "max" | "amax1" | "dmax1" | "std::max" => Some("max"),
                "fmin" | "fminf" | "fminl" | "min" | "amin1" | "dmin1" => Some("min"),
                _ => None,
            };
            if let Some(op) = op {
                let close = matching(t, rhs.start + 1)?;
                if close + 1 == stmt_end && t[rhs.start + 2..close].iter().any(&is_var) {
                    return Some(make(op));
                }
            }
        }
        // v = v + e, v = e + v (top level only), v = v * e
        let depth0: Vec<(usize, &Token)> = {
            let mut d = 0i32;
            let mut v = Vec::new();
            for (k, tk) in r.iter().enumerate() {
                match tk.text.as_str() {
                    "(" | "[" => d += 1,
                    ")" | "]" => d -= 1,
                    _ => {}
                }
                if d == 0 {
                    v.push((k, *tk));
                }
            }
            v
        };
        let top_ops: BTreeSet<&str> = depth0
            .iter()
            .filter(|(_, tk)| tk.kind == Tok::Punct && !matches!(tk.text.as_str(), ")" | "]"))
            .map(|(_, tk)| tk.text.as_str())
            .collect();
        let first_is_v = is_var(r[0])
            && r.get(1)
                .is_some_and(|x| x.kind == Tok::Punct && x.text != "(" && x.text != "[");
        let last_is_v = r.len() >= 2 && is_var(r[r.len() - 1]);
        if (first_is_v || last_is_v) && !top_ops.is_empty() {
            if top_ops.iter().all(|o| matches!(*o, "+"))
                || (first_is_v && top_ops.iter().all(|o| matches!(*o, "+" | "-")))
            {
                return Some(make("+"));
            }
            if top_ops.iter().all(|o| *o == "*") {
                return Some(make("*"));
            }
        }
        // v = a > b ? a : b (C)
        if self.lang == Lang::C && top_ops.contains("?") {
            let q = depth0
                .iter()
                .find(|(_, x)| x.text == "?")
                .map(|(k, _)| *k)?;
            let c = depth0
                .iter()
                .find(|(_, x)| x.text == ":")
                .map(|(k, _)| *k)?;
            let cmp = depth0
                .iter()
                .find(|(k, x)| *k < q && matches!(x.text.as_str(), ">" | ">=" | "<" | "<="))?;
            let lhs = &r[..cmp.0];
            let rhs_c = &r[cmp.0 + 1..q];
            let a_txt = &r[q + 1..c];
            let b_txt = &r[c + 1..];
            let same = |x: &[&Token], y: &[&Token]| {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.text == q.text)
            };
            let greater = matches!(cmp.1.text.as_str(), ">" | ">=");
            let mentions_v = lhs.iter().chain(rhs_c).any(|x| is_var(x));
            if mentions_v {
                if same(a_txt, lhs) && same(b_txt, rhs_c) {
                    return Some(make(if greater { "max" } else { "min" }));
                }
                if same(a_txt, rhs_c) && same(b_txt, lhs) {
                    return Some(make(if greater { "min" } else { "max" }));
                }
            }
        }
        // if (x > v) v = x;   if (v < x) v = x;
        let start = self.statement_start(i);
        if start >= 1 && t[start - 1].text == ")" {
            let open = (0..start - 1)
                .rev()
                .find(|&k| matching(t, k) == Some(start - 1))?;
            if open >= 1 && t[open - 1].key == "if" {
                let cond = &t[open + 1..start - 1];
                let pos = cond.iter().position(|x| {
                    matches!(
                        x.text.as_str(),
                        ">" | ">=" | "<" | "<=" | ".gt." | ".lt." | ".ge." | ".le."
                    )
                })?;
                let (l, rr) = (&cond[..pos], &cond[pos + 1..]);
                let rhs_t: Vec<&Token> = r.clone();
                let same = |x: &[Token], y: &[&Token]| {
                    x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.text == q.text)
                };
                let gt = matches!(cond[pos].text.as_str(), ">" | ">=" | ".gt." | ".ge.");
                let v_left = l.len() == 1 && is_var(&l[0]);
                let v_right = rr.len() == 1 && is_var(&rr[0]);
                // (x > v) v = x  -> max;  (v < x) v = x -> max
                if v_right && same(l, &rhs_t) {
                    return Some(make(if gt { "max" } else { "min" }));
                }
                if v_left && same(rr, &rhs_t) {
                    return Some(make(if gt { "min" } else { "max" }));
                }
            }
        }
        None
    }

    /// First token of the statement holding token `i`.
    fn statement_start(&self, i: usize) -> usize {
        let t = &self.tokens;
        match self.lang {
            Lang::C => {
                let mut k = i;
                while k > 0 && !matches!(t[k - 1].text.as_str(), ";" | "{" | "}") {
                    // Stop after `if (...)`, `else`, `for (...)` heads.
                    if t[k - 1].text == ")" {
                        if let Some(open) =
                            (0..k - 1).rev().find(|&o| matching(t, o) == Some(k - 1))
                        {
                            if open >= 1
                                && matches!(t[open - 1].key.as_str(), "if" | "for" | "while")
                            {
                                break;
                            }
                        }
                    }
                    if t[k - 1].key == "else" {
                        break;
                    }
                    k -= 1;
                }
                k
            }
            Lang::Fortran => {
                let line = t[i].line;
                let mut k = i;
                while k > 0 && t[k - 1].line == line && t[k - 1].text != ";" {
                    // `if (cond) v = x` on one line: the statement is after `)`.
                    if t[k - 1].text == ")" {
                        if let Some(open) =
                            (0..k - 1).rev().find(|&o| matching(t, o) == Some(k - 1))
                        {
                            if open >= 1 && t[open - 1].key == "if" && t[open - 1].line == line {
                                break;
                            }
                        }
                    }
                    k -= 1;
                }
                k
            }
        }
    }

    /// One past the last token of the statement holding token `i`.
    fn statement_end(&self, i: usize) -> usize {
        let t = &self.tokens;
        match self.lang {
            Lang::C => {
                let mut d = 0i32;
                let mut k = i;
                while k < t.len() {
                    match t[k].text.as_str() {
                        "(" | "[" | "{" => d += 1,
                        ")" | "]" | "}" => d -= 1,
                        ";" if d <= 0 => return k,
                        _ => {}
                    }
                    k += 1;
                }
                k
            }
            Lang::Fortran => {
                let line = t[i].line;
                let mut k = i;
                while k < t.len() && t[k].line == line && t[k].text != ";" {
                    k += 1;
                }
                k
            }
        }
    }

    /// Names declared inside lines `a..=b` (C declarations in the block,
    /// loop indices of `for (int i ...)`), and loop indices of loops
    /// starting in the range.
    pub fn locals_in(&self, a: u32, b: u32) -> Vec<String> {
        let lo = self.tokens.partition_point(|t| t.line < a);
        let hi = self.tokens.partition_point(|t| t.line <= b);
        let mut out = Vec::new();
        for lp in self
            .loops
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

    /// The index variable of a `for`/`do` loop.
    pub fn loop_index(&self, lp: &Loop) -> Option<String> {
        let t = &self.tokens;
        match self.lang {
            Lang::C if lp.kind == "for" => {
                // for ( [type] i = ...
                let open = lp.first_tok + 1;
                let semi = (open..lp.body_tok).find(|&k| t[k].text == ";")?;
                let eq = (open..semi).find(|&k| t[k].text == "=")?;
                (eq > open + 1).then(|| t[eq - 1].key.clone())
            }
            Lang::Fortran if lp.kind == "do" => {
                let k = lp.first_tok;
                (t.get(k + 2).map(|x| x.text.as_str()) == Some("=")).then(|| t[k + 1].key.clone())
            }
            _ => None,
        }
    }

    /// Text of the loop header (first line), trimmed.
    pub fn header_text(&self, lp: &Loop) -> String {
        self.line(lp.header_line).trim().to_string()
    }
}

/// The next line after `n` holding code (not blank, not only a comment).
fn next_code_line(lines: &[String], n: u32) -> u32 {
    let mut k = n + 1;
    while (k as usize) <= lines.len() {
        let l = &lines[k as usize - 1];
        if !strip_f_comment(l, false).trim().is_empty() {
            return k;
        }
        k += 1;
    }
    k
}

const C_KEYWORDS: &[&str] = &[
    "for",
    "while",
    "do",
    "if",
    "else",
    "return",
    "switch",
    "case",
    "default",
    "break",
    "continue",
    "goto",
    "sizeof",
    "static",
    "const",
    "volatile",
    "extern",
    "register",
    "restrict",
    "inline",
    "struct",
    "union",
    "enum",
    "typedef",
    "void",
    "char",
    "short",
    "int",
    "long",
    "float",
    "double",
    "signed",
    "unsigned",
    "size_t",
    "bool",
    "_Bool",
    "auto",
    "ptrdiff_t",
    "int64_t",
    "int32_t",
    "uint64_t",
    "uint32_t",
    "NULL",
    "true",
    "false",
];

const C_TYPES: &[&str] = &[
    "char",
    "short",
    "int",
    "long",
    "float",
    "double",
    "signed",
    "unsigned",
    "size_t",
    "bool",
    "_Bool",
    "auto",
    "ptrdiff_t",
    "int64_t",
    "int32_t",
    "uint64_t",
    "uint32_t",
    "const",
    "static",
    "register",
    "volatile",
];

const F_KEYWORDS: &[&str] = &[
    "do",
    "while",
    "end",
    "enddo",
    "if",
    "then",
    "else",
    "elseif",
    "endif",
    "call",
    "program",
    "subroutine",
    "function",
    "module",
    "contains",
    "use",
    "implicit",
    "none",
    "integer",
    "real",
    "double",
    "precision",
    "complex",
    "logical",
    "character",
    "allocatable",
    "dimension",
    "intent",
    "in",
    "out",
    "inout",
    "parameter",
    "allocate",
    "deallocate",
    "return",
    "stop",
    "write",
    "read",
    "print",
    "exit",
    "cycle",
    "kind",
    "len",
    "result",
    "and",
    "or",
    "not",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "true",
    "false",
    "select",
    "case",
    "type",
    "save",
    "target",
    "pointer",
    "optional",
    "pure",
    "elemental",
    "recursive",
    "only",
    "interface",
    "abs",
    "max",
    "min",
    "sqrt",
    "exp",
    "sum",
    "maxval",
    "minval",
    "huge",
    "tiny",
    "size",
    "real",
    "int",
    "dble",
    "mod",
    "trim",
    "adjustl",
    "system_clock",
    "present",
];

fn is_c_pragma(l: &str) -> bool {
    split_c_pragma(l).is_some()
}

/// "#pragma acc ..." -> ("#pragma acc", rest).
fn split_c_pragma(l: &str) -> Option<(&str, &str)> {
    let t = l.trim_start();
    let lead = l.len() - t.len();
    let rest = t.strip_prefix('#')?;
    let rest2 = rest.trim_start().strip_prefix("pragma")?;
    let rest3 = rest2.trim_start();
    let rest4 = rest3.strip_prefix("acc")?;
    if !rest4.is_empty() && !rest4.starts_with(char::is_whitespace) {
        return None;
    }
    let sentinel_len = l.len() - rest4.len() - lead;
    Some((&t[..sentinel_len], rest4))
}

fn is_f_directive(l: &str) -> bool {
    split_f_directive(l).is_some()
}

/// "!$acc ..." (any case) -> ("!$acc", rest).
fn split_f_directive(l: &str) -> Option<(&str, &str)> {
    let t = l.trim_start();
    if t.len() >= 5 && t[..5].eq_ignore_ascii_case("!$acc") {
        let rest = &t[5..];
        if rest.is_empty() || rest.starts_with(char::is_whitespace) || rest.starts_with('&') {
            return Some((&t[..5], rest));
        }
    }
    None
}

/// Splits C code from a trailing `//` or `/* */` comment.
fn split_c_comment(s: &str) -> (String, Option<String>) {
    let b = s.as_bytes();
    let mut i = 0;
    let mut in_str: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = in_str {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q {
                in_str = None;
            }
        } else if c == b'"' || c == b'\'' {
            in_str = Some(c);
        } else if c == b'/' && i + 1 < b.len() && (b[i + 1] == b'/' || b[i + 1] == b'*') {
            return (s[..i].to_string(), Some(s[i..].trim_end().to_string()));
        }
        i += 1;
    }
    (s.to_string(), None)
}

/// Splits Fortran code from a trailing `!` comment.
fn split_f_comment(s: &str) -> (String, Option<String>) {
    let mut in_str: Option<char> = None;
    for (i, c) in s.char_indices() {
        match in_str {
            Some(q) if c == q => in_str = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => in_str = Some(c),
            None if c == '!' => return (s[..i].to_string(), Some(s[i..].trim_end().to_string())),
            None => {}
        }
    }
    (s.to_string(), None)
}

/// The code part of a Fortran line; directives count as comments unless
/// `keep_directive`.
fn strip_f_comment(l: &str, keep_directive: bool) -> String {
    if is_f_directive(l) {
        if keep_directive {
            let (_, rest) = split_f_directive(l).unwrap_or(("", l));
            return split_f_comment(rest).0;
        }
        return String::new();
    }
    split_f_comment(l).0
}

/// Splits at `sep` outside parentheses and brackets.
fn split_top(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut d = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' | '[' => d += 1,
            ')' | ']' => d -= 1,
            _ => {}
        }
        if c == sep && d == 0 {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

const CONSTRUCT_WORDS: &[&str] = &[
    "parallel",
    "kernels",
    "serial",
    "loop",
    "data",
    "enter",
    "exit",
    "update",
    "wait",
    "host_data",
    "declare",
    "atomic",
    "routine",
    "cache",
    "init",
    "shutdown",
    "set",
    "end",
];

/// Whether `word` continues the construct name `so_far` ("parallel" +
/// "loop", "enter" + "data", "end" + "kernels", ...) rather than starting
/// the clauses.
fn joins_construct(so_far: &[String], word: &str) -> bool {
    let last = match so_far.last() {
        None => return true,
        Some(l) => l.as_str(),
    };
    match (last, word) {
        ("parallel" | "kernels" | "serial", "loop") => true,
        ("enter" | "exit", "data") => true,
        ("end", w) => CONSTRUCT_WORDS.contains(&w),
        _ => false,
    }
}

/// "kernels present(a) // x" body (without the sentinel) -> construct words, clauses.
fn parse_directive_body(body: &str) -> (Vec<String>, Vec<Clause>) {
    let mut construct = Vec::new();
    let mut clauses = Vec::new();
    let s = body.trim();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut in_construct = true;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() || c == ',' {
            i += 1;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let st = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[st..i].iter().collect::<String>().to_ascii_lowercase();
            // Skip spaces before a possible '('.
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let args = if j < chars.len() && chars[j] == '(' {
                let mut d = 0;
                let mut k = j;
                while k < chars.len() {
                    if chars[k] == '(' {
                        d += 1;
                    } else if chars[k] == ')' {
                        d -= 1;
                        if d == 0 {
                            break;
                        }
                    }
                    k += 1;
                }
                let a: String = chars[j + 1..k.min(chars.len())].iter().collect();
                i = (k + 1).min(chars.len());
                Some(a.trim().to_string())
            } else {
                None
            };
            // `wait(1)` and `cache(...)` are constructs with arguments; keep
            // them as construct words and their arguments as a clause.
            if in_construct && joins_construct(&construct, &word) {
                construct.push(word.clone());
                if let Some(a) = args {
                    clauses.push(Clause {
                        name: word,
                        args: Some(a),
                    });
                    in_construct = false;
                }
                continue;
            }
            in_construct = false;
            clauses.push(Clause { name: word, args });
            continue;
        }
        i += 1;
    }
    (construct, clauses)
}

fn tokenize_c(lines: &[String]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut in_block_comment = false;
    let mut continued_pp = false;
    for (ln, l) in lines.iter().enumerate() {
        let line = ln as u32 + 1;
        let trimmed = l.trim_start();
        if !in_block_comment && (trimmed.starts_with('#') || continued_pp) {
            // Preprocessor lines carry no statements.
            continued_pp = l.trim_end().ends_with('\\');
            continue;
        }
        let b: Vec<char> = l.chars().collect();
        let mut i = 0;
        while i < b.len() {
            if in_block_comment {
                if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    in_block_comment = false;
                    i += 2;
                } else {
                    i += 1;
                }
                continue;
            }
            let c = b[i];
            if c == '/' && b.get(i + 1) == Some(&'/') {
                break;
            }
            if c == '/' && b.get(i + 1) == Some(&'*') {
                in_block_comment = true;
                i += 2;
                continue;
            }
            if c == '"' || c == '\'' {
                let q = c;
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push(Token {
                    kind: Tok::Number,
                    text: "\"\"".into(),
                    key: "\"\"".into(),
                    line,
                });
                continue;
            }
            if c.is_whitespace() {
                i += 1;
                continue;
            }
            if c.is_alphabetic() || c == '_' {
                let st = i;
                while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
                // C++ qualified names: std::max
                while i + 2 < b.len()
                    && b[i] == ':'
                    && b[i + 1] == ':'
                    && (b[i + 2].is_alphabetic() || b[i + 2] == '_')
                {
                    i += 2;
                    while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                        i += 1;
                    }
                }
                let text: String = b[st..i].iter().collect();
                out.push(Token {
                    kind: Tok::Ident,
                    key: text.clone(),
                    text,
                    line,
                });
                continue;
            }
            if c.is_ascii_digit() || (c == '.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
            {
                let st = i;
                while i < b.len()
                    && (b[i].is_alphanumeric()
                        || b[i] == '.'
                        || ((b[i] == '+' || b[i] == '-') && matches!(b[i - 1], 'e' | 'E')))
                {
                    i += 1;
                }
                let text: String = b[st..i].iter().collect();
                out.push(Token {
                    kind: Tok::Number,
                    key: text.clone(),
                    text,
                    line,
                });
                continue;
            }
            const OPS: &[&str] = &[
                "<<=", ">>=", "->", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
                "==", "!=", "<=", ">=", "&&", "||", "<<", ">>",
            ];
            let rest: String = b[i..(i + 3).min(b.len())].iter().collect();
            let op = OPS.iter().find(|o| rest.starts_with(**o));
            let text = match op {
                Some(o) => o.to_string(),
                None => c.to_string(),
            };
            i += text.chars().count();
            out.push(Token {
                kind: Tok::Punct,
                key: text.clone(),
                text,
                line,
            });
        }
    }
    out
}

fn tokenize_fortran(lines: &[String]) -> Vec<Token> {
    let mut out = Vec::new();
    for (ln, l) in lines.iter().enumerate() {
        let line = ln as u32 + 1;
        let code = strip_f_comment(l, false);
        let b: Vec<char> = code.chars().collect();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c == '"' || c == '\'' {
                let q = c;
                i += 1;
                while i < b.len() && b[i] != q {
                    i += 1;
                }
                i += 1;
                out.push(Token {
                    kind: Tok::Number,
                    text: "''".into(),
                    key: "''".into(),
                    line,
                });
                continue;
            }
            if c.is_whitespace() || c == '&' {
                i += 1;
                continue;
            }
            if c.is_alphabetic() || c == '_' {
                let st = i;
                while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
                let text: String = b[st..i].iter().collect();
                out.push(Token {
                    kind: Tok::Ident,
                    key: text.to_ascii_lowercase(),
                    text,
                    line,
                });
                continue;
            }
            if c.is_ascii_digit() || (c == '.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
            {
                let st = i;
                while i < b.len()
                    && (b[i].is_alphanumeric()
                        || b[i] == '_'
                        || (b[i] == '.'
                            && !b.get(i + 1).is_some_and(|x| {
                                x.is_alphabetic() && !matches!(x, 'e' | 'E' | 'd' | 'D')
                            }))
                        || ((b[i] == '+' || b[i] == '-')
                            && matches!(b[i - 1], 'e' | 'E' | 'd' | 'D')))
                {
                    i += 1;
                }
                let text: String = b[st..i].iter().collect();
                out.push(Token {
                    kind: Tok::Number,
                    key: text.clone(),
                    text,
                    line,
                });
                continue;
            }
            // .gt. style operators
            if c == '.' {
                let st = i;
                let mut j = i + 1;
                while j < b.len() && b[j].is_alphabetic() {
                    j += 1;
                }
                if j < b.len() && b[j] == '.' && j > i + 1 {
                    let text: String = b[st..=j].iter().collect::<String>().to_ascii_lowercase();
                    i = j + 1;
                    out.push(Token {
                        kind: Tok::Punct,
                        key: text.clone(),
                        text,
                        line,
                    });
                    continue;
                }
            }
            const OPS: &[&str] = &["==", "/=", "<=", ">=", "=>", "::", "**", "//"];
            let rest: String = b[i..(i + 2).min(b.len())].iter().collect();
            let text = match OPS.iter().find(|o| rest.starts_with(**o)) {
                Some(o) => o.to_string(),
                None => c.to_string(),
            };
            i += text.chars().count();
            out.push(Token {
                kind: Tok::Punct,
                key: text.clone(),
                text,
                line,
            });
        }
    }
    out
}

/// Index of the token closing the bracket opened at `open`.
fn matching(t: &[Token], open: usize) -> Option<usize> {
    let (o, c) = match t.get(open)?.text.as_str() {
        "(" => ("(", ")"),
        "[" => ("[", "]"),
        "{" => ("{", "}"),
        _ => return None,
    };
    let mut d = 0;
    for (k, tk) in t.iter().enumerate().skip(open) {
        if tk.text == o {
            d += 1;
        } else if tk.text == c {
            d -= 1;
            if d == 0 {
                return Some(k);
            }
        }
    }
    None
}

/// One past the last token of the C statement starting at token `i`.
fn c_statement_end(t: &[Token], i: usize) -> Option<usize> {
    let tk = t.get(i)?;
    match tk.text.as_str() {
        "{" => Some(matching(t, i)? + 1),
        "for" | "while" | "switch" => {
            let close = matching(t, i + 1)?;
            if t.get(close + 1)?.text == ";" {
                return Some(close + 2);
            }
            c_statement_end(t, close + 1)
        }
        "if" => {
            let close = matching(t, i + 1)?;
            let end = c_statement_end(t, close + 1)?;
            if t.get(end).map(|x| x.text.as_str()) == Some("else") {
                return c_statement_end(t, end + 1);
            }
            Some(end)
        }
        "do" => {
            let body_end = c_statement_end(t, i + 1)?;
            // while ( ... ) ;
            if t.get(body_end)?.text != "while" {
                return None;
            }
            let close = matching(t, body_end + 1)?;
            Some(close + 2)
        }
        ";" => Some(i + 1),
        _ => {
            let mut d = 0i32;
            for (k, x) in t.iter().enumerate().skip(i) {
                match x.text.as_str() {
                    "(" | "[" | "{" => d += 1,
                    ")" | "]" | "}" => d -= 1,
                    ";" if d == 0 => return Some(k + 1),
                    _ => {}
                }
                if d < 0 {
                    return Some(k);
                }
            }
            None
        }
    }
}

fn c_loops(t: &[Token]) -> Vec<Loop> {
    let mut loops = Vec::new();
    let mut do_tails = BTreeSet::new();
    for i in 0..t.len() {
        if t[i].kind != Tok::Ident {
            continue;
        }
        let kind = t[i].text.as_str();
        if !matches!(kind, "for" | "while" | "do") || do_tails.contains(&i) {
            continue;
        }
        let Some(end) = c_statement_end(t, i) else {
            continue;
        };
        let body = match kind {
            "do" => {
                if let Some(bend) = c_statement_end(t, i + 1) {
                    do_tails.insert(bend);
                }
                i + 1
            }
            _ => match matching(t, i + 1) {
                Some(c) => c + 1,
                None => continue,
            },
        };
        loops.push(Loop {
            kind: kind.to_string(),
            header_line: t[i].line,
            end_line: t[end - 1].line,
            first_tok: i,
            end_tok: end,
            body_tok: body,
        });
    }
    loops
}

/// C function bodies: `) {` at brace depth 0 to the matching `}`.
fn c_functions(t: &[Token]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut d = 0;
    let mut i = 0;
    while i < t.len() {
        match t[i].text.as_str() {
            "{" => {
                if d == 0 && i > 0 && t[i - 1].text == ")" {
                    if let Some(close) = matching(t, i) {
                        out.push((t[i].line, t[close].line));
                        i = close + 1;
                        continue;
                    }
                }
                d += 1;
            }
            "}" => d -= 1,
            _ => {}
        }
        i += 1;
    }
    out
}

/// Fortran do loops by matching `do` / `end do` lines.
fn fortran_loops(lines: &[String]) -> Vec<Loop> {
    let mut loops = Vec::new();
    let mut stack: Vec<(String, u32, usize)> = Vec::new();
    let mut tok_index = 0usize;
    for (ln, l) in lines.iter().enumerate() {
        let line = ln as u32 + 1;
        let code = strip_f_comment(l, false).trim().to_ascii_lowercase();
        let ntok = tokenize_fortran(std::slice::from_ref(l)).len();
        // Strip a construct label "name: do ..."
        let code = match code.find(':') {
            Some(i)
                if !code[..i].contains(['(', '=', ' '])
                    && code[i + 1..].trim_start().starts_with("do")
                    && !code[i..].starts_with("::") =>
            {
                code[i + 1..].trim_start().to_string()
            }
            _ => code,
        };
        let is_do = code == "do" || code.starts_with("do ") || code.starts_with("do(");
        if is_do {
            let kind = if code[2..].trim_start().starts_with("while") {
                "do while"
            } else {
                "do"
            };
            stack.push((kind.to_string(), line, tok_index));
        } else if code == "enddo" || code.starts_with("end do") || code.starts_with("enddo ") {
            if let Some((kind, header, first)) = stack.pop() {
                loops.push(Loop {
                    kind,
                    header_line: header,
                    end_line: line,
                    first_tok: first,
                    end_tok: tok_index + ntok,
                    body_tok: first,
                });
            }
        }
        tok_index += ntok;
    }
    loops.sort_by_key(|l| l.header_line);
    loops
}

/// Fortran program units: header line to the line before `contains` or the `end`.
fn fortran_units(lines: &[String]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut stack: Vec<u32> = Vec::new();
    let mut contained: Vec<bool> = Vec::new();
    for (ln, l) in lines.iter().enumerate() {
        let line = ln as u32 + 1;
        let code = strip_f_comment(l, false).trim().to_ascii_lowercase();
        let words: Vec<&str> = code
            .split(|c: char| c.is_whitespace() || c == '(')
            .filter(|w| !w.is_empty())
            .collect();
        let head = words
            .iter()
            .position(|w| matches!(*w, "program" | "subroutine" | "function" | "module"));
        let is_end = words.first() == Some(&"end")
            && matches!(
                words.get(1).copied(),
                None | Some("program" | "subroutine" | "function" | "module")
            );
        if is_end {
            if let Some(start) = stack.pop() {
                let was_contained = contained.pop().unwrap_or(false);
                if !was_contained {
                    out.push((start, line));
                }
            }
        } else if code == "contains" {
            if let (Some(&start), Some(c)) = (stack.last(), contained.last_mut()) {
                if !*c {
                    out.push((start, line));
                    *c = true;
                }
            }
        } else if let Some(h) = head {
            // "end function" handled above; "real function f(x)" is a header.
            if words[..h].iter().all(|w| !w.contains('=')) && !code.contains('=') {
                stack.push(line);
                contained.push(false);
            }
        }
    }
    out
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

#[cfg(test)]
mod tests;
