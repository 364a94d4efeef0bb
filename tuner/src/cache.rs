//! The result cache of `accprof tune`: one JSON line per measured sample,
//! keyed by the source's hash, the build command, the device and the
//! configuration. A sweep appends as it goes, so an interrupted sweep
//! resumes where it stopped and a repeated one reuses what it measured.

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::measure::Sample;
use crate::Error;

/// What a cached sample belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    /// xxh3 of the original source text, in hex.
    pub source: String,
    pub build: String,
    pub run: String,
    pub device: String,
    pub config: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub key: Key,
    pub sample: Sample,
}

/// The entries of the cache at `path`; none when it does not exist. Lines
/// that do not parse (a write cut short) are skipped.
pub fn load(path: &Path) -> Vec<Entry> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Appends one entry (one line, written at once).
pub fn append(path: &Path, e: &Entry) -> Result<(), Error> {
    let io = |source| Error::Io {
        what: format!("cannot write the tune cache {}", path.display()),
        source,
    };
    let mut line = serde_json::to_string(e).map_err(|e| io(std::io::Error::other(e)))?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    f.write_all(line.as_bytes()).map_err(io)
}
