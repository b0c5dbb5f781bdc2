//! [`FileSystem`] on HDFS, through `hdfs-native` (a pure-Rust client: no JVM, no libhdfs).
//!
//! The client is async; it runs on a small runtime this file system owns, and every call
//! waits for its answer with a deadline ([`crate::deadline_wait::wait_on`]), so it works from any
//! thread and a dead NameNode is an error naming it, never a hang.
//!
//! Durability: HDFS has one durability point for a file being written, `hsync` (the DataNodes
//! of the pipeline persist what they have, the NameNode learns the length; readers then see
//! it). There is no cheaper hflush in this client, so [`WritableFile::flush`] (SYNC_WAL) and
//! [`WritableFile::sync`] (FSYNC_WAL) both hsync; a second hsync with nothing written since is
//! skipped. A reader sees a file's bytes once the file is closed, or once its lease was
//! recovered after its writer died ([`HdfsFs::recover_lease`]); a reader of a file still
//! open may see only its completed blocks. Namespace operations (create, rename, delete, mkdir) are durable when they
//! return: the NameNode logs them before answering, so [`FileSystem::sync_dir`] has nothing
//! to do. `truncate` rewrites the prefix into a new file and renames it over the old one.
//!
//! Creates: [`FileSystem::create`] makes missing parents; [`FileSystem::create_in_existing_dir`]
//! (WAL segments) asks the NameNode not to, so a create in a directory a master moved away
//! fails instead of bringing it back.
//!
//! Locks: HDFS has no advisory locks. [`FileSystem::lock`] creates the lock file exclusively
//! and keeps it open: the holder's HDFS lease is the lock. A lock file left by a holder that
//! closed it is taken over; while its holder still holds its lease (alive, or dead for less
//! than HDFS's lease soft limit, 60 s) the caller waits, up to 75 s, then is refused.

use super::{FileSyncer, FileSystem, LockGuard, RandomAccessFile, WritableFile};
use crate::deadline_wait::{wait_on, Waited};
use bytes::Bytes;
use cellar_model::{Error, Result};
use hdfs_native::file::{FileReader, FileWriter};
use hdfs_native::{Client, ClientBuilder, HdfsError, WriteOptions};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex as AsyncMutex;

/// Bytes buffered before they are handed to the write pipeline (without an hsync), unless
/// [`HdfsFs::with_write_buffer`] says otherwise. `scripts/bench-hdfs.sh --sweep` measures
/// WAL and flush throughput by this size and the NameNode's packet size
/// (`docs/benchmarks.md`).
pub const DEFAULT_WRITE_BUFFER: usize = 1024 * 1024;
/// How long one call may take: a DataNode failure makes the client rebuild its pipeline,
/// which takes seconds.
const CALL_LIMIT: Duration = Duration::from_secs(60);
/// How long an hsync may take. A DataNode that dies while the client waits for a sync's
/// acknowledgement can leave the client's pipeline recovery waiting for a packet that never
/// comes (hdfs-native 0.14: its packet sender only notices a dead connection when it next
/// sends); past this the sync fails, the WAL rolls to a new file on the DataNodes left, and
/// writes go on. A healthy hsync takes milliseconds.
const SYNC_LIMIT: Duration = Duration::from_secs(10);
/// How long connecting may take before it is an error (the client retries a refused
/// connection for longer than that).
const CONNECT_LIMIT: Duration = Duration::from_secs(10);
/// How long taking a lock waits for a crashed holder's lease to lapse (HDFS's soft limit is
/// 60 s, then the NameNode recovers the file).
const LOCK_WAIT: Duration = Duration::from_secs(75);
/// How long taking over a file a crashed writer left open may take (block recovery on the
/// DataNodes).
const RECOVER_WAIT: Duration = Duration::from_secs(60);

/// Client settings. When a DataNode of a write pipeline dies and no spare one can replace it
/// (a small cluster), the write goes on with the DataNodes left instead of failing: a WAL
/// that stops is an outage, one replica short is not (HBase's advice for small clusters).
const CLIENT_CONFIG: [(&str, &str); 1] = [(
    "dfs.client.block.write.replace-datanode-on-failure.best-effort",
    "true",
)];

struct Inner {
    url: String,
    client: Client,
    runtime: tokio::runtime::Runtime,
}

