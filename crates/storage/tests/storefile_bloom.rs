//! Behaviour: a file's bloom filter never denies a row or column it holds, rejects most that
//! it does not hold at about the rate its bits per key promise, and keys outside the file's
//! row range are rejected without a bloom at all.

mod common;

use cellar_model::key::make_key;
use cellar_model::{BloomType, CellType, Compression};
use cellar_storage::block_cache::Priority;
use cellar_storage::storefile::{StoreFile, StoreFileOptions};

fn write_rows(bloom: BloomType, bits: u32) -> (tempfile::TempDir, std::sync::Arc<StoreFile>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = common::fs();
    let mut data = Vec::new();
    for r in 0..5_000u32 {
        for q in ["c1", "c2"] {
            let k = make_key(
                format!("row{r:06}").as_bytes(),
                q.as_bytes(),
                5,
                CellType::Put,
                1,
            );
            data.push((k, b"v".to_vec()));
        }
    }
    let o = StoreFileOptions {
        block_size: 4096,
        compression: Compression::None,
        bloom,
        bloom_bits_per_key: bits,
        restart_interval: 16,
    };
    let (path, _) = common::write(&fs, dir.path(), "f", o, &data);
    let f = StoreFile::open(&fs, &path, 1, None, Priority::Normal).expect("open");
    (dir, f)
}

/// Absent rows inside the file's row range (so the range check cannot answer).
fn absent_rows() -> impl Iterator<Item = Vec<u8>> {
    (0..4_999u32).map(|r| format!("row{r:06}x").into_bytes())
}

fn rate(hits: usize, trials: usize) -> f64 {
    hits as f64 / trials as f64
}

#[test]
fn row_bloom_has_no_false_negatives_and_few_false_positives() {
    for (bits, limit) in [(10, 0.02), (6, 0.10)] {
        let (_d, f) = write_rows(BloomType::Row, bits);
        for r in 0..5_000u32 {
            let row = format!("row{r:06}");
            assert!(f.may_contain_row(row.as_bytes()));
            assert!(
                f.may_contain_column(row.as_bytes(), b"any"),
                "a row bloom answers for the row"
            );
        }
        let fp = absent_rows().filter(|r| f.may_contain_row(r)).count();
        assert!(
            rate(fp, 4_999) < limit,
            "{bits} bits/key: {fp} false positives"
        );
    }
}

#[test]
fn rowcol_bloom_answers_rows_and_columns() {
    let (_d, f) = write_rows(BloomType::RowCol, 10);
    for r in 0..5_000u32 {
        let row = format!("row{r:06}");
        assert!(f.may_contain_row(row.as_bytes()));
        assert!(f.may_contain_column(row.as_bytes(), b"c1"));
        assert!(f.may_contain_column(row.as_bytes(), b"c2"));
    }
    let fp_rows = absent_rows().filter(|r| f.may_contain_row(r)).count();
    assert!(rate(fp_rows, 4_999) < 0.02, "{fp_rows}");
    let fp_cols = (0..5_000u32)
        .filter(|r| f.may_contain_column(format!("row{r:06}").as_bytes(), b"c3"))
        .count();
    assert!(rate(fp_cols, 5_000) < 0.02, "{fp_cols}");
}

#[test]
fn no_bloom_still_uses_the_key_range() {
    let (_d, f) = write_rows(BloomType::None, 10);
    assert!(f.may_contain_row(b"row000000x"));
    assert!(f.may_contain_row(b"row004999"));
    assert!(!f.may_contain_row(b"row004999x"), "after the last row");
    assert!(!f.may_contain_row(b"aaa"), "before the first row");
    assert!(!f.may_contain_column(b"zzz", b"c1"));
}
