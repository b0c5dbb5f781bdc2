//! Splitting a dead server's log by region (HBase's WALSplitter): every record of a WAL
//! directory goes to `<region dir>/recovered.edits/`, one segment per region and split, in
//! the WAL's own segment format. The server that opens the region next replays those edits
//! before it serves, flushes them, and removes the directory
//! ([`read_recovered`], [`clear_recovered`]).
//!
//! Crash safety: each output segment is written under a temporary name, synced, and renamed
//! into place, so a split that dies half-way leaves whole segments or none; running it again
//! writes the same records again, and [`read_recovered`] keeps one copy of each (a region's
//! sequence id names one edit). The caller removes the dead log only after `split` returns.

use super::format::new_salt;
use super::reader::recover;
use super::segments::{parse_segment_name, segment_name};
use super::writer::SegmentWriter;
use super::WalRecord;
use crate::fs::{create_dir_durable, FileSystem};
use cellar_model::Result;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The directory of a region's edits recovered from dead servers' logs.
pub const RECOVERED_EDITS: &str = "recovered.edits";

/// What a split did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SplitSummary {
    /// Records read from the dead log.
    pub records: u64,
    /// Regions that got edits, with how many each.
    pub regions: BTreeMap<u64, u64>,
    /// Records of regions `region_dir` did not know (deleted tables): dropped.
    pub dropped: u64,
}

/// Splits every segment of `wal_dir` by region into `region_dir(region)/recovered.edits`.
/// Segments a crashed writer left open are taken over first (`FileSystem::recover`); a torn
/// tail of the newest segment is the end of the log, as on replay. `region_dir` returns
/// `None` for a region that no longer exists: its records are dropped.
pub fn split(
    fs: &dyn FileSystem,
    wal_dir: &Path,
    skip_errors: bool,
    region_dir: impl Fn(u64) -> Option<PathBuf>,
) -> Result<SplitSummary> {
    let recovered = recover(fs, wal_dir, skip_errors)?;
    let mut by_region: BTreeMap<u64, Vec<WalRecord>> = BTreeMap::new();
    let mut summary = SplitSummary::default();
    for r in recovered.records {
        summary.records += 1;
        by_region.entry(r.region).or_default().push(r);
    }
    for (region, records) in by_region {
        let Some(dir) = region_dir(region) else {
            summary.dropped += records.len() as u64;
            continue;
        };
        write_edits(fs, &dir.join(RECOVERED_EDITS), region, &records)?;
        summary.regions.insert(region, records.len() as u64);
    }
    Ok(summary)
}

/// Writes `records` as the next segment of `dir`: under a temporary name, synced, renamed.
fn write_edits(fs: &dyn FileSystem, dir: &Path, region: u64, records: &[WalRecord]) -> Result<()> {
    create_dir_durable(fs, dir)?;
    let id = fs
        .list(dir)?
        .iter()
        .filter_map(|n| parse_segment_name(n))
        .max()
        .unwrap_or(0)
        + 1;
    let tmp = dir.join(format!(".split-{id}"));
    // Leftovers of a split that died while writing this segment.
    fs.delete_dir_all(&tmp)?;
    create_dir_durable(fs, &tmp)?;
    let salt = new_salt(id);
    let framer = super::format::RecordFramer::new(salt);
    let mut writer = SegmentWriter::create(fs, &tmp, id, salt)?;
    let mut buf = Vec::new();
    for r in records {
        debug_assert_eq!(r.region, region);
        buf.extend_from_slice(&framer.header(r.region, r.seq, &r.payload)?);
        buf.extend_from_slice(&r.payload);
        if buf.len() >= 1 << 20 {
            writer.write(&buf)?;
            buf.clear();
        }
    }
    writer.write(&buf)?;
    writer.syncer().sync()?;
    let from = writer.path().to_path_buf();
    drop(writer);
    fs.rename(&from, &dir.join(segment_name(id)))?;
    fs.sync_dir(dir)?;
    fs.delete_dir_all(&tmp)?;
    Ok(())
}

