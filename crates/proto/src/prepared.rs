//! The compact result encoding of prepared scans, version 1 (seed 003's Prepared Scan):
//! each row key is sent once, and each cell names its column by index into the column list
//! the scan was prepared with, instead of repeating row, family and qualifier per cell as the
//! cell block does. Values are sent as they are. Specification: `docs/native-protocol.md`,
//! "Prepared scans".
//!
//! ```text
//! block  = u8 version (1) | u8 flags | body, or a zstd frame of the body when flags & 1
//! body   = varint rows | row*
//! row    = varint row_len | row | varint (cells << 1 | partial) | cell*
//! cell   = varint (column << 1 | has_type) | [u8 type] | [definition]
//!          | varint zigzag(timestamp - previous timestamp) | varint value_len | value
//! definition (only when column = the number of columns known so far):
//!          varint family_len | family | varint qualifier_len | qualifier
//! ```
//! Columns known at the start of a block are the prepared ones, in their sorted order; a cell
//! of any other column (the scan named only its family, or none) defines it in place, and it
//! is known by that index for the rest of the block. A cell without `has_type` is a Put. The
//! previous timestamp starts at 0 in each block.

use crate::cellblock::CellBlockError;
use bytes::{BufMut, Bytes, BytesMut};
use cellar_model::{Cell, CellType};
use std::collections::HashMap;

pub const VERSION: u8 = 1;
const FLAG_ZSTD: u8 = 1;
/// Bodies at least this long are compressed when compression was asked for.
pub const COMPRESS_FROM: usize = 256;
/// The largest body a decoder inflates (a bound against decompression bombs).
pub const MAX_BODY: usize = 256 * 1024 * 1024;

/// A prepared scan's columns: (family, qualifier) pairs, sorted, without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Columns {
    list: Vec<(Bytes, Bytes)>,
}

impl Columns {
    /// The columns named with a qualifier, sorted (whole families name no column).
    pub fn new(mut list: Vec<(Bytes, Bytes)>) -> Columns {
        list.sort();
        list.dedup();
        Columns { list }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

fn put_varint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Encodes results (each a row's cells, or part of a wide row, with its `partial` flag).
/// `compress`: zstd the body if it is at least [`COMPRESS_FROM`] bytes.
pub struct Encoder<'c> {
    columns: &'c Columns,
    /// Columns defined in this block, after the prepared ones.
    defined: HashMap<(Bytes, Bytes), u64>,
    body: BytesMut,
    rows: u64,
    prev_ts: u64,
}

impl<'c> Encoder<'c> {
    pub fn new(columns: &'c Columns) -> Encoder<'c> {
        Encoder {
            columns,
            defined: HashMap::new(),
            body: BytesMut::new(),
            rows: 0,
            prev_ts: 0,
        }
    }

    /// Adds one result; its cells are all of one row.
    pub fn row(&mut self, cells: &[Cell], partial: bool) {
        let Some(first) = cells.first() else {
            return;
        };
        self.rows += 1;
        put_varint(&mut self.body, first.row.len() as u64);
        self.body.put_slice(&first.row);
        put_varint(
            &mut self.body,
            ((cells.len() as u64) << 1) | u64::from(partial),
        );
        // Cells come in column order and so do the prepared columns: try the next one first.
        let mut next = 0usize;
        for c in cells {
            let list = &self.columns.list;
            let found = match list.get(next) {
                Some((f, q)) if *f == c.family && *q == c.qualifier => Some(next),
                _ => list
                    .binary_search_by(|(f, q)| {
                        (f.as_ref(), q.as_ref()).cmp(&(c.family.as_ref(), c.qualifier.as_ref()))
                    })
                    .ok(),
            };
            let (index, define) = match found {
                Some(i) => {
                    next = i + 1;
                    (i as u64, false)
                }
                None => {
                    let known = (list.len() + self.defined.len()) as u64;
                    match self.defined.get(&(c.family.clone(), c.qualifier.clone())) {
                        Some(&i) => (i, false),
                        None => {
                            self.defined
                                .insert((c.family.clone(), c.qualifier.clone()), known);
                            (known, true)
                        }
                    }
                }
            };
            let has_type = c.cell_type != CellType::Put;
            put_varint(&mut self.body, (index << 1) | u64::from(has_type));
            if has_type {
                self.body.put_u8(c.cell_type.code());
            }
            if define {
                put_varint(&mut self.body, c.family.len() as u64);
                self.body.put_slice(&c.family);
                put_varint(&mut self.body, c.qualifier.len() as u64);
                self.body.put_slice(&c.qualifier);
            }
            put_varint(
                &mut self.body,
                zigzag(c.timestamp.wrapping_sub(self.prev_ts) as i64),
            );
            self.prev_ts = c.timestamp;
            put_varint(&mut self.body, c.value.len() as u64);
            self.body.put_slice(&c.value);
        }
    }

    /// The block. A compression failure (not expected: zstd of memory) sends it uncompressed.
    pub fn finish(self, compress: bool) -> BytesMut {
        let mut head = BytesMut::with_capacity(12);
        put_varint(&mut head, self.rows);
        let mut out = BytesMut::with_capacity(2 + head.len() + self.body.len());
        out.put_u8(VERSION);
        if compress && head.len() + self.body.len() >= COMPRESS_FROM {
            let mut plain = head;
            plain.extend_from_slice(&self.body);
            if let Ok(z) = zstd::bulk::compress(&plain, 1) {
                out.put_u8(FLAG_ZSTD);
                out.put_slice(&z);
                return out;
            }
            out.put_u8(0);
            out.extend_from_slice(&plain);
            return out;
        }
        out.put_u8(0);
        out.extend_from_slice(&head);
        out.extend_from_slice(&self.body);
        out
    }
}

fn err(offset: usize, reason: impl Into<String>) -> CellBlockError {
    CellBlockError {
        offset,
        reason: reason.into(),
    }
}

struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    fn varint(&mut self) -> Result<u64, CellBlockError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| err(self.pos, "truncated varint"))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(err(self.pos, "varint longer than 10 bytes"))
    }

