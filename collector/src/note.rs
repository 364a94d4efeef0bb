//! The collector's own messages on stderr: one line each, prefixed, written
//! with a single write(2) so they never interleave with the program's output
//! mid-line and never allocate in signal context (callers there use
//! `write_raw`).

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
    write_raw(line.as_bytes());
}

/// Writes bytes to stderr with one write(2); async-signal-safe.
pub fn write_raw(bytes: &[u8]) {
    // SAFETY: writing a valid buffer to fd 2; errors are ignored on purpose
    // (nothing sensible to do if stderr is closed).
    unsafe {
        libc::write(2, bytes.as_ptr().cast(), bytes.len());
    }
}
