//! The WAL segment format, version 2 (reads version 1): segment header and record framing, byte
//! by byte as in `docs/wal-format.md`. Pure functions over byte slices; no IO, so the decoder
//! can be tested (and fuzzed) on its own.
//!
//! Version 2 gives each record two checksums: one over its payload and one over its header,
//! seeded with a random salt chosen when the segment is created. A header that checks out can
//! be trusted (its length says where the next record starts), and bytes a user wrote into a
//! value cannot pass for a record header when replay searches past damage: they cannot know
//! the salt.
//!
//! HOT PATH: [`RecordFramer::header`] runs once per logged write, outside every lock. It must
//! not allocate.

use cellar_model::{Error, Result};
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;

/// First eight bytes of every segment.
pub const MAGIC: [u8; 8] = *b"CELRWAL\0";
/// The format version this build writes and the newest it reads.
pub const VERSION: u32 = 2;
/// Segment header of version 2: magic (8) + version (u32 LE) + salt (u64 LE).
pub const HEADER_LEN: usize = 20;
/// Segment header of version 1: magic (8) + version (u32 LE).
pub const HEADER_LEN_V1: usize = 12;
/// Record header of version 2: len (u32) + region (u64) + seq (u64) + payload crc (u32) +
/// header crc (u32), all LE.
pub const RECORD_HEADER_LEN: usize = 28;
/// Record header of version 1: crc (u32) + len (u32) + region (u64) + seq (u64), all LE.
pub const RECORD_HEADER_LEN_V1: usize = 24;
/// Kind named in a `BadMagic` error.
pub const KIND: &str = "WAL segment";

/// What a segment header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    pub version: u32,
    /// Seeds every record header's checksum (version 2; 0 in version 1).
    pub salt: u64,
    /// Where the first record starts.
    pub len: usize,
}

/// A fresh salt for a new segment: the standard library's randomly keyed hasher (seeded from
/// the OS), over the segment id and the time.
pub fn new_salt(segment_id: u64) -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(segment_id);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    h.finish()
}

/// The header every version 2 segment starts with.
pub fn segment_header(salt: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    let (magic, rest) = h.split_at_mut(MAGIC.len());
    let (version, salt_b) = rest.split_at_mut(4);
    magic.copy_from_slice(&MAGIC);
    version.copy_from_slice(&VERSION.to_le_bytes());
    salt_b.copy_from_slice(&salt.to_le_bytes());
    h
}

/// Validates a segment header. A file too short to hold its header is an interrupted create,
/// which the caller handles before calling this.
pub fn check_segment_header(file: &str, data: &[u8]) -> Result<SegmentHeader> {
    let short = |at| Error::corruption(file, at, "segment shorter than its header");
    let magic = read_array::<8>(data, 0).ok_or_else(|| short(0))?;
    if magic != MAGIC {
        return Err(Error::BadMagic {
            file: file.to_string(),
            kind: KIND,
            // Big-endian so the hex reads in file order.
            found: u64::from_be_bytes(magic),
        });
    }
    let version = read_array::<4>(data, 8)
        .map(u32::from_le_bytes)
        .ok_or_else(|| short(8))?;
    match version {
        0 => Err(Error::corruption(file, 8, "format version 0 is not valid")),
        1 => Ok(SegmentHeader {
            version,
            salt: 0,
            len: HEADER_LEN_V1,
        }),
        2 => {
            let salt = read_array::<8>(data, 12)
                .map(u64::from_le_bytes)
                .ok_or_else(|| short(12))?;
            Ok(SegmentHeader {
                version,
                salt,
                len: HEADER_LEN,
            })
        }
        _ => Err(Error::UnsupportedVersion {
            file: file.to_string(),
            found: version,
            supported: VERSION,
        }),
    }
}

/// Bytes a segment of `version` needs for its header (`None`: not a version this build reads).
pub fn header_len(version: u32) -> Option<usize> {
    match version {
        1 => Some(HEADER_LEN_V1),
        2 => Some(HEADER_LEN),
        _ => None,
    }
}

/// Frames records for one version 2 segment.
#[derive(Debug, Clone, Copy)]
pub struct RecordFramer {
    salt: u64,
}

impl RecordFramer {
    pub fn new(salt: u64) -> RecordFramer {
        RecordFramer { salt }
    }

