//! `accprof run`: the program under the collector, then its summary.
//!
//! Everything that can be checked before the program starts is checked
//! first (the collector library, the trace's directory, an old trace of the
//! same name), so a mistake costs one line and exit code 2, never an
//! unprofiled run. Afterwards the collectors' manifest says which traces the
//! program's process tree wrote, under their real names.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

use accprof_trace::contract::{self, env};
use accprof_trace::HashMode;
use accprof_tuner::launch::{self, without_path, Launch, Manifest};
use anyhow::{anyhow, bail, Context};

#[derive(clap::Args)]
pub struct RunArgs {
    /// Trace file name pattern: %p pid, %h host, %r MPI rank, %n first free
    /// number, %% a percent sign; relative to the current directory
    /// [default: $ACCPROF_OUTPUT, else accprof-%p.trace].
    #[arg(long, short, value_name = "PATTERN")]
    pub output: Option<std::ffi::OsString>,
    /// Replace an existing trace of the same name (a pattern without %p or
    /// %n names the same file each run; without --force it is kept and the
    /// program is not started).
    #[arg(long)]
    pub force: bool,
    /// Content hashing of transferred host buffers [default: $ACCPROF_HASH,
    /// else sampled].
    #[arg(long, value_enum)]
    pub hash: Option<HashArg>,
    /// Correctness checks, comma-separated: `coherence` catches the host
    /// reading an array whose device copy is newer (a missing `update
    /// self`); `accprof analyze` reports each with the patch that fixes it
    /// [default: $ACCPROF_CHECK, else none].
    #[arg(long, value_name = "CHECKS")]
    pub check: Option<String>,
    /// Do not record device activity with CUPTI (also ACCPROF_CUPTI=0).
    #[arg(long)]
    pub no_cupti: bool,
    /// Do not print the summary at exit.
    #[arg(long)]
    pub no_summary: bool,
    /// Print the extended summary at exit.
    #[arg(long)]
    pub extended: bool,
    /// Open the interactive timeline of the run's traces when the program
    /// ends (needs a terminal).
    #[arg(long)]
    pub tui: bool,
    /// The collector library [default: $ACCPROF_LIB, else libaccprof.so next
    /// to this binary, else the copy built into it].
    #[arg(long, value_name = "FILE")]
    pub lib: Option<PathBuf>,
    /// The program and its arguments (any bytes: names and arguments need
    /// not be UTF-8).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_parser = clap::value_parser!(std::ffi::OsString)
    )]
    pub command: Vec<std::ffi::OsString>,
}

/// Content hashing of transferred host buffers, as `--hash` names it.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum HashArg {
    Off,
    Sampled,
    Full,
}

impl HashArg {
    pub fn mode(self) -> HashMode {
        match self {
            HashArg::Off => HashMode::Off,
            HashArg::Sampled => HashMode::Sampled,
            HashArg::Full => HashMode::Full,
        }
    }
}

/// Finds libaccprof.so: --lib, $ACCPROF_LIB, next to this binary (or in
/// ../lib, ../lib/accprof), then the copy built into this binary.
pub fn find_collector(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        check_library(p, "--lib")?;
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("ACCPROF_LIB").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        check_library(&p, "ACCPROF_LIB")?;
        return Ok(p);
    }
    let exe = std::env::current_exe().context("cannot locate the accprof binary")?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    for cand in [
        dir.join("libaccprof.so"),
        dir.join("../lib/libaccprof.so"),
        dir.join("../lib/accprof/libaccprof.so"),
    ] {
        if cand.is_file() {
            let cand = cand.canonicalize().unwrap_or(cand);
            check_library(&cand, "the collector library")?;
            return Ok(cand);
        }
    }
    if let Some(lib) = crate::embedded::collector()? {
        return Ok(lib);
    }
    bail!(
        "collector library libaccprof.so not found next to {} (build it with `cargo build -p accprof-collector`, or pass --lib)",
        exe.display()
    )
}

