//! BULK_LOAD_REGION on a real `cellar standalone`, with store files HBase 2.6.4's own writer
//! made (crates/hfile's fixtures): what loads, what is refused and why, and who may. The
//! files are read from the server's disk, so where they may be is a security boundary: only
//! under `bulk_load.dirs`, links resolved; CREATE or ADMIN on the table; nobody unnamed.

mod support;

use cellar_client::blocking::Client;
use cellar_client::{
    BulkLoadFile, ClientConfig, ErrorCode, FamilySchema, Get, PermissionScope, TableSchema,
};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::Server;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hfile/tests/fixtures")
        .join(name)
}

fn as_user(addr: &str, user: Option<&str>) -> Client {
    Client::connect_with(
        addr,
        ClientConfig {
            user: user.map(str::to_string),
            retries: 0,
            rpc_timeout: Duration::from_secs(30),
            ..ClientConfig::default()
        },
    )
    .expect("connect")
}

fn file(family: &str, path: &Path) -> BulkLoadFile {
    BulkLoadFile {
        family: family.into(),
        path: path.to_string_lossy().into_owned(),
        ..BulkLoadFile::default()
    }
}

fn start(dir: &Path, config: &str) -> Server {
    let path = dir.join("cellar.toml");
    std::fs::write(&path, config).expect("config");
    Server::start_in(&dir.join("data"), Some(&path))
}

/// A server with authorization on (superuser `admin`) reading bulk loads from `TMP/in`, a
/// copy of a fixture there, table `t` (family `cf`) created by admin, and bob holding READ
/// and WRITE on it: the server, admin's client, the file, and the table's scope.
fn secured(tmp: &Path) -> (Server, Client, PathBuf, PermissionScope) {
    let dir = tmp.join("in");
    std::fs::create_dir_all(&dir).expect("dir");
    let hfile = dir.join("f.hfile");
    std::fs::copy(fixture("fast_diff-gz.hfile"), &hfile).expect("copy");
    let config = format!(
        "[security]\nauthorization = true\nsuperusers = [\"admin\"]\n[bulk_load]\ndirs = [{:?}]\n",
        dir.to_string_lossy()
    );
    let server = start(tmp, &config);
    let admin = as_user(&server.native, Some("admin"));
    admin
        .admin()
        .create_table(TableSchema::new("t", vec![FamilySchema::new("cf")]), vec![])
        .expect("create");
    let scope = PermissionScope {
        table: "t".into(),
        ..PermissionScope::default()
    };
    admin
        .admin()
        .grant("bob", scope.clone(), "RW")
        .expect("grant");
    (server, admin, hfile, scope)
}

/// The first row of the fixtures (a binary one) and its newest value of cf:q0.
const FIRST_ROW: &[u8] = b"\x00\x04\x01";

