//! Summary statistics of timing samples: percentiles (nearest rank) and rates.

use std::time::Duration;

/// The `p`-th percentile (0.0–1.0) of `samples` by nearest rank; zero for no samples.
///
/// Sorts a copy, so callers can keep their samples in run order.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    // Nearest rank: the smallest sample with at least p of the samples at or below it.
    let rank = (p.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median of `samples` (the 50th percentile, nearest rank).
pub fn median(samples: &[Duration]) -> Duration {
    percentile(samples, 0.5)
}

/// The largest sample; zero for no samples.
pub fn max(samples: &[Duration]) -> Duration {
    samples.iter().copied().max().unwrap_or_default()
}

/// `count` items over `elapsed`, per second (0 when nothing elapsed).
pub fn rate(count: usize, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

/// Milliseconds, as a float for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// `a / b`, or NaN when `b` is zero (printed as "—").
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { f64::NAN } else { a / b }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(ms: &[u64]) -> Vec<Duration> {
        ms.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn percentile_uses_nearest_rank() {
        let s = d(&[5, 1, 4, 2, 3]);
        assert_eq!(percentile(&s, 0.0), Duration::from_millis(1));
        assert_eq!(median(&s), Duration::from_millis(3));
        assert_eq!(percentile(&s, 0.8), Duration::from_millis(4));
        assert_eq!(percentile(&s, 1.0), Duration::from_millis(5));
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&d(&hundred), 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&d(&hundred), 0.95), Duration::from_millis(95));
    }

    #[test]
    fn empty_samples_give_zero() {
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
        assert_eq!(max(&[]), Duration::ZERO);
    }

    #[test]
    fn rates_and_ratios() {
        assert_eq!(rate(10, Duration::from_secs(2)), 5.0);
        assert_eq!(rate(10, Duration::ZERO), 0.0);
        assert_eq!(ratio(3.0, 2.0), 1.5);
        assert!(ratio(1.0, 0.0).is_nan());
    }
}
