//! accprof: profile and tune OpenACC programs.
//!
//! The binary only parses arguments and calls the libraries; errors are
//! printed once, on one line, naming the input, with exit code 2.

mod analyze;
mod embedded;
mod export;
mod live;
mod progress;
mod run;
mod stdout;
mod stop;
mod symbols;
mod tui;
mod tune;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "accprof",
    version,
    about = "Profile OpenACC programs: data movement, kernels and launch shapes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

const RUN_EXAMPLES: &str = "\
Examples:
  accprof run -- ./laplace 1024 20          summary at exit, trace in accprof-<pid>.trace
  accprof run -o run%n.trace -- ./app       run0.trace, then run1.trace on the next run
  mpirun -np 4 accprof run -o r%r-%p.trace -- ./app";

const REPORT_EXAMPLES: &str = "\
Examples:
  accprof report accprof-1234.trace
  accprof report --extended --sort time app.trace
  accprof report r*.trace                   MPI ranks: merged summary and a per-rank table";

const ANALYZE_EXAMPLES: &str = "\
Examples:
  accprof analyze app.trace
  accprof analyze --patch app.trace > fix.diff && git apply fix.diff
  accprof analyze --verify --build 'gcc -fopenacc {src} -o {out}' --run '{out} 256' app.trace
  accprof analyze --verify --build 'gcc -fopenacc {dir}/main.c {dir}/step.c -o {out}' \\
      --run '{out} 256' app.trace               a patch that changes both files
  accprof analyze --verify --build 'gcc -fopenacc {src} -o {out}' --prebuild pre/ app.trace   (build here)
  accprof analyze --verify --prebuilt pre/ --run '{out} 256' app.trace   (there)";

const TUNE_EXAMPLES: &str = "\
Examples:
  accprof tune --at heat.c:129 --build 'gcc -g -O2 -fopenacc {src} -o {out}' --run '{out} 2048 2048 100' \\
      --space vector_length=32..1024
  accprof tune --at heat.c:129 --build ... --run ... --space num_gangs=132,264,528   (GOMP_OPENACC_DIM, one build)
  accprof tune --at laplace.c:154 --build ... --run ... --variant 'parallel loop collapse(2) reduction(max:dt)'
  accprof tune --at heat.c:129 --build ... --space vector_length=32..1024 --prebuild pre/   (build here)
  accprof tune --at heat.c:129 --prebuilt pre/ --space vector_length=32..1024 --run '{out} 2048 2048 100'   (there)";
const EXPORT_EXAMPLES: &str = "\
Examples:
  accprof export app.trace --format csv --what kernels -o kernels.csv
  accprof export app.trace --format json -o app.json      every table and the totals
  accprof export r*.trace --format csv --what ranks         MPI ranks: per-rank rows and imbalance";

const DIFF_EXAMPLES: &str = "\
Examples:
  accprof diff before.trace after.trace
  accprof diff --json before.trace after.trace > diff.json
  accprof diff --csv -o diff.csv before.trace after.trace";

const TUI_EXAMPLES: &str = "\
Examples:
  accprof tui app.trace --source-dir src
  accprof tui r*.trace                      MPI ranks: one group of lanes per rank
  accprof run --tui -- ./app                the timeline when the program ends

Keys: arrows pan and move between lanes, + - zoom, 0 fits all, Enter selects,
f findings, l lines, / search, ? help, q quit.";

const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  accprof completions bash > ~/.local/share/bash-completion/completions/accprof
  accprof completions zsh > ~/.zfunc/_accprof
  accprof completions fish > ~/.config/fish/completions/accprof.fish";

