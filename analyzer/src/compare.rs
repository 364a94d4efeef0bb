//! Two runs of one program side by side (`accprof diff`, and the
//! before/after of `analyze --verify`): per source line, kernel and
//! transfer kind, the counts, times and bytes of each run, and the run
//! totals.
//!
//! Lines move when a patch adds directives, so lines are matched in two
//! passes: first the same file, function, line and construct kind; then,
//! among the lines left, the same file, function and construct kind in
//! source order. A file that appears on one side only is paired with the
//! one file left on the other side when there is exactly one (a patched
//! copy under another name). What is left appears or vanishes. Every row
//! says how its line was matched.

use std::collections::BTreeMap;

use crate::summary::{FunctionSummary, LineSummary, Reached, Summary};

/// How a line of one run was paired with a line of the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matched {
    /// Same file, function, line and construct kind.
    Line,
    /// Same file, function and construct kind, in source order (the line
    /// moved).
    Order,
    /// Only in the second run.
    New,
    /// Only in the first run.
    Gone,
}

impl Matched {
    pub fn label(self) -> &'static str {
        match self {
            Matched::Line => "line",
            Matched::Order => "order",
            Matched::New => "new",
            Matched::Gone => "gone",
        }
    }
}

/// What one side of a row counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amount {
    /// Constructs reached (host rows), launches or transfers.
    pub count: u64,
    pub time_ns: u64,
    /// Bytes moved (transfer rows).
    pub bytes: Option<u64>,
}

/// What a row counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// The line's constructs: how often reached, host time.
    Host,
    /// Kernels of one name (all launch shapes): launches, device time
    /// (host time of the launch without CUPTI).
    Kernel(String),
    /// Transfers of one kind ("copyin", "copyout", ...): count, time, bytes.
    Transfer(&'static str),
}

impl Entry {
    pub fn label(&self) -> &str {
        match self {
            Entry::Host => "host",
            Entry::Kernel(_) => "kernel",
            Entry::Transfer(k) => k,
        }
    }
}

/// One line's one entry in both runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub file: String,
    /// The file in the second run when it has another name.
    pub after_file: Option<String>,
    pub function: String,
    pub before_line: Option<u32>,
    pub after_line: Option<u32>,
    /// The construct kind the lines were matched by ("compute region", ...).
    pub construct: &'static str,
    pub entry: Entry,
    pub before: Option<Amount>,
    pub after: Option<Amount>,
    pub matched: Matched,
}

impl Row {
    /// After minus before, in ns (a missing side counts 0).
    pub fn change_ns(&self) -> i128 {
        let t = |a: &Option<Amount>| a.map_or(0, |a| i128::from(a.time_ns));
        t(&self.after) - t(&self.before)
    }
}

/// The totals of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub wall_ns: u64,
    pub kernel_ns: u64,
    pub transfer_ns: u64,
    pub transfers: u64,
    pub transfer_bytes: u64,
    pub constructs: u64,
    /// Device times come from CUPTI.
    pub cupti: bool,
    pub startup: StartUp,
}

/// A run's CUDA start-up, as a comparison of two runs needs it: one that
/// compiled its device code at start-up (the driver's cache missed) and
/// one that did not differ by that compilation whatever else changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartUp {
    /// CUDA start-up and code loading ([`crate::ledger::Ledger::startup_ns`]).
    pub ns: u64,
    /// The code loading alone.
    pub code_loading_ns: u64,
    /// Whether it compiled its device code
    /// ([`crate::ledger::Ledger::paid_jit`]); None without driver timings.
    pub paid_jit: Option<bool>,
}

impl StartUp {
    /// The start-up of the run (of its slowest rank, when it merges
    /// several: they start side by side).
    pub fn of(s: &Summary) -> StartUp {
        let mut out = StartUp::default();
        for r in &s.runs {
            let l = &r.ledger;
            out.ns = out.ns.max(l.startup_ns());
            out.code_loading_ns = out.code_loading_ns.max(l.module_load_ns);
            out.paid_jit = match (out.paid_jit, l.paid_jit()) {
                (Some(a), Some(b)) => Some(a || b),
                (a, b) => a.or(b),
            };
        }
        out
    }
}

