//! A [`FileSystem`] that can lose power, fill up, fail and slow down, for tests.
//!
//! Files live on the local disk; the wrapper remembers what a power cut would keep (the model
//! of LevelDB's fault-injection test, extended to the namespace):
//! - of each file written through it, the length last synced: a cut truncates the rest;
//! - every create, rename, delete and directory creation since its parent directory was last
//!   synced: a cut undoes them, newest first (a deleted file comes back with its synced
//!   content, a renamed file goes back to its old name and the file it replaced returns, a new
//!   file or directory disappears with everything in it).
//!
//! After a cut every operation fails until [`FaultFs::restore_power`], so code still running
//! cannot write "after the crash". [`FaultFs::cut_after`] schedules the cut after a number of
//! mutating operations, so a test can land it anywhere in a flush or a compaction.
//!
//! Other faults: [`FaultFs::set_free_space`] (a full disk: writes fail with ENOSPC, a write
//! that does not fit is cut short), [`FaultFs::fail_writes`] and [`FaultFs::fail_syncs`] (EIO),
//! [`FaultFs::set_sync_delay`] (a slow disk: every file and directory sync takes that long),
//! [`FaultFs::set_write_delay`] (every write to the OS takes that long).

use super::{FileSyncer, FileSystem, LocalFs, LockGuard, RandomAccessFile, WritableFile};
use cellar_model::{Error, Result};
use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A namespace change a power cut undoes unless `dir` was synced after it.
#[derive(Debug)]
enum Undo {
    /// `path` came into being (a file, or a directory and everything later put in it).
    Created { path: PathBuf, is_dir: bool },
    /// `from` was renamed to `to`, which held `replaced` (its durable content) before.
    Renamed {
        from: PathBuf,
        to: PathBuf,
        replaced: Option<Vec<u8>>,
    },
    /// A file was deleted; `content` is what a power cut brings back.
    Deleted { path: PathBuf, content: Vec<u8> },
    /// A directory tree was deleted: its directories and its files' durable contents.
    DeletedTree {
        dirs: Vec<PathBuf>,
        files: Vec<(PathBuf, Vec<u8>)>,
    },
}

#[derive(Default)]
struct State {
    /// Durable length of every file written through this file system. Files it never wrote
    /// are taken as durable in full.
    synced_len: HashMap<PathBuf, u64>,
    /// Namespace changes not yet durable, oldest first, each with the directory whose sync
    /// makes it durable.
    undo: Vec<(PathBuf, Undo)>,
    dead: bool,
    /// Mutating operations left before an automatic power cut.
    ops_until_cut: Option<u64>,
    cuts: u64,
    /// Bytes that may still be written; `None`: unlimited.
    free_space: Option<u64>,
    /// Writes (to the OS) left to fail with EIO.
    failing_writes: u64,
    /// File syncs left to fail with EIO.
    failing_syncs: u64,
    sync_delay: Duration,
    write_delay: Duration,
    /// Errors injected so far (ENOSPC and EIO).
    injected: u64,
}

/// Local disk with simulated power loss and disk faults. Cheap to clone; clones share state.
#[derive(Clone, Default)]
pub struct FaultFs {
    state: Arc<Mutex<State>>,
}

fn dead_err(path: &Path) -> Error {
    Error::io(path.display(), io::Error::other("simulated power loss"))
}

fn os_err(path: &Path, code: i32) -> Error {
    Error::io(path.display(), io::Error::from_raw_os_error(code))
}

fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

impl FaultFs {
    pub fn new() -> FaultFs {
        FaultFs::default()
    }

    /// Loses everything not durable, then fails every operation until power is restored.
    pub fn power_cut(&self) {
        let mut st = self.state.lock();
        Self::cut_locked(&mut st);
    }

    fn cut_locked(st: &mut State) {
        if st.dead {
            return;
        }
        st.dead = true;
        st.cuts += 1;
        st.ops_until_cut = None;
        for (path, len) in &st.synced_len {
            if let Ok(f) = OpenOptions::new().write(true).open(path) {
                let _ = f.set_len(*len);
            }
        }
        while let Some((_, undo)) = st.undo.pop() {
            Self::undo(st, undo);
        }
    }

