//! Helpers shared by the store-file behaviour tests.
#![allow(dead_code)]

use cellar_model::key::make_key;
use cellar_model::{BloomType, CellType, Compression};
use cellar_storage::fs::{FsRef, LocalFs};
use cellar_storage::memstore::Memstore;
use cellar_storage::storefile::{FileMeta, StoreFileOptions, StoreFileWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const COMPRESSIONS: [Compression; 4] = [
    Compression::None,
    Compression::Lz4,
    Compression::Zstd,
    Compression::Snappy,
];
pub const BLOOMS: [BloomType; 3] = [BloomType::None, BloomType::Row, BloomType::RowCol];

pub fn fs() -> FsRef {
    LocalFs::shared()
}

pub fn opts(compression: Compression, bloom: BloomType, block_size: usize) -> StoreFileOptions {
    StoreFileOptions {
        block_size,
        compression,
        bloom,
        bloom_bits_per_key: 10,
        restart_interval: 16,
    }
}

/// The i-th key of a deterministic sorted data set: 4 cells per row (two qualifiers, two
/// versions each), every 7th cell a delete.
pub fn key(i: u64) -> Vec<u8> {
    let row = format!("row-{:08}", i / 4);
    let qual = if (i / 2).is_multiple_of(2) { "a" } else { "bb" };
    let ts = 1_000 - (i % 2);
    let t = if i % 7 == 3 {
        CellType::Delete
    } else {
        CellType::Put
    };
    make_key(row.as_bytes(), qual.as_bytes(), ts, t, i + 1)
}

pub fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

pub fn entries(n: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n).map(|i| (key(i), value(i))).collect()
}

/// Writes `entries` to `dir/name` and returns the path and metadata.
pub fn write(
    fs: &FsRef,
    dir: &Path,
    name: &str,
    o: StoreFileOptions,
    entries: &[(Vec<u8>, Vec<u8>)],
) -> (PathBuf, FileMeta) {
    let path = dir.join(name);
    let mut w = StoreFileWriter::create(fs, &path, o).expect("create");
    for (k, v) in entries {
        w.add(k, v).expect("add");
    }
    let meta = w.finish().expect("finish");
    (path, meta)
}

/// Every (key, value) of `it` from its first cell on.
pub fn read_all(it: &mut impl cellar_storage::iter::CellIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.seek_to_first().expect("seek_to_first");
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().expect("next");
    }
    out
}

/// (key, value) pairs in order.
pub type Cells = Vec<(Vec<u8>, Vec<u8>)>;

/// A memstore holding `rows` rows of one 1 KiB cell each, every byte `tag`, and its cells
/// in order.
pub fn filled_memstore(rows: u32, tag: u8) -> (Arc<Memstore>, Cells) {
    let m = Arc::new(Memstore::new());
    let mut cells = Vec::new();
    for r in 0..rows {
        let key = make_key(format!("row{r:06}").as_bytes(), b"q", 1, CellType::Put, 1);
        let value = vec![tag; 1024];
        m.insert(&key, &value);
        cells.push((key, value));
    }
    (m, cells)
}
