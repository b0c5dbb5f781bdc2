//! Behaviour of the block cache: the byte bound holds, hits and misses are counted, a hot set
//! survives a one-touch scan, in-memory blocks survive ordinary traffic, `evict_file` drops a
//! file, concurrent use is safe; and store files read through the cache.

mod common;

use bytes::Bytes;
use cellar_model::{BloomType, Compression};
use cellar_storage::block_cache::{BlockCache, BlockKey, Priority, ENTRY_OVERHEAD};
use cellar_storage::iter::CellIter;
use cellar_storage::storefile::StoreFile;
use std::sync::Arc;

fn key(file_id: u64, offset: u64) -> BlockKey {
    BlockKey { file_id, offset }
}

fn block(len: usize) -> Bytes {
    Bytes::from(vec![1u8; len])
}

const BLOCK: usize = 4096;
const CHARGE: u64 = BLOCK as u64 + ENTRY_OVERHEAD;

#[test]
fn bound_is_respected() {
    let cache = BlockCache::new(1 << 20);
    for i in 0..2_000u64 {
        cache.insert(
            key(i % 3, i),
            block(BLOCK + (i as usize % 512)),
            Priority::Normal,
        );
        if i % 5 == 0 {
            cache.insert(key(9, i), block(BLOCK), Priority::InMemory);
        }
        assert!(cache.stats().used_bytes <= 1 << 20);
    }
    let s = cache.stats();
    assert_eq!(s.capacity_bytes, 1 << 20);
    assert!(s.evictions > 0);
    assert!(
        s.used_bytes > (1 << 20) / 2,
        "cache should be well used: {}",
        s.used_bytes
    );
    // Bigger than a shard: refused.
    let before = cache.stats().inserts;
    cache.insert(key(1, 1 << 40), block(2 << 20), Priority::Normal);
    assert_eq!(cache.stats().inserts, before);
    assert!(cache.get(&key(1, 1 << 40)).is_none());
}

#[test]
fn hits_and_misses_are_counted() {
    let cache = BlockCache::new(1 << 20);
    assert!(cache.get(&key(1, 0)).is_none());
    cache.insert(key(1, 0), block(10), Priority::Normal);
    assert_eq!(cache.get(&key(1, 0)).as_deref(), Some(&[1u8; 10][..]));
    assert!(cache.get(&key(1, 0)).is_some());
    assert!(cache.get(&key(2, 0)).is_none());
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.inserts, s.evictions), (2, 2, 1, 0));
    assert_eq!(s.used_bytes, 10 + ENTRY_OVERHEAD);
    assert!((s.hit_ratio() - 0.5).abs() < 1e-9);
    // Replacing a block does not double-charge it.
    cache.insert(key(1, 0), block(20), Priority::Normal);
    assert_eq!(cache.stats().used_bytes, 20 + ENTRY_OVERHEAD);
}

#[test]
fn hot_set_survives_a_long_scan() {
    let capacity = 100 * CHARGE;
    let cache = BlockCache::with_shards(capacity, 1);
    // A hot set of 30 blocks, each touched twice (inserted, then hit).
    for i in 0..30 {
        cache.insert(key(1, i), block(BLOCK), Priority::Normal);
        assert!(cache.get(&key(1, i)).is_some());
    }
    // A scan ten times the cache, each block read once.
    for i in 0..1_000 {
        let k = key(2, i);
        if cache.get(&k).is_none() {
            cache.insert(k, block(BLOCK), Priority::Normal);
        }
    }
    for i in 0..30 {
        assert!(
            cache.get(&key(1, i)).is_some(),
            "hot block {i} was evicted by the scan"
        );
    }
    // A plain LRU would have kept only the scan's tail; the scan blocks churned instead.
    assert!(cache.stats().evictions >= 900);
}

#[test]
fn sharded_cache_is_scan_resistant_too() {
    let cache = BlockCache::new(64 << 20);
    let n_hot = 1_000u64; // ~4 MiB hot set, well within the protected share of every shard
    for i in 0..n_hot {
        cache.insert(key(1, i), block(BLOCK), Priority::Normal);
        cache.get(&key(1, i));
    }
    for i in 0..40_000 {
        cache.insert(key(2, i), block(BLOCK), Priority::Normal);
    }
    let survivors = (0..n_hot)
        .filter(|&i| cache.get(&key(1, i)).is_some())
        .count();
    assert_eq!(survivors as u64, n_hot);
}

