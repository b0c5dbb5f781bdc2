//! Cell blocks: cells back to back in the KeyValue layout of HBase's `KeyValueCodec`, so the
//! HBase front end and the native protocol share one encoding.
//!
//! ```text
//! cell  = u32 total (= 8 + key_len + value_len) | u32 key_len | u32 value_len | key | value
//! key   = u16 row_len | row | u8 family_len | family | qualifier | u64 timestamp | u8 type
//! ```
//! All integers big-endian; the qualifier's length is what remains of the key. Decoded cells
//! share the block's buffer (no copies).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use cellar_model::{Cell, CellRef, CellSink, CellType};

/// Bytes the key takes besides row, family and qualifier.
const KEY_INFRA: usize = 2 + 1 + 8 + 1;
/// The smallest encoded cell: the three lengths and a key of empty row, family and qualifier.
pub const MIN_CELL_LEN: usize = 12 + KEY_INFRA;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed cell block at byte {offset}: {reason}")]
pub struct CellBlockError {
    pub offset: usize,
    pub reason: String,
}

/// A block in the layout of HBase's `KeyValueCodecWithTags` (what HBase's replication
/// sources send) in the layout above: each cell with tags ends, after its value, in a u16
/// tags length and the tags, counted in its total. Cellar keeps no tags, so they are dropped;
/// a block without any comes back as it is, uncopied. A cell whose lengths disagree is an
/// error naming its offset.
pub fn without_tags(block: Bytes) -> Result<Bytes, CellBlockError> {
    // Each cell's bytes after its total, without the tags.
    let mut cells = Vec::new();
    let mut tagged = false;
    let mut at = 0usize;
    while at < block.len() {
        let err = |reason: &str| CellBlockError {
            offset: at,
            reason: reason.to_string(),
        };
        let Some(mut h) = block.get(at..at + 12) else {
            return Err(err("truncated cell header"));
        };
        let total = h.get_u32() as usize;
        let plain = 8usize
            .checked_add(h.get_u32() as usize)
            .and_then(|n| n.checked_add(h.get_u32() as usize))
            .ok_or_else(|| err("cell lengths overflow"))?;
        let end = at
            .checked_add(4)
            .and_then(|n| n.checked_add(total))
            .filter(|&end| end <= block.len())
            .ok_or_else(|| err("cell overruns the block"))?;
        let tail = total
            .checked_sub(plain)
            .ok_or_else(|| err("inconsistent cell lengths"))?;
        if tail > 0 {
            let tags_len = block
                .get(at + 4 + plain..at + 6 + plain)
                .filter(|_| tail >= 2)
                .map(|mut b| b.get_u16() as usize)
                .ok_or_else(|| err("tags length cut short"))?;
            if tail != 2 + tags_len {
                return Err(err("tags length disagrees with the cell's"));
            }
            tagged = true;
        }
        cells.push(block.slice(at + 4..at + 4 + plain));
        at = end;
    }
    if !tagged {
        return Ok(block);
    }
    let mut out = BytesMut::with_capacity(block.len());
    for cell in cells {
        // At most the cell's u32 total.
        out.put_u32(cell.len() as u32);
        out.extend_from_slice(&cell);
    }
    Ok(out.freeze())
}

/// The encoded size of one cell.
pub fn encoded_len(row: &[u8], family: &[u8], qualifier: &[u8], value: &[u8]) -> usize {
    12 + KEY_INFRA + row.len() + family.len() + qualifier.len() + value.len()
}

/// Appends one cell. Rows longer than 64 KiB − 1 and families longer than 255 bytes cannot be
/// encoded; the model refuses them before they get here.
pub fn put_cell(
    out: &mut BytesMut,
    row: &[u8],
    family: &[u8],
    qualifier: &[u8],
    timestamp: u64,
    cell_type: CellType,
    value: &[u8],
) {
    let key_len = KEY_INFRA + row.len() + family.len() + qualifier.len();
    out.reserve(12 + key_len + value.len());
    out.put_u32((8 + key_len + value.len()) as u32);
    out.put_u32(key_len as u32);
    out.put_u32(value.len() as u32);
    out.put_u16(row.len() as u16);
    out.put_slice(row);
    out.put_u8(family.len() as u8);
    out.put_slice(family);
    out.put_slice(qualifier);
    out.put_u64(timestamp);
    out.put_u8(cell_type.code());
    out.put_slice(value);
}

/// Appends a cell of the model.
pub fn put(out: &mut BytesMut, c: &Cell) {
    put_cell(
        out,
        &c.row,
        &c.family,
        &c.qualifier,
        c.timestamp,
        c.cell_type,
        &c.value,
    )
}

/// Writes the cells a read selects straight into a cell block, counting them.
#[derive(Debug, Default)]
pub struct CellBlockWriter {
    block: BytesMut,
    count: u32,
}

