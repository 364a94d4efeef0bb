//! The host ranges mapped to the device, which copy of each is current,
//! and the pages that watching the stale ones takes: plain data and pure
//! functions, so every decision the signal handler and the callbacks make
//! is testable without a device, a signal or `mprotect`.

/// Which copy of a range the host may trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// The host copy is current (just mapped, uploaded or downloaded).
    HostCurrent,
    /// A compute construct (this region) may have written the device copy
    /// since the host copy was last brought up to date.
    DeviceNewer { since: u64 },
}

/// One host range mapped to the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    pub start: u64,
    pub bytes: u64,
    /// The device copy's address; 0 when the runtime did not say (the
    /// OpenACC API is asked when it is needed).
    pub device: u64,
    /// The variable's interned name; 0 when none was given.
    pub name: u32,
    pub state: State,
}

impl Range {
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.bytes)
    }

    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end()
    }

    pub fn is_stale(&self) -> bool {
        matches!(self.state, State::DeviceNewer { .. })
    }
}

/// Tracked ranges at most: a program maps a few dozen arrays; beyond this
/// new ones go unwatched (counted) so the handler's scan stays short.
pub(crate) const MAX_RANGES: usize = 4096;

/// The first page of `start` and the end of the last page of
/// `start..start+bytes` (`page` a power of two).
pub(crate) fn page_span(start: u64, bytes: u64, page: u64) -> (u64, u64) {
    let lo = start & !(page - 1);
    let end = start.saturating_add(bytes);
    let hi = end.saturating_add(page - 1) & !(page - 1);
    (lo, hi)
}

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

    /// Starts tracking `start..start+bytes` with the host copy current, or
    /// updates the range that starts there (a new mapping of the same
    /// array). False when the table is full or the range is empty.
    pub fn map(&mut self, start: u64, bytes: u64, device: u64, name: u32) -> bool {
        if bytes == 0 || start == 0 {
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
            return true;
        }
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
        });
        true
    }

    /// The host copy of `start..start+bytes` is brought up to date (a
    /// download writes it, an upload makes both copies equal): every
    /// range it covers whole becomes host-current. (The caller opens the
    /// pages of the copied bytes, whatever else they hold: the runtime is
    /// about to touch them.)
    pub fn host_updated(&mut self, start: u64, bytes: u64) {
        let end = start.saturating_add(bytes);
        for r in &mut self.ranges {
            if r.start >= start && r.end() <= end {
                r.state = State::HostCurrent;
            }
        }
    }

    /// Forgets the ranges that start inside `start..start+bytes` (a delete
    /// or an exit data: the host copy is the only one again).
    pub fn unmap(&mut self, start: u64, bytes: u64) {
        let end = start.saturating_add(bytes.max(1));
        self.ranges.retain(|r| !(r.start >= start && r.start < end));
    }

    /// Forgets the ranges `keep` says no.
    pub fn retain(&mut self, mut keep: impl FnMut(&Range) -> bool) {
        self.ranges.retain(|r| keep(r));
    }

    /// A compute construct (region `region`) ended: every range `present`
    /// says the device holds may now be newer there.
    pub fn device_written(&mut self, region: u64, mut present: impl FnMut(&Range) -> bool) {
        for r in &mut self.ranges {
            if present(r) {
                r.state = State::DeviceNewer { since: region };
            }
        }
    }

    /// The stale ranges, for the handler's snapshot.
    pub fn stale(&self) -> Vec<Range> {
        self.ranges
            .iter()
            .filter(|r| r.is_stale())
            .copied()
            .collect()
    }
}

/// The page spans that cover `ranges`, sorted and merged (a page shared
/// by two stale ranges is protected once).
pub(crate) fn protected_spans(ranges: &[Range], page: u64) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = ranges
        .iter()
        .map(|r| page_span(r.start, r.bytes, page))
        .collect();
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (lo, hi) in spans {
        match out.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// What the state published for the signal handler says about a faulting
/// address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Inside this stale range: the host touched a copy older than the
    /// device's.
    Stale(Range),
    /// On a page the check protected, outside every stale range (other
    /// data sharing the page): let it through, say nothing.
    OurPage,
    /// Not the check's doing: the program's own fault.
    NotOurs,
}

/// The handler's view: the stale ranges and the protected page spans,
/// immutable once published.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub stale: Vec<Range>,
    pub spans: Vec<(u64, u64)>,
}

impl Snapshot {
    pub fn new(stale: Vec<Range>, page: u64) -> Snapshot {
        let spans = protected_spans(&stale, page);
        Snapshot { stale, spans }
    }

    /// Allocation-free: called from the signal handler.
    pub fn judge(&self, addr: u64) -> Verdict {
        if let Some(r) = self.stale.iter().find(|r| r.contains(addr)) {
            return Verdict::Stale(*r);
        }
        // spans are sorted and disjoint.
        let i = self.spans.partition_point(|s| s.1 <= addr);
        match self.spans.get(i) {
            Some(&(lo, hi)) if addr >= lo && addr < hi => Verdict::OurPage,
            _ => Verdict::NotOurs,
        }
    }
}

