//! With tiny flush sizes and a low file limit, writers are slowed while compactions catch up,
//! never failed, and readers keep reading meanwhile.

use cellar_model::{FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::region::{Region, StorageConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[test]
fn too_many_files_slow_writers_without_failing_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut f = FamilySchema::new("cf");
    f.block_size = 1024;
    let config = StorageConfig {
        memstore_flush_bytes: 8 * 1024,
        blocking_store_files: 3,
        compaction_min_files: 2,
        blocking_wait: Duration::from_millis(300),
        ..StorageConfig::default()
    };
    let region = Region::open_with_config(dir.path(), TableSchema::new("bp", vec![f]), config)
        .expect("open");
    let writing = AtomicBool::new(true);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut reads = 0u64;
            while writing.load(Ordering::Acquire) && reads < 1_000_000 {
                let rows = region
                    .scan(&Scan::new().limit(50))
                    .expect("scan while writing")
                    .count();
                assert!(rows <= 50);
                region
                    .get(&Get::new(b"k000000".to_vec()))
                    .expect("get while writing");
                reads += 1;
            }
            reads
        });
        // Rows in a scattered order: every flush spans the key space, so flushes overlap and
        // count as runs of their own (sequential rows would make one run, never compacted).
        for i in 0..3000u32 {
            let k = format!("k{:06}", (i * 1621) % 3000);
            region
                .mutate(&RowMutation::new(k.into_bytes()).put(b"cf", b"q", 1, vec![b'v'; 200]))
                .expect("writes are slowed, never failed");
        }
        writing.store(false, Ordering::Release);
        assert!(
            reader.join().expect("reader") > 0,
            "readers ran during the writes"
        );
    });
    region.wait_for_background();
    let stats = region.stats();
    assert!(
        stats.flushes > 10,
        "tiny memstores flushed often: {stats:?}"
    );
    assert!(stats.compactions > 0, "compactions ran: {stats:?}");
    assert_eq!(region.scan(&Scan::new()).expect("scan").count(), 3000);
    region.close().expect("close");
}

/// `compaction_bytes_per_sec` holds compactions to the limit: a major compaction of ~3 MB at
/// 4 MB/s is charged its input and sleeps most of ~0.75 s; a store whose file count holds
/// writers back is compacted without the limit. (The three files interleave their rows, so
/// they are three sorted runs, which is what the pressure counts.)
#[test]
fn compactions_are_throttled_except_under_pressure() {
    use cellar_model::{FamilySchema, RowMutation, TableSchema};
    use cellar_storage::region::{Region, StorageConfig};
    let compact = |blocking_store_files: usize| {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = StorageConfig {
            background: false,
            compaction_bytes_per_sec: 4 * 1024 * 1024,
            blocking_store_files,
            ..StorageConfig::default()
        };
        let region = Region::open_with_config(
            dir.path(),
            TableSchema::new("t", vec![FamilySchema::new("cf")]),
            config,
        )
        .expect("open");
        for f in 0..3u32 {
            for i in 0..1_000u32 {
                region
                    .mutate(&RowMutation::new(format!("r{i:05}-{f}").into_bytes()).put(
                        b"cf",
                        b"q",
                        1,
                        vec![b'v'; 1000],
                    ))
                    .expect("put");
            }
            region.flush().expect("flush");
        }
        region.compact(true).expect("major compaction");
        region.services().compaction_throttle.totals()
    };
    let (charged, slept) = compact(16);
    // Charged in 256 KiB steps: all but the last part of the ~3.1 MB read.
    assert!(charged >= 2_800_000, "charged {charged} bytes");
    assert!(slept.as_secs_f64() >= 0.5, "slept {slept:?}");
    let (charged, slept) = compact(3);
    assert_eq!(
        (charged, slept.as_micros()),
        (0, 0),
        "writers were held back: no limit"
    );
}
