//! The host ranges mapped to the device, which copy of each is current,
//! and the page protection that watching them takes: plain data and pure
//! functions, so every decision the callbacks make is testable without a
//! device, a signal or `mprotect`. The range types and the lookups the
//! signal handler makes on them (`judge`, `save_window`, `page_span`) are
//! `signals::ranges`, with the rest of what a handler runs; the table,
//! its segments and the snapshot it publishes are built here, outside any
//! handler.

#[cfg(test)]
use crate::signals::ranges::{judge, Verdict};
pub(crate) use crate::signals::ranges::{page_span, Download, Prot, Range, State};

impl Range {
    /// The range as the signal handler is shown it: its state without the
    /// construct that made it stale (`settle` takes that from the table),
    /// so a construct that only makes stale again what was stale leaves
    /// the published snapshot as it was.
    pub fn for_handler(&self) -> Range {
        let mut r = *self;
        if let State::DeviceNewer { .. } = r.state {
            r.state = State::DeviceNewer { since: 0 };
        }
        r
    }
}

/// Tracked ranges at most: a program maps a few dozen arrays; beyond this
/// new ones go unwatched (counted) so the handler's scan stays short.
pub(crate) const MAX_RANGES: usize = 4096;

/// The ranges, in the order they were mapped.
#[derive(Debug, Default, Clone)]
pub(crate) struct Table {
    ranges: Vec<Range>,
    /// Ranges not tracked because the table was full.
    pub overflow: u64,
}

impl Table {
    pub fn ranges(&self) -> &[Range] {
        &self.ranges
    }

    pub fn ranges_mut(&mut self) -> &mut [Range] {
        &mut self.ranges
    }

    /// Starts tracking `start..start+bytes` with the host copy current, or
    /// updates the range that starts there (a new mapping of the same
    /// array). False when the table is full, the range is empty, or it is
    /// (part of) a range mapped there already, whose state then stays.
    pub fn map(&mut self, start: u64, bytes: u64, device: u64, name: u32) -> bool {
        if bytes == 0 || start == 0 {
            return false;
        }
        let end = start.saturating_add(bytes);
        let offset_agrees = |r: &Range| {
            device == 0 || r.device == 0 || r.device.wrapping_add(start - r.start) == device
        };
        // The range or a part of it, already mapped there (a partial update
        // of a known array, `update host(p(1:10))`): nothing new, and the
        // state of the rest stays.
        if let Some(r) = self
            .ranges
            .iter_mut()
            .find(|r| !r.gone && r.start <= start && r.end() >= end && offset_agrees(r))
        {
            if r.start == start && name != 0 {
                r.name = name;
            }
            return false;
        }
        if let Some(r) = self.ranges.iter_mut().find(|r| r.start == start) {
            r.bytes = r.bytes.max(bytes);
            if device != 0 {
                r.device = device;
            }
            if name != 0 {
                r.name = name;
            }
            r.state = State::HostCurrent;
            r.gone = false;
            // Parts split from it (see `host_updated`) are one range again.
            let (start, end) = (r.start, r.end());
            self.ranges
                .retain(|x| !(x.start > start && x.start < end && x.end() <= end));
            return true;
        }
        // Parts mapped before the whole (a partial update first): the
        // whole replaces them.
        self.ranges
            .retain(|x| x.gone || !(x.start > start && x.end() <= end));
        if self.ranges.len() >= MAX_RANGES {
            self.overflow += 1;
            return false;
        }
        self.ranges.push(Range {
            start,
            bytes,
            device,
            name,
            state: State::HostCurrent,
            unread: None,
            unproven: false,
            gone: false,
        });
        true
    }

    /// The host copy of `start..start+bytes` is brought up to date (a
    /// download writes it, an upload makes both copies equal): the part of
    /// every range it covers becomes host-current, a range it covers in
    /// part is split there (`update self(u[ny:ny])` brings back one row).
    /// Returns the covered parts, as they were.
    pub fn host_updated(&mut self, start: u64, bytes: u64) -> Vec<Range> {
        let end = start.saturating_add(bytes);
        let mut covered = Vec::new();
        let mut i = 0;
        while i < self.ranges.len() {
            let r = self.ranges[i];
            let (lo, hi) = (r.start.max(start), r.end().min(end));
            if lo >= hi {
                i += 1;
                continue;
            }
            let part = |a: u64, b: u64| Range {
                start: a,
                bytes: b - a,
                device: if r.device == 0 {
                    0
                } else {
                    r.device + (a - r.start)
                },
                ..r
            };
            let pieces: Vec<Range> = [(r.start, lo), (lo, hi), (hi, r.end())]
                .into_iter()
                .filter(|(a, b)| a < b)
                .map(|(a, b)| part(a, b))
                .collect();
            let n = pieces.len();
            if self.ranges.len() + n - 1 > MAX_RANGES {
                // No room to split: only a whole range becomes current.
                if lo == r.start && hi == r.end() {
                    covered.push(r);
                    self.ranges[i].state = State::HostCurrent;
                }
                i += 1;
                continue;
            }
            self.ranges.splice(i..=i, pieces);
            let at = if lo > r.start { i + 1 } else { i };
            covered.push(self.ranges[at]);
            self.ranges[at].state = State::HostCurrent;
            i += n;
        }
        covered
    }

