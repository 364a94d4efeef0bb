//! accprof: profile and tune OpenACC programs.
//!
//! The binary only parses arguments and calls the libraries; errors are
//! printed once, on one line, naming the input, with exit code 2.

mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "accprof", version, about = "Profile OpenACC programs: data movement, kernels and launch shapes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program with the collector preloaded, print the summary at exit
    /// and keep the trace.
    Run(RunArgs),
    /// Print the PGI_ACC_TIME-style summary of one or more traces.
    Report(ReportArgs),
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Trace file name pattern: %p pid, %h host, %r MPI rank, %n first free number.
    #[arg(long, short, default_value = "accprof-%p.trace")]
    pub output: String,
    /// Content hashing of transferred host buffers.
    #[arg(long, value_enum, default_value_t = HashArg::Sampled)]
    pub hash: HashArg,
    /// Do not record device activity with CUPTI.
    #[arg(long)]
    pub no_cupti: bool,
    /// Do not print the summary at exit.
    #[arg(long)]
    pub no_summary: bool,
    /// Print the extended summary at exit.
    #[arg(long)]
    pub extended: bool,
    /// The collector library (default: libaccprof.so next to this binary, or $ACCPROF_LIB).
    #[arg(long)]
    pub lib: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum HashArg {
    Off,
    Sampled,
    Full,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum SortArg {
    Line,
    Time,
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Trace files.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Add bytes, bandwidth, variables, memory kinds, kernel resources, time shares and sources.
    #[arg(long)]
    pub extended: bool,
    /// Order of the lines within a function.
    #[arg(long, value_enum, default_value_t = SortArg::Line)]
    pub sort: SortArg,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Report(args) => report(&args).map(|_| 0),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("accprof: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn report(args: &ReportArgs) -> anyhow::Result<()> {
    let opts = accprof_reports::text::TextOptions {
        extended: args.extended,
        sort_by_time: args.sort == SortArg::Time,
    };
    let mut out = Vec::new();
    for path in &args.traces {
        let run = accprof_analyzer::load_run(path)?;
        let summary = accprof_analyzer::summary::summarize(&run);
        if args.traces.len() > 1 {
            out.extend_from_slice(format!("\n== {}\n", path.display()).as_bytes());
        }
        out.extend(accprof_reports::text::render(&run, &summary, &opts));
    }
    use std::io::Write;
    std::io::stdout().write_all(&out)?;
    Ok(())
}
