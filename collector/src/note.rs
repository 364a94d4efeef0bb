//! The collector's own messages on stderr: one line each, prefixed, written
//! with a single raw write(2) (never through a `write` the process defines,
//! the library's own wrapper included: see `signals`) so they never
//! interleave with the program's output mid-line. Signal handlers write
//! theirs with `signals::write_note`, which allocates nothing and never
//! waits.

pub fn error(msg: &str) {
    write_line(msg);
}

/// A note the user can silence with ACCPROF_QUIET=1.
pub fn info(msg: &str) {
    if !crate::config::config().quiet {
        write_line(msg);
    }
}

fn write_line(msg: &str) {
    let line = format!("accprof: {msg}\n");
    // Outside handlers a line may wait for room on stderr, as the
    // program's own output would.
    crate::signals::write_stderr(line.as_bytes(), true);
}
