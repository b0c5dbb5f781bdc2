//! Internal keys: how a cell's coordinates are laid out in memstores, store files and the WAL,
//! and the one order they all sort by.
//!
//! A store holds one family, so the family is not part of the key. Layout:
//!
//! ```text
//! row_len: u16 BE | row | qualifier | timestamp: u64 BE | type: u8 | seq_id: u64 BE
//! ```
//!
//! The qualifier's length is implied by the total length. Order (HBase's): row ↑,
//! qualifier ↑, timestamp ↓, type ↓, sequence id ↓ (the newest write of identical
//! coordinates first). The order is not plain byte order, so every sorted structure compares
//! with [`compare_keys`].

use crate::cell::CellType;
use std::cmp::Ordering;

/// Bytes after the qualifier: timestamp, type, sequence id.
pub const KEY_TRAILER_LEN: usize = 8 + 1 + 8;
/// Rows are at most this long (HBase's `Short.MAX_VALUE`).
pub const MAX_ROW_LEN: usize = i16::MAX as usize;
/// A type code above every real one: a seek key with it sorts before every cell of its
/// (row, qualifier, timestamp).
pub const TYPE_MAX: u8 = 0xff;

/// Appends the encoded key to `buf`. The caller keeps `row.len() <= MAX_ROW_LEN`.
pub fn encode_key(
    buf: &mut Vec<u8>,
    row: &[u8],
    qualifier: &[u8],
    ts: u64,
    type_code: u8,
    seq: u64,
) {
    debug_assert!(row.len() <= MAX_ROW_LEN);
    buf.reserve(2 + row.len() + qualifier.len() + KEY_TRAILER_LEN);
    buf.extend_from_slice(&(row.len() as u16).to_be_bytes());
    buf.extend_from_slice(row);
    buf.extend_from_slice(qualifier);
    buf.extend_from_slice(&ts.to_be_bytes());
    buf.push(type_code);
    buf.extend_from_slice(&seq.to_be_bytes());
}

/// An encoded key in a new vector.
pub fn make_key(row: &[u8], qualifier: &[u8], ts: u64, cell_type: CellType, seq: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_key(&mut buf, row, qualifier, ts, cell_type.code(), seq);
    buf
}

/// The smallest key of `row`: seeking to it lands on the row's first cell.
pub fn first_on_row(row: &[u8]) -> Vec<u8> {
    first_on_column(row, b"")
}

/// The smallest key of (`row`, `qualifier`).
pub fn first_on_column(row: &[u8], qualifier: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_key(&mut buf, row, qualifier, u64::MAX, TYPE_MAX, u64::MAX);
    buf
}

/// The smallest key of (`row`, `qualifier`) at or below timestamp `ts`.
pub fn first_on_column_at(row: &[u8], qualifier: &[u8], ts: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_key(&mut buf, row, qualifier, ts, TYPE_MAX, u64::MAX);
    buf
}

/// A borrowed view of an encoded key. Construct with [`KeyRef::parse`], which checks the
/// layout, so accessors never fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRef<'a> {
    raw: &'a [u8],
    row_end: usize,
}

impl<'a> KeyRef<'a> {
    /// Checks the layout; `None` if `raw` is not a well-formed key.
    pub fn parse(raw: &'a [u8]) -> Option<KeyRef<'a>> {
        let len_bytes: [u8; 2] = raw.get(..2)?.try_into().ok()?;
        let row_end = 2 + u16::from_be_bytes(len_bytes) as usize;
        if raw.len() < row_end + KEY_TRAILER_LEN {
            return None;
        }
        Some(KeyRef { raw, row_end })
    }

    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    pub fn row(&self) -> &'a [u8] {
        &self.raw[2..self.row_end]
    }

    pub fn qualifier(&self) -> &'a [u8] {
        &self.raw[self.row_end..self.raw.len() - KEY_TRAILER_LEN]
    }

    fn trailer(&self) -> &'a [u8] {
        &self.raw[self.raw.len() - KEY_TRAILER_LEN..]
    }

    pub fn timestamp(&self) -> u64 {
        let t = self.trailer();
        u64::from_be_bytes([t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]])
    }

    pub fn type_code(&self) -> u8 {
        self.trailer()[8]
    }

    /// The cell type; `None` for seek keys and unknown codes.
    pub fn cell_type(&self) -> Option<CellType> {
        CellType::from_code(self.type_code())
    }

    pub fn seq(&self) -> u64 {
        let t = self.trailer();
        u64::from_be_bytes([t[9], t[10], t[11], t[12], t[13], t[14], t[15], t[16]])
    }

    /// The key without its trailer's sequence id changed: `row_len | row | qualifier`.
    pub fn user_column(&self) -> &'a [u8] {
        &self.raw[..self.raw.len() - KEY_TRAILER_LEN]
    }

    /// Whether this is [`first_on_row`]'s key: the seek key before every cell of its row.
    pub fn is_row_start(&self) -> bool {
        self.qualifier().is_empty()
            && self.timestamp() == u64::MAX
            && self.type_code() == TYPE_MAX
            && self.seq() == u64::MAX
    }
}

