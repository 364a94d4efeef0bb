//! Arbitrary bytes into the trace reader: it must never panic, loop or
//! allocate without bound, whatever the input.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The plain path: stops at the first damaged block.
    if let Ok(t) = accprof_trace::read_trace(data) {
        for loss in &t.losses {
            assert!(loss.offset <= data.len() as u64);
            assert!(loss.offset + loss.bytes <= data.len() as u64);
        }
    }
    // The resynchronising path: scans for the next intact block.
    if let Ok(r) = accprof_trace::Reader::new(data) {
        let mut r = r.with_resync(true);
        while r.next_record().is_some() {}
        for loss in r.losses() {
            assert!(loss.offset + loss.bytes <= data.len() as u64);
        }
    }
});
