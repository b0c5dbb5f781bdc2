//! The block index: one entry per data block, keyed by the block's last key, valued by its
//! handle. On disk it is an ordinary block (prefix-compressed keys, restart points) whose
//! values are `offset: varint64 | size: varint64`. It is loaded whole when a file opens.

use super::block::{Block, BlockBuilder, BlockIter};
use super::coding::{get_varint64, put_varint64, DecodeResult, Malformed};
use super::footer::BlockHandle;
use cellar_model::key::compare_keys;
use std::cmp::Ordering;

/// Index entries are few and decoded once; a short restart interval buys nothing.
const INDEX_RESTART_INTERVAL: usize = 16;

/// Accumulates index entries as the writer finishes data blocks.
pub(crate) struct IndexBuilder {
    block: BlockBuilder,
    value: Vec<u8>,
}

impl IndexBuilder {
    pub(crate) fn new() -> IndexBuilder {
        IndexBuilder {
            block: BlockBuilder::new(INDEX_RESTART_INTERVAL),
            value: Vec::with_capacity(20),
        }
    }

    pub(crate) fn add(&mut self, last_key: &[u8], handle: BlockHandle) {
        self.value.clear();
        put_varint64(&mut self.value, handle.offset);
        put_varint64(&mut self.value, handle.size);
        self.block.add(last_key, &self.value);
    }

    pub(crate) fn finish(&mut self) -> &[u8] {
        self.block.finish()
    }
}

/// The loaded index. Invariants (checked by [`BlockIndex::decode`]): keys strictly ascending;
/// blocks ascending, non-overlapping and ending at or before `data_end`.
#[derive(Debug, Default)]
pub(crate) struct BlockIndex {
    /// All last keys, concatenated; entry `i`'s key is `keys[ends[i-1]..ends[i]]`.
    keys: Vec<u8>,
    ends: Vec<usize>,
    handles: Vec<BlockHandle>,
}

impl BlockIndex {
    /// Decodes an index block. `data_end` is where the data-block area ends.
    pub(crate) fn decode(block: Block, data_end: u64) -> DecodeResult<BlockIndex> {
        let mut idx = BlockIndex::default();
        let mut it = BlockIter::new(block);
        it.seek_to_first()?;
        let mut prev_end = 0u64;
        while it.valid() {
            let mut p = 0;
            let v = it.value();
            let handle = BlockHandle {
                offset: get_varint64(v, &mut p)?,
                size: get_varint64(v, &mut p)?,
            };
            let end = handle.end().ok_or(Malformed("index handle overflows"))?;
            if handle.offset < prev_end || end > data_end {
                return Err(Malformed("index entry points outside the data area"));
            }
            prev_end = end;
            if let Some(last) = idx.len().checked_sub(1) {
                if compare_keys(idx.key(last), it.key()) != Ordering::Less {
                    return Err(Malformed("index keys out of order"));
                }
            }
            idx.keys.extend_from_slice(it.key());
            idx.ends.push(idx.keys.len());
            idx.handles.push(handle);
            it.next()?;
        }
        Ok(idx)
    }

    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    /// The last key of block `i` (< `len()`).
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let start = i
            .checked_sub(1)
            .and_then(|j| self.ends.get(j))
            .copied()
            .unwrap_or(0);
        let end = self.ends.get(i).copied().unwrap_or(start);
        self.keys.get(start..end).unwrap_or_default()
    }

    pub(crate) fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.handles.get(i).copied()
    }

    /// The first block whose last key is ≥ `target`: the only block that can hold the first
    /// entry ≥ `target`. `len()` if every block ends before `target`.
    pub(crate) fn find(&self, target: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if compare_keys(self.key(mid), target) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}
