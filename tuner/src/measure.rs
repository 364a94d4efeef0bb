//! One run of one configuration, measured from its trace: the kernel
//! device time of the tuned construct (CUPTI, through the analyzer's
//! model), or its host time when the program ran without a device, and
//! the launch shape it actually got.

use std::path::Path;

use serde::{Deserialize, Serialize};

use accprof_analyzer::model::{Run, Site};

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

/// The shape a launch got: CUPTI's grid and block, or without CUPTI the
/// runtime's gangs, workers and vector length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Shape {
    Cuda {
        grid: [u32; 3],
        block: [u32; 3],
    },
    Runtime {
        gangs: u64,
        workers: u64,
        vector: u64,
    },
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Cuda { grid, block } => write!(
                f,
                "{}x{}x{} / {}x{}x{}",
                grid[0], grid[1], grid[2], block[0], block[1], block[2]
            ),
            Shape::Runtime {
                gangs,
                workers,
                vector,
            } => write!(f, "{gangs} gangs, {workers} workers, vector {vector}"),
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
}

/// The device a run used: its name and SM count; "host" without one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceInfo {
    pub name: String,
    pub sm_count: Option<u32>,
}

pub fn device_of(run: &Run) -> DeviceInfo {
    match run.devices.first() {
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

/// The site is `file:line` (its file named by the same path, or ending in
/// it, or with the same file name when the trace names it differently).
pub fn site_matches(site: &Site, file: &Path, line: u32) -> bool {
    if site.line != Some(line) {
        return false;
    }
    let recorded = Path::new(&site.file);
    recorded == file
        || recorded.ends_with(file)
        || file.ends_with(recorded)
        || (recorded.file_name().is_some() && recorded.file_name() == file.file_name())
}

/// The construct at `file:line` in `run`: its launches, their time and
/// shape. None when the run never reached it.
pub fn measure_site(run: &Run, file: &Path, line: u32) -> Option<SiteTime> {
    let constructs: Vec<_> = run
        .constructs()
        .filter(|(id, _)| site_matches(run.site(run.line_site(*id)), file, line))
        .collect();
    if constructs.is_empty() {
        return None;
    }
    let mut t = SiteTime::default();
    let mut shapes: Vec<(Shape, u64)> = Vec::new();
    let mut count = |s: Shape| match shapes.iter_mut().find(|(x, _)| *x == s) {
        Some((_, n)) => *n += 1,
        None => shapes.push((s, 1)),
    };
    for (id, _) in &constructs {
        for k in run.kernels_of(*id).iter().map(|&k| run.kernel(k)) {
            if !k.device_timed() {
                continue;
            }
            t.device_ns += k.device_ns();
            t.kernels += 1;
            t.registers.get_or_insert(k.registers);
            count(Shape::Cuda {
                grid: k.grid,
                block: k.block,
            });
        }
    }
    if t.kernels == 0 {
        for (id, c) in &constructs {
            t.host_ns += c.host_ns().unwrap_or(0);
            t.constructs += 1;
            for l in run.launches_of(*id) {
                if let (Some(g), Some(w), Some(v)) = (l.gangs(), l.workers(), l.vector_length()) {
                    count(Shape::Runtime {
                        gangs: g,
                        workers: w,
                        vector: v,
                    });
                }
            }
        }
    } else {
        t.constructs = constructs.len() as u64;
    }
    // The shape most launches got.
    t.shape = shapes.iter().max_by_key(|(_, n)| *n).map(|(s, _)| *s);
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
