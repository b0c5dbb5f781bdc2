//! Every acknowledged write survives `kill -9`: writers record what the server acknowledged,
//! the server is killed by PID mid-write, restarted on the same data directory, and every
//! acknowledged row must read back. Three rounds on one directory.

mod support;

use bytes::Bytes;
use cellar_client::{
    BatchOp, BatchOutcome, Client, ClientConfig, FamilySchema, Get, RowMutation, TableSchema,
    LATEST_TIMESTAMP,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::Server;

const WRITERS: usize = 4;
const ROWS_PER_WRITER: usize = 5_000;
/// Acknowledged rows per round before the kill (or as many as fit in the time bound).
const ACKED_BEFORE_KILL: usize = 2_000;

fn value_of(row: &str) -> Bytes {
    Bytes::from(format!("value of {row} ").repeat(4))
}

/// Writers give up quickly once the server is gone.
fn impatient() -> ClientConfig {
    ClientConfig {
        retries: 1,
        retry_backoff: Duration::from_millis(10),
        rpc_timeout: Duration::from_secs(30),
        ..ClientConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let mut acked_all: Vec<String> = Vec::new();
    for round in 0..3 {
        let mut server = Server::start_in(&data, None);
        let client = Client::connect_with(&server.native, impatient())
            .await
            .expect("connect");
        if round == 0 {
            client
                .admin()
                .create_table(
                    TableSchema::new("dur", vec![FamilySchema::new("cf")]),
                    vec![Bytes::from_static(b"w2")],
                )
                .await
                .expect("create");
        }
        // Everything acknowledged in earlier rounds is there after the restart.
        check_all_present(&client, &acked_all).await;

        let acked = Arc::new(Mutex::new(Vec::new()));
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let table = client.table("dur");
            let acked = acked.clone();
            writers.push(tokio::spawn(async move {
                for i in 0..ROWS_PER_WRITER {
                    let row = format!("w{w}-r{round}-{i:05}");
                    let m = RowMutation::new(Bytes::from(row.clone())).put(
                        b"cf",
                        b"v",
                        LATEST_TIMESTAMP,
                        value_of(&row),
                    );
                    if table.put(m).await.is_err() {
                        return; // the server was killed
                    }
                    acked.lock().expect("acked").push(row);
                }
            }));
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while acked.lock().expect("acked").len() < ACKED_BEFORE_KILL && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let pid = server.pid();
        server.kill9();
        for w in writers {
            tokio::time::timeout(Duration::from_secs(120), w)
                .await
                .expect("writers stop once the server is gone")
                .expect("writer task");
        }
        let acked = std::mem::take(&mut *acked.lock().expect("acked"));
        assert!(
            !acked.is_empty(),
            "round {round}: nothing was acknowledged before the kill of pid {pid}"
        );
        eprintln!(
            "round {round}: {} rows acknowledged before kill -9 of pid {pid}",
            acked.len()
        );
        acked_all.extend(acked);
        drop(client);
        drop(server);
    }
    let server = Server::start_in(&data, None);
    let client = Client::connect(&server.native).await.expect("connect");
    check_all_present(&client, &acked_all).await;
}

async fn check_all_present(client: &Client, rows: &[String]) {
    let table = client.table("dur");
    for chunk in rows.chunks(500) {
        let ops = chunk
            .iter()
            .map(|r| BatchOp::Get(Get::new(Bytes::from(r.clone()))))
            .collect();
        let out = table.batch(ops).await.expect("batch get");
        for (row, o) in chunk.iter().zip(out) {
            match o {
                Ok(BatchOutcome::Row(r)) => assert_eq!(
                    r.value(b"cf", b"v"),
                    Some(&value_of(row)),
                    "acknowledged row {row} lost or damaged"
                ),
                other => panic!("reading acknowledged row {row}: {other:?}"),
            }
        }
    }
    // And a point read of the very last acknowledged row, through the single-row path.
    if let Some(last) = rows.last() {
        let r = table
            .get(Get::new(Bytes::from(last.clone())))
            .await
            .expect("get");
        assert_eq!(r.value(b"cf", b"v"), Some(&value_of(last)));
    }
}
