//! What went wrong building, running or measuring ([`Error`], one line
//! naming the command, program or file), and the lines of a failed build's
//! stderr that say why.

use std::path::{Path, PathBuf};

/// What went wrong building, running or measuring. Each message is one
/// line naming the command, program or file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command template that cannot be split into words.
    #[error("unterminated {quote} in `{template}`")]
    Quote { quote: char, template: String },
    #[error("empty command{}", if template.is_empty() { String::new() } else { format!(" `{template}`") })]
    EmptyCommand { template: String },
    /// The build command exited with a failure. `stderr_tail` holds its
    /// last lines (at most [`STDERR_TAIL`]), `said` the line that says
    /// what failed ([`first_error`]), `log` the file with all it wrote.
    #[error(
        "building the {label} version failed (exit code {code}): `{command}`{}{}",
        said.as_deref().map(|l| format!(": {l}")).unwrap_or_default(),
        log.as_ref().map(|p| format!("; full log: {}", p.display())).unwrap_or_default()
    )]
    Build {
        label: String,
        command: String,
        /// Exit code, or 128 + signal.
        code: u8,
        stderr_tail: Vec<String>,
        /// Boxed, as `log`: the error stays small enough to return.
        said: Option<Box<str>>,
        log: Option<Box<Path>>,
    },
    #[error("cannot run {program}: {why}")]
    Spawn { program: String, why: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the {label} run left no trace at {} (exit code {code}){}", trace.display(), last_line(stderr_tail))]
    NoTrace {
        label: String,
        trace: PathBuf,
        code: u8,
        stderr_tail: Vec<String>,
    },
    #[error("cannot create the run's manifest in {}: {source} (set TMPDIR to a writable directory)", dir.display())]
    Manifest {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Load(#[from] accprof_analyzer::LoadError),
    #[error(transparent)]
    Space(#[from] crate::space::SpaceError),
    /// What `accprof analyze --verify` was asked cannot be verified.
    #[error("{0}")]
    Verify(String),
    /// What `accprof tune` was pointed at cannot be tuned.
    #[error("{0}")]
    Tune(String),
    /// A directory given as prebuilt programs that a prebuild did not
    /// make, or whose list cannot be read.
    #[error("{0}")]
    NotPrebuilt(String),
    /// Every run of a sweep was ended by a signal (`how`: "killed by
    /// SIGSEGV (exit code 139)"): nothing it measured can be recommended.
    #[error("every run died: all {runs} runs of `{run}` were {how}; nothing is recommended (the program crashes: fix it, or its arguments, before tuning)")]
    AllDied {
        runs: usize,
        how: String,
        run: String,
    },
    /// `accprof analyze --verify` stopped by a signal.
    #[error("interrupted before the {label} version was measured: the sources are untouched and no copy is left beside them")]
    VerifyInterrupted { label: String },
    /// Stopped by a signal; the source was restored and what was measured
    /// stays in the cache.
    #[error("interrupted: the source is restored; {samples} samples are in the cache {}: the same command resumes", cache.display())]
    Interrupted { samples: usize, cache: PathBuf },
}

/// How many lines of a failing command's stderr an error keeps.
pub const STDERR_TAIL: usize = 15;

/// The last `STDERR_TAIL` lines of `stderr`.
pub fn stderr_tail(stderr: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(STDERR_TAIL);
    lines[from..].iter().map(|l| l.to_string()).collect()
}

/// The line of a build's stderr that says what failed: the first error
/// (`file:line:col: error: ...` from gcc and clang, `cc: error: ...`,
/// `NVC++-S-...` from nvc, GNU ld's `undefined reference to` before
/// collect2's summary of it; gfortran's `Error: ...` comes under the quoted
/// source, so its location line is put in front), else the last line
/// that is not part of a quoted source line. The last line of a compiler's
/// stderr is often only the caret under the quoted source.
pub fn first_error(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let is_error = |l: &str| {
        let lower = l.to_ascii_lowercase();
        !quoted_source(l)
            && (lower.contains("error:")
                || lower.contains("undefined reference to")
                || (l.starts_with("NV") && (l.contains("-S-") || l.contains("-F-"))))
    };
    if let Some(i) = lines.iter().position(|l| is_error(l)) {
        let l = lines[i].trim();
        if l.starts_with("Error:") {
            // gfortran: "file.f90:3:12:", a blank line, the quoted source.
            if let Some(at) = lines[..i].iter().rev().find(|x| location_line(x)) {
                return Some(format!("{} {l}", at.trim()));
            }
        }
        return Some(l.to_string());
    }
    lines
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty() && !quoted_source(l))
        .map(|l| l.trim().to_string())
}

/// A line of gcc's or gfortran's quote of the source: `   86 | text` or
/// the caret line under it, `      |    ^~~`.
fn quoted_source(l: &str) -> bool {
    match l.split_once('|') {
        Some((before, _)) => before
            .trim()
            .chars()
            .all(|c| c.is_ascii_digit() || c == '+'),
        None => false,
    }
}

/// gfortran's `file.f90:3:12:` on a line of its own.
fn location_line(l: &str) -> bool {
    let Some(rest) = l.trim().strip_suffix(':') else {
        return false;
    };
    let mut parts = rest.rsplitn(3, ':');
    let (col, line) = (parts.next(), parts.next());
    let is_number =
        |x: Option<&str>| x.is_some_and(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()));
    is_number(col) && is_number(line) && parts.next().is_some_and(|f| !f.is_empty())
}

/// ": LINE" for the last non-blank line, so that a one-line error names
/// what the command said last.
fn last_line(tail: &[String]) -> String {
    match tail.iter().rev().find(|l| !l.trim().is_empty()) {
        Some(l) => format!(": {}", l.trim()),
        None => String::new(),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_error_not_the_caret_under_it() {
        let gcc = b"t.c: In function 'main':\n\
            t.c:4:3: warning: unused variable 'k'\n\
            t.c:9:40: error: expected ')' before ';' token\n    \
            9 | #pragma acc parallel loop vector_length(64;\n      \
            |                                        ^\n\
            t.c:12:1: error: expected declaration\n";
        assert_eq!(
            first_error(gcc).as_deref(),
            Some("t.c:9:40: error: expected ')' before ';' token")
        );
        let gfortran = b"t.f90:3:12:\n\n    3 |   x = y +\n      |            1\n\
            Error: Syntax error in expression at (1)\n";
        assert_eq!(
            first_error(gfortran).as_deref(),
            Some("t.f90:3:12: Error: Syntax error in expression at (1)")
        );
        // A quoted source line that says "error:" is not the error.
        let quoted =
            b"t.c:2:5: warning: x\n    2 | puts(\"error: no\");\n      |     ^\nld returned 1\n";
        assert_eq!(first_error(quoted).as_deref(), Some("ld returned 1"));
        assert_eq!(
            first_error(b"NVC++-S-0035-Syntax error: Recovery attempted (t.c: 3)\n").as_deref(),
            Some("NVC++-S-0035-Syntax error: Recovery attempted (t.c: 3)")
        );
        // The linker's own words, not collect2's summary after them.
        let ld = b"/usr/bin/ld: /tmp/cc.o: in function `main':\n\
            t.c:(.text+0x7fa): undefined reference to `fmax'\n\
            collect2: error: ld returned 1 exit status\n";
        assert_eq!(
            first_error(ld).as_deref(),
            Some("t.c:(.text+0x7fa): undefined reference to `fmax'")
        );
        assert_eq!(first_error(b"\n  \n"), None);
    }

    #[test]
    fn a_build_error_is_one_line_with_the_first_error_and_the_log() {
        let e = Error::Build {
            label: "vector_length=64".into(),
            command: "gcc t.c".into(),
            code: 1,
            stderr_tail: vec!["      |   ^".into()],
            said: Some("t.c:9:40: error: expected ')'".into()),
            log: Some(Path::new("out/build-vector_length_64.log").into()),
        };
        assert_eq!(
            e.to_string(),
            "building the vector_length=64 version failed (exit code 1): `gcc t.c`: \
             t.c:9:40: error: expected ')'; full log: out/build-vector_length_64.log"
        );
    }
}
