//! Byte-level encodings shared by the store-file blocks: LEB128 varints and little-endian
//! fixed-width integers, decoded from untrusted bytes without panicking.
//!
//! HOT PATH: `get_varint32` runs once per field of every entry a block iterator visits; it
//! must not allocate.

/// Why bytes could not be decoded. A `&'static str` so that decoding never allocates; the
/// caller attaches the file path and block offset when it becomes an [`cellar_model::Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub &'static str);

impl Malformed {
    /// The error for this defect in the block at `offset` of `file`.
    pub(crate) fn at(self, file: impl std::fmt::Display, offset: u64) -> cellar_model::Error {
        cellar_model::Error::corruption(file, offset, self.0)
    }
}

pub(crate) type DecodeResult<T> = std::result::Result<T, Malformed>;

/// Appends `v` as a LEB128 varint (at most 5 bytes).
pub(crate) fn put_varint32(buf: &mut Vec<u8>, v: u32) {
    put_varint64(buf, u64::from(v));
}

/// Appends `v` as a LEB128 varint (at most 10 bytes).
pub(crate) fn put_varint64(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Decodes a varint that must fit in 32 bits from `data[*pos..]`, advancing `pos`.
#[inline]
pub(crate) fn get_varint32(data: &[u8], pos: &mut usize) -> DecodeResult<u32> {
    // Fast path: most lengths in a block are below 128.
    if let Some(&b) = data.get(*pos) {
        if b < 0x80 {
            *pos += 1;
            return Ok(u32::from(b));
        }
    }
    let v = get_varint64(data, pos)?;
    u32::try_from(v).map_err(|_| Malformed("varint overflows 32 bits"))
}

/// Decodes a varint of up to 64 bits from `data[*pos..]`, advancing `pos`.
pub(crate) fn get_varint64(data: &[u8], pos: &mut usize) -> DecodeResult<u64> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    let mut p = *pos;
    loop {
        let b = *data.get(p).ok_or(Malformed("truncated varint"))?;
        p += 1;
        if shift == 63 && b > 1 {
            return Err(Malformed("varint overflows 64 bits"));
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            *pos = p;
            return Ok(v);
        }
        shift += 7;
        if shift > 63 {
            return Err(Malformed("varint longer than 10 bytes"));
        }
    }
}

/// Reads a little-endian u32 at `pos`.
#[inline]
pub(crate) fn get_u32_le(data: &[u8], pos: usize) -> DecodeResult<u32> {
    let bytes = pos
        .checked_add(4)
        .and_then(|end| data.get(pos..end))
        .ok_or(Malformed("truncated u32"))?;
    let mut a = [0u8; 4];
    a.copy_from_slice(bytes);
    Ok(u32::from_le_bytes(a))
}

/// Reads a little-endian u64 at `pos`.
pub(crate) fn get_u64_le(data: &[u8], pos: usize) -> DecodeResult<u64> {
    let bytes = pos
        .checked_add(8)
        .and_then(|end| data.get(pos..end))
        .ok_or(Malformed("truncated u64"))?;
    let mut a = [0u8; 8];
    a.copy_from_slice(bytes);
    Ok(u64::from_le_bytes(a))
}

/// `len` bytes at `*pos`, advancing `pos`.
#[inline]
pub(crate) fn get_slice<'a>(data: &'a [u8], pos: &mut usize, len: usize) -> DecodeResult<&'a [u8]> {
    let end = pos.checked_add(len).ok_or(Malformed("length overflow"))?;
    let s = data
        .get(*pos..end)
        .ok_or(Malformed("length runs past the end"))?;
    *pos = end;
    Ok(s)
}

/// A varint length followed by that many bytes.
pub(crate) fn get_length_prefixed<'a>(data: &'a [u8], pos: &mut usize) -> DecodeResult<&'a [u8]> {
    let len = get_varint32(data, pos)? as usize;
    get_slice(data, pos, len)
}

/// Appends a varint length and the bytes.
pub(crate) fn put_length_prefixed(buf: &mut Vec<u8>, data: &[u8]) {
    put_varint64(buf, data.len() as u64);
    buf.extend_from_slice(data);
}

/// How many leading bytes `a` and `b` have in common.
pub(crate) fn shared_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The 8 bytes of `row` after `skip` as a big-endian number, zero-padded: a row that sorts
/// before another (as bytes) never gets a larger chunk, so a search may narrow over chunks
/// before comparing whole keys (the block index, and blocks' restart hints: its top 4 bytes).
pub(crate) fn row_chunk(row: &[u8], skip: usize) -> u64 {
    let mut b = [0u8; 8];
    for (d, s) in b.iter_mut().zip(row.get(skip..).unwrap_or_default()) {
        *d = *s;
    }
    u64::from_be_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        let values = [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ];
        let mut buf = Vec::new();
        for v in values {
            put_varint64(&mut buf, v);
        }
        let mut pos = 0;
        for v in values {
            assert_eq!(get_varint64(&buf, &mut pos), Ok(v));
        }
        assert_eq!(pos, buf.len());
    }

    #[test]
    fn bad_varints_are_errors() {
        let mut pos = 0;
        assert!(get_varint64(&[0x80, 0x80], &mut pos).is_err());
        let mut pos = 0;
        assert!(get_varint64(&[0xff; 11], &mut pos).is_err());
        let mut pos = 0;
        assert!(get_varint64(
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &mut pos
        )
        .is_err());
        let mut buf = Vec::new();
        put_varint64(&mut buf, u64::from(u32::MAX) + 1);
        let mut pos = 0;
        assert!(get_varint32(&buf, &mut pos).is_err());
    }

    #[test]
    fn fixed_reads_check_bounds() {
        assert_eq!(get_u32_le(&[1, 0, 0, 0], 0), Ok(1));
        assert!(get_u32_le(&[1, 0, 0], 0).is_err());
        assert!(get_u64_le(&[0; 8], 1).is_err());
        assert!(get_u32_le(&[0; 8], usize::MAX).is_err());
        let mut pos = 0;
        assert!(get_slice(&[1, 2], &mut pos, 3).is_err());
    }
}