/// An ELF shared object, by its header: what the dynamic loader needs
/// before `LD_PRELOAD` can take it. The program would otherwise run
/// unprofiled, with only the loader's warning.
fn check_library(path: &Path, what: &str) -> anyhow::Result<()> {
    use std::io::Read;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow!("{what} {shown} not found"),
        _ => anyhow!("{what} {shown}: {e}"),
    })?;
    if meta.is_dir() {
        bail!("{what} {shown} is a directory, not the collector library");
    }
    let mut head = [0u8; 18];
    let n = std::fs::File::open(path)
        .and_then(|mut f| {
            let mut n = 0;
            while n < head.len() {
                match f.read(&mut head[n..])? {
                    0 => break,
                    k => n += k,
                }
            }
            Ok(n)
        })
        .map_err(|e| anyhow!("{what} {shown}: {e}"))?;
    if n < head.len() || head[..4] != *b"\x7fELF" {
        bail!("{what} {shown} is not a shared library (no ELF header)");
    }
    let e_type = match head[5] {
        2 => u16::from_be_bytes([head[16], head[17]]),
        _ => u16::from_le_bytes([head[16], head[17]]),
    };
    const ET_DYN: u16 = 3;
    if e_type != ET_DYN {
        bail!("{what} {shown} is not a shared library (ELF type {e_type}, not a shared object)");
    }
    Ok(())
}

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; pid is our child.
        unsafe { libc::kill(pid, sig) };
    }
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The settings of one run: flags first, then the collector's own
/// environment variables, then the defaults.
struct Settings {
    /// Its bytes, whatever they are: a file name need not be UTF-8.
    output: OsString,
    /// Where `output` came from, for messages.
    output_from: &'static str,
    hash: HashMode,
    cupti: bool,
    checks: contract::Checks,
}

fn settings(args: &RunArgs) -> anyhow::Result<Settings> {
    let (output, output_from) = match &args.output {
        Some(o) => (o.clone(), "--output"),
        None => match std::env::var_os(env::OUTPUT) {
            Some(v) if !v.is_empty() => (v, env::OUTPUT),
            _ => (contract::DEFAULT_OUTPUT.into(), "the output pattern"),
        },
    };
    let hash = match args.hash {
        Some(h) => h.mode(),
        None => {
            let v = std::env::var(env::HASH).unwrap_or_default();
            contract::parse_hash(&v)
                .ok_or_else(|| anyhow!("{}={v} is not one of off, sampled, full", env::HASH))?
        }
    };
    let cupti = !args.no_cupti && !std::env::var(env::CUPTI).is_ok_and(|v| contract::cupti_off(&v));
    let (check_text, check_from) = match &args.check {
        Some(c) => (c.clone(), format!("--check {c}")),
        None => {
            let v = std::env::var(env::CHECK).unwrap_or_default();
            (v.clone(), format!("{}={v}", env::CHECK))
        }
    };
    let checks = contract::parse_checks(&check_text).map_err(|bad| {
        anyhow!(
            "{check_from}: {bad} is not a check (known: {})",
            contract::CHECK_NAMES.join(", ")
        )
    })?;
    Ok(Settings {
        output,
        output_from,
        hash,
        cupti,
        checks,
    })
}

/// Checks that the trace can be created where the pattern says, and that
/// it replaces nothing unless `force` (then the old trace is removed).
/// A per-process pattern (`%p`, `%n`) names a new file for each run: the
/// collector never replaces a file, so there is nothing to check.
fn check_output(s: &Settings, base: &Path, force: bool) -> anyhow::Result<()> {
    let from = s.output_from;
    let pattern_os = s.output.as_os_str();
    let pattern = &*pattern_os.to_string_lossy();
    if pattern.is_empty() {
        bail!("{from} is empty: give a trace file name such as accprof-%p.trace");
    }
    let name = contract::expand_output(
        pattern_os,
        std::process::id(),
        &hostname(),
        contract::rank_from_env(),
        |p| base.join(p).exists(),
    );
    let path = base.join(&name);
    too_long(&path, pattern, from)?;
    if name.as_bytes().ends_with(b"/") || path.is_dir() {
        bail!(
            "{from} {pattern} names a directory; give a file name such as {}/accprof-%p.trace",
            name.to_string_lossy().trim_end_matches('/')
        );
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => base.to_path_buf(),
    };
    match std::fs::metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "{from} {pattern}: directory {} does not exist",
                dir.display()
            )
        }
        Err(e) => bail!("{from} {pattern}: directory {}: {e}", dir.display()),
        Ok(m) if !m.is_dir() => {
            bail!("{from} {pattern}: {} is not a directory", dir.display())
        }
        Ok(_) => {}
    }
    // Permissions, read-only mounts, pseudo file systems: only trying tells.
    tempfile::Builder::new()
        .prefix(".accprof-probe-")
        .tempfile_in(&dir)
        .map_err(|e| {
            anyhow!(
                "{from} {pattern}: cannot create files in {}: {}",
                dir.display(),
                without_path(e)
            )
        })?;
    if contract::pattern_is_per_process(pattern_os) {
        return Ok(());
    }
    if std::fs::symlink_metadata(&path).is_ok() {
        if !force {
            bail!(
                "trace {} exists: pass --force to replace it, or name a new one (%p in {from} gives each run its own)",
                shown(&path)
            );
        }
        std::fs::remove_file(&path)
            .with_context(|| format!("cannot remove the old trace {}", path.display()))?;
    }
    Ok(())
}

