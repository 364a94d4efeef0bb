//! Damaged, truncated, foreign and future inputs: never a panic, never a
//! record that was not written, and every loss reported.

#[path = "support/mix.rs"]
mod mix;

use accprof_trace::*;

/// A small trace of several blocks and where its blocks start.
struct Sample {
    bytes: Vec<u8>,
    /// Offset of the first data block (= end of the header block).
    data_start: usize,
    /// Start offset of each data block, plus the end of the file.
    bounds: Vec<usize>,
    /// The records of each block.
    blocks: Vec<Vec<Record>>,
}

impl Sample {
    fn new() -> Self {
        let all = mix::records(mix::Flavor::Gcc, 2);
        let groups: Vec<Vec<Record>> = vec![
            all[..12].to_vec(), // definitions
            all[12..30].to_vec(),
            all[30..31].to_vec(),
            all[31..].to_vec(),
        ];
        let mut w = Writer::new(Vec::new(), &mix::sample_header()).expect("header");
        let data_start = w.bytes_written() as usize;
        let mut bounds = vec![data_start];
        for g in &groups {
            for r in g {
                w.write(r).expect("write");
            }
            w.flush().expect("flush");
            bounds.push(w.bytes_written() as usize);
        }
        let bytes = w.finish().expect("finish");
        assert_eq!(bytes.len(), *bounds.last().expect("end"));
        Sample {
            bytes,
            data_start,
            bounds,
            blocks: groups,
        }
    }

    /// The records of blocks `0..k`.
    fn first_blocks(&self, k: usize) -> Vec<Record> {
        self.blocks[..k].concat()
    }

    /// The records of every block but `k`.
    fn all_but(&self, k: usize) -> Vec<Record> {
        let mut v = self.first_blocks(k);
        for b in &self.blocks[k + 1..] {
            v.extend_from_slice(b);
        }
        v
    }

    /// Index of the data block holding byte `pos`.
    fn block_of(&self, pos: usize) -> usize {
        self.bounds
            .windows(2)
            .position(|w| w[0] <= pos && pos < w[1])
            .expect("inside a block")
    }
}

fn read_resync(bytes: &[u8]) -> Result<Trace, TraceError> {
    let mut r = Reader::new(bytes)?.with_resync(true);
    let records: Vec<Record> = r.by_ref().collect();
    Ok(Trace {
        version: r.version(),
        header: r.header().clone(),
        records,
        losses: r.losses().to_vec(),
        skipped_unknown: r.skipped_unknown(),
    })
}

#[test]
fn truncation_at_every_offset() {
    let s = Sample::new();
    assert!(s.blocks.len() >= 3 && s.bytes.len() < 4096);
    for cut in 0..=s.bytes.len() {
        let input = &s.bytes[..cut];
        for resync in [false, true] {
            let res = if resync {
                read_resync(input)
            } else {
                read_trace(input)
            };
            if cut == 0 {
                assert!(matches!(res, Err(TraceError::Empty)), "cut {cut}");
                continue;
            }
            if cut < s.data_start {
                match res {
                    Err(TraceError::Truncated { bytes }) => assert_eq!(bytes, cut as u64),
                    other => panic!("cut {cut}: {other:?}"),
                }
                continue;
            }
            let t = res.unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            let whole = s.bounds.iter().filter(|&&b| b <= cut).count() - 1;
            assert_eq!(t.records, s.first_blocks(whole), "cut {cut}");
            let start = s.bounds[whole];
            if cut == start {
                assert!(t.losses.is_empty(), "cut {cut}: {:?}", t.losses);
            } else {
                assert_eq!(t.losses.len(), 1, "cut {cut}");
                let loss = &t.losses[0];
                assert_eq!(loss.offset, start as u64, "cut {cut}");
                assert_eq!(loss.bytes, (cut - start) as u64, "cut {cut}");
                assert!(loss.reason.contains("truncated"), "{}", loss.reason);
            }
        }
    }
}

#[test]
fn every_byte_flipped_bit_by_bit_and_whole_is_caught() {
    let patterns: Vec<u8> = (0..8).map(|b| 1u8 << b).chain([0xff]).collect();
    flips_are_caught(&patterns);
}

