//! Replay: reading the segments of a WAL directory back, oldest first, when the log is opened.
//!
//! Replay returns a prefix of what was written (DESIGN.md "Storage engine"). At the first
//! offset of a segment where no whole, valid record starts, the segment is damaged:
//! - a **torn tail** is what a crash during a write leaves: damage with no whole record after
//!   it, in the newest segment that holds records. It is cut off with a warning.
//! - anything else is **corruption**: a whole record after the damage, or damage in a segment
//!   followed by segments that hold records (a roll syncs a segment before the next one takes
//!   records, so a crash cannot tear an older one). Opening fails with an error naming the
//!   segment and offset, unless the operator asked to skip damage (`skip_errors`, HBase's
//!   `hbase.hlog.split.skip.errors`): then the readable prefix is kept, the damaged segment is
//!   moved aside (`…log.corrupt`) and the log says what was lost.
//!
//! Searching past damage accepts only records whose header checksum is seeded with the
//! segment's random salt (format version 2), so bytes a user wrote in a value cannot pass for a
//! record and turn a torn tail into a refusal to start.

use super::format::{self, Decoded, SegmentHeader};
use super::segments::{parse_segment_name, SegmentMeta};
use super::WalRecord;
use crate::fs::{create_dir_durable, read_all, FileSystem};
use bytes::Bytes;
use cellar_model::{Error, Result};
use std::path::{Path, PathBuf};

/// Suffix of a segment moved aside by `skip_errors`.
const CORRUPT_SUFFIX: &str = ".corrupt";
/// Suffix of a segment's readable prefix being rewritten by `skip_errors`.
const REWRITE_SUFFIX: &str = ".rewrite";

/// Where and why a segment stops being readable.
#[derive(Debug, PartialEq, Eq)]
pub struct Damage {
    /// Offset of the first byte that is not part of a whole, valid record.
    pub offset: u64,
    pub reason: String,
    /// Whole records that still read after the damage: not what a crash leaves.
    pub readable_after: usize,
}

/// The records of one segment and where its valid part ends.
#[derive(Debug)]
pub struct SegmentReplay {
    pub records: Vec<WalRecord>,
    pub damage: Option<Damage>,
}

