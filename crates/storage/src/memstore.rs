//! The memstore: an arena-backed concurrent skiplist holding a store's recent writes.
//!
//! HOT PATH: every write inserts here. No heap allocation per cell (cells are copied into
//! arena chunks, `arena`), no blocking of readers by the writer (`skiplist`), no IO.
//!
//! Memory is released only when the whole memstore drops (its chunks to the
//! [`chunk_pool`], for the next memstore); iterators hold an
//! `Arc<Memstore>`'s skiplist, so the slices they return stay valid while any iterator lives.

mod arena;
mod chunk;
pub mod chunk_pool;
mod row_index;
mod skiplist;

use crate::iter::CellIter;
use cellar_model::Result;
use skiplist::{SkipIter, SkipList};
use std::sync::Arc;

/// Arena chunk size used by [`Memstore::new`]: 2 MiB.
pub const DEFAULT_CHUNK_SIZE: usize = chunk::DEFAULT_CHUNK_SIZE;

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

    /// [`Memstore::insert`] of several cells at once. Cells in key order (a row's cells,
    /// sorted) are linked one after another without a search from the top each.
    pub fn insert_all<'k>(&self, cells: impl IntoIterator<Item = (&'k [u8], &'k [u8])>) {
        self.list.insert_all(cells);
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

    /// False only if no cell of `row` was inserted before this call (an answer from the row
    /// index, without a search: a Get skips a memstore that lacks its row).
    pub fn may_contain_row(&self, row: &[u8]) -> bool {
        !self.is_empty() && self.list.may_contain_row(row)
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

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::cell::CellType;
    use cellar_model::key::{compare_keys, first_on_column, first_on_row, make_key};
    use proptest::prelude::*;
    use std::cmp::Ordering;

    const TYPES: [CellType; 5] = [
        CellType::Put,
        CellType::Delete,
        CellType::DeleteFamilyVersion,
        CellType::DeleteColumn,
        CellType::DeleteFamily,
    ];

    /// Every (key, value) from the first entry on.
    fn scan(memstore: &Arc<Memstore>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut it = memstore.iter();
        it.seek_to_first().expect("seek");
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next().expect("next");
        }
        out
    }

    /// Small alphabets so rows and qualifiers collide and prefixes of each other occur.
    fn arb_key() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(prop::sample::select(vec![0u8, b'a', b'b', 0xff]), 0..4),
            prop::collection::vec(prop::sample::select(vec![0u8, b'a', b'b', 0xff]), 0..3),
            prop::sample::select(vec![0u64, 1, 2, u64::MAX]),
            prop::sample::select(TYPES.to_vec()),
            0u64..4,
        )
            .prop_map(|(row, qual, ts, t, seq)| make_key(&row, &qual, ts, t, seq))
    }

    /// Keys no insert could have: seek keys at row and column starts.
    fn arb_probe() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            arb_key(),
            prop::collection::vec(prop::sample::select(vec![0u8, b'a', b'b', 0xff]), 0..4)
                .prop_map(|row| first_on_row(&row)),
            (
                prop::collection::vec(prop::sample::select(vec![b'a', b'b']), 0..3),
                prop::collection::vec(prop::sample::select(vec![b'a', b'b']), 0..3),
            )
                .prop_map(|(row, qual)| first_on_column(&row, &qual)),
        ]
    }

    fn cases() -> u32 {
        if cfg!(miri) {
            4
        } else {
            128
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn iteration_and_seeks_match_a_sorted_vec(
            entries in prop::collection::vec(
                (arb_key(), prop::collection::vec(any::<u8>(), 0..24)),
                0..if cfg!(miri) { 24 } else { 300 },
            ),
            probes in prop::collection::vec(arb_probe(), 1..40),
            small_chunks in any::<bool>(),
            batch in 1usize..12,
        ) {
            let memstore = Arc::new(if small_chunks {
                Memstore::with_chunk_size(4096)
            } else {
                Memstore::new()
            });
            let mut expected: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for (key, value) in entries {
                if expected.iter().any(|(k, _)| *k == key) {
                    continue; // keys are unique by contract
                }
                expected.push((key, value));
            }
            // Inserted in batches of `batch`: every other batch sorted (each entry searched
            // for from the previous one), the rest in arrival order (some from the top).
            for (i, chunk) in expected.chunks(batch).enumerate() {
                let mut chunk: Vec<&(Vec<u8>, Vec<u8>)> = chunk.iter().collect();
                if i % 2 == 0 {
                    chunk.sort_by(|a, b| compare_keys(&a.0, &b.0));
                }
                memstore.insert_all(chunk.iter().map(|(k, v)| (&k[..], &v[..])));
            }
            expected.sort_by(|a, b| compare_keys(&a.0, &b.0));
            prop_assert_eq!(memstore.len(), expected.len());
            prop_assert_eq!(&scan(&memstore), &expected);

            let mut it = memstore.iter();
            let inserted: Vec<Vec<u8>> = expected.iter().map(|(k, _)| k.clone()).collect();
            for probe in probes.iter().chain(&inserted) {
                let ge = expected.partition_point(|(k, _)| compare_keys(k, probe) == Ordering::Less);
                it.seek(probe).expect("seek");
                match expected.get(ge) {
                    Some((k, v)) => {
                        prop_assert!(it.valid());
                        prop_assert_eq!(it.key(), &k[..]);
                        prop_assert_eq!(it.value(), &v[..]);
                        // `next` continues in order from a seek.
                        it.next().expect("next");
                        match expected.get(ge + 1) {
                            Some((k, _)) => prop_assert_eq!(it.key(), &k[..]),
                            None => prop_assert!(!it.valid()),
                        }
                    }
                    None => prop_assert!(!it.valid()),
                }

                let le = expected.partition_point(|(k, _)| compare_keys(k, probe) != Ordering::Greater);
                it.seek_for_prev(probe).expect("seek_for_prev");
                match le.checked_sub(1).and_then(|i| expected.get(i)) {
                    Some((k, v)) => {
                        prop_assert!(it.valid());
                        prop_assert_eq!(it.key(), &k[..]);
                        prop_assert_eq!(it.value(), &v[..]);
                    }
                    None => prop_assert!(!it.valid()),
                }
            }
        }
    }

    #[test]
    fn values_larger_than_a_chunk() {
        let chunk = 4096;
        let memstore = Arc::new(Memstore::with_chunk_size(chunk));
        let mut expected = Vec::new();
        for (i, len) in [
            10usize,
            chunk + 1,
            3,
            chunk * 3,
            chunk / 4 + 1,
            0,
            chunk - 1,
        ]
        .into_iter()
        .enumerate()
        {
            let key = make_key(format!("row{i}").as_bytes(), b"q", 7, CellType::Put, 1);
            let value: Vec<u8> = (0..len).map(|b| (b * 31 + i) as u8).collect();
            memstore.insert(&key, &value);
            expected.push((key, value));
        }
        expected.sort_by(|a, b| compare_keys(&a.0, &b.0));
        assert_eq!(scan(&memstore), expected);
        let payload: usize = expected.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(memstore.approximate_bytes() >= payload);
        assert!(memstore.approximate_bytes() <= memstore.reserved_bytes());
    }

    #[test]
    fn value_larger_than_the_default_chunk() {
        let memstore = Arc::new(Memstore::new());
        let big = vec![0xabu8; DEFAULT_CHUNK_SIZE + 17];
        let key = make_key(b"big", b"q", 1, CellType::Put, 1);
        memstore.insert(&make_key(b"a", b"q", 1, CellType::Put, 2), b"small");
        memstore.insert(&key, &big);
        let mut it = memstore.iter();
        it.seek(&key).expect("seek");
        assert_eq!(it.key(), &key[..]);
        assert_eq!(it.value(), &big[..]);
        assert!(memstore.approximate_bytes() > DEFAULT_CHUNK_SIZE);
    }

    #[test]
    fn empty_values_and_empty_qualifiers() {
        let memstore = Arc::new(Memstore::new());
        let keys = [
            make_key(b"r", b"", 5, CellType::DeleteFamily, 3),
            make_key(b"r", b"", 5, CellType::Put, 3),
            make_key(b"r", b"q", 5, CellType::Put, 3),
            make_key(b"", b"", 0, CellType::Put, 0),
        ];
        for key in &keys {
            memstore.insert(key, b"");
        }
        let scanned = scan(&memstore);
        let mut sorted = keys.to_vec();
        sorted.sort_by(|a, b| compare_keys(a, b));
        assert_eq!(
            scanned.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
            sorted
        );
        assert!(scanned.iter().all(|(_, v)| v.is_empty()));

        let mut it = memstore.iter();
        it.seek(&first_on_row(b"r")).expect("seek");
        assert_eq!(
            it.key(),
            &keys[0][..],
            "DeleteFamily sorts first in its column"
        );
    }

    #[test]
    fn counts_and_bytes() {
        let memstore = Memstore::new();
        assert!(memstore.is_empty());
        assert_eq!(memstore.approximate_bytes(), 0);
        assert_eq!(memstore.reserved_bytes(), 0);
        let mut last = 0;
        for seq in 0..100u64 {
            memstore.insert(&make_key(b"row", b"q", 1, CellType::Put, seq), &[0u8; 100]);
            assert!(memstore.approximate_bytes() > last + 100);
            last = memstore.approximate_bytes();
        }
        assert_eq!(memstore.len(), 100);
        assert!(!memstore.is_empty());
        // One chunk, plus the row index's first table (one row here).
        let reserved = memstore.reserved_bytes();
        assert!(
            (DEFAULT_CHUNK_SIZE..DEFAULT_CHUNK_SIZE + 8192).contains(&reserved),
            "{reserved}"
        );
    }

    #[test]
    fn iterator_outlives_the_callers_handle() {
        let memstore = Arc::new(Memstore::new());
        let key = make_key(b"row", b"q", 1, CellType::Put, 1);
        memstore.insert(&key, b"value");
        let mut it = memstore.iter();
        drop(memstore);
        it.seek_to_first().expect("seek");
        assert_eq!(it.key(), &key[..]);
        assert_eq!(it.value(), b"value");
    }

    #[test]
    fn memstore_and_iterator_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Memstore>();
        send::<MemstoreIter>();
    }
}
