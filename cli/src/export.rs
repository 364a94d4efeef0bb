//! `accprof export`: the model's tables as CSV or JSON, its timeline for
//! Perfetto (Chrome trace JSON or Perfetto protobuf), and plots (SVG,
//! PNG). The serializers live in accprof-reports; this module loads the
//! traces and opens the output.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::ValueEnum;

use accprof_analyzer::findings::Analysis;
use accprof_analyzer::source::SourceSet;
use accprof_analyzer::summary::{MergedSummary, Summary};
use accprof_analyzer::Run;
use accprof_reports::export::{self, Input, RunInput, What};
use accprof_reports::plot::{self, Image, Plot};
use accprof_reports::timeline;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Format {
    /// One table (--what) as CSV.
    Csv,
    /// The tables (all, or --what) and the totals as one JSON document.
    Json,
    /// The timeline as Perfetto's protobuf trace (for ui.perfetto.dev; the
    /// compact choice for large traces: about 50 bytes per trace event).
    Perfetto,
    /// The timeline as Chrome trace-event JSON (chrome://tracing,
    /// ui.perfetto.dev; about 85 bytes per trace event).
    Chrome,
    /// A plot (--plot) as SVG.
    Svg,
    /// A plot (--plot) as PNG.
    Png,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum PlotArg {
    /// Time per source line: kernel, copyin, copyout and host time stacked.
    Lines,
    /// Busy time of each host thread, device stream and copy direction.
    Timeline,
    /// Host<->device transfers per size, with the bandwidth of each size.
    Sizes,
    /// Kernel, transfer and other host time per rank (several traces).
    Ranks,
}

/// A table `--what` names: its values are reports' tables ([`What::ALL`]),
/// by their names, so a table added there is one here.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WhatArg(pub What);

impl ValueEnum for WhatArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [WhatArg; What::ALL.len()] = {
            let mut all = [WhatArg(What::ALL[0]); What::ALL.len()];
            let mut i = 1;
            while i < all.len() {
                all[i] = WhatArg(What::ALL[i]);
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let value = clap::builder::PossibleValue::new(self.0.name());
        Some(match self.0.about() {
            Some(about) => value.help(about),
            None => value,
        })
    }
}

/// Where the program's binaries and sources are, as for `report` and
/// `analyze`.
#[derive(clap::Args, Clone, Default)]
pub struct SourceArgs {
    /// A directory with copies of the program's binaries (repeatable; also
    /// $ACCPROF_SYMBOL_PATH).
    #[arg(long = "symbols", value_name = "DIR")]
    pub symbols: Vec<PathBuf>,
    /// Another place to look for source files (repeatable).
    #[arg(long = "source-dir", value_name = "DIR")]
    pub source_dirs: Vec<PathBuf>,
    /// Read sources recorded under FROM from TO instead (FROM=TO, repeatable).
    #[arg(long = "source-map", value_name = "FROM=TO", value_parser = crate::analyze::parse_map)]
    pub source_maps: Vec<(PathBuf, PathBuf)>,
}

#[derive(clap::Args)]
pub struct ExportArgs {
    /// Trace files; several (MPI ranks) give per-rank rows, merged totals
    /// and imbalance.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum)]
    pub format: Format,
    /// Which table (CSV: default summary; JSON: default all of them).
    #[arg(long, value_enum)]
    pub what: Option<WhatArg>,
    /// Which plot --format svg or png draws [default: lines; ranks for
    /// several traces].
    #[arg(long, value_enum)]
    pub plot: Option<PlotArg>,
    /// The output file ("-" or left out: standard output).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub sources: SourceArgs,
}

/// One loaded trace.
pub struct Loaded {
    pub path: PathBuf,
    pub run: Option<Run>,
    pub summary: Summary,
    pub analysis: Option<Analysis>,
}

/// Loads each trace: its summary always, its model when `model`, its
/// findings when `findings` (which needs the model). An unreadable trace
/// fails the whole command, naming it.
pub fn load_all(
    traces: &[PathBuf],
    sources: &SourceArgs,
    model: bool,
    findings: bool,
) -> anyhow::Result<Vec<Loaded>> {
    let opts = crate::symbols::symbol_options(&sources.symbols);
    let mut out = Vec::with_capacity(traces.len());
    for path in traces {
        let (opts, bar) = crate::progress::with_bar(path, &opts);
        let loaded = if model || findings {
            let mut run = accprof_analyzer::load_run_with(path, &opts)?;
            // The sources name the buffers no runtime name or symbol does,
            // in every table as in the findings.
            let set =
                SourceSet::load_with(&run, &sources.source_dirs, &sources.source_maps, &|p| {
                    std::fs::read_to_string(p)
                });
            run.learn_names(&set);
            let summary = run.summary().clone();
            let analysis = findings.then(|| {
                accprof_analyzer::analysis::analyze(
                    &run,
                    &set,
                    &accprof_analyzer::rules::Options::default(),
                )
            });
            Loaded {
                path: path.clone(),
                run: Some(run),
                summary,
                analysis,
            }
        } else {
            Loaded {
                path: path.clone(),
                run: None,
                summary: accprof_analyzer::summarize_run_with(path, &opts)?,
                analysis: None,
            }
        };
        drop(bar);
        out.push(loaded);
    }
    Ok(out)
}

/// The merged summary of the loaded traces (also for one trace: its
/// per-rank row and no imbalance).
pub fn merged(loaded: &[Loaded]) -> MergedSummary {
    let summaries: Vec<Summary> = loaded.iter().map(|l| l.summary.clone()).collect();
    accprof_analyzer::summary::merge(&summaries)
}

/// The inputs of the tables, ranks as the merged summary numbered them.
pub fn run_inputs<'a>(loaded: &'a [Loaded], merged: &MergedSummary) -> Vec<RunInput<'a>> {
    loaded
        .iter()
        .zip(&merged.ranks)
        .filter_map(|(l, r)| {
            Some(RunInput {
                rank: r.rank,
                run: l.run.as_ref()?,
                analysis: l.analysis.as_ref(),
            })
        })
        .collect()
}

