//! `cellar bench breakdown` and the client's timed calls against a real `cellar standalone`.

mod support;

use cellar_client::{Client, FamilySchema, Get, RowMutation, TableSchema, LATEST_TIMESTAMP};
use std::process::Command;
use std::time::Duration;
use support::Server;

/// The timed Get and Put report every stage as positive, and the stages add up to the total
/// the client measured on its own (exactly: they are consecutive intervals, save for the
/// server reporting more than the round trip, which would zero the wire stages).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_calls_have_positive_stages_summing_to_the_total() {
    let server = Server::start();
    let client = Client::connect(&server.native).await.expect("connect");
    client
        .admin()
        .create_table(
            TableSchema::new("timed", vec![FamilySchema::new("f")]),
            Vec::new(),
        )
        .await
        .expect("create table");
    let table = client.table("timed");
    for i in 0..20u32 {
        let row = format!("row{i:04}");
        let put = table
            .put_with_timing(RowMutation::new(row.clone()).put(
                b"f",
                b"q",
                LATEST_TIMESTAMP,
                vec![7u8; 512],
            ))
            .await
            .expect("timed put");
        let (got, get) = table
            .get_with_timing(Get::new(row.clone()))
            .await
            .expect("timed get");
        assert_eq!(got.value(b"f", b"q").map(|v| v.len()), Some(512), "{row}");
        for (what, t) in [("put", put), ("get", get)] {
            for (stage, d) in t.stages() {
                assert!(
                    d > Duration::ZERO,
                    "{what} {row}: stage {stage} is zero: {t:?}"
                );
            }
            assert_eq!(t.stage_sum(), t.total, "{what} {row}: {t:?}");
        }
    }
}

/// The command prints the stage table and writes the JSON document.
#[test]
fn breakdown_command_writes_stages_as_json() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("breakdown.json");
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args([
            "bench",
            "breakdown",
            "--ops",
            "30",
            "--value-size",
            "100",
            "--db",
        ])
        .arg(format!("cellar://{}", server.native))
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run cellar bench breakdown");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("server_processing"), "{stdout}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("read json")).expect("json");
    assert_eq!(doc["kind"], "breakdown");
    assert_eq!(doc["ops"], 30);
    assert_eq!(doc["value_size"], 100);
    for op in ["get", "put"] {
        let s = &doc["stages"][op];
        let total = s["total_us"].as_f64().expect("total_us");
        let mut sum = 0.0;
        for stage in [
            "client_serialize_us",
            "send_prepare_us",
            "wire_out_us",
            "server_queue_us",
            "server_processing_us",
            "server_serialize_us",
            "wire_back_us",
            "client_process_us",
        ] {
            let v = s[stage]
                .as_f64()
                .unwrap_or_else(|| panic!("{op}.{stage} in {s}"));
            assert!(v > 0.0, "{op}.{stage} = {v}");
            sum += v;
        }
        assert!(
            (sum - total).abs() < 0.01 + total * 1e-6,
            "{op}: {sum} vs {total}"
        );
    }
}

#[test]
fn breakdown_refuses_an_embedded_target() {
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["bench", "breakdown", "--db", "embedded:/tmp/x"])
        .output()
        .expect("run cellar bench breakdown");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cellar://HOST:PORT"), "{stderr}");
}
