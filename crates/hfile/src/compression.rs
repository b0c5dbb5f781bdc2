//! Block compression (`docs/hfile-format.md` §7): the codec a trailer names, and undoing it
//! for one block, into exactly the size the block's header announces.

use crate::input::{Bad, Input};
use std::io::Read;

/// `Compression.Algorithm`, by its ordinal in the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Lzo,
    Gz,
    None,
    Snappy,
    Lz4,
    Bzip2,
    Zstd,
    Lzma,
    Brotli,
}

/// zstd's frame magic, little-endian on disk.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

impl Codec {
    pub fn from_ordinal(v: u64) -> Result<Codec, Bad> {
        Ok(match v {
            0 => Codec::Lzo,
            1 => Codec::Gz,
            2 => Codec::None,
            3 => Codec::Snappy,
            4 => Codec::Lz4,
            5 => Codec::Bzip2,
            6 => Codec::Zstd,
            7 => Codec::Lzma,
            8 => Codec::Brotli,
            n => return Err(format!("compression codec {n} is not one HBase knows")),
        })
    }

    /// HBase's name for it (a family's `COMPRESSION`).
    pub fn name(self) -> &'static str {
        match self {
            Codec::Lzo => "LZO",
            Codec::Gz => "GZ",
            Codec::None => "NONE",
            Codec::Snappy => "SNAPPY",
            Codec::Lz4 => "LZ4",
            Codec::Bzip2 => "BZIP2",
            Codec::Zstd => "ZSTD",
            Codec::Lzma => "LZMA",
            Codec::Brotli => "BROTLI",
        }
    }

    /// Decompresses one block's payload into exactly `size` bytes. Buffers grow with what
    /// the data really holds: `size` comes from the file and only bounds them.
    pub fn decompress(self, input: &[u8], size: usize) -> Result<Vec<u8>, Bad> {
        let out = match self {
            Codec::None => input.to_vec(),
            Codec::Gz => {
                let mut out = Vec::with_capacity(first_guess(input, size));
                flate2::read::MultiGzDecoder::new(input)
                    .take(size as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| format!("GZ: {e}"))?;
                out
            }
            Codec::Snappy => hadoop_blocks(input, size, "SNAPPY", |chunk, room| {
                let n = snap::raw::decompress_len(chunk).map_err(|e| e.to_string())?;
                // A Snappy chunk expands at most ~21 times (a 64-byte copy in 3 bytes).
                if n > room || n > chunk.len().saturating_mul(32).saturating_add(64) {
                    return Err(format!("a chunk of {n} bytes where {room} are left"));
                }
                snap::raw::Decoder::new()
                    .decompress_vec(chunk)
                    .map_err(|e| e.to_string())
            })?,
            Codec::Lz4 => hadoop_blocks(input, size, "LZ4", |chunk, room| {
                // An LZ4 block expands at most 255 times.
                let mut out = vec![0u8; room.min(chunk.len().saturating_mul(255).saturating_add(64))];
                let n = lz4_flex::block::decompress_into(chunk, &mut out)
                    .map_err(|e| e.to_string())?;
                out.truncate(n);
                Ok(out)
            })?,
            Codec::Zstd if input.starts_with(&ZSTD_MAGIC) => zstd_frames(input, size)?,
            Codec::Zstd => hadoop_blocks(input, size, "ZSTD", zstd_frames)?,
            other => {
                return Err(format!(
                    "{} compression is not supported (Cellar reads NONE, GZ, SNAPPY, LZ4 and ZSTD); \
                     rewrite the table with one of those (alter its COMPRESSION and major-compact) first",
                    other.name()
                ))
            }
        };
        if out.len() != size {
            return Err(format!(
                "{}: the block decompresses to {} bytes, its header says {size}",
                self.name(),
                out.len()
            ));
        }
        Ok(out)
    }
}

/// A first buffer size for decompressing `input` into at most `size` bytes: blocks compress
/// a few times at most, so a few times the input, never more than `size`.
fn first_guess(input: &[u8], size: usize) -> usize {
    size.min(input.len().saturating_mul(4).saturating_add(1024))
}

/// zstd frames (one or several) decompressing to at most `room` bytes.
fn zstd_frames(input: &[u8], room: usize) -> Result<Vec<u8>, Bad> {
    let mut out = Vec::with_capacity(first_guess(input, room));
    zstd::stream::read::Decoder::new(input)
        .map_err(|e| e.to_string())?
        .take(room as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("ZSTD: {e}"))?;
    Ok(out)
}

/// Hadoop's block framing (`BlockCompressorStream`): groups of `u32 raw length`, then
/// `u32 chunk length` + chunk until the group's raw bytes are produced.
fn hadoop_blocks(
    input: &[u8],
    size: usize,
    codec: &str,
    mut chunk: impl FnMut(&[u8], usize) -> Result<Vec<u8>, Bad>,
) -> Result<Vec<u8>, Bad> {
    let mut out: Vec<u8> = Vec::with_capacity(first_guess(input, size));
    let mut input = Input::new(input);
    while !input.is_empty() {
        let raw = input.u32(codec)? as usize;
        let group_end = out
            .len()
            .checked_add(raw)
            .filter(|&e| e <= size)
            .ok_or_else(|| {
                format!("{codec}: a group of {raw} bytes runs past the block's {size}")
            })?;
        while out.len() < group_end {
            let n = input.u32(codec)? as usize;
            let bytes = input.take(n, codec)?;
            let got = chunk(bytes, group_end - out.len()).map_err(|e| format!("{codec}: {e}"))?;
            if got.is_empty() || out.len() + got.len() > group_end {
                return Err(format!("{codec}: a chunk does not fit its group"));
            }
            out.extend_from_slice(&got);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hadoop_framing_of_several_chunks_is_joined() {
        let parts: [&[u8]; 2] = [b"hello ", b"world"];
        let mut framed = Vec::new();
        framed.extend_from_slice(&11u32.to_be_bytes());
        for p in parts {
            let c = snap::raw::Encoder::new().compress_vec(p).expect("compress");
            framed.extend_from_slice(&(c.len() as u32).to_be_bytes());
            framed.extend_from_slice(&c);
        }
        assert_eq!(
            Codec::Snappy.decompress(&framed, 11).expect("snappy"),
            b"hello world"
        );
        let err = Codec::Snappy.decompress(&framed, 10).expect_err("too big");
        assert!(err.contains("runs past"), "{err}");
        let err = Codec::Lzo.decompress(&framed, 11).expect_err("lzo");
        assert!(err.contains("LZO compression is not supported"), "{err}");
    }
}
