//! OpenACC directives: sentinels, clauses and their arguments, queues,
//! and the block a directive applies to.

use super::lex::{
    is_f_directive, split_c_comment, split_f_comment, split_f_directive, strip_f_comment,
};
use super::{Lang, SourceFile};

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

    /// A data construct: `data`, `enter data` or `exit data`.
    pub fn is_data(&self) -> bool {
        matches!(
            self.construct_name().as_str(),
            "data" | "enter data" | "exit data"
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

impl SourceFile {
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
                // The statement the parser found first after the directive
                // (an outer one before those it holds).
                let s = self.syntax().statement_after(d.end_line)?;
                Some((s.from.0, s.last, None))
            }
            Lang::Fortran => {
                let name = d.construct_name();
                if d.has_loop() {
                    // The loop right after the directive (blank lines and
                    // comments between).
                    let syn = self.syntax();
                    let lp = &syn.loops[syn.loop_of_directive(d.line)?];
                    let closing = self.end_directive_after(lp.end, &name);
                    return Some((lp.start, lp.end, closing));
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
}

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

/// Splits at `sep` outside parentheses and brackets.
pub(super) fn split_top(s: &str, sep: char) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directive_words() {
        let (c, cl) = parse_directive_body(" enter data copyin(a[0:n]) async(2)");
        assert_eq!(c, ["enter", "data"]);
        assert_eq!(cl.len(), 2);
        let (c, cl) = parse_directive_body(" parallel wait(1) num_gangs(4)");
        assert_eq!(c, ["parallel"]);
        assert_eq!(cl[0].name, "wait");
        let (c, cl) = parse_directive_body(" wait(1)");
        assert_eq!(c, ["wait"]);
        assert_eq!(cl[0].args.as_deref(), Some("1"));
        let (c, _) = parse_directive_body(" end parallel loop");
        assert_eq!(c, ["end", "parallel", "loop"]);
        let (c, cl) = parse_directive_body(" parallel loop reduction(max:dt) collapse(2)");
        assert_eq!(c, ["parallel", "loop"]);
        assert_eq!(cl[0].vars(), ["dt"]);
    }

    #[test]
    fn fortran_parallel_loop_block() {
        let text = "program p\n  real :: x(10)\n  integer :: i\n  !$acc parallel loop &\n  !$acc& copy(x)\n  do i = 1, 10\n    x(i) = i\n  end do\n  !$acc end parallel loop\nend program p\n";
        let s = SourceFile::new("p.f90", "p.f90".into(), Lang::Fortran, text.into());
        let d = s.directive_at(5).expect("continued directive");
        assert_eq!((d.line, d.end_line), (4, 5));
        assert_eq!(d.data_vars(), ["x"]);
        assert_eq!(s.block_of(&d), Some((6, 8, Some(9))));
        // A `loop` directive governs the counted loop right after it, a
        // labelled one too; a `do while` is none.
        let text = "program p\n  !$acc parallel\n  !$acc loop\n  ! rows\n  outer: do i = 1, 10\n    x(i) = i\n  end do outer\n  !$acc loop\n  do while (x(1) < 5)\n    x(1) = x(1) + 1\n  end do\n  !$acc end parallel\nend program p\n";
        let s = SourceFile::new("p.f90", "p.f90".into(), Lang::Fortran, text.into());
        let d = s.directive_at(3).expect("loop directive");
        assert_eq!(s.block_of(&d), Some((5, 7, None)));
        let d = s.directive_at(8).expect("loop directive");
        assert_eq!(s.block_of(&d), None);
        let d = s.directive_at(2).expect("parallel");
        assert_eq!(s.block_of(&d), Some((3, 11, Some(12))));
    }

    /// C++: the statement after a directive, as the C++ grammar parses
    /// it (a range-for, a lambda's braces, a one-line body).
    #[test]
    fn cpp_blocks() {
        let text = "#include <vector>\nvoid f(std::vector<double> &v) {\n  double *p = v.data();\n  int n = v.size();\n#pragma acc parallel loop copy(p[0:n])\n  for (int i = 0; i < n; i++)\n    p[i] = [](double x) { return x + 1; }(p[i]);\n#pragma acc update self(p[0:n])\n  for (auto &x : v) { if (x > 2) {\n      x = 2; } }\n}\n";
        let s = SourceFile::new("b.cpp", "b.cpp".into(), Lang::C, text.into());
        let d = s.directive_at(5).expect("directive");
        assert_eq!(s.block_of(&d), Some((6, 7, None)));
        let d = s.directive_at(8).expect("directive");
        assert_eq!(s.block_of(&d), Some((9, 10, None)));
        // Where a directive goes after a statement, and the one after a
        // directive: the range-for to its last brace, alone on its last
        // line (the function's brace comes on the next).
        assert_eq!(s.statement_end_line(6), 7);
        assert_eq!(s.statement_end_line(9), 10);
        assert_eq!(s.statement_end_line(3), 3);
        let after = s.syntax().statement_after(8).expect("statement");
        assert_eq!((after.from, after.last), ((9, 2), 10));
        assert_eq!(s.statement_shares_last_line(8), Some(false));
        // The loop at line 6 ends on line 7, where nothing else is.
        assert_eq!(s.statement_shares_last_line(5), Some(false));
    }

    #[test]
    fn queues_of_async_and_wait() {
        let src = "int main(void)\n{\n#pragma acc set default_async(1)\n#pragma acc parallel loop async wait(devnum: 0: queues: 2, q)\n  for (;;) ;\n#pragma acc wait(1, acc_async_noval)\n#pragma acc set default_async(n + 1)\n}\n";
        let s = SourceFile::new("q.c", "q.c".into(), Lang::C, src.into());
        let d = s.directive_at(4).expect("directive");
        assert_eq!(d.clause("async").map(|c| c.queue_args()), Some(vec![]));
        let w = d.clause("wait").expect("wait clause").queue_args();
        assert_eq!(w, ["2", "q"]);
        let q: Vec<_> = w.iter().map(|a| queue_number(a)).collect();
        assert_eq!(q, [Some(2), None]);
        let d = s.directive_at(6).expect("wait directive");
        assert_eq!(d.construct, ["wait"]);
        let w = d.clause("wait").expect("wait arguments").queue_args();
        assert_eq!(
            w.iter().map(|a| queue_number(a)).collect::<Vec<_>>(),
            [Some(1), Some(-1)]
        );
        let sets: Vec<_> = s
            .default_async_sets()
            .into_iter()
            .map(|(d, q)| (d.line, q))
            .collect();
        assert_eq!(sets, [(3, "1".to_string()), (7, "n + 1".to_string())]);

        let f = "program p\n  !$acc set default_async(2)\n  !$acc parallel loop async\n  do i = 1, 2\n  end do\nend program\n";
        let s = SourceFile::new("q.f90", "q.f90".into(), Lang::Fortran, f.into());
        assert_eq!(s.default_async_sets()[0].1, "2");
    }
}
