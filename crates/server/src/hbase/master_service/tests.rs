//! MasterService driven with encoded requests, as the Java client's admin sends them.

use super::test_support::{create, create_namespace, table_schema, Fixture};
use crate::hbase::exceptions::{
    TABLE_EXISTS, TABLE_NOT_DISABLED, TABLE_NOT_ENABLED, TABLE_NOT_FOUND,
};
use crate::hbase::meta_view::{self, MetaScan};
use crate::hbase::names::table_to_pb;
use bytes::Bytes;
use cellar_proto::hbase;
use cellar_proto::hbase::get_procedure_result_response::State;

const FINISHED: i32 = State::Finished as i32;

/// Every region of `table` as meta describes it, in row order.
fn regions(f: &Fixture, table: &str) -> Vec<hbase::RegionInfo> {
    let scan = MetaScan {
        start: Bytes::from(format!("{table},,")),
        include_start: true,
        stop: Bytes::from(format!("{table} ,,")),
        families: vec![Bytes::from_static(b"info")],
        ..Default::default()
    };
    meta_view::scan(&f.svc, &scan)
        .expect("meta scan")
        .iter()
        .map(|cells| {
            let v = &cells
                .iter()
                .find(|c| &c.qualifier[..] == b"regioninfo")
                .expect("regioninfo")
                .value;
            prost::Message::decode(&v[4..]).expect("decodes")
        })
        .collect()
}

fn region_starts(f: &Fixture, table: &str) -> Vec<Bytes> {
    regions(f, table)
        .into_iter()
        .map(|r| r.start_key.unwrap_or_default())
        .collect()
}

fn table_req(name: &str) -> hbase::TableName {
    table_to_pb(name)
}

fn disable(f: &Fixture, name: &str) -> (i32, Option<String>) {
    let r: hbase::DisableTableResponse = f.master(
        "DisableTable",
        &hbase::DisableTableRequest {
            table_name: table_req(name),
            nonce_group: None,
            nonce: None,
        },
    );
    f.procedure(r.proc_id)
}

fn enable(f: &Fixture, name: &str) -> (i32, Option<String>) {
    let r: hbase::EnableTableResponse = f.master(
        "EnableTable",
        &hbase::EnableTableRequest {
            table_name: table_req(name),
            nonce_group: None,
            nonce: None,
        },
    );
    f.procedure(r.proc_id)
}

fn truncate(f: &Fixture, name: &str, preserve: bool) -> (i32, Option<String>) {
    let r: hbase::TruncateTableResponse = f.master(
        "truncateTable",
        &hbase::TruncateTableRequest {
            table_name: table_req(name),
            preserve_splits: Some(preserve),
            nonce_group: None,
            nonce: None,
        },
    );
    f.procedure(r.proc_id)
}

fn delete_req(name: &str) -> hbase::DeleteTableRequest {
    hbase::DeleteTableRequest {
        table_name: table_req(name),
        nonce_group: None,
        nonce: None,
    }
}

#[test]
fn master_is_running() {
    let f = Fixture::new();
    let r: hbase::IsMasterRunningResponse =
        f.master("IsMasterRunning", &hbase::IsMasterRunningRequest {});
    assert!(r.is_master_running);
    let e = f
        .call(
            "MasterService",
            "NoSuchMethod",
            &hbase::IsMasterRunningRequest {},
        )
        .expect_err("unknown method");
    assert!(e.do_not_retry && e.message.contains("NoSuchMethod"), "{e}");
}

