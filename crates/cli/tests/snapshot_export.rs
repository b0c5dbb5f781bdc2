//! `cellar export-snapshot`: a snapshot of one running standalone server, some of whose files
//! its table already compacted away into the archive, is copied into another running server's
//! root, which lists it and clones it whole, keeps the clone through its archive's cleaning
//! and a restart; the same export to an HDFS root lands every file there; refusals are clear.

mod support;

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{FamilySchema, RowMutation, Scan, TableSchema};
use std::collections::BTreeMap;
use std::process::Command;
use support::Server;

fn contents(c: &Client, table: &str) -> BTreeMap<Bytes, Bytes> {
    let mut s = c.table(table).scan(Scan::new());
    let mut out = BTreeMap::new();
    while let Some(r) = s.next_row().expect("scan") {
        out.insert(r.row.clone(), r.cells[0].value.clone());
    }
    out
}

fn export(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .arg("export-snapshot")
        .args(args)
        .output()
        .expect("run cellar export-snapshot");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn put_all(c: &Client, value: &str) {
    for i in 0..500 {
        let row = format!("{}{i:04}", ["a", "h", "p"][i % 3]);
        c.table("t")
            .put(RowMutation::new(row).put(
                b"f",
                b"q",
                cellar_client::LATEST_TIMESTAMP,
                value.to_string(),
            ))
            .expect("put");
    }
}

#[test]
fn a_snapshot_exported_to_another_root_clones_there() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a_dir, b_dir) = (tmp.path().join("a"), tmp.path().join("b"));
    let a = Server::start_in(&a_dir, None);
    let mut b = Server::start_in(&b_dir, None);
    let ca = support::connect_blocking(&a.native);
    ca.admin()
        .create_table(
            TableSchema::new("t", vec![FamilySchema::new("f")]),
            vec![Bytes::from_static(b"g"), Bytes::from_static(b"o")],
        )
        .expect("create");
    put_all(&ca, "old");
    let want = contents(&ca, "t");
    ca.admin().snapshot("t", "s", false).expect("snapshot");
    // The source moves on: its snapshot's files go to its archive.
    put_all(&ca, "new");
    ca.admin().flush("t").expect("flush");
    ca.admin().compact("t", true).expect("compact");

    let a_root = a_dir.display().to_string();
    let b_root = format!("file://{}", b_dir.display());
    let (ok, out) = export(&["--root", &a_root, "--snapshot", "s", "--to", &b_root]);
    assert!(ok, "{out}");
    assert!(
        out.contains("exported snapshot s of table t: 3 regions"),
        "{out}"
    );

    let cb = support::connect_blocking(&b.native);
    let listed = cb.admin().list_snapshots().expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), listed[0].table.as_str()),
        ("s", "t")
    );
    cb.admin().clone_snapshot("s", "t").expect("clone there");
    assert_eq!(
        contents(&cb, "t"),
        want,
        "the other server holds the snapshot's table"
    );
    // Its cleaner keeps what the clone reads; a restart keeps it all.
    cb.admin()
        .snapshot("t", "other", false)
        .expect("another snapshot");
    cb.admin()
        .delete_snapshot("other")
        .expect("delete (cleans the archive)");
    assert_eq!(contents(&cb, "t"), want);
    drop(cb);
    b = Server::start_in(&b_dir, {
        drop(b);
        None
    });
    let cb = support::connect_blocking(&b.native);
    assert_eq!(contents(&cb, "t"), want, "after a restart");

    // Again: already there. A missing snapshot: named.
    let (ok, out) = export(&["--root", &a_root, "--snapshot", "s", "--to", &b_root]);
    assert!(!ok && out.contains("already has a snapshot 's'"), "{out}");
    let (ok, out) = export(&["--root", &a_root, "--snapshot", "nope", "--to", &b_root]);
    assert!(!ok && out.contains("there is no snapshot 'nope'"), "{out}");
}

#[test]
fn a_snapshot_exported_to_hdfs_lands_whole() {
    let tmp = tempfile::tempdir().expect("tmp");
    let a = Server::start_in(&tmp.path().join("a"), None);
    let ca = support::connect_blocking(&a.native);
    ca.admin()
        .create_table(TableSchema::new("t", vec![FamilySchema::new("f")]), vec![])
        .expect("create");
    put_all(&ca, "v");
    ca.admin().snapshot("t", "s", false).expect("snapshot");
    let dfs = cellar_testing::MiniDfs::start(1).expect("start MiniDFS");
    let to = format!("{}/backup", dfs.url);
    let a_root = tmp.path().join("a").display().to_string();
    let (ok, out) = export(&["--root", &a_root, "--snapshot", "s", "--to", &to]);
    assert!(ok, "{out}");
    // The manifest reads back from HDFS and every file it names is there.
    let namenode = dfs.url.clone();
    let fs = cellar_storage::fs::HdfsFs::connect(&namenode).expect("connect");
    let root = std::path::Path::new("/backup");
    let m = cellar_server::snapshot::Manifest::read(&fs, root, "s")
        .expect("read")
        .expect("the manifest is there");
    let files: Vec<_> = m.regions.iter().flat_map(|r| &r.files).collect();
    assert!(!files.is_empty());
    for f in files {
        let rel = f.path.strip_prefix(root.join("data")).expect("under data/");
        let archived = cellar_storage::fs::archive_root(root).join(rel);
        assert!(
            cellar_storage::fs::FileSystem::exists(&fs, &archived).expect("exists"),
            "{} was copied",
            archived.display()
        );
    }
}
