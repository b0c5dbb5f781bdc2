//! Block handles, the block trailer and the fixed-size footer that ends every store file.
//!
//! ```text
//! block on disk = payload | compression: u8 | crc32c(payload ‖ compression): u32 LE
//! footer (v1, 68 bytes) = index handle | bloom handle | meta handle   (u64 LE offset, size)
//!                         footer_len: u32 LE | format_version: u32 LE
//!                         crc32c(footer[..56]): u32 LE | magic: 8 bytes "CellarSF"
//! ```
//!
//! The last 20 bytes (`footer_len | version | crc | magic`) keep this layout in every format
//! version, so a reader can always tell "newer version" from "corrupt footer".

use super::coding::{get_u32_le, get_u64_le, DecodeResult};

/// "CellarSF", read as a big-endian u64 for [`cellar_model::Error::BadMagic`].
pub const MAGIC: [u8; 8] = *b"CellarSF";
/// The format version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 2;
/// `compression: u8 | crc32c: u32 LE` after every block payload.
pub(crate) const BLOCK_TRAILER_LEN: usize = 5;
/// The version-independent tail: footer_len, version, crc, magic.
pub(crate) const FOOTER_TAIL_LEN: usize = 20;
/// The whole footer in version 1.
pub(crate) const FOOTER_V1_LEN: usize = 68;

/// Where a block's payload lies; `size` excludes the 5-byte trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    /// Offset just past the block's trailer (None on overflow).
    pub(crate) fn end(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// The CRC stored in a block trailer: over the payload and the compression byte, so a flipped
/// compression code is caught too.
pub(crate) fn block_crc(payload: &[u8], compression: u8) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(payload), &[compression])
}

/// A decoded v1 footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Footer {
    pub index: BlockHandle,
    /// `size == 0` means the file has no bloom filter.
    pub bloom: BlockHandle,
    pub meta: BlockHandle,
    pub version: u32,
}

/// The fixed tail, parsed before anything else.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FooterTail {
    pub footer_len: u32,
    pub version: u32,
    pub crc: u32,
    pub magic: [u8; 8],
}

impl FooterTail {
    /// `tail` is exactly the last [`FOOTER_TAIL_LEN`] bytes of the file.
    pub(crate) fn decode(tail: &[u8]) -> DecodeResult<FooterTail> {
        let mut magic = [0u8; 8];
        if let Some(m) = tail.get(12..20) {
            magic.copy_from_slice(m);
        }
        Ok(FooterTail {
            footer_len: get_u32_le(tail, 0)?,
            version: get_u32_le(tail, 4)?,
            crc: get_u32_le(tail, 8)?,
            magic,
        })
    }
}

impl Footer {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_V1_LEN);
        for h in [self.index, self.bloom, self.meta] {
            out.extend_from_slice(&h.offset.to_le_bytes());
            out.extend_from_slice(&h.size.to_le_bytes());
        }
        out.extend_from_slice(&(FOOTER_V1_LEN as u32).to_le_bytes());
        out.extend_from_slice(&self.version.to_le_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&MAGIC);
        out
    }

    /// The checksummed part of a footer of any version: everything before crc and magic.
    pub(crate) fn checksummed(footer: &[u8]) -> &[u8] {
        footer
            .get(..footer.len().saturating_sub(12))
            .unwrap_or_default()
    }

    /// Parses the handles of a v1 footer whose length, magic and checksum were checked.
    pub(crate) fn decode_v1(footer: &[u8], version: u32) -> DecodeResult<Footer> {
        let h = |i: usize| -> DecodeResult<BlockHandle> {
            Ok(BlockHandle {
                offset: get_u64_le(footer, 16 * i)?,
                size: get_u64_le(footer, 16 * i + 8)?,
            })
        };
        Ok(Footer {
            index: h(0)?,
            bloom: h(1)?,
            meta: h(2)?,
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trips() {
        let f = Footer {
            index: BlockHandle { offset: 1, size: 2 },
            bloom: BlockHandle { offset: 3, size: 0 },
            meta: BlockHandle {
                offset: u64::MAX - 9,
                size: 7,
            },
            version: FORMAT_VERSION,
        };
        let raw = f.encode();
        assert_eq!(raw.len(), FOOTER_V1_LEN);
        let tail = FooterTail::decode(&raw[FOOTER_V1_LEN - FOOTER_TAIL_LEN..]).expect("tail");
        assert_eq!(tail.magic, MAGIC);
        assert_eq!(tail.footer_len as usize, FOOTER_V1_LEN);
        assert_eq!(tail.crc, crc32c::crc32c(Footer::checksummed(&raw)));
        assert_eq!(Footer::decode_v1(&raw, tail.version), Ok(f));
        assert_eq!(f.meta.end(), None);
    }
}
