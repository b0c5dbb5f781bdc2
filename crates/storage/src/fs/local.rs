//! [`FileSystem`] on the local disk.

use super::{FileSyncer, FileSystem, LockGuard, RandomAccessFile, WritableFile};
use bytes::Bytes;
use cellar_model::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Local disk. Writes are buffered in user space until `flush`.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalFs;

impl LocalFs {
    pub fn new() -> LocalFs {
        LocalFs
    }

    /// A `LocalFs` as the shared handle type.
    pub fn shared() -> super::FsRef {
        Arc::new(LocalFs)
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |e| Error::io(path.display(), e)
}

struct LocalWritable {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    len: u64,
}

const WRITE_BUFFER: usize = 256 * 1024;

impl WritableFile for LocalWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.flush()?;
            if data.len() > WRITE_BUFFER {
                return self.file.write_all(data).map_err(io_err(&self.path));
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all(&self.buf).map_err(io_err(&self.path))?;
            self.buf.clear();
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file.sync_data().map_err(io_err(&self.path))
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
        let file = self.file.try_clone().map_err(io_err(&self.path))?;
        Ok(Arc::new(LocalSyncer {
            path: self.path.clone(),
            file,
        }))
    }
}

/// A duplicate descriptor of a file being written: fdatasync on it covers every write made
/// through the original before the call.
struct LocalSyncer {
    path: PathBuf,
    file: File,
}

impl FileSyncer for LocalSyncer {
    fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(io_err(&self.path))
    }
}

/// An exclusive lock (`flock`) on an open lock file, released when the file is closed.
struct LocalLock {
    _file: File,
}

impl Drop for LocalWritable {
    fn drop(&mut self) {
        // Hand what is buffered to the OS; a caller that needed to know has called flush.
        let _ = self.flush();
    }
}

struct LocalRandomAccess {
    path: PathBuf,
    file: File,
    len: u64,
}

impl RandomAccessFile for LocalRandomAccess {
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        super::check_read(self.path.display(), offset, len, self.len)?;
        // Read into uninitialised capacity: zeroing a 64 KiB block first cost ~17 % of a
        // block-cache miss (measured with perf on readrandom).
        let mut buf: Vec<u8> = Vec::with_capacity(len);
        let fd = self.file.as_raw_fd();
        while buf.len() < len {
            let filled = buf.len();
            let spare = buf.spare_capacity_mut();
            let at = offset + filled as u64;
            // SAFETY: `spare` is the vector's unused capacity, valid for writes of
            // `spare.len()` bytes; pread writes at most that many and reports how many.
            let n = unsafe {
                libc::pread(
                    fd,
                    spare.as_mut_ptr().cast(),
                    spare.len(),
                    at as libc::off_t,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::io(self.path.display(), e));
            }
            if n == 0 {
                return Err(Error::corruption(
                    self.path.display(),
                    at,
                    "file ended during a read (truncated while open?)",
                ));
            }
            // SAFETY: pread initialised the first `n` bytes of the spare capacity, and
            // `filled + n <= len <= capacity`.
            unsafe { buf.set_len(filled + n as usize) };
        }
        Ok(Bytes::from(buf))
    }

    fn prefetch(&self, offset: u64, len: u64) {
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len))
        else {
            return;
        };
        // SAFETY: advice on an open descriptor; no memory is passed.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                offset,
                len,
                libc::POSIX_FADV_WILLNEED,
            );
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// A read-only shared mapping of a whole file, unmapped when the last [`Bytes`] slice of it
/// drops (the block cache may hold slices after the file is closed or deleted).
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only memory owned by this value alone (nothing writes through
// `ptr`, and it is unmapped once, in `drop`); sharing or moving it between threads is like
// sharing a `&[u8]` / moving a `Box<[u8]>`.
unsafe impl Send for Mapping {}
// SAFETY: see `Send`: only shared reads happen through it.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(file: &File, len: u64) -> Option<Mapping> {
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        // SAFETY: a fresh read-only mapping of an open file descriptor; the kernel picks the
        // address. The result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        // The kernel's default advice stays: `MADV_RANDOM` would end read-around on faults,
        // but the kernel then also stops counting accesses through the mapping, and reclaim
        // takes its pages first (at 10 M entries beside RocksDB, Cellar's Gets went to the
        // disk most of the time: readrandom 0.23× RocksDB's). Faults on missing pages are
        // avoided instead (`MappedFile::read_at`).
        (ptr != libc::MAP_FAILED).then_some(Mapping { ptr, len })
    }
}

