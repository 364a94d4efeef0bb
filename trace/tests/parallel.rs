//! The parallel reader reads every recorded fixture, intact or damaged,
//! exactly as the sequential one does: the same records in the same order,
//! the same losses and the same count of skipped records.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use accprof_trace::format::{BLOCK_HEADER_LEN, FILE_PREFIX_LEN};
use accprof_trace::*;

/// Every trace recorded on a GPU for the CLI's tests.
fn fixtures() -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures");
    let mut out = Vec::new();
    for gpu in std::fs::read_dir(&root).expect("fixtures dir") {
        let dir = gpu.expect("entry").path();
        if !dir.is_dir() {
            continue;
        }
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("gpu dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "trace"))
            .collect();
        paths.sort();
        for p in paths {
            let bytes = std::fs::read(&p).expect("fixture reads");
            out.push((p.display().to_string(), bytes));
        }
    }
    assert!(out.len() >= 10, "only {} fixtures found", out.len());
    out
}

/// The fixtures of at most 700 KiB: the larger ones are read whole by
/// `intact_fixtures_read_the_same`; damaging each of them at every block
/// adds minutes and no case the smaller ones lack.
fn small_fixtures() -> Vec<(String, Vec<u8>)> {
    fixtures()
        .into_iter()
        .filter(|(_, b)| b.len() <= 700 << 10)
        .collect()
}

#[derive(Debug, PartialEq)]
struct Read {
    version: (u16, u16),
    header: Header,
    records: Vec<Record>,
    losses: Vec<Loss>,
    skipped_unknown: u64,
}

fn drain(mut src: impl RecordSource) -> Read {
    let mut records = Vec::new();
    while let Some(r) = src.next_record() {
        records.push(r);
    }
    Read {
        version: src.version(),
        header: src.header().clone(),
        records,
        losses: src.losses().to_vec(),
        skipped_unknown: src.skipped_unknown(),
    }
}

/// [`drain`] through `for_each_record`, after taking the `first` records
/// one by one.
fn drain_lent(mut src: ParallelReader, first: usize) -> Read {
    let mut records = Vec::new();
    for _ in 0..first {
        records.extend(src.next_record());
    }
    src.for_each_record(|r| records.push(r.clone()));
    assert_eq!(src.next_record(), None, "nothing after for_each_record");
    Read {
        version: src.version(),
        header: src.header().clone(),
        records,
        losses: src.losses().to_vec(),
        skipped_unknown: src.skipped_unknown(),
    }
}

/// Reads `bytes` sequentially and with 0 (on the calling thread), 1, 2
/// and 3 workers, with and
/// without resync, and checks that all agree. Returns the sequential
/// read with resync (None when the header is refused, by both).
fn same_both_ways(what: &str, bytes: &[u8]) -> Option<Read> {
    let mut with_resync = None;
    for resync in [false, true] {
        let open = || Reader::new(Cursor::new(bytes.to_vec())).map(|r| r.with_resync(resync));
        let seq = match open() {
            Ok(r) => drain(r),
            Err(e) => {
                let p = Reader::new(Cursor::new(bytes.to_vec())).map(|r| r.parallel_with(2));
                assert_eq!(
                    p.err().map(|e| e.to_string()),
                    Some(e.to_string()),
                    "{what}"
                );
                return None;
            }
        };
        for workers in [0, 1, 2, 3] {
            let par = drain(open().expect("opened once").parallel_with(workers));
            assert_eq!(par, seq, "{what}, resync {resync}, {workers} workers");
        }
        let par = drain(open().expect("opened once").parallel());
        assert_eq!(par, seq, "{what}, resync {resync}, default workers");
        for workers in [0, 1, 2] {
            for first in [0, 1, 7] {
                let par = drain_lent(open().expect("opened once").parallel_with(workers), first);
                assert_eq!(
                    par, seq,
                    "{what}, resync {resync}, {workers} workers, lent after {first}"
                );
            }
        }
        if resync {
            with_resync = Some(seq);
        }
    }
    with_resync
}

/// Start offsets of the data blocks of an intact trace, and the end.
fn block_bounds(bytes: &[u8]) -> Vec<usize> {
    let len_at =
        |at: usize| u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
    let mut at = FILE_PREFIX_LEN;
    at += BLOCK_HEADER_LEN + len_at(at);
    let mut bounds = vec![at];
    while at < bytes.len() {
        at += BLOCK_HEADER_LEN + len_at(at);
        bounds.push(at);
    }
    assert_eq!(at, bytes.len());
    bounds
}

