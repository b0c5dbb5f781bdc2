//! Behaviour: every entry written comes back, in order, for every compression and bloom type
//! and for files of 0, 1, one block and many blocks; metadata describes what was written.

mod common;

use cellar_model::key::{first_on_row, make_key, KeyRef};
use cellar_model::{BloomType, CellType, Compression, Error};
use cellar_storage::block_cache::Priority;
use cellar_storage::iter::CellIter;
use cellar_storage::storefile::{StoreFile, StoreFileOptions, StoreFileWriter, FORMAT_VERSION};
use common::*;

fn read_file(f: &std::sync::Arc<StoreFile>) -> Vec<(Vec<u8>, Vec<u8>)> {
    read_all(&mut f.iter(true))
}

#[test]
fn every_compression_and_bloom_round_trips() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    for &n in &[0u64, 1, 5, 200, 3_000] {
        let data = entries(n);
        for compression in COMPRESSIONS {
            for bloom in BLOOMS {
                let name = format!("{n}-{compression}-{bloom}");
                let (path, meta) = write(
                    &fs,
                    dir.path(),
                    &name,
                    opts(compression, bloom, 4096),
                    &data,
                );
                let f = StoreFile::open(&fs, &path, 1, None, Priority::Normal).expect("open");
                assert_eq!(f.meta(), &meta, "{name}");
                assert_eq!(read_file(&f), data, "{name}");
                f.verify().expect("verify");
                for (k, _) in &data {
                    let key = KeyRef::parse(k).expect("key");
                    assert!(f.may_contain_row(key.row()), "{name}");
                    assert!(f.may_contain_column(key.row(), key.qualifier()), "{name}");
                }
                if n == 0 {
                    assert!(!f.may_contain_row(b"row-00000000"));
                }
            }
        }
    }
}

#[test]
fn metadata_describes_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    let data = entries(1_000);
    let (path, meta) = write(
        &fs,
        dir.path(),
        "f",
        opts(Compression::Lz4, BloomType::Row, 4096),
        &data,
    );
    assert_eq!(meta.format_version, FORMAT_VERSION);
    assert_eq!(meta.first_key, data[0].0);
    assert_eq!(meta.last_key, data[999].0);
    assert_eq!(meta.min_timestamp, 999);
    assert_eq!(meta.max_timestamp, 1_000);
    assert_eq!(meta.max_seq, 1_000);
    assert_eq!(meta.cell_count, 1_000);
    assert_eq!(
        meta.delete_count,
        (0..1_000u64).filter(|i| i % 7 == 3).count() as u64
    );
    assert!(meta.data_block_count > 5, "{}", meta.data_block_count);
    let raw: u64 = data.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    assert_eq!(meta.raw_data_bytes, raw);
    assert_eq!(meta.compression, Compression::Lz4);
    assert_eq!(meta.bloom, BloomType::Row);
    let on_disk = std::fs::metadata(&path).expect("stat").len();
    assert_eq!(meta.file_size, on_disk);
    // lz4 compresses these repetitive values.
    assert!(on_disk < raw, "{on_disk} >= {raw}");
}

#[test]
fn empty_file_has_empty_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    let (path, meta) = write(
        &fs,
        dir.path(),
        "e",
        opts(Compression::Zstd, BloomType::RowCol, 4096),
        &[],
    );
    assert_eq!(meta.cell_count, 0);
    assert!(meta.first_key.is_empty() && meta.last_key.is_empty());
    assert_eq!((meta.min_timestamp, meta.max_timestamp), (0, 0));
    assert_eq!(meta.bloom, BloomType::None);
    let f = StoreFile::open(&fs, &path, 1, None, Priority::Normal).expect("open");
    let mut it = f.iter(true);
    it.seek(&first_on_row(b"a")).expect("seek");
    assert!(!it.valid());
    it.seek_for_prev(&first_on_row(b"z"))
        .expect("seek_for_prev");
    assert!(!it.valid());
    f.verify().expect("verify");
}

#[test]
fn large_values_and_blocks_larger_than_the_target() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    let data: Vec<_> = (0..20u64)
        .map(|i| (key(i), vec![i as u8; 100_000 + i as usize]))
        .collect();
    for compression in COMPRESSIONS {
        let (path, _) = write(
            &fs,
            dir.path(),
            &format!("big-{compression}"),
            opts(compression, BloomType::Row, 1024),
            &data,
        );
        let f = StoreFile::open(&fs, &path, 1, None, Priority::Normal).expect("open");
        assert_eq!(f.meta().data_block_count, 20);
        assert_eq!(read_file(&f), data);
    }
}

#[test]
fn writer_rejects_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    let path = dir.path().join("w");
    let mut w = StoreFileWriter::create(&fs, &path, StoreFileOptions::default()).expect("create");
    w.add(&key(5), b"v").expect("add");
    for bad in [key(5), key(4)] {
        assert!(matches!(w.add(&bad, b"v"), Err(Error::InvalidArgument(_))));
    }
    assert!(matches!(w.add(b"xx", b"v"), Err(Error::InvalidArgument(_))));
    let before = w.estimated_size();
    w.add(&key(6), &[0u8; 1000]).expect("add");
    assert!(w.estimated_size() > before + 1000);
    w.finish().expect("finish");

    let zero = StoreFileOptions {
        restart_interval: 0,
        ..StoreFileOptions::default()
    };
    assert!(matches!(
        StoreFileWriter::create(&fs, &dir.path().join("z"), zero),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn restart_interval_one_and_equal_rows() {
    // Many cells of one row differing only in timestamp and sequence id.
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    let data: Vec<_> = (0..500u64)
        .map(|i| {
            (
                make_key(b"r", b"q", 1_000 - i / 2, CellType::Put, 10_000 - i),
                i.to_le_bytes().to_vec(),
            )
        })
        .collect();
    for interval in [1, 2, 16, 1000] {
        let o = StoreFileOptions {
            restart_interval: interval,
            block_size: 512,
            ..StoreFileOptions::default()
        };
        let (path, _) = write(&fs, dir.path(), &format!("r{interval}"), o, &data);
        let f = StoreFile::open(&fs, &path, 1, None, Priority::Normal).expect("open");
        assert_eq!(read_file(&f), data);
    }
}
