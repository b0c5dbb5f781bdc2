//! A cluster on HDFS: a real ZooKeeper, a MiniDFS with four DataNodes, one `cellar master`
//! and two `cellar regionserver`s whose store files, meta and WALs all live on HDFS. Under
//! load from concurrent writers a DataNode dies (the writes go on: the WAL pipeline drops it)
//! and then a region server is killed with SIGKILL: the master recovers the lease on its
//! open WAL segment, splits it, reopens its regions on the other server, and every
//! acknowledged row is there once, in order.

mod support;

use bytes::Bytes;
use cellar_client::{FamilySchema, TableSchema};
use cellar_server::coord::zk::{ZkCoordination, ZkOptions};
use cellar_server::coord::Coordination;
use cellar_testing::{MiniDfs, ZooKeeper};
use std::time::{Duration, Instant};
use support::cluster::{assert_writer_rows, client, Writers, TABLE};
use support::{wait_for, Server};

#[test]
fn a_cluster_on_hdfs_keeps_every_acknowledged_row_through_a_datanode_and_a_server_death() {
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    // Four DataNodes: when one dies, every new block still finds three live ones.
    let mut dfs = MiniDfs::start(4).expect("start MiniDFS");
    let root = format!("{}/cellar", dfs.url);
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = tmp.path().join("cellar.toml");
    std::fs::write(
        &config,
        "[cluster]\nzookeeper_session_timeout_ms = 2000\n[split]\nauto = false\n",
    )
    .expect("write config");
    let args = ["--zk", zk.addr.as_str(), "--root", root.as_str()];
    let data = tmp.path().join("unused");
    let master = Server::start_role("master", &data, Some(&config), &args);
    let mut servers: Vec<Server> = (0..2)
        .map(|_| Server::start_role("regionserver", &data, Some(&config), &args))
        .collect();
    let zk_view = ZkCoordination::connect(ZkOptions::new(&zk.addr)).expect("read ZooKeeper");
    wait_for(Duration::from_secs(30), || {
        (zk_view.live_servers().ok()?.len() == 2).then_some(())
    })
    .expect("two region servers registered");

    let c = client(&master.native);
    let splits: Vec<Bytes> = (1..10).map(|d| Bytes::from(d.to_string())).collect();
    c.admin()
        .create_table(
            TableSchema::new(TABLE, vec![FamilySchema::new("f")]),
            splits,
        )
        .expect("create table on HDFS");
    let placed = wait_for(Duration::from_secs(30), || {
        let regions = c.admin().list_regions(TABLE).ok()?;
        regions
            .iter()
            .all(|r| !r.server.is_empty())
            .then_some(regions)
    })
    .expect("every region open");
    let victim = servers[0].native.clone();
    assert!(
        placed.iter().any(|r| r.server == victim),
        "the first server holds regions"
    );

    let writers = Writers::start(&master.native, 2);
    writers.wait_progress(0, 200, "at the start");
    c.admin().flush(TABLE).expect("flush to HDFS");

    // A DataNode dies mid-write: the pipelines drop it and the writes go on.
    dfs.stop_datanode(0).expect("stop a DataNode");
    let before = writers.acked();
    writers.wait_progress_or(before, 200, "after a DataNode died", || {
        servers
            .iter()
            .map(|s| s.output())
            .collect::<Vec<_>>()
            .join("\n----\n")
    });

    // The region server dies: its WAL lease is recovered, the log split, its regions reopened.
    let killed_at = Instant::now();
    servers.remove(0).kill9();
    let moved = wait_for(Duration::from_secs(90), || {
        let regions = c.admin().list_regions(TABLE).ok()?;
        regions
            .iter()
            .all(|r| r.server == servers[0].native)
            .then_some(())
    });
    assert!(
        moved.is_some(),
        "regions reopened on the surviving server; the master:\n{}\n---- the server:\n{}",
        master.output(),
        servers[0].output()
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
