//! Multi-version concurrency control: sequence ids and what readers see.
//!
//! Every write gets the next sequence id under the region's write lock, so ids follow log
//! order. A write becomes visible when it completes, whether or not earlier writes have: a
//! reader's [`ReadPoint`] is the highest completed id plus the ids below it still in flight
//! (or aborted) when it was taken, which the reader skips. A row's cells share their write's
//! id, so they appear at once (row atomicity), and a scan reads one snapshot, as in HBase.
//!
//! Unlike HBase, a write never waits for earlier ones to become visible: a SYNC_WAL put is not
//! held back by an FSYNC_WAL put of another row waiting on its fdatasync. The writes this lets
//! overtake each other were concurrent (neither was acknowledged before the other began), so
//! either order is one a client could observe. Writes to one row are ordered by the row lock
//! above this layer (`RegionServer`'s row locks).
//!
//! An aborted write (its WAL append or sync failed) never becomes visible. Its cells stay in
//! the memstore, skipped by every reader, and a flush leaves them out of the store file it
//! writes; once flushed past, the id is forgotten ([`Mvcc::forget_aborted`]).
//!
//! Thread-safety: all methods take `&self`. [`Mvcc::read_point`] is one atomic load while no
//! write below the highest completed one is pending, the common case.

use parking_lot::{Condvar, Mutex};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What one reader sees: ids up to `high`, except those in `skip`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPoint {
    high: u64,
    /// Ids ≤ `high` not visible (in flight or aborted when the read point was taken), sorted.
    skip: Option<Arc<[u64]>>,
}

impl ReadPoint {
    /// Sees every cell (compactions, which read only flushed, visible data).
    pub const ALL: ReadPoint = ReadPoint {
        high: u64::MAX,
        skip: None,
    };

    /// Sees every id up to `high`.
    pub const fn upto(high: u64) -> ReadPoint {
        ReadPoint { high, skip: None }
    }

    /// The highest id this reader may see (HBase's `mvcc_read_point`).
    pub fn high(&self) -> u64 {
        self.high
    }

    /// This read point, seeing no id above `high`: a scan reopened at the point its first
    /// open reported. Never above the read point itself, so writes still in flight stay
    /// invisible whatever a client sends.
    pub fn at_most(self, high: u64) -> ReadPoint {
        ReadPoint {
            high: self.high.min(high),
            skip: self.skip,
        }
    }

    /// Whether a cell written with sequence id `seq` exists for this reader.
    #[inline]
    pub fn sees(&self, seq: u64) -> bool {
        seq <= self.high
            && self
                .skip
                .as_ref()
                .is_none_or(|s| s.binary_search(&seq).is_err())
    }
}

/// `clean` when the published read point has ids to skip: readers take the lock.
const HAS_SKIPS: u64 = u64::MAX;

pub struct Mvcc {
    /// The highest completed id while nothing below it is skipped, else [`HAS_SKIPS`].
    clean: AtomicU64,
    state: Mutex<State>,
    /// Signalled whenever a write completes or aborts.
    settled: Condvar,
}

struct State {
    next_seq: u64,
    /// Highest completed id.
    high: u64,
    /// Begun, neither completed nor aborted.
    in_flight: BTreeSet<u64>,
    /// Aborted and possibly still in a memstore.
    aborted: BTreeSet<u64>,
    /// The ids below `high` readers skip now (`None`: none).
    skip: Option<Arc<[u64]>>,
}

impl State {
    /// Recomputes what readers skip and publishes it.
    fn publish(&mut self, clean: &AtomicU64) {
        let high = self.high;
        let below = |s: &BTreeSet<u64>| s.range(..high).copied().collect::<Vec<u64>>();
        let mut skip = below(&self.in_flight);
        skip.extend(below(&self.aborted));
        if skip.is_empty() {
            self.skip = None;
            clean.store(high, Ordering::Release);
        } else {
            skip.sort_unstable();
            self.skip = Some(skip.into());
            clean.store(HAS_SKIPS, Ordering::Release);
        }
    }
}

impl Mvcc {
    /// Starts after `last_seq`: everything up to it is visible.
    pub fn new(last_seq: u64) -> Mvcc {
        Mvcc {
            clean: AtomicU64::new(last_seq),
            state: Mutex::new(State {
                next_seq: last_seq + 1,
                high: last_seq,
                in_flight: BTreeSet::new(),
                aborted: BTreeSet::new(),
                skip: None,
            }),
            settled: Condvar::new(),
        }
    }

    /// What a reader starting now sees: every write completed before this call.
    pub fn read_point(&self) -> ReadPoint {
        let clean = self.clean.load(Ordering::Acquire);
        if clean != HAS_SKIPS {
            return ReadPoint::upto(clean);
        }
        let st = self.state.lock();
        ReadPoint {
            high: st.high,
            skip: st.skip.clone(),
        }
    }

