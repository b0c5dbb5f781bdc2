//! The Thrift gateway at the wire, against a real `cellar standalone --thrift-listen` and a
//! real `cellar thrift` process: HBase 2's calls that happybase does not make, Thrift's own
//! errors, bytes that are not Thrift (the gateway goes on serving everyone else), scanner
//! leases and the gateway's metrics. happybase itself: python/happybase (scripts/thrift-compat.sh).

mod support;

use cellar_server::thrift::protocol::{self, Limits, MessageType, Protocol, TType, Value};
use cellar_testing::ThriftGateway;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};
use support::Server;

/// A byte stream both ways: TCP, or TLS over it.
trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

/// A minimal Thrift client: one call at a time, framed or not.
struct Conn {
    stream: Box<dyn Stream>,
    protocol: Protocol,
    framed: bool,
    seq: i32,
}

impl Conn {
    fn open(addr: &str, protocol: Protocol, framed: bool) -> Conn {
        let stream = TcpStream::connect(addr).expect("connect to the gateway");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Conn {
            stream: Box::new(stream),
            protocol,
            framed,
            seq: 0,
        }
    }

    /// A framed binary connection over TLS, trusting `certs/ca.pem`, presenting `user`'s
    /// certificate (`certs/USER.pem`).
    fn open_tls(addr: &str, certs: &std::path::Path, user: &str) -> Conn {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(certs.join("ca.pem")).expect("ca") {
            roots.add(c.expect("ca pem")).expect("add ca");
        }
        let chain: Vec<_> = CertificateDer::pem_file_iter(certs.join(format!("{user}.pem")))
            .expect("cert")
            .map(|c| c.expect("cert pem"))
            .collect();
        let key = PrivateKeyDer::from_pem_file(certs.join(format!("{user}.key"))).expect("key");
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .expect("client cert");
        let name = ServerName::try_from("127.0.0.1").expect("name");
        let conn =
            rustls::ClientConnection::new(std::sync::Arc::new(config), name).expect("tls client");
        let tcp = TcpStream::connect(addr).expect("connect to the gateway");
        tcp.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Conn {
            stream: Box::new(rustls::StreamOwned::new(conn, tcp)),
            protocol: Protocol::Binary,
            framed: true,
            seq: 0,
        }
    }

