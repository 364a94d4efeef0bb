//! The statistics of a configuration's repeated runs: the median and a
//! distribution-free confidence interval of it (order statistics: the
//! ranks a binomial(n, 1/2) puts around the median), and the ties
//! between configurations whose intervals overlap.

use serde::{Deserialize, Serialize};

/// Confidence asked of the interval.
pub const CONFIDENCE: f64 = 0.95;

/// The median of some samples with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub n: usize,
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
    /// The interval's actual coverage (below [`CONFIDENCE`] for fewer
    /// than 6 samples, where it is the whole range).
    pub coverage: f64,
}

impl Stats {
    /// The interval's width relative to the median.
    pub fn spread(&self) -> f64 {
        if self.median > 0.0 {
            (self.hi - self.lo) / self.median
        } else {
            0.0
        }
    }

    /// The two intervals overlap: neither is shown to be faster.
    pub fn ties(&self, other: &Stats) -> bool {
        self.lo <= other.hi && other.lo <= self.hi
    }
}

/// P(X <= k) for X ~ binomial(n, 1/2).
fn binomial_cdf_half(n: usize, k: usize) -> f64 {
    let mut term = 0.5f64.powi(n as i32); // C(n,0) / 2^n
    let mut sum = term;
    for i in 1..=k.min(n) {
        term *= (n + 1 - i) as f64 / i as f64;
        sum += term;
    }
    sum
}

/// The median and its order-statistic interval; None without samples.
pub fn stats(samples: &[f64]) -> Option<Stats> {
    let mut xs: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    let median = if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    };
    // The largest k (1-based) with P(X < k) <= alpha / 2: the interval is
    // [x_(k), x_(n+1-k)].
    let alpha = 1.0 - CONFIDENCE;
    let mut k = 1;
    while k < n / 2 && binomial_cdf_half(n, k) <= alpha / 2.0 {
        k += 1;
    }
    let coverage = 1.0 - 2.0 * binomial_cdf_half(n, k - 1);
    Some(Stats {
        n,
        median,
        lo: xs[k - 1],
        hi: xs[n - k],
        coverage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_interval() {
        let s = stats(&[5.0, 1.0, 3.0]).expect("stats");
        assert_eq!((s.median, s.lo, s.hi), (3.0, 1.0, 5.0));
        assert!((s.coverage - 0.75).abs() < 1e-12);
        let s = stats(&[4.0, 1.0, 3.0, 2.0]).expect("stats");
        assert_eq!(s.median, 2.5);
        assert!(stats(&[]).is_none());
        // Nine samples: P(X <= 1) = 10/512 <= 0.025 < P(X <= 2), so the
        // interval runs from the 2nd to the 8th smallest.
        let xs: Vec<f64> = (1..=9).map(f64::from).collect();
        let s = stats(&xs).expect("stats");
        assert_eq!((s.median, s.lo, s.hi), (5.0, 2.0, 8.0));
        assert!((s.coverage - (1.0 - 2.0 * 10.0 / 512.0)).abs() < 1e-12);
        assert!(s.coverage >= CONFIDENCE);
        // Outliers do not move the median or its interval much.
        let s = stats(&[10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 500.0, 10.1]).expect("stats");
        assert_eq!(s.median, 10.0);
        assert!(s.hi <= 10.2 && s.spread() < 0.05, "{s:?}");
    }

    #[test]
    fn overlapping_intervals_tie() {
        let a = stats(&[10.0, 11.0, 12.0]).expect("a");
        let b = stats(&[11.5, 12.5, 13.0]).expect("b");
        let c = stats(&[13.0, 14.0, 15.0]).expect("c");
        assert!(a.ties(&b) && b.ties(&a));
        assert!(!a.ties(&c));
    }
}
