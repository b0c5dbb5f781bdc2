//! The active segment: the one file the log is appending to.
//!
//! Not thread-safe: only the current group-commit leader touches it (see `commit.rs`), under
//! a mutex that is therefore never contended by appenders.

use super::format;
use super::segments::segment_name;
use crate::fs::{FileSystem, WritableFile};
use cellar_model::Result;
use std::path::{Path, PathBuf};

/// An open segment being appended to.
pub struct SegmentWriter {
    id: u64,
    path: PathBuf,
    file: Box<dyn WritableFile>,
}

impl SegmentWriter {
    /// Creates segment `id` in `dir`, writes its header, and makes its directory entry durable,
    /// so that a later `sync` of the file is enough for its records to survive power loss.
    pub fn create(fs: &dyn FileSystem, dir: &Path, id: u64) -> Result<SegmentWriter> {
        let path = dir.join(segment_name(id));
        let mut file = fs.create(&path)?;
        file.append(&format::segment_header())?;
        file.flush()?;
        fs.sync_dir(dir)?;
        Ok(SegmentWriter { id, path, file })
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the segment, header included.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// Appends already-framed records and hands them to the OS.
    pub fn write(&mut self, framed: &[u8]) -> Result<()> {
        self.file.append(framed)?;
        self.file.flush()
    }

    /// Makes everything written durable (fdatasync).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }
}