impl Inner {
    /// Runs one request on the client's runtime; errors name `path`.
    fn call<T, Fut>(&self, path: &Path, what: &str, fut: Fut) -> Result<T>
    where
        T: Send + 'static,
        Fut: Future<Output = std::result::Result<T, HdfsError>> + Send + 'static,
    {
        self.call_within(CALL_LIMIT, path, what, fut)
    }

    /// [`Inner::call`] with its own deadline.
    fn call_within<T, Fut>(&self, limit: Duration, path: &Path, what: &str, fut: Fut) -> Result<T>
    where
        T: Send + 'static,
        Fut: Future<Output = std::result::Result<T, HdfsError>> + Send + 'static,
    {
        match wait_on(self.runtime.handle(), limit, fut) {
            Ok(v) => Ok(v),
            Err(Waited::TimedOut) => Err(Error::io(
                self.name(path),
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("HDFS did not answer {what} within {} s", limit.as_secs()),
                ),
            )),
            Err(Waited::Failed(e)) => Err(hdfs_err(&self.name(path), what, e)),
        }
    }

    /// `hdfs://host:port/path` for messages.
    fn name(&self, path: &Path) -> String {
        format!("{}{}", self.url.trim_end_matches('/'), path.display())
    }
}

fn hdfs_err(name: &str, what: &str, e: HdfsError) -> Error {
    let kind = match &e {
        HdfsError::FileNotFound(_) => io::ErrorKind::NotFound,
        // The NameNode's own answer for a missing path (a create whose parent is gone).
        HdfsError::RPCError(class, _) if class == "java.io.FileNotFoundException" => {
            io::ErrorKind::NotFound
        }
        HdfsError::AlreadyExists(_) => io::ErrorKind::AlreadyExists,
        HdfsError::IOError(io) => io.kind(),
        _ => io::ErrorKind::Other,
    };
    Error::io(name, io::Error::new(kind, format!("{what}: {e}")))
}

fn utf8(path: &Path) -> Result<String> {
    path.to_str().map(str::to_string).ok_or_else(|| {
        Error::io(
            path.display(),
            io::Error::new(io::ErrorKind::InvalidInput, "HDFS paths must be UTF-8"),
        )
    })
}

/// HDFS, reached at a NameNode URL (`hdfs://host:port`).
pub struct HdfsFs {
    inner: Arc<Inner>,
    lock_wait: Duration,
    write_buffer: usize,
}

impl HdfsFs {
    /// Connects to the NameNode at `url` and checks that it answers.
    pub fn connect(url: &str) -> Result<HdfsFs> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("cellar-hdfs")
            .enable_all()
            .build()
            .map_err(|e| Error::io(url, e))?;
        let client = ClientBuilder::new()
            .with_url(url)
            .with_config(CLIENT_CONFIG)
            .with_io_runtime(runtime.handle().clone())
            .build()
            .map_err(|e| hdfs_err(url, "connecting", e))?;
        let fs = HdfsFs {
            inner: Arc::new(Inner {
                url: url.to_string(),
                client,
                runtime,
            }),
            lock_wait: LOCK_WAIT,
            write_buffer: DEFAULT_WRITE_BUFFER,
        };
        let c = fs.inner.client.clone();
        let reached = wait_on(fs.inner.runtime.handle(), CONNECT_LIMIT, async move {
            c.get_file_info("/").await.map(|_| ())
        });
        match reached {
            Ok(()) => Ok(fs),
            Err(Waited::TimedOut) => Err(Error::io(
                url,
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the NameNode did not answer within {} s",
                        CONNECT_LIMIT.as_secs()
                    ),
                ),
            )),
            Err(Waited::Failed(e)) => Err(hdfs_err(url, "reaching the NameNode", e)),
        }
    }

    /// How long [`FileSystem::lock`] waits for a held lease to lapse (75 s by default).
    pub fn with_lock_wait(mut self, wait: Duration) -> HdfsFs {
        self.lock_wait = wait;
        self
    }

    /// Bytes a writer buffers before handing them to the write pipeline (an hsync hands
    /// over whatever is buffered). At least 4 KiB.
    pub fn with_write_buffer(mut self, bytes: usize) -> HdfsFs {
        self.write_buffer = bytes.max(4096);
        self
    }

    /// Shared handle.
    pub fn shared(url: &str) -> Result<super::FsRef> {
        Ok(Arc::new(HdfsFs::connect(url)?))
    }

    /// Takes over the file a dead writer left open: HDFS closes it at the length its
    /// DataNodes agree on, and the old writer can no longer append. True once closed (the
    /// NameNode may need a moment: call again until true).
    pub fn recover_lease(&self, path: &Path) -> Result<bool> {
        let (c, p) = (self.inner.client.clone(), utf8(path)?);
        self.inner.call(path, "recovering the lease", async move {
            c.recover_lease(&p).await
        })
    }

    /// Creates `path`; with `parents`, its missing parent directories too. Without, the
    /// NameNode refuses the create if the parent is missing, in the same request that would
    /// create the file: no rename of the parent can come between the check and the create.
    fn create_with(&self, path: &Path, overwrite: bool, parents: bool) -> Result<HdfsWritable> {
        let (c, p) = (self.inner.client.clone(), utf8(path)?);
        let writer = self.inner.call(path, "creating", async move {
            let options = WriteOptions::default()
                .overwrite(overwrite)
                .create_parent(parents);
            c.create(&p, options).await
        })?;
        Ok(HdfsWritable::new(self, path, writer))
    }
}

