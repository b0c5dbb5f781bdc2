//! A region is open on at most one region server. On a real cluster (ZooKeeper, a master and
//! two region servers on a `file://` root), the first region server holds every OPEN_REGION
//! back for longer than the master's `cluster.open_region_timeout_ms` (the
//! `open_region_delay_ms` fault point): the master gives up on those opens while they are still
//! coming. Once every late open has had its chance, each region is open on exactly one server,
//! every written cell is there exactly once after flushes and major compactions run on both
//! servers for everything each one serves, and no store file went from under a reader.

mod support;

use bytes::Bytes;
use cellar_client::{FamilySchema, RowMutation, Scan, TableSchema};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{wait_for, Server};

const TABLE: &str = "assigned";
/// How long the slow region server holds an open back.
const DELAY_MS: u64 = 5_000;
/// How long the master waits for an open.
const OPEN_TIMEOUT_MS: u64 = 1_500;

fn write_config(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("cellar.toml");
    std::fs::write(
        &path,
        format!(
            "[cluster]\nzookeeper_session_timeout_ms = 4000\nbalancer_period_ms = 600000\n\
             open_region_timeout_ms = {OPEN_TIMEOUT_MS}\n"
        ),
    )
    .expect("write config");
    path
}

/// The region ids a region server says it serves (from its STATUS: `table,start,id`).
fn hosted(c: &cellar_client::blocking::Client, server: &Server) -> BTreeSet<u64> {
    let status = c
        .admin()
        .server_status(&server.native)
        .unwrap_or_else(|e| panic!("status of {}: {e}", server.native));
    status
        .servers
        .iter()
        .flat_map(|l| l.regions.iter())
        .filter(|name| name.starts_with(&format!("{TABLE},")))
        .filter_map(|name| name.rsplit_once(',')?.1.parse::<u64>().ok())
        .collect()
}

/// Flushes and major-compacts, directly on `server`, every region of the table it serves.
fn flush_and_compact_on(
    rt: &tokio::runtime::Runtime,
    c: &cellar_client::blocking::Client,
    server: &Server,
) {
    for id in hosted(c, server) {
        let addr = server.native.clone();
        let done = rt.block_on(async move {
            let client = cellar_client::Client::connect(&addr).await?;
            let admin = client.admin();
            admin.flush_region(&addr, TABLE, id, false, false).await?;
            admin.flush_region(&addr, TABLE, id, true, true).await
        });
        if let Err(e) = done {
            // A region that moved or closed meanwhile is not an error of this test's making.
            eprintln!("flush/compact of region {id} on {}: {e}", server.native);
        }
    }
}

/// Puts `rows` (one cell each), each retried until acknowledged (at most 30 s per row).
fn write_rows(c: &cellar_client::blocking::Client, rows: impl Iterator<Item = String>) {
    let t = c.table(TABLE);
    for row in rows {
        let m = RowMutation::new(Bytes::from(row.clone())).put(
            b"f",
            b"q",
            cellar_client::LATEST_TIMESTAMP,
            row.clone().into_bytes(),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match t.put(m.clone()) {
                Ok(()) => break,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("put {row}: {e}; retrying");
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("put {row} not acknowledged in 30 s: {e}"),
            }
        }
    }
}

/// Files under `dir` whose names end in `suffix`.
fn files_ending(dir: &Path, suffix: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_ending(&p, suffix, out);
        } else if p.to_string_lossy().ends_with(suffix) {
            out.push(p.display().to_string());
        }
    }
}

