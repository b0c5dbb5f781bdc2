//! Behaviour: `seek`, `seek_for_prev` and `next` agree with a sorted `Vec` model for random
//! keys — including many keys of one row differing in qualifier, timestamp, type or sequence
//! id, rows that are prefixes of each other (where key order is not byte order), tiny blocks
//! and every restart interval — read with and without a block cache.

mod common;

use cellar_model::key::{compare_keys, encode_key};
use cellar_model::{BloomType, Compression};
use cellar_storage::block_cache::{BlockCache, Priority};
use cellar_storage::iter::CellIter;
use cellar_storage::storefile::{StoreFile, StoreFileOptions};
use proptest::prelude::*;
use std::cmp::Ordering;
use std::sync::Arc;

fn arb_key() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec!["", "a", "ab", "abc", "b", "ba", "c"]),
        prop::sample::select(vec!["", "q", "qa", "r"]),
        0u64..4,
        prop::sample::select(vec![4u8, 8, 12, 14]),
        0u64..4,
    )
        .prop_map(|(row, q, ts, t, seq)| {
            let mut k = Vec::new();
            encode_key(&mut k, row.as_bytes(), q.as_bytes(), ts, t, seq);
            k
        })
}

fn arb_target() -> impl Strategy<Value = Vec<u8>> {
    // Seek keys may also carry the maximal type / timestamps of `first_on_*` keys.
    prop_oneof![
        4 => arb_key(),
        1 => (prop::sample::select(vec!["", "a", "ab", "b", "bb", "d"]), any::<bool>()).prop_map(|(r, max)| {
            let mut k = Vec::new();
            let v = if max { u64::MAX } else { 0 };
            encode_key(&mut k, r.as_bytes(), b"", v, if max { 0xff } else { 0 }, v);
            k
        }),
    ]
}

fn lower_bound(model: &[(Vec<u8>, Vec<u8>)], t: &[u8]) -> usize {
    model.partition_point(|(k, _)| compare_keys(k, t) == Ordering::Less)
}

fn upper_bound(model: &[(Vec<u8>, Vec<u8>)], t: &[u8]) -> usize {
    model.partition_point(|(k, _)| compare_keys(k, t) != Ordering::Greater)
}

fn assert_at(it: &impl CellIter, model: &[(Vec<u8>, Vec<u8>)], idx: Option<usize>) {
    match idx.and_then(|i| model.get(i)) {
        Some((k, v)) => {
            assert!(it.valid(), "expected {k:?}");
            assert_eq!(it.key(), k.as_slice());
            assert_eq!(it.value(), v.as_slice());
        }
        None => assert!(!it.valid(), "expected invalid, at {:?}", it.key()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn iterator_matches_sorted_model(
        keys in prop::collection::vec(arb_key(), 0..400),
        targets in prop::collection::vec(arb_target(), 1..40),
        block_size in 16usize..600,
        restart_interval in 1usize..6,
        codec in 0u8..4,
        cached in any::<bool>(),
    ) {
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = keys
            .into_iter()
            .enumerate()
            .map(|(i, k)| (k, format!("v{i}").into_bytes()))
            .collect();
        model.sort_by(|a, b| compare_keys(&a.0, &b.0));
        model.dedup_by(|a, b| compare_keys(&a.0, &b.0) == Ordering::Equal);

        let dir = tempfile::tempdir().expect("tempdir");
        let fs = common::fs();
        let o = StoreFileOptions {
            block_size,
            compression: Compression::from_code(codec).expect("codec"),
            bloom: BloomType::RowCol,
            bloom_bits_per_key: 10,
            restart_interval,
        };
        let (path, _) = common::write(&fs, dir.path(), "f", o, &model);
        let cache = cached.then(|| Arc::new(BlockCache::new(1 << 20)));
        let f = StoreFile::open(&fs, &path, 7, cache, Priority::Normal).expect("open");
        let mut it = f.iter(true);

        it.seek_to_first().expect("seek_to_first");
        for i in 0..=model.len() {
            assert_at(&it, &model, Some(i));
            it.next().expect("next");
        }
        assert!(!it.valid());

        for t in &targets {
            let lb = lower_bound(&model, t);
            it.seek(t).expect("seek");
            assert_at(&it, &model, Some(lb));
            for step in 1..4 {
                it.next().expect("next");
                assert_at(&it, &model, Some(lb + step));
            }

            let ub = upper_bound(&model, t);
            it.seek_for_prev(t).expect("seek_for_prev");
            assert_at(&it, &model, ub.checked_sub(1));
            if ub > 0 {
                for step in 0..3 {
                    it.next().expect("next");
                    assert_at(&it, &model, Some(ub + step));
                }
            }
        }
        // Every stored key is found exactly by both seeks.
        for (i, (k, _)) in model.iter().enumerate().step_by(7) {
            it.seek(k).expect("seek");
            assert_at(&it, &model, Some(i));
            it.seek_for_prev(k).expect("seek_for_prev");
            assert_at(&it, &model, Some(i));
        }
    }
}