/// A file being written: appends are buffered here, handed to the pipeline when the buffer
/// fills or on flush.
struct HdfsWritable {
    inner: Arc<Inner>,
    path: PathBuf,
    writer: Arc<AsyncMutex<FileWriter>>,
    buf: Vec<u8>,
    /// Buffered bytes that make the writer push them to the pipeline.
    buffer_limit: usize,
    len: u64,
    progress: Arc<Progress>,
}

/// Bytes handed to the pipeline, and how many of them an hsync has made durable.
#[derive(Default)]
struct Progress {
    written: AtomicU64,
    synced: AtomicU64,
}

impl HdfsWritable {
    fn new(fs: &HdfsFs, path: &Path, writer: FileWriter) -> HdfsWritable {
        HdfsWritable {
            inner: Arc::clone(&fs.inner),
            path: path.to_path_buf(),
            writer: Arc::new(AsyncMutex::new(writer)),
            buf: Vec::new(),
            buffer_limit: fs.write_buffer,
            len: 0,
            progress: Arc::new(Progress::default()),
        }
    }

    /// Hands the buffer to the pipeline (no durability point).
    fn push(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let data = Bytes::from(std::mem::take(&mut self.buf));
        let n = data.len() as u64;
        let w = Arc::clone(&self.writer);
        self.inner.call(&self.path, "writing", async move {
            w.lock().await.write_bytes(data).await.map(|_| ())
        })?;
        self.progress.written.fetch_add(n, Ordering::AcqRel);
        Ok(())
    }
}

/// hsync unless every byte written is synced already.
fn hsync(
    inner: &Inner,
    path: &Path,
    writer: &Arc<AsyncMutex<FileWriter>>,
    p: &Progress,
) -> Result<()> {
    let target = p.written.load(Ordering::Acquire);
    if p.synced.load(Ordering::Acquire) >= target {
        return Ok(());
    }
    let w = Arc::clone(writer);
    inner.call_within(SYNC_LIMIT, path, "hsync", async move {
        w.lock().await.hsync().await
    })?;
    p.synced.fetch_max(target, Ordering::AcqRel);
    Ok(())
}

impl WritableFile for HdfsWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        self.buf.extend_from_slice(data);
        if self.buf.len() >= self.buffer_limit {
            self.push()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.push()?;
        hsync(&self.inner, &self.path, &self.writer, &self.progress)
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn discard_buffer(&mut self) {
        self.len -= self.buf.len() as u64;
        self.buf.clear();
    }

    fn syncer(&self) -> Result<Arc<dyn FileSyncer>> {
        Ok(Arc::new(HdfsSyncer {
            inner: Arc::clone(&self.inner),
            path: self.path.clone(),
            writer: Arc::clone(&self.writer),
            progress: Arc::clone(&self.progress),
        }))
    }
}

impl Drop for HdfsWritable {
    /// Closes the file (HDFS completes it: its length is final, its lease released). A caller
    /// that needed the bytes durable has synced them.
    fn drop(&mut self) {
        let pushed = self.push();
        let w = Arc::clone(&self.writer);
        let closed = self.inner.call(&self.path, "closing", async move {
            w.lock().await.close().await
        });
        if let Err(e) = pushed.and(closed) {
            tracing::warn!(error = %e, "closing an HDFS file");
        }
    }
}

struct HdfsSyncer {
    inner: Arc<Inner>,
    path: PathBuf,
    writer: Arc<AsyncMutex<FileWriter>>,
    progress: Arc<Progress>,
}

