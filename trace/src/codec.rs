//! Record bodies and the header: encoding into a block buffer and decoding
//! straight from it. The layout is documented in [`crate::format`].
//!
//! Decoding uses the sticky-error [`Cursor`]: fields are read without a
//! branch per field and the record is checked once at its end.

use crate::format::*;
use crate::record::*;
use crate::varint::{put_bytes, put_varint, varint_array, Cursor, DResult, DecodeError, Enc};

/// Per-block delta state shared by encoder and decoder. Every block starts
/// from `DeltaState::default()`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct DeltaState {
    time: u64,
    region: u64,
    correlation: u32,
    host_ptr: u64,
    device_ptr: u64,
    thread: u32,
}

#[inline(always)]
fn put_delta(e: &mut Enc<'_>, last: &mut u64, v: u64) {
    e.zigzag(v.wrapping_sub(*last) as i64);
    *last = v;
}

#[inline(always)]
fn get_delta(c: &mut Cursor<'_>, last: &mut u64) -> u64 {
    let v = last.wrapping_add(c.zigzag() as u64);
    *last = v;
    v
}

#[inline(always)]
fn put_delta32(e: &mut Enc<'_>, last: &mut u32, v: u32) {
    e.zigzag(i64::from(v.wrapping_sub(*last) as i32));
    *last = v;
}

#[inline(always)]
fn get_delta32(c: &mut Cursor<'_>, last: &mut u32) -> u32 {
    let v = last.wrapping_add(c.zigzag_i32() as u32);
    *last = v;
    v
}

/// `v`, or (recording the error) `fallback` when the code was invalid.
#[inline(always)]
fn known<T>(c: &mut Cursor<'_>, v: Option<T>, fallback: T, what: &'static str) -> T {
    match v {
        Some(v) => v,
        None => {
            c.fail(DecodeError::Invalid(what));
            fallback
        }
    }
}

// ---- enum codes -------------------------------------------------------

fn copy_kind_code(k: CopyKind) -> u8 {
    match k {
        CopyKind::HostToDevice => 0,
        CopyKind::DeviceToHost => 1,
        CopyKind::DeviceToDevice => 2,
        CopyKind::HostToHost => 3,
        CopyKind::PeerToPeer => 4,
        CopyKind::Other => 5,
    }
}

fn copy_kind_from(v: u8) -> Option<CopyKind> {
    Some(match v {
        0 => CopyKind::HostToDevice,
        1 => CopyKind::DeviceToHost,
        2 => CopyKind::DeviceToDevice,
        3 => CopyKind::HostToHost,
        4 => CopyKind::PeerToPeer,
        5 => CopyKind::Other,
        _ => return None,
    })
}

fn memory_kind_code(k: MemoryKind) -> u8 {
    match k {
        MemoryKind::Unknown => 0,
        MemoryKind::Pageable => 1,
        MemoryKind::Pinned => 2,
        MemoryKind::Device => 3,
        MemoryKind::Array => 4,
        MemoryKind::Managed => 5,
    }
}

fn memory_kind_from(v: u8) -> Option<MemoryKind> {
    Some(match v {
        0 => MemoryKind::Unknown,
        1 => MemoryKind::Pageable,
        2 => MemoryKind::Pinned,
        3 => MemoryKind::Device,
        4 => MemoryKind::Array,
        5 => MemoryKind::Managed,
        _ => return None,
    })
}

fn driver_api_code(a: DriverApi) -> u8 {
    match a {
        DriverApi::Launch => 0,
        DriverApi::CopyHostToDevice => 1,
        DriverApi::CopyDeviceToHost => 2,
        DriverApi::CopyOther => 3,
        DriverApi::Memset => 4,
        DriverApi::Other => 5,
    }
}

fn driver_api_from(v: u8) -> Option<DriverApi> {
    Some(match v {
        0 => DriverApi::Launch,
        1 => DriverApi::CopyHostToDevice,
        2 => DriverApi::CopyDeviceToHost,
        3 => DriverApi::CopyOther,
        4 => DriverApi::Memset,
        5 => DriverApi::Other,
        _ => return None,
    })
}

fn driver_op_code(op: DriverOp) -> u8 {
    // Declaration order, as the format says.
    DriverOp::ALL.iter().position(|&o| o == op).unwrap_or(0) as u8
}

fn driver_op_from(v: u8) -> Option<DriverOp> {
    DriverOp::ALL.get(usize::from(v)).copied()
}

fn hash_mode_code(m: HashMode) -> u8 {
    match m {
        HashMode::Off => 0,
        HashMode::Sampled => 1,
        HashMode::Full => 2,
    }
}

fn hash_mode_from(v: u8) -> Option<HashMode> {
    Some(match v {
        0 => HashMode::Off,
        1 => HashMode::Sampled,
        2 => HashMode::Full,
        _ => return None,
    })
}

fn drop_source_code(s: DropSource) -> u8 {
    match s {
        DropSource::AccProf => 0,
        DropSource::Cupti => 1,
        DropSource::Collector => 2,
    }
}

fn drop_source_from(v: u8) -> Option<DropSource> {
    Some(match v {
        0 => DropSource::AccProf,
        1 => DropSource::Cupti,
        2 => DropSource::Collector,
        _ => return None,
    })
}

fn level_code(l: Level) -> u8 {
    match l {
        Level::Info => 0,
        Level::Warning => 1,
        Level::Error => 2,
    }
}

fn level_from(v: u8) -> Option<Level> {
    Some(match v {
        0 => Level::Info,
        1 => Level::Warning,
        2 => Level::Error,
        _ => return None,
    })
}

// ---- framing ----------------------------------------------------------

/// The kind tag of a record.
pub(crate) fn tag_of(rec: &Record) -> u8 {
    match rec {
        Record::String { .. } => TAG_STRING,
        Record::Module(_) => TAG_MODULE,
        Record::CallSite(_) => TAG_CALL_SITE,
        Record::Device(_) => TAG_DEVICE,
        Record::Acc(_) => TAG_ACC,
        Record::Kernel(_) => TAG_KERNEL,
        Record::Memcpy(_) => TAG_MEMCPY,
        Record::Memset(_) => TAG_MEMSET,
        Record::DriverCall(_) => TAG_DRIVER_CALL,
        Record::Hash(_) => TAG_HASH,
        Record::Dropped { .. } => TAG_DROPPED,
        Record::Diagnostic { .. } => TAG_DIAGNOSTIC,
        Record::End(_) => TAG_END,
        Record::Api(_) => TAG_API,
        Record::CallChain(_) => TAG_CALL_CHAIN,
        Record::MpiCall(_) => TAG_MPI_CALL,
        Record::DriverSpan(_) => TAG_DRIVER_SPAN,
        Record::Coherence(_) => TAG_COHERENCE,
        Record::Crash(_) => TAG_CRASH,
        Record::OwnWork(_) => TAG_OWN_WORK,
        Record::CheckSummary(_) => TAG_CHECK_SUMMARY,
    }
}

