//! The store-file iterator: a block index position plus a [`BlockIter`] inside that block.
//!
//! HOT PATH: `next()` stays inside the current block (no allocation: the block iterator reuses
//! its key buffer) and fetches a block only when crossing into it, once per visit. No logging,
//! no locks other than the block cache's shard lock on a block fetch.

use super::block::BlockIter;
use super::coding::DecodeResult;
use super::StoreFile;
use crate::iter::CellIter;
use cellar_model::Result;
use std::sync::Arc;

/// Iterator over a [`StoreFile`].
pub struct StoreFileIter {
    file: Arc<StoreFile>,
    fill_cache: bool,
    /// The data block loaded into `block`, if any.
    loaded: Option<usize>,
    block: BlockIter,
}

impl StoreFileIter {
    pub(crate) fn new(file: Arc<StoreFile>, fill_cache: bool) -> StoreFileIter {
        StoreFileIter {
            file,
            fill_cache,
            loaded: None,
            block: BlockIter::new(Default::default()),
        }
    }

    /// Makes data block `i` current (a no-op if it already is), leaving it unpositioned.
    fn load(&mut self, i: usize) -> Result<()> {
        if self.loaded != Some(i) {
            self.loaded = None;
            let block = self.file.data_block(i, self.fill_cache)?;
            self.block.set_block(block);
            self.loaded = Some(i);
        }
        Ok(())
    }

    /// Converts a block-decoding defect into an error naming the file and the block.
    fn check(&mut self, r: DecodeResult<()>) -> Result<()> {
        r.map_err(|m| {
            let offset = self.loaded.map_or(0, |i| self.file.block_offset(i));
            self.block.invalidate();
            m.at(self.file.path().display(), offset)
        })
    }

    /// From an unpositioned state at the end of block `i - 1`, moves to the first entry of the
    /// first non-empty block from `i` on (invalid if none).
    fn forward_from(&mut self, mut i: usize) -> Result<()> {
        self.block.invalidate();
        while i < self.file.index().len() {
            self.load(i)?;
            let r = self.block.seek_to_first();
            self.check(r)?;
            if self.block.valid() {
                return Ok(());
            }
            i += 1;
        }
        Ok(())
    }

    /// Moves to the last entry of the last non-empty block at or before `i`.
    fn backward_from(&mut self, i: usize) -> Result<()> {
        self.block.invalidate();
        for j in (0..=i).rev() {
            self.load(j)?;
            let r = self.block.seek_to_last();
            self.check(r)?;
            if self.block.valid() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Runs a positioning step; on error leaves the iterator invalid (the trait's contract).
    fn guarded(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = f(self);
        if r.is_err() {
            self.block.invalidate();
        }
        r
    }
}

impl CellIter for StoreFileIter {
    #[inline]
    fn valid(&self) -> bool {
        self.block.valid()
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.block.key()
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.block.value()
    }

    fn next(&mut self) -> Result<()> {
        if !self.block.valid() {
            return Ok(());
        }
        let r = self.block.next();
        self.check(r)?;
        if self.block.valid() {
            return Ok(());
        }
        let next_block = self.loaded.map_or(usize::MAX, |i| i + 1);
        self.guarded(|it| it.forward_from(next_block))
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.guarded(|it| {
            let i = it.file.index().find(target);
            if i >= it.file.index().len() {
                it.block.invalidate();
                return Ok(());
            }
            it.load(i)?;
            let r = it.block.seek(target);
            it.check(r)?;
            if !it.block.valid() {
                // Only if the index key overstates the block; stay correct regardless.
                it.forward_from(i + 1)?;
            }
            Ok(())
        })
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.guarded(|it| {
            let n = it.file.index().len();
            if n == 0 {
                it.block.invalidate();
                return Ok(());
            }
            let i = it.file.index().find(target);
            if i >= n {
                // Every key is ≤ target: the answer is the file's last entry.
                return it.backward_from(n - 1);
            }
            it.load(i)?;
            let r = it.block.seek_for_prev(target);
            it.check(r)?;
            if !it.block.valid() {
                // Target falls before block i's first key: the previous block's last entry.
                match i.checked_sub(1) {
                    Some(j) => it.backward_from(j)?,
                    None => it.block.invalidate(),
                }
            }
            Ok(())
        })
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.guarded(|it| it.forward_from(0))
    }
}
