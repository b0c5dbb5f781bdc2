//! The file system under the engine. Everything the engine reads or writes goes through
//! [`FileSystem`], so the same code runs on local disk, on HDFS, and on the fault-injecting
//! file system the power-loss tests use. Nothing above this module may assume a local path.
//!
//! Paths are plain `/`-separated paths interpreted by the implementation.
//!
//! Durability contract (what the fault-injecting file system models): appended bytes survive a
//! process crash once flushed and a power cut once synced; a create, rename, delete or
//! directory creation survives a power cut only once its parent directory was synced
//! ([`FileSystem::sync_dir`], [`create_dir_durable`]).

mod archive;
mod fault;
mod hdfs;
mod local;

pub use archive::{archive_root, archived_path, ArchivingFs};
pub use fault::FaultFs;
pub use hdfs::{HdfsFs, DEFAULT_WRITE_BUFFER as HDFS_DEFAULT_WRITE_BUFFER};
pub use local::LocalFs;

use bytes::Bytes;
use cellar_model::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file being written. Appends are buffered; [`WritableFile::flush`] hands them to the OS
/// (on HDFS: hflush) and [`WritableFile::sync`] makes them durable (fdatasync; on HDFS: hsync).
///
/// Not thread-safe: one writer at a time (callers wrap it in a mutex).
pub trait WritableFile: Send {
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the OS: they survive a process crash, not a power cut.
    fn flush(&mut self) -> Result<()>;
    /// Flushes, then makes everything appended so far durable against power loss.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn path(&self) -> &Path;
    /// Drops appended bytes not yet handed to the OS. After a failed flush they would
    /// otherwise reach the file later (on the next flush or on drop), behind the caller's back.
    fn discard_buffer(&mut self);
    /// A handle that syncs this file from another thread while appends go on: the WAL makes
    /// one round's records durable while the next round is written.
    fn syncer(&self) -> Result<Arc<dyn FileSyncer>>;
}

/// Syncs one file, concurrently with its writer ([`WritableFile::syncer`]).
pub trait FileSyncer: Send + Sync {
    /// Makes durable (fdatasync; on HDFS: hsync) at least every byte the writer had handed to
    /// the OS ([`WritableFile::flush`]) when this call began.
    fn sync(&self) -> Result<()>;
}

/// Held while a process owns a directory ([`FileSystem::lock`]); dropping it lets go.
pub type LockGuard = Box<dyn std::any::Any + Send + Sync>;

/// A file open for positional reads. Thread-safe: many readers share one handle.
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `len` bytes at `offset`; reading past the end is an error naming the file.
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes>;
    /// Asks for `offset..offset + len` to be read from the disk ahead of its use, in large
    /// requests, without waiting for it: sequential readers (compactions, long scans) call it
    /// ahead of where they read. Advice only: a file system without it ignores it, and so do
    /// errors.
    fn prefetch(&self, _offset: u64, _len: u64) {}
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn path(&self) -> &Path;
}

