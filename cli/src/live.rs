//! Whether the program of a trace without an end is still running: a
//! trace read while its program runs ends where reading stopped, and must
//! not read as a program that died there.
//!
//! Two signs, both read from /proc: a process holds the trace open for
//! writing, or the trace's process is alive on this host (its pid taken by
//! a process that started before the trace did, so not a later one that
//! reuses the number).

use std::path::Path;

use accprof_analyzer::summary::RunFacts;

/// Marks the runs of a trace whose process still runs.
pub fn mark(path: &Path, runs: &mut [RunFacts]) {
    if runs.iter().all(|r| r.ending.is_some()) {
        return;
    }
    let open = open_for_writing(path);
    for r in runs.iter_mut().filter(|r| r.ending.is_none()) {
        r.running = open || alive_here(r);
    }
}

/// A process has the file open for writing (its fd links to the file and
/// its flags are not read-only).
fn open_for_writing(path: &Path) -> bool {
    let Ok(target) = path.canonicalize() else {
        return false;
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    for p in procs.flatten() {
        let pid = p.file_name();
        if !pid.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l == target) {
                let info = p.path().join("fdinfo").join(fd.file_name());
                if writable(&std::fs::read_to_string(info).unwrap_or_default()) {
                    return true;
                }
            }
        }
    }
    false
}

/// The open flags of an fdinfo text allow writing.
fn writable(fdinfo: &str) -> bool {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| i32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| flags & libc::O_ACCMODE != libc::O_RDONLY)
}

/// The trace's process is alive on this host: same host name, and a
/// process of that pid that started no later than the trace.
fn alive_here(r: &RunFacts) -> bool {
    if r.host != crate::run::hostname() {
        return false;
    }
    let Some(started) = start_unix_s(r.pid) else {
        return false;
    };
    // Start times in /proc are in clock ticks: a second of slack.
    started <= r.start_unix_ns / 1_000_000_000 + 1
}

/// When process `pid` started, in seconds since the Unix epoch.
fn start_unix_s(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the
    // last ')'; starttime is field 22, the 20th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let boot: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf only reads a system setting.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    Some(boot + ticks / hz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_flags_say_whether_a_file_is_open_for_writing() {
        assert!(writable("pos:\t0\nflags:\t0100001\nmnt_id:\t25\n"));
        assert!(writable("flags:\t02\n"));
        assert!(!writable("pos:\t0\nflags:\t0100000\n"));
        assert!(!writable(""));
    }

    #[test]
    fn this_process_started_before_now() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs();
        let started = start_unix_s(std::process::id()).expect("own start time");
        assert!(started <= now && started + 3600 > now, "{started} vs {now}");
    }
}