/// An upper bound on the framed size of `rec`: [`encode_record`] needs a
/// buffer this long. The fixed part covers the largest fixed-shape record
/// (an AccEvent with every field at its widest is about 120 bytes) with
/// room to spare, plus the length prefix and its move for long bodies.
#[inline]
pub(crate) fn size_bound(rec: &Record) -> usize {
    const FIXED_BOUND: usize = 256;
    FIXED_BOUND
        + match rec {
            Record::String { text, .. } => text.len(),
            Record::Module(m) => m.path.len() + m.build_id.len(),
            Record::Device(d) => d.name.len(),
            Record::Diagnostic { message, .. } => message.len(),
            Record::Crash(k) => k.driver_call.as_ref().map_or(0, |(n, _)| n.len()),
            Record::CallChain(c) => c.callers.len() * 2 * crate::varint::MAX_VARINT_LEN,
            Record::Coherence(k) => {
                k.callers.len().min(MAX_ACCESS_FRAMES) * 2 * crate::varint::MAX_VARINT_LEN
            }
            Record::MpiCall(m) => m.ranges.len() * (2 * crate::varint::MAX_VARINT_LEN + 1),
            _ => 0,
        }
}

/// Writes one framed record (tag, body length, body) at the start of `buf`,
/// which must be at least [`size_bound`] long, and returns its length.
#[inline]
pub(crate) fn encode_record(buf: &mut [u8], st: &mut DeltaState, rec: &Record) -> usize {
    let mut e = Enc::new(buf);
    e.u8(tag_of(rec));
    // Almost every body is shorter than 128 bytes: reserve one length byte
    // and move the body only in the rare case it needs more.
    e.u8(0);
    encode_body(&mut e, st, rec);
    let end = e.pos();
    let buf = e.into_inner();
    let body_len = end - 2;
    if body_len < 0x80 {
        buf[1] = body_len as u8;
        end
    } else {
        let (len_bytes, n) = varint_array(body_len as u64);
        buf.copy_within(2..end, 1 + n);
        buf[1..1 + n].copy_from_slice(&len_bytes[..n]);
        1 + n + body_len
    }
}

#[inline]
fn encode_body(e: &mut Enc<'_>, st: &mut DeltaState, rec: &Record) {
    match rec {
        Record::Acc(a) => encode_acc(e, st, a),
        Record::Kernel(k) => {
            put_delta(e, &mut st.time, k.start_ns);
            e.varint(k.end_ns.wrapping_sub(k.start_ns));
            e.varint(u64::from(k.name.0));
            for v in [
                k.grid[0],
                k.grid[1],
                k.grid[2],
                k.block[0],
                k.block[1],
                k.block[2],
                k.registers,
                k.static_shared_bytes,
                k.dynamic_shared_bytes,
                k.local_bytes_per_thread,
                k.device,
                k.context,
                k.stream,
            ] {
                e.varint(u64::from(v));
            }
            put_delta32(e, &mut st.correlation, k.correlation);
        }
        Record::Memcpy(m) => {
            put_delta(e, &mut st.time, m.start_ns);
            e.varint(m.end_ns.wrapping_sub(m.start_ns));
            e.varint(m.bytes);
            e.u8(copy_kind_code(m.kind) * 36
                + memory_kind_code(m.src) * 6
                + memory_kind_code(m.dst));
            e.varint(u64::from(m.device));
            e.varint(u64::from(m.context));
            e.varint(u64::from(m.stream));
            put_delta32(e, &mut st.correlation, m.correlation);
        }
        Record::Memset(m) => {
            put_delta(e, &mut st.time, m.start_ns);
            e.varint(m.end_ns.wrapping_sub(m.start_ns));
            e.varint(m.bytes);
            e.varint(u64::from(m.value));
            e.u8(memory_kind_code(m.memory));
            e.varint(u64::from(m.device));
            e.varint(u64::from(m.context));
            e.varint(u64::from(m.stream));
            put_delta32(e, &mut st.correlation, m.correlation);
        }
        Record::DriverCall(d) => {
            let same_thread = d.thread == st.thread;
            e.u8(driver_api_code(d.api)
                | (u8::from(same_thread) << 3)
                | (u8::from(d.host_ptr.is_some()) << 4)
                | (u8::from(d.bytes.is_some()) << 5));
            put_delta(e, &mut st.time, d.time_ns);
            if !same_thread {
                e.varint(u64::from(d.thread));
                st.thread = d.thread;
            }
            put_delta(e, &mut st.region, d.region.0);
            put_delta32(e, &mut st.correlation, d.correlation);
            if let Some(p) = d.host_ptr {
                put_delta(e, &mut st.host_ptr, p);
            }
            if let Some(b) = d.bytes {
                e.varint(b);
            }
        }
        Record::Hash(h) => {
            e.u8(u8::from(h.direction == Direction::Download) | (hash_mode_code(h.mode) << 1));
            put_delta(e, &mut st.time, h.time_ns);
            put_delta(e, &mut st.region, h.region.0);
            put_delta32(e, &mut st.correlation, h.correlation);
            put_delta(e, &mut st.host_ptr, h.host_ptr);
            e.varint(h.bytes);
            e.u64_le(h.hash);
            // Always written (0: not measured), so that fields a later
            // minor appends never land in its place.
            e.varint(h.hash_ns.map_or(0, |ns| ns.saturating_add(1)));
        }
        Record::DriverSpan(d) => {
            let same_thread = d.thread == st.thread;
            e.u8(driver_op_code(d.op)
                | (u8::from(same_thread) << 4)
                | (u8::from(d.cbid != 0) << 5)
                | (u8::from(d.correlation != 0) << 6));
            put_delta(e, &mut st.time, d.start_ns);
            e.varint(d.end_ns.saturating_sub(d.start_ns));
            if !same_thread {
                e.varint(u64::from(d.thread));
                st.thread = d.thread;
            }
            if d.cbid != 0 {
                e.varint(u64::from(d.cbid));
            }
            if d.correlation != 0 {
                put_delta32(e, &mut st.correlation, d.correlation);
            }
        }
        Record::Coherence(k) => {
            let kind = CoherenceKind::ALL
                .iter()
                .position(|&c| c == k.kind)
                .unwrap_or(0) as u8;
            e.u8(kind | (u8::from(k.confirmed) << 2) | (u8::from(k.variable.is_some()) << 3));
            e.varint(k.time_ns);
            e.varint(u64::from(k.thread));
            e.varint(k.code_addr);
            e.varint(k.host_addr);
            e.varint(k.range_start);
            e.varint(k.range_bytes);
            if let Some(v) = k.variable {
                e.varint(u64::from(v.0));
            }
            e.varint(k.construct.0);
            // 1.6: appended, so a 1.5 reader stops before it.
            let frames = &k.callers[..k.callers.len().min(MAX_ACCESS_FRAMES)];
            e.varint(frames.len() as u64);
            for f in frames {
                e.varint(u64::from(f.module.0));
                e.varint(f.return_offset);
            }
        }
        Record::Crash(k) => {
            // Absolute values, no delta state (older readers skip it).
            e.u8(u8::from(k.address.is_some()) | u8::from(k.driver_call.is_some()) << 1);
            e.varint(k.time_ns);
            e.varint(u64::from(k.thread));
            e.zigzag(i64::from(k.signal));
            e.zigzag(i64::from(k.code));
            if let Some(a) = k.address {
                e.varint(a);
            }
            if let Some((name, correlation)) = &k.driver_call {
                e.bytes(name.as_bytes());
                e.varint(u64::from(*correlation));
            }
        }
        Record::OwnWork(w) => {
            e.varint(u64::from(w.thread));
            e.varint(w.start_ns);
            e.varint(w.end_ns.wrapping_sub(w.start_ns));
        }
        Record::CheckSummary(k) => {
            e.u8(u8::from(k.applied));
            e.varint(k.time_ns);
            e.varint(k.ranges);
            e.varint(k.bytes);
            e.varint(k.faults);
            e.varint(k.handler_ns);
            e.varint(k.work_ns);
        }
        Record::MpiCall(m) => {
            let flags = match m.cuda_aware {
                None => 0,
                Some(false) => 1,
                Some(true) => 3,
            };
            e.u8(flags);
            e.varint(m.start_ns);
            e.varint(m.end_ns.wrapping_sub(m.start_ns));
            e.varint(u64::from(m.thread));
            e.varint(u64::from(m.routine.0));
            e.varint(m.ranges.len() as u64);
            for r in &m.ranges {
                e.varint(r.host_ptr);
                e.varint(r.bytes);
                e.u8(u8::from(r.write));
            }
            // 1.6: appended, so a 1.5 reader stops before it.
            e.varint(m.call_site.map_or(0, |c| u64::from(c.0) + 1));
        }
        Record::CallChain(ch) => {
            e.varint(u64::from(ch.site.0));
            e.varint(ch.callers.len() as u64);
            for f in &ch.callers {
                e.varint(u64::from(f.module.0));
                e.varint(f.return_offset);
            }
        }
        Record::String { id, text } => {
            e.varint(u64::from(id.0));
            e.bytes(text.as_bytes());
        }
        Record::Module(m) => {
            e.varint(u64::from(m.id.0));
            e.bytes(m.path.as_bytes());
            e.bytes(&m.build_id);
            e.varint(m.base);
            e.varint(m.text_start);
            e.varint(m.text_end);
        }
        Record::CallSite(cs) => {
            e.varint(u64::from(cs.id.0));
            e.varint(u64::from(cs.module.0));
            e.varint(cs.return_offset);
        }
        Record::Device(d) => {
            e.varint(u64::from(d.id));
            e.bytes(d.name.as_bytes());
            e.varint(u64::from(d.sm_count));
            e.varint(u64::from(d.compute_capability.0));
            e.varint(u64::from(d.compute_capability.1));
            e.varint(d.global_memory_bytes);
        }
        Record::Dropped { source, count } => {
            e.u8(drop_source_code(*source));
            e.varint(*count);
        }
        Record::Diagnostic {
            time_ns,
            level,
            message,
        } => {
            put_delta(e, &mut st.time, *time_ns);
            e.u8(level_code(*level));
            e.bytes(message.as_bytes());
        }
        Record::End(end) => {
            // A 1.1 kind: absolute time, no delta state (older readers skip it).
            e.varint(end.time_ns);
            let (code, value) = match end.how {
                Ending::Exit(Some(s)) => (0, s),
                Ending::Exit(None) => (5, 0),
                Ending::QuickExit(s) => (1, s),
                Ending::Signal(s) => (2, s),
                Ending::Exec => (3, 0),
                Ending::RuntimeError(c) => (4, c),
            };
            e.u8(code);
            e.zigzag(i64::from(value));
        }
        Record::Api(a) => {
            // A 1.1 kind: absolute values, no delta state.
            let flags = u8::from(a.phase == ApiPhase::End)
                | u8::from(a.call_site.is_some()) << 1
                | u8::from(a.host_ptr.is_some()) << 2
                | u8::from(a.bytes.is_some()) << 3
                | u8::from(a.async_queue.is_some()) << 4;
            e.u8(flags);
            e.varint(a.time_ns);
            e.varint(u64::from(a.thread));
            e.varint(a.region.0);
            e.varint(u64::from(a.routine.0));
            put_opt32(e, a.call_site.map(|c| c.0));
            put_opt(e, a.host_ptr);
            put_opt(e, a.bytes);
            if let Some(q) = a.async_queue {
                e.zigzag(i64::from(q));
            }
        }
    }
}