/// A trace name the system cannot create: a component longer than the
/// file system's NAME_MAX, or a whole path longer than PATH_MAX (the
/// collector opens it as given, relative to the program's directory). A
/// per-process pattern may grow when expanded (a pid, a number): the name
/// checked is the one the pattern gives now.
fn too_long(path: &Path, pattern: &str, from: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name_max = path_conf(dir, libc::_PC_NAME_MAX).unwrap_or(255);
    let path_max = path_conf(dir, libc::_PC_PATH_MAX).unwrap_or(4096);
    if let Some(c) = path
        .components()
        .map(|c| c.as_os_str())
        .find(|c| c.len() > name_max)
    {
        bail!(
            "{from} {pattern}: the name {}... is {} bytes long, more than the {name_max} the file system allows",
            String::from_utf8_lossy(&c.as_bytes()[..24]),
            c.len()
        );
    }
    // The terminating NUL counts in PATH_MAX.
    let len = path.as_os_str().len();
    if len >= path_max {
        bail!(
            "{from} {pattern}: the trace's path is {len} bytes long, more than the {} the system allows",
            path_max - 1
        );
    }
    Ok(())
}

/// pathconf(dir, what), when the system says.
fn path_conf(dir: &Path, what: libc::c_int) -> Option<usize> {
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: a NUL-terminated path we own.
    let v = unsafe { libc::pathconf(c.as_ptr(), what) };
    usize::try_from(v).ok().filter(|&v| v > 0)
}

/// What a quick look at a trace found: reading stops at the first
/// OpenACC record, so a large trace costs its header and first block.
enum Look {
    OpenAcc,
    NoOpenAcc,
    Missing,
    Unreadable(String),
}

impl Look {
    fn describe(&self) -> String {
        match self {
            Look::OpenAcc => "OpenACC".to_string(),
            Look::NoOpenAcc => "no OpenACC calls".to_string(),
            Look::Missing => "removed before the run ended".to_string(),
            Look::Unreadable(e) => format!("unreadable: {e}"),
        }
    }
}

fn look(path: &Path) -> Look {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Look::Missing,
        Err(e) => return Look::Unreadable(e.to_string()),
    };
    let mut reader = match accprof_trace::Reader::new(file) {
        Ok(r) => r,
        Err(e) => return Look::Unreadable(e.to_string()),
    };
    while let Some(r) = reader.next_record() {
        if matches!(
            r,
            accprof_trace::Record::Acc(_) | accprof_trace::Record::Api(_)
        ) {
            return Look::OpenAcc;
        }
    }
    Look::NoOpenAcc
}

/// A path as the user would type it: relative when under the current
/// directory.
fn shown(path: &Path) -> String {
    if let Ok(cwd) = std::env::current_dir() {
        if let Ok(rel) = path.strip_prefix(&cwd) {
            return rel.display().to_string();
        }
    }
    path.display().to_string()
}