/// All 255 ways to change each byte; slow in a debug build, so run it with
/// `cargo test -p accprof-trace --release -- --ignored`.
#[test]
#[ignore = "exhaustive; run in release"]
fn every_byte_flip_of_every_pattern_is_caught() {
    let patterns: Vec<u8> = (1..=255).collect();
    flips_are_caught(&patterns);
}

fn flips_are_caught(patterns: &[u8]) {
    let s = Sample::new();
    let len = s.bytes.len() as u64;
    let mut damaged = s.bytes.clone();
    for pos in 0..s.bytes.len() {
        for &x in patterns {
            damaged[pos] = s.bytes[pos] ^ x;
            let res = read_trace(&damaged[..]);
            let ctx = || format!("byte {pos} ^ {x:#04x}");
            match pos {
                0..=7 => assert!(matches!(res, Err(TraceError::NotATrace)), "{}", ctx()),
                // The header's checksummed copy of the version tells a
                // damaged version field from another format.
                8..=11 => match res {
                    Err(TraceError::BadHeader { reason }) => assert!(
                        reason.contains(&format!(
                            "under its checksum, says {FORMAT_MAJOR}.{FORMAT_MINOR} (a damaged byte, not another format)"
                        )),
                        "{}: {reason}",
                        ctx()
                    ),
                    other => panic!("{}: {other:?}", ctx()),
                },
                p if p < s.data_start => assert!(
                    matches!(
                        res,
                        Err(TraceError::BadHeader { .. } | TraceError::Truncated { .. })
                    ),
                    "{}: {res:?}",
                    ctx()
                ),
                p => {
                    let k = s.block_of(p);
                    let t = res.unwrap_or_else(|e| panic!("{}: {e}", ctx()));
                    assert_eq!(t.records, s.first_blocks(k), "{}", ctx());
                    assert_eq!(t.losses.len(), 1, "{}", ctx());
                    assert_eq!(t.losses[0].offset, s.bounds[k] as u64, "{}", ctx());
                    assert_eq!(t.losses[0].bytes, len - s.bounds[k] as u64, "{}", ctx());

                    let t = read_resync(&damaged).unwrap_or_else(|e| panic!("{}: {e}", ctx()));
                    assert_eq!(t.records, s.all_but(k), "{} (resync)", ctx());
                    assert_eq!(t.losses.len(), 1, "{}", ctx());
                    assert_eq!(t.losses[0].offset, s.bounds[k] as u64, "{}", ctx());
                    let block_len = (s.bounds[k + 1] - s.bounds[k]) as u64;
                    assert_eq!(t.losses[0].bytes, block_len, "{} (resync)", ctx());
                }
            }
        }
        damaged[pos] = s.bytes[pos];
    }
}

#[test]
fn garbage_between_blocks_is_skipped_with_resync() {
    let s = Sample::new();
    let at = s.bounds[2];
    let mut bytes = s.bytes[..at].to_vec();
    // Junk that even contains a block magic with nonsense after it.
    bytes.extend_from_slice(b"junk ACBK\xff\xff\xff\x00 more junk");
    let junk = bytes.len() - at;
    bytes.extend_from_slice(&s.bytes[at..]);

    let t = read_trace(&bytes[..]).expect("reads");
    assert_eq!(t.records, s.first_blocks(2));
    assert_eq!(t.losses.len(), 1);
    assert_eq!(t.losses[0].offset, at as u64);
    assert_eq!(t.losses[0].bytes, (bytes.len() - at) as u64);

    let t = read_resync(&bytes).expect("reads");
    assert_eq!(t.records, s.first_blocks(s.blocks.len()));
    assert_eq!(t.losses.len(), 1);
    assert_eq!(t.losses[0].offset, at as u64);
    assert_eq!(t.losses[0].bytes, junk as u64);
    assert!(
        t.losses[0].reason.contains("magic"),
        "{}",
        t.losses[0].reason
    );
}

// ---- hand-made blocks -------------------------------------------------