// AccEvent flag bits (see the format module).
const A_SAME_THREAD: u32 = 1 << 0;
const A_DEVICE_TYPE: u32 = 1 << 1;
const A_DEVICE_NUMBER: u32 = 1 << 2;
const A_ASYNC: u32 = 1 << 3;
const A_CONSTRUCT: u32 = 1 << 4;
const A_IMPLICIT: u32 = 1 << 5;
const A_CALL_SITE: u32 = 1 << 6;
const A_LOCATION: u32 = 1 << 7;
const A_DETAIL_SHIFT: u32 = 8;
const A_DETAIL_DATA: u32 = 1;
const A_DETAIL_LAUNCH: u32 = 2;
const A_FIELD_SHIFT: u32 = 10;
const A_KNOWN: u32 = (1 << 14) - 1;

#[inline(always)]
fn bit(b: bool, shift: u32) -> u32 {
    u32::from(b) << shift
}

#[inline(always)]
fn put_opt(e: &mut Enc<'_>, v: Option<u64>) {
    if let Some(v) = v {
        e.varint(v);
    }
}

#[inline(always)]
fn put_opt32(e: &mut Enc<'_>, v: Option<u32>) {
    if let Some(v) = v {
        e.varint(u64::from(v));
    }
}

#[inline]
fn encode_acc(e: &mut Enc<'_>, st: &mut DeltaState, a: &AccEvent) {
    e.u8(a.kind as u8);
    let same_thread = a.thread == st.thread;
    let loc = &a.location;
    let has_loc = *loc != SourceLocation::default();
    let (detail, fields) = match &a.detail {
        AccDetail::None => (0, 0),
        AccDetail::Data(d) => (
            A_DETAIL_DATA,
            bit(d.var_name.is_some(), 0)
                | bit(d.bytes.is_some(), 1)
                | bit(d.host_ptr.is_some(), 2)
                | bit(d.device_ptr.is_some(), 3),
        ),
        AccDetail::Launch(l) => (
            A_DETAIL_LAUNCH,
            bit(l.kernel_name.is_some(), 0)
                | bit(l.num_gangs.is_some(), 1)
                | bit(l.num_workers.is_some(), 2)
                | bit(l.vector_length.is_some(), 3),
        ),
    };
    let flags = bit(same_thread, 0)
        | bit(a.device_type.is_some(), 1)
        | bit(a.device_number.is_some(), 2)
        | bit(a.async_queue.is_some(), 3)
        | bit(a.construct.is_some(), 4)
        | bit(a.implicit, 5)
        | bit(a.call_site.is_some(), 6)
        | bit(has_loc, 7)
        | (detail << A_DETAIL_SHIFT)
        | (fields << A_FIELD_SHIFT);
    e.varint(u64::from(flags));
    put_delta(e, &mut st.time, a.time_ns);
    if !same_thread {
        e.varint(u64::from(a.thread));
        st.thread = a.thread;
    }
    put_delta(e, &mut st.region, a.region.0);
    put_opt32(e, a.device_type);
    put_opt32(e, a.device_number);
    if let Some(q) = a.async_queue {
        e.zigzag(i64::from(q));
    }
    if let Some(c) = a.construct {
        e.u8(c as u8);
    }
    put_opt32(e, a.call_site.map(|c| c.0));
    if has_loc {
        e.u8(u8::from(loc.file.is_some())
            | (u8::from(loc.function.is_some()) << 1)
            | (u8::from(loc.line.is_some()) << 2)
            | (u8::from(loc.end_line.is_some()) << 3)
            | (u8::from(loc.function_line.is_some()) << 4)
            | (u8::from(loc.function_end_line.is_some()) << 5));
        put_opt32(e, loc.file.map(|s| s.0));
        put_opt32(e, loc.function.map(|s| s.0));
        put_opt32(e, loc.line);
        put_opt32(e, loc.end_line);
        put_opt32(e, loc.function_line);
        put_opt32(e, loc.function_end_line);
    }
    match &a.detail {
        AccDetail::None => {}
        AccDetail::Data(d) => {
            put_opt32(e, d.var_name.map(|s| s.0));
            put_opt(e, d.bytes);
            if let Some(v) = d.host_ptr {
                put_delta(e, &mut st.host_ptr, v);
            }
            if let Some(v) = d.device_ptr {
                put_delta(e, &mut st.device_ptr, v);
            }
        }
        AccDetail::Launch(l) => {
            put_opt32(e, l.kernel_name.map(|s| s.0));
            put_opt(e, l.num_gangs);
            put_opt(e, l.num_workers);
            put_opt(e, l.vector_length);
        }
    }
}

