//! The slow-call log: the most recent calls that took longer than `rpc.slow_call_ms` on the
//! server (HBase's "responseTooSlow" warnings and its slow-log ring buffer), kept per front end
//! for the server page of the web UI and logged at most once a second.
//!
//! Recording a fast call costs one relaxed load; only a slow call takes the ring's lock.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Slow calls kept per front end.
pub const SLOW_CALLS_KEPT: usize = 50;

/// One slow call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowCall {
    /// When it was answered, milliseconds since the epoch.
    pub at_ms: u64,
    pub method: String,
    pub duration_us: u64,
    pub failed: bool,
}

/// The ring of recent slow calls and the threshold that makes a call slow.
#[derive(Debug)]
pub struct SlowCalls {
    /// Microseconds; `u64::MAX` until configured (nothing is slow).
    threshold_us: AtomicU64,
    recent: Mutex<VecDeque<SlowCall>>,
    total: AtomicU64,
    /// When the last warning was logged (ms since the epoch): at most one a second.
    last_logged_ms: AtomicU64,
}

impl Default for SlowCalls {
    fn default() -> Self {
        SlowCalls {
            threshold_us: AtomicU64::new(u64::MAX),
            recent: Mutex::new(VecDeque::with_capacity(SLOW_CALLS_KEPT)),
            total: AtomicU64::new(0),
            last_logged_ms: AtomicU64::new(0),
        }
    }
}

impl SlowCalls {
    /// Calls taking longer than `threshold` are slow; `None` turns the log off.
    pub fn set_threshold(&self, threshold: Option<Duration>) {
        let us = threshold.map_or(u64::MAX, |t| {
            u64::try_from(t.as_micros()).unwrap_or(u64::MAX)
        });
        self.threshold_us.store(us, Relaxed);
    }

    pub fn threshold(&self) -> Option<Duration> {
        match self.threshold_us.load(Relaxed) {
            u64::MAX => None,
            us => Some(Duration::from_micros(us)),
        }
    }

    /// A call of `method` answered after `elapsed`: kept (and logged) if slow.
    pub fn record(&self, front: &str, method: &str, elapsed: Duration, failed: bool) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        if us <= self.threshold_us.load(Relaxed) {
            return;
        }
        let now = now_ms();
        self.total.fetch_add(1, Relaxed);
        {
            let mut recent = self.recent.lock();
            if recent.len() == SLOW_CALLS_KEPT {
                recent.pop_front();
            }
            recent.push_back(SlowCall {
                at_ms: now,
                method: method.to_string(),
                duration_us: us,
                failed,
            });
        }
        let last = self.last_logged_ms.load(Relaxed);
        if now >= last + 1000
            && self
                .last_logged_ms
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            tracing::warn!(
                front,
                method,
                duration_ms = us / 1000,
                failed,
                "slow call (rpc.slow_call_ms; the server page lists the recent ones)"
            );
        }
    }

    /// The kept slow calls, newest first.
    pub fn recent(&self) -> Vec<SlowCall> {
        self.recent.lock().iter().rev().cloned().collect()
    }

    /// Slow calls since start.
    pub fn total(&self) -> u64 {
        self.total.load(Relaxed)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_calls_over_the_threshold_are_kept_newest_first_and_bounded() {
        let s = SlowCalls::default();
        s.record("native", "GET", Duration::from_secs(100), false);
        assert!(s.recent().is_empty(), "no threshold: nothing is slow");
        s.set_threshold(Some(Duration::from_millis(10)));
        s.record("native", "GET", Duration::from_millis(5), false);
        s.record("native", "SCAN_NEXT", Duration::from_millis(20), false);
        s.record("native", "MUTATE", Duration::from_millis(30), true);
        let recent = s.recent();
        assert_eq!(
            recent.iter().map(|c| c.method.as_str()).collect::<Vec<_>>(),
            ["MUTATE", "SCAN_NEXT"]
        );
        assert_eq!(recent[0].duration_us, 30_000);
        assert!(recent[0].failed);
        for _ in 0..SLOW_CALLS_KEPT + 5 {
            s.record("native", "GET", Duration::from_millis(11), false);
        }
        assert_eq!(s.recent().len(), SLOW_CALLS_KEPT);
        assert_eq!(s.total(), 2 + SLOW_CALLS_KEPT as u64 + 5);
        s.set_threshold(None);
        assert_eq!(s.threshold(), None);
    }
}
