//! Who may read `hbase:meta` on a real `cellar standalone` with `security.authorization` on,
//! on both front ends and through `cellar shell`, as a user would try it:
//! - a caller the server cannot name (no certificate, and `security.simple_users = "never"`)
//!   reads nothing: not meta's rows, not a region's location, not the server's status —
//!   every refusal UNAUTHENTICATED and audited;
//! - an authenticated user without grants reads meta's table and region rows (HBase lets every
//!   user read meta) but never the grant rows (`@acl/…`, HBase's `hbase:acl`), which only a
//!   global ADMIN reads;
//! - asking for one's own grants needs the server to know who one is.

mod support;

use cellar_client::blocking::Client;
use cellar_client::{
    ClientConfig, ErrorCode, FamilySchema, Get, PermissionScope, Scan, TableSchema,
};
use cellar_proto::hbase;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::hbase::Conn;
use support::Server;

const ACL_PREFIX: &[u8] = b"@acl/";

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

fn meta_rows(c: &Client) -> cellar_client::Result<Vec<bytes::Bytes>> {
    c.table("hbase:meta")
        .scan(Scan::new())
        .map(|r| r.map(|row| row.row))
        .collect()
}

fn code<T: std::fmt::Debug>(r: cellar_client::Result<T>, what: &str) -> ErrorCode {
    match r {
        Err(e) => e
            .code()
            .unwrap_or_else(|| panic!("{what}: no error code in {e}")),
        Ok(v) => panic!("{what}: expected a refusal, got {v:?}"),
    }
}

