//! The collector library built into this binary (see build.rs), for an
//! `accprof` installed on its own. `LD_PRELOAD` needs a file: the library
//! is written once per build to the user's cache directory,
//! `$XDG_CACHE_HOME/accprof/<version>-<hash>/libaccprof.so` (else
//! `~/.cache/...`), through a temporary file and a rename, so concurrent
//! runs never see a partial file.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use anyhow::{anyhow, Context};

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

/// The path of the embedded collector library, written there first if
/// needed; `None` when this binary carries none.
pub fn collector() -> anyhow::Result<Option<PathBuf>> {
    let Some((bytes, hash)) = COLLECTOR else {
        return Ok(None);
    };
    let cache = cache_dir().ok_or_else(|| {
        anyhow!("no cache directory for the collector library: set XDG_CACHE_HOME or HOME, or pass --lib")
    })?;
    let dir = cache
        .join("accprof")
        .join(format!("{}-{hash}", env!("CARGO_PKG_VERSION")));
    let lib = dir.join("libaccprof.so");
    if std::fs::metadata(&lib).is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64) {
        return Ok(Some(lib));
    }
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(&dir)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".libaccprof-")
            .tempfile_in(&dir)?;
        tmp.write_all(bytes)?;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o755))?;
        tmp.persist(&lib).map_err(|e| e.error)?;
        Ok(())
    };
    write().with_context(|| {
        format!(
            "cannot write the collector library to {} (pass --lib or set ACCPROF_LIB)",
            lib.display()
        )
    })?;
    Ok(Some(lib))
}

/// `$XDG_CACHE_HOME`, else `$HOME/.cache`; relative values are ignored, as
/// the XDG specification says.
fn cache_dir() -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_CACHE_HOME")
        .and_then(absolute)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(absolute)
                .map(|h| h.join(".cache"))
        })
}
