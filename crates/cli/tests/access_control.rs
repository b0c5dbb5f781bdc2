//! HBase's permission model on a real `cellar standalone` with `security.authorization` on,
//! through the native client: every action at every scope, allowed and denied; reads narrowed
//! to the families a user may see; batches with one denied action; check-and-mutate and
//! increments; DDL; grants through the shell; grants surviving `kill -9`; the audit log.
//! Users are the ones clients name (`security.simple_users = "loopback"`, the default: the
//! clients are on 127.0.0.1); certificates name users in `tests/tls.rs`.

mod support;

use cellar_client::blocking::Client;
use cellar_client::{
    BatchOp, BatchOutcome, ClientConfig, CompareOp, Condition, ErrorCode, FamilySchema, Get,
    PermissionScope, RowMutation, Scan, TableSchema, LATEST_TIMESTAMP,
};
use std::path::Path;
use std::time::Duration;
use support::Server;

const CONFIG: &str = r#"
[security]
authorization = true
superusers = ["admin"]
groups = { readers = ["carol"] }
"#;

fn as_user(addr: &str, user: Option<&str>) -> Client {
    Client::connect_with(
        addr,
        ClientConfig {
            user: user.map(str::to_string),
            retries: 0,
            rpc_timeout: Duration::from_secs(20),
            ..ClientConfig::default()
        },
    )
    .expect("connect")
}

fn scope(table: &str, family: Option<&str>) -> PermissionScope {
    PermissionScope {
        table: table.into(),
        family: family.map(|f| bytes::Bytes::copy_from_slice(f.as_bytes())),
        ..PermissionScope::default()
    }
}

fn denied<T: std::fmt::Debug>(r: cellar_client::Result<T>, what: &str) -> String {
    match r {
        Err(e) if e.code() == Some(ErrorCode::PermissionDenied) => e.to_string(),
        other => panic!("{what}: expected PERMISSION_DENIED, got {other:?}"),
    }
}

fn put(row: &str, family: &str, value: &str) -> RowMutation {
    RowMutation::new(row.to_string()).put(
        family.as_bytes(),
        b"q",
        LATEST_TIMESTAMP,
        value.to_string(),
    )
}

fn families(row: &cellar_client::Row) -> Vec<String> {
    let mut f: Vec<String> = row
        .cells
        .iter()
        .map(|c| String::from_utf8_lossy(&c.family).into_owned())
        .collect();
    f.dedup();
    f
}

fn start(dir: &Path) -> Server {
    let config = dir.join("cellar.toml");
    std::fs::write(&config, CONFIG).expect("config");
    Server::start_in(&dir.join("data"), Some(&config))
}