/// The bytes around `addr` worth saving for the confirmation: at most
/// `max` bytes, starting up to `max / 2` before the address, inside the
/// range and inside the address's page (the next page may still be
/// protected, and the handler must not fault). Returns (start, len).
pub(crate) fn save_window(r: &Range, addr: u64, page: u64, max: u64) -> (u64, u64) {
    let page_lo = addr & !(page - 1);
    let page_hi = page_lo.saturating_add(page);
    let lo = addr.saturating_sub(max / 2).max(r.start).max(page_lo);
    let hi = lo.saturating_add(max).min(r.end()).min(page_hi);
    (lo, hi.saturating_sub(lo))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    fn stale_at(start: u64, bytes: u64) -> Range {
        Range {
            start,
            bytes,
            device: 0,
            name: 0,
            state: State::DeviceNewer { since: 1 },
        }
    }

    #[test]
    fn page_spans_cover_partial_pages() {
        assert_eq!(page_span(0x1000, 0x1000, PAGE), (0x1000, 0x2000));
        assert_eq!(page_span(0x1008, 0x10, PAGE), (0x1000, 0x2000));
        assert_eq!(page_span(0x1ff8, 0x10, PAGE), (0x1000, 0x3000));
    }

    #[test]
    fn a_construct_end_makes_present_ranges_stale_and_a_download_current() {
        let mut t = Table::default();
        assert!(t.map(0x10000, 0x3000, 0xd0000, 7));
        assert!(t.map(0x20000, 0x100, 0, 0));
        t.device_written(5, |r| r.start == 0x10000);
        assert_eq!(t.stale().len(), 1);
        assert_eq!(t.stale()[0].state, State::DeviceNewer { since: 5 });
        // Part of the range downloaded: still stale (its pages are opened
        // by the caller, the rest stays watched).
        t.host_updated(0x10000, 0x1000);
        assert_eq!(t.stale().len(), 1);
        t.host_updated(0x10000, 0x3000);
        assert!(t.stale().is_empty());
        // Mapping the same start again keeps one range.
        assert!(t.map(0x10000, 0x3000, 0, 0));
        assert_eq!(t.ranges().len(), 2);
        assert_eq!(t.ranges()[0].device, 0xd0000);
        t.unmap(0x10000, 0x3000);
        assert_eq!(t.ranges().len(), 1);
    }

    #[test]
    fn overlapping_and_page_sharing_ranges_are_protected_once() {
        // Two ranges on one page, a third overlapping the second.
        let rs = [
            stale_at(0x1000, 0x100),
            stale_at(0x1800, 0x1000),
            stale_at(0x2000, 0x2000),
            stale_at(0x8000, 8),
        ];
        assert_eq!(
            protected_spans(&rs, PAGE),
            vec![(0x1000, 0x4000), (0x8000, 0x9000)]
        );
    }

    #[test]
    fn unrelated_data_on_a_protected_page_is_ours_but_not_stale() {
        let s = Snapshot::new(vec![stale_at(0x1100, 0x100), stale_at(0x5000, 0x10)], PAGE);
        assert_eq!(s.judge(0x1100), Verdict::Stale(stale_at(0x1100, 0x100)));
        assert_eq!(s.judge(0x11ff), Verdict::Stale(stale_at(0x1100, 0x100)));
        // Same page, before and after the range.
        assert_eq!(s.judge(0x1000), Verdict::OurPage);
        assert_eq!(s.judge(0x1200), Verdict::OurPage);
        assert_eq!(s.judge(0x5fff), Verdict::OurPage);
        // Pages nobody protected.
        assert_eq!(s.judge(0x2000), Verdict::NotOurs);
        assert_eq!(s.judge(0), Verdict::NotOurs);
        assert_eq!(s.judge(0x6000), Verdict::NotOurs);
        assert_eq!(Snapshot::default().judge(0x1100), Verdict::NotOurs);
    }

    #[test]
    fn the_saved_window_stays_in_the_range_and_the_page() {
        let r = stale_at(0x1000, 0x3000);
        assert_eq!(save_window(&r, 0x1800, PAGE, 64), (0x17e0, 64));
        // At the range's start: nothing before it.
        assert_eq!(save_window(&r, 0x1000, PAGE, 64), (0x1000, 64));
        // Near the page's end: cut there, the next page may be protected.
        assert_eq!(save_window(&r, 0x1ff8, PAGE, 64), (0x1fd8, 0x28));
        // Near the range's end.
        let small = stale_at(0x1010, 8);
        assert_eq!(save_window(&small, 0x1010, PAGE, 64), (0x1010, 8));
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
