//! A cluster of real processes on 127.0.0.1: a real ZooKeeper, two `cellar master`s (one
//! active, one waiting) and three `cellar regionserver`s on one root. The native client
//! creates a pre-split table through the active master and reads and writes across the
//! servers; then, in turn:
//!
//! - under load from concurrent writers, regions split by themselves (a small split size),
//!   one is split by hand and one moved, and the balancer evens them out;
//! - still under load, a region server is killed with SIGKILL, three rounds with a new one
//!   joining after each: its regions come back on the others (its log is split and
//!   replayed), every acknowledged row is there, none is repeated or out of order, and the
//!   time until every region took writes is measured;
//! - the active master is killed with SIGKILL: the backup takes over, serves meta and DDL,
//!   keeps the balance switch as it was, and the data is all there;
//! - a region server is paused (SIGSTOP) past its ZooKeeper session: its regions move, and
//!   when it wakes (SIGCONT) it finds itself fenced and exits without serving again.
//!
//! The root is on local disk here; `standalone_hdfs.rs` and `hdfs_fs.rs` cover HDFS.

mod support;

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_server::coord::zk::{ZkCoordination, ZkOptions};
use cellar_server::coord::Coordination;
use cellar_testing::ZooKeeper;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::cluster::{assert_writer_rows, client, is_numbered, Writers, TABLE};
use support::{wait_for, Server};
/// ZooKeeper session timeout of the servers: how soon a dead server is noticed.
const SESSION_MS: u64 = 2000;

fn cluster_args<'a>(zk: &'a str, root: &'a str) -> Vec<&'a str> {
    vec!["--zk", zk, "--root", root]
}

fn row(i: usize) -> Bytes {
    // Spread over the split points 1..9.
    Bytes::from(format!("{}-row-{i:05}", i % 10))
}

fn put(c: &Client, i: usize) -> cellar_client::Result<()> {
    c.table(TABLE).put(RowMutation::new(row(i)).put(
        b"f",
        b"q",
        cellar_client::LATEST_TIMESTAMP,
        format!("value-{i}"),
    ))
}

/// The numbered rows of the table, in order.
fn scan_all(c: &Client) -> cellar_client::Result<Vec<Bytes>> {
    let mut s = c.table(TABLE).scan(Scan::new().caching(100));
    let mut rows = Vec::new();
    while let Some(r) = s.next_row()? {
        if is_numbered(&r.row) {
            rows.push(r.row.clone());
        }
    }
    Ok(rows)
}

/// Asserts the table holds exactly rows `0..n`, in order, each with its value.
fn assert_rows(c: &Client, n: usize, when: &str) {
    let got = wait_for(Duration::from_secs(60), || scan_all(c).ok())
        .unwrap_or_else(|| panic!("{when}: the table could not be scanned within a minute"));
    let mut want: Vec<Bytes> = (0..n).map(row).collect();
    want.sort();
    let missing: Vec<&Bytes> = want.iter().filter(|w| !got.contains(w)).collect();
    assert!(missing.is_empty(), "{when}: rows missing: {missing:?}");
    assert_eq!(got.len(), want.len(), "{when}: row count");
    assert!(
        got == want,
        "{when}: rows missing, repeated or out of order"
    );
    let t = c.table(TABLE);
    for i in (0..n).step_by(37) {
        let r = t.get(Get::new(row(i))).expect("get");
        assert_eq!(
            r.value(b"f", b"q").map(|v| v.to_vec()),
            Some(format!("value-{i}").into_bytes()),
            "{when}: value of row {i}"
        );
    }
}

/// The servers (native addresses) the table's regions are on.
fn servers_of(c: &Client) -> Vec<String> {
    c.admin()
        .list_regions(TABLE)
        .expect("list regions")
        .into_iter()
        .map(|r| r.server)
        .collect()
}