#[test]
fn permissions_at_every_scope_decide_what_each_user_may_do() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut server = start(tmp.path());
    let addr = server.native.clone();
    let admin = as_user(&addr, Some("admin"));
    admin
        .admin()
        .create_table(
            TableSchema::new("t", vec![FamilySchema::new("f"), FamilySchema::new("g")]),
            vec![],
        )
        .expect("a superuser creates a table");
    let t = admin.table("t");
    t.put(put("r1", "f", "f1").put(b"g", b"q", LATEST_TIMESTAMP, "g1"))
        .expect("a superuser writes");

    // Nobody: refused as unauthenticated, not as bob.
    let e = as_user(&addr, None)
        .table("t")
        .get(Get::new("r1"))
        .expect_err("no user");
    assert_eq!(e.code(), Some(ErrorCode::Unauthenticated), "{e}");

    // Bob holds nothing: no reads, writes, DDL, and no table in his list.
    let bob = as_user(&addr, Some("bob"));
    let msg = denied(bob.table("t").get(Get::new("r1")), "bob's get");
    assert!(
        msg.contains("user 'bob'") && msg.contains("action=READ"),
        "{msg}"
    );
    denied(bob.table("t").put(put("r2", "f", "x")), "bob's put");
    denied(bob.admin().disable_table("t"), "bob's disable");
    denied(
        bob.admin()
            .create_table(TableSchema::new("u", vec![FamilySchema::new("f")]), vec![]),
        "bob's create",
    );
    assert!(bob.admin().list_tables().expect("list").is_empty());
    denied(
        bob.admin().grant("bob", scope("t", None), "RWXCA"),
        "bob granting himself",
    );
    denied(
        bob.admin().balance_switch(false),
        "bob switching the balancer",
    );
    // A superuser's cluster calls pass the check (and are answered as without it).
    let balanced = admin.admin().balance();
    assert!(
        !matches!(&balanced, Err(e) if e.code() == Some(ErrorCode::PermissionDenied)),
        "{balanced:?}"
    );

    // READ on family f: reads see f only; asking for g alone is refused.
    admin
        .admin()
        .grant("bob", scope("t", Some("f")), "R")
        .expect("grant");
    let row = bob
        .table("t")
        .get(Get::new("r1"))
        .expect("get with READ on f");
    assert_eq!(families(&row), vec!["f"]);
    let rows: Vec<_> = bob
        .table("t")
        .scan(Scan::new())
        .collect::<Result<_, _>>()
        .expect("scan with READ on f");
    assert_eq!(rows.len(), 1);
    assert_eq!(families(&rows[0]), vec!["f"]);
    denied(
        bob.table("t").get(Get::new("r1").family(b"g")),
        "bob reading g only",
    );
    denied(
        bob.table("t").put(put("r2", "f", "x")),
        "bob writing f with READ only",
    );
    assert_eq!(
        bob.admin().list_tables().expect("list").len(),
        1,
        "t is visible now"
    );

    // WRITE on family g: writes to g pass, to f or to both are refused.
    admin
        .admin()
        .grant("bob", scope("t", Some("g")), "W")
        .expect("grant");
    bob.table("t").put(put("r2", "g", "bob")).expect("put to g");
    denied(bob.table("t").put(put("r2", "f", "x")), "put to f");
    denied(
        bob.table("t")
            .put(put("r2", "g", "x").put(b"f", b"q", LATEST_TIMESTAMP, "x")),
        "put to f and g",
    );
    assert_eq!(
        bob.table("t")
            .increment(b"r3", b"g", b"n", 5)
            .expect("increment g"),
        5
    );
    // Check on f (READ) and put to g (WRITE): allowed; check on g (no READ): refused.
    let cond = |family: &str| Condition {
        row: bytes::Bytes::from_static(b"r2"),
        family: bytes::Bytes::copy_from_slice(family.as_bytes()),
        qualifier: bytes::Bytes::from_static(b"q"),
        op: CompareOp::Equal,
        value: None,
    };
    assert!(bob
        .table("t")
        .check_and_mutate(cond("f"), put("r2", "g", "checked"))
        .expect("check f, put g"));
    denied(
        bob.table("t")
            .check_and_mutate(cond("g"), put("r2", "g", "x")),
        "check on g without READ",
    );
    // A batch: the allowed action is applied, the denied one fails alone.
    let outcomes = bob
        .table("t")
        .batch(vec![
            BatchOp::Mutate(put("r4", "g", "ok")),
            BatchOp::Mutate(put("r4", "f", "no")),
            BatchOp::Get(Get::new("r1")),
        ])
        .expect("batch");
    assert!(
        matches!(outcomes[0], Ok(BatchOutcome::Done)),
        "{outcomes:?}"
    );
    assert!(
        matches!(&outcomes[1], Err(e) if e.code() == Some(ErrorCode::PermissionDenied)),
        "{outcomes:?}"
    );
    assert!(matches!(&outcomes[2], Ok(BatchOutcome::Row(r)) if families(r) == vec!["f"]));
    let check = admin
        .table("t")
        .get(Get::new("r4"))
        .expect("admin reads r4");
    assert_eq!(check.value(b"g", b"q").map(|v| &v[..]), Some(&b"ok"[..]));
    assert_eq!(
        check.value(b"f", b"q"),
        None,
        "the denied put was not applied"
    );

    // Table-level CREATE lets bob administer t (HBase: ADMIN or CREATE).
    admin
        .admin()
        .grant("bob", scope("t", None), "C")
        .expect("grant C");
    bob.admin().flush("t").expect("flush with CREATE");

    // A group's namespace READ reaches its members.
    let carol = as_user(&addr, Some("carol"));
    denied(
        carol.table("t").get(Get::new("r1")),
        "carol before the grant",
    );
    admin
        .admin()
        .grant(
            "@readers",
            PermissionScope {
                namespace: "default".into(),
                ..PermissionScope::default()
            },
            "R",
        )
        .expect("grant to a group");
    let row = carol
        .table("t")
        .get(Get::new("r1"))
        .expect("carol reads through @readers");
    assert_eq!(families(&row), vec!["f", "g"]);
    denied(carol.table("t").put(put("r5", "f", "x")), "carol writes");

    // Global ADMIN: dave may grant, and owns what he creates.
    admin
        .admin()
        .grant("dave", PermissionScope::default(), "A")
        .expect("global admin");
    let dave = as_user(&addr, Some("dave"));
    dave.admin()
        .grant("erin", scope("t", None), "R")
        .expect("dave grants");
    dave.admin()
        .create_table(TableSchema::new("d", vec![FamilySchema::new("f")]), vec![])
        .expect("global ADMIN creates");
    let owner = dave
        .admin()
        .user_permissions(Some(scope("d", None)), None)
        .expect("list d");
    assert_eq!(owner.len(), 1);
    assert_eq!(
        (owner[0].user.as_str(), owner[0].actions.as_str()),
        ("dave", "RWXCA")
    );

    // The grants of t, as the shell shows them.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args([
            "shell",
            "--connect",
            &addr,
            "--user",
            "admin",
            "-e",
            "user_permission 't'",
        ])
        .output()
        .expect("shell");
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{listed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        listed.contains("Namespace,Table,Family,Qualifier:Permission"),
        "{listed}"
    );
    assert!(
        listed.contains("default,t,f,: [Permission: actions=READ]"),
        "{listed}"
    );
    assert!(
        listed.contains("default,t,,: [Permission: actions=READ]"),
        "{listed}"
    );

    // Revoking takes it away.
    admin
        .admin()
        .revoke("bob", scope("t", Some("f")), None)
        .expect("revoke");
    denied(bob.table("t").get(Get::new("r1")), "bob after the revoke");

    // The audit log has the refusals, with user, address, action and object.
    let audit = std::fs::read_to_string(tmp.path().join("data/audit.log")).expect("audit log");
    let denials: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(denials.iter().any(|d| d["event"] == "denied"
        && d["user"] == "bob"
        && d["address"] == "127.0.0.1"
        && d["action"] == "WRITE"
        && d["object"] == "table=t, family=f, qualifier=q"));
    assert!(denials
        .iter()
        .any(|d| d["event"] == "authentication_failed"));

    // Grants survive kill -9: bob keeps WRITE on g and CREATE, not READ on f.
    server.kill9();
    let server = Server::start_in(
        &tmp.path().join("data"),
        Some(&tmp.path().join("cellar.toml")),
    );
    let bob = as_user(&server.native, Some("bob"));
    bob.table("t")
        .put(put("r6", "g", "after"))
        .expect("WRITE on g survived");
    denied(
        bob.table("t").get(Get::new("r1")),
        "the revoked READ stays revoked",
    );
    let carol = as_user(&server.native, Some("carol"));
    carol
        .table("t")
        .get(Get::new("r6"))
        .expect("the group's grant survived");
}

