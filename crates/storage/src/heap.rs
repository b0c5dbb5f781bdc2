//! Freed heap memory back to the OS after a compaction and after idle memstore chunks are
//! freed.
//!
//! A compaction allocates and frees a block buffer per block it reads and writes, on its own
//! thread and so in its own allocator arena, and freed memstore chunks land in the heap too;
//! glibc's allocator keeps what such churn frees (it returns only the free top of a heap), so
//! a process that wrote and compacted for a while held memory it no longer used. Under a
//! memory limit that is page cache the reads do not get: at 10 M entries under a 4 GiB cap,
//! Gets after the writes peaked at 1,133–1,344 MiB of anonymous memory (1 GiB of it block
//! cache), against 1,058 MiB in a process that opened the same store fresh, and 1,078 MiB
//! with these trims. `malloc_trim` gives back every free page of every arena; it takes a few
//! milliseconds and runs once per compaction (which takes seconds) and per idle pool trim.

/// Returns the allocator's free memory to the OS (glibc's `malloc_trim`; nothing elsewhere).
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes each arena's lock itself and only releases pages it holds
    // free; it is safe to call while other threads allocate.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::release_free_memory;

    /// Anonymous resident memory of this process, in bytes.
    fn rss_anon() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("RssAnon")
            * 1024
    }

    /// The measurement, alone in a process of its own (see below): RssAnon is the whole
    /// process's, and another test's compaction trims every arena too.
    #[test]
    #[ignore = "run by freed_block_buffers_go_back_to_the_os in a process of its own"]
    fn freed_block_buffers_measured_alone() {
        // On a thread of its own, like a compaction: its own arena.
        std::thread::spawn(|| {
            const MIB: u64 = 1 << 20;
            // 200 MiB of block-sized buffers, then one small allocation after them that
            // stays: the freed buffers below it are not at the heap's top.
            let blocks: Vec<Vec<u8>> = (0..3200).map(|_| vec![7u8; 65_541]).collect();
            let top = vec![7u8; 64];
            let full = rss_anon();
            drop(blocks);
            let freed = rss_anon();
            release_free_memory();
            let trimmed = rss_anon();
            // free() itself gives back the arena's heaps that became empty, not the one
            // still in use (64 MiB of buffers here): the trim does.
            assert!(
                trimmed + 32 * MIB < freed,
                "RssAnon {} MiB with the buffers, {} MiB after freeing them, {} MiB after the trim",
                full / MIB,
                freed / MIB,
                trimmed / MIB
            );
            drop(top);
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn freed_block_buffers_go_back_to_the_os() {
        let exe = std::env::current_exe().expect("test binary");
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "heap::tests::freed_block_buffers_measured_alone",
                "--ignored",
                "--test-threads=1",
            ])
            .output()
            .expect("run the measurement");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
