//! YCSB's shared counters: the load phase's insert sequence ([`CounterGenerator`]), the run
//! phase's insert sequence whose visible end only moves over acknowledged inserts
//! ([`AcknowledgedCounterGenerator`]), and the `sequential` request distribution
//! ([`SequentialGenerator`]).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

/// The highest value a sequence has handed out (YCSB's `lastValue()` on a counter); what the
/// `latest` distribution and the run phase's key chooser measure the key space by. `-1`
/// before the first value.
pub trait LastValue: Send + Sync {
    fn last_value(&self) -> i64;
}

/// YCSB's `CounterGenerator`: `countstart`, `countstart + 1`, ... shared by all threads.
#[derive(Debug)]
pub struct CounterGenerator {
    counter: AtomicU64,
}

impl CounterGenerator {
    pub fn new(countstart: u64) -> CounterGenerator {
        CounterGenerator {
            counter: AtomicU64::new(countstart),
        }
    }

    pub fn next_value(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed)
    }
}

impl LastValue for CounterGenerator {
    fn last_value(&self) -> i64 {
        self.counter.load(Ordering::Relaxed) as i64 - 1
    }
}

/// YCSB's `AcknowledgedCounterGenerator`: a counter whose [`LastValue`] is the highest value
/// below which every value has been acknowledged, so readers never pick a key whose insert
/// is still in flight. Acknowledgements land in a ring of 2^20 slots; whoever gets the lock
/// moves the limit over the contiguous acknowledged run (the others leave their slot for it).
#[derive(Debug)]
pub struct AcknowledgedCounterGenerator {
    counter: CounterGenerator,
    window: Box<[AtomicBool]>,
    limit: AtomicI64,
    advancing: Mutex<()>,
}

impl AcknowledgedCounterGenerator {
    /// The number of pending acknowledgements the window holds: 2^20.
    pub const WINDOW_SIZE: u64 = 1 << 20;
    const WINDOW_MASK: u64 = Self::WINDOW_SIZE - 1;

    pub fn new(countstart: u64) -> AcknowledgedCounterGenerator {
        AcknowledgedCounterGenerator {
            counter: CounterGenerator::new(countstart),
            window: (0..Self::WINDOW_SIZE)
                .map(|_| AtomicBool::new(false))
                .collect(),
            limit: AtomicI64::new(countstart as i64 - 1),
            advancing: Mutex::new(()),
        }
    }

    pub fn next_value(&self) -> u64 {
        self.counter.next_value()
    }

    /// Marks `value` as inserted. Fails as YCSB does ("Too many unacknowledged insertion
    /// keys.") when its slot still holds an acknowledgement 2^20 values older.
    pub fn acknowledge(&self, value: u64) -> Result<(), String> {
        let slot = (value & Self::WINDOW_MASK) as usize;
        if self.window[slot].swap(true, Ordering::AcqRel) {
            return Err(format!(
                "too many unacknowledged insertion keys (acknowledging {value}, window {})",
                Self::WINDOW_SIZE
            ));
        }
        if let Ok(_guard) = self.advancing.try_lock() {
            let mut limit = self.limit.load(Ordering::Acquire);
            // At most one pass over the whole window.
            for _ in 0..Self::WINDOW_SIZE {
                let next = (limit + 1) as u64;
                let next_slot = (next & Self::WINDOW_MASK) as usize;
                if !self.window[next_slot].swap(false, Ordering::AcqRel) {
                    break;
                }
                limit += 1;
            }
            self.limit.store(limit, Ordering::Release);
        }
        Ok(())
    }
}

impl LastValue for AcknowledgedCounterGenerator {
    fn last_value(&self) -> i64 {
        self.limit.load(Ordering::Acquire)
    }
}

/// YCSB's `SequentialGenerator`: `countstart`, `countstart + 1`, ..., `countend`, then
/// around again, shared by all threads.
#[derive(Debug)]
pub struct SequentialGenerator {
    counter: AtomicU64,
    countstart: u64,
    interval: u64,
}

impl SequentialGenerator {
    pub fn new(countstart: u64, countend: u64) -> SequentialGenerator {
        SequentialGenerator {
            counter: AtomicU64::new(0),
            countstart,
            interval: countend.saturating_sub(countstart).saturating_add(1),
        }
    }

    pub fn next_value(&self) -> u64 {
        self.countstart + self.counter.fetch_add(1, Ordering::Relaxed) % self.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_counts_from_start() {
        let c = CounterGenerator::new(5);
        assert_eq!(c.last_value(), 4);
        assert_eq!(c.next_value(), 5);
        assert_eq!(c.next_value(), 6);
        assert_eq!(c.last_value(), 6);
    }

    #[test]
    fn acknowledged_limit_is_highest_contiguous() {
        let c = AcknowledgedCounterGenerator::new(10);
        assert_eq!(c.last_value(), 9);
        let v: Vec<u64> = (0..4).map(|_| c.next_value()).collect();
        assert_eq!(v, vec![10, 11, 12, 13]);
        c.acknowledge(11).expect("ack");
        c.acknowledge(13).expect("ack");
        assert_eq!(c.last_value(), 9, "10 is still in flight");
        c.acknowledge(10).expect("ack");
        assert_eq!(c.last_value(), 11, "12 is still in flight");
        c.acknowledge(12).expect("ack");
        assert_eq!(c.last_value(), 13);
    }

    #[test]
    fn acknowledged_window_overflow_is_an_error() {
        let c = AcknowledgedCounterGenerator::new(0);
        // 0 is never acknowledged, so 1 and 1 + 2^20 share a slot that is not drained.
        c.acknowledge(1).expect("first ack");
        let e = c
            .acknowledge(1 + AcknowledgedCounterGenerator::WINDOW_SIZE)
            .expect_err("slot taken");
        assert!(e.contains("unacknowledged"), "{e}");
        assert_eq!(c.last_value(), -1);
    }

    #[test]
    fn acknowledged_counter_across_threads() {
        let c = std::sync::Arc::new(AcknowledgedCounterGenerator::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let v = c.next_value();
                        c.acknowledge(v).expect("ack");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("thread");
        }
        // A final uncontended acknowledgement drains whatever a busy lock left behind.
        let v = c.next_value();
        c.acknowledge(v).expect("ack");
        assert_eq!(c.last_value(), 40_000);
    }

    #[test]
    fn sequential_wraps() {
        let s = SequentialGenerator::new(3, 5);
        let v: Vec<u64> = (0..7).map(|_| s.next_value()).collect();
        assert_eq!(v, vec![3, 4, 5, 3, 4, 5, 3]);
    }
}
