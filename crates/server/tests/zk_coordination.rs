//! `ZkCoordination` against a real ZooKeeper (Debian's `zookeeper` package) on 127.0.0.1:
//! election, liveness, meta location and cluster id in HBase's znodes, and a clear error when
//! no ZooKeeper answers.

use cellar_server::coord::zk::{ZkCoordination, ZkOptions};
use cellar_server::coord::{
    CoordError, Coordination, Election, ServerName, ServerRecord, SessionState,
};
use cellar_testing::{free_port, ZooKeeper};
use std::time::{Duration, Instant};

fn server(port: u16) -> ServerRecord {
    ServerRecord {
        name: ServerName {
            host: "127.0.0.1".into(),
            port,
            start_code: 1_764_000_000_000 + u64::from(port),
        },
        native_addr: format!("127.0.0.1:{}", port + 100),
        http_addr: format!("127.0.0.1:{}", port + 200),
    }
}

fn connect(zk: &ZooKeeper, parent: &str) -> ZkCoordination {
    let mut options = ZkOptions::new(&zk.addr);
    options.parent = parent.to_string();
    options.session_timeout = Duration::from_secs(4);
    ZkCoordination::connect(options).expect("connect to ZooKeeper")
}

#[test]
fn an_unreachable_zookeeper_is_a_prompt_error_that_names_it() {
    let port = free_port().expect("port");
    let mut options = ZkOptions::new(&format!("127.0.0.1:{port}"));
    options.connect_timeout = Duration::from_secs(3);
    let started = Instant::now();
    let err = ZkCoordination::connect(options).expect_err("nothing listens there");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(matches!(err, CoordError::Unreachable(_)), "{err:?}");
}

#[test]
fn masters_region_servers_meta_and_cluster_id_through_zookeeper() {
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    let a = connect(&zk, "/hbase");
    let b = connect(&zk, "/hbase");
    assert_eq!(a.session(), SessionState::Connected);

    // Election: the first master is active, the second a backup that knows who is active.
    assert_eq!(a.try_become_master(&server(1)), Ok(Election::Active));
    assert_eq!(
        b.try_become_master(&server(2)),
        Ok(Election::Backup {
            active: Some(server(1))
        })
    );
    assert_eq!(b.active_master(), Ok(Some(server(1))));
    assert_eq!(a.backup_masters(), Ok(vec![server(2)]));

    // Liveness, cluster id, meta location: what one writes, the other reads.
    a.register_server(&server(1)).expect("register a");
    b.register_server(&server(2)).expect("register b");
    assert!(matches!(
        b.register_server(&server(2)),
        Err(CoordError::Conflict(_))
    ));
    assert_eq!(b.live_servers(), Ok(vec![server(1), server(2)]));
    assert_eq!(b.cluster_id(), Ok(None));
    a.publish_cluster_id("cluster-one").expect("publish id");
    assert_eq!(b.cluster_id(), Ok(Some("cluster-one".into())));
    a.publish_cluster_id("cluster-two").expect("replace id");
    assert_eq!(b.cluster_id(), Ok(Some("cluster-two".into())));
    a.publish_meta_location(&server(1)).expect("meta");
    let meta = b.meta_location().expect("read meta").expect("published");
    assert_eq!(
        (meta.name, meta.native_addr),
        (server(1).name, server(1).native_addr)
    );

    // A closed session withdraws its server and its mastership at once; the backup can
    // then take over.
    a.close();
    assert_eq!(a.session(), SessionState::Closed);
    assert!(a.live_servers().is_err(), "calls after close fail");
    assert_eq!(b.live_servers(), Ok(vec![server(2)]));
    assert_eq!(b.active_master(), Ok(None));
    assert_eq!(b.try_become_master(&server(2)), Ok(Election::Active));
    assert_eq!(
        b.backup_masters(),
        Ok(vec![]),
        "the backup node went with the win"
    );
    // Meta's location is persistent: it stays until the next master replaces it.
    assert!(b.meta_location().expect("meta").is_some());
    b.close();
}

#[test]
fn a_session_that_ends_without_close_loses_its_ephemeral_nodes() {
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    let watcher = connect(&zk, "/cellar-test");
    let doomed = connect(&zk, "/cellar-test");
    doomed.register_server(&server(7)).expect("register");
    assert_eq!(doomed.try_become_master(&server(7)), Ok(Election::Active));
    assert_eq!(watcher.live_servers(), Ok(vec![server(7)]));
    // Dropped without close: the client ends its session, as a process that exits does.
    drop(doomed);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let servers = watcher.live_servers().expect("list");
        let master = watcher.active_master().expect("master");
        if servers.is_empty() && master.is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ephemeral nodes still there: {servers:?} {master:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    watcher.close();
}

/// A master restarted at its own address after a crash finds the node its previous run left
/// (that run's session not yet expired) and takes over at once, as HBase's master does; a
/// master at another port of the same host still waits as a backup.
#[test]
fn a_master_restarted_at_its_own_address_replaces_the_node_its_crashed_run_left() {
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    let crashed = connect(&zk, "/cellar-restart");
    assert_eq!(crashed.try_become_master(&server(9)), Ok(Election::Active));
    // The crashed run's session lives on (as it does for up to the session timeout after a
    // kill -9); nothing of it answers any more.
    let other = connect(&zk, "/cellar-restart");
    assert_eq!(
        other.try_become_master(&server(10)),
        Ok(Election::Backup {
            active: Some(server(9))
        }),
        "another port of the same host is another master"
    );
    let mut again = server(9);
    again.name.start_code += 1;
    let restarted = connect(&zk, "/cellar-restart");
    assert_eq!(restarted.try_become_master(&again), Ok(Election::Active));
    assert_eq!(other.active_master(), Ok(Some(again.clone())));
    drop(crashed);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        other.active_master(),
        Ok(Some(again)),
        "the new run's node stays"
    );
    other.close();
    restarted.close();
}