#[derive(Subcommand)]
enum Command {
    /// Run a program with the collector preloaded, print the summary at exit
    /// and keep the trace.
    #[command(after_help = RUN_EXAMPLES)]
    Run(run::RunArgs),
    /// Print the PGI_ACC_TIME-style summary of one or more traces.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Findings with source lines and proposals (data regions, updates,
    /// launch shapes); --patch, --apply and --verify act on them.
    #[command(after_help = ANALYZE_EXAMPLES)]
    Analyze(analyze::AnalyzeArgs),
    /// Sweep gang/worker/vector settings (or directive variants) over one
    /// construct: patched, rebuilt, run under the collector and timed on the
    /// device; a table, samples, plots and the winner's patch.
    #[command(after_help = TUNE_EXAMPLES)]
    Tune(tune::TuneArgs),
    /// Tables as CSV or JSON (summary, constructs, kernels, transfers,
    /// allocations, findings, ranks, ledger, coherence), the timeline for
    /// Perfetto or Chrome, plots as SVG or PNG.
    #[command(after_help = EXPORT_EXAMPLES)]
    Export(export::ExportArgs),
    /// Compare two runs: per source line, kernel and transfer kind, counts,
    /// times and bytes before and after, and the totals.
    #[command(after_help = DIFF_EXAMPLES)]
    Diff(export::DiffArgs),
    /// The interactive terminal timeline: lanes per host thread, device
    /// queue and copy direction, device memory, findings on the events.
    #[command(after_help = TUI_EXAMPLES)]
    Tui(tui::TuiArgs),
    /// Print a shell completion script.
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum SortArg {
    Line,
    Time,
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Trace files; several (MPI ranks) give one merged summary and a per-rank table.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Add bytes, bandwidth, variables, memory kinds, kernel resources, time shares and sources.
    #[arg(long)]
    pub extended: bool,
    /// Print the summary and per-rank tables as JSON (the layout of
    /// `accprof export --format json`) instead of text.
    #[arg(long, conflicts_with_all = ["csv", "extended"])]
    pub json: bool,
    /// Print the summary table as CSV (the `summary` table of `accprof export`).
    #[arg(long, conflicts_with = "extended")]
    pub csv: bool,
    /// Order of the lines within a function.
    #[arg(long, value_enum, default_value_t = SortArg::Line)]
    pub sort: SortArg,
    /// A directory with copies of the program's binaries, for source lines when
    /// the recorded paths are missing or hold other builds (repeatable; also
    /// $ACCPROF_SYMBOL_PATH, colon-separated).
    #[arg(long = "symbols", value_name = "DIR")]
    pub symbols: Vec<PathBuf>,
    /// Run by the collector at the program's exit (ACCPROF_TIME=1): print the
    /// summary of one trace, nothing for a program without OpenACC, never fail.
    #[arg(long, hide = true)]
    pub at_exit: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Report(args) if args.at_exit => Ok(report_at_exit(&args)),
        Command::Report(args) => {
            existing_dirs("--symbols", &args.symbols).and_then(|_| report(&args).map(|_| 0))
        }
        Command::Analyze(args) => existing_dirs("--symbols", &args.symbols)
            .and_then(|_| existing_dirs("--source-dir", &args.source_dirs))
            .and_then(|_| analyze::analyze(&args)),
        Command::Tune(args) => tune::tune(&args),
        Command::Export(args) => {
            existing_source_dirs(&args.sources).and_then(|_| export::export(&args))
        }
        Command::Diff(args) => {
            existing_source_dirs(&args.sources).and_then(|_| export::diff(&args))
        }
        Command::Tui(args) => existing_dirs("--symbols", &args.symbols)
            .and_then(|_| existing_dirs("--source-dir", &args.source_dirs))
            .and_then(|_| tui::tui(&args)),
        Command::Completions { shell } => completions(shell),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("accprof: {}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// A directory flag that names no directory is a mistake to say, not an
/// empty place to search: binaries and sources would silently be looked
/// for elsewhere.
fn existing_dirs(flag: &str, dirs: &[PathBuf]) -> anyhow::Result<()> {
    for d in dirs {
        if !d.is_dir() {
            let what = if d.exists() {
                "is not a directory"
            } else {
                "no such directory"
            };
            anyhow::bail!("{flag} {}: {what}", d.display());
        }
    }
    Ok(())
}

fn existing_source_dirs(s: &export::SourceArgs) -> anyhow::Result<()> {
    existing_dirs("--symbols", &s.symbols)?;
    existing_dirs("--source-dir", &s.source_dirs)
}

/// Writes the completion script for `shell` to stdout.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "accprof", &mut script);
    let script = String::from_utf8_lossy(&script);
    stdout::write_stdout(without_flags(&script, &hidden_flags(&cmd)).as_bytes())?;
    Ok(0)
}

/// The long names of the hidden flags of `cmd` and its subcommands (for
/// the collector's use, not a person's).
fn hidden_flags(cmd: &clap::Command) -> Vec<String> {
    let mut out: Vec<String> = cmd
        .get_arguments()
        .filter(|a| a.is_hide_set())
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    for sub in cmd.get_subcommands() {
        out.extend(hidden_flags(sub));
    }
    out
}

/// A completion script without `flags`: clap_complete offers hidden flags
/// too. Each shell's script names a flag on a line of its own (zsh, fish,
/// elvish, PowerShell) or as a word of a list (bash).
fn without_flags(script: &str, flags: &[String]) -> String {
    let mut out = String::with_capacity(script.len());
    'lines: for line in script.lines() {
        let mut line = line.to_string();
        for f in flags {
            let flag = format!("--{f}");
            let own_line = [
                format!("'{flag}["),
                format!("-l {f} "),
                format!("cand {flag} "),
                format!("('{flag}',"),
            ];
            if own_line.iter().any(|p| line.contains(p.as_str())) {
                continue 'lines;
            }
            line = line
                .replace(&format!(" {flag} "), " ")
                .replace(&format!(" {flag}\""), "\"");
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// An error and its causes on one line, without repeating a cause that the
/// message before it already quotes.
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

fn load_options(args: &ReportArgs) -> accprof_analyzer::LoadOptions {
    symbols::symbol_options(&args.symbols)
}

fn report(args: &ReportArgs) -> anyhow::Result<()> {
    let opts = accprof_reports::text::TextOptions {
        extended: args.extended,
        sort_by_time: args.sort == SortArg::Time,
    };
    let load = load_options(args);
    // Every input is checked before anything is written: a summary of
    // some of the traces would read as the summary of all of them. The
    // headers of files are read first, so a missing trace costs nothing;
    // then each trace is summarized as it is read, never held as a model.
    let mut failed: Vec<anyhow::Error> = args
        .traces
        .iter()
        .filter_map(|p| check_trace(p).err())
        .collect();
    let mut summaries = Vec::with_capacity(args.traces.len());
    let mut read = Vec::with_capacity(args.traces.len());
    if failed.is_empty() {
        for path in &args.traces {
            let (load, bar) = progress::with_bar(path, &load);
            let summarized = accprof_analyzer::summarize_run_with(path, &load);
            drop(bar);
            match summarized {
                Ok(mut summary) => {
                    live::mark(path, &mut summary.runs);
                    summaries.push(summary);
                    read.push(path);
                }
                Err(e) => failed.push(e.into()),
            }
        }
    }
    match failed.len() {
        0 => {}
        1 => return Err(failed.remove(0)),
        n => {
            for e in &failed {
                eprintln!("accprof: {}", one_line(e));
            }
            anyhow::bail!(
                "{n} of {} traces could not be read; nothing is reported",
                args.traces.len()
            )
        }
    }
    if args.json || args.csv {
        let merged = accprof_analyzer::summary::merge(&summaries);
        let input = accprof_reports::export::Input {
            merged: &merged,
            runs: &[],
        };
        let out = export::Output::new(None);
        if args.json {
            let names: Vec<String> = read.iter().map(|p| p.display().to_string()).collect();
            let tables = [
                accprof_reports::export::What::Summary,
                accprof_reports::export::What::Ranks,
            ];
            out.write(|w| accprof_reports::export::write_json(&tables, &input, &names, w))?;
        } else {
            out.write(|w| {
                accprof_reports::export::write_csv(
                    accprof_reports::export::What::Summary,
                    &input,
                    w,
                )
            })?;
        }
    }
    let text = if args.json || args.csv {
        Vec::new()
    } else if let [one] = summaries.as_slice() {
        accprof_reports::text::render_summary(one, &opts)
    } else {
        let merged = accprof_analyzer::summary::merge(&summaries);
        accprof_reports::text::render_merged(&merged, &opts)
    };
    stdout::write_stdout(&text)?;
    let mut warnings = merge_warnings(&summaries, &read);
    for (s, path) in summaries.iter().zip(&read) {
        let who = if summaries.len() > 1 {
            format!("{}: ", path.display())
        } else {
            String::new()
        };
        for r in &s.runs {
            warnings.extend(accprof_reports::text::run_warnings(r, &who, false));
        }
    }
    for w in warnings {
        eprintln!("accprof: {w}");
    }
    Ok(())
}

/// Reads a trace file's header, to refuse a missing, unreadable or
/// foreign file before any trace is summarized. Standard input and pipes
/// are read once, when summarized.
fn check_trace(path: &std::path::Path) -> anyhow::Result<()> {
    use accprof_analyzer::load;
    if path.as_os_str() == load::STDIN
        || std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
    {
        return Ok(());
    }
    load::open_input(path)
        .and_then(|input| accprof_trace::Reader::new(std::io::BufReader::new(input)).map(drop))
        .map_err(|source| {
            accprof_analyzer::LoadError {
                path: path.to_path_buf(),
                source,
            }
            .into()
        })
}

/// Warnings about merging several traces as ranks of one job: traces of
/// different programs, and one process's trace given twice.
fn merge_warnings(
    summaries: &[accprof_analyzer::summary::Summary],
    paths: &[&PathBuf],
) -> Vec<String> {
    let mut out = Vec::new();
    if summaries.len() < 2 {
        return out;
    }
    let facts: Vec<_> = summaries.iter().filter_map(|s| s.runs.first()).collect();
    let mut programs: Vec<&str> = Vec::new();
    for f in &facts {
        if !programs.contains(&f.executable.as_str()) {
            programs.push(&f.executable);
        }
    }
    if programs.len() > 1 {
        out.push(format!(
            "warning: the traces are of {} different programs ({}): they are merged as ranks of one job anyway",
            programs.len(),
            programs.join(", ")
        ));
    }
    for (i, a) in facts.iter().enumerate() {
        for (j, b) in facts.iter().enumerate().skip(i + 1) {
            if (&a.host, a.pid, a.start_unix_ns) == (&b.host, b.pid, b.start_unix_ns) {
                out.push(format!(
                    "warning: {} and {} are the same process's trace (host {}, pid {}, same start time): its numbers count twice",
                    paths[i].display(),
                    paths[j].display(),
                    a.host,
                    a.pid
                ));
            }
        }
    }
    out
}

/// The summary the collector asks for at exit. Its stdout is the program's
/// stderr; whatever happens, the exit code is 0 (the collector ignores it,
/// but a failure here must never look like the program's).
fn report_at_exit(args: &ReportArgs) -> u8 {
    let Some(path) = args.traces.first() else {
        return 0;
    };
    let summary = match accprof_analyzer::summarize_run_with(path, &load_options(args)) {
        Ok(summary) => summary,
        Err(e) => {
            let _ = stdout::write_stdout(format!("accprof: no summary: {e}\n").as_bytes());
            return 0;
        }
    };
    // A process that never used OpenACC (a shell, a compiler the program
    // ran) gets no summary.
    if summary.runs.iter().all(|r| r.acc_events == 0) {
        return 0;
    }
    let opts = accprof_reports::text::TextOptions {
        extended: args.extended,
        sort_by_time: args.sort == SortArg::Time,
    };
    let text = accprof_reports::text::render_summary(&summary, &opts);
    let _ = stdout::write_stdout(&text);
    // The process is still running: no end record is expected yet.
    for w in accprof_reports::text::warnings(&summary, true) {
        eprintln!("accprof: {w}");
    }
    0
}
