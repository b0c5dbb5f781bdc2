//! The WAL fence of a cluster on HDFS, end to end: a real ZooKeeper, a MiniDFS (3
//! DataNodes), a master and two region servers whose WALs live on HDFS, with small WAL
//! segments so the servers roll all the time. Under load from concurrent writers one region
//! server is paused (SIGSTOP) past its ZooKeeper session; the master renames its WAL
//! directory, splits it (recovering the lease of every segment) and reopens its regions on
//! the other server; then the paused server is resumed (SIGCONT) with writers' calls still
//! queued on its sockets. It must acknowledge nothing the split did not see: every row any
//! writer saw acknowledged is readable at the end, and the fenced server exits (status 75)
//! without remaking its WAL directory.
//!
//! Before WAL segments were created without making parents, a server that woke with a roll
//! pending remade `wal/<server>/`, acknowledged writes into it, and the master's next pass
//! split them into `recovered.edits` of regions already open elsewhere, where nothing read
//! them (the storage-level `hdfs_wal_fence.rs` shows that step deterministically).

mod support;

use cellar_storage::fs::{FileSystem, HdfsFs};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::cluster::{assert_writer_rows, client, HdfsCluster, Writers, TABLE};
use support::wait_for;

fn signal(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(ok.success(), "kill {signal} {pid}");
}

#[test]
fn a_region_server_paused_past_its_session_on_hdfs_acknowledges_nothing_the_split_missed() {
    let mut cluster = HdfsCluster::start(
        3,
        "[cluster]\nzookeeper_session_timeout_ms = 2000\n[split]\nauto = false\n\
         [storage]\nwal_segment_bytes = 2048\n",
    );
    let c = client(&cluster.master.native);
    let victim_addr = cluster.servers[0].native.clone();

    let writers = Writers::start(&cluster.master.native, 4);
    writers.wait_progress(0, 300, "at the start");

    // Paused mid-load (its segments roll every few dozen rows): its session expires, the
    // master fences and splits its log and moves its regions.
    let mut victim = cluster.servers.remove(0);
    let paused_at = Instant::now();
    signal(victim.pid(), "-STOP");
    let moved = wait_for(Duration::from_secs(90), || {
        let regions = c.admin().list_regions(TABLE).ok()?;
        regions
            .iter()
            .all(|r| r.server == cluster.servers[0].native)
            .then_some(())
    });
    // Woken while writers' calls to it (sent before its regions moved) still wait.
    signal(victim.pid(), "-CONT");
    assert!(
        moved.is_some(),
        "regions moved off the paused server; the master:\n{}",
        cluster.master.output()
    );
    println!(
        "HDFS: regions moved off the paused server {:.1} s after SIGSTOP",
        paused_at.elapsed().as_secs_f64()
    );
    let status = wait_for(Duration::from_secs(30), || victim.exited())
        .unwrap_or_else(|| panic!("the fenced server did not exit:\n{}", victim.output()));
    assert_eq!(status.code(), Some(75), "{}", victim.output());
    // What its log did when it woke (shown with --nocapture).
    for line in victim
        .output()
        .lines()
        .filter(|l| l.contains("WAL") || l.contains("fenc"))
    {
        println!("paused server: {line}");
    }

    let after = writers.acked();
    writers.wait_progress(after, 200, "after the paused server was fenced");
    // A master tick or two: a log the woken server had made again would be split now.
    std::thread::sleep(Duration::from_secs(3));
    let acked = writers.stop();
    assert_writer_rows(&c, &acked, "on HDFS after a paused server was fenced");
    println!("{} rows acknowledged on HDFS, all present", acked.len());

    let hdfs = HdfsFs::connect(&cluster.dfs.url).expect("connect to HDFS");
    let wal_dirs = hdfs
        .list(Path::new("/cellar/wal"))
        .expect("list the WAL root");
    let victim_prefix = format!("{},", victim_addr.replace(':', ","));
    assert!(
        wal_dirs.iter().all(|d| !d.starts_with(&victim_prefix)),
        "the fenced server's WAL directory is back: {wal_dirs:?}\n{}",
        victim.output()
    );

    for mut s in cluster.servers {
        assert!(s.terminate().success(), "{}", s.output());
    }
    assert!(
        cluster.master.terminate().success(),
        "{}",
        cluster.master.output()
    );
}