fn audit_lines(server: &Server) -> Vec<serde_json::Value> {
    std::fs::read_to_string(server.data_dir.join("audit.log"))
        .expect("audit log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn a_caller_the_server_cannot_name_reads_nothing_not_even_meta() {
    let server = Server::start_with_config(
        "[security]\nauthorization = true\nsimple_users = \"never\"\nsuperusers = [\"admin\"]\n",
    );

    for user in [None, Some("bob")] {
        let c = as_user(&server.native, user);
        let who = format!("native client as {user:?}");
        assert_eq!(
            code(meta_rows(&c), &who),
            ErrorCode::Unauthenticated,
            "{who}: scan hbase:meta"
        );
        assert_eq!(
            code(
                c.table("hbase:meta").get(Get::new("@acl/")),
                &format!("{who}: get")
            ),
            ErrorCode::Unauthenticated
        );
        assert_eq!(
            code(c.admin().status(), &format!("{who}: status")),
            ErrorCode::Unauthenticated
        );
        assert_eq!(
            code(
                c.admin().describe_table("hbase:meta"),
                &format!("{who}: describe")
            ),
            ErrorCode::Unauthenticated
        );
        if let Some(u) = user {
            // One's own grants are one's own only once the server knows who one is.
            assert_eq!(
                code(
                    c.admin().user_permissions(None, Some(u)),
                    &format!("{who}: own grants")
                ),
                ErrorCode::Unauthenticated
            );
        }
    }

    // `cellar shell`, as a new user tries it.
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args([
            "shell",
            "--connect",
            &server.native,
            "--user",
            "bob",
            "-e",
            "scan 'hbase:meta'",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run cellar shell");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the shell's scan of meta must fail:\n{stdout}"
    );
    assert!(
        !stdout.contains("@acl/") && !stdout.contains("regioninfo"),
        "the shell printed meta's rows:\n{stdout}"
    );
    assert!(
        stderr.to_lowercase().contains("does not know who you are")
            || stderr.to_lowercase().contains("take your word"),
        "the shell says why: {stderr}"
    );

    // The HBase front end: the connection registry and meta's rows alike.
    let mut registry = Conn::open_as(&server.hbase, "ClientMetaService", "bob");
    let e = registry
        .call("GetClusterId", &hbase::GetClusterIdRequest {})
        .expect_err("GetClusterId unauthenticated");
    assert!(
        e.exception_class_name
            .as_deref()
            .is_some_and(|c| c.contains("AccessDenied")),
        "{e:?}"
    );
    let mut client = Conn::open_as(&server.hbase, "ClientService", "bob");
    let scan = hbase::ScanRequest {
        region: Some(support::hbase::region(b"hbase:meta,,1")),
        scan: Some(hbase::Scan::default()),
        number_of_rows: Some(100),
        ..Default::default()
    };
    let e = client
        .call("Scan", &scan)
        .expect_err("a scan of meta unauthenticated");
    assert!(
        e.exception_class_name
            .as_deref()
            .is_some_and(|c| c.contains("AccessDenied")),
        "{e:?}"
    );

    // Every refusal is in the audit log.
    let audit = audit_lines(&server);
    let failed = audit
        .iter()
        .filter(|d| d["event"] == "authentication_failed")
        .count();
    assert!(
        failed >= 10,
        "expected every refusal audited, found {failed}: {audit:?}"
    );
    assert!(audit
        .iter()
        .any(|d| d["event"] == "authentication_failed" && d["protocol"] == "hbase"));
    drop(server);
}

#[test]
fn users_read_meta_s_regions_and_only_a_global_admin_its_grants() {
    let server =
        Server::start_with_config("[security]\nauthorization = true\nsuperusers = [\"admin\"]\n");
    let admin = as_user(&server.native, Some("admin"));
    admin
        .admin()
        .create_table(
            TableSchema::new("t", vec![FamilySchema::new("f")]),
            Vec::new(),
        )
        .expect("create t");
    admin
        .admin()
        .grant(
            "carol",
            PermissionScope {
                table: "t".into(),
                ..PermissionScope::default()
            },
            "R",
        )
        .expect("grant carol");
    admin
        .admin()
        .grant("ops", PermissionScope::default(), "A")
        .expect("grant ops global ADMIN");

    // The superuser and a global ADMIN see the grant rows.
    for who in ["admin", "ops"] {
        let rows = meta_rows(&as_user(&server.native, Some(who))).expect("scan meta");
        assert!(
            rows.iter().any(|r| r.starts_with(ACL_PREFIX)),
            "{who} sees the grants: {rows:?}"
        );
    }

    // A user with no grant at all, and one with READ on a table: meta's table rows, not the
    // grants; a Get of a grant row is refused.
    for who in ["bob", "carol"] {
        let c = as_user(&server.native, Some(who));
        let rows = meta_rows(&c).expect("scan meta");
        assert!(
            rows.iter().any(|r| r.starts_with(b"t,")),
            "{who} sees t's region rows: {rows:?}"
        );
        assert!(
            !rows.iter().any(|r| r.starts_with(ACL_PREFIX)),
            "{who} must not see the grant rows: {rows:?}"
        );
        // Also not by asking for them by name, in a scan bounded to them, or with a filter.
        let bounded: Vec<_> = c
            .table("hbase:meta")
            .scan(Scan::new().prefix(ACL_PREFIX))
            .map(|r| r.expect("bounded scan").row)
            .collect();
        assert!(bounded.is_empty(), "{who}: {bounded:?}");
        assert_eq!(
            code(
                c.table("hbase:meta").get(Get::new("@acl/t")),
                &format!("{who}: get a grant row")
            ),
            ErrorCode::PermissionDenied
        );
    }
    let audit = audit_lines(&server);
    assert!(
        audit.iter().any(|d| d["event"] == "denied"
            && d["user"] == "bob"
            && d["object"] == "global"
            && d["reason"].as_str().is_some_and(|r| r.contains("grants"))),
        "the refused Get of a grant row is audited: {audit:?}"
    );

    // Flushing meta is an admin's act (HBase's preFlush: ADMIN or CREATE), as for any table.
    let flush = hbase::FlushRegionRequest {
        region: support::hbase::region(b"hbase:meta,,1"),
        ..Default::default()
    };
    let mut bob = Conn::open_as(&server.hbase, "AdminService", "bob");
    let refused = bob
        .call("FlushRegion", &flush)
        .expect_err("bob may not flush hbase:meta");
    assert!(
        refused
            .exception_class_name
            .as_deref()
            .is_some_and(|c| c.ends_with("AccessDeniedException")),
        "{refused:?}"
    );
    let mut ops = Conn::open_as(&server.hbase, "AdminService", "ops");
    ops.call("FlushRegion", &flush)
        .expect("a global ADMIN flushes hbase:meta");
    drop(server);
}
