//! Merges several sorted sources into one sorted stream.
//!
//! HOT PATH for scans. Children are few (one memstore or two, plus the store files that
//! survive key-range, time-range and bloom pruning), so the smallest child is found by a
//! linear pass rather than a heap: fewer comparisons for the common 1–4 children.
//! Equal keys (the same cell in two files after an interrupted compaction) are both yielded;
//! the matcher above drops the duplicate.

use super::CellIter;
use cellar_model::key::{compare_keys, first_on_row, KeyRef};
use cellar_model::Result;
use std::cmp::Ordering;

/// The most a source is asked to read ahead of a scan's first seek (the readahead of a scan
/// that goes on is the store file iterator's).
pub const MAX_AHEAD: u64 = 1024 * 1024;

pub struct MergeIter {
    children: Vec<Box<dyn CellIter>>,
    current: Option<usize>,
}

impl MergeIter {
    pub fn new(children: Vec<Box<dyn CellIter>>) -> MergeIter {
        MergeIter {
            children,
            current: None,
        }
    }

    fn pick_smallest(&mut self) {
        let mut best: Option<(usize, &[u8])> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            let key = c.key();
            best = match best {
                Some((b, best_key)) if compare_keys(best_key, key) != Ordering::Greater => {
                    Some((b, best_key))
                }
                _ => Some((i, key)),
            };
        }
        self.current = best.map(|(i, _)| i);
    }

    /// The child at `current`, if any.
    #[inline]
    fn current_child(&self) -> Option<&dyn CellIter> {
        self.current
            .and_then(|i| self.children.get(i))
            .map(|c| &**c)
    }

    /// Adds a source; the iterator must be positioned again (seek) before use.
    pub fn push(&mut self, child: Box<dyn CellIter>) {
        self.children.push(child);
        self.current = None;
    }

    pub fn has_children(&self) -> bool {
        !self.children.is_empty()
    }

    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    /// The current key; callers check `valid()` first.
    pub fn key(&self) -> &[u8] {
        self.current_child().map_or(&[], |c| c.key())
    }

    pub fn value(&self) -> &[u8] {
        self.current_child().map_or(&[], |c| c.value())
    }

    /// Moves to the next entry.
    pub fn advance(&mut self) -> Result<()> {
        if let Some(c) = self.current.and_then(|i| self.children.get_mut(i)) {
            c.next()?;
            self.pick_smallest();
        }
        Ok(())
    }

    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.seek_ahead(target, 0, &[])
    }

    /// [`MergeIter::seek`] for a scan that expects to read about `rows` rows from the target
    /// on (its limit or its batch): every source that must go to the disk starts its reads
    /// before any waits on one, for the seek and for its share of those rows, so a seek into
    /// several files costs one wait on the disk, not one per file and per block. A source's
    /// share is its bytes times `rows` over the largest source's cells (the largest holds
    /// about every row once), at most `MAX_AHEAD`, and nothing from the key `stop` on
    /// (empty: no bound; a scan's stop row).
    pub fn seek_ahead(&mut self, target: &[u8], rows: u64, stop: &[u8]) -> Result<()> {
        let rows = if rows > 1 { rows } else { 0 };
        let (mut files, mut most_cells) = (0, 0);
        for e in self.children.iter().map(|c| c.extent()) {
            if e.cells > 0 {
                files += 1;
                most_cells = most_cells.max(e.cells);
            }
        }
        // A lone file (a Get's usual memstore and one file) reads at once: nothing to overlap.
        if rows > 0 || files > 1 {
            for c in &mut self.children {
                let ahead = match (rows, most_cells) {
                    (0, _) | (_, 0) => 0,
                    (rows, n) => {
                        let share = u128::from(c.extent().bytes) * u128::from(rows) / u128::from(n);
                        u64::try_from(share).unwrap_or(u64::MAX).min(MAX_AHEAD)
                    }
                };
                c.prefetch_seek(target, ahead, stop);
            }
        }
        for c in &mut self.children {
            c.seek(target)?;
        }
        self.pick_smallest();
        Ok(())
    }

    pub fn seek_to_first(&mut self) -> Result<()> {
        for c in &mut self.children {
            c.seek_to_first()?;
        }
        self.pick_smallest();
        Ok(())
    }

    /// The current key, parsed, if the iterator is on a cell of `row`; `None` past the row's
    /// last cell. A key that does not parse is corruption the checksums missed: an error,
    /// never skipped.
    pub fn key_in_row(&self, row: &[u8]) -> Result<Option<KeyRef<'_>>> {
        if !self.valid() {
            return Ok(None);
        }
        let key = KeyRef::parse(self.key()).ok_or_else(|| {
            cellar_model::Error::corruption("merged read", 0, "malformed internal key")
        })?;
        Ok((key.row() == row).then_some(key))
    }

    /// The largest row that sorts before `row` in any child (`None` if there is none).
    /// Leaves the iterator unpositioned: callers seek afterwards.
    pub fn last_row_before(&mut self, row: &[u8]) -> Result<Option<Vec<u8>>> {
        let target = first_on_row(row);
        let mut best: Option<Vec<u8>> = None;
        for c in &mut self.children {
            c.seek_for_prev(&target)?;
            if !c.valid() {
                continue;
            }
            if let Some(k) = KeyRef::parse(c.key()) {
                if best.as_deref().is_none_or(|b| k.row() > b) {
                    best = Some(k.row().to_vec());
                }
            }
        }
        self.current = None;
        Ok(best)
    }
}