#[test]
fn hbase_files_load_into_a_region_and_everything_else_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let allowed = tmp.path().join("hbase-root");
    std::fs::create_dir_all(&allowed).expect("dir");
    let inside = allowed.join("fast_diff-gz.hfile");
    std::fs::copy(fixture("fast_diff-gz.hfile"), &inside).expect("copy");
    let outside = tmp.path().join("elsewhere.hfile");
    std::fs::copy(fixture("fast_diff-gz.hfile"), &outside).expect("copy");
    let link = allowed.join("link.hfile");
    std::os::unix::fs::symlink(&outside, &link).expect("symlink");
    let config = format!("[bulk_load]\ndirs = [{:?}]\n", allowed.to_string_lossy());
    let mut server = start(tmp.path(), &config);
    let client = as_user(&server.native, None);
    let admin = client.admin();
    let mut cf = FamilySchema::new("cf");
    cf.max_versions = 3;
    admin
        .create_table(TableSchema::new("t", vec![cf]), vec![])
        .expect("create");

    // Outside the directories, directly or through a link inside them: refused, unread.
    for (path, what) in [
        (&outside, "outside"),
        (&link, "a link to outside"),
        (&PathBuf::from("/etc/passwd"), "a system file"),
    ] {
        let e = admin
            .bulk_load("t", b"", vec![file("cf", path)])
            .expect_err(what);
        assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{what}: {e}");
        assert!(
            e.to_string()
                .contains("not under this server's bulk_load.dirs"),
            "{e}"
        );
    }
    // Another family's name: refused, nothing visible.
    admin
        .alter_table("t", vec![FamilySchema::new("other")], vec![])
        .expect("alter");
    let e = admin
        .bulk_load("t", b"", vec![file("other", &inside)])
        .expect_err("family");
    assert!(
        e.to_string()
            .contains("holds cells of family 'cf', loaded into family 'other'"),
        "{e}"
    );
    assert!(client
        .table("t")
        .get(Get::new(FIRST_ROW.to_vec()))
        .expect("get")
        .is_empty());

    // The real thing: every cell in, HBase's newest version first.
    let done = admin
        .bulk_load("t", b"", vec![file("cf", &inside)])
        .expect("bulk load");
    assert_eq!((done.files, done.cells), (1, 1610));
    let mut get = Get::new(b"user00007919".to_vec());
    get.max_versions = 5;
    let row = client.table("t").get(get).expect("get");
    // HBase's file holds q0 at ..1000 and ..1007, a Delete of q0's version ..1050 (none
    // there), and q1 at ..1000 and ..1007: four versions read back, newest first.
    let got: Vec<(String, u64, String)> = row
        .cells
        .iter()
        .map(|c| {
            (
                String::from_utf8_lossy(&c.qualifier).into_owned(),
                c.timestamp,
                String::from_utf8_lossy(&c.value).into_owned(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("q0".into(), 1_700_000_001_007, "value-1-0-1".into()),
            ("q0".into(), 1_700_000_001_000, "value-1-0-0".into()),
            ("q1".into(), 1_700_000_001_007, "value-1-1-1".into()),
            ("q1".into(), 1_700_000_001_000, "value-1-1-0".into()),
        ]
    );

    // Acknowledged is durable: killed with SIGKILL right after, the restarted server has it.
    server.kill9();
    drop(client);
    let server = Server::start_in(
        &tmp.path().join("data"),
        Some(&tmp.path().join("cellar.toml")),
    );
    let client = as_user(&server.native, None);
    let admin = client.admin();
    let mut get = Get::new(b"user00007919".to_vec());
    get.max_versions = 5;
    assert_eq!(
        client
            .table("t")
            .get(get)
            .expect("get after kill -9")
            .cells
            .len(),
        4
    );

    // A file with rows on both sides of a region boundary: refused, as HBase's region
    // server refuses it (its tool then splits the file).
    admin
        .create_table(
            TableSchema::new("split", vec![FamilySchema::new("cf")]),
            vec!["m".into()],
        )
        .expect("create split");
    let e = admin
        .bulk_load("split", b"", vec![file("cf", &inside)])
        .expect_err("spans");
    assert!(e.to_string().contains("outside the region"), "{e}");
    assert!(
        client
            .table("split")
            .get(Get::new(FIRST_ROW.to_vec()))
            .expect("get")
            .is_empty(),
        "nothing of a refused load is visible"
    );
}

#[test]
fn bulk_load_is_off_without_directories_and_needs_create_on_the_table() {
    let tmp = tempfile::tempdir().expect("tmp");
    let off = start(tmp.path(), "");
    let c = as_user(&off.native, None);
    c.admin()
        .create_table(TableSchema::new("t", vec![FamilySchema::new("cf")]), vec![])
        .expect("create");
    let e = c
        .admin()
        .bulk_load("t", b"", vec![file("cf", &fixture("fast_diff-gz.hfile"))])
        .expect_err("off");
    assert!(
        e.to_string().contains("bulk load is off on this server"),
        "{e}"
    );
    drop(off);

    let tmp = tempfile::tempdir().expect("tmp");
    let (server, admin, hfile, scope) = secured(tmp.path());
    // Nobody named: unauthenticated. Bob with WRITE only: denied.
    let e = as_user(&server.native, None)
        .admin()
        .bulk_load("t", b"", vec![file("cf", &hfile)])
        .expect_err("nobody");
    assert_eq!(e.code(), Some(ErrorCode::Unauthenticated), "{e}");
    let bob = as_user(&server.native, Some("bob"));
    let e = bob
        .admin()
        .bulk_load("t", b"", vec![file("cf", &hfile)])
        .expect_err("bob");
    assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{e}");
    admin
        .admin()
        .grant("bob", scope, "RWC")
        .expect("grant create");
    let done = bob
        .admin()
        .bulk_load("t", b"", vec![file("cf", &hfile)])
        .expect("bob with CREATE");
    assert_eq!(done.cells, 1610);
}

/// The same boundary on the HBase port: PrepareBulkLoad, BulkLoadHFile and CleanupBulkLoad
/// (what HBase's `completebulkload` calls) need CREATE on the table, and read only under
/// `bulk_load.dirs`, whoever asks.
#[test]
fn hbase_bulk_load_calls_need_create_and_an_allowed_path() {
    use cellar_proto::hbase;
    use support::hbase::{call, locate, open_as, region};
    let tmp = tempfile::tempdir().expect("tmp");
    let (server, admin, hfile, scope) = secured(tmp.path());
    let outside = tmp.path().join("outside.hfile");
    std::fs::copy(fixture("fast_diff-gz.hfile"), &outside).expect("copy");

    let mut meta = open_as(&server.hbase, "ClientService", "admin");
    let region_name = locate(&mut meta, 1, "t", "")
        .first()
        .expect("t's region")
        .0
        .clone();
    let prepare = hbase::PrepareBulkLoadRequest {
        table_name: hbase::TableName {
            namespace: bytes::Bytes::from_static(b"default"),
            qualifier: bytes::Bytes::from_static(b"t"),
        },
        region: None,
    };
    let load = |path: &Path| hbase::BulkLoadHFileRequest {
        region: region(&region_name),
        family_path: vec![hbase::bulk_load_h_file_request::FamilyPath {
            family: bytes::Bytes::from_static(b"cf"),
            path: format!("file:{}", path.display()),
        }],
        assign_seq_num: Some(true),
        ..Default::default()
    };
    let cleanup = hbase::CleanupBulkLoadRequest {
        bulk_token: "token".into(),
        region: Some(region(&region_name)),
    };
    let denied = |e: hbase::ExceptionResponse, what: &str| {
        let class = e.exception_class_name.unwrap_or_default();
        assert!(class.ends_with("AccessDeniedException"), "{what}: {class}");
    };

    // Bob, with READ and WRITE but not CREATE: every call refused.
    let mut bob = open_as(&server.hbase, "ClientService", "bob");
    denied(
        call(&mut bob, 1, "PrepareBulkLoad", &prepare).expect_err("prepare"),
        "prepare",
    );
    denied(
        call(&mut bob, 2, "BulkLoadHFile", &load(&hfile)).expect_err("load"),
        "load",
    );
    denied(
        call(&mut bob, 3, "CleanupBulkLoad", &cleanup).expect_err("cleanup"),
        "cleanup",
    );
    let nothing = admin
        .table("t")
        .get(Get::new(b"user00007919".to_vec()))
        .expect("get");
    assert!(nothing.is_empty(), "nothing loaded");

    // With CREATE: a file outside the directories is still refused; one inside loads.
    admin
        .admin()
        .grant("bob", scope, "RWC")
        .expect("grant create");
    let mut bob = open_as(&server.hbase, "ClientService", "bob");
    let (param, _) = call(&mut bob, 1, "PrepareBulkLoad", &prepare).expect("prepare");
    let token = <hbase::PrepareBulkLoadResponse as prost::Message>::decode(param).expect("decode");
    assert!(!token.bulk_token.is_empty());
    let e = call(&mut bob, 2, "BulkLoadHFile", &load(&outside)).expect_err("outside");
    denied(e, "outside the directories");
    let (param, _) = call(&mut bob, 3, "BulkLoadHFile", &load(&hfile)).expect("load");
    let loaded = <hbase::BulkLoadHFileResponse as prost::Message>::decode(param).expect("decode");
    assert!(loaded.loaded);
    call(&mut bob, 4, "CleanupBulkLoad", &cleanup).expect("cleanup");
    let row = admin
        .table("t")
        .get(Get::new(b"user00007919".to_vec()))
        .expect("get");
    assert!(!row.is_empty(), "the loaded file reads back");
}

/// HBase's files on HDFS (an HBase root there): read with Cellar's own HDFS client when an
/// `hdfs://` directory of the same NameNode is in `bulk_load.dirs`; another directory, another
/// NameNode, a `..` out, and a missing file are refused alike, before any byte is read.
#[test]
fn hbase_files_on_hdfs_load_only_from_an_allowed_hdfs_directory() {
    use cellar_storage::fs::{FileSystem, HdfsFs};
    let dfs = cellar_testing::MiniDfs::start(1).expect("start MiniDFS");
    let hdfs = HdfsFs::connect(&dfs.url).expect("connect to HDFS");
    let bytes = std::fs::read(fixture("fast_diff-gz.hfile")).expect("fixture");
    for path in ["/hbase/data/f.hfile", "/other/f.hfile"] {
        let mut w = hdfs.create(Path::new(path)).expect("create");
        w.append(&bytes).expect("append");
        w.sync().expect("sync");
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let config = format!("[bulk_load]\ndirs = [\"{}/hbase\"]\n", dfs.url);
    let server = start(tmp.path(), &config);
    let client = as_user(&server.native, None);
    let admin = client.admin();
    let mut cf = FamilySchema::new("cf");
    cf.max_versions = 3;
    admin
        .create_table(TableSchema::new("t", vec![cf]), vec![])
        .expect("create");
    let at = |path: String| BulkLoadFile {
        family: "cf".into(),
        path,
        ..BulkLoadFile::default()
    };
    let port = dfs.url.rsplit(':').next().expect("port");
    for (path, what) in [
        (format!("{}/other/f.hfile", dfs.url), "another directory"),
        (
            format!("{}/hbase/../other/f.hfile", dfs.url),
            "out through ..",
        ),
        (
            format!("hdfs://localhost:{port}/hbase/data/f.hfile"),
            "another NameNode name",
        ),
        (
            format!("{}/hbase/data/missing.hfile", dfs.url),
            "a missing file",
        ),
        (format!("{}/hbase/data", dfs.url), "a directory"),
    ] {
        let e = admin.bulk_load("t", b"", vec![at(path)]).expect_err(what);
        assert_eq!(e.code(), Some(ErrorCode::PermissionDenied), "{what}: {e}");
    }
    let done = admin
        .bulk_load(
            "t",
            b"",
            vec![at(format!("{}/hbase/data/f.hfile", dfs.url))],
        )
        .expect("bulk load from HDFS");
    assert_eq!((done.files, done.cells), (1, 1610));
    let mut get = Get::new(b"user00007919".to_vec());
    get.max_versions = 5;
    assert_eq!(client.table("t").get(get).expect("get").cells.len(), 4);
}
