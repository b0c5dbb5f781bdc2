//! A block is the smallest unit of reading, checksumming, compression and caching in a store
//! file. This module is the decoded (uncompressed) form; see `docs/storefile-format.md`:
//!
//! ```text
//! entry*  |  restart: u32 LE × n  |  n: u32 LE
//! entry = shared: varint | unshared: varint | value_len: varint | key[shared..] | value
//! ```
//!
//! Invariants checked by [`Block::new`] (so the iterator may rely on them): the restart array
//! fits, restart offsets are strictly increasing, the first is 0, and all lie inside the entry
//! area. Entries themselves are checked as they are decoded.

mod builder;
mod iter;

pub(crate) use builder::BlockBuilder;
pub(crate) use iter::BlockIter;

use super::coding::{get_slice, get_u32_le, get_varint32, DecodeResult, Malformed};
use bytes::Bytes;

/// An uncompressed block, cheap to clone (the bytes are shared).
#[derive(Clone, Debug, Default)]
pub(crate) struct Block {
    data: Bytes,
    /// Where the restart array begins (= end of the entries).
    restarts_start: usize,
    num_restarts: usize,
}

/// Where an entry's parts lie in the block, as decoded by [`Block::decode_entry`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntryPos {
    pub shared: usize,
    pub suffix_start: usize,
    pub suffix_end: usize,
    pub value_end: usize,
}

