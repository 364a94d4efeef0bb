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

/// Reads one trace file and builds its model.
pub fn load_run(path: &Path) -> Result<Run, LoadError> {
    let trace = accprof_trace::read_file(path).map_err(|source| LoadError {
        path: path.to_path_buf(),
        source,
    })?;
    let mut symbolizer = Symbolizer::new();
    let mut run = model::build(trace, &mut symbolizer);
    run.notes.append(&mut symbolizer.notes);
    Ok(run)
}
