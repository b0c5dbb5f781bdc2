//! Files a server reads for a caller: the HFiles of a bulk load (`region_server/bulk_load.rs`,
//! HBase's `BulkLoadHFile`, `cellar import-hbase`) and of a bulk load replicated by HBase
//! (`hbase/admin_service/replicated_bulk_load.rs`). They may be only under the server's
//! `bulk_load.dirs`, each either a local directory or an HDFS one (`hdfs://HOST:PORT/DIR`), so
//! where a caller may point the server is a boundary, checked here and nowhere else:
//!
//! - a local path (or `file:` URL) is checked as written, with `.` and `..` resolved, before the
//!   file system is asked anything (whether a path outside exists is not the caller's to
//!   learn), and again with its symbolic links resolved (a link inside may point anywhere);
//! - an HDFS URL must name the same NameNode as an allowed directory and lie under it; a `.` or
//!   `..` component is refused outright (HDFS itself rejects such names), and HDFS resolves no
//!   symbolic links unless a cluster turns them on for testing, so the path as written is the
//!   path read.
//!
//! One HDFS client per NameNode is made on first use and kept.

use cellar_hfile::snapshot::{Files, Opened};
use cellar_hfile::{HFile, Source};
use cellar_storage::fs::{FileSystem, HdfsFs, RandomAccessFile};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where a found file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// On this server's disk: the path with its links resolved.
    Local(PathBuf),
    /// On HDFS: the NameNode (`host:port`) and the path.
    Hdfs { namenode: String, path: PathBuf },
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::Hdfs { namenode, path } => write!(f, "hdfs://{namenode}{}", path.display()),
        }
    }
}

/// A file found under the allowed directories, and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub location: Location,
    pub size: u64,
}

/// Why a file is not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The path is not under an allowed directory (or is not a path this checks).
    NotAllowed,
    /// Allowed, but reading it failed (a NameNode that does not answer, a permission).
    Io(String),
}

/// The allowed directories, and the HDFS clients made for them.
pub struct BulkFiles {
    dirs: Vec<PathBuf>,
    hdfs: Mutex<HashMap<String, Arc<HdfsFs>>>,
}

impl BulkFiles {
    /// `dirs`: the server's `bulk_load.dirs`.
    pub fn new(dirs: &[PathBuf]) -> BulkFiles {
        BulkFiles {
            dirs: dirs.to_vec(),
            hdfs: Mutex::new(HashMap::new()),
        }
    }

    /// Whether bulk load is off (no directory configured).
    pub fn is_off(&self) -> bool {
        self.dirs.is_empty()
    }

    /// `given` (an absolute path, a `file:` URL as Hadoop writes one, or an `hdfs://` URL),
    /// checked against the allowed directories and looked up: `Ok(None)` when no file is there.
    pub fn find(&self, given: &str) -> Result<Option<Found>, Refusal> {
        if let Some(rest) = given.strip_prefix("hdfs://") {
            return self.find_hdfs(rest);
        }
        let raw = given
            .strip_prefix("file://")
            .or_else(|| given.strip_prefix("file:"))
            .unwrap_or(given);
        if !Path::new(raw).is_absolute() || raw.contains("://") {
            return Err(Refusal::NotAllowed);
        }
        let candidate = lexical(Path::new(raw));
        let real_dirs: Vec<PathBuf> = self
            .local_dirs()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .collect();
        let as_written = self
            .local_dirs()
            .map(|d| lexical(d))
            .chain(real_dirs.iter().cloned())
            .any(|d| candidate.starts_with(d));
        if !as_written {
            return Err(Refusal::NotAllowed);
        }
        let real = match std::fs::canonicalize(&candidate) {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Refusal::Io(format!("{}: {e}", candidate.display()))),
        };
        if !real_dirs.iter().any(|d| real.starts_with(d)) {
            return Err(Refusal::NotAllowed);
        }
        let meta = std::fs::metadata(&real)
            .map_err(|e| Refusal::Io(format!("{}: {e}", candidate.display())))?;
        if !meta.is_file() {
            return Err(Refusal::NotAllowed);
        }
        Ok(Some(Found {
            location: Location::Local(real),
            size: meta.len(),
        }))
    }

    /// Opens a found file as an HFile (its trailer and file info read).
    pub fn open_hfile(&self, found: &Found) -> Result<HFile, cellar_hfile::Error> {
        match &found.location {
            Location::Local(path) => HFile::open(path),
            Location::Hdfs { namenode, path } => {
                let name = PathBuf::from(found.location.to_string());
                let io = |e: String| cellar_hfile::Error::Io {
                    path: name.clone(),
                    source: std::io::Error::other(e),
                };
                let fs = self.hdfs_client(namenode).map_err(io)?;
                let file = fs.open(path).map_err(|e| io(e.to_string()))?;
                let size = file.len();
                HFile::from_source(name, Box::new(FsSource(file)), size)
            }
        }
    }

    fn local_dirs(&self) -> impl Iterator<Item = &PathBuf> {
        self.dirs.iter().filter(|d| d.is_absolute())
    }

    /// `rest`: an HDFS URL without its scheme, `host:port/path`.
    fn find_hdfs(&self, rest: &str) -> Result<Option<Found>, Refusal> {
        let (namenode, path) = split_hdfs(rest).ok_or(Refusal::NotAllowed)?;
        let allowed = self.dirs.iter().any(|d| {
            d.to_str()
                .and_then(|d| d.strip_prefix("hdfs://"))
                .and_then(split_hdfs)
                .is_some_and(|(nn, dir)| {
                    nn.eq_ignore_ascii_case(&namenode) && path.starts_with(dir)
                })
        });
        if !allowed {
            return Err(Refusal::NotAllowed);
        }
        let fs = self.hdfs_client(&namenode).map_err(Refusal::Io)?;
        match fs.open(&path) {
            Ok(file) => Ok(Some(Found {
                size: file.len(),
                location: Location::Hdfs { namenode, path },
            })),
            // A directory is "not a file" to the NameNode, which is what a missing file is too.
            Err(cellar_model::Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(None)
            }
            Err(e) => Err(Refusal::Io(e.to_string())),
        }
    }

    fn hdfs_client(&self, namenode: &str) -> Result<Arc<HdfsFs>, String> {
        let key = namenode.to_ascii_lowercase();
        if let Some(fs) = lock(&self.hdfs).get(&key) {
            return Ok(Arc::clone(fs));
        }
        // Connected outside the lock: a NameNode that does not answer holds up only its own
        // callers.
        let fs =
            Arc::new(HdfsFs::connect(&format!("hdfs://{namenode}")).map_err(|e| e.to_string())?);
        Ok(Arc::clone(lock(&self.hdfs).entry(key).or_insert(fs)))
    }
}

