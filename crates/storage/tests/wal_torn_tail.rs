//! A crash in the middle of a write leaves a torn last record: `open` returns what precedes it,
//! warns naming the file and offset, cuts the file there, and the log carries on.

use cellar_storage::fs::LocalFs;
use cellar_storage::wal::{Wal, WalOptions, WalRecord};
use cellar_storage::wal::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use parking_lot::Mutex;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Collects the fields of every WARN event.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl Subscriber for Warnings {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if *event.metadata().level() == Level::WARN {
            let mut f = Fields(String::new());
            event.record(&mut f);
            self.0.lock().push(f.0);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn open_logged(dir: &Path) -> (Arc<Wal>, Vec<WalRecord>, Vec<String>) {
    let warnings = Warnings::default();
    let (wal, records) = tracing::subscriber::with_default(warnings.clone(), || {
        Wal::open(LocalFs::shared(), dir, WalOptions::default()).expect("open")
    });
    let w = warnings.0.lock().clone();
    (wal, records, w)
}

/// Writes `n` records in one segment, closes, and returns the segment and each record's end.
fn write_segment(dir: &Path, n: u64) -> (PathBuf, Vec<u64>) {
    let (wal, _, _) = open_logged(dir);
    let mut ends = Vec::new();
    let mut end = SEGMENT_HEADER_LEN as u64;
    for i in 0..n {
        let payload = format!("payload number {i}");
        wal.append(7, i, payload.as_bytes()).expect("append");
        end += (RECORD_HEADER_LEN + payload.len()) as u64;
        ends.push(end);
    }
    wal.close().expect("close");
    let seg = wal.segments().pop().expect("segment");
    assert_eq!(std::fs::metadata(&seg).expect("stat").len(), end);
    (seg, ends)
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).expect("stat").len()
}

#[test]
fn cut_last_record_is_truncated_and_log_continues() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (seg, ends) = write_segment(tmp.path(), 10);
    let good = ends[8];
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .and_then(|f| f.set_len(good + 10))
        .expect("cut");

    let (wal, records, warnings) = open_logged(tmp.path());
    assert_eq!(records.len(), 9);
    assert!(records.iter().enumerate().all(|(i, r)| r.seq == i as u64));
    let name = seg.display().to_string();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&name) && w.contains(&format!("offset={good}"))),
        "warning names file and offset: {warnings:?}"
    );
    assert_eq!(file_len(&seg), good, "torn tail cut off");

    for i in 100..105 {
        wal.append(7, i, b"after reopen").expect("append");
    }
    wal.close().expect("close");
    drop(wal);
    let (_wal, records, warnings) = open_logged(tmp.path());
    assert!(warnings.is_empty(), "clean log: {warnings:?}");
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    let expected: Vec<u64> = (0..9).chain(100..105).collect();
    assert_eq!(seqs, expected);
}

#[test]
fn zeros_after_last_record_are_truncated() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (seg, ends) = write_segment(tmp.path(), 5);
    let mut data = std::fs::read(&seg).expect("read");
    data.extend_from_slice(&[0u8; 4096]);
    std::fs::write(&seg, data).expect("write");
    let (_wal, records, warnings) = open_logged(tmp.path());
    assert_eq!(records.len(), 5);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(file_len(&seg), ends[4]);
}

#[test]
fn garbage_over_last_record_is_truncated() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (seg, ends) = write_segment(tmp.path(), 5);
    let mut data = std::fs::read(&seg).expect("read");
    // A half-overwritten last record: its tail replaced by garbage, and more garbage after.
    let last_start = ends[3] as usize;
    for (i, b) in data[last_start + 30..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(7);
    }
    data.extend((0..300u32).map(|i| (i * 17 % 251) as u8));
    std::fs::write(&seg, data).expect("write");
    let (_wal, records, warnings) = open_logged(tmp.path());
    assert_eq!(records.len(), 4);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(file_len(&seg), ends[3]);
}

#[test]
fn empty_and_header_only_segments_are_removed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (seg, _) = write_segment(tmp.path(), 3);
    let dir = tmp.path();
    // Crashes right after creating later segments: no bytes, a partial header.
    let empty = dir.join("wal-00000000000000000007.log");
    let partial = dir.join("wal-00000000000000000008.log");
    std::fs::write(&empty, b"").expect("write");
    std::fs::write(&partial, b"CELR").expect("write");
    let (wal, records, warnings) = open_logged(dir);
    assert_eq!(records.len(), 3);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(!empty.exists() && !partial.exists());
    let segs = wal.segments();
    assert_eq!(segs.first(), Some(&seg));
    assert_eq!(
        segs.last()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str()),
        Some("wal-00000000000000000009.log"),
        "the new segment comes after the highest seen"
    );
}
