//! One run of one configuration, measured from its trace: the kernel
//! device time of the tuned construct (CUPTI, through the analyzer's
//! model), or its host time when the program ran without a device, and
//! the launch shape it actually got.

use std::path::Path;

use serde::{Deserialize, Serialize};

use accprof_analyzer::model::Run;
use accprof_analyzer::summary::{Reached, Summary};

/// Where the time of a sample comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Timing {
    /// Kernel device time from CUPTI.
    Device,
    /// No device time in the run (host fallback, or no CUPTI): the
    /// construct's host time, start to end.
    Host,
}

impl Timing {
    pub fn label(self) -> &'static str {
        match self {
            Timing::Device => "kernel device time (CUPTI)",
            Timing::Host => "host construct time (no device time in these runs)",
        }
    }
}

/// The shape a launch got: CUPTI's grid and block (without CUPTI the
/// shape is not known).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Shape {
    Cuda { grid: [u32; 3], block: [u32; 3] },
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Cuda { grid, block } => write!(
                f,
                "{}x{}x{} / {}x{}x{}",
                grid[0], grid[1], grid[2], block[0], block[1], block[2]
            ),
        }
    }
}

/// What one run of a configuration measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub config: String,
    /// "warmup", "measure" or "recheck".
    pub phase: String,
    pub timing: Timing,
    /// Time per launch of the construct (total / launches).
    pub per_launch_ns: u64,
    pub total_ns: u64,
    pub launches: u64,
    pub shape: Option<Shape>,
    pub registers: Option<u32>,
    /// Wall time of the process.
    pub wall_ns: u64,
    pub code: u8,
    /// Hash of the compared output lines.
    pub output: u64,
    /// Taken from the cache of an earlier sweep, not run in this one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

/// The signal that ended a process, read from its exit code (128 +
/// signal, as the runner and shells report it).
pub fn signal_of(code: u8) -> Option<i32> {
    (129..=128 + 64)
        .contains(&code)
        .then(|| i32::from(code) - 128)
}

/// "killed by SIGSEGV (exit code 139)", or "exit code 1".
pub fn describe_exit(code: u8) -> String {
    match signal_of(code) {
        Some(sig) => format!(
            "killed by {} (exit code {code})",
            accprof_analyzer::summary::signal_name(sig)
        ),
        None => format!("exit code {code}"),
    }
}

/// The device a run used: its name and SM count; "host" without one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceInfo {
    pub name: String,
    pub sm_count: Option<u32>,
}

pub fn device_of(run: &Run) -> DeviceInfo {
    match run.process.devices.first() {
        Some(d) => DeviceInfo {
            name: d.name.clone(),
            sm_count: Some(d.sm_count).filter(|&n| n > 0),
        },
        None => DeviceInfo {
            name: "host".to_string(),
            sm_count: None,
        },
    }
}

/// The file `recorded` (as the trace names it) is `file` (the same path,
/// one ending in the other, or the same file name when the trace names it
/// differently).
pub fn file_matches(recorded: &str, file: &Path) -> bool {
    let recorded = Path::new(recorded);
    recorded == file
        || recorded.ends_with(file)
        || file.ends_with(recorded)
        || (recorded.file_name().is_some() && recorded.file_name() == file.file_name())
}

/// The compute construct at `file:line` in a run, read from the
/// analyzer's summary of it (the per-line numbers `accprof report`
/// prints): its kernels' device time and launches, or without them the
/// host time of the constructs reached, and the shape most launches got.
/// None when the run never reached a compute construct there.
pub fn measure_site(summary: &Summary, file: &Path, line: u32) -> Option<SiteTime> {
    let lines: Vec<_> = summary
        .functions
        .iter()
        .filter(|f| file_matches(&f.file, file))
        .flat_map(|f| f.lines.iter())
        .filter(|l| l.line == Some(line))
        .collect();
    let constructs: u64 = lines
        .iter()
        .filter_map(|l| l.reached.get(&Reached::ComputeRegion))
        .map(|s| s.count)
        .sum();
    if constructs == 0 {
        return None;
    }
    let mut t = SiteTime {
        constructs,
        host_ns: lines.iter().map(|l| l.host_ns).sum(),
        ..SiteTime::default()
    };
    let timed = lines
        .iter()
        .flat_map(|l| l.kernels.iter())
        .filter(|k| k.device.count > 0);
    let mut most = 0;
    for k in timed {
        t.device_ns += k.device.total_ns;
        t.kernels += k.device.count;
        if k.device.count > most {
            most = k.device.count;
            let dims = |v: &[u32]| [0, 1, 2].map(|i| v.get(i).copied().unwrap_or(1));
            t.shape = Some(Shape::Cuda {
                grid: dims(&k.grid),
                block: dims(&k.block),
            });
            t.registers = Some(k.registers);
        }
    }
    Some(t)
}

/// The tuned construct's numbers in one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteTime {
    /// Device time of its kernels, and how many (CUPTI).
    pub device_ns: u64,
    pub kernels: u64,
    /// Host time of its constructs, and how many reached.
    pub host_ns: u64,
    pub constructs: u64,
    pub shape: Option<Shape>,
    pub registers: Option<u32>,
}

impl SiteTime {
    /// (timing, total ns, launches) of this run.
    pub fn time(&self) -> (Timing, u64, u64) {
        if self.kernels > 0 {
            (Timing::Device, self.device_ns, self.kernels)
        } else {
            (Timing::Host, self.host_ns, self.constructs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_construct_of_a_recorded_run_is_measured_from_its_summary() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/h200");
        let opts = accprof_analyzer::LoadOptions::only_in(vec![dir.join("bin")]);
        let run = accprof_analyzer::load_run_with(&dir.join("launch_storm.trace"), &opts)
            .expect("fixture loads");
        let summary = run.summary();
        let file = Path::new("samples/launch_storm.c");
        let t = measure_site(summary, file, 87).expect("line 87 reached");
        // The model's own kernels of the constructs at that line.
        let (mut ns, mut n) = (0, 0);
        for (id, _) in run.constructs() {
            let site = run.site(run.line_site(id));
            if site.line == Some(87) && file_matches(&site.file, file) {
                for &k in run.kernels_of(id) {
                    ns += run.kernel(k).device_ns();
                    n += 1;
                }
            }
        }
        assert_eq!((t.device_ns, t.kernels), (ns, n));
        assert_eq!((t.kernels, t.constructs), (1000, 1000));
        assert_eq!(t.time().0, Timing::Device);
        assert_eq!(
            t.shape,
            Some(Shape::Cuda {
                grid: [8448, 1, 1],
                block: [32, 1, 1]
            })
        );
        assert_eq!(t.registers, Some(22));
        assert!(measure_site(summary, file, 88).is_none());
        assert!(measure_site(summary, Path::new("other.c"), 87).is_none());
        assert_eq!(device_of(&run).sm_count, Some(132));
    }
}
