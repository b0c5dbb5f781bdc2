//! A region server opens regions only for the active master (issue 39 item 4's last gap): an
//! OPEN_REGION naming any other master (one deposed between its tenure check and its call,
//! paused past its session) is refused, so it can open nothing the new master does not know
//! of. Real ZooKeeper, a master and a region server on a `file://` root; the cluster's own
//! opens (a created table's region) go on as before.

mod support;

use bytes::Bytes;
use cellar_client::{FamilySchema, RegionLocation, RowMutation, TableSchema, LATEST_TIMESTAMP};
use std::time::Duration;
use support::cluster::LocalCluster;
use support::{connect_blocking, wait_for};

#[test]
fn a_region_server_refuses_an_open_from_a_master_that_is_not_the_active_one() {
    let cluster = LocalCluster::start(1);
    let c = connect_blocking(&cluster.master.native);
    let schema = TableSchema::new("fenced", vec![FamilySchema::new("f")]);
    c.admin()
        .create_table(schema.clone(), vec![])
        .expect("create: the active master's opens are taken");
    let written = wait_for(Duration::from_secs(60), || {
        c.table("fenced")
            .put(RowMutation::new(Bytes::from_static(b"r")).put(
                b"f",
                b"q",
                LATEST_TIMESTAMP,
                Bytes::from_static(b"v"),
            ))
            .ok()
    });
    assert!(written.is_some(), "the created table's region serves");

    let rs = &cluster.region_servers[0].native;
    // Its start code, from the master's list of region servers (`host,port,startcode`).
    let servers = c.admin().status().expect("master status").servers;
    let rs_name = servers
        .iter()
        .find(|s| &s.native_addr == rs)
        .map(|s| s.name.clone())
        .unwrap_or_else(|| panic!("{rs} not among {servers:?}"));
    let startcode: u64 = rs_name
        .rsplit(',')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no start code in {rs_name:?}"));
    let stale = "127.0.0.1,1,1";
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let refused = runtime.block_on(async {
        let admin = cellar_client::Client::connect(rs)
            .await
            .expect("connect")
            .admin();
        let region = RegionLocation {
            table: "fenced".into(),
            region_id: 4242,
            start_key: Bytes::from_static(b"zz"),
            end_key: Bytes::new(),
            server: rs.clone(),
            name: "fenced,zz,4242".into(),
        };
        admin
            .open_region(rs, &region, &schema, 0, startcode, 1, stale)
            .await
    });
    let err = refused.expect_err("an open from a master that is not the active one");
    assert!(
        err.to_string().contains("which is not the active master"),
        "{err}"
    );
    let status = connect_blocking(rs).admin().status().expect("status");
    assert!(
        status.region_loads.iter().all(|r| r.region_id != 4242),
        "the refused region is open: {:?}",
        status.region_loads
    );
}
