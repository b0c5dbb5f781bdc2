//! Replay: reading the segments of a WAL directory back, oldest first, when the log is opened.
//!
//! The rule for damage (DESIGN.md "Storage engine"): a torn tail — a last record that is
//! incomplete, or that fails its CRC with nothing valid after it — is what a crash in the
//! middle of a write leaves, and is cut off with a warning. A bad record with a valid record
//! after it is corruption of acknowledged data: an error naming the file and offset, never a
//! silent skip.

use super::format::{self, Decoded, HEADER_LEN, RECORD_HEADER_LEN};
use super::segments::{parse_segment_name, SegmentMeta};
use super::WalRecord;
use crate::fs::{read_all, FileSystem};
use bytes::Bytes;
use cellar_model::{Error, Result};
use std::path::Path;

/// The end of the readable part of a segment, when it is not the end of the file.
#[derive(Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Offset of the first byte that is not part of a whole, valid record.
    pub offset: u64,
    pub reason: String,
}

/// The records of one segment and where its valid part ends.
#[derive(Debug)]
pub struct SegmentReplay {
    pub records: Vec<WalRecord>,
    pub torn: Option<TornTail>,
}

/// Decodes one whole segment (header included). Payloads are slices of `data`: no copies.
pub fn replay_segment(file: &str, data: &Bytes) -> Result<SegmentReplay> {
    format::check_segment_header(file, data)?;
    let mut records = Vec::new();
    let mut pos = HEADER_LEN;
    while pos < data.len() {
        let reason = match format::decode_at(data, pos) {
            Decoded::Record {
                region,
                seq,
                payload,
                next,
            } => {
                records.push(WalRecord {
                    region,
                    seq,
                    payload: data.slice(payload),
                });
                pos = next;
                continue;
            }
            Decoded::Incomplete { needed, available } => {
                format!("record needs {needed} bytes but only {available} remain in the segment")
            }
            Decoded::BadCrc { stored, computed } => {
                format!("record CRC mismatch (stored {stored:#010x}, computed {computed:#010x})")
            }
        };
        // The length field itself may be what is damaged, so look for a valid record at every
        // later offset, not just after the claimed length.
        if let Some(next_valid) = find_valid_record(data, pos + 1) {
            let detail = format!("{reason}; a valid record follows at offset {next_valid}");
            return Err(if reason.starts_with("record CRC") {
                Error::checksum(file, pos as u64, detail)
            } else {
                Error::corruption(file, pos as u64, detail)
            });
        }
        return Ok(SegmentReplay {
            records,
            torn: Some(TornTail {
                offset: pos as u64,
                reason,
            }),
        });
    }
    Ok(SegmentReplay {
        records,
        torn: None,
    })
}

/// The first offset ≥ `from` holding a whole record with a matching CRC. Runs only on damage.
fn find_valid_record(data: &[u8], from: usize) -> Option<usize> {
    let last_start = data.len().checked_sub(RECORD_HEADER_LEN)?;
    (from..=last_start).find(|&p| matches!(format::decode_at(data, p), Decoded::Record { .. }))
}

/// Everything recovered from a WAL directory.
pub struct Recovered {
    /// Records of every segment, in log order.
    pub records: Vec<WalRecord>,
    /// The surviving segments, oldest first, with what they hold per region.
    pub segments: Vec<SegmentMeta>,
    /// The id the next segment must take: after every segment seen, deleted ones included.
    pub next_id: u64,
}

