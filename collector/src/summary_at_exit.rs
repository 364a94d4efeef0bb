//! The summary at program exit without `accprof run`: with ACCPROF_TIME=1
//! (or PGI_ACC_TIME=1 / NV_ACC_TIME=1) the preloaded library alone prints
//! the PGI_ACC_TIME-style summary on the program's stderr.
//!
//! The collector must not link the analyzer, so after the final flush it
//! runs `accprof report --at-exit TRACE` with its stdout on the program's
//! stderr, and waits for it a bounded time (then kills it). The binary is
//! `$ACCPROF_BIN`, else `accprof` next to libaccprof.so (or in ../bin);
//! without one the summary is skipped with one note. Nothing here changes
//! the program's exit code, and nothing blocks longer than [`WAIT`].

use std::ffi::{c_char, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the program's exit waits for the summary.
const WAIT: Duration = Duration::from_secs(10);

/// Environment variables the report process must not inherit: it must not
/// load the collector, nor ask for a summary of itself.
const DROP_ENV: [&str; 5] = [
    "LD_PRELOAD",
    "ACC_PROFLIB",
    "ACCPROF_TIME",
    "PGI_ACC_TIME",
    "NV_ACC_TIME",
];

/// Prints the summary of `trace_path` on stderr when the user asked for it
/// (ACCPROF_TIME / PGI_ACC_TIME / NV_ACC_TIME). Call once, after the
/// trace file is complete.
pub(crate) fn print_summary(trace_path: &str) {
    if !crate::config::config().summary {
        return;
    }
    let bin = match find_accprof() {
        Ok(bin) => bin,
        Err(why) => {
            crate::note::error(&format!(
                "no summary at exit: {why}; the trace is {trace_path}"
            ));
            return;
        }
    };
    if let Err(why) = run_report(&bin, trace_path) {
        crate::note::error(&format!(
            "no summary at exit: {why}; the trace is {trace_path}"
        ));
    }
}

/// `$ACCPROF_BIN`, else `accprof` beside this library or in ../bin.
fn find_accprof() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ACCPROF_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("ACCPROF_BIN={} does not exist", p.display()))
        };
    }
    let lib = this_library().ok_or("cannot tell where libaccprof.so is (set ACCPROF_BIN)")?;
    let dir = lib.parent().unwrap_or(Path::new("."));
    [dir.join("accprof"), dir.join("../bin/accprof")]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "the accprof binary is not next to {} (set ACCPROF_BIN to it)",
                lib.display()
            )
        })
}

/// The file this code was loaded from (libaccprof.so), from dladdr.
fn this_library() -> Option<PathBuf> {
    let addr = print_summary as *const () as *const libc::c_void;
    let path = PathBuf::from(crate::callsite::object_of(addr)?);
    Some(std::fs::canonicalize(&path).unwrap_or(path))
}

fn cstring(bytes: &[u8]) -> Result<CString, String> {
    CString::new(bytes).map_err(|_| "a path or variable holds a NUL byte".to_string())
}

/// Runs `bin report --at-exit trace` with stdout on our stderr and stdin
/// on /dev/null; waits at most [`WAIT`], then kills it.
fn run_report(bin: &Path, trace: &str) -> Result<(), String> {
    let path = cstring(bin.as_os_str().as_bytes())?;
    let args = [
        path.clone(),
        cstring(b"report")?,
        cstring(b"--at-exit")?,
        cstring(trace.as_bytes())?,
    ];
    let env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| !DROP_ENV.iter().any(|d| k.as_bytes() == d.as_bytes()))
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr() as *mut c_char).collect();
    argv.push(std::ptr::null_mut());
    let mut envp: Vec<*mut c_char> = env.iter().map(|e| e.as_ptr() as *mut c_char).collect();
    envp.push(std::ptr::null_mut());
    let dev_null = cstring(b"/dev/null")?;

    let pid = spawn(&path, &argv, &envp, &dev_null)?;
    wait_bounded(pid);
    Ok(())
}

