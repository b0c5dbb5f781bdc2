//! Table administration through `Handler::call`: every admin method, its errors, and what
//! survives a restart.

mod core_support;

use bytes::Bytes;
use cellar_model::MutationKind;
use cellar_model::{Get, Scan, TableSchema};
use cellar_proto::convert;
use cellar_proto::pb::{self, ErrorCode, Method};
use core_support::*;

#[test]
fn create_validates_names_schemas_and_split_keys() {
    let ts = TestServer::start();
    ts.create("t1", &["cf"], &[]);
    let msg = expect_code(
        ts.create_table(&TableSchema::new("t1", vec![family("cf")]), &[]),
        ErrorCode::TableExists,
    );
    assert!(msg.contains("'t1'"), "{msg}");
    // `default:` is the same table.
    expect_code(
        ts.create_table(&TableSchema::new("default:t1", vec![family("cf")]), &[]),
        ErrorCode::TableExists,
    );
    for bad in ["bad name", "-t", "hbase:mine", "ns-x:t", ""] {
        let msg = expect_code(
            ts.create_table(&TableSchema::new(bad, vec![family("cf")]), &[]),
            ErrorCode::InvalidArgument,
        );
        assert!(msg.contains(&format!("'{bad}'")) || bad.is_empty(), "{msg}");
    }
    let msg = expect_code(
        ts.create_table(&TableSchema::new("nofam", vec![]), &[]),
        ErrorCode::InvalidArgument,
    );
    assert!(msg.contains("no column family"), "{msg}");
    let mut f = family("cf");
    f.block_size = 10;
    let msg = expect_code(
        ts.create_table(&TableSchema::new("badfam", vec![f]), &[]),
        ErrorCode::InvalidArgument,
    );
    assert!(msg.contains("block_size") && msg.contains("'cf'"), "{msg}");
    let schema = TableSchema::new("split", vec![family("cf")]);
    let msg = expect_code(
        ts.create_table(&schema, &[b"m", b"c"]),
        ErrorCode::InvalidArgument,
    );
    assert!(
        msg.contains("\"c\"") && msg.contains("split key 1"),
        "{msg}"
    );
    let msg = expect_code(
        ts.create_table(&schema, &[b"c", b"c"]),
        ErrorCode::InvalidArgument,
    );
    assert!(msg.contains("split key 1"), "{msg}");
    let msg = expect_code(
        ts.create_table(&schema, &[b"", b"c"]),
        ErrorCode::InvalidArgument,
    );
    assert!(msg.contains("split key 0 is empty"), "{msg}");
    // None of the refused creates left a table behind.
    let (list, _): (pb::ListTablesResponse, _) = ts
        .call(Method::ListTables, &pb::Empty {}, Bytes::new())
        .expect("list");
    let names: Vec<String> = list
        .tables
        .iter()
        .map(|t| t.schema.as_ref().expect("schema").name.clone())
        .collect();
    assert_eq!(names, vec!["t1".to_string()]);
}

