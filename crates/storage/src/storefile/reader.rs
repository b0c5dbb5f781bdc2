//! An open store file: footer, index, bloom filter and metadata in memory; data blocks read
//! on demand (through the block cache when there is one) and checksummed on every read.
//!
//! Thread-safe: immutable after open; share as `Arc<StoreFile>`.

use super::block::Block;
use super::bloom::{BloomFilter, RowProbe};
use super::compression::decompress;
use super::footer::{
    block_crc, BlockHandle, Footer, FooterTail, BLOCK_TRAILER_LEN, FOOTER_TAIL_LEN, FOOTER_V1_LEN,
    FORMAT_VERSION, MAGIC,
};
use super::index::BlockIndex;
use super::{meta, FileMeta};
use crate::block_cache::{BlockCache, BlockKey, Priority};
use crate::fs::{FsRef, RandomAccessFile};
use bytes::Bytes;
use cellar_model::key::KeyRef;
use cellar_model::{Compression, Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An open store file. Thread-safe: share as `Arc<StoreFile>`; iterators hold the Arc.
pub struct StoreFile {
    path: PathBuf,
    file: Arc<dyn RandomAccessFile>,
    file_id: u64,
    cache: Option<Arc<BlockCache>>,
    priority: Priority,
    footer: Footer,
    index: BlockIndex,
    bloom: Option<BloomFilter>,
    meta: FileMeta,
    /// Rows of the first and last keys (parsed once: every single-row read asks), `None`
    /// when the keys do not parse (an empty file).
    rows: Option<(Vec<u8>, Vec<u8>)>,
}

thread_local! {
    /// Set while this thread runs a read that must not touch the disk.
    static CACHE_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Bytes of data blocks this thread has read, from the cache or the file.
    static BLOCK_BYTES_SCANNED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Bytes of data blocks this thread has read so far, block-cache hits included (HBase's
/// "block bytes scanned"): the difference across one read is what that read scanned. A
/// read runs on the thread that asked for it, so nothing else adds to the count meanwhile.
pub fn block_bytes_scanned() -> u64 {
    BLOCK_BYTES_SCANNED.with(std::cell::Cell::get)
}

fn scanned(bytes: usize) {
    BLOCK_BYTES_SCANNED.with(|c| c.set(c.get().wrapping_add(bytes as u64)));
}

/// Runs `f` with data-block reads limited to the block cache: a miss fails with
/// [`Error::NotCached`] instead of reading the file. Lets a network reactor answer reads that
/// memory can answer and hand the rest to threads that may block.
pub fn cache_only<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            CACHE_ONLY.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(CACHE_ONLY.with(|c| c.replace(true)));
    f()
}

/// Reads, checksums and decompresses the block at `handle` of `file`.
fn read_block(file: &dyn RandomAccessFile, path: &Path, handle: BlockHandle) -> Result<Bytes> {
    let (codec, payload) = read_stored(file, path, handle)?;
    inflate(codec, payload, path, handle.offset)
}

/// A block's payload as stored (`codec` says how), decompressed.
fn inflate(codec: Compression, payload: Bytes, path: &Path, offset: u64) -> Result<Bytes> {
    match codec {
        Compression::None => Ok(payload),
        codec => decompress(codec, &payload)
            .map(Bytes::from)
            .map_err(|m| m.at(path.display(), offset)),
    }
}

/// Bytes of blocks read from store files by this process (block-cache misses, opens).
static BYTES_READ: AtomicU64 = AtomicU64::new(0);

/// Bytes of blocks this process has read from store files (page cache included): what the
/// block cache did not have. Store files on local disk are mapped, so system-call counters
/// (`/proc/self/io`) do not see these reads.
pub fn bytes_read() -> u64 {
    BYTES_READ.load(Ordering::Relaxed)
}

/// Reads and checksums the block at `handle` of `file`: its codec and its payload as stored.
fn read_stored(
    file: &dyn RandomAccessFile,
    path: &Path,
    handle: BlockHandle,
) -> Result<(Compression, Bytes)> {
    let corrupt = |detail: &str| Error::corruption(path.display(), handle.offset, detail);
    let len = handle
        .size
        .checked_add(BLOCK_TRAILER_LEN as u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| corrupt("block size overflows"))?;
    if handle.end().is_none_or(|end| end > file.len()) {
        return Err(corrupt("block extends past the end of the file"));
    }
    let raw = file.read_at(handle.offset, len)?;
    BYTES_READ.fetch_add(len as u64, Ordering::Relaxed);
    if raw.len() != len {
        return Err(corrupt("short read"));
    }
    let payload_len = len - BLOCK_TRAILER_LEN;
    let (payload, trailer) = raw.split_at_checked(payload_len).unwrap_or_default();
    let code = trailer.first().copied().unwrap_or_default();
    let mut crc = [0u8; 4];
    crc.copy_from_slice(trailer.get(1..5).unwrap_or(&[0; 4]));
    let stored = u32::from_le_bytes(crc);
    let actual = block_crc(payload, code);
    if stored != actual {
        return Err(Error::checksum(
            path.display(),
            handle.offset,
            format!("block of {payload_len} bytes: stored crc32c {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    match Compression::from_code(code) {
        Some(codec) => Ok((codec, raw.slice(..payload_len))),
        None => Err(corrupt("unknown block compression code")),
    }
}

/// Reads and checks the footer: magic, then checksum, then version, then handle bounds.
fn read_footer(file: &dyn RandomAccessFile, path: &Path) -> Result<Footer> {
    let file_len = file.len();
    let name = path.display();
    if file_len < FOOTER_TAIL_LEN as u64 {
        return Err(Error::corruption(
            name,
            0,
            format!("file of {file_len} bytes is too short to be a store file (truncated?)"),
        ));
    }
    let read_len = file_len.min(FOOTER_V1_LEN as u64);
    let buf = file.read_at(file_len - read_len, read_len as usize)?;
    let tail_start = buf.len().saturating_sub(FOOTER_TAIL_LEN);
    let tail = FooterTail::decode(buf.get(tail_start..).unwrap_or_default())
        .map_err(|m| m.at(&name, file_len - FOOTER_TAIL_LEN as u64))?;
    if tail.magic != MAGIC {
        return Err(Error::BadMagic {
            file: name.to_string(),
            kind: "store file",
            found: u64::from_be_bytes(tail.magic),
        });
    }
    let footer_len = u64::from(tail.footer_len);
    if footer_len < FOOTER_TAIL_LEN as u64 || footer_len > file_len {
        return Err(Error::corruption(
            name,
            file_len - FOOTER_TAIL_LEN as u64,
            format!("footer length {footer_len} is impossible in a {file_len}-byte file"),
        ));
    }
    let footer_start = file_len - footer_len;
    let footer = match buf.len().checked_sub(footer_len as usize) {
        Some(start) => buf.slice(start..),
        None => file.read_at(footer_start, footer_len as usize)?,
    };
    let actual = crc32c::crc32c(Footer::checksummed(&footer));
    if actual != tail.crc {
        return Err(Error::checksum(
            name,
            footer_start,
            format!(
                "footer: stored crc32c {:#010x}, computed {actual:#010x}",
                tail.crc
            ),
        ));
    }
    if tail.version > FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            file: name.to_string(),
            found: tail.version,
            supported: FORMAT_VERSION,
        });
    }
    if tail.version == 0 || footer_len != FOOTER_V1_LEN as u64 {
        return Err(Error::corruption(
            name,
            footer_start,
            format!("footer of {footer_len} bytes with version {}", tail.version),
        ));
    }
    let f = Footer::decode_v1(&footer, tail.version).map_err(|m| m.at(&name, footer_start))?;
    for (what, h) in [("index", f.index), ("bloom", f.bloom), ("meta", f.meta)] {
        if what == "bloom" && h.size == 0 {
            continue;
        }
        if h.end().is_none_or(|end| end > footer_start) {
            return Err(Error::corruption(
                name,
                footer_start,
                format!(
                    "{what} block handle (offset {}, size {}) lies outside the file",
                    h.offset, h.size
                ),
            ));
        }
    }
    Ok(f)
}

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
        let file = fs.open_immutable(path)?;
        let footer = read_footer(file.as_ref(), path)?;
        let name = path.display();
        let meta_block = read_block(file.as_ref(), path, footer.meta)?;
        let mut meta = meta::decode(&meta_block).map_err(|m| m.at(&name, footer.meta.offset))?;
        meta.format_version = footer.version;
        meta.file_size = file.len();
        let index_block = read_block(file.as_ref(), path, footer.index)?;
        let index_block = Block::new(index_block).map_err(|m| m.at(&name, footer.index.offset))?;
        // Data blocks precede every other block.
        let data_end = [footer.index, footer.meta, footer.bloom]
            .iter()
            .filter(|h| h.size > 0 || h.offset > 0)
            .map(|h| h.offset)
            .min()
            .unwrap_or(0);
        let index = BlockIndex::decode(index_block, data_end)
            .map_err(|m| m.at(&name, footer.index.offset))?;
        if index.len() as u64 != meta.data_block_count {
            return Err(Error::corruption(
                name,
                footer.index.offset,
                format!(
                    "index lists {} blocks, metadata says {}",
                    index.len(),
                    meta.data_block_count
                ),
            ));
        }
        let bloom = if footer.bloom.size == 0 {
            None
        } else {
            let b = read_block(file.as_ref(), path, footer.bloom)?;
            Some(BloomFilter::decode(b).map_err(|m| m.at(&name, footer.bloom.offset))?)
        };
        let rows = match (
            KeyRef::parse(&meta.first_key),
            KeyRef::parse(&meta.last_key),
        ) {
            (Some(first), Some(last)) => Some((first.row().to_vec(), last.row().to_vec())),
            _ => None,
        };
        Ok(Arc::new(StoreFile {
            path: path.to_path_buf(),
            file,
            file_id,
            cache,
            priority,
            footer,
            index,
            bloom,
            meta,
            rows,
        }))
    }

    pub fn meta(&self) -> &FileMeta {
        &self.meta
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file_id(&self) -> u64 {
        self.file_id
    }

    /// The rows of the file's first and last cells (`None` for a file without cells).
    pub fn rows(&self) -> Option<(&[u8], &[u8])> {
        self.rows
            .as_ref()
            .map(|(first, last)| (first.as_slice(), last.as_slice()))
    }

    /// Whether `row` lies within the file's key range (false for an empty file).
    fn row_in_range(&self, row: &[u8]) -> bool {
        match &self.rows {
            Some((first, last)) => first.as_slice() <= row && row <= last.as_slice(),
            None => self.meta.cell_count > 0,
        }
    }

    /// False only if the file certainly holds no cell of `row` (bloom; true without a bloom).
    pub fn may_contain_row(&self, row: &[u8]) -> bool {
        self.may_contain_probe(&RowProbe::new(row))
    }

    /// [`StoreFile::may_contain_row`] for a row hashed once for all files.
    pub(crate) fn may_contain_probe(&self, probe: &RowProbe<'_>) -> bool {
        self.row_in_range(probe.row())
            && self
                .bloom
                .as_ref()
                .is_none_or(|b| b.may_contain_probe(probe))
    }

    /// [`StoreFile::may_contain_column`] for a row hashed once for all files.
    pub(crate) fn may_contain_probe_column(&self, probe: &RowProbe<'_>, qualifier: &[u8]) -> bool {
        self.row_in_range(probe.row())
            && self
                .bloom
                .as_ref()
                .is_none_or(|b| b.may_contain_probe_column(probe, qualifier))
    }

    /// False only if the file certainly holds no cell of (`row`, `qualifier`); a row bloom
    /// answers for the row.
    pub fn may_contain_column(&self, row: &[u8], qualifier: &[u8]) -> bool {
        self.row_in_range(row)
            && self
                .bloom
                .as_ref()
                .is_none_or(|b| b.may_contain_column(row, qualifier))
    }

    /// A key near the middle of the file, for choosing a split point: the last key of the
    /// middle data block. `None` with fewer than two blocks (too small to split).
    pub fn middle_key(&self) -> Option<Vec<u8>> {
        let n = self.index.len();
        (n >= 2).then(|| self.index.key((n - 1) / 2).to_vec())
    }

    /// Reads every block and checks its checksum.
    pub fn verify(&self) -> Result<()> {
        let name = self.path.display();
        read_footer(self.file.as_ref(), &self.path)?;
        read_block(self.file.as_ref(), &self.path, self.footer.meta)?;
        read_block(self.file.as_ref(), &self.path, self.footer.index)?;
        if self.footer.bloom.size > 0 {
            read_block(self.file.as_ref(), &self.path, self.footer.bloom)?;
        }
        let mut cells = 0u64;
        for i in 0..self.index.len() {
            let Some(h) = self.index.handle(i) else {
                break;
            };
            // From the file, not the cache: verify checks what is on disk.
            let block = Block::new(read_block(self.file.as_ref(), &self.path, h)?)
                .map_err(|m| m.at(&name, h.offset))?;
            cells += block.check_entries().map_err(|m| m.at(&name, h.offset))? as u64;
        }
        if cells != self.meta.cell_count {
            return Err(Error::corruption(
                name,
                self.footer.meta.offset,
                format!(
                    "data blocks hold {cells} cells, metadata says {}",
                    self.meta.cell_count
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn index(&self) -> &BlockIndex {
        &self.index
    }

    /// Data block `i`, from the cache if it is there; inserted into it after a miss when
    /// `fill_cache`.
    pub(crate) fn data_block(&self, i: usize, fill_cache: bool) -> Result<Block> {
        let Some(handle) = self.index.handle(i) else {
            return Err(Error::corruption(
                self.path.display(),
                self.footer.index.offset,
                format!("no data block {i}"),
            ));
        };
        let key = BlockKey {
            file_id: self.file_id,
            offset: handle.offset,
        };
        let at = |m: super::coding::Malformed| m.at(self.path.display(), handle.offset);
        let compressed = self.cache.as_ref().is_some_and(|c| c.keeps_compressed());
        if let Some(b) = self.cache.as_ref().and_then(|c| c.get(&key)) {
            if !compressed {
                scanned(b.len());
                return Block::from_cached(b).map_err(at);
            }
            // `codec code | payload as stored`, checksummed when it was read.
            let codec = b
                .first()
                .and_then(|&c| Compression::from_code(c))
                .ok_or_else(|| {
                    Error::corruption(
                        self.path.display(),
                        handle.offset,
                        "cached block without a codec",
                    )
                })?;
            let plain = inflate(codec, b.slice(1..), &self.path, handle.offset)?;
            scanned(plain.len());
            return Block::from_cached(plain).map_err(at);
        }
        if CACHE_ONLY.with(std::cell::Cell::get) {
            return Err(Error::NotCached);
        }
        let (codec, payload) = read_stored(self.file.as_ref(), &self.path, handle)?;
        let bytes = inflate(codec, payload.clone(), &self.path, handle.offset)?;
        scanned(bytes.len());
        // Checked before it is cached: cache hits trust the restart array.
        let block = Block::new(bytes.clone()).map_err(at)?;
        if let (Some(cache), true) = (&self.cache, fill_cache) {
            let entry = if compressed {
                let mut e = Vec::with_capacity(1 + payload.len());
                e.push(codec.code());
                e.extend_from_slice(&payload);
                Bytes::from(e)
            } else {
                bytes
            };
            cache.insert(key, entry, self.priority);
        }
        Ok(block)
    }

    /// Asks the file system to start reading data block `i` (with its trailer) if the block
    /// cache does not hold it, without waiting: a seek across several files asks for each
    /// file's block first, so their reads from the disk overlap instead of following one
    /// another.
    pub(crate) fn prefetch_block(&self, i: usize) {
        let Some(handle) = self.index.handle(i) else {
            return;
        };
        let key = BlockKey {
            file_id: self.file_id,
            offset: handle.offset,
        };
        if self.cache.as_ref().is_some_and(|c| c.contains(&key)) {
            return;
        }
        self.file.prefetch(
            handle.offset,
            handle.size.saturating_add(BLOCK_TRAILER_LEN as u64),
        );
    }

    /// Asks for `offset..offset + len` of the file to be read ahead ([`RandomAccessFile::prefetch`]).
    pub(crate) fn prefetch(&self, offset: u64, len: u64) {
        self.file.prefetch(offset, len);
    }

    /// The offset of data block `i`, for error messages and readahead.
    pub(crate) fn block_offset(&self, i: usize) -> u64 {
        self.index.handle(i).map_or(0, |h| h.offset)
    }
}
