//! Damage that is not a torn tail is an error naming the segment and the offset; nothing is
//! skipped silently.

use cellar_model::Error;
use cellar_storage::fs::LocalFs;
use cellar_storage::wal::{Wal, WalOptions};
use cellar_storage::wal::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use std::path::{Path, PathBuf};

fn write_segment(dir: &Path, n: u64) -> PathBuf {
    let (wal, _) = Wal::open(LocalFs::shared(), dir, WalOptions::default()).expect("open");
    write_records(&wal, n);
    wal.segments().pop().expect("segment")
}

fn write_records(wal: &Wal, n: u64) {
    for i in 0..n {
        wal.append(1, i, b"sixteen byte val").expect("append");
    }
    wal.close().expect("close");
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
    let third = SEGMENT_HEADER_LEN + 2 * record;
    let mut data = std::fs::read(&seg).expect("read");
    data[third + RECORD_HEADER_LEN + 3] ^= 0x01;
    std::fs::write(&seg, &data).expect("write");
    let before = data.len();

    let err = reopen(tmp.path());
    let msg = err.to_string();
    assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
    assert!(msg.contains(&seg.display().to_string()), "{msg}");
    assert!(msg.contains(&format!("offset {third}")), "{msg}");
    assert!(msg.contains("payload checksum"), "{msg}");
    assert!(
        msg.contains("wal_skip_errors"),
        "the error says how to go on: {msg}"
    );
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
    patch(&seg, SEGMENT_HEADER_LEN + 4, &u32::MAX.to_le_bytes());
    let msg = reopen(tmp.path()).to_string();
    assert!(msg.contains(&seg.display().to_string()), "{msg}");
    assert!(
        msg.contains(&format!("offset {SEGMENT_HEADER_LEN}")),
        "{msg}"
    );
}

#[test]
fn corrupt_older_segment_is_an_error_even_when_newer_ones_are_fine() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let first = write_segment(tmp.path(), 3);
    let _second = write_segment(tmp.path(), 3);
    patch(&first, SEGMENT_HEADER_LEN + 20, b"\xff");
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
    patch(&seg, 8, &3u32.to_le_bytes());
    match reopen(tmp.path()) {
        Error::UnsupportedVersion {
            file,
            found,
            supported,
        } => {
            assert_eq!((found, supported), (3, 2));
            assert_eq!(file, seg.display().to_string());
        }
        e => panic!("expected UnsupportedVersion, got {e:?}"),
    }
}

fn skipping() -> WalOptions {
    WalOptions {
        skip_errors: true,
        ..WalOptions::default()
    }
}

#[test]
fn a_torn_tail_in_an_older_segment_is_an_error() {
    // A segment cut short with later segments holding records: not what a crash leaves,
    // since a roll syncs a segment before the next one takes records.
    let tmp = tempfile::tempdir().expect("tempdir");
    let first = write_segment(tmp.path(), 4);
    let _second = write_segment(tmp.path(), 3);
    let len = std::fs::metadata(&first).expect("stat").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&first)
        .and_then(|f| f.set_len(len - 5))
        .expect("cut");
    let msg = reopen(tmp.path()).to_string();
    assert!(msg.contains(&first.display().to_string()), "{msg}");
    assert!(msg.contains("later segments hold records"), "{msg}");
}

#[test]
fn skip_errors_keeps_the_prefix_moves_the_segment_aside_and_goes_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (wal, _) = Wal::open(LocalFs::shared(), tmp.path(), WalOptions::default()).expect("open");
    for i in 0..10u64 {
        wal.append(1, i, b"sixteen byte val").expect("append");
    }
    wal.roll().expect("roll");
    for i in 10..13u64 {
        wal.append(1, i, b"sixteen byte val").expect("append");
    }
    wal.close().expect("close");
    let first = wal.segments()[0].clone();
    drop(wal);
    // Damage the fifth record of the first segment: records 0..4 read, 4..10 are lost.
    let record = RECORD_HEADER_LEN + 16;
    let mut data = std::fs::read(&first).expect("read");
    data[SEGMENT_HEADER_LEN + 4 * record + RECORD_HEADER_LEN] ^= 0x10;
    std::fs::write(&first, &data).expect("write");
    reopen(tmp.path());

    let (wal, records) = Wal::open(LocalFs::shared(), tmp.path(), skipping()).expect("skip");
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(
        seqs,
        vec![0, 1, 2, 3, 10, 11, 12],
        "the prefix and later segments"
    );
    let mut aside = first.as_os_str().to_owned();
    aside.push(".corrupt");
    assert_eq!(
        std::fs::read(std::path::PathBuf::from(aside)).expect("moved aside"),
        data,
        "the damaged segment is kept as it was"
    );
    wal.close().expect("close");
    drop(wal);
    // The next open, without skipping, finds a clean log holding the same records.
    let (_wal, records) =
        Wal::open(LocalFs::shared(), tmp.path(), WalOptions::default()).expect("clean");
    let again: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(again, seqs);
}

#[test]
fn a_second_log_on_the_same_directory_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (wal, _) = Wal::open(LocalFs::shared(), tmp.path(), WalOptions::default()).expect("open");
    let err = match Wal::open(LocalFs::shared(), tmp.path(), WalOptions::default()) {
        Ok(_) => panic!("two logs on one directory"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("LOCK") && err.contains("in use"), "{err}");
    drop(wal);
    Wal::open(LocalFs::shared(), tmp.path(), WalOptions::default()).expect("free again");
}