#[test]
fn in_memory_blocks_survive_ordinary_traffic() {
    let capacity = 100 * CHARGE;
    let cache = BlockCache::with_shards(capacity, 1);
    for i in 0..20 {
        cache.insert(key(7, i), block(BLOCK), Priority::InMemory);
    }
    // Ordinary blocks, including twice-touched ones, far beyond capacity.
    for i in 0..2_000 {
        cache.insert(key(8, i), block(BLOCK), Priority::Normal);
        if i % 2 == 0 {
            cache.get(&key(8, i));
        }
    }
    for i in 0..20 {
        assert!(
            cache.get(&key(7, i)).is_some(),
            "in-memory block {i} evicted"
        );
    }
    // The in-memory share is bounded (a quarter): more in-memory blocks evict older ones.
    for i in 20..60 {
        cache.insert(key(7, i), block(BLOCK), Priority::InMemory);
    }
    let resident = (0..60).filter(|&i| cache.get(&key(7, i)).is_some()).count() as u64;
    assert!(
        resident <= capacity / 4 / CHARGE,
        "{resident} in-memory blocks resident"
    );
    assert!(resident >= capacity / 4 / CHARGE - 1);
}

#[test]
fn evict_file_drops_only_that_file() {
    let cache = BlockCache::new(16 << 20);
    for i in 0..200 {
        cache.insert(key(1, i), block(100), Priority::Normal);
        cache.insert(key(2, i), block(100), Priority::InMemory);
        cache.insert(key(3, i), block(100), Priority::Normal);
    }
    cache.evict_file(2);
    cache.evict_file(3);
    for i in 0..200 {
        assert!(cache.get(&key(1, i)).is_some());
        assert!(cache.get(&key(2, i)).is_none());
        assert!(cache.get(&key(3, i)).is_none());
    }
    assert_eq!(cache.stats().used_bytes, 200 * (100 + ENTRY_OVERHEAD));
}

#[test]
fn concurrent_use_is_safe_and_bounded() {
    let cache = Arc::new(BlockCache::new(8 << 20));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let cache = Arc::clone(&cache);
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                let mut gets = 0u64;
                for _ in 0..20_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = key(x % 4, (x >> 8) % 4_000);
                    match x % 10 {
                        0..=5 => {
                            gets += 1;
                            if let Some(b) = cache.get(&k) {
                                assert_eq!(b.len(), 1024 + (k.offset % 7) as usize);
                            }
                        }
                        6..=8 => {
                            let p = if k.file_id == 0 {
                                Priority::InMemory
                            } else {
                                Priority::Normal
                            };
                            cache.insert(k, block(1024 + (k.offset % 7) as usize), p);
                        }
                        _ => cache.evict_file(x % 4),
                    }
                }
                gets
            })
        })
        .collect();
    let gets: u64 = threads.into_iter().map(|t| t.join().expect("thread")).sum();
    let s = cache.stats();
    assert!(s.used_bytes <= 8 << 20);
    assert_eq!(s.hits + s.misses, gets, "every lookup counted exactly once");
    assert!(s.inserts > 0 && s.hits > 0);
}

#[test]
fn store_files_read_through_the_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = common::fs();
    let data = common::entries(2_000);
    let (path, meta) = common::write(
        &fs,
        dir.path(),
        "f",
        common::opts(Compression::Zstd, BloomType::Row, 2048),
        &data,
    );
    let blocks = meta.data_block_count;
    let cache = Arc::new(BlockCache::new(32 << 20));
    let f =
        StoreFile::open(&fs, &path, 42, Some(Arc::clone(&cache)), Priority::Normal).expect("open");

    let count = |fill: bool| {
        let mut it = f.iter(fill);
        it.seek_to_first().expect("first");
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next().expect("next");
        }
        n
    };
    // A non-filling scan misses everywhere and inserts nothing.
    assert_eq!(count(false), 2_000);
    let s = cache.stats();
    assert_eq!((s.misses, s.inserts, s.hits), (blocks, 0, 0));
    // A filling scan inserts every block once...
    assert_eq!(count(true), 2_000);
    assert_eq!(cache.stats().inserts, blocks);
    // ...after which every read, filling or not, hits.
    assert_eq!(count(false), 2_000);
    let s = cache.stats();
    assert_eq!((s.hits, s.misses), (blocks, 2 * blocks));
    // Seeks within one block fetch it once.
    let mut it = f.iter(true);
    it.seek(&data[10].0).expect("seek");
    let hits = cache.stats().hits;
    it.seek(&data[11].0).expect("seek");
    it.seek_for_prev(&data[12].0).expect("seek_for_prev");
    assert_eq!(cache.stats().hits, hits);
    assert_eq!(it.key(), data[12].0.as_slice());
    // Cached blocks are uncompressed: evicting the file leaves nothing behind.
    cache.evict_file(42);
    assert_eq!(cache.stats().used_bytes, 0);
}