impl FileSyncer for HdfsSyncer {
    fn sync(&self) -> Result<()> {
        hsync(&self.inner, &self.path, &self.writer, &self.progress)
    }
}

/// How long a read goes on retrying after it failed on every DataNode it knew (HDFS's own
/// client waits a few seconds per retry, `dfs.client.retry.window.base`, for three tries).
const READ_RETRY_WINDOW: Duration = Duration::from_secs(15);
/// The first wait before such a retry; each next one is twice as long, up to
/// [`READ_RETRY_MAX_WAIT`].
const READ_RETRY_FIRST_WAIT: Duration = Duration::from_millis(200);
const READ_RETRY_MAX_WAIT: Duration = Duration::from_secs(2);

struct HdfsReader {
    inner: Arc<Inner>,
    path: PathBuf,
    /// The open file and the block locations it was given. A read that fails on every replica
    /// it knows replaces it with a fresh open.
    reader: parking_lot::RwLock<Arc<FileReader>>,
    len: u64,
}

/// Whether a read error may go away with fresh block locations: a DataNode that died (or a
/// replica moved, or a block's generation changed under a file that was being recovered), as
/// HDFS's `DFSInputStream` retries them. Errors of the file itself are not retried.
fn retry_read_after(e: &HdfsError) -> bool {
    matches!(
        e,
        HdfsError::DataTransferError(_)
            | HdfsError::IOError(_)
            | HdfsError::BlocksNotFound(_)
            | HdfsError::ChecksumError
    )
}

