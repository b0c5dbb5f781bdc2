//! An HFile opened for reading: its trailer and file info read at open, its cells read block
//! by block in file order (`docs/hfile-format.md` §4.5).

use crate::block::{self, BlockType, Header, HEADER};
use crate::cell::{decode_plain, Cell, Format};
use crate::file_info::FileInfo;
use crate::trailer::{size_for_version, Trailer};
use crate::{encoding, Error};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Where an HFile's bytes come from: positioned reads of a local file, bytes in memory, or
/// anything a caller adapts (Cellar's servers read HFiles on HDFS through their own client).
pub trait Source: Send + Sync {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
}

impl Source for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

impl Source for Vec<u8> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let at = usize::try_from(offset).ok();
        match at.and_then(|a| self.get(a..a.checked_add(buf.len())?)) {
            Some(s) => {
                buf.copy_from_slice(s);
                Ok(())
            }
            None => Err(std::io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

/// An HFile, read with positioned reads.
pub struct HFile {
    path: PathBuf,
    file: Box<dyn Source>,
    size: u64,
    pub trailer: Trailer,
    pub info: FileInfo,
}

impl std::fmt::Debug for HFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HFile")
            .field("path", &self.path)
            .field("size", &self.size)
            .field("trailer", &self.trailer)
            .finish_non_exhaustive()
    }
}

impl HFile {
    /// Opens `path`, reads its trailer and file info, and checks that it is a file this
    /// reader can read (version, encryption).
    pub fn open(path: impl AsRef<Path>) -> Result<HFile, Error> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let size = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        HFile::from_source(path, Box::new(file), size)
    }

    /// Reads an HFile held in memory (`name` names it in errors).
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<HFile, Error> {
        let size = bytes.len() as u64;
        HFile::from_source(name.into(), Box::new(bytes), size)
    }

    /// Reads an HFile of `size` bytes from `file` (`path` names it in errors).
    pub fn from_source(path: PathBuf, file: Box<dyn Source>, size: u64) -> Result<HFile, Error> {
        let bad = |offset: u64, what: String| Error::corrupt(&path, offset, what);
        if size < 4 {
            return Err(bad(0, format!("{size} bytes is too short for an HFile")));
        }
        let mut version = [0u8; 4];
        file.read_exact_at(&mut version, size - 4)
            .map_err(|e| Error::io(&path, e))?;
        let (major, minor, trailer_size) = size_for_version(u32::from_be_bytes(version))
            .map_err(|e| Error::unsupported(&path, e))?;
        let trailer_at = size.checked_sub(trailer_size as u64).ok_or_else(|| {
            bad(
                0,
                format!("{size} bytes is too short for a {trailer_size}-byte trailer"),
            )
        })?;
        let mut t = vec![0u8; trailer_size];
        file.read_exact_at(&mut t, trailer_at)
            .map_err(|e| Error::io(&path, e))?;
        let trailer = Trailer::parse(&t, major, minor).map_err(|e| bad(trailer_at, e))?;
        if trailer.encrypted {
            return Err(Error::unsupported(
                &path,
                "the file is encrypted (HBase transparent encryption); decrypting is not supported"
                    .into(),
            ));
        }
        for (name, offset) in [
            ("file info", trailer.file_info_offset),
            ("load-on-open section", trailer.load_on_open_offset),
        ] {
            if offset >= trailer_at {
                return Err(bad(
                    trailer_at,
                    format!("the trailer puts the {name} at {offset}, past the file's blocks"),
                ));
            }
        }
        let mut hfile = HFile {
            path,
            file,
            size,
            trailer,
            info: FileInfo::default(),
        };
        let (kind, payload) = hfile.block(hfile.trailer.file_info_offset)?;
        if kind != BlockType::FileInfo {
            return Err(hfile.corrupt(
                hfile.trailer.file_info_offset,
                format!("a {kind:?} block where the file info should be"),
            ));
        }
        hfile.info = FileInfo::parse(&payload)
            .map_err(|e| hfile.corrupt(hfile.trailer.file_info_offset, e))?;
        Ok(hfile)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// How cells are laid out in this file.
    pub fn format(&self) -> Format {
        Format {
            includes_tags: self.info.includes_tags,
            compress_tags: self.info.compress_tags,
            includes_mvcc: self.info.includes_mvcc,
        }
    }

    /// The data block encoding the file info names (NONE when it names none).
    pub fn encoding(&self) -> String {
        self.info
            .string(b"DATA_BLOCK_ENCODING")
            .unwrap_or_else(|| "NONE".into())
    }

    fn corrupt(&self, offset: u64, what: String) -> Error {
        Error::corrupt(&self.path, offset, what)
    }

    /// The header of the block at `offset`.
    fn header(&self, offset: u64) -> Result<Header, Error> {
        let end = self.size - self.trailer.size as u64;
        if offset.checked_add(HEADER as u64).is_none_or(|e| e > end) {
            return Err(self.corrupt(offset, "a block header past the end of the blocks".into()));
        }
        let mut h = [0u8; HEADER];
        self.file
            .read_exact_at(&mut h, offset)
            .map_err(|e| Error::io(&self.path, e))?;
        let header = Header::parse(&h).map_err(|e| self.corrupt(offset, e))?;
        if offset + header.on_disk_size() as u64 > end {
            return Err(self.corrupt(
                offset,
                format!(
                    "a block of {} bytes runs past the end of the blocks",
                    header.on_disk_size()
                ),
            ));
        }
        Ok(header)
    }

    /// The block at `offset`: its type and its payload, checked and decompressed.
    pub fn block(&self, offset: u64) -> Result<(BlockType, Vec<u8>), Error> {
        let (header, payload) = self.block_with_header(offset)?;
        Ok((header.kind, payload))
    }

    fn block_with_header(&self, offset: u64) -> Result<(Header, Vec<u8>), Error> {
        let header = self.header(offset)?;
        let mut bytes = vec![0u8; header.on_disk_size()];
        self.file
            .read_exact_at(&mut bytes, offset)
            .map_err(|e| Error::io(&self.path, e))?;
        let payload = block::payload(&header, &bytes, self.trailer.codec)
            .map_err(|e| self.corrupt(offset, e))?;
        Ok((header, payload))
    }

    /// Every cell, in file order, a data block at a time. The last item is an error if the
    /// file holds another number of cells than its trailer says.
    pub fn cells(&self) -> Cells<'_> {
        Cells {
            file: self,
            next: self.trailer.first_data_block_offset,
            pending: Vec::new().into_iter(),
            count: 0,
            done: false,
        }
    }
}

