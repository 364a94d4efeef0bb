//! The aggregates behind the PGI_ACC_TIME-style summary: per source file,
//! function and line, how often each construct was reached, the kernels it
//! launched (per launch shape) and the transfers it made, with time
//! statistics.
//!
//! Attribution: a kernel or copy belongs to the line of the construct that
//! caused it; constructs nested in another (the implicit data part of a
//! compute construct) count at their parent's line.

use std::collections::BTreeMap;

use accprof_trace::{ConstructKind, CopyKind};

use crate::model::{ConstructClass, CopySource, Run};

/// Count, total, min and max of a set of durations, in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub count: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

impl Stats {
    pub fn add(&mut self, ns: u64) {
        if self.count == 0 {
            self.min_ns = ns;
            self.max_ns = ns;
        } else {
            self.min_ns = self.min_ns.min(ns);
            self.max_ns = self.max_ns.max(ns);
        }
        self.count += 1;
        self.total_ns += ns;
    }

    pub fn merge(&mut self, other: &Stats) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        self.count += other.count;
        self.total_ns += other.total_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn avg_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// What a line's construct entry is called in the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reached {
    ComputeRegion,
    DataRegion,
    EnterData,
    ExitData,
    Update,
    Wait,
}

impl Reached {
    pub fn label(self) -> &'static str {
        match self {
            Reached::ComputeRegion => "compute region",
            Reached::DataRegion => "data region",
            Reached::EnterData => "enter data directive",
            Reached::ExitData => "exit data directive",
            Reached::Update => "update directive",
            Reached::Wait => "wait directive",
        }
    }
}

/// Kernels of one line with one launch shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelLine {
    pub name: String,
    pub grid: Vec<u32>,
    pub block: Vec<u32>,
    /// Device time per launch (CUPTI); count 0 when CUPTI was off.
    pub device: Stats,
    /// Host time of each compute construct that launched it.
    pub elapsed: Stats,
    pub launches: u64,
    pub registers: u32,
    pub shared_bytes: u32,
}

/// Transfers of one line in one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferLine {
    pub direction: Option<CopyKind>,
    pub count: u64,
    pub bytes: u64,
    /// Device time (CUPTI) or, without CUPTI, host time of the enqueue.
    pub time: Stats,
    pub device_timed: bool,
    pub pageable: u64,
    pub pinned: u64,
    pub variables: Vec<String>,
}

/// Everything attributed to one source line.
#[derive(Debug, Clone, Default)]
pub struct LineSummary {
    pub line: Option<u32>,
    /// How often each kind of construct was reached here.
    pub reached: BTreeMap<Reached, Stats>,
    pub kernels: Vec<KernelLine>,
    pub transfers: Vec<TransferLine>,
}

#[derive(Debug, Clone, Default)]
pub struct FunctionSummary {
    pub file: String,
    pub function: String,
    pub device_label: String,
    pub device_number: u32,
    /// Host time inside this function's top-level OpenACC constructs.
    pub time_ns: u64,
    pub lines: Vec<LineSummary>,
}

#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub functions: Vec<FunctionSummary>,
    pub cupti: bool,
    pub wall_ns: u64,
    pub kernel_ns: u64,
    pub transfer_ns: u64,
    pub host_construct_ns: u64,
}

fn device_label(run: &Run, device_type: Option<u32>) -> &'static str {
    let gcc = run.header.runtime.contains("libgomp");
    match device_type {
        Some(2) => "HOST",
        Some(5) if gcc => "NVIDIA",
        Some(4) if !gcc => "NVIDIA",
        _ if run.cupti_active() => "NVIDIA",
        _ => "DEVICE",
    }
}

fn reached_of(class: ConstructClass, kind: Option<ConstructKind>, nested: bool) -> Reached {
    match class {
        ConstructClass::Compute => Reached::ComputeRegion,
        ConstructClass::Update => Reached::Update,
        ConstructClass::Wait => Reached::Wait,
        ConstructClass::EnterData if !nested && kind == Some(ConstructKind::EnterData) => {
            Reached::EnterData
        }
        ConstructClass::ExitData if !nested && kind == Some(ConstructKind::ExitData) => {
            Reached::ExitData
        }
        ConstructClass::EnterData | ConstructClass::ExitData => Reached::DataRegion,
    }
}