#[test]
fn create_with_splits_then_the_full_lifecycle() {
    let f = Fixture::new();
    let proc_id = create(&f, "t", &[b"c", b"m", b"x"]).expect("create");
    assert_eq!(f.procedure(proc_id), (FINISHED, None));
    assert_eq!(
        region_starts(&f, "t"),
        vec![
            Bytes::new(),
            Bytes::from("c"),
            Bytes::from("m"),
            Bytes::from("x")
        ]
    );
    // Creating it again fails at submit time, as HBase's master does.
    let e = create(&f, "t", &[]).expect_err("exists");
    assert_eq!(e.class, TABLE_EXISTS);
    assert!(e.message.contains("'t'"), "{}", e.message);
    // Bad split keys are refused with the key named.
    let e = create(&f, "u", &[b"m", b"c"]).expect_err("unsorted");
    assert!(
        e.do_not_retry && e.message.contains("split key 1"),
        "{}",
        e.message
    );
    // Enable of an enabled table and truncate of an enabled table fail in the procedure.
    assert_eq!(enable(&f, "t"), (FINISHED, Some(TABLE_NOT_DISABLED.into())));
    assert_eq!(
        truncate(&f, "t", true),
        (FINISHED, Some(TABLE_NOT_DISABLED.into()))
    );
    // Deleting an enabled table fails at submit time.
    let e = f
        .call("MasterService", "DeleteTable", &delete_req("t"))
        .expect_err("enabled");
    assert_eq!(e.class, TABLE_NOT_DISABLED);
    assert_eq!(disable(&f, "t"), (FINISHED, None));
    assert_eq!(disable(&f, "t"), (FINISHED, Some(TABLE_NOT_ENABLED.into())));
    assert_eq!(
        disable(&f, "nosuch"),
        (FINISHED, Some(TABLE_NOT_FOUND.into()))
    );
    // Truncate keeping the splits: enabled again, same boundaries, new regions.
    assert_eq!(truncate(&f, "t", true), (FINISHED, None));
    assert_eq!(
        region_starts(&f, "t"),
        vec![
            Bytes::new(),
            Bytes::from("c"),
            Bytes::from("m"),
            Bytes::from("x")
        ]
    );
    assert_eq!(
        f.svc.rs.router.table("t").expect("t").state,
        crate::router::TableState::Enabled
    );
    assert_eq!(disable(&f, "t"), (FINISHED, None));
    assert_eq!(truncate(&f, "t", false), (FINISHED, None));
    assert_eq!(region_starts(&f, "t"), vec![Bytes::new()]);
    assert_eq!(disable(&f, "t"), (FINISHED, None));
    assert_eq!(enable(&f, "t"), (FINISHED, None));
    assert_eq!(disable(&f, "t"), (FINISHED, None));
    let r: hbase::DeleteTableResponse = f.master("DeleteTable", &delete_req("t"));
    assert_eq!(f.procedure(r.proc_id), (FINISHED, None));
    assert!(region_starts(&f, "t").is_empty());
    let e = f
        .call("MasterService", "DeleteTable", &delete_req("t"))
        .expect_err("gone");
    assert_eq!(e.class, TABLE_NOT_FOUND);
    // An unknown procedure is NOT_FOUND (the client then checks the outcome itself).
    assert_eq!(f.procedure(Some(987_654)), (State::NotFound as i32, None));
}

#[test]
fn descriptors_round_trip_and_list() {
    let f = Fixture::new();
    let mut schema = table_schema("t", &["cf", "hot"]);
    let attr = |k: &str, v: &str| hbase::BytesBytesPair {
        first: Bytes::copy_from_slice(k.as_bytes()),
        second: Bytes::copy_from_slice(v.as_bytes()),
    };
    schema.column_families[1].attributes = vec![
        attr("VERSIONS", "4"),
        attr("TTL", "3600"),
        attr("BLOOMFILTER", "ROWCOL"),
    ];
    let r: hbase::CreateTableResponse = f.master(
        "CreateTable",
        &hbase::CreateTableRequest {
            table_schema: schema,
            split_keys: Vec::new(),
            nonce_group: None,
            nonce: None,
        },
    );
    assert_eq!(f.procedure(r.proc_id), (FINISHED, None));
    create_namespace(&f, "ns1");
    create(&f, "ns1:other", &[]).expect("create ns1:other");
    let d: hbase::GetTableDescriptorsResponse = f.master(
        "GetTableDescriptors",
        &hbase::GetTableDescriptorsRequest {
            table_names: vec![table_req("t"), table_req("missing")],
            ..Default::default()
        },
    );
    assert_eq!(d.table_schema.len(), 1, "missing tables are left out");
    let hot = &d.table_schema[0].column_families[1];
    let get = |k: &str| {
        hot.attributes
            .iter()
            .find(|a| &a.first[..] == k.as_bytes())
            .map(|a| String::from_utf8_lossy(&a.second).into_owned())
    };
    assert_eq!(&hot.name[..], b"hot");
    assert_eq!(get("VERSIONS").as_deref(), Some("4"));
    assert_eq!(get("TTL").as_deref(), Some("3600"));
    assert_eq!(get("BLOOMFILTER").as_deref(), Some("ROWCOL"));
    let names = |req: hbase::GetTableNamesRequest| {
        let r: hbase::GetTableNamesResponse = f.master("GetTableNames", &req);
        r.table_names
            .iter()
            .map(|t| crate::hbase::names::table_from_pb(t).expect("name"))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(Default::default()), vec!["ns1:other", "t"]);
    assert_eq!(
        names(hbase::GetTableNamesRequest {
            regex: Some("default:.*".into()),
            ..Default::default()
        }),
        vec!["t"]
    );
    assert_eq!(
        names(hbase::GetTableNamesRequest {
            namespace: Some("ns1".into()),
            ..Default::default()
        }),
        vec!["ns1:other"]
    );
    let e = f
        .call(
            "MasterService",
            "GetTableNames",
            &hbase::GetTableNamesRequest {
                regex: Some("(".into()),
                ..Default::default()
            },
        )
        .expect_err("bad regex");
    assert!(e.message.contains("'('"), "{}", e.message);
    let ns: hbase::ListNamespaceDescriptorsResponse = f.master(
        "ListNamespaceDescriptors",
        &hbase::ListNamespaceDescriptorsRequest {},
    );
    let ns: Vec<_> = ns
        .namespace_descriptor
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(
        ns,
        vec![
            Bytes::from("default"),
            Bytes::from("hbase"),
            Bytes::from("ns1")
        ]
    );
    let st: hbase::GetTableStateResponse = f.master(
        "GetTableState",
        &hbase::GetTableStateRequest {
            table_name: table_req("t"),
        },
    );
    assert_eq!(
        st.table_state.state,
        hbase::table_state::State::Enabled as i32
    );
}

