//! Damage that is not a torn tail is an error naming the segment and the offset; nothing is
//! skipped silently.

use cellar_model::Error;
use cellar_storage::fs::LocalFs;
use cellar_storage::wal::format::{HEADER_LEN, RECORD_HEADER_LEN};
use cellar_storage::wal::{Wal, WalOptions};
use std::path::{Path, PathBuf};

fn write_segment(dir: &Path, n: u64) -> PathBuf {
    let (wal, _) = Wal::open(LocalFs::shared(), dir, WalOptions::default()).expect("open");
    for i in 0..n {
        wal.append(1, i, b"sixteen byte val").expect("append");
    }
    wal.close().expect("close");
    wal.segments().pop().expect("segment")
}

fn reopen(dir: &Path) -> Error {
    match Wal::open(LocalFs::shared(), dir, WalOptions::default()) {
        Ok(_) => panic!("open must fail"),
        Err(e) => e,
    }
}

fn patch(path: &Path, offset: usize, bytes: &[u8]) {
    let mut data = std::fs::read(path).expect("read");
    data[offset..offset + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, data).expect("write");
}

#[test]
fn flipped_byte_in_an_early_record_is_an_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let seg = write_segment(tmp.path(), 10);
    let record = RECORD_HEADER_LEN + 16;
    let third = HEADER_LEN + 2 * record;
    let mut data = std::fs::read(&seg).expect("read");
    data[third + RECORD_HEADER_LEN + 3] ^= 0x01;
    std::fs::write(&seg, &data).expect("write");
    let before = data.len();

    let err = reopen(tmp.path());
    let msg = err.to_string();
    assert!(matches!(err, Error::Checksum { .. }), "{err:?}");
    assert!(msg.contains(&seg.display().to_string()), "{msg}");
    assert!(msg.contains(&format!("offset {third}")), "{msg}");
    assert_eq!(
        std::fs::metadata(&seg).expect("stat").len() as usize,
        before,
        "a corrupt segment is not truncated"
    );
}

#[test]
fn corrupt_length_in_an_early_record_is_an_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let seg = write_segment(tmp.path(), 4);
    patch(&seg, HEADER_LEN + 4, &u32::MAX.to_le_bytes());
    let msg = reopen(tmp.path()).to_string();
    assert!(msg.contains(&seg.display().to_string()), "{msg}");
    assert!(msg.contains(&format!("offset {HEADER_LEN}")), "{msg}");
}

#[test]
fn corrupt_older_segment_is_an_error_even_when_newer_ones_are_fine() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let first = write_segment(tmp.path(), 3);
    let _second = write_segment(tmp.path(), 3);
    patch(&first, HEADER_LEN + 20, b"\xff");
    let msg = reopen(tmp.path()).to_string();
    assert!(msg.contains(&first.display().to_string()), "{msg}");
}

#[test]
fn wrong_magic_is_bad_magic() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let seg = write_segment(tmp.path(), 2);
    patch(&seg, 0, b"NOTAWAL!");
    match reopen(tmp.path()) {
        Error::BadMagic { file, kind, .. } => {
            assert_eq!(kind, "WAL segment");
            assert_eq!(file, seg.display().to_string());
        }
        e => panic!("expected BadMagic, got {e:?}"),
    }
}

#[test]
fn newer_version_is_unsupported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let seg = write_segment(tmp.path(), 2);
    patch(&seg, 8, &2u32.to_le_bytes());
    match reopen(tmp.path()) {
        Error::UnsupportedVersion {
            file,
            found,
            supported,
        } => {
            assert_eq!((found, supported), (2, 1));
            assert_eq!(file, seg.display().to_string());
        }
        e => panic!("expected UnsupportedVersion, got {e:?}"),
    }
}