/// Compares two encoded keys in HBase order. Malformed keys (which only corrupt files could
/// hold, and those are caught by checksums) compare by raw bytes rather than panicking.
pub fn compare_keys(a: &[u8], b: &[u8]) -> Ordering {
    let (Some(ka), Some(kb)) = (KeyRef::parse(a), KeyRef::parse(b)) else {
        return a.cmp(b);
    };
    compare_parsed(&ka, &kb)
}

/// [`compare_keys`] on parsed keys.
pub fn compare_parsed(a: &KeyRef<'_>, b: &KeyRef<'_>) -> Ordering {
    a.row()
        .cmp(b.row())
        .then_with(|| a.qualifier().cmp(b.qualifier()))
        .then_with(|| b.trailer()[..9].cmp(&a.trailer()[..9]))
        .then_with(|| b.seq().cmp(&a.seq()))
}

/// Compares only the rows of two encoded keys.
pub fn compare_rows(a: &[u8], b: &[u8]) -> Ordering {
    match (KeyRef::parse(a), KeyRef::parse(b)) {
        (Some(ka), Some(kb)) => ka.row().cmp(kb.row()),
        _ => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_start_keys_are_recognised() {
        let start = first_on_row(b"r");
        assert!(KeyRef::parse(&start).is_some_and(|k| k.is_row_start()));
        for other in [
            first_on_column(b"r", b"q"),
            first_on_column_at(b"r", b"", 5),
            make_key(b"r", b"", u64::MAX, CellType::DeleteFamily, u64::MAX),
        ] {
            assert!(KeyRef::parse(&other).is_some_and(|k| !k.is_row_start()));
        }
    }

    fn k(row: &str, q: &str, ts: u64, t: CellType, seq: u64) -> Vec<u8> {
        make_key(row.as_bytes(), q.as_bytes(), ts, t, seq)
    }

    #[test]
    fn order_is_hbase_order() {
        let sorted = [
            first_on_row(b"a"),
            k("a", "", 5, CellType::DeleteFamily, 1),
            k("a", "q", 9, CellType::Put, 1),
            k("a", "q", 5, CellType::DeleteColumn, 2),
            k("a", "q", 5, CellType::Delete, 2),
            k("a", "q", 5, CellType::Put, 7),
            k("a", "q", 5, CellType::Put, 3),
            k("a", "q", 1, CellType::Put, 9),
            k("a", "qq", 1, CellType::Put, 9),
            k("ab", "", 1, CellType::Put, 9),
            k("b", "a", 1, CellType::Put, 9),
        ];
        for w in sorted.windows(2) {
            assert_eq!(
                compare_keys(&w[0], &w[1]),
                Ordering::Less,
                "{:?} < {:?}",
                w[0],
                w[1]
            );
            assert_eq!(compare_keys(&w[1], &w[0]), Ordering::Greater);
        }
    }

    #[test]
    fn row_boundary_is_not_byte_order() {
        // Row "a" + qualifier "bc" must sort before row "ab" whatever the bytes say.
        let a = k("a", "bc", 1, CellType::Put, 1);
        let b = k("ab", "", 1, CellType::Put, 1);
        assert_eq!(compare_keys(&a, &b), Ordering::Less);
    }

    #[test]
    fn parse_round_trips_and_rejects_short() {
        let raw = k("row", "qual", 42, CellType::DeleteColumn, 7);
        let key = KeyRef::parse(&raw).expect("well-formed");
        assert_eq!(key.row(), b"row");
        assert_eq!(key.qualifier(), b"qual");
        assert_eq!(key.timestamp(), 42);
        assert_eq!(key.cell_type(), Some(CellType::DeleteColumn));
        assert_eq!(key.seq(), 7);
        assert!(KeyRef::parse(&raw[..raw.len() - 1]).is_some_and(|k| k.qualifier() == b"qua"));
        assert!(KeyRef::parse(&[0, 5, 1]).is_none());
        assert!(KeyRef::parse(&[]).is_none());
    }
}