impl CellSink for CellBlockWriter {
    fn cell(&mut self, c: CellRef<'_>) {
        if self.count == 0 {
            // Room for about eight cells like the first: a typical row grows it once at most.
            self.block
                .reserve(8 * encoded_len(c.row, c.family, c.qualifier, c.value));
        }
        put_cell(
            &mut self.block,
            c.row,
            c.family,
            c.qualifier,
            c.timestamp,
            c.cell_type,
            c.value,
        );
        self.count += 1;
    }
}

impl CellBlockWriter {
    /// The number of cells written, and the block.
    pub fn finish(self) -> (u32, BytesMut) {
        (self.count, self.block)
    }
}

/// Reads cells one by one from a block.
pub struct CellReader {
    block: Bytes,
    offset: usize,
}

impl CellReader {
    pub fn new(block: Bytes) -> CellReader {
        CellReader { block, offset: 0 }
    }

    /// Whether every cell has been read.
    pub fn is_empty(&self) -> bool {
        self.block.is_empty()
    }

    /// The next cell, `Ok(None)` at the end. `seq_id` of decoded cells is 0.
    pub fn next_cell(&mut self) -> Result<Option<Cell>, CellBlockError> {
        if self.block.is_empty() {
            return Ok(None);
        }
        let at = self.offset;
        let err = |reason: &str| CellBlockError {
            offset: at,
            reason: reason.to_string(),
        };
        let Some(header) = self.block.first_chunk::<12>() else {
            return Err(err("truncated cell header"));
        };
        let mut h: &[u8] = header;
        let total = h.get_u32() as usize;
        let key_len = h.get_u32() as usize;
        let value_len = h.get_u32() as usize;
        if total != 8 + key_len + value_len || key_len < KEY_INFRA {
            return Err(err("inconsistent cell lengths"));
        }
        if self.block.len() < 4 + total {
            return Err(err("cell overruns the block"));
        }
        let mut cell = self.block.split_to(4 + total);
        self.offset += 4 + total;
        cell.advance(12);
        let mut key = cell.split_to(key_len);
        let value = cell;
        let row_len = key.get_u16() as usize;
        if key.len() < row_len + 1 + 9 {
            return Err(err("row overruns the key"));
        }
        let row = key.split_to(row_len);
        let family_len = key.get_u8() as usize;
        if key.len() < family_len + 9 {
            return Err(err("family overruns the key"));
        }
        let family = key.split_to(family_len);
        let qualifier = key.split_to(key.len() - 9);
        let timestamp = key.get_u64();
        let code = key.get_u8();
        let cell_type =
            CellType::from_code(code).ok_or_else(|| err(&format!("unknown cell type {code}")))?;
        Ok(Some(Cell {
            row,
            family,
            qualifier,
            timestamp,
            cell_type,
            seq_id: 0,
            value,
        }))
    }

    /// The number of cells the rest of the block can hold at most: a bound for buffers sized
    /// from a count the peer sent.
    pub fn max_cells(&self) -> usize {
        self.block.len() / MIN_CELL_LEN
    }