    fn bytes(&mut self, len: u64, what: &str) -> Result<Bytes, CellBlockError> {
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| self.pos.checked_add(l))
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| err(self.pos, format!("{what} of {len} bytes runs past the end")))?;
        let b = self.buf.slice(self.pos..end);
        self.pos = end;
        Ok(b)
    }

    fn u8(&mut self) -> Result<u8, CellBlockError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| err(self.pos, "truncated cell type"))?;
        self.pos += 1;
        Ok(b)
    }
}

/// One decoded result: a row's cells and whether more cells of the row follow.
pub type DecodedRow = (Vec<Cell>, bool);

/// Decodes a block; cells share its buffer (or the inflated body's) and the column names of
/// `columns`.
pub fn decode(block: Bytes, columns: &Columns) -> Result<Vec<DecodedRow>, CellBlockError> {
    let (&version, rest) = block
        .split_first()
        .ok_or_else(|| err(0, "empty prepared result block"))?;
    if version != VERSION {
        return Err(err(
            0,
            format!("prepared result encoding version {version} (this build reads {VERSION})"),
        ));
    }
    let (&flags, _) = rest
        .split_first()
        .ok_or_else(|| err(1, "prepared result block has no flags"))?;
    if flags & !FLAG_ZSTD != 0 {
        return Err(err(1, format!("unknown prepared result flags {flags:#x}")));
    }
    let body = if flags & FLAG_ZSTD != 0 {
        let raw = block.slice(2..);
        let size = zstd::zstd_safe::get_frame_content_size(&raw)
            .ok()
            .flatten()
            .filter(|&n| n <= MAX_BODY as u64)
            .ok_or_else(|| err(2, "compressed body without a size within bounds"))?;
        Bytes::from(
            zstd::bulk::decompress(&raw, size as usize)
                .map_err(|e| err(2, format!("zstd: {e}")))?,
        )
    } else {
        block.slice(2..)
    };
    let mut r = Reader { buf: body, pos: 0 };
    let rows = r.varint()?;
    let mut known: Vec<(Bytes, Bytes)> = columns.list.clone();
    let mut out = Vec::with_capacity(rows.min(1 << 16) as usize);
    let mut prev_ts = 0u64;
    for _ in 0..rows {
        let row_len = r.varint()?;
        let row = r.bytes(row_len, "row key")?;
        let head = r.varint()?;
        let (count, partial) = (head >> 1, head & 1 == 1);
        if count == 0 {
            return Err(err(r.pos, "a row with no cells"));
        }
        let mut cells = Vec::with_capacity(count.min(1 << 16) as usize);
        for _ in 0..count {
            let at = r.pos;
            let head = r.varint()?;
            let index = head >> 1;
            let cell_type = if head & 1 == 1 {
                let code = r.u8()?;
                CellType::from_code(code)
                    .ok_or_else(|| err(r.pos - 1, format!("unknown cell type {code}")))?
            } else {
                CellType::Put
            };
            let index_at = usize::try_from(index).ok();
            let (family, qualifier) = if let Some(known) = index_at.and_then(|i| known.get(i)) {
                known.clone()
            } else if index_at == Some(known.len()) {
                let fl = r.varint()?;
                let family = r.bytes(fl, "family")?;
                let ql = r.varint()?;
                let qualifier = r.bytes(ql, "qualifier")?;
                known.push((family.clone(), qualifier.clone()));
                (family, qualifier)
            } else {
                return Err(err(
                    at,
                    format!("column {index} is beyond the {} known", known.len()),
                ));
            };
            let delta = unzigzag(r.varint()?);
            let timestamp = prev_ts.wrapping_add(delta as u64);
            prev_ts = timestamp;
            let vl = r.varint()?;
            let value = r.bytes(vl, "value")?;
            cells.push(Cell {
                row: row.clone(),
                family,
                qualifier,
                timestamp,
                cell_type,
                seq_id: 0,
                value,
            });
        }
        out.push((cells, partial));
    }
    if r.pos != r.buf.len() {
        return Err(err(r.pos, "bytes after the last row"));
    }
    Ok(out)
}

