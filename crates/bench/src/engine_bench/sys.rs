//! What Linux says about this process: IO counters (`/proc/self/io`), CPU time, anonymous
//! resident memory (`/proc/self/status`), and the size of a directory tree.
//!
//! `/proc/self/io` sums every thread of the process, live or exited, so an engine's background
//! flush and compaction threads count the same as the client threads. `wchar` counts bytes
//! passed to write-family syscalls (WAL appends, flushes, compactions; page-cache writes
//! included, so it does not depend on when the kernel writes back); `read_bytes` and
//! `write_bytes` count what reached the block layer.

use crate::engine_bench::error::{BenchError, Context, Result};
use std::path::Path;

/// The counters of `/proc/<pid>/io`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcIo {
    /// Bytes read through read-family syscalls (page-cache hits included).
    pub rchar: u64,
    /// Bytes written through write-family syscalls.
    pub wchar: u64,
    /// Bytes this process caused to be fetched from storage.
    pub read_bytes: u64,
    /// Bytes this process caused to be sent to storage.
    pub write_bytes: u64,
}

impl ProcIo {
    /// Parses the text of `/proc/<pid>/io`.
    pub fn parse(text: &str) -> Result<ProcIo> {
        let mut io = ProcIo::default();
        let mut seen = 0;
        for line in text.lines() {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let slot = match name.trim() {
                "rchar" => &mut io.rchar,
                "wchar" => &mut io.wchar,
                "read_bytes" => &mut io.read_bytes,
                "write_bytes" => &mut io.write_bytes,
                _ => continue,
            };
            *slot = value
                .trim()
                .parse()
                .context(format!("/proc/self/io: bad value in '{line}'"))?;
            seen += 1;
        }
        if seen < 4 {
            return Err(BenchError::new(
                "/proc/self/io lacks rchar/wchar/read_bytes/write_bytes (kernel without task IO accounting?)",
            ));
        }
        Ok(io)
    }

    /// The counters of this process now.
    pub fn read() -> Result<ProcIo> {
        let text = std::fs::read_to_string("/proc/self/io").context("reading /proc/self/io")?;
        ProcIo::parse(&text)
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &ProcIo) -> ProcIo {
        ProcIo {
            rchar: self.rchar.saturating_sub(earlier.rchar),
            wchar: self.wchar.saturating_sub(earlier.wchar),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
        }
    }
}

/// CPU time (user and system) this process has used, every thread counted, exited ones
/// included (`getrusage(RUSAGE_SELF)`).
pub fn process_cpu() -> Result<std::time::Duration> {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed value it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a `rusage` this function owns.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Err(BenchError::new(format!(
            "getrusage: {}",
            std::io::Error::last_os_error()
        )));
    }
    let tv = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec.max(0) as u64)
            + std::time::Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Ok(tv(usage.ru_utime) + tv(usage.ru_stime))
}

/// A `kB` field of `/proc/<pid>/status` (e.g. `VmHWM`, `VmRSS`), in bytes.
pub fn status_field_bytes(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let kib: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        Some(kib * 1024)
    })
}

/// Anonymous resident memory of this process (`RssAnon + RssShmem`): what it holds itself.
/// File-backed pages (`RssFile`) are left out: they are the page cache, which Cellar reaches
/// through mappings of its store files and RocksDB through `pread`, so counting them would
/// charge Cellar for the page cache and RocksDB not.
pub fn anon_rss() -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    match (
        status_field_bytes(&status, "RssAnon"),
        status_field_bytes(&status, "RssShmem"),
    ) {
        (Some(anon), shmem) => Ok(anon + shmem.unwrap_or(0)),
        _ => Err(BenchError::new("/proc/self/status lacks RssAnon")),
    }
}

/// The peak of [`anon_rss`] while it runs: a thread samples it every 10 ms (the kernel keeps
/// a peak only for the total, `VmHWM`).
pub struct PeakAnonRss {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: Option<std::thread::JoinHandle<u64>>,
}

