//! The query cache in a real `cellar standalone`: enabled per family from the client and the
//! shell, kept across a restart, counted in `/metrics`, and never a stale read while a row is
//! written and read over the network at once.

mod support;

use bytes::Bytes;
use cellar_client::{FamilySchema, Get, RowMutation, TableSchema};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::Server;

fn value_of(row: &cellar_client::Row) -> u64 {
    row.value(b"cf", b"q")
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cached_gets_hit_writes_invalidate_and_reads_stay_within_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut server = Server::start_in(&data, None);
    let client = support::connect_client(&server.native).await;
    let mut cf = FamilySchema::new("cf");
    cf.query_cache = true;
    client
        .admin()
        .create_table(TableSchema::new("qc", vec![cf]), Vec::new())
        .await
        .expect("create");
    let table = Arc::new(client.table("qc"));
    let get = || Get::new(Bytes::from_static(b"row")).column(b"cf", b"q");
    let put = |v: u64| {
        RowMutation::new(Bytes::from_static(b"row")).put(b"cf", b"q", v, Bytes::from(v.to_string()))
    };
    table.put(put(1)).await.expect("put");
    for _ in 0..3 {
        assert_eq!(value_of(&table.get(get()).await.expect("get")), 1);
    }
    assert!(server.metric("cellar_query_cache_hits_total") >= 2);
    table.put(put(2)).await.expect("put");
    assert_eq!(value_of(&table.get(get()).await.expect("get")), 2);
    assert!(server.metric("cellar_query_cache_invalidations_total") >= 1);

    // One writer and three readers over the network for a few seconds: each read returns a
    // value acknowledged no earlier than it began and started no later than it ended.
    let started = Arc::new(AtomicU64::new(2));
    let acked = Arc::new(AtomicU64::new(2));
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for t in 0..3 {
        let (table, started, acked, stop) = (
            Arc::clone(&table),
            Arc::clone(&started),
            Arc::clone(&acked),
            Arc::clone(&stop),
        );
        readers.push(tokio::spawn(async move {
            let (mut reads, mut last) = (0u64, 0u64);
            while !stop.load(Ordering::SeqCst) && reads < 1_000_000 {
                let lo = acked.load(Ordering::SeqCst);
                let row = table
                    .get(Get::new(Bytes::from_static(b"row")).column(b"cf", b"q"))
                    .await
                    .expect("get");
                let hi = started.load(Ordering::SeqCst);
                let v = value_of(&row);
                assert!(lo <= v && v <= hi, "reader {t}: {v} outside [{lo}, {hi}]");
                assert!(v >= last, "reader {t} went back from {last} to {v}");
                last = v;
                reads += 1;
            }
            reads
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut v = 2;
    while Instant::now() < deadline && v < 100_000 {
        v += 1;
        started.store(v, Ordering::SeqCst);
        table.put(put(v)).await.expect("put");
        acked.store(v, Ordering::SeqCst);
        if v.is_multiple_of(16) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let mut reads = 0;
    for r in readers {
        reads += r.await.expect("reader");
    }
    assert!(v > 100 && reads > 100, "{v} writes, {reads} reads");
    assert_eq!(value_of(&table.get(get()).await.expect("get")), v);

    // The family keeps the option across a restart (it is in the catalog and descriptor).
    drop(table);
    drop(client);
    server.terminate();
    let server = Server::start_in(&data, None);
    let client = support::connect_client(&server.native).await;
    let described = client.admin().describe_table("qc").await.expect("describe");
    assert!(described.schema.families[0].query_cache, "{described:?}");
    let table = client.table("qc");
    assert_eq!(value_of(&table.get(get()).await.expect("get")), v);
    assert_eq!(value_of(&table.get(get()).await.expect("get")), v);
    assert!(server.metric("cellar_query_cache_hits_total") >= 1);
}

#[test]
fn the_shell_turns_it_on_per_family_and_per_table() {
    let server = Server::start();
    let shell = |script: &str| server.shell(script);
    shell("create 't', {NAME => 'a', QUERY_CACHE => true}, 'b'");
    let d = shell("describe 't'");
    let line = |name: &str| {
        d.lines()
            .find(|l| l.contains(&format!("NAME => '{name}'")))
            .unwrap_or_else(|| panic!("no family {name} in {d}"))
            .to_string()
    };
    assert!(line("a").contains("QUERY_CACHE"), "{d}");
    assert!(!line("b").contains("QUERY_CACHE"), "{d}");
    shell("alter 't', QUERY_CACHE => true");
    let d = shell("describe 't'");
    assert_eq!(d.matches("'QUERY_CACHE' => 'true'").count(), 2, "{d}");
    shell("alter 't', {NAME => 'a', QUERY_CACHE => false}");
    let d = shell("describe 't'");
    assert_eq!(d.matches("'QUERY_CACHE' => 'true'").count(), 1, "{d}");
}