#[test]
fn families_change_through_modify_and_column_calls() {
    let f = Fixture::new();
    create(&f, "t", &[]).expect("create");
    let fam = |name: &str, versions: &str| hbase::ColumnFamilySchema {
        name: Bytes::copy_from_slice(name.as_bytes()),
        attributes: vec![hbase::BytesBytesPair {
            first: Bytes::from_static(b"VERSIONS"),
            second: Bytes::copy_from_slice(versions.as_bytes()),
        }],
        configuration: Vec::new(),
    };
    let add = |f: &Fixture, family| {
        f.call(
            "MasterService",
            "AddColumn",
            &hbase::AddColumnRequest {
                table_name: table_req("t"),
                column_families: family,
                nonce_group: None,
                nonce: None,
            },
        )
    };
    let r: hbase::AddColumnResponse =
        prost::Message::decode(add(&f, fam("x", "3")).expect("add x").param).expect("decodes");
    assert_eq!(f.procedure(r.proc_id), (FINISHED, None));
    let e = add(&f, fam("x", "3")).expect_err("exists");
    assert_eq!(e.class, super::INVALID_FAMILY_OPERATION);
    let schema = |f: &Fixture| (*f.svc.rs.router.table("t").expect("t").schema).clone();
    assert_eq!(schema(&f).family(b"x").expect("x").max_versions, 3);
    let _: hbase::ModifyColumnResponse = f.master(
        "ModifyColumn",
        &hbase::ModifyColumnRequest {
            table_name: table_req("t"),
            column_families: fam("x", "7"),
            nonce_group: None,
            nonce: None,
        },
    );
    assert_eq!(schema(&f).family(b"x").expect("x").max_versions, 7);
    // ModifyTable to exactly {cf, y}: x goes, y comes.
    let _: hbase::ModifyTableResponse = f.master(
        "ModifyTable",
        &hbase::ModifyTableRequest {
            table_name: table_req("t"),
            table_schema: table_schema("t", &["cf", "y"]),
            nonce_group: None,
            nonce: None,
            reopen_regions: None,
        },
    );
    let names: Vec<_> = schema(&f).families.iter().map(|f| f.name.clone()).collect();
    assert_eq!(names, vec!["cf", "y"]);
    let del = |f: &Fixture, name: &'static [u8]| {
        f.call(
            "MasterService",
            "DeleteColumn",
            &hbase::DeleteColumnRequest {
                table_name: table_req("t"),
                column_name: Bytes::from_static(name),
                nonce_group: None,
                nonce: None,
            },
        )
    };
    del(&f, b"y").expect("delete y");
    assert_eq!(
        del(&f, b"y").expect_err("gone").class,
        super::INVALID_FAMILY_OPERATION
    );
    let e = del(&f, b"cf").expect_err("last family");
    assert!(e.message.contains("only column family"), "{}", e.message);
}

fn split_region(
    f: &Fixture,
    region: &hbase::RegionInfo,
    row: Option<&str>,
) -> Result<Option<u64>, crate::hbase::HbaseError> {
    let r: hbase::SplitTableRegionResponse = f.try_master(
        "SplitRegion",
        &hbase::SplitTableRegionRequest {
            region_info: region.clone(),
            split_row: row.map(|r| Bytes::copy_from_slice(r.as_bytes())),
            nonce_group: None,
            nonce: None,
        },
    )?;
    Ok(r.proc_id)
}