    /// Joins the neighbouring parts of one mapping that are alike again
    /// (split by partial updates; see `host_updated`).
    pub fn join_parts(&mut self) {
        let mut out: Vec<Range> = Vec::with_capacity(self.ranges.len());
        for r in self.ranges.drain(..) {
            match out.last_mut() {
                Some(p)
                    if p.end() == r.start
                        && p.device != 0
                        && p.device + p.bytes == r.device
                        && (p.name, p.state, p.unread, p.unproven)
                            == (r.name, r.state, r.unread, r.unproven) =>
                {
                    p.bytes += r.bytes;
                }
                _ => out.push(r),
            }
        }
        self.ranges = out;
    }

    /// Keeps `r`, just unmapped, while its last download is unread.
    pub fn keep_unread(&mut self, r: Range) {
        if r.unread.is_none() || self.ranges.len() >= MAX_RANGES {
            return;
        }
        self.ranges.push(Range {
            device: 0,
            state: State::HostCurrent,
            unproven: false,
            gone: true,
            ..r
        });
    }

    /// Forgets the unmapped ranges whose last download has been read.
    pub fn drop_read(&mut self) {
        self.ranges.retain(|r| !(r.gone && r.unread.is_none()));
    }

    /// Forgets the ranges `keep` says no; returns them.
    pub fn take(&mut self, mut gone: impl FnMut(&Range) -> bool) -> Vec<Range> {
        let mut out = Vec::new();
        self.ranges.retain(|r| {
            let g = gone(r);
            if g {
                out.push(*r);
            }
            !g
        });
        out
    }

    /// A compute construct (region `region`) ended: every range the device
    /// holds may now be newer there.
    pub fn device_written(&mut self, region: u64) {
        for r in &mut self.ranges {
            if r.device != 0 && !r.unproven {
                r.state = State::DeviceNewer { since: region };
            }
        }
        self.join_parts();
    }

    /// The ranges whose pages are watched, for the handler's snapshot.
    pub fn watched(&self) -> Vec<Range> {
        self.ranges
            .iter()
            .filter(|r| r.prot() != Prot::Rw)
            .copied()
            .collect()
    }
}

/// The page segments that watching `ranges` takes: sorted, disjoint, each
/// with the strictest protection any range on it asks (a page shared by a
/// stale range and a current one is closed).
pub(crate) fn segments(ranges: &[Range], page: u64) -> Vec<(u64, u64, Prot)> {
    let mut cuts: Vec<u64> = Vec::with_capacity(ranges.len() * 2);
    let spans: Vec<(u64, u64, Prot)> = ranges
        .iter()
        .filter(|r| r.prot() != Prot::Rw)
        .map(|r| {
            let (lo, hi) = page_span(r.start, r.bytes, page);
            (lo, hi, r.prot())
        })
        .collect();
    for s in &spans {
        cuts.push(s.0);
        cuts.push(s.1);
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out: Vec<(u64, u64, Prot)> = Vec::new();
    for w in cuts.windows(2) {
        let (lo, hi) = (w[0], w[1]);
        let prot = spans
            .iter()
            .filter(|s| s.0 < hi && s.1 > lo)
            .map(|s| s.2)
            .min();
        let Some(prot) = prot else { continue };
        match out.last_mut() {
            Some(last) if last.1 == lo && last.2 == prot => last.1 = hi,
            _ => out.push((lo, hi, prot)),
        }
    }
    out
}

/// `segs` (sorted, disjoint page segments) without the pages starting at
/// `open` (left open: other data on them is touched again and again).
pub(crate) fn without_pages(
    segs: Vec<(u64, u64, Prot)>,
    open: &[u64],
    page: u64,
) -> Vec<(u64, u64, Prot)> {
    if open.is_empty() {
        return segs;
    }
    let mut open = open.to_vec();
    open.sort_unstable();
    let mut out = Vec::with_capacity(segs.len() + open.len());
    for (lo, hi, prot) in segs {
        let mut from = lo;
        for &p in open.iter().filter(|&&p| p >= lo && p < hi) {
            if p > from {
                out.push((from, p, prot));
            }
            from = from.max(p + page);
        }
        if from < hi {
            out.push((from, hi, prot));
        }
    }
    out
}

/// The handler's view: the watched ranges and the protected page spans,
/// immutable once published.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub watched: Vec<Range>,
    /// Sorted, disjoint page spans that may be protected.
    pub spans: Vec<(u64, u64)>,
}