    fn undo(st: &mut State, undo: Undo) {
        match undo {
            Undo::Created {
                path,
                is_dir: false,
            } => {
                let _ = std::fs::remove_file(&path);
                st.synced_len.remove(&path);
            }
            Undo::Created { path, is_dir: true } => {
                let _ = std::fs::remove_dir_all(&path);
                st.synced_len.retain(|p, _| !p.starts_with(&path));
            }
            Undo::Renamed { from, to, replaced } => {
                if std::fs::rename(&to, &from).is_ok() {
                    if let Some(len) = st.synced_len.remove(&to) {
                        st.synced_len.insert(from, len);
                    }
                }
                if let Some(content) = replaced {
                    Self::restore_file(st, &to, &content);
                }
            }
            Undo::Deleted { path, content } => Self::restore_file(st, &path, &content),
            Undo::DeletedTree { dirs, files } => {
                for d in &dirs {
                    let _ = std::fs::create_dir_all(d);
                }
                for (path, content) in &files {
                    Self::restore_file(st, path, content);
                }
            }
        }
    }

    fn restore_file(st: &mut State, path: &Path, content: &[u8]) {
        if std::fs::write(path, content).is_ok() {
            st.synced_len
                .insert(path.to_path_buf(), content.len() as u64);
        }
    }

    /// What a power cut would leave of a file now: its synced prefix (all of it if this file
    /// system never wrote it).
    fn durable_content(st: &State, path: &Path) -> Vec<u8> {
        let mut data = std::fs::read(path).unwrap_or_default();
        if let Some(&len) = st.synced_len.get(path) {
            data.truncate(usize::try_from(len).unwrap_or(usize::MAX));
        }
        data
    }

    /// Schedules a power cut after `ops` more mutating operations (writes that reach the OS,
    /// syncs, creates, renames, deletes, directory creations).
    pub fn cut_after(&self, ops: u64) {
        self.state.lock().ops_until_cut = Some(ops);
    }

    pub fn restore_power(&self) {
        let mut st = self.state.lock();
        st.dead = false;
        st.ops_until_cut = None;
    }

    pub fn is_dead(&self) -> bool {
        self.state.lock().dead
    }

    /// Power cuts so far (scheduled or explicit).
    pub fn cuts(&self) -> u64 {
        self.state.lock().cuts
    }

    /// Limits the bytes that can still be written (`None`: unlimited). At 0, writes and
    /// creates fail with ENOSPC; a write larger than what is left writes what fits, then fails.
    pub fn set_free_space(&self, bytes: Option<u64>) {
        self.state.lock().free_space = bytes;
    }

    /// The next `n` writes to the OS fail with EIO, writing nothing.
    pub fn fail_writes(&self, n: u64) {
        self.state.lock().failing_writes = n;
    }

    /// The next `n` file syncs fail with EIO (what was written stays in the OS, not durable).
    pub fn fail_syncs(&self, n: u64) {
        self.state.lock().failing_syncs = n;
    }

    /// Every file and directory sync takes at least `delay` (a slow or overloaded disk).
    pub fn set_sync_delay(&self, delay: Duration) {
        self.state.lock().sync_delay = delay;
    }

    /// Every write to the OS takes at least `delay` (a disk slower than its writers).
    pub fn set_write_delay(&self, delay: Duration) {
        self.state.lock().write_delay = delay;
    }

    /// ENOSPC and EIO errors injected so far.
    pub fn injected_errors(&self) -> u64 {
        self.state.lock().injected
    }