#[test]
fn split_region_splits_at_the_row_given_or_the_middle_and_keeps_every_row() {
    use cellar_model::MutationKind;
    use cellar_model::{Get, RowMutation};
    let f = Fixture::new();
    create(&f, "s", &[b"m"]).expect("create");
    let locate = |row: &str| {
        f.svc
            .rs
            .router
            .locate("s", row.as_bytes())
            .expect("located")
    };
    let rows: Vec<String> = (0..200)
        .map(|i| format!("{}{i:03}", ["c", "p"][i % 2]))
        .collect();
    for row in &rows {
        let region = locate(row);
        // 2 KiB values: a region needs more than one block for a middle row.
        let m = RowMutation::new(row.clone().into_bytes()).put(b"cf", b"q", 1, row.repeat(512));
        f.svc
            .rs
            .mutate("s", region.info.id, &m, MutationKind::PutDelete, None)
            .expect("put");
    }
    let before = regions(&f, "s");
    assert_eq!(before.len(), 2);

    // At a row: the region holding it splits there.
    let proc_id = split_region(&f, &before[0], Some("f")).expect("split at f");
    assert_eq!(f.procedure(proc_id), (FINISHED, None));
    let starts = |f: &Fixture| region_starts(f, "s");
    assert_eq!(
        starts(&f),
        vec![Bytes::new(), Bytes::from("f"), Bytes::from("m")]
    );

    // Without a row: at the region's middle row, strictly inside it.
    split_region(&f, &before[1], None).expect("split at the middle");
    let after = starts(&f);
    assert_eq!(after.len(), 4, "{after:?}");
    assert!(after[3] > "m", "{after:?}");

    // The parent is gone: asking again is a clear do-not-retry error, not a retried one.
    let e = split_region(&f, &before[0], Some("d")).expect_err("parent split already");
    assert!(
        e.do_not_retry && e.message.contains("not open"),
        "{}",
        e.message
    );
    // A row outside the region, or where it starts, is refused and changes nothing.
    let now = regions(&f, "s");
    for bad in ["z", "f", "a"] {
        let e = split_region(&f, &now[1], Some(bad)).expect_err("outside or at the start");
        assert!(e.do_not_retry, "{bad}: {}", e.message);
    }
    assert_eq!(regions(&f, "s").len(), 4);

    // A region with too few rows for a middle needs a row.
    create(&f, "empty", &[]).expect("create");
    let e = split_region(&f, &regions(&f, "empty")[0], None).expect_err("nothing to split");
    assert!(
        e.do_not_retry && e.message.contains("name a split row"),
        "{}",
        e.message
    );

    // Every row is still there, each in the region meta says holds it.
    for row in &rows {
        let region = locate(row);
        let cells = f
            .svc
            .rs
            .get("s", region.info.id, &Get::new(row.clone().into_bytes()))
            .expect("get");
        assert_eq!(cells.len(), 1, "row {row}");
    }
}