/// Rewrites the block at `at` with `edit` applied to its payload, fixing
/// its length, record count and checksum, so that it stays intact.
fn edit_block(bytes: &[u8], at: usize, edit: impl Fn(&mut Vec<u8>) -> i32) -> Vec<u8> {
    let word = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    let len = word(at + 4) as usize;
    let mut count = word(at + 8) as i64;
    let start = at + BLOCK_HEADER_LEN;
    let mut payload = bytes[start..start + len].to_vec();
    count += i64::from(edit(&mut payload));
    let mut out = bytes[..at + 4].to_vec();
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&(count as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out.extend_from_slice(&bytes[start + len..]);
    out
}

/// Offsets in `payload` of each framed record, with its tag and body start.
fn frames(payload: &[u8]) -> Vec<(usize, u8, usize)> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < payload.len() {
        let at = p;
        let tag = payload[p];
        p += 1;
        let (mut n, mut shift) = (0usize, 0);
        loop {
            let b = payload[p];
            p += 1;
            n |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b < 0x80 {
                break;
            }
        }
        out.push((at, tag, p));
        p += n;
    }
    out
}

#[test]
fn intact_fixtures_read_the_same() {
    let all = fixtures();
    let many = all.iter().filter(|(_, b)| b.len() > 16 << 10).count();
    assert!(
        many > all.len() / 2,
        "{many} of {} fixtures over 16 KiB",
        all.len()
    );
    for (name, bytes) in all {
        let t = same_both_ways(&name, &bytes).expect("header reads");
        assert!(t.losses.is_empty(), "{name}: {:?}", t.losses);
        // Some fixtures are short by nature (a program that dies after a
        // few constructs): every one holds records, most hold many.
        assert!(!t.records.is_empty(), "{name}: no records");
    }
}

#[test]
fn truncated_fixtures_read_the_same() {
    for (name, bytes) in small_fixtures() {
        let bounds = block_bounds(&bytes);
        let mut cuts: Vec<usize> = (1..8).map(|k| bytes.len() * k / 8).collect();
        // Inside the header, at a block boundary and just after one.
        cuts.extend([5, FILE_PREFIX_LEN + 3, bounds[0], bounds[0] + 1]);
        cuts.extend(bounds.get(1).map(|b| b + 9));
        cuts.retain(|&c| c < bytes.len());
        for cut in cuts {
            let r = same_both_ways(&format!("{name} cut at {cut}"), &bytes[..cut]);
            if let Some(r) = r {
                if cut > bounds[0] {
                    assert!(
                        !r.losses.is_empty() || bounds.contains(&cut),
                        "{name} {cut}"
                    );
                }
            }
        }
    }
}

#[test]
fn corrupted_fixtures_read_the_same() {
    for (name, bytes) in small_fixtures() {
        let bounds = block_bounds(&bytes);
        let data = bounds[0];
        // Flipped bytes: in a block header, in a payload, in the last block.
        let mut spots = vec![data, data + 5, data + 20, bytes.len() - 3];
        spots.extend((1..5).map(|k| data + (bytes.len() - data) * k / 5));
        for &at in &spots {
            let mut d = bytes.clone();
            d[at] ^= 0x5a;
            let r = same_both_ways(&format!("{name} byte {at} flipped"), &d).expect("header");
            assert!(!r.losses.is_empty(), "{name} byte {at}");
        }
        // Two flipped blocks, and garbage between blocks.
        let mut d = bytes.clone();
        d[spots[4]] ^= 1;
        d[spots[6]] ^= 1;
        same_both_ways(&format!("{name} two blocks flipped"), &d);
        let mut d = bytes[..data].to_vec();
        d.extend_from_slice(b"garbage ACBK and more garbage");
        d.extend_from_slice(&bytes[data..]);
        same_both_ways(&format!("{name} garbage before the data"), &d);
    }
}

#[test]
fn malformed_and_unknown_records_read_the_same() {
    let mut malformed = 0;
    for (name, bytes) in small_fixtures() {
        let bounds = block_bounds(&bytes);
        for &at in &bounds[..bounds.len() - 1] {
            // A record of an unknown kind at the start of an intact block.
            let d = edit_block(&bytes, at, |p| {
                p.splice(0..0, [200u8, 3, 1, 2, 3]);
                1
            });
            let r = same_both_ways(&format!("{name} unknown kind in block at {at}"), &d)
                .expect("header");
            assert_eq!(r.skipped_unknown, 1, "{name}");
            assert!(r.losses.is_empty(), "{name}");
            // An OpenACC event with kind 0 in the middle of an intact block:
            // the rest of that block is lost, the rest of the trace is read.
            let d = edit_block(&bytes, at, |p| {
                let f = frames(p);
                if let Some(&(_, _, body)) = f.iter().skip(f.len() / 2).find(|(_, t, _)| *t == 5) {
                    p[body] = 0;
                }
                0
            });
            if d != bytes {
                malformed += 1;
                let r = same_both_ways(&format!("{name} malformed record in block at {at}"), &d)
                    .expect("header");
                assert_eq!(r.losses.len(), 1, "{name}: {:?}", r.losses);
                assert!(r.losses[0].reason.contains("malformed"), "{:?}", r.losses);
            }
        }
    }
    assert!(malformed > 5, "{malformed} malformed blocks tried");
}
