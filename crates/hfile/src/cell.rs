//! Cells as HFiles store them (`docs/hfile-format.md` §5): the KeyValue key (row, family,
//! qualifier, timestamp, type), the value, the tags area and the sequence id.

use crate::input::{Bad, Input};

/// The `KeyValue.Type` codes a file may hold.
pub mod kind {
    pub const PUT: u8 = 4;
    pub const DELETE: u8 = 8;
    pub const DELETE_FAMILY_VERSION: u8 = 10;
    pub const DELETE_COLUMN: u8 = 12;
    pub const DELETE_FAMILY: u8 = 14;
}

/// One cell of an HFile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub row: Vec<u8>,
    pub family: Vec<u8>,
    pub qualifier: Vec<u8>,
    pub timestamp: i64,
    /// `KeyValue.Type` ([`kind`]).
    pub kind: u8,
    pub value: Vec<u8>,
    /// The raw tags area: `[u16 length][u8 type][value]` per tag.
    pub tags: Vec<u8>,
    /// The sequence id (MVCC) stored with the cell; 0 when the file stores none.
    pub sequence_id: u64,
}

/// How the cells of a file are laid out, from its file info.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Format {
    pub includes_tags: bool,
    pub compress_tags: bool,
    pub includes_mvcc: bool,
}

/// The fixed part of a key after the qualifier: timestamp and type.
pub const TIMESTAMP_TYPE: usize = 9;

impl Cell {
    /// A cell from its flat KeyValue key and its value.
    pub fn from_key(key: &[u8], value: Vec<u8>) -> Result<Cell, Bad> {
        let mut input = Input::new(key);
        let row_len = input.u16("row length")? as usize;
        let row = input.take(row_len, "row")?.to_vec();
        let family_len = input.u8("family length")? as usize;
        let family = input.take(family_len, "family")?.to_vec();
        let qualifier_len = input
            .remaining()
            .checked_sub(TIMESTAMP_TYPE)
            .ok_or("a key too short for its timestamp and type")?;
        let qualifier = input.take(qualifier_len, "qualifier")?.to_vec();
        let timestamp = input.i64("timestamp")?;
        let kind = input.u8("type")?;
        Ok(Cell {
            row,
            family,
            qualifier,
            timestamp,
            kind,
            value,
            tags: Vec::new(),
            sequence_id: 0,
        })
    }
}

/// The sequence id vlong: stored signed, never negative in a valid file.
pub fn sequence_id(input: &mut Input<'_>) -> Result<u64, Bad> {
    let v = input.vlong("sequence id")?;
    u64::try_from(v).map_err(|_| format!("negative sequence id {v}"))
}

/// Cells in the unencoded layout (DATA blocks, and ROW_INDEX_V1's cell area): int key length,
/// int value length, key, value, then the u16 tags length and tags, then the sequence id.
pub fn decode_plain(bytes: &[u8], format: Format, out: &mut Vec<Cell>) -> Result<(), Bad> {
    let mut input = Input::new(bytes);
    while !input.is_empty() {
        let key_len = input.len32("key length")?;
        let value_len = input.len32("value length")?;
        let key = input.take(key_len, "key")?;
        let value = input.take(value_len, "value")?.to_vec();
        let mut cell = Cell::from_key(key, value)?;
        if format.includes_tags {
            let n = input.u16("tags length")? as usize;
            cell.tags = input.take(n, "tags")?.to_vec();
        }
        if format.includes_mvcc {
            cell.sequence_id = sequence_id(&mut input)?;
        }
        out.push(cell);
    }
    Ok(())
}
