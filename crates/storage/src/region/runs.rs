//! Sorted runs: a store's files grouped so that the files of one run hold disjoint row ranges
//! and can be read one after another instead of side by side.
//!
//! Sequential writes (time series, monotonically increasing ids: the row keys HBase users
//! often have) flush files whose row ranges follow each other. Counted as files, they would be
//! merged again and again by the size-tiered ratio rule (write amplification 5.4 against
//! RocksDB's 2.0 for 10 M sequential entries) and every seek would position an iterator in
//! each of them. Counted as one run, they are never rewritten (RocksDB's trivial move, without
//! the move), a Get finds its one candidate by binary search, and a scan reads them through one
//! [`RunIter`] that opens the next file only when the previous one is exhausted.
//!
//! Reads do not depend on how files are grouped: cells are ordered by their full key
//! (sequence id included), so any grouping whose files are disjoint gives the same merge.
//! Compaction selection (`compaction.rs`) counts and sizes runs instead of files.

use super::store_files::StoreFileHandle;
use crate::iter::{CellIter, Extent};
use cellar_model::key::compare_keys;
use cellar_model::Result;
use std::cmp::Ordering;
use std::sync::Arc;

/// Files with disjoint, increasing row ranges.
#[derive(Clone)]
pub struct Run {
    /// In row order: each file's last row is below the next file's first row.
    pub files: Vec<Arc<StoreFileHandle>>,
    /// The newest file's number: runs are ordered by it, newest first.
    pub newest: u64,
    /// Bytes of all the files.
    pub size: u64,
}

impl Run {
    fn single(f: &Arc<StoreFileHandle>) -> Run {
        Run {
            files: vec![Arc::clone(f)],
            newest: f.number,
            size: f.size(),
        }
    }

    /// The files that may hold rows of `[start, end)` (empty end: unbounded).
    pub fn overlapping(&self, start: &[u8], end: &[u8]) -> &[Arc<StoreFileHandle>] {
        if let [only] = self.files.as_slice() {
            return if only.may_overlap_rows(start, end) {
                std::slice::from_ref(only)
            } else {
                &[]
            };
        }
        // A run of several files holds only files with cells (see `group`); a reference is
        // found by its parent's rows, a superset of its own.
        let from = self
            .files
            .partition_point(|f| rows_of(f).is_some_and(|(_, last)| last < start));
        let to = if end.is_empty() {
            self.files.len()
        } else {
            self.files
                .partition_point(|f| rows_of(f).is_some_and(|(first, _)| first < end))
        };
        self.files.get(from..to.max(from)).unwrap_or(&[])
    }

    /// The one file of the run whose row range holds `row`, if any.
    pub fn holding(&self, row: &[u8]) -> Option<&Arc<StoreFileHandle>> {
        if let [only] = self.files.as_slice() {
            return Some(only);
        }
        let i = self
            .files
            .partition_point(|f| rows_of(f).is_some_and(|(_, last)| last < row));
        self.files
            .get(i)
            .filter(|f| rows_of(f).is_some_and(|(first, _)| first <= row))
    }
}

fn rows_of(f: &StoreFileHandle) -> Option<(&[u8], &[u8])> {
    f.file.rows()
}

/// Groups `files` into sorted runs, newest run first. Files with cells are placed by their
/// first row, each into the run whose last file ends closest below it (the fewest runs any
/// grouping can have: as many as files overlap at the most-overlapped row); files without
/// readable rows are runs of their own. A reference (part of a parent's file) is placed by
/// its parent file's rows, a superset of its own: references to disjoint files (a daughter's
/// view of a parent's level) are one run, and a search by row may meet a reference that
/// holds nothing of it, which its own row check then rules out.
pub fn group(files: &[Arc<StoreFileHandle>]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    let mut plain: Vec<&Arc<StoreFileHandle>> = Vec::new();
    for f in files {
        if rows_of(f).is_some() {
            plain.push(f);
        } else {
            runs.push(Run::single(f));
        }
    }
    plain.sort_by(|a, b| rows_of(a).cmp(&rows_of(b)).then(a.number.cmp(&b.number)));
    let mut open: Vec<Run> = Vec::new();
    for f in plain {
        let Some((first, _)) = rows_of(f) else {
            continue;
        };
        let mut best: Option<(usize, &[u8])> = None;
        for (i, run) in open.iter().enumerate() {
            let Some((_, last)) = run.files.last().and_then(|l| rows_of(l)) else {
                continue;
            };
            if last < first && best.is_none_or(|(_, b)| last > b) {
                best = Some((i, last));
            }
        }
        let best = best.map(|(i, _)| i);
        match best.and_then(|i| open.get_mut(i)) {
            Some(run) => {
                run.files.push(Arc::clone(f));
                run.newest = run.newest.max(f.number);
                run.size += f.size();
            }
            None => open.push(Run::single(f)),
        }
    }
    runs.extend(open);
    runs.sort_by_key(|r| std::cmp::Reverse(r.newest));
    runs
}

