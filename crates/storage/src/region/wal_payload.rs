//! The payload of a region's WAL record: the cells of one row mutation.
//!
//! ```text
//! version 1: version: u8 (=1) | count: u32 LE | cells
//! version 2: version: u8 (=2) | nonce group: u64 LE | nonce: u64 LE | count: u32 LE | cells
//! cells:     count × (family_len: u8 | family | key_len: u32 LE | key |
//!                     value_len: u32 LE | value)
//! ```
//! Keys are internal keys carrying the mutation's sequence id. Version 2 is written for a
//! mutation with a nonce (an increment or append a client may retry), so that a restart
//! remembers it was applied; version 1 for every other. Documented in `docs/wal-format.md`
//! with the segment format.

use cellar_model::{Error, Nonce, Result};

const EDIT_VERSION: u8 = 1;
const EDIT_VERSION_NONCE: u8 = 2;

/// One cell of an edit, borrowed from the encoded payload.
pub struct EditCell<'a> {
    pub family: &'a [u8],
    pub key: &'a [u8],
    pub value: &'a [u8],
}

pub fn encode(buf: &mut Vec<u8>, nonce: Option<Nonce>, cells: &[(&[u8], &[u8], &[u8])]) {
    match nonce {
        Some(n) => {
            buf.push(EDIT_VERSION_NONCE);
            buf.extend_from_slice(&n.group.to_le_bytes());
            buf.extend_from_slice(&n.nonce.to_le_bytes());
        }
        None => buf.push(EDIT_VERSION),
    }
    buf.extend_from_slice(&(cells.len() as u32).to_le_bytes());
    for (family, key, value) in cells {
        buf.push(family.len() as u8);
        buf.extend_from_slice(family);
        buf.extend_from_slice(&(key.len() as u32).to_le_bytes());
        buf.extend_from_slice(key);
        buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
        buf.extend_from_slice(value);
    }
}

/// The nonce an edit carries, if any (without decoding its cells).
pub fn nonce(payload: &[u8]) -> Option<Nonce> {
    let mut c = Cursor {
        data: payload,
        pos: 0,
    };
    match c.take(1)? {
        [EDIT_VERSION_NONCE] => Some(Nonce {
            group: c.u64()?,
            nonce: c.u64()?,
        }),
        _ => None,
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// Decodes a payload; `what` names the record in errors (segment and offset are not known here).
pub fn decode<'a>(payload: &'a [u8], what: &str) -> Result<Vec<EditCell<'a>>> {
    let bad = |detail: &str| Error::corruption(what, 0, format!("bad WAL edit: {detail}"));
    let mut c = Cursor {
        data: payload,
        pos: 0,
    };
    match c.take(1) {
        Some([EDIT_VERSION]) => {}
        Some([EDIT_VERSION_NONCE]) => {
            c.take(16).ok_or_else(|| bad("truncated nonce"))?;
        }
        Some([v]) => return Err(bad(&format!("unknown edit version {v}"))),
        _ => return Err(bad("empty")),
    }
    let count = c.u32().ok_or_else(|| bad("truncated count"))?;
    let mut cells = Vec::with_capacity((count as usize).min(4096));
    for _ in 0..count {
        let flen = c
            .take(1)
            .and_then(|b| b.first().copied())
            .ok_or_else(|| bad("truncated"))?;
        let family = c
            .take(flen as usize)
            .ok_or_else(|| bad("truncated family"))?;
        let klen = c.u32().ok_or_else(|| bad("truncated key length"))?;
        let key = c.take(klen as usize).ok_or_else(|| bad("truncated key"))?;
        let vlen = c.u32().ok_or_else(|| bad("truncated value length"))?;
        let value = c
            .take(vlen as usize)
            .ok_or_else(|| bad("truncated value"))?;
        cells.push(EditCell { family, key, value });
    }
    if c.pos != payload.len() {
        return Err(bad("trailing bytes"));
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        for nonce in [
            None,
            Some(Nonce {
                group: 7,
                nonce: 99,
            }),
        ] {
            let mut buf = Vec::new();
            encode(
                &mut buf,
                nonce,
                &[(b"cf", b"key1", b"v"), (b"x", b"k2", b"")],
            );
            let cells = decode(&buf, "test").expect("decode");
            assert_eq!(cells.len(), 2);
            assert_eq!(
                (cells[1].family, cells[1].key, cells[1].value),
                (&b"x"[..], &b"k2"[..], &b""[..])
            );
            assert_eq!(super::nonce(&buf), nonce);
            for cut in 0..buf.len() {
                assert!(decode(&buf[..cut], "test").is_err(), "cut at {cut}");
            }
        }
    }
}
