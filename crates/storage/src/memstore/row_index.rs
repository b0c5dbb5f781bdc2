//! The memstore's row index: row → the skiplist node holding that row's smallest key.
//!
//! A Get seeks to the start of its row, and in a memstore of a few hundred thousand cells
//! that search visits some thirty nodes spread over the whole arena, nearly each a cache
//! miss. With the index it is a hash probe and one node. Seeks anywhere else still search.
//!
//! Open addressing with linear probing over slots of (hash, node). One writer (the skiplist's
//! writer, under its mutex) and lock-free readers, as for the skiplist itself:
//! - a slot is claimed once: the writer stores its hash, then publishes its node (`Release`);
//!   a reader that loads a non-null node (`Acquire`) sees the hash. Entries are never
//!   removed; a slot's node only moves to a smaller key of the same row;
//! - the table doubles at half full: the writer fills a new table and publishes it; the old
//!   one stays allocated until the index drops, so a reader still probing it reads valid
//!   memory. It misses only entries written after the switch, which belong to writes that
//!   completed after the reader's read point was taken, so it would not see them anyway;
//! - the writer updates the index before the write's sequence id completes, so a reader sees
//!   every entry its read point covers.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Slots of a new index.
const INITIAL_SLOTS: usize = 256;

struct Slot<T> {
    hash: AtomicU64,
    node: AtomicPtr<T>,
}

struct Table<T> {
    slots: Box<[Slot<T>]>,
}

impl<T> Table<T> {
    fn new(len: usize) -> Table<T> {
        Table {
            slots: (0..len)
                .map(|_| Slot {
                    hash: AtomicU64::new(0),
                    node: AtomicPtr::new(std::ptr::null_mut()),
                })
                .collect(),
        }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }
}

/// What readers use: the current table and the hash function.
pub(crate) struct RowIndex<T> {
    current: AtomicPtr<Table<T>>,
    hasher: RandomState,
}

/// What only the writer touches: every table ever published (the current one last), freed
/// when this drops, and the count of rows held.
pub(crate) struct RowIndexTables<T> {
    /// Raw, not `Box`: readers hold pointers to these tables, and moving a `Box` (as a growing
    /// vector does) would assert unique access and invalidate them (Stacked Borrows).
    /// Allocated with `Box::into_raw`, freed in `Drop`.
    tables: Vec<NonNull<Table<T>>>,
    /// Bytes of all tables.
    bytes: usize,
    rows: usize,
}

// SAFETY: `current` points to a table owned by the matching `RowIndexTables`, which the owner
// (the skiplist) drops only with the index; slots hold node pointers the owner keeps alive and
// are only touched through atomics.
unsafe impl<T> Send for RowIndex<T> {}
// SAFETY: as above; through `&RowIndex` only atomic loads and stores happen.
unsafe impl<T> Sync for RowIndex<T> {}
// SAFETY: the tables are plain owned memory of atomics; the node pointers are not dereferenced.
unsafe impl<T> Send for RowIndexTables<T> {}

impl<T> RowIndex<T> {
    /// An empty index and its writer-side tables; keep both alive together.
    pub(crate) fn new() -> (RowIndex<T>, RowIndexTables<T>) {
        let first = Box::into_raw(Box::new(Table::new(INITIAL_SLOTS)));
        (
            RowIndex {
                current: AtomicPtr::new(first),
                hasher: RandomState::new(),
            },
            RowIndexTables {
                tables: NonNull::new(first).into_iter().collect(),
                bytes: INITIAL_SLOTS * size_of::<Slot<T>>(),
                rows: 0,
            },
        )
    }

    pub(crate) fn hash(&self, row: &[u8]) -> u64 {
        self.hasher.hash_one(row)
    }

