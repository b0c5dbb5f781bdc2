//! The WAL segment format, version 1: segment header and record framing, byte by byte as in
//! `docs/wal-format.md`. Pure functions over byte slices; no IO, so the decoder can be tested
//! (and fuzzed) on its own.
//!
//! HOT PATH: [`record_header`] runs once per logged write, outside every lock. It must not
//! allocate.

use cellar_model::{Error, Result};
use std::ops::Range;

/// First eight bytes of every segment.
pub const MAGIC: [u8; 8] = *b"CELRWAL\0";
/// The format version this build writes and the newest it reads.
pub const VERSION: u32 = 1;
/// Segment header: magic (8) + version (u32 LE).
pub const HEADER_LEN: usize = 12;
/// Record header: crc (u32) + payload length (u32) + region (u64) + seq (u64), all LE.
pub const RECORD_HEADER_LEN: usize = 24;
/// Kind named in a `BadMagic` error.
pub const KIND: &str = "WAL segment";

/// The 12 bytes every segment starts with.
pub fn segment_header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    let (magic, version) = h.split_at_mut(MAGIC.len());
    magic.copy_from_slice(&MAGIC);
    version.copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// Validates a segment header. `data` must hold at least [`HEADER_LEN`] bytes (a shorter file
/// is an interrupted create, which the caller handles).
pub fn check_segment_header(file: &str, data: &[u8]) -> Result<()> {
    let magic = read_array::<8>(data, 0)
        .ok_or_else(|| Error::corruption(file, 0, "segment shorter than its header"))?;
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
        .ok_or_else(|| Error::corruption(file, 8, "segment shorter than its header"))?;
    if version > VERSION {
        return Err(Error::UnsupportedVersion {
            file: file.to_string(),
            found: version,
            supported: VERSION,
        });
    }
    if version == 0 {
        return Err(Error::corruption(file, 8, "format version 0 is not valid"));
    }
    Ok(())
}

/// The framing header of one record, CRC included. The caller appends it and then `payload`.
/// Fails only if the payload does not fit the u32 length field.
pub fn record_header(region: u64, seq: u64, payload: &[u8]) -> Result<[u8; RECORD_HEADER_LEN]> {
    let len = u32::try_from(payload.len()).map_err(|_| {
        Error::InvalidArgument(format!(
            "WAL record payload of {} bytes exceeds the 4 GiB limit",
            payload.len()
        ))
    })?;
    let mut fields = [0u8; RECORD_HEADER_LEN - 4];
    let (len_b, rest) = fields.split_at_mut(4);
    let (region_b, seq_b) = rest.split_at_mut(8);
    len_b.copy_from_slice(&len.to_le_bytes());
    region_b.copy_from_slice(&region.to_le_bytes());
    seq_b.copy_from_slice(&seq.to_le_bytes());
    let mut h = [0u8; RECORD_HEADER_LEN];
    let (crc, rest) = h.split_at_mut(4);
    crc.copy_from_slice(&record_crc(&fields, payload).to_le_bytes());
    rest.copy_from_slice(&fields);
    Ok(h)
}

/// CRC32C over the header fields after the CRC (length, region, seq) and the payload.
fn record_crc(fields: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(fields), payload)
}

/// What lies at one offset of a segment.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A whole record whose CRC matches; `next` is the offset just past it.
    Record {
        region: u64,
        seq: u64,
        /// Where the payload lies in the decoded slice.
        payload: Range<usize>,
        next: usize,
    },
    /// The record header or its payload runs past the end of the data.
    Incomplete {
        /// Bytes the record needs from its start (header, or header + payload).
        needed: u64,
        /// Bytes left from its start to the end of the data.
        available: u64,
    },
    /// The record fits but its CRC does not match.
    BadCrc { stored: u32, computed: u32 },
}

/// Decodes the record starting at `pos`. Never panics, whatever `data` holds.
pub fn decode_at(data: &[u8], pos: usize) -> Decoded {
    let available = data.len().saturating_sub(pos) as u64;
    let header = match data.get(pos..).and_then(|d| d.get(..RECORD_HEADER_LEN)) {
        Some(h) => h,
        None => {
            return Decoded::Incomplete {
                needed: RECORD_HEADER_LEN as u64,
                available,
            }
        }
    };
    let field = |at: usize| {
        read_array::<8>(header, at)
            .map(u64::from_le_bytes)
            .unwrap_or(0)
    };
    let stored = read_array::<4>(header, 0)
        .map(u32::from_le_bytes)
        .unwrap_or(0);
    let len = read_array::<4>(header, 4)
        .map(u32::from_le_bytes)
        .unwrap_or(0) as usize;
    let start = pos + RECORD_HEADER_LEN;
    let payload = match data.get(start..).and_then(|d| d.get(..len)) {
        Some(p) => p,
        None => {
            return Decoded::Incomplete {
                needed: (RECORD_HEADER_LEN + len) as u64,
                available,
            }
        }
    };
    let computed = record_crc(header.get(4..).unwrap_or(&[]), payload);
    if computed != stored {
        return Decoded::BadCrc { stored, computed };
    }
    Decoded::Record {
        region: field(8),
        seq: field(16),
        payload: start..start + len,
        next: start + len,
    }
}

fn read_array<const N: usize>(data: &[u8], at: usize) -> Option<[u8; N]> {
    data.get(at..)?.get(..N)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(region: u64, seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = record_header(region, seq, payload)
            .expect("header")
            .to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn record_round_trip() {
        let data = framed(7, 42, b"hello");
        match decode_at(&data, 0) {
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
                    !matches!(decode_at(&d, 0), Decoded::Record { .. }),
                    "flip at byte {i} bit {bit} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn truncated_record_is_incomplete() {
        let data = framed(1, 2, b"0123456789");
        for cut in 0..data.len() {
            assert!(
                matches!(decode_at(&data[..cut], 0), Decoded::Incomplete { .. }),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn zeros_are_not_a_record() {
        assert!(matches!(decode_at(&[0u8; 64], 0), Decoded::BadCrc { .. }));
    }

    #[test]
    fn header_checks() {
        let h = segment_header();
        check_segment_header("f", &h).expect("good header");
        let mut bad = h;
        bad[0] = b'X';
        assert!(matches!(
            check_segment_header("f", &bad),
            Err(Error::BadMagic { kind: KIND, .. })
        ));
        let mut newer = h;
        newer[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert!(matches!(
            check_segment_header("f", &newer),
            Err(Error::UnsupportedVersion {
                found: 2,
                supported: 1,
                ..
            })
        ));
    }

    proptest::proptest! {
        #[test]
        fn decoder_never_panics(data in proptest::collection::vec(proptest::num::u8::ANY, 0..200), pos in 0usize..220) {
            let _ = decode_at(&data, pos);
        }
    }
}
