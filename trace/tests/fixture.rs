//! A real format-1.0 trace, written by the collector on the H200, keeps
//! reading: the guard against silent format changes.

#[path = "support/mix.rs"]
mod mix;

use accprof_trace::*;
use std::path::Path;

fn fixture() -> Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200_heat2d_data.trace");
    read_file(&path).expect("fixture reads")
}

#[test]
fn the_h200_fixture_reads_whole() {
    let t = fixture();
    assert_eq!(t.version, (1, 0));
    assert!(t.losses.is_empty(), "{:?}", t.losses);
    assert_eq!(t.skipped_unknown, 0);
    assert!(t.header.pid > 0);
    assert!(t.header.start_unix_ns > 0);
    let count = |f: fn(&Record) -> bool| t.records.iter().filter(|r| f(r)).count();
    assert_eq!(t.records.len(), 479);
    assert_eq!(count(|r| matches!(r, Record::Acc(_))), 296);
    assert_eq!(count(|r| matches!(r, Record::Kernel(_))), 20);
    assert_eq!(count(|r| matches!(r, Record::Memcpy(_))), 45);
    assert_eq!(count(|r| matches!(r, Record::DriverCall(_))), 65);
    assert_eq!(count(|r| matches!(r, Record::Hash(_))), 45);
    // Sane values, not just a successful parse.
    for r in &t.records {
        match r {
            Record::Kernel(k) => {
                assert!(k.end_ns >= k.start_ns);
                assert!(k.block[0] >= 1 && k.grid[0] >= 1);
            }
            Record::Memcpy(m) => assert!(m.end_ns >= m.start_ns && m.bytes > 0),
            // Format 1.0 did not record the time spent hashing.
            Record::Hash(h) => assert_eq!(h.hash_ns, None),
            _ => {}
        }
    }
    let bytes = std::fs::metadata(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200_heat2d_data.trace"),
    )
    .expect("fixture")
    .len();
    let events = mix::event_count(&t.records) as u64;
    assert!(bytes <= 32 * events, "{bytes} bytes for {events} events");
}

#[test]
fn the_h200_fixture_survives_a_rewrite() {
    let t = fixture();
    let again = read_trace(&mix::write_all(&t.header, &t.records)[..]).expect("reads");
    assert_eq!(again.header, t.header);
    assert_eq!(again.records, t.records);
}
