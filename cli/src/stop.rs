//! The signals that stop the commands that patch or build the user's
//! sources (`tune`, `analyze --verify`): SIGINT, SIGTERM, SIGHUP (a closed
//! terminal or SSH session) and SIGQUIT set [`STOP`] instead of killing
//! the process, so that what it wrote beside the sources is restored or
//! removed before it exits, with 128 + the signal as its exit code.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Set by a stopping signal once [`catch`] was called.
pub static STOP: AtomicBool = AtomicBool::new(false);
/// The signal that set [`STOP`] (the first one).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only atomic operations: async-signal-safe.
    let _ = SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// From now on the stopping signals set [`STOP`]. (A closed terminal
/// sends SIGHUP to the build or the program as well: it ends, and the
/// command stops after it.)
pub fn catch() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: a zeroed sigaction with a handler that only does atomic
        // operations is valid; sigaction only reads the struct we pass.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// 128 + the signal that stopped the command, as a shell reports a
/// process that a signal ended.
pub fn exit_code() -> u8 {
    128 + SIGNAL.load(Ordering::SeqCst).clamp(1, 127) as u8
}

/// One line on stderr. After SIGHUP the terminal may be gone: a line
/// that cannot be written is dropped rather than ending the process
/// before it has said its exit code.
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "accprof: {line}");
}