// ---- decoding ---------------------------------------------------------

/// Decodes one record body. `Ok(None)` means the tag is not one this
/// version knows: the record is skipped and the delta state is untouched.
/// After an error the delta state is not meaningful: the caller drops the
/// rest of the block.
///
/// The reader decodes the frequent kinds itself (with the `decode_*`
/// functions below, so that each record is built in place); this is the
/// complete dispatch, for everything else.
#[inline]
pub(crate) fn decode_record(tag: u8, body: &[u8], st: &mut DeltaState) -> DResult<Option<Record>> {
    let c = &mut Cursor::new(body);
    let rec = match tag {
        TAG_ACC => Record::Acc(decode_acc(c, st)),
        TAG_KERNEL => Record::Kernel(decode_kernel(c, st)),
        TAG_MEMCPY => Record::Memcpy(decode_memcpy(c, st)),
        TAG_MEMSET => Record::Memset(decode_memset(c, st)),
        TAG_DRIVER_CALL => Record::DriverCall(decode_driver_call(c, st)),
        TAG_DRIVER_SPAN => Record::DriverSpan(decode_driver_span(c, st)),
        TAG_COHERENCE => Record::Coherence(decode_coherence(c)),
        TAG_CRASH => Record::Crash(decode_crash(c)),
        TAG_OWN_WORK => {
            let thread = c.varint_u32();
            let start_ns = c.varint();
            Record::OwnWork(OwnWork {
                thread,
                start_ns,
                end_ns: start_ns.wrapping_add(c.varint()),
            })
        }
        TAG_CHECK_SUMMARY => {
            let flags = c.u8();
            if flags >> 1 != 0 {
                c.fail(DecodeError::Invalid("check summary flags"));
            }
            Record::CheckSummary(CheckSummary {
                applied: flags & 1 != 0,
                time_ns: c.varint(),
                ranges: c.varint(),
                bytes: c.varint(),
                faults: c.varint(),
                handler_ns: c.varint(),
                work_ns: c.varint(),
            })
        }
        TAG_HASH => Record::Hash(decode_hash(c, st)),
        TAG_STRING => Record::String {
            id: StringId(c.varint_u32()),
            text: c.string(),
        },
        TAG_MODULE => Record::Module(Module {
            id: ModuleId(c.varint_u32()),
            path: c.string(),
            build_id: c.bytes().to_vec(),
            base: c.varint(),
            text_start: c.varint(),
            text_end: c.varint(),
        }),
        TAG_MPI_CALL => {
            let flags = c.u8();
            if flags >> 2 != 0 || flags == 2 {
                c.fail(DecodeError::Invalid("mpi call flags"));
            }
            let start_ns = c.varint();
            let end_ns = start_ns.wrapping_add(c.varint());
            let thread = c.varint_u32();
            let routine = StringId(c.varint_u32());
            let count = c.varint();
            if count > MAX_MPI_RANGES as u64 {
                c.fail(DecodeError::Invalid("mpi call range count"));
            }
            let mut ranges = Vec::new();
            for _ in 0..count.min(MAX_MPI_RANGES as u64) {
                let host_ptr = c.varint();
                let bytes = c.varint();
                let write = match c.u8() {
                    0 => false,
                    1 => true,
                    _ => {
                        c.fail(DecodeError::Invalid("mpi range direction"));
                        false
                    }
                };
                ranges.push(MpiRange {
                    host_ptr,
                    bytes,
                    write,
                });
            }
            Record::MpiCall(MpiCall {
                start_ns,
                end_ns,
                thread,
                routine,
                cuda_aware: (flags & 1 != 0).then_some(flags & 2 != 0),
                ranges,
                call_site: mpi_call_site(c),
            })
        }
        TAG_CALL_CHAIN => {
            let site = CallSiteId(c.varint_u32());
            let count = c.varint();
            if count > MAX_CALLERS as u64 {
                c.fail(DecodeError::Invalid("call chain length"));
            }
            let mut callers = Vec::new();
            for _ in 0..count.min(MAX_CALLERS as u64) {
                callers.push(Frame {
                    module: ModuleId(c.varint_u32()),
                    return_offset: c.varint(),
                });
            }
            Record::CallChain(CallChain { site, callers })
        }
        TAG_CALL_SITE => Record::CallSite(CallSite {
            id: CallSiteId(c.varint_u32()),
            module: ModuleId(c.varint_u32()),
            return_offset: c.varint(),
        }),
        TAG_DEVICE => Record::Device(Device {
            id: c.varint_u32(),
            name: c.string(),
            sm_count: c.varint_u32(),
            compute_capability: (c.varint_u32(), c.varint_u32()),
            global_memory_bytes: c.varint(),
        }),
        TAG_DROPPED => Record::Dropped {
            source: {
                let s = drop_source_from(c.u8());
                known(c, s, DropSource::Collector, "drop source")
            },
            count: c.varint(),
        },
        TAG_DIAGNOSTIC => Record::Diagnostic {
            time_ns: get_delta(c, &mut st.time),
            level: {
                let l = level_from(c.u8());
                known(c, l, Level::Error, "diagnostic level")
            },
            message: c.string(),
        },
        TAG_END => {
            let time_ns = c.varint();
            let code = c.u8();
            let value = c.zigzag_i32();
            let how = match code {
                0 => Some(Ending::Exit(Some(value))),
                5 => Some(Ending::Exit(None)),
                1 => Some(Ending::QuickExit(value)),
                2 => Some(Ending::Signal(value)),
                3 => Some(Ending::Exec),
                4 => Some(Ending::RuntimeError(value)),
                _ => None,
            };
            let how = known(c, how, Ending::Exec, "ending");
            Record::End(EndRecord { time_ns, how })
        }
        TAG_API => {
            let flags = u32::from(c.u8());
            if flags >> 5 != 0 {
                c.fail(DecodeError::Invalid("api call flags"));
            }
            Record::Api(ApiCall {
                phase: if flags & 1 != 0 {
                    ApiPhase::End
                } else {
                    ApiPhase::Start
                },
                time_ns: c.varint(),
                thread: c.varint_u32(),
                region: RegionId(c.varint()),
                routine: StringId(c.varint_u32()),
                call_site: opt_u32(c, flags, 1 << 1).map(CallSiteId),
                host_ptr: opt_u64(c, flags, 1 << 2),
                bytes: opt_u64(c, flags, 1 << 3),
                async_queue: (flags & (1 << 4) != 0).then(|| c.zigzag_i32()),
            })
        }
        _ => return Ok(None),
    };
    c.finish(Some(rec))
}