/// What the reader of two runs must be told when one compiled its device
/// code at start-up and the other did not: their wall times differ by the
/// compilation, whatever the change between them did. None when both did,
/// neither did, or a run has no driver timings to tell.
pub fn jit_mismatch(before: &StartUp, after: &StartUp) -> Option<String> {
    let (Some(b), Some(a)) = (before.paid_jit, after.paid_jit) else {
        return None;
    };
    if a == b {
        return None;
    }
    let (paid, warm, p) = if b {
        ("before", "after", before)
    } else {
        ("after", "before", after)
    };
    Some(format!(
        "{paid} compiled its device code at start-up (the CUDA driver's cache missed: {} of code loading, {} of start-up in all) and {warm} did not: their wall times differ by that whatever the change did; compare the wall times without start-up (or run each binary once before measuring, so that both find their code in the cache)",
        crate::units::duration_ns(p.code_loading_ns),
        crate::units::duration_ns(p.ns),
    ))
}

impl Totals {
    pub fn of(s: &Summary) -> Totals {
        Totals {
            startup: StartUp::of(s),
            wall_ns: s.wall_ns,
            kernel_ns: s.kernel_ns,
            transfer_ns: s.transfer_ns,
            transfers: s.transfers,
            transfer_bytes: s.transfer_bytes,
            constructs: s.constructs,
            cupti: s.cupti,
        }
    }
}

/// Two runs compared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    pub before: Totals,
    pub after: Totals,
    /// Largest change in time first (either way), then by place.
    pub rows: Vec<Row>,
    /// The two executables' names, when the runs look like different
    /// programs (no name of an executable or source file in common): lines
    /// are then paired by construct order alone, which says little of two
    /// unrelated programs.
    pub unrelated: Option<(String, String)>,
}

/// The construct kind a line is matched by: its compute region if it has
/// one, else its first construct, else its first API routine.
fn construct_kind(l: &LineSummary) -> &'static str {
    if let Some(r) = l.reached.keys().next() {
        return if l.reached.contains_key(&Reached::ComputeRegion) {
            Reached::ComputeRegion.label()
        } else {
            r.label()
        };
    }
    if !l.api_calls.is_empty() {
        return "api call";
    }
    "other"
}

/// The name of a transfer kind in comparisons and exports.
pub fn copy_kind_label(kind: Option<accprof_trace::CopyKind>) -> &'static str {
    use accprof_trace::CopyKind;
    match kind {
        Some(CopyKind::HostToDevice) => "copyin",
        Some(CopyKind::DeviceToHost) => "copyout",
        Some(CopyKind::DeviceToDevice) => "device_to_device",
        Some(CopyKind::HostToHost) => "host_to_host",
        Some(CopyKind::PeerToPeer) => "peer_to_peer",
        Some(CopyKind::Other) => "other",
        None => "unknown",
    }
}

/// A line's entries: host, kernels by name (in the line's order), transfers
/// by kind.
fn entries(l: &LineSummary) -> Vec<(Entry, Amount)> {
    let mut out = vec![(
        Entry::Host,
        Amount {
            // Top-level constructs, as the run's total counts them: the
            // implicit data regions of a compute construct are its own.
            count: l.constructs,
            time_ns: l.host_ns,
            bytes: None,
        },
    )];
    for k in &l.kernels {
        let time = if k.device.count > 0 {
            k.device.total_ns
        } else {
            k.elapsed.total_ns
        };
        let e = Entry::Kernel(k.name.clone());
        match out.iter_mut().find(|(x, _)| *x == e) {
            Some((_, a)) => {
                a.count += k.launches;
                a.time_ns = a.time_ns.saturating_add(time);
            }
            None => out.push((
                e,
                Amount {
                    count: k.launches,
                    time_ns: time,
                    bytes: None,
                },
            )),
        }
    }
    for t in &l.transfers {
        let e = Entry::Transfer(copy_kind_label(t.direction));
        match out.iter_mut().find(|(x, _)| *x == e) {
            Some((_, a)) => {
                a.count += t.count;
                a.time_ns = a.time_ns.saturating_add(t.time.total_ns);
                a.bytes = Some(a.bytes.unwrap_or(0).saturating_add(t.bytes));
            }
            None => out.push((
                e,
                Amount {
                    count: t.count,
                    time_ns: t.time.total_ns,
                    bytes: Some(t.bytes),
                },
            )),
        }
    }
    out
}

