//! How programs are built and run: the [`Runner`] trait, the real
//! processes ([`ProcessRunner`]) and a scripted stand-in for tests
//! ([`MockRunner`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use accprof_trace::HashMode;

use crate::command;
use crate::error::Error;
use crate::launch::{self, Launch, Manifest};

/// What a build command did.
#[derive(Debug, Clone)]
pub struct BuildOutput {
    /// The command as run (`sh -c COMMAND`), templates filled in.
    pub command: String,
    pub success: bool,
    /// Exit code, or 128 + signal.
    pub code: u8,
    pub stderr: Vec<u8>,
}

/// What a program run under the collector did.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// The trace written by the program's own process (where it was asked
    /// to go when the collector named none).
    pub trace: PathBuf,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Exit code, or 128 + signal.
    pub code: u8,
    /// Wall time of the process, measured by the runner.
    pub wall_ns: u64,
}

/// Builds and runs programs. A failing build or program is an `Ok` with
/// its status: only a command that could not be started at all is an
/// error.
pub trait Runner {
    /// Builds `src` into the program `out` with the build command
    /// `template` (`{src}` and `{out}` stand for the paths).
    fn build(&mut self, template: &str, src: &Path, out: &Path) -> Result<BuildOutput, Error>;

    /// Runs `command` (program and arguments) under the collector, with
    /// its trace written to `trace` (a plain path, no % patterns) and the
    /// variables `env` set on top of this process's environment, and
    /// captures its output.
    fn run(
        &mut self,
        command: &[String],
        trace: &Path,
        env: &[(String, String)],
    ) -> Result<RunOutput, Error>;
}

/// Real processes: builds through `sh -c`, runs with the collector
/// preloaded.
#[derive(Debug, Clone)]
pub struct ProcessRunner {
    /// The collector library, found and checked by the caller.
    pub lib: PathBuf,
    pub hash: HashMode,
    /// Record device activity with CUPTI.
    pub cupti: bool,
}

impl ProcessRunner {
    pub fn new(lib: PathBuf, hash: HashMode) -> ProcessRunner {
        ProcessRunner {
            lib,
            hash,
            cupti: true,
        }
    }
}

impl Runner for ProcessRunner {
    fn build(&mut self, template: &str, src: &Path, out: &Path) -> Result<BuildOutput, Error> {
        let cmd = command::build_command(template, src, out);
        let output = Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::Io {
                what: format!("cannot run the build command `{cmd}`"),
                source: e,
            })?;
        Ok(BuildOutput {
            command: cmd,
            success: output.status.success(),
            code: launch::exit_code(&output.status),
            stderr: output.stderr,
        })
    }

    fn run(
        &mut self,
        command: &[String],
        trace: &Path,
        env: &[(String, String)],
    ) -> Result<RunOutput, Error> {
        let Some(program) = command.first() else {
            return Err(Error::EmptyCommand {
                template: String::new(),
            });
        };
        let base = std::env::current_dir().map_err(|e| Error::Io {
            what: "cannot read the current directory".to_string(),
            source: e,
        })?;
        let manifest = Manifest::new()?;
        // The trace's path as a pattern: its bytes, each % doubled.
        let output = {
            use std::os::unix::ffi::{OsStrExt, OsStringExt};
            let mut v = Vec::new();
            for &b in trace.as_os_str().as_bytes() {
                v.push(b);
                if b == b'%' {
                    v.push(b'%');
                }
            }
            std::ffi::OsString::from_vec(v)
        };
        let launch = Launch {
            lib: &self.lib,
            output: &output,
            hash: self.hash,
            cupti: self.cupti,
            // Tuning times kernels: no check may slow the host down.
            checks: Default::default(),
            base: &base,
            manifest: manifest.path(),
        };
        let mut cmd = launch::collector_command(command, &launch);
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let start = Instant::now();
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| launch::spawn_error(program, e))?;
        let pid = child.id();
        let out = child.wait_with_output().map_err(|e| Error::Io {
            what: format!("waiting for {program}"),
            source: e,
        })?;
        let wall_ns = start.elapsed().as_nanos() as u64;
        // The program's own process wrote the trace that is measured.
        let entries = manifest.entries();
        let written = entries
            .iter()
            .find(|(p, _)| *p == pid)
            .or(entries.first())
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| trace.to_path_buf());
        Ok(RunOutput {
            trace: written,
            stdout: out.stdout,
            stderr: out.stderr,
            code: launch::exit_code(&out.status),
            wall_ns,
        })
    }
}

/// What one scripted program does: how its build ends, what it prints
/// and which recorded trace its run leaves.
#[derive(Debug, Clone, Default)]
pub struct MockProgram {
    pub build_code: u8,
    pub build_stderr: String,
    pub stdout: String,
    pub stderr: String,
    pub code: u8,
    pub wall_ns: u64,
    /// A recorded trace, copied to where the run is asked to write its
    /// trace; `None` leaves no trace.
    pub trace: Option<PathBuf>,
    /// Traces for successive runs of this program, used in turn (the n-th
    /// run gets `repeats[n % len]`); empty: every run gets `trace`.
    pub repeats: Vec<PathBuf>,
    /// Runs with the variable `NAME=VALUE` set get these traces in turn
    /// instead (the first entry that matches).
    pub env_repeats: Vec<(String, Vec<PathBuf>)>,
}

