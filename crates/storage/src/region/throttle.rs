//! A bandwidth limit for compactions (HBase's compaction throughput controller). Compactions
//! rewrite files in the background; unthrottled, they take the disk, the page cache and the
//! CPU from foreground reads and WAL syncs in bursts. Every compaction of a server draws from
//! one token bucket of `compaction_bytes_per_sec` (bytes read from its inputs); one that runs
//! ahead sleeps. A store whose file count holds writers back is compacted unthrottled, as
//! HBase lifts its limit under pressure: there the compaction *is* the foreground's wait.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The bucket holds at most this much time's worth of bytes (the burst allowed after idling).
const BURST: Duration = Duration::from_millis(100);

/// The token bucket every compaction of one [`super::StorageServices`] draws from.
pub struct Throttle {
    /// Bytes per second; 0: no limit.
    rate: u64,
    /// Tokens (bytes) available, may go negative (a debt slept off), and when last refilled.
    bucket: Mutex<(f64, Instant)>,
    /// Bytes charged since start, and time slept.
    charged: AtomicU64,
    slept_us: AtomicU64,
}

impl Throttle {
    pub fn new(bytes_per_sec: u64) -> Throttle {
        Throttle {
            rate: bytes_per_sec,
            bucket: Mutex::new((0.0, Instant::now())),
            charged: AtomicU64::new(0),
            slept_us: AtomicU64::new(0),
        }
    }

    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Accounts `bytes` just processed and sleeps as long as the limit asks.
    pub fn consume(&self, bytes: u64) {
        self.charged.fetch_add(bytes, Ordering::Relaxed);
        if let Some(wait) = self.charge(bytes, Instant::now()) {
            self.slept_us
                .fetch_add(wait.as_micros() as u64, Ordering::Relaxed);
            std::thread::sleep(wait);
        }
    }

    /// Bytes compactions were charged for since start, and the time they slept.
    pub fn totals(&self) -> (u64, Duration) {
        (
            self.charged.load(Ordering::Relaxed),
            Duration::from_micros(self.slept_us.load(Ordering::Relaxed)),
        )
    }

    /// Charges `bytes` at `now`; how long to sleep to stay within the rate.
    fn charge(&self, bytes: u64, now: Instant) -> Option<Duration> {
        if self.rate == 0 {
            return None;
        }
        let rate = self.rate as f64;
        let mut b = self.bucket.lock();
        let (tokens, last) = &mut *b;
        let refill = now.saturating_duration_since(*last).as_secs_f64() * rate;
        *tokens = (*tokens + refill).min(rate * BURST.as_secs_f64());
        *last = now;
        *tokens -= bytes as f64;
        (*tokens < 0.0).then(|| Duration::from_secs_f64(-*tokens / rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_never_waits() {
        let t = Throttle::new(0);
        assert_eq!(t.charge(u64::MAX, Instant::now()), None);
    }

    #[test]
    fn waits_in_proportion_to_the_debt() {
        let t = Throttle::new(1_000_000);
        let start = Instant::now();
        // A fresh bucket is empty: 100 KB at 1 MB/s is 0.1 s of debt.
        let w = t.charge(100_000, start).expect("a wait");
        assert!((w.as_secs_f64() - 0.1).abs() < 0.01, "{w:?}");
        // Half a second later the debt is paid and the bucket full (100 ms worth).
        assert_eq!(t.charge(100_000, start + Duration::from_millis(600)), None);
        let w = t
            .charge(200_000, start + Duration::from_millis(600))
            .expect("over the burst");
        assert!((w.as_secs_f64() - 0.2).abs() < 0.01, "{w:?}");
    }

    #[test]
    fn holds_a_stream_to_its_rate() {
        let t = Throttle::new(20_000_000);
        let start = Instant::now();
        for _ in 0..40 {
            t.consume(100_000);
        }
        // 4 MB at 20 MB/s: at least 0.2 s (the first chunk waits too: the bucket starts
        // empty). Only the lower bound: a loaded machine may add to it.
        let took = start.elapsed().as_secs_f64();
        assert!(took >= 0.18, "took {took} s");
    }
}