    /// Every cell in the memstores except aborted writes' (writes in flight included): what a
    /// flush writes, and what a delete of "the latest version" looks its timestamp up in.
    pub fn all_but_aborted(&self) -> ReadPoint {
        let st = self.state.lock();
        ReadPoint {
            high: u64::MAX,
            skip: (!st.aborted.is_empty())
                .then(|| st.aborted.iter().copied().collect::<Vec<_>>().into()),
        }
    }

    /// The highest id handed out so far.
    pub fn last_assigned(&self) -> u64 {
        self.state.lock().next_seq - 1
    }

    /// Assigns the next id. Callers hold the region's write lock, so the log order of the
    /// records they append matches id order.
    pub fn begin(&self) -> u64 {
        let mut st = self.state.lock();
        let seq = st.next_seq;
        st.next_seq += 1;
        st.in_flight.insert(seq);
        seq
    }

    /// Makes `seq` visible to every reader that starts from now on. Never waits.
    pub fn complete(&self, seq: u64) {
        let mut st = self.state.lock();
        if !st.in_flight.remove(&seq) {
            return;
        }
        st.high = st.high.max(seq);
        st.publish(&self.clean);
        drop(st);
        self.settled.notify_all();
    }

    /// `seq` will never be visible: its write failed. Never waits.
    pub fn abort(&self, seq: u64) {
        let mut st = self.state.lock();
        if !st.in_flight.remove(&seq) {
            return;
        }
        st.aborted.insert(seq);
        st.publish(&self.clean);
        drop(st);
        self.settled.notify_all();
    }

    /// Waits until every write with an id ≤ `seq` has completed or aborted (a flush must know
    /// which cells of its snapshot exist before writing them).
    pub fn wait_settled(&self, seq: u64) {
        let mut st = self.state.lock();
        while st.in_flight.first().is_some_and(|&s| s <= seq) {
            self.settled.wait(&mut st);
        }
    }

    /// Aborted writes with ids ≤ `seq` are no longer in any memstore (a flush dropped them).
    pub fn forget_aborted(&self, seq: u64) {
        let mut st = self.state.lock();
        let before = st.aborted.len();
        st.aborted.retain(|&s| s > seq);
        if st.aborted.len() != before {
            st.publish(&self.clean);
        }
    }

    /// Writes that failed and are still skipped by readers.
    #[cfg(test)]
    pub fn aborted_count(&self) -> usize {
        self.state.lock().aborted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_is_visible_once_complete_whatever_came_before() {
        let m = Mvcc::new(10);
        let a = m.begin();
        let b = m.begin();
        assert_eq!((a, b), (11, 12));
        assert_eq!(m.read_point(), ReadPoint::upto(10), "nothing new yet");
        m.complete(b);
        let rp = m.read_point();
        assert!(rp.sees(b) && rp.sees(10), "b is visible at once");
        assert!(!rp.sees(a), "a, still in flight, is not");
        m.complete(a);
        let rp = m.read_point();
        assert!(rp.sees(a) && rp.sees(b));
        assert_eq!(
            rp,
            ReadPoint::upto(12),
            "no skips left: the fast path again"
        );
    }

    #[test]
    fn an_aborted_write_is_never_visible_until_forgotten() {
        let m = Mvcc::new(0);
        let a = m.begin();
        let b = m.begin();
        m.abort(a);
        m.complete(b);
        assert!(!m.read_point().sees(a));
        assert!(m.read_point().sees(b));
        assert!(!m.all_but_aborted().sees(a));
        assert!(m.all_but_aborted().sees(b));
        m.forget_aborted(a);
        assert_eq!(m.aborted_count(), 0);
        assert_eq!(m.read_point(), ReadPoint::upto(b));
    }

    #[test]
    fn a_read_point_taken_earlier_keeps_its_snapshot() {
        let m = Mvcc::new(0);
        let a = m.begin();
        let b = m.begin();
        m.complete(b);
        let old = m.read_point();
        m.complete(a);
        assert!(!old.sees(a), "completed after the read point was taken");
        assert!(m.read_point().sees(a));
    }

    #[test]
    fn wait_settled_waits_for_in_flight_writes_at_or_below() {
        let m = Arc::new(Mvcc::new(0));
        let a = m.begin();
        let b = m.begin();
        m.complete(b);
        let m2 = Arc::clone(&m);
        let t = std::thread::spawn(move || m2.wait_settled(b));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!t.is_finished(), "a is in flight");
        m.abort(a);
        t.join().expect("join");
        m.wait_settled(b); // nothing in flight: returns at once
    }
}
