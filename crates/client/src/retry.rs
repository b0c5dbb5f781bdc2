//! Retrying: which attempt gives up, and the pauses between attempts — HBase's
//! `pause × RETRY_BACKOFF[retry]` with up to 1 % jitter, so clients that failed together do not
//! retry together.

use crate::error::{Error, Handling, Result};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// HBase's `HConstants.RETRY_BACKOFF`; attempts past its end keep the last multiplier.
const MULTIPLIERS: [u32; 13] = [1, 2, 3, 5, 10, 20, 40, 100, 100, 100, 100, 200, 200];

/// The pause before retry number `retry` (0 for the first retry).
pub(crate) fn pause(base: Duration, retry: u32) -> Duration {
    let i = (retry as usize).min(MULTIPLIERS.len() - 1);
    let normal = base.saturating_mul(MULTIPLIERS[i]);
    let jitter_permille = random_u64() % 11; // 0..=10 ‰ = up to 1 %
    normal + normal.mul_f64(jitter_permille as f64 / 1000.0)
}

/// After this long in retries an operation says so (once): a user waiting on a region that
/// moves should not wait in silence.
const SAY_RETRYING_AFTER: Duration = Duration::from_secs(1);

/// Counts the attempts of one operation.
pub(crate) struct Retrier {
    retries: u32,
    base: Duration,
    failed: u32,
    /// The pauses taken so far.
    waited: Duration,
    /// Whether the operation said it is retrying.
    said: bool,
}

impl Retrier {
    pub fn new(retries: u32, base: Duration) -> Retrier {
        Retrier {
            retries,
            base,
            failed: 0,
            waited: Duration::ZERO,
            said: false,
        }
    }

    /// Counts a pause about to be taken; true the first time the operation has then waited
    /// [`SAY_RETRYING_AFTER`].
    fn note_pause(&mut self, pause: Duration) -> bool {
        self.waited += pause;
        let say = !self.said && self.waited >= SAY_RETRYING_AFTER;
        self.said |= say;
        say
    }

    /// Called with an attempt's error: returns once the next attempt may start, or the error
    /// the caller gets (`err` itself when retrying cannot help, [`Error::RetriesExhausted`]
    /// after `1 + retries` attempts). A stale location is retried at once the first time (the
    /// cache was merely old); later retries pause.
    pub async fn failed(&mut self, err: Error) -> Result<()> {
        let handling = err.handling();
        if handling == Handling::Fail {
            return Err(err);
        }
        self.failed += 1;
        if self.failed > self.retries {
            return Err(Error::RetriesExhausted {
                attempts: self.failed,
                last: Box::new(err),
            });
        }
        tracing::debug!(attempt = self.failed, error = %err, "retrying");
        let first_relocation = self.failed == 1 && handling == Handling::Relocate;
        if !first_relocation {
            let pause = pause(self.base, self.failed - 1);
            if self.note_pause(pause) {
                tracing::info!(
                    attempt = self.failed,
                    "still retrying after {:.1} s ({err}); a region may be moving or its server restarting",
                    self.waited.as_secs_f64()
                );
            }
            tokio::time::sleep(pause).await;
        }
        Ok(())
    }

    /// An attempt succeeded (a scanner moves on): later failures start counting afresh.
    pub fn reset(&mut self) {
        self.failed = 0;
    }
}

fn random_u64() -> u64 {
    // Each RandomState is seeded afresh; hashing nothing yields a random-looking value.
    RandomState::new().build_hasher().finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_says_once_that_it_is_retrying_after_a_second() {
        let mut r = Retrier::new(10, Duration::from_millis(100));
        let said: Vec<bool> = [100, 200, 300, 500, 1000, 2000]
            .into_iter()
            .map(|ms| r.note_pause(Duration::from_millis(ms)))
            .collect();
        // 0.1, 0.3, 0.6, 1.1 (said), 2.1, 4.1 s.
        assert_eq!(said, [false, false, false, true, false, false]);
    }

    #[test]
    fn pauses_follow_the_table_with_bounded_jitter_and_cap() {
        let base = Duration::from_millis(100);
        for (retry, mult) in [(0, 1), (1, 2), (3, 5), (7, 100), (12, 200), (50, 200)] {
            let p = pause(base, retry);
            let normal = base * mult;
            assert!(p >= normal && p <= normal.mul_f64(1.0101), "{retry}: {p:?}");
        }
        assert_eq!(pause(Duration::ZERO, 5), Duration::ZERO);
    }

    #[tokio::test]
    async fn retrier_gives_up_after_the_configured_retries_and_passes_fatal_errors() {
        use cellar_proto::pb::ErrorCode;
        let mut r = Retrier::new(2, Duration::from_millis(1));
        r.failed(Error::Closed).await.expect("first retry");
        r.failed(Error::rpc(ErrorCode::ServerBusy, "busy"))
            .await
            .expect("second retry");
        match r.failed(Error::Closed).await {
            Err(Error::RetriesExhausted { attempts: 3, last }) => {
                assert!(matches!(*last, Error::Closed))
            }
            other => panic!("expected exhaustion, got {other:?}"),
        }
        let mut r = Retrier::new(5, Duration::from_millis(1));
        match r
            .failed(Error::rpc(ErrorCode::TableNotFound, "table 'x' not found"))
            .await
        {
            Err(Error::Rpc { code, message }) => {
                assert_eq!(code, ErrorCode::TableNotFound);
                assert_eq!(message, "table 'x' not found");
            }
            other => panic!("expected the error itself, got {other:?}"),
        }
        r.failed(Error::Closed).await.expect("retry");
        r.reset();
        r.failed(Error::Closed).await.expect("counting restarted");
    }
}
