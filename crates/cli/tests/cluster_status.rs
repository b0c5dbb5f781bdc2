//! A cluster's master reports each region server's load to HBase clients (`GetClusterStatus`,
//! what `status 'simple'` prints): a real ZooKeeper, a master and two region servers; the
//! master asks each server for its regions' numbers, so request counts and memory are the
//! servers' real ones, not zeros.

mod support;

use bytes::Bytes;
use cellar_client::{FamilySchema, Get, RowMutation, TableSchema, LATEST_TIMESTAMP};
use cellar_proto::hbase;
use prost::Message;
use std::time::Duration;
use support::cluster::LocalCluster;
use support::hbase::Conn;
use support::{connect_blocking, wait_for};

#[test]
fn the_master_reports_every_region_servers_load() {
    let cluster = LocalCluster::start(2);
    let master = &cluster.master;
    let c = connect_blocking(&master.native);
    let two = wait_for(Duration::from_secs(60), || {
        (c.admin().status().ok()?.servers.len() >= 2).then_some(())
    });
    assert!(two.is_some(), "both region servers register");
    c.admin()
        .create_table(
            TableSchema::new("loads", vec![FamilySchema::new("f")]),
            vec![Bytes::from_static(b"m")],
        )
        .expect("create");
    let t = c.table("loads");
    let rows = ["a1", "a2", "a3", "z1", "z2"];
    let written = wait_for(Duration::from_secs(60), || {
        rows.iter()
            .all(|r| {
                t.put(RowMutation::new(Bytes::from_static(r.as_bytes())).put(
                    b"f",
                    b"q",
                    LATEST_TIMESTAMP,
                    b"v".to_vec(),
                ))
                .is_ok()
            })
            .then_some(())
    });
    assert!(written.is_some(), "the cluster takes writes");
    for r in rows {
        let row = t.get(Get::new(r.as_bytes().to_vec())).expect("get");
        assert!(!row.cells.is_empty(), "{r} reads back");
    }

    // Issue 46 item 5: the master counts the cluster's user tables and their regions (meta in
    // neither; it counted the one table and only its own region, meta's), and names its root
    // with the scheme.
    let s = c.admin().status().expect("status");
    assert_eq!((s.tables, s.regions), (1, 2), "{s:?}");
    assert!(
        s.data_dir.starts_with("file:///") && s.data_dir.ends_with("/root"),
        "{s:?}"
    );
    let simple = master.shell("status");
    assert!(
        simple.contains("1 tables, 2 regions (hbase:meta in neither)")
            && simple.contains(&format!("root {}", s.data_dir)),
        "{simple}"
    );

    let mut m = Conn::open(&master.hbase, "MasterService");
    let (param, _) = m
        .call(
            "GetClusterStatus",
            &hbase::GetClusterStatusRequest { options: vec![] },
        )
        .expect("GetClusterStatus answers");
    let status = hbase::GetClusterStatusResponse::decode(param)
        .expect("decodes")
        .cluster_status;
    assert_eq!(status.live_servers.len(), 2, "{status:?}");
    let mut reads = 0;
    let mut writes = 0;
    let mut regions = 0;
    for s in &status.live_servers {
        let load = &s.server_load;
        assert!(
            load.used_heap_mb.unwrap_or(0) > 0 && load.max_heap_mb.unwrap_or(0) > 0,
            "{} reports its memory: {load:?}",
            s.server.host_name
        );
        for r in &load.region_loads {
            let name = String::from_utf8_lossy(&r.region_specifier.value);
            if name.starts_with("loads,") {
                regions += 1;
                reads += r.read_requests_count.unwrap_or(0);
                writes += r.write_requests_count.unwrap_or(0);
                assert_eq!(r.stores, Some(1), "{name}");
            }
        }
    }
    assert_eq!(regions, 2, "both regions of the table, on their servers");
    assert!(writes >= 5, "the five puts are counted: {writes}");
    assert!(reads >= 5, "the five gets are counted: {reads}");
}

/// Issue 46 item 5: a region server killed is listed as dead, as HBase's `status` lists it
/// ("1 dead servers" and its name), with the addresses that say which process it was, in
/// `status 'detailed'` and in the master's `/status` (the web UI's source).
#[test]
fn a_killed_region_server_is_listed_as_dead_with_its_addresses() {
    let mut cluster = LocalCluster::start(2);
    let c = connect_blocking(&cluster.master.native);
    let two = wait_for(Duration::from_secs(60), || {
        (c.admin().status().ok()?.servers.len() >= 2).then_some(())
    });
    assert!(two.is_some(), "both region servers register");
    let detailed = cluster.master.shell("status 'detailed'");
    assert!(
        detailed.contains("0 dead servers"),
        "no server has died yet:\n{detailed}"
    );

    let victim = &mut cluster.region_servers[0];
    let native = victim.native.clone();
    let http = victim
        .http
        .clone()
        .expect("the region server's http address");
    victim.kill9();
    let dead = wait_for(Duration::from_secs(120), || {
        let s = c.admin().status().ok()?;
        (s.dead_servers.len() == 1).then_some(s)
    })
    .expect("the master lists the killed server as dead");
    let d = &dead.dead_servers[0];
    assert_eq!(d.native_addr, native, "{dead:?}");
    assert_eq!(d.http_addr, http, "{dead:?}");
    assert!(
        !dead.servers.iter().any(|l| l.native_addr == native),
        "the dead server is not among the live: {dead:?}"
    );

    let detailed = cluster.master.shell("status 'detailed'");
    let line = format!("    {}, native {native}, http {http}", d.name);
    assert!(
        detailed.contains(&format!("1 dead servers\n{line}")),
        "status 'detailed' lists the dead server:\n{detailed}"
    );
    let simple = cluster.master.shell("status");
    assert!(
        simple.contains("1 live servers, 1 dead servers"),
        "{simple}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&cluster.master.http_get("/status")).expect("/status is JSON");
    assert_eq!(
        json["dead_servers"],
        serde_json::json!([{ "name": d.name, "native": native, "http": http }]),
        "{json}"
    );

    // HBase clients (Admin.getClusterMetrics().getDeadServerNames(), the HBase shell's
    // `status`) see it too.
    let mut m = Conn::open(&cluster.master.hbase, "MasterService");
    let (param, _) = m
        .call(
            "GetClusterStatus",
            &hbase::GetClusterStatusRequest { options: vec![] },
        )
        .expect("GetClusterStatus answers");
    let status = hbase::GetClusterStatusResponse::decode(param)
        .expect("decodes")
        .cluster_status;
    let names: Vec<String> = status
        .dead_servers
        .iter()
        .map(|s| {
            format!(
                "{},{},{}",
                s.host_name,
                s.port.unwrap_or(0),
                s.start_code.unwrap_or(0)
            )
        })
        .collect();
    assert_eq!(names, vec![d.name.clone()], "{status:?}");
}
