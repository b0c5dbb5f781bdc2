//! A reader of Apache HBase's store files, HFile v3 (and v2 minor 3), as HBase 2.6 writes them:
//! the trailer, blocks with their checksums, the file info, and the cells of every data block
//! in the encodings (NONE, PREFIX, DIFF, FAST_DIFF, ROW_INDEX_V1) and compressions (NONE, GZ,
//! SNAPPY, LZ4, ZSTD in both of HBase's framings) HBase writes. The format, as far as this
//! reads it: `docs/hfile-format.md`.
//!
//! Read path: [`HFile::open`] (`reader.rs`) reads the trailer (`trailer.rs`) and the file info
//! (`file_info.rs`); [`HFile::cells`] walks the data blocks in file order, each one checked and
//! decompressed (`block.rs`, `compression.rs`), then decoded (`cell.rs` for unencoded blocks,
//! `encoding/` for the others). A file that is damaged or uses what is not supported here
//! (encryption, LZO, BZIP2, LZMA, BROTLI) is an error naming the file and, where there is one,
//! the offset of the block.

// Policy: every byte read here comes from a file; nothing in it may panic the reader.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

mod block;
mod cell;
mod compression;
mod encoding;
mod file_info;
mod input;
mod reader;
pub mod snapshot;
mod trailer;

pub use block::BlockType;
pub use cell::{kind, tag, Cell, Format};
pub use compression::Codec;
pub use file_info::FileInfo;
pub use reader::{Cells, HFile, Source};
pub use trailer::Trailer;

use std::path::{Path, PathBuf};

/// What the fuzz targets in `fuzz/` reach beneath the file reader: one data block's payload
/// decoded, and one block's decompression. Not API: hidden from the docs.
#[doc(hidden)]
pub mod fuzzing {
    use crate::cell::{decode_plain, Cell, Format};
    use crate::compression::Codec;

    /// Decodes a data block payload: encoded (id first) or plain.
    pub fn decode_data_block(
        payload: &[u8],
        format: Format,
        encoded: bool,
    ) -> Result<Vec<Cell>, String> {
        let mut cells = Vec::new();
        if encoded {
            crate::encoding::decode(payload, format, &mut cells)?;
        } else {
            decode_plain(payload, format, &mut cells)?;
        }
        Ok(cells)
    }

    /// Decompresses `input` with the codec of trailer ordinal `codec` into `size` bytes.
    pub fn decompress(codec: u64, input: &[u8], size: usize) -> Result<Vec<u8>, String> {
        Codec::from_ordinal(codec)?.decompress(input, size)
    }
}

/// Why a file could not be read: what is wrong, and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: damaged HFile at offset {offset}: {what}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("{path}: {what}")]
    Unsupported { path: PathBuf, what: String },
}

impl Error {
    fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    fn corrupt(path: &Path, offset: u64, what: String) -> Error {
        Error::Corrupt {
            path: path.to_path_buf(),
            offset,
            what,
        }
    }

    fn unsupported(path: &Path, what: String) -> Error {
        Error::Unsupported {
            path: path.to_path_buf(),
            what,
        }
    }
}
