//! Every client operation against a real `cellar standalone` process, through the async and
//! the blocking client.

mod support;

use bytes::Bytes;
use cellar_client::{
    BatchOp, BatchOutcome, BloomType, Client, Comparator, CompareOp, Compression, Condition,
    ErrorCode, FamilySchema, Filter, Get, ListOp, Row, RowMutation, RowRange, Scan, Table,
    TableSchema, LATEST_TIMESTAMP,
};
use std::time::Duration;
use support::Server;

fn family(name: &str, versions: u32) -> FamilySchema {
    let mut f = FamilySchema::new(name);
    f.max_versions = versions;
    f
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn put(row: &str, fam: &str, q: &str, ts: u64, v: &str) -> RowMutation {
    RowMutation::new(b(row)).put(fam.as_bytes(), q.as_bytes(), ts, b(v))
}

fn val(r: &Row, fam: &str, q: &str) -> Option<String> {
    r.value(fam.as_bytes(), q.as_bytes())
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

fn versions(r: &Row, fam: &str, q: &str) -> Vec<(u64, String)> {
    r.versions(fam.as_bytes(), q.as_bytes())
        .map(|c| (c.timestamp, String::from_utf8_lossy(&c.value).into_owned()))
        .collect()
}

fn keys(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .map(|r| String::from_utf8_lossy(&r.row).into_owned())
        .collect()
}

/// `(row, family:qualifier)` of every cell, to compare scans and filters exactly.
fn cells(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .flat_map(|r| {
            r.cells.iter().map(|c| {
                format!(
                    "{}/{}:{}",
                    String::from_utf8_lossy(&c.row),
                    String::from_utf8_lossy(&c.family),
                    String::from_utf8_lossy(&c.qualifier)
                )
            })
        })
        .collect()
}

async fn scan(t: &Table, s: Scan) -> Vec<Row> {
    t.scan(s).collect().await.expect("scan")
}

/// Over TCP, or the transport `CELLAR_TEST_TRANSPORT` names.
async fn connect(server: &Server) -> Client {
    support::connect_client(&server.native).await
}

/// Creates `name` with families `cf` (3 versions) and `meta` (1 version), split at `splits`.
async fn create(client: &Client, name: &str, splits: &[&str]) -> Table {
    client
        .admin()
        .create_table(
            TableSchema::new(name, vec![family("cf", 3), family("meta", 1)]),
            splits.iter().map(|s| b(s)).collect(),
        )
        .await
        .expect("create table");
    client.table(name)
}

fn code(e: &cellar_client::Error) -> Option<ErrorCode> {
    e.code()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_are_created_described_altered_disabled_truncated_and_deleted() {
    let server = Server::start();
    let client = connect(&server).await;
    let admin = client.admin();
    client.ping().await.expect("ping");

    let mut cf = FamilySchema::new("cf");
    cf.max_versions = 5;
    cf.min_versions = 1;
    cf.ttl_secs = Some(86_400);
    cf.compression = Compression::Zstd;
    cf.bloom = BloomType::RowCol;
    cf.block_size = 16 * 1024;
    cf.in_memory = true;
    let mut lz = FamilySchema::new("lz");
    lz.compression = Compression::Lz4;
    lz.bloom = BloomType::None;
    let schema = TableSchema::new("users", vec![cf.clone(), lz.clone()]);
    admin
        .create_table(schema.clone(), vec![b("g"), b("p")])
        .await
        .expect("create");
    let e = admin
        .create_table(schema.clone(), vec![])
        .await
        .expect_err("exists");
    assert_eq!(code(&e), Some(ErrorCode::TableExists), "{e}");
    assert!(e.to_string().contains("users"), "{e}");

    let info = admin.describe_table("users").await.expect("describe");
    assert!(info.enabled);
    assert_eq!(info.schema.name, "users");
    let got_cf = info.schema.family(b"cf").expect("cf");
    assert_eq!(got_cf, &cf, "family options round-trip");
    assert_eq!(info.schema.family(b"lz").expect("lz"), &lz);
    let bounds: Vec<(Bytes, Bytes)> = info
        .regions
        .iter()
        .map(|r| (r.start_key.clone(), r.end_key.clone()))
        .collect();
    assert_eq!(
        bounds,
        vec![(b(""), b("g")), (b("g"), b("p")), (b("p"), b("")),]
    );
    let regions = admin.list_regions("users").await.expect("regions");
    assert_eq!(regions.len(), 3);
    assert!(regions
        .iter()
        .all(|r| r.table == "users" && !r.server.is_empty()));
    assert!(
        regions[1].name.starts_with("users,g,"),
        "{}",
        regions[1].name
    );
    assert!(admin.table_exists("users").await.expect("exists"));
    assert!(!admin.table_exists("nobody").await.expect("not exists"));
    let listed = admin.list_tables().await.expect("list");
    assert!(listed.iter().any(|t| t.schema.name == "users"));

    // Alter: add a family, change one, drop one.
    let t = client.table("users");
    t.put(put("a1", "lz", "q", LATEST_TIMESTAMP, "x"))
        .await
        .expect("put lz");
    let mut cf3 = cf.clone();
    cf3.max_versions = 2;
    admin
        .alter_table(
            "users",
            vec![cf3.clone(), family("extra", 1)],
            vec!["lz".into()],
        )
        .await
        .expect("alter");
    let info = admin.describe_table("users").await.expect("describe");
    assert_eq!(info.schema.family(b"cf").map(|f| f.max_versions), Some(2));
    assert!(info.schema.family(b"extra").is_some());
    assert!(info.schema.family(b"lz").is_none());
    t.put(put("a1", "extra", "q", LATEST_TIMESTAMP, "e"))
        .await
        .expect("put to the new family");
    let e = t
        .put(put("a1", "lz", "q", LATEST_TIMESTAMP, "x"))
        .await
        .expect_err("dropped family");
    assert_eq!(code(&e), Some(ErrorCode::NoSuchFamily), "{e}");
    assert!(e.to_string().contains("lz"), "{e}");

    // Disable: data calls fail without retrying; enable brings the data back.
    for row in ["a", "h", "q"] {
        t.put(put(row, "cf", "q", LATEST_TIMESTAMP, row))
            .await
            .expect("put");
    }
    admin.flush("users").await.expect("flush");
    admin.compact("users", true).await.expect("major compact");
    admin.compact("users", false).await.expect("minor compact");
    admin.disable_table("users").await.expect("disable");
    assert!(
        !admin
            .describe_table("users")
            .await
            .expect("describe")
            .enabled
    );
    let e = t.get(Get::new("a")).await.expect_err("disabled");
    assert_eq!(code(&e), Some(ErrorCode::TableDisabled), "{e}");
    let e = admin.delete_table("nobody").await.expect_err("unknown");
    assert_eq!(code(&e), Some(ErrorCode::TableNotFound), "{e}");
    admin.enable_table("users").await.expect("enable");
    assert_eq!(
        val(&t.get(Get::new("h")).await.expect("get"), "cf", "q").as_deref(),
        Some("h")
    );
    let e = admin
        .delete_table("users")
        .await
        .expect_err("still enabled");
    assert_eq!(code(&e), Some(ErrorCode::TableNotDisabled), "{e}");

    // Split at a row: one more region, every row still there.
    admin.split("users", Some(b"k")).await.expect("split");
    let n = support::wait_for(Duration::from_secs(60), || {
        let regions = block(admin.list_regions("users")).expect("regions");
        (regions.len() == 4).then_some(regions.len())
    });
    assert_eq!(n, Some(4), "the split region is replaced by two");
    let rows = scan(&t, Scan::new().family(b"cf")).await;
    assert_eq!(keys(&rows), vec!["a", "h", "q"]);

    // Truncate keeps the schema, drops the rows.
    admin.truncate_table("users").await.expect("truncate");
    assert!(scan(&t, Scan::new()).await.is_empty());
    assert!(
        admin
            .describe_table("users")
            .await
            .expect("describe")
            .enabled
    );
    t.put(put("z", "cf", "q", LATEST_TIMESTAMP, "z"))
        .await
        .expect("put after truncate");

    let status = admin.status().await.expect("status");
    assert!(!status.version.is_empty());
    assert!(status.tables >= 1 && status.regions >= 1, "{status:?}");
    assert!(status.requests > 0);
    assert!(!status.server.is_empty());

    admin.disable_table("users").await.expect("disable");
    admin.delete_table("users").await.expect("delete");
    assert!(!admin.table_exists("users").await.expect("exists"));
    let e = t.get(Get::new("z")).await.expect_err("deleted");
    assert_eq!(code(&e), Some(ErrorCode::TableNotFound), "{e}");
}

/// Runs a future to completion from synchronous code inside the test's runtime.
fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gets_puts_and_every_kind_of_delete() {
    let server = Server::start();
    let client = connect(&server).await;
    let t = create(&client, "kv", &["m"]).await;

    // Versions: the family keeps 3.
    for ts in 1..=4u64 {
        t.put(put("r", "cf", "a", ts, &format!("a{ts}")))
            .await
            .expect("put");
    }
    t.put(put("r", "cf", "b", 2, "b2")).await.expect("put");
    t.put(put("r", "meta", "m", 5, "m5")).await.expect("put");
    let r = t.get(Get::new("r").versions(10)).await.expect("get");
    assert_eq!(
        versions(&r, "cf", "a"),
        vec![(4, "a4".into()), (3, "a3".into()), (2, "a2".into())]
    );
    assert_eq!(val(&r, "meta", "m").as_deref(), Some("m5"));
    let r = t.get(Get::new("r")).await.expect("get");
    assert_eq!(
        versions(&r, "cf", "a"),
        vec![(4, "a4".into())],
        "1 version by default"
    );
    // Time range [2, 4): the newest version inside it.
    let r = t
        .get(Get::new("r").time_range(2, 4).versions(5))
        .await
        .expect("get");
    assert_eq!(
        versions(&r, "cf", "a"),
        vec![(3, "a3".into()), (2, "a2".into())]
    );
    // Column and family selection.
    let r = t.get(Get::new("r").column(b"cf", b"b")).await.expect("get");
    assert_eq!(cells(&[r]), vec!["r/cf:b"]);
    let r = t.get(Get::new("r").family(b"meta")).await.expect("get");
    assert_eq!(cells(&[r]), vec!["r/meta:m"]);
    assert!(t.get(Get::new("absent")).await.expect("get").is_empty());
    // A put without a timestamp gets the server's clock.
    t.put(put("n", "cf", "a", LATEST_TIMESTAMP, "now"))
        .await
        .expect("put");
    let r = t.get(Get::new("n")).await.expect("get");
    let ts = r.cells.first().map(|c| c.timestamp).expect("a cell");
    assert!(ts > 1_600_000_000_000 && ts < LATEST_TIMESTAMP, "{ts}");

    // Delete one version (exact timestamp), then the latest version.
    t.delete(RowMutation::new(b("r")).delete_version(b"cf", b"a", 3))
        .await
        .expect("delete version");
    let r = t.get(Get::new("r").versions(10)).await.expect("get");
    assert_eq!(
        versions(&r, "cf", "a")[..2],
        [(4, "a4".into()), (2, "a2".into())]
    );
    t.delete(RowMutation::new(b("r")).delete_version(b"cf", b"a", LATEST_TIMESTAMP))
        .await
        .expect("delete latest");
    let r = t.get(Get::new("r")).await.expect("get");
    assert_eq!(versions(&r, "cf", "a"), vec![(2, "a2".into())]);
    // Delete a column up to a timestamp.
    t.delete(RowMutation::new(b("r")).delete_column(b"cf", b"a", 2))
        .await
        .expect("delete column");
    let r = t.get(Get::new("r").versions(10)).await.expect("get");
    assert!(versions(&r, "cf", "a").is_empty(), "{r:?}");
    assert_eq!(val(&r, "cf", "b").as_deref(), Some("b2"));
    // Delete a family version: every column's cell at exactly that timestamp.
    t.put(put("f", "cf", "x", 7, "x7")).await.expect("put");
    t.put(put("f", "cf", "x", 8, "x8")).await.expect("put");
    t.put(put("f", "cf", "y", 7, "y7")).await.expect("put");
    t.delete(RowMutation::new(b("f")).delete_family_version(b"cf", 7))
        .await
        .expect("delete family version");
    let r = t.get(Get::new("f").versions(10)).await.expect("get");
    assert_eq!(versions(&r, "cf", "x"), vec![(8, "x8".into())]);
    assert!(versions(&r, "cf", "y").is_empty());
    // Delete a whole family; the other family stays.
    t.put(put("f", "meta", "k", 9, "k9")).await.expect("put");
    t.delete(RowMutation::new(b("f")).delete_family(b"cf", LATEST_TIMESTAMP))
        .await
        .expect("delete family");
    let r = t.get(Get::new("f")).await.expect("get");
    assert_eq!(cells(&[r]), vec!["f/meta:k"]);
    // Newer writes after a delete are visible again. Both take the server's clock: a put in
    // the delete marker's own millisecond would be masked by it, as on HBase, so the put
    // waits for the next one.
    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    t.put(put("f", "cf", "x", LATEST_TIMESTAMP, "again"))
        .await
        .expect("put");
    assert_eq!(
        val(&t.get(Get::new("f")).await.expect("get"), "cf", "x").as_deref(),
        Some("again")
    );
    // One mutation that puts and deletes is applied as a whole.
    t.put(put("atom", "cf", "old", 1, "o")).await.expect("put");
    t.mutate(
        RowMutation::new(b("atom"))
            .put(b"cf", b"new", 2, b("n"))
            .put(b"meta", b"m", 2, b("m"))
            .delete_column(b"cf", b"old", LATEST_TIMESTAMP),
    )
    .await
    .expect("mutate");
    let r = t.get(Get::new("atom")).await.expect("get");
    assert_eq!(cells(&[r]), vec!["atom/cf:new", "atom/meta:m"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_appends_and_conditional_mutations() {
    let server = Server::start();
    let client = connect(&server).await;
    let t = create(&client, "cnt", &[]).await;

    assert_eq!(t.increment(b"c", b"cf", b"n", 5).await.expect("incr"), 5);
    assert_eq!(t.increment(b"c", b"cf", b"n", -2).await.expect("incr"), 3);
    let r = t
        .increment_columns(b"c", &[(b"cf", b"n", 10), (b"meta", b"hits", 1)])
        .await
        .expect("incr columns");
    let n = |r: &Row, f: &str, q: &str| {
        r.value(f.as_bytes(), q.as_bytes())
            .map(|v| i64::from_be_bytes(v[..].try_into().expect("8 bytes")))
    };
    assert_eq!(n(&r, "cf", "n"), Some(13));
    assert_eq!(n(&r, "meta", "hits"), Some(1));
    let stored = t.get(Get::new("c")).await.expect("get");
    assert_eq!(n(&stored, "cf", "n"), Some(13));
    // Concurrent increments are not lost.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                t.increment(b"c", b"cf", b"hot", 1).await.expect("incr");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(
        t.increment(b"c", b"cf", b"hot", 0).await.expect("read"),
        200
    );
    // A non-counter value is refused with a message.
    t.put(put("c", "cf", "text", LATEST_TIMESTAMP, "abc"))
        .await
        .expect("put");
    let e = t
        .increment(b"c", b"cf", b"text", 1)
        .await
        .expect_err("not a counter");
    assert_eq!(code(&e), Some(ErrorCode::InvalidArgument), "{e}");

    let r = t
        .append(b"s", &[(b"cf", b"log", b"ab")])
        .await
        .expect("append");
    assert_eq!(val(&r, "cf", "log").as_deref(), Some("ab"));
    let r = t
        .append(b"s", &[(b"cf", b"log", b"cd"), (b"meta", b"x", b"1")])
        .await
        .expect("append");
    assert_eq!(val(&r, "cf", "log").as_deref(), Some("abcd"));
    assert_eq!(val(&r, "meta", "x").as_deref(), Some("1"));

    // Check-and-mutate.
    let cond = |op, v: Option<&str>| Condition {
        row: b("k"),
        family: b("cf"),
        qualifier: b("state"),
        op,
        value: v.map(b),
    };
    let set = |v: &str| put("k", "cf", "state", LATEST_TIMESTAMP, v);
    assert!(t
        .check_and_mutate(cond(CompareOp::Equal, None), set("new"))
        .await
        .expect("absent → applied"));
    assert!(!t
        .check_and_mutate(cond(CompareOp::Equal, None), set("again"))
        .await
        .expect("present → not applied"));
    assert!(!t
        .check_and_mutate(cond(CompareOp::Equal, Some("old")), set("x"))
        .await
        .expect("mismatch"));
    assert!(t
        .check_and_mutate(cond(CompareOp::Equal, Some("new")), set("done"))
        .await
        .expect("match"));
    assert!(t
        .check_and_mutate(cond(CompareOp::NotEqual, Some("zzz")), set("ne"))
        .await
        .expect("not equal"));
    // The stored value is on the left: `stored op value`.
    assert!(!t
        .check_and_mutate(cond(CompareOp::Greater, Some("nf")), set("gt"))
        .await
        .expect("ne > nf does not hold"));
    assert!(t
        .check_and_mutate(cond(CompareOp::LessOrEqual, Some("ne")), set("le"))
        .await
        .expect("ne <= ne holds"));
    assert!(t
        .check_and_mutate(cond(CompareOp::Less, Some("lf")), set("ne"))
        .await
        .expect("le < lf holds"));
    assert_eq!(
        val(&t.get(Get::new("k")).await.expect("get"), "cf", "state").as_deref(),
        Some("ne")
    );
    // The condition can guard a delete; the mutation must be of the condition's row.
    assert!(t
        .check_and_mutate(
            cond(CompareOp::Equal, Some("ne")),
            RowMutation::new(b("k")).delete_column(b"cf", b"state", LATEST_TIMESTAMP)
        )
        .await
        .expect("conditional delete"));
    assert!(t.get(Get::new("k")).await.expect("get").is_empty());
    let e = t
        .check_and_mutate(
            cond(CompareOp::Equal, None),
            put("other", "cf", "state", LATEST_TIMESTAMP, "x"),
        )
        .await
        .expect_err("different rows");
    assert_eq!(code(&e), Some(ErrorCode::InvalidArgument), "{e}");
}

/// 40 rows `r00`..`r39`, each with `cf:a`, `cf:b` (three versions, ts 1..3) and `meta:m`,
/// in a table split at r10, r20, r30.
async fn scan_fixture(client: &Client) -> Table {
    let t = create(client, "sc", &["r10", "r20", "r30"]).await;
    let mut ms = Vec::new();
    for i in 0..40 {
        let row = format!("r{i:02}");
        let mut m = RowMutation::new(b(&row));
        for ts in 1..=3u64 {
            m = m.put(b"cf", b"b", ts, b(&format!("b{ts}")));
        }
        m = m
            .put(b"cf", b"a", 10, b(&format!("a{i}")))
            .put(b"meta", b"m", 10, b(&format!("{i}")));
        ms.push(m);
    }
    t.put_all(ms).await.expect("put_all");
    t
}

fn range(from: usize, to: usize) -> Vec<String> {
    (from..to).map(|i| format!("r{i:02}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_with_every_option_across_regions() {
    let server = Server::start();
    let client = connect(&server).await;
    let t = scan_fixture(&client).await;

    assert_eq!(keys(&scan(&t, Scan::new()).await), range(0, 40));
    assert_eq!(
        keys(&scan(&t, Scan::new().range(b"r05", b"r35")).await),
        range(5, 35)
    );
    assert_eq!(
        keys(&scan(&t, Scan::new().prefix(b"r2")).await),
        range(20, 30)
    );
    // Columns.
    let rows = scan(&t, Scan::new().prefix(b"r0").column(b"cf", b"a")).await;
    assert_eq!(cells(&rows[..1]), vec!["r00/cf:a"]);
    assert_eq!(rows.len(), 10);
    let rows = scan(&t, Scan::new().prefix(b"r0").family(b"meta")).await;
    assert_eq!(cells(&rows[..1]), vec!["r00/meta:m"]);
    // Versions and time range.
    let rows = scan(&t, Scan::new().range(b"r01", b"r02").versions(3)).await;
    assert_eq!(versions(&rows[0], "cf", "b").len(), 3);
    let rows = scan(
        &t,
        Scan::new()
            .range(b"r01", b"r02")
            .versions(3)
            .time_range(2, 3),
    )
    .await;
    assert_eq!(cells(&rows), vec!["r01/cf:b"]);
    assert_eq!(versions(&rows[0], "cf", "b"), vec![(2, "b2".into())]);
    // Limit, across region boundaries, and with small caching.
    assert_eq!(
        keys(&scan(&t, Scan::new().range(b"r08", b"").limit(15).caching(4)).await),
        range(8, 23)
    );
    assert_eq!(
        keys(&scan(&t, Scan::new().caching(1)).await),
        range(0, 40),
        "one row per call"
    );
    // Batch: a row's cells come in parts of at most 2.
    let rows = scan(&t, Scan::new().range(b"r03", b"r05").batch(2)).await;
    assert!(rows.iter().all(|r| r.cells.len() <= 2), "{rows:?}");
    assert_eq!(
        cells(&rows),
        vec![
            "r03/cf:a",
            "r03/cf:b",
            "r03/meta:m",
            "r04/cf:a",
            "r04/cf:b",
            "r04/meta:m"
        ]
    );
    assert_eq!(rows.len(), 4);
    // Reversed: start is the upper bound (inclusive), stop the lower one (exclusive).
    let mut down = range(0, 40);
    down.reverse();
    assert_eq!(
        keys(&scan(&t, Scan::new().reversed().caching(3)).await),
        down
    );
    let mut down = range(6, 26);
    down.reverse();
    assert_eq!(
        keys(&scan(&t, Scan::new().range(b"r25", b"r05").reversed()).await),
        down
    );
    assert_eq!(
        keys(&scan(&t, Scan::new().reversed().limit(12)).await),
        range(28, 40).into_iter().rev().collect::<Vec<_>>()
    );
    assert!(scan(&t, Scan::new().range(b"s", b"")).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_mix_reads_and_writes_across_regions() {
    let server = Server::start();
    let client = connect(&server).await;
    let t = create(&client, "bt", &["h", "p"]).await;
    t.put_all(
        ["a", "i", "q"]
            .iter()
            .map(|r| put(r, "cf", "q", LATEST_TIMESTAMP, r))
            .collect(),
    )
    .await
    .expect("put_all");
    let out = t
        .batch(vec![
            BatchOp::Get(Get::new("a")),
            BatchOp::Mutate(put("j", "cf", "q", LATEST_TIMESTAMP, "j")),
            BatchOp::Get(Get::new("q")),
            BatchOp::Get(Get::new("zz")),
            BatchOp::Mutate(put("b", "nofam", "q", LATEST_TIMESTAMP, "x")),
            BatchOp::Mutate(RowMutation::new(b("i")).delete_family(b"cf", LATEST_TIMESTAMP)),
        ])
        .await
        .expect("batch");
    let describe: Vec<String> = out
        .iter()
        .map(|o| match o {
            Ok(BatchOutcome::Row(r)) => format!("row {}", val(r, "cf", "q").unwrap_or_default()),
            Ok(BatchOutcome::Done) => "done".into(),
            Err(e) => format!("error {:?}", e.code()),
        })
        .collect();
    assert_eq!(
        describe,
        vec![
            "row a",
            "done",
            "row q",
            "row ",
            "error Some(NoSuchFamily)",
            "done"
        ]
    );
    assert_eq!(keys(&scan(&t, Scan::new()).await), vec!["a", "j", "q"]);
    let e = t
        .put_all(vec![
            put("c", "cf", "q", LATEST_TIMESTAMP, "c"),
            put("d", "nofam", "q", LATEST_TIMESTAMP, "d"),
        ])
        .await
        .expect_err("one bad mutation");
    assert_eq!(code(&e), Some(ErrorCode::NoSuchFamily), "{e}");
    assert!(e.to_string().contains("nofam"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_of_every_kind_and_lists() {
    let server = Server::start();
    let client = connect(&server).await;
    let t = scan_fixture(&client).await;
    let f = |filter: Filter| Scan::new().range(b"r00", b"r04").filter(filter);
    let bin = |s: &str| Comparator::Binary(b(s));

    let rows = scan(&t, Scan::new().filter(Filter::Prefix(b("r1")))).await;
    assert_eq!(keys(&rows), range(10, 20), "prefix");
    let rows = scan(&t, f(Filter::ColumnPrefix(b("a")))).await;
    assert_eq!(
        cells(&rows),
        vec!["r00/cf:a", "r01/cf:a", "r02/cf:a", "r03/cf:a"]
    );
    let rows = scan(
        &t,
        f(Filter::ColumnRange {
            min: Some(b("b")),
            min_inclusive: true,
            max: Some(b("m")),
            max_inclusive: true,
        }),
    )
    .await;
    assert_eq!(
        cells(&rows[..1]),
        vec!["r00/cf:b", "r00/meta:m"],
        "column range"
    );
    let rows = scan(
        &t,
        Scan::new().filter(Filter::Row(CompareOp::Less, bin("r03"))),
    )
    .await;
    assert_eq!(keys(&rows), range(0, 3), "row filter");
    let rows = scan(&t, f(Filter::Family(CompareOp::Equal, bin("meta")))).await;
    assert_eq!(cells(&rows[..1]), vec!["r00/meta:m"], "family filter");
    let rows = scan(&t, f(Filter::Qualifier(CompareOp::Equal, bin("b")))).await;
    assert_eq!(cells(&rows[..1]), vec!["r00/cf:b"], "qualifier filter");
    let rows = scan(
        &t,
        Scan::new().filter(Filter::Value(
            CompareOp::Equal,
            Comparator::Regex("^a1[0-2]$".into()),
        )),
    )
    .await;
    assert_eq!(
        cells(&rows),
        vec!["r10/cf:a", "r11/cf:a", "r12/cf:a"],
        "value regex"
    );
    let rows = scan(
        &t,
        Scan::new().filter(Filter::Value(
            CompareOp::Equal,
            Comparator::Substring("A3".into()),
        )),
    )
    .await;
    assert_eq!(
        keys(&rows)[..2],
        ["r03", "r30"],
        "value substring (case-insensitive)"
    );
    let scv = |op, v: &str, if_missing| Filter::SingleColumnValue {
        family: b("meta"),
        qualifier: b("m"),
        op,
        comparator: bin(v),
        filter_if_missing: if_missing,
        latest_version_only: true,
    };
    let rows = scan(&t, Scan::new().filter(scv(CompareOp::Equal, "7", false))).await;
    assert_eq!(keys(&rows), vec!["r07"], "single column value");
    assert_eq!(rows[0].cells.len(), 3, "the whole row passes");
    let rows = scan(
        &t,
        Scan::new()
            .column(b"cf", b"a")
            .filter(Filter::SingleColumnValue {
                family: b("cf"),
                qualifier: b("zz"),
                op: CompareOp::Equal,
                comparator: bin("x"),
                filter_if_missing: true,
                latest_version_only: true,
            }),
    )
    .await;
    assert!(rows.is_empty(), "missing column filtered out");
    let rows = scan(
        &t,
        f(Filter::KeyOnly {
            len_as_value: false,
        }),
    )
    .await;
    assert!(rows
        .iter()
        .flat_map(|r| &r.cells)
        .all(|c| c.value.is_empty()));
    assert_eq!(rows.len(), 4);
    let rows = scan(&t, f(Filter::KeyOnly { len_as_value: true })).await;
    assert_eq!(
        rows[0].value(b"cf", b"a").map(|v| v.to_vec()),
        Some(2u32.to_be_bytes().to_vec()),
        "key-only with lengths"
    );
    let rows = scan(&t, f(Filter::FirstKeyOnly)).await;
    assert_eq!(
        cells(&rows),
        vec!["r00/cf:a", "r01/cf:a", "r02/cf:a", "r03/cf:a"]
    );
    let rows = scan(&t, Scan::new().range(b"r08", b"").filter(Filter::Page(5))).await;
    assert_eq!(keys(&rows), range(8, 13), "page across a region boundary");
    let rows = scan(
        &t,
        Scan::new().filter(Filter::RowRanges(vec![
            RowRange {
                start: b("r02"),
                start_inclusive: true,
                stop: b("r04"),
                stop_inclusive: false,
            },
            RowRange {
                start: b("r28"),
                start_inclusive: false,
                stop: b("r31"),
                stop_inclusive: true,
            },
        ])),
    )
    .await;
    assert_eq!(
        keys(&rows),
        vec!["r02", "r03", "r29", "r30", "r31"],
        "row ranges"
    );
    // AND: rows r1x whose cells are qualifier a.
    let rows = scan(
        &t,
        Scan::new().filter(Filter::List(
            ListOp::MustPassAll,
            vec![
                Filter::Prefix(b("r1")),
                Filter::Qualifier(CompareOp::Equal, bin("a")),
            ],
        )),
    )
    .await;
    assert_eq!(keys(&rows), range(10, 20), "AND list rows");
    assert!(
        cells(&rows).iter().all(|c| c.ends_with("cf:a")),
        "AND list cells"
    );
    // OR: rows r05 or r33.
    let rows = scan(
        &t,
        Scan::new().filter(Filter::List(
            ListOp::MustPassOne,
            vec![
                Filter::Row(CompareOp::Equal, bin("r05")),
                Filter::Row(CompareOp::Equal, bin("r33")),
            ],
        )),
    )
    .await;
    assert_eq!(keys(&rows), vec!["r05", "r33"], "OR list");
    // Filters on gets.
    let r = t
        .get(Get::new("r05").filter(Filter::ColumnPrefix(b("m"))))
        .await
        .expect("get");
    assert_eq!(cells(&[r]), vec!["r05/meta:m"]);
    let r = t
        .get(Get::new("r05").filter(Filter::Row(CompareOp::Equal, bin("r06"))))
        .await
        .expect("get");
    assert!(r.is_empty(), "a filtered-out get is empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tables_and_families_are_named_in_errors() {
    let server = Server::start();
    let client = connect(&server).await;
    let t = create(&client, "known", &[]).await;
    let missing = client.table("missing_table");
    for e in [
        missing.get(Get::new("r")).await.expect_err("get"),
        missing
            .put(put("r", "cf", "q", LATEST_TIMESTAMP, "v"))
            .await
            .expect_err("put"),
        missing.scan(Scan::new()).next().await.expect_err("scan"),
        client
            .admin()
            .describe_table("missing_table")
            .await
            .expect_err("describe"),
    ] {
        assert_eq!(code(&e), Some(ErrorCode::TableNotFound), "{e}");
        assert!(e.to_string().contains("missing_table"), "{e}");
        assert!(
            !matches!(e, cellar_client::Error::RetriesExhausted { .. }),
            "not retried: {e}"
        );
    }
    for e in [
        t.put(put("r", "nope", "q", LATEST_TIMESTAMP, "v"))
            .await
            .expect_err("put"),
        t.get(Get::new("r").family(b"nope")).await.expect_err("get"),
        t.scan(Scan::new().family(b"nope"))
            .next()
            .await
            .expect_err("scan"),
    ] {
        assert_eq!(code(&e), Some(ErrorCode::NoSuchFamily), "{e}");
        assert!(e.to_string().contains("nope"), "{e}");
    }
    let e = client
        .admin()
        .create_table(TableSchema::new("bad", vec![]), vec![])
        .await
        .expect_err("no families");
    assert_eq!(code(&e), Some(ErrorCode::InvalidArgument), "{e}");
}

#[test]
fn the_blocking_client_does_the_same() {
    let server = Server::start();
    let client = support::connect_blocking(&server.native);
    client.ping().expect("ping");
    let admin = client.admin();
    admin
        .create_table(TableSchema::new("blk", vec![family("cf", 2)]), vec![b("m")])
        .expect("create");
    assert_eq!(admin.list_regions("blk").expect("regions").len(), 2);
    let t = client.table("blk");
    for r in ["a", "k", "n", "z"] {
        t.put(put(r, "cf", "q", LATEST_TIMESTAMP, r)).expect("put");
    }
    assert_eq!(
        val(&t.get(Get::new("n")).expect("get"), "cf", "q").as_deref(),
        Some("n")
    );
    assert_eq!(t.increment(b"c", b"cf", b"n", 4).expect("incr"), 4);
    assert_eq!(
        val(
            &t.append(b"a", &[(b"cf", b"q", b"+")]).expect("append"),
            "cf",
            "q"
        )
        .as_deref(),
        Some("a+")
    );
    assert!(t
        .check_and_mutate(
            Condition {
                row: b("z"),
                family: b("cf"),
                qualifier: b("q"),
                op: CompareOp::Equal,
                value: Some(b("z")),
            },
            RowMutation::new(b("z")).delete_family(b"cf", LATEST_TIMESTAMP),
        )
        .expect("cas"));
    let rows: Vec<Row> = t
        .scan(Scan::new().caching(1))
        .collect::<Result<_, _>>()
        .expect("scan");
    assert_eq!(keys(&rows), vec!["a", "c", "k", "n"]);
    let rows: Vec<Row> = t
        .scan(Scan::new().reversed())
        .collect::<Result<_, _>>()
        .expect("reversed scan");
    assert_eq!(keys(&rows), vec!["n", "k", "c", "a"]);
    let out = t
        .batch(vec![
            BatchOp::Get(Get::new("k")),
            BatchOp::Get(Get::new("x")),
        ])
        .expect("batch");
    assert!(matches!(&out[0], Ok(BatchOutcome::Row(r)) if !r.is_empty()));
    assert!(matches!(&out[1], Ok(BatchOutcome::Row(r)) if r.is_empty()));
    let status = admin.status().expect("status");
    assert!(status.tables >= 1);
    admin.disable_table("blk").expect("disable");
    admin.delete_table("blk").expect("delete");
    assert!(admin
        .list_tables()
        .expect("list")
        .iter()
        .all(|t| t.schema.name != "blk"));
}
