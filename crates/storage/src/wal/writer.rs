//! The active segment: the one file the log is appending to.
//!
//! Not thread-safe: only the holder of the log's write leadership touches it (see `commit.rs`),
//! under a mutex that is therefore never contended. Its [`FileSyncer`] is shared: sync rounds
//! make it durable without the mutex, while the next round is written.

use super::format;
use super::segments::segment_name;
use crate::fs::{FileSyncer, FileSystem, WritableFile};
use cellar_model::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open segment being appended to.
pub struct SegmentWriter {
    id: u64,
    path: PathBuf,
    file: Box<dyn WritableFile>,
    syncer: Arc<dyn FileSyncer>,
    salt: u64,
    /// Bytes known to be in the file whole: the end of the last successful write.
    good_len: u64,
}

impl SegmentWriter {
    /// Creates segment `id` in `dir` for records framed with `salt`, writes its header, and
    /// makes its directory entry durable, so that a later sync of the file is enough for its
    /// records to survive power loss. `dir` must exist: it is never created here, so a server
    /// whose log directory the master moved away (fencing it) cannot start a segment the
    /// master's split would not see ([`FileSystem::create_in_existing_dir`]).
    pub fn create(fs: &dyn FileSystem, dir: &Path, id: u64, salt: u64) -> Result<SegmentWriter> {
        let path = dir.join(segment_name(id));
        let mut file = fs.create_in_existing_dir(&path)?;
        file.append(&format::segment_header(salt))?;
        file.flush()?;
        fs.sync_dir(dir)?;
        let syncer = file.syncer()?;
        Ok(SegmentWriter {
            id,
            path,
            good_len: file.len(),
            file,
            syncer,
            salt,
        })
    }

    /// The salt this segment's record headers are framed with.
    pub fn salt(&self) -> u64 {
        self.salt
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the segment, header included.
    pub fn len(&self) -> u64 {
        self.good_len
    }

    /// Appends already-framed records and hands them to the OS. On failure nothing of them
    /// stays buffered: the file may hold a prefix of them past [`SegmentWriter::len`], which
    /// the log cuts off before it writes again.
    pub fn write(&mut self, framed: &[u8]) -> Result<()> {
        let written = self.file.append(framed).and_then(|()| self.file.flush());
        match written {
            Ok(()) => {
                self.good_len = self.file.len();
                Ok(())
            }
            Err(e) => {
                self.file.discard_buffer();
                Err(e)
            }
        }
    }

    /// The handle that makes this segment durable, usable from any thread.
    pub fn syncer(&self) -> Arc<dyn FileSyncer> {
        Arc::clone(&self.syncer)
    }
}
