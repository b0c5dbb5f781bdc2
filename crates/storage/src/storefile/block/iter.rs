//! A cursor over one [`Block`].
//!
//! HOT PATH: every store-file read goes through here. No allocation per step: the current key
//! lives in one reused buffer (plus one scratch buffer for `seek_for_prev`'s look-ahead);
//! values are borrowed from the block. Keys are compared with `compare_keys` only.

use super::{Block, EntryPos};
use crate::storefile::coding::{DecodeResult, Malformed};
use cellar_model::key::compare_keys;
use std::cmp::Ordering;

/// Positioned on an entry when `valid()`; its key is materialised in `key`.
pub(crate) struct BlockIter {
    block: Block,
    key: Vec<u8>,
    /// Look-ahead buffer for `seek_for_prev`, swapped with `key` on advance.
    scratch: Vec<u8>,
    value_start: usize,
    value_end: usize,
    /// Offset of the current entry; `block.entries_end()` when invalid.
    current: usize,
    /// Offset of the entry after the current one.
    next: usize,
}

impl BlockIter {
    pub(crate) fn new(block: Block) -> BlockIter {
        let mut it = BlockIter {
            block: Block::default(),
            key: Vec::new(),
            scratch: Vec::new(),
            value_start: 0,
            value_end: 0,
            current: 0,
            next: 0,
        };
        it.set_block(block);
        it
    }

    /// Switches to another block, keeping the buffers. Unpositioned afterwards.
    pub(crate) fn set_block(&mut self, block: Block) {
        self.block = block;
        self.invalidate();
    }

    pub(crate) fn invalidate(&mut self) {
        self.current = self.block.entries_end();
        self.next = self.current;
        self.key.clear();
    }

    #[inline]
    pub(crate) fn valid(&self) -> bool {
        self.current < self.block.entries_end()
    }

    #[inline]
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    #[inline]
    pub(crate) fn value(&self) -> &[u8] {
        self.block
            .data()
            .get(self.value_start..self.value_end)
            .unwrap_or_default()
    }

    /// Decodes the entry at `pos` into `key` (whose first `shared` bytes are the previous
    /// key's) and makes it current.
    #[inline]
    fn step_to(&mut self, pos: usize) -> DecodeResult<()> {
        let e = self.block.decode_entry(pos, self.key.len())?;
        self.commit(pos, e, false)
    }

    #[inline]
    fn commit(&mut self, pos: usize, e: EntryPos, from_scratch: bool) -> DecodeResult<()> {
        if from_scratch {
            std::mem::swap(&mut self.key, &mut self.scratch);
        } else {
            let suffix = self
                .block
                .data()
                .get(e.suffix_start..e.suffix_end)
                .ok_or(Malformed("key out of range"))?;
            self.key.truncate(e.shared);
            self.key.extend_from_slice(suffix);
        }
        self.current = pos;
        self.value_start = e.suffix_end;
        self.value_end = e.value_end;
        self.next = e.value_end;
        Ok(())
    }

    /// Decodes into `scratch` the entry after the current one; `None` at the end.
    fn peek_next(&mut self) -> DecodeResult<Option<EntryPos>> {
        if self.next >= self.block.entries_end() {
            return Ok(None);
        }
        let e = self.block.decode_entry(self.next, self.key.len())?;
        let suffix = self
            .block
            .data()
            .get(e.suffix_start..e.suffix_end)
            .ok_or(Malformed("key out of range"))?;
        self.scratch.clear();
        self.scratch
            .extend_from_slice(self.key.get(..e.shared).unwrap_or_default());
        self.scratch.extend_from_slice(suffix);
        Ok(Some(e))
    }

    /// Positions at restart point `i`'s entry.
    fn seek_to_restart(&mut self, i: usize) -> DecodeResult<()> {
        let pos = self.block.restart_point(i)?;
        self.key.clear();
        self.step_to(pos)
    }

    /// Runs `f`, leaving the iterator invalid if it fails (the trait's error contract).
    fn guarded(&mut self, f: impl FnOnce(&mut Self) -> DecodeResult<()>) -> DecodeResult<()> {
        let r = f(self);
        if r.is_err() {
            self.invalidate();
        }
        r
    }

    pub(crate) fn seek_to_first(&mut self) -> DecodeResult<()> {
        self.guarded(|it| {
            if it.block.is_empty() {
                it.invalidate();
                return Ok(());
            }
            it.seek_to_restart(0)
        })
    }

    /// Positions at the last entry.
    pub(crate) fn seek_to_last(&mut self) -> DecodeResult<()> {
        self.guarded(|it| {
            if it.block.is_empty() {
                it.invalidate();
                return Ok(());
            }
            it.seek_to_restart(it.block.num_restarts() - 1)?;
            while it.next < it.block.entries_end() {
                it.step_to(it.next)?;
            }
            Ok(())
        })
    }

    pub(crate) fn next(&mut self) -> DecodeResult<()> {
        if !self.valid() {
            return Ok(());
        }
        self.guarded(|it| {
            if it.next >= it.block.entries_end() {
                it.invalidate();
                return Ok(());
            }
            it.step_to(it.next)
        })
    }

