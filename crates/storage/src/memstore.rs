//! The memstore: an arena-backed concurrent skiplist holding a store's recent writes.
//!
//! HOT PATH: every write inserts here. No heap allocation per cell (cells are copied into
//! arena chunks, [`arena`]), no blocking of readers by the writer ([`skiplist`]), no IO.
//!
//! Memory is released only when the whole memstore drops; iterators hold an
//! `Arc<Memstore>`'s skiplist, so the slices they return stay valid while any iterator lives.

mod arena;
mod skiplist;

use crate::iter::CellIter;
use cellar_model::Result;
use skiplist::{SkipIter, SkipList};
use std::sync::Arc;

/// Arena chunk size used by [`Memstore::new`]: 1 MiB.
pub const DEFAULT_CHUNK_SIZE: usize = arena::DEFAULT_CHUNK_SIZE;

/// A sorted in-memory map from internal key to value.
///
/// Thread-safety: `insert` may be called from many threads (inserts are serialized
/// internally); iterators run concurrently with inserts without locks and see every entry
/// whose insert completed before they were positioned, and possibly later ones.
/// Keys are unique (the sequence id makes them so); inserting an existing key is a caller bug.
pub struct Memstore {
    list: Arc<SkipList>,
}

impl Memstore {
    /// An empty memstore with [`DEFAULT_CHUNK_SIZE`] chunks; allocates no chunk until the
    /// first insert.
    pub fn new() -> Memstore {
        Memstore::with_chunk_size(DEFAULT_CHUNK_SIZE)
    }

    /// An empty memstore whose arena allocates `chunk_size`-byte chunks (at least 4 KiB).
    /// Cells over a quarter of a chunk get a chunk of their own.
    pub fn with_chunk_size(chunk_size: usize) -> Memstore {
        Memstore {
            list: Arc::new(SkipList::new(chunk_size)),
        }
    }

    /// Copies `key` and `value` into the arena and links them into the skiplist.
    ///
    /// Keys order by [`cellar_model::key::compare_keys`]. Panics if `key` or `value` is
    /// 4 GiB or longer (callers bound cell sizes far below that).
    pub fn insert(&self, key: &[u8], value: &[u8]) {
        self.list.insert(key, value);
    }

    /// Bytes held (arena bytes allocated), the figure flushes are triggered on.
    ///
    /// Counts every byte the arena handed out for cells (keys, values, node headers and
    /// towers, alignment padding) plus the unused tails of filled chunks, so it grows with
    /// each insert; it is at most [`Memstore::reserved_bytes`].
    pub fn approximate_bytes(&self) -> usize {
        self.list.used_bytes()
    }

    /// Bytes of arena chunks allocated from the system: the memory this memstore pins,
    /// including the unused rest of its current chunk.
    pub fn reserved_bytes(&self) -> usize {
        self.list.reserved_bytes()
    }

    /// Entries inserted.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when nothing has been inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An iterator that keeps the memstore alive; unpositioned until a seek.
    pub fn iter(self: &Arc<Self>) -> MemstoreIter {
        MemstoreIter {
            inner: SkipIter::new(Arc::clone(&self.list)),
        }
    }
}

impl Default for Memstore {
    fn default() -> Self {
        Memstore::new()
    }
}

/// Iterator over a [`Memstore`]; `key()`/`value()` borrow the memstore's arena. Never fails.
pub struct MemstoreIter {
    inner: SkipIter,
}

impl CellIter for MemstoreIter {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next();
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target);
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek_for_prev(target);
        Ok(())
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first();
        Ok(())
    }
}
