//! [`RowCells`]: the [`CellSink`] of readers that want [`Cell`]s.

use bytes::{Bytes, BytesMut};
use cellar_model::{Cell, CellRef, CellSink};

/// Appends [`Cell`]s to a vector. The cells of one row and family share one buffer (row,
/// then each qualifier and value): one allocation per row instead of two per cell; cells
/// hold slices of it.
pub struct RowCells<'a> {
    out: &'a mut Vec<Cell>,
    first: usize,
    buf: BytesMut,
    row_len: usize,
    /// Per cell since `first`: where its qualifier and value start and where it ends in `buf`.
    parts: Vec<(usize, usize, usize)>,
}

impl<'a> RowCells<'a> {
    pub fn new(out: &'a mut Vec<Cell>) -> RowCells<'a> {
        let first = out.len();
        RowCells {
            out,
            first,
            buf: BytesMut::new(),
            row_len: 0,
            parts: Vec::new(),
        }
    }
}

impl CellSink for RowCells<'_> {
    fn cell(&mut self, c: CellRef<'_>) {
        if self.parts.is_empty() {
            // Room for about eight cells like the first: rows of one cell waste little, and
            // a typical row (ten columns) grows it once, not four times.
            self.buf
                .reserve(c.row.len() + 8 * (c.qualifier.len() + c.value.len()));
            self.buf.extend_from_slice(c.row);
            self.row_len = c.row.len();
            self.parts.reserve(8);
            self.out.reserve(8);
        }
        let q_start = self.buf.len();
        self.buf.extend_from_slice(c.qualifier);
        let v_start = self.buf.len();
        self.buf.extend_from_slice(c.value);
        self.parts.push((q_start, v_start, self.buf.len()));
        self.out.push(Cell {
            row: Bytes::new(),
            family: c.family.clone(),
            qualifier: Bytes::new(),
            timestamp: c.timestamp,
            cell_type: c.cell_type,
            seq_id: c.seq_id,
            value: Bytes::new(),
        });
    }

    fn end_family(&mut self) {
        if self.parts.is_empty() {
            return;
        }
        let data = self.buf.split().freeze();
        let row = data.slice(..self.row_len);
        for (cell, (q, v, end)) in self.out[self.first..].iter_mut().zip(self.parts.drain(..)) {
            cell.row = row.clone();
            cell.qualifier = data.slice(q..v);
            cell.value = data.slice(v..end);
        }
        self.first = self.out.len();
    }
}
