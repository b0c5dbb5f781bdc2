//! Edits replicated in on a cluster (issue 41 item 1): an HBase replication source picks any
//! region server from `/hbase/rs` and sends it a batch spanning regions; that server applies
//! the rows of its own regions and sends the others on to the servers that hold them. Real
//! ZooKeeper, a master and two region servers on a `file://` root; the source is played over
//! HBase's wire (AdminService, `ReplicateWALEntry`, cells in the cell block).

mod support;

use bytes::{Bytes, BytesMut};
use cellar_client::{FamilySchema, Get, RowMutation, TableSchema, LATEST_TIMESTAMP};
use cellar_model::{Cell, CellType};
use cellar_proto::hbase;
use std::time::Duration;
use support::cluster::LocalCluster;
use support::hbase::{call_with_cells, open};
use support::{connect_blocking, wait_for};

fn cell(row: &str, ts: u64, t: CellType, v: &str) -> Cell {
    Cell {
        row: Bytes::copy_from_slice(row.as_bytes()),
        family: Bytes::from_static(b"f"),
        qualifier: Bytes::from_static(b"q"),
        timestamp: ts,
        cell_type: t,
        seq_id: 0,
        value: Bytes::copy_from_slice(v.as_bytes()),
    }
}

#[test]
fn a_region_server_applies_replicated_rows_of_its_regions_and_sends_the_others_on() {
    let cluster = LocalCluster::start(2);
    let c = connect_blocking(&cluster.master.native);
    c.admin()
        .create_table(
            TableSchema::new("repl", vec![FamilySchema::new("f")]),
            vec![Bytes::from_static(b"m")],
        )
        .expect("create");
    let served = wait_for(Duration::from_secs(60), || {
        ["a", "z"]
            .iter()
            .all(|row| {
                c.table("repl")
                    .put(
                        RowMutation::new(Bytes::copy_from_slice(row.as_bytes())).put(
                            b"f",
                            b"warm",
                            LATEST_TIMESTAMP,
                            Bytes::from_static(b"1"),
                        ),
                    )
                    .is_ok()
            })
            .then_some(())
    });
    assert!(served.is_some(), "both regions serve");
    let regions = c.admin().list_regions("repl").expect("regions");
    let z_server = regions
        .iter()
        .find(|l| l.start_key.as_ref() == b"m")
        .map(|l| l.server.clone())
        .expect("the region from m");
    // The sink: a server that does not hold z's region (it may hold a's, or nothing of the
    // table at all if both regions went to the other).
    let sink = cluster
        .region_servers
        .iter()
        .find(|s| s.native != z_server)
        .expect("a region server without z's region");

    let mut block = BytesMut::new();
    let cells = [
        cell("a", 10, CellType::Put, "a10"),
        cell("z", 10, CellType::Put, "z10"),
        cell("z", 20, CellType::Put, "z20"),
        cell("z", 20, CellType::Delete, ""),
    ];
    for c in &cells {
        cellar_proto::cellblock::put(&mut block, c);
    }
    let request = hbase::ReplicateWalEntryRequest {
        entry: vec![hbase::WalEntry {
            key: hbase::WalKey {
                encoded_region_name: Bytes::from_static(b"d41d8cd98f00b204e9800998ecf8427e"),
                table_name: Bytes::from_static(b"repl"),
                log_sequence_number: 3,
                write_time: 1_700_000_000_000,
                ..Default::default()
            },
            key_value_bytes: Vec::new(),
            associated_cell_count: Some(cells.len() as i32),
        }],
        ..Default::default()
    };
    let mut source = open(&sink.hbase, "AdminService");
    call_with_cells(&mut source, 1, "ReplicateWALEntry", &request, &block)
        .expect("the batch is applied");
    // The source resends it (say its answer was lost): applied again, nothing changes.
    call_with_cells(&mut source, 2, "ReplicateWALEntry", &request, &block)
        .expect("the batch is applied again");

    let value = |row: &str| -> Vec<(u64, Bytes)> {
        let got = c
            .table("repl")
            .get(
                Get::new(Bytes::copy_from_slice(row.as_bytes()))
                    .column(b"f", b"q")
                    .versions(5),
            )
            .expect("get");
        got.cells
            .iter()
            .map(|c| (c.timestamp, c.value.clone()))
            .collect()
    };
    assert_eq!(value("a"), vec![(10, Bytes::from_static(b"a10"))]);
    assert_eq!(
        value("z"),
        vec![(10, Bytes::from_static(b"z10"))],
        "z's rows went on to its server, the delete of version 20 with them"
    );
    // A table that exists nowhere: HBase's exception, so the source retries until it does.
    let missing = hbase::ReplicateWalEntryRequest {
        entry: vec![hbase::WalEntry {
            key: hbase::WalKey {
                table_name: Bytes::from_static(b"nowhere"),
                ..request.entry[0].key.clone()
            },
            ..request.entry[0].clone()
        }],
        ..Default::default()
    };
    let e = call_with_cells(&mut source, 3, "ReplicateWALEntry", &missing, &block)
        .expect_err("no such table");
    assert_eq!(
        e.exception_class_name.as_deref(),
        Some("org.apache.hadoop.hbase.TableNotFoundException"),
        "{e:?}"
    );
}