/// posix_spawn with stdout = our stderr, stdin = /dev/null, an empty signal
/// mask and default signal actions (the program may block or ignore some).
fn spawn(
    path: &CString,
    argv: &[*mut c_char],
    envp: &[*mut c_char],
    dev_null: &CString,
) -> Result<libc::pid_t, String> {
    // SAFETY: the file actions and attributes are initialized before use and
    // destroyed after; argv and envp are NULL-terminated arrays of pointers
    // to NUL-terminated strings that outlive the call (the caller owns the
    // CStrings); pid is a local out-parameter.
    unsafe {
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        if libc::posix_spawn_file_actions_init(&mut actions) != 0 {
            return Err("posix_spawn_file_actions_init failed".into());
        }
        if libc::posix_spawnattr_init(&mut attr) != 0 {
            libc::posix_spawn_file_actions_destroy(&mut actions);
            return Err("posix_spawnattr_init failed".into());
        }
        let mut ok = libc::posix_spawn_file_actions_adddup2(&mut actions, 2, 1) == 0
            && libc::posix_spawn_file_actions_addopen(
                &mut actions,
                0,
                dev_null.as_ptr(),
                libc::O_RDONLY,
                0,
            ) == 0;
        let mut empty: libc::sigset_t = std::mem::zeroed();
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigfillset(&mut all);
        ok = ok
            && libc::posix_spawnattr_setsigmask(&mut attr, &empty) == 0
            && libc::posix_spawnattr_setsigdefault(&mut attr, &all) == 0
            && libc::posix_spawnattr_setflags(
                &mut attr,
                (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as libc::c_short,
            ) == 0;
        let mut pid: libc::pid_t = 0;
        let rc = if ok {
            libc::posix_spawn(
                &mut pid,
                path.as_ptr(),
                &actions,
                &attr,
                argv.as_ptr(),
                envp.as_ptr(),
            )
        } else {
            -1
        };
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        match rc {
            0 => Ok(pid),
            -1 => Err("cannot set up posix_spawn".into()),
            e => Err(format!(
                "cannot run {}: {}",
                path.to_string_lossy(),
                std::io::Error::from_raw_os_error(e)
            )),
        }
    }
}

/// Waits for `pid` at most [`WAIT`], then kills it (and reaps it, briefly).
/// A child reaped by someone else (the program's SIGCHLD handler, or
/// SIGCHLD ignored) counts as done.
fn wait_bounded(pid: libc::pid_t) {
    let start = Instant::now();
    let mut killed = false;
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child with a local status word.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return;
        }
        if r < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                // ECHILD: already reaped elsewhere.
                _ => return,
            }
        }
        let waited = start.elapsed();
        if !killed && waited >= WAIT {
            // SAFETY: signalling our own child, still unreaped (r == 0).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
            crate::note::error(&format!(
                "the summary took longer than {} s and was stopped",
                WAIT.as_secs()
            ));
        }
        if killed && waited >= WAIT + Duration::from_secs(1) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_a_child_with_stdout_on_stderr_and_waits() {
        let sh = CString::new("/bin/sh").expect("no NUL");
        let args = [
            sh.clone(),
            CString::new("-c").expect("no NUL"),
            CString::new("exit 3").expect("no NUL"),
        ];
        let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr() as *mut c_char).collect();
        argv.push(std::ptr::null_mut());
        let envp = [std::ptr::null_mut()];
        let dev_null = CString::new("/dev/null").expect("no NUL");
        let pid = spawn(&sh, &argv, &envp, &dev_null).expect("spawns");
        let t = Instant::now();
        wait_bounded(pid);
        assert!(t.elapsed() < WAIT);
        // Reaped: a second wait finds no such child.
        let mut st = 0;
        // SAFETY: waitpid with a local status word.
        assert_eq!(unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) }, -1);
    }

    #[test]
    fn a_missing_binary_is_an_error_not_a_hang() {
        let bin = Path::new("/nonexistent/accprof");
        assert!(run_report(bin, "/tmp/x.trace").is_err());
    }
}
