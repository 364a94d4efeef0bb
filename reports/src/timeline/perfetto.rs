//! The Perfetto protobuf sink (ui.perfetto.dev): a track descriptor per
//! process and track, and each slice as a SLICE_BEGIN/SLICE_END pair of
//! track events, ends written in time order and nested per track (slices
//! that overlap without nesting go to extra lanes of their track). The
//! messages are written with a small encoder of their own ([`Proto`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, Write};

use super::sink::{Arg, Counts, Instant, Slice, TimelineSink, Track};
use crate::export::RunInput;

mod proto;

use proto::field;
pub use proto::Proto;

/// The sequence id of every packet (one writer).
const SEQUENCE: u64 = 1;

/// Lanes a track may split into when its slices overlap without nesting
/// (a slice that fits none of them is cut at the end of the one it
/// overlaps).
const MAX_LANES: u64 = 8;

/// Perfetto's protobuf trace: a `Trace` is a sequence of `packet` fields,
/// so each `TracePacket` is written as it comes. Slices become
/// SLICE_BEGIN/SLICE_END pairs, written in time order (slices come in
/// start order; the ends still open wait in a heap until a later start);
/// on each track the open ends form a stack, so the pairs nest as
/// Perfetto requires.
pub struct PerfettoSink<W: Write> {
    out: W,
    packet: Proto,
    msg: Proto,
    inner: Proto,
    /// Per (track, lane): ends of the open slices, innermost last.
    open: HashMap<u64, Vec<u64>>,
    /// Every open slice's end, earliest first; of equal ends, the inner
    /// slice (pushed later) first.
    pending: BinaryHeap<Reverse<(u64, Reverse<u64>, u64)>>,
    pushed: u64,
    /// Tracks known.
    tracks: HashMap<u64, Track>,
}

impl<W: Write> PerfettoSink<W> {
    pub fn new(out: W) -> Self {
        PerfettoSink {
            out,
            packet: Proto::default(),
            msg: Proto::default(),
            inner: Proto::default(),
            open: HashMap::new(),
            pending: BinaryHeap::new(),
            pushed: 0,
            tracks: HashMap::new(),
        }
    }

    fn emit(&mut self) -> io::Result<()> {
        let mut head = Proto::default();
        head.key(field::TRACE_PACKET, 2);
        head.varint(self.packet.buf.len() as u64);
        self.out.write_all(&head.buf)?;
        self.out.write_all(&self.packet.buf)
    }

    fn descriptor(&mut self, uuid: u64, parent: Option<u64>, name: &str) -> io::Result<()> {
        self.packet.buf.clear();
        self.packet.uint(field::PACKET_SEQUENCE_ID, SEQUENCE);
        self.packet
            .message(field::PACKET_TRACK_DESCRIPTOR, &mut self.msg, |m| {
                m.uint(field::TRACK_UUID, uuid);
                m.str(field::TRACK_NAME, name);
                if let Some(p) = parent {
                    m.uint(field::TRACK_PARENT_UUID, p);
                }
            });
        self.emit()
    }

    fn end(&mut self, track: u64, t: u64) -> io::Result<()> {
        self.packet.buf.clear();
        self.packet.uint(field::PACKET_TIMESTAMP, t);
        self.packet.uint(field::PACKET_SEQUENCE_ID, SEQUENCE);
        self.packet
            .message(field::PACKET_TRACK_EVENT, &mut self.msg, |m| {
                m.uint(field::EVENT_TYPE, field::TYPE_SLICE_END);
                m.uint(field::EVENT_TRACK_UUID, track);
            });
        self.emit()
    }

    /// Ends the slices that ended by `t`, in time order.
    fn close_until(&mut self, t: u64) -> io::Result<()> {
        while let Some(&Reverse((end, _, lane))) = self.pending.peek() {
            if end > t {
                break;
            }
            self.pending.pop();
            if let Some(stack) = self.open.get_mut(&lane) {
                stack.pop();
            }
            self.end(lane, end)?;
        }
        Ok(())
    }
}

/// An event's arguments as debug annotations.
fn annotations(m: &mut Proto, inner: &mut Proto, args: &[(&'static str, Arg<'_>)]) {
    for (k, v) in args {
        m.message(field::EVENT_DEBUG_ANNOTATIONS, inner, |a| {
            a.str(field::ANNOTATION_NAME, k);
            match v {
                Arg::Str(x) => a.str(field::ANNOTATION_STRING, x),
                Arg::Int(x) => a.uint(field::ANNOTATION_UINT, *x),
            }
        });
    }
}

