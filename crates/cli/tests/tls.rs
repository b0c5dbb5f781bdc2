//! TLS on every port of a real `cellar standalone`, with certificates made by `cellar cert`:
//! the Rust client and the shell over TLS with client certificates; plaintext, untrusted,
//! expired, missing and wrong-host certificates refused with errors that say so (and counted);
//! HTTPS for `/metrics`; certificates reloaded without a restart.

mod support;

use cellar_client::blocking::Client;
use cellar_client::{ClientConfig, FamilySchema, Get, RowMutation, TableSchema, TlsClientConfig};
use rustls::pki_types::pem::PemObject;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use support::{wait_for, Server};

/// Runs `cellar cert ARGS` and expects it to succeed.
fn cert(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .arg("cert")
        .args(args)
        .output()
        .expect("run cellar cert");
    assert!(
        out.status.success(),
        "cellar cert {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A CA with a server certificate and a client certificate for `alice` in `dir`.
fn make_certs(dir: &Path) {
    cert(&["create", "--dir", p(dir), "--user", "alice"]);
    for f in [
        "ca.pem",
        "ca.key",
        "server.pem",
        "server.key",
        "alice.pem",
        "alice.key",
        "alice.keystore.pem",
    ] {
        assert!(dir.join(f).exists(), "cellar cert create wrote no {f}");
    }
}

fn tls_server(certs: &Path, data: &Path, extra: &[&str]) -> Server {
    let server_pem = certs.join("server.pem");
    let server_key = certs.join("server.key");
    let ca = certs.join("ca.pem");
    let mut args = vec![
        "--tls-cert",
        p(&server_pem),
        "--tls-key",
        p(&server_key),
        "--tls-client-ca",
        p(&ca),
    ];
    args.extend_from_slice(extra);
    Server::start_with(data, None, ["127.0.0.1:0"; 3], &args)
}

fn client_tls(certs: &Path, ca: &str, user: Option<&str>) -> ClientConfig {
    let cert: Option<PathBuf> = user.map(|u| certs.join(format!("{u}.pem")));
    let key: Option<PathBuf> = user.map(|u| certs.join(format!("{u}.key")));
    ClientConfig {
        tls: Some(
            TlsClientConfig::from_files(&certs.join(ca), cert.as_deref(), key.as_deref())
                .expect("client TLS files load"),
        ),
        retries: 0,
        rpc_timeout: Duration::from_secs(20),
        ..ClientConfig::default()
    }
}

fn connect(addr: &str, config: ClientConfig) -> Result<Client, String> {
    let c = Client::connect_with(addr, config).map_err(|e| e.to_string())?;
    // A TLS 1.3 server refuses a client certificate after the client's side of the handshake
    // is done: the first call is what fails then.
    c.admin().list_tables().map_err(|e| e.to_string())?;
    Ok(c)
}

/// GET `path` over HTTPS with `alice`'s certificate; the whole response.
fn https_get(addr: &str, certs: &Path, path: &str) -> String {
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read(certs.join("ca.pem")).expect("ca");
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots.add(c.expect("ca pem")).expect("add ca");
    }
    let chain: Vec<_> = rustls::pki_types::CertificateDer::pem_file_iter(certs.join("alice.pem"))
        .expect("cert")
        .map(|c| c.expect("cert pem"))
        .collect();
    let key =
        rustls::pki_types::PrivateKeyDer::from_pem_file(certs.join("alice.key")).expect("key");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .expect("client cert");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("tls client");
    let tcp = std::net::TcpStream::connect(addr).expect("connect https");
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut out = Vec::new();
    // The server closes without close_notify after its answer on some paths: take what came.
    let _ = tls.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// GET over plain TCP; the whole response.
fn http_get_plain(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect http");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

#[test]
fn clients_with_certificates_work_and_everyone_else_is_told_why_not() {
    let tmp = tempfile::tempdir().expect("tmp");
    let certs = tmp.path().join("certs");
    make_certs(&certs);
    // More certificates from the same CA: an expired client, a server for another host; and a
    // CA of its own that signed nothing the server knows.
    cert(&["client", "old", "--dir", p(&certs), "--expired"]);
    cert(&[
        "server",
        "--dir",
        p(&certs),
        "--only-hosts",
        "--host",
        "db.example.com",
        "--name",
        "elsewhere",
    ]);
    let other = tmp.path().join("other");
    cert(&["create", "--dir", p(&other), "--user", "mallory"]);

    let server = tls_server(&certs, &tmp.path().join("data"), &[]);
    let addr = server.native.clone();

    // A client with the CA and its certificate: writes and reads.
    let alice =
        connect(&addr, client_tls(&certs, "ca.pem", Some("alice"))).expect("alice connects");
    alice
        .admin()
        .create_table(TableSchema::new("t", vec![FamilySchema::new("f")]), vec![])
        .expect("create over TLS");
    alice
        .table("t")
        .put(RowMutation::new("r1").put(b"f", b"q", cellar_client::LATEST_TIMESTAMP, "v1"))
        .expect("put over TLS");
    let row = alice.table("t").get(Get::new("r1")).expect("get over TLS");
    assert_eq!(row.value(b"f", b"q").map(|v| &v[..]), Some(&b"v1"[..]));

    // Plaintext to a TLS port: the server's own words come back, and it logs them.
    let plain = ClientConfig {
        retries: 0,
        ..ClientConfig::default()
    };
    let e = connect(&addr, plain).expect_err("plaintext refused");
    assert!(e.contains("serves only TLS"), "{e}");
    assert!(
        wait_for(Duration::from_secs(10), || server
            .output()
            .contains("plaintext client on the native TLS port")
            .then_some(()))
        .is_some(),
        "no log line for the plaintext client:\n{}",
        server.output()
    );

    // No client certificate where one is required.
    let e = connect(&addr, client_tls(&certs, "ca.pem", None)).expect_err("no certificate");
    assert!(e.contains("CertificateRequired"), "{e}");
    // A certificate signed by a CA the server does not trust.
    let e = connect(&addr, client_tls(&other, "ca.pem", Some("mallory")))
        .expect_err("a CA the client does not trust");
    assert!(e.contains("tls") || e.contains("TLS"), "{e}");
    // Mallory trusting the right CA still presents a certificate from the wrong one.
    let mallory_cert = other.join("mallory.pem");
    let mallory_key = other.join("mallory.key");
    let wrong_signer = ClientConfig {
        tls: Some(
            TlsClientConfig::from_files(
                &certs.join("ca.pem"),
                Some(&mallory_cert),
                Some(&mallory_key),
            )
            .expect("files"),
        ),
        retries: 0,
        ..ClientConfig::default()
    };
    let e = connect(&addr, wrong_signer).expect_err("an untrusted client certificate");
    assert!(e.contains("refused the TLS session"), "{e}");
    // An expired client certificate.
    let e = connect(&addr, client_tls(&certs, "ca.pem", Some("old")))
        .expect_err("an expired client certificate");
    assert!(e.contains("refused the TLS session"), "{e}");
    assert!(
        wait_for(Duration::from_secs(10), || server
            .output()
            .contains("TLS handshake on the native port failed")
            .then_some(()))
        .is_some(),
        "no log line for the failed handshakes:\n{}",
        server.output()
    );
    // Every refusal was a failed handshake on the server (and alice is still served).
    let metrics = https_get(server.http.as_deref().expect("http"), &certs, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(
        metric(&metrics, "cellar_rpc_tls_handshake_failures_total") >= 3,
        "{metrics}"
    );
    assert!(
        metric(&metrics, "cellar_rpc_tls_plaintext_refused_total") >= 1,
        "{metrics}"
    );
    assert!(alice.table("t").get(Get::new("r1")).is_ok());

    // Plain HTTP to the HTTPS port is told to use HTTPS.
    let answer = http_get_plain(server.http.as_deref().expect("http"), "/metrics");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("HTTPS"), "{answer}");

    // The shell with the same flags.
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["shell", "--connect", &addr, "-e", "get 't', 'r1'"])
        .arg("--tls-ca")
        .arg(certs.join("ca.pem"))
        .arg("--tls-cert")
        .arg(certs.join("alice.pem"))
        .arg("--tls-key")
        .arg(certs.join("alice.key"))
        .output()
        .expect("shell");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("value=v1"), "{stdout}");
    drop(server);

    // A server whose certificate names another host: the client refuses it.
    let elsewhere = Server::start_with(
        &tmp.path().join("data2"),
        None,
        ["127.0.0.1:0"; 3],
        &[
            "--tls-cert",
            p(&certs.join("elsewhere.pem")),
            "--tls-key",
            p(&certs.join("elsewhere.key")),
        ],
    );
    let e = connect(&elsewhere.native, client_tls(&certs, "ca.pem", None))
        .expect_err("a certificate for another host");
    assert!(
        e.contains("NotValidForName") || e.contains("not valid for"),
        "{e}"
    );
}

#[test]
fn optional_client_certificates_let_clients_in_without_one() {
    let tmp = tempfile::tempdir().expect("tmp");
    let certs = tmp.path().join("certs");
    make_certs(&certs);
    let config = tmp.path().join("cellar.toml");
    std::fs::write(&config, "[tls]\nclient_auth = \"optional\"\n").expect("config");
    let server = tls_server(&certs, &tmp.path().join("data"), &["--config", p(&config)]);
    connect(&server.native, client_tls(&certs, "ca.pem", None)).expect("no certificate is fine");
    connect(&server.native, client_tls(&certs, "ca.pem", Some("alice"))).expect("alice too");
}

#[test]
fn a_renewed_certificate_serves_new_connections_without_a_restart() {
    let tmp = tempfile::tempdir().expect("tmp");
    let certs = tmp.path().join("certs");
    make_certs(&certs);
    let renewed = tmp.path().join("renewed");
    cert(&["create", "--dir", p(&renewed), "--user", "alice"]);
    let config = tmp.path().join("cellar.toml");
    std::fs::write(&config, "[tls]\nreload_check_ms = 100\n").expect("config");
    let server = tls_server(&certs, &tmp.path().join("data"), &["--config", p(&config)]);
    let before =
        connect(&server.native, client_tls(&certs, "ca.pem", Some("alice"))).expect("the first CA");

    let old = tmp.path().join("old");
    std::fs::create_dir_all(&old).expect("mkdir");
    std::fs::copy(certs.join("ca.pem"), old.join("ca.pem")).expect("keep the old CA");
    // Swap in the renewed CA's files (each written whole, then renamed over the old).
    for f in ["server.pem", "server.key", "ca.pem"] {
        let tmp_file = certs.join(format!("{f}.new"));
        std::fs::copy(renewed.join(f), &tmp_file).expect("copy");
        std::fs::rename(&tmp_file, certs.join(f)).expect("rename");
    }
    let reloaded = wait_for(Duration::from_secs(20), || {
        connect(
            &server.native,
            client_tls(&renewed, "ca.pem", Some("alice")),
        )
        .ok()
    });
    assert!(
        reloaded.is_some(),
        "the renewed certificate was not served:\n{}",
        server.output()
    );
    // A client that trusts only the old CA no longer trusts the server.
    assert!(connect(&server.native, client_tls(&old, "ca.pem", None)).is_err());
    // A connection made before the renewal goes on.
    assert!(before.admin().list_tables().is_ok());
    assert!(server
        .output()
        .contains("TLS certificate, key and CA reloaded"));
}

#[test]
fn http_endpoints_take_a_token_or_a_client_certificate() {
    let tmp = tempfile::tempdir().expect("tmp");
    let token_file = tmp.path().join("http.token");
    std::fs::write(&token_file, "s3cret-token-0123456789\n").expect("token");
    let config = tmp.path().join("cellar.toml");
    std::fs::write(
        &config,
        format!(
            "[security]\nhttp_token_file = {:?}\n",
            token_file.display().to_string()
        ),
    )
    .expect("config");
    // Plain HTTP: the token is what lets a scraper in.
    let plain = Server::start_in(&tmp.path().join("plain"), Some(&config));
    let http = plain.http.clone().expect("http");
    let answer = http_get_plain(&http, "/metrics");
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(answer.contains("WWW-Authenticate: Bearer"), "{answer}");
    let mut s = std::net::TcpStream::connect(&http).expect("connect");
    write!(
        s,
        "GET /status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-token-0123456789\r\n\r\n"
    )
    .expect("send");
    let mut ok = String::new();
    let _ = s.read_to_string(&mut ok);
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let mut s = std::net::TcpStream::connect(&http).expect("connect");
    write!(
        s,
        "GET /status HTTP/1.1\r\nAuthorization: Bearer wrong\r\n\r\n"
    )
    .expect("send");
    let mut wrong = String::new();
    let _ = s.read_to_string(&mut wrong);
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    drop(plain);

    // HTTPS with a client certificate needs no token.
    let certs = tmp.path().join("certs");
    make_certs(&certs);
    let server = tls_server(&certs, &tmp.path().join("tls"), &["--config", p(&config)]);
    let metrics = https_get(server.http.as_deref().expect("http"), &certs, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
}

#[test]
fn a_certificate_names_the_user_and_refused_handshakes_are_audited() {
    let tmp = tempfile::tempdir().expect("tmp");
    let certs = tmp.path().join("certs");
    make_certs(&certs);
    cert(&["client", "admin", "--dir", p(&certs)]);
    cert(&["client", "old", "--dir", p(&certs), "--expired"]);
    let config = tmp.path().join("cellar.toml");
    std::fs::write(
        &config,
        "[security]\nauthorization = true\nsuperusers = [\"admin\"]\n",
    )
    .expect("config");
    let data = tmp.path().join("data");
    let server = tls_server(&certs, &data, &["--config", p(&config)]);
    let admin =
        connect(&server.native, client_tls(&certs, "ca.pem", Some("admin"))).expect("admin");
    admin
        .admin()
        .create_table(TableSchema::new("t", vec![FamilySchema::new("f")]), vec![])
        .expect("the certificate's user is a superuser");
    admin
        .admin()
        .grant(
            "alice",
            cellar_client::PermissionScope {
                table: "t".into(),
                ..Default::default()
            },
            "R",
        )
        .expect("grant");
    // Alice's certificate makes her alice, whatever she claims.
    let mut claim = client_tls(&certs, "ca.pem", Some("alice"));
    claim.user = Some("admin".into());
    let alice = Client::connect_with(&server.native, claim).expect("alice");
    alice.table("t").get(Get::new("r")).expect("alice reads");
    let e = alice
        .table("t")
        .put(RowMutation::new("r").put(b"f", b"q", cellar_client::LATEST_TIMESTAMP, "x"))
        .expect_err("alice may not write");
    assert!(e.to_string().contains("user 'alice'"), "{e}");
    // An expired certificate is refused in the handshake, and the refusal is audited.
    assert!(connect(&server.native, client_tls(&certs, "ca.pem", Some("old"))).is_err());
    let audited = wait_for(Duration::from_secs(10), || {
        let log = std::fs::read_to_string(data.join("audit.log")).ok()?;
        log.lines()
            .any(|l| l.contains("\"authentication_failed\"") && l.contains("TLS handshake"))
            .then_some(())
    });
    assert!(audited.is_some(), "no audit line for the refused handshake");
}