#[test]
fn pre_split_table_routes_rows_to_their_regions() {
    let ts = TestServer::start();
    ts.create("ns1:users", &["cf", "x"], &[b"g", b"p"]);
    let regions = ts.regions("ns1:users").expect("regions");
    let bounds: Vec<(String, String)> = regions
        .iter()
        .map(|r| {
            (
                String::from_utf8_lossy(&r.start_key).into_owned(),
                String::from_utf8_lossy(&r.end_key).into_owned(),
            )
        })
        .collect();
    assert_eq!(
        bounds,
        vec![
            ("".into(), "g".into()),
            ("g".into(), "p".into()),
            ("p".into(), "".into())
        ]
    );
    let ids: Vec<u64> = regions.iter().map(|r| r.region_id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    for r in &regions {
        assert_eq!(r.server, "127.0.0.1:16200");
        assert_eq!(r.state, pb::RegionState::Open as i32);
        assert_eq!(
            r.name,
            format!(
                "ns1:users,{},{}",
                String::from_utf8_lossy(&r.start_key),
                r.region_id
            )
        );
    }
    for (row, region) in [("a", 0), ("g", 1), ("h", 1), ("p", 2), ("zz", 2)] {
        let loc = ts.locate("ns1:users", row.as_bytes()).expect("locate");
        assert_eq!(loc.region_id, ids[region], "row {row}");
        ts.put("ns1:users", row, "cf", "q", row);
        assert_eq!(
            ts.value("ns1:users", row, "cf", "q").as_deref(),
            Some(row.as_bytes())
        );
    }
    // A row sent to the wrong region, and an unknown region id.
    let wrong = region_ref(&regions[0]);
    let msg = expect_code(
        ts.get_at(wrong.clone(), &Get::new(b("h"))),
        ErrorCode::NotServingRegion,
    );
    assert!(msg.contains("outside"), "{msg}");
    let mut unknown = wrong;
    unknown.region_id = 12345;
    expect_code(
        ts.get_at(unknown, &Get::new(b("a"))),
        ErrorCode::NotServingRegion,
    );
    let msg = expect_code(ts.locate("nope", b"a"), ErrorCode::TableNotFound);
    assert!(msg.contains("'nope'"), "{msg}");
    expect_code(ts.regions("nope"), ErrorCode::TableNotFound);
    // The on-disk layout maps the namespace to a directory.
    let dir = ts.dir().join("data/ns1/users");
    assert_eq!(std::fs::read_dir(&dir).expect("table dir").count(), 3);
}

#[test]
fn alter_adds_changes_and_removes_families() {
    let ts = TestServer::start();
    ts.create("t", &["a", "b"], &[b"m"]);
    ts.put("t", "r1", "a", "q", "1");
    ts.put("t", "r1", "b", "q", "2");
    let mut c = family("c");
    c.max_versions = 5;
    let mut a = family("a");
    a.max_versions = 3;
    let alter = |put: Vec<cellar_model::FamilySchema>, delete: &[&str]| {
        ts.call::<_, pb::Empty>(
            Method::AlterTable,
            &pb::AlterTableRequest {
                table: "t".into(),
                put_families: put.iter().map(convert::family_to_pb).collect(),
                delete_families: delete.iter().map(|s| s.to_string()).collect(),
                options: None,
            },
            Bytes::new(),
        )
    };
    alter(vec![c, a], &["b"]).expect("alter");
    let info = ts.describe("t").expect("describe");
    let schema = convert::schema_from_pb(info.schema.expect("schema")).expect("schema");
    let fams: Vec<(&str, u32)> = schema
        .families
        .iter()
        .map(|f| (f.name.as_str(), f.max_versions))
        .collect();
    assert_eq!(fams, vec![("a", 3), ("c", 5)]);
    // Old data of kept families stays; the new family takes writes; the removed one is gone.
    assert_eq!(ts.value("t", "r1", "a", "q").as_deref(), Some(&b"1"[..]));
    ts.put("t", "r1", "c", "q", "3");
    assert_eq!(ts.value("t", "r1", "c", "q").as_deref(), Some(&b"3"[..]));
    let m = convert::single_put(b"r1", b"b", b"q", b"x");
    let msg = expect_code(
        ts.mutate("t", &m, MutationKind::PutDelete, None),
        ErrorCode::NoSuchFamily,
    );
    assert!(msg.contains("'b'") && msg.contains("'t'"), "{msg}");
    // The new version limit applies.
    for (ts_, v) in [(10u64, "v1"), (20, "v2"), (30, "v3"), (40, "v4")] {
        let m = cellar_model::RowMutation::new(b("r2")).put(b"a", b"q", ts_, b(v));
        ts.mutate("t", &m, MutationKind::PutDelete, None)
            .expect("put version");
    }
    let cells = ts.get("t", &Get::new(b("r2")).versions(10)).expect("get");
    assert_eq!(cells.len(), 3);
    // Re-adding a removed family starts empty.
    alter(vec![family("b")], &[]).expect("re-add");
    assert_eq!(ts.value("t", "r1", "b", "q"), None);
    let msg = expect_code(alter(vec![], &["zz"]), ErrorCode::NoSuchFamily);
    assert!(msg.contains("'zz'") && msg.contains("'t'"), "{msg}");
    let msg = expect_code(alter(vec![], &["a", "b", "c"]), ErrorCode::InvalidArgument);
    assert!(msg.contains("last column family"), "{msg}");
    expect_code(
        ts.call::<_, pb::Empty>(
            Method::AlterTable,
            &pb::AlterTableRequest {
                table: "missing".into(),
                put_families: vec![],
                delete_families: vec![],
                options: None,
            },
            Bytes::new(),
        ),
        ErrorCode::TableNotFound,
    );
}

#[test]
fn disable_enable_delete_follow_hbase_rules() {
    let ts = TestServer::start();
    ts.create("t", &["cf"], &[b"k"]);
    ts.put("t", "a", "cf", "q", "1");
    ts.put("t", "z", "cf", "q", "2");
    let loc = ts.locate("t", b"a").expect("locate");
    let msg = expect_code(
        ts.admin(Method::DeleteTable, "t"),
        ErrorCode::TableNotDisabled,
    );
    assert!(msg.contains("'t'"), "{msg}");
    ts.admin(Method::DisableTable, "t").expect("disable");
    expect_code(
        ts.admin(Method::DisableTable, "t"),
        ErrorCode::TableDisabled,
    );
    let msg = expect_code(
        ts.get_at(region_ref(&loc), &Get::new(b("a"))),
        ErrorCode::TableDisabled,
    );
    assert!(msg.contains("'t'"), "{msg}");
    expect_code(ts.admin(Method::FlushTable, "t"), ErrorCode::TableDisabled);
    let info = ts.describe("t").expect("describe");
    assert_eq!(info.state, pb::TableState::Disabled as i32);
    assert!(info
        .regions
        .iter()
        .all(|r| r.state == pb::RegionState::Closed as i32));
    ts.admin(Method::EnableTable, "t").expect("enable");
    expect_code(
        ts.admin(Method::EnableTable, "t"),
        ErrorCode::TableNotDisabled,
    );
    assert_eq!(ts.value("t", "a", "cf", "q").as_deref(), Some(&b"1"[..]));
    assert_eq!(ts.value("t", "z", "cf", "q").as_deref(), Some(&b"2"[..]));
    ts.admin(Method::DisableTable, "t").expect("disable");
    ts.admin(Method::DeleteTable, "t").expect("delete");
    expect_code(ts.describe("t"), ErrorCode::TableNotFound);
    expect_code(ts.admin(Method::DeleteTable, "t"), ErrorCode::TableNotFound);
    assert!(!ts.dir().join("data/default/t").exists());
    // A new table of the same name starts empty.
    ts.create("t", &["cf"], &[]);
    assert_eq!(ts.value("t", "a", "cf", "q"), None);
    // System tables are not administered by clients.
    for m in [
        Method::DisableTable,
        Method::DeleteTable,
        Method::TruncateTable,
    ] {
        expect_code(ts.admin(m, "hbase:meta"), ErrorCode::InvalidArgument);
    }
}

#[test]
fn truncate_keeps_the_schema_and_leaves_one_enabled_region() {
    let ts = TestServer::start();
    let mut f = family("cf");
    f.max_versions = 4;
    ts.create_table(&TableSchema::new("t", vec![f]), &[b"d", b"m"])
        .expect("create");
    for r in ["a", "e", "x"] {
        ts.put("t", r, "cf", "q", r);
    }
    ts.admin(Method::TruncateTable, "t").expect("truncate");
    let info = ts.describe("t").expect("describe");
    assert_eq!(info.state, pb::TableState::Enabled as i32);
    assert_eq!(info.regions.len(), 1);
    assert_eq!(info.schema.expect("schema").families[0].max_versions, 4);
    for r in ["a", "e", "x"] {
        assert_eq!(ts.value("t", r, "cf", "q"), None);
    }
    ts.put("t", "b", "cf", "q", "new");
    // From a disabled table too; it ends enabled.
    ts.admin(Method::DisableTable, "t").expect("disable");
    ts.admin(Method::TruncateTable, "t")
        .expect("truncate disabled");
    assert_eq!(
        ts.describe("t").expect("describe").state,
        pb::TableState::Enabled as i32
    );
    assert_eq!(ts.value("t", "b", "cf", "q"), None);
    let region_dirs = std::fs::read_dir(ts.dir().join("data/default/t"))
        .expect("table dir")
        .count();
    assert_eq!(region_dirs, 1, "old region directories are removed");
}

#[test]
fn flush_compact_split_status_and_meta() {
    let ts = TestServer::start();
    // Small blocks, so a region of a few KiB has a middle row.
    let mut f = family("cf");
    f.block_size = 1024;
    ts.create_table(&TableSchema::new("t", vec![f]), &[])
        .expect("create");
    let pad = "x".repeat(100);
    for i in 0..200 {
        ts.put("t", &format!("row{i:04}"), "cf", "q", &format!("v{i}{pad}"));
    }
    let status = |ts: &TestServer| -> pb::StatusResponse {
        ts.call(Method::Status, &pb::Empty {}, Bytes::new())
            .expect("status")
            .0
    };
    let before = status(&ts);
    assert_eq!(before.tables, 1);
    assert!(before.memstore_bytes > 0);
    assert_eq!(before.server, "127.0.0.1:16200");
    assert!(before.requests > 200);
    ts.admin(Method::FlushTable, "t").expect("flush");
    ts.put("t", "row0000", "cf", "q", "again");
    ts.admin(Method::FlushTable, "t").expect("flush");
    let files_before = ts.server().current_gauges().store_files;
    ts.call::<_, pb::Empty>(
        Method::CompactTable,
        &pb::CompactTableRequest {
            table: "t".into(),
            major: true,
        },
        Bytes::new(),
    )
    .expect("compact");
    let after = status(&ts);
    assert!(after.store_file_bytes > 0);
    let g = ts.server().current_gauges();
    assert_eq!(
        files_before - g.store_files,
        1,
        "two files compacted into one: {g:?}"
    );
    assert!(g.regions_per_table.contains(&("hbase:meta".to_string(), 1)));
    assert!(g.regions_per_table.contains(&("t".to_string(), 1)));

    // Split at a given row, then each region at its middle.
    let split = |row: Option<&str>| {
        ts.call::<_, pb::Empty>(
            Method::SplitTable,
            &pb::SplitTableRequest {
                table: "t".into(),
                split_row: row.map(b),
            },
            Bytes::new(),
        )
    };
    split(Some("row0050")).expect("split at row");
    let regions = ts.regions("t").expect("regions");
    assert_eq!(regions.len(), 2);
    assert_eq!(&regions[1].start_key[..], b"row0050");
    let msg = expect_code(split(Some("row0050")), ErrorCode::InvalidArgument);
    assert!(msg.contains("already starts"), "{msg}");
    split(None).expect("split at middles");
    let regions = ts.regions("t").expect("regions");
    assert_eq!(regions.len(), 4, "{regions:?}");
    assert_eq!(ts.server().current_gauges().splits, 3);
    let rows = ts.scan_table("t", &Scan::new(), 7).expect("scan");
    assert_eq!(rows.len(), 200);
    assert_eq!(flat(&rows)[0].2, "again");
    assert!(flat(&rows)[1].2.starts_with("v1x"));
    assert!(row_keys(&rows).windows(2).all(|w| w[0] < w[1]));

    // hbase:meta is readable, not writable.
    let meta = ts.regions("hbase:meta").expect("meta regions");
    assert_eq!(meta.len(), 1);
    let meta_rows = ts
        .scan_region(region_ref(&meta[0]), &Scan::new(), 100)
        .expect("scan meta");
    let mut meta_flat = Vec::new();
    merge_results(&mut meta_flat, meta_rows);
    let keys = row_keys(&meta_flat);
    assert!(keys.contains(&"t".to_string()), "{keys:?}");
    let region_rows = keys.iter().filter(|k| k.starts_with("t,")).count();
    assert!(region_rows >= 4, "{keys:?}");
    let open_rows = meta_flat
        .iter()
        .filter(|cells| {
            cells
                .iter()
                .any(|c| &c.qualifier[..] == b"state" && &c.value[..] == b"OPEN")
        })
        .count();
    assert_eq!(open_rows, 4, "four open regions in meta");
    let m = convert::single_put(b"t", b"table", b"state", b"DISABLED");
    let msg = expect_code(
        ts.mutate_at(region_ref(&meta[0]), &m, MutationKind::PutDelete, None),
        ErrorCode::InvalidArgument,
    );
    assert!(msg.contains("read-only"), "{msg}");
    let meta_loc = ts.locate("hbase:meta", b"t,").expect("locate meta");
    assert_eq!(meta_loc.region_id, meta[0].region_id);
}

#[test]
fn bad_calls_get_clear_errors() {
    let ts = TestServer::start();
    let r = ts.server();
    let ctx = cellar_server::rpc::CallContext::internal(1);
    use cellar_server::rpc::Handler;
    for m in [Method::Ping, Method::Unspecified] {
        let e = r
            .call(&ctx, m, Bytes::new(), Bytes::new())
            .expect_err("not served here");
        assert_eq!(code(&e), ErrorCode::UnknownMethod);
    }
    let e = r
        .call(
            &ctx,
            Method::Get,
            Bytes::from_static(b"\xff\xff\xff"),
            Bytes::new(),
        )
        .expect_err("garbage");
    assert_eq!(code(&e), ErrorCode::MalformedRequest);
    assert!(e.message.contains("GetRequest"), "{}", e.message);
    let e = r
        .call(&ctx, Method::Get, Bytes::new(), Bytes::new())
        .expect_err("no region");
    assert_eq!(code(&e), ErrorCode::InvalidArgument);
}

#[test]
fn tables_states_and_data_survive_restarts() {
    let mut ts = TestServer::start();
    ts.create("a", &["cf"], &[b"m"]);
    ts.create("ns:b", &["cf"], &[]);
    ts.create("c", &["cf"], &[]);
    ts.put("a", "k1", "cf", "q", "v1");
    ts.put("a", "z1", "cf", "q", "v2");
    ts.put("ns:b", "k", "cf", "q", "vb");
    ts.admin(Method::DisableTable, "ns:b").expect("disable");
    ts.admin(Method::DisableTable, "c").expect("disable");
    ts.admin(Method::DeleteTable, "c").expect("delete");
    let ids_before: Vec<u64> = ts
        .regions("a")
        .expect("regions")
        .iter()
        .map(|r| r.region_id)
        .collect();
    ts.restart();
    let ids_after: Vec<u64> = ts
        .regions("a")
        .expect("regions")
        .iter()
        .map(|r| r.region_id)
        .collect();
    assert_eq!(ids_before, ids_after);
    assert_eq!(ts.value("a", "k1", "cf", "q").as_deref(), Some(&b"v1"[..]));
    assert_eq!(ts.value("a", "z1", "cf", "q").as_deref(), Some(&b"v2"[..]));
    assert_eq!(
        ts.describe("ns:b").expect("b").state,
        pb::TableState::Disabled as i32
    );
    expect_code(ts.describe("c"), ErrorCode::TableNotFound);
    ts.admin(Method::EnableTable, "ns:b").expect("enable");
    assert_eq!(
        ts.value("ns:b", "k", "cf", "q").as_deref(),
        Some(&b"vb"[..])
    );
    // New region ids stay above every earlier one.
    ts.create("d", &["cf"], &[]);
    let d = ts.regions("d").expect("d")[0].region_id;
    assert!(d > *ids_after.iter().max().expect("ids"));
    // Shutdown is idempotent, and calls after it are refused.
    let s = ts.take();
    s.shutdown().expect("shutdown");
    s.shutdown().expect("again");
    use cellar_server::rpc::Handler;
    let e = s
        .call(
            &cellar_server::rpc::CallContext::internal(1),
            Method::ListTables,
            Bytes::new(),
            Bytes::new(),
        )
        .expect_err("stopped");
    assert_eq!(code(&e), ErrorCode::ServerStopping);
}

#[test]
fn a_second_server_on_the_same_directory_is_refused() {
    let ts = TestServer::start();
    let e = match cellar_server::region_server::RegionServer::open(&ts.config, "x:1".into()) {
        Ok(_) => panic!("second server opened"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("in use"), "{e}");
}

/// The compaction checker major compacts a store whose oldest file is a period old, with no
/// write or request to prompt it (HBase's periodic major compaction).
#[test]
fn the_compaction_checker_runs_periodic_major_compactions() {
    let ts = TestServer::with_config(|c| {
        c.storage.major_compaction_period_ms = Some(1500);
        c.storage.major_compaction_jitter = Some(0.0);
        c.storage.compaction_check_interval_ms = Some(100);
    });
    ts.create("t", &["cf"], &[]);
    ts.put("t", "row1", "cf", "q", "one");
    ts.admin(Method::FlushTable, "t").expect("flush");
    ts.put("t", "row1", "cf", "q", "two");
    ts.admin(Method::FlushTable, "t").expect("flush");
    let files_before = ts.server().current_gauges().store_files;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let files_after = loop {
        let files = ts.server().current_gauges().store_files;
        if files < files_before || std::time::Instant::now() > deadline {
            break files;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        files_before - files_after,
        1,
        "the table's two files became one without a compaction request"
    );
    assert_eq!(ts.value("t", "row1", "cf", "q"), Some(b("two")));
}
