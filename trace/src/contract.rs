//! The contract between the launcher (`accprof run`) and the collector
//! (`libaccprof.so`): the environment variables the collector reads, how
//! their values are spelled, the MPI rank variables, the output pattern and
//! the manifest through which a collector tells the launcher which trace
//! files it wrote. Both sides use this module and nothing else for these
//! facts, so they cannot drift apart.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::HashMode;

/// Environment variable names, as the collector reads them.
pub mod env {
    /// Trace file pattern (see [`super::expand_output`]).
    pub const OUTPUT: &str = "ACCPROF_OUTPUT";
    /// `off`, `sampled` or `full` (see [`super::parse_hash`]).
    pub const HASH: &str = "ACCPROF_HASH";
    /// `0` or `off`: no CUPTI.
    pub const CUPTI: &str = "ACCPROF_CUPTI";
    /// `0` or `off` (see [`super::is_off`]): no driver spans, the timed
    /// CUDA driver calls of every program thread (on by default, with
    /// CUPTI).
    pub const DRIVER: &str = "ACCPROF_DRIVER";
    /// Print the summary at exit; the PGI/NV names work too.
    pub const TIME: &str = "ACCPROF_TIME";
    pub const TIME_ALIASES: [&str; 2] = ["PGI_ACC_TIME", "NV_ACC_TIME"];
    /// No notes on stderr (errors still print).
    pub const QUIET: &str = "ACCPROF_QUIET";
    /// Load but record nothing.
    pub const DISABLE: &str = "ACCPROF_DISABLE";
    /// `auto` or `monotonic`.
    pub const CLOCK: &str = "ACCPROF_CLOCK";
    /// Set by the launcher: a file to which every collector process appends
    /// one line per trace it opened (see [`super::manifest_line`]).
    pub const MANIFEST: &str = "ACCPROF_MANIFEST";
    /// Set by the launcher to the directory it ran in: a relative output
    /// pattern is resolved against it, whatever the program's working
    /// directory is when it opens its trace.
    pub const BASE_DIR: &str = "ACCPROF_BASE_DIR";
    /// Correctness checks to run, comma-separated (see
    /// [`super::parse_checks`]); none by default.
    pub const CHECK: &str = "ACCPROF_CHECK";
}

/// The correctness checks `ACCPROF_CHECK` and `--check` turn on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checks {
    /// Host accesses to ranges whose device copy is newer (stale reads).
    pub coherence: bool,
}

/// The names [`parse_checks`] knows.
pub const CHECK_NAMES: [&str; 1] = ["coherence"];

/// Checks as spelled in `ACCPROF_CHECK` and `--check`: names from
/// [`CHECK_NAMES`], comma-separated; the empty string and `off` mean none.
/// The error is the first word that is not a check's name.
pub fn parse_checks(text: &str) -> Result<Checks, String> {
    let mut checks = Checks::default();
    if text.is_empty() || text == "off" {
        return Ok(checks);
    }
    for word in text.split(',') {
        match word {
            "coherence" => checks.coherence = true,
            other => return Err(other.to_string()),
        }
    }
    Ok(checks)
}

/// The spelling [`parse_checks`] reads back.
pub fn checks_value(checks: Checks) -> String {
    let mut names = Vec::new();
    if checks.coherence {
        names.push("coherence");
    }
    if names.is_empty() {
        "off".into()
    } else {
        names.join(",")
    }
}

/// The default output pattern.
pub const DEFAULT_OUTPUT: &str = "accprof-%p.trace";

/// Variables MPI launchers export with the process's rank, in the order
/// they are consulted.
pub const RANK_VARS: [&str; 5] = [
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "SLURM_PROCID",
    "MV2_COMM_WORLD_RANK",
];

/// The MPI rank, from the first of [`RANK_VARS`] that `get` knows and that
/// parses.
pub fn rank_from(get: impl Fn(&str) -> Option<String>) -> Option<u32> {
    RANK_VARS.iter().find_map(|v| get(v)?.trim().parse().ok())
}

/// The MPI rank from this process's environment.
pub fn rank_from_env() -> Option<u32> {
    rank_from(|v| std::env::var(v).ok())
}