/// Decodes one whole segment (header included). Payloads are slices of `data`: no copies.
pub fn replay_segment(file: &str, data: &Bytes) -> Result<SegmentReplay> {
    let header = format::check_segment_header(file, data)?;
    let mut records = Vec::new();
    let mut pos = header.len;
    while pos < data.len() {
        let reason = match format::decode_at(&header, data, pos) {
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
            Decoded::BadHeader { stored, computed } => format!(
                "record header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            Decoded::BadPayload {
                stored, computed, ..
            } => format!(
                "record payload checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
        };
        let damage = examine_damage(&header, data, pos, reason);
        return Ok(SegmentReplay {
            records,
            damage: Some(damage),
        });
    }
    Ok(SegmentReplay {
        records,
        damage: None,
    })
}

/// Counts the whole records past damage at `pos`, naming the first. Runs only on damage.
fn examine_damage(header: &SegmentHeader, data: &[u8], pos: usize, mut reason: String) -> Damage {
    let mut readable_after = 0;
    let mut at = pos + 1;
    while at < data.len() {
        match format::decode_at(header, data, at) {
            Decoded::Record { next, .. } => {
                if readable_after == 0 {
                    reason.push_str(&format!("; a valid record follows at offset {at}"));
                }
                readable_after += 1;
                at = next;
            }
            _ => at += 1,
        }
    }
    Damage {
        offset: pos as u64,
        reason,
        readable_after,
    }
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

/// One segment file as found.
struct Found {
    id: u64,
    path: PathBuf,
    file: String,
    /// `Err`: its header is unreadable (bad magic, unknown version).
    replay: std::result::Result<SegmentReplay, Error>,
}

/// Replays every segment in `dir` (created durably if missing). Torn tails are truncated;
/// segments too short to hold a header (a crash right after their creation) are deleted.
/// Other damage is an error, or with `skip_errors` is moved aside and logged.
pub fn recover(fs: &dyn FileSystem, dir: &Path, skip_errors: bool) -> Result<Recovered> {
    create_dir_durable(fs, dir)?;
    let mut names = fs.list(dir)?;
    let mut changed = finish_rewrites(fs, dir, &mut names)?;
    let mut ids: Vec<(u64, String)> = names
        .into_iter()
        .filter_map(|name| parse_segment_name(&name).map(|id| (id, name)))
        .collect();
    ids.sort_unstable();

    let mut next_id = 1;
    let mut found = Vec::new();
    for (id, name) in ids {
        next_id = next_id.max(id.saturating_add(1));
        let path = dir.join(&name);
        let file = path.display().to_string();
        // A segment its writer never closed (a crash) is readable in full only once the
        // file system has taken it over (HDFS: lease recovery).
        fs.recover(&path)?;
        let data = read_all(fs, &path)?;
        if is_interrupted_create(&data) {
            // No record can be in it, so nothing is lost by removing it.
            tracing::warn!(file = %file, len = data.len(), "deleting WAL segment with no complete header");
            fs.delete(&path)?;
            changed = true;
            continue;
        }
        let replay = replay_segment(&file, &data);
        found.push(Found {
            id,
            path,
            file,
            replay,
        });
    }

    let mut out = Recovered {
        records: Vec::new(),
        segments: Vec::new(),
        next_id,
    };
    let has_records: Vec<bool> = found
        .iter()
        .map(|f| f.replay.as_ref().map_or(true, |r| !r.records.is_empty()))
        .collect();
    for (i, f) in found.into_iter().enumerate() {
        let later_records = has_records.get(i + 1..).unwrap_or(&[]).contains(&true);
        let Found {
            id,
            path,
            file,
            replay,
        } = f;
        let replay = match replay {
            Ok(r) => r,
            Err(e) if skip_errors => {
                tracing::error!(file = %file, error = %e, "skipping an unreadable WAL segment: none of its records are replayed");
                move_aside(fs, &path)?;
                changed = true;
                continue;
            }
            Err(e) => return Err(with_hint(e)),
        };
        if let Some(d) = &replay.damage {
            if d.readable_after == 0 && !later_records {
                tracing::warn!(
                    file = %file,
                    offset = d.offset,
                    reason = %d.reason,
                    "truncating torn tail of WAL segment"
                );
                fs.truncate(&path, d.offset)?;
            } else {
                let why = if later_records {
                    format!("{}; later segments hold records", d.reason)
                } else {
                    d.reason.clone()
                };
                let err = Error::corruption(&file, d.offset, why);
                if !skip_errors {
                    return Err(with_hint(err));
                }
                tracing::error!(
                    file = %file,
                    offset = d.offset,
                    error = %err,
                    lost_records_readable_after = d.readable_after,
                    "skipping damage in a WAL segment: its records from the damage on are lost; the segment is moved aside"
                );
                rewrite_prefix(fs, dir, id, &path, &replay.records)?;
                changed = true;
            }
        }
        let mut meta = SegmentMeta::new(id, path);
        for r in &replay.records {
            meta.note(r.region, r.seq);
        }
        out.records.extend(replay.records);
        out.segments.push(meta);
    }
    if changed {
        fs.sync_dir(dir)?;
    }
    Ok(out)
}

/// A file that cannot even hold its segment header.
fn is_interrupted_create(data: &[u8]) -> bool {
    if data.len() < format::HEADER_LEN_V1 {
        return true;
    }
    let version = data
        .get(8..12)
        .and_then(|v| v.try_into().ok())
        .map_or(0, u32::from_le_bytes);
    format::header_len(version).is_some_and(|len| data.len() < len)
}

fn with_hint(e: Error) -> Error {
    match e {
        Error::Corruption {
            file,
            offset,
            detail,
        } => Error::Corruption {
            file,
            offset,
            detail: format!(
                "{detail} (to go on without the damaged records, set storage.wal_skip_errors = true: the damaged segment is moved aside)"
            ),
        },
        other => other,
    }
}

/// Renames a damaged segment to `…log.corrupt`, where replay no longer looks.
fn move_aside(fs: &dyn FileSystem, path: &Path) -> Result<PathBuf> {
    let mut aside = path.as_os_str().to_owned();
    aside.push(CORRUPT_SUFFIX);
    let aside = PathBuf::from(aside);
    fs.rename(path, &aside)?;
    Ok(aside)
}

/// Replaces a damaged segment by a new one holding its readable prefix, keeping the damaged
/// file as `…log.corrupt`. The prefix is written and synced under `…log.rewrite` first; a
/// crash between the two renames is finished by [`finish_rewrites`] on the next open.
fn rewrite_prefix(
    fs: &dyn FileSystem,
    dir: &Path,
    id: u64,
    path: &Path,
    records: &[WalRecord],
) -> Result<()> {
    let mut rewrite = path.as_os_str().to_owned();
    rewrite.push(REWRITE_SUFFIX);
    let rewrite = PathBuf::from(rewrite);
    let salt = format::new_salt(id);
    let framer = format::RecordFramer::new(salt);
    let mut f = fs.create(&rewrite)?;
    f.append(&format::segment_header(salt))?;
    for r in records {
        f.append(&framer.header(r.region, r.seq, &r.payload)?)?;
        f.append(&r.payload)?;
    }
    f.sync()?;
    drop(f);
    fs.sync_dir(dir)?;
    let aside = move_aside(fs, path)?;
    fs.rename(&rewrite, path)?;
    fs.sync_dir(dir)?;
    tracing::warn!(file = %path.display(), moved_to = %aside.display(), records = records.len(), "the readable prefix of a damaged WAL segment was kept");
    Ok(())
}

/// Finishes rewrites a crash interrupted: a `…log.rewrite` whose segment is gone is renamed
/// into place; one whose segment is still there is dropped. Returns whether anything changed.
fn finish_rewrites(fs: &dyn FileSystem, dir: &Path, names: &mut Vec<String>) -> Result<bool> {
    let mut changed = false;
    for name in names.clone() {
        let Some(segment) = name.strip_suffix(REWRITE_SUFFIX) else {
            continue;
        };
        if parse_segment_name(segment).is_none() {
            continue;
        }
        if names.iter().any(|n| n == segment) {
            fs.delete(&dir.join(&name))?;
        } else {
            fs.rename(&dir.join(&name), &dir.join(segment))?;
            names.push(segment.to_string());
        }
        names.retain(|n| n != &name);
        changed = true;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::{RecordFramer, HEADER_LEN, RECORD_HEADER_LEN};

    const SALT: u64 = 77;

    fn segment(records: &[(u64, u64, &[u8])]) -> Vec<u8> {
        let mut v = format::segment_header(SALT).to_vec();
        let f = RecordFramer::new(SALT);
        for (r, s, p) in records {
            v.extend_from_slice(&f.header(*r, *s, p).expect("header"));
            v.extend_from_slice(p);
        }
        v
    }

    #[test]
    fn reads_all_records() {
        let data = Bytes::from(segment(&[(1, 1, b"a"), (2, 1, b""), (1, 2, b"ccc")]));
        let rep = replay_segment("f", &data).expect("replay");
        assert!(rep.damage.is_none());
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
            let d = rep.damage.expect("damage");
            assert_eq!(d.offset, first_end as u64);
            assert_eq!(d.readable_after, 0);
        }
    }

    #[test]
    fn a_record_inside_a_torn_value_is_not_taken_for_one() {
        // A user value holding a whole record framed as the log frames them, but without the
        // segment's salt, which a user cannot know.
        let fake = {
            let f = RecordFramer::new(0);
            let mut v = f.header(1, 999, b"evil").expect("header").to_vec();
            v.extend_from_slice(b"evil");
            v
        };
        let mut value = vec![b'v'; 10];
        value.extend_from_slice(&fake);
        value.extend_from_slice(&[b'w'; 10]);
        let whole = segment(&[(1, 1, b"first"), (1, 2, &value)]);
        let first_end = segment(&[(1, 1, b"first")]).len();
        // Cut just after the fake record inside the value: all its bytes are on disk.
        let cut = first_end + RECORD_HEADER_LEN + 10 + fake.len();
        let rep = replay_segment("f", &Bytes::copy_from_slice(&whole[..cut])).expect("torn");
        let d = rep.damage.expect("damage");
        assert_eq!(d.offset, first_end as u64);
        assert_eq!(d.readable_after, 0, "the fake record is not a record");
    }

    #[test]
    fn damage_with_a_whole_record_after_it_is_corruption() {
        let mut v = segment(&[(1, 1, b"first"), (1, 2, b"second"), (1, 3, b"third")]);
        let second = segment(&[(1, 1, b"first")]).len();
        v[second + RECORD_HEADER_LEN] ^= 0x40;
        let rep = replay_segment("f", &Bytes::from(v)).expect("replay");
        let d = rep.damage.expect("damage");
        assert_eq!(d.offset, second as u64);
        assert_eq!(d.readable_after, 1);
        assert!(d.reason.contains("a valid record follows"), "{}", d.reason);
    }

    #[test]
    fn a_damaged_length_is_caught_by_the_header_checksum() {
        let mut v = segment(&[(1, 1, b"first"), (1, 2, b"second")]);
        v[HEADER_LEN] = 0x7f; // the first record's length
        let rep = replay_segment("f", &Bytes::from(v)).expect("replay");
        let d = rep.damage.expect("damage");
        assert_eq!(d.offset, HEADER_LEN as u64);
        assert!(d.reason.contains("header checksum"), "{}", d.reason);
        assert_eq!(d.readable_after, 1, "the second record still reads");
    }
}
