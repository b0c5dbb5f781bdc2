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

/// Tag types (HBase's `TagType`) this reader looks for (`docs/hfile-format.md` §5).
pub mod tag {
    /// The cell is a MOB reference: its value is the real value's length (an int) and the name
    /// of the MOB file under HBase's `mobdir` that holds it, not the cell's value.
    pub const MOB_REFERENCE: u8 = 5;
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
    /// The value of the cell's first tag of type `kind` (tags are `[u16 length][u8 type]
    /// [value]`, the length counting the type); none when it has none, or when its tags area
    /// is cut short.
    pub fn tag(&self, kind: u8) -> Option<&[u8]> {
        let mut rest = self.tags.as_slice();
        while let [hi, lo, tail @ ..] = rest {
            let len = usize::from(u16::from_be_bytes([*hi, *lo]));
            let (this, after) = (tail.get(..len)?, tail.get(len..)?);
            let (&ty, value) = this.split_first()?;
            if ty == kind {
                return Some(value);
            }
            rest = after;
        }
        None
    }

    /// Whether the cell is a MOB reference ([`tag::MOB_REFERENCE`]): its value is elsewhere.
    pub fn is_mob_reference(&self) -> bool {
        self.tag(tag::MOB_REFERENCE).is_some()
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_found_by_type_and_a_cut_tags_area_holds_none() {
        let mut cell =
            Cell::from_key(&[0, 1, b'r', 1, b'f', 0, 0, 0, 0, 0, 0, 0, 1, 4], vec![]).expect("key");
        assert_eq!(cell.tag(tag::MOB_REFERENCE), None);
        // A TTL tag (8) of 8 bytes, then a MOB reference naming a table.
        cell.tags = [&[0, 9, 8][..], &[0; 8], &[0, 3, 5, b'm', b't']].concat();
        assert_eq!(cell.tag(8), Some(&[0u8; 8][..]));
        assert_eq!(cell.tag(tag::MOB_REFERENCE), Some(&b"mt"[..]));
        assert!(cell.is_mob_reference());
        cell.tags.truncate(12);
        assert!(!cell.is_mob_reference());
    }
}