/// A hash mode as spelled in `ACCPROF_HASH` and `--hash`; the empty string
/// means the default.
pub fn parse_hash(text: &str) -> Option<HashMode> {
    match text {
        "" | "sampled" => Some(HashMode::Sampled),
        "off" => Some(HashMode::Off),
        "full" => Some(HashMode::Full),
        _ => None,
    }
}

/// The spelling [`parse_hash`] reads back.
pub fn hash_name(mode: HashMode) -> &'static str {
    match mode {
        HashMode::Off => "off",
        HashMode::Sampled => "sampled",
        HashMode::Full => "full",
    }
}

/// True for the values that switch a boolean variable on.
pub fn is_on(value: &str) -> bool {
    matches!(value, "1" | "yes" | "true" | "on")
}

/// True for the values that switch CUPTI off.
pub fn cupti_off(value: &str) -> bool {
    is_off(value)
}

/// True for the values that switch off something on by default
/// (`ACCPROF_CUPTI`, `ACCPROF_DRIVER`).
pub fn is_off(value: &str) -> bool {
    matches!(value, "0" | "off" | "no" | "false")
}

/// Expands an output pattern: `%p` pid, `%h` host, `%r` MPI rank (0 when
/// none), `%n` the smallest number that makes the name new (`exists` tells
/// whether a candidate is taken), `%%` a percent sign; any other `%x` is
/// kept as written. The pattern is a file name's bytes, whatever they are
/// (a Linux path need not be UTF-8): the escapes are ASCII.
pub fn expand_output(
    pattern: &OsStr,
    pid: u32,
    host: &str,
    rank: Option<u32>,
    exists: impl Fn(&OsStr) -> bool,
) -> OsString {
    let pattern = pattern.as_bytes();
    let render = |n: u32| {
        let mut out = Vec::with_capacity(pattern.len() + 16);
        let mut bytes = pattern.iter().copied();
        while let Some(c) = bytes.next() {
            if c != b'%' {
                out.push(c);
                continue;
            }
            match bytes.next() {
                Some(b'p') => out.extend_from_slice(pid.to_string().as_bytes()),
                Some(b'h') => out.extend_from_slice(host.as_bytes()),
                Some(b'r') => out.extend_from_slice(rank.unwrap_or(0).to_string().as_bytes()),
                Some(b'n') => out.extend_from_slice(n.to_string().as_bytes()),
                Some(b'%') => out.push(b'%'),
                Some(other) => {
                    out.push(b'%');
                    out.push(other);
                }
                None => out.push(b'%'),
            }
        }
        OsString::from_vec(out)
    };
    if !pattern.windows(2).any(|w| w == b"%n") {
        return render(0);
    }
    (0..10_000)
        .map(render)
        .find(|name| !exists(name))
        .unwrap_or_else(|| render(10_000))
}

/// True when the pattern names a different file for each process (`%p`),
/// or picks a free name itself (`%n`).
pub fn pattern_is_per_process(pattern: &OsStr) -> bool {
    let mut bytes = pattern.as_bytes().iter();
    while let Some(&c) = bytes.next() {
        if c == b'%' {
            match bytes.next() {
                Some(b'p') | Some(b'n') => return true,
                _ => {}
            }
        }
    }
    false
}

/// One manifest line: the pid of the process that wrote a trace and the
/// trace's absolute path, tab-separated. The path is written as its bytes,
/// whatever they are (a Linux path need not be UTF-8), with a newline, tab
/// or backslash escaped as `\n`, `\t` and `\\`.
pub fn manifest_line(pid: u32, path: &Path) -> Vec<u8> {
    let bytes = path.as_os_str().as_bytes();
    let mut s = format!("{pid}\t").into_bytes();
    s.reserve(bytes.len() + 1);
    for &b in bytes {
        match b {
            b'\\' => s.extend_from_slice(b"\\\\"),
            b'\n' => s.extend_from_slice(b"\\n"),
            b'\t' => s.extend_from_slice(b"\\t"),
            b => s.push(b),
        }
    }
    s.push(b'\n');
    s
}