/// The cells of an [`HFile`] in file order ([`HFile::cells`]).
pub struct Cells<'f> {
    file: &'f HFile,
    /// The next block to read, if any.
    next: Option<u64>,
    pending: std::vec::IntoIter<Cell>,
    count: u64,
    done: bool,
}

impl Cells<'_> {
    /// Reads data blocks until one yields cells; Ok(false) at the end.
    fn fill(&mut self) -> Result<bool, Error> {
        let f = self.file;
        while let Some(offset) = self.next {
            let header = f.header(offset)?;
            self.next = (offset < f.trailer.last_data_block_offset)
                .then(|| offset + header.on_disk_size() as u64);
            if !header.kind.is_data() {
                continue; // Leaf index and Bloom chunks sit between data blocks.
            }
            let (_, payload) = f.block_with_header(offset)?;
            let mut cells = Vec::new();
            let decoded = match header.kind {
                BlockType::EncodedData => encoding::decode(&payload, f.format(), &mut cells),
                _ => decode_plain(&payload, f.format(), &mut cells),
            };
            decoded.map_err(|e| f.corrupt(offset, e))?;
            if !cells.is_empty() {
                self.count += cells.len() as u64;
                self.pending = cells.into_iter();
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl Iterator for Cells<'_> {
    type Item = Result<Cell, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(c) = self.pending.next() {
            return Some(Ok(c));
        }
        match self.fill() {
            Ok(true) => self.pending.next().map(Ok),
            Ok(false) => {
                self.done = true;
                let expected = self.file.trailer.entry_count;
                (self.count != expected).then(|| {
                    Err(self.file.corrupt(
                        self.file.trailer.last_data_block_offset,
                        format!(
                            "the trailer says {expected} cells, the data blocks hold {}",
                            self.count
                        ),
                    ))
                })
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
