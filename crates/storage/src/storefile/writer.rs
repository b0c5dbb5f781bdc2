//! Writes a store file: data blocks as they fill, then bloom, index, metadata and footer.
//!
//! Not thread-safe (one flush or compaction owns a writer). After an error the writer is
//! poisoned: the file is incomplete and the caller deletes it.

use super::block::BlockBuilder;
use super::bloom::BloomBuilder;
use super::compression::{compress, MAX_BLOCK_LEN};
use super::footer::{block_crc, BlockHandle, Footer, FORMAT_VERSION};
use super::index::IndexBuilder;
use super::{meta, FileMeta, StoreFileOptions};
use crate::fs::{FsRef, WritableFile};
use cellar_model::key::{compare_keys, KeyRef};
use cellar_model::{BloomType, CellType, Compression, Error, Result};
use std::cmp::Ordering;
use std::path::{Path, PathBuf};

/// The largest key plus value one entry may carry: a block must stay addressable with u32
/// offsets and below the decoder's block-size limit.
const MAX_ENTRY_LEN: usize = MAX_BLOCK_LEN / 4;

/// Writes a store file. Keys must be added in strictly ascending order.
pub struct StoreFileWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    opts: StoreFileOptions,
    data: BlockBuilder,
    index: IndexBuilder,
    bloom: BloomBuilder,
    meta: FileMeta,
    /// The previous key, for the order check.
    last_key: Vec<u8>,
    /// Reused compression output.
    scratch: Vec<u8>,
    poisoned: bool,
}

/// Appends one block (payload and trailer), compressing it with `codec` if that pays.
fn write_block(
    file: &mut dyn WritableFile,
    scratch: &mut Vec<u8>,
    codec: Compression,
    raw: &[u8],
) -> Result<BlockHandle> {
    let used = compress(codec, raw, scratch);
    let payload: &[u8] = if used == Compression::None {
        raw
    } else {
        scratch
    };
    let handle = BlockHandle {
        offset: file.len(),
        size: payload.len() as u64,
    };
    let code = used.code();
    let mut trailer = [0u8; 5];
    trailer[0] = code;
    trailer[1..].copy_from_slice(&block_crc(payload, code).to_le_bytes());
    file.append(payload)?;
    file.append(&trailer)?;
    Ok(handle)
}

impl StoreFileWriter {
    /// Creates `path` (the caller writes to a temporary name and renames it into place).
    pub fn create(fs: &FsRef, path: &Path, opts: StoreFileOptions) -> Result<StoreFileWriter> {
        if opts.block_size == 0 || opts.block_size > MAX_BLOCK_LEN / 2 {
            return Err(Error::InvalidArgument(format!(
                "store file block size {} is out of range",
                opts.block_size
            )));
        }
        if opts.restart_interval == 0 {
            return Err(Error::InvalidArgument(
                "store file restart interval must be at least 1".into(),
            ));
        }
        let bloom = if opts.bloom_bits_per_key == 0 {
            BloomType::None
        } else {
            opts.bloom
        };
        let file = fs.create(path)?;
        Ok(StoreFileWriter {
            file,
            path: path.to_path_buf(),
            data: BlockBuilder::new(opts.restart_interval),
            index: IndexBuilder::new(),
            bloom: BloomBuilder::new(bloom, opts.bloom_bits_per_key),
            meta: FileMeta {
                format_version: FORMAT_VERSION,
                version_deletes: Some(0),
                min_timestamp: u64::MAX,
                compression: opts.compression,
                bloom,
                ..FileMeta::default()
            },
            opts,
            last_key: Vec::new(),
            scratch: Vec::new(),
            poisoned: false,
        })
    }

