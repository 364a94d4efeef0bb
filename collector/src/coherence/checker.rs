//! What the check knows and decides between two callbacks: the table of
//! ranges, the faults drained from the handler's ring, the records they
//! become (C1 stale reads, C2 lost writes, C3 unread downloads), and the
//! page protection that the ranges' states ask for.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use accprof_trace::{Coherence, CoherenceKind, Record, RegionId, StringId};

use super::blocks::Blocks;
use super::device::{read_device, read_host};
use super::fault::{self, Fault};
use super::table::{
    page_span, segments, without_pages, Download, Prot, Range, Snapshot, State, Table,
};

/// Touches of a page that other data shares with a watched array after
/// which the page is left open.
const HOT_TOUCHES: u64 = 2;
/// Bytes compared around a host write (its page, within the range).
const WRITE_WINDOW: u64 = 4096;
/// Bytes compared to tell an array from a runtime's staging buffer.
const PROOF: usize = 64;

#[derive(Default)]
pub(super) struct Checker {
    pub table: Table,
    /// Replaced snapshots a handler may still read (see `fault::publish`).
    retired: Vec<fault::Retired>,
    /// The page segments protected now, as last applied.
    applied: Vec<(u64, u64, Prot)>,
    /// The ranges last published for the handler (`Range::for_handler`),
    /// when published without extra spans: the same again is not
    /// published (each publication maps and unmaps pages, which every
    /// thread of the process pays for).
    published: Option<Vec<Range>>,
    /// fault::OPENED when `applied` was last made true.
    opened_seen: u64,
    /// fault::RING_FULL last seen.
    ring_full_seen: u64,
    /// Something changed since the last `apply`.
    dirty: bool,
    /// The first host write into a range since its copies last agreed.
    writes: BTreeMap<u64, Fault>,
    /// Constructs ran on a device with its own memory / on the host.
    pub device_seen: bool,
    pub host_seen: bool,
    pub confirmed: u64,
    pub current: u64,
    pub unconfirmed: u64,
    pub lost_writes: u64,
    pub unread_downloads: u64,
    /// Ranges ever mapped: none on a device means nothing was checked.
    pub mapped: u64,
    /// Arrays the runtime's own mapping table named (`lookup`), of blocks
    /// no copy may ever name (`create`).
    pub looked_up: u64,
    /// Copies into a data construct found to come from a buffer of the
    /// runtime's own (libgomp stages small arrays through one).
    pub staged: u64,
    /// Host <-> device copies the driver reported (CUPTI's callbacks): with
    /// none, the ranges' host addresses could not be known.
    pub copies_seen: u64,
    /// Pages left open because other data on them is touched again and
    /// again (the bytes of the arrays on them are not watched).
    pub pages_left_open: u64,
    /// Ranges left unwatched: on a thread's stack (protecting it would
    /// leave no room for the handler) or in memory `mprotect` refused.
    pub unwatched: u64,
    /// Device blocks the driver allocated while the check ran (and the
    /// loaded code's globals): which outlived the construct that made
    /// them, and the device span freeing one unmaps.
    pub blocks: Blocks,
    /// Every host range ever watched (start -> bytes), for the exit note.
    pub seen: BTreeMap<u64, u64>,
    /// Bytes of the staging buffers' copies, and the device spans they
    /// filled: an array staged there is watched from its first own copy.
    pub staged_bytes: u64,
    staged_spans: Vec<(u64, u64)>,
    /// Host ranges first copied through a staging buffer, watched since.
    pub staged_learned: BTreeSet<u64>,
}

/// Staging copies whose device spans are kept (for `staged_learned`).
const STAGED_SPANS: usize = 1024;

