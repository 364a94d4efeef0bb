//! Lists what a trace says about the host side of its CUDA driver calls:
//! the process start, driver spans by op and by thread (and whether each
//! thread also made OpenACC events), and the notes about driver spans. For
//! checking a recording on the GPU machine; the analyzer reads the same
//! records.
//!
//! Usage: driver_spans TRACE

use std::collections::{BTreeMap, BTreeSet};

use accprof_trace::{read_file, DriverOp, Record};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: driver_spans TRACE");
        std::process::exit(2);
    };
    let t = match read_file(std::path::Path::new(&path)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("driver_spans: {path}: {e}");
            std::process::exit(2);
        }
    };
    let h = &t.header;
    println!("format {}.{}", t.version.0, t.version.1);
    println!("cupti: {:?}", h.sources.cupti);
    match h.process_start_ns {
        Some(p) => println!(
            "process start: {:.3} ms before the collector's start",
            h.start_clock_ns.wrapping_sub(p) as i64 as f64 / 1e6
        ),
        None => println!("process start: not recorded"),
    }
    let mut by_op: BTreeMap<DriverOp, (u64, u64)> = BTreeMap::new();
    let mut by_thread: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut acc_threads = BTreeSet::new();
    let mut bad = 0u64;
    for r in &t.records {
        match r {
            Record::DriverSpan(d) => {
                if d.end_ns < d.start_ns || d.start_ns < h.start_clock_ns {
                    bad += 1;
                }
                let o = by_op.entry(d.op).or_default();
                o.0 += 1;
                o.1 += d.duration_ns();
                let th = by_thread.entry(d.thread).or_default();
                th.0 += 1;
                th.1 += d.duration_ns();
            }
            Record::Acc(a) => {
                acc_threads.insert(a.thread);
            }
            Record::Diagnostic { message, .. }
                if message.contains("driver span") || message.contains("ThreadIdType") =>
            {
                println!("note: {message}");
            }
            _ => {}
        }
    }
    let total: u64 = by_op.values().map(|v| v.0).sum();
    println!(
        "driver spans: {total} (ending before they start or before the collector's start: {bad})"
    );
    for (op, (n, ns)) in &by_op {
        println!("  {op:?}: {n} calls, {:.3} ms", *ns as f64 / 1e6);
    }
    for (thread, (n, ns)) in &by_thread {
        let acc = if acc_threads.contains(thread) {
            "with OpenACC events"
        } else {
            "no OpenACC events"
        };
        println!(
            "  thread {thread}: {n} calls, {:.3} ms ({acc})",
            *ns as f64 / 1e6
        );
    }
}
