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
///
/// SIGPIPE is blocked around the write: when stderr is a pipe whose reader
/// is gone (`prog 2>&1 | head -1`), a line of ours must not kill a program
/// that would have exited normally. A SIGPIPE our write raised is taken
/// back before the mask is restored; one already pending is left alone.
pub fn write_raw(bytes: &[u8]) {
    // SAFETY: signal sets we own, initialised by sigemptyset/sigpending
    // before use; writing a valid buffer to fd 2 (errors are ignored on
    // purpose: nothing sensible to do if stderr is closed); sigtimedwait
    // with a zero timeout only takes a pending SIGPIPE of this thread.
    unsafe {
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        let blocked = libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old) == 0;
        let mut pending: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pending);
        libc::sigpending(&mut pending);
        let was_pending = libc::sigismember(&pending, libc::SIGPIPE) == 1;
        let n = libc::write(2, bytes.as_ptr().cast(), bytes.len());
        if blocked {
            if n < 0 && *libc::__errno_location() == libc::EPIPE && !was_pending {
                let now = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                libc::sigtimedwait(&pipe, std::ptr::null_mut(), &now);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
    }
}
