//! Per-block compression. A compressed payload is `uncompressed_len: varint | codec bytes`:
//! the length is ours (not a codec's framing) so every codec decodes into an exactly sized
//! buffer and a wrong length is caught.

use super::coding::{get_varint32, put_varint32, DecodeResult, Malformed};
use cellar_model::Compression;
use std::io::Read;

/// A block must shrink by at least this fraction (1/8) to be stored compressed: a smaller
/// gain is not worth decompressing on every read (LevelDB uses the same threshold).
const MIN_SAVING_DIVISOR: usize = 8;

/// zstd's default level: a good ratio at flush/compaction speed.
const ZSTD_LEVEL: i32 = 3;

/// No block, compressed or not, may claim to be larger than this.
pub(crate) const MAX_BLOCK_LEN: usize = 1 << 30;

/// Compresses `raw` with `codec` into `out` (cleared first). Returns the compression code
/// actually used: `Compression::None` (and `out` holding a copy of nothing; the caller writes
/// `raw` itself) when the codec is none, fails, or saves too little.
pub(crate) fn compress(codec: Compression, raw: &[u8], out: &mut Vec<u8>) -> Compression {
    out.clear();
    if codec == Compression::None || raw.is_empty() || raw.len() > MAX_BLOCK_LEN {
        return Compression::None;
    }
    put_varint32(out, raw.len() as u32);
    let ok = match codec {
        Compression::None => false,
        Compression::Lz4 => {
            out.extend_from_slice(&lz4_flex::block::compress(raw));
            true
        }
        Compression::Zstd => match zstd::bulk::compress(raw, ZSTD_LEVEL) {
            Ok(c) => {
                out.extend_from_slice(&c);
                true
            }
            Err(_) => false,
        },
        Compression::Snappy => match snap::raw::Encoder::new().compress_vec(raw) {
            Ok(c) => {
                out.extend_from_slice(&c);
                true
            }
            Err(_) => false,
        },
    };
    if ok && out.len() < raw.len() - raw.len() / MIN_SAVING_DIVISOR {
        codec
    } else {
        out.clear();
        Compression::None
    }
}

/// The most bytes `codec` can produce from `compressed` bytes, where its format bounds it: an
/// LZ4 sequence extends a match by 255 bytes per input byte at best, a Snappy copy tag of 3
/// bytes yields at most 64. `None`: no useful bound (zstd).
fn max_expansion(codec: Compression, compressed: usize) -> Option<usize> {
    match codec {
        Compression::Lz4 => Some(compressed.saturating_mul(255).saturating_add(64)),
        Compression::Snappy => Some(compressed.saturating_mul(22).saturating_add(64)),
        Compression::None | Compression::Zstd => None,
    }
}

/// Decompresses a payload written by [`compress`] with `codec` (not `None`).
pub(crate) fn decompress(codec: Compression, payload: &[u8]) -> DecodeResult<Vec<u8>> {
    let mut pos = 0;
    let len = get_varint32(payload, &mut pos)? as usize;
    if len > MAX_BLOCK_LEN {
        return Err(Malformed("uncompressed block length is implausibly large"));
    }
    let body = payload
        .get(pos..)
        .ok_or(Malformed("truncated compressed block"))?;
    // The recorded length sizes the output buffer: it must be one the codec can produce from
    // this many bytes, or a few damaged bytes could make the reader allocate up to 1 GiB
    // (found by the `storefile_block` fuzz target).
    if max_expansion(codec, body.len()).is_some_and(|max| len > max) {
        return Err(Malformed(
            "uncompressed block length is impossible for its compressed size",
        ));
    }
    let out = match codec {
        Compression::None => body.to_vec(),
        Compression::Lz4 => {
            let mut out = vec![0u8; len];
            let n = lz4_flex::block::decompress_into(body, &mut out)
                .map_err(|_| Malformed("lz4 block does not decompress"))?;
            out.truncate(n);
            out
        }
        // zstd's ratio has no useful bound: its output grows with what actually decodes (up
        // to one byte past the recorded length, which the check below refuses).
        Compression::Zstd => {
            let mut out = Vec::new();
            zstd::stream::read::Decoder::new(body)
                .and_then(|d| d.take(len as u64 + 1).read_to_end(&mut out))
                .map_err(|_| Malformed("zstd block does not decompress"))?;
            out
        }
        Compression::Snappy => {
            if snap::raw::decompress_len(body).ok() != Some(len) {
                return Err(Malformed(
                    "snappy block length differs from the recorded one",
                ));
            }
            snap::raw::Decoder::new()
                .decompress_vec(body)
                .map_err(|_| Malformed("snappy block does not decompress"))?
        }
    };
    if out.len() != len {
        return Err(Malformed(
            "decompressed block length differs from the recorded one",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 3] = [Compression::Lz4, Compression::Zstd, Compression::Snappy];

    #[test]
    fn compressible_data_round_trips() {
        let raw: Vec<u8> = b"row-0001/qualifier/value ".repeat(200);
        for codec in ALL {
            let mut out = Vec::new();
            assert_eq!(compress(codec, &raw, &mut out), codec);
            assert!(out.len() < raw.len());
            assert_eq!(decompress(codec, &out).expect("decompress"), raw);
        }
    }

    #[test]
    fn incompressible_data_is_left_alone() {
        // A xorshift stream does not compress.
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let raw: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for codec in ALL {
            let mut out = Vec::new();
            assert_eq!(compress(codec, &raw, &mut out), Compression::None);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in ALL {
            let raw: Vec<u8> = b"abcabcabcabcabcabcabcabc".repeat(50);
            let mut out = Vec::new();
            compress(codec, &raw, &mut out);
            for i in 0..out.len() {
                let mut bad = out.clone();
                bad[i] ^= 0x5a;
                // Either an error or (for a byte the codec ignores) the right data; the
                // block checksum is what guarantees wrong data is never returned.
                let _ = decompress(codec, &bad);
            }
            assert!(decompress(codec, &out[..out.len() / 2]).is_err());
        }
    }

    /// Found by the `storefile_block` fuzz target: five bytes claiming an LZ4 block of
    /// 1 GiB - 1 made the reader allocate that much before finding the block empty.
    #[test]
    fn a_length_the_codec_cannot_produce_is_refused_before_allocating() {
        for codec in [Compression::Lz4, Compression::Snappy] {
            let e = decompress(codec, b"\xff\xff\xff\xff\x03").expect_err("impossible length");
            assert!(
                e.0.contains("impossible for its compressed size"),
                "{codec:?}: {}",
                e.0
            );
        }
        // zstd: nothing is allocated up front; the empty frame fails to decode.
        assert!(decompress(Compression::Zstd, b"\xff\xff\xff\xff\x03").is_err());
        // Highly compressible blocks are still within the bounds.
        let raw = vec![7u8; 1 << 20];
        for codec in ALL {
            let mut out = Vec::new();
            assert_eq!(compress(codec, &raw, &mut out), codec);
            assert_eq!(
                decompress(codec, &out).expect("round trip"),
                raw,
                "{codec:?}"
            );
        }
    }
}
