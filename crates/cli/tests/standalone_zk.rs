//! `cellar standalone --zk`: a real ZooKeeper on 127.0.0.1 and a real server process. The
//! server publishes HBase's znodes (cluster id, master, region server, meta location) that
//! point at its HBase port, refuses to start beside another active master, withdraws its
//! ephemeral nodes when it stops, and fails at once with a clear error when ZooKeeper is
//! unreachable.

mod support;

use cellar_server::coord::zk::{ZkCoordination, ZkOptions};
use cellar_server::coord::Coordination;
use cellar_testing::{free_port, ZooKeeper};
use std::process::Command;
use std::time::{Duration, Instant};
use support::Server;

fn reader(zk: &ZooKeeper) -> ZkCoordination {
    ZkCoordination::connect(ZkOptions::new(&zk.addr)).expect("connect to ZooKeeper")
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .expect("host:port")
}

#[test]
fn standalone_publishes_itself_in_zookeeper_as_hbase_does() {
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mut server = Server::start_with(&data, None, ["127.0.0.1:0"; 3], &["--zk", &zk.addr]);
    // Printed after the listening lines the start waits for.
    let announced = format!("coordination=zookeeper {}/hbase", zk.addr);
    let seen = support::wait_for(Duration::from_secs(30), || {
        server.output().contains(&announced).then_some(())
    });
    assert!(seen.is_some(), "{}", server.output());
    let zk_view = reader(&zk);

    // Cluster id: the one kept in the data directory.
    let on_disk = std::fs::read_to_string(data.join("cluster_id")).expect("cluster_id file");
    assert_eq!(zk_view.cluster_id(), Ok(Some(on_disk.trim().to_string())));

    // Master, region server and meta: this server, by its HBase port, with Cellar's addresses.
    let master = zk_view.active_master().expect("read").expect("a master");
    assert_eq!(master.name.port, port_of(&server.hbase));
    assert_eq!(master.native_addr, server.native);
    assert_eq!(Some(master.http_addr.clone()), server.http.clone());
    let servers = zk_view.live_servers().expect("rs");
    assert_eq!(servers, vec![master.clone()]);
    let meta = zk_view
        .meta_location()
        .expect("read")
        .expect("meta published");
    assert_eq!(meta.name, master.name);

    let status: serde_json::Value =
        serde_json::from_str(&server.http_get("/status")).expect("status json");
    assert_eq!(status["coordination"]["session"], "connected");
    assert_eq!(
        status["coordination"]["service"],
        format!("zookeeper {}/hbase", zk.addr)
    );

    // A second standalone on the same ensemble and parent is refused, naming the master.
    let other = tmp.path().join("other");
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args([
            "standalone",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--hbase-listen",
            "127.0.0.1:0",
            "--zk",
            &zk.addr,
            "--data-dir",
        ])
        .arg(&other)
        .output()
        .expect("cellar runs");
    assert!(!out.status.success(), "a second master started");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already has an active master") && err.contains(&master.name.to_string()),
        "{err}"
    );
    // ... and took nothing from the first.
    assert_eq!(zk_view.active_master(), Ok(Some(master.clone())));
    assert_eq!(zk_view.live_servers().map(|s| s.len()), Ok(1));

    // A clean stop withdraws the server and its mastership; meta's location stays (HBase
    // keeps it until the next master moves meta).
    assert!(server.terminate().success(), "{}", server.output());
    assert_eq!(zk_view.live_servers(), Ok(vec![]));
    assert_eq!(zk_view.active_master(), Ok(None));

    // A restart on the same data directory publishes the same cluster id again.
    let again = Server::start_with(&data, None, ["127.0.0.1:0"; 3], &["--zk", &zk.addr]);
    assert_eq!(zk_view.cluster_id(), Ok(Some(on_disk.trim().to_string())));
    let master = zk_view.active_master().expect("read").expect("a master");
    assert_eq!(master.native_addr, again.native);
    zk_view.close();
}

#[test]
fn an_unreachable_zookeeper_stops_startup_with_an_error_naming_it() {
    let port = free_port().expect("port");
    let quorum = format!("127.0.0.1:{port}");
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = tmp.path().join("cellar.toml");
    std::fs::write(&config, "[cluster]\nzookeeper_connect_timeout_ms = 2000\n").expect("config");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args([
            "standalone",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args(["--hbase-listen", "127.0.0.1:0", "--zk", &quorum, "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(tmp.path().join("data"))
        .output()
        .expect("cellar runs");
    assert!(!out.status.success());
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot reach ZooKeeper at {quorum}"))
            && err.contains("cluster.zookeeper"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "announced: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !tmp.path().join("data").exists(),
        "the data directory was touched before ZooKeeper answered"
    );

    // A malformed ensemble is a configuration error, before any connection attempt.
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["standalone", "--zk", "zk1:2181,zk2", "--data-dir"])
        .arg(tmp.path().join("data"))
        .output()
        .expect("cellar runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"zk2\" is not host:port"), "{err}");
}
