//! The process header: who ran, where, with which runtime and sources.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use accprof_trace::{Clock, Header, SourceState, Sources};

/// Start instant, taken in the constructor (monotonic and wall clock).
pub static START_CLOCK_NS: AtomicU64 = AtomicU64::new(0);
pub static START_UNIX_NS: AtomicU64 = AtomicU64::new(0);

/// How acc_prof and CUPTI ended up; set by registration and CUPTI start.
pub static ACC_PROF: Mutex<Option<SourceState>> = Mutex::new(None);
pub static CUPTI: Mutex<Option<SourceState>> = Mutex::new(None);
pub static RUNTIME: Mutex<Option<String>> = Mutex::new(None);

pub fn mark_start() {
    START_CLOCK_NS.store(crate::clock::now_ns(), Ordering::Relaxed);
    START_UNIX_NS.store(crate::clock::unix_ns(), Ordering::Relaxed);
}

pub fn set(slot: &Mutex<Option<SourceState>>, state: SourceState) {
    if let Ok(mut s) = slot.lock() {
        *s = Some(state);
    }
}

fn get(slot: &Mutex<Option<SourceState>>, missing: &str) -> SourceState {
    slot.try_lock()
        .ok()
        .and_then(|s| s.clone())
        .unwrap_or_else(|| SourceState::Inactive(missing.to_string()))
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

pub fn build() -> Header {
    let cfg = crate::config::config();
    let command_line = std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    Header {
        host: hostname(),
        pid: std::process::id(),
        rank: crate::config::mpi_rank(),
        command_line,
        executable: std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        start_unix_ns: START_UNIX_NS.load(Ordering::Relaxed),
        start_clock_ns: START_CLOCK_NS.load(Ordering::Relaxed),
        clock: Clock::Monotonic,
        runtime: RUNTIME
            .try_lock()
            .ok()
            .and_then(|r| r.clone())
            .unwrap_or_else(|| "unknown".into()),
        collector: concat!("accprof ", env!("CARGO_PKG_VERSION")).into(),
        sources: Sources {
            acc_prof: get(
                &ACC_PROF,
                "no OpenACC runtime registered the collector (not an OpenACC program?)",
            ),
            cupti: get(&CUPTI, "CUPTI was not started"),
            hashing: cfg.hash,
            coherence: cfg.coherence,
        },
        process_start_ns: process_start_ns(),
    }
}

/// When this process started, on the trace clock (CLOCK_MONOTONIC): the
/// kernel's start time in /proc/self/stat, clock ticks since boot on
/// CLOCK_BOOTTIME, moved by the two clocks' difference read now. `None`
/// when /proc or the clocks cannot tell, or when the start falls before the
/// trace clock's zero (a suspend since the start moves the two clocks
/// apart by its length, and the difference is only known now).
fn process_start_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
    let before = crate::clock::now_ns();
    let boot = boot_ns()?;
    let after = crate::clock::now_ns();
    let clock = before + after.saturating_sub(before) / 2;
    process_start_on(&stat, ticks_per_s, boot, clock)
}

/// CLOCK_BOOTTIME in ns.
fn boot_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    if rc != 0 {
        return None;
    }
    Some(u64::try_from(ts.tv_sec).ok()? * 1_000_000_000 + u64::try_from(ts.tv_nsec).ok()?)
}

/// The start time in a /proc/PID/stat line (field 22, clock ticks since
/// boot) on the trace clock, given the boot clock and the trace clock read
/// at the same instant.
fn process_start_on(stat: &str, ticks_per_s: u64, boot_ns: u64, clock_ns: u64) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces and
    // parentheses itself: the fields after it follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name; field 22 is 19 later.
    let ticks: u64 = rest.split_ascii_whitespace().nth(19)?.parse().ok()?;
    if ticks_per_s == 0 {
        return None;
    }
    let start_boot_ns =
        u64::try_from(u128::from(ticks) * 1_000_000_000 / u128::from(ticks_per_s)).ok()?;
    let ago = boot_ns.checked_sub(start_boot_ns)?;
    clock_ns.checked_sub(ago)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_field_22() {
        // A command name with a space and a parenthesis; starttime 4321
        // ticks at 100 per second: 43.21 s after boot.
        let stat = "77 (a) b) S 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 4321 1000 50";
        let boot = 50_000_000_000;
        // Boot clock 50 s, trace clock 40 s: the start was 6.79 s ago.
        assert_eq!(
            process_start_on(stat, 100, boot, 40_000_000_000),
            Some(33_210_000_000)
        );
        // Before the trace clock's zero, a missing field, no tick rate.
        assert_eq!(process_start_on(stat, 100, boot, 1_000_000_000), None);
        assert_eq!(process_start_on("77 (a) S 1 2 3", 100, boot, boot), None);
        assert_eq!(process_start_on(stat, 0, boot, boot), None);
        assert_eq!(process_start_on("no name", 100, boot, boot), None);
    }

    #[test]
    fn this_process_started_after_boot_and_before_now() {
        let start = process_start_ns().expect("a start time on Linux");
        let now = crate::clock::now_ns();
        let boot = boot_ns().expect("CLOCK_BOOTTIME");
        // Boot on the trace clock (CLOCK_MONOTONIC stops during suspend,
        // CLOCK_BOOTTIME does not: boot is at or before its zero).
        let booted_at = now.saturating_sub(boot);
        assert!(start >= booted_at, "{start} < {booted_at}");
        assert!(start <= now, "{start} > {now}");
        let collector_start = START_CLOCK_NS.load(Ordering::Relaxed);
        if collector_start != 0 {
            // To the clock tick the kernel counts in.
            assert!(start <= collector_start, "{start} > {collector_start}");
        }
        // A test binary starts well within a minute of its tests.
        assert!(
            now - start < 60_000_000_000,
            "started {} ns ago",
            now - start
        );
    }
}
