//! `cellar hfile` on store files written by HBase 2.6.4's own writer (crates/hfile's fixtures):
//! what a user runs to see whether an HBase file reads before moving it in.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hfile/tests/fixtures")
        .join(name)
}

fn cellar(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(args)
        .output()
        .expect("run cellar hfile");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn hfile_prints_meta_and_cells_and_names_a_damaged_file() {
    let file = fixture("fast_diff-zstd.hfile");
    let path = file.to_str().expect("utf-8 path");
    let (ok, out, err) = cellar(&["hfile", "--meta", "--cells", path]);
    assert!(ok, "{err}");
    assert!(
        out.contains("1610 cells")
            && out.contains("FAST_DIFF blocks")
            && out.contains("ZSTD compression"),
        "{out}"
    );
    assert!(out.contains("BLOOM_FILTER_TYPE = ROW"), "{out}");
    assert!(
        out.contains("K: \\x00\\x04\\x01/cf:/1700000260050/DeleteFamilyVersion/vlen=0/seqid=5 V: "),
        "{out}"
    );
    assert!(
        out.contains("V: value-13-0-1 T[\\x00\\x06\\x01acl-1]"),
        "{out}"
    );
    assert_eq!(out.lines().filter(|l| l.starts_with("K: ")).count(), 1610);

    // A flipped byte: an error naming the file and where, and a failing exit.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bytes = std::fs::read(&file).expect("fixture");
    bytes[200] ^= 1;
    let bad = dir.path().join("bad.hfile");
    std::fs::write(&bad, bytes).expect("write");
    let (ok, _, err) = cellar(&["hfile", bad.to_str().expect("utf-8 path")]);
    assert!(!ok);
    assert!(
        err.contains("bad.hfile: damaged HFile at offset 0: checksum mismatch"),
        "{err}"
    );
}

#[test]
fn import_hbase_names_what_it_cannot_read_before_connecting() {
    for (root, says) in [
        (
            "s3a://bucket/hbase",
            "a local directory, a file:// URL or an hdfs:// URL",
        ),
        ("hdfs:///hbase", "name the NameNode, hdfs://HOST:PORT/DIR"),
    ] {
        let (ok, _, err) = cellar(&["import-hbase", "--snapshot", "s1", "--hbase-root", root]);
        assert!(!ok);
        assert!(err.contains(says), "{root}: {err}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_str().expect("utf-8 path");
    let (ok, _, err) = cellar(&["import-hbase", "--snapshot", "s1", "--hbase-root", root]);
    assert!(!ok);
    assert!(err.contains("no snapshot 's1' under"), "{err}");
    let (ok, _, err) = cellar(&["import-hbase", "--snapshot", "../x", "--hbase-root", root]);
    assert!(!ok);
    assert!(err.contains("'../x' is not a snapshot name"), "{err}");
}