impl MockProgram {
    /// A program that builds, prints `stdout`, exits 0 and leaves `trace`.
    pub fn new(stdout: &str, trace: &Path) -> MockProgram {
        MockProgram {
            stdout: stdout.to_string(),
            wall_ns: 1_000_000,
            trace: Some(trace.to_path_buf()),
            ..MockProgram::default()
        }
    }
}

/// One build the mock was asked for.
#[derive(Debug, Clone)]
pub struct MockBuild {
    pub command: String,
    pub src: PathBuf,
    pub out: PathBuf,
    /// The source's text when it was built.
    pub text: String,
}

/// A runner that starts no process: the n-th build gets the n-th
/// [`MockProgram`], and running the program it built plays that
/// program's part. It records what it was asked.
#[derive(Debug, Clone, Default)]
pub struct MockRunner {
    pub programs: Vec<MockProgram>,
    pub builds: Vec<MockBuild>,
    pub runs: Vec<Vec<String>>,
    /// The variables each run was given.
    pub envs: Vec<Vec<(String, String)>>,
    /// Runs so far per (build, env setting), to pick the next trace.
    counters: std::collections::HashMap<(usize, Option<usize>), usize>,
}

impl MockRunner {
    pub fn new(programs: Vec<MockProgram>) -> MockRunner {
        MockRunner {
            programs,
            ..MockRunner::default()
        }
    }

    fn mock_error(why: String) -> Error {
        Error::Spawn {
            program: "the mock runner".to_string(),
            why,
        }
    }
}

impl Runner for MockRunner {
    fn build(&mut self, template: &str, src: &Path, out: &Path) -> Result<BuildOutput, Error> {
        let n = self.builds.len();
        let p = self
            .programs
            .get(n)
            .ok_or_else(|| Self::mock_error(format!("no program scripted for build {}", n + 1)))?;
        let command = command::build_command(template, src, out);
        self.builds.push(MockBuild {
            command: command.clone(),
            src: src.to_path_buf(),
            out: out.to_path_buf(),
            text: std::fs::read_to_string(src).unwrap_or_default(),
        });
        Ok(BuildOutput {
            command,
            success: p.build_code == 0,
            code: p.build_code,
            stderr: p.build_stderr.clone().into_bytes(),
        })
    }

    fn run(
        &mut self,
        command: &[String],
        trace: &Path,
        env: &[(String, String)],
    ) -> Result<RunOutput, Error> {
        let program = command.first().map(PathBuf::from).unwrap_or_default();
        // The latest build of that program plays the part.
        let n = self
            .builds
            .iter()
            .rposition(|b| b.out == program)
            .ok_or_else(|| Self::mock_error(format!("{} was never built", program.display())))?;
        let p = &self.programs[n];
        let setting = p.env_repeats.iter().position(|(var, _)| {
            env.iter()
                .any(|(k, v)| var.split_once('=') == Some((k.as_str(), v.as_str())))
        });
        let list = match setting {
            Some(i) => &p.env_repeats[i].1,
            None => &p.repeats,
        };
        let count = self.counters.entry((n, setting)).or_default();
        let before = *count;
        *count += 1;
        self.runs.push(command.to_vec());
        self.envs.push(env.to_vec());
        let chosen = if list.is_empty() {
            p.trace.clone()
        } else {
            Some(list[before % list.len()].clone())
        };
        if let Some(recorded) = &chosen {
            std::fs::copy(recorded, trace).map_err(|e| Error::Io {
                what: format!("cannot copy {} to {}", recorded.display(), trace.display()),
                source: e,
            })?;
        }
        Ok(RunOutput {
            trace: trace.to_path_buf(),
            stdout: p.stdout.clone().into_bytes(),
            stderr: p.stderr.clone().into_bytes(),
            code: p.code,
            wall_ns: p.wall_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_builds_report_status_and_stderr() {
        let dir = tempfile::tempdir().expect("temp dir");
        let src = dir.path().join("a b.c");
        std::fs::write(&src, "int x;\n").expect("source");
        let out = dir.path().join("prog");
        let mut r = ProcessRunner::new(PathBuf::from("/nonexistent/libaccprof.so"), HashMode::Off);
        let ok = r.build("cp {src} {out}", &src, &out).expect("sh runs");
        assert!(ok.success && ok.code == 0, "{ok:?}");
        assert_eq!(
            std::fs::read_to_string(&out).ok().as_deref(),
            Some("int x;\n")
        );
        let failed = r
            .build("echo no good: {src} >&2; exit 3", &src, &out)
            .expect("sh runs");
        assert!(!failed.success && failed.code == 3, "{failed:?}");
        assert_eq!(
            String::from_utf8_lossy(&failed.stderr),
            format!("no good: {}\n", src.display())
        );
    }

    #[test]
    fn a_missing_program_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut r = ProcessRunner::new(PathBuf::from("/nonexistent/libaccprof.so"), HashMode::Off);
        let err = r
            .run(
                &["/nonexistent/prog".to_string()],
                &dir.path().join("t.trace"),
                &[],
            )
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("cannot run /nonexistent/prog: program not found")
        );
    }
}
