//! Store files: immutable sorted files of (internal key, value), one family each.
//! The on-disk format is specified in `docs/storefile-format.md` (format version
//! [`FORMAT_VERSION`]).
//!
//! One concept per file: `block` (the block layout, its builder and iterator), `bloom`,
//! `index`, `meta`, `footer` (handles, trailer, footer), `compression`, `coding` (varints),
//! `hash` (the bloom hash), `writer`, `reader` and `iter` (the file-level cursor).

mod block;
mod bloom;
mod coding;
mod compression;
mod footer;
// Reached through `crate::fuzzing`.
pub(crate) mod fuzzing;
mod hash;
mod index;
mod iter;
mod meta;
mod reader;
mod writer;

pub(crate) use bloom::RowProbe;
pub use footer::FORMAT_VERSION;
pub use iter::StoreFileIter;
pub(crate) use reader::cache_only;
pub use reader::{block_bytes_scanned, bytes_read, StoreFile};
pub use writer::StoreFileWriter;

use cellar_model::{BloomType, Compression, FamilySchema};

/// How a store file is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFileOptions {
    /// Target uncompressed data-block size.
    pub block_size: usize,
    /// Codec for data, index and metadata blocks (a block that would not shrink is stored
    /// uncompressed).
    pub compression: Compression,
    /// What the bloom filter is keyed on.
    pub bloom: BloomType,
    /// Bloom filter bits per distinct key; 0 disables the filter.
    pub bloom_bits_per_key: u32,
    /// Entries between restart points inside a block.
    pub restart_interval: usize,
}

impl Default for StoreFileOptions {
    /// HBase's family defaults: 64 KiB blocks, no compression, a row bloom at 10 bits/key.
    fn default() -> StoreFileOptions {
        StoreFileOptions::from_family(&FamilySchema::new("default"))
    }
}

impl StoreFileOptions {
    /// The options a family's schema asks for, with a restart point every 16 entries.
    pub fn from_family(f: &FamilySchema) -> StoreFileOptions {
        StoreFileOptions {
            block_size: f.block_size as usize,
            compression: f.compression,
            bloom: f.bloom,
            bloom_bits_per_key: f.bloom_bits_per_key,
            restart_interval: 16,
        }
    }
}

/// What a reader learns from a file's metadata block without reading its data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileMeta {
    /// The format version from the footer.
    pub format_version: u32,
    /// Smallest and largest internal keys (empty when the file has no cells).
    pub first_key: Vec<u8>,
    /// See `first_key`.
    pub last_key: Vec<u8>,
    /// Smallest and largest cell timestamps (both 0 when the file has no cells).
    pub min_timestamp: u64,
    /// See `min_timestamp`.
    pub max_timestamp: u64,
    /// Highest sequence id of any cell: the WAL may drop everything up to it.
    pub max_seq: u64,
    /// Entries in the file.
    pub cell_count: u64,
    /// Cells of a delete type.
    pub delete_count: u64,
    /// Data blocks (one block-index entry each).
    pub data_block_count: u64,
    /// Uncompressed bytes of keys and values.
    pub raw_data_bytes: u64,
    /// Bytes of the whole file.
    pub file_size: u64,
    /// The codec the file was written with.
    pub compression: Compression,
    /// The bloom filter's type (`None` when the file has no filter).
    pub bloom: BloomType,
    /// When the file was written, in milliseconds since the epoch by the region's clock
    /// (0: unknown, a file written before the field existed). Periodic major compaction
    /// counts a store's age from its oldest file.
    pub created_ms: u64,
    /// Written by a major compaction: it holds only cells a reader could see.
    pub major_compaction: bool,
    /// The level of leveled compaction the file was written for (0: a flush, or a file
    /// written before levels existed). A hint: the store re-checks it on open
    /// (`region/levels.rs`).
    pub level: u8,
    /// Markers that delete one version (`Delete`, `DeleteFamilyVersion`): a minor compaction
    /// may drop an older version only where no file outside it holds one (`None`: not
    /// counted, a file written before the field existed).
    pub version_deletes: Option<u64>,
}