    /// The framing header of one record, checksums included. The caller appends it, then
    /// `payload`. Fails only if the payload does not fit the u32 length field.
    pub fn header(&self, region: u64, seq: u64, payload: &[u8]) -> Result<[u8; RECORD_HEADER_LEN]> {
        let len = u32::try_from(payload.len()).map_err(|_| {
            Error::InvalidArgument(format!(
                "WAL record payload of {} bytes exceeds the 4 GiB limit",
                payload.len()
            ))
        })?;
        let mut h = [0u8; RECORD_HEADER_LEN];
        let (fields, hcrc) = h.split_at_mut(RECORD_HEADER_LEN - 4);
        let (len_b, rest) = fields.split_at_mut(4);
        let (region_b, rest) = rest.split_at_mut(8);
        let (seq_b, pcrc) = rest.split_at_mut(8);
        len_b.copy_from_slice(&len.to_le_bytes());
        region_b.copy_from_slice(&region.to_le_bytes());
        seq_b.copy_from_slice(&seq.to_le_bytes());
        pcrc.copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
        hcrc.copy_from_slice(&header_crc(self.salt, fields).to_le_bytes());
        Ok(h)
    }
}

/// CRC32C of a record header's first 24 bytes, seeded with the segment's salt.
fn header_crc(salt: u64, fields: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&salt.to_le_bytes()), fields)
}

/// What lies at one offset of a segment.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A whole record whose checksums match; `next` is the offset just past it.
    Record {
        region: u64,
        seq: u64,
        /// Where the payload lies in the decoded slice.
        payload: Range<usize>,
        next: usize,
    },
    /// The record header runs past the end of the data, or (its header checking out) its
    /// payload does.
    Incomplete {
        /// Bytes the record needs from its start (header, or header + payload).
        needed: u64,
        /// Bytes left from its start to the end of the data.
        available: u64,
    },
    /// The header's checksum does not match: its length cannot be trusted (version 1 has a
    /// single checksum, reported here too).
    BadHeader { stored: u32, computed: u32 },
    /// The header checks out, the payload fits, but its checksum does not match. `next` is
    /// where the following record starts.
    BadPayload {
        stored: u32,
        computed: u32,
        next: usize,
    },
}

/// Decodes the record starting at `pos` of a segment of `header`'s version. Never panics,
/// whatever `data` holds.
pub fn decode_at(header: &SegmentHeader, data: &[u8], pos: usize) -> Decoded {
    if header.version == 1 {
        return decode_v1_at(data, pos);
    }
    let available = data.len().saturating_sub(pos) as u64;
    let Some(h) = data.get(pos..).and_then(|d| d.get(..RECORD_HEADER_LEN)) else {
        return Decoded::Incomplete {
            needed: RECORD_HEADER_LEN as u64,
            available,
        };
    };
    let (fields, hcrc) = h.split_at(RECORD_HEADER_LEN - 4);
    let stored = read_array::<4>(hcrc, 0).map_or(0, u32::from_le_bytes);
    let computed = header_crc(header.salt, fields);
    if stored != computed {
        return Decoded::BadHeader { stored, computed };
    }
    let len = read_array::<4>(fields, 0).map_or(0, u32::from_le_bytes) as usize;
    let region = read_array::<8>(fields, 4).map_or(0, u64::from_le_bytes);
    let seq = read_array::<8>(fields, 12).map_or(0, u64::from_le_bytes);
    let pcrc = read_array::<4>(fields, 20).map_or(0, u32::from_le_bytes);
    let start = pos + RECORD_HEADER_LEN;
    let Some(payload) = data.get(start..).and_then(|d| d.get(..len)) else {
        return Decoded::Incomplete {
            needed: (RECORD_HEADER_LEN + len) as u64,
            available,
        };
    };
    let computed = crc32c::crc32c(payload);
    if computed != pcrc {
        return Decoded::BadPayload {
            stored: pcrc,
            computed,
            next: start + len,
        };
    }
    Decoded::Record {
        region,
        seq,
        payload: start..start + len,
        next: start + len,
    }
}

/// Version 1: one CRC32C over length, region, seq and payload.
fn decode_v1_at(data: &[u8], pos: usize) -> Decoded {
    let available = data.len().saturating_sub(pos) as u64;
    let Some(header) = data.get(pos..).and_then(|d| d.get(..RECORD_HEADER_LEN_V1)) else {
        return Decoded::Incomplete {
            needed: RECORD_HEADER_LEN_V1 as u64,
            available,
        };
    };
    let field = |at: usize| read_array::<8>(header, at).map_or(0, u64::from_le_bytes);
    let stored = read_array::<4>(header, 0).map_or(0, u32::from_le_bytes);
    let len = read_array::<4>(header, 4).map_or(0, u32::from_le_bytes) as usize;
    let start = pos + RECORD_HEADER_LEN_V1;
    let Some(payload) = data.get(start..).and_then(|d| d.get(..len)) else {
        return Decoded::Incomplete {
            needed: (RECORD_HEADER_LEN_V1 + len) as u64,
            available,
        };
    };
    let computed = crc32c::crc32c_append(crc32c::crc32c(header.get(4..).unwrap_or(&[])), payload);
    if computed != stored {
        return Decoded::BadHeader { stored, computed };
    }
    Decoded::Record {
        region: field(8),
        seq: field(16),
        payload: start..start + len,
        next: start + len,
    }
}