type FileKey<'a> = (&'a str, &'a str);

/// Lines of each (file, function), in source order.
fn lines_by_function(s: &Summary) -> BTreeMap<FileKey<'_>, Vec<&LineSummary>> {
    let mut out: BTreeMap<FileKey<'_>, Vec<&LineSummary>> = BTreeMap::new();
    for f in &s.functions {
        let FunctionSummary {
            file,
            function,
            lines,
            ..
        } = f;
        out.entry((file.as_str(), function.as_str()))
            .or_default()
            .extend(lines.iter());
    }
    for v in out.values_mut() {
        v.sort_by_key(|l| (l.line, l.address));
    }
    out
}

/// Compares two runs' summaries.
pub fn compare(before: &Summary, after: &Summary) -> Comparison {
    let b = lines_by_function(before);
    let a = lines_by_function(after);
    // (file, function) groups: the same on both sides first; then, among
    // those left, the same function in another file, then the one group
    // left on each side (a patched copy under another name).
    let mut pairs: Vec<(FileKey<'_>, Option<FileKey<'_>>)> = Vec::new();
    let mut a_left: Vec<FileKey<'_>> = a.keys().filter(|k| !b.contains_key(*k)).copied().collect();
    let mut b_left: Vec<FileKey<'_>> = Vec::new();
    for k in b.keys() {
        if a.contains_key(k) {
            pairs.push((*k, Some(*k)));
        } else {
            b_left.push(*k);
        }
    }
    b_left.retain(|k| match a_left.iter().position(|x| x.1 == k.1) {
        Some(i) => {
            pairs.push((*k, Some(a_left.remove(i))));
            false
        }
        None => true,
    });
    if let ([x], [y]) = (b_left.as_slice(), a_left.as_slice()) {
        pairs.push((*x, Some(*y)));
        b_left.clear();
        a_left.clear();
    }
    pairs.extend(b_left.into_iter().map(|k| (k, None)));

    let mut rows = Vec::new();
    for ((file, function), ak) in &pairs {
        let blines = &b[&(*file, *function)];
        let alines: &[&LineSummary] = ak.and_then(|k| a.get(&k)).map_or(&[], |v| v.as_slice());
        let after_file = ak.filter(|k| k.0 != *file).map(|k| k.0.to_string());
        for (bl, al, matched) in pair_lines(blines, alines) {
            let construct = bl.or(al).map_or("other", construct_kind);
            push_rows(
                &mut rows,
                Place {
                    file,
                    after_file: &after_file,
                    function,
                    construct,
                },
                bl,
                al,
                matched,
            );
        }
    }
    for (file, function) in &a_left {
        for al in &a[&(*file, *function)] {
            push_rows(
                &mut rows,
                Place {
                    file,
                    after_file: &None,
                    function,
                    construct: construct_kind(al),
                },
                None,
                Some(al),
                Matched::New,
            );
        }
    }
    rows.sort_by(|x, y| {
        y.change_ns().abs().cmp(&x.change_ns().abs()).then_with(|| {
            (&x.file, x.before_line, x.after_line).cmp(&(&y.file, y.before_line, y.after_line))
        })
    });
    Comparison {
        before: Totals::of(before),
        after: Totals::of(after),
        rows,
        unrelated: unrelated(before, after),
    }
}

/// The executables' names of two runs that look like different programs:
/// their executables and source files share no name, nor the stem of one
/// (what comes before the first character that is not a letter or digit,
/// so `laplace_bad` and `laplace_good.c` are kin, `heat2d` and `storm`
/// are not).
fn unrelated(before: &Summary, after: &Summary) -> Option<(String, String)> {
    fn base(path: &str) -> String {
        std::path::Path::new(path)
            .file_name()
            .map_or(path.to_string(), |n| n.to_string_lossy().into_owned())
    }
    fn stems(s: &Summary) -> std::collections::BTreeSet<String> {
        let exe = s.runs.iter().map(|r| base(&r.executable));
        let files = s.functions.iter().map(|f| base(&f.file));
        exe.chain(files)
            .map(|n| {
                n.chars()
                    .take_while(|c| c.is_alphanumeric())
                    .collect::<String>()
                    .to_lowercase()
            })
            .filter(|stem| !stem.is_empty())
            .collect()
    }
    let program = |s: &Summary| s.runs.first().map(|r| base(&r.executable));
    let (b, a) = (program(before)?, program(after)?);
    let (sb, sa) = (stems(before), stems(after));
    let unrelated = b != a && !sb.is_empty() && !sa.is_empty() && sb.is_disjoint(&sa);
    unrelated.then_some((b, a))
}

