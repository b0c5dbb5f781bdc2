//! The active master dies with work in flight: a real ZooKeeper, two `cellar master`s and two
//! `cellar regionserver`s on a local root. Writers load a table whose regions split by
//! themselves (a small split size) while a create of a table with 600 regions runs;
//! the active master is killed with SIGKILL in the middle. The backup takes over and then:
//! the big table either exists whole (every region open, the key space covered once) or not
//! at all (and can be created); the loaded table's regions cover its key space exactly once,
//! each open; writers given both masters carry on; every acknowledged row is there once, in
//! order.

mod support;

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{FamilySchema, RegionLocation, TableSchema};
use cellar_server::coord::zk::{ZkCoordination, ZkOptions};
use cellar_server::coord::Coordination;
use cellar_testing::ZooKeeper;
use std::time::Duration;
use support::cluster::{assert_writer_rows, client, Writers, TABLE};
use support::{wait_for, Server};

const BIG: &str = "created_during_failover";
/// Regions of the table created while the master dies: enough that the create takes a while.
const REGIONS: usize = 600;

/// Regions in key order that cover the whole key space exactly once, each on a server.
fn assert_covered(regions: &[RegionLocation], what: &str) {
    assert!(!regions.is_empty(), "{what}: no regions");
    assert!(
        regions[0].start_key.is_empty(),
        "{what}: the first region starts the table"
    );
    for w in regions.windows(2) {
        assert_eq!(w[0].end_key, w[1].start_key, "{what}: a hole or an overlap");
    }
    assert!(
        regions[regions.len() - 1].end_key.is_empty(),
        "{what}: the last region ends the table"
    );
    for r in regions {
        assert!(
            !r.server.is_empty(),
            "{what}: region {} is open nowhere",
            r.name
        );
    }
}

/// Waits until the table's regions all have a server (the new master confirms each).
fn settled(c: &Client, table: &str) -> Vec<RegionLocation> {
    wait_for(Duration::from_secs(60), || {
        let regions = c.admin().list_regions(table).ok()?;
        regions
            .iter()
            .all(|r| !r.server.is_empty())
            .then_some(regions)
    })
    .unwrap_or_else(|| panic!("{table}: regions not all open within a minute"))
}

#[test]
fn a_master_killed_during_a_create_and_splits_leaves_everything_whole() {
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = format!("file://{}", tmp.path().join("root").display());
    let config = tmp.path().join("cellar.toml");
    std::fs::write(
        &config,
        "[cluster]\nzookeeper_session_timeout_ms = 2000\n\
         [split]\ninitial_bytes = 32768\nmax_bytes = 65536\ncheck_interval_ms = 100\n",
    )
    .expect("write config");
    let args = ["--zk", zk.addr.as_str(), "--root", root.as_str()];
    let data = tmp.path().join("unused");
    let mut master_a = Server::start_role("master", &data, Some(&config), &args);
    let mut master_b =
        Server::spawn_role("master", &data, Some(&config), ["127.0.0.1:0"; 3], &args);
    let servers: Vec<Server> = (0..2)
        .map(|_| Server::start_role("regionserver", &data, Some(&config), &args))
        .collect();
    let zk_view = ZkCoordination::connect(ZkOptions::new(&zk.addr)).expect("read ZooKeeper");
    let backup = wait_for(Duration::from_secs(30), || {
        let b = zk_view.backup_masters().ok()?;
        (b.len() == 1).then(|| b[0].native_addr.clone())
    })
    .expect("a backup master registered");
    wait_for(Duration::from_secs(30), || {
        (zk_view.live_servers().ok()?.len() == 2).then_some(())
    })
    .expect("two region servers registered");

    let masters = format!("{},{}", master_a.native, backup);
    let c = client(&masters);
    let splits: Vec<Bytes> = (1..4).map(|d| Bytes::from(d.to_string())).collect();
    c.admin()
        .create_table(
            TableSchema::new(TABLE, vec![FamilySchema::new("f")]),
            splits,
        )
        .expect("create the loaded table");
    let writers = Writers::start(&masters, 2);
    writers.wait_progress(0, 400, "before the failover");
    let _ = c.admin().flush(TABLE);
    // Splits under way (the small split size), then a long create, then the kill.
    wait_for(Duration::from_secs(30), || {
        let _ = c.admin().flush(TABLE);
        (c.admin().list_regions(TABLE).ok()?.len() > 4).then_some(())
    })
    .expect("regions split by themselves");
    let creator = {
        let masters = masters.clone();
        std::thread::spawn(move || {
            let c = client(&masters);
            let keys: Vec<Bytes> = (1..REGIONS)
                .map(|i| Bytes::from(format!("{i:04}")))
                .collect();
            c.admin()
                .create_table(TableSchema::new(BIG, vec![FamilySchema::new("f")]), keys)
                .is_ok()
        })
    };
    std::thread::sleep(Duration::from_millis(150));
    master_a.kill9();
    let created_before_kill = creator.join().expect("creator thread");
    master_b.wait_listening();

    // The create: all or nothing (a retried create through the list may also have made it).
    let c = client(&master_b.native);
    let survived = c.admin().table_exists(BIG).expect("exists");
    if survived {
        let regions = settled(&c, BIG);
        assert_eq!(regions.len(), REGIONS, "the created table has every region");
        assert_covered(&regions, BIG);
    } else {
        assert!(!created_before_kill, "an acknowledged create left no table");
        // Regions the dead master opened for it are closed again by the new one.
        let leftovers = wait_for(Duration::from_secs(30), || {
            let open: usize = servers
                .iter()
                .map(|s| {
                    c.admin()
                        .server_status(&s.native)
                        .map(|st| {
                            st.servers
                                .iter()
                                .flat_map(|l| l.regions.iter())
                                .filter(|r| r.starts_with(BIG))
                                .count()
                        })
                        .unwrap_or(usize::MAX)
                })
                .sum();
            (open == 0).then_some(())
        });
        assert!(
            leftovers.is_some(),
            "regions of the uncommitted create still open"
        );
        let keys: Vec<Bytes> = (1..REGIONS)
            .map(|i| Bytes::from(format!("{i:04}")))
            .collect();
        c.admin()
            .create_table(TableSchema::new(BIG, vec![FamilySchema::new("f")]), keys)
            .expect("the create can be made again");
        assert_covered(&settled(&c, BIG), BIG);
    }

    // The splits: the key space covered once, every region open; the writers went on.
    let before = writers.acked();
    writers.wait_progress(before, 300, "after the master failed over");
    let acked = writers.stop();
    let regions = settled(&c, TABLE);
    assert_covered(&regions, TABLE);
    assert_writer_rows(&c, &acked, "after the master died during splits");
    println!(
        "master killed mid-create (acknowledged: {created_before_kill}, committed: {survived}); {} regions of the loaded table, {} rows acknowledged, all present",
        regions.len(),
        acked.len()
    );
    assert!(master_b.terminate().success(), "{}", master_b.output());
}