#[test]
fn the_shell_grants_and_revokes() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = start(tmp.path());
    let run = |user: &str, script: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cellar"))
            .args([
                "shell",
                "--connect",
                &server.native,
                "--user",
                user,
                "-e",
                script,
            ])
            .output()
            .expect("shell");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, out) = run(
        "admin",
        "create 't', 'f'; grant 'bob', 'RW', 't'; put 't', 'r', 'f:q', 'v'",
    );
    assert!(ok, "{out}");
    let (ok, out) = run("bob", "get 't', 'r'");
    assert!(ok && out.contains("value=v"), "{out}");
    let (ok, out) = run("admin", "user_permission 't'; revoke 'bob', 't'");
    assert!(
        ok && out.contains(" bob ") && out.contains("actions=READ,WRITE"),
        "{out}"
    );
    let (ok, out) = run("bob", "get 't', 'r'");
    assert!(
        !ok && out.contains("Insufficient permissions for user 'bob'"),
        "{out}"
    );
    let (ok, out) = run("bob", "grant 'bob', 'RWXCA'");
    assert!(!ok && out.contains("PERMISSION_DENIED"), "{out}");
    let (ok, out) = run("admin", "grant 'bob', 'RZ', 't'");
    assert!(!ok && out.contains("'Z' is not a permission"), "{out}");
}

