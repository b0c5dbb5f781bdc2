//! The active master's ZooKeeper session expires while it is paused: a real ZooKeeper, two
//! `cellar master`s and one `cellar regionserver` on a local root. The active master is
//! stopped with SIGSTOP past its session timeout; the backup takes over and serves (writes,
//! DDL). The old master is then resumed (SIGCONT): it must not answer location, status or
//! DDL calls as master (refused, or it has exited), it must exit (as HBase's HMaster aborts),
//! it must not have changed meta or opened regions, and every acknowledged write is there
//! through the new master.

mod support;

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{ClientConfig, FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_server::coord::zk::{ZkCoordination, ZkOptions};
use cellar_server::coord::Coordination;
use cellar_testing::ZooKeeper;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};
use support::cluster::client;
use support::{wait_for, Server};

const TABLE: &str = "expiry";
/// The servers' ZooKeeper session timeout.
const SESSION_MS: u64 = 2000;

fn signal(pid: u32, which: &str) {
    let ok = Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(ok.success(), "kill {which} {pid}");
}

fn row(i: usize) -> Bytes {
    Bytes::from(format!("{}-row-{i:05}", i % 4))
}

/// Writes rows `from..to` through `c`, each until acknowledged (bounded in time).
fn write_rows(c: &Client, from: usize, to: usize, acked: &mut BTreeSet<Bytes>) {
    let t = c.table(TABLE);
    for i in from..to {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = RowMutation::new(row(i)).put(
                b"f",
                b"q",
                cellar_client::LATEST_TIMESTAMP,
                format!("value-{i}"),
            );
            if t.put(m).is_ok() {
                acked.insert(row(i));
                break;
            }
            assert!(Instant::now() < deadline, "row {i} not written in a minute");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A client of `addr` alone that does not retry: what that one server answers.
fn direct(addr: &str) -> Option<Client> {
    let config = ClientConfig {
        rpc_timeout: Duration::from_secs(5),
        retries: 0,
        ..ClientConfig::default()
    };
    Client::connect_with(addr, config).ok()
}

/// The regions (names) the region server holds, by its own STATUS.
fn regions_on(c: &Client, server: &str) -> BTreeSet<String> {
    c.admin()
        .server_status(server)
        .expect("region server status")
        .servers
        .iter()
        .flat_map(|l| l.regions.iter().cloned())
        .collect()
}

#[test]
fn a_master_whose_session_expired_steps_down_and_exits_without_touching_meta() {
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = format!("file://{}", tmp.path().join("root").display());
    let config = tmp.path().join("cellar.toml");
    std::fs::write(
        &config,
        format!(
            "[cluster]\nzookeeper_session_timeout_ms = {SESSION_MS}\nbalancer_period_ms = 500\n"
        ),
    )
    .expect("write config");
    let args = ["--zk", zk.addr.as_str(), "--root", root.as_str()];
    let data = tmp.path().join("unused");
    let mut old = Server::start_role("master", &data, Some(&config), &args);
    let mut new = Server::spawn_role("master", &data, Some(&config), ["127.0.0.1:0"; 3], &args);
    let mut rs = Server::start_role("regionserver", &data, Some(&config), &args);
    let zk_view = ZkCoordination::connect(ZkOptions::new(&zk.addr)).expect("read ZooKeeper");
    wait_for(Duration::from_secs(60), || {
        (zk_view.backup_masters().ok()?.len() == 1 && zk_view.live_servers().ok()?.len() == 1)
            .then_some(())
    })
    .expect("a backup master and a region server registered");

    let c = client(&old.native);
    let splits: Vec<Bytes> = (1..4).map(|d| Bytes::from(d.to_string())).collect();
    c.admin()
        .create_table(
            TableSchema::new(TABLE, vec![FamilySchema::new("f")]),
            splits,
        )
        .expect("create the table");
    let mut acked = BTreeSet::new();
    write_rows(&c, 0, 200, &mut acked);

    // The active master is paused past its session: the backup takes over.
    signal(old.pid(), "-STOP");
    new.wait_listening();
    let took_over = wait_for(Duration::from_secs(60), || {
        let active = zk_view.active_master().ok()??;
        (active.native_addr == new.native).then_some(())
    });
    let c = client(&new.native);
    let served = took_over.is_some() && {
        write_rows(&c, 200, 400, &mut acked);
        c.admin()
            .create_table(
                TableSchema::new("after_takeover", vec![FamilySchema::new("f")]),
                vec![],
            )
            .is_ok()
    };
    let tables_before: BTreeSet<String> = c
        .admin()
        .list_tables()
        .expect("list tables")
        .into_iter()
        .map(|t| t.schema.name)
        .collect();
    let regions_before = c.admin().list_regions(TABLE).expect("list regions");
    signal(old.pid(), "-CONT");
    assert!(
        served,
        "the backup master took over and served:\n{}",
        new.output()
    );

    // At once: the old master answers nothing as master (or is gone).
    let mut answered = Vec::new();
    let mut refusals = Vec::new();
    let mut note = |what: &str, r: Result<String, cellar_client::Error>| match r {
        Ok(how) => answered.push(format!("{what} ({how})")),
        Err(e) => refusals.push(format!("{what}: {e}")),
    };
    match direct(&old.native) {
        None => refusals.push("connect: refused".to_string()),
        Some(d) => {
            let a = d.admin();
            note(
                "locations",
                a.list_regions(TABLE)
                    .map(|r| format!("{} regions", r.len())),
            );
            // A read locates its row through the master it was given.
            note(
                "a location",
                d.table(TABLE)
                    .get(Get::new(row(1)))
                    .map(|_| "a read found its region".into()),
            );
            note("the cluster status", a.status().map(|_| String::new()));
            note(
                "its status",
                a.server_status(&old.native).map(|_| String::new()),
            );
            note(
                "a create",
                a.create_table(
                    TableSchema::new("from_old_master", vec![FamilySchema::new("f")]),
                    vec![],
                )
                .map(|()| String::new()),
            );
        }
    }
    println!("the old master after SIGCONT: {refusals:#?}");
    assert!(
        answered.is_empty(),
        "the master whose session expired still answered as master: {answered:?}\n{}",
        old.output()
    );

    // It exits (a supervisor would restart it as a backup), naming why.
    let status = wait_for(Duration::from_secs(30), || old.exited());
    assert!(
        status.is_some(),
        "the old master did not exit after its session expired:\n{}",
        old.output()
    );
    assert_eq!(status.and_then(|s| s.code()), Some(75), "{}", old.output());
    assert!(
        old.output().contains("stepped down"),
        "the old master says why it stopped:\n{}",
        old.output()
    );

    // Meta is as the new master left it: no table from the old one, the regions unchanged,
    // and the region server holds exactly the regions meta places there.
    let tables_after: BTreeSet<String> = c
        .admin()
        .list_tables()
        .expect("list tables")
        .into_iter()
        .map(|t| t.schema.name)
        .collect();
    assert_eq!(
        tables_after, tables_before,
        "tables changed by the old master"
    );
    assert!(!tables_after.contains("from_old_master"));
    let regions_after = c.admin().list_regions(TABLE).expect("list regions");
    let names = |rs: &[cellar_client::RegionLocation]| -> Vec<(String, String)> {
        rs.iter()
            .map(|r| (r.name.clone(), r.server.clone()))
            .collect()
    };
    assert_eq!(
        names(&regions_after),
        names(&regions_before),
        "regions moved"
    );
    let mut in_meta: BTreeSet<String> = regions_after.iter().map(|r| r.name.clone()).collect();
    in_meta.extend(
        c.admin()
            .list_regions("after_takeover")
            .expect("list regions")
            .into_iter()
            .map(|r| r.name),
    );
    assert_eq!(
        regions_on(&c, &rs.native),
        in_meta,
        "regions open on the region server"
    );

    // Every acknowledged write, through the new master.
    let mut s = c.table(TABLE).scan(Scan::new().caching(500));
    let mut seen = BTreeSet::new();
    while let Some(r) = s.next_row().expect("scan") {
        seen.insert(r.row.clone());
    }
    let missing: Vec<&Bytes> = acked.difference(&seen).take(5).collect();
    assert!(missing.is_empty(), "acknowledged rows missing: {missing:?}");
    let got = c.table(TABLE).get(Get::new(row(7))).expect("get");
    assert_eq!(
        got.value(b"f", b"q").map(|v| v.to_vec()),
        Some(b"value-7".to_vec())
    );

    assert!(rs.terminate().success(), "{}", rs.output());
    assert!(new.terminate().success(), "{}", new.output());
}
