//! Where `report`, `analyze`, `export` and `tui` look for the program's
//! binaries, for source lines.

use std::path::PathBuf;

/// Set to 1, binaries are read only from the `--symbols` directories and
/// $ACCPROF_SYMBOL_PATH, never at the paths the trace recorded: the same
/// trace then reads the same on every machine.
pub const SYMBOLS_ONLY_ENV: &str = "ACCPROF_SYMBOLS_ONLY";

/// Where `report` and `analyze` look for the program's binaries.
pub fn symbol_options(symbols: &[PathBuf]) -> accprof_analyzer::LoadOptions {
    let mut symbol_dirs = symbols.to_vec();
    if let Some(path) = std::env::var_os("ACCPROF_SYMBOL_PATH") {
        symbol_dirs.extend(std::env::split_paths(&path).filter(|p| !p.as_os_str().is_empty()));
    }
    let only = std::env::var_os(SYMBOLS_ONLY_ENV).is_some_and(|v| v == "1");
    accprof_analyzer::LoadOptions {
        symbol_dirs,
        recorded_paths: !only,
        progress: None,
    }
}