/// A merge needs ADMIN on the table (HBase's rule), on both front ends: refused to a caller
/// without a user, to one with no rights and to one with read and write only; a refused merge
/// changes nothing; a table admin's merge goes through.
#[test]
fn merges_need_table_admin_on_both_front_ends() {
    use cellar_proto::hbase;
    use support::hbase::Conn;
    let tmp = tempfile::tempdir().expect("tmp");
    let server = start(tmp.path());
    let addr = server.native.clone();
    let admin = as_user(&addr, Some("admin"));
    admin
        .admin()
        .create_table(
            TableSchema::new("t", vec![FamilySchema::new("f")]),
            vec![
                bytes::Bytes::from_static(b"m"),
                bytes::Bytes::from_static(b"t"),
            ],
        )
        .expect("create t");
    admin
        .admin()
        .grant("rw", scope("t", None), "RW")
        .expect("grant rw");
    admin
        .admin()
        .grant("tadmin", scope("t", None), "A")
        .expect("grant tadmin");
    let ids: Vec<String> = admin
        .admin()
        .list_regions("t")
        .expect("regions")
        .iter()
        .map(|r| r.region_id.to_string())
        .collect();
    let pair = [ids[0].as_str(), ids[1].as_str()];

    let e = as_user(&addr, None)
        .admin()
        .merge_regions(&pair, false)
        .expect_err("no user");
    assert_eq!(e.code(), Some(ErrorCode::Unauthenticated), "{e}");
    for user in ["bob", "rw"] {
        let msg = denied(
            as_user(&addr, Some(user))
                .admin()
                .merge_regions(&pair, false),
            "a merge without ADMIN",
        );
        assert!(msg.contains(&format!("user '{user}'")), "{msg}");
    }
    // HBase's MergeTableRegions, as its Java client sends it.
    let mut meta = Conn::open_as(&server.hbase, "ClientService", "admin");
    let specifiers = vec![
        support::hbase::region(&meta.locate("t", "a")),
        support::hbase::region(&meta.locate("t", "n")),
    ];
    let req = hbase::MergeTableRegionsRequest {
        region: specifiers,
        ..Default::default()
    };
    for user in ["", "bob", "rw"] {
        let e = Conn::open_as(&server.hbase, "MasterService", user)
            .call("MergeTableRegions", &req)
            .expect_err("refused");
        assert_eq!(
            e.exception_class_name.as_deref(),
            Some("org.apache.hadoop.hbase.security.AccessDeniedException"),
            "{user:?}: {e:?}"
        );
    }
    assert_eq!(admin.admin().list_regions("t").expect("regions").len(), 3);
    Conn::open_as(&server.hbase, "MasterService", "tadmin")
        .call("MergeTableRegions", &req)
        .expect("a table admin merges over HBase's protocol");
    let merged = as_user(&addr, Some("tadmin"))
        .admin()
        .merge_regions(
            &admin
                .admin()
                .list_regions("t")
                .expect("regions")
                .iter()
                .map(|r| r.region_id.to_string())
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            false,
        )
        .expect("a table admin merges natively")
        .expect("the merged region");
    assert!(merged.start_key.is_empty() && merged.end_key.is_empty());
}

