//! The size budget of DESIGN.md: 32 bytes per event or less on a realistic
//! mix.

#[path = "support/mix.rs"]
mod mix;

use mix::Flavor;

fn bytes_per_event(flavor: Flavor) -> f64 {
    let recs = mix::records(flavor, 20_000);
    let bytes = mix::write_all(&mix::sample_header(), &recs);
    // The mix must read back as written, or the figure means nothing.
    let back = accprof_trace::read_trace(&bytes[..]).expect("reads");
    assert!(back.losses.is_empty());
    assert!(back.records == recs);
    bytes.len() as f64 / mix::event_count(&recs) as f64
}

#[test]
fn gcc_mix_fits_the_budget() {
    let b = bytes_per_event(Flavor::Gcc);
    eprintln!("gcc mix: {b:.2} bytes/event");
    assert!(b <= 32.0, "{b:.2} bytes/event");
}

#[test]
fn nvhpc_mix_fits_the_budget() {
    let b = bytes_per_event(Flavor::Nvhpc);
    eprintln!("nvhpc mix: {b:.2} bytes/event");
    assert!(b <= 32.0, "{b:.2} bytes/event");
}

/// Bytes a batch of spans adds to a trace, per span: the trace with them
/// less the trace without.
fn bytes_per_span(spans: &[accprof_trace::Record]) -> f64 {
    let empty = mix::write_all(&mix::sample_header(), &[]);
    let bytes = mix::write_all(&mix::sample_header(), spans);
    let back = accprof_trace::read_trace(&bytes[..]).expect("reads");
    assert!(back.records == spans);
    (bytes.len() - empty.len()) as f64 / spans.len() as f64
}

/// A launch storm's driver spans as the collector writes them: one thread,
/// a call every 2 us lasting under 10 us, no call id or correlation.
#[test]
fn storm_driver_spans_take_under_8_bytes() {
    use accprof_trace::{DriverOp, DriverSpan, Record};
    let mut rng = mix::Rng::new(0x5907);
    let mut t = 81_234_600_000_000;
    let spans = |ids: bool, rng: &mut mix::Rng, t: &mut u64| {
        (0..20_000u32)
            .map(|i| {
                *t += 2_000;
                let op = [DriverOp::Launch, DriverOp::Synchronize, DriverOp::Other][i as usize % 3];
                Record::DriverSpan(DriverSpan {
                    thread: 48_213,
                    start_ns: *t,
                    end_ns: *t + rng.range(0, 10_000),
                    op,
                    cbid: if ids { 300 + i % 200 } else { 0 },
                    correlation: if ids { 1_000 + i } else { 0 },
                })
            })
            .collect::<Vec<_>>()
    };
    let bare = bytes_per_span(&spans(false, &mut rng, &mut t));
    let with_ids = bytes_per_span(&spans(true, &mut rng, &mut t));
    eprintln!("storm spans: {bare:.2} bytes/span, {with_ids:.2} with call id and correlation");
    assert!(bare < 8.0, "{bare:.2} bytes/span");
    // Absent ids cost nothing: each present one costs at least a byte.
    assert!(with_ids >= bare + 2.0, "{bare:.2} vs {with_ids:.2}");
}
