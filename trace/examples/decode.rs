//! Decodes a trace and counts its records: the trace crate's read speed
//! alone, without any model. `bench/load.sh` times it.
//!
//! Usage: decode [--parallel | --workers N] TRACE

use accprof_trace::{Reader, Record, RecordSource};
use std::io::BufReader;
use std::time::Instant;

fn count(mut src: impl RecordSource) -> (u64, u64, usize) {
    let (mut records, mut acc) = (0u64, 0u64);
    src.for_each_record(|r| {
        records += 1;
        if let Record::Acc(_) = r {
            acc += 1;
        }
    });
    (records, acc, src.losses().len())
}

fn main() {
    let mut parallel = false;
    let mut workers = None;
    let mut path = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--parallel" => parallel = true,
            "--workers" => workers = args.next().and_then(|n| n.parse::<usize>().ok()),
            _ => path = Some(a),
        }
    }
    let Some(path) = path else {
        eprintln!("usage: decode [--parallel | --workers N] TRACE");
        std::process::exit(2);
    };
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("decode: {path}: {e}");
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    let reader = match Reader::new(BufReader::with_capacity(1 << 17, file)) {
        Ok(r) => r.with_resync(true),
        Err(e) => {
            eprintln!("decode: {path}: {e}");
            std::process::exit(2);
        }
    };
    let (records, acc, losses) = if let Some(n) = workers {
        count(reader.parallel_with(n))
    } else if parallel {
        count(reader.parallel())
    } else {
        count(reader)
    };
    let s = t0.elapsed().as_secs_f64();
    println!(
        "{records} records ({acc} acc_prof events), {losses} losses, {s:.2} s, {:.1} M acc events/s",
        acc as f64 / s / 1e6
    );
}