    /// The last restart point whose key compares as `keep` (`< target` or `<= target`), or
    /// `None` if even restart 0 does not. The block's hints narrow the search first.
    fn last_restart_where(
        &self,
        target: &[u8],
        keep: impl Fn(&[u8]) -> bool,
    ) -> DecodeResult<Option<usize>> {
        let n = self.block.num_restarts();
        // Restarts below `lo` keep, restarts from `hi` on do not; search the rest for the
        // first that does not.
        let (mut lo, mut hi) = self.block.hint_range(target)?.unwrap_or((0, n));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if keep(self.block.restart_key(mid)?) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo.checked_sub(1))
    }

    /// Positions at the first entry with key ≥ `target` (invalid if none).
    pub(crate) fn seek(&mut self, target: &[u8]) -> DecodeResult<()> {
        self.guarded(|it| {
            let start = it
                .last_restart_where(target, |k| compare_keys(k, target) == Ordering::Less)?
                .unwrap_or(0);
            if it.block.is_empty() {
                it.invalidate();
                return Ok(());
            }
            it.seek_to_restart(start)?;
            while compare_keys(&it.key, target) == Ordering::Less {
                if it.next >= it.block.entries_end() {
                    it.invalidate();
                    return Ok(());
                }
                it.step_to(it.next)?;
            }
            Ok(())
        })
    }

    /// Positions at the last entry with key ≤ `target` (invalid if every key is greater).
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) -> DecodeResult<()> {
        self.guarded(|it| {
            let Some(start) =
                it.last_restart_where(target, |k| compare_keys(k, target) != Ordering::Greater)?
            else {
                it.invalidate();
                return Ok(());
            };
            it.seek_to_restart(start)?;
            while let Some(e) = it.peek_next()? {
                if compare_keys(&it.scratch, target) == Ordering::Greater {
                    break;
                }
                it.commit(it.next, e, true)?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::BlockBuilder;
    use super::*;
    use bytes::Bytes;
    use cellar_model::key::make_key;
    use cellar_model::CellType;

    fn key(i: u32) -> Vec<u8> {
        // Rows share long prefixes; several cells per row exercise the non-byte order.
        make_key(
            format!("row{:05}", i / 3).as_bytes(),
            format!("q{}", i % 3).as_bytes(),
            1000 - u64::from(i),
            CellType::Put,
            u64::from(i),
        )
    }

    fn build(n: u32, interval: usize) -> Block {
        let mut b = BlockBuilder::new(interval);
        for i in 0..n {
            b.add(&key(i), format!("v{i}").as_bytes());
        }
        Block::new(Bytes::copy_from_slice(b.finish())).expect("valid block")
    }

    #[test]
    fn iterates_in_order() {
        for interval in [1, 2, 16] {
            let block = build(100, interval);
            assert_eq!(block.check_entries(), Ok(100));
            let mut it = BlockIter::new(block);
            it.seek_to_first().expect("first");
            for i in 0..100 {
                assert!(it.valid());
                assert_eq!(it.key(), key(i).as_slice());
                assert_eq!(it.value(), format!("v{i}").as_bytes());
                it.next().expect("next");
            }
            assert!(!it.valid());
        }
    }

    #[test]
    fn seeks_find_neighbours() {
        let block = build(50, 4);
        let mut it = BlockIter::new(block);
        for i in 0..50 {
            it.seek(&key(i)).expect("seek");
            assert_eq!(it.key(), key(i).as_slice());
            it.seek_for_prev(&key(i)).expect("seek_for_prev");
            assert_eq!(it.key(), key(i).as_slice());
        }
        // Before everything / after everything.
        let low = cellar_model::key::first_on_row(b"row");
        it.seek(&low).expect("seek");
        assert_eq!(it.key(), key(0).as_slice());
        it.seek_for_prev(&low).expect("seek_for_prev");
        assert!(!it.valid());
        let high = cellar_model::key::first_on_row(b"zzz");
        it.seek(&high).expect("seek");
        assert!(!it.valid());
        it.seek_for_prev(&high).expect("seek_for_prev");
        assert_eq!(it.key(), key(49).as_slice());
        it.seek_to_last().expect("last");
        assert_eq!(it.key(), key(49).as_slice());
    }

    #[test]
    fn empty_block_is_never_valid() {
        let mut b = BlockBuilder::new(16);
        let block = Block::new(Bytes::copy_from_slice(b.finish())).expect("valid");
        let mut it = BlockIter::new(block);
        it.seek_to_first().expect("first");
        assert!(!it.valid());
        it.seek(&key(1)).expect("seek");
        assert!(!it.valid());
        it.seek_for_prev(&key(1)).expect("seek_for_prev");
        assert!(!it.valid());
        it.seek_to_last().expect("last");
        assert!(!it.valid());
    }

    #[test]
    fn corrupt_entries_are_errors() {
        let block = build(40, 4);
        let data = block.data().clone();
        let end = block.entries_end();
        for i in 0..end {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = data.to_vec();
                bad[i] ^= flip;
                let Ok(b) = Block::new(Bytes::from(bad)) else {
                    continue;
                };
                // Must not panic; structure errors surface as Err.
                let _ = b.check_entries();
                let mut it = BlockIter::new(b);
                let _ = it.seek(&key(20));
                let _ = it.seek_for_prev(&key(20));
            }
        }
    }
}