#[inline(always)]
pub(crate) fn decode_kernel(c: &mut Cursor<'_>, st: &mut DeltaState) -> KernelRecord {
    let start_ns = get_delta(c, &mut st.time);
    KernelRecord {
        start_ns,
        end_ns: start_ns.wrapping_add(c.varint()),
        name: StringId(c.varint_u32()),
        grid: [c.varint_u32(), c.varint_u32(), c.varint_u32()],
        block: [c.varint_u32(), c.varint_u32(), c.varint_u32()],
        registers: c.varint_u32(),
        static_shared_bytes: c.varint_u32(),
        dynamic_shared_bytes: c.varint_u32(),
        local_bytes_per_thread: c.varint_u32(),
        device: c.varint_u32(),
        context: c.varint_u32(),
        stream: c.varint_u32(),
        correlation: get_delta32(c, &mut st.correlation),
    }
}

#[inline(always)]
pub(crate) fn decode_memcpy(c: &mut Cursor<'_>, st: &mut DeltaState) -> MemcpyRecord {
    let start_ns = get_delta(c, &mut st.time);
    let end_ns = start_ns.wrapping_add(c.varint());
    let bytes = c.varint();
    let kinds = c.u8();
    let kind = copy_kind_from(kinds / 36);
    let src = memory_kind_from(kinds / 6 % 6);
    let dst = memory_kind_from(kinds % 6);
    MemcpyRecord {
        start_ns,
        end_ns,
        bytes,
        kind: known(c, kind, CopyKind::Other, "copy kind"),
        src: known(c, src, MemoryKind::Unknown, "memory kind"),
        dst: known(c, dst, MemoryKind::Unknown, "memory kind"),
        device: c.varint_u32(),
        context: c.varint_u32(),
        stream: c.varint_u32(),
        correlation: get_delta32(c, &mut st.correlation),
    }
}

#[inline(always)]
pub(crate) fn decode_memset(c: &mut Cursor<'_>, st: &mut DeltaState) -> MemsetRecord {
    let start_ns = get_delta(c, &mut st.time);
    MemsetRecord {
        start_ns,
        end_ns: start_ns.wrapping_add(c.varint()),
        bytes: c.varint(),
        value: c.varint_u32(),
        memory: {
            let m = memory_kind_from(c.u8());
            known(c, m, MemoryKind::Unknown, "memory kind")
        },
        device: c.varint_u32(),
        context: c.varint_u32(),
        stream: c.varint_u32(),
        correlation: get_delta32(c, &mut st.correlation),
    }
}

#[inline(always)]
pub(crate) fn decode_driver_call(c: &mut Cursor<'_>, st: &mut DeltaState) -> DriverCall {
    let flags = c.u8();
    if flags >> 6 != 0 {
        c.fail(DecodeError::Invalid("driver call flags"));
    }
    let api = known(
        c,
        driver_api_from(flags & 7),
        DriverApi::Other,
        "driver api",
    );
    let time_ns = get_delta(c, &mut st.time);
    if flags & (1 << 3) == 0 {
        st.thread = c.varint_u32();
    }
    DriverCall {
        time_ns,
        thread: st.thread,
        region: RegionId(get_delta(c, &mut st.region)),
        correlation: get_delta32(c, &mut st.correlation),
        api,
        host_ptr: (flags & (1 << 4) != 0).then(|| get_delta(c, &mut st.host_ptr)),
        bytes: (flags & (1 << 5) != 0).then(|| c.varint()),
    }
}

#[inline(always)]
pub(crate) fn decode_driver_span(c: &mut Cursor<'_>, st: &mut DeltaState) -> DriverSpan {
    let flags = c.u8();
    if flags >> 7 != 0 {
        c.fail(DecodeError::Invalid("driver span flags"));
    }
    let op = known(c, driver_op_from(flags & 15), DriverOp::Other, "driver op");
    let start_ns = get_delta(c, &mut st.time);
    let end_ns = start_ns.saturating_add(c.varint());
    if flags & (1 << 4) == 0 {
        st.thread = c.varint_u32();
    }
    let cbid = if flags & (1 << 5) != 0 {
        c.varint_u32()
    } else {
        0
    };
    let correlation = if flags & (1 << 6) != 0 {
        get_delta32(c, &mut st.correlation)
    } else {
        0
    };
    DriverSpan {
        thread: st.thread,
        start_ns,
        end_ns,
        op,
        cbid,
        correlation,
    }
}

fn decode_crash(c: &mut Cursor<'_>) -> Crash {
    let flags = c.u8();
    if flags >> 2 != 0 {
        c.fail(DecodeError::Invalid("crash flags"));
    }
    Crash {
        time_ns: c.varint(),
        thread: c.varint_u32(),
        signal: c.zigzag_i32(),
        code: c.zigzag_i32(),
        address: (flags & 1 != 0).then(|| c.varint()),
        driver_call: (flags & 2 != 0).then(|| (c.string(), c.varint_u32())),
    }
}

fn decode_coherence(c: &mut Cursor<'_>) -> Coherence {
    let flags = c.u8();
    if flags >> 4 != 0 {
        c.fail(DecodeError::Invalid("coherence flags"));
    }
    let kind = known(
        c,
        CoherenceKind::ALL.get(usize::from(flags & 3)).copied(),
        CoherenceKind::StaleRead,
        "coherence kind",
    );
    Coherence {
        kind,
        time_ns: c.varint(),
        thread: c.varint_u32(),
        code_addr: c.varint(),
        host_addr: c.varint(),
        range_start: c.varint(),
        range_bytes: c.varint(),
        variable: (flags & 8 != 0).then(|| StringId(c.varint_u32())),
        construct: RegionId(c.varint()),
        confirmed: flags & 4 != 0,
        callers: access_frames(c),
    }
}

/// The call site a 1.6 MpiCall record appends (none in a 1.5 one).
fn mpi_call_site(c: &mut Cursor<'_>) -> Option<CallSiteId> {
    if c.remaining() == 0 {
        return None;
    }
    let v = c.varint().checked_sub(1)?;
    match u32::try_from(v) {
        Ok(id) => Some(CallSiteId(id)),
        Err(_) => {
            c.fail(DecodeError::Invalid("mpi call site"));
            None
        }
    }
}

/// The frames a 1.6 Coherence record appends (none in a 1.5 one).
fn access_frames(c: &mut Cursor<'_>) -> Vec<Frame> {
    if c.remaining() == 0 {
        return Vec::new();
    }
    let count = c.varint();
    if count > MAX_ACCESS_FRAMES as u64 {
        c.fail(DecodeError::Invalid("coherence frame count"));
    }
    (0..count.min(MAX_ACCESS_FRAMES as u64))
        .map(|_| Frame {
            module: ModuleId(c.varint_u32()),
            return_offset: c.varint(),
        })
        .collect()
}

#[inline(always)]
pub(crate) fn decode_hash(c: &mut Cursor<'_>, st: &mut DeltaState) -> BufferHash {
    let flags = c.u8();
    if flags >> 3 != 0 {
        c.fail(DecodeError::Invalid("hash flags"));
    }
    BufferHash {
        direction: if flags & 1 != 0 {
            Direction::Download
        } else {
            Direction::Upload
        },
        mode: known(c, hash_mode_from(flags >> 1), HashMode::Off, "hash mode"),
        time_ns: get_delta(c, &mut st.time),
        region: RegionId(get_delta(c, &mut st.region)),
        correlation: get_delta32(c, &mut st.correlation),
        host_ptr: get_delta(c, &mut st.host_ptr),
        bytes: c.varint(),
        hash: c.u64_le(),
        hash_ns: match c.remaining() {
            0 => None,
            _ => c.varint().checked_sub(1),
        },
    }
}