/// Pairs the lines of one function: same line and kind first, then the
/// same kind in order.
fn pair_lines<'a>(
    b: &[&'a LineSummary],
    a: &[&'a LineSummary],
) -> Vec<(Option<&'a LineSummary>, Option<&'a LineSummary>, Matched)> {
    let mut a_used = vec![false; a.len()];
    let mut b_pair: Vec<Option<(usize, Matched)>> = vec![None; b.len()];
    for (i, bl) in b.iter().enumerate() {
        let k = construct_kind(bl);
        if let Some(j) = (0..a.len()).find(|&j| {
            !a_used[j]
                && a[j].line == bl.line
                && a[j].address == bl.address
                && construct_kind(a[j]) == k
        }) {
            a_used[j] = true;
            b_pair[i] = Some((j, Matched::Line));
        }
    }
    for (i, bl) in b.iter().enumerate() {
        if b_pair[i].is_some() {
            continue;
        }
        let k = construct_kind(bl);
        // The next unused line of the same kind after the last one paired
        // before this line keeps the order.
        let floor = b_pair[..i]
            .iter()
            .flatten()
            .map(|(j, _)| *j + 1)
            .max()
            .unwrap_or(0);
        if let Some(j) = (floor..a.len()).find(|&j| !a_used[j] && construct_kind(a[j]) == k) {
            a_used[j] = true;
            b_pair[i] = Some((j, Matched::Order));
        }
    }
    let mut out = Vec::new();
    for (i, bl) in b.iter().enumerate() {
        match b_pair[i] {
            Some((j, m)) => out.push((Some(*bl), Some(a[j]), m)),
            None => out.push((Some(*bl), None, Matched::Gone)),
        }
    }
    for (j, al) in a.iter().enumerate() {
        if !a_used[j] {
            out.push((None, Some(*al), Matched::New));
        }
    }
    out
}

struct Place<'a> {
    file: &'a str,
    after_file: &'a Option<String>,
    function: &'a str,
    construct: &'static str,
}

fn push_rows(
    rows: &mut Vec<Row>,
    p: Place<'_>,
    bl: Option<&LineSummary>,
    al: Option<&LineSummary>,
    matched: Matched,
) {
    let be = bl.map(entries).unwrap_or_default();
    let ae = al.map(entries).unwrap_or_default();
    // A kernel whose name the other run does not have is the same kernel
    // renamed when it is the only one on both sides.
    let kernels = |v: &[(Entry, Amount)]| {
        v.iter()
            .filter(|(e, _)| matches!(e, Entry::Kernel(_)))
            .count()
    };
    let one_kernel_each = kernels(&be) == 1 && kernels(&ae) == 1;
    let mut keys: Vec<Entry> = be.iter().map(|(e, _)| e.clone()).collect();
    for (e, _) in &ae {
        let renamed_kernel = one_kernel_each && matches!(e, Entry::Kernel(_));
        if !keys.contains(e) && !renamed_kernel {
            keys.push(e.clone());
        }
    }
    let find = |v: &[(Entry, Amount)], e: &Entry| {
        v.iter()
            .find(|(x, _)| {
                x == e
                    || (one_kernel_each
                        && matches!(x, Entry::Kernel(_))
                        && matches!(e, Entry::Kernel(_)))
            })
            .map(|(_, a)| *a)
    };
    for e in keys {
        rows.push(Row {
            file: p.file.to_string(),
            after_file: p.after_file.clone(),
            function: p.function.to_string(),
            before_line: bl.and_then(|l| l.line),
            after_line: al.and_then(|l| l.line),
            construct: p.construct,
            before: find(&be, &e),
            after: find(&ae, &e),
            entry: e,
            matched,
        });
    }
}

