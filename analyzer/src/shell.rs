//! Shell quoting for the command lines the analyzer writes into its
//! proposals (`accprof tune ... --run '{out} ARGS'`), which a reader pastes
//! into a shell.

/// A word as a shell reads it inside single quotes (no quotes needed for
/// plain words).
pub(crate) fn word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,%".contains(c))
    {
        s.to_string()
    } else {
        format!("\"{}\"", s.replace(['"', '\''], ""))
    }
}

#[cfg(test)]
mod tests {
    use super::word;

    #[test]
    fn plain_words_stay_bare_and_others_are_double_quoted_without_quotes() {
        assert_eq!(word("input/grid_64.dat"), "input/grid_64.dat");
        assert_eq!(word("--size=4096,50%"), "--size=4096,50%");
        assert_eq!(word(""), "\"\"");
        assert_eq!(word("two words"), "\"two words\"");
        assert_eq!(word("it's \"x\""), "\"its x\"");
    }
}
