//! The set of segments on disk and what each still holds for which region.
//!
//! Invariants: segments are kept oldest first; the last one is the active segment (the one
//! being written) and is never handed out for deletion. For each segment we keep, per region,
//! the highest sequence id it contains; a segment can go once every such id is covered by its
//! region's flushed sequence id (HBase's "oldest unflushed sequence id" rule).
//!
//! Not thread-safe by itself; the WAL keeps it under its own mutex, apart from the append
//! buffer, so deleting old segments never holds up writers.

use std::collections::HashMap;
use std::path::PathBuf;

const PREFIX: &str = "wal-";
const SUFFIX: &str = ".log";
/// Enough digits for any u64, so names sort as numbers.
const DIGITS: usize = 20;

/// The file name of segment `id`: `wal-00000000000000000001.log`.
pub fn segment_name(id: u64) -> String {
    format!("{PREFIX}{id:0DIGITS$}{SUFFIX}")
}

/// The id in a segment file name, or `None` for any other file.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    if digits.len() != DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One segment and the highest sequence id per region it holds.
#[derive(Debug)]
pub struct SegmentMeta {
    /// The number in the segment's file name.
    pub id: u64,
    pub path: PathBuf,
    /// Region → highest sequence id of that region in this segment.
    pub max_seq: HashMap<u64, u64>,
}

impl SegmentMeta {
    pub fn new(id: u64, path: PathBuf) -> SegmentMeta {
        SegmentMeta {
            id,
            path,
            max_seq: HashMap::new(),
        }
    }

    /// Folds in records of `region` up to `seq`.
    pub fn note(&mut self, region: u64, seq: u64) {
        let e = self.max_seq.entry(region).or_insert(seq);
        *e = (*e).max(seq);
    }

    fn is_obsolete(&self, flushed: &HashMap<u64, u64>) -> bool {
        self.max_seq
            .iter()
            .all(|(region, max)| flushed.get(region).is_some_and(|f| f >= max))
    }
}

/// Every segment on disk, oldest first, plus each region's flushed sequence id.
#[derive(Debug, Default)]
pub struct SegmentSet {
    segments: Vec<SegmentMeta>,
    flushed: HashMap<u64, u64>,
}

impl SegmentSet {
    /// Adds a segment as the newest (from replay, or a freshly rolled active segment).
    pub fn push(&mut self, seg: SegmentMeta) {
        debug_assert!(self.segments.last().is_none_or(|s| s.id < seg.id));
        self.segments.push(seg);
    }

    /// Records that segment `id` now holds the given regions' records up to the given seqs.
    pub fn note_batch(&mut self, id: u64, regions: &HashMap<u64, u64>) {
        // The batch almost always lands in the active (last) segment.
        if let Some(seg) = self.segments.iter_mut().rev().find(|s| s.id == id) {
            for (&region, &seq) in regions {
                seg.note(region, seq);
            }
        }
    }

    /// Records `region`'s flushed seq and removes (returning them) the non-active segments no
    /// region still needs. The caller deletes the files.
    pub fn mark_flushed(&mut self, region: u64, seq: u64) -> Vec<SegmentMeta> {
        let f = self.flushed.entry(region).or_insert(seq);
        *f = (*f).max(seq);
        self.take_obsolete()
    }

    /// Removes and returns the non-active segments no region still needs.
    pub fn take_obsolete(&mut self) -> Vec<SegmentMeta> {
        let Some(active) = self.segments.last().map(|s| s.id) else {
            return Vec::new();
        };
        let flushed = &self.flushed;
        let (doomed, kept) = std::mem::take(&mut self.segments)
            .into_iter()
            .partition(|s| s.id != active && s.is_obsolete(flushed));
        self.segments = kept;
        doomed
    }

    /// Paths of all segments, oldest first.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.segments.iter().map(|s| s.path.clone()).collect()
    }

    /// Puts back a segment whose deletion failed, so a later pass retries it. Its region
    /// map is cleared: everything in it was already found flushed.
    pub fn restore(&mut self, mut seg: SegmentMeta) {
        seg.max_seq.clear();
        let at = self.segments.partition_point(|s| s.id < seg.id);
        self.segments.insert(at, seg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_as_numbers_and_parse_back() {
        let a = segment_name(9);
        let b = segment_name(10);
        assert!(a < b);
        assert_eq!(parse_segment_name(&a), Some(9));
        assert_eq!(parse_segment_name(&segment_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_segment_name("wal-1.log"), None);
        assert_eq!(parse_segment_name("wal-0000000000000000000x.log"), None);
        assert_eq!(parse_segment_name("other"), None);
    }

    fn set_with(segs: &[(u64, &[(u64, u64)])]) -> SegmentSet {
        let mut set = SegmentSet::default();
        for (id, regions) in segs {
            let mut m = SegmentMeta::new(*id, PathBuf::from(segment_name(*id)));
            for &(r, s) in *regions {
                m.note(r, s);
            }
            set.push(m);
        }
        set
    }

    fn ids(segs: Vec<SegmentMeta>) -> Vec<u64> {
        segs.into_iter().map(|s| s.id).collect()
    }

    #[test]
    fn segment_goes_only_when_every_region_is_flushed() {
        let mut set = set_with(&[(1, &[(1, 10), (2, 5)]), (2, &[(1, 20)]), (3, &[])]);
        assert!(set.mark_flushed(1, 10).is_empty(), "region 2 still needs 1");
        assert_eq!(ids(set.mark_flushed(2, 5)), vec![1]);
        assert_eq!(ids(set.mark_flushed(1, 25)), vec![2]);
        assert_eq!(set.paths(), vec![PathBuf::from(segment_name(3))]);
    }

    #[test]
    fn active_segment_is_never_obsolete() {
        let mut set = set_with(&[(1, &[(1, 1)])]);
        assert!(set.mark_flushed(1, 100).is_empty());
    }

    #[test]
    fn flushed_seq_never_goes_backwards() {
        let mut set = set_with(&[(1, &[(1, 10)]), (2, &[])]);
        assert!(set.mark_flushed(1, 5).is_empty());
        assert_eq!(ids(set.mark_flushed(1, 20)), vec![1]);
        assert_eq!(set.paths().len(), 1);
        let mut set = set_with(&[(1, &[(1, 10)]), (2, &[])]);
        let _ = set.mark_flushed(1, 20);
        assert!(set.mark_flushed(1, 5).is_empty());
    }
}
