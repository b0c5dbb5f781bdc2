//! A block is the smallest unit of reading, checksumming, compression and caching in a store
//! file. This module is the decoded (uncompressed) form; see `docs/storefile-format.md`:
//!
//! ```text
//! entry*  |  restart: u32 LE × n  |  n: u32 LE
//! entry*  |  restart: u32 LE × n  |  hint: u32 LE × n  |  prefix  |  p: u8  |  n | 1<<31: u32 LE
//! entry = shared: varint | unshared: varint | value_len: varint | key[shared..] | value
//! ```
//!
//! The second form (format version 2) carries restart hints: `prefix` is the `p` row bytes
//! every key of the block shares, and restart `i`'s hint is the 4 row bytes after them
//! (big-endian, zero-padded). A seek narrows its binary search over the dense hints before it
//! decodes a restart key: each decoded restart key was a cache miss in a 64 KiB block (20 % of
//! a cached Get).
//!
//! Invariants checked by [`Block::new`] (so the iterator may rely on them): the restart array
//! fits, restart offsets are strictly increasing, the first is 0, and all lie inside the entry
//! area; hints do not decrease. Entries themselves are checked as they are decoded; that the
//! hints match the keys is checked by [`Block::check_entries`].

mod builder;
mod iter;

pub(crate) use builder::BlockBuilder;
pub(crate) use iter::BlockIter;

use super::coding::{get_slice, get_u32_le, get_varint32, row_chunk, DecodeResult, Malformed};
use bytes::Bytes;
use cellar_model::key::KeyRef;

/// Set in the trailing count of a block that carries restart hints.
pub(crate) const HINTED: u32 = 1 << 31;

/// A row's 4 bytes after `skip`, big-endian, zero-padded: the top half of its [`row_chunk`].
pub(crate) fn row_hint(row: &[u8], skip: usize) -> u32 {
    (row_chunk(row, skip) >> 32) as u32
}

/// An uncompressed block, cheap to clone (the bytes are shared).
#[derive(Clone, Debug, Default)]
pub(crate) struct Block {
    data: Bytes,
    /// Where the restart array begins (= end of the entries).
    restarts_start: usize,
    num_restarts: usize,
    /// Where the hint array begins, in a hinted block (0 otherwise: see `hinted`).
    hints_start: usize,
    /// The shared row prefix, `data[prefix.0..prefix.1]`, in a hinted block.
    prefix: (usize, usize),
    hinted: bool,
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
        if block.hinted {
            let mut prev = 0u32;
            for i in 0..num_restarts {
                let h = block.hint(i)?;
                if h < prev {
                    return Err(Malformed("restart hints out of order"));
                }
                prev = h;
            }
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
        let count = get_u32_le(&data, count_pos)?;
        let hinted = count & HINTED != 0;
        let num_restarts = (count & !HINTED) as usize;
        let too_large = Malformed("restart array larger than the block");
        let (hints_start, prefix) = if hinted {
            let p_pos = count_pos.checked_sub(1).ok_or(too_large)?;
            let p = usize::from(*data.get(p_pos).ok_or(too_large)?);
            let prefix_start = p_pos.checked_sub(p).ok_or(too_large)?;
            let hints_start = num_restarts
                .checked_mul(4)
                .and_then(|n| prefix_start.checked_sub(n))
                .ok_or(too_large)?;
            (hints_start, (prefix_start, p_pos))
        } else {
            (count_pos, (0, 0))
        };
        let restarts_start = num_restarts
            .checked_mul(4)
            .and_then(|n| hints_start.checked_sub(n))
            .ok_or(too_large)?;
        Ok(Block {
            data,
            restarts_start,
            num_restarts,
            hints_start: if hinted { hints_start } else { 0 },
            prefix,
            hinted,
        })
    }

    /// Restart `i`'s hint (a hinted block, `i < num_restarts`).
    #[inline]
    fn hint(&self, i: usize) -> DecodeResult<u32> {
        get_u32_le(&self.data, self.hints_start + 4 * i)
    }

