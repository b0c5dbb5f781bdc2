//! The access-control matrix: every action (R, W, X, C, A) granted at every scope (global,
//! namespace, table, family, column) to a user of its own, and what each may then do — read,
//! write the granted column and another, flush (table ADMIN or CREATE), create a table
//! (namespace CREATE or ADMIN), grant — on both front ends of one `cellar standalone`: the
//! native protocol (Rust client) and HBase's (its wire, as the Java client speaks it). Each
//! answer is checked against HBase's rule for the call, allowed and denied alike.

mod support;

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{
    ClientConfig, ErrorCode, FamilySchema, Get, PermissionScope, RowMutation, TableSchema,
};
use cellar_proto::hbase;
use std::time::Duration;
use support::hbase::{region, Conn};
use support::Server;

const SCOPES: [&str; 5] = ["global", "namespace", "table", "family", "column"];
const ACTIONS: [char; 5] = ['R', 'W', 'X', 'C', 'A'];

fn scope(kind: &str) -> PermissionScope {
    let b = |s: &str| Some(Bytes::copy_from_slice(s.as_bytes()));
    match kind {
        "global" => PermissionScope::default(),
        "namespace" => PermissionScope {
            namespace: "default".into(),
            ..Default::default()
        },
        "table" => PermissionScope {
            table: "t".into(),
            ..Default::default()
        },
        "family" => PermissionScope {
            table: "t".into(),
            family: b("f"),
            ..Default::default()
        },
        _ => PermissionScope {
            table: "t".into(),
            family: b("f"),
            qualifier: b("q"),
            ..Default::default()
        },
    }
}

/// What HBase's rule allows a user holding `action` at `scope`.
fn allowed(op: &str, scope: &str, action: char) -> bool {
    let wide = matches!(scope, "global" | "namespace" | "table");
    match op {
        // Reads are let in with READ anywhere in the table (the rest is filtered).
        "get" => action == 'R',
        "put q" => action == 'W',
        "put other" => action == 'W' && scope != "column",
        "flush" => matches!(action, 'C' | 'A') && wide,
        "create" => matches!(action, 'C' | 'A') && matches!(scope, "global" | "namespace"),
        "grant" => action == 'A' && wide,
        _ => unreachable!("{op}"),
    }
}

fn user(scope: &str, action: char) -> String {
    format!("{scope}-{}", action.to_ascii_lowercase())
}

fn native(addr: &str, user: &str) -> Client {
    Client::connect_with(
        addr,
        ClientConfig {
            user: Some(user.into()),
            retries: 0,
            rpc_timeout: Duration::from_secs(20),
            ..ClientConfig::default()
        },
    )
    .expect("connect")
}

/// A native call's verdict: allowed, or refused for want of a permission (anything else fails
/// the test).
fn native_verdict<T: std::fmt::Debug>(r: cellar_client::Result<T>, what: &str) -> bool {
    match r {
        Ok(_) => true,
        Err(e) if e.code() == Some(ErrorCode::PermissionDenied) => false,
        Err(e) => panic!("{what}: neither allowed nor denied: {e}"),
    }
}

/// An HBase call's verdict.
fn hbase_verdict(r: Result<(Bytes, Bytes), hbase::ExceptionResponse>, what: &str) -> bool {
    match r {
        Ok(_) => true,
        Err(e)
            if e.exception_class_name.as_deref()
                == Some("org.apache.hadoop.hbase.security.AccessDeniedException") =>
        {
            assert_eq!(
                e.do_not_retry,
                Some(true),
                "{what}: AccessDeniedException is final"
            );
            false
        }
        Err(e) => panic!("{what}: neither allowed nor denied: {e:?}"),
    }
}

fn put_proto(qualifier: &str) -> hbase::MutationProto {
    use hbase::mutation_proto::column_value::QualifierValue;
    hbase::MutationProto {
        row: Some(Bytes::from_static(b"r")),
        mutate_type: Some(hbase::mutation_proto::MutationType::Put as i32),
        column_value: vec![hbase::mutation_proto::ColumnValue {
            family: Bytes::from_static(b"f"),
            qualifier_value: vec![QualifierValue {
                qualifier: Some(Bytes::copy_from_slice(qualifier.as_bytes())),
                value: Some(Bytes::from_static(b"v")),
                ..Default::default()
            }],
        }],
        ..Default::default()
    }
}

fn table_name(t: &str) -> hbase::TableName {
    hbase::TableName {
        namespace: Bytes::from_static(b"default"),
        qualifier: Bytes::copy_from_slice(t.as_bytes()),
    }
}

