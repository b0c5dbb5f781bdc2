//! An in-memory [`FileSystem`]: store files, descriptors and references are opened from bytes
//! without touching the disk (fast, and nothing to clean up).

use bytes::Bytes;
use cellar_model::{Error, Result};
use cellar_storage::fs::{FileSyncer, FileSystem, LockGuard, RandomAccessFile, WritableFile};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct MemFs {
    files: Arc<Mutex<BTreeMap<PathBuf, Bytes>>>,
}

impl MemFs {
    pub fn new() -> Arc<MemFs> {
        Arc::new(MemFs::default())
    }

    /// Puts a whole file.
    pub fn put(&self, path: &Path, data: impl Into<Bytes>) {
        self.lock().insert(path.to_path_buf(), data.into());
    }

    /// A whole file, if it exists.
    pub fn get(&self, path: &Path) -> Option<Bytes> {
        self.lock().get(path).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, Bytes>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn not_found(path: &Path) -> Error {
    Error::io(
        path.display(),
        std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
    )
}

struct MemWriter {
    path: PathBuf,
    data: Vec<u8>,
    /// Bytes of `data` already published (handed to "the OS").
    published: usize,
    files: Arc<Mutex<BTreeMap<PathBuf, Bytes>>>,
}

impl MemWriter {
    fn publish(&mut self) {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        files.insert(self.path.clone(), Bytes::copy_from_slice(&self.data));
        self.published = self.data.len();
    }
}

/// Memory is as durable as it gets: nothing to do.
struct MemSyncer;

impl FileSyncer for MemSyncer {
    fn sync(&self) -> Result<()> {
        Ok(())
    }
}

impl WritableFile for MemWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.data.extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.publish();
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        self.publish();
        Ok(())
    }
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn discard_buffer(&mut self) {
        self.data.truncate(self.published);
    }
    fn syncer(&self) -> Result<Arc<dyn FileSyncer>> {
        Ok(Arc::new(MemSyncer))
    }
}

impl Drop for MemWriter {
    fn drop(&mut self) {
        self.publish();
    }
}

struct MemFile {
    path: PathBuf,
    data: Bytes,
}

impl RandomAccessFile for MemFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        let start = usize::try_from(offset).ok();
        let end = start.and_then(|s| s.checked_add(len));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.data.len() => Ok(self.data.slice(s..e)),
            _ => Err(Error::corruption(
                self.path.display(),
                offset,
                format!("read of {len} bytes past the end"),
            )),
        }
    }
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

impl FileSystem for MemFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.put(path, Bytes::new());
        Ok(Box::new(MemWriter {
            path: path.to_path_buf(),
            data: Vec::new(),
            published: 0,
            files: Arc::clone(&self.files),
        }))
    }
    /// Directories are implicit here: every parent exists.
    fn create_in_existing_dir(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let data = self.get(path).ok_or_else(|| not_found(path))?;
        Ok(Arc::new(MemFile {
            path: path.to_path_buf(),
            data,
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut files = self.lock();
        let data = files.remove(from).ok_or_else(|| not_found(from))?;
        files.insert(to.to_path_buf(), data);
        Ok(())
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        Ok(self
            .lock()
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }
    fn delete(&self, path: &Path) -> Result<()> {
        self.lock()
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }
    fn delete_dir_all(&self, dir: &Path) -> Result<()> {
        self.lock().retain(|p, _| !p.starts_with(dir));
        Ok(())
    }
    fn create_dir_all(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    fn exists(&self, path: &Path) -> Result<bool> {
        Ok(self.lock().contains_key(path))
    }
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let mut files = self.lock();
        let data = files.get_mut(path).ok_or_else(|| not_found(path))?;
        let len = usize::try_from(len).unwrap_or(usize::MAX).min(data.len());
        *data = data.slice(..len);
        Ok(())
    }
    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    fn lock(&self, _path: &Path) -> Result<LockGuard> {
        Ok(Box::new(()))
    }
}
