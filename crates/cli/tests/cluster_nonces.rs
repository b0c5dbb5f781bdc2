//! Exactly once across a region server's crash: on a real cluster (ZooKeeper, a master, region
//! servers on one root), an HBase client's increment reaches a region server that writes it to
//! its WAL and dies (SIGKILL, through the `crash_after_wal` fault point) before answering. The
//! master splits the dead server's log into the region's recovered edits and opens the region
//! on another server; the client, never answered, retries the same increment with the same
//! nonce there (as HBase's Java client does), and the counter moves once.

mod support;

use bytes::{Bytes, BytesMut};
use cellar_client::{FamilySchema, TableSchema};
use cellar_proto::{hbase, hbase_wire};
use prost::Message;
use std::io::Write;
use std::time::Duration;
use support::hbase::{locate, open, read_frame, region};
use support::{wait_for, Server};

const TABLE: &str = "counters";

fn write_config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("cellar.toml");
    std::fs::write(
        &path,
        "[cluster]\nzookeeper_session_timeout_ms = 2000\nbalancer_period_ms = 600000\n",
    )
    .expect("write config");
    path
}

/// The region holding `row` and the HBase address of its server, as the client's meta scan
/// finds them through `master_hbase`.
fn where_is(master_hbase: &str, row: &str) -> Option<(Bytes, String)> {
    let mut s = open(master_hbase, "ClientService");
    let cells = locate(&mut s, 1, TABLE, row);
    let name = cells
        .iter()
        .find(|(_, q, _)| q.as_ref() == b"regioninfo")?
        .0
        .clone();
    let server = cells
        .iter()
        .find(|(_, q, _)| q.as_ref() == b"server")
        .map(|(_, _, v)| String::from_utf8_lossy(v).into_owned())?;
    Some((name, server))
}

/// The increment of `f:n` by `by` under nonce (7, `nonce`), as HBase's client sends it.
fn increment(region_name: &Bytes, by: i64, nonce: u64) -> hbase::MutateRequest {
    use hbase::mutation_proto::column_value::QualifierValue;
    hbase::MutateRequest {
        region: region(region_name),
        mutation: hbase::MutationProto {
            row: Some(Bytes::from_static(b"row")),
            mutate_type: Some(hbase::mutation_proto::MutationType::Increment as i32),
            column_value: vec![hbase::mutation_proto::ColumnValue {
                family: Bytes::from_static(b"f"),
                qualifier_value: vec![QualifierValue {
                    qualifier: Some(Bytes::from_static(b"n")),
                    value: Some(Bytes::copy_from_slice(&by.to_be_bytes())),
                    ..Default::default()
                }],
            }],
            nonce: Some(nonce),
            ..Default::default()
        },
        nonce_group: Some(7),
        ..Default::default()
    }
}

/// Sends one call; its answer (`Err` = the server's exception), or `None` when the
/// connection ended first.
fn send(
    addr: &str,
    method: &str,
    req: &impl Message,
) -> Option<Result<(Bytes, Bytes), hbase::ExceptionResponse>> {
    let mut s = open(addr, "ClientService");
    let mut out = BytesMut::new();
    hbase_wire::encode_request(&mut out, 1, method, req, &[]);
    s.write_all(&out).ok()?;
    let (header, param, cells) = read_frame(&mut s)?;
    Some(match header.exception {
        Some(e) => Err(e),
        None => Ok((param, cells)),
    })
}

/// The counter's value in a Mutate or Get answer.
fn counter(param: Bytes, cells: Bytes, is_get: bool) -> i64 {
    let result = if is_get {
        hbase::GetResponse::decode(param)
            .expect("GetResponse")
            .result
    } else {
        hbase::MutateResponse::decode(param)
            .expect("MutateResponse")
            .result
    };
    let value = result
        .iter()
        .flat_map(|r| r.cell.iter())
        .find_map(|c| c.value.clone())
        .or_else(|| {
            let mut reader = cellar_proto::cellblock::CellReader::new(cells);
            reader.next_cell().expect("cell block").map(|c| c.value)
        })
        .expect("a counter cell");
    i64::from_be_bytes(value.as_ref().try_into().expect("8 bytes"))
}

#[test]
fn an_increment_applied_by_a_server_that_died_before_answering_is_not_applied_again() {
    let zk = cellar_testing::ZooKeeper::start(200).expect("start ZooKeeper");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = format!("file://{}", tmp.path().join("root").display());
    let config = write_config(tmp.path());
    let args = ["--zk", zk.addr.as_str(), "--root", root.as_str()];
    let data = tmp.path().join("unused");
    let master = Server::start_role("master", &data, Some(&config), &args);
    let mut doomed = Server::start_role_env(
        "regionserver",
        &data,
        Some(&config),
        &args,
        &[("CELLAR_FAULTS", "crash_after_wal=increment")],
    );
    let admin = support::cluster::client(&master.native);
    admin
        .admin()
        .create_table(
            TableSchema::new(TABLE, vec![FamilySchema::new("f")]),
            Vec::new(),
        )
        .expect("create the table");
    let (region_name, server) = wait_for(Duration::from_secs(30), || {
        where_is(&master.hbase, "row").filter(|(_, s)| *s == doomed.hbase)
    })
    .expect("the region open on the first region server");
    assert_eq!(server, doomed.hbase);

    // The first attempt: in the WAL, applied, never answered.
    let first = send(&doomed.hbase, "Mutate", &increment(&region_name, 5, 99));
    assert!(
        first.is_none(),
        "the server should have died before answering, answered {first:?}"
    );
    let died = wait_for(Duration::from_secs(10), || doomed.exited());
    assert!(died.is_some(), "the region server is gone");
    drop(doomed);

    // Another server joins; the master splits the dead one's log and opens the region there.
    let heir = Server::start_role("regionserver", &data, Some(&config), &args);
    let (region_name, _) = wait_for(Duration::from_secs(60), || {
        where_is(&master.hbase, "row").filter(|(_, s)| *s == heir.hbase)
    })
    .unwrap_or_else(|| {
        panic!(
            "the region did not reopen on the new server:\n{}",
            master.output()
        )
    });

    // The client's retry, same nonce: answered with the counter as it is, not applied again.
    let retried = wait_for(Duration::from_secs(30), || {
        send(&heir.hbase, "Mutate", &increment(&region_name, 5, 99))?.ok()
    })
    .expect("the retry is answered");
    assert_eq!(
        counter(retried.0, retried.1, false),
        5,
        "the retried increment was applied twice"
    );
    // A new increment (another nonce) is applied.
    let next = send(&heir.hbase, "Mutate", &increment(&region_name, 5, 100))
        .expect("answered")
        .expect("applied");
    assert_eq!(counter(next.0, next.1, false), 10);
    let get = hbase::GetRequest {
        region: region(&region_name),
        get: hbase::Get {
            row: Bytes::from_static(b"row"),
            ..Default::default()
        },
    };
    let got = send(&heir.hbase, "Get", &get)
        .expect("answered")
        .expect("read");
    assert_eq!(
        counter(got.0, got.1, true),
        10,
        "the counter moved once per increment"
    );
}
