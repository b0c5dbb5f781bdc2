//! Builds one block: prefix-compressed entries with a restart point every
//! `restart_interval` entries, or sooner once [`RESTART_BYTES`] of entries follow the last
//! restart, so a reader can binary-search the restarts and then scan a short run.
//!
//! Why the byte bound: a seek's linear scan touches one cache line per entry, and with large
//! values every entry is a cache miss. Measured on 1 KiB values, a restart every 16 entries
//! made the scan the largest cost of a cached Get; restarting every ~2 KiB keeps the scan to
//! one or two entries while small entries still get 16-entry runs of prefix compression.
//!
//! The caller adds keys in ascending order; the builder does not compare them.

use super::{row_hint, HINTED};
use crate::storefile::coding::{get_slice, get_varint32, put_varint32, shared_prefix_len};
use cellar_model::key::KeyRef;

/// The row of the key stored in full at `pos` of `buf` (a restart entry), if it is a cell key.
fn restart_row(buf: &[u8], pos: usize) -> Option<&[u8]> {
    let mut p = pos;
    let _shared = get_varint32(buf, &mut p).ok()?;
    let unshared = get_varint32(buf, &mut p).ok()? as usize;
    let _value_len = get_varint32(buf, &mut p).ok()?;
    let key = get_slice(buf, &mut p, unshared).ok()?;
    KeyRef::parse(key).map(|k| k.row())
}

/// A run of entries after a restart point ends once it holds this many bytes.
pub(crate) const RESTART_BYTES: usize = 2048;

pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    /// Entries since the last restart point.
    counter: usize,
    /// Offset of the last restart point in `buf`.
    last_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// `restart_interval` is at least 1 (the caller validates options).
    pub(crate) fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            counter: 0,
            last_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry. Key and value lengths must fit in u32, and the block in u32 bytes
    /// (the writer bounds entry sizes).
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        let run_full = self.buf.len() - self.last_restart >= RESTART_BYTES;
        let shared = if self.counter < self.restart_interval && !run_full {
            shared_prefix_len(&self.last_key, key)
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.last_restart = self.buf.len();
            self.counter = 0;
            0
        };
        let suffix = key.get(shared..).unwrap_or_default();
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, suffix.len() as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(suffix);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(suffix);
        self.counter += 1;
        self.entries += 1;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    pub(crate) fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// The size [`BlockBuilder::finish`] would return now.
    pub(crate) fn estimated_size(&self) -> usize {
        // Restart offsets and hints, a short prefix, the count.
        self.buf.len() + 8 * self.restarts.len() + 16
    }

    /// Appends the restart array and returns the finished block. Call
    /// [`BlockBuilder::reset`] before adding again.
    pub(crate) fn finish(&mut self) -> &[u8] {
        // An empty block has no restart points at all (its count is 0).
        if self.entries == 0 {
            self.restarts.clear();
        }
        let hints = self.restart_hints();
        for r in &self.restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        let mut count = self.restarts.len() as u32;
        if let Some((prefix, hints)) = hints {
            for h in &hints {
                self.buf.extend_from_slice(&h.to_le_bytes());
            }
            self.buf.extend_from_slice(&prefix);
            self.buf.push(prefix.len() as u8);
            count |= HINTED;
        }
        self.buf.extend_from_slice(&count.to_le_bytes());
        &self.buf
    }

    /// The row prefix every key shares and each restart's hint, when every restart key and
    /// the last key are cell keys (index and data blocks; not bare byte strings).
    fn restart_hints(&self) -> Option<(Vec<u8>, Vec<u32>)> {
        if self.entries == 0 {
            return None;
        }
        let first = restart_row(&self.buf, 0)?;
        let last = KeyRef::parse(&self.last_key)?;
        let prefix_len = shared_prefix_len(first, last.row()).min(usize::from(u8::MAX));
        let prefix = first.get(..prefix_len)?;
        let hints = self
            .restarts
            .iter()
            .map(|&r| {
                restart_row(&self.buf, r as usize)
                    .filter(|row| row.starts_with(prefix))
                    .map(|row| row_hint(row, prefix_len))
            })
            .collect::<Option<Vec<u32>>>()?;
        // Keys added out of order (only a damaged block rebuilt by the fuzz harness) get no
        // hints: hints describe an ordered block.
        if hints.windows(2).any(|w| matches!(w, [a, b] if a > b)) {
            return None;
        }
        Some((prefix.to_vec(), hints))
    }

    /// Empties the builder, keeping its buffers' capacity.
    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_restart = 0;
        self.last_key.clear();
        self.entries = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_entries_get_restarts_by_bytes_small_ones_by_count() {
        let mut big = BlockBuilder::new(16);
        for i in 0..32u32 {
            big.add(format!("key{i:04}").as_bytes(), &[7u8; 1024]);
        }
        // Every entry of ~1 KiB: a restart every second entry.
        assert_eq!(big.restarts.len(), 16, "restarts {:?}", big.restarts);
        let mut small = BlockBuilder::new(16);
        for i in 0..32u32 {
            small.add(format!("key{i:04}").as_bytes(), b"v");
        }
        assert_eq!(small.restarts.len(), 2);
    }
}