/// Why a file of an HBase MOB family is refused: its reference cells' values are the names of
/// files in HBase's `mobdir`, which are not read here.
pub fn mob_reference(row: &[u8]) -> String {
    format!(
        "a MOB reference cell (row '{}'): the file is from a MOB family, whose values are in \
         HBase's MOB files, which Cellar does not load; move them into the store files on HBase \
         first (MOB_THRESHOLD above the largest value, a major compaction, then IS_MOB => \
         false; docs/migration.md)",
        row.escape_ascii()
    )
}

/// `host:port/path` split into the NameNode and an absolute path without `.` or `..`.
fn split_hdfs(rest: &str) -> Option<(String, PathBuf)> {
    let (namenode, path) = match rest.find('/') {
        Some(i) => (rest.get(..i)?, rest.get(i..)?),
        None => (rest, "/"),
    };
    if namenode.is_empty() || namenode.contains(['@', '?', '#']) {
        return None;
    }
    // Segments as written: `Path::components` would drop a `.` in the middle unseen.
    if path.split('/').any(|c| c == "." || c == "..") {
        return None;
    }
    Some((namenode.to_string(), Path::new(path).components().collect()))
}

/// `path` with `.` and `..` resolved as written (no link followed).
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An HFile's bytes read through a Cellar file system.
pub struct FsSource(pub Arc<dyn RandomAccessFile>);

impl Source for FsSource {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let bytes = self
            .0
            .read_at(offset, buf.len())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        buf.copy_from_slice(&bytes);
        Ok(())
    }
}

/// A Cellar file system as the snapshot reader's [`Files`] (`cellar import-hbase` reads an
/// HBase root on HDFS through it).
pub struct FsFiles(pub Arc<dyn FileSystem>);

impl Files for FsFiles {
    fn open(&self, path: &Path) -> Result<Option<Opened>, String> {
        match self.0.open(path) {
            Ok(file) => {
                let len = file.len();
                Ok(Some((Box::new(FsSource(file)), len)))
            }
            Err(cellar_model::Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(None)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    fn exists(&self, path: &Path) -> Result<bool, String> {
        self.0.exists(path).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdfs_urls_must_name_an_allowed_namenode_and_directory() {
        let files = BulkFiles::new(&[PathBuf::from("hdfs://nn.example:8020/hbase/root")]);
        for given in [
            "hdfs://other:8020/hbase/root/data/f",
            "hdfs://nn.example:9000/hbase/root/data/f",
            "hdfs://nn.example:8020/hbase/rootx/f",
            "hdfs://nn.example:8020/hbase/root/../secret",
            "hdfs://nn.example:8020/hbase/root/./f",
            "hdfs://nn.example:8020/etc/passwd",
            "hdfs://user@nn.example:8020/hbase/root/f",
            "/hbase/root/data/f",
            "relative/path",
        ] {
            assert_eq!(files.find(given), Err(Refusal::NotAllowed), "{given}");
        }
    }

    #[test]
    fn local_paths_are_checked_as_written_and_with_links_resolved() {
        let tmp = tempfile::tempdir().expect("tmp");
        let allowed = tmp.path().join("allowed");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&allowed).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(allowed.join("f"), b"12345").expect("write");
        std::fs::write(outside.join("secret"), b"x").expect("write");
        std::os::unix::fs::symlink(outside.join("secret"), allowed.join("link")).expect("link");
        let files = BulkFiles::new(std::slice::from_ref(&allowed));
        let found = files
            .find(&allowed.join("f").display().to_string())
            .expect("allowed")
            .expect("there");
        assert_eq!(found.size, 5);
        let url = format!("file://{}", allowed.join("f").display());
        assert!(files.find(&url).expect("allowed").is_some());
        assert_eq!(
            files.find(&allowed.join("missing").display().to_string()),
            Ok(None)
        );
        for given in [
            allowed.join("link"),
            allowed.join("../outside/secret"),
            outside.join("secret"),
            outside.join("missing"),
            allowed.clone(),
        ] {
            assert_eq!(
                files.find(&given.display().to_string()),
                Err(Refusal::NotAllowed),
                "{}",
                given.display()
            );
        }
        assert!(BulkFiles::new(&[]).is_off());
    }
}
