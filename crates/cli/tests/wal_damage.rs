//! A WAL damaged in its middle (not a torn tail) stops `cellar standalone` from starting, with a
//! message naming the segment, the offset and the way on; with `storage.wal_skip_errors` the
//! server starts with everything before the damage, keeps the damaged segment aside, and says
//! what was lost.

mod support;

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{FamilySchema, Get, RowMutation, TableSchema};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::Server;

fn segments(wal: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(wal)
        .expect("wal dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

#[test]
fn damage_in_the_middle_of_the_wal_is_refused_or_skipped_as_asked() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mut server = Server::start_in(&data, None);
    let client = Client::connect(&server.native).expect("connect");
    client
        .admin()
        .create_table(TableSchema::new("t", vec![FamilySchema::new("cf")]), vec![])
        .expect("create");
    let table = client.table("t");
    for i in 0..400 {
        table
            .put(RowMutation::new(Bytes::from(format!("r{i:04}"))).put(
                b"cf",
                b"q",
                1,
                "x".repeat(100),
            ))
            .expect("put");
    }
    drop(client);
    server.kill9();

    // The newest segment holding the puts: damage a byte in its middle.
    let segment = segments(&data.join("wal"))
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .expect("a segment");
    let mut bytes = std::fs::read(&segment).expect("read");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    std::fs::write(&segment, &bytes).expect("write");

    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args([
            "standalone",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args(["--hbase-listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .output()
        .expect("cellar runs");
    assert!(!out.status.success(), "a corrupt WAL must stop the server");
    let err = String::from_utf8_lossy(&out.stderr);
    let name = segment
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(err.contains(&name), "names the segment: {err}");
    assert!(err.contains("offset"), "names the offset: {err}");
    assert!(err.contains("wal_skip_errors"), "says how to go on: {err}");

    let config = tmp.path().join("cellar.toml");
    std::fs::write(&config, "[storage]\nwal_skip_errors = true\n").expect("config");
    let server = Server::start_in(&data, Some(&config));
    let output = server.output();
    assert!(
        output.contains("skipping damage in a WAL segment"),
        "the log says what was lost: {output}"
    );
    let mut aside = segment.clone().into_os_string();
    aside.push(".corrupt");
    assert_eq!(
        std::fs::read(PathBuf::from(aside)).expect("moved aside"),
        bytes,
        "the damaged segment is kept as it was"
    );
    let client = Client::connect(&server.native).expect("connect");
    let table = client.table("t");
    let present = (0..400)
        .filter(|i| {
            !table
                .get(Get::new(Bytes::from(format!("r{i:04}"))))
                .expect("get")
                .is_empty()
        })
        .count();
    assert!(
        present > 0 && present < 400,
        "a prefix survives: {present} rows"
    );
    // A prefix: every row up to the last present one is there.
    assert!(
        (0..present).all(|i| !table
            .get(Get::new(Bytes::from(format!("r{i:04}"))))
            .expect("get")
            .is_empty()),
        "the rows before the damage are all there"
    );
}
