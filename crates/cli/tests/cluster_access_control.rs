//! Access control in a cluster of real processes (a real ZooKeeper, `cellar master`, a
//! `cellar regionserver`): grants made at the master decide what the region server lets each
//! user do, within seconds of being made or revoked.

mod support;

use cellar_client::blocking::Client;
use cellar_client::{
    ClientConfig, ErrorCode, FamilySchema, Get, PermissionScope, RowMutation, TableSchema,
};
use cellar_testing::ZooKeeper;
use std::time::Duration;
use support::{wait_for, Server};

fn as_user(master: &str, user: &str) -> Client {
    Client::connect_with(
        master,
        ClientConfig {
            user: Some(user.into()),
            retries: 2,
            retry_backoff: Duration::from_millis(50),
            rpc_timeout: Duration::from_secs(10),
            ..ClientConfig::default()
        },
    )
    .expect("connect to the master")
}

#[test]
fn region_servers_check_calls_against_the_masters_grants() {
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = format!("file://{}", tmp.path().join("root").display());
    let config = tmp.path().join("cellar.toml");
    std::fs::write(
        &config,
        "[security]\nauthorization = true\nsuperusers = [\"admin\"]\n",
    )
    .expect("config");
    let args = ["--zk", zk.addr.as_str(), "--root", root.as_str()];
    let data = tmp.path().join("unused");
    let master = Server::start_role("master", &data, Some(&config), &args);
    let _rs = Server::start_role("regionserver", &data, Some(&config), &args);

    let admin = as_user(&master.native, "admin");
    let created = wait_for(Duration::from_secs(60), || {
        admin
            .admin()
            .create_table(TableSchema::new("t", vec![FamilySchema::new("f")]), vec![])
            .ok()
    });
    assert!(
        created.is_some(),
        "create through the master:\n{}",
        master.output()
    );
    // The region server learns that admin is a superuser from its own configuration, and
    // the grants from the master.
    let wrote = wait_for(Duration::from_secs(30), || {
        admin
            .table("t")
            .put(RowMutation::new("r").put(b"f", b"q", cellar_client::LATEST_TIMESTAMP, "v"))
            .ok()
    });
    assert!(
        wrote.is_some(),
        "admin writes on the region server:\n{}",
        _rs.output()
    );

    let bob = as_user(&master.native, "bob");
    let e = bob
        .table("t")
        .get(Get::new("r"))
        .expect_err("bob holds nothing");
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
    let t = PermissionScope {
        table: "t".into(),
        ..PermissionScope::default()
    };
    admin
        .admin()
        .grant("bob", t.clone(), "R")
        .expect("grant at the master");
    let reads = wait_for(Duration::from_secs(10), || {
        bob.table("t").get(Get::new("r")).ok()
    });
    let row = reads.expect("the region server lets bob read within seconds of the grant");
    assert_eq!(row.value(b"f", b"q").map(|v| &v[..]), Some(&b"v"[..]));
    admin.admin().revoke("bob", t, None).expect("revoke");
    let refused = wait_for(Duration::from_secs(10), || {
        bob.table("t").get(Get::new("r")).err()
    });
    assert_eq!(
        refused.and_then(|e| e.code()),
        Some(ErrorCode::PermissionDenied),
        "the revoke reaches the region server within seconds"
    );
}
