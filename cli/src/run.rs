//! `accprof run`: the program under the collector, then its summary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{bail, Context};

use crate::{HashArg, RunArgs};

/// Finds libaccprof.so: --lib, $ACCPROF_LIB, next to this binary, ../lib.
fn find_collector(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        if p.is_file() {
            return Ok(p.to_path_buf());
        }
        bail!("collector library {} not found", p.display());
    }
    if let Some(p) = std::env::var_os("ACCPROF_LIB") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        bail!("ACCPROF_LIB={} does not exist", p.display());
    }
    let exe = std::env::current_exe().context("cannot locate the accprof binary")?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    for cand in [
        dir.join("libaccprof.so"),
        dir.join("../lib/libaccprof.so"),
        dir.join("../lib/accprof/libaccprof.so"),
    ] {
        if cand.is_file() {
            return Ok(cand.canonicalize().unwrap_or(cand));
        }
    }
    bail!(
        "collector library libaccprof.so not found next to {} (build it with `cargo build -p accprof-collector`, or pass --lib)",
        exe.display()
    )
}

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; pid is our child.
        unsafe { libc::kill(pid, sig) };
    }
}

fn expand(pattern: &str, pid: u32) -> String {
    let host = hostname();
    let rank = [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
        "MV2_COMM_WORLD_RANK",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.trim().parse::<u32>().ok())
    .unwrap_or(0);
    pattern
        .replace("%%", "\u{0}")
        .replace("%p", &pid.to_string())
        .replace("%h", &host)
        .replace("%r", &rank.to_string())
        .replace('\u{0}', "%")
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

pub fn run(args: &RunArgs) -> anyhow::Result<u8> {
    let lib = find_collector(args.lib.as_deref())?;
    let program = &args.command[0];
    let mut cmd = collector_command(&args.command, &lib, &args.output, args.hash, args.no_cupti);
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!("cannot run {program}: program not found")
        } else {
            anyhow::anyhow!("cannot run {program}: {e}")
        }
    })?;
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    // SAFETY: installing a handler that only calls kill(2).
    unsafe {
        libc::signal(libc::SIGINT, forward as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, forward as *const () as libc::sighandler_t);
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for {program}"))?;
    let code = match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(&status),
    ) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        _ => 1,
    };
    let trace = PathBuf::from(expand(&args.output, child.id()));
    if !trace.exists() {
        eprintln!(
            "accprof: {program} left no trace at {} (it exec'd another program, or the collector could not load)",
            trace.display()
        );
        return Ok(code);
    }
    match accprof_analyzer::load_run(&trace) {
        Ok(run) => {
            if run.acc_events == 0
                && run.constructs.is_empty()
                && !run.header.sources.acc_prof.is_active()
            {
                eprintln!(
                    "accprof: {program} made no OpenACC calls: it is not an OpenACC program, or its runtime lacks the profiling interface (trace: {})",
                    trace.display()
                );
                return Ok(code);
            }
            if !args.no_summary {
                let summary = accprof_analyzer::summary::summarize(&run);
                let opts = accprof_reports::text::TextOptions {
                    extended: args.extended,
                    sort_by_time: false,
                };
                let text = accprof_reports::text::render(&run, &summary, &opts);
                use std::io::Write;
                let _ = std::io::stderr().write_all(&text);
            }
            eprintln!("accprof: trace written to {}", trace.display());
        }
        Err(e) => eprintln!("accprof: {e}"),
    }
    Ok(code)
}

/// `command` set up to run with the collector preloaded, writing its trace
/// to `output` (a pattern) with the given hashing; the collector prints no
/// summary of its own.
fn collector_command(
    command: &[String],
    lib: &Path,
    output: &str,
    hash: HashArg,
    no_cupti: bool,
) -> Command {
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", lib.display()),
        _ => lib.display().to_string(),
    };
    let hash = match hash {
        HashArg::Off => "off",
        HashArg::Sampled => "sampled",
        HashArg::Full => "full",
    };
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("LD_PRELOAD", preload)
        .env("ACCPROF_OUTPUT", output)
        .env("ACCPROF_HASH", hash)
        .env("ACCPROF_QUIET", "1")
        // The summary is printed from the trace, not by the collector.
        .env("ACCPROF_TIME", "0")
        .env_remove("PGI_ACC_TIME")
        .env_remove("NV_ACC_TIME");
    if no_cupti {
        cmd.env("ACCPROF_CUPTI", "0");
    }
    cmd
}

/// A program run under the collector with its output captured.
pub struct Collected {
    /// Where the trace was asked to go (it may be missing).
    pub trace: PathBuf,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Exit code, or 128 + signal.
    pub code: u8,
    /// Wall time of the process, measured here.
    pub wall_ns: u64,
}

/// Runs `command` under the collector (found as for `accprof run`),
/// writing its trace to `trace` (a plain path: no % patterns), and
/// captures stdout and stderr.
pub fn run_collected(
    command: &[String],
    lib: Option<&Path>,
    trace: &Path,
    hash: HashArg,
) -> anyhow::Result<Collected> {
    let Some(program) = command.first() else {
        bail!("empty command");
    };
    let lib = find_collector(lib)?;
    let output = trace.display().to_string().replace('%', "%%");
    let mut cmd = collector_command(command, &lib, &output, hash, false);
    let start = std::time::Instant::now();
    let out = cmd.output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!("cannot run {program}: program not found")
        } else {
            anyhow::anyhow!("cannot run {program}: {e}")
        }
    })?;
    let wall_ns = start.elapsed().as_nanos() as u64;
    let code = match (
        out.status.code(),
        std::os::unix::process::ExitStatusExt::signal(&out.status),
    ) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        _ => 1,
    };
    Ok(Collected {
        trace: trace.to_path_buf(),
        stdout: out.stdout,
        stderr: out.stderr,
        code,
        wall_ns,
    })
}
