//! Lexing: comments, keywords, and the C and Fortran tokenizers.

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
    /// Where it starts in its line, in characters (0-based): with the
    /// line, a position the parse tree's nodes are matched to.
    pub col: u32,
}

impl Token {
    /// A token whose key is its text.
    fn new(kind: Tok, text: String, line: u32, col: usize) -> Token {
        Token {
            kind,
            key: text.clone(),
            text,
            line,
            col: col as u32,
        }
    }
}

pub(super) const C_KEYWORDS: &[&str] = &[
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

pub(super) const C_TYPES: &[&str] = &[
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

/// Splits C code from a trailing `//` or `/* */` comment.
pub(super) fn split_c_comment(s: &str) -> (String, Option<String>) {
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
pub(super) fn split_f_comment(s: &str) -> (String, Option<String>) {
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
pub(super) fn strip_f_comment(l: &str, keep_directive: bool) -> String {
    if is_f_directive(l) {
        if keep_directive {
            let (_, rest) = split_f_directive(l).unwrap_or(("", l));
            return split_f_comment(rest).0;
        }
        return String::new();
    }
    split_f_comment(l).0
}

/// Past the word (letters, digits, `_`) starting at `i`.
fn past_word(b: &[char], mut i: usize) -> usize {
    while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
        i += 1;
    }
    i
}

/// Past the string literal whose quote is at `i` (C's backslash escapes
/// when `escapes`).
fn past_string(b: &[char], mut i: usize, escapes: bool) -> usize {
    let q = b[i];
    i += 1;
    while i < b.len() && b[i] != q {
        if escapes && b[i] == '\\' {
            i += 1;
        }
        i += 1;
    }
    i + 1
}

/// The longest of `ops` at `i`, else the character there.
fn operator(b: &[char], i: usize, ops: &[&str]) -> String {
    let longest = ops.iter().map(|o| o.len()).max().unwrap_or(1);
    let rest: String = b[i..(i + longest).min(b.len())].iter().collect();
    match ops.iter().find(|o| rest.starts_with(**o)) {
        Some(o) => o.to_string(),
        None => b[i].to_string(),
    }
}

pub(super) fn tokenize_c(lines: &[String]) -> Vec<Token> {
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
                let st = i;
                i = past_string(&b, i, true);
                out.push(Token::new(Tok::Number, "\"\"".into(), line, st));
                continue;
            }
            if c.is_whitespace() {
                i += 1;
                continue;
            }
            if c.is_alphabetic() || c == '_' {
                let st = i;
                i = past_word(&b, i);
                // C++ qualified names: std::max
                while i + 2 < b.len()
                    && b[i] == ':'
                    && b[i + 1] == ':'
                    && (b[i + 2].is_alphabetic() || b[i + 2] == '_')
                {
                    i = past_word(&b, i + 2);
                }
                out.push(Token::new(Tok::Ident, b[st..i].iter().collect(), line, st));
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
                out.push(Token::new(Tok::Number, b[st..i].iter().collect(), line, st));
                continue;
            }
            const OPS: &[&str] = &[
                "<<=", ">>=", "->", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
                "==", "!=", "<=", ">=", "&&", "||", "<<", ">>",
            ];
            let text = operator(&b, i, OPS);
            out.push(Token::new(Tok::Punct, text.clone(), line, i));
            i += text.chars().count();
        }
    }
    out
}

pub(super) fn tokenize_fortran(lines: &[String]) -> Vec<Token> {
    let mut out = Vec::new();
    for (ln, l) in lines.iter().enumerate() {
        let line = ln as u32 + 1;
        let code = strip_f_comment(l, false);
        let b: Vec<char> = code.chars().collect();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c == '"' || c == '\'' {
                let st = i;
                i = past_string(&b, i, false);
                out.push(Token::new(Tok::Number, "''".into(), line, st));
                continue;
            }
            if c.is_whitespace() || c == '&' {
                i += 1;
                continue;
            }
            if c.is_alphabetic() || c == '_' {
                let st = i;
                i = past_word(&b, i);
                let text: String = b[st..i].iter().collect();
                out.push(Token {
                    kind: Tok::Ident,
                    key: text.to_ascii_lowercase(),
                    text,
                    line,
                    col: st as u32,
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
                out.push(Token::new(Tok::Number, b[st..i].iter().collect(), line, st));
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
                    let text = b[st..=j].iter().collect::<String>().to_ascii_lowercase();
                    i = j + 1;
                    out.push(Token::new(Tok::Punct, text, line, st));
                    continue;
                }
            }
            const OPS: &[&str] = &["==", "/=", "<=", ">=", "=>", "::", "**", "//"];
            let text = operator(&b, i, OPS);
            out.push(Token::new(Tok::Punct, text.clone(), line, i));
            i += text.chars().count();
        }
    }
    out
}

/// Index of the token closing the bracket opened at `open`.
pub(super) fn matching(t: &[Token], open: usize) -> Option<usize> {
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

/// True when `l` is a Fortran OpenACC directive line (`!$acc`, any case).
pub(super) fn is_f_directive(l: &str) -> bool {
    split_f_directive(l).is_some()
}

/// "!$acc ..." (any case) -> ("!$acc", rest).
pub(super) fn split_f_directive(l: &str) -> Option<(&str, &str)> {
    let t = l.trim_start();
    if t.len() >= 5 && t[..5].eq_ignore_ascii_case("!$acc") {
        let rest = &t[5..];
        if rest.is_empty() || rest.starts_with(char::is_whitespace) || rest.starts_with('&') {
            return Some((&t[..5], rest));
        }
    }
    None
}

/// One past the last token of the C statement starting at token `i`.
pub(super) fn c_statement_end(t: &[Token], i: usize) -> Option<usize> {
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