/// The pages of `map` (a whole mapping: it starts on a page boundary) that `offset..offset +
/// len` touches, clamped to the mapping: the page-aligned start and the end.
fn page_span(map: &[u8], offset: usize, len: usize) -> (usize, usize) {
    let start = offset - offset % page_size();
    (start, offset.saturating_add(len).min(map.len()))
}

/// Whether every page of `offset..offset + len` of the mapping `map` is in the page cache.
/// A failed query answers no (the caller then reads with `pread`).
fn resident(map: &[u8], offset: usize, len: usize) -> bool {
    const CHUNK: usize = 64;
    let page = page_size();
    let (mut at, end) = page_span(map, offset, len);
    let mut pages = [0u8; CHUNK];
    while at < end {
        let span = (end - at).min(CHUNK * page);
        // SAFETY: `at..at + span` lies inside the mapping and starts on a page boundary;
        // `pages` has room for the CHUNK pages `span` covers at most; mincore writes only
        // that vector.
        let rc = unsafe {
            libc::mincore(
                map.as_ptr().add(at).cast_mut().cast(),
                span,
                pages.as_mut_ptr(),
            )
        };
        let n = span.div_ceil(page);
        if rc != 0 || pages.get(..n).is_none_or(|p| p.iter().any(|b| b & 1 == 0)) {
            return false;
        }
        at += span;
    }
    true
}

/// Starts reading the pages of `offset..offset + len` of the mapping `map` in one request if
/// they are not in the page cache; returns without waiting for them.
fn will_need(map: &[u8], offset: usize, len: usize) {
    let (start, end) = page_span(map, offset, len);
    if start >= end {
        return;
    }
    // SAFETY: `start..end` lies inside the mapping and starts on a page boundary; advice
    // changes no memory.
    unsafe {
        libc::madvise(
            map.as_ptr().add(start).cast_mut().cast(),
            end - start,
            libc::MADV_WILLNEED,
        );
    }
}