/// before / after, for "x less" or "x more": None when both are zero.
pub fn ratio(before: u64, after: u64) -> Option<f64> {
    match (before, after) {
        (0, 0) => None,
        (_, 0) => Some(f64::INFINITY),
        (b, a) => Some(b as f64 / a as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{FunctionSummary, Stats, TransferLine};
    use accprof_trace::CopyKind;

    fn line(n: u32, kind: Reached, host_ns: u64, copyin_ns: u64) -> LineSummary {
        let mut l = LineSummary {
            line: Some(n),
            host_ns,
            constructs: 1,
            ..LineSummary::default()
        };
        let mut s = Stats::default();
        s.add(host_ns);
        l.reached.insert(kind, s);
        if copyin_ns > 0 {
            let mut t = Stats::default();
            t.add(copyin_ns);
            l.transfers.push(TransferLine {
                direction: Some(CopyKind::HostToDevice),
                count: 1,
                bytes: 1024,
                time: t,
                device_timed: true,
                ..TransferLine::default()
            });
        }
        l
    }

    fn summary(file: &str, function: &str, lines: Vec<LineSummary>) -> Summary {
        Summary {
            functions: vec![FunctionSummary {
                file: file.to_string(),
                function: function.to_string(),
                lines,
                ..FunctionSummary::default()
            }],
            ..Summary::default()
        }
    }

    fn row<'a>(c: &'a Comparison, before: Option<u32>, entry: &str) -> &'a Row {
        c.rows
            .iter()
            .find(|r| r.before_line == before && r.entry.label() == entry)
            .unwrap_or_else(|| panic!("no {entry} row of line {before:?}: {:#?}", c.rows))
    }

    /// A data region added above two compute regions moves them down: they
    /// are matched in order, the unchanged line by its line, the data
    /// region is new and a line the patch removed is gone.
    #[test]
    fn moved_lines_match_in_order_and_say_so() {
        use Reached::{ComputeRegion as C, DataRegion as D, Update as U};
        let before = summary(
            "a.c",
            "main",
            vec![
                line(10, C, 100, 50),
                line(20, C, 300, 80),
                line(30, U, 5, 0),
                line(40, C, 7, 0),
            ],
        );
        let after = summary(
            "a.c",
            "main",
            vec![
                line(9, D, 20, 60),
                line(11, C, 10, 1),
                line(21, C, 30, 1),
                line(40, C, 7, 0),
            ],
        );
        let c = compare(&before, &after);
        let r = row(&c, Some(10), "host");
        assert_eq!((r.after_line, r.matched), (Some(11), Matched::Order));
        let r = row(&c, Some(20), "copyin");
        assert_eq!((r.after_line, r.matched), (Some(21), Matched::Order));
        assert_eq!(r.before.map(|a| a.time_ns), Some(80));
        assert_eq!(r.after.map(|a| (a.time_ns, a.bytes)), Some((1, Some(1024))));
        assert_eq!(row(&c, Some(40), "host").matched, Matched::Line);
        assert_eq!(row(&c, Some(30), "host").matched, Matched::Gone);
        let new = row(&c, None, "host");
        assert_eq!((new.after_line, new.matched), (Some(9), Matched::New));
        assert_eq!(new.construct, Reached::DataRegion.label());
        // Largest change in time first: line 20's host time (300 -> 30).
        assert_eq!(c.rows[0].before_line, Some(20));
        assert_eq!(c.rows[0].entry, Entry::Host);
    }

    /// A patched copy under another name, with a program unit of another
    /// name, is paired with the one that is left.
    #[test]
    fn a_renamed_file_and_function_are_paired_when_one_is_left() {
        let before = summary(
            "bad.f90",
            "laplace_bad",
            vec![line(65, Reached::ComputeRegion, 9, 9)],
        );
        let after = summary(
            "good.f90",
            "laplace_good",
            vec![line(54, Reached::ComputeRegion, 1, 1)],
        );
        let c = compare(&before, &after);
        let r = row(&c, Some(65), "copyin");
        assert_eq!(r.after_line, Some(54));
        assert_eq!(r.after_file.as_deref(), Some("good.f90"));
        assert_eq!(r.matched, Matched::Order);
        assert_eq!(ratio(9, 1), Some(9.0));
        assert_eq!(ratio(0, 0), None);
        assert_eq!(ratio(3, 0), Some(f64::INFINITY));
    }
}