fn lane_uuid(track: u64, lane: u64) -> u64 {
    track | (lane << 56)
}

impl<W: Write> TimelineSink for PerfettoSink<W> {
    fn process(&mut self, id: u64, _pid: u32, name: &str) -> io::Result<()> {
        self.descriptor(id, None, name)
    }

    fn track(&mut self, t: &Track) -> io::Result<()> {
        self.descriptor(t.id, Some(t.process), &t.name)?;
        self.tracks.insert(t.id, t.clone());
        Ok(())
    }

    fn slice(&mut self, s: &Slice<'_>) -> io::Result<()> {
        // The first lane where the slice nests in what is open (or where
        // nothing is open once the finished slices are closed).
        self.close_until(s.start_ns)?;
        let mut chosen = None;
        for lane in 0..MAX_LANES {
            let id = lane_uuid(s.track, lane);
            match self.open.get(&id).and_then(|v| v.last()) {
                Some(&e) if e < s.end_ns => continue,
                _ => {
                    chosen = Some(id);
                    break;
                }
            }
        }
        let (id, end_ns) = match chosen {
            Some(id) => (id, s.end_ns),
            None => {
                let id = lane_uuid(s.track, MAX_LANES - 1);
                let cut = self
                    .open
                    .get(&id)
                    .and_then(|v| v.last())
                    .copied()
                    .unwrap_or(s.end_ns);
                (id, cut.min(s.end_ns))
            }
        };
        if id != s.track && !self.open.contains_key(&id) {
            let name = self
                .tracks
                .get(&s.track)
                .map(|t| format!("{} (overlapping)", t.name))
                .unwrap_or_default();
            self.descriptor(id, Some(s.track), &name)?;
        }
        self.packet.buf.clear();
        self.packet.uint(field::PACKET_TIMESTAMP, s.start_ns);
        self.packet.uint(field::PACKET_SEQUENCE_ID, SEQUENCE);
        let inner = &mut self.inner;
        self.packet
            .message(field::PACKET_TRACK_EVENT, &mut self.msg, |m| {
                m.uint(field::EVENT_TYPE, field::TYPE_SLICE_BEGIN);
                m.uint(field::EVENT_TRACK_UUID, id);
                m.str(field::EVENT_CATEGORIES, s.category);
                m.str(field::EVENT_NAME, s.name);
                annotations(m, inner, s.args);
                for f in s.flows_out {
                    m.fixed64(field::EVENT_FLOW_IDS, *f);
                }
                if let Some(f) = s.flow_in {
                    m.fixed64(field::EVENT_TERMINATING_FLOW_IDS, f);
                }
            });
        self.emit()?;
        self.open.entry(id).or_default().push(end_ns);
        self.pushed += 1;
        self.pending
            .push(Reverse((end_ns, Reverse(self.pushed), id)));
        Ok(())
    }

    fn instant(&mut self, i: &Instant<'_>) -> io::Result<()> {
        // Packets go out in time order: the slices ended by now first.
        self.close_until(i.at_ns)?;
        self.packet.buf.clear();
        self.packet.uint(field::PACKET_TIMESTAMP, i.at_ns);
        self.packet.uint(field::PACKET_SEQUENCE_ID, SEQUENCE);
        let inner = &mut self.inner;
        self.packet
            .message(field::PACKET_TRACK_EVENT, &mut self.msg, |m| {
                m.uint(field::EVENT_TYPE, field::TYPE_INSTANT);
                m.uint(field::EVENT_TRACK_UUID, i.track);
                m.str(field::EVENT_CATEGORIES, i.category);
                m.str(field::EVENT_NAME, i.name);
                annotations(m, inner, i.args);
            });
        self.emit()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.close_until(u64::MAX)?;
        self.out.flush()
    }
}

/// The runs as a Perfetto protobuf trace.
pub fn write_perfetto<W: Write>(runs: &[RunInput<'_>], out: W) -> io::Result<Counts> {
    let mut sink = PerfettoSink::new(out);
    super::walk::write(runs, &mut sink)
}
