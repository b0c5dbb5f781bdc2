//! A cluster on HDFS: a real ZooKeeper, a MiniDFS with four DataNodes, one `cellar master`
//! and two `cellar regionserver`s whose store files, meta and WALs all live on HDFS. Under
//! load from concurrent writers a DataNode dies (the writes go on: the WAL pipeline drops it)
//! and then a region server is killed with SIGKILL: the master recovers the lease on its
//! open WAL segment, splits it, reopens its regions on the other server, and every
//! acknowledged row is there once, in order.

mod support;

use std::time::{Duration, Instant};
use support::cluster::{assert_writer_rows, client, HdfsCluster, Writers, TABLE};
use support::wait_for;

#[test]
fn a_cluster_on_hdfs_keeps_every_acknowledged_row_through_a_datanode_and_a_server_death() {
    // Four DataNodes: when one dies, every new block still finds three live ones.
    let mut cluster = HdfsCluster::start(
        4,
        "[cluster]\nzookeeper_session_timeout_ms = 2000\n[split]\nauto = false\n",
    );
    let c = client(&cluster.master.native);

    let writers = Writers::start(&cluster.master.native, 2);
    writers.wait_progress(0, 200, "at the start");
    c.admin().flush(TABLE).expect("flush to HDFS");

    // A DataNode dies mid-write: the pipelines drop it and the writes go on.
    cluster.dfs.stop_datanode(0).expect("stop a DataNode");
    let before = writers.acked();
    writers.wait_progress_or(before, 200, "after a DataNode died", || {
        cluster
            .servers
            .iter()
            .map(|s| s.output())
            .collect::<Vec<_>>()
            .join("\n----\n")
    });

    // The region server dies: its WAL lease is recovered, the log split, its regions reopened.
    let killed_at = Instant::now();
    cluster.servers.remove(0).kill9();
    let moved = wait_for(Duration::from_secs(90), || {
        let regions = c.admin().list_regions(TABLE).ok()?;
        regions
            .iter()
            .all(|r| r.server == cluster.servers[0].native)
            .then_some(())
    });
    assert!(
        moved.is_some(),
        "regions reopened on the surviving server; the master:\n{}\n---- the server:\n{}",
        cluster.master.output(),
        cluster.servers[0].output()
    );
    let after = writers.acked();
    writers.wait_progress(after, 200, "after the region server died");
    println!(
        "HDFS: regions back on the surviving server {:.1} s after the kill",
        killed_at.elapsed().as_secs_f64()
    );
    let acked = writers.stop();
    assert_writer_rows(
        &c,
        &acked,
        "on HDFS after a DataNode and a region server died",
    );
    println!("{} rows acknowledged on HDFS, all present", acked.len());
}