pub fn run(args: &RunArgs) -> anyhow::Result<u8> {
    if args.tui {
        // Said before the program runs, not after.
        accprof_tui::check_terminal()?;
    }
    let s = settings(args)?;
    let lib = find_collector(args.lib.as_deref())?;
    let base = std::env::current_dir().context("cannot read the current directory")?;
    check_output(&s, &base, args.force)?;
    let manifest = Manifest::new()?;
    let program = args.command[0].to_string_lossy();
    check_program(Path::new(&args.command[0]))?;
    let launch = Launch {
        lib: &lib,
        output: &s.output,
        hash: s.hash,
        cupti: s.cupti,
        checks: s.checks,
        base: &base,
        manifest: manifest.path(),
    };
    let spawn = |command: &[OsString]| {
        let mut cmd = launch::collector_command(command, &launch);
        die_with_launcher(&mut cmd);
        cmd.spawn()
    };
    let mut child = match spawn(&args.command) {
        Err(e) if is_script(Path::new(&args.command[0]), &e) => {
            let mut with_shell = vec![OsString::from("/bin/sh")];
            with_shell.extend_from_slice(&args.command);
            spawn(&with_shell)
        }
        spawned => spawned,
    }
    .map_err(|e| launch::spawn_error(&program, e))?;
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    // SAFETY: installing a handler that only calls kill(2).
    unsafe {
        libc::signal(libc::SIGINT, forward as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, forward as *const () as libc::sighandler_t);
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for {program}"))?;
    let code = launch::exit_code(&status);
    let with_openacc = report_traces(&program, &status, &manifest.entries(), args);
    if args.tui && !with_openacc.is_empty() {
        crate::tui::open(&with_openacc, &[], &[])?;
    }
    Ok(code)
}

/// Refuses a directory as the program: the kernel would only say
/// "Permission denied".
fn check_program(program: &Path) -> anyhow::Result<()> {
    if program.as_os_str().as_bytes().contains(&b'/') && program.is_dir() {
        bail!("{} is a directory, not a program", program.display());
    }
    Ok(())
}

/// A file the kernel refused to execute (ENOEXEC) that is no binary: a
/// script without a `#!` line, which `execvp` and shells hand to
/// `/bin/sh`, as this does.
fn is_script(program: &Path, e: &std::io::Error) -> bool {
    use std::io::Read;
    if e.raw_os_error() != Some(libc::ENOEXEC) {
        return false;
    }
    let mut head = [0u8; 4];
    let n = std::fs::File::open(program)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    head[..n] != *b"\x7fELF"
}

/// The program is sent SIGTERM when the launcher dies, whatever kills it
/// (SIGKILL included): a profiled program must not run on unwatched, its
/// summary never printed.
fn die_with_launcher(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid is async-signal-safe.
    let launcher = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec and calls
    // only async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The launcher died before the request took hold.
            if libc::getppid() != launcher {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Says what the run left: the summary of each trace with OpenACC events
/// (unless --no-summary) and the name of every trace; gives back the
/// traces with OpenACC events.
fn report_traces(
    program: &str,
    status: &std::process::ExitStatus,
    traces: &[(u32, PathBuf)],
    args: &RunArgs,
) -> Vec<PathBuf> {
    if traces.is_empty() {
        let disabled = std::env::var(env::DISABLE)
            .ok()
            .filter(|v| contract::is_on(v));
        let why = match std::os::unix::process::ExitStatusExt::signal(status) {
            _ if disabled.is_some() => format!(
                "the collector was disabled by {}={} (unset it to record)",
                env::DISABLE,
                disabled.unwrap_or_default()
            ),
            Some(9) => "it was killed (SIGKILL) before a trace could be written".to_string(),
            _ => "it made no OpenACC calls that the collector saw (not an OpenACC program, a statically linked or setuid one, or one that clears LD_PRELOAD)".to_string(),
        };
        eprintln!("accprof: {program} left no trace: {why}");
        return Vec::new();
    }
    let looks: Vec<Look> = traces.iter().map(|(_, p)| look(p)).collect();
    if !looks.iter().any(|l| matches!(l, Look::OpenAcc)) {
        let mut clean = Vec::new();
        for ((pid, path), l) in traces.iter().zip(&looks) {
            match l {
                Look::NoOpenAcc => clean.push(shown(path)),
                other => eprintln!(
                    "accprof: trace {} (pid {pid}): {}",
                    shown(path),
                    other.describe()
                ),
            }
        }
        if !clean.is_empty() {
            let what = if clean.len() == 1 { "trace" } else { "traces" };
            eprintln!(
                "accprof: {program} made no OpenACC calls: it is not an OpenACC program, or its runtime lacks the profiling interface ({what}: {})",
                clean.join(", ")
            );
        }
        return Vec::new();
    }
    let with_openacc: Vec<PathBuf> = traces
        .iter()
        .zip(&looks)
        .filter(|(_, l)| matches!(l, Look::OpenAcc))
        .map(|((_, p), _)| p.clone())
        .collect();
    let several = traces.len() > 1;
    if !args.no_summary && !args.tui {
        for ((pid, path), l) in traces.iter().zip(&looks) {
            if !matches!(l, Look::OpenAcc) {
                continue;
            }
            match accprof_analyzer::load_run(path) {
                Ok(run) => {
                    if several {
                        eprintln!("accprof: summary of {} (pid {pid}):", shown(path));
                    }
                    let summary = run.summary();
                    let opts = accprof_reports::text::TextOptions {
                        extended: args.extended,
                        sort_by_time: false,
                    };
                    let text = accprof_reports::text::render(&run, summary, &opts);
                    use std::io::Write;
                    let _ = std::io::stderr().write_all(&text);
                    if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(status)
                        .filter(|_| run.process.ending.is_none() && !several)
                    {
                        eprintln!(
                            "accprof: {program} died of signal {sig} ({}) and its trace has no end record: it holds what was written before, not the last moments",
                            accprof_analyzer::summary::signal_name(sig)
                        );
                    }
                }
                Err(e) => eprintln!("accprof: {e}"),
            }
        }
    }
    if !several {
        eprintln!("accprof: trace written to {}", shown(&traces[0].1));
        return with_openacc;
    }
    eprintln!(
        "accprof: {program} and the programs it ran wrote {} traces:",
        traces.len()
    );
    for ((pid, path), l) in traces.iter().zip(&looks) {
        eprintln!("accprof:   {} (pid {pid}, {})", shown(path), l.describe());
    }
    with_openacc
}