impl PeakAnonRss {
    pub fn start() -> PeakAnonRss {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let sampler = std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                let mut peak = 0u64;
                loop {
                    peak = peak.max(anon_rss().unwrap_or(0));
                    if flag.load(std::sync::atomic::Ordering::Acquire) {
                        return peak;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            })
            .ok();
        PeakAnonRss { stop, sampler }
    }

    /// Stops sampling; the peak seen, including a last sample taken now.
    pub fn finish(mut self) -> Result<u64> {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let sampled = self.sampler.take().and_then(|h| h.join().ok()).unwrap_or(0);
        Ok(sampled.max(anon_rss()?))
    }
}

impl Drop for PeakAnonRss {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(h) = self.sampler.take() {
            let _ = h.join();
        }
    }
}

/// Total size of the regular files under `dir` (0 if it does not exist).
pub fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0u64;
    let mut pending = vec![dir.to_path_buf()];
    // Both engines keep a shallow tree; the bound only guards against a link cycle.
    for _ in 0..100_000 {
        let Some(d) = pending.pop() else {
            return Ok(total);
        };
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(BenchError::new(format!("listing {}: {e}", d.display()))),
        };
        for entry in entries {
            let entry = entry.context(format!("listing {}", d.display()))?;
            let meta = entry
                .metadata()
                .context(format!("stat {}", entry.path().display()))?;
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() {
                total += meta.len();
            }
        }
    }
    Err(BenchError::new(format!(
        "{} has more than 100000 directories",
        dir.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_rss_is_read_and_its_peak_sampled() {
        let now = anon_rss().expect("RssAnon");
        assert!(now > 0);
        let peak = PeakAnonRss::start();
        let big = std::hint::black_box(vec![1u8; 64 << 20]);
        std::thread::sleep(std::time::Duration::from_millis(30));
        let seen = peak.finish().expect("peak");
        assert!(
            seen >= now + (48 << 20),
            "{seen} after touching 64 MiB from {now}"
        );
        drop(std::hint::black_box(big));
    }

    #[test]
    fn proc_io_parses_and_subtracts() {
        let text = "rchar: 1000\nwchar: 2500\nsyscr: 10\nsyscw: 20\nread_bytes: 4096\n\
                    write_bytes: 8192\ncancelled_write_bytes: 0\n";
        let io = ProcIo::parse(text).expect("parses");
        assert_eq!(
            io,
            ProcIo {
                rchar: 1000,
                wchar: 2500,
                read_bytes: 4096,
                write_bytes: 8192
            }
        );
        let later = ProcIo { wchar: 3000, ..io };
        assert_eq!(later.since(&io).wchar, 500);
        assert!(ProcIo::parse("rchar: 1\n").is_err());
        assert!(ProcIo::parse("rchar: x\nwchar: 1\nread_bytes: 1\nwrite_bytes: 1\n").is_err());
    }

    #[test]
    fn this_process_has_io_counters() {
        let before = ProcIo::read().expect("/proc/self/io");
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f"), vec![7u8; 10_000]).expect("write");
        let after = ProcIo::read().expect("/proc/self/io");
        assert!(after.since(&before).wchar >= 10_000);
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/g"), vec![1u8; 500]).expect("write");
        assert_eq!(dir_size(dir.path()).expect("size"), 10_500);
        assert_eq!(dir_size(&dir.path().join("absent")).expect("absent"), 0);
    }

    #[test]
    fn status_fields_are_read_in_bytes() {
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(status_field_bytes(status, "VmHWM"), Some(2 << 20));
        assert_eq!(status_field_bytes(status, "VmRSS"), Some(1 << 20));
        assert_eq!(status_field_bytes(status, "VmSwap"), None);
        assert_eq!(status_field_bytes("VmHWMx: 1 kB", "VmHWM"), None);
    }
}
