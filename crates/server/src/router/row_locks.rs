//! Row locks: read-modify-write (increment, append, check-and-mutate) must not interleave with
//! another write to the same row.
//!
//! Every mutation of a region holds its row's lock for the whole operation (read, compute,
//! write, WAL sync). Locks are per row, as in HBase: the set of locked rows, in shards keyed by
//! a hash of the row. Two rows never wait for each other. (Striped locks, an array of mutexes
//! indexed by a hash, made a put wait out an unrelated row's fdatasync whenever the two rows
//! shared a stripe: 1 put in 256 took the whole sync delay.) Reads take no lock: MVCC gives
//! them a consistent row.
//!
//! A put the network reactor applies holds its row in a [`RowGuard`] until its WAL record is in
//! the OS and it is visible, which may be after the call that applied it returned
//! (`crate::region_server::DeferredPut`).
//!
//! Cost: a shard mutex and a hash set insert to lock, the same to unlock; the row key is a
//! `Bytes` clone, no allocation. Waiters of a shard share one condition variable (waits are
//! rare: only writes to one row at once).

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use std::collections::HashSet;
use std::sync::Arc;

/// Shards of the locked-row set: enough that handler threads rarely meet on a shard mutex.
const SHARDS: usize = 64;

#[derive(Default)]
struct Shard {
    locked: Mutex<HashSet<Bytes>>,
    released: Condvar,
}

/// The rows of one region locked now. Cheap to share: clones share the set.
#[derive(Clone)]
pub struct RowLocks {
    shards: Arc<[Shard]>,
}

/// A held row lock; dropping it lets the row go.
#[must_use = "the row is unlocked when the guard drops"]
pub struct RowGuard {
    locks: RowLocks,
    row: Bytes,
}

impl Drop for RowGuard {
    fn drop(&mut self) {
        let shard = self.locks.shard(&self.row);
        shard.locked.lock().remove(&self.row);
        shard.released.notify_all();
    }
}

impl Default for RowLocks {
    fn default() -> Self {
        RowLocks::new()
    }
}

impl RowLocks {
    pub fn new() -> RowLocks {
        RowLocks {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }

    fn shard(&self, row: &[u8]) -> &Shard {
        &self.shards[shard_of(row)]
    }

    /// Holds `row` until the guard drops, waiting while another call holds it.
    pub fn lock(&self, row: &Bytes) -> RowGuard {
        let shard = self.shard(row);
        let mut locked = shard.locked.lock();
        while locked.contains(row) {
            shard.released.wait(&mut locked);
        }
        locked.insert(row.clone());
        RowGuard {
            locks: self.clone(),
            row: row.clone(),
        }
    }

    /// [`RowLocks::lock`] without waiting: `None` while another call holds the row.
    pub fn try_lock(&self, row: &Bytes) -> Option<RowGuard> {
        let shard = self.shard(row);
        if !shard.locked.lock().insert(row.clone()) {
            return None;
        }
        Some(RowGuard {
            locks: self.clone(),
            row: row.clone(),
        })
    }
}

/// FNV-1a: cheap and spreads short keys well enough for sharding.
fn shard_of(row: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in row {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % SHARDS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_row_is_held_until_its_guard_drops_and_other_rows_never_wait() {
        let locks = RowLocks::new();
        let a = Bytes::from_static(b"a");
        let g = locks.lock(&a);
        assert!(locks.try_lock(&a).is_none());
        // Every other row is free, whichever shard it falls in.
        let others: Vec<RowGuard> = (0..1000)
            .map(|i| {
                locks
                    .try_lock(&Bytes::from(format!("row-{i}")))
                    .expect("an unrelated row is free")
            })
            .collect();
        drop(others);
        drop(g);
        assert!(locks.try_lock(&a).is_some());
    }

    #[test]
    fn a_waiter_gets_the_row_when_it_is_released() {
        let locks = RowLocks::new();
        let row = Bytes::from_static(b"r");
        let g = locks.lock(&row);
        let (l2, r2) = (locks.clone(), row.clone());
        let waiter = std::thread::spawn(move || drop(l2.lock(&r2)));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "waits while the row is held");
        drop(g);
        waiter.join().expect("waiter");
        assert!(locks.shards.iter().all(|s| s.locked.lock().is_empty()));
    }
}
