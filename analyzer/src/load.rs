//! Loading traces from files into joined models.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::builder;
use crate::model::Run;
use crate::symbolize::Symbolizer;

/// A trace that could not be read at all. Its message is one line naming
/// the input and already says what the cause says, so it has no separate
/// source (a caller printing the chain would repeat it).
#[derive(Debug)]
pub struct LoadError {
    pub path: PathBuf,
    pub source: accprof_trace::TraceError,
}

impl std::error::Error for LoadError {}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = if self.path.as_os_str() == STDIN {
            "standard input".to_string()
        } else {
            self.path.display().to_string()
        };
        match &self.source {
            // An I/O error says what happened; "I/O error" adds nothing.
            accprof_trace::TraceError::Io(e) => write!(f, "{name}: {e}"),
            other => write!(f, "{name}: {other}"),
        }
    }
}

/// Told how many bytes of the input were read so far, while a trace loads.
/// It is called from the thread that reads the input, so it must be `Send`
/// and `Sync`; it is called often and should be cheap.
pub type Progress = Arc<dyn Fn(u64) + Send + Sync>;

/// How to load: where to look for the program's binaries, and whom to tell
/// how far reading has got.
#[derive(Clone)]
pub struct LoadOptions {
    /// Directories searched (by file name, checked by build id) for a
    /// module whose recorded path is missing or holds another build.
    pub symbol_dirs: Vec<PathBuf>,
    /// Whether a binary is first looked for at the path the trace recorded
    /// (true by default). Off, only `symbol_dirs` are searched: a trace
    /// then reads the same on every machine, whatever happens to sit at
    /// the recording machine's paths.
    pub recorded_paths: bool,
    /// Called with the bytes read so far as the input is read (none by
    /// default).
    pub progress: Option<Progress>,
}

impl std::fmt::Debug for LoadOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadOptions")
            .field("symbol_dirs", &self.symbol_dirs)
            .field("recorded_paths", &self.recorded_paths)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            symbol_dirs: Vec::new(),
            recorded_paths: true,
            progress: None,
        }
    }
}

impl LoadOptions {
    /// Binaries from `dirs` only, never from the recorded paths.
    pub fn only_in(dirs: Vec<PathBuf>) -> Self {
        LoadOptions {
            symbol_dirs: dirs,
            recorded_paths: false,
            progress: None,
        }
    }
}

/// Reads one trace file and builds its model.
pub fn load_run(path: &Path) -> Result<Run, LoadError> {
    load_run_with(path, &LoadOptions::default())
}

/// What `-` stands for: the trace comes on standard input.
pub const STDIN: &str = "-";

/// Opens a trace for reading: a file, a pipe or FIFO (read as a stream,
/// never seeked), or standard input for `-`. A directory or a missing path
/// is refused here, with the same words wherever a trace is read.
pub fn open_input(path: &Path) -> Result<Box<dyn std::io::Read + Send>, accprof_trace::TraceError> {
    use std::io::{Error, ErrorKind};
    if path.as_os_str() == STDIN {
        return Ok(Box::new(std::io::stdin()));
    }
    match std::fs::metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(Error::new(ErrorKind::NotFound, "no such trace file").into())
        }
        Err(e) => return Err(e.into()),
        Ok(m) if m.is_dir() => return Err(Error::other("is a directory, not a trace file").into()),
        Ok(_) => {}
    }
    Ok(Box::new(std::fs::File::open(path)?))
}

/// Opens a trace for reading records: blocks decoded on worker threads
/// ([`accprof_trace::ParallelReader`]), a few blocks ahead of the consumer,
/// resynchronizing after a damaged block; `opts.progress` hears of every
/// byte read.
fn reader(path: &Path, opts: &LoadOptions) -> Result<accprof_trace::ParallelReader, LoadError> {
    let err = |source| LoadError {
        path: path.to_path_buf(),
        source,
    };
    let mut input = open_input(path).map_err(err)?;
    if let Some(progress) = &opts.progress {
        input = Box::new(Counted {
            inner: input,
            done: 0,
            progress: Arc::clone(progress),
        });
    }
    Ok(
        accprof_trace::Reader::new(std::io::BufReader::with_capacity(READ_CHUNK, input))
            .map_err(err)?
            .with_resync(true)
            .parallel(),
    )
}

fn symbolizer(opts: &LoadOptions) -> Symbolizer {
    let mut symbolizer = Symbolizer::with_search_dirs(opts.symbol_dirs.clone());
    symbolizer.recorded_paths = opts.recorded_paths;
    symbolizer
}

/// Reads one trace file and summarizes it as it reads, without building
/// its model: memory follows the distinct lines and launch shapes and what
/// is in flight, not the number of events. The summary is the one
/// the model carries ([`Run::summary`]).
pub fn summarize_run_with(
    path: &Path,
    opts: &LoadOptions,
) -> Result<crate::summary::Summary, LoadError> {
    let reader = reader(path, opts)?;
    let mut symbolizer = symbolizer(opts);
    let mut summary = crate::summary::summarize_reader(reader, &mut symbolizer);
    if let Some(facts) = summary.runs.first_mut() {
        facts.notes.append(&mut symbolizer.notes);
    }
    Ok(summary)
}

/// [`load_run`] with options. The trace is read as a stream: memory holds
/// the model, never the whole trace. A damaged block costs only itself:
/// reading goes on at the next intact block, and [`Run::losses`] says what
/// was skipped.
pub fn load_run_with(path: &Path, opts: &LoadOptions) -> Result<Run, LoadError> {
    let reader = reader(path, opts)?;
    let mut symbolizer = symbolizer(opts);
    let mut run = builder::build_from_reader(reader, &mut symbolizer);
    run.add_notes(std::mem::take(&mut symbolizer.notes));
    Ok(run)
}

/// Bytes asked of the input at a time.
const READ_CHUNK: usize = 128 * 1024;

/// The input, telling [`LoadOptions::progress`] how much was read.
struct Counted {
    inner: Box<dyn std::io::Read + Send>,
    done: u64,
    progress: Progress,
}

impl std::io::Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done += n as u64;
        (self.progress)(self.done);
        Ok(n)
    }
}
