//! Multi-version concurrency control: sequence ids and the read point.
//!
//! Every write gets the next sequence id while holding the region's write lock, so ids are
//! handed out in order. A write is visible once it *and every write before it* completed:
//! the read point is the highest id below which nothing is pending. Readers take the read
//! point when they start and ignore cells with a higher id, so a row's cells appear all at
//! once (row atomicity) and scans see one consistent snapshot, as in HBase.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Mvcc {
    read_point: AtomicU64,
    /// Writes begun and not yet retired, in id order, with "completed" flags.
    pending: Mutex<Pending>,
    advanced: Condvar,
}

struct Pending {
    next_seq: u64,
    queue: VecDeque<(u64, bool)>,
}

impl Mvcc {
    /// Starts after `last_seq`: everything up to it is visible.
    pub fn new(last_seq: u64) -> Mvcc {
        Mvcc {
            read_point: AtomicU64::new(last_seq),
            pending: Mutex::new(Pending {
                next_seq: last_seq + 1,
                queue: VecDeque::new(),
            }),
            advanced: Condvar::new(),
        }
    }

    pub fn read_point(&self) -> u64 {
        self.read_point.load(Ordering::Acquire)
    }

    /// The highest id handed out so far.
    pub fn last_assigned(&self) -> u64 {
        self.pending.lock().next_seq - 1
    }

    /// Assigns the next id. Callers hold the region's write lock, so the log order of the
    /// records they append matches id order.
    pub fn begin(&self) -> u64 {
        let mut p = self.pending.lock();
        let seq = p.next_seq;
        p.next_seq += 1;
        p.queue.push_back((seq, false));
        seq
    }

    /// Marks `seq` complete and waits until the read point covers it, so a writer always
    /// reads its own write once `mutate` returns.
    pub fn complete_and_wait(&self, seq: u64) {
        let mut p = self.pending.lock();
        if let Some(entry) = p.queue.iter_mut().find(|e| e.0 == seq) {
            entry.1 = true;
        }
        let mut advanced_to = None;
        while let Some(&(s, true)) = p.queue.front() {
            advanced_to = Some(s);
            p.queue.pop_front();
        }
        if let Some(s) = advanced_to {
            self.read_point.store(s, Ordering::Release);
            self.advanced.notify_all();
        }
        while self.read_point.load(Ordering::Acquire) < seq {
            self.advanced.wait(&mut p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn read_point_waits_for_earlier_writes() {
        let m = Arc::new(Mvcc::new(10));
        let a = m.begin();
        let b = m.begin();
        assert_eq!((a, b), (11, 12));
        let m2 = Arc::clone(&m);
        let t = std::thread::spawn(move || m2.complete_and_wait(b));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(
            m.read_point(),
            10,
            "b is done but a is not: nothing new is visible"
        );
        m.complete_and_wait(a);
        t.join().expect("join");
        assert_eq!(m.read_point(), 12);
    }
}
