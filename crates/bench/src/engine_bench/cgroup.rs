//! `--read-memory`: a memory cgroup per engine child, so that each engine's reads get the same
//! memory (its process plus the page cache of its files) and neither engine's files push the
//! other's out of one shared page cache.
//!
//! Without it, two 10 GiB stores on a 24 GiB machine share the page cache, and which
//! engine's Gets go to the disk depends on how the kernel's reclaim treats a mapped file
//! against a file read with `pread` (and on whose read-ahead brought in more), not on the
//! engines. The cap is set after the write workloads, before the first read: a cap during
//! writes would measure how the kernel throttles a group's dirty pages (cgroup v1 has no
//! per-group dirty limit), not the engines.
//!
//! The groups are made beside this process's own (cgroup v1's memory hierarchy, or v2 with
//! the memory controller enabled there); that needs root or a delegated cgroup. Each is
//! removed when the run ends.

use crate::engine_bench::error::{BenchError, Context, Result};
use std::path::{Path, PathBuf};

/// One engine child's memory cgroup.
pub struct MemoryGroup {
    dir: PathBuf,
    /// `memory.limit_in_bytes` (v1) or `memory.max` (v2).
    limit_file: &'static str,
}

impl MemoryGroup {
    /// Creates `name` under this process's memory cgroup.
    pub fn create(name: &str) -> Result<MemoryGroup> {
        let own =
            std::fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
        let (parent, limit_file) = parent_group(&own).ok_or_else(|| {
            BenchError::new(
                "--read-memory needs a memory cgroup: none found for this process in \
                 /proc/self/cgroup (cgroup v1's memory controller, or v2 with memory enabled)",
            )
        })?;
        let dir = parent.join(name);
        std::fs::create_dir(&dir).context(format!(
            "--read-memory: creating the memory cgroup {} (needs root or a delegated cgroup)",
            dir.display()
        ))?;
        let group = MemoryGroup { dir, limit_file };
        if !group.dir.join(limit_file).exists() {
            return Err(BenchError::new(format!(
                "--read-memory: {} has no {limit_file} (is the memory controller enabled in {}/cgroup.subtree_control?)",
                group.dir.display(),
                parent.display()
            )));
        }
        Ok(group)
    }

    /// Moves process `pid` into the group.
    pub fn add(&self, pid: u32) -> Result<()> {
        let procs = self.dir.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string()).context(format!(
            "--read-memory: moving process {pid} into {}",
            self.dir.display()
        ))
    }

    /// Caps the group's memory at `bytes`. Dirty pages are written out first (`sync`) so
    /// that the kernel can reclaim the group down to the cap; it refuses (EBUSY) if it
    /// cannot, and that is an error naming the group.
    pub fn limit(&self, bytes: u64) -> Result<()> {
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let file = self.dir.join(self.limit_file);
        std::fs::write(&file, bytes.to_string()).context(format!(
            "--read-memory: capping {} at {bytes} bytes (the kernel could not reclaim it to that; \
             try a larger cap)",
            self.dir.display()
        ))
    }

    /// Bytes the group holds now (process memory and page cache), if the kernel says.
    pub fn usage(&self) -> Option<u64> {
        ["memory.usage_in_bytes", "memory.current"]
            .iter()
            .find_map(|f| std::fs::read_to_string(self.dir.join(f)).ok())
            .and_then(|t| t.trim().parse().ok())
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for MemoryGroup {
    fn drop(&mut self) {
        // The child has exited by now (the driver stops its children first); a group with a
        // process left in it cannot be removed, and says so.
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!(
                "note: could not remove the memory cgroup {}: {e}",
                self.dir.display()
            );
        }
    }
}

/// The directory of this process's memory cgroup and the name of its limit file, from the
/// text of `/proc/self/cgroup`: a v1 line `N:...memory...:/path` (under
/// `/sys/fs/cgroup/memory`), else the v2 line `0::/path` if v2's root offers the memory
/// controller.
fn parent_group(own: &str) -> Option<(PathBuf, &'static str)> {
    let relative = |p: &str| p.trim_start_matches('/').to_string();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if controllers.split(',').any(|c| c == "memory") {
            let root = Path::new("/sys/fs/cgroup/memory");
            return root
                .exists()
                .then(|| (root.join(relative(path)), "memory.limit_in_bytes"));
        }
    }
    let v2_root = Path::new("/sys/fs/cgroup");
    let offers_memory = std::fs::read_to_string(v2_root.join("cgroup.controllers"))
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
    own.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .filter(|_| offers_memory)
        .map(|path| (v2_root.join(relative(path)), "memory.max"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_v1_memory_hierarchy_by_its_controller() {
        let text = "9:name=systemd:/\n4:memory:/jobs/abc\n3:cpuset:/\n0::/\n";
        if Path::new("/sys/fs/cgroup/memory").exists() {
            let (dir, file) = parent_group(text).expect("v1 memory");
            assert_eq!(dir, Path::new("/sys/fs/cgroup/memory/jobs/abc"));
            assert_eq!(file, "memory.limit_in_bytes");
        }
        // Controllers share a line in some set-ups.
        let text = "4:cpu,memory:/\n";
        if let Some((dir, _)) = parent_group(text) {
            assert_eq!(dir, Path::new("/sys/fs/cgroup/memory/"));
        }
        // No memory controller anywhere: nothing (unless v2's root offers one).
        let none = "1:cpu:/\n";
        assert!(parent_group(none).is_none());
    }
}