/// Builds the summary of one run.
pub fn summarize(run: &Run) -> Summary {
    type Key = (String, String);
    #[derive(Default)]
    struct Acc {
        device_type: Option<u32>,
        device_number: u32,
        time_ns: u64,
        lines: BTreeMap<Option<u32>, LineSummary>,
    }
    let mut funcs: BTreeMap<Key, Acc> = BTreeMap::new();
    let key_of = |site: crate::SiteId| {
        let s = run.site(site);
        ((s.file.clone(), s.function.clone()), s.line)
    };
    let mut host_construct_ns = 0;
    for c in &run.constructs {
        let (key, line) = key_of(c.site);
        let f = funcs.entry(key).or_default();
        if f.device_type.is_none() {
            f.device_type = c.device_type;
            f.device_number = c.device.unwrap_or(0);
        }
        let ls = f.lines.entry(line).or_insert_with(|| LineSummary {
            line,
            ..Default::default()
        });
        let host = c.host_ns().unwrap_or(0);
        ls.reached
            .entry(reached_of(c.class, c.kind, c.parent.is_some()))
            .or_default()
            .add(host);
        if c.parent.is_none() {
            f.time_ns += host;
            host_construct_ns += host;
        }
        // Without CUPTI, launches come from the runtime's own events.
        if !run.cupti_active() && c.class == ConstructClass::Compute {
            for l in &c.launches {
                let grid = vec![l.gangs.unwrap_or(0) as u32];
                let mut block = vec![l.vector_length.unwrap_or(0) as u32];
                if l.workers.unwrap_or(1) > 1 {
                    block.push(l.workers.unwrap_or(1) as u32);
                }
                let name = l.kernel_name.clone().unwrap_or_else(|| "?".into());
                let k = kernel_entry(&mut ls.kernels, &name, grid, block);
                k.launches += 1;
                k.elapsed.add(host);
            }
        }
    }
    let mut kernel_ns = 0;
    for k in &run.kernels {
        let site = k
            .construct
            .map(|c| run.construct(c).site)
            .unwrap_or(crate::SiteId(usize::MAX));
        let (key, line) = if site.0 == usize::MAX {
            (("(unattributed)".to_string(), "?".to_string()), None)
        } else {
            key_of(site)
        };
        let f = funcs.entry(key).or_default();
        let ls = f.lines.entry(line).or_insert_with(|| LineSummary {
            line,
            ..Default::default()
        });
        let dims = |d: [u32; 3]| {
            let mut v = d.to_vec();
            while v.len() > 1 && v.last() == Some(&1) {
                v.pop();
            }
            v
        };
        let entry = kernel_entry(&mut ls.kernels, &k.name, dims(k.grid), dims(k.block));
        entry.launches += 1;
        entry.device.add(k.device_ns());
        entry.registers = entry.registers.max(k.registers);
        entry.shared_bytes = entry.shared_bytes.max(k.shared_bytes);
        if let Some(c) = k.construct {
            let top = run.top_level(c);
            if let Some(h) = run.construct(top).host_ns() {
                entry.elapsed.add(h);
            }
        }
        kernel_ns += k.device_ns();
    }
    let mut transfer_ns = 0;
    for cp in &run.copies {
        if !matches!(cp.kind, CopyKind::HostToDevice | CopyKind::DeviceToHost) {
            continue;
        }
        let (key, line) = match cp.construct {
            Some(c) => key_of(run.construct(c).site),
            None => (("(unattributed)".to_string(), "?".to_string()), None),
        };
        let f = funcs.entry(key).or_default();
        let ls = f.lines.entry(line).or_insert_with(|| LineSummary {
            line,
            ..Default::default()
        });
        let t = match ls.transfers.iter().position(|t| t.direction == Some(cp.kind)) {
            Some(i) => &mut ls.transfers[i],
            None => {
                ls.transfers.push(TransferLine {
                    direction: Some(cp.kind),
                    ..Default::default()
                });
                let last = ls.transfers.len() - 1;
                &mut ls.transfers[last]
            }
        };
        t.count += 1;
        t.bytes += cp.bytes;
        t.time.add(cp.duration_ns());
        t.device_timed = cp.source == CopySource::Cupti;
        let host_side = if cp.kind == CopyKind::HostToDevice {
            cp.src
        } else {
            cp.dst
        };
        match host_side {
            accprof_trace::MemoryKind::Pageable => t.pageable += 1,
            accprof_trace::MemoryKind::Pinned => t.pinned += 1,
            _ => {}
        }
        if let Some(v) = &cp.variable {
            if !t.variables.contains(v) {
                t.variables.push(v.clone());
            }
        }
        transfer_ns += cp.duration_ns();
    }
    let functions = funcs
        .into_iter()
        .map(|((file, function), acc)| {
            let mut lines: Vec<LineSummary> = acc.lines.into_values().collect();
            for l in &mut lines {
                l.transfers.sort_by_key(|t| t.direction);
            }
            FunctionSummary {
                file,
                function,
                device_label: device_label(run, acc.device_type).to_string(),
                device_number: acc.device_number,
                time_ns: acc.time_ns,
                lines,
            }
        })
        .collect();
    Summary {
        functions,
        cupti: run.cupti_active(),
        wall_ns: run.wall_ns(),
        kernel_ns,
        transfer_ns,
        host_construct_ns,
    }
}

fn kernel_entry<'a>(
    kernels: &'a mut Vec<KernelLine>,
    name: &str,
    grid: Vec<u32>,
    block: Vec<u32>,
) -> &'a mut KernelLine {
    let pos = kernels
        .iter()
        .position(|k| k.name == name && k.grid == grid && k.block == block);
    match pos {
        Some(i) => &mut kernels[i],
        None => {
            kernels.push(KernelLine {
                name: name.to_string(),
                grid,
                block,
                ..Default::default()
            });
            let last = kernels.len() - 1;
            &mut kernels[last]
        }
    }
}