/// Reads a run's files one after another as one sorted source.
pub struct RunIter {
    files: Vec<Arc<StoreFileHandle>>,
    fill_cache: bool,
    /// The file `current` reads.
    at: usize,
    current: Option<Box<dyn CellIter>>,
    /// The files' bytes and cells.
    extent: Extent,
}

impl RunIter {
    /// `files`: in row order, disjoint (a [`Run`]'s, or a slice of them).
    pub fn new(files: Vec<Arc<StoreFileHandle>>, fill_cache: bool) -> RunIter {
        let extent = files
            .iter()
            .map(|f| Extent {
                bytes: f.file.meta().file_size,
                cells: f.file.meta().cell_count,
            })
            .fold(Extent::default(), |a, b| a + b);
        RunIter {
            files,
            fill_cache,
            at: 0,
            current: None,
            extent,
        }
    }

    fn open(&mut self, i: usize) -> Option<&mut Box<dyn CellIter>> {
        let f = self.files.get(i)?;
        if self.at != i || self.current.is_none() {
            self.current = Some(f.iter(self.fill_cache));
            self.at = i;
        }
        self.current.as_mut()
    }

    /// Positions file `i`'s iterator with `how`: `None` if there is no file `i` (the run is
    /// then exhausted), else whether it stopped on an entry. An error leaves the run invalid.
    fn position(
        &mut self,
        i: usize,
        how: impl FnOnce(&mut dyn CellIter) -> Result<()>,
    ) -> Result<Option<bool>> {
        let Some(it) = self.open(i) else {
            self.current = None;
            return Ok(None);
        };
        match how(it.as_mut()) {
            Ok(()) => Ok(Some(it.valid())),
            Err(e) => {
                self.current = None;
                Err(e)
            }
        }
    }

    /// From file `i` on, the first entry of the first file that has one.
    fn first_from(&mut self, mut i: usize) -> Result<()> {
        while self.position(i, |it| it.seek_to_first())? == Some(false) {
            i += 1;
        }
        Ok(())
    }
}