/// Snapshots need ADMIN on the table, on both front ends: taking, cloning, restoring and
/// deleting one are refused to a caller without a user, to one with no rights and to one with
/// read and write only, and change nothing; a table admin's go through. The region server
/// calls a master makes for snapshots and merges are refused to a user without global ADMIN.
#[test]
fn snapshots_need_table_admin_on_both_front_ends() {
    use cellar_proto::hbase;
    use support::hbase::Conn;
    let tmp = tempfile::tempdir().expect("tmp");
    let server = start(tmp.path());
    let addr = server.native.clone();
    let admin = as_user(&addr, Some("admin"));
    admin
        .admin()
        .create_table(TableSchema::new("t", vec![FamilySchema::new("f")]), vec![])
        .expect("create t");
    admin.table("t").put(put("r", "f", "v")).expect("put");
    admin
        .admin()
        .grant("rw", scope("t", None), "RW")
        .expect("grant rw");
    admin
        .admin()
        .grant("tadmin", scope("t", None), "A")
        .expect("grant");
    admin
        .admin()
        .snapshot("t", "s", false)
        .expect("a superuser snapshots");
    let region = admin.admin().list_regions("t").expect("regions")[0].region_id;

    let e = as_user(&addr, None)
        .admin()
        .snapshot("t", "x", false)
        .expect_err("no user");
    assert_eq!(e.code(), Some(ErrorCode::Unauthenticated), "{e}");
    for user in ["bob", "rw"] {
        let c = as_user(&addr, Some(user));
        let a = c.admin();
        denied(a.snapshot("t", "x", false), "a snapshot without ADMIN");
        denied(a.clone_snapshot("s", "copy"), "a clone without ADMIN");
        denied(a.restore_snapshot("s"), "a restore without ADMIN");
        denied(a.delete_snapshot("s"), "a delete without ADMIN");
        denied(a.list_snapshots(), "a listing without global ADMIN");
        // The master's calls to a region server.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let (native, who) = (addr.clone(), user.to_string());
        let refused = rt.block_on(async move {
            let client = cellar_client::Client::connect_with(
                &native,
                ClientConfig {
                    user: Some(who),
                    retries: 0,
                    ..ClientConfig::default()
                },
            )
            .await?;
            let a = client.admin();
            let snap = a.snapshot_region_on(&native, "t", region, false).await;
            let merge = a.merge_regions_on(&native, "t", &[region], 1).await;
            Ok::<_, cellar_client::Error>((snap.err(), merge.err()))
        });
        let (snap, merge) = refused.expect("connect");
        for e in [snap, merge] {
            let e = e.expect("refused");
            assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{user}: {e}");
        }
    }
    // Over HBase's protocol, as its Java client sends them.
    let desc = |name: &str, table: Option<&str>| hbase::SnapshotDescription {
        name: name.into(),
        table: table.map(str::to_string),
        ..Default::default()
    };
    for user in ["", "bob", "rw"] {
        let mut m = Conn::open_as(&server.hbase, "MasterService", user);
        type Answer = Result<(bytes::Bytes, bytes::Bytes), hbase::ExceptionResponse>;
        let calls: Vec<(&str, Answer)> = vec![
            (
                "Snapshot",
                m.call(
                    "Snapshot",
                    &hbase::SnapshotRequest {
                        snapshot: desc("x", Some("t")),
                        ..Default::default()
                    },
                ),
            ),
            (
                "RestoreSnapshot (clone)",
                m.call(
                    "RestoreSnapshot",
                    &hbase::RestoreSnapshotRequest {
                        snapshot: desc("s", Some("copy")),
                        ..Default::default()
                    },
                ),
            ),
            (
                "DeleteSnapshot",
                m.call(
                    "DeleteSnapshot",
                    &hbase::DeleteSnapshotRequest {
                        snapshot: desc("s", None),
                    },
                ),
            ),
        ];
        for (what, r) in calls {
            let e = r.expect_err("refused");
            assert_eq!(
                e.exception_class_name.as_deref(),
                Some("org.apache.hadoop.hbase.security.AccessDeniedException"),
                "{user:?} {what}: {e:?}"
            );
        }
        // The listing is refused to a caller without a user, and shows the others nothing.
        let listed = m.call(
            "GetCompletedSnapshots",
            &hbase::GetCompletedSnapshotsRequest {},
        );
        if user.is_empty() {
            let e = listed.expect_err("no user");
            assert_eq!(
                e.exception_class_name.as_deref(),
                Some("org.apache.hadoop.hbase.security.AccessDeniedException"),
                "{e:?}"
            );
            continue;
        }
        let (listed, _) = listed.expect("list");
        let listed = <hbase::GetCompletedSnapshotsResponse as prost::Message>::decode(listed)
            .expect("decode");
        assert!(listed.snapshots.is_empty(), "{user:?}: {listed:?}");
    }
    let names: Vec<String> = admin
        .admin()
        .list_snapshots()
        .expect("list")
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["s"], "nothing changed");
    assert!(!admin.admin().table_exists("copy").unwrap_or(true));
    // A table admin may (the clone also needs CREATE where it goes: the admin grants it).
    admin
        .admin()
        .grant("tadmin", PermissionScope::default(), "C")
        .expect("grant create");
    let t = as_user(&addr, Some("tadmin"));
    t.admin()
        .snapshot("t", "mine", false)
        .expect("table admin snapshots");
    t.admin()
        .clone_snapshot("mine", "copy")
        .expect("and clones");
    assert!(!t
        .table("copy")
        .get(Get::new("r"))
        .expect("get")
        .cells
        .is_empty());
    t.admin().delete_snapshot("mine").expect("and deletes");
}
