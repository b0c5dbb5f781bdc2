//! Two compactions of one store at once: a small one merges the runs new flushes made while a
//! long one merges the old runs, instead of waiting behind it (`region/compaction.rs`; tiered
//! compaction, whose runs are whole: leveled compaction's steps are in `region_leveled.rs`).

use cellar_model::{FamilySchema, Get, RowMutation, TableSchema};
use cellar_storage::region::{Compacted, CompactionStyle, Region, StorageConfig};
use std::time::{Duration, Instant};

fn write_file(region: &Region, rows: u32, tag: u8) {
    for i in 0..rows {
        let m = RowMutation::new(format!("r{i:05}").into_bytes()).put(
            b"cf",
            b"q",
            u64::from(tag),
            vec![tag; 1000],
        );
        region.mutate(&m).expect("put");
    }
    region.flush().expect("flush");
}

fn value(region: &Region, i: u32) -> Option<u8> {
    let cells = region
        .get(&Get::new(format!("r{i:05}").into_bytes()))
        .expect("get");
    cells.first().map(|c| c.value[0])
}

#[test]
fn a_small_compaction_runs_beside_a_long_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StorageConfig {
        background: false,
        // The long compaction: ~3 MB read at 1 MiB/s, about three seconds.
        compaction_bytes_per_sec: 1024 * 1024,
        compaction_max_space_amp: 0.0,
        compaction_style: CompactionStyle::Tiered,
        ..StorageConfig::default()
    };
    let region = Region::open_with_config(
        dir.path(),
        TableSchema::new("t", vec![FamilySchema::new("cf")]),
        config,
    )
    .expect("open");
    // Three files of the same rows: three runs.
    for tag in [b'a', b'b', b'c'] {
        write_file(&region, 1000, tag);
    }
    std::thread::scope(|s| {
        let long = s.spawn(|| region.compact(true));
        // Wait until the long compaction is merging (it has been charged to the throttle).
        let deadline = Instant::now() + Duration::from_secs(60);
        while region.services().compaction_throttle.totals().0 == 0 {
            assert!(
                !long.is_finished(),
                "the long compaction ended before it merged"
            );
            assert!(
                Instant::now() < deadline,
                "the long compaction never started"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Three small files flushed meanwhile: merged now, not after the long compaction.
        for tag in [b'd', b'e', b'f'] {
            write_file(&region, 50, tag);
        }
        assert_eq!(
            region.compact_stores(false).expect("small compaction"),
            vec![Compacted::Minor],
            "the new runs, not the ones being merged"
        );
        assert!(
            !long.is_finished(),
            "the small compaction waited for the long one"
        );
        long.join()
            .expect("long compaction thread")
            .expect("long compaction");
    });
    let stats = region.stats();
    // The long compaction took every file there was when it chose (major); the small one's
    // output is the second file.
    assert_eq!(
        (
            stats.store_files,
            stats.compactions,
            stats.major_compactions
        ),
        (2, 2, 1),
        "{stats:?}"
    );
    assert_eq!(value(&region, 10), Some(b'f'));
    assert_eq!(value(&region, 500), Some(b'c'));
    // An explicit major compaction now takes both.
    region.compact(true).expect("major compaction");
    assert_eq!(region.stats().store_files, 1);
    assert_eq!(value(&region, 10), Some(b'f'));
    assert_eq!(value(&region, 999), Some(b'c'));
    region.close().expect("close");
}
