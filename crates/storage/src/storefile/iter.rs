//! The store-file iterator: a block index position plus a [`BlockIter`] inside that block.
//!
//! HOT PATH: `next()` stays inside the current block (no allocation: the block iterator reuses
//! its key buffer) and fetches a block only when crossing into it, once per visit. No logging,
//! no locks other than the block cache's shard lock on a block fetch.

use super::block::BlockIter;
use super::coding::DecodeResult;
use super::StoreFile;
use crate::iter::{CellIter, Extent};
use cellar_model::Result;
use std::sync::Arc;

/// Readahead of an iterator that reads blocks in order: the first window after this many
/// blocks in a row (a Get or a short scan reads one or two, and asks for nothing more)...
const READAHEAD_AFTER: u32 = 2;
/// ... of this many bytes, doubling with each block read in order ...
const READAHEAD_START: u64 = 128 * 1024;
/// ... up to this much ahead for scans that fill the block cache, and for those that do not
/// (compactions, full scans) this much.
const READAHEAD_MAX: u64 = 1024 * 1024;
const READAHEAD_MAX_UNCACHED: u64 = 2 * 1024 * 1024;

// The constructor lives beside the iterator it makes, so the reader does not depend on it.
impl StoreFile {
    /// An unpositioned iterator. With `fill_cache` false, blocks it reads are not inserted
    /// into the block cache (large scans), though cached blocks are still used.
    pub fn iter(self: &Arc<Self>, fill_cache: bool) -> StoreFileIter {
        StoreFileIter::new(Arc::clone(self), fill_cache)
    }
}

/// Iterator over a [`StoreFile`].
pub struct StoreFileIter {
    file: Arc<StoreFile>,
    fill_cache: bool,
    /// The data block loaded into `block`, if any.
    loaded: Option<usize>,
    block: BlockIter,
    /// Blocks loaded in order so far (each the one after the last).
    in_order: u32,
    /// The file offset readahead has been asked for up to.
    ahead_to: u64,
    /// What `prefetch_seek` asked for past the seek's block, up to where: the readahead of
    /// the blocks read in order after that seek starts from there.
    seek_ahead_to: u64,
}

impl StoreFileIter {
    pub(crate) fn new(file: Arc<StoreFile>, fill_cache: bool) -> StoreFileIter {
        StoreFileIter {
            file,
            fill_cache,
            loaded: None,
            block: BlockIter::new(Default::default()),
            in_order: 0,
            ahead_to: 0,
            seek_ahead_to: 0,
        }
    }

    /// Makes data block `i` current (a no-op if it already is), leaving it unpositioned.
    fn load(&mut self, i: usize) -> Result<()> {
        if self.loaded != Some(i) {
            self.read_ahead(i);
            self.loaded = None;
            let block = self.file.data_block(i, self.fill_cache)?;
            self.block.set_block(block);
            self.loaded = Some(i);
        }
        Ok(())
    }

    /// Before block `i` is loaded: once blocks are being read in order, asks the file to read
    /// a growing window past `i` ahead of use (store files are read without the kernel's own
    /// readahead; see `fs/local.rs`).
    fn read_ahead(&mut self, i: usize) {
        match self.loaded {
            Some(prev) if prev + 1 == i => self.in_order = self.in_order.saturating_add(1),
            _ => {
                // A jump (a seek): what was asked for ahead of the old position says nothing
                // about the new one; what the seek asked for ahead of itself does.
                self.in_order = 0;
                self.ahead_to = std::mem::take(&mut self.seek_ahead_to);
            }
        }
        if self.in_order < READAHEAD_AFTER {
            return;
        }
        let max = if self.fill_cache {
            READAHEAD_MAX
        } else {
            READAHEAD_MAX_UNCACHED
        };
        let window = READAHEAD_START
            .checked_shl(self.in_order - READAHEAD_AFTER)
            .unwrap_or(max)
            .min(max);
        let at = self.file.block_offset(i);
        // Asked again once less than half a window is left ahead of the block.
        if at + window / 2 < self.ahead_to {
            return;
        }
        let from = at.max(self.ahead_to);
        self.file.prefetch(from, at + window - from);
        self.ahead_to = at + window;
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

    fn prefetch_seek(&mut self, target: &[u8], ahead: u64, stop: &[u8]) {
        let index = self.file.index();
        let i = index.find(target);
        // The block in hand (the next column of the same row, say) needs no read.
        let Some(first) = index.handle(i).filter(|_| self.loaded != Some(i)) else {
            return;
        };
        self.file.prefetch_block(i);
        self.seek_ahead_to = 0;
        // Where in block i the target lies is unknown until it is read: its middle is the
        // guess, and the blocks the next `ahead` bytes reach from there are asked for too.
        if ahead == 0 {
            return;
        }
        let end = first
            .offset
            .saturating_add(first.size / 2)
            .saturating_add(ahead);
        // The block that holds the stop key (or the first past it) is the last a scan reads.
        let last = if stop.is_empty() {
            usize::MAX
        } else {
            index.find(stop)
        };
        let mut j = i + 1;
        while let Some(h) = index.handle(j).filter(|h| j <= last && h.offset < end) {
            self.file.prefetch_block(j);
            self.seek_ahead_to = h.end().unwrap_or(u64::MAX);
            j += 1;
        }
    }

    fn extent(&self) -> Extent {
        let meta = self.file.meta();
        Extent {
            bytes: meta.file_size,
            cells: meta.cell_count,
        }
    }
}
