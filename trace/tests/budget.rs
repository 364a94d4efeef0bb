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
