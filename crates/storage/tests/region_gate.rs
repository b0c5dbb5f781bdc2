//! The region-level gate: Gets (and one-row scans) skip families whose memstores and files
//! rule their row out. Whatever it skips, reads return exactly what they returned without it:
//! present rows wherever their cells are (active memstore, memstore being flushed, files,
//! several files, deleted in one place and present in another), absent rows empty.

use cellar_model::{Cell, FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::region::{Region, StorageConfig};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn schema() -> TableSchema {
    let mut cf = FamilySchema::new("cf");
    cf.block_size = 1024;
    TableSchema::new("gate", vec![cf, FamilySchema::new("other")])
}

fn row(i: u32) -> Vec<u8> {
    format!("r{i:05}").into_bytes()
}

/// (family, qualifier, value) of a cell.
type Shape = (Vec<u8>, Vec<u8>, Vec<u8>);

/// (family, qualifier, value) of each cell.
fn shape(cells: &[Cell]) -> Vec<Shape> {
    cells
        .iter()
        .map(|c| (c.family.to_vec(), c.qualifier.to_vec(), c.value.to_vec()))
        .collect()
}

fn one_row_scan(region: &Region, r: &[u8]) -> Vec<Cell> {
    let mut stop = r.to_vec();
    stop.push(0);
    let scan = Scan::new().range(r, &stop);
    region
        .scan(&scan)
        .expect("scan")
        .flat_map(|row| row.expect("row"))
        .collect()
}

#[test]
fn reads_through_the_gate_match_a_model_wherever_cells_live() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = Region::open(dir.path(), schema()).expect("open");
    // The model: row -> its cells (family, qualifier, value), sorted as reads return them.
    let mut model: BTreeMap<Vec<u8>, Vec<Shape>> = BTreeMap::new();
    let rows = 1200u32;
    // Even rows only, so odd rows are absent between present ones; three flushes leave three
    // files, the last part stays in the memstore.
    for i in (0..rows).step_by(2) {
        let r = row(i);
        let v = format!("v{i}").into_bytes();
        let mut m = RowMutation::new(r.clone()).put(b"cf", b"q", 10, v.clone());
        let mut cells = vec![(b"cf".to_vec(), b"q".to_vec(), v.clone())];
        if i.is_multiple_of(6) {
            m = m.put(b"other", b"x", 10, b"o".to_vec());
            cells.push((b"other".to_vec(), b"x".to_vec(), b"o".to_vec()));
        }
        region.mutate(&m).expect("put");
        model.insert(r, cells);
        if i % 400 == 398 {
            region.flush().expect("flush");
        }
    }
    // Rows deleted in the memstore whose cells are in files; rows rewritten in the memstore.
    for i in (0..rows).step_by(10) {
        let r = row(i);
        region
            .mutate(
                &RowMutation::new(r.clone())
                    .delete_family(b"cf", 15)
                    .delete_family(b"other", 15),
            )
            .expect("delete");
        model.remove(&r);
    }
    for i in (4..rows).step_by(20) {
        let r = row(i);
        let v = b"new".to_vec();
        region
            .mutate(&RowMutation::new(r.clone()).put(b"cf", b"q", 20, v.clone()))
            .expect("rewrite");
        if let Some(cells) = model.get_mut(&r) {
            cells[0].2 = v;
        }
    }
    // Rows only in the memstore.
    for i in rows + 1..rows + 4 {
        let r = row(i);
        region
            .mutate(&RowMutation::new(r.clone()).put(b"other", b"y", 30, b"m".to_vec()))
            .expect("put");
        model.insert(r, vec![(b"other".to_vec(), b"y".to_vec(), b"m".to_vec())]);
    }
    let check = |region: &Region, when: &str| {
        for i in 0..rows + 5 {
            let r = row(i);
            let want = model.get(&r).cloned().unwrap_or_default();
            let got = region.get(&Get::new(r.clone())).expect("get");
            assert_eq!(shape(&got), want, "{when}: Get of row {i}");
            assert_eq!(
                shape(&one_row_scan(region, &r)),
                want,
                "{when}: one-row scan of row {i}"
            );
            let cf_only: Vec<_> = want.iter().filter(|c| c.0 == b"cf").cloned().collect();
            let got = region
                .get(&Get::new(r.clone()).column(b"cf", b"q"))
                .expect("get cf:q");
            assert_eq!(shape(&got), cf_only, "{when}: Get of cf:q of row {i}");
            let other: Vec<_> = want.iter().filter(|c| c.0 == b"other").cloned().collect();
            let got = region
                .get(&Get::new(r.clone()).family(b"other"))
                .expect("get other");
            assert_eq!(shape(&got), other, "{when}: Get of family other of row {i}");
        }
        // A row name between two present rows, sorting inside a file's key range.
        let mut between = row(2);
        between.push(b'.');
        assert!(region.get(&Get::new(between)).expect("get").is_empty());
    };
    check(&region, "files and memstore");
    region.flush().expect("flush");
    check(&region, "files only");
    region.compact(true).expect("major compaction");
    check(&region, "one file");
    drop(region);
    let region = Region::open(dir.path(), schema()).expect("reopen");
    check(&region, "reopened");
}

/// A writer puts rows and reads each back at once while memstores fill, are snapshotted and
/// flushed underneath (a small flush size): an acknowledged row is never gated away.
#[test]
fn an_acknowledged_row_is_never_gated_away_across_flushes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StorageConfig {
        memstore_flush_bytes: 64 * 1024,
        ..StorageConfig::default()
    };
    let region =
        Arc::new(Region::open_with_config(dir.path(), schema(), config).expect("open with config"));
    let stop = Arc::new(AtomicBool::new(false));
    // Readers of absent rows keep the gate busy meanwhile; they must always read nothing.
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let region = Arc::clone(&region);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) && n < 2_000_000 {
                    let mut r = row(n % 20_000);
                    r.push(b'0' + t);
                    assert!(region.get(&Get::new(r)).expect("get").is_empty());
                    n += 1;
                }
            })
        })
        .collect();
    for i in 0..20_000u32 {
        let r = row(i);
        region
            .mutate(&RowMutation::new(r.clone()).put(b"cf", b"q", 1, vec![b'x'; 100]))
            .expect("put");
        let got = region.get(&Get::new(r)).expect("get");
        assert_eq!(got.len(), 1, "row {i} read right after its put");
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader");
    }
    assert!(region.stats().flushes > 3, "the memstore flushed meanwhile");
}
