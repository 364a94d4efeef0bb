//! Record bodies and the header: encoding into a block buffer and decoding
//! straight from it. The layout is documented in [`crate::format`].

use crate::format::*;
use crate::record::*;
use crate::varint::{
    put_bytes, put_varint, put_zigzag, varint_array, Cursor, DResult, DecodeError,
};

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

#[inline]
fn put_delta(out: &mut Vec<u8>, last: &mut u64, v: u64) {
    put_zigzag(out, v.wrapping_sub(*last) as i64);
    *last = v;
}

#[inline]
fn get_delta(c: &mut Cursor<'_>, last: &mut u64) -> DResult<u64> {
    let v = last.wrapping_add(c.zigzag()? as u64);
    *last = v;
    Ok(v)
}

#[inline]
fn put_delta32(out: &mut Vec<u8>, last: &mut u32, v: u32) {
    put_zigzag(out, i64::from(v.wrapping_sub(*last) as i32));
    *last = v;
}

#[inline]
fn get_delta32(c: &mut Cursor<'_>, last: &mut u32) -> DResult<u32> {
    let d = i32::try_from(c.zigzag()?).map_err(|_| DecodeError::Overflow)?;
    let v = last.wrapping_add(d as u32);
    *last = v;
    Ok(v)
}

#[inline]
fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
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

