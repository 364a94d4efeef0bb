//! The launch of a program under the collector, shared by `accprof run`
//! and [`ProcessRunner`](crate::ProcessRunner): the environment the
//! collector reads (names and spellings from `accprof_trace::contract`),
//! the manifest it names its traces in, and the exit code as a shell
//! reports it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use accprof_trace::contract::{self, env};
use accprof_trace::HashMode;

use crate::error::Error;

/// What the collector is told for one launch.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    /// The collector library, already checked (`LD_PRELOAD` takes it).
    pub lib: &'a Path,
    /// Trace file name pattern (`%` escapes as the contract says).
    pub output: &'a std::ffi::OsStr,
    pub hash: HashMode,
    /// Record device activity with CUPTI.
    pub cupti: bool,
    /// Correctness checks to run (`ACCPROF_CHECK`); none by default.
    pub checks: contract::Checks,
    /// Relative trace names resolve against this directory.
    pub base: &'a Path,
    /// The manifest the collectors append their traces to.
    pub manifest: &'a Path,
}

/// `command` set up to run with the collector preloaded, writing its
/// traces as `launch` says and naming them in the manifest; the collector
/// prints no summary of its own.
pub fn collector_command(command: &[impl AsRef<OsStr>], launch: &Launch<'_>) -> Command {
    let lib = launch.lib;
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", lib.display()),
        _ => lib.display().to_string(),
    };
    let mut cmd = match command.split_first() {
        Some((program, args)) => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
        None => Command::new(""),
    };
    cmd.env("LD_PRELOAD", preload)
        .env(env::OUTPUT, launch.output)
        .env(env::HASH, contract::hash_name(launch.hash))
        .env(env::MANIFEST, launch.manifest)
        .env(env::BASE_DIR, launch.base)
        .env(env::QUIET, "1")
        // The summary is printed from the trace, not by the collector.
        .env(env::TIME, "0");
    for v in env::TIME_ALIASES {
        cmd.env_remove(v);
    }
    if !launch.cupti {
        cmd.env(env::CUPTI, "0");
    }
    // Always set, so a value in the launcher's environment that `run`
    // already overrode does not reach the program.
    cmd.env(env::CHECK, contract::checks_value(launch.checks));
    cmd
}

/// The manifest the collectors of one run append to: a file with no name
/// on disk, which the collectors open as `/proc/<launcher>/fd/<n>`. It
/// goes with the launcher however the launcher ends (SIGKILL too), and
/// nothing is left in the temporary directory.
pub struct Manifest {
    file: std::fs::File,
    path: PathBuf,
}

impl Manifest {
    pub fn new() -> Result<Manifest, Error> {
        use std::os::fd::AsRawFd;
        let dir = std::env::temp_dir();
        let file = tempfile::tempfile_in(&dir).map_err(|e| Error::Manifest {
            dir: dir.clone(),
            source: without_path(e),
        })?;
        let path = PathBuf::from(format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            file.as_raw_fd()
        ));
        // Without /proc the collectors could not open it: say so now.
        std::fs::metadata(&path).map_err(|e| Error::Manifest { dir, source: e })?;
        Ok(Manifest { file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// (pid, trace) for each trace written, in the order written, each
    /// trace once.
    pub fn entries(&self) -> Vec<(u32, PathBuf)> {
        use std::io::{Read, Seek};
        let mut text = Vec::new();
        let mut file = &self.file;
        if file
            .rewind()
            .and_then(|_| file.read_to_end(&mut text))
            .is_err()
        {
            text.clear();
        }
        let mut seen: Vec<(u32, PathBuf)> = Vec::new();
        for (pid, path) in contract::parse_manifest(&text) {
            if !seen.iter().any(|(_, p)| *p == path) {
                seen.push((pid, path));
            }
        }
        seen
    }
}

/// An OS error without the path tempfile adds (the messages name it).
pub fn without_path(e: std::io::Error) -> std::io::Error {
    e.raw_os_error()
        .map(std::io::Error::from_raw_os_error)
        .unwrap_or(e)
}

/// The exit code as a shell reports it: the code, or 128 + the signal.
pub fn exit_code(status: &std::process::ExitStatus) -> u8 {
    match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(status),
    ) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        _ => 1,
    }
}

/// Why `program` could not be started.
pub fn spawn_error(program: &str, e: std::io::Error) -> Error {
    let why = if e.kind() == std::io::ErrorKind::NotFound {
        "program not found".to_string()
    } else {
        e.to_string()
    };
    Error::Spawn {
        program: program.to_string(),
        why,
    }
}