#[inline(always)]
fn opt_u32(c: &mut Cursor<'_>, flags: u32, mask: u32) -> Option<u32> {
    let v = c.opt_varint(flags & mask != 0)?;
    match u32::try_from(v) {
        Ok(v) => Some(v),
        Err(_) => {
            c.fail(DecodeError::Overflow);
            Some(0)
        }
    }
}

#[inline(always)]
fn opt_u64(c: &mut Cursor<'_>, flags: u32, mask: u32) -> Option<u64> {
    c.opt_varint(flags & mask != 0)
}

#[inline(always)]
pub(crate) fn decode_acc(c: &mut Cursor<'_>, st: &mut DeltaState) -> AccEvent {
    let mut a = AccEvent {
        time_ns: 0,
        kind: AccEventKind::WaitEnd,
        thread: 0,
        region: RegionId(0),
        device_type: None,
        device_number: None,
        async_queue: None,
        construct: None,
        implicit: false,
        location: SourceLocation::default(),
        call_site: None,
        detail: AccDetail::None,
    };
    decode_acc_into(c, st, &mut a);
    a
}

/// [`decode_acc`] into an event already in place: each field is stored
/// where it stays, so a record decoded into a reused buffer is never built
/// elsewhere and copied (copying a record just written, field by field,
/// costs more than decoding it).
#[inline(always)]
pub(crate) fn decode_acc_into(c: &mut Cursor<'_>, st: &mut DeltaState, a: &mut AccEvent) {
    let kind = AccEventKind::from_raw(i64::from(c.u8()));
    let kind = known(c, kind, AccEventKind::WaitEnd, "acc event kind");
    let flags = c.varint_u32();
    if flags & !A_KNOWN != 0 {
        c.fail(DecodeError::Invalid("acc event flags"));
    }
    let time_ns = get_delta(c, &mut st.time);
    if flags & A_SAME_THREAD == 0 {
        st.thread = c.varint_u32();
    }
    let thread = st.thread;
    let region = RegionId(get_delta(c, &mut st.region));
    let device_type = opt_u32(c, flags, A_DEVICE_TYPE);
    let device_number = opt_u32(c, flags, A_DEVICE_NUMBER);
    let async_queue = (flags & A_ASYNC != 0).then(|| c.zigzag_i32());
    let construct = if flags & A_CONSTRUCT != 0 {
        let k = ConstructKind::from_raw(i64::from(c.u8()));
        Some(known(c, k, ConstructKind::Serial, "construct kind"))
    } else {
        None
    };
    let call_site = opt_u32(c, flags, A_CALL_SITE).map(CallSiteId);
    let location = if flags & A_LOCATION != 0 {
        let lf = u32::from(c.u8());
        if lf >> 6 != 0 {
            c.fail(DecodeError::Invalid("location flags"));
        }
        SourceLocation {
            file: opt_u32(c, lf, 1).map(StringId),
            function: opt_u32(c, lf, 1 << 1).map(StringId),
            line: opt_u32(c, lf, 1 << 2),
            end_line: opt_u32(c, lf, 1 << 3),
            function_line: opt_u32(c, lf, 1 << 4),
            function_end_line: opt_u32(c, lf, 1 << 5),
        }
    } else {
        SourceLocation::default()
    };
    let fields = flags >> A_FIELD_SHIFT;
    let detail = match (flags >> A_DETAIL_SHIFT) & 3 {
        0 if fields == 0 => AccDetail::None,
        A_DETAIL_DATA => AccDetail::Data(DataInfo {
            var_name: opt_u32(c, fields, 1).map(StringId),
            bytes: opt_u64(c, fields, 1 << 1),
            host_ptr: (fields & (1 << 2) != 0).then(|| get_delta(c, &mut st.host_ptr)),
            device_ptr: (fields & (1 << 3) != 0).then(|| get_delta(c, &mut st.device_ptr)),
        }),
        A_DETAIL_LAUNCH => AccDetail::Launch(LaunchInfo {
            kernel_name: opt_u32(c, fields, 1).map(StringId),
            num_gangs: opt_u64(c, fields, 1 << 1),
            num_workers: opt_u64(c, fields, 1 << 2),
            vector_length: opt_u64(c, fields, 1 << 3),
        }),
        _ => {
            c.fail(DecodeError::Invalid("acc event detail"));
            AccDetail::None
        }
    };
    a.time_ns = time_ns;
    a.kind = kind;
    a.thread = thread;
    a.region = region;
    a.device_type = device_type;
    a.device_number = device_number;
    a.async_queue = async_queue;
    a.construct = construct;
    a.implicit = flags & A_IMPLICIT != 0;
    a.location = location;
    a.call_site = call_site;
    a.detail = detail;
}

// ---- header -----------------------------------------------------------

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
}

fn put_source(out: &mut Vec<u8>, s: &SourceState) {
    match s {
        SourceState::Active => out.push(0),
        SourceState::Inactive(why) => {
            out.push(1);
            put_str(out, why);
        }
    }
}

fn get_source(c: &mut Cursor<'_>) -> SourceState {
    match c.u8() {
        0 => SourceState::Active,
        1 => SourceState::Inactive(c.string()),
        _ => {
            c.fail(DecodeError::Invalid("source state"));
            SourceState::Active
        }
    }
}

/// The header block payload.
pub(crate) fn encode_header(out: &mut Vec<u8>, h: &Header) {
    put_str(out, &h.host);
    put_varint(out, u64::from(h.pid));
    match h.rank {
        Some(r) => {
            out.push(1);
            put_varint(out, u64::from(r));
        }
        None => out.push(0),
    }
    put_varint(out, h.command_line.len() as u64);
    for a in &h.command_line {
        put_str(out, a);
    }
    put_str(out, &h.executable);
    put_varint(out, h.start_unix_ns);
    put_varint(out, h.start_clock_ns);
    out.push(match h.clock {
        Clock::Monotonic => 0,
        Clock::Other(v) => v,
    });
    put_str(out, &h.runtime);
    put_str(out, &h.collector);
    put_source(out, &h.sources.acc_prof);
    put_source(out, &h.sources.cupti);
    out.push(hash_mode_code(h.sources.hashing));
    out.extend_from_slice(&FORMAT_MAJOR.to_le_bytes());
    out.extend_from_slice(&FORMAT_MINOR.to_le_bytes());
    match h.process_start_ns {
        Some(t) => {
            out.push(1);
            put_varint(out, t);
        }
        None => out.push(0),
    }
    out.push(u8::from(h.sources.coherence));
}

