//! Raw scans (HBase's `Scan.setRaw`): delete markers and the puts they mask come back with
//! their types, up to the scan's versions, from memstores and store files alike, until a major
//! compaction removes them; table options: a READONLY table refuses writes.

use cellar_model::{CellType, FamilySchema, RowMutation, Scan, TableSchema};
use cellar_storage::region::{Region, StorageConfig};

fn open(dir: &std::path::Path, read_only: bool) -> Region {
    let mut schema = TableSchema::new("t", vec![FamilySchema::new("cf")]);
    schema.options.read_only = read_only;
    let config = StorageConfig {
        background: false,
        ..StorageConfig::default()
    };
    Region::open_with_config(dir, schema, config).expect("open")
}

/// (qualifier, timestamp, type) of every cell a scan returns.
fn cells(region: &Region, scan: &Scan) -> Vec<(String, u64, CellType)> {
    let mut out = Vec::new();
    for row in region.scan(scan).expect("scan") {
        for c in row.expect("row") {
            out.push((
                String::from_utf8_lossy(&c.qualifier).into_owned(),
                c.timestamp,
                c.cell_type,
            ));
        }
    }
    out
}

#[test]
fn raw_scans_return_markers_and_masked_cells_until_a_major_compaction() {
    let dir = tempfile::tempdir().expect("tmp");
    let region = open(dir.path(), false);
    let put = |q: &[u8], ts: u64| {
        region
            .mutate(&RowMutation::new("r").put(b"cf", q, ts, "v"))
            .expect("put")
    };
    put(b"a", 10);
    put(b"a", 20);
    put(b"a", 30);
    put(b"b", 10);
    region
        .mutate(&RowMutation::new("r").delete_column(b"cf", b"a", 25))
        .expect("delete column");
    region
        .mutate(&RowMutation::new("r").delete_version(b"cf", b"b", 10))
        .expect("delete version");
    let visible = Scan::new().versions(10);
    let raw = Scan::new().versions(10).raw();
    let expected_raw = vec![
        ("a".to_string(), 30, CellType::Put),
        ("a".to_string(), 25, CellType::DeleteColumn),
        ("a".to_string(), 20, CellType::Put),
        ("a".to_string(), 10, CellType::Put),
        ("b".to_string(), 10, CellType::Delete),
        ("b".to_string(), 10, CellType::Put),
    ];
    assert_eq!(
        cells(&region, &visible),
        vec![("a".to_string(), 30, CellType::Put)]
    );
    assert_eq!(cells(&region, &raw), expected_raw, "from the memstore");
    // The scan's versions bound the puts per column, not the markers.
    let two = cells(&region, &Scan::new().versions(2).raw());
    assert_eq!(
        two.iter()
            .filter(|c| c.2 == CellType::Put && c.0 == "a")
            .count(),
        2,
        "{two:?}"
    );
    assert!(two.iter().any(|c| c.2 == CellType::DeleteColumn), "{two:?}");
    region.flush().expect("flush");
    assert_eq!(cells(&region, &raw), expected_raw, "from a store file");
    region.compact(true).expect("major compaction");
    assert_eq!(
        cells(&region, &raw),
        vec![("a".to_string(), 30, CellType::Put)],
        "after a major compaction"
    );
}

#[test]
fn a_read_only_table_refuses_writes_and_serves_reads() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let region = open(dir.path(), false);
        region
            .mutate(&RowMutation::new("r").put(b"cf", b"q", 1, "v"))
            .expect("put");
        region.close().expect("close");
    }
    let region = open(dir.path(), true);
    let e = region
        .mutate(&RowMutation::new("r").put(b"cf", b"q", 2, "w"))
        .expect_err("read-only");
    assert!(e.to_string().contains("read only"), "{e}");
    assert_eq!(
        cells(&region, &Scan::new()),
        vec![("q".to_string(), 1, CellType::Put)]
    );
}

#[test]
fn kept_deleted_cells_are_seen_before_the_delete_and_survive_compaction() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut f = FamilySchema::new("cf");
    f.keep_deleted_cells = true;
    f.max_versions = 3;
    let config = StorageConfig {
        background: false,
        ..StorageConfig::default()
    };
    let region =
        Region::open_with_config(dir.path(), TableSchema::new("t", vec![f]), config).expect("open");
    region
        .mutate(&RowMutation::new("r").put(b"cf", b"q", 10, "v10"))
        .expect("put");
    region
        .mutate(&RowMutation::new("r").put(b"cf", b"q", 20, "v20"))
        .expect("put");
    region
        .mutate(&RowMutation::new("r").delete_column(b"cf", b"q", 30))
        .expect("delete");
    let values = |scan: Scan| -> Vec<String> {
        let mut out = Vec::new();
        for row in region.scan(&scan).expect("scan") {
            for c in row.expect("row") {
                out.push(String::from_utf8_lossy(&c.value).into_owned());
            }
        }
        out
    };
    let check = |when: &str| {
        // Now: deleted.
        assert!(
            values(Scan::new().versions(3)).is_empty(),
            "{when}: deleted now"
        );
        // A read that ends at or before the delete sees the cells as they were.
        assert_eq!(
            values(Scan::new().versions(3).time_range(0, 30)),
            ["v20", "v10"],
            "{when}"
        );
        assert_eq!(values(Scan::new().time_range(0, 15)), ["v10"], "{when}");
        // A read past the delete does not.
        assert!(values(Scan::new().time_range(0, 31)).is_empty(), "{when}");
    };
    check("in the memstore");
    region.flush().expect("flush");
    check("in a store file");
    region.compact(true).expect("major compaction");
    check("after a major compaction");
    // The marker is kept too.
    let raw = cells(&region, &Scan::new().versions(3).raw());
    assert!(raw.iter().any(|c| c.2 == CellType::DeleteColumn), "{raw:?}");
}
