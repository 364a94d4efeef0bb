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
        },
    }
}