    /// Calls `name`; the reply's type and body.
    fn call(&mut self, name: &str, args: Vec<(i16, Value)>) -> (MessageType, Vec<(i16, Value)>) {
        self.seq += 1;
        let mut msg = Vec::new();
        protocol::write_message(
            &mut msg,
            self.protocol,
            name,
            MessageType::Call,
            self.seq,
            &args,
        );
        let mut out = Vec::new();
        if self.framed {
            out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        }
        out.extend_from_slice(&msg);
        self.stream.write_all(&out).expect("send");
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let body = if self.framed {
                buf.get(4..)
            } else {
                Some(&buf[..])
            };
            if let Some(body) = body {
                match protocol::read_message(body, self.protocol, Limits::default()) {
                    Ok((m, _)) => {
                        assert_eq!(m.seq, self.seq, "the reply's sequence id");
                        assert_eq!(m.name, name, "the reply's method name");
                        return (m.kind, m.body);
                    }
                    Err(protocol::Error::Incomplete) => {}
                    Err(e) => panic!("bad reply to {name}: {e}"),
                }
            }
            let n = self.stream.read(&mut chunk).expect("read the reply");
            assert!(n > 0, "the gateway closed the connection during {name}");
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// A call expected to succeed: its result (field 0), `None` for void.
    fn ok(&mut self, name: &str, args: Vec<(i16, Value)>) -> Option<Value> {
        let (kind, body) = self.call(name, args);
        assert_eq!(kind, MessageType::Reply, "{name}: {body:?}");
        assert!(
            body.iter().all(|(id, _)| *id == 0),
            "{name} failed: {body:?}"
        );
        body.into_iter().next().map(|(_, v)| v)
    }
}

fn text(s: &str) -> Value {
    Value::text(s)
}

fn message_of(v: &Value) -> String {
    match v {
        Value::Struct(f) => match f.iter().find(|(id, _)| *id == 1) {
            Some((_, Value::Binary(b))) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("no message in {other:?}"),
        },
        other => panic!("not an exception struct: {other:?}"),
    }
}

fn create_table(c: &mut Conn, name: &str) {
    let family = Value::Struct(vec![(1, text("f:"))]);
    c.ok(
        "createTable",
        vec![
            (1, text(name)),
            (2, Value::List(TType::Struct, vec![family])),
        ],
    );
}

#[test]
fn hbase2_calls_and_thrift_errors_on_every_transport_and_protocol() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut server = Server::start_with(
        tmp.path(),
        None,
        ["127.0.0.1:0"; 3],
        &["--thrift-listen", "127.0.0.1:0"],
    );
    let addr = server.wait_thrift();
    for (protocol, framed) in [
        (Protocol::Binary, false),
        (Protocol::Binary, true),
        (Protocol::Compact, false),
        (Protocol::Compact, true),
    ] {
        let mut c = Conn::open(&addr, protocol, framed);
        let table = format!("t_{protocol}_{framed}");
        create_table(&mut c, &table);
        assert_eq!(c.ok("getThriftServerType", vec![]), Some(Value::I32(1)));
        let Some(Value::Binary(id)) = c.ok("getClusterId", vec![]) else {
            panic!("getClusterId returns a string")
        };
        let on_disk = std::fs::read_to_string(tmp.path().join("cluster_id")).expect("cluster_id");
        assert_eq!(String::from_utf8_lossy(&id), on_disk.trim());
        let Some(Value::Map(_, _, tables)) = c.ok("getTableNamesWithIsTableEnabled", vec![]) else {
            panic!("a map of tables")
        };
        assert!(
            tables.contains(&(text(&table), Value::Bool(true))),
            "{tables:?}"
        );
        // A call HBase 2 does not serve: Thrift's unknown-method exception.
        let (kind, body) = c.call("getRowOrBefore", vec![(1, text(&table))]);
        assert_eq!(kind, MessageType::Exception);
        assert_eq!(
            body,
            vec![
                (1, text("Invalid method name: 'getRowOrBefore'")),
                (2, Value::I32(1))
            ]
        );
        // A declared IOError, canRetry false for HBase's do-not-retry exceptions.
        let (kind, body) = c.call(
            "getRow",
            vec![
                (1, text("no_such_table")),
                (2, text("r")),
                (3, Value::Map(TType::Binary, TType::Binary, vec![])),
            ],
        );
        assert_eq!(kind, MessageType::Reply);
        assert_eq!(body.len(), 1);
        assert_eq!(body[0].0, 1, "IOError is field 1: {body:?}");
        assert!(
            message_of(&body[0].1).contains("TableNotFoundException"),
            "{body:?}"
        );
        let Value::Struct(fields) = &body[0].1 else {
            unreachable!()
        };
        assert!(
            fields.contains(&(2, Value::Bool(false))),
            "canRetry: {fields:?}"
        );
        // An argument of the wrong type is named.
        let (_, body) = c.call("mutateRow", vec![(1, Value::I32(7))]);
        assert_eq!(body[0].0, 2, "IllegalArgument is field 2: {body:?}");
        assert!(message_of(&body[0].1).contains("tableName"), "{body:?}");
        // The connection serves on after every error.
        assert!(matches!(
            c.ok("getTableNames", vec![]),
            Some(Value::List(..))
        ));
    }
    server.terminate();
}