/// Replays every segment in `dir` (created if missing). Torn tails are truncated; segments too
/// short to hold a header (a crash right after their creation) are deleted.
pub fn recover(fs: &dyn FileSystem, dir: &Path) -> Result<Recovered> {
    fs.create_dir_all(dir)?;
    let mut ids: Vec<(u64, String)> = fs
        .list(dir)?
        .into_iter()
        .filter_map(|name| parse_segment_name(&name).map(|id| (id, name)))
        .collect();
    ids.sort_unstable();

    let mut out = Recovered {
        records: Vec::new(),
        segments: Vec::new(),
        next_id: 1,
    };
    let mut deleted = false;
    for (id, name) in ids {
        out.next_id = out.next_id.max(id.saturating_add(1));
        let path = dir.join(&name);
        let file = path.display().to_string();
        let data = read_all(fs, &path)?;
        if data.len() < HEADER_LEN {
            // No record can be in it, so nothing is lost by removing it.
            tracing::warn!(file = %file, len = data.len(), "deleting WAL segment with no complete header");
            fs.delete(&path)?;
            deleted = true;
            continue;
        }
        let replay = replay_segment(&file, &data)?;
        if let Some(torn) = &replay.torn {
            tracing::warn!(
                file = %file,
                offset = torn.offset,
                reason = %torn.reason,
                "truncating torn tail of WAL segment"
            );
            fs.truncate(&path, torn.offset)?;
        }
        let mut meta = SegmentMeta::new(id, path);
        for r in &replay.records {
            meta.note(r.region, r.seq);
        }
        out.records.extend(replay.records);
        out.segments.push(meta);
    }
    if deleted {
        fs.sync_dir(dir)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(records: &[(u64, u64, &[u8])]) -> Vec<u8> {
        let mut v = format::segment_header().to_vec();
        for (r, s, p) in records {
            v.extend_from_slice(&format::record_header(*r, *s, p).expect("header"));
            v.extend_from_slice(p);
        }
        v
    }

    #[test]
    fn reads_all_records() {
        let data = Bytes::from(segment(&[(1, 1, b"a"), (2, 1, b""), (1, 2, b"ccc")]));
        let rep = replay_segment("f", &data).expect("replay");
        assert!(rep.torn.is_none());
        let got: Vec<_> = rep.records.iter().map(|r| (r.region, r.seq)).collect();
        assert_eq!(got, vec![(1, 1), (2, 1), (1, 2)]);
        assert_eq!(&rep.records[2].payload[..], b"ccc");
    }

    #[test]
    fn every_cut_of_the_last_record_is_a_torn_tail() {
        let whole = segment(&[(1, 1, b"first"), (1, 2, b"second record")]);
        let first_end = segment(&[(1, 1, b"first")]).len();
        for cut in first_end + 1..whole.len() {
            let data = Bytes::copy_from_slice(&whole[..cut]);
            let rep = replay_segment("f", &data).expect("torn tail is not an error");
            assert_eq!(rep.records.len(), 1, "cut {cut}");
            assert_eq!(rep.torn.map(|t| t.offset), Some(first_end as u64));
        }
    }

    #[test]
    fn garbage_after_last_record_is_a_torn_tail() {
        let mut v = segment(&[(1, 1, b"x")]);
        let end = v.len() as u64;
        v.extend_from_slice(&[0u8; 100]);
        v.extend_from_slice(&[0xA5; 37]);
        let rep = replay_segment("f", &Bytes::from(v)).expect("replay");
        assert_eq!(rep.records.len(), 1);
        assert_eq!(rep.torn.map(|t| t.offset), Some(end));
    }

    #[test]
    fn bad_record_before_a_good_one_is_an_error() {
        let mut v = segment(&[(1, 1, b"first"), (1, 2, b"second"), (1, 3, b"third")]);
        let second = segment(&[(1, 1, b"first")]).len();
        v[second + RECORD_HEADER_LEN] ^= 0x40;
        let err = replay_segment("seg-file", &Bytes::from(v)).expect_err("corrupt middle");
        let msg = err.to_string();
        assert!(msg.contains("seg-file"), "{msg}");
        assert!(msg.contains(&format!("offset {second}")), "{msg}");
        assert!(matches!(err, Error::Checksum { .. }));
    }

    #[test]
    fn damaged_length_before_a_good_record_is_an_error() {
        let mut v = segment(&[(1, 1, b"first"), (1, 2, b"second")]);
        // Blow up the first record's length so it seems to run past the end.
        v[HEADER_LEN + 7] = 0x7f;
        let err = replay_segment("f", &Bytes::from(v)).expect_err("corrupt length");
        assert!(matches!(err, Error::Corruption { offset, .. } if offset == HEADER_LEN as u64));
    }
}