    /// The first restart whose hint satisfies `pred` (false, then true, over the restarts).
    #[inline]
    fn first_hint_where(&self, pred: impl Fn(u32) -> bool) -> DecodeResult<usize> {
        let (mut lo, mut hi) = (0, self.num_restarts);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.hint(mid)?) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }

    /// In a hinted block, the restarts `[lo, hi)` that `target` cannot be told apart from by
    /// their hints: restarts before `lo` hold smaller keys than `target`, restarts from `hi`
    /// on larger ones. `None` when the block has no hints or `target` lacks the block's row
    /// prefix (then every restart may compare either way).
    #[inline]
    pub(crate) fn hint_range(&self, target: &[u8]) -> DecodeResult<Option<(usize, usize)>> {
        if !self.hinted {
            return Ok(None);
        }
        let Some(t) = KeyRef::parse(target) else {
            return Ok(None);
        };
        let prefix = self
            .data
            .get(self.prefix.0..self.prefix.1)
            .unwrap_or_default();
        let row = t.row();
        if !row.starts_with(prefix) {
            return Ok(None);
        }
        let c = row_hint(row, prefix.len());
        let lo = self.first_hint_where(|h| h >= c)?;
        let hi = self.first_hint_where(|h| h > c)?;
        Ok(Some((lo, hi)))
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
        if self.hinted {
            let prefix = self
                .data
                .get(self.prefix.0..self.prefix.1)
                .unwrap_or_default();
            for i in 0..self.num_restarts {
                let row = KeyRef::parse(self.restart_key(i)?)
                    .ok_or(Malformed("a hinted block's restart key does not parse"))?
                    .row();
                if !row.starts_with(prefix) || row_hint(row, prefix.len()) != self.hint(i)? {
                    return Err(Malformed("a restart hint does not match its key"));
                }
            }
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

    fn cell_block(rows: &[Vec<u8>], value_len: usize) -> Bytes {
        let mut b = BlockBuilder::new(16);
        for r in rows {
            for q in [&b"a"[..], b"b"] {
                let k = cellar_model::key::make_key(r, q, 5, cellar_model::CellType::Put, 1);
                b.add(&k, &vec![7u8; value_len]);
            }
        }
        Bytes::copy_from_slice(b.finish())
    }

    /// Seeks in a hinted block land where a scan of every entry says, for targets with and
    /// without the block's row prefix; a hint that does not match its key fails the check.
    #[test]
    fn hinted_blocks_seek_like_a_linear_scan() {
        use cellar_model::key::{compare_keys, make_key};
        use cellar_model::CellType;
        use std::cmp::Ordering;
        let rows: Vec<Vec<u8>> = (0..60u32)
            .map(|i| format!("user{:06}", i * 7).into_bytes())
            .collect();
        let data = cell_block(&rows, 300);
        let block = Block::new(data.clone()).expect("block");
        assert!(block.hinted && block.num_restarts() > 8);
        assert_eq!(block.check_entries().expect("entries"), 120);
        let mut all = Vec::new();
        let mut it = BlockIter::new(block.clone());
        it.seek_to_first().expect("first");
        while it.valid() {
            all.push(it.key().to_vec());
            it.next().expect("next");
        }
        let mut targets: Vec<Vec<u8>> = Vec::new();
        for i in 0..450u32 {
            for q in [&b""[..], b"a", b"c"] {
                targets.push(make_key(
                    format!("user{i:06}").as_bytes(),
                    q,
                    5,
                    CellType::Put,
                    1,
                ));
            }
        }
        for r in [&b""[..], b"a", b"user", b"user0", b"zz", b"user000420\0"] {
            targets.push(make_key(r, b"", 5, CellType::Put, 1));
        }
        for t in &targets {
            it.seek(t).expect("seek");
            let want = all.iter().find(|k| compare_keys(k, t) != Ordering::Less);
            assert_eq!(
                it.valid().then(|| it.key().to_vec()).as_ref(),
                want,
                "seek {t:?}"
            );
            it.seek_for_prev(t).expect("seek_for_prev");
            let want = all
                .iter()
                .rev()
                .find(|k| compare_keys(k, t) != Ordering::Greater);
            assert_eq!(
                it.valid().then(|| it.key().to_vec()).as_ref(),
                want,
                "prev {t:?}"
            );
        }
        // Change restart 3's hint to its neighbour's: still in order, but wrong.
        let mut bad = data.to_vec();
        let at = block.hints_start + 4 * 3;
        let next = bad[at + 4..at + 8].to_vec();
        bad[at..at + 4].copy_from_slice(&next);
        let bad = Block::new(Bytes::from(bad)).expect("hints still ascend");
        let e = bad.check_entries().expect_err("the check reads the keys");
        assert!(e.0.contains("hint"), "{}", e.0);
    }

    #[test]
    fn hints_out_of_order_are_refused() {
        let rows: Vec<Vec<u8>> = (0..40u32)
            .map(|i| format!("r{i:04}").into_bytes())
            .collect();
        let data = cell_block(&rows, 1500);
        let block = Block::new(data.clone()).expect("block");
        let mut bad = data.to_vec();
        let at = block.hints_start;
        bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Block::new(Bytes::from(bad)).is_err());
    }
}
