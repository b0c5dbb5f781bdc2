//! Splits: the middle row, daughters reading their halves of the parent's files through
//! references, and compaction rewriting the references into the daughters' own files.

use cellar_model::{FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::fs::LocalFs;
use cellar_storage::region::{Region, RegionInfo, StorageConfig, StorageServices};

fn schema() -> TableSchema {
    let mut f = FamilySchema::new("cf");
    f.block_size = 1024;
    TableSchema::new("split", vec![f, FamilySchema::new("other")])
}

fn rows(r: &Region) -> Vec<String> {
    r.scan(&Scan::new())
        .expect("scan")
        .map(|row| String::from_utf8(row.expect("row")[0].row.to_vec()).expect("utf8"))
        .collect()
}

#[test]
fn split_daughters_serve_their_halves_and_compact_away_references() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StorageConfig {
        background: false,
        ..StorageConfig::default()
    };
    let (services, replay) =
        StorageServices::open(LocalFs::shared(), &dir.path().join("wal"), config)
            .expect("services");
    let parent_dir = dir.path().join("parent");
    let parent = Region::open_in(
        &services,
        &parent_dir,
        RegionInfo::whole(1),
        schema(),
        &replay,
    )
    .expect("open parent");
    for i in 0..1000u32 {
        let k = format!("row{i:04}");
        parent
            .mutate(
                &RowMutation::new(k.clone().into_bytes())
                    .put(b"cf", b"q", 5, k.clone().into_bytes())
                    .put(b"other", b"x", 5, b"o".to_vec()),
            )
            .expect("put");
        if i == 500 {
            parent.flush().expect("flush half");
        }
    }
    parent.flush().expect("flush");
    let mid = parent.middle_row().expect("a middle row");
    let mid_s = String::from_utf8(mid.to_vec()).expect("utf8");
    assert!(
        mid_s.as_str() > "row0000" && mid_s.as_str() < "row0999",
        "middle {mid_s}"
    );

    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let (a_info, b_info) = parent
        .split(&mid, (a_dir.clone(), 2), (b_dir.clone(), 3))
        .expect("split");
    assert_eq!(a_info.end_key, mid);
    assert_eq!(b_info.start_key, mid);

    let a = Region::open_in(&services, &a_dir, a_info.clone(), schema(), &[]).expect("open a");
    let b = Region::open_in(&services, &b_dir, b_info.clone(), schema(), &[]).expect("open b");
    assert!(a.has_references() && b.has_references());
    let (ra, rb) = (rows(&a), rows(&b));
    // A reversed scan of the upper daughter ends at its start key, which is one of its rows.
    let reversed: Vec<Vec<u8>> = b
        .scan(&Scan::new().reversed())
        .expect("reversed scan")
        .map(|row| row.expect("row")[0].row.to_vec())
        .collect();
    assert_eq!(reversed.last().map(Vec::as_slice), Some(&mid[..]));
    assert_eq!(reversed.len(), rb.len());
    // Unless the scan's own stop row (exclusive) is the start key.
    let stopped = b
        .scan(&Scan::new().range(b"", &mid).reversed())
        .expect("reversed scan")
        .count();
    assert_eq!(stopped, rb.len() - 1);
    assert_eq!(
        ra.len() + rb.len(),
        1000,
        "every row in exactly one daughter"
    );
    assert!(
        ra.iter().all(|r| r.as_bytes() < &mid[..]) && rb.iter().all(|r| r.as_bytes() >= &mid[..])
    );
    // A daughter refuses rows that are not its own, and takes new writes of its own.
    assert!(
        a.get(&Get::new(mid.clone())).is_err(),
        "row outside the daughter"
    );
    b.mutate(&RowMutation::new(b"zzz".to_vec()).put(b"cf", b"q", 9, b"new".to_vec()))
        .expect("write to daughter");

    for d in [&a, &b] {
        d.compact(true).expect("compact");
        assert!(!d.has_references(), "major compaction rewrites references");
    }
    assert_eq!(rows(&a), ra);
    let mut rb2 = rb.clone();
    rb2.push("zzz".into());
    assert_eq!(rows(&b), rb2);
    let cells = a.get(&Get::new(b"row0001".to_vec())).expect("get");
    assert_eq!(cells.len(), 2, "both families survive the split");

    // The parent's files can go now; daughters no longer need them.
    drop(services);
    std::fs::remove_dir_all(&parent_dir).expect("remove parent");
    a.close().expect("close a");
    b.close().expect("close b");
    let config = StorageConfig {
        background: false,
        ..StorageConfig::default()
    };
    let (services, replay) =
        StorageServices::open(LocalFs::shared(), &dir.path().join("wal"), config)
            .expect("services");
    let b = Region::open_in(&services, &b_dir, b_info, schema(), &replay).expect("reopen b");
    assert_eq!(rows(&b), rb2, "daughter is whole without its parent");
    b.close().expect("close");
}
