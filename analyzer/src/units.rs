//! Bytes, durations and rates for people: the one place every view (the
//! findings' texts, the text summary, `accprof analyze`) formats them, so
//! the same array reads the same everywhere.
//!
//! One precision rule: a count of the base unit (bytes, nanoseconds) is
//! shown whole ("88 B", "999 ns"); anything scaled is shown with three
//! significant digits in the largest unit that keeps it at least 1
//! ("8.03 MiB", "640 KiB", "12.5 us", "2.10 s", "1.50 h"). That keeps the
//! rounding error under 0.5% at every size. Sizes are binary (KiB = 1024 B,
//! as allocations are); rates are decimal (GB/s = 1e9 B/s, as bandwidths
//! are quoted).
//!
//! The PGI_ACC_TIME-style columns are whole microseconds with thousands
//! separators ([`micros`]), the layout those users know.

/// A size: "88 B", "1023 B", "1.00 KiB", "8.03 MiB", "321 MiB".
pub fn bytes(b: u64) -> String {
    if b < 1024 {
        return format!("{b} B");
    }
    const STEPS: [(&str, f64); 6] = [
        ("KiB", 1024.0),
        ("MiB", 1024.0),
        ("GiB", 1024.0),
        ("TiB", 1024.0),
        ("PiB", 1024.0),
        ("EiB", 1024.0),
    ];
    scaled(b as f64 / 1024.0, &STEPS)
}

/// A duration: "999 ns", "12.5 us", "463 ms", "2.10 s", "1.50 min", "2.00 h".
pub fn duration_ns(ns: u64) -> String {
    if ns < 1000 {
        return format!("{ns} ns");
    }
    const STEPS: [(&str, f64); 5] = [
        ("us", 1000.0),
        ("ms", 1000.0),
        ("s", 60.0),
        ("min", 60.0),
        ("h", 1.0),
    ];
    scaled(ns as f64 / 1000.0, &STEPS)
}

/// The rate of moving `bytes` in `ns`: "8.17 GB/s", "21.5 MB/s"; `None`
/// for no time at all.
pub fn rate(bytes: u64, ns: u64) -> Option<String> {
    (ns > 0).then(|| bytes_per_sec(bytes as f64 * 1e9 / ns as f64))
}

/// A rate given in bytes per second: "9.85 GB/s".
pub fn bytes_per_sec(v: f64) -> String {
    const STEPS: [(&str, f64); 7] = [
        ("B/s", 1000.0),
        ("kB/s", 1000.0),
        ("MB/s", 1000.0),
        ("GB/s", 1000.0),
        ("TB/s", 1000.0),
        ("PB/s", 1000.0),
        ("EB/s", 1000.0),
    ];
    scaled(v.max(0.0), &STEPS)
}

/// Whole microseconds with thousands separators, rounded to nearest:
/// the time columns of the PGI_ACC_TIME-style summary ("10,852,003").
pub fn micros(ns: u64) -> String {
    thousands(ns.saturating_add(500) / 1000)
}

/// An integer with thousands separators: 10852003 -> "10,852,003".
pub fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `v` (in the first unit of `steps`) in the largest unit that keeps it at
/// least 1 once rounded; `steps[i].1` is how many of unit `i` make unit
/// `i + 1`.
fn scaled(mut v: f64, steps: &[(&str, f64)]) -> String {
    let mut i = 0;
    loop {
        let (unit, next) = steps[i];
        let text = three_digits(v);
        // Decide on the rounded text, so 1023.7 KiB becomes "1.00 MiB"
        // rather than "1024 KiB".
        if i + 1 == steps.len() || text.parse::<f64>().unwrap_or(v) < next {
            return format!("{text} {unit}");
        }
        v /= next;
        i += 1;
    }
}

/// Three significant digits for a value of at least 1 ("8.03", "12.5",
/// "463"); more digits only before the point ("5124096").
fn three_digits(v: f64) -> String {
    let decimals = if v < 9.995 {
        2
    } else if v < 99.95 {
        1
    } else {
        0
    };
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(88), "88 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.00 KiB");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(532_512), "520 KiB");
        assert_eq!(bytes(655_360), "640 KiB");
        assert_eq!(bytes(1024 * 1024 - 1), "1.00 MiB");
        assert_eq!(bytes(1024 * 1024), "1.00 MiB");
        assert_eq!(bytes(8_421_408), "8.03 MiB");
        assert_eq!(bytes(336_856_880), "321 MiB");
        assert_eq!(bytes(1 << 30), "1.00 GiB");
        assert_eq!(bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn three_significant_digits_at_every_boundary() {
        // 9.996 KiB rounds to 10.0, not "10.00"; 99.96 to 100, not "100.0".
        assert_eq!(bytes(10_236), "10.0 KiB");
        assert_eq!(bytes(102_359), "100 KiB");
        assert_eq!(bytes(10_200), "9.96 KiB");
        assert_eq!(duration_ns(9_996), "10.0 us");
        assert_eq!(duration_ns(99_960), "100 us");
    }

    #[test]
    fn durations() {
        assert_eq!(duration_ns(0), "0 ns");
        assert_eq!(duration_ns(1), "1 ns");
        assert_eq!(duration_ns(999), "999 ns");
        assert_eq!(duration_ns(1000), "1.00 us");
        assert_eq!(duration_ns(12_500), "12.5 us");
        assert_eq!(duration_ns(999_999), "1.00 ms");
        assert_eq!(duration_ns(463_271_000), "463 ms");
        assert_eq!(duration_ns(2_100_000_000), "2.10 s");
        assert_eq!(duration_ns(59_960_000_000), "1.00 min");
        assert_eq!(duration_ns(90_000_000_000), "1.50 min");
        assert_eq!(duration_ns(3_600_000_000_000), "1.00 h");
        assert_eq!(duration_ns(9_000_000_000_000), "2.50 h");
        assert_eq!(duration_ns(7 * 24 * 3_600_000_000_000), "168 h");
        assert_eq!(duration_ns(u64::MAX), "5124096 h");
    }

    #[test]
    fn rates() {
        assert_eq!(rate(1, 0), None);
        assert_eq!(rate(0, 1).as_deref(), Some("0.00 B/s"));
        assert_eq!(rate(1, 1_000_000_000).as_deref(), Some("1.00 B/s"));
        assert_eq!(rate(999, 1_000_000_000).as_deref(), Some("999 B/s"));
        assert_eq!(rate(1000, 1_000_000_000).as_deref(), Some("1.00 kB/s"));
        // 8,421,408 B in 2.21 ms.
        assert_eq!(rate(8_421_408, 2_210_000).as_deref(), Some("3.81 GB/s"));
        assert_eq!(rate(560, 26_000).as_deref(), Some("21.5 MB/s"));
        assert_eq!(rate(u64::MAX, 1).as_deref(), Some("18446744074 EB/s"));
        assert_eq!(bytes_per_sec(9.85e9), "9.85 GB/s");
        assert_eq!(bytes_per_sec(0.0), "0.00 B/s");
    }

    #[test]
    fn summary_columns() {
        assert_eq!(micros(0), "0");
        assert_eq!(micros(499), "0");
        assert_eq!(micros(500), "1");
        assert_eq!(micros(1_234_567_890), "1,234,568");
        assert_eq!(micros(10_852_003_400), "10,852,003");
        assert_eq!(micros(u64::MAX), "18,446,744,073,709,551");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }
}
