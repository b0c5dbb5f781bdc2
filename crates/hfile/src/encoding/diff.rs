//! DIFF (id 3): a flag byte per cell says which lengths and the type repeat the previous
//! cell's; the family is written once, before the first cell; timestamps are stored in as few
//! little-endian bytes as they, or their difference from the previous one, need.

use super::{key_before_timestamp, Trailer};
use crate::cell::Cell;
use crate::input::{Bad, Input};

const SAME_KEY_LENGTH: u8 = 0x01;
const SAME_VALUE_LENGTH: u8 = 0x02;
const SAME_TYPE: u8 = 0x04;
const TIMESTAMP_IS_DIFF: u8 = 0x08;
const TIMESTAMP_SIGN: u8 = 0x80;

pub(super) fn decode(
    input: &mut Input<'_>,
    trailer: &mut Trailer,
    out: &mut Vec<Cell>,
) -> Result<(), Bad> {
    if input.is_empty() {
        return Ok(());
    }
    let family_len = input.u8("family length")?;
    let mut family = vec![family_len];
    family.extend_from_slice(input.take(usize::from(family_len), "family")?);
    let (mut prev, mut key_len, mut value_len) = (Vec::new(), 0usize, 0usize);
    let (mut timestamp, mut kind) = (0i64, 0u8);
    while !input.is_empty() {
        let flag = input.u8("flag")?;
        if flag & SAME_KEY_LENGTH == 0 {
            key_len = input.cvarint("key length")?;
        }
        if flag & SAME_VALUE_LENGTH == 0 {
            value_len = input.cvarint("value length")?;
        }
        let common = input.cvarint("common prefix")?;
        let mut key = key_before_timestamp(input, &prev, &family, key_len, common)?;
        let n = usize::from((flag >> 4) & 0x07) + 1;
        let mut t: i64 = 0;
        for (i, b) in input.take(n, "timestamp")?.iter().enumerate() {
            t |= i64::from(*b) << (8 * i);
        }
        if flag & TIMESTAMP_SIGN != 0 {
            t = t.wrapping_neg();
        }
        timestamp = if flag & TIMESTAMP_IS_DIFF != 0 {
            timestamp.wrapping_sub(t)
        } else {
            t
        };
        if flag & SAME_TYPE == 0 {
            kind = input.u8("type")?;
        }
        key.extend_from_slice(&timestamp.to_be_bytes());
        key.push(kind);
        let value = input.take(value_len, "value")?.to_vec();
        let mut cell = Cell::from_key(&key, value)?;
        trailer.read(input, &mut cell)?;
        out.push(cell);
        prev = key;
    }
    Ok(())
}
