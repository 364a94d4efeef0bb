//! The list a prebuild directory holds: programs built on a machine that
//! can build them (`accprof tune --prebuild`, `accprof analyze --verify
//! --prebuild`), named with what they were built from, for a machine
//! that cannot build them. Each command writes its own list under its
//! own name, so that one command never takes the other's directory for
//! its own.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;

/// Writes `list` as `dir/name` (pretty JSON).
pub(crate) fn write<T: Serialize>(dir: &Path, name: &str, list: &T) -> Result<(), Error> {
    let path = dir.join(name);
    let json = serde_json::to_string_pretty(list).map_err(|e| Error::Tune(e.to_string()))?;
    std::fs::write(&path, json).map_err(|e| Error::Io {
        what: format!("cannot write {}", path.display()),
        source: e,
    })
}

/// Reads `dir/name`, the list `made_by` (the command, as the user types
/// it) wrote. A directory without it was not made by that command, and
/// the error says so rather than naming the missing file alone.
pub(crate) fn read<T: DeserializeOwned>(dir: &Path, name: &str, made_by: &str) -> Result<T, Error> {
    let path = dir.join(name);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let what = if dir.is_dir() {
                format!("no {name} in it")
            } else {
                "no such directory".to_string()
            };
            return Err(Error::NotPrebuilt(format!(
                "{}: not made by `{made_by}` ({what})",
                dir.display()
            )));
        }
        Err(e) => {
            return Err(Error::Io {
                what: format!("cannot read {}", path.display()),
                source: e,
            })
        }
    };
    serde_json::from_str(&text).map_err(|e| {
        Error::NotPrebuilt(format!(
            "{}: not a prebuild list of `{made_by}`: {e}",
            path.display()
        ))
    })
}
