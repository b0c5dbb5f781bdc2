//! A row as reads return it.

use bytes::Bytes;
use cellar_model::Cell;
use cellar_proto::cellblock::CellReader;
use cellar_proto::convert;
use cellar_proto::pb;

use crate::error::{Error, Result};

/// One row's cells in key order (family ↑, qualifier ↑, timestamp ↓). A get of a missing row
/// returns a `Row` with no cells; a scan with `batch` set returns a wide row in several `Row`s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    pub row: Bytes,
    pub cells: Vec<Cell>,
}

impl Row {
    /// The newest value of `family:qualifier`.
    pub fn value(&self, family: &[u8], qualifier: &[u8]) -> Option<&Bytes> {
        self.cells
            .iter()
            .find(|c| &c.family[..] == family && &c.qualifier[..] == qualifier)
            .map(|c| &c.value)
    }

    /// Every returned version of `family:qualifier`, newest first.
    pub fn versions<'a>(
        &'a self,
        family: &'a [u8],
        qualifier: &'a [u8],
    ) -> impl Iterator<Item = &'a Cell> + 'a {
        self.cells
            .iter()
            .filter(move |c| &c.family[..] == family && &c.qualifier[..] == qualifier)
    }

    /// Whether the row has no cells (not found, or everything filtered out).
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// A result's cells taken from a response's cell block; `row` names the row when the
    /// result is empty.
    pub(crate) fn from_pb(row: Bytes, result: &pb::Result, cells: &mut CellReader) -> Result<Row> {
        let cells = convert::result_from_pb(result, cells)
            .map_err(|e| Error::Protocol(format!("result cells: {e}")))?;
        let row = cells.first().map(|c| c.row.clone()).unwrap_or(row);
        Ok(Row { row, cells })
    }
}