/// A cache that keeps blocks compressed returns the same cells from every hit, holds the
/// file's blocks in less memory than an uncompressed cache does, and keeps an uncompressed
/// file's blocks as they are.
#[test]
fn a_compressed_cache_returns_the_same_cells_in_less_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = common::fs();
    let data = common::entries(4_000);
    let used = |compression: Compression, compressed: bool| {
        let name = format!("f-{compression}-{compressed}");
        let (path, meta) = common::write(
            &fs,
            dir.path(),
            &name,
            common::opts(compression, BloomType::Row, 4096),
            &data,
        );
        let cache = Arc::new(BlockCache::new(32 << 20).compressed(compressed));
        assert_eq!(cache.keeps_compressed(), compressed);
        let f = StoreFile::open(&fs, &path, 7, Some(Arc::clone(&cache)), Priority::Normal)
            .expect("open");
        // Twice: the first pass reads and caches every block, the second decodes them from
        // the cache.
        for pass in 0..2 {
            assert_eq!(
                common::read_all(&mut f.iter(true)),
                data,
                "{name} pass {pass}"
            );
        }
        let s = cache.stats();
        assert_eq!(
            (s.inserts, s.hits),
            (meta.data_block_count, meta.data_block_count)
        );
        s.used_bytes
    };
    let (plain, packed) = (
        used(Compression::Zstd, false),
        used(Compression::Zstd, true),
    );
    assert!(
        packed * 10 < plain * 6,
        "compressed {packed} vs uncompressed {plain} bytes"
    );
    let (plain, packed) = (
        used(Compression::None, false),
        used(Compression::None, true),
    );
    assert!(
        packed >= plain && packed < plain + plain / 50,
        "{packed} vs {plain}"
    );
}

/// `Region::get_cached` answers from memstores and cached blocks only: a cold block makes it
/// decline (reading nothing), a warmed one makes it answer exactly what `get` answers.
#[test]
fn cache_only_get_declines_cold_blocks_and_answers_warm_ones() {
    use cellar_model::{FamilySchema, Get, RowMutation, TableSchema};
    use cellar_storage::region::{Region, StorageConfig};
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StorageConfig {
        background: false,
        ..StorageConfig::default()
    };
    let schema = TableSchema::new("t", vec![FamilySchema::new("cf")]);
    let region =
        Region::open_with_config(dir.path(), schema.clone(), config.clone()).expect("open");
    region
        .mutate(&RowMutation::new("flushed").put(b"cf", b"q", 1, "on disk"))
        .expect("put");
    region.flush().expect("flush");
    region
        .mutate(&RowMutation::new("fresh").put(b"cf", b"q", 2, "in memory"))
        .expect("put");
    let fresh = Get::new("fresh").column(b"cf", b"q");
    let memory = region
        .get_cached(&fresh)
        .expect("memstore answers")
        .expect("get");
    assert_eq!(memory, region.get(&fresh).expect("get"));
    region.close().expect("close");

    // Reopened: the store file's blocks are cold.
    let region = Region::open_with_config(dir.path(), schema, config).expect("reopen");
    let flushed = Get::new("flushed").column(b"cf", b"q");
    let misses = region.stats().block_cache.misses;
    assert!(
        region.get_cached(&flushed).is_none(),
        "cold block must not be read"
    );
    let cells = region.get(&flushed).expect("get from disk");
    assert_eq!(&cells[0].value[..], b"on disk");
    assert!(region.stats().block_cache.misses > misses);
    let warm = region
        .get_cached(&flushed)
        .expect("now cached")
        .expect("get");
    assert_eq!(warm, cells);
    // A row the bloom filter rules out needs no block at all.
    let absent = region
        .get_cached(&Get::new("absent"))
        .expect("bloom answers");
    assert!(absent.expect("get").is_empty());
    region.close().expect("close");
}

/// `storage.block_cache_compressed` reaches a region's reads: the same rows, read through a
/// region whose services keep blocks compressed, take less of the block cache.
#[test]
fn a_region_with_a_compressed_cache_caches_less_for_the_same_rows() {
    use cellar_model::{FamilySchema, Get, RowMutation, TableSchema};
    use cellar_storage::region::{Region, StorageConfig};
    let used = |compressed: bool| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cf = FamilySchema::new("cf");
        cf.compression = Compression::Lz4;
        let config = StorageConfig {
            block_cache_compressed: compressed,
            ..StorageConfig::default()
        };
        let region = Region::open_with_config(dir.path(), TableSchema::new("t", vec![cf]), config)
            .expect("open");
        assert_eq!(region.services().block_cache.keeps_compressed(), compressed);
        let value = "abcdefgh".repeat(64);
        for i in 0..2_000u32 {
            region
                .mutate(&RowMutation::new(format!("r{i:05}").into_bytes()).put(
                    b"cf",
                    b"q",
                    1,
                    value.clone().into_bytes(),
                ))
                .expect("put");
        }
        region.flush().expect("flush");
        for i in 0..2_000u32 {
            let cells = region
                .get(&Get::new(format!("r{i:05}").into_bytes()))
                .expect("get");
            assert_eq!(cells.len(), 1);
            assert_eq!(cells[0].value.as_ref(), value.as_bytes());
        }
        region.services().block_cache.stats().used_bytes
    };
    let (plain, packed) = (used(false), used(true));
    assert!(
        packed * 4 < plain,
        "compressed {packed} vs uncompressed {plain} bytes"
    );
}
