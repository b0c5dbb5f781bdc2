//! Snapshots on a real cluster (ZooKeeper, a master and two region servers on a `file://`
//! root), and a standalone server killed with SIGKILL while it takes snapshots.
//!
//! Cluster: a snapshot taken while writers write (each region flushed and named by its own
//! server) clones into a table holding every row acknowledged before it; a region server and
//! then the active master are killed and the snapshot is still listed and clones through the
//! backup master; the source is major-compacted and dropped and both clones still read every
//! row; the archive keeps what clones reference.
//! Standalone: snapshots in a loop are cut by kill -9; after the restart every listed snapshot
//! clones, and its clone holds only rows that were written.

mod support;

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{FamilySchema, RowMutation, Scan, TableSchema};
use cellar_server::coord::zk::{ZkCoordination, ZkOptions};
use cellar_server::coord::Coordination;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::cluster::{client, create_spread_table, Writers, TABLE};
use support::{wait_for, Server};

fn rows(c: &Client, table: &str) -> BTreeSet<Bytes> {
    let mut s = c.table(table).scan(Scan::new().caching(500));
    let mut out = BTreeSet::new();
    while let Some(r) = s.next_row().expect("scan") {
        out.insert(r.row.clone());
    }
    out
}

#[test]
fn snapshots_on_a_cluster_clone_every_acknowledged_row_through_a_kill_and_a_drop() {
    let zk = cellar_testing::ZooKeeper::start(200).expect("start ZooKeeper");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = format!("file://{}", tmp.path().join("root").display());
    let config = tmp.path().join("cellar.toml");
    std::fs::write(
        &config,
        "[cluster]\nzookeeper_session_timeout_ms = 3000\nbalancer_period_ms = 600000\n\
         [split]\nauto = false\n",
    )
    .expect("write config");
    let args = ["--zk", zk.addr.as_str(), "--root", root.as_str()];
    let data = tmp.path().join("unused");
    let mut master = Server::start_role("master", &data, Some(&config), &args);
    let backup_master =
        Server::spawn_role("master", &data, Some(&config), ["127.0.0.1:0"; 3], &args);
    let mut servers: Vec<Server> = (0..2)
        .map(|_| Server::start_role("regionserver", &data, Some(&config), &args))
        .collect();
    let logs = |servers: &[Server]| {
        let mut out = String::new();
        for (i, s) in servers.iter().enumerate() {
            out += &format!("region server {i}:\n{}\n", s.output());
        }
        out + &format!("backup master:\n{}\n", backup_master.output())
    };
    let zk_view = ZkCoordination::connect(ZkOptions::new(&zk.addr)).expect("read ZooKeeper");
    let backup = wait_for(Duration::from_secs(30), || {
        let b = zk_view.backup_masters().ok()?;
        (b.len() == 1).then(|| b[0].native_addr.clone())
    })
    .expect("a backup master registered");
    let masters = format!("{},{}", master.native, backup);
    let c = client(&masters);
    let open = create_spread_table(&c, 2).unwrap_or_else(|e| panic!("{e}\n{}", logs(&servers)));

    let writers = Writers::start(&masters, 3);
    writers.wait_progress_or(0, 400, "before the snapshot", || logs(&servers));
    // Rows acknowledged before the snapshot began (the writers keep going).
    let acked_before = writers.acked_rows();
    let before = acked_before.len();
    let snap_started = Instant::now();
    c.admin()
        .snapshot(TABLE, "s1", false)
        .unwrap_or_else(|e| panic!("snapshot: {e}\n{}", logs(&servers)));
    eprintln!(
        "snapshot of 5 regions on 2 servers under load: {:?}",
        snap_started.elapsed()
    );
    writers.wait_progress_or(before, 200, "after the snapshot", || logs(&servers));

    // Kill the server of the first region; the snapshot does not depend on it.
    let victim = open[0].server.clone();
    let i = servers
        .iter()
        .position(|s| s.native == victim)
        .expect("victim");
    servers[i].kill9();
    let at = writers.acked();
    writers.wait_progress_or(at, 200, "after the kill", || logs(&servers));
    // And the active master: the backup takes over and finds the snapshot in the root.
    master.kill9();
    let at = writers.acked();
    writers.wait_progress_or(at, 100, "after the master's kill", || logs(&servers));
    let acked = writers.stop();
    let listed = wait_for(Duration::from_secs(30), || c.admin().list_snapshots().ok())
        .unwrap_or_else(|| panic!("the new master lists snapshots\n{}", logs(&servers)));
    assert_eq!(
        listed.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["s1"],
        "the snapshot survives the master's failover"
    );

    c.admin()
        .clone_snapshot("s1", "c1")
        .unwrap_or_else(|e| panic!("clone: {e}\n{}", logs(&servers)));
    let cloned = rows(&c, "c1");
    let missing: Vec<&Bytes> = acked_before.difference(&cloned).take(5).collect();
    assert!(
        missing.is_empty(),
        "rows acknowledged before the snapshot ({before}) missing from its clone: {missing:?}"
    );
    assert!(
        cloned.is_subset(&acked) || cloned.difference(&acked).count() <= 3,
        "the clone holds only rows writers sent (at most one unacknowledged per writer)"
    );

    // The source compacts and goes; the clone and a second snapshot's clone stay whole.
    // Refused while a region of the killed server is still being reopened (as HBase's
    // snapshot fails on a region in transition): the caller tries again.
    wait_for(Duration::from_secs(60), || {
        c.admin().snapshot(TABLE, "s2", false).ok()
    })
    .unwrap_or_else(|| {
        panic!(
            "a second snapshot once every region is open\n{}",
            logs(&servers)
        )
    });
    let all = rows(&c, TABLE);
    c.admin().flush(TABLE).expect("flush");
    c.admin().compact(TABLE, true).expect("major compaction");
    c.admin().disable_table(TABLE).expect("disable");
    c.admin().delete_table(TABLE).expect("drop");
    c.admin()
        .clone_snapshot("s2", "c2")
        .expect("clone the second snapshot");
    assert_eq!(
        rows(&c, "c2"),
        all,
        "the second clone holds the table as it was"
    );
    assert_eq!(rows(&c, "c1"), cloned, "the first clone is unchanged");
    c.admin().delete_snapshot("s1").expect("delete s1");
    c.admin().delete_snapshot("s2").expect("delete s2");
    assert!(c.admin().list_snapshots().expect("list").is_empty());
    assert_eq!(rows(&c, "c1"), cloned, "clones outlive their snapshots");
    assert_eq!(rows(&c, "c2"), all);
    drop(servers);
}

