//! Behaviour: damage is always reported, naming the file, and never turns into wrong data.
//! A flipped byte anywhere (data blocks, bloom, index, metadata, footer) fails `open`, an
//! iteration or `verify`; a truncated file, a wrong magic and a newer format version fail
//! `open` with the matching error.

mod common;

use cellar_model::{BloomType, Compression, Error, Result};
use cellar_storage::block_cache::{BlockCache, Priority};
use cellar_storage::iter::CellIter;
use cellar_storage::storefile::{StoreFile, FORMAT_VERSION};
use common::*;
use std::path::Path;
use std::sync::Arc;

const FOOTER_LEN: usize = 68;

/// Reads everything the iterator yields; stops at the first error.
fn scan(f: &Arc<StoreFile>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut it = f.iter(true);
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

fn assert_names_file(e: &Error, path: &Path) {
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string()),
        "error does not name the file: {msg}"
    );
}

fn is_damage(e: &Error) -> bool {
    matches!(
        e,
        Error::Checksum { .. } | Error::Corruption { .. } | Error::BadMagic { .. }
    )
}

/// Opens `path` and reads it every way; returns the first error. Panics if wrong data is
/// returned.
fn open_and_read(path: &Path, expected: &[(Vec<u8>, Vec<u8>)]) -> Option<Error> {
    let fs = fs();
    let cache = Arc::new(BlockCache::new(1 << 20));
    let f = match StoreFile::open(&fs, path, 1, Some(cache), Priority::Normal) {
        Ok(f) => f,
        Err(e) => return Some(e),
    };
    match scan(&f) {
        // A successful scan must be the exact data.
        Ok(got) => assert_eq!(got, expected, "corrupt file returned different data"),
        Err(e) => return Some(e),
    }
    f.verify().err()
}

#[test]
fn every_flipped_byte_is_detected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    let data = entries(60);
    for (i, compression) in COMPRESSIONS.into_iter().enumerate() {
        let bloom = BLOOMS[i % 3];
        let (path, _) = write(
            &fs,
            dir.path(),
            &format!("good-{compression}"),
            opts(compression, bloom, 512),
            &data,
        );
        let original = std::fs::read(&path).expect("read");
        // Every byte for the uncompressed file, a stride for the others (debug builds are slow).
        let stride = if compression == Compression::None {
            1
        } else {
            7
        };
        let bad_path = dir.path().join(format!("bad-{compression}"));
        for pos in (0..original.len()).step_by(stride) {
            let mut bytes = original.clone();
            bytes[pos] ^= 1 << (pos % 8);
            std::fs::write(&bad_path, &bytes).expect("write");
            let err = open_and_read(&bad_path, &data)
                .unwrap_or_else(|| panic!("flip at {pos} of {} went unnoticed", original.len()));
            assert!(is_damage(&err), "flip at {pos}: unexpected error {err}");
            if pos < original.len() - 8 {
                assert!(
                    !matches!(err, Error::BadMagic { .. }),
                    "flip at {pos}: {err}"
                );
            }
            assert_names_file(&err, &bad_path);
        }
    }
}

#[test]
fn a_corrupt_data_block_fails_when_read_not_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    let data = entries(300);
    let (path, _) = write(
        &fs,
        dir.path(),
        "f",
        opts(Compression::None, BloomType::Row, 512),
        &data,
    );
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[10] ^= 0xff; // inside the first data block
    std::fs::write(&path, &bytes).expect("write");
    let f = StoreFile::open(&fs, &path, 1, None, Priority::Normal)
        .expect("open checks only index/bloom/meta");
    let err = scan(&f).expect_err("scan");
    assert!(matches!(err, Error::Checksum { offset: 0, .. }), "{err}");
    assert_names_file(&err, &path);
    let err = f.verify().expect_err("verify");
    assert!(matches!(err, Error::Checksum { .. }), "{err}");
    // The iterator is invalid after the error, and a seek past the bad block still works.
    let mut it = f.iter(false);
    assert!(it.seek_to_first().is_err());
    assert!(!it.valid());
    it.seek(&data[299].0).expect("seek into an intact block");
    assert_eq!(it.key(), data[299].0.as_slice());
}

#[test]
fn truncated_files_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    let data = entries(200);
    let (path, _) = write(
        &fs,
        dir.path(),
        "f",
        opts(Compression::Snappy, BloomType::RowCol, 1024),
        &data,
    );
    let original = std::fs::read(&path).expect("read");
    let cut_path = dir.path().join("cut");
    let mut cuts: Vec<usize> = (0..original.len()).step_by(97).collect();
    cuts.extend([1, 19, 20, 21, 67, 68, 69]);
    cuts.extend((1..=FOOTER_LEN + 8).map(|d| original.len() - d));
    for cut in cuts {
        std::fs::write(&cut_path, &original[..cut]).expect("write");
        let err = StoreFile::open(&fs, &cut_path, 1, None, Priority::Normal)
            .err()
            .unwrap_or_else(|| panic!("file cut to {cut} bytes opened"));
        assert!(is_damage(&err), "cut at {cut}: {err}");
        assert_names_file(&err, &cut_path);
    }
}

#[test]
fn wrong_magic_is_bad_magic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    let (path, _) = write(
        &fs,
        dir.path(),
        "f",
        opts(Compression::None, BloomType::Row, 4096),
        &entries(10),
    );
    let mut bytes = std::fs::read(&path).expect("read");
    let n = bytes.len();
    bytes[n - 8..].copy_from_slice(b"HFILEv3!");
    std::fs::write(&path, &bytes).expect("write");
    let err = StoreFile::open(&fs, &path, 1, None, Priority::Normal)
        .err()
        .expect("must fail");
    match &err {
        Error::BadMagic { kind, found, .. } => {
            assert_eq!(*kind, "store file");
            assert_eq!(*found, u64::from_be_bytes(*b"HFILEv3!"));
        }
        other => panic!("expected BadMagic, got {other}"),
    }
    assert_names_file(&err, &path);
    // A file of a different kind altogether.
    std::fs::write(&path, vec![7u8; 500]).expect("write");
    let err = StoreFile::open(&fs, &path, 1, None, Priority::Normal)
        .err()
        .expect("must fail");
    assert!(matches!(err, Error::BadMagic { .. }), "{err}");
}

#[test]
fn newer_format_version_is_unsupported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = fs();
    let (path, _) = write(
        &fs,
        dir.path(),
        "f",
        opts(Compression::None, BloomType::Row, 4096),
        &entries(10),
    );
    let mut bytes = std::fs::read(&path).expect("read");
    let start = bytes.len() - FOOTER_LEN;
    // A well-formed footer of a future version: version at 52, crc over [0, 56) at 56.
    bytes[start + 52..start + 56].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let crc = crc32c::crc32c(&bytes[start..start + 56]);
    bytes[start + 56..start + 60].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).expect("write");
    let err = StoreFile::open(&fs, &path, 1, None, Priority::Normal)
        .err()
        .expect("must fail");
    match &err {
        Error::UnsupportedVersion {
            found, supported, ..
        } => {
            assert_eq!(*found, FORMAT_VERSION + 1);
            assert_eq!(*supported, FORMAT_VERSION);
        }
        other => panic!("expected UnsupportedVersion, got {other}"),
    }
    assert_names_file(&err, &path);
}
