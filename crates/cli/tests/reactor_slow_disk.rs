//! The network reactor never waits on the disk, directly or through another thread: while one
//! connection's FSYNC_WAL writes wait on a disk whose every sync takes 200 ms, another
//! connection's Gets and plain (SYNC_WAL) Puts on the same region, through the native and the
//! HBase front ends, are answered far faster than that. Before, a plain put joined the
//! group-commit round doing the fdatasync, and waited for the earlier FSYNC write to become
//! visible: 200 ms each.

mod support;

use bytes::Bytes;
use cellar_client::{Client, Durability, FamilySchema, Get, RowMutation, TableSchema};
use cellar_server::config::ServerConfig;
use cellar_server::standalone::Standalone;
use cellar_storage::fs::{FaultFs, FsRef};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SYNC_DELAY: Duration = Duration::from_millis(200);
/// How long each front end is measured.
const MEASURE: Duration = Duration::from_secs(2);
/// "Far below the injected delay".
const BOUND: Duration = Duration::from_millis(50);

fn p99(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let i = (samples.len() * 99 / 100).min(samples.len().saturating_sub(1));
    samples.get(i).copied().unwrap_or_default()
}

/// Runs FSYNC_WAL puts on rows `fsync-*` on their own connection until `stop`; returns each
/// put's latency.
fn fsync_writer(addr: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Duration>> {
    std::thread::spawn(move || {
        let client = cellar_client::blocking::Client::connect(&addr).expect("connect");
        let table = client.table("slow");
        let mut latencies = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut i = 0u64;
        while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
            let m = RowMutation::new(Bytes::from(format!("fsync-{i:06}")))
                .put(b"cf", b"q", cellar_client::LATEST_TIMESTAMP, "durable")
                .with_durability(Durability::FsyncWal);
            let started = Instant::now();
            table.put(m).expect("fsync put");
            latencies.push(started.elapsed());
            i += 1;
        }
        latencies
    })
}

#[test]
fn gets_and_plain_puts_do_not_wait_for_another_connections_fdatasync() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let config = ServerConfig {
        data_dir: tmp.path().join("data"),
        listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
        hbase_listen: "127.0.0.1:0".into(),
        ..ServerConfig::default()
    };
    let server = Standalone::start_on(config, Arc::new(fs.clone()) as FsRef).expect("start");
    let native = server.native_addr().to_string();
    let hbase_addr = server.hbase_addr().expect("hbase port").to_string();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = Client::connect(&native).await.expect("connect");
        client
            .admin()
            .create_table(
                TableSchema::new("slow", vec![FamilySchema::new("cf")]),
                vec![],
            )
            .await
            .expect("create");
    });
    let mut hbase = support::hbase::Conn::open(&hbase_addr, "ClientService");
    let region = hbase.locate("slow", "plain");
    fs.set_sync_delay(SYNC_DELAY);

    let stop = Arc::new(AtomicBool::new(false));
    let writer = fsync_writer(native.clone(), Arc::clone(&stop));

    // The native front end: a put then a get of the same row, over and over.
    let native_latencies = Arc::new(Mutex::new(Vec::new()));
    {
        let client = cellar_client::blocking::Client::connect(&native).expect("connect");
        let table = client.table("slow");
        let started = Instant::now();
        let mut i = 0u64;
        while started.elapsed() < MEASURE {
            let row = Bytes::from(format!("plain-native-{i:06}"));
            let t = Instant::now();
            table
                .put(RowMutation::new(row.clone()).put(b"cf", b"q", 1, "v"))
                .expect("plain put");
            let put = t.elapsed();
            let t = Instant::now();
            let got = table.get(Get::new(row)).expect("get");
            let get = t.elapsed();
            assert_eq!(got.value(b"cf", b"q").map(|v| &v[..]), Some(&b"v"[..]));
            native_latencies.lock().expect("lock").extend([put, get]);
            i += 1;
        }
    }
    // The HBase front end, the same.
    let mut hbase_latencies = Vec::new();
    let started = Instant::now();
    let mut i = 0u64;
    while started.elapsed() < MEASURE {
        let row = format!("plain-hbase-{i:06}");
        let t = Instant::now();
        hbase.put(&region, row.as_bytes(), b"cf", b"q", b"v");
        hbase_latencies.push(t.elapsed());
        let t = Instant::now();
        let got = hbase.get(&region, row.as_bytes());
        hbase_latencies.push(t.elapsed());
        assert_eq!(got.as_deref(), Some(&b"v"[..]), "read back {row}");
        i += 1;
    }
    stop.store(true, Ordering::Release);
    let fsync_latencies = writer.join().expect("fsync writer");
    fs.set_sync_delay(Duration::ZERO);
    server.shutdown().expect("shutdown");

    // The delay was in force the whole time: FSYNC_WAL puts took at least the sync delay.
    assert!(
        fsync_latencies.len() >= 8,
        "the FSYNC_WAL writer ran throughout: {} puts",
        fsync_latencies.len()
    );
    let slowest_fast = fsync_latencies.iter().min().copied().unwrap_or_default();
    assert!(
        slowest_fast >= SYNC_DELAY - Duration::from_millis(5),
        "every FSYNC_WAL put waited for a sync: fastest {slowest_fast:?}"
    );
    let native = native_latencies.lock().expect("lock").clone();
    for (front, samples) in [("native", native), ("hbase", hbase_latencies)] {
        let n = samples.len();
        let p = p99(samples);
        eprintln!("{front}: {n} gets and puts, p99 {p:?} (sync delay {SYNC_DELAY:?})");
        assert!(n >= 40, "{front}: too few calls measured: {n}");
        assert!(
            p < BOUND,
            "{front} front end: p99 {p:?} of gets and plain puts is not far below the {SYNC_DELAY:?} sync delay"
        );
    }
}
