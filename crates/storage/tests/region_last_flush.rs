//! A region's last flush time (HBase's earliest store flush time, which its FlushRegion
//! `if_older_than_ts` compares with): the open until a flush writes something.

use cellar_model::{FamilySchema, RowMutation, TableSchema};
use cellar_storage::region::{ManualClock, Region, StorageConfig};
use std::sync::Arc;

const T0: u64 = 1_800_000_000_000;

#[test]
fn the_last_flush_time_is_the_open_until_a_flush_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0));
    let config = StorageConfig {
        background: false,
        clock: Arc::clone(&clock) as _,
        ..StorageConfig::default()
    };
    let schema = TableSchema::new("t", vec![FamilySchema::new("cf")]);
    let region = Region::open_with_config(dir.path(), schema, config).expect("open");
    assert_eq!(region.last_flush_ms(), T0, "never flushed: the open");
    clock.advance(1000);
    assert!(!region.flush_if_any().expect("flush"), "nothing in memory");
    assert_eq!(region.last_flush_ms(), T0, "an empty flush is not a flush");
    region
        .mutate(&RowMutation::new(b"r".to_vec()).put(b"cf", b"q", 1, b"v".to_vec()))
        .expect("put");
    clock.advance(1000);
    assert!(region.flush_if_any().expect("flush"), "the row written");
    assert_eq!(region.last_flush_ms(), T0 + 2000);
    assert_eq!(region.stats().store_files, 1);
}