/// A version 1 record header (for tests and tools that must read old segments).
pub fn record_header_v1(region: u64, seq: u64, payload: &[u8]) -> [u8; RECORD_HEADER_LEN_V1] {
    let mut h = [0u8; RECORD_HEADER_LEN_V1];
    let (crc, fields) = h.split_at_mut(4);
    let (len_b, rest) = fields.split_at_mut(4);
    let (region_b, seq_b) = rest.split_at_mut(8);
    len_b.copy_from_slice(&(payload.len() as u32).to_le_bytes());
    region_b.copy_from_slice(&region.to_le_bytes());
    seq_b.copy_from_slice(&seq.to_le_bytes());
    let c = crc32c::crc32c_append(crc32c::crc32c(fields), payload);
    crc.copy_from_slice(&c.to_le_bytes());
    h
}

fn read_array<const N: usize>(data: &[u8], at: usize) -> Option<[u8; N]> {
    data.get(at..)?.get(..N)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SALT: u64 = 0x5eed_5a17;

    fn header() -> SegmentHeader {
        SegmentHeader {
            version: VERSION,
            salt: SALT,
            len: HEADER_LEN,
        }
    }

    fn framed(region: u64, seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = RecordFramer::new(SALT)
            .header(region, seq, payload)
            .expect("header")
            .to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn record_round_trip() {
        let data = framed(7, 42, b"hello");
        match decode_at(&header(), &data, 0) {
            Decoded::Record {
                region,
                seq,
                payload,
                next,
            } => {
                assert_eq!((region, seq), (7, 42));
                assert_eq!(&data[payload], b"hello");
                assert_eq!(next, data.len());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let data = framed(1, 2, b"payload bytes");
        for i in 0..data.len() {
            for bit in 0..8 {
                let mut d = data.clone();
                d[i] ^= 1 << bit;
                assert!(
                    !matches!(decode_at(&header(), &d, 0), Decoded::Record { .. }),
                    "flip at byte {i} bit {bit} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn a_damaged_payload_keeps_the_trusted_boundary() {
        let mut data = framed(1, 2, b"payload bytes");
        let end = data.len();
        data[RECORD_HEADER_LEN + 1] ^= 1;
        assert!(matches!(
            decode_at(&header(), &data, 0),
            Decoded::BadPayload { next, .. } if next == end
        ));
    }

    #[test]
    fn a_record_framed_with_another_salt_is_not_a_record() {
        let data = framed(1, 2, b"x");
        let other = SegmentHeader {
            salt: SALT + 1,
            ..header()
        };
        assert!(matches!(
            decode_at(&other, &data, 0),
            Decoded::BadHeader { .. }
        ));
    }

    #[test]
    fn truncated_record_is_incomplete() {
        let data = framed(1, 2, b"0123456789");
        for cut in 0..data.len() {
            assert!(
                matches!(
                    decode_at(&header(), &data[..cut], 0),
                    Decoded::Incomplete { .. }
                ),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn zeros_are_not_a_record() {
        assert!(matches!(
            decode_at(&header(), &[0u8; 64], 0),
            Decoded::BadHeader { .. }
        ));
    }

    #[test]
    fn version_1_records_still_decode() {
        let v1 = SegmentHeader {
            version: 1,
            salt: 0,
            len: HEADER_LEN_V1,
        };
        let mut data = record_header_v1(3, 9, b"old").to_vec();
        data.extend_from_slice(b"old");
        assert!(matches!(
            decode_at(&v1, &data, 0),
            Decoded::Record {
                region: 3,
                seq: 9,
                ..
            }
        ));
    }

    #[test]
    fn header_checks() {
        let h = segment_header(SALT);
        assert_eq!(
            check_segment_header("f", &h).expect("good header"),
            header()
        );
        let mut bad = h;
        bad[0] = b'X';
        assert!(matches!(
            check_segment_header("f", &bad),
            Err(Error::BadMagic { kind: KIND, .. })
        ));
        let mut newer = h;
        newer[8..12].copy_from_slice(&3u32.to_le_bytes());
        assert!(matches!(
            check_segment_header("f", &newer),
            Err(Error::UnsupportedVersion {
                found: 3,
                supported: 2,
                ..
            })
        ));
        let mut v1 = h[..HEADER_LEN_V1].to_vec();
        v1[8..12].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(
            check_segment_header("f", &v1).expect("v1").len,
            HEADER_LEN_V1
        );
    }

    proptest::proptest! {
        #[test]
        fn decoder_never_panics(data in proptest::collection::vec(proptest::num::u8::ANY, 0..200), pos in 0usize..220, v1 in proptest::bool::ANY) {
            let h = if v1 { SegmentHeader { version: 1, salt: 0, len: HEADER_LEN_V1 } } else { header() };
            let _ = decode_at(&h, &data, pos);
        }
    }
}
