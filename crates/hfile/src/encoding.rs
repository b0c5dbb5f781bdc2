//! Data block encodings (`docs/hfile-format.md` §6): an ENCODED_DATA block's payload starts with
//! a 2-byte encoding id; PREFIX, DIFF and FAST_DIFF then hold the block's unencoded size and
//! cells delta-coded against the one before; ROW_INDEX_V1 holds plain cells and a row index.

mod diff;
mod fast_diff;
mod prefix;
mod tags;

use crate::cell::{decode_plain, sequence_id, Cell, Format};
use crate::input::{Bad, Input};
use tags::TagDictionary;

/// Decodes an ENCODED_DATA block's payload into `out`.
pub fn decode(payload: &[u8], format: Format, out: &mut Vec<Cell>) -> Result<(), Bad> {
    let mut input = Input::new(payload);
    let id = input.u16("encoding id")?;
    match id {
        2..=4 => {
            input.i32("unencoded size")?;
            let mut trailer = Trailer::new(format);
            match id {
                2 => prefix::decode(&mut input, &mut trailer, out),
                3 => diff::decode(&mut input, &mut trailer, out),
                _ => fast_diff::decode(&mut input, &mut trailer, out),
            }
        }
        7 => row_index(&mut input, format, out),
        6 => Err(
            "PREFIX_TREE encoding (HBase 1.x) is not supported; HBase 2 cannot read it either"
                .into(),
        ),
        n => Err(format!("data block encoding {n} is not one HBase 2 writes")),
    }
}

/// ROW_INDEX_V1: plain cells, then the row index, then the cells' size as the last int.
fn row_index(input: &mut Input<'_>, format: Format, out: &mut Vec<Cell>) -> Result<(), Bad> {
    let rest = input.take(input.remaining(), "row index block")?;
    let size_at = rest
        .len()
        .checked_sub(4)
        .ok_or("a ROW_INDEX_V1 block without its size")?;
    let mut tail = Input::new(rest.get(size_at..).unwrap_or_default());
    let data_size = tail.len32("ROW_INDEX_V1 data size")?;
    let cells = rest
        .get(..data_size)
        .filter(|_| data_size <= size_at)
        .ok_or_else(|| {
            format!(
                "ROW_INDEX_V1 data size {data_size} of a {}-byte block",
                rest.len()
            )
        })?;
    decode_plain(cells, format, out)
}

/// What follows every delta-coded cell: its tags (length as a compressed int; the bytes raw or
/// through the block's tag dictionary) and its sequence id.
pub(crate) struct Trailer {
    format: Format,
    dictionary: Option<TagDictionary>,
}

impl Trailer {
    fn new(format: Format) -> Trailer {
        Trailer {
            format,
            dictionary: (format.includes_tags && format.compress_tags).then(TagDictionary::new),
        }
    }

    fn read(&mut self, input: &mut Input<'_>, cell: &mut Cell) -> Result<(), Bad> {
        if self.format.includes_tags {
            let n = input.cvarint("tags length")?;
            if n > 0 {
                cell.tags = match self.dictionary.as_mut() {
                    Some(d) => d.uncompress(input, n)?,
                    None => input.take(n, "tags")?.to_vec(),
                };
            }
        }
        if self.format.includes_mvcc {
            cell.sequence_id = sequence_id(input)?;
        }
        Ok(())
    }
}

/// The start of a key shared by delta codings: `[u16 row length][row][u8 family length]...`.
/// Where the row ends in `key` (the row length's two bytes included).
fn row_end(key: &[u8]) -> Result<usize, Bad> {
    match key {
        [a, b, ..] => Ok(2 + usize::from(u16::from_be_bytes([*a, *b]))),
        _ => Err("a key shorter than its row length".into()),
    }
}

/// `prev[..common]`, or why the previous key is too short for that.
fn shared(prev: &[u8], common: usize) -> Result<&[u8], Bad> {
    prev.get(..common).ok_or_else(|| {
        format!(
            "a common prefix of {common} bytes with a {}-byte key",
            prev.len()
        )
    })
}

/// The key without timestamp and type, rebuilt from the previous one the way DIFF and
/// FAST_DIFF write it: when the row differs, the rest of the row, the previous key's family and
/// the whole qualifier; else the previous key's first `common` bytes and the rest of the
/// qualifier. `family` is `[length][bytes]`.
fn key_before_timestamp(
    input: &mut Input<'_>,
    prev: &[u8],
    family: &[u8],
    key_len: usize,
    common: usize,
) -> Result<Vec<u8>, Bad> {
    let bare = key_len
        .checked_sub(crate::cell::TIMESTAMP_TYPE)
        .ok_or("a key shorter than its timestamp and type")?;
    // Sized by the bytes there are, never by a length read from the file.
    let mut key = Vec::with_capacity(bare.min(prev.len() + input.remaining()));
    key.extend_from_slice(shared(prev, common)?);
    if common < 2 {
        key.extend_from_slice(input.take(2 - common, "row length")?);
    }
    let row_end = row_end(&key)?;
    if common < row_end {
        let have = key.len();
        key.extend_from_slice(input.take(row_end - have, "row")?);
        key.extend_from_slice(family);
        let qualifier = bare
            .checked_sub(key.len())
            .ok_or("a key length shorter than its row and family")?;
        key.extend_from_slice(input.take(qualifier, "qualifier")?);
    } else {
        let rest = bare
            .checked_sub(common)
            .ok_or("a common prefix longer than the key")?;
        key.extend_from_slice(input.take(rest, "qualifier")?);
    }
    Ok(key)
}
