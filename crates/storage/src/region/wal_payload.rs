//! The payload of a region's WAL record: the cells of one row mutation.
//!
//! ```text
//! version 1: version: u8 (=1) | count: u32 LE | cells
//! version 2: version: u8 (=2) | nonce group: u64 LE | nonce: u64 LE | count: u32 LE | cells
//! version 3: version: u8 (=3) | flags: u8 | [nonce group: u64 LE | nonce: u64 LE]
//!            | [ids: u8 | ids × cluster id: u128 LE] | count: u32 LE | cells
//!            (flags bit 0: the nonce is there; bit 1: the cluster ids are; others 0)
//! cells:     count × (family_len: u8 | family | key_len: u32 LE | key |
//!                     value_len: u32 LE | value)
//! ```
//! Keys are internal keys carrying the mutation's sequence id. Version 2 is written for a
//! mutation with a nonce (an increment or append a client may retry), so that a restart
//! remembers it was applied; version 3 for an edit replicated in, which carries the clusters it
//! has been through (`RowMutation::cluster_ids`) so that replication out does not send it
//! back; version 1 for every other. Documented in `docs/wal-format.md` with the segment format.

use cellar_model::{Error, Nonce, Result};

const EDIT_VERSION: u8 = 1;
const EDIT_VERSION_NONCE: u8 = 2;
const EDIT_VERSION_FLAGS: u8 = 3;
const FLAG_NONCE: u8 = 1;
const FLAG_CLUSTER_IDS: u8 = 2;
/// The most cluster ids an edit records (the count is one byte).
pub const MAX_CLUSTER_IDS: usize = u8::MAX as usize;

/// One cell of an edit, borrowed from the encoded payload.
pub struct EditCell<'a> {
    pub family: &'a [u8],
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Encodes an edit. Callers keep `cluster_ids` to [`MAX_CLUSTER_IDS`]; more are cut there.
pub fn encode(
    buf: &mut Vec<u8>,
    nonce: Option<Nonce>,
    cluster_ids: &[u128],
    cells: &[(&[u8], &[u8], &[u8])],
) {
    let ids = cluster_ids.get(..MAX_CLUSTER_IDS).unwrap_or(cluster_ids);
    match (nonce, ids.is_empty()) {
        (Some(n), true) => {
            buf.push(EDIT_VERSION_NONCE);
            buf.extend_from_slice(&n.group.to_le_bytes());
            buf.extend_from_slice(&n.nonce.to_le_bytes());
        }
        (None, true) => buf.push(EDIT_VERSION),
        (_, false) => {
            buf.push(EDIT_VERSION_FLAGS);
            buf.push(FLAG_CLUSTER_IDS | if nonce.is_some() { FLAG_NONCE } else { 0 });
            if let Some(n) = nonce {
                buf.extend_from_slice(&n.group.to_le_bytes());
                buf.extend_from_slice(&n.nonce.to_le_bytes());
            }
            buf.push(ids.len() as u8);
            for id in ids {
                buf.extend_from_slice(&id.to_le_bytes());
            }
        }
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

/// What an edit says before its cells.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct EditHeader {
    pub nonce: Option<Nonce>,
    pub cluster_ids: Vec<u128>,
}

/// Reads an edit's header; the cursor is left at its cell count.
fn header(c: &mut Cursor<'_>) -> std::result::Result<EditHeader, String> {
    let mut h = EditHeader::default();
    let nonce = |c: &mut Cursor<'_>| -> std::result::Result<Nonce, String> {
        match (c.u64(), c.u64()) {
            (Some(group), Some(nonce)) => Ok(Nonce { group, nonce }),
            _ => Err("truncated nonce".into()),
        }
    };
    match c.take(1) {
        Some([EDIT_VERSION]) => {}
        Some([EDIT_VERSION_NONCE]) => h.nonce = Some(nonce(c)?),
        Some([EDIT_VERSION_FLAGS]) => {
            let flags = c
                .take(1)
                .and_then(|b| b.first().copied())
                .ok_or("truncated flags")?;
            // Version 3 is written only for an edit with cluster ids: anything else has one
            // encoding, an older version's.
            if flags & !(FLAG_NONCE | FLAG_CLUSTER_IDS) != 0 || flags & FLAG_CLUSTER_IDS == 0 {
                return Err(format!("edit flags {flags:#x} not written by this version"));
            }
            if flags & FLAG_NONCE != 0 {
                h.nonce = Some(nonce(c)?);
            }
            if flags & FLAG_CLUSTER_IDS != 0 {
                let n = c
                    .take(1)
                    .and_then(|b| b.first().copied())
                    .ok_or("truncated cluster id count")?;
                if n == 0 {
                    return Err("a version 3 edit without cluster ids".into());
                }
                for _ in 0..n {
                    let id = c
                        .take(16)
                        .and_then(|b| <[u8; 16]>::try_from(b).ok())
                        .ok_or("truncated cluster id")?;
                    h.cluster_ids.push(u128::from_le_bytes(id));
                }
            }
        }
        Some([v]) => return Err(format!("unknown edit version {v}")),
        _ => return Err("empty".into()),
    }
    Ok(h)
}

/// What an edit carries before its cells (its nonce, the clusters it has been through),
/// without decoding the cells; `None` for a damaged header.
pub fn edit_header(payload: &[u8]) -> Option<EditHeader> {
    header(&mut Cursor {
        data: payload,
        pos: 0,
    })
    .ok()
}

/// The nonce an edit carries, if any (without decoding its cells).
pub fn nonce(payload: &[u8]) -> Option<Nonce> {
    edit_header(payload)?.nonce
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
    header(&mut c).map_err(|e| bad(&e))?;
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
                &[],
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

    #[test]
    fn cluster_ids_are_kept_beside_a_nonce_and_older_versions_still_read() {
        let ids = [u128::MAX - 5, 42];
        for nonce in [None, Some(Nonce { group: 3, nonce: 4 })] {
            let mut buf = Vec::new();
            encode(&mut buf, nonce, &ids, &[(b"cf", b"key", b"value")]);
            assert_eq!(buf[0], EDIT_VERSION_FLAGS);
            assert_eq!(
                edit_header(&buf),
                Some(EditHeader {
                    nonce,
                    cluster_ids: ids.to_vec()
                })
            );
            let cells = decode(&buf, "test").expect("decode");
            assert_eq!((cells[0].key, cells[0].value), (&b"key"[..], &b"value"[..]));
            for cut in 0..buf.len() {
                assert!(decode(&buf[..cut], "test").is_err(), "cut at {cut}");
            }
        }
        // Without cluster ids the versions an older build reads.
        let mut buf = Vec::new();
        encode(&mut buf, None, &[], &[(b"cf", b"k", b"v")]);
        assert_eq!(buf[0], EDIT_VERSION);
        assert_eq!(edit_header(&buf), Some(EditHeader::default()));
        // Flags this build does not know, or a version 3 edit an older version would have
        // held: an error, not a guess (every edit has one encoding).
        for head in [
            &[EDIT_VERSION_FLAGS, 0x80][..],
            &[EDIT_VERSION_FLAGS, 0],
            &[3, 2, 0],
        ] {
            let mut buf = head.to_vec();
            buf.extend_from_slice(&0u32.to_le_bytes());
            assert!(decode(&buf, "test").is_err(), "{head:?}");
            assert_eq!(edit_header(&buf), None);
        }
    }
}
