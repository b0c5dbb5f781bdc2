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

/// Qualifier and value bytes up to which a row's first cell is taken for one of many.
const SMALL_CELL: usize = 512;

impl<'a> RowCells<'a> {
    pub fn new(out: &'a mut Vec<Cell>) -> RowCells<'a> {
        RowCells::with_parts(out, Vec::new())
    }

    /// [`RowCells::new`] reusing an earlier sink's bookkeeping ([`RowCells::into_parts`]), for
    /// a reader that fills row after row.
    pub fn with_parts(out: &'a mut Vec<Cell>, mut parts: Vec<(usize, usize, usize)>) -> Self {
        parts.clear();
        let first = out.len();
        RowCells {
            out,
            first,
            buf: BytesMut::new(),
            row_len: 0,
            parts,
        }
    }

    /// The bookkeeping buffer, for the next row's sink.
    pub fn into_parts(self) -> Vec<(usize, usize, usize)> {
        self.parts
    }
}

impl CellSink for RowCells<'_> {
    fn cell(&mut self, c: CellRef<'_>) {
        if self.parts.is_empty() {
            // Room for about eight cells like the first: rows of one cell waste little, and
            // a typical row (ten columns) grows it once, not four times. A large first cell
            // gets room for itself alone: rows of large values hold few, and eight times a
            // kilobyte value would be an allocation the size of the row's block, kept for as
            // long as the caller keeps the row.
            let cell = c.qualifier.len() + c.value.len();
            let cells = if cell > SMALL_CELL { 1 } else { 8 };
            self.buf.reserve(c.row.len() + cells * cell);
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
        for (cell, (q, v, end)) in self
            .out
            .iter_mut()
            .skip(self.first)
            .zip(self.parts.drain(..))
        {
            cell.row = row.clone();
            cell.qualifier = data.slice(q..v);
            cell.value = data.slice(v..end);
        }
        self.first = self.out.len();
    }
}