/// Decodes the header block payload, and the copy of the format version
/// that format 1.3 and later write after the fields of 1.0 (None before).
/// The process start of 1.4 follows the copy; a header that ends before it
/// (1.3 and older) reads as `None`. Bytes after the known fields are fields
/// of a later minor version and are ignored.
pub(crate) fn decode_header(payload: &[u8]) -> DResult<(Header, Option<(u16, u16)>)> {
    let c = &mut Cursor::new(payload);
    let host = c.string();
    let pid = c.varint_u32();
    let rank = match c.u8() {
        0 => None,
        1 => Some(c.varint_u32()),
        _ => {
            c.fail(DecodeError::Invalid("rank flag"));
            None
        }
    };
    let n = c.varint();
    // Each argument takes at least one byte: never trust the count for the
    // allocation, and stop at the first failure.
    let mut command_line = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(c.remaining()));
    for _ in 0..n {
        if c.failed() {
            break;
        }
        command_line.push(c.string());
    }
    let executable = c.string();
    let start_unix_ns = c.varint();
    let start_clock_ns = c.varint();
    let clock = match c.u8() {
        0 => Clock::Monotonic,
        v => Clock::Other(v),
    };
    let runtime = c.string();
    let collector = c.string();
    let acc_prof = get_source(c);
    let cupti = get_source(c);
    let hashing = {
        let m = hash_mode_from(c.u8());
        known(c, m, HashMode::Off, "hash mode")
    };
    let version = (!c.failed() && c.remaining() >= 4).then(|| {
        let mut half = || u16::from_le_bytes([c.u8(), c.u8()]);
        (half(), half())
    });
    let process_start_ns = if version.is_some() && c.remaining() > 0 {
        match c.u8() {
            0 => None,
            1 => Some(c.varint()),
            _ => {
                c.fail(DecodeError::Invalid("process start flag"));
                None
            }
        }
    } else {
        None
    };
    // 1.6: the checks asked for (a 1.5 header ends before them; bits a
    // later minor adds are its own checks).
    let coherence = if version.is_some() && c.remaining() > 0 {
        c.u8() & 1 != 0
    } else {
        false
    };
    let header = c.finish(Header {
        host,
        pid,
        rank,
        command_line,
        executable,
        start_unix_ns,
        start_clock_ns,
        clock,
        runtime,
        collector,
        sources: Sources {
            acc_prof,
            cupti,
            hashing,
            coherence,
        },
        process_start_ns,
    })?;
    Ok((header, version))
}