/// Fuzzing entry point: decoding arbitrary bytes must not panic.
pub fn fuzz_decode(data: &[u8]) {
    let columns = Columns::new(vec![
        (Bytes::from_static(b"cf"), Bytes::from_static(b"a")),
        (Bytes::from_static(b"cf"), Bytes::from_static(b"b")),
    ]);
    let _ = decode(Bytes::copy_from_slice(data), &columns);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(row: &str, f: &str, q: &str, ts: u64, v: &str) -> Cell {
        Cell {
            row: Bytes::copy_from_slice(row.as_bytes()),
            family: Bytes::copy_from_slice(f.as_bytes()),
            qualifier: Bytes::copy_from_slice(q.as_bytes()),
            timestamp: ts,
            cell_type: CellType::Put,
            seq_id: 0,
            value: Bytes::copy_from_slice(v.as_bytes()),
        }
    }

    fn columns() -> Columns {
        Columns::new(vec![
            (Bytes::from_static(b"cf"), Bytes::from_static(b"b")),
            (Bytes::from_static(b"cf"), Bytes::from_static(b"a")),
        ])
    }

    fn rows() -> Vec<DecodedRow> {
        let mut deleted = cell("r2", "cf", "a", 5, "");
        deleted.cell_type = CellType::DeleteColumn;
        vec![
            (
                vec![
                    cell("r1", "cf", "a", 1_700_000_000_000, "x"),
                    cell("r1", "cf", "b", 1_700_000_000_005, "yy"),
                    // Not prepared: defined in place, then known by index.
                    cell("r1", "other", "z", 3, "zzz"),
                ],
                false,
            ),
            (
                vec![deleted, cell("r2", "other", "z", 1_700_000_000_000, "w")],
                true,
            ),
            (vec![cell("r2", "cf", "b", 9, "tail")], false),
        ]
    }

    fn round_trip(compress: bool) {
        let cols = columns();
        let mut e = Encoder::new(&cols);
        for (cells, partial) in rows() {
            e.row(&cells, partial);
        }
        let block = e.finish(compress).freeze();
        assert_eq!(decode(block, &cols).expect("decode"), rows());
    }

    #[test]
    fn round_trips_with_and_without_compression() {
        round_trip(false);
        round_trip(true);
    }

    #[test]
    fn rows_and_columns_are_sent_once() {
        let cols = Columns::new(
            (0..10)
                .map(|i| {
                    (
                        Bytes::from_static(b"family"),
                        Bytes::from(format!("field{i}")),
                    )
                })
                .collect(),
        );
        let mut e = Encoder::new(&cols);
        let mut cellblock = BytesMut::new();
        let value = "v".repeat(100);
        for r in 0..50 {
            let cells: Vec<Cell> = (0..10)
                .map(|i| {
                    cell(
                        &format!("user{r:020}"),
                        "family",
                        &format!("field{i}"),
                        7,
                        &value,
                    )
                })
                .collect();
            for c in &cells {
                crate::cellblock::put(&mut cellblock, c);
            }
            e.row(&cells, false);
        }
        let compact = e.finish(false);
        // Per cell: the value, its length, a column index and a timestamp delta.
        assert!(compact.len() < 50 * (10 * 104 + 30), "{}", compact.len());
        assert!(
            compact.len() * 10 < cellblock.len() * 8,
            "{} vs {}",
            compact.len(),
            cellblock.len()
        );
    }

    #[test]
    fn malformed_blocks_are_refused_with_the_reason() {
        let cols = columns();
        let mut e = Encoder::new(&cols);
        for (cells, partial) in rows() {
            e.row(&cells, partial);
        }
        let good = e.finish(false).freeze();
        assert!(decode(Bytes::new(), &cols).is_err());
        let mut bad = good.to_vec();
        bad[0] = 2;
        assert!(decode(Bytes::from(bad), &cols)
            .expect_err("version")
            .reason
            .contains("version 2"));
        for cut in 1..good.len() {
            assert!(decode(good.slice(..cut), &cols).is_err(), "cut at {cut}");
        }
        let mut extra = good.to_vec();
        extra.push(0);
        assert!(decode(Bytes::from(extra), &cols).is_err());
        // A column index beyond those known.
        let block = Bytes::from_static(&[1, 0, 1, 1, b'r', 2, 9 << 1, 0, 0]);
        assert!(decode(block, &cols)
            .expect_err("index")
            .reason
            .contains("beyond"));
    }
}