/// The edits waiting in `region_dir/recovered.edits`, in sequence order; none if it is
/// missing.
pub fn read_recovered(fs: &dyn FileSystem, region_dir: &Path) -> Result<Vec<WalRecord>> {
    let dir = region_dir.join(RECOVERED_EDITS);
    if !fs.exists(&dir)? {
        return Ok(Vec::new());
    }
    let mut records = recover(fs, &dir, false)?.records;
    // Edits of one region from several dead servers: the region's sequence ids order them.
    // A split that ran again after a crash wrote some edits twice: a sequence id names one
    // edit of the region, so one copy of each is kept.
    records.sort_by_key(|r| r.seq);
    records.dedup_by_key(|r| r.seq);
    Ok(records)
}

/// Removes `region_dir/recovered.edits` once its edits are flushed.
pub fn clear_recovered(fs: &dyn FileSystem, region_dir: &Path) -> Result<()> {
    fs.delete_dir_all(&region_dir.join(RECOVERED_EDITS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::LocalFs;
    use crate::wal::{Wal, WalOptions};
    use bytes::Bytes;
    use cellar_model::Durability;

    fn log(dir: &Path, records: &[(u64, u64, &str)]) {
        let (wal, _) =
            Wal::open(LocalFs::shared(), dir, WalOptions::default()).expect("test setup");
        for (region, seq, payload) in records {
            let t = wal
                .append(*region, *seq, payload.as_bytes())
                .expect("test setup");
            wal.sync(t, Durability::SyncWal).expect("test setup");
        }
        wal.close().expect("test setup");
    }

    #[test]
    fn every_record_lands_in_its_regions_recovered_edits_and_reads_back_in_order() {
        let tmp = tempfile::tempdir().expect("test setup");
        let fs = LocalFs::shared();
        let wal = tmp.path().join("wal");
        log(
            &wal,
            &[(1, 5, "a"), (2, 7, "b"), (1, 6, "c"), (3, 1, "gone")],
        );
        let dirs = |r: u64| (r != 3).then(|| tmp.path().join(format!("region-{r}")));
        let summary = split(&*fs, &wal, false, dirs).expect("test setup");
        assert_eq!(summary.records, 4);
        assert_eq!(summary.dropped, 1);
        assert_eq!(summary.regions, BTreeMap::from([(1, 2), (2, 1)]));
        let one = read_recovered(&*fs, &tmp.path().join("region-1")).expect("test setup");
        let got: Vec<(u64, u64, Bytes)> = one
            .into_iter()
            .map(|r| (r.region, r.seq, r.payload))
            .collect();
        assert_eq!(
            got,
            vec![(1, 5, Bytes::from("a")), (1, 6, Bytes::from("c"))]
        );

        // A second dead server's edits for the same region are replayed with the first's.
        let wal2 = tmp.path().join("wal2");
        log(&wal2, &[(1, 4, "older"), (1, 9, "newer")]);
        split(&*fs, &wal2, false, dirs).expect("test setup");
        let seqs: Vec<u64> = read_recovered(&*fs, &tmp.path().join("region-1"))
            .expect("test setup")
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(seqs, vec![4, 5, 6, 9]);

        clear_recovered(&*fs, &tmp.path().join("region-1")).expect("test setup");
        assert!(read_recovered(&*fs, &tmp.path().join("region-1"))
            .expect("test setup")
            .is_empty());
        assert!(read_recovered(&*fs, &tmp.path().join("region-9"))
            .expect("test setup")
            .is_empty());
    }

    #[test]
    fn splitting_again_after_a_crash_replays_each_edit_once() {
        let tmp = tempfile::tempdir().expect("test setup");
        let fs = LocalFs::shared();
        let wal = tmp.path().join("wal");
        log(&wal, &[(1, 1, "x"), (1, 2, "y")]);
        let dirs = |_r: u64| Some(tmp.path().join("region"));
        split(&*fs, &wal, false, dirs).expect("test setup");
        split(&*fs, &wal, false, dirs).expect("test setup");
        let seqs: Vec<u64> = read_recovered(&*fs, &tmp.path().join("region"))
            .expect("test setup")
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(seqs, vec![1, 2]);
    }
}