/// Operations on files and directories.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates (or truncates) a file for writing. Whether missing parent directories are
    /// made depends on the file system (HDFS makes them, local disk does not): code that must
    /// not bring a directory back calls [`FileSystem::create_in_existing_dir`].
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates (or truncates) a file for writing in a directory that must exist: if it does
    /// not (it was moved or removed), fails (`NotFound`) and creates nothing, on every file
    /// system. The parent is looked up by the file system when it creates the file, in one
    /// step (one system call, one NameNode request), so a rename of the directory is either
    /// before the create (which then fails) or after it (the file moves with the directory).
    /// The WAL creates its segments this way: a fenced server cannot bring back the directory
    /// the master moved away (`docs/reliability.md`, the WAL fence).
    fn create_in_existing_dir(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Opens a file that nobody will change again (a store file) for reads. Local disk maps
    /// it into memory, so a read returns the page cache's bytes without copying them; a file
    /// system without that falls back to [`FileSystem::open`].
    fn open_immutable(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open(path)
    }
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Names (not paths) of the entries of `dir`, sorted.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    fn delete(&self, path: &Path) -> Result<()>;
    /// Deletes a directory and everything under it.
    fn delete_dir_all(&self, dir: &Path) -> Result<()>;
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    fn exists(&self, path: &Path) -> Result<bool>;
    /// Cuts a file to `len` bytes (used to drop a torn WAL tail).
    fn truncate(&self, path: &Path, len: u64) -> Result<()>;
    /// Whether [`FileSystem::truncate`] writes the kept bytes to a new file (durably) and puts
    /// it in place of the old one, so an open writer of the old file no longer has anything to
    /// make durable (HDFS). Local disk cuts the file in place: false.
    fn truncate_replaces_file(&self) -> bool {
        false
    }
    /// Whether taking a file over ([`FileSystem::recover`]) shuts its old writer out (HDFS's
    /// lease recovery). Without that, a cluster fences a server by renaming its WAL
    /// directory and the server checks for it (`WalOptions::fence_dir`). With it, the rename
    /// still fences: the master takes over every segment in the moved directory before it
    /// reads it (so nothing the old writer makes durable afterwards is acknowledged), and a
    /// segment the old writer creates later has no directory to go in
    /// ([`FileSystem::create_in_existing_dir`]).
    fn fences_writers(&self) -> bool {
        false
    }
    /// Makes creates, renames and deletes inside `dir` durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// A watch on `dir` that tells, cheaper than [`FileSystem::exists`] and as often as
    /// asked, whether it is still where it was (`WalOptions::fence_dir` asks after every WAL
    /// write round). `None`: none cheaper here; callers look the path up.
    fn watch_dir(&self, _dir: &Path) -> Result<Option<Box<dyn DirWatch>>> {
        Ok(None)
    }
    /// Takes the exclusive lock file `path` (created if missing) for as long as the guard
    /// lives. A second holder, in this process or another, is refused with an error naming
    /// the file: two servers never write the same directory.
    fn lock(&self, path: &Path) -> Result<LockGuard>;
    /// Makes a file that a writer left open (it crashed) readable up to its last durable
    /// byte, and shuts that writer out. Local disk: nothing to do. HDFS: lease recovery.
    fn recover(&self, _path: &Path) -> Result<()> {
        Ok(())
    }
}

/// Whether a directory is still in place: a move or removal of it that completed before
/// [`DirWatch::intact`] was called is always seen (the WAL fence relies on that order).
pub trait DirWatch: Send + Sync {
    /// False once the directory has been moved or removed (and from then on).
    fn intact(&self) -> Result<bool>;
}

/// The shared handle every component holds.
pub type FsRef = Arc<dyn FileSystem>;

/// The error for a read of `len` bytes at `offset` that does not lie inside a file of
/// `file_len` bytes (every [`RandomAccessFile::read_at`] checks this first).
pub fn check_read(
    file: impl std::fmt::Display,
    offset: u64,
    len: usize,
    file_len: u64,
) -> Result<()> {
    if offset
        .checked_add(len as u64)
        .is_none_or(|end| end > file_len)
    {
        return Err(cellar_model::Error::corruption(
            file,
            offset,
            format!("read of {len} bytes past the end of a {file_len}-byte file"),
        ));
    }
    Ok(())
}

/// Reads a whole file.
pub fn read_all(fs: &dyn FileSystem, path: &Path) -> Result<Bytes> {
    let f = fs.open(path)?;
    let len = usize::try_from(f.len())
        .map_err(|_| cellar_model::Error::corruption(path.display(), 0, "file too large"))?;
    f.read_at(0, len)
}

/// Writes `data` to `path` atomically and durably: a temporary file, synced, renamed over
/// `path`, directory synced. A crash leaves either the old file or the new one, never a mix.
pub fn write_atomic(fs: &dyn FileSystem, path: &Path, data: &[u8]) -> Result<()> {
    let tmp = tmp_path(path);
    let mut f = fs.create(&tmp)?;
    f.append(data)?;
    f.sync()?;
    drop(f);
    fs.rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        fs.sync_dir(dir)?;
    }
    Ok(())
}

/// Creates `dir` and its missing parents so that they survive a power cut: each directory
/// created is made durable by syncing its parent.
pub fn create_dir_durable(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at {
        if d.as_os_str().is_empty() || fs.exists(d)? {
            break;
        }
        missing.push(d);
        at = d.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    fs.create_dir_all(dir)?;
    for d in missing.iter().rev() {
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)?;
        }
    }
    Ok(())
}

/// `path` with `.tmp` appended: files that are half-written carry this suffix and are
/// deleted when their directory is opened.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}
