//! The form records take between a producer thread and the writer.
//!
//! The trace's [`Record`] is shaped for the file: every field the runtime
//! may leave out is an `Option`, and an OpenACC event takes 168 bytes. The
//! acc_prof callback fires for every construct, data event and launch, so
//! what it stores is kept small instead: [`AccRaw`] holds the same fields
//! with sentinels and flag bits (88 bytes), without the thread id (the
//! buffer knows it). The writer turns each [`Event`] back into a `Record`
//! just before encoding it, off the program's threads.

use accprof_trace::{
    AccDetail, AccEvent, AccEventKind, ApiCall, BufferHash, CallSiteId, ConstructKind, DataInfo,
    DriverCall, KernelRecord, LaunchInfo, MemcpyRecord, MemsetRecord, Record, RegionId,
    SourceLocation, StringId,
};

/// "Not given" for the 32-bit fields of [`AccRaw`] whose zero is a value.
pub(crate) const NONE32: u32 = u32::MAX;
/// "Not given" for [`AccRaw::construct`].
pub(crate) const NO_CONSTRUCT: u8 = u8::MAX;

/// [`AccRaw::flags`] bits.
pub(crate) mod flag {
    pub const IMPLICIT: u8 = 1;
    pub const HAS_ASYNC: u8 = 1 << 1;
    /// `p[0]`, `p[1]`, `p[2]` were given.
    pub const HAS_P0: u8 = 1 << 2;
    pub const HAS_P1: u8 = 1 << 3;
    pub const HAS_P2: u8 = 1 << 4;
    /// The event info was a data event's (`p` = bytes, host, device pointer)
    pub const DATA: u8 = 1 << 5;
    /// or a launch's (`p` = gangs, workers, vector length).
    pub const LAUNCH: u8 = 1 << 6;
}

/// One acc_prof event as the callback stores it. Ids are 0 when absent
/// (string and call-site ids start at 1); lines are 0 when absent (the
/// callback keeps only positive ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct AccRaw {
    /// A clock stamp (see clock), converted by the writer.
    pub time: u64,
    pub region: u64,
    pub p: [u64; 3],
    /// var_name (data events) or kernel_name (launches).
    pub name: u32,
    pub file: u32,
    pub function: u32,
    /// line, end line, function line, function end line.
    pub lines: [u32; 4],
    pub call_site: u32,
    pub device_type: u32,
    pub device_number: u32,
    pub async_queue: i32,
    pub kind: AccEventKind,
    pub construct: u8,
    pub flags: u8,
}

/// What a producer thread buffers. The records the program's own threads
/// make in bulk are stored inline; rare ones (drop counts, diagnostics) are
/// boxed so they do not widen every slot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Event {
    Acc(AccRaw),
    Kernel(KernelRecord),
    Memcpy(MemcpyRecord),
    Memset(MemsetRecord),
    DriverCall(DriverCall),
    Hash(BufferHash),
    Api(ApiCall),
    Other(Box<Record>),
}

fn id(v: u32) -> Option<u32> {
    (v != 0).then_some(v)
}

fn given(v: u32) -> Option<u32> {
    (v != NONE32).then_some(v)
}

impl AccRaw {
    /// The trace record, for an event of thread `thread`.
    pub(crate) fn to_record(self, thread: u32) -> AccEvent {
        let has = |bit: u8| self.flags & bit != 0;
        let p = |i: usize, bit: u8| has(bit).then_some(self.p[i]);
        let detail = if has(flag::DATA) {
            AccDetail::Data(DataInfo {
                var_name: id(self.name).map(StringId),
                bytes: p(0, flag::HAS_P0),
                host_ptr: p(1, flag::HAS_P1),
                device_ptr: p(2, flag::HAS_P2),
            })
        } else if has(flag::LAUNCH) {
            AccDetail::Launch(LaunchInfo {
                kernel_name: id(self.name).map(StringId),
                num_gangs: p(0, flag::HAS_P0),
                num_workers: p(1, flag::HAS_P1),
                vector_length: p(2, flag::HAS_P2),
            })
        } else {
            AccDetail::None
        };
        AccEvent {
            time_ns: self.time,
            kind: self.kind,
            thread,
            region: RegionId(self.region),
            device_type: given(self.device_type),
            device_number: given(self.device_number),
            async_queue: has(flag::HAS_ASYNC).then_some(self.async_queue),
            construct: ConstructKind::from_raw(self.construct as i64),
            implicit: has(flag::IMPLICIT),
            location: SourceLocation {
                file: id(self.file).map(StringId),
                function: id(self.function).map(StringId),
                line: id(self.lines[0]),
                end_line: id(self.lines[1]),
                function_line: id(self.lines[2]),
                function_end_line: id(self.lines[3]),
            },
            call_site: id(self.call_site).map(CallSiteId),
            detail,
        }
    }
}

impl Event {
    /// The buffered form of a record made elsewhere than the acc_prof
    /// callback.
    pub(crate) fn from_record(r: Record) -> Event {
        match r {
            Record::Kernel(k) => Event::Kernel(k),
            Record::Memcpy(m) => Event::Memcpy(m),
            Record::Memset(m) => Event::Memset(m),
            Record::DriverCall(d) => Event::DriverCall(d),
            Record::Hash(h) => Event::Hash(h),
            Record::Api(a) => Event::Api(a),
            other => Event::Other(Box::new(other)),
        }
    }