#[test]
fn every_action_at_every_scope_on_both_front_ends() {
    let tmp = tempfile::tempdir().expect("tmp");
    let config = tmp.path().join("cellar.toml");
    std::fs::write(
        &config,
        "[security]\nauthorization = true\nsuperusers = [\"admin\"]\n",
    )
    .expect("config");
    let server = Server::start_in(&tmp.path().join("data"), Some(&config));
    let admin = native(&server.native, "admin");
    admin
        .admin()
        .create_table(TableSchema::new("t", vec![FamilySchema::new("f")]), vec![])
        .expect("create t");
    admin
        .table("t")
        .put(RowMutation::new("r").put(b"f", b"q", cellar_client::LATEST_TIMESTAMP, "v"))
        .expect("put");
    for s in SCOPES {
        for a in ACTIONS {
            admin
                .admin()
                .grant(&user(s, a), scope(s), &a.to_string())
                .expect("grant");
        }
    }
    let region_name = Conn::open_as(&server.hbase, "ClientService", "admin").locate("t", "r");
    let mut mismatches = Vec::new();
    let mut created = 0;
    for s in SCOPES {
        for a in ACTIONS {
            let u = user(s, a);
            let c = native(&server.native, &u);
            let mut hc = Conn::open_as(&server.hbase, "ClientService", &u);
            let mut hm = Conn::open_as(&server.hbase, "MasterService", &u);
            created += 1;
            let new_table = format!("n{created}");
            let get = hbase::GetRequest {
                region: region(&region_name),
                get: hbase::Get {
                    row: Bytes::from_static(b"r"),
                    ..Default::default()
                },
            };
            let mutate = |q: &str| hbase::MutateRequest {
                region: region(&region_name),
                mutation: put_proto(q),
                ..Default::default()
            };
            let grant = hbase::GrantRequest {
                user_permission: hbase::UserPermission {
                    user: Bytes::from_static(b"someone"),
                    permission: hbase::Permission {
                        r#type: hbase::permission::Type::Table as i32,
                        table_permission: Some(hbase::TablePermission {
                            table_name: Some(table_name("t")),
                            action: vec![hbase::permission::Action::Read as i32],
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                },
                merge_existing_permissions: Some(true),
            };
            let create = hbase::CreateTableRequest {
                table_schema: hbase::TableSchema {
                    table_name: Some(table_name(&format!("{new_table}h"))),
                    column_families: vec![hbase::ColumnFamilySchema {
                        name: Bytes::from_static(b"f"),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                ..Default::default()
            };
            let flush = hbase::FlushTableRequest {
                table_name: table_name("t"),
                ..Default::default()
            };
            let cases: Vec<(&str, bool, bool)> = vec![
                (
                    "get",
                    native_verdict(c.table("t").get(Get::new("r")), "native get"),
                    hbase_verdict(hc.call("Get", &get), "hbase get"),
                ),
                (
                    "put q",
                    native_verdict(
                        c.table("t").put(RowMutation::new("r").put(
                            b"f",
                            b"q",
                            cellar_client::LATEST_TIMESTAMP,
                            "v",
                        )),
                        "native put",
                    ),
                    hbase_verdict(hc.call("Mutate", &mutate("q")), "hbase put"),
                ),
                (
                    "put other",
                    native_verdict(
                        c.table("t").put(RowMutation::new("r").put(
                            b"f",
                            b"o",
                            cellar_client::LATEST_TIMESTAMP,
                            "v",
                        )),
                        "native put",
                    ),
                    hbase_verdict(hc.call("Mutate", &mutate("o")), "hbase put"),
                ),
                (
                    "flush",
                    native_verdict(c.admin().flush("t"), "native flush"),
                    hbase_verdict(hm.call("FlushTable", &flush), "hbase flush"),
                ),
                (
                    "create",
                    native_verdict(
                        c.admin().create_table(
                            TableSchema::new(format!("{new_table}n"), vec![FamilySchema::new("f")]),
                            vec![],
                        ),
                        "native create",
                    ),
                    hbase_verdict(hm.call("CreateTable", &create), "hbase create"),
                ),
                (
                    "grant",
                    native_verdict(
                        c.admin().grant("someone", scope("table"), "R"),
                        "native grant",
                    ),
                    hbase_verdict(hm.call("Grant", &grant), "hbase grant"),
                ),
            ];
            for (op, native_ok, hbase_ok) in cases {
                let want = allowed(op, s, a);
                if native_ok != want || hbase_ok != want {
                    mismatches.push(format!(
                        "{u}: {op}: native {native_ok}, hbase {hbase_ok}, HBase's rule {want}"
                    ));
                }
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // Reads with READ on one column see only that column.
    let col = native(&server.native, &user("column", 'R'));
    admin
        .table("t")
        .put(RowMutation::new("r").put(b"f", b"o", cellar_client::LATEST_TIMESTAMP, "other"))
        .expect("put");
    let row = col.table("t").get(Get::new("r")).expect("get");
    let quals: Vec<&[u8]> = row.cells.iter().map(|c| &c.qualifier[..]).collect();
    assert_eq!(quals, vec![&b"q"[..]]);

    // A scanner serves only the connection that opened it (its rows were checked for that
    // connection's user): another user's connection is told it is unknown.
    for i in 0..5 {
        admin
            .table("t")
            .put(RowMutation::new(format!("s{i}")).put(
                b"f",
                b"q",
                cellar_client::LATEST_TIMESTAMP,
                "v",
            ))
            .expect("put");
    }
    let mut reader = Conn::open_as(&server.hbase, "ClientService", &user("table", 'R'));
    let open = hbase::ScanRequest {
        region: Some(region(&region_name)),
        scan: Some(hbase::Scan::default()),
        number_of_rows: Some(1),
        ..Default::default()
    };
    let (param, _) = reader.call("Scan", &open).expect("open a scanner");
    let id = <hbase::ScanResponse as prost::Message>::decode(param)
        .expect("decodes")
        .scanner_id
        .expect("a scanner id");
    let next = hbase::ScanRequest {
        scanner_id: Some(id),
        number_of_rows: Some(10),
        ..Default::default()
    };
    let mut other = Conn::open_as(&server.hbase, "ClientService", &user("table", 'W'));
    let e = other
        .call("Scan", &next)
        .expect_err("another connection's scanner");
    assert_eq!(
        e.exception_class_name.as_deref(),
        Some("org.apache.hadoop.hbase.UnknownScannerException")
    );
    reader
        .call("Scan", &next)
        .expect("its own connection goes on");
}