    /// Counts one mutating operation; fails if the power is (or just went) out.
    fn tick(&self, path: &Path) -> Result<MutexGuard<'_, State>> {
        let mut st = self.state.lock();
        if st.dead {
            return Err(dead_err(path));
        }
        if let Some(n) = st.ops_until_cut {
            if n == 0 {
                Self::cut_locked(&mut st);
                return Err(dead_err(path));
            }
            st.ops_until_cut = Some(n - 1);
        }
        Ok(st)
    }

    /// [`FaultFs::tick`] for an operation that needs space (a create, a directory).
    fn tick_space(&self, path: &Path) -> Result<MutexGuard<'_, State>> {
        let mut st = self.tick(path)?;
        if st.free_space == Some(0) {
            st.injected += 1;
            return Err(os_err(path, libc::ENOSPC));
        }
        Ok(st)
    }

    fn check_alive(&self, path: &Path) -> Result<()> {
        if self.state.lock().dead {
            return Err(dead_err(path));
        }
        Ok(())
    }

    /// Sleeps for the sync delay (outside the state lock), then counts the sync.
    fn sync_op(&self, path: &Path) -> Result<MutexGuard<'_, State>> {
        let delay = self.state.lock().sync_delay;
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        self.tick(path)
    }
}

struct FaultWritable {
    fs: FaultFs,
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    /// Bytes handed to the OS; shared with the file's syncers.
    written: Arc<AtomicU64>,
}

impl FaultWritable {
    fn write_out(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let delay = self.fs.state.lock().write_delay;
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let mut st = self.fs.tick(&self.path)?;
        if st.failing_writes > 0 {
            st.failing_writes -= 1;
            st.injected += 1;
            return Err(os_err(&self.path, libc::EIO));
        }
        let fits = match st.free_space {
            Some(free) => usize::try_from(free)
                .unwrap_or(usize::MAX)
                .min(self.buf.len()),
            None => self.buf.len(),
        };
        #[allow(
            clippy::indexing_slicing,
            reason = "`fits` is at most `buf.len()` (the `min` above)"
        )]
        let head = &self.buf[..fits];
        self.file
            .write_all(head)
            .map_err(|e| Error::io(self.path.display(), e))?;
        self.written.fetch_add(fits as u64, Ordering::AcqRel);
        self.buf.drain(..fits);
        if let Some(free) = &mut st.free_space {
            *free -= fits as u64;
        }
        if !self.buf.is_empty() {
            st.injected += 1;
            return Err(os_err(&self.path, libc::ENOSPC));
        }
        Ok(())
    }
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.fs.check_alive(&self.path)?;
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.write_out()
    }

    fn sync(&mut self) -> Result<()> {
        self.write_out()?;
        self.syncer()?.sync()
    }

    fn len(&self) -> u64 {
        self.written.load(Ordering::Acquire) + self.buf.len() as u64
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn discard_buffer(&mut self) {
        self.buf.clear();
    }

    fn syncer(&self) -> Result<Arc<dyn FileSyncer>> {
        let file = self
            .file
            .try_clone()
            .map_err(|e| Error::io(self.path.display(), e))?;
        Ok(Arc::new(FaultSyncer {
            fs: self.fs.clone(),
            path: self.path.clone(),
            file,
            written: Arc::clone(&self.written),
        }))
    }
}

struct FaultSyncer {
    fs: FaultFs,
    path: PathBuf,
    file: File,
    written: Arc<AtomicU64>,
}

impl FileSyncer for FaultSyncer {
    fn sync(&self) -> Result<()> {
        // Only what was in the OS when the sync began is covered by it (and no more than the
        // file holds: it may have been truncated since).
        let on_disk = self.file.metadata().map_or(0, |m| m.len());
        let covered = self.written.load(Ordering::Acquire).min(on_disk);
        let mut st = self.fs.sync_op(&self.path)?;
        if st.failing_syncs > 0 {
            st.failing_syncs -= 1;
            st.injected += 1;
            return Err(os_err(&self.path, libc::EIO));
        }
        self.file
            .sync_data()
            .map_err(|e| Error::io(self.path.display(), e))?;
        let len = st.synced_len.entry(self.path.clone()).or_insert(0);
        *len = (*len).max(covered);
        Ok(())
    }
}