fn page() -> u64 {
    fault::PAGE.load(Ordering::Relaxed)
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

impl Checker {
    /// Starts tracking a range. `proven`: the runtime named the host
    /// address itself (else it came from a driver copy, which libgomp may
    /// have staged through a buffer of its own: see `prove`).
    /// Returns whether the range is in the table (not on a stack, not
    /// beyond its capacity).
    pub fn map(&mut self, host: u64, bytes: u64, device: u64, name: u32, proven: bool) -> bool {
        if super::on_own_stack(host, bytes) || super::on_thread_block(host, bytes) {
            self.unwatched += 1;
            return false;
        }
        if !proven {
            // Copied from now: a buffer the runtime freed here before is
            // not this one.
            super::staging::forget(host);
        }
        let known = self
            .table
            .ranges()
            .iter()
            .any(|r| r.start == host && !r.gone && !r.unproven);
        if !self.table.map(host, bytes, device, name) {
            return false;
        }
        if let Some(r) = self.table.ranges_mut().iter_mut().find(|r| r.start == host) {
            // Once shown to be the array, a range stays proven.
            r.unproven = !(proven || known);
            if !r.unproven {
                let r = *r;
                self.watching(&r);
            }
        }
        self.mapped += 1;
        self.dirty = true;
        true
    }

    /// `r` is watched: counted for the exit note (and, when its device
    /// copy was filled from a staging buffer, among the arrays learned
    /// after it).
    fn watching(&mut self, r: &super::table::Range) {
        let e = self.seen.entry(r.start).or_insert(0);
        *e = (*e).max(r.bytes);
        if r.device != 0
            && self
                .staged_spans
                .iter()
                .any(|s| r.device >= s.0 && r.device < s.1)
        {
            self.staged_learned.insert(r.start);
        }
    }

    /// The host ranges ever watched, overlaps merged: how many and their
    /// bytes.
    pub fn watched_total(&self) -> (u64, u64) {
        let (mut n, mut bytes, mut end) = (0u64, 0u64, 0u64);
        for (&s, &b) in &self.seen {
            let e = s.saturating_add(b);
            if s >= end {
                n += 1;
                bytes += b;
                end = e;
            } else if e > end {
                bytes += e - end;
                end = e;
            }
        }
        (n, bytes)
    }

    /// The runtime is about to read (upload) or write (download) the host
    /// bytes: their pages are opened first; afterwards both copies agree.
    /// `download_by`: the update construct downloading, when it is one
    /// (whose reader is then awaited).
    pub fn host_updated(&mut self, host: u64, bytes: u64, upload: bool, download_by: Option<u64>) {
        let end = host.saturating_add(bytes);
        let watched = self
            .applied
            .iter()
            .any(|s| s.0 < end && s.1 > host && s.2 != Prot::Rw);
        if watched {
            let (lo, hi) = page_span(host, bytes, page());
            fault::open_span(lo, hi);
            self.dirty = true;
        }
        let covered = self.table.host_updated(host, bytes);
        if covered.is_empty() {
            return;
        }
        self.dirty = true;
        let next = (!upload)
            .then(|| {
                download_by.map(|region| Download {
                    region,
                    time: crate::clock::now_ns(),
                    thread: gettid(),
                })
            })
            .flatten();
        // One download over parts of a range split since is one download.
        let mut said: Vec<Download> = Vec::new();
        for r in covered {
            self.writes.remove(&r.start);
            if upload {
                continue;
            }
            if let Some(d) = r.unread.filter(|d| !said.contains(d)) {
                said.push(d);
                self.unread_download(&r, d);
            }
            if let Some(t) = self
                .table
                .ranges_mut()
                .iter_mut()
                .find(|x| x.start == r.start)
            {
                t.unread = next;
            }
        }
        self.table.join_parts();
    }

    /// Forgets the ranges `gone` picks (the runtime freed their device
    /// copies): a download still unread is one nobody read.
    pub fn unmap(&mut self, gone: impl FnMut(&Range) -> bool) {
        let gone = self.table.take(gone);
        if gone.is_empty() {
            return;
        }
        for r in &gone {
            // A download still unread stays watched: the host may read it
            // after the region (see `Range::gone`).
            self.table.keep_unread(*r);
            self.writes.remove(&r.start);
            let (lo, hi) = page_span(r.start, r.bytes, page());
            if self.applied.iter().any(|s| s.0 < hi && s.1 > lo) {
                fault::open_span(lo, hi);
            }
        }
        self.dirty = true;
    }

    /// After a data construct's entry: the ranges mapped from its copies
    /// are watched only where the host bytes are the device's (a staging
    /// buffer was freed, or filled with other arrays' bytes, by now).
    pub fn prove(&mut self) {
        let mut staged = Vec::new();
        let mut proven = Vec::new();
        for r in self.table.ranges_mut().iter_mut().filter(|r| r.unproven) {
            if super::staging::freed_by_runtime(r.start) {
                staged.push(r.start);
                continue;
            }
            let n = (r.bytes as usize).min(PROOF);
            let (mut h, mut d) = ([0u8; PROOF], [0u8; PROOF]);
            if !read_device(r.device, &mut d[..n]) {
                // Undecided: stays unwatched.
                continue;
            }
            if read_host(r.start, &mut h[..n]) && h[..n] == d[..n] {
                r.unproven = false;
                self.dirty = true;
                proven.push(*r);
            } else {
                staged.push(r.start);
            }
        }
        for r in &proven {
            self.watching(r);
        }
        if !staged.is_empty() {
            self.unstage(|r| staged.contains(&r.start));
        }
    }

    /// The ranges `staged` picks were the runtime's staging buffers:
    /// unmapped, counted, and the arrays the runtime copied into them (its
    /// `memcpy` calls, see `staging`) mapped at their offsets of the
    /// buffers' device copies, where their bytes are the device's.
    fn unstage(&mut self, staged: impl Fn(&Range) -> bool) {
        let buffers: Vec<Range> = self
            .table
            .ranges()
            .iter()
            .filter(|r| staged(r))
            .copied()
            .collect();
        for r in &buffers {
            self.staged += 1;
            self.staged_bytes += r.bytes;
            if r.device != 0 && self.staged_spans.len() < STAGED_SPANS {
                self.staged_spans
                    .push((r.device, r.device.saturating_add(r.bytes)));
            }
            self.seen.remove(&r.start);
        }
        self.unmap(|r| staged(r));
        for r in buffers.iter().filter(|r| r.device != 0) {
            let copies = super::staging::copies_into(r.start, r.end());
            for (src, n, device) in staged_arrays(r, &copies) {
                let k = (n as usize).min(PROOF);
                let (mut h, mut d) = ([0u8; PROOF], [0u8; PROOF]);
                if read_device(device, &mut d[..k])
                    && read_host(src, &mut h[..k])
                    && h[..k] == d[..k]
                {
                    self.map(src, n, device, 0, true);
                }
            }
        }
    }

    /// A compute construct (region `region`) ended: the copies the device
    /// holds may be newer there.
    pub fn device_written(&mut self, region: u64) {
        self.table.device_written(region);
        self.dirty = true;
    }

    /// A compute construct starts: a range the host wrote since both copies
    /// agreed, with no upload since, is used as the device has it (C2),
    /// when the written bytes differ from the device's.
    pub fn lost_writes(&mut self, region: u64) {
        let written: Vec<Range> = self
            .table
            .ranges()
            .iter()
            .filter(|r| r.state == State::HostNewer && r.device != 0)
            .copied()
            .collect();
        for r in written {
            let Some(f) = self.writes.remove(&r.start) else {
                continue;
            };
            let lo = (f.host_addr & !(WRITE_WINDOW - 1)).max(r.start);
            let hi = (lo + WRITE_WINDOW).min(r.end());
            if lo >= hi {
                // The write fell outside the range as it is mapped now (the
                // array at this start was mapped again, shorter).
                continue;
            }
            let n = (hi - lo) as usize;
            let (mut h, mut d) = (vec![0u8; n], vec![0u8; n]);
            let host_ok = read_host(lo, &mut h);
            let confirmed = if host_ok && read_device(r.device + (lo - r.start), &mut d) {
                if h == d {
                    // Written back as it was: nothing lost.
                    continue;
                }
                true
            } else {
                false
            };
            self.lost_writes += 1;
            push(CoherenceKind::LostWrite, &f, &r, region, confirmed);
            if let Some(t) = self
                .table
                .ranges_mut()
                .iter_mut()
                .find(|x| x.start == r.start)
            {
                // Said once: from here on the device's copy is the one used.
                t.state = State::HostCurrent;
            }
            self.dirty = true;
        }
    }

    /// Takes the faults the handler recorded since the last boundary: a
    /// read of a stale copy is compared with the device's bytes (when
    /// `device`: the device may still be asked) and recorded if they
    /// differ (C1); a write to a copy the device shares makes the host's
    /// newer; any touch of an awaited download reads it.
    pub fn settle(&mut self, device: bool) {
        let mut faults = Vec::new();
        // An access made inside a library is walked out of it here, off
        // the signal path, from the stack the handler copied.
        fault::drain(|mut f, copy| {
            if copy.words > 0 && !super::walk::in_main_executable(f.code_addr) {
                f.nframes = super::walk::walk(copy, &mut f.frames);
            }
            faults.push(f);
        });
        let full = fault::RING_FULL.load(Ordering::Relaxed);
        if full != self.ring_full_seen {
            // Accesses were lost: every awaited download may have been read.
            self.ring_full_seen = full;
            for r in self.table.ranges_mut() {
                r.unread = None;
            }
            self.dirty = true;
        }
        for mut f in faults {
            self.stale_since_of(&mut f);
            let start = f.range.start;
            if f.range.unread.is_some() {
                if let Some(t) = self
                    .table
                    .ranges_mut()
                    .iter_mut()
                    .find(|x| x.start == start)
                {
                    t.unread = None;
                }
                self.dirty = true;
            }
            if f.write {
                if !f.range.is_stale() {
                    if let Some(t) = self
                        .table
                        .ranges_mut()
                        .iter_mut()
                        .find(|x| x.start == start)
                    {
                        if t.state == State::HostCurrent {
                            t.state = State::HostNewer;
                            self.writes.entry(start).or_insert(f);
                            self.dirty = true;
                        }
                    }
                }
                continue;
            }
            if f.range.is_stale() {
                self.stale_read(&f, device);
            }
        }
        self.table.drop_read();
    }

    fn stale_read(&mut self, f: &Fault, device: bool) {
        let mut dev = [0u8; fault::SAVED];
        let n = f.saved_len;
        let at = f.range.device + (f.saved_at - f.range.start);
        let confirmed = if device && f.range.device != 0 && read_device(at, &mut dev[..n]) {
            if dev[..n] == f.saved[..n] {
                self.current += 1;
                return;
            }
            self.confirmed += 1;
            true
        } else {
            self.unconfirmed += 1;
            false
        };
        let since = match f.range.state {
            State::DeviceNewer { since } => since,
            _ => 0,
        };
        push(CoherenceKind::StaleRead, f, &f.range, since, confirmed);
    }

    fn unread_download(&mut self, r: &Range, d: Download) {
        self.unread_downloads += 1;
        crate::sink::push(Record::Coherence(Coherence {
            kind: CoherenceKind::UnreadDownload,
            time_ns: d.time,
            thread: d.thread,
            code_addr: 0,
            host_addr: r.start,
            range_start: r.start,
            range_bytes: r.bytes,
            variable: (r.name != 0).then_some(StringId(r.name)),
            construct: RegionId(d.region),
            confirmed: true,
            callers: Vec::new(),
        }));
    }

    /// Makes the pages' protection what the ranges' states ask (after a
    /// construct: the runtime's copies are done), when anything changed.
    pub fn apply(&mut self) {
        // A staging buffer freed late (after an asynchronous copy).
        if self
            .table
            .ranges()
            .iter()
            .any(|r| super::staging::freed_by_runtime(r.start))
        {
            self.unstage(|r| super::staging::freed_by_runtime(r.start));
        }
        let opened = fault::OPENED.load(Ordering::Relaxed);
        if !self.dirty && opened == self.opened_seen {
            return;
        }
        let watched = self.table.watched();
        // A page beside an array that the program touched more than once
        // stays open: it would fault at every construct.
        let hot = fault::hot_pages(HOT_TOUCHES);
        self.pages_left_open = self.pages_left_open.max(hot.len() as u64);
        let next = without_pages(segments(&watched, page()), &hot, page());
        if next == self.applied && opened == self.opened_seen {
            // The same pages, the same protection: only the states the
            // handler reads changed.
            self.dirty = false;
            self.publish_with(watched, &[]);
            return;
        }
        // While segments open, a fault there is still the check's.
        self.publish_with(watched.clone(), &self.applied.clone());
        for old in &self.applied {
            if !next.contains(old) {
                fault::open_span(old.0, old.1);
            }
        }
        for s in &next {
            // SAFETY: whole pages of host ranges mapped to the device; the
            // handler loosens any page something else needs.
            let failed = unsafe {
                libc::mprotect(
                    s.0 as usize as *mut libc::c_void,
                    (s.1 - s.0) as usize,
                    s.2.bits(),
                )
            } != 0;
            if failed {
                self.unwatched += 1;
            }
        }
        self.applied = next;
        self.opened_seen = fault::OPENED.load(Ordering::Relaxed);
        self.dirty = false;
        self.publish_with(watched, &[]);
    }

    fn publish_with(&mut self, watched: Vec<Range>, extra: &[(u64, u64, Prot)]) {
        let view: Vec<Range> = watched.iter().map(Range::for_handler).collect();
        if extra.is_empty() && self.published.as_ref() == Some(&view) {
            return;
        }
        fault::publish(
            &Snapshot::new(view.clone(), page(), extra),
            &mut self.retired,
        );
        self.published = extra.is_empty().then_some(view);
    }

    /// The construct that made the faulting range stale, from the table
    /// (the handler's snapshot does not carry it): no construct ended
    /// between the fault and this boundary, so the table's is the one.
    fn stale_since_of(&self, f: &mut Fault) {
        if !f.range.is_stale() {
            return;
        }
        if let Some(State::DeviceNewer { since }) = self
            .table
            .ranges()
            .iter()
            .find(|x| x.start == f.range.start && x.is_stale())
            .map(|x| x.state)
        {
            f.range.state = State::DeviceNewer { since };
        }
    }

    /// At exit: the faults still waiting (unconfirmed), the downloads
    /// nobody read, every page opened.
    pub fn finish(&mut self) {
        self.settle(false);
        let unread: Vec<(Range, Download)> = self
            .table
            .ranges()
            .iter()
            .filter_map(|r| r.unread.map(|d| (*r, d)))
            .collect();
        let mut said: Vec<Download> = Vec::new();
        for (r, d) in unread {
            if !said.contains(&d) {
                said.push(d);
                self.unread_download(&r, d);
            }
        }
        for s in std::mem::take(&mut self.applied) {
            fault::open_span(s.0, s.1);
        }
        self.table.take(|_| true);
        self.publish_with(Vec::new(), &[]);
    }
}

/// The arrays the runtime copied into staging buffer `buffer` (its copies:
/// destination, source, bytes): each one's host range and device address
/// (the buffer's device copy at the array's offset in the buffer).
fn staged_arrays(buffer: &Range, copies: &[(u64, u64, u64)]) -> Vec<(u64, u64, u64)> {
    copies
        .iter()
        .filter(|(dst, _, n)| *dst >= buffer.start && dst.saturating_add(*n) <= buffer.end())
        .map(|&(dst, src, n)| (src, n, buffer.device + (dst - buffer.start)))
        .collect()
}

fn push(kind: CoherenceKind, f: &Fault, r: &Range, construct: u64, confirmed: bool) {
    crate::callsite::define_module_of(f.code_addr);
    // An access inside a library: its module, and those of the frames the
    // walk found above it, so that the analyzer reaches the program's call.
    let callers = if f.nframes > 0 {
        let _ = crate::callsite::frame_of(f.code_addr);
        f.frames[..f.nframes.min(f.frames.len())]
            .iter()
            .map_while(|&ip| crate::callsite::frame_of(ip))
            .collect()
    } else {
        Vec::new()
    };
    crate::sink::push(Record::Coherence(Coherence {
        kind,
        time_ns: f.time,
        thread: f.thread,
        code_addr: f.code_addr,
        host_addr: f.host_addr,
        range_start: r.start,
        range_bytes: r.bytes,
        variable: (r.name != 0).then_some(StringId(r.name)),
        construct: RegionId(construct),
        confirmed,
        callers,
    }));
}

#[cfg(test)]
mod tests {
    use super::super::table::State;
    use super::*;

    /// libgomp's buffer holds a (40 bytes) at offset 0 and b (24 bytes) at
    /// 64; uploaded to the device block at 0xd000: a's device copy is at
    /// 0xd000, b's at 0xd040. A copy outside the buffer is not one of its
    /// arrays.
    #[test]
    fn the_arrays_copied_into_a_staging_buffer_get_its_device_offsets() {
        let buffer = Range {
            start: 0x5000,
            bytes: 88,
            device: 0xd000,
            name: 0,
            state: State::HostCurrent,
            unread: None,
            unproven: true,
            gone: false,
        };
        let copies = [
            (0x5000, 0xa000, 40),
            (0x5040, 0xb000, 24),
            (0x5050, 0xc000, 24),
            (0x4ff0, 0xe000, 8),
        ];
        assert_eq!(
            staged_arrays(&buffer, &copies),
            [(0xa000, 40, 0xd000), (0xb000, 24, 0xd040)]
        );
    }

    /// Constructs that only make stale again what was stale publish
    /// nothing new for the handler; a fault on the range still names the
    /// construct that wrote the device copy last.
    #[test]
    fn a_range_made_stale_again_is_not_published_again() {
        // An address nothing in this process maps: the protection fails,
        // the decisions are the same.
        const U: u64 = 0x10_0000_0000;
        let mut c = Checker::default();
        assert!(c.table.map(U, 4096, 0xd000, 0));
        c.table.device_written(5);
        let first: Vec<Range> = c.table.watched().iter().map(Range::for_handler).collect();
        c.table.device_written(6);
        let second: Vec<Range> = c.table.watched().iter().map(Range::for_handler).collect();
        assert_eq!(first, second);
        c.dirty = true;
        c.apply();
        assert_eq!(c.published.as_deref(), Some(&first[..]));
        c.table.device_written(6);
        c.dirty = true;
        c.apply();
        assert_eq!(c.published.as_deref(), Some(&first[..]));
        let mut f = super::super::fault::BLANK;
        f.range = second[0];
        c.stale_since_of(&mut f);
        assert_eq!(f.range.state, State::DeviceNewer { since: 6 });
    }

    /// A host write recorded for a range that was mapped again shorter
    /// since (the runtime named the array at the same start with its
    /// clause's length) falls outside it: it is dropped, not read as a
    /// window that ends before it starts.
    #[test]
    fn a_write_outside_the_range_mapped_now_is_dropped() {
        let mut c = Checker::default();
        assert!(c.table.map(0x10000, 4096, 0xd000, 0));
        c.table.ranges_mut()[0].state = State::HostNewer;
        let mut f = super::super::fault::BLANK;
        f.host_addr = 0x30000;
        f.write = true;
        c.writes.insert(0x10000, f);
        c.lost_writes(1);
        assert_eq!(c.lost_writes, 0);
        assert!(c.writes.is_empty());
    }
}