    /// The node recorded for the row with hash `hash`; `is_row(node)` says whether a node with
    /// a matching hash is of the row sought. Null if the row is not indexed.
    #[allow(
        clippy::indexing_slicing,
        reason = "slot indices are masked with `mask()`; every table's length is a power of two (INITIAL_SLOTS, doubled by `grow`)"
    )]
    pub(crate) fn find(&self, hash: u64, is_row: impl Fn(*mut T) -> bool) -> *mut T {
        // SAFETY: `current` always points to a table in `tables`, which are freed only when
        // the index drops, and a reader holds the index (through its skiplist) meanwhile.
        let table = unsafe { &*self.current.load(Ordering::Acquire) };
        let mask = table.mask();
        let mut i = hash as usize & mask;
        for _ in 0..table.slots.len() {
            let slot = &table.slots[i];
            let node = slot.node.load(Ordering::Acquire);
            if node.is_null() {
                return node;
            }
            if slot.hash.load(Ordering::Relaxed) == hash && is_row(node) {
                return node;
            }
            i = (i + 1) & mask;
        }
        std::ptr::null_mut()
    }

    /// Records `node` for its row (hash `hash`) unless the row's recorded node sorts first.
    /// `same_row(old)` says whether `old` (hash matching) is of `node`'s row; `sorts_before(old)`
    /// whether `node`'s key is smaller than `old`'s.
    #[allow(
        clippy::indexing_slicing,
        reason = "slot indices are masked with `mask()`; every table's length is a power of two (INITIAL_SLOTS, doubled by `grow`)"
    )]
    pub(crate) fn record(
        &self,
        w: &mut RowIndexTables<T>,
        hash: u64,
        node: *mut T,
        same_row: impl Fn(*mut T) -> bool,
        sorts_before: impl Fn(*mut T) -> bool,
    ) {
        // SAFETY: `current` is the last of `w.tables`, alive while `w` is; the reference is
        // not used after `grow` replaces it.
        let table = unsafe { &*self.current.load(Ordering::Relaxed) };
        let mask = table.mask();
        let mut i = hash as usize & mask;
        loop {
            let slot = &table.slots[i];
            let old = slot.node.load(Ordering::Relaxed);
            if old.is_null() {
                slot.hash.store(hash, Ordering::Relaxed);
                slot.node.store(node, Ordering::Release);
                w.rows += 1;
                if w.rows * 2 > table.slots.len() {
                    self.grow(w);
                }
                return;
            }
            if slot.hash.load(Ordering::Relaxed) == hash && same_row(old) {
                if sorts_before(old) {
                    slot.node.store(node, Ordering::Release);
                }
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Doubles the table: fills the new one from the stored hashes, then publishes it.
    #[allow(
        clippy::indexing_slicing,
        reason = "slot indices are masked with `mask()`; every table's length is a power of two (INITIAL_SLOTS, doubled by `grow`)"
    )]
    fn grow(&self, w: &mut RowIndexTables<T>) {
        let Some(old) = w.tables.last() else { return };
        // SAFETY: the tables are alive until `w` drops, and only read here.
        let old = unsafe { old.as_ref() };
        let new: Box<Table<T>> = Box::new(Table::new(old.slots.len() * 2));
        let mask = new.mask();
        for slot in old.slots.iter() {
            let node = slot.node.load(Ordering::Relaxed);
            if node.is_null() {
                continue;
            }
            let hash = slot.hash.load(Ordering::Relaxed);
            let mut i = hash as usize & mask;
            while !new.slots[i].node.load(Ordering::Relaxed).is_null() {
                i = (i + 1) & mask;
            }
            new.slots[i].hash.store(hash, Ordering::Relaxed);
            new.slots[i].node.store(node, Ordering::Relaxed);
        }
        w.bytes += new.slots.len() * size_of::<Slot<T>>();
        let new = Box::into_raw(new);
        self.current.store(new, Ordering::Release);
        w.tables.extend(NonNull::new(new));
    }
}

impl<T> RowIndexTables<T> {
    /// Bytes of every table held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

impl<T> Drop for RowIndexTables<T> {
    fn drop(&mut self) {
        for table in self.tables.drain(..) {
            // SAFETY: each table came from `Box::into_raw` and is freed once, here; readers are
            // gone (the skiplist that owns both halves of the index is being dropped).
            drop(unsafe { Box::from_raw(table.as_ptr()) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes are (row, key) pairs here; the index only ever sees their pointers.
    struct Node {
        row: u32,
        key: u32,
    }

    fn record(index: &RowIndex<Node>, w: &mut RowIndexTables<Node>, node: &mut Node) {
        let (row, key) = (node.row, node.key);
        let hash = index.hash(&row.to_be_bytes());
        // SAFETY (test): the nodes outlive the index's use of them.
        index.record(
            w,
            hash,
            node,
            |old| unsafe { (*old).row == row },
            |old| unsafe { key < (*old).key },
        );
    }

    fn find(index: &RowIndex<Node>, row: u32) -> Option<u32> {
        let hash = index.hash(&row.to_be_bytes());
        let node = index.find(hash, |n| unsafe { (*n).row == row });
        // SAFETY (test): as above.
        (!node.is_null()).then(|| unsafe { (*node).key })
    }

    #[test]
    fn keeps_each_rows_smallest_key_across_growth() {
        let rows: u32 = if cfg!(miri) { 600 } else { 20_000 };
        let mut nodes: Vec<Node> = (0..rows)
            .flat_map(|row| [(row, 50), (row, 10), (row, 30)].map(|(row, key)| Node { row, key }))
            .collect();
        let (index, mut w) = RowIndex::new();
        for n in &mut nodes {
            record(&index, &mut w, n);
        }
        assert!(w.tables.len() > 1, "grew");
        assert!(w.bytes() >= 2 * rows as usize * size_of::<Slot<Node>>());
        for row in 0..rows {
            assert_eq!(find(&index, row), Some(10), "row {row}");
        }
        assert_eq!(find(&index, rows), None);
        assert_eq!(find(&index, u32::MAX), None);
    }
}