fn copy_kind_from(v: u8) -> DResult<CopyKind> {
    Ok(match v {
        0 => CopyKind::HostToDevice,
        1 => CopyKind::DeviceToHost,
        2 => CopyKind::DeviceToDevice,
        3 => CopyKind::HostToHost,
        4 => CopyKind::PeerToPeer,
        5 => CopyKind::Other,
        _ => return Err(DecodeError::Invalid("copy kind")),
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

fn memory_kind_from(v: u8) -> DResult<MemoryKind> {
    Ok(match v {
        0 => MemoryKind::Unknown,
        1 => MemoryKind::Pageable,
        2 => MemoryKind::Pinned,
        3 => MemoryKind::Device,
        4 => MemoryKind::Array,
        5 => MemoryKind::Managed,
        _ => return Err(DecodeError::Invalid("memory kind")),
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

fn driver_api_from(v: u8) -> DResult<DriverApi> {
    Ok(match v {
        0 => DriverApi::Launch,
        1 => DriverApi::CopyHostToDevice,
        2 => DriverApi::CopyDeviceToHost,
        3 => DriverApi::CopyOther,
        4 => DriverApi::Memset,
        5 => DriverApi::Other,
        _ => return Err(DecodeError::Invalid("driver api")),
    })
}

fn hash_mode_code(m: HashMode) -> u8 {
    match m {
        HashMode::Off => 0,
        HashMode::Sampled => 1,
        HashMode::Full => 2,
    }
}

fn hash_mode_from(v: u8) -> DResult<HashMode> {
    Ok(match v {
        0 => HashMode::Off,
        1 => HashMode::Sampled,
        2 => HashMode::Full,
        _ => return Err(DecodeError::Invalid("hash mode")),
    })
}

fn drop_source_code(s: DropSource) -> u8 {
    match s {
        DropSource::AccProf => 0,
        DropSource::Cupti => 1,
        DropSource::Collector => 2,
    }
}

fn drop_source_from(v: u8) -> DResult<DropSource> {
    Ok(match v {
        0 => DropSource::AccProf,
        1 => DropSource::Cupti,
        2 => DropSource::Collector,
        _ => return Err(DecodeError::Invalid("drop source")),
    })
}

fn level_code(l: Level) -> u8 {
    match l {
        Level::Info => 0,
        Level::Warning => 1,
        Level::Error => 2,
    }
}

fn level_from(v: u8) -> DResult<Level> {
    Ok(match v {
        0 => Level::Info,
        1 => Level::Warning,
        2 => Level::Error,
        _ => return Err(DecodeError::Invalid("diagnostic level")),
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
    }
}

/// An upper bound on the framed size of `rec`. Fixed-shape records are far
/// below [`FIXED_BOUND`]; only records with strings or byte strings grow.
pub(crate) fn size_bound(rec: &Record) -> usize {
    const FIXED_BOUND: usize = 256;
    FIXED_BOUND
        + match rec {
            Record::String { text, .. } => text.len(),
            Record::Module(m) => m.path.len() + m.build_id.len(),
            Record::Device(d) => d.name.len(),
            Record::Diagnostic { message, .. } => message.len(),
            _ => 0,
        }
}

/// Appends one framed record (tag, body length, body) to `out`.
pub(crate) fn encode_record(out: &mut Vec<u8>, st: &mut DeltaState, rec: &Record) {
    out.push(tag_of(rec));
    // Almost every body is shorter than 128 bytes: reserve one length byte
    // and move the body only in the rare case it needs more.
    let len_at = out.len();
    out.push(0);
    let body_start = out.len();
    encode_body(out, st, rec);
    let body_len = out.len() - body_start;
    if body_len < 0x80 {
        out[len_at] = body_len as u8;
    } else {
        let (len_bytes, n) = varint_array(body_len as u64);
        out.resize(out.len() + n - 1, 0);
        out.copy_within(body_start..body_start + body_len, body_start + n - 1);
        out[len_at..len_at + n].copy_from_slice(&len_bytes[..n]);
    }
}

fn encode_body(out: &mut Vec<u8>, st: &mut DeltaState, rec: &Record) {
    match rec {
        Record::String { id, text } => {
            put_varint(out, u64::from(id.0));
            put_str(out, text);
        }
        Record::Module(m) => {
            put_varint(out, u64::from(m.id.0));
            put_str(out, &m.path);
            put_bytes(out, &m.build_id);
            put_varint(out, m.base);
            put_varint(out, m.text_start);
            put_varint(out, m.text_end);
        }
        Record::CallSite(c) => {
            put_varint(out, u64::from(c.id.0));
            put_varint(out, u64::from(c.module.0));
            put_varint(out, c.return_offset);
        }
        Record::Device(d) => {
            put_varint(out, u64::from(d.id));
            put_str(out, &d.name);
            put_varint(out, u64::from(d.sm_count));
            put_varint(out, u64::from(d.compute_capability.0));
            put_varint(out, u64::from(d.compute_capability.1));
            put_varint(out, d.global_memory_bytes);
        }
        Record::Acc(e) => encode_acc(out, st, e),
        Record::Kernel(k) => {
            put_delta(out, &mut st.time, k.start_ns);
            put_varint(out, k.end_ns.wrapping_sub(k.start_ns));
            put_varint(out, u64::from(k.name.0));
            for v in k.grid.iter().chain(k.block.iter()) {
                put_varint(out, u64::from(*v));
            }
            for v in [
                k.registers,
                k.static_shared_bytes,
                k.dynamic_shared_bytes,
                k.local_bytes_per_thread,
                k.device,
                k.context,
                k.stream,
            ] {
                put_varint(out, u64::from(v));
            }
            put_delta32(out, &mut st.correlation, k.correlation);
        }
        Record::Memcpy(m) => {
            put_delta(out, &mut st.time, m.start_ns);
            put_varint(out, m.end_ns.wrapping_sub(m.start_ns));
            put_varint(out, m.bytes);
            out.push(
                copy_kind_code(m.kind) * 36 + memory_kind_code(m.src) * 6 + memory_kind_code(m.dst),
            );
            put_varint(out, u64::from(m.device));
            put_varint(out, u64::from(m.context));
            put_varint(out, u64::from(m.stream));
            put_delta32(out, &mut st.correlation, m.correlation);
        }
        Record::Memset(m) => {
            put_delta(out, &mut st.time, m.start_ns);
            put_varint(out, m.end_ns.wrapping_sub(m.start_ns));
            put_varint(out, m.bytes);
            put_varint(out, u64::from(m.value));
            out.push(memory_kind_code(m.memory));
            put_varint(out, u64::from(m.device));
            put_varint(out, u64::from(m.context));
            put_varint(out, u64::from(m.stream));
            put_delta32(out, &mut st.correlation, m.correlation);
        }
        Record::DriverCall(d) => {
            let same_thread = d.thread == st.thread;
            let flags = driver_api_code(d.api)
                | (u8::from(same_thread) << 3)
                | (u8::from(d.host_ptr.is_some()) << 4)
                | (u8::from(d.bytes.is_some()) << 5);
            out.push(flags);
            put_delta(out, &mut st.time, d.time_ns);
            if !same_thread {
                put_varint(out, u64::from(d.thread));
                st.thread = d.thread;
            }
            put_delta(out, &mut st.region, d.region.0);
            put_delta32(out, &mut st.correlation, d.correlation);
            if let Some(p) = d.host_ptr {
                put_delta(out, &mut st.host_ptr, p);
            }
            if let Some(b) = d.bytes {
                put_varint(out, b);
            }
        }
        Record::Hash(h) => {
            let flags =
                u8::from(h.direction == Direction::Download) | (hash_mode_code(h.mode) << 1);
            out.push(flags);
            put_delta(out, &mut st.time, h.time_ns);
            put_delta(out, &mut st.region, h.region.0);
            put_delta32(out, &mut st.correlation, h.correlation);
            put_delta(out, &mut st.host_ptr, h.host_ptr);
            put_varint(out, h.bytes);
            out.extend_from_slice(&h.hash.to_le_bytes());
        }
        Record::Dropped { source, count } => {
            out.push(drop_source_code(*source));
            put_varint(out, *count);
        }
        Record::Diagnostic {
            time_ns,
            level,
            message,
        } => {
            put_delta(out, &mut st.time, *time_ns);
            out.push(level_code(*level));
            put_str(out, message);
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

#[inline]
fn bit(b: bool, shift: u32) -> u32 {
    u32::from(b) << shift
}

fn encode_acc(out: &mut Vec<u8>, st: &mut DeltaState, e: &AccEvent) {
    out.push(e.kind as u8);
    let same_thread = e.thread == st.thread;
    let loc = &e.location;
    let has_loc = *loc != SourceLocation::default();
    let (detail, fields) = match &e.detail {
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
        | bit(e.device_type.is_some(), 1)
        | bit(e.device_number.is_some(), 2)
        | bit(e.async_queue.is_some(), 3)
        | bit(e.construct.is_some(), 4)
        | bit(e.implicit, 5)
        | bit(e.call_site.is_some(), 6)
        | bit(has_loc, 7)
        | (detail << A_DETAIL_SHIFT)
        | (fields << A_FIELD_SHIFT);
    put_varint(out, u64::from(flags));
    put_delta(out, &mut st.time, e.time_ns);
    if !same_thread {
        put_varint(out, u64::from(e.thread));
        st.thread = e.thread;
    }
    put_delta(out, &mut st.region, e.region.0);
    if let Some(v) = e.device_type {
        put_varint(out, u64::from(v));
    }
    if let Some(v) = e.device_number {
        put_varint(out, u64::from(v));
    }
    if let Some(v) = e.async_queue {
        put_zigzag(out, i64::from(v));
    }
    if let Some(c) = e.construct {
        out.push(c as u8);
    }
    if let Some(c) = e.call_site {
        put_varint(out, u64::from(c.0));
    }
    if has_loc {
        let lflags = u8::from(loc.file.is_some())
            | (u8::from(loc.function.is_some()) << 1)
            | (u8::from(loc.line.is_some()) << 2)
            | (u8::from(loc.end_line.is_some()) << 3)
            | (u8::from(loc.function_line.is_some()) << 4)
            | (u8::from(loc.function_end_line.is_some()) << 5);
        out.push(lflags);
        for v in [loc.file.map(|s| s.0), loc.function.map(|s| s.0)]
            .into_iter()
            .chain([
                loc.line,
                loc.end_line,
                loc.function_line,
                loc.function_end_line,
            ])
            .flatten()
        {
            put_varint(out, u64::from(v));
        }
    }
    match &e.detail {
        AccDetail::None => {}
        AccDetail::Data(d) => {
            if let Some(v) = d.var_name {
                put_varint(out, u64::from(v.0));
            }
            if let Some(v) = d.bytes {
                put_varint(out, v);
            }
            if let Some(v) = d.host_ptr {
                put_delta(out, &mut st.host_ptr, v);
            }
            if let Some(v) = d.device_ptr {
                put_delta(out, &mut st.device_ptr, v);
            }
        }
        AccDetail::Launch(l) => {
            if let Some(v) = l.kernel_name {
                put_varint(out, u64::from(v.0));
            }
            for v in [l.num_gangs, l.num_workers, l.vector_length]
                .into_iter()
                .flatten()
            {
                put_varint(out, v);
            }
        }
    }
}

// ---- decoding ---------------------------------------------------------

/// Decodes one record body. `Ok(None)` means the tag is not one this
/// version knows: the record is skipped and the delta state is untouched.
pub(crate) fn decode_record(tag: u8, body: &[u8], st: &mut DeltaState) -> DResult<Option<Record>> {
    let c = &mut Cursor::new(body);
    let rec = match tag {
        TAG_ACC => Record::Acc(decode_acc(c, st)?),
        TAG_KERNEL => {
            let start_ns = get_delta(c, &mut st.time)?;
            let end_ns = start_ns.wrapping_add(c.varint()?);
            let name = StringId(c.varint_u32()?);
            let mut dims = [0u32; 6];
            for d in &mut dims {
                *d = c.varint_u32()?;
            }
            Record::Kernel(KernelRecord {
                start_ns,
                end_ns,
                name,
                grid: [dims[0], dims[1], dims[2]],
                block: [dims[3], dims[4], dims[5]],
                registers: c.varint_u32()?,
                static_shared_bytes: c.varint_u32()?,
                dynamic_shared_bytes: c.varint_u32()?,
                local_bytes_per_thread: c.varint_u32()?,
                device: c.varint_u32()?,
                context: c.varint_u32()?,
                stream: c.varint_u32()?,
                correlation: get_delta32(c, &mut st.correlation)?,
            })
        }
        TAG_MEMCPY => {
            let start_ns = get_delta(c, &mut st.time)?;
            let end_ns = start_ns.wrapping_add(c.varint()?);
            let bytes = c.varint()?;
            let kinds = c.u8()?;
            Record::Memcpy(MemcpyRecord {
                start_ns,
                end_ns,
                bytes,
                kind: copy_kind_from(kinds / 36)?,
                src: memory_kind_from(kinds / 6 % 6)?,
                dst: memory_kind_from(kinds % 6)?,
                device: c.varint_u32()?,
                context: c.varint_u32()?,
                stream: c.varint_u32()?,
                correlation: get_delta32(c, &mut st.correlation)?,
            })
        }
        TAG_MEMSET => {
            let start_ns = get_delta(c, &mut st.time)?;
            Record::Memset(MemsetRecord {
                start_ns,
                end_ns: start_ns.wrapping_add(c.varint()?),
                bytes: c.varint()?,
                value: c.varint_u32()?,
                memory: memory_kind_from(c.u8()?)?,
                device: c.varint_u32()?,
                context: c.varint_u32()?,
                stream: c.varint_u32()?,
                correlation: get_delta32(c, &mut st.correlation)?,
            })
        }
        TAG_DRIVER_CALL => {
            let flags = c.u8()?;
            if flags >> 6 != 0 {
                return Err(DecodeError::Invalid("driver call flags"));
            }
            let api = driver_api_from(flags & 7)?;
            let time_ns = get_delta(c, &mut st.time)?;
            if flags & (1 << 3) == 0 {
                st.thread = c.varint_u32()?;
            }
            let thread = st.thread;
            let region = RegionId(get_delta(c, &mut st.region)?);
            let correlation = get_delta32(c, &mut st.correlation)?;
            let host_ptr = if flags & (1 << 4) != 0 {
                Some(get_delta(c, &mut st.host_ptr)?)
            } else {
                None
            };
            let bytes = if flags & (1 << 5) != 0 {
                Some(c.varint()?)
            } else {
                None
            };
            Record::DriverCall(DriverCall {
                time_ns,
                thread,
                region,
                correlation,
                api,
                host_ptr,
                bytes,
            })
        }
        TAG_HASH => {
            let flags = c.u8()?;
            if flags >> 3 != 0 {
                return Err(DecodeError::Invalid("hash flags"));
            }
            Record::Hash(BufferHash {
                direction: if flags & 1 != 0 {
                    Direction::Download
                } else {
                    Direction::Upload
                },
                mode: hash_mode_from(flags >> 1)?,
                time_ns: get_delta(c, &mut st.time)?,
                region: RegionId(get_delta(c, &mut st.region)?),
                correlation: get_delta32(c, &mut st.correlation)?,
                host_ptr: get_delta(c, &mut st.host_ptr)?,
                bytes: c.varint()?,
                hash: c.u64_le()?,
            })
        }
        TAG_STRING => Record::String {
            id: StringId(c.varint_u32()?),
            text: c.string()?,
        },
        TAG_MODULE => Record::Module(Module {
            id: ModuleId(c.varint_u32()?),
            path: c.string()?,
            build_id: c.bytes()?.to_vec(),
            base: c.varint()?,
            text_start: c.varint()?,
            text_end: c.varint()?,
        }),
        TAG_CALL_SITE => Record::CallSite(CallSite {
            id: CallSiteId(c.varint_u32()?),
            module: ModuleId(c.varint_u32()?),
            return_offset: c.varint()?,
        }),
        TAG_DEVICE => Record::Device(Device {
            id: c.varint_u32()?,
            name: c.string()?,
            sm_count: c.varint_u32()?,
            compute_capability: (c.varint_u32()?, c.varint_u32()?),
            global_memory_bytes: c.varint()?,
        }),
        TAG_DROPPED => Record::Dropped {
            source: drop_source_from(c.u8()?)?,
            count: c.varint()?,
        },
        TAG_DIAGNOSTIC => Record::Diagnostic {
            time_ns: get_delta(c, &mut st.time)?,
            level: level_from(c.u8()?)?,
            message: c.string()?,
        },
        _ => return Ok(None),
    };
    Ok(Some(rec))
}

#[inline]
fn opt_u32(c: &mut Cursor<'_>, flags: u32, mask: u32) -> DResult<Option<u32>> {
    if flags & mask != 0 {
        Ok(Some(c.varint_u32()?))
    } else {
        Ok(None)
    }
}

#[inline]
fn opt_u64(c: &mut Cursor<'_>, flags: u32, mask: u32) -> DResult<Option<u64>> {
    if flags & mask != 0 {
        Ok(Some(c.varint()?))
    } else {
        Ok(None)
    }
}

#[inline]
fn opt_delta(c: &mut Cursor<'_>, flags: u32, mask: u32, last: &mut u64) -> DResult<Option<u64>> {
    if flags & mask != 0 {
        Ok(Some(get_delta(c, last)?))
    } else {
        Ok(None)
    }
}

fn decode_acc(c: &mut Cursor<'_>, st: &mut DeltaState) -> DResult<AccEvent> {
    let kind =
        AccEventKind::from_raw(i64::from(c.u8()?)).ok_or(DecodeError::Invalid("acc event kind"))?;
    let flags = c.varint_u32()?;
    if flags & !A_KNOWN != 0 {
        return Err(DecodeError::Invalid("acc event flags"));
    }
    let time_ns = get_delta(c, &mut st.time)?;
    if flags & A_SAME_THREAD == 0 {
        st.thread = c.varint_u32()?;
    }
    let thread = st.thread;
    let region = RegionId(get_delta(c, &mut st.region)?);
    let device_type = opt_u32(c, flags, A_DEVICE_TYPE)?;
    let device_number = opt_u32(c, flags, A_DEVICE_NUMBER)?;
    let async_queue = if flags & A_ASYNC != 0 {
        Some(i32::try_from(c.zigzag()?).map_err(|_| DecodeError::Overflow)?)
    } else {
        None
    };
    let construct = if flags & A_CONSTRUCT != 0 {
        Some(
            ConstructKind::from_raw(i64::from(c.u8()?))
                .ok_or(DecodeError::Invalid("construct kind"))?,
        )
    } else {
        None
    };
    let call_site = opt_u32(c, flags, A_CALL_SITE)?.map(CallSiteId);
    let location = if flags & A_LOCATION != 0 {
        let lf = u32::from(c.u8()?);
        if lf >> 6 != 0 {
            return Err(DecodeError::Invalid("location flags"));
        }
        SourceLocation {
            file: opt_u32(c, lf, 1)?.map(StringId),
            function: opt_u32(c, lf, 1 << 1)?.map(StringId),
            line: opt_u32(c, lf, 1 << 2)?,
            end_line: opt_u32(c, lf, 1 << 3)?,
            function_line: opt_u32(c, lf, 1 << 4)?,
            function_end_line: opt_u32(c, lf, 1 << 5)?,
        }
    } else {
        SourceLocation::default()
    };
    let fields = flags >> A_FIELD_SHIFT;
    let detail = match (flags >> A_DETAIL_SHIFT) & 3 {
        0 if fields == 0 => AccDetail::None,
        A_DETAIL_DATA => AccDetail::Data(DataInfo {
            var_name: opt_u32(c, fields, 1)?.map(StringId),
            bytes: opt_u64(c, fields, 1 << 1)?,
            host_ptr: opt_delta(c, fields, 1 << 2, &mut st.host_ptr)?,
            device_ptr: opt_delta(c, fields, 1 << 3, &mut st.device_ptr)?,
        }),
        A_DETAIL_LAUNCH => AccDetail::Launch(LaunchInfo {
            kernel_name: opt_u32(c, fields, 1)?.map(StringId),
            num_gangs: opt_u64(c, fields, 1 << 1)?,
            num_workers: opt_u64(c, fields, 1 << 2)?,
            vector_length: opt_u64(c, fields, 1 << 3)?,
        }),
        _ => return Err(DecodeError::Invalid("acc event detail")),
    };
    Ok(AccEvent {
        time_ns,
        kind,
        thread,
        region,
        device_type,
        device_number,
        async_queue,
        construct,
        implicit: flags & A_IMPLICIT != 0,
        location,
        call_site,
        detail,
    })
}

// ---- header -----------------------------------------------------------

fn put_source(out: &mut Vec<u8>, s: &SourceState) {
    match s {
        SourceState::Active => out.push(0),
        SourceState::Inactive(why) => {
            out.push(1);
            put_str(out, why);
        }
    }
}

fn get_source(c: &mut Cursor<'_>) -> DResult<SourceState> {
    match c.u8()? {
        0 => Ok(SourceState::Active),
        1 => Ok(SourceState::Inactive(c.string()?)),
        _ => Err(DecodeError::Invalid("source state")),
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
}

/// Decodes the header block payload. Bytes after the known fields are
/// fields of a later minor version and are ignored.
pub(crate) fn decode_header(payload: &[u8]) -> DResult<Header> {
    let c = &mut Cursor::new(payload);
    let host = c.string()?;
    let pid = c.varint_u32()?;
    let rank = match c.u8()? {
        0 => None,
        1 => Some(c.varint_u32()?),
        _ => return Err(DecodeError::Invalid("rank flag")),
    };
    let n = c.varint()?;
    // Each argument takes at least one byte: never trust the count for the
    // allocation.
    let mut command_line = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(c.remaining()));
    for _ in 0..n {
        command_line.push(c.string()?);
    }
    Ok(Header {
        host,
        pid,
        rank,
        command_line,
        executable: c.string()?,
        start_unix_ns: c.varint()?,
        start_clock_ns: c.varint()?,
        clock: match c.u8()? {
            0 => Clock::Monotonic,
            v => Clock::Other(v),
        },
        runtime: c.string()?,
        collector: c.string()?,
        sources: Sources {
            acc_prof: get_source(c)?,
            cupti: get_source(c)?,
            hashing: hash_mode_from(c.u8()?)?,
        },
    })
}

/// Checks that `payload` is exactly a sequence of framed records and counts
/// them, so that a reader can refuse a block before returning any of it.
pub(crate) fn count_frames(payload: &[u8]) -> Result<u32, usize> {
    let mut c = Cursor::new(payload);
    let mut n: u32 = 0;
    while c.remaining() > 0 {
        let at = c.pos();
        let ok = c.u8().and_then(|_| c.bytes()).is_ok();
        if !ok {
            return Err(at);
        }
        n = n.checked_add(1).ok_or(at)?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(recs: &[Record]) {
        let mut buf = Vec::new();
        let mut st = DeltaState::default();
        for r in recs {
            encode_record(&mut buf, &mut st, r);
        }
        assert_eq!(count_frames(&buf), Ok(recs.len() as u32));
        let mut c = Cursor::new(&buf);
        let mut st = DeltaState::default();
        for r in recs {
            let tag = c.u8().expect("tag");
            let body = c.bytes().expect("body");
            let got = decode_record(tag, body, &mut st).expect("decodes");
            assert_eq!(got.as_ref(), Some(r));
        }
        assert_eq!(c.remaining(), 0);
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
    }
}
