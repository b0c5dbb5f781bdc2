//! A [`FileSystem`] that can lose power, for tests.
//!
//! Files live on the local disk; the wrapper remembers how much of each file has been synced
//! and which files were created since their directory was last synced. [`FaultFs::power_cut`]
//! throws away everything a real power cut would: unsynced tails are truncated and unsynced new
//! files deleted (the model of LevelDB's fault-injection test). After a cut every operation fails
//! until [`FaultFs::restore_power`], so code still running cannot write "after the crash".
//! [`FaultFs::cut_after`] schedules the cut after a number of mutating operations, so a test can
//! land it in the middle of a flush or a compaction.

use super::{FileSystem, LocalFs, RandomAccessFile, WritableFile};
use cellar_model::{Error, Result};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Default)]
struct State {
    /// Durable length of every file written through this file system.
    synced_len: HashMap<PathBuf, u64>,
    /// Files whose directory entry is not yet durable.
    unsynced_new: HashSet<PathBuf>,
    dead: bool,
    /// Mutating operations left before an automatic power cut.
    ops_until_cut: Option<u64>,
    cuts: u64,
}

/// Local disk with simulated power loss. Cheap to clone; clones share state.
#[derive(Clone, Default)]
pub struct FaultFs {
    state: Arc<Mutex<State>>,
}

fn dead_err(path: &Path) -> Error {
    Error::io(path.display(), io::Error::other("simulated power loss"))
}

impl FaultFs {
    pub fn new() -> FaultFs {
        FaultFs::default()
    }

    /// Loses everything not synced, then fails every operation until power is restored.
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
        for path in st.unsynced_new.drain() {
            let _ = std::fs::remove_file(&path);
            st.synced_len.remove(&path);
        }
        for (path, len) in &st.synced_len {
            if let Ok(f) = OpenOptions::new().write(true).open(path) {
                let _ = f.set_len(*len);
            }
        }
    }

    /// Schedules a power cut after `ops` more mutating operations (appends that reach the OS,
    /// syncs, creates, renames, deletes).
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

    /// Counts one mutating operation; fails if the power is (or just went) out.
    fn tick(&self, path: &Path) -> Result<parking_lot::MutexGuard<'_, State>> {
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

    fn check_alive(&self, path: &Path) -> Result<()> {
        if self.state.lock().dead {
            return Err(dead_err(path));
        }
        Ok(())
    }
}

struct FaultWritable {
    fs: FaultFs,
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    /// Bytes handed to the OS.
    written: u64,
}

impl FaultWritable {
    fn write_out(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let _st = self.fs.tick(&self.path)?;
        self.file
            .write_all(&self.buf)
            .map_err(|e| Error::io(self.path.display(), e))?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
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
        let mut st = self.fs.tick(&self.path)?;
        self.file
            .sync_data()
            .map_err(|e| Error::io(self.path.display(), e))?;
        st.synced_len.insert(self.path.clone(), self.written);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    fn path(&self) -> &Path {
        &self.path
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
        let mut st = self.tick(path)?;
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(path.display(), e))?;
        st.synced_len.insert(path.to_path_buf(), 0);
        st.unsynced_new.insert(path.to_path_buf());
        Ok(Box::new(FaultWritable {
            fs: self.clone(),
            path: path.to_path_buf(),
            file,
            buf: Vec::new(),
            written: 0,
        }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.check_alive(path)?;
        LocalFs.open(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.tick(from)?;
        LocalFs.rename(from, to)?;
        if let Some(len) = st.synced_len.remove(from) {
            st.synced_len.insert(to.to_path_buf(), len);
        }
        // The new name is not durable until its directory is synced; model it as a new file
        // (the old name's content is already gone from the namespace).
        st.unsynced_new.remove(from);
        st.unsynced_new.insert(to.to_path_buf());
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.check_alive(dir)?;
        LocalFs.list(dir)
    }

    fn delete(&self, path: &Path) -> Result<()> {
        let mut st = self.tick(path)?;
        st.synced_len.remove(path);
        st.unsynced_new.remove(path);
        LocalFs.delete(path)
    }

    fn delete_dir_all(&self, dir: &Path) -> Result<()> {
        let mut st = self.tick(dir)?;
        st.synced_len.retain(|p, _| !p.starts_with(dir));
        st.unsynced_new.retain(|p| !p.starts_with(dir));
        LocalFs.delete_dir_all(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        // Directory creation is treated as durable: the tests aim at file data and names.
        let _st = self.tick(dir)?;
        LocalFs.create_dir_all(dir)
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
        let mut st = self.tick(dir)?;
        st.unsynced_new.retain(|p| p.parent() != Some(dir));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
