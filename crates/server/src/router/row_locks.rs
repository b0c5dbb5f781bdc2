//! Striped row locks: read-modify-write (increment, append, check-and-mutate) must not
//! interleave with another write to the same row.
//!
//! Every mutation of a region takes the lock of its row's stripe for the whole operation
//! (read, compute, write, WAL sync). A fixed array of mutexes indexed by a hash of the row
//! costs no allocation per row; two rows sharing a stripe only wait for each other, which is
//! harmless. Reads take no lock: MVCC gives them a consistent row.
//!
//! A put the network reactor applies holds its stripe in a [`RowGuard`] until its WAL record
//! is in the OS and it is visible, which may be after the call that applied it returned
//! (`crate::region_server::DeferredPut`).

use parking_lot::{ArcMutexGuard, Mutex, MutexGuard, RawMutex};
use std::sync::Arc;

/// A held stripe that owns its lock, so it can outlive the borrow of the region. It may sit in
/// a reactor task's state (parking_lot's `send_guard`), though never across an `.await`.
pub type RowGuard = ArcMutexGuard<RawMutex, ()>;

/// Stripes per region: enough that handler threads rarely meet on unrelated rows.
const STRIPES: usize = 256;

pub struct RowLocks {
    stripes: Box<[Arc<Mutex<()>>]>,
}

impl Default for RowLocks {
    fn default() -> Self {
        RowLocks::new()
    }
}

impl RowLocks {
    pub fn new() -> RowLocks {
        RowLocks {
            stripes: (0..STRIPES).map(|_| Arc::new(Mutex::new(()))).collect(),
        }
    }

    /// Holds `row`'s stripe until the guard drops.
    pub fn lock(&self, row: &[u8]) -> MutexGuard<'_, ()> {
        self.stripes[stripe_of(row)].lock()
    }

    /// [`RowLocks::lock`] without waiting: `None` while another call holds the stripe.
    pub fn try_lock(&self, row: &[u8]) -> Option<MutexGuard<'_, ()>> {
        self.stripes[stripe_of(row)].try_lock()
    }

    /// [`RowLocks::try_lock`] with a guard that owns the stripe.
    pub fn try_lock_owned(&self, row: &[u8]) -> Option<RowGuard> {
        self.stripes[stripe_of(row)].try_lock_arc()
    }
}

/// FNV-1a: cheap and spreads short keys well enough for striping.
fn stripe_of(row: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in row {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % STRIPES as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_row_same_stripe_and_rows_spread() {
        assert_eq!(stripe_of(b"row-1"), stripe_of(b"row-1"));
        let used: std::collections::HashSet<usize> = (0..1000)
            .map(|i| stripe_of(format!("user{i}").as_bytes()))
            .collect();
        assert!(used.len() > STRIPES / 2, "only {} stripes used", used.len());
        let locks = RowLocks::new();
        let g = locks.lock(b"a");
        assert!(locks.stripes[stripe_of(b"a")].try_lock().is_none());
        drop(g);
    }
}
