//! A protobuf encoder for the few messages of Perfetto's trace format the
//! sink writes (`Trace`, `TracePacket`, `TrackDescriptor`, `TrackEvent`,
//! `DebugAnnotation`), and their field numbers. Written by hand: those
//! messages use a dozen stable fields, while the crates that carry
//! Perfetto's schema (generated with prost from the full protos) bring
//! prost, its build step and thousands of generated types for those dozen
//! fields, and would buffer each message as a struct of owned `String`s.
//! Here a message is built in a reusable buffer and copied out with its
//! length.

/// A protobuf message being built: field keys, varints and
/// length-delimited fields, written into a reusable buffer.
#[derive(Default)]
pub struct Proto {
    pub buf: Vec<u8>,
}

impl Proto {
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    pub(super) fn key(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }

    pub fn uint(&mut self, field: u32, v: u64) {
        self.key(field, 0);
        self.varint(v);
    }

    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, 1);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn str(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    /// A nested message, written by `f` into `scratch` and copied in with
    /// its length.
    pub fn message(&mut self, field: u32, scratch: &mut Proto, f: impl FnOnce(&mut Proto)) {
        scratch.buf.clear();
        f(scratch);
        self.bytes(field, &scratch.buf);
    }
}

// Field numbers of perfetto/trace/trace_packet.proto and track_event/*.proto.
pub(super) mod field {
    pub const TRACE_PACKET: u32 = 1;
    pub const PACKET_TIMESTAMP: u32 = 8;
    pub const PACKET_SEQUENCE_ID: u32 = 10;
    pub const PACKET_TRACK_EVENT: u32 = 11;
    pub const PACKET_TRACK_DESCRIPTOR: u32 = 60;
    pub const TRACK_UUID: u32 = 1;
    pub const TRACK_NAME: u32 = 2;
    pub const TRACK_PARENT_UUID: u32 = 5;
    pub const EVENT_DEBUG_ANNOTATIONS: u32 = 4;
    pub const EVENT_TYPE: u32 = 9;
    pub const EVENT_TRACK_UUID: u32 = 11;
    pub const EVENT_CATEGORIES: u32 = 22;
    pub const EVENT_NAME: u32 = 23;
    pub const EVENT_FLOW_IDS: u32 = 47;
    pub const EVENT_TERMINATING_FLOW_IDS: u32 = 48;
    pub const ANNOTATION_UINT: u32 = 3;
    pub const ANNOTATION_STRING: u32 = 6;
    pub const ANNOTATION_NAME: u32 = 10;
    pub const TYPE_SLICE_BEGIN: u64 = 1;
    pub const TYPE_SLICE_END: u64 = 2;
    pub const TYPE_INSTANT: u64 = 3;
}
