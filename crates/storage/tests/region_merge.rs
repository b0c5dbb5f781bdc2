//! Merges: one region reading its adjacent parents' files through references (including a
//! parent that itself still reads a split parent's files), compaction rewriting them, and
//! merges refused for regions that do not touch.

use cellar_model::{FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::fs::LocalFs;
use cellar_storage::region::{Region, RegionInfo, StorageConfig, StorageServices};
use std::path::Path;
use std::sync::Arc;

fn schema() -> TableSchema {
    let mut f = FamilySchema::new("cf");
    f.block_size = 1024;
    f.max_versions = 3;
    TableSchema::new("merge", vec![f, FamilySchema::new("other")])
}

fn rows(r: &Region) -> Vec<String> {
    r.scan(&Scan::new())
        .expect("scan")
        .map(|row| String::from_utf8(row.expect("row")[0].row.to_vec()).expect("utf8"))
        .collect()
}

fn services(dir: &Path) -> Arc<StorageServices> {
    let config = StorageConfig {
        background: false,
        ..StorageConfig::default()
    };
    StorageServices::open(LocalFs::shared(), &dir.join("wal"), config)
        .expect("services")
        .0
}

fn put(r: &Region, row: &str, ts: u64, value: &str) {
    r.mutate(
        &RowMutation::new(row.as_bytes().to_vec())
            .put(b"cf", b"q", ts, value.as_bytes().to_vec())
            .put(b"other", b"x", ts, b"o".to_vec()),
    )
    .expect("put");
}

fn info(id: u64, start: &str, end: &str) -> RegionInfo {
    RegionInfo {
        id,
        start_key: start.as_bytes().to_vec().into(),
        end_key: end.as_bytes().to_vec().into(),
    }
}

#[test]
fn merged_region_serves_every_parent_row_and_compacts_away_references() {
    let dir = tempfile::tempdir().expect("tempdir");
    let services = services(dir.path());
    let open = |name: &str, info: RegionInfo| {
        Region::open_in(&services, &dir.path().join(name), info, schema(), &[]).expect("open")
    };
    // Three parents: a split daughter (still reading its parent's files), and two plain ones,
    // each with several files and versions, and something left in its memstore.
    let whole = open("whole", info(1, "", "row0400"));
    for i in 0..400u32 {
        put(&whole, &format!("row{i:04}"), 5, "old");
        if i == 200 {
            whole.flush().expect("flush");
        }
    }
    let (low_dir, high_dir) = (dir.path().join("low"), dir.path().join("high"));
    let (low_info, high_info) = whole
        .split(b"row0300", (low_dir.clone(), 2), (high_dir.clone(), 3))
        .expect("split");
    let low = Region::open_in(&services, &low_dir, low_info, schema(), &[]).expect("low");
    let high = Region::open_in(&services, &high_dir, high_info, schema(), &[]).expect("high");
    assert!(high.has_references());
    let next = open("next", info(4, "row0400", ""));
    for i in 400..1000u32 {
        put(&next, &format!("row{i:04}"), 5, "old");
        if i % 200 == 0 {
            next.flush().expect("flush");
        }
    }
    for i in (0..1000u32).step_by(7) {
        let r: &Region = match i {
            0..300 => &low,
            300..400 => &high,
            _ => &next,
        };
        put(r, &format!("row{i:04}"), 9, "new");
    }
    let before: Vec<String> = [&low, &high, &next].iter().flat_map(|r| rows(r)).collect();
    assert_eq!(before.len(), 1000);

    // Not adjacent (low and next leave high's rows out), or out of order: refused.
    let merged_dir = dir.path().join("merged");
    for bad in [vec![&high, &low], vec![&low, &next], vec![&low]] {
        let err = Region::check_merge(&bad).expect_err("refused");
        assert!(
            err.to_string().contains("not adjacent") || err.to_string().contains("at least two"),
            "{err}"
        );
    }
    assert!(!merged_dir.exists(), "a refused merge writes nothing");

    let m_info = Region::merge(vec![low, high, next], &merged_dir, 5).expect("merge");
    assert_eq!(m_info, info(5, "", ""));
    let merged = Region::open_in(&services, &merged_dir, m_info, schema(), &[]).expect("merged");
    assert!(merged.has_references());
    assert_eq!(rows(&merged), before, "every row once, in order");
    let reversed: Vec<String> = merged
        .scan(&Scan::new().reversed())
        .expect("reversed")
        .map(|r| String::from_utf8(r.expect("row")[0].row.to_vec()).expect("utf8"))
        .collect();
    assert_eq!(reversed.len(), 1000);
    // Newer versions win across a parent's files; the older are still there.
    let cells = merged
        .get(&Get::new(b"row0301".to_vec()).versions(3))
        .expect("get");
    let values: Vec<&[u8]> = cells.iter().map(|c| &c.value[..]).collect();
    assert!(
        values.contains(&&b"new"[..]) && values.contains(&&b"old"[..]),
        "{values:?}"
    );
    assert_eq!(&cells[0].value[..], b"new");
    merged
        .mutate(&RowMutation::new(b"zzz".to_vec()).put(b"cf", b"q", 9, b"z".to_vec()))
        .expect("write to the merged region");

    merged.compact(true).expect("compact");
    assert!(
        !merged.has_references(),
        "major compaction rewrites references"
    );
    let mut after = before.clone();
    after.push("zzz".into());
    assert_eq!(rows(&merged), after);
    merged.close().expect("close");
    drop(services);
    // The parents' (and the split's parent's) directories can go now.
    for d in ["whole", "low", "high", "next"] {
        std::fs::remove_dir_all(dir.path().join(d)).expect("remove parent");
    }
    let services = self::services(dir.path());
    let merged = Region::open_in(&services, &merged_dir, info(5, "", ""), schema(), &[])
        .expect("reopen merged");
    assert_eq!(rows(&merged), after);
}