#[test]
fn bytes_that_are_not_thrift_close_only_their_connection() {
    let tmp = tempfile::tempdir().expect("tmp");
    let config = tmp.path().join("cellar.toml");
    std::fs::write(
        &config,
        "[thrift]\nmax_message_bytes = 4096\nscanner_lease_ms = 300\n",
    )
    .expect("config");
    let mut server = Server::start_with(
        &tmp.path().join("data"),
        Some(&config),
        ["127.0.0.1:0"; 3],
        &["--thrift-listen", "127.0.0.1:0"],
    );
    let addr = server.wait_thrift();
    let mut good = Conn::open(&addr, Protocol::Binary, true);
    create_table(&mut good, "t");

    let closed = |bytes: &[u8]| {
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        s.write_all(bytes).expect("send");
        let mut rest = Vec::new();
        // The gateway closes the connection without an answer.
        let n = s.read_to_end(&mut rest).unwrap_or(0);
        assert_eq!(n, 0, "an answer to garbage: {rest:?}");
    };
    closed(b"hello, is this HBase?\r\n");
    closed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    // A frame over thrift.max_message_bytes.
    let mut big = 100_000u32.to_be_bytes().to_vec();
    big.extend_from_slice(&[0x80, 1, 0, 1]);
    closed(&big);
    // A frame whose message is shorter than its length says.
    let mut msg = Vec::new();
    protocol::write_message(
        &mut msg,
        Protocol::Binary,
        "getTableNames",
        MessageType::Call,
        1,
        &[],
    );
    let mut lying = ((msg.len() + 3) as u32).to_be_bytes().to_vec();
    lying.extend_from_slice(&msg);
    lying.extend_from_slice(&[9, 9, 9]);
    closed(&lying);
    // An unframed call cut short, then the client goes away: nothing to answer.
    {
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.write_all(&msg[..msg.len() - 2]).expect("send");
    }
    // The first connection still works, and the errors are counted.
    assert!(matches!(
        good.ok("getTableNames", vec![]),
        Some(Value::List(..))
    ));
    let errors = server.metric("cellar_thrift_protocol_errors_total");
    assert!(errors >= 4, "protocol errors counted: {errors}");
    assert!(
        server.output().contains("not a Thrift message"),
        "{}",
        server.output()
    );

    // A scanner idle past thrift.scanner_lease_ms is closed.
    let scan = Value::Struct(vec![]);
    let Some(Value::I32(id)) = good.ok(
        "scannerOpenWithScan",
        vec![
            (1, text("t")),
            (2, scan),
            (3, Value::Map(TType::Binary, TType::Binary, vec![])),
        ],
    ) else {
        panic!("a scanner id")
    };
    assert_eq!(server.metric("cellar_thrift_scanners_open"), 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.metric("cellar_thrift_scanners_open") != 0 {
        assert!(Instant::now() < deadline, "the idle scanner was not closed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, body) = good.call(
        "scannerGetList",
        vec![(1, Value::I32(id)), (2, Value::I32(5))],
    );
    assert_eq!(body[0].0, 2, "IllegalArgument: {body:?}");
    assert_eq!(message_of(&body[0].1), "scanner ID is invalid");
    assert_eq!(server.metric("cellar_thrift_scanners_expired_total"), 1);
    assert!(server.metric("cellar_thrift_calls_total") >= 4);
    server.terminate();
}

#[test]
fn cellar_thrift_serves_a_running_server() {
    let mut server = Server::start();
    let mut gateway = ThriftGateway::start(
        env!("CARGO_BIN_EXE_cellar"),
        &server.native,
        &["--user", "thrifty"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let addr = gateway.addr.clone();
    let mut c = Conn::open(&addr, Protocol::Compact, false);
    create_table(&mut c, "via_gateway");
    let client = support::connect_blocking(&server.native);
    assert!(client.admin().table_exists("via_gateway").expect("exists"));
    // A gateway of its own knows no cluster id; it says so.
    let (kind, body) = c.call("getClusterId", vec![]);
    assert_eq!(kind, MessageType::Exception);
    assert!(
        matches!(&body[0], (1, Value::Binary(m)) if String::from_utf8_lossy(m).contains("cluster id")),
        "{body:?}"
    );
    let s = gateway
        .process
        .terminate(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("cellar thrift did not stop on SIGTERM: {e}"));
    assert!(s.success(), "cellar thrift exit: {s}");
    server.terminate();
}

#[test]
fn the_gateway_of_a_tls_server_calls_it_over_tls() {
    let tmp = tempfile::tempdir().expect("tmp");
    let certs = tmp.path().join("certs");
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["cert", "create", "--dir"])
        .arg(&certs)
        .output()
        .expect("cellar cert create");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = |f: &str| certs.join(f).to_string_lossy().into_owned();
    let (cert, key, ca) = (path("server.pem"), path("server.key"), path("ca.pem"));
    let mut server = Server::start_with(
        &tmp.path().join("data"),
        None,
        ["127.0.0.1:0"; 3],
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &ca,
            "--thrift-listen",
            "127.0.0.1:0",
        ],
    );
    let addr = server.wait_thrift();
    // Every native port requires a client certificate: the gateway presents the server's.
    let mut c = Conn::open(&addr, Protocol::Binary, false);
    create_table(&mut c, "over_tls");
    let Some(Value::List(_, names)) = c.ok("getTableNames", vec![]) else {
        panic!("a list of names")
    };
    assert!(names.contains(&text("over_tls")), "{names:?}");
    server.terminate();
}

/// Issue 39: with authorization on, a gateway left without `thrift.user` ran every Thrift call
/// as the user running the server, a superuser. It must not start so: it names the setting.
#[test]
fn a_gateway_without_a_user_does_not_serve_as_a_superuser() {
    let tmp = tempfile::tempdir().expect("tmp");
    let config = tmp.path().join("cellar.toml");
    std::fs::write(&config, "[security]\nauthorization = true\n").expect("config");
    let mut server = Server::spawn_role(
        "standalone",
        &tmp.path().join("data"),
        Some(&config),
        ["127.0.0.1:0"; 3],
        &["--thrift-listen", "127.0.0.1:0"],
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = server.exited() {
            break status;
        }
        let out = server.output();
        if let Some(addr) = out
            .lines()
            .find_map(|l| l.strip_prefix("listening thrift="))
        {
            // What the defect did: a Thrift caller, named by nobody, creates a table.
            let mut c = Conn::open(addr.trim(), Protocol::Binary, false);
            let (_, body) = c.call(
                "createTable",
                vec![
                    (1, text("made_by_nobody")),
                    (
                        2,
                        Value::List(TType::Struct, vec![Value::Struct(vec![(1, text("f:"))])]),
                    ),
                ],
            );
            server.terminate();
            panic!("the gateway started without thrift.user and served as a superuser (createTable answered {body:?})");
        }
        assert!(
            Instant::now() < deadline,
            "neither started nor exited:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "{}", server.output());
    let out = server.output();
    assert!(out.contains("thrift.user"), "{out}");
}

/// `cellar cert` with `args`, which must succeed.
fn cert(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .arg("cert")
        .args(args)
        .output()
        .expect("cellar cert");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn get_row(c: &mut Conn, table: &str, row: &str) -> (MessageType, Vec<(i16, Value)>) {
    c.call(
        "getRow",
        vec![
            (1, text(table)),
            (2, text(row)),
            (3, Value::Map(TType::Binary, TType::Binary, vec![])),
        ],
    )
}

/// The value of the one cell of a `getRow` answer.
fn only_value(body: &[(i16, Value)]) -> Vec<u8> {
    let Some((0, Value::List(_, rows))) = body.first() else {
        panic!("not a list of rows: {body:?}")
    };
    let [Value::Struct(row)] = &rows[..] else {
        panic!("not one row: {rows:?}")
    };
    let Some((_, Value::Map(_, _, columns))) = row.iter().find(|(id, _)| *id == 2) else {
        panic!("no columns: {row:?}")
    };
    let [(_, Value::Struct(cell))] = &columns[..] else {
        panic!("not one column: {columns:?}")
    };
    match cell.iter().find(|(id, _)| *id == 1) {
        Some((_, Value::Binary(v))) => v.clone(),
        other => panic!("no value: {other:?}"),
    }
}

/// An `IOError` answer's message.
fn io_error(body: &[(i16, Value)]) -> String {
    match body.first() {
        Some((1, v)) => message_of(v),
        other => panic!("not an IOError: {other:?}"),
    }
}

/// The audit log's lines.
fn audit(data: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(data.join("audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an audit line is JSON"))
        .collect()
}

/// Issue 39: Thrift callers act with their own grants, never the server's. On a TLS Thrift
/// port a caller's client certificate names it; the in-server gateway calls as the server's
/// certificate user ('localhost') for it, which `security.proxy_users` allows. `cellar
/// thrift --user thrifty` with its own certificate ('gw') calls for thrifty. Refusals are
/// audited with the caller's name (and the gateway's as `real_user`).
#[test]
fn thrift_callers_act_with_their_own_grants() {
    let tmp = tempfile::tempdir().expect("tmp");
    let certs = tmp.path().join("certs");
    let dir = certs.to_string_lossy().into_owned();
    cert(&["create", "--dir", &dir, "--user", "admin"]);
    for user in ["alice", "bob", "gw"] {
        cert(&["client", user, "--dir", &dir]);
    }
    let path = |f: &str| certs.join(f).to_string_lossy().into_owned();
    let config = tmp.path().join("cellar.toml");
    std::fs::write(
        &config,
        r#"
[security]
authorization = true
superusers = ["admin"]
proxy_users = { localhost = ["*"], gw = ["thrifty"] }

[thrift]
tls = true
"#,
    )
    .expect("config");
    let data = tmp.path().join("data");
    let mut server = Server::start_with(
        &data,
        Some(&config),
        ["127.0.0.1:0"; 3],
        &[
            "--tls-cert",
            &path("server.pem"),
            "--tls-key",
            &path("server.key"),
            "--tls-client-ca",
            &path("ca.pem"),
            "--thrift-listen",
            "127.0.0.1:0",
        ],
    );
    let addr = server.wait_thrift();
    let admin = cellar_client::blocking::Client::connect_with(
        &server.native,
        cellar_client::ClientConfig {
            tls: Some(
                cellar_client::TlsClientConfig::from_files(
                    &certs.join("ca.pem"),
                    Some(&certs.join("admin.pem")),
                    Some(&certs.join("admin.key")),
                )
                .expect("tls files"),
            ),
            retries: 0,
            ..cellar_client::ClientConfig::default()
        },
    )
    .expect("admin connects");
    admin
        .admin()
        .create_table(
            cellar_client::TableSchema::new("secret", vec![cellar_client::FamilySchema::new("f")]),
            vec![],
        )
        .expect("create");
    admin
        .table("secret")
        .put(cellar_client::RowMutation::new("r").put(
            b"f",
            b"q",
            cellar_client::LATEST_TIMESTAMP,
            "v",
        ))
        .expect("put");
    let table_scope = cellar_client::PermissionScope {
        table: "secret".into(),
        ..cellar_client::PermissionScope::default()
    };
    admin
        .admin()
        .grant("alice", table_scope.clone(), "R")
        .expect("grant alice");

    // alice reads; bob, without a grant, is refused, and the refusal names bob.
    let mut alice = Conn::open_tls(&addr, &certs, "alice");
    let (kind, body) = get_row(&mut alice, "secret", "r");
    assert_eq!(kind, MessageType::Reply);
    assert_eq!(only_value(&body), b"v");
    let mut bob = Conn::open_tls(&addr, &certs, "bob");
    let (_, body) = get_row(&mut bob, "secret", "r");
    let why = io_error(&body);
    assert!(
        why.contains("AccessDeniedException") && why.contains("'bob'"),
        "{why}"
    );
    // bob may not write either, nor use alice's scanner.
    let (_, body) = bob.call(
        "mutateRow",
        vec![
            (1, text("secret")),
            (2, text("r")),
            (
                3,
                Value::List(
                    TType::Struct,
                    vec![Value::Struct(vec![(2, text("f:q")), (3, text("x"))])],
                ),
            ),
            (4, Value::Map(TType::Binary, TType::Binary, vec![])),
        ],
    );
    assert!(io_error(&body).contains("'bob'"), "{body:?}");
    let Some(Value::I32(scanner)) = alice.ok(
        "scannerOpen",
        vec![
            (1, text("secret")),
            (2, text("")),
            (3, Value::List(TType::Binary, vec![])),
            (4, Value::Map(TType::Binary, TType::Binary, vec![])),
        ],
    ) else {
        panic!("a scanner id")
    };
    let (_, body) = bob.call("scannerGet", vec![(1, Value::I32(scanner))]);
    assert!(
        matches!(&body[..], [(2, v)] if message_of(v).contains("scanner ID is invalid")),
        "{body:?}"
    );
    assert!(matches!(
        alice.ok("scannerGet", vec![(1, Value::I32(scanner))]),
        Some(Value::List(_, rows)) if rows.len() == 1
    ));
    let lines = audit(&data);
    let bobs: Vec<_> = lines
        .iter()
        .filter(|l| l["event"] == "denied" && l["object"] == "table=secret")
        .collect();
    assert!(!bobs.is_empty(), "no denial audited: {lines:?}");
    for l in &bobs {
        assert_eq!(l["user"], "bob", "{l}");
        assert_eq!(l["real_user"], "localhost", "{l}");
    }

    // `cellar thrift` as its own process: plain Thrift port, callers are thrifty.
    let gateway = ThriftGateway::start(
        env!("CARGO_BIN_EXE_cellar"),
        &server.native,
        &[
            "--user",
            "thrifty",
            "--tls-ca",
            &path("ca.pem"),
            "--tls-cert",
            &path("gw.pem"),
            "--tls-key",
            &path("gw.key"),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let plain = gateway.addr.clone();
    let mut c = Conn::open(&plain, Protocol::Compact, true);
    let (_, body) = get_row(&mut c, "secret", "r");
    let why = io_error(&body);
    assert!(why.contains("'thrifty'"), "{why}");
    assert!(
        audit(&data)
            .iter()
            .any(|l| l["event"] == "denied" && l["user"] == "thrifty" && l["real_user"] == "gw"),
        "{:?}",
        audit(&data)
    );
    admin
        .admin()
        .grant("thrifty", table_scope, "R")
        .expect("grant thrifty");
    let (kind, body) = get_row(&mut c, "secret", "r");
    assert_eq!(kind, MessageType::Reply);
    assert_eq!(only_value(&body), b"v");
    // Nobody's word names a user on the TLS port: a caller there needs a certificate, and
    // the audit log never names the user running the server for these calls.
    let me = cellar_server::security::authz::process_user().unwrap_or_default();
    assert!(
        !audit(&data)
            .iter()
            .any(|l| l["event"] == "denied" && l["user"] == me.as_str()),
        "a denial in the process user's name"
    );
    drop(gateway);
    server.terminate();
}