#[test]
fn snapshots_cut_by_kill_9_are_whole_or_absent() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mut server = Server::start_in(&data, None);
    let c = support::connect_blocking(&server.native);
    c.admin()
        .create_table(
            TableSchema::new("t", vec![FamilySchema::new("f")]),
            vec![Bytes::from_static(b"m")],
        )
        .expect("create");
    let mut written = BTreeSet::new();
    for i in 0..400 {
        let row = Bytes::from(format!("{}{i:04}", if i % 2 == 0 { "a" } else { "n" }));
        c.table("t")
            .put(RowMutation::new(row.clone()).put(
                b"f",
                b"q",
                cellar_client::LATEST_TIMESTAMP,
                "v",
            ))
            .expect("put");
        written.insert(row);
    }
    // A client takes snapshots back to back; the server dies under it.
    let native = server.native.clone();
    let snapper = std::thread::spawn(move || {
        let c = support::connect_blocking(&native);
        let mut taken = 0;
        for i in 0..10_000 {
            match c.admin().snapshot("t", &format!("s{i}"), false) {
                Ok(()) => taken += 1,
                Err(e) => {
                    eprintln!("snapshot s{i}: {e}");
                    break;
                }
            }
        }
        taken
    });
    std::thread::sleep(Duration::from_millis(300));
    server.kill9();
    let taken = snapper.join().expect("snapshot thread");
    assert!(taken > 0, "some snapshots were taken before the kill");
    let server = Server::start_in(&data, None);
    let c = support::connect_blocking(&server.native);
    let listed = c.admin().list_snapshots().expect("list");
    assert!(
        listed.len() >= taken,
        "{} listed, {taken} acknowledged",
        listed.len()
    );
    // Every listed snapshot clones, whole.
    for s in listed.iter().rev().take(3) {
        let clone = format!("c_{}", s.name);
        c.admin().clone_snapshot(&s.name, &clone).expect("clone");
        assert_eq!(rows(&c, &clone), written, "snapshot {} is whole", s.name);
    }
}
