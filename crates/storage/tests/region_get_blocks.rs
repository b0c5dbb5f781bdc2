//! A Get that names its columns reads no block it does not need: it stops once the last column
//! asked for is done rather than reading on to the row's end, which for a row whose cells end
//! a block meant reading the next block too (a disk read when that block is cold). The same
//! holds while it decides whether an older file can still matter (the lazy seek).

use cellar_model::{Cell, FamilySchema, Get, RowMutation, TableSchema};
use cellar_storage::region::Region;

/// Rows of one 300-byte cell in 1 KiB blocks: three rows a block, so every third row's cell
/// is its block's last.
fn schema() -> TableSchema {
    let mut cf = FamilySchema::new("cf");
    cf.block_size = 1024;
    cf.max_versions = 3;
    TableSchema::new("blocks", vec![cf])
}

fn row(i: u32) -> Vec<u8> {
    format!("row{i:05}").into_bytes()
}

fn value(i: u32, round: u8) -> Vec<u8> {
    let mut v = vec![round; 300];
    v[..4].copy_from_slice(&i.to_be_bytes());
    v
}

/// Block cache lookups (hits and misses) made by `f`: the blocks a read asks for.
fn blocks_asked(region: &Region, f: impl FnOnce() -> Vec<Cell>) -> (u64, Vec<Cell>) {
    let before = region.stats().block_cache;
    let cells = f();
    let after = region.stats().block_cache;
    (
        (after.hits + after.misses) - (before.hits + before.misses),
        cells,
    )
}

/// Gets `cf:q` of every row below `n`, checking each returns the value of `round` at `ts`
/// after asking for exactly one block.
fn assert_one_block_per_get(region: &Region, n: u32, ts: u64, round: u8) {
    for i in 0..n {
        let (asked, cells) = blocks_asked(region, || {
            region
                .get(&Get::new(row(i)).column(b"cf", b"q"))
                .expect("get")
        });
        assert_eq!(cells.len(), 1, "row {i}");
        assert_eq!(cells[0].timestamp, ts, "row {i}");
        assert_eq!(
            cells[0].value.as_ref(),
            value(i, round).as_slice(),
            "row {i}"
        );
        assert_eq!(asked, 1, "row {i}: blocks asked for");
    }
}

fn put_rows(region: &Region, n: u32, ts: u64, round: u8) {
    for i in 0..n {
        region
            .mutate(&RowMutation::new(row(i)).put(b"cf", b"q", ts, value(i, round)))
            .expect("put");
    }
    region.flush().expect("flush");
}

#[test]
fn a_get_of_named_columns_asks_for_one_block_wherever_its_row_sits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = Region::open(dir.path(), schema()).expect("open");
    let n = 90;
    put_rows(&region, n, 10, 1);
    assert_eq!(region.store_files("cf").len(), 1);
    assert_one_block_per_get(&region, n, 10, 1);
    // A column past the row's last is absent, and asks for no more than the row's block(s):
    // the next row's block tells the row ended only when the row's cells end its block.
    for i in 0..n {
        let (asked, cells) = blocks_asked(&region, || {
            region
                .get(&Get::new(row(i)).column(b"cf", b"z"))
                .expect("get")
        });
        assert!(cells.is_empty(), "row {i}: {cells:?}");
        assert!(asked <= 2, "row {i}: {asked} blocks asked for");
    }
}

#[test]
fn an_overwritten_row_reads_only_the_newer_files_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = Region::open(dir.path(), schema()).expect("open");
    let n = 90;
    put_rows(&region, n, 10, 1);
    put_rows(&region, n, 20, 2);
    assert_eq!(region.store_files("cf").len(), 2);
    assert_one_block_per_get(&region, n, 20, 2);
    // Two versions asked for: both files are read, and both versions come back, newest first.
    for i in 0..n {
        let cells = region
            .get(&Get::new(row(i)).column(b"cf", b"q").versions(2))
            .expect("get");
        let ts: Vec<u64> = cells.iter().map(|c| c.timestamp).collect();
        assert_eq!(ts, vec![20, 10], "row {i}");
    }
}

#[test]
fn a_whole_family_get_still_reads_every_column_of_its_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = Region::open(dir.path(), schema()).expect("open");
    for i in 0..30u32 {
        let mut m = RowMutation::new(row(i));
        for q in [b"a", b"m", b"q"] {
            m = m.put(b"cf", q, 10, value(i, q[0]));
        }
        region.mutate(&m).expect("put");
    }
    region.flush().expect("flush");
    for i in 0..30u32 {
        let all = region.get(&Get::new(row(i)).family(b"cf")).expect("get");
        let quals: Vec<&[u8]> = all.iter().map(|c| c.qualifier.as_ref()).collect();
        assert_eq!(quals, vec![&b"a"[..], b"m", b"q"], "row {i}");
        // Named columns come back whatever blocks they span, and only those named.
        let two = region
            .get(&Get::new(row(i)).column(b"cf", b"a").column(b"cf", b"q"))
            .expect("get");
        let quals: Vec<&[u8]> = two.iter().map(|c| c.qualifier.as_ref()).collect();
        assert_eq!(quals, vec![&b"a"[..], b"q"], "row {i}");
    }
}
