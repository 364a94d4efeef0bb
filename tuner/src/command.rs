//! The user's command templates: `--build 'CMD {src} {out}'` runs through
//! `sh -c` with the paths quoted for it; `--run '{out} ARGS'` is split into
//! words here and run directly (under the collector, no shell in between).

use std::path::Path;

use crate::error::Error;

/// The build command for `sh -c`: `{src}` and `{out}` replaced by the
/// quoted paths.
pub fn build_command(template: &str, src: &Path, out: &Path) -> String {
    template
        .replace("{src}", &sh_quote(src))
        .replace("{out}", &sh_quote(out))
}

/// The run command's words, `{out}` replaced by the program's path (one
/// word, whatever it holds).
pub fn run_words(template: &str, program: &Path) -> Result<Vec<String>, Error> {
    let words = split_words(&template.replace("{out}", &sh_quote(program)))?;
    if words.is_empty() {
        return Err(Error::EmptyCommand {
            template: template.to_string(),
        });
    }
    Ok(words)
}

/// Splits a command line into words: spaces separate, '...' and "..."
/// quote, backslash escapes. No other shell syntax.
pub fn split_words(s: &str) -> Result<Vec<String>, Error> {
    let unterminated = |quote| Error::Quote {
        quote,
        template: s.to_string(),
    };
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(unterminated('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x) => cur.push(x),
                            None => return Err(unterminated('"')),
                        },
                        Some(x) => cur.push(x),
                        None => return Err(unterminated('"')),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(x) = chars.next() {
                    cur.push(x);
                }
            }
            _ => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// Quotes a path for `sh -c`.
pub fn sh_quote(p: &Path) -> String {
    let s = p.display().to_string();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,".contains(c))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(
            split_words("a  b 'c d' \"e \\\" f\" g\\ h").unwrap_or_default(),
            ["a", "b", "c d", "e \" f", "g h"]
        );
        let err = split_words("'x").err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("unterminated ' in `'x`"));
    }

    #[test]
    fn templates() {
        assert_eq!(
            build_command(
                "gcc {src} -o {out}",
                Path::new("/a b/x.c"),
                Path::new("/w/before.bin")
            ),
            "gcc '/a b/x.c' -o /w/before.bin"
        );
        let words = run_words("{out} 64 'a b'", Path::new("/w d'ir/p")).unwrap_or_default();
        assert_eq!(words, ["/w d'ir/p", "64", "a b"]);
        assert!(run_words("  ", Path::new("/p")).is_err());
    }
}
