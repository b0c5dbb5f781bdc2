//! A column written many times holds many versions in the memstore until a flush. Reads skip
//! past the versions they cannot return (seeking to the next column) without changing what
//! they return: version limits, column deletes, the empty qualifier and family delete markers.

use cellar_model::{CellType, FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::region::Region;

const VERSIONS: u64 = 2000;

fn open(dir: &std::path::Path, max_versions: u32) -> Region {
    let mut f = FamilySchema::new("cf");
    f.max_versions = max_versions;
    Region::open(dir, TableSchema::new("t", vec![f])).expect("open")
}

fn put(region: &Region, row: &str, q: &str, ts: u64) {
    region
        .mutate(&RowMutation::new(row.as_bytes().to_vec()).put(
            b"cf",
            q.as_bytes(),
            ts,
            format!("{q}@{ts}").into_bytes(),
        ))
        .expect("put");
}

/// (qualifier, timestamp) of each cell, in order.
fn coords(cells: &[cellar_model::Cell]) -> Vec<(String, u64)> {
    cells
        .iter()
        .map(|c| {
            (
                String::from_utf8_lossy(&c.qualifier).into_owned(),
                c.timestamp,
            )
        })
        .collect()
}

#[test]
fn hot_columns_return_only_their_newest_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = open(dir.path(), 3);
    for ts in 1..=VERSIONS {
        put(&region, "hot", "a", ts);
        put(&region, "hot", "b", ts);
    }
    put(&region, "hot", "c", 1);
    let n = VERSIONS;
    let get = |g: Get| coords(&region.get(&g).expect("get"));
    assert_eq!(
        get(Get::new(b"hot".to_vec())),
        vec![("a".into(), n), ("b".into(), n), ("c".into(), 1)]
    );
    assert_eq!(
        get(Get::new(b"hot".to_vec()).versions(10)),
        vec![
            ("a".into(), n),
            ("a".into(), n - 1),
            ("a".into(), n - 2),
            ("b".into(), n),
            ("b".into(), n - 1),
            ("b".into(), n - 2),
            ("c".into(), 1)
        ],
        "the family keeps 3 versions"
    );
    assert_eq!(
        get(Get::new(b"hot".to_vec()).column(b"cf", b"b")),
        vec![("b".into(), n)]
    );
    // A column delete in the middle of the versions masks everything at or before it.
    region
        .mutate(&RowMutation::new(b"hot".to_vec()).delete_column(b"cf", b"a", n - 1))
        .expect("delete column");
    assert_eq!(
        get(Get::new(b"hot".to_vec()).versions(10)),
        vec![
            ("a".into(), n),
            ("b".into(), n),
            ("b".into(), n - 1),
            ("b".into(), n - 2),
            ("c".into(), 1)
        ]
    );
    // Scans read the same rows the same way.
    put(&region, "next", "a", 1);
    let rows: Vec<_> = region
        .scan(&Scan::new())
        .expect("scan")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        coords(&rows[0]),
        vec![("a".into(), n), ("b".into(), n), ("c".into(), 1)]
    );
    assert_eq!(coords(&rows[1]), vec![("a".into(), 1)]);
    region.close().expect("close");
}

#[test]
fn family_delete_markers_behind_a_hot_empty_qualifier_still_mask() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = open(dir.path(), 1);
    // The empty qualifier's versions sort among the family markers, by timestamp.
    for ts in 10..10 + VERSIONS {
        put(&region, "r", "", ts);
    }
    region
        .mutate(&RowMutation::new(b"r".to_vec()).delete_family(b"cf", 5))
        .expect("delete family at 5");
    put(&region, "r", "x", 3);
    put(&region, "r", "y", 7);
    let cells = region.get(&Get::new(b"r".to_vec())).expect("get");
    assert_eq!(
        coords(&cells),
        vec![("".into(), 9 + VERSIONS), ("y".into(), 7)],
        "x@3 is masked by the family delete at 5"
    );
    assert!(cells.iter().all(|c| c.cell_type == CellType::Put));
    region.close().expect("close");
}
