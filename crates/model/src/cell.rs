//! A cell: one version of one column of one row.

use bytes::Bytes;

/// HBase's "latest timestamp": a mutation carrying it is stamped with the server's clock.
pub const LATEST_TIMESTAMP: u64 = i64::MAX as u64;

/// The kind of a cell. The numeric codes are HBase's `KeyValue.Type` codes; within one
/// (row, family, qualifier, timestamp) cells sort by code descending, so a delete marker
/// sorts before the put it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum CellType {
    Put = 4,
    /// Deletes exactly one version: the one at this timestamp.
    Delete = 8,
    /// Deletes every version of every column of the family at exactly this timestamp.
    DeleteFamilyVersion = 10,
    /// Deletes every version of this column with a timestamp ≤ this one.
    DeleteColumn = 12,
    /// Deletes every version of every column of the family with a timestamp ≤ this one.
    DeleteFamily = 14,
}

impl CellType {
    /// The type for a code read from a file or the network.
    pub fn from_code(code: u8) -> Option<CellType> {
        Some(match code {
            4 => CellType::Put,
            8 => CellType::Delete,
            10 => CellType::DeleteFamilyVersion,
            12 => CellType::DeleteColumn,
            14 => CellType::DeleteFamily,
            _ => return None,
        })
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn is_delete(self) -> bool {
        self != CellType::Put
    }

    /// Family-wide markers are stored under the empty qualifier, as HBase does.
    pub fn is_family_delete(self) -> bool {
        matches!(self, CellType::DeleteFamily | CellType::DeleteFamilyVersion)
    }
}

/// A cell as returned by reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub row: Bytes,
    pub family: Bytes,
    pub qualifier: Bytes,
    pub timestamp: u64,
    pub cell_type: CellType,
    /// The MVCC sequence id of the write that made this cell.
    pub seq_id: u64,
    pub value: Bytes,
}

/// One cell borrowed from where a read found it, for the length of one call.
#[derive(Debug, Clone, Copy)]
pub struct CellRef<'a> {
    pub row: &'a [u8],
    /// The family's name, shared: a sink that keeps it clones the `Bytes`, not the bytes.
    pub family: &'a Bytes,
    pub qualifier: &'a [u8],
    pub timestamp: u64,
    pub cell_type: CellType,
    pub seq_id: u64,
    pub value: &'a [u8],
}

impl CellRef<'_> {
    /// The cell, copied out of the buffers it points into.
    pub fn to_cell(&self) -> Cell {
        Cell {
            row: Bytes::copy_from_slice(self.row),
            family: self.family.clone(),
            qualifier: Bytes::copy_from_slice(self.qualifier),
            timestamp: self.timestamp,
            cell_type: self.cell_type,
            seq_id: self.seq_id,
            value: Bytes::copy_from_slice(self.value),
        }
    }
}

/// Where a read puts the cells it selects, in read order: row, then family, then qualifier,
/// then newest version first. Most readers collect [`Cell`]s; the network reactor's Get
/// writes each cell straight into its answer's cell block, so a value is copied once, from
/// the memstore or block to the answer, with no row buffer, no `Cell`s and no reference
/// counts between.
pub trait CellSink {
    fn cell(&mut self, cell: CellRef<'_>);

    /// Every cell of one row in one family has been given.
    fn end_family(&mut self) {}
}
