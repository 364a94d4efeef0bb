//! `accprof tui`: the interactive timeline of one or more traces. Every
//! trace is read (each failure named, exit 2) before the screen is taken.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct TuiArgs {
    /// Trace files; several (MPI ranks) open as groups of lanes on one clock.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// A directory with copies of the program's binaries (repeatable; also
    /// $ACCPROF_SYMBOL_PATH).
    #[arg(long = "symbols", value_name = "DIR")]
    pub symbols: Vec<PathBuf>,
    /// Another place to look for source files (repeatable).
    #[arg(long = "source-dir", value_name = "DIR")]
    pub source_dirs: Vec<PathBuf>,
}

pub fn tui(args: &TuiArgs) -> anyhow::Result<u8> {
    open(&args.traces, &args.symbols, &args.source_dirs)?;
    Ok(0)
}

/// Loads `traces` and shows them until the user quits.
pub fn open(
    traces: &[PathBuf],
    symbols: &[PathBuf],
    source_dirs: &[PathBuf],
) -> anyhow::Result<()> {
    let load = crate::symbols::symbol_options(symbols);
    let started = Instant::now();
    let mut runs = Vec::with_capacity(traces.len());
    for path in traces {
        let (opts, bar) = crate::progress::with_bar(path, &load);
        let run = accprof_analyzer::load_run_with(path, &opts);
        drop(bar);
        runs.push((path.clone(), run?));
    }
    accprof_tui::check_terminal()?;
    let slow = started.elapsed().as_secs() >= 1 && std::io::stderr().is_terminal();
    if slow {
        eprint!("accprof: indexing the timeline ...");
    }
    // The findings are worked out while the timeline is up.
    let session = accprof_tui::Session::new(runs, source_dirs);
    if slow {
        eprintln!(" done");
    }
    accprof_tui::run(std::sync::Arc::new(session))?;
    Ok(())
}