/// The output: a file, or stdout for "-" and none.
pub struct Output {
    path: Option<PathBuf>,
}

impl Output {
    pub fn new(path: Option<&Path>) -> Output {
        Output {
            path: path.filter(|p| p.as_os_str() != "-").map(Path::to_path_buf),
        }
    }

    pub fn is_stdout(&self) -> bool {
        self.path.is_none()
    }

    /// Runs `write` on a buffered writer to the output; errors name the
    /// file. A reader that went away from stdout (`| head`) is no error.
    pub fn write(
        &self,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> anyhow::Result<()> {
        match &self.path {
            Some(p) => {
                let f = std::fs::File::create(p)
                    .with_context(|| format!("cannot write {}", p.display()))?;
                let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
                write(&mut w)
                    .and_then(|_| w.flush())
                    .with_context(|| format!("cannot write {}", p.display()))
            }
            None => {
                let stdout = std::io::stdout();
                let mut w = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
                match write(&mut w).and_then(|_| w.flush()) {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                    r => Ok(r.context("cannot write to standard output")?),
                }
            }
        }
    }
}

/// Checks before loading anything that the output can be created, so a
/// long load does not end in an unwritable path.
fn check_writable(out: &Output) -> anyhow::Result<()> {
    if let Some(p) = &out.path {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            anyhow::bail!(
                "cannot write {}: directory {} does not exist",
                p.display(),
                dir.display()
            );
        }
        if p.is_dir() {
            anyhow::bail!("cannot write {}: it is a directory", p.display());
        }
    }
    Ok(())
}

fn trace_names(loaded: &[Loaded]) -> Vec<String> {
    loaded
        .iter()
        .map(|l| l.path.display().to_string())
        .collect()
}