    fn check_usable(&self) -> Result<()> {
        if self.poisoned {
            return Err(Error::InvalidArgument(format!(
                "store file writer for {} failed earlier",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// Adds an entry; a key not greater than the previous one is an `InvalidArgument` error.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_usable()?;
        let parsed = KeyRef::parse(key).ok_or_else(|| {
            Error::InvalidArgument(format!("malformed key for {}", self.path.display()))
        })?;
        if key.len() + value.len() > MAX_ENTRY_LEN {
            return Err(Error::InvalidArgument(format!(
                "entry of {} bytes is too large for a store file",
                key.len() + value.len()
            )));
        }
        if self.meta.cell_count > 0 && compare_keys(key, &self.last_key) != Ordering::Greater {
            return Err(Error::InvalidArgument(format!(
                "keys added to {} out of order",
                self.path.display()
            )));
        }
        let m = &mut self.meta;
        if m.cell_count == 0 {
            m.first_key = key.to_vec();
        }
        m.cell_count += 1;
        m.min_timestamp = m.min_timestamp.min(parsed.timestamp());
        m.max_timestamp = m.max_timestamp.max(parsed.timestamp());
        m.max_seq = m.max_seq.max(parsed.seq());
        if parsed.cell_type().is_some_and(CellType::is_delete) {
            m.delete_count += 1;
        }
        if matches!(
            parsed.cell_type(),
            Some(CellType::Delete | CellType::DeleteFamilyVersion)
        ) {
            *m.version_deletes.get_or_insert(0) += 1;
        }
        m.raw_data_bytes += (key.len() + value.len()) as u64;
        self.bloom.add(&parsed);
        self.data.add(key, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        if self.data.estimated_size() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let r = write_block(
            self.file.as_mut(),
            &mut self.scratch,
            self.opts.compression,
            self.data.finish(),
        );
        let handle = r.inspect_err(|_| self.poisoned = true)?;
        self.index.add(self.data.last_key(), handle);
        self.meta.data_block_count += 1;
        self.data.reset();
        Ok(())
    }

    /// Records that the file accounts for writes up to `seq` even if it holds none of their
    /// cells: a compaction that drops cells still covers its inputs' sequence ids, or the WAL
    /// would replay what the compaction deleted.
    pub fn raise_max_seq(&mut self, seq: u64) {
        self.meta.max_seq = self.meta.max_seq.max(seq);
    }

    /// Records when the file was written (the region's clock, milliseconds since the epoch).
    pub fn set_created_ms(&mut self, ms: u64) {
        self.meta.created_ms = ms;
    }

    /// Records that the file is a major compaction's output.
    pub fn mark_major_compaction(&mut self) {
        self.meta.major_compaction = true;
    }

    /// Records the compaction level the file is written for.
    pub fn set_level(&mut self, level: u8) {
        self.meta.level = level;
    }

    /// Bytes written so far plus the pending block (for splitting compaction output).
    pub fn estimated_size(&self) -> u64 {
        self.file.len() + self.data.estimated_size() as u64
    }

    /// Writes the remaining blocks, index, bloom, metadata and footer, then syncs the file.
    pub fn finish(mut self) -> Result<FileMeta> {
        self.check_usable()?;
        self.flush_data_block()?;
        let codec = self.opts.compression;
        let file = self.file.as_mut();
        let bloom = match self.bloom.finish() {
            // Bloom bits look random; compressing them would not pay.
            Some(b) => write_block(file, &mut self.scratch, Compression::None, &b)?,
            None => {
                self.meta.bloom = BloomType::None;
                BlockHandle::default()
            }
        };
        let index = write_block(file, &mut self.scratch, codec, self.index.finish())?;
        let m = &mut self.meta;
        if m.cell_count == 0 {
            m.min_timestamp = 0;
        } else {
            m.last_key = std::mem::take(&mut self.last_key);
        }
        let meta_handle = write_block(file, &mut self.scratch, codec, &meta::encode(m))?;
        let footer = Footer {
            index,
            bloom,
            meta: meta_handle,
            version: FORMAT_VERSION,
        };
        file.append(&footer.encode())?;
        file.sync()?;
        self.meta.file_size = file.len();
        Ok(self.meta)
    }
}