fn leb(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn read_leb(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let x = b[*pos];
        *pos += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

type Frame = (u8, Vec<u8>);

/// A trace file taken apart: prefix, header payload, data block frames.
struct Layout {
    prefix: Vec<u8>,
    header: Vec<u8>,
    blocks: Vec<Vec<Frame>>,
}

impl Layout {
    fn parse(b: &[u8]) -> Layout {
        let prefix = b[..12].to_vec();
        let hlen = u32_at(b, 16) as usize;
        let header = b[28..28 + hlen].to_vec();
        let mut at = 28 + hlen;
        let mut blocks = Vec::new();
        while at < b.len() {
            let len = u32_at(b, at + 4) as usize;
            let payload = &b[at + 16..at + 16 + len];
            let mut frames = Vec::new();
            let mut p = 0;
            while p < payload.len() {
                let tag = payload[p];
                p += 1;
                let n = read_leb(payload, &mut p) as usize;
                frames.push((tag, payload[p..p + n].to_vec()));
                p += n;
            }
            blocks.push(frames);
            at += 16 + len;
        }
        Layout {
            prefix,
            header,
            blocks,
        }
    }

    fn block(out: &mut Vec<u8>, magic: &[u8; 4], count: usize, payload: &[u8]) {
        out.extend_from_slice(magic);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&(count as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        out.extend_from_slice(payload);
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = self.prefix.clone();
        Self::block(&mut out, b"ACHD", 1, &self.header);
        for frames in &self.blocks {
            let mut payload = Vec::new();
            for (tag, body) in frames {
                payload.push(*tag);
                leb(body.len() as u64, &mut payload);
                payload.extend_from_slice(body);
            }
            Self::block(&mut out, b"ACBK", frames.len(), &payload);
        }
        out
    }
}

#[test]
fn layout_helper_reproduces_the_writer() {
    let s = Sample::new();
    assert_eq!(Layout::parse(&s.bytes).bytes(), s.bytes);
}

#[test]
fn unknown_kinds_are_skipped_and_counted() {
    let s = Sample::new();
    let mut l = Layout::parse(&s.bytes);
    // Between delta-coded events, at the start and at the end of a block,
    // and one with an empty body, and tag 0.
    let b = &mut l.blocks[1];
    b.insert(5, (200, vec![1, 2, 3, 0xff]));
    b.insert(0, (99, vec![0x80, 0x80]));
    b.push((255, Vec::new()));
    b.push((0, vec![9; 300]));
    let t = read_trace(&l.bytes()[..]).expect("reads");
    assert!(t.losses.is_empty(), "{:?}", t.losses);
    assert_eq!(t.skipped_unknown, 4);
    assert_eq!(t.records, s.first_blocks(s.blocks.len()));
}

#[test]
fn newer_minor_versions_are_read() {
    let s = Sample::new();
    let mut l = Layout::parse(&s.bytes);
    l.prefix[10..12].copy_from_slice(&7u16.to_le_bytes());
    set_version_copy(&mut l, 1, 7);
    // A later minor may append header fields, append fields to known
    // bodies and add kinds.
    l.header.extend_from_slice(&[1, 2, 3, 4]);
    for frames in &mut l.blocks {
        for (_, body) in frames.iter_mut() {
            body.extend_from_slice(&[0xde, 0xad]);
        }
        frames.insert(1, (42, vec![7; 10]));
    }
    let t = read_trace(&l.bytes()[..]).expect("reads");
    assert_eq!(t.version, (1, 7));
    assert_eq!(t.header, mix::sample_header());
    assert!(t.losses.is_empty(), "{:?}", t.losses);
    assert_eq!(t.skipped_unknown, s.blocks.len() as u64);
    assert_eq!(t.records, s.first_blocks(s.blocks.len()));
}

/// Sets the copy of the version in the header (format 1.3 on), as a
/// writer of that version would.
fn set_version_copy(l: &mut Layout, major: u16, minor: u16) {
    let at = version_copy_at(l);
    l.header[at..at + 2].copy_from_slice(&major.to_le_bytes());
    l.header[at + 2..at + 4].copy_from_slice(&minor.to_le_bytes());
}

/// Where the copy of the version starts in the sample's header: before the
/// process start of 1.4 (a flag byte, then the value as a varint) and the
/// checks byte of 1.6.
fn version_copy_at(l: &Layout) -> usize {
    let tail = 1 + match mix::sample_header().process_start_ns {
        None => 1,
        Some(mut v) => {
            let mut n = 2;
            while v >= 0x80 {
                v >>= 7;
                n += 1;
            }
            n
        }
    };
    l.header.len() - tail - 4
}

#[test]
fn newer_and_older_majors_are_refused() {
    let s = Sample::new();
    for (major, minor) in [(2u16, 0u16), (3, 5), (0, 9), (u16::MAX, u16::MAX)] {
        // Written as that version: the header says it too.
        let mut l = Layout::parse(&s.bytes);
        l.prefix[8..10].copy_from_slice(&major.to_le_bytes());
        l.prefix[10..12].copy_from_slice(&minor.to_le_bytes());
        set_version_copy(&mut l, major, minor);
        let with_copy = l.bytes();
        // A header of another layout altogether.
        let mut foreign = with_copy[..12].to_vec();
        foreign.extend_from_slice(&[0x5a; 40]);
        for b in [with_copy, foreign] {
            check_refused(&b, major, minor);
        }
    }
}

#[test]
fn a_damaged_version_field_is_damage_not_another_format() {
    let s = Sample::new();
    // This version's trace: the header's copy says what the field said.
    for (at, x) in [(8, 0xffu8), (9, 0xff), (10, 0x01), (11, 0x01)] {
        let mut b = s.bytes.clone();
        b[at] ^= x;
        let err = read_trace(&b[..]).expect_err("refused");
        let msg = err.to_string();
        assert!(matches!(err, TraceError::BadHeader { .. }), "{msg}");
        assert!(
            msg.contains(&format!(
                "the header, under its checksum, says {FORMAT_MAJOR}.{FORMAT_MINOR} (a damaged byte, not another format)"
            )),
            "{msg}"
        );
        assert!(!msg.contains("use an accprof"), "{msg}");
    }
    // Before 1.3 the header holds no copy: a major byte flipped before an
    // intact format 1 header is damage, and so is a minor from 1.3 on
    // without the copy. Written as 1.0 (the header without its copy).
    let mut l = Layout::parse(&s.bytes);
    let at = version_copy_at(&l);
    l.header.truncate(at);
    l.prefix[10..12].copy_from_slice(&0u16.to_le_bytes());
    let old = l.bytes();
    let t = read_trace(&old[..]).expect("a 1.0 trace reads");
    assert_eq!(t.version, (1, 0));
    for (at, x, says) in [
        (
            9,
            0xffu8,
            "reads 65281.0 but the header after it is an intact format 1 header",
        ),
        (
            11,
            0x01,
            "reads 1.256 but the header lacks the copy of the version",
        ),
        (
            10,
            0x04,
            "reads 1.4 but the header lacks the copy of the version",
        ),
    ] {
        let mut b = old.clone();
        b[at] ^= x;
        let msg = read_trace(&b[..]).expect_err("refused").to_string();
        assert!(msg.contains(says), "{msg}");
        assert!(msg.contains("a damaged byte, not a newer format"), "{msg}");
    }
}

fn check_refused(b: &[u8], major: u16, minor: u16) {
    {
        let err = read_trace(b).expect_err("refused");
        match err {
            TraceError::UnsupportedVersion {
                found_major,
                found_minor,
            } => assert_eq!((found_major, found_minor), (major, minor)),
            ref e => panic!("{e:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains(&format!("{major}.{minor}")), "{msg}");
        assert!(
            msg.contains(&format!("{FORMAT_MAJOR}.{FORMAT_MINOR}")),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("use an accprof that supports {major}.x")),
            "{msg}"
        );
    }
}

#[test]
fn foreign_empty_and_short_inputs_have_their_own_errors() {
    assert!(matches!(read_trace(&b""[..]), Err(TraceError::Empty)));
    for short in [
        &b"A"[..],
        b"ACCPROF",
        b"ACCPROF\0",
        b"ACCPROF\0\x01\x00\x00",
    ] {
        match read_trace(short) {
            Err(TraceError::Truncated { bytes }) => assert_eq!(bytes, short.len() as u64),
            other => panic!("{short:?}: {other:?}"),
        }
    }
    for foreign in [
        &b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"[..],
        b"x",
        b"accprof\0\x01\x00\x00\x00",
        b"ACCPROF\x01\x01\x00\x00\x00",
        b"{\"traceEvents\": []}",
    ] {
        assert!(
            matches!(read_trace(foreign), Err(TraceError::NotATrace)),
            "{foreign:?}"
        );
    }
}

#[test]
fn error_messages_are_one_line() {
    let errors = [
        TraceError::Empty,
        TraceError::NotATrace,
        TraceError::Truncated { bytes: 5 },
        TraceError::UnsupportedVersion {
            found_major: 2,
            found_minor: 1,
        },
        TraceError::BadHeader {
            reason: "checksum mismatch".into(),
        },
        TraceError::RecordTooLarge { bytes: 1 << 30 },
        TraceError::Io(std::io::Error::other("disk full")),
    ];
    for e in errors {
        let m = e.to_string();
        assert!(!m.contains('\n') && !m.is_empty(), "{m:?}");
        eprintln!("{m}");
    }
}

#[test]
fn a_malformed_record_in_an_intact_block_costs_the_rest_of_that_block() {
    let s = Sample::new();
    let mut l = Layout::parse(&s.bytes);
    // A known kind with a body that ends too early, checksummed as if valid.
    l.blocks[1].insert(3, (5, vec![1]));
    let bytes = l.bytes();
    let t = read_trace(&bytes[..]).expect("reads");
    let mut want = s.first_blocks(1);
    want.extend_from_slice(&s.blocks[1][..3]);
    for b in &s.blocks[2..] {
        want.extend_from_slice(b);
    }
    assert_eq!(t.records, want);
    assert_eq!(t.losses.len(), 1);
    assert!(
        t.losses[0].reason.contains("malformed"),
        "{}",
        t.losses[0].reason
    );
    assert!(t.losses[0].offset > s.bounds[1] as u64 && t.losses[0].offset < s.bounds[2] as u64);
}

#[test]
fn a_block_with_a_wrong_count_is_refused_whole() {
    let s = Sample::new();
    let mut b = s.bytes.clone();
    let at = s.bounds[1];
    let count = u32_at(&b, at + 8);
    b[at + 8..at + 12].copy_from_slice(&(count - 1).to_le_bytes());
    let t = read_trace(&b[..]).expect("reads");
    assert_eq!(t.records, s.first_blocks(1));
    assert!(
        t.losses[0].reason.contains("count"),
        "{}",
        t.losses[0].reason
    );
}

/// Fails after `ok` bytes.
struct FailingReader<'a> {
    data: &'a [u8],
    ok: usize,
}

impl std::io::Read for FailingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.ok == 0 {
            return Err(std::io::Error::other("device went away"));
        }
        let n = buf.len().min(self.ok).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.ok -= n;
        Ok(n)
    }
}

#[test]
fn read_errors_after_the_header_become_a_loss() {
    let s = Sample::new();
    for fail_at in [s.bounds[1], s.bounds[1] + 5, s.bounds[2] + 30] {
        let t = read_trace(FailingReader {
            data: &s.bytes,
            ok: fail_at,
        })
        .expect("header was read");
        let k = s.block_of(fail_at);
        assert_eq!(t.records, s.first_blocks(k));
        assert!(
            t.losses
                .iter()
                .any(|l| l.reason.contains("device went away")),
            "{:?}",
            t.losses
        );
    }
    let err = read_trace(FailingReader {
        data: &s.bytes,
        ok: 20,
    })
    .expect_err("header not readable");
    assert!(matches!(err, TraceError::Io(_)), "{err:?}");
}
