//! FAST_DIFF (id 4): like DIFF, but the first cell's key is whole, a timestamp repeats the
//! leading bytes it shares with the previous one, and a value may repeat the previous value.

use super::{key_before_timestamp, row_end, Trailer};
use crate::cell::{Cell, TIMESTAMP_TYPE};
use crate::input::{Bad, Input};

const TIMESTAMP_PREFIX: u8 = 0x07;
const SAME_KEY_LENGTH: u8 = 0x08;
const SAME_VALUE_LENGTH: u8 = 0x10;
const SAME_TYPE: u8 = 0x20;
const SAME_VALUE: u8 = 0x40;

pub(super) fn decode(
    input: &mut Input<'_>,
    trailer: &mut Trailer,
    out: &mut Vec<Cell>,
) -> Result<(), Bad> {
    let (mut prev, mut key_len, mut value_len): (Vec<u8>, usize, usize) = (Vec::new(), 0, 0);
    let mut prev_value: Vec<u8> = Vec::new();
    let mut first = true;
    while !input.is_empty() {
        let flag = input.u8("flag")?;
        if flag & SAME_KEY_LENGTH == 0 {
            key_len = input.cvarint("key length")?;
        }
        if flag & SAME_VALUE_LENGTH == 0 {
            value_len = input.cvarint("value length")?;
        }
        let common = input.cvarint("common prefix")?;
        let mut key = if first {
            let bare = key_len
                .checked_sub(TIMESTAMP_TYPE)
                .ok_or("a key shorter than its timestamp and type")?;
            input.take(bare, "first key")?.to_vec()
        } else {
            let end = row_end(&prev)?;
            let family_len = prev
                .get(end)
                .map(|&l| usize::from(l))
                .ok_or("a key without its family")?;
            let family = prev
                .get(end..end + 1 + family_len)
                .ok_or("a key shorter than its family")?
                .to_vec();
            key_before_timestamp(input, &prev, &family, key_len, common)?
        };
        // Timestamp: the leading bytes it shares with the previous one, then its own.
        let shared_ts = usize::from(flag & TIMESTAMP_PREFIX);
        let mut ts = Vec::with_capacity(8);
        if shared_ts > 0 {
            let at = prev
                .len()
                .checked_sub(TIMESTAMP_TYPE)
                .ok_or("no previous timestamp")?;
            let from = prev
                .get(at..at + shared_ts)
                .ok_or("no previous timestamp")?;
            ts.extend_from_slice(from);
        }
        ts.extend_from_slice(input.take(8 - shared_ts, "timestamp")?);
        key.extend_from_slice(&ts);
        let kind = if flag & SAME_TYPE == 0 {
            input.u8("type")?
        } else {
            *prev.last().ok_or("no previous type")?
        };
        key.push(kind);
        let value = if flag & SAME_VALUE != 0 {
            if prev_value.len() != value_len {
                return Err("a repeated value of another length".into());
            }
            prev_value.clone()
        } else {
            input.take(value_len, "value")?.to_vec()
        };
        let mut cell = Cell::from_key(&key, value)?;
        trailer.read(input, &mut cell)?;
        prev_value.clone_from(&cell.value);
        out.push(cell);
        prev = key;
        first = false;
    }
    Ok(())
}