/// Writes rows `next..next + 10` (one into every region, `next` a multiple of 10), each
/// until it succeeds; how long the slowest region took to take writes again.
fn time_until_every_region_writes(c: &Client, next: &mut usize, limit: Duration) -> Duration {
    assert_eq!(*next % 10, 0);
    let started = Instant::now();
    let mut pending: BTreeSet<usize> = (*next..*next + 10).collect();
    while !pending.is_empty() {
        assert!(
            started.elapsed() < limit,
            "rows {pending:?} could not be written within {limit:?}"
        );
        for i in pending.clone() {
            if put(c, i).is_ok() {
                pending.remove(&i);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    *next += 10;
    started.elapsed()
}

fn stop_signal(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(ok.success(), "kill {signal} {pid}");
}

fn write_config(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("cellar.toml");
    std::fs::write(
        &path,
        format!(
            "[cluster]\nzookeeper_session_timeout_ms = {SESSION_MS}\nbalancer_period_ms = 1000\n\
             [split]\ninitial_bytes = 65536\nmax_bytes = 262144\ncheck_interval_ms = 200\n"
        ),
    )
    .expect("write config");
    path
}

#[test]
fn a_cluster_serves_survives_a_region_server_kill_a_master_kill_and_fences_a_paused_server() {
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root_dir = tmp.path().join("root");
    let root = format!("file://{}", root_dir.display());
    let config = write_config(tmp.path());
    let args = cluster_args(&zk.addr, &root);
    let data = tmp.path().join("unused");

    let mut master_a = Server::start_role("master", &data, Some(&config), &args);
    let mut master_b =
        Server::spawn_role("master", &data, Some(&config), ["127.0.0.1:0"; 3], &args);
    let waiting = wait_for(Duration::from_secs(60), || {
        master_b
            .output()
            .contains("backup master: waiting to take over")
            .then_some(())
    });
    assert!(waiting.is_some(), "second master:\n{}", master_b.output());
    assert!(!master_b.output().contains("listening native="));
    let mut region_servers: Vec<Server> = (0..3)
        .map(|_| Server::start_role("regionserver", &data, Some(&config), &args))
        .collect();
    let zk_view = ZkCoordination::connect(ZkOptions::new(&zk.addr)).expect("read ZooKeeper");
    let live = wait_for(Duration::from_secs(30), || {
        let l = zk_view.live_servers().ok()?;
        (l.len() == 3).then_some(l)
    })
    .expect("three region servers registered");
    let natives: BTreeSet<String> = live.iter().map(|s| s.native_addr.clone()).collect();
    assert_eq!(
        natives,
        region_servers.iter().map(|s| s.native.clone()).collect(),
        "the registered region servers are the processes started"
    );
    assert_eq!(
        zk_view
            .active_master()
            .expect("read")
            .map(|m| m.native_addr),
        Some(master_a.native.clone())
    );
    // Each server has its own WAL directory under the root.
    let wal_dirs = std::fs::read_dir(root_dir.join("wal"))
        .expect("wal dir")
        .count();
    assert_eq!(
        wal_dirs, 4,
        "one WAL directory per region server and the master"
    );

    // Create, write, read across the servers.
    let c = client(&master_a.native);
    let splits: Vec<Bytes> = (1..10).map(|d| Bytes::from(d.to_string())).collect();
    c.admin()
        .create_table(
            TableSchema::new(TABLE, vec![FamilySchema::new("f")]),
            splits,
        )
        .expect("create table through the master");
    let placed = wait_for(Duration::from_secs(30), || {
        let s = servers_of(&c);
        s.iter().all(|a| natives.contains(a)).then_some(s)
    })
    .expect("every region on a region server");
    assert_eq!(placed.len(), 10);
    let used: BTreeSet<&String> = placed.iter().collect();
    assert_eq!(
        used.len(),
        3,
        "regions spread over the three servers: {placed:?}"
    );
    let mut n = 600;
    for i in 0..n {
        put(&c, i).unwrap_or_else(|e| panic!("put {i}: {e}"));
    }
    assert_rows(&c, n, "after writing through the cluster");

    // 1. Under load: splits by themselves and by hand, a move, the balancer.
    let writers = Writers::start(&master_a.native, 3);
    writers.wait_progress(0, 300, "before the first flush");
    c.admin().flush(TABLE).expect("flush");
    let split_by_itself = wait_for(Duration::from_secs(60), || {
        let _ = c.admin().flush(TABLE);
        (servers_of(&c).len() > 10).then_some(())
    });
    assert!(split_by_itself.is_some(), "no region split by itself");
    c.admin()
        .split(TABLE, Some(b"5-w"))
        .expect("split by hand at 5-w");
    let regions = c.admin().list_regions(TABLE).expect("regions");
    assert!(
        regions.iter().any(|r| &r.start_key[..] == b"5-w"),
        "a region starts at the split row"
    );
    // Regions may still split by themselves after the flushes above: a region listed here can
    // be gone (split) by the time it is moved or looked up. Try again with a fresh listing,
    // a bounded number of times.
    let mut moved = None;
    for _ in 0..20 {
        let regions = c.admin().list_regions(TABLE).expect("regions");
        let moving = regions[0].clone();
        let target = natives
            .iter()
            .find(|a| **a != moving.server)
            .expect("another server")
            .clone();
        match c
            .admin()
            .move_region(&moving.region_id.to_string(), Some(&target))
        {
            Ok(()) => {}
            Err(e) if e.to_string().contains("no region") => {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            Err(e) => panic!("move a region: {e}"),
        }
        let moved_to = c
            .admin()
            .list_regions(TABLE)
            .expect("regions")
            .into_iter()
            .find(|r| r.region_id == moving.region_id)
            .map(|r| r.server);
        match moved_to {
            // Split after the move: its daughters say nothing of where it went.
            None => continue,
            Some(server) => {
                moved = Some((server, target));
                break;
            }
        }
    }
    let (moved_to, target) = moved.expect("a region moved and still there to look up");
    assert_eq!(moved_to, target, "the region is on the server it moved to");
    c.admin().balance().expect("balancer");
    let mut counts: std::collections::BTreeMap<String, usize> =
        natives.iter().map(|a| (a.clone(), 0)).collect();
    for a in servers_of(&c) {
        *counts.entry(a).or_default() += 1;
    }
    let (most, least) = (
        counts.values().max().copied().unwrap_or(0),
        counts.values().min().copied().unwrap_or(0),
    );
    assert!(
        most <= least + 1,
        "the balancer evened the regions: {counts:?}"
    );
    println!(
        "under load: {} regions after splits, per server {counts:?}",
        servers_of(&c).len()
    );
    let before_kill = writers.acked();
    writers.wait_progress(before_kill, 100, "after the splits and moves");

    // 2. kill -9 of a region server under load, three rounds (a new server joins after each):
    //    its regions reopen elsewhere with every row.
    let mut dead = Vec::new();
    for round in 1..=3 {
        let victim = region_servers.remove(0);
        dead.push(victim.native.clone());
        {
            let mut victim = victim;
            victim.kill9();
        }
        let unavailable = time_until_every_region_writes(&c, &mut n, Duration::from_secs(60));
        println!(
            "region server kill -9, round {round}: every region took writes again after {:.2} s (session timeout {} ms)",
            unavailable.as_secs_f64(),
            SESSION_MS
        );
        let after_kill = writers.acked();
        writers.wait_progress(after_kill, 100, "after the kill");
        let after = servers_of(&c);
        assert!(
            !after.iter().any(|s| dead.contains(s)),
            "no region left on a dead server: {after:?}"
        );
        region_servers.push(Server::start_role(
            "regionserver",
            &data,
            Some(&config),
            &args,
        ));
    }
    let acked = writers.stop();
    assert_writer_rows(
        &c,
        &acked,
        "after three region servers were killed under load",
    );
    println!("{} rows acknowledged under load, all present", acked.len());
    let wal_dirs = wait_for(Duration::from_secs(10), || {
        let names: Vec<String> = std::fs::read_dir(root_dir.join("wal"))
            .ok()?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        (names.len() == 4).then_some(names)
    });
    assert!(
        wal_dirs.is_some(),
        "the dead servers' logs were split and removed (one WAL directory per live server)"
    );
    let n_after_kill = n;

    // 3. kill -9 of the active master: the backup takes over and serves meta and DDL. A
    //    client given both masters (the backup's address is in ZooKeeper) carries on.
    let backup = zk_view.backup_masters().expect("read backup masters");
    assert_eq!(backup.len(), 1, "one backup master registered");
    let both = client(&format!("{},{}", master_a.native, backup[0].native_addr));
    // The balance switch is recorded in ZooKeeper: the next master keeps it off.
    assert!(both
        .admin()
        .balance_switch(false)
        .expect("switch the balancer off"));
    master_a.kill9();
    assert_rows(
        &both,
        n_after_kill,
        "through the master list, after the master failed over",
    );
    master_b.wait_listening();
    assert_eq!(master_b.native, backup[0].native_addr);
    let c = client(&master_b.native);
    assert_rows(&c, n_after_kill, "after the master failed over");
    assert!(
        !c.admin().status().expect("status").balancer_on,
        "the balancer stays off after the master failed over"
    );
    assert!(!c.admin().balance_switch(true).expect("switch it on again"));
    c.admin()
        .create_table(
            TableSchema::new("after_failover", vec![FamilySchema::new("f")]),
            vec![],
        )
        .expect("DDL on the new master");
    let t2 = c.table("after_failover");
    let written = wait_for(Duration::from_secs(30), || {
        t2.put(RowMutation::new(Bytes::from("r")).put(
            b"f",
            b"q",
            cellar_client::LATEST_TIMESTAMP,
            "v",
        ))
        .ok()
    });
    assert!(
        written.is_some(),
        "a table created on the new master takes writes"
    );
    assert_eq!(
        zk_view
            .active_master()
            .expect("read")
            .map(|m| m.native_addr),
        Some(master_b.native.clone())
    );

    // 4. A region server paused past its session is fenced: its regions move, and when it
    //    wakes it exits without serving.
    let paused = region_servers.remove(0);
    let paused_addr = paused.native.clone();
    stop_signal(paused.pid(), "-STOP");
    let moved = wait_for(Duration::from_secs(60), || {
        let s = servers_of(&c);
        (!s.contains(&paused_addr) && s.iter().all(|a| !a.is_empty())).then_some(())
    });
    stop_signal(paused.pid(), "-CONT");
    assert!(
        moved.is_some(),
        "regions moved off the paused server; the master:\n{}",
        master_b.output()
    );
    let mut paused = paused;
    let status = wait_for(Duration::from_secs(30), || paused.exited())
        .unwrap_or_else(|| panic!("the fenced server did not exit:\n{}", paused.output()));
    assert_eq!(status.code(), Some(75), "{}", paused.output());
    assert!(paused.output().contains("fenced"), "{}", paused.output());
    let _ = time_until_every_region_writes(&c, &mut n, Duration::from_secs(60));
    assert_rows(&c, n, "after a paused server was fenced");

    for mut s in region_servers {
        assert!(s.terminate().success(), "{}", s.output());
    }
    assert!(master_b.terminate().success(), "{}", master_b.output());
}

/// `cellar master` or `regionserver` with its arguments; its exit status and output.
fn run_to_exit(role: &str, args: &[&str]) -> (std::process::ExitStatus, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .arg(role)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--hbase-listen",
            "127.0.0.1:0",
        ])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run cellar");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status, text)
}

#[test]
fn bad_cluster_settings_are_clear_errors_at_startup() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root_a = format!("file://{}", tmp.path().join("a").display());
    let root_b = format!("file://{}", tmp.path().join("b").display());

    // No ZooKeeper named.
    let (status, out) = run_to_exit("master", &["--root", &root_a]);
    assert!(!status.success());
    assert!(out.contains("needs its ZooKeeper ensemble: --zk"), "{out}");

    // A ZooKeeper that does not answer: an error naming it, not a hang.
    let nobody = format!("127.0.0.1:{}", cellar_testing::free_port().expect("port"));
    let started = Instant::now();
    let (status, out) = run_to_exit("regionserver", &["--zk", &nobody, "--root", &root_a]);
    assert!(!status.success());
    assert!(out.contains(&nobody), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );

    println!(
        "unreachable ZooKeeper refused after {:?}",
        started.elapsed()
    );
    // A root that belongs to another cluster than the one in ZooKeeper.
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    let data = tmp.path().join("unused");
    let mut first = Server::start_role(
        "master",
        &data,
        None,
        &["--zk", &zk.addr, "--root", &root_a],
    );
    assert!(first.terminate().success(), "{}", first.output());
    let (status, out) = run_to_exit("master", &["--zk", &zk.addr, "--root", &root_b]);
    assert!(!status.success());
    assert!(out.contains("belongs to cluster"), "{out}");
    println!(
        "another cluster's root refused after {:?}",
        started.elapsed()
    );
    // Its own root again is fine.
    let mut again = Server::start_role(
        "master",
        &data,
        None,
        &["--zk", &zk.addr, "--root", &root_a],
    );
    assert!(again.terminate().success(), "{}", again.output());
}
