//! The memstore: an arena-backed concurrent skiplist holding a store's recent writes.
//!
//! HOT PATH: every write inserts here. No heap allocation per cell (cells are copied into
//! arena chunks), no blocking of readers by the writer.

use crate::iter::CellIter;
use cellar_model::Result;
use std::sync::Arc;

/// A sorted in-memory map from internal key to value.
///
/// Thread-safety: `insert` may be called from many threads (inserts are serialized
/// internally); iterators run concurrently with inserts without locks and see every entry
/// whose insert completed before they were positioned, and possibly later ones.
/// Keys are unique (the sequence id makes them so); inserting an existing key is a caller bug.
pub struct Memstore {}

impl Memstore {
    pub fn new() -> Memstore {
        unimplemented!()
    }

    /// Copies `key` and `value` into the arena and links them into the skiplist.
    pub fn insert(&self, key: &[u8], value: &[u8]) {
        let _ = (key, value);
        unimplemented!()
    }

    /// Bytes held (arena bytes allocated), the figure flushes are triggered on.
    pub fn approximate_bytes(&self) -> usize {
        unimplemented!()
    }

    /// Entries inserted.
    pub fn len(&self) -> usize {
        unimplemented!()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An iterator that keeps the memstore alive; unpositioned until a seek.
    pub fn iter(self: &Arc<Self>) -> MemstoreIter {
        unimplemented!()
    }
}

impl Default for Memstore {
    fn default() -> Self {
        Memstore::new()
    }
}

/// Iterator over a [`Memstore`].
pub struct MemstoreIter {}

impl CellIter for MemstoreIter {
    fn valid(&self) -> bool {
        unimplemented!()
    }
    fn key(&self) -> &[u8] {
        unimplemented!()
    }
    fn value(&self) -> &[u8] {
        unimplemented!()
    }
    fn next(&mut self) -> Result<()> {
        unimplemented!()
    }
    fn seek(&mut self, _target: &[u8]) -> Result<()> {
        unimplemented!()
    }
    fn seek_for_prev(&mut self, _target: &[u8]) -> Result<()> {
        unimplemented!()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        unimplemented!()
    }
}