/// Checks that `payload` is exactly a sequence of framed records and counts
/// them, so that a reader can refuse a block before returning any of it.
/// The error is the payload offset of the first bad frame.
pub(crate) fn count_frames(payload: &[u8]) -> Result<u32, usize> {
    let mut pos = 0;
    let mut n: u32 = 0;
    while pos < payload.len() {
        let at = pos;
        // A tag, then the body's length: one byte for nearly every record
        // (a body under 128 bytes), read here without a cursor.
        let end = match payload.get(pos + 1) {
            Some(&len) if len < 0x80 => pos + 2 + usize::from(len),
            _ => {
                let mut c = Cursor::new(&payload[pos..]);
                c.u8();
                c.bytes();
                if c.failed() {
                    return Err(at);
                }
                pos + c.pos()
            }
        };
        if end > payload.len() {
            return Err(at);
        }
        pos = end;
        n = n.checked_add(1).ok_or(at)?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends one framed record to `out`, as the writer does.
    fn push_record(out: &mut Vec<u8>, st: &mut DeltaState, rec: &Record) -> usize {
        let at = out.len();
        out.resize(at + size_bound(rec), 0);
        let n = encode_record(&mut out[at..], st, rec);
        out.truncate(at + n);
        n
    }

    /// A 1.5 Coherence body (no frames) reads with none; a 1.6 body's
    /// frames are appended, so the 1.5 fields read the same without them.
    #[test]
    fn coherence_frames_are_appended_to_the_1_5_body() {
        let k = Coherence {
            kind: CoherenceKind::StaleRead,
            time_ns: 7,
            thread: 3,
            code_addr: 0x7f00_0000_1234,
            host_addr: 0x5000,
            range_start: 0x5000,
            range_bytes: 4096,
            variable: Some(StringId(9)),
            construct: RegionId(4),
            confirmed: true,
            callers: vec![
                Frame {
                    module: ModuleId(2),
                    return_offset: 0x1a2b,
                },
                Frame {
                    module: ModuleId(1),
                    return_offset: 0x99,
                },
            ],
        };
        let mut buf = Vec::new();
        push_record(
            &mut buf,
            &mut DeltaState::default(),
            &Record::Coherence(k.clone()),
        );
        let mut c = Cursor::new(&buf);
        assert_eq!(c.u8(), TAG_COHERENCE);
        let body = c.bytes().to_vec();
        // count 2, then (2, 0x1a2b) and (1, 0x99): 1 + 1 + 2 + 1 + 2 bytes.
        let old = &body[..body.len() - 7];
        let got = decode_record(TAG_COHERENCE, old, &mut DeltaState::default());
        let want = Coherence {
            callers: Vec::new(),
            ..k.clone()
        };
        assert_eq!(got, Ok(Some(Record::Coherence(want))));
        let got = decode_record(TAG_COHERENCE, &body, &mut DeltaState::default());
        assert_eq!(got, Ok(Some(Record::Coherence(k))));
        let mut long = old.to_vec();
        long.push(MAX_ACCESS_FRAMES as u8 + 1);
        assert!(decode_record(TAG_COHERENCE, &long, &mut DeltaState::default()).is_err());
    }

    /// A 1.5 MpiCall body (no call site) reads with none; a 1.6 body's
    /// call site is appended, so the 1.5 fields read the same without it.
    #[test]
    fn mpi_call_site_is_appended_to_the_1_5_body() {
        let m = MpiCall {
            start_ns: 100,
            end_ns: 250,
            thread: 2,
            routine: StringId(5),
            cuda_aware: Some(false),
            ranges: vec![MpiRange {
                host_ptr: 0x5000,
                bytes: 384,
                write: true,
            }],
            call_site: Some(CallSiteId(300)),
        };
        let mut buf = Vec::new();
        push_record(
            &mut buf,
            &mut DeltaState::default(),
            &Record::MpiCall(m.clone()),
        );
        let mut c = Cursor::new(&buf);
        assert_eq!(c.u8(), TAG_MPI_CALL);
        let body = c.bytes().to_vec();
        // 1 + 300 = 301: a two-byte varint.
        let old = &body[..body.len() - 2];
        let got = decode_record(TAG_MPI_CALL, old, &mut DeltaState::default());
        let want = MpiCall {
            call_site: None,
            ..m.clone()
        };
        assert_eq!(got, Ok(Some(Record::MpiCall(want.clone()))));
        let got = decode_record(TAG_MPI_CALL, &body, &mut DeltaState::default());
        assert_eq!(got, Ok(Some(Record::MpiCall(m))));
        // 0: the collector found no application frame.
        let mut none = old.to_vec();
        none.push(0);
        let got = decode_record(TAG_MPI_CALL, &none, &mut DeltaState::default());
        assert_eq!(got, Ok(Some(Record::MpiCall(want))));
        // Past a u32 id: refused.
        let mut big = old.to_vec();
        put_varint(&mut big, u64::from(u32::MAX) + 2);
        assert!(decode_record(TAG_MPI_CALL, &big, &mut DeltaState::default()).is_err());
    }

    fn round_trip(recs: &[Record]) {
        let mut buf = Vec::new();
        let mut st = DeltaState::default();
        for r in recs {
            push_record(&mut buf, &mut st, r);
        }
        assert_eq!(count_frames(&buf), Ok(recs.len() as u32));
        let mut c = Cursor::new(&buf);
        let mut st = DeltaState::default();
        for r in recs {
            let tag = c.u8();
            let body = c.bytes();
            assert!(!c.failed());
            let got = decode_record(tag, body, &mut st).expect("decodes");
            assert_eq!(got.as_ref(), Some(r));
        }
        assert_eq!(c.remaining(), 0);
    }

    #[test]
    fn the_widest_fixed_records_stay_well_inside_the_bound() {
        let loc = SourceLocation {
            file: Some(StringId(u32::MAX)),
            function: Some(StringId(u32::MAX)),
            line: Some(u32::MAX),
            end_line: Some(u32::MAX),
            function_line: Some(u32::MAX),
            function_end_line: Some(u32::MAX),
        };
        let acc = |detail| {
            Record::Acc(AccEvent {
                time_ns: u64::MAX / 2,
                kind: AccEventKind::WaitEnd,
                thread: u32::MAX,
                region: RegionId(u64::MAX / 2),
                device_type: Some(u32::MAX),
                device_number: Some(u32::MAX),
                async_queue: Some(i32::MIN),
                construct: Some(ConstructKind::Serial),
                implicit: true,
                location: loc,
                call_site: Some(CallSiteId(u32::MAX)),
                detail,
            })
        };
        let widest = [
            acc(AccDetail::Data(DataInfo {
                var_name: Some(StringId(u32::MAX)),
                bytes: Some(u64::MAX),
                host_ptr: Some(u64::MAX / 2),
                device_ptr: Some(u64::MAX / 2),
            })),
            acc(AccDetail::Launch(LaunchInfo {
                kernel_name: Some(StringId(u32::MAX)),
                num_gangs: Some(u64::MAX),
                num_workers: Some(u64::MAX),
                vector_length: Some(u64::MAX),
            })),
            Record::Kernel(KernelRecord {
                start_ns: u64::MAX / 2,
                end_ns: u64::MAX,
                name: StringId(u32::MAX),
                grid: [u32::MAX; 3],
                block: [u32::MAX; 3],
                registers: u32::MAX,
                static_shared_bytes: u32::MAX,
                dynamic_shared_bytes: u32::MAX,
                local_bytes_per_thread: u32::MAX,
                device: u32::MAX,
                context: u32::MAX,
                stream: u32::MAX,
                correlation: u32::MAX / 2,
            }),
        ];
        for r in &widest {
            let mut buf = Vec::new();
            let n = push_record(&mut buf, &mut DeltaState::default(), r);
            assert!(n <= 140 && n < size_bound(r) / 2 + 20, "{n} bytes");
        }
        round_trip(&widest);
    }

    #[test]
    fn long_bodies_get_a_longer_length_prefix() {
        for len in [
            0usize, 1, 120, 125, 126, 127, 128, 200, 16_383, 16_384, 100_000,
        ] {
            round_trip(&[
                Record::String {
                    id: StringId(7),
                    text: "x".repeat(len),
                },
                Record::Dropped {
                    source: DropSource::Cupti,
                    count: 3,
                },
            ]);
        }
    }

    #[test]
    fn memcpy_kind_byte_covers_every_combination() {
        use CopyKind::*;
        use MemoryKind::*;
        let mut recs = Vec::new();
        for kind in [
            HostToDevice,
            DeviceToHost,
            DeviceToDevice,
            HostToHost,
            PeerToPeer,
            CopyKind::Other,
        ] {
            for src in [Unknown, Pageable, Pinned, Device, Array, Managed] {
                for dst in [Unknown, Pageable, Pinned, Device, Array, Managed] {
                    recs.push(Record::Memcpy(MemcpyRecord {
                        start_ns: 10,
                        end_ns: 5,
                        bytes: 1,
                        kind,
                        src,
                        dst,
                        device: 0,
                        context: 1,
                        stream: 2,
                        correlation: u32::MAX,
                    }));
                }
            }
        }
        round_trip(&recs);
    }

    #[test]
    fn reserved_bits_and_bad_codes_are_malformed() {
        let mut st = DeltaState::default();
        // Acc event with a reserved flag bit.
        let mut body = vec![AccEventKind::Alloc as u8];
        put_varint(&mut body, 1 << 14);
        body.extend_from_slice(&[0, 0]);
        assert!(decode_record(TAG_ACC, &body, &mut st).is_err());
        // Acc event kind 0 and 26.
        for k in [0u8, 26] {
            assert!(decode_record(TAG_ACC, &[k, 0, 0, 0], &mut st).is_err());
        }
        // Detail code 3.
        let mut body = vec![AccEventKind::Alloc as u8];
        put_varint(&mut body, 3 << A_DETAIL_SHIFT);
        body.extend_from_slice(&[0, 0, 0]);
        assert!(decode_record(TAG_ACC, &body, &mut st).is_err());
        // Detail fields without a detail.
        let mut body = vec![AccEventKind::Alloc as u8];
        put_varint(&mut body, 1 << A_FIELD_SHIFT);
        body.extend_from_slice(&[0, 0, 0]);
        assert!(decode_record(TAG_ACC, &body, &mut st).is_err());
        // Memcpy kind byte out of range.
        assert!(decode_record(TAG_MEMCPY, &[0, 0, 0, 216, 0, 0, 0, 0], &mut st).is_err());
        // An api call with a reserved flag bit; the same body without it
        // decodes.
        let body = [1 << 5, 0, 0, 0, 0];
        assert!(decode_record(TAG_API, &body, &mut st).is_err());
        assert!(decode_record(TAG_API, &body.map(|b| b & 0x1f), &mut st).is_ok());
        // A driver span (Launch, same thread, start, duration) with bit 7
        // set; the same body without it decodes, and with bit 6 it reads
        // a correlation more.
        let op = driver_op_code(DriverOp::Launch);
        let body = [op | (1 << 4) | (1 << 7), 0, 5];
        assert!(decode_record(TAG_DRIVER_SPAN, &body, &mut st).is_err());
        assert!(decode_record(TAG_DRIVER_SPAN, &[op | (1 << 4), 0, 5], &mut st).is_ok());
        assert!(
            decode_record(TAG_DRIVER_SPAN, &[op | (1 << 4) | (1 << 6), 0, 5], &mut st).is_err()
        );
        assert!(decode_record(
            TAG_DRIVER_SPAN,
            &[op | (1 << 4) | (1 << 6), 0, 5, 2],
            &mut st
        )
        .is_ok());
        // Empty bodies of every known kind are too short.
        for tag in 1..=12 {
            assert!(decode_record(tag, &[], &mut st).is_err(), "tag {tag}");
        }
        // Unknown tags are not errors.
        assert_eq!(decode_record(0, &[1, 2, 3], &mut st), Ok(None));
        assert_eq!(decode_record(200, &[], &mut st), Ok(None));
    }

    #[test]
    fn frames_must_tile_the_payload() {
        assert_eq!(count_frames(&[]), Ok(0));
        assert_eq!(count_frames(&[5, 0, 9, 1, 0]), Ok(2));
        assert_eq!(count_frames(&[5, 2, 0]), Err(0));
        assert_eq!(count_frames(&[5, 0, 9]), Err(2));
        // A length of two bytes, and one that runs past the payload.
        let mut long = vec![5, 0x80, 1];
        long.extend([7; 128]);
        assert_eq!(count_frames(&long), Ok(1));
        long.extend([5, 3, 1]);
        assert_eq!(count_frames(&long), Err(131));
        long.truncate(131);
        long.extend([5, 0x80]);
        assert_eq!(count_frames(&long), Err(131));
    }
}