impl Drop for FaultWritable {
    fn drop(&mut self) {
        // As the local file system does, hand buffered bytes to the OS, unless the power is out.
        let _ = self.write_out();
    }
}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut st = self.tick_space(path)?;
        let existed = path.exists();
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(path.display(), e))?;
        st.synced_len.insert(path.to_path_buf(), 0);
        if !existed {
            st.undo.push((
                parent_of(path),
                Undo::Created {
                    path: path.to_path_buf(),
                    is_dir: false,
                },
            ));
        }
        Ok(Box::new(FaultWritable {
            fs: self.clone(),
            path: path.to_path_buf(),
            file,
            buf: Vec::new(),
            written: Arc::new(AtomicU64::new(0)),
        }))
    }

    /// As on local disk, [`FileSystem::create`] never makes parents.
    fn create_in_existing_dir(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.check_alive(path)?;
        LocalFs.open(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.tick(from)?;
        let replaced = to.exists().then(|| Self::durable_content(&st, to));
        LocalFs.rename(from, to)?;
        if let Some(len) = st.synced_len.remove(from) {
            st.synced_len.insert(to.to_path_buf(), len);
        } else {
            st.synced_len.remove(to);
        }
        st.undo.push((
            parent_of(to),
            Undo::Renamed {
                from: from.to_path_buf(),
                to: to.to_path_buf(),
                replaced,
            },
        ));
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.check_alive(dir)?;
        LocalFs.list(dir)
    }

    fn delete(&self, path: &Path) -> Result<()> {
        let mut st = self.tick(path)?;
        let content = Self::durable_content(&st, path);
        LocalFs.delete(path)?;
        st.synced_len.remove(path);
        st.undo.push((
            parent_of(path),
            Undo::Deleted {
                path: path.to_path_buf(),
                content,
            },
        ));
        Ok(())
    }

    fn delete_dir_all(&self, dir: &Path) -> Result<()> {
        let mut st = self.tick(dir)?;
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(d) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            dirs.push(d);
            for entry in entries.flatten() {
                let p = entry.path();
                if p.is_dir() {
                    pending.push(p);
                } else {
                    files.push((p.clone(), Self::durable_content(&st, &p)));
                }
            }
        }
        LocalFs.delete_dir_all(dir)?;
        st.synced_len.retain(|p, _| !p.starts_with(dir));
        if !dirs.is_empty() {
            st.undo
                .push((parent_of(dir), Undo::DeletedTree { dirs, files }));
        }
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut missing = Vec::new();
        let mut at = Some(dir);
        while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            missing.push(d.to_path_buf());
            at = d.parent();
        }
        let mut st = if missing.is_empty() {
            self.tick(dir)?
        } else {
            self.tick_space(dir)?
        };
        LocalFs.create_dir_all(dir)?;
        for d in missing.into_iter().rev() {
            st.undo.push((
                parent_of(&d),
                Undo::Created {
                    path: d,
                    is_dir: true,
                },
            ));
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.check_alive(path)?;
        LocalFs.exists(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let mut st = self.tick(path)?;
        LocalFs.truncate(path, len)?;
        if let Some(l) = st.synced_len.get_mut(path) {
            *l = (*l).min(len);
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut st = self.sync_op(dir)?;
        st.undo.retain(|(d, _)| d != dir);
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<LockGuard> {
        self.check_alive(path)?;
        LocalFs.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(fs: &FaultFs, path: &Path, data: &[u8], sync: bool) {
        let mut f = fs.create(path).expect("create");
        f.append(data).expect("append");
        if sync {
            f.sync().expect("sync");
        } else {
            f.flush().expect("flush");
        }
    }

    #[test]
    fn power_cut_drops_unsynced_data_and_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultFs::new();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        let mut fa = fs.create(&a).expect("create a");
        fa.append(b"durable").expect("append");
        fa.sync().expect("sync");
        fs.sync_dir(dir.path()).expect("sync dir");
        fa.append(b" lost").expect("append");
        fa.flush().expect("flush");
        let mut fb = fs.create(&b).expect("create b");
        fb.append(b"x").expect("append");
        fb.sync().expect("sync b");
        fs.power_cut();
        assert!(fa.append(b"more").is_err(), "writes fail after the cut");
        drop(fa);
        drop(fb);
        fs.restore_power();
        assert_eq!(std::fs::read(&a).expect("read a"), b"durable");
        assert!(
            !b.exists(),
            "a file whose directory was never synced is gone"
        );
    }

    #[test]
    fn unsynced_renames_deletes_and_directories_are_undone() {
        let root = tempfile::tempdir().expect("tempdir");
        let fs = FaultFs::new();
        let (old, new, gone) = (
            root.path().join("old"),
            root.path().join("new"),
            root.path().join("gone"),
        );
        write(&fs, &old, b"old content", true);
        write(&fs, &new, b"replaced content", true);
        write(&fs, &gone, b"deleted content", true);
        fs.sync_dir(root.path()).expect("sync root");
        fs.rename(&old, &new).expect("rename");
        fs.delete(&gone).expect("delete");
        let sub = root.path().join("d1/d2");
        fs.create_dir_all(&sub).expect("mkdir");
        write(&fs, &sub.join("f"), b"in a new directory", true);
        fs.sync_dir(&sub).expect("sync d2 (not its parents)");
        fs.power_cut();
        fs.restore_power();
        assert_eq!(std::fs::read(&old).expect("old"), b"old content");
        assert_eq!(std::fs::read(&new).expect("new"), b"replaced content");
        assert_eq!(std::fs::read(&gone).expect("gone"), b"deleted content");
        assert!(
            !root.path().join("d1").exists(),
            "a directory whose parent was never synced is gone"
        );
    }

    #[test]
    fn synced_directories_keep_their_changes() {
        let root = tempfile::tempdir().expect("tempdir");
        let fs = FaultFs::new();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        write(&fs, &a, b"content", true);
        let sub = root.path().join("d1/d2");
        super::super::create_dir_durable(&fs, &sub).expect("durable mkdir");
        fs.rename(&a, &b).expect("rename");
        fs.sync_dir(root.path()).expect("sync root");
        fs.power_cut();
        fs.restore_power();
        assert!(!a.exists());
        assert_eq!(std::fs::read(&b).expect("b"), b"content");
        assert!(sub.is_dir(), "create_dir_durable synced every new level");
    }

    #[test]
    fn scheduled_cut_fires_after_n_ops() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultFs::new();
        fs.cut_after(2);
        let p = dir.path().join("f");
        let mut f = fs.create(&p).expect("op 1");
        f.append(b"abc").expect("buffered, not an op");
        f.flush().expect("op 2");
        assert!(f.sync().is_err(), "op 3 hits the cut");
        assert!(fs.is_dead());
    }

    #[test]
    fn a_full_disk_cuts_writes_short_and_refuses_creates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultFs::new();
        let p = dir.path().join("f");
        let mut f = fs.create(&p).expect("create");
        fs.set_free_space(Some(4));
        f.append(b"abcdefgh").expect("append");
        let err = f.flush().expect_err("no space");
        assert!(err.to_string().contains("No space left"), "{err}");
        assert_eq!(std::fs::read(&p).expect("read"), b"abcd");
        assert!(fs.create(&dir.path().join("g")).is_err());
        fs.set_free_space(None);
        f.flush().expect("the rest fits once space returns");
        assert_eq!(std::fs::read(&p).expect("read"), b"abcdefgh");
        assert_eq!(fs.injected_errors(), 2);
    }

    #[test]
    fn a_syncer_covers_what_was_written_before_it_began() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultFs::new();
        let p = dir.path().join("f");
        let mut f = fs.create(&p).expect("create");
        fs.sync_dir(dir.path()).expect("sync dir");
        let syncer = f.syncer().expect("syncer");
        f.append(b"first").expect("append");
        f.flush().expect("flush");
        syncer.sync().expect("sync");
        f.append(b" second").expect("append");
        f.flush().expect("flush");
        fs.fail_syncs(1);
        assert!(syncer.sync().is_err(), "injected EIO");
        fs.power_cut();
        drop(f);
        fs.restore_power();
        assert_eq!(std::fs::read(&p).expect("read"), b"first");
    }
}
