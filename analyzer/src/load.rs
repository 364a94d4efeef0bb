//! Loading traces from files into joined models.

use std::path::{Path, PathBuf};

use crate::model::{self, Run};
use crate::symbolize::Symbolizer;

#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct LoadError {
    pub path: PathBuf,
    #[source]
    pub source: accprof_trace::TraceError,
}

/// How to load: where else to look for the program's binaries.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Directories searched (by file name, checked by build id) for a
    /// module whose recorded path is missing or holds another build.
    pub symbol_dirs: Vec<PathBuf>,
}

/// Reads one trace file and builds its model.
pub fn load_run(path: &Path) -> Result<Run, LoadError> {
    load_run_with(path, &LoadOptions::default())
}

/// [`load_run`] with options. The trace is read as a stream: memory holds
/// the model, never the whole trace.
pub fn load_run_with(path: &Path, opts: &LoadOptions) -> Result<Run, LoadError> {
    let err = |source| LoadError {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(|e| err(e.into()))?;
    let reader = accprof_trace::Reader::new(file).map_err(err)?;
    let mut symbolizer = Symbolizer::with_search_dirs(opts.symbol_dirs.clone());
    let mut run = model::build_from_reader(reader, &mut symbolizer);
    run.notes.append(&mut symbolizer.notes);
    Ok(run)
}