impl Snapshot {
    /// `extra`: page spans protected until now that the new state may
    /// open (a fault there while they are opened is still ours).
    pub fn new(watched: Vec<Range>, page: u64, extra: &[(u64, u64, Prot)]) -> Snapshot {
        let mut all: Vec<(u64, u64)> = segments(&watched, page)
            .into_iter()
            .chain(extra.iter().copied())
            .map(|s| (s.0, s.1))
            .collect();
        all.sort_unstable();
        let mut spans: Vec<(u64, u64)> = Vec::with_capacity(all.len());
        for (lo, hi) in all {
            match spans.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => spans.push((lo, hi)),
            }
        }
        Snapshot { watched, spans }
    }

    #[cfg(test)]
    pub fn judge(&self, addr: u64) -> Verdict {
        judge(&self.watched, &self.spans, addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::ranges::tests::{at, stale_at};

    const PAGE: u64 = 4096;

    #[test]
    fn a_construct_end_makes_present_ranges_stale_and_a_download_current() {
        let mut t = Table::default();
        assert!(t.map(0x10000, 0x3000, 0xd0000, 7));
        // No device address known: never taken for present.
        assert!(t.map(0x20000, 0x100, 0, 0));
        t.device_written(5);
        assert_eq!(t.watched().len(), 1);
        assert_eq!(t.watched()[0].state, State::DeviceNewer { since: 5 });
        // Part of the range downloaded: the rest is still stale.
        assert_eq!(t.host_updated(0x10000, 0x1000).len(), 1);
        assert!(!t.ranges()[0].is_stale());
        assert!(t.ranges()[1].is_stale());
        let covered = t.host_updated(0x10000, 0x3000);
        assert_eq!(covered.len(), 2);
        assert!(covered[1].is_stale(), "returned as it was");
        t.join_parts();
        assert_eq!(t.ranges()[0].state, State::HostCurrent);
        // Both copies agree: the pages are read-only, to catch a write.
        assert_eq!(t.ranges()[0].prot(), Prot::Read);
        assert_eq!(t.ranges()[1].prot(), Prot::Rw);
        // Mapping the same range again is nothing new: one range.
        assert!(!t.map(0x10000, 0x3000, 0, 0));
        assert_eq!(t.ranges().len(), 2);
        assert_eq!(t.ranges()[0].device, 0xd0000);
        let gone = t.take(|r| r.start == 0x10000);
        assert_eq!((gone.len(), t.ranges().len()), (1, 1));
    }

    /// Fortran's `update host(p(1:10))` of a stale p: the copy of p's
    /// first elements maps nothing new, and leaves the rest of p stale.
    #[test]
    fn a_copy_of_a_ranges_first_part_leaves_the_rest_stale() {
        let mut t = Table::default();
        assert!(t.map(0x10000, 0x8000, 0xd0000, 0));
        t.device_written(3);
        assert!(!t.map(0x10000, 80, 0xd0000, 0));
        assert!(t.ranges()[0].is_stale(), "{:?}", t.ranges());
        t.host_updated(0x10000, 80);
        assert_eq!(t.ranges().len(), 2);
        assert!(!t.ranges()[0].is_stale());
        assert!(t.ranges()[1].is_stale());
        // A copy to another device address is a new mapping of the array.
        assert!(t.map(0x10000, 0x8000, 0xe0000, 0));
        assert_eq!(t.ranges().len(), 1);
        assert_eq!(t.ranges()[0].device, 0xe0000);
    }

    #[test]
    fn shared_pages_take_the_strictest_protection() {
        // A stale range and a current one share the page at 0x1000.
        let rs = [
            stale_at(0x1000, 0x100),
            at(0x1800, 0x1000, State::HostCurrent),
            stale_at(0x2000, 0x2000),
            at(0x8000, 8, State::HostCurrent),
            at(0x9000, 8, State::HostNewer),
        ];
        assert_eq!(
            segments(&rs, PAGE),
            vec![(0x1000, 0x4000, Prot::None), (0x8000, 0x9000, Prot::Read)]
        );
    }

    /// A page left open splits the segment holding it; the segments
    /// around it keep their protection.
    #[test]
    fn pages_left_open_are_cut_out_of_the_segments() {
        let segs = vec![(0x1000, 0x5000, Prot::None), (0x8000, 0x9000, Prot::Read)];
        assert_eq!(
            without_pages(segs.clone(), &[0x3000, 0x8000, 0x1000], 0x1000),
            vec![(0x2000, 0x3000, Prot::None), (0x4000, 0x5000, Prot::None)]
        );
        assert_eq!(without_pages(segs.clone(), &[], 0x1000), segs);
        assert_eq!(
            without_pages(segs.clone(), &[0x4000], 0x1000),
            vec![(0x1000, 0x4000, Prot::None), (0x8000, 0x9000, Prot::Read)]
        );
    }

    #[test]
    fn unrelated_data_on_a_protected_page_is_ours_but_not_watched() {
        let s = Snapshot::new(
            vec![stale_at(0x1100, 0x100), stale_at(0x5000, 0x10)],
            PAGE,
            &[(0x7000, 0x8000, Prot::None)],
        );
        assert_eq!(s.judge(0x1100), Verdict::Watched(stale_at(0x1100, 0x100)));
        assert_eq!(s.judge(0x11ff), Verdict::Watched(stale_at(0x1100, 0x100)));
        // Same page, before and after the range.
        assert_eq!(s.judge(0x1000), Verdict::OurPage);
        assert_eq!(s.judge(0x1200), Verdict::OurPage);
        assert_eq!(s.judge(0x5fff), Verdict::OurPage);
        // A span about to be opened is still ours.
        assert_eq!(s.judge(0x7008), Verdict::OurPage);
        // Pages nobody protected.
        assert_eq!(s.judge(0x2000), Verdict::NotOurs);
        assert_eq!(s.judge(0), Verdict::NotOurs);
        assert_eq!(s.judge(0x6000), Verdict::NotOurs);
        assert_eq!(Snapshot::default().judge(0x1100), Verdict::NotOurs);
    }

    #[test]
    fn a_partial_download_makes_only_its_part_current() {
        let mut t = Table::default();
        assert!(t.map(0x1000, 0x4000, 0xd000_0000, 7));
        t.device_written(3);
        // One row of the array comes back.
        let covered = t.host_updated(0x2000, 0x800);
        assert_eq!(covered.len(), 1);
        assert_eq!((covered[0].start, covered[0].bytes), (0x2000, 0x800));
        let parts: Vec<(u64, u64, u64, bool)> = t
            .ranges()
            .iter()
            .map(|r| (r.start, r.bytes, r.device, r.is_stale()))
            .collect();
        assert_eq!(
            parts,
            [
                (0x1000, 0x1000, 0xd000_0000, true),
                (0x2000, 0x800, 0xd000_1000, false),
                (0x2800, 0x2800, 0xd000_1800, true),
            ]
        );
        assert!(t.ranges().iter().all(|r| r.name == 7));
        // The next construct makes the whole array stale again: one range.
        t.device_written(4);
        assert_eq!(t.ranges().len(), 1);
        assert_eq!((t.ranges()[0].start, t.ranges()[0].bytes), (0x1000, 0x4000));
        // A download of the whole array covers it whole.
        t.host_updated(0x2000, 0x800);
        let covered = t.host_updated(0x1000, 0x4000);
        assert_eq!(covered.len(), 3);
        assert!(t.ranges().iter().all(|r| !r.is_stale()));
        // Mapped again at its start: one range.
        t.map(0x1000, 0x4000, 0xd000_0000, 7);
        assert_eq!(t.ranges().len(), 1);
    }

    #[test]
    fn an_unmapped_range_stays_watched_while_its_download_is_unread() {
        let mut t = Table::default();
        t.map(0x1000, 0x1000, 0xd000_0000, 0);
        let mut r = t.take(|_| true)[0];
        // Nothing unread: forgotten.
        t.keep_unread(r);
        assert!(t.ranges().is_empty());
        r.unread = Some(Download {
            region: 4,
            time: 1,
            thread: 2,
        });
        t.keep_unread(r);
        assert_eq!(t.ranges().len(), 1);
        let kept = t.ranges()[0];
        assert!(kept.gone && kept.device == 0 && !kept.is_stale());
        assert_eq!(kept.prot(), Prot::None);
        // A construct's end does not make it stale: no device copy.
        t.device_written(5);
        assert!(!t.ranges()[0].is_stale());
        t.drop_read();
        assert_eq!(t.ranges().len(), 1);
        t.ranges_mut()[0].unread = None;
        t.drop_read();
        assert!(t.ranges().is_empty());
    }

    #[test]
    fn a_full_table_counts_what_it_drops() {
        let mut t = Table::default();
        for i in 0..MAX_RANGES as u64 {
            assert!(t.map(0x1000 + i * 0x100, 0x10, 0, 0));
        }
        assert!(!t.map(0x100_0000, 0x10, 0, 0));
        assert_eq!(t.overflow, 1);
        assert!(!t.map(0x200_0000, 0, 0, 0));
    }
}
