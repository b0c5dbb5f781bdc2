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