/// The entries of a manifest, in the order written; malformed lines (a
/// process killed mid-write) are skipped.
pub fn parse_manifest(text: &[u8]) -> Vec<(u32, PathBuf)> {
    text.split(|&b| b == b'\n')
        .filter_map(|l| {
            let tab = l.iter().position(|&b| b == b'\t')?;
            let pid = std::str::from_utf8(&l[..tab]).ok()?.parse().ok()?;
            let mut out = Vec::with_capacity(l.len() - tab);
            let mut bytes = l[tab + 1..].iter();
            while let Some(&b) = bytes.next() {
                if b == b'\\' {
                    match bytes.next()? {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'\\' => out.push(b'\\'),
                        _ => return None,
                    }
                } else {
                    out.push(b);
                }
            }
            (!out.is_empty()).then(|| (pid, PathBuf::from(OsString::from_vec(out))))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_expand() {
        let name = expand_output("t-%h-%r-%p-%%.trace".as_ref(), 42, "node1", Some(3), |_| {
            false
        });
        assert_eq!(name, "t-node1-3-42-%.trace");
        let taken = ["x0", "x1"];
        let name = expand_output("x%n".as_ref(), 1, "h", None, |n| {
            taken.iter().any(|t| OsStr::new(t) == n)
        });
        assert_eq!(name, "x2");
        assert_eq!(
            expand_output("a%qb%".as_ref(), 1, "h", None, |_| false),
            "a%qb%"
        );
        // Not UTF-8: the bytes go through as they are.
        let latin1 = OsString::from_vec(b"caf\xe9-%p.trace".to_vec());
        assert_eq!(
            expand_output(&latin1, 7, "h", None, |_| false),
            OsString::from_vec(b"caf\xe9-7.trace".to_vec())
        );
        assert!(pattern_is_per_process(&latin1));
    }

    #[test]
    fn per_process_patterns() {
        assert!(pattern_is_per_process("t-%p.trace".as_ref()));
        assert!(pattern_is_per_process("t%n".as_ref()));
        assert!(!pattern_is_per_process("t-%%p.trace".as_ref()));
        assert!(!pattern_is_per_process("t-%r.trace".as_ref()));
    }

    #[test]
    fn hash_spellings_round_trip() {
        for m in [HashMode::Off, HashMode::Sampled, HashMode::Full] {
            assert_eq!(parse_hash(hash_name(m)), Some(m));
        }
        assert_eq!(parse_hash(""), Some(HashMode::Sampled));
        assert_eq!(parse_hash("Full"), None);
    }

    #[test]
    fn check_spellings_round_trip() {
        let on = Checks { coherence: true };
        assert_eq!(parse_checks("coherence"), Ok(on));
        assert_eq!(parse_checks(&checks_value(on)), Ok(on));
        assert_eq!(parse_checks(""), Ok(Checks::default()));
        assert_eq!(
            parse_checks(&checks_value(Checks::default())),
            Ok(Checks::default())
        );
        assert_eq!(parse_checks("coherence,races"), Err("races".into()));
        assert_eq!(parse_checks("Coherence"), Err("Coherence".into()));
    }

    #[test]
    fn off_switches() {
        for v in ["0", "off", "no", "false"] {
            assert!(is_off(v) && cupti_off(v), "{v}");
        }
        for v in ["", "1", "on", "OFF", " 0"] {
            assert!(!is_off(v) && !cupti_off(v), "{v}");
        }
    }

    #[test]
    fn ranks_come_from_the_first_variable_that_parses() {
        let env = |v: &str| match v {
            "OMPI_COMM_WORLD_RANK" => Some("x".to_string()),
            "PMIX_RANK" => Some(" 3 ".to_string()),
            "SLURM_PROCID" => Some("5".to_string()),
            _ => None,
        };
        assert_eq!(rank_from(env), Some(3));
        assert_eq!(rank_from(|_| None), None);
    }

    #[test]
    fn manifest_lines_round_trip() {
        let odd = Path::new("/tmp/a\tb\\c\nd.trace");
        // Not UTF-8: a directory named in Latin-1.
        let latin1 = PathBuf::from(OsString::from_vec(b"/tmp/caf\xe9/t.trace".to_vec()));
        let mut text = manifest_line(7, Path::new("/tmp/x.trace"));
        text.extend(manifest_line(8, odd));
        text.extend(manifest_line(9, &latin1));
        text.extend_from_slice(b"garbage\n9");
        assert_eq!(
            parse_manifest(&text),
            vec![
                (7, PathBuf::from("/tmp/x.trace")),
                (8, odd.to_path_buf()),
                (9, latin1)
            ]
        );
    }
}
