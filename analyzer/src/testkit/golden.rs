//! Golden files: a test's whole output compared with a file kept beside the
//! tests, rewritten instead when `ACCPROF_BLESS=1` (addr2line's
//! `ADDR2LINE_TESTOUTPUT_UPDATE`).

use std::path::Path;

/// The environment variable that rewrites golden files instead of checking them.
pub const BLESS_ENV: &str = "ACCPROF_BLESS";

/// Checks `got` against the golden file at `path`; with `ACCPROF_BLESS=1`
/// writes it there instead. `bless` is the command that rewrites it (the
/// failure says it): `cargo test -p CRATE --test NAME`.
pub fn check(path: &Path, got: &str, bless: &str) {
    if std::env::var_os(BLESS_ENV).is_some_and(|v| v == "1") {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("mkdir golden");
        }
        std::fs::write(path, got).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (create it with {BLESS_ENV}=1 {bless})",
            path.display()
        )
    });
    if want != got {
        let first = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        panic!(
            "{} differs from the output at line {}:\n want: {:?}\n  got: {:?}\n\
             full output:\n{got}\n(if the change is intended: {BLESS_ENV}=1 {bless})",
            path.display(),
            first + 1,
            want.lines().nth(first),
            got.lines().nth(first)
        );
    }
}
