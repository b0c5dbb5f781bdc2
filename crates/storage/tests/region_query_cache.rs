//! The query cache never serves a stale read: one row hammered by a writer while readers read
//! it through the cache (both the blocking Get and the reactor's cache-only Get), every read
//! checked against the history of acknowledged and started writes.

use cellar_model::{FamilySchema, Get, RowMutation, TableSchema};
use cellar_storage::region::{Region, StorageConfig};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn schema(query_cache: bool) -> TableSchema {
    let mut cf = FamilySchema::new("cf");
    cf.query_cache = query_cache;
    TableSchema::new("qc", vec![cf, FamilySchema::new("plain")])
}

fn value_of(cells: &[cellar_model::Cell]) -> u64 {
    cells
        .iter()
        .find(|c| c.family.as_ref() == b"cf")
        .and_then(|c| std::str::from_utf8(&c.value).ok()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn every_read_of_a_hammered_row_is_within_its_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StorageConfig {
        // Small memstores: flushes swap memstores and files under the readers too.
        memstore_flush_bytes: 256 * 1024,
        ..StorageConfig::default()
    };
    let region =
        Arc::new(Region::open_with_config(dir.path(), schema(true), config).expect("open"));
    // `started`: the highest value a put has begun writing; `acked`: the highest a put has
    // returned for. A read that begins after `acked` = a and ends before `started` passes b
    // must return a value in a..=b, and a reader's values never go back.
    let started = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(5);
    let readers: Vec<_> = (0..3)
        .map(|t| {
            let (region, started, acked, stop) = (
                Arc::clone(&region),
                Arc::clone(&started),
                Arc::clone(&acked),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let (mut reads, mut last) = (0u64, 0u64);
                while !stop.load(Ordering::SeqCst) && reads < 5_000_000 {
                    let lo = acked.load(Ordering::SeqCst);
                    let get = Get::new(b"row".to_vec()).column(b"cf", b"q");
                    let cells = if t == 0 {
                        // The reactor's path: answered only from memory, else skipped.
                        match region.get_cached(&get) {
                            Some(r) => r.expect("cached get"),
                            None => continue,
                        }
                    } else {
                        region.get(&get).expect("get")
                    };
                    let hi = started.load(Ordering::SeqCst);
                    let v = value_of(&cells);
                    assert!(
                        lo <= v && v <= hi,
                        "reader {t} read {v}, outside [{lo}, {hi}] (acknowledged before, started by the end)"
                    );
                    assert!(v >= last, "reader {t} went back from {last} to {v}");
                    last = v;
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut writes = 0u64;
    while Instant::now() < deadline && writes < 200_000 {
        let v = writes + 1;
        started.store(v, Ordering::SeqCst);
        region
            .mutate(
                &RowMutation::new(b"row".to_vec())
                    .put(b"cf", b"q", v, v.to_string().into_bytes())
                    .put(b"plain", b"pad", v, vec![b'p'; 200]),
            )
            .expect("put");
        acked.store(v, Ordering::SeqCst);
        writes = v;
        // Let readers fill the cache between some writes.
        if v.is_multiple_of(64) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    stop.store(true, Ordering::SeqCst);
    let reads: u64 = readers.into_iter().map(|r| r.join().expect("reader")).sum();
    let stats = region.services().query_cache.stats();
    assert!(
        writes > 1000 && reads > 1000,
        "{writes} writes, {reads} reads"
    );
    assert!(
        stats.hits > 0,
        "reads were answered from the cache: {stats:?}"
    );
    assert!(
        stats.invalidations > 0,
        "writes dropped cached results: {stats:?}"
    );
    // Quiet now: the next read fills, the one after hits, and both see the last write.
    let get = Get::new(b"row".to_vec()).column(b"cf", b"q");
    assert_eq!(value_of(&region.get(&get).expect("get")), writes);
    let before = region.services().query_cache.stats().hits;
    assert_eq!(value_of(&region.get(&get).expect("get")), writes);
    assert_eq!(region.services().query_cache.stats().hits, before + 1);
}

#[test]
fn only_families_that_enable_it_are_cached() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = Region::open(dir.path(), schema(true)).expect("open");
    region
        .mutate(
            &RowMutation::new(b"r".to_vec())
                .put(b"cf", b"q", 1, b"a".to_vec())
                .put(b"plain", b"q", 1, b"b".to_vec()),
        )
        .expect("put");
    let stats = || region.services().query_cache.stats();
    // A Get of the whole row reads `plain` too, which does not enable the cache.
    for _ in 0..3 {
        assert_eq!(region.get(&Get::new(b"r".to_vec())).expect("get").len(), 2);
    }
    assert_eq!((stats().hits, stats().misses), (0, 0));
    for _ in 0..3 {
        assert_eq!(
            region
                .get(&Get::new(b"r".to_vec()).family(b"cf"))
                .expect("get")
                .len(),
            1
        );
    }
    assert_eq!((stats().hits, stats().misses), (2, 1));
    // A Get with a filter always reads.
    let filtered = Get::new(b"r".to_vec())
        .family(b"cf")
        .filter(cellar_model::Filter::FirstKeyOnly);
    region.get(&filtered).expect("filtered get");
    assert_eq!((stats().hits, stats().misses), (2, 1));

    // The same table without QUERY_CACHE never touches the cache.
    let dir2 = tempfile::tempdir().expect("tempdir");
    let plain = Region::open(dir2.path(), schema(false)).expect("open");
    plain
        .mutate(&RowMutation::new(b"r".to_vec()).put(b"cf", b"q", 1, b"a".to_vec()))
        .expect("put");
    for _ in 0..3 {
        plain
            .get(&Get::new(b"r".to_vec()).family(b"cf"))
            .expect("get");
    }
    let s = plain.services().query_cache.stats();
    assert_eq!((s.hits, s.misses), (0, 0));
}

#[test]
fn results_expire_with_their_cells_ttl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(cellar_storage::region::ManualClock::new(1_000_000));
    let config = StorageConfig {
        clock: clock.clone(),
        ..StorageConfig::default()
    };
    let mut cf = FamilySchema::new("cf");
    cf.query_cache = true;
    cf.ttl_secs = Some(10);
    let region = Region::open_with_config(dir.path(), TableSchema::new("ttl", vec![cf]), config)
        .expect("open");
    region
        .mutate(&RowMutation::new(b"r".to_vec()).put(b"cf", b"q", 1_000_000, b"v".to_vec()))
        .expect("put");
    let get = Get::new(b"r".to_vec());
    assert_eq!(region.get(&get).expect("get").len(), 1);
    assert_eq!(region.get(&get).expect("get").len(), 1, "a hit");
    clock.advance(10_001);
    assert!(
        region.get(&get).expect("get").is_empty(),
        "the cell expired: the cached result must not outlive it"
    );
}