fn namespace(name: &str, conf: &[(&str, &str)]) -> hbase::NamespaceDescriptor {
    hbase::NamespaceDescriptor {
        name: Bytes::copy_from_slice(name.as_bytes()),
        configuration: conf
            .iter()
            .map(|(k, v)| hbase::NameStringPair {
                name: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
    }
}

fn get_namespace(
    f: &Fixture,
    name: &str,
) -> Result<hbase::NamespaceDescriptor, crate::hbase::HbaseError> {
    let req = hbase::GetNamespaceDescriptorRequest {
        namespace_name: name.to_string(),
    };
    let r: hbase::GetNamespaceDescriptorResponse = f.try_master("GetNamespaceDescriptor", &req)?;
    Ok(r.namespace_descriptor)
}

#[test]
fn namespaces_are_created_modified_listed_and_removed_only_when_empty() {
    use crate::hbase::exceptions::{CONSTRAINT, NAMESPACE_EXISTS, NAMESPACE_NOT_FOUND};
    let f = Fixture::new();
    let create_ns = |d: hbase::NamespaceDescriptor| {
        f.call(
            "MasterService",
            "CreateNamespace",
            &hbase::CreateNamespaceRequest {
                namespace_descriptor: d,
                nonce_group: None,
                nonce: None,
            },
        )
    };
    let delete_ns = |name: &str| {
        f.call(
            "MasterService",
            "DeleteNamespace",
            &hbase::DeleteNamespaceRequest {
                namespace_name: name.to_string(),
                nonce_group: None,
                nonce: None,
            },
        )
    };
    let listed = |f: &Fixture| -> Vec<String> {
        let r: hbase::ListNamespacesResponse =
            f.master("ListNamespaces", &hbase::ListNamespacesRequest {});
        r.namespace_name
    };

    // A created namespace exists with no table in it, with its configuration.
    create_ns(namespace("app", &[("k2", "b"), ("k1", "a")])).expect("create");
    assert_eq!(listed(&f), vec!["app", "default", "hbase"]);
    assert_eq!(
        get_namespace(&f, "app").expect("found"),
        namespace("app", &[("k1", "a"), ("k2", "b")])
    );
    let e = create_ns(namespace("app", &[])).expect_err("exists");
    assert_eq!(e.class, NAMESPACE_EXISTS, "{}", e.message);
    let e = create_ns(namespace("default", &[])).expect_err("built in");
    assert_eq!(e.class, NAMESPACE_EXISTS, "{}", e.message);
    let e = create_ns(namespace("no-dash", &[])).expect_err("illegal name");
    assert!(e.do_not_retry && e.message.contains("'-'"), "{}", e.message);

    // Modify replaces the configuration.
    f.master::<hbase::ModifyNamespaceResponse>(
        "ModifyNamespace",
        &hbase::ModifyNamespaceRequest {
            namespace_descriptor: namespace("app", &[("k3", "c")]),
            nonce_group: None,
            nonce: None,
        },
    );
    assert_eq!(
        get_namespace(&f, "app").expect("found"),
        namespace("app", &[("k3", "c")])
    );

    // Only an empty, user namespace can go.
    create(&f, "app:t", &[]).expect("a table in it");
    let e = delete_ns("app").expect_err("not empty");
    assert_eq!(e.class, CONSTRAINT);
    assert!(e.message.contains("app:t"), "{}", e.message);
    for reserved in ["default", "hbase"] {
        assert_eq!(delete_ns(reserved).expect_err("reserved").class, CONSTRAINT);
    }
    assert_eq!(
        delete_ns("nosuch").expect_err("missing").class,
        NAMESPACE_NOT_FOUND
    );
    assert_eq!(disable(&f, "app:t"), (FINISHED, None));
    let r: hbase::DeleteTableResponse = f.master("DeleteTable", &delete_req("app:t"));
    assert_eq!(f.procedure(r.proc_id), (FINISHED, None));
    delete_ns("app").expect("empty now");
    assert_eq!(
        get_namespace(&f, "app").expect_err("gone").class,
        NAMESPACE_NOT_FOUND
    );
    assert_eq!(listed(&f), vec!["default", "hbase"]);

    // A table goes only into a namespace that exists, as in HBase.
    let e = create(&f, "nosuch:t", &[]).expect_err("no such namespace");
    assert_eq!(e.class, NAMESPACE_NOT_FOUND, "{}", e.message);
    assert!(e.message.contains("nosuch"), "{}", e.message);
    assert_eq!(listed(&f), vec!["default", "hbase"]);
    create_ns(namespace("nosuch", &[])).expect("create");
    create(&f, "nosuch:t", &[]).expect("a table in it now");
}

#[test]
fn cluster_status_names_this_server_and_only_the_parts_asked_for() {
    use cellar_proto::hbase::Option as Part;
    let f = Fixture::new();
    create(&f, "c", &[b"m"]).expect("create");
    let status = |parts: Vec<i32>| -> hbase::ClusterStatus {
        let r: hbase::GetClusterStatusResponse = f.master(
            "GetClusterStatus",
            &hbase::GetClusterStatusRequest { options: parts },
        );
        r.cluster_status
    };
    let me = crate::hbase::registry::server_name(&f.svc);

    let all = status(Vec::new());
    assert_eq!(all.master.as_ref(), Some(&me));
    assert_eq!(all.servers_name, vec![me.clone()]);
    assert_eq!(
        all.cluster_id.map(|c| c.cluster_id),
        Some(f.svc.cluster_id.clone())
    );
    assert!(all
        .hbase_version
        .expect("version")
        .version
        .starts_with("2.6"));
    assert_eq!(all.balancer_on, Some(true), "on, as HBase's standalone");
    assert!(all.dead_servers.is_empty() && all.backup_masters.is_empty());
    let [live] = &all.live_servers[..] else {
        panic!("one live server: {:?}", all.live_servers);
    };
    assert_eq!(live.server, me);
    // Both of the table's regions and meta's, each with its one store.
    let names: Vec<String> = live
        .server_load
        .region_loads
        .iter()
        .map(|l| String::from_utf8_lossy(&l.region_specifier.value).into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(
        names.iter().filter(|n| n.starts_with("c,")).count(),
        2,
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "hbase:meta,,1"), "{names:?}");
    let [counts] = &all.table_region_states_count[..] else {
        panic!("one user table: {:?}", all.table_region_states_count);
    };
    assert_eq!(counts.region_states_count.open_regions, 2);
    assert_eq!(counts.region_states_count.total_regions, 2);

    let some = status(vec![Part::LiveServers as i32]);
    assert_eq!(some.live_servers.len(), 1);
    assert!(some.master.is_none() && some.cluster_id.is_none() && some.hbase_version.is_none());

    // Region loads of one table, as AdminService answers them.
    let reply = f
        .call(
            "AdminService",
            "GetRegionLoad",
            &hbase::GetRegionLoadRequest {
                table_name: Some(table_req("c")),
            },
        )
        .expect("region load");
    let loads = <hbase::GetRegionLoadResponse as prost::Message>::decode(reply.param)
        .expect("decodes")
        .region_loads;
    assert_eq!(loads.len(), 2);
    assert!(loads.iter().all(|l| l.stores == Some(1)), "{loads:?}");
}

#[test]
fn the_standalone_balancer_switches_and_there_is_no_maintenance_mode() {
    let f = Fixture::new();
    let enabled = || -> bool {
        let r: hbase::IsBalancerEnabledResponse =
            f.master("IsBalancerEnabled", &hbase::IsBalancerEnabledRequest {});
        r.enabled
    };
    assert!(enabled(), "on by default, as HBase's standalone");
    let switch = |on: bool| -> Option<bool> {
        let reply = f
            .call(
                "MasterService",
                "SetBalancerRunning",
                &hbase::SetBalancerRunningRequest {
                    on,
                    synchronous: None,
                },
            )
            .expect("switches");
        <hbase::SetBalancerRunningResponse as prost::Message>::decode(reply.param)
            .expect("decodes")
            .prev_balance_value
    };
    assert_eq!(switch(false), Some(true));
    assert!(!enabled());
    assert_eq!(switch(true), Some(false));
    assert!(enabled());
    let m: hbase::IsInMaintenanceModeResponse = f.master(
        "IsMasterInMaintenanceMode",
        &hbase::IsInMaintenanceModeRequest {},
    );
    assert!(!m.in_maintenance_mode);
    // Something Cellar does not do is refused by name, as an exception the client rebuilds.
    let e = f
        .call(
            "MasterService",
            "Balance",
            &hbase::IsBalancerEnabledRequest {},
        )
        .expect_err("unsupported");
    assert_eq!(e.class, crate::hbase::exceptions::DO_NOT_RETRY);
    assert!(e.message.contains("MasterService.Balance"), "{}", e.message);
}

#[test]
fn a_ddl_request_retried_with_its_nonce_gets_its_first_procedure_back() {
    use crate::hbase::master_service::INVALID_FAMILY_OPERATION;
    let f = Fixture::new();
    let create_req = |nonce: u64| hbase::CreateTableRequest {
        table_schema: table_schema("n", &["cf"]),
        split_keys: Vec::new(),
        nonce_group: Some(9),
        nonce: Some(nonce),
    };
    let first: hbase::CreateTableResponse = f.master("CreateTable", &create_req(77));
    assert_eq!(f.procedure(first.proc_id), (FINISHED, None));
    // The client resends a call whose answer it lost: HBase finds the nonce registered and
    // answers the first procedure; the table is not created twice nor reported as existing.
    let again: hbase::CreateTableResponse = f
        .try_master("CreateTable", &create_req(77))
        .expect("a retry with the same nonce answers the first procedure");
    assert_eq!(again.proc_id, first.proc_id);
    // Another nonce is another request: the table exists.
    let other = f
        .try_master::<hbase::CreateTableResponse>("CreateTable", &create_req(78))
        .expect_err("exists");
    assert_eq!(other.class, TABLE_EXISTS);

    let add = |nonce: Option<u64>| hbase::AddColumnRequest {
        table_name: table_req("n"),
        column_families: table_schema("n", &["extra"]).column_families[0].clone(),
        nonce_group: Some(9),
        nonce,
    };
    let added: hbase::AddColumnResponse = f.master("AddColumn", &add(Some(5)));
    assert_eq!(f.procedure(added.proc_id), (FINISHED, None));
    let replay: hbase::AddColumnResponse = f
        .try_master("AddColumn", &add(Some(5)))
        .expect("a replayed AddColumn answers its procedure");
    assert_eq!(replay.proc_id, added.proc_id);
    // Without a nonce (0 is HBase's NO_NONCE) nothing is deduplicated.
    let dup = f
        .try_master::<hbase::AddColumnResponse>("AddColumn", &add(Some(0)))
        .expect_err("the family exists");
    assert_eq!(dup.class, INVALID_FAMILY_OPERATION);
}

#[test]
fn table_lists_check_the_namespace_and_filter_named_tables_by_the_regex() {
    use crate::hbase::exceptions::NAMESPACE_NOT_FOUND;
    let f = Fixture::new();
    create(&f, "a1", &[]).expect("create a1");
    create(&f, "b1", &[]).expect("create b1");
    let e = f
        .try_master::<hbase::GetTableNamesResponse>(
            "GetTableNames",
            &hbase::GetTableNamesRequest {
                namespace: Some("nope".into()),
                ..Default::default()
            },
        )
        .expect_err("no such namespace");
    assert_eq!(e.class, NAMESPACE_NOT_FOUND);
    let e = f
        .try_master::<hbase::GetTableDescriptorsResponse>(
            "GetTableDescriptors",
            &hbase::GetTableDescriptorsRequest {
                namespace: Some("nope".into()),
                ..Default::default()
            },
        )
        .expect_err("no such namespace");
    assert_eq!(e.class, NAMESPACE_NOT_FOUND);
    // Tables named and a regex: HBase keeps only those the regex matches.
    let d: hbase::GetTableDescriptorsResponse = f.master(
        "GetTableDescriptors",
        &hbase::GetTableDescriptorsRequest {
            table_names: vec![table_req("a1"), table_req("b1")],
            regex: Some("a.*".into()),
            ..Default::default()
        },
    );
    let got: Vec<_> = d
        .table_schema
        .iter()
        .map(|s| {
            crate::hbase::names::table_from_pb(s.table_name.as_ref().expect("name")).expect("ok")
        })
        .collect();
    assert_eq!(got, vec!["a1"]);
}

#[test]
fn flush_table_refuses_families_the_table_lacks() {
    use crate::hbase::exceptions::NO_SUCH_FAMILY;
    let f = Fixture::new();
    create(&f, "fl", &[]).expect("create");
    let flush = |families: &[&str]| {
        f.try_master::<hbase::FlushTableResponse>(
            "FlushTable",
            &hbase::FlushTableRequest {
                table_name: table_req("fl"),
                column_family: families
                    .iter()
                    .map(|c| Bytes::copy_from_slice(c.as_bytes()))
                    .collect(),
                nonce_group: None,
                nonce: None,
            },
        )
    };
    let ok = flush(&["cf"]).expect("a family the table has");
    assert_eq!(f.procedure(ok.proc_id), (FINISHED, None));
    let e = flush(&["cf", "nope", "gone"]).expect_err("missing families");
    assert_eq!(e.class, NO_SUCH_FAMILY);
    assert_eq!(
        e.message,
        "Column families [nope, gone] don't exist in table fl"
    );
}

/// HBase 2.6 lists its system tables with include_sys_tables, and describes hbase:meta when
/// named (`describe 'hbase:meta'`); Cellar's system table is hbase:meta.
#[test]
fn system_tables_are_listed_when_asked_and_meta_is_described_when_named() {
    let f = Fixture::new();
    create(&f, "t", &[]).expect("create t");
    let names = |req: hbase::GetTableNamesRequest| {
        let r: hbase::GetTableNamesResponse = f.master("GetTableNames", &req);
        r.table_names
            .iter()
            .map(|t| crate::hbase::names::table_from_pb(t).expect("name"))
            .collect::<Vec<_>>()
    };
    let described = |req: hbase::GetTableDescriptorsRequest| {
        let r: hbase::GetTableDescriptorsResponse = f.master("GetTableDescriptors", &req);
        r.table_schema
    };
    let schema_names = |schemas: &[hbase::TableSchema]| {
        schemas
            .iter()
            .map(|s| {
                crate::hbase::names::table_from_pb(s.table_name.as_ref().expect("name"))
                    .expect("ok")
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(names(Default::default()), vec!["t"]);
    let sys = hbase::GetTableNamesRequest {
        include_sys_tables: Some(true),
        ..Default::default()
    };
    assert_eq!(names(sys.clone()), vec!["hbase:meta", "t"]);
    assert_eq!(
        names(hbase::GetTableNamesRequest {
            regex: Some("hbase:.*".into()),
            ..sys.clone()
        }),
        vec!["hbase:meta"]
    );
    assert_eq!(
        names(hbase::GetTableNamesRequest {
            namespace: Some("hbase".into()),
            ..sys
        }),
        vec!["hbase:meta"]
    );
    let all = described(hbase::GetTableDescriptorsRequest {
        include_sys_tables: Some(true),
        ..Default::default()
    });
    assert_eq!(schema_names(&all), vec!["hbase:meta", "t"]);
    // Named: described whether or not system tables are asked for (HBase's describe).
    let meta = described(hbase::GetTableDescriptorsRequest {
        table_names: vec![table_to_pb("hbase:meta"), table_req("t")],
        ..Default::default()
    });
    assert_eq!(schema_names(&meta), vec!["hbase:meta", "t"]);
    let families: Vec<_> = meta[0]
        .column_families
        .iter()
        .map(|c| String::from_utf8_lossy(&c.name).into_owned())
        .collect();
    assert_eq!(families, vec!["info", "rep_barrier", "table"]);
    let info = &meta[0].column_families[0];
    let get = |k: &str| {
        info.attributes
            .iter()
            .find(|a| &a.first[..] == k.as_bytes())
            .map(|a| String::from_utf8_lossy(&a.second).into_owned())
    };
    assert_eq!(get("VERSIONS").as_deref(), Some("3"));
    assert_eq!(get("IN_MEMORY").as_deref(), Some("true"));
    assert_eq!(get("BLOCKSIZE").as_deref(), Some("8192"));
    // The namespace listings of "hbase" hold its system tables, as HBase's do.
    let by_ns: hbase::ListTableNamesByNamespaceResponse = f.master(
        "ListTableNamesByNamespace",
        &hbase::ListTableNamesByNamespaceRequest {
            namespace_name: "hbase".into(),
        },
    );
    assert_eq!(by_ns.table_name, vec![table_to_pb("hbase:meta")]);
    let by_ns: hbase::ListTableDescriptorsByNamespaceResponse = f.master(
        "ListTableDescriptorsByNamespace",
        &hbase::ListTableDescriptorsByNamespaceRequest {
            namespace_name: "hbase".into(),
        },
    );
    assert_eq!(schema_names(&by_ns.table_schema), vec!["hbase:meta"]);
}

/// ModifyTable with reopen_regions false: HBase refuses adding or removing families
/// (HBaseIOException); other changes are kept.
#[test]
fn modify_table_without_reopening_regions_keeps_the_families() {
    let f = Fixture::new();
    create(&f, "t", &[]).expect("create t");
    let modify = |families: &[&str], versions: &str| {
        let mut schema = table_schema("t", families);
        for c in &mut schema.column_families {
            c.attributes.retain(|a| &a.first[..] != b"VERSIONS");
            c.attributes.push(hbase::BytesBytesPair {
                first: Bytes::from_static(b"VERSIONS"),
                second: Bytes::copy_from_slice(versions.as_bytes()),
            });
        }
        let r: hbase::ModifyTableResponse = f.master(
            "ModifyTable",
            &hbase::ModifyTableRequest {
                table_name: table_req("t"),
                table_schema: schema,
                nonce_group: None,
                nonce: None,
                reopen_regions: Some(false),
            },
        );
        let r: hbase::GetProcedureResultResponse = f.master(
            "getProcedureResult",
            &hbase::GetProcedureResultRequest {
                proc_id: r.proc_id.expect("a procedure"),
            },
        );
        assert_eq!(r.state, FINISHED);
        r.exception.and_then(|e| e.generic_exception).map(|g| {
            (
                g.class_name.unwrap_or_default(),
                g.message.unwrap_or_default(),
            )
        })
    };
    let schema = |f: &Fixture| f.svc.rs.router.table("t").expect("t").schema.clone();
    assert_eq!(
        modify(&["cf", "more"], "1"),
        Some((
            "org.apache.hadoop.hbase.HBaseIOException".to_string(),
            "Cannot add or remove column families when this modification won't reopen regions."
                .to_string()
        ))
    );
    assert_eq!(schema(&f).families.len(), 1, "nothing changed");
    assert_eq!(modify(&["cf"], "5"), None);
    assert_eq!(schema(&f).family(b"cf").expect("cf").max_versions, 5);
}
