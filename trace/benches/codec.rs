//! Codec throughput on one core: `cargo bench -p accprof-trace`.
//!
//! Writes and reads a realistic mix (see `tests/support/mix.rs`) of about
//! 2.5 million events. Criterion's `thrpt` line is in events per second
//! (one element = one record; all but a dozen are events). The size line
//! printed first gives bytes per event.

use std::hint::black_box;
use std::time::Duration;

use accprof_trace::{Reader, Writer};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

#[path = "../tests/support/mix.rs"]
mod mix;

const CONSTRUCTS: usize = 100_000;

fn codec(c: &mut Criterion) {
    let header = mix::sample_header();
    let recs = mix::records(mix::Flavor::Gcc, CONSTRUCTS);
    let events = mix::event_count(&recs);
    let bytes = mix::write_all(&header, &recs);
    println!(
        "mix: {events} events ({} records), {} bytes, {:.2} bytes/event",
        recs.len(),
        bytes.len(),
        bytes.len() as f64 / events as f64
    );

    let mut g = c.benchmark_group("codec");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(recs.len() as u64));

    let mut out = Vec::with_capacity(bytes.len() + (1 << 20));
    g.bench_function("write", |b| {
        b.iter(|| {
            out.clear();
            let mut w = Writer::new(&mut out, &header).expect("header");
            for r in &recs {
                w.write(r).expect("write");
            }
            w.finish().expect("finish");
        })
    });
    // (Empty when criterion was told to run only the read benchmark.)
    assert!(
        out.is_empty() || out == bytes,
        "the writer is deterministic"
    );

    g.bench_function("read", |b| {
        b.iter(|| {
            let mut r = Reader::new(&bytes[..]).expect("header");
            let mut n = 0usize;
            loop {
                // Looked at in place: moving it out would time a 168-byte
                // copy of the benchmark's own.
                let rec = r.next_record();
                if rec.is_none() {
                    break;
                }
                black_box(&rec);
                n += 1;
            }
            assert_eq!(n, recs.len());
        })
    });
    g.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