impl Block {
    /// Parses the restart array of `data`, checking it against the invariants above.
    pub(crate) fn new(data: Bytes) -> DecodeResult<Block> {
        let block = Block::from_cached(data)?;
        let (data, restarts_start, num_restarts) =
            (&block.data, block.restarts_start, block.num_restarts);
        if num_restarts == 0 && restarts_start != 0 {
            return Err(Malformed("block has entries but no restart points"));
        }
        let mut prev: Option<usize> = None;
        for i in 0..num_restarts {
            let r = get_u32_le(data, restarts_start + 4 * i)? as usize;
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p && r < restarts_start,
            };
            if !ok {
                return Err(Malformed("restart points out of order or out of range"));
            }
            prev = Some(r);
        }
        Ok(block)
    }

    /// Parses only the restart count, for a block that [`Block::new`] accepted before (it is
    /// in the block cache only if so): re-checking the restart array on every cache hit cost
    /// 5 % of a cached Get (perf).
    /// Accessors stay bounds-checked, so even a wrong block could only yield errors.
    pub(crate) fn from_cached(data: Bytes) -> DecodeResult<Block> {
        let count_pos = data
            .len()
            .checked_sub(4)
            .ok_or(Malformed("block shorter than its restart count"))?;
        let num_restarts = get_u32_le(&data, count_pos)? as usize;
        let restarts_start = num_restarts
            .checked_mul(4)
            .and_then(|n| count_pos.checked_sub(n))
            .ok_or(Malformed("restart array larger than the block"))?;
        Ok(Block {
            data,
            restarts_start,
            num_restarts,
        })
    }

    /// The block's bytes (restart array included).
    pub(crate) fn data(&self) -> &Bytes {
        &self.data
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.num_restarts == 0
    }

    pub(crate) fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// End of the entry area.
    pub(crate) fn entries_end(&self) -> usize {
        self.restarts_start
    }

    /// Offset of restart point `i` (< `num_restarts`).
    #[inline]
    pub(crate) fn restart_point(&self, i: usize) -> DecodeResult<usize> {
        Ok(get_u32_le(&self.data, self.restarts_start + 4 * i)? as usize)
    }

    /// Decodes the entry header at `pos`, checking that it lies inside the entry area and
    /// shares no more than `prev_key_len` bytes with the previous key.
    #[inline]
    pub(crate) fn decode_entry(&self, pos: usize, prev_key_len: usize) -> DecodeResult<EntryPos> {
        let area = self
            .data
            .get(..self.restarts_start)
            .ok_or(Malformed("entry area out of range"))?;
        let mut p = pos;
        let shared = get_varint32(area, &mut p)? as usize;
        let unshared = get_varint32(area, &mut p)? as usize;
        let value_len = get_varint32(area, &mut p)? as usize;
        if shared > prev_key_len {
            return Err(Malformed(
                "entry shares more bytes than the previous key has",
            ));
        }
        let suffix_start = p;
        get_slice(area, &mut p, unshared)?;
        let suffix_end = p;
        get_slice(area, &mut p, value_len)?;
        Ok(EntryPos {
            shared,
            suffix_start,
            suffix_end,
            value_end: p,
        })
    }

    /// The full key stored at restart point `i` (restart entries share nothing).
    #[inline]
    pub(crate) fn restart_key(&self, i: usize) -> DecodeResult<&[u8]> {
        let pos = self.restart_point(i)?;
        let e = self.decode_entry(pos, 0)?;
        self.data
            .get(e.suffix_start..e.suffix_end)
            .ok_or(Malformed("restart key out of range"))
    }

    /// Decodes every entry, checking the structure (used by `verify`): entries fill the entry
    /// area exactly, and every restart point is the start of an entry that shares nothing
    /// with the previous key. Returns the count.
    ///
    /// The restart check matters for blocks whose checksum holds but whose restart array does
    /// not match the entries (a writer bug): seeks start at restart points and would read
    /// other keys than a forward scan (found by the `storefile_block` fuzz target).
    pub(crate) fn check_entries(&self) -> DecodeResult<usize> {
        let (mut pos, mut key_len, mut restart, mut n) = (0, 0, 0, 0);
        while pos < self.restarts_start {
            let e = self.decode_entry(pos, key_len)?;
            let next_restart = if restart < self.num_restarts {
                Some(self.restart_point(restart)?)
            } else {
                None
            };
            if next_restart == Some(pos) {
                if e.shared != 0 {
                    return Err(Malformed(
                        "a restart entry shares bytes with the previous key",
                    ));
                }
                restart += 1;
            } else if next_restart.is_some_and(|r| r < pos) {
                return Err(Malformed("a restart point lies inside an entry"));
            }
            key_len = e.shared + (e.suffix_end - e.suffix_start);
            pos = e.value_end;
            n += 1;
        }
        if restart != self.num_restarts {
            return Err(Malformed("a restart point lies past the last entry"));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_restart_arrays() {
        assert!(Block::new(Bytes::from_static(&[])).is_err());
        assert!(Block::new(Bytes::from_static(&[0, 0, 0, 0])).is_ok());
        // Two restarts claimed in a 4-byte block.
        assert!(Block::new(Bytes::from_static(&[2, 0, 0, 0])).is_err());
        // Entries but zero restarts.
        assert!(Block::new(Bytes::from_static(&[9, 0, 0, 0, 0])).is_err());
        // First restart not at 0.
        assert!(Block::new(Bytes::from_static(&[0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0])).is_err());
        // Huge count overflows.
        assert!(Block::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff])).is_err());
    }

    /// Found by the `storefile_block` fuzz target: a block whose restart array passes
    /// `Block::new` but whose last restart point starts no entry of the forward scan, so
    /// `seek_to_last` read another last key than iterating did. `check_entries` (and so
    /// `StoreFile::verify`) now reports it.
    #[test]
    fn restart_points_that_start_no_entry_fail_the_entry_check() {
        let input = include_bytes!(
            "../../../../fuzz/regressions/storefile_block/crash-c5a50ac10f02a2e0ee02d31b5109d41178251796"
        );
        let block =
            Block::new(Bytes::copy_from_slice(&input[1..])).expect("restart array is ordered");
        let e = block
            .check_entries()
            .expect_err("restart points do not match the entries");
        assert!(e.0.contains("restart"), "{}", e.0);
        let mut it = BlockIter::new(block.clone());
        it.seek_to_first().expect("first");
        let mut last = Vec::new();
        while it.valid() {
            last = it.key().to_vec();
            it.next().expect("next");
        }
        it.seek_to_last().expect("last");
        assert_ne!(it.key(), &last[..], "the damage this check exists for");
        // A well-formed block passes.
        let mut b = BlockBuilder::new(2);
        for k in [&b"a"[..], b"ab", b"abc", b"b"] {
            b.add(k, b"v");
        }
        let good = Block::new(Bytes::copy_from_slice(b.finish())).expect("block");
        assert_eq!(good.check_entries().expect("well-formed"), 4);
    }
}
