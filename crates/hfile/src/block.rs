//! HFile blocks (`docs/hfile-format.md` §2): a 33-byte header, the (compressed) payload, and
//! a CRC per `bytes_per_checksum` bytes of header and payload.

use crate::compression::Codec;
use crate::input::{Bad, Input};

/// The header's size in HFile v3 (and v2 minor ≥ 1).
pub const HEADER: usize = 33;
/// The largest block payload read: HBase's sizes are Java ints, and a block this large is a
/// damaged length, not data (a single cell is at most HBase's 2 GiB array limit too).
pub const MAX_BLOCK: usize = 1 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockType {
    Data,
    EncodedData,
    LeafIndex,
    BloomChunk,
    Meta,
    IntermediateIndex,
    RootIndex,
    FileInfo,
    GeneralBloomMeta,
    DeleteFamilyBloomMeta,
}

impl BlockType {
    fn from_magic(m: &[u8]) -> Option<BlockType> {
        Some(match m {
            b"DATABLK*" => BlockType::Data,
            b"DATABLKE" => BlockType::EncodedData,
            b"IDXLEAF2" => BlockType::LeafIndex,
            b"BLMFBLK2" => BlockType::BloomChunk,
            b"METABLKc" => BlockType::Meta,
            b"IDXINTE2" => BlockType::IntermediateIndex,
            b"IDXROOT2" => BlockType::RootIndex,
            b"FILEINF2" => BlockType::FileInfo,
            b"BLMFMET2" => BlockType::GeneralBloomMeta,
            b"DFBLMET2" => BlockType::DeleteFamilyBloomMeta,
            _ => return None,
        })
    }

    pub fn is_data(self) -> bool {
        matches!(self, BlockType::Data | BlockType::EncodedData)
    }
}

/// A block's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: BlockType,
    /// Bytes after the header on disk: payload and checksums.
    pub on_disk_size_without_header: usize,
    pub uncompressed_size: usize,
    pub checksum_type: u8,
    pub bytes_per_checksum: usize,
    /// Header and payload, without the checksums.
    pub on_disk_data_size_with_header: usize,
}

impl Header {
    pub fn parse(bytes: &[u8]) -> Result<Header, Bad> {
        let mut input = Input::new(bytes);
        let magic = input.take(8, "block magic")?;
        let kind = BlockType::from_magic(magic).ok_or_else(|| {
            format!(
                "no block starts here (magic {:?}): a damaged file, or a wrong offset",
                String::from_utf8_lossy(magic)
            )
        })?;
        let on_disk_size_without_header = input.len32("block on-disk size")?;
        let uncompressed_size = input.len32("block uncompressed size")?;
        input.i64("previous block offset")?;
        let checksum_type = input.u8("checksum type")?;
        let bytes_per_checksum = input.len32("bytes per checksum")?;
        let on_disk_data_size_with_header = input.len32("block data size")?;
        if on_disk_size_without_header > MAX_BLOCK || uncompressed_size > MAX_BLOCK {
            return Err(format!(
                "a block of {on_disk_size_without_header} bytes on disk, {uncompressed_size} \
                 uncompressed: larger than the {MAX_BLOCK} bytes a block may have"
            ));
        }
        if on_disk_data_size_with_header < HEADER
            || on_disk_data_size_with_header > HEADER + on_disk_size_without_header
        {
            return Err(format!(
                "the block's data size {on_disk_data_size_with_header} does not fit its on-disk size {}",
                HEADER + on_disk_size_without_header
            ));
        }
        if checksum_type > 2 {
            return Err(format!(
                "checksum type {checksum_type} is not one HBase writes"
            ));
        }
        if checksum_type != 0 && bytes_per_checksum == 0 {
            return Err("a block with checksums of every 0 bytes".into());
        }
        Ok(Header {
            kind,
            on_disk_size_without_header,
            uncompressed_size,
            checksum_type,
            bytes_per_checksum,
            on_disk_data_size_with_header,
        })
    }

    /// The block's whole size on disk.
    pub fn on_disk_size(&self) -> usize {
        HEADER + self.on_disk_size_without_header
    }
}

/// Checks the CRCs of a whole on-disk block (header included).
pub fn verify_checksums(h: &Header, block: &[u8]) -> Result<(), Bad> {
    let data = block
        .get(..h.on_disk_data_size_with_header)
        .ok_or("the block is shorter than its data size")?;
    if h.checksum_type == 0 {
        return Ok(());
    }
    let mut sums = Input::new(
        block
            .get(h.on_disk_data_size_with_header..)
            .unwrap_or_default(),
    );
    for (i, chunk) in data.chunks(h.bytes_per_checksum).enumerate() {
        let stored = sums.u32("block checksum")?;
        let actual = match h.checksum_type {
            1 => crc32fast::hash(chunk),
            _ => crc32c::crc32c(chunk),
        };
        if stored != actual {
            return Err(format!(
                "checksum mismatch in chunk {i} of the block (stored {stored:08x}, computed {actual:08x}): the file is damaged"
            ));
        }
    }
    Ok(())
}

/// The block's payload: checksums checked, decompressed (`codec`) to its announced size.
pub fn payload(h: &Header, block: &[u8], codec: Codec) -> Result<Vec<u8>, Bad> {
    verify_checksums(h, block)?;
    let on_disk = block
        .get(HEADER..h.on_disk_data_size_with_header)
        .ok_or("the block is shorter than its data size")?;
    codec.decompress(on_disk, h.uncompressed_size)
}