#[test]
fn a_region_whose_open_outlasts_the_masters_wait_is_open_on_one_server_only() {
    let zk = cellar_testing::ZooKeeper::start(200).expect("start ZooKeeper");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root_dir = tmp.path().join("root");
    let root = format!("file://{}", root_dir.display());
    let config = write_config(tmp.path());
    let args = ["--zk", zk.addr.as_str(), "--root", root.as_str()];
    let data = tmp.path().join("unused");
    let master = Server::start_role("master", &data, Some(&config), &args);
    let delay = format!("open_region_delay_ms={DELAY_MS}");
    let slow = Server::start_role_env(
        "regionserver",
        &data,
        Some(&config),
        &args,
        &[("CELLAR_FAULTS", delay.as_str())],
    );
    let quick = Server::start_role("regionserver", &data, Some(&config), &args);
    let logs = || {
        format!(
            "master:\n{}\nslow region server:\n{}\nquick region server:\n{}",
            master.output(),
            slow.output(),
            quick.output()
        )
    };
    let c = support::cluster::client(&master.native);
    // Both region servers are registered before the create (the master round-robins regions
    // over them, so some opens go to the slow one first).
    let both = wait_for(Duration::from_secs(30), || {
        let s = c.admin().status().ok()?;
        (s.servers
            .iter()
            .filter(|l| !l.native_addr.is_empty())
            .count()
            >= 2)
            .then_some(())
    });
    assert!(both.is_some(), "two region servers registered\n{}", logs());

    let splits: Vec<Bytes> = ["2", "4", "6", "8"]
        .iter()
        .map(|s| Bytes::from_static(s.as_bytes()))
        .collect();
    let created_at = Instant::now();
    c.admin()
        .create_table(
            TableSchema::new(TABLE, vec![FamilySchema::new("f")]),
            splits,
        )
        .unwrap_or_else(|e| panic!("create the table: {e}\n{}", logs()));
    let all_open = wait_for(Duration::from_secs(60), || {
        let regions = c.admin().list_regions(TABLE).ok()?;
        (regions.len() == 5 && regions.iter().all(|r| !r.server.is_empty())).then_some(())
    });
    assert!(all_open.is_some(), "every region opened\n{}", logs());

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    write_rows(&c, (0..300).map(|i| format!("{}-a-{i:05}", i % 10)));
    c.admin().flush(TABLE).expect("flush");
    c.admin().compact(TABLE, true).expect("major compaction");

    // Every open held back has reached its region server by now.
    let past = Duration::from_millis(DELAY_MS + 2_000);
    if let Some(left) = past.checked_sub(created_at.elapsed()) {
        std::thread::sleep(left);
    }
    for round in 0..2 {
        write_rows(&c, (0..300).map(|i| format!("{}-b{round}-{i:05}", i % 10)));
        flush_and_compact_on(&rt, &c, &slow);
        flush_and_compact_on(&rt, &c, &quick);
    }

    // Each region is open on exactly one server.
    let on_slow = hosted(&c, &slow);
    let on_quick = hosted(&c, &quick);
    let regions: BTreeSet<u64> = c
        .admin()
        .list_regions(TABLE)
        .expect("list regions")
        .iter()
        .map(|r| r.region_id)
        .collect();
    let twice: Vec<&u64> = on_slow.intersection(&on_quick).collect();
    assert!(
        twice.is_empty(),
        "regions {twice:?} are open on both region servers (slow: {on_slow:?}, quick: \
         {on_quick:?})\n{}",
        logs()
    );
    let nowhere: Vec<&u64> = regions
        .iter()
        .filter(|id| !on_slow.contains(id) && !on_quick.contains(id))
        .collect();
    assert!(
        nowhere.is_empty(),
        "regions {nowhere:?} are open nowhere\n{}",
        logs()
    );

    // Every written cell, once; after the master's flush and compaction too (on whoever
    // serves each region), and again read back from the files alone after a reopen.
    let expected: BTreeSet<String> = (0..300)
        .map(|i| format!("{}-a-{i:05}", i % 10))
        .chain((0..2).flat_map(|r| (0..300).map(move |i| format!("{}-b{r}-{i:05}", i % 10))))
        .collect();
    let check = |when: &str| {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let mut s = c.table(TABLE).scan(Scan::new().caching(500));
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Some(r) = s
            .next_row()
            .unwrap_or_else(|e| panic!("{when}: scan: {e}\n{}", logs()))
        {
            assert!(Instant::now() < deadline, "{when}: scan too slow");
            *counts
                .entry(String::from_utf8_lossy(&r.row).into_owned())
                .or_default() += r.cells.len();
        }
        let missing: Vec<&String> = expected
            .iter()
            .filter(|r| !counts.contains_key(*r))
            .collect();
        let not_once: Vec<(&String, &usize)> = counts.iter().filter(|(_, n)| **n != 1).collect();
        assert!(
            missing.is_empty() && not_once.is_empty() && counts.len() == expected.len(),
            "{when}: {} rows missing (e.g. {:?}), {} not once (e.g. {:?}), {} rows in all\n{}",
            missing.len(),
            missing.iter().take(5).collect::<Vec<_>>(),
            not_once.len(),
            not_once.iter().take(5).collect::<Vec<_>>(),
            counts.len(),
            logs()
        );
    };
    check("after flushes and compactions on both servers");
    c.admin().flush(TABLE).expect("flush");
    c.admin().compact(TABLE, true).expect("major compaction");
    check("after the master's flush and major compaction");
    c.admin().disable_table(TABLE).expect("disable");
    c.admin().enable_table(TABLE).expect("enable");
    let reopened = wait_for(Duration::from_secs(60), || {
        let regions = c.admin().list_regions(TABLE).ok()?;
        (regions.len() == 5 && regions.iter().all(|r| !r.server.is_empty())).then_some(())
    });
    assert!(reopened.is_some(), "every region reopened\n{}", logs());
    check("after a reopen from the files");

    // The slow server's opens did go unanswered, and were settled by fencing them off.
    assert!(
        master.output().contains("fenced the open off"),
        "no open went unanswered: the test did not test anything\n{}",
        logs()
    );
    // Nothing read a file another writer deleted, and nothing half-written is left.
    let all = logs();
    assert!(
        !all.contains("No such file"),
        "a server lost a file under a reader:\n{all}"
    );
    let mut tmp_files = Vec::new();
    files_ending(&root_dir.join("data"), ".tmp", &mut tmp_files);
    assert!(
        tmp_files.is_empty(),
        "half-written files left: {tmp_files:?}"
    );
    drop(c);
    drop(quick);
    drop(slow);
    drop(master);
}