pub fn export(args: &ExportArgs) -> anyhow::Result<u8> {
    let out = Output::new(args.output.as_deref());
    check_writable(&out)?;
    if matches!(args.format, Format::Perfetto | Format::Png) && out.is_stdout() {
        anyhow::bail!(
            "--format {} writes a binary file: name it with -o FILE",
            if args.format == Format::Png {
                "png"
            } else {
                "perfetto"
            }
        );
    }
    if args.what.is_some() && !matches!(args.format, Format::Csv | Format::Json) {
        anyhow::bail!("--what selects a table of --format csv or json");
    }
    if args.plot.is_some() && !matches!(args.format, Format::Svg | Format::Png) {
        anyhow::bail!("--plot goes with --format svg or png");
    }
    let plot_kind = match args.plot {
        Some(PlotArg::Lines) => Plot::Lines,
        Some(PlotArg::Timeline) => Plot::Timeline,
        Some(PlotArg::Sizes) => Plot::Sizes,
        Some(PlotArg::Ranks) => Plot::Ranks,
        None if args.traces.len() > 1 => Plot::Ranks,
        None => Plot::Lines,
    };
    let tables: Vec<What> = match (args.format, args.what) {
        (_, Some(w)) => vec![w.0],
        (Format::Perfetto | Format::Chrome, None) => vec![What::Kernels],
        (Format::Svg | Format::Png, None) => match plot_kind {
            Plot::Lines | Plot::Ranks => vec![What::Summary],
            Plot::Timeline | Plot::Sizes => vec![What::Kernels],
        },
        (Format::Csv, None) => vec![What::Summary],
        (Format::Json, None) => What::ALL.to_vec(),
    };
    let model = tables.iter().any(|w| !w.summary_only());
    let findings = tables.contains(&What::Findings);
    let loaded = load_all(&args.traces, &args.sources, model, findings)?;
    let merged = merged(&loaded);
    let runs = run_inputs(&loaded, &merged);
    let input = Input {
        merged: &merged,
        runs: &runs,
    };
    match args.format {
        Format::Csv => out.write(|w| export::write_csv(tables[0], &input, w))?,
        Format::Json => {
            let names = trace_names(&loaded);
            out.write(|w| export::write_json(&tables, &input, &names, w))?
        }
        Format::Chrome => out.write(|w| timeline::write_chrome(&runs, w).map(|_| ()))?,
        Format::Perfetto => out.write(|w| timeline::write_perfetto(&runs, w).map(|_| ()))?,
        Format::Svg | Format::Png => {
            let image = if args.format == Format::Svg {
                Image::Svg
            } else {
                Image::Png
            };
            let bytes = plot::render(&plot::data(plot_kind, &merged, &runs), image)?;
            out.write(|w| w.write_all(&bytes))?
        }
    }
    Ok(0)
}

#[derive(clap::Args)]
pub struct DiffArgs {
    /// The trace of the first run (before the change).
    pub before: PathBuf,
    /// The trace of the second run (after the change).
    pub after: PathBuf,
    /// Print the comparison as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the rows and totals as CSV.
    #[arg(long)]
    pub csv: bool,
    /// The output file ("-" or left out: standard output).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub sources: SourceArgs,
}

pub fn diff(args: &DiffArgs) -> anyhow::Result<u8> {
    let out = Output::new(args.output.as_deref());
    check_writable(&out)?;
    let loaded = load_all(
        &[args.before.clone(), args.after.clone()],
        &args.sources,
        false,
        false,
    )?;
    let c = accprof_analyzer::compare::compare(&loaded[0].summary, &loaded[1].summary);
    // What each run's report would say of its trace (a damaged trace, a
    // binary not found for source lines), naming the trace.
    for l in &loaded {
        for w in accprof_reports::text::warnings(&l.summary, false) {
            eprintln!("accprof: {}: {w}", l.path.display());
        }
    }
    for w in accprof_reports::diff::warnings(&c) {
        eprintln!("accprof: {w}");
    }
    let (b, a) = (
        args.before.display().to_string(),
        args.after.display().to_string(),
    );
    if args.csv {
        out.write(|w| accprof_reports::diff::write_csv(&c, w))?;
    } else {
        let bytes = if args.json {
            accprof_reports::diff::render_json(&c, &b, &a)
        } else {
            accprof_reports::diff::render_text(&c, &b, &a)
        };
        out.write(|w| w.write_all(&bytes))?;
    }
    Ok(0)
}