impl CellIter for RunIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }

    fn next(&mut self) -> Result<()> {
        if self.current.is_none() {
            return Ok(());
        }
        // `open` hands back the current file's iterator: this steps it.
        if self.position(self.at, |it| it.next())? == Some(false) {
            self.first_from(self.at + 1)?;
        }
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        // The first file whose last key is at or after the target.
        let i = self
            .files
            .partition_point(|f| compare_keys(&f.file.meta().last_key, target) == Ordering::Less);
        if self.position(i, |it| it.seek(target))? == Some(false) {
            self.first_from(i + 1)?;
        }
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        // The last file whose first key is at or before the target; a target before it
        // finds, in an earlier file, that file's last entry.
        let mut i = self.files.partition_point(|f| {
            compare_keys(&f.file.meta().first_key, target) != Ordering::Greater
        });
        while i > 0 {
            i -= 1;
            if self.position(i, |it| it.seek_for_prev(target))? == Some(true) {
                return Ok(());
            }
        }
        self.current = None;
        Ok(())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.first_from(0)
    }

    fn prefetch_seek(&mut self, target: &[u8], ahead: u64, stop: &[u8]) {
        let i = self
            .files
            .partition_point(|f| compare_keys(&f.file.meta().last_key, target) == Ordering::Less);
        if let Some(it) = self.open(i) {
            it.prefetch_seek(target, ahead, stop);
        }
    }

    fn extent(&self) -> Extent {
        self.extent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::MergeIter;
    use crate::region::test_files::{row, Files};
    use cellar_model::key::{first_on_row, KeyRef};
    use proptest::prelude::*;

    fn numbers(files: &[Arc<StoreFileHandle>]) -> Vec<u64> {
        files.iter().map(|f| f.number).collect()
    }

    #[test]
    fn sequential_files_are_one_run_and_overlapping_ones_are_not() {
        let mut fs = Files::new();
        let a = fs.file(&[0, 1, 2]);
        let b = fs.file(&[3, 4]);
        let c = fs.file(&[5, 9]);
        let d = fs.file(&[1, 8]); // overlaps all three
        let empty = fs.file(&[]);
        let runs = group(&[d.clone(), c.clone(), b.clone(), a.clone(), empty.clone()]);
        // Newest run first: the empty file (5), d (4), then a, b, c (newest 3).
        let got: Vec<Vec<u64>> = runs.iter().map(|r| numbers(&r.files)).collect();
        assert_eq!(got, vec![vec![5], vec![4], vec![1, 2, 3]]);
        let seq = &runs[2];
        assert_eq!(seq.size, a.size() + b.size() + c.size());
        assert_eq!(seq.holding(&row(4)).map(|f| f.number), Some(2));
        // Within c's range (its bloom, not the run, rules row 7 out).
        assert_eq!(seq.holding(&row(7)).map(|f| f.number), Some(3));
        assert_eq!(seq.holding(&row(10)).map(|f| f.number), None);
        assert_eq!(numbers(seq.overlapping(&row(2), &row(5))), vec![1, 2]);
        assert_eq!(numbers(seq.overlapping(&row(3), b"")), vec![2, 3]);
        assert!(seq.overlapping(&row(10), b"").is_empty());
        // A row at the end of one file and the start of the next: not disjoint.
        let mut fs = Files::new();
        let x = fs.file(&[0, 1]);
        let y = fs.file(&[1, 2]);
        assert_eq!(group(&[y, x]).len(), 2);
    }

    /// Every cell of `it` from its current position on.
    fn drain(it: &mut dyn CellIter) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while it.valid() {
            out.push(it.key().to_vec());
            it.next().expect("next");
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Any set of files: every file in exactly one run, each run's files disjoint and in
        /// row order, no more runs than files overlap at one row; reading a run through
        /// `RunIter` gives what merging its files gives, from any seek.
        #[test]
        fn runs_partition_files_and_read_like_a_merge(
            ranges in prop::collection::vec((0u32..200, 1u32..40), 1..12),
            seeks in prop::collection::vec(0u32..260, 1..8),
        ) {
            let mut fs = Files::new();
            let files: Vec<Arc<StoreFileHandle>> = ranges
                .iter()
                .map(|&(lo, len)| fs.file(&(lo..lo + len).step_by(3).collect::<Vec<_>>()))
                .collect();
            let runs = group(&files);
            let mut seen: Vec<u64> = runs.iter().flat_map(|r| numbers(&r.files)).collect();
            seen.sort_unstable();
            prop_assert_eq!(seen, numbers(&files));
            let depth = (0..260u32)
                .map(|r| files.iter().filter(|f| f.file.rows().is_some_and(|(a, b)| a <= row(r).as_slice() && row(r).as_slice() <= b)).count())
                .max()
                .unwrap_or(0);
            prop_assert!(runs.len() <= depth.max(1), "{} runs, depth {}", runs.len(), depth);
            for run in &runs {
                for pair in run.files.windows(2) {
                    let (Some((_, last)), Some((first, _))) = (pair[0].file.rows(), pair[1].file.rows()) else {
                        return Err(TestCaseError::fail("a run of several files holds an empty one"));
                    };
                    prop_assert!(last < first);
                }
                let mut by_run = RunIter::new(run.files.clone(), false);
                let mut merged = MergeIter::new(run.files.iter().map(|f| f.iter(false)).collect());
                by_run.seek_to_first().expect("seek");
                merged.seek_to_first().expect("seek");
                let mut expect = Vec::new();
                while merged.valid() {
                    expect.push(merged.key().to_vec());
                    merged.advance().expect("advance");
                }
                prop_assert_eq!(drain(&mut by_run), expect.clone());
                for &s in &seeks {
                    let target = first_on_row(&row(s));
                    by_run.seek(&target).expect("seek");
                    let want: Vec<Vec<u8>> = expect
                        .iter()
                        .filter(|k| compare_keys(k, &target) != Ordering::Less)
                        .cloned()
                        .collect();
                    prop_assert_eq!(drain(&mut by_run), want);
                    by_run.seek_for_prev(&target).expect("seek for prev");
                    let prev = expect
                        .iter()
                        .rfind(|k| compare_keys(k, &target) != Ordering::Greater);
                    prop_assert_eq!(by_run.valid().then(|| by_run.key().to_vec()), prev.cloned());
                    if let Some(k) = prev {
                        prop_assert!(KeyRef::parse(k).is_some());
                    }
                }
            }
        }
    }
}