impl RandomAccessFile for HdfsReader {
    /// Reads through the replicas the file's block locations name; when every one fails (a
    /// DataNode died, its replica was moved), opens the file again for fresh locations and
    /// tries again after a wait that doubles, for at most [`READ_RETRY_WINDOW`] — as HDFS's
    /// own client marks the nodes dead, fetches the block's locations again and tries the
    /// other replicas.
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        super::check_read(self.inner.name(&self.path), offset, len, self.len)?;
        let offset = usize::try_from(offset).map_err(|_| {
            Error::corruption(self.inner.name(&self.path), offset, "offset out of range")
        })?;
        let r = Arc::clone(&self.reader.read());
        let client = self.inner.client.clone();
        let path = utf8(&self.path)?;
        let (bytes, reopened) = self.inner.call(&self.path, "reading", async move {
            let started = tokio::time::Instant::now();
            let mut reader = r;
            let mut reopened = None;
            let mut wait = READ_RETRY_FIRST_WAIT;
            loop {
                match reader.read_range(offset, len).await {
                    Ok(bytes) => return Ok((bytes, reopened)),
                    Err(e) if retry_read_after(&e) && started.elapsed() + wait < READ_RETRY_WINDOW => {
                        tracing::warn!(path = %path, offset, error = %e, wait_ms = wait.as_millis() as u64, "HDFS read failed on every DataNode it knew; fetching the block locations again");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(READ_RETRY_MAX_WAIT);
                        // A failed open is retried the same way, within the window.
                        match client.read(&path).await {
                            Ok(fresh) => {
                                let fresh = Arc::new(fresh);
                                reader = Arc::clone(&fresh);
                                reopened = Some(fresh);
                            }
                            Err(e) if retry_read_after(&e) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        })?;
        if let Some(fresh) = reopened {
            *self.reader.write() = fresh;
        }
        Ok(bytes)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// The lock file, open for as long as the lock is held.
struct HdfsLock {
    _file: HdfsWritable,
}

impl FileSystem for HdfsFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(self.create_with(path, true, true)?))
    }

    fn create_in_existing_dir(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(self.create_with(path, true, false)?))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let (c, p) = (self.inner.client.clone(), utf8(path)?);
        let reader = self
            .inner
            .call(path, "opening", async move { c.read(&p).await })?;
        let len = reader.file_length() as u64;
        Ok(Arc::new(HdfsReader {
            inner: Arc::clone(&self.inner),
            path: path.to_path_buf(),
            reader: parking_lot::RwLock::new(Arc::new(reader)),
            len,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (c, f, t) = (self.inner.client.clone(), utf8(from)?, utf8(to)?);
        self.inner.call(
            from,
            "renaming",
            async move { c.rename(&f, &t, true).await },
        )
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let (c, p) = (self.inner.client.clone(), utf8(dir)?);
        let statuses = self.inner.call(
            dir,
            "listing",
            async move { c.list_status(&p, false).await },
        )?;
        let mut names: Vec<String> = statuses
            .into_iter()
            .filter_map(|s| s.path.rsplit('/').next().map(str::to_string))
            .filter(|n| !n.is_empty())
            .collect();
        names.sort();
        Ok(names)
    }

    fn delete(&self, path: &Path) -> Result<()> {
        let (c, p) = (self.inner.client.clone(), utf8(path)?);
        let deleted =
            self.inner
                .call(path, "deleting", async move { c.delete(&p, false).await })?;
        if deleted {
            Ok(())
        } else {
            Err(Error::io(
                self.inner.name(path),
                io::Error::new(io::ErrorKind::NotFound, "deleting: no such file"),
            ))
        }
    }

    fn delete_dir_all(&self, dir: &Path) -> Result<()> {
        let (c, p) = (self.inner.client.clone(), utf8(dir)?);
        self.inner.call(dir, "deleting", async move {
            match c.delete(&p, true).await {
                Ok(_) | Err(HdfsError::FileNotFound(_)) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let (c, p) = (self.inner.client.clone(), utf8(dir)?);
        self.inner.call(dir, "creating the directory", async move {
            c.mkdirs(&p, 0o755, true).await
        })
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let (c, p) = (self.inner.client.clone(), utf8(path)?);
        self.inner.call(path, "looking up", async move {
            match c.get_file_info(&p).await {
                Ok(_) => Ok(true),
                Err(HdfsError::FileNotFound(_)) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        // A file still being written (the WAL cuts back its own segment after a failed write)
        // shows readers only its completed blocks: close it through lease recovery first, so
        // that every byte an hsync made durable is read and kept.
        self.recover(path)?;
        let file = self.open(path)?;
        let len = len.min(file.len());
        let keep = file.read_at(0, usize::try_from(len).unwrap_or(usize::MAX))?;
        drop(file);
        let tmp = super::tmp_path(path);
        // Next to the file, which is there: a directory moved away meanwhile is not remade.
        let mut out = self.create_with(&tmp, true, false)?;
        out.append(&keep)?;
        out.sync()?;
        drop(out);
        self.rename(&tmp, path)
    }

    fn truncate_replaces_file(&self) -> bool {
        true
    }

    fn fences_writers(&self) -> bool {
        true
    }

    fn recover(&self, path: &Path) -> Result<()> {
        let deadline = std::time::Instant::now() + RECOVER_WAIT;
        while !self.recover_lease(path)? {
            if std::time::Instant::now() >= deadline {
                return Err(Error::io(
                    self.inner.name(path),
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "lease recovery did not finish within {} s",
                            RECOVER_WAIT.as_secs()
                        ),
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        // The NameNode logs every namespace change before it answers.
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<LockGuard> {
        match self.create_with(path, false, true) {
            Ok(file) => return Ok(Box::new(HdfsLock { _file: file })),
            Err(e) if e.io_kind() != Some(io::ErrorKind::AlreadyExists) => return Err(e),
            Err(_) => {}
        }
        // The file exists: its holder may have closed it (then appending takes it over) or
        // still hold its lease (then appending is refused). A holder that died keeps its
        // lease until the soft limit passes and the NameNode recovers it: wait that long.
        let p = utf8(path)?;
        let deadline = std::time::Instant::now() + self.lock_wait;
        let mut waited = false;
        let last = loop {
            let (c, p) = (self.inner.client.clone(), p.clone());
            match self
                .inner
                .call(path, "locking", async move { c.append(&p).await })
            {
                Ok(writer) => {
                    return Ok(Box::new(HdfsLock {
                        _file: HdfsWritable::new(self, path, writer),
                    }))
                }
                Err(e) if std::time::Instant::now() >= deadline => break e,
                Err(e) => {
                    if !waited {
                        tracing::warn!(lock = %self.inner.name(path), error = %e,
                            "the lock file's HDFS lease is held; waiting up to {} s for it to lapse \
                             (a crashed holder's lease is recovered by the NameNode)",
                            self.lock_wait.as_secs());
                        waited = true;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        };
        {
            let e = last;
            Err(Error::io(
                self.inner.name(path),
                io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "locked by another process or server: the directory is in use \
                         (its HDFS lease is held; a crashed holder's lease lapses within \
                         60 s): {e}"
                    ),
                ),
            ))
        }
    }
}
