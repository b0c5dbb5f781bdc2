//! Store files: immutable sorted files of (internal key, value), one family each.
//! The on-disk format is specified in `docs/storefile-format.md`.

use crate::block_cache::{BlockCache, Priority};
use crate::fs::FsRef;
use crate::iter::CellIter;
use cellar_model::{BloomType, Compression, FamilySchema, Result};
use std::path::Path;
use std::sync::Arc;

/// How a store file is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFileOptions {
    /// Target uncompressed data-block size.
    pub block_size: usize,
    pub compression: Compression,
    pub bloom: BloomType,
    pub bloom_bits_per_key: u32,
    /// Entries between restart points inside a block.
    pub restart_interval: usize,
}

impl StoreFileOptions {
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
    pub format_version: u32,
    /// Smallest and largest internal keys (empty when the file has no cells).
    pub first_key: Vec<u8>,
    pub last_key: Vec<u8>,
    pub min_timestamp: u64,
    pub max_timestamp: u64,
    /// Highest sequence id of any cell: the WAL may drop everything up to it.
    pub max_seq: u64,
    pub cell_count: u64,
    /// Cells of a delete type.
    pub delete_count: u64,
    pub data_block_count: u64,
    /// Uncompressed bytes of keys and values.
    pub raw_data_bytes: u64,
    pub file_size: u64,
    pub compression: Compression,
    pub bloom: BloomType,
}

/// Writes a store file. Keys must be added in strictly ascending order.
pub struct StoreFileWriter {}

impl StoreFileWriter {
    /// Creates `path` (the caller writes to a temporary name and renames it into place).
    pub fn create(fs: &FsRef, path: &Path, opts: StoreFileOptions) -> Result<StoreFileWriter> {
        let _ = (fs, path, opts);
        unimplemented!()
    }

    /// Adds an entry; a key not greater than the previous one is an `InvalidArgument` error.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let _ = (key, value);
        unimplemented!()
    }

    /// Bytes written so far plus the pending block (for splitting compaction output).
    pub fn estimated_size(&self) -> u64 {
        unimplemented!()
    }

    /// Writes the remaining blocks, index, bloom, metadata and footer, then syncs the file.
    pub fn finish(self) -> Result<FileMeta> {
        unimplemented!()
    }
}

/// An open store file. Thread-safe: share as `Arc<StoreFile>`; iterators hold the Arc.
pub struct StoreFile {}

impl StoreFile {
    /// Opens a file, checking footer magic, format version and the checksums of the index,
    /// bloom and metadata blocks. Data blocks are checked as they are read.
    pub fn open(
        fs: &FsRef,
        path: &Path,
        file_id: u64,
        cache: Option<Arc<BlockCache>>,
        priority: Priority,
    ) -> Result<Arc<StoreFile>> {
        let _ = (fs, path, file_id, cache, priority);
        unimplemented!()
    }

    pub fn meta(&self) -> &FileMeta {
        unimplemented!()
    }

    pub fn path(&self) -> &Path {
        unimplemented!()
    }

    pub fn file_id(&self) -> u64 {
        unimplemented!()
    }

    /// False only if the file certainly holds no cell of `row` (bloom; true without a bloom).
    pub fn may_contain_row(&self, row: &[u8]) -> bool {
        let _ = row;
        unimplemented!()
    }

    /// False only if the file certainly holds no cell of (`row`, `qualifier`); a row bloom
    /// answers for the row.
    pub fn may_contain_column(&self, row: &[u8], qualifier: &[u8]) -> bool {
        let _ = (row, qualifier);
        unimplemented!()
    }

    /// An unpositioned iterator. With `fill_cache` false, blocks it reads are not inserted
    /// into the block cache (large scans), though cached blocks are still used.
    pub fn iter(self: &Arc<Self>, fill_cache: bool) -> StoreFileIter {
        let _ = fill_cache;
        unimplemented!()
    }

    /// A key near the middle of the file (the first key of its middle data block), for
    /// choosing a split point; `None` for an empty file.
    pub fn middle_key(&self) -> Option<Vec<u8>> {
        unimplemented!()
    }

    /// Reads every block and checks its checksum.
    pub fn verify(&self) -> Result<()> {
        unimplemented!()
    }
}

/// Iterator over a [`StoreFile`].
pub struct StoreFileIter {}

impl CellIter for StoreFileIter {
    fn valid(&self) -> bool {
        unimplemented!()
    }
    fn key(&self) -> &[u8] {
        unimplemented!()
    }
    fn value(&self) -> &[u8] {
        unimplemented!()
    }
    fn next(&mut self) -> Result<()> {
        unimplemented!()
    }
    fn seek(&mut self, _target: &[u8]) -> Result<()> {
        unimplemented!()
    }
    fn seek_for_prev(&mut self, _target: &[u8]) -> Result<()> {
        unimplemented!()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        unimplemented!()
    }
}