    /// The trace record; `thread` is the OS id of the thread that buffered it.
    pub(crate) fn into_record(self, thread: u32) -> Record {
        match self {
            Event::Acc(a) => Record::Acc(a.to_record(thread)),
            Event::Kernel(k) => Record::Kernel(k),
            Event::Memcpy(m) => Record::Memcpy(m),
            Event::Memset(m) => Record::Memset(m),
            Event::DriverCall(d) => Record::DriverCall(d),
            Event::Hash(h) => Record::Hash(h),
            Event::Api(a) => Record::Api(a),
            Event::Other(r) => *r,
        }
    }

    /// The host clock stamp the writer converts to ns, if this has one.
    pub(crate) fn stamp_mut(&mut self) -> Option<&mut u64> {
        match self {
            Event::Acc(a) => Some(&mut a.time),
            Event::DriverCall(d) => Some(&mut d.time_ns),
            Event::Hash(h) => Some(&mut h.time_ns),
            Event::Api(a) => Some(&mut a.time_ns),
            Event::Other(r) => record_stamp_mut(r),
            _ => None,
        }
    }
}

/// The host clock stamp of a full record (one queued after its thread's
/// storage was gone), if it has one.
pub(crate) fn record_stamp_mut(r: &mut Record) -> Option<&mut u64> {
    match r {
        Record::Acc(e) => Some(&mut e.time_ns),
        Record::DriverCall(d) => Some(&mut d.time_ns),
        Record::Hash(h) => Some(&mut h.time_ns),
        Record::Api(a) => Some(&mut a.time_ns),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use accprof_trace::{DriverApi, HashMode};

    #[test]
    fn slots_stay_small() {
        // The point of this type: half the bytes of a Record per event.
        assert!(std::mem::size_of::<AccRaw>() <= 88);
        assert!(std::mem::size_of::<Event>() <= 96);
        assert!(std::mem::size_of::<Event>() < std::mem::size_of::<Record>());
    }

    fn raw(flags: u8) -> AccRaw {
        AccRaw {
            time: 7,
            region: 3,
            p: [4096, 0x1000, 0x2000],
            name: 5,
            file: 0,
            function: 9,
            lines: [12, 0, 3, 40],
            call_site: 2,
            device_type: NONE32,
            device_number: 0,
            async_queue: -1,
            kind: AccEventKind::EnqueueUploadStart,
            construct: ConstructKind::Parallel as u8,
            flags,
        }
    }

    #[test]
    fn a_data_event_comes_back_with_what_was_given() {
        let r = raw(flag::DATA | flag::HAS_P0 | flag::HAS_P2 | flag::HAS_ASYNC);
        let e = r.to_record(42);
        assert_eq!(e.thread, 42);
        assert_eq!(e.time_ns, 7);
        assert_eq!(e.region, RegionId(3));
        assert_eq!(e.device_type, None);
        assert_eq!(e.device_number, Some(0));
        assert_eq!(e.async_queue, Some(-1));
        assert_eq!(e.construct, Some(ConstructKind::Parallel));
        assert!(!e.implicit);
        assert_eq!(e.call_site, Some(CallSiteId(2)));
        assert_eq!(
            e.location,
            SourceLocation {
                file: None,
                function: Some(StringId(9)),
                line: Some(12),
                end_line: None,
                function_line: Some(3),
                function_end_line: Some(40),
            }
        );
        assert_eq!(
            e.detail,
            AccDetail::Data(DataInfo {
                var_name: Some(StringId(5)),
                bytes: Some(4096),
                host_ptr: None,
                device_ptr: Some(0x2000),
            })
        );
    }

    #[test]
    fn a_launch_and_a_bare_event_keep_their_shape() {
        let mut r = raw(flag::LAUNCH | flag::HAS_P1 | flag::IMPLICIT);
        r.construct = NO_CONSTRUCT;
        r.call_site = 0;
        let e = r.to_record(1);
        assert!(e.implicit);
        assert_eq!(e.construct, None);
        assert_eq!(e.call_site, None);
        assert_eq!(e.async_queue, None);
        assert_eq!(
            e.detail,
            AccDetail::Launch(LaunchInfo {
                kernel_name: Some(StringId(5)),
                num_gangs: None,
                num_workers: Some(0x1000),
                vector_length: None,
            })
        );
        assert_eq!(raw(0).to_record(1).detail, AccDetail::None);
    }

    #[test]
    fn other_records_pass_through_unchanged() {
        let d = Record::DriverCall(DriverCall {
            time_ns: 5,
            thread: 8,
            region: RegionId(2),
            correlation: 11,
            api: DriverApi::Launch,
            host_ptr: None,
            bytes: Some(8),
        });
        let h = Record::Hash(BufferHash {
            time_ns: 6,
            region: RegionId(2),
            correlation: 11,
            direction: accprof_trace::Direction::Upload,
            host_ptr: 0x10,
            bytes: 8,
            mode: HashMode::Full,
            hash: 99,
            hash_ns: Some(40),
        });
        let x = Record::Dropped {
            source: accprof_trace::DropSource::Cupti,
            count: 3,
        };
        let a = Record::Api(accprof_trace::ApiCall {
            time_ns: 9,
            thread: 8,
            region: RegionId(4),
            phase: accprof_trace::ApiPhase::Start,
            routine: StringId(3),
            call_site: Some(CallSiteId(1)),
            host_ptr: Some(0x20),
            bytes: Some(16),
            async_queue: Some(2),
        });
        for r in [d, h, a, x] {
            let mut e = Event::from_record(r.clone());
            let stamped = e.stamp_mut().is_some();
            assert_eq!(stamped, !matches!(r, Record::Dropped { .. }));
            assert_eq!(e.into_record(1), r);
        }
    }
}
