//! A sweep against the mock runner, for the unit tests of its parts: a C
//! source with one compute construct, traces written with chosen kernel
//! times and launch shapes, and programs whose runs play them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use accprof_analyzer::testkit::trace::{header, write_trace, TraceBuilder};
use accprof_trace::{Device, Record};

use crate::runner::{MockProgram, MockRunner};
use crate::space::Space;

use super::{Progress, Repeats, SearchMode, Sweep, TunePlan};

pub(super) const LINE: u32 = 3;
pub(super) const SOURCE: &str = "int main(void) {\n  double a[64];\n#pragma acc parallel loop present(a)\n  for (int i = 0; i < 64; i++) a[i] = i;\n  return 0;\n}\n";

/// A trace of two launches of the construct at app.c:LINE, each `ns` on
/// the device with blocks of `block` threads, on a 132-SM device.
pub(super) fn trace(dir: &Path, ns: u64, block: u32) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = dir.join(format!("t{}.trace", N.fetch_add(1, Ordering::SeqCst)));
    let mut b = TraceBuilder::new();
    b.records.push(Record::Device(Device {
        id: 0,
        name: "Test GPU".into(),
        sm_count: 132,
        compute_capability: (9, 0),
        global_memory_bytes: 1 << 34,
    }));
    b.compute(1, 1, LINE, ns);
    b.compute(2, 2, LINE, ns);
    for r in &mut b.records {
        if let Record::Kernel(k) = r {
            k.block = [block, 1, 1];
        }
    }
    write_trace(&path, &header(), &b.records);
    path
}

/// A program that prints `stdout` and whose successive runs take these
/// kernel times (per launch) with blocks of `block` threads.
pub(super) fn program(dir: &Path, stdout: &str, block: u32, times: &[u64]) -> MockProgram {
    let repeats: Vec<PathBuf> = times.iter().map(|&t| trace(dir, t, block)).collect();
    MockProgram {
        repeats,
        ..MockProgram::new(stdout, &trace(dir, times[0], block))
    }
}

/// A source in a temporary directory, the space swept over it and the
/// sweep's work directory.
pub(super) struct Fixture {
    pub dir: tempfile::TempDir,
    pub source: PathBuf,
    pub work: PathBuf,
    pub space: Space,
}

impl Fixture {
    pub fn new(specs: &[&str]) -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let source = dir.path().join("app.c");
        std::fs::write(&source, SOURCE).expect("source");
        let work = dir.path().join("work");
        let specs: Vec<String> = specs.iter().map(|x| x.to_string()).collect();
        let space = Space::parse(&specs, &[]).expect("space");
        Fixture {
            dir,
            source,
            work,
            space,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// An exhaustive sweep with a program per configuration: one warm-up,
    /// three to six measured runs, no re-check.
    pub fn plan(&self) -> TunePlan<'_> {
        TunePlan {
            source: &self.source,
            line: LINE,
            build: Some("gcc -fopenacc {src} -o {out}"),
            run: "{out} 64",
            ignore: &[],
            space: &self.space,
            prebuilt: None,
            repeats: Repeats {
                warmup: 1,
                min: 3,
                max: 6,
                spread: 0.05,
                config_time: Duration::from_secs(60),
            },
            mode: SearchMode::Exhaustive,
            max_runs: None,
            max_time: None,
            recheck: 0,
            work: &self.work,
            stop: None,
        }
    }
}

/// `f` on a sweep of `plan` run by `runner`; the source is restored after.
pub(super) fn with_sweep<T>(
    runner: &mut MockRunner,
    plan: &TunePlan<'_>,
    f: impl FnOnce(&mut Sweep<'_, '_, MockRunner>) -> T,
) -> T {
    let mut progress = |_: &Progress| {};
    let (mut sweep, _) = Sweep::open(runner, plan, &mut progress).expect("the sweep opens");
    let out = f(&mut sweep);
    sweep.restore.restore().expect("the source is restored");
    out
}

/// The programs the runner ran, in order, by file name: the slug of the
/// configuration they were built for (`default`, `vector_length_64`).
pub(super) fn ran(runner: &MockRunner) -> Vec<String> {
    runner
        .runs
        .iter()
        .map(|words| {
            Path::new(&words[0])
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect()
}

/// How many runs of the program built for `slug` the runner ran.
pub(super) fn runs_of(runner: &MockRunner, slug: &str) -> usize {
    ran(runner).iter().filter(|r| *r == slug).count()
}

/// The vector length patched into the source of each build, in order
/// ("default" for a build of the original text).
pub(super) fn built(runner: &MockRunner) -> Vec<String> {
    runner
        .builds
        .iter()
        .map(|b| match b.text.split_once("vector_length(") {
            Some((_, rest)) => rest.split(')').next().unwrap_or_default().to_string(),
            None => "default".to_string(),
        })
        .collect()
}