/// The system's page size (madvise wants page-aligned addresses).
fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: sysconf reads a constant of the system.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    })
}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` is mapped readable for as long as `self` lives. Store files
        // are never changed once written (written under a temporary name, renamed into place,
        // deleted whole), so the bytes do not change under a reader. A file cut shorter from
        // outside Cellar while mapped would fault on access (SIGBUS), as in every engine that
        // maps its files.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region `new` mapped, once; no slice of it outlives
        // `self` (every `Bytes` slice holds the owner alive).
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

/// Reads of a file in a row whose pages were all in memory, after which they are slices of
/// the mapping rather than copies. Under memory pressure (data larger than memory, pages
/// coming and going) a file's reads are rarely resident this many times in a row, so they
/// copy with `pread` and the process maps none of its pages: a mapped page is reclaimed only
/// after the kernel walks its mappings and unmaps it, a cost the reader pays in direct
/// reclaim. At 10 M entries under a 4 GiB cap, reads that sliced every resident range ran
/// 9 % (Gets) and 20 % (seeks) slower than `pread` alone, p99 up to twice; with the data in
/// memory, slices are twice as fast as copies (1 M entries, readrandom).
const MAP_AFTER: u32 = 64;
/// Reads of a file in a row whose pages were all in memory, after which its reads stop asking
/// (`mincore`) and touch the mapping directly, timing the first touch.
const TRUST_AFTER: u32 = 1024;
/// A first touch slower than this went to the disk. A page in memory takes a microsecond or
/// two; on a virtual machine, the first touch of a region the process has not mapped yet
/// can take 20–40 µs (new page tables the host backs on demand).
const COLD_TOUCH: Duration = Duration::from_micros(50);

/// A store file read through its mapping where its pages are in memory, and with `pread`
/// where they are not.
struct MappedFile {
    /// The same file for `pread`, advised `POSIX_FADV_RANDOM` (no readahead past a read).
    pread: LocalRandomAccess,
    /// The whole mapping, as `Bytes` that keep it alive.
    map: Bytes,
    /// Reads in a row whose pages were all in memory (see `read_at`).
    resident_streak: AtomicU32,
}

impl RandomAccessFile for MappedFile {
    /// A range whose pages are all in the page cache is a slice of the mapping, no copy, once
    /// the file's last [`MAP_AFTER`] reads were in memory too (before that, and whenever a
    /// page is missing, it is read with `pread`: one request for exactly the range, as
    /// RocksDB reads).
    /// Through the mapping, a fault on a missing page reads around it by the device's
    /// readahead (8 MiB on some disks) or, once the kernel gives up read-around for the file,
    /// one page per fault (sixteen waits on the disk for a 64 KiB block: readrandom p99 1.5
    /// ms against RocksDB's 0.2 ms at 10 M entries).
    ///
    /// Asking the kernel (`mincore`) costs ~1.3 µs on this project's benchmark machine, 15 %
    /// of a Get that misses the block cache and hits the page cache. So a file whose last
    /// `TRUST_AFTER` reads were all in memory is read without asking, its first page's touch
    /// timed; a slow one (the disk: a read-around of the page) sends the file back to asking.
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        super::check_read(
            self.pread.path.display(),
            offset,
            len,
            self.map.len() as u64,
        )?;
        // check_read bounds offset + len by the length, which fits a usize.
        let start = offset as usize;
        if len == 0 {
            return Ok(Bytes::new());
        }
        // Racy on purpose: a streak off by a few reads is fine.
        let streak = self.resident_streak.load(Ordering::Relaxed);
        if streak >= TRUST_AFTER {
            let touched = Instant::now();
            std::hint::black_box(self.map.get(start).copied());
            if touched.elapsed() <= COLD_TOUCH {
                return Ok(self.map.slice(start..start + len));
            }
            self.resident_streak.store(0, Ordering::Relaxed);
        }
        if !resident(&self.map, start, len) {
            self.resident_streak.store(0, Ordering::Relaxed);
            return self.pread.read_at(offset, len);
        }
        if streak < TRUST_AFTER {
            self.resident_streak.store(streak + 1, Ordering::Relaxed);
        }
        if streak < MAP_AFTER {
            return self.pread.read_at(offset, len);
        }
        Ok(self.map.slice(start..start + len))
    }

    fn prefetch(&self, offset: u64, len: u64) {
        // A file whose recent reads were all in memory is read through its mapping: advice
        // would be a system call for pages that are there.
        if self.resident_streak.load(Ordering::Relaxed) >= MAP_AFTER {
            return;
        }
        if let (Ok(offset), Ok(len)) = (usize::try_from(offset), usize::try_from(len)) {
            will_need(&self.map, offset, len);
        }
    }

    fn len(&self) -> u64 {
        self.map.len() as u64
    }

    fn path(&self) -> &Path {
        &self.pread.path
    }
}

impl FileSystem for LocalFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(io_err(path))?;
        Ok(Box::new(LocalWritable {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(WRITE_BUFFER),
            len: 0,
        }))
    }

    /// `open(2)` with `O_CREAT` never makes parents: [`FileSystem::create`] already is one.
    fn create_in_existing_dir(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(io_err(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        Ok(Arc::new(LocalRandomAccess {
            path: path.to_path_buf(),
            file,
            len,
        }))
    }

    /// Maps the file: a read is then a slice of the mapping (the page cache's own pages, no
    /// copy, no system call). Files that cannot be mapped (empty, or the map fails) are read
    /// with `pread` as [`LocalFs::open`]'s are.
    fn open_immutable(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(io_err(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        match Mapping::new(&file, len) {
            Some(map) => {
                // SAFETY: advice on an open descriptor; no memory is passed.
                unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
                Ok(Arc::new(MappedFile {
                    pread: LocalRandomAccess {
                        path: path.to_path_buf(),
                        file,
                        len,
                    },
                    map: Bytes::from_owner(map),
                    resident_streak: AtomicU32::new(0),
                }))
            }
            None => Ok(Arc::new(LocalRandomAccess {
                path: path.to_path_buf(),
                file,
                len,
            })),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        fs::rename(from, to).map_err(io_err(from))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn delete(&self, path: &Path) -> Result<()> {
        fs::remove_file(path).map_err(io_err(path))
    }

    fn delete_dir_all(&self, dir: &Path) -> Result<()> {
        match fs::remove_dir_all(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r.map_err(io_err(dir)),
        }
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        fs::create_dir_all(dir).map_err(io_err(dir))
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        path.try_exists().map_err(io_err(path))
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err(path))?;
        f.set_len(len).map_err(io_err(path))?;
        f.sync_all().map_err(io_err(path))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(dir))
    }

    #[cfg(target_os = "linux")]
    fn watch_dir(&self, dir: &Path) -> Result<Option<Box<dyn super::DirWatch>>> {
        Ok(Some(Box::new(InotifyWatch::new(dir)?)))
    }

    fn lock(&self, path: &Path) -> Result<LockGuard> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err(path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::io(
                    path.display(),
                    io::Error::new(
                        io::ErrorKind::WouldBlock,
                        "locked by another process or server: the directory is in use",
                    ),
                ))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(path.display(), e)),
        }
        Ok(Box::new(LocalLock { _file: file }))
    }
}

/// [`super::DirWatch`] through inotify: the kernel queues a directory's move or removal on
/// the watch inside the rename or rmdir itself, so one non-blocking `read` (no path walk)
/// tells whether it has happened. About a tenth of the cost of a `stat` of the path.
#[cfg(target_os = "linux")]
struct InotifyWatch {
    fd: std::os::fd::OwnedFd,
    dir: PathBuf,
    gone: std::sync::atomic::AtomicBool,
}

#[cfg(target_os = "linux")]
impl InotifyWatch {
    fn new(dir: &Path) -> Result<InotifyWatch> {
        use std::os::fd::FromRawFd;
        use std::os::unix::ffi::OsStrExt;
        let fail = |what: &str| {
            let e = io::Error::last_os_error();
            Error::io(
                dir.display(),
                io::Error::new(e.kind(), format!("{what}: {e}")),
            )
        };
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| {
            Error::io(
                dir.display(),
                io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"),
            )
        })?;
        // SAFETY: plain system calls; the descriptor is owned from here on.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(fail("inotify_init1"));
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        let mask = libc::IN_MOVE_SELF | libc::IN_DELETE_SELF | libc::IN_UNMOUNT | libc::IN_ONLYDIR;
        // SAFETY: `path` is NUL-terminated and outlives the call.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) } < 0 {
            return Err(fail("watching the directory"));
        }
        Ok(InotifyWatch {
            fd,
            dir: dir.to_path_buf(),
            gone: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

#[cfg(target_os = "linux")]
impl super::DirWatch for InotifyWatch {
    fn intact(&self) -> Result<bool> {
        use std::sync::atomic::Ordering;
        if self.gone.load(Ordering::Acquire) {
            return Ok(false);
        }
        // Aligned for `inotify_event`; one event is at most this (self watches carry no name).
        let mut buf = [0u64; 64];
        // SAFETY: reads at most the buffer's size into it.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                std::mem::size_of_val(&buf),
            )
        };
        if n > 0 {
            // Every event this watch asks for means the directory moved or went away.
            self.gone.store(true, Ordering::Release);
            return Ok(false);
        }
        let e = io::Error::last_os_error();
        if n < 0 && e.kind() != io::ErrorKind::WouldBlock {
            return Err(Error::io(self.dir.display(), e));
        }
        Ok(true)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_watched_directory_reports_its_removal_and_a_missing_one_is_an_error() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("wal");
        fs::create_dir(&dir).expect("mkdir");
        let watch = LocalFs
            .watch_dir(&dir)
            .expect("watch")
            .expect("inotify on Linux");
        fs::write(dir.join("segment"), b"x").expect("a file inside is no event");
        assert!(watch.intact().expect("check"));
        fs::remove_file(dir.join("segment")).expect("rm");
        fs::remove_dir(&dir).expect("rmdir");
        assert!(!watch.intact().expect("check"));
        let Err(err) = LocalFs.watch_dir(&dir) else {
            panic!("watching a missing directory must fail");
        };
        assert!(err.to_string().contains("wal"), "{err}");
    }

    #[test]
    fn immutable_files_are_read_through_a_mapping_that_outlives_the_file() {
        // On the disk the crate is on: a tmpfs `/tmp` keeps every page in memory.
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).expect("tempdir");
        let path = tmp.path().join("f.sf");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(&path, &data).expect("write");
        let f = LocalFs.open_immutable(&path).expect("open");
        assert_eq!(f.len(), 10_000);
        // Advice is clamped to the file and never fails a read: in range, past the end,
        // unaligned, and larger than the address space.
        for (offset, len) in [
            (0, 10_000),
            (4_001, 100),
            (9_999, 1 << 40),
            (20_000, 5),
            (0, u64::MAX),
        ] {
            f.prefetch(offset, len);
        }
        // A file's first reads are copies even when its pages are in memory; after
        // MAP_AFTER in a row that were, reads are slices of the mapping.
        let copy = f.read_at(0, 100).expect("read");
        for _ in 1..MAP_AFTER {
            assert_eq!(&f.read_at(0, 100).expect("read")[..], &data[..100]);
        }
        let base = f.read_at(0, 100).expect("read").as_ptr() as usize;
        assert_ne!(copy.as_ptr() as usize, base, "the first read is a copy");
        let block = f.read_at(4_000, 3_000).expect("read");
        assert_eq!(&block[..], &data[4_000..7_000]);
        assert_eq!(
            block.as_ptr() as usize,
            base + 4_000,
            "a slice of the mapping"
        );
        let err = f.read_at(9_000, 1_001).expect_err("past the end");
        assert!(err.to_string().contains("f.sf"), "{err}");
        // A slice stays readable after the handle closes and the file is deleted (the block
        // cache may hold it); the mapping goes with the last slice.
        drop(f);
        fs::remove_file(&path).expect("rm");
        assert_eq!(&block[..10], &data[4_000..4_010]);

        // A page that is not in memory is read with pread (a copy, not a slice of the
        // mapping); once pread has brought it back, reads of it are copies until the file's
        // reads were resident MAP_AFTER times in a row again, then slices of the mapping.
        let big = tmp.path().join("big.sf");
        let data: Vec<u8> = (0..8u32 << 20).map(|i| (i % 253) as u8).collect();
        fs::write(&big, &data).expect("write");
        let synced = File::open(&big).expect("reopen");
        synced.sync_all().expect("sync");
        let f = LocalFs.open_immutable(&big).expect("open");
        for _ in 0..MAP_AFTER {
            f.read_at(0, 100).expect("read");
        }
        let first = f.read_at(0, 100).expect("read");
        assert_eq!(&first[..], &data[..100]);
        let base = first.as_ptr() as usize;
        // SAFETY: advice on an open descriptor; no memory is passed. Drops the file's clean
        // pages that no process maps: all but the first (large) folio, which the read above
        // mapped.
        unsafe { libc::posix_fadvise(synced.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let at = 6_000_000;
        let reads = std::iter::once(("cold", false))
            .chain((0..MAP_AFTER).map(|_| ("warm, streak short", false)))
            .chain(std::iter::once(("warm", true)));
        for (read, mapped) in reads {
            let block = f.read_at(at as u64, 70_000).expect(read);
            assert_eq!(&block[..], &data[at..at + 70_000], "{read} read");
            let slice_of_map = block.as_ptr() as usize == base + at;
            assert_eq!(slice_of_map, mapped, "{read} read: a slice of the mapping?");
        }

        // An empty file cannot be mapped: it is read with pread, and every read is past its end.
        let empty = tmp.path().join("empty.sf");
        fs::write(&empty, b"").expect("write");
        let f = LocalFs.open_immutable(&empty).expect("open empty");
        assert_eq!(f.len(), 0);
        assert!(f.read_at(0, 1).is_err());
        assert_eq!(f.read_at(0, 0).expect("nothing").len(), 0);
        f.prefetch(0, u64::MAX);
        let plain = LocalFs.open(&empty).expect("open with pread");
        plain.prefetch(0, 1 << 20);
        plain.prefetch(u64::MAX, u64::MAX);
    }
}
