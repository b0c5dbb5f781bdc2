//! PREFIX (id 2): each key is the bytes it shares with the previous key plus its own suffix.

use super::{shared, Trailer};
use crate::cell::Cell;
use crate::input::{Bad, Input};

pub(super) fn decode(
    input: &mut Input<'_>,
    trailer: &mut Trailer,
    out: &mut Vec<Cell>,
) -> Result<(), Bad> {
    let mut prev: Vec<u8> = Vec::new();
    while !input.is_empty() {
        let suffix_len = input.cvarint("key suffix length")?;
        let value_len = input.cvarint("value length")?;
        let common = input.cvarint("common prefix")?;
        let mut key = Vec::with_capacity(common.saturating_add(suffix_len).min(1 << 20));
        key.extend_from_slice(shared(&prev, common)?);
        key.extend_from_slice(input.take(suffix_len, "key suffix")?);
        let value = input.take(value_len, "value")?.to_vec();
        let mut cell = Cell::from_key(&key, value)?;
        trailer.read(input, &mut cell)?;
        out.push(cell);
        prev = key;
    }
    Ok(())
}