    /// The next `n` cells; fewer is an error. `n` comes from the peer: the buffer is sized by
    /// what the block can hold, not by `n`.
    pub fn take(&mut self, n: usize) -> Result<Vec<Cell>, CellBlockError> {
        let mut cells = Vec::with_capacity(n.min(self.max_cells()));
        for _ in 0..n {
            match self.next_cell()? {
                Some(c) => cells.push(c),
                None => {
                    return Err(CellBlockError {
                        offset: self.offset,
                        reason: format!("expected {n} cells, the block holds {}", cells.len()),
                    })
                }
            }
        }
        Ok(cells)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(row: &str, q: &str, ts: u64, t: CellType, v: &str) -> Cell {
        Cell {
            row: Bytes::copy_from_slice(row.as_bytes()),
            family: Bytes::from_static(b"cf"),
            qualifier: Bytes::copy_from_slice(q.as_bytes()),
            timestamp: ts,
            cell_type: t,
            seq_id: 0,
            value: Bytes::copy_from_slice(v.as_bytes()),
        }
    }

    /// `c` as HBase's `KeyValueCodecWithTags` writes a cell carrying `tags`.
    fn with_tags(c: &Cell, tags: &[u8]) -> Vec<u8> {
        let mut plain = BytesMut::new();
        put(&mut plain, c);
        let mut out = Vec::new();
        let total = plain.len() - 4 + 2 + tags.len();
        out.extend_from_slice(&(total as u32).to_be_bytes());
        out.extend_from_slice(&plain[4..]);
        out.extend_from_slice(&(tags.len() as u16).to_be_bytes());
        out.extend_from_slice(tags);
        out
    }

    #[test]
    fn tags_are_dropped_from_a_tagged_block_and_a_block_without_is_left_as_is() {
        let a = cell("r1", "a", 5, CellType::Put, "v1");
        let b = cell("r2", "b", 4, CellType::DeleteColumn, "");
        let mut plain = BytesMut::new();
        put(&mut plain, &a);
        put(&mut plain, &b);
        let plain = plain.freeze();
        let same = without_tags(plain.clone()).expect("no tags");
        assert_eq!(same.as_ptr(), plain.as_ptr(), "not copied");
        // The first cell tagged (a TTL tag's bytes), the second not.
        let mut tagged = with_tags(&a, &[0, 3, 8, 0, 0]);
        let mut b_only = BytesMut::new();
        put(&mut b_only, &b);
        tagged.extend_from_slice(&b_only);
        let stripped = without_tags(Bytes::from(tagged.clone())).expect("tags dropped");
        assert_eq!(stripped, plain);
        let mut reader = CellReader::new(stripped);
        assert_eq!(reader.take(2).expect("cells"), vec![a.clone(), b]);
        // A tags length that disagrees with the cell's total, and one cut short, are errors.
        let mut bad = with_tags(&a, &[1, 2, 3]);
        let at = bad.len() - 5;
        bad[at] = 0;
        bad[at + 1] = 9;
        let e = without_tags(Bytes::from(bad)).expect_err("disagrees");
        assert_eq!(e.offset, 0);
        let mut short = BytesMut::new();
        put(&mut short, &a);
        let mut short = short.to_vec();
        short[3] += 1;
        short.push(0);
        assert!(without_tags(Bytes::from(short)).is_err());
        assert!(without_tags(Bytes::from(tagged[..10].to_vec())).is_err());
    }

    #[test]
    fn a_writer_given_cells_one_by_one_reads_back_as_those_cells() {
        let cells = vec![
            cell("r1", "a", 5, CellType::Put, "v1"),
            cell("r1", "b", 4, CellType::Put, &"x".repeat(3000)),
            cell("r1", "", 3, CellType::DeleteFamily, ""),
        ];
        let mut w = CellBlockWriter::default();
        for c in &cells {
            w.cell(CellRef {
                row: &c.row,
                family: &c.family,
                qualifier: &c.qualifier,
                timestamp: c.timestamp,
                cell_type: c.cell_type,
                seq_id: 9,
                value: &c.value,
            });
        }
        let (count, block) = w.finish();
        assert_eq!(count, 3);
        let mut reader = CellReader::new(block.freeze());
        assert_eq!(reader.take(3).expect("decodes"), cells);
        assert!(reader.is_empty());
    }

    #[test]
    fn cells_round_trip_and_damage_is_reported() {
        let cells = vec![
            cell("r1", "a", 5, CellType::Put, "v1"),
            cell("r1", "", 4, CellType::DeleteFamily, ""),
            cell("r2", "qq", u64::MAX >> 1, CellType::Put, "value two"),
        ];
        let mut out = BytesMut::new();
        for c in &cells {
            put(&mut out, c);
        }
        let block = out.freeze();
        assert_eq!(
            block.len(),
            cells
                .iter()
                .map(|c| encoded_len(&c.row, &c.family, &c.qualifier, &c.value))
                .sum::<usize>()
        );
        let mut r = CellReader::new(block.clone());
        assert_eq!(r.take(3).expect("decodes"), cells);
        assert!(r.is_empty());
        let mut short = CellReader::new(block.slice(..block.len() - 1));
        let e = short.take(3).expect_err("truncated");
        assert!(e.reason.contains("overruns"), "{e}");
        let mut bad = block.to_vec();
        bad[4 + 8 + 2 + 2 + 1 + 2 + 1 + 8] = 99; // type byte of the first cell
        let e = CellReader::new(Bytes::from(bad))
            .take(1)
            .expect_err("bad type");
        assert!(e.reason.contains("unknown cell type 99"), "{e}");
    }

    /// Found by the `cellblock` fuzz target: a count of 0xeb000003 cells sized a buffer of
    /// 599 GB before the block (three cells) was read.
    #[test]
    fn a_huge_cell_count_fails_without_allocating_for_it() {
        let input: &[u8] = b"\xeb\x00\x00\x03\x00\x00\x00\x1b\x00\x00\x00\x12\x00\x00\x00\x01\x00\x03row\x01fq0\x00\x00\x00\x00\x00\x00\x00\x09\x04v\x00\x00\x00\x1b\x00\x00\x12\x00\x00\x00\x01\x00\x03row\x01fq1\x00\x00\x00\x00\x00\x00\x00\x09\x08v\x00\x00\x00\x1b\x00\x00\x00\x12\x00\x00\x00\x01\x00\x03row\x01f\xf1\xf12\x00\x00\x00\x00\x00\x00\x00\x09\x0ev";
        let (count, block) = input.split_at(4);
        let n = u32::from_be_bytes(count.try_into().expect("4 bytes")) as usize;
        let mut reader = CellReader::new(Bytes::copy_from_slice(block));
        assert!(reader.max_cells() <= block.len() / MIN_CELL_LEN);
        let e = reader.take(n).expect_err("the block holds far fewer cells");
        assert!(e.reason.contains("cell") && e.offset <= block.len(), "{e}");
        let mut out = BytesMut::new();
        put_cell(&mut out, b"", b"", b"", 0, CellType::Put, b"");
        assert_eq!(out.len(), MIN_CELL_LEN);
    }
}
