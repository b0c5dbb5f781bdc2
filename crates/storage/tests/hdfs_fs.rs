//! `HdfsFs` against a real HDFS: a MiniDFS (NameNode + 3 DataNodes, `java/minidfs`) on
//! 127.0.0.1. One cluster serves the checks, run one after the other by one test (a JVM
//! per check would cost seconds and memory each); it is stopped by PID at the end.

use cellar_storage::fs::{self, FileSystem, HdfsFs};
use cellar_testing::{free_port, MiniDfs};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn hdfs_fs_on_a_minidfs() {
    let mut dfs = MiniDfs::start(3).expect("start MiniDFS");
    let url = dfs.url.clone();
    let connect = || HdfsFs::connect(&url).expect("connect to HDFS");
    files_and_directories_behave_as_on_local_disk(connect());
    every_flushed_byte_is_there_after_the_writer_dies(connect(), connect);
    the_lock_is_the_lease(connect(), connect);
    // Last: it leaves the cluster a DataNode short.
    writes_go_on_when_a_datanode_dies_mid_file(connect(), &mut dfs);
}

/// A store file stays open for as long as its region is: a read through it must go on when the
/// DataNode holding its block restarts (a rolling restart, a crashed DataNode brought back),
/// as HDFS's own client fetches the block's locations again instead of giving up on a node
/// it once saw fail. One DataNode, so no other replica can answer.
#[test]
fn a_read_goes_on_across_a_datanode_restart() {
    let mut dfs = MiniDfs::start(1).expect("start MiniDFS");
    let fs = HdfsFs::connect(&dfs.url).expect("connect to HDFS");
    let path = Path::new("/restart/storefile");
    let data: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 251) as u8).collect();
    let mut w = fs.create(path).expect("create");
    w.append(&data).expect("append");
    w.sync().expect("sync");
    drop(w);
    let r = fs.open(path).expect("open");
    assert_eq!(&r.read_at(0, 1024).expect("read")[..], &data[..1024]);

    dfs.stop_datanode(0).expect("stop the DataNode");
    // A read while it is down, answered once it is back.
    let reader = Arc::clone(&r);
    let read = std::thread::spawn(move || reader.read_at(4096, 8192));
    std::thread::sleep(Duration::from_millis(500));
    dfs.restart_datanode(0).expect("restart the DataNode");
    let got = read
        .join()
        .expect("reader thread")
        .expect("the read across the restart");
    assert_eq!(&got[..], &data[4096..4096 + 8192]);
    // And the same open file goes on reading afterwards.
    assert_eq!(
        &r.read_at(100_000, 1000).expect("read after the restart")[..],
        &data[100_000..101_000]
    );
}

fn files_and_directories_behave_as_on_local_disk(fs: HdfsFs) {
    let dir = Path::new("/t/files");
    fs.create_dir_all(dir).expect("mkdir");
    assert!(fs.exists(dir).expect("exists"));

    let a = dir.join("a");
    let mut w = fs.create(&a).expect("create");
    w.append(b"hello ").expect("append");
    w.append(&vec![7u8; 3 * 1024 * 1024])
        .expect("append past the buffer");
    w.append(b"world").expect("append");
    assert_eq!(w.len(), 6 + 3 * 1024 * 1024 + 5);
    w.sync().expect("sync");
    drop(w);
    let r = fs.open(&a).expect("open");
    assert_eq!(r.len(), 6 + 3 * 1024 * 1024 + 5);
    assert_eq!(&r.read_at(0, 6).expect("read")[..], b"hello ");
    assert_eq!(&r.read_at(r.len() - 5, 5).expect("read")[..], b"world");
    let past = r.read_at(r.len() - 2, 5).expect_err("past the end");
    assert!(past.to_string().contains("past the end"), "{past}");

    // Atomic replace, listing, rename over, delete.
    fs::write_atomic(&fs, &dir.join("b"), b"first").expect("write b");
    fs::write_atomic(&fs, &dir.join("b"), b"second").expect("replace b");
    assert_eq!(
        &fs::read_all(&fs, &dir.join("b")).expect("read b")[..],
        b"second"
    );
    assert_eq!(fs.list(dir).expect("list"), vec!["a", "b"]);
    fs.rename(&dir.join("b"), &a).expect("rename over");
    assert_eq!(fs.list(dir).expect("list"), vec!["a"]);
    assert_eq!(&fs::read_all(&fs, &a).expect("read a")[..], b"second");

    // Truncate keeps the prefix.
    fs.truncate(&a, 3).expect("truncate");
    assert_eq!(&fs::read_all(&fs, &a).expect("read a")[..], b"sec");

    fs.delete(&a).expect("delete");
    assert!(!fs.exists(&a).expect("exists"));
    let missing = fs.delete(&a).expect_err("deleting twice");
    assert_eq!(
        missing.io_kind(),
        Some(std::io::ErrorKind::NotFound),
        "{missing}"
    );
    let Err(missing) = fs.open(&a) else {
        panic!("opening a deleted file");
    };
    assert!(missing.to_string().contains("/t/files/a"), "{missing}");
    fs.delete_dir_all(Path::new("/t")).expect("rm -r");
    fs.delete_dir_all(Path::new("/t"))
        .expect("rm -r of nothing");
    assert!(!fs.exists(dir).expect("exists"));
}

fn every_flushed_byte_is_there_after_the_writer_dies(
    writer_fs: HdfsFs,
    connect: impl Fn() -> HdfsFs,
) {
    let path = Path::new("/t2/wal-like");
    let mut w = writer_fs.create(path).expect("create");
    let syncer = w.syncer().expect("syncer");
    let mut expected = Vec::new();
    for round in 0..20u8 {
        let record = vec![round; 100];
        w.append(&record).expect("append");
        expected.extend_from_slice(&record);
        if round % 2 == 0 {
            w.flush().expect("flush = hsync");
        } else {
            // The WAL's sync thread syncs while the writer owns the file.
            w.flush().expect("flush");
            let s = Arc::clone(&syncer);
            std::thread::spawn(move || s.sync())
                .join()
                .expect("thread")
                .expect("concurrent sync");
        }
    }
    // Appended, never flushed: not promised, and not there.
    w.append(b"unflushed").expect("append");
    // The writer dies: never closed, its client gone.
    std::mem::forget(w);
    drop(syncer);
    drop(writer_fs);

    // Another server takes the file over, as a master does with a dead server's WAL.
    let fs = connect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !fs.recover_lease(path).expect("recover lease") {
        assert!(Instant::now() < deadline, "lease not recovered within 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    let r = fs.open(path).expect("open");
    assert_eq!(r.len(), expected.len() as u64);
    assert_eq!(
        &r.read_at(0, expected.len()).expect("read")[..],
        &expected[..]
    );
    fs.delete_dir_all(Path::new("/t2")).expect("cleanup");
}

fn the_lock_is_the_lease(fs: HdfsFs, connect: impl Fn() -> HdfsFs) {
    let other = connect().with_lock_wait(Duration::from_secs(2));
    let lock = Path::new("/t3/LOCK");
    let held = fs.lock(lock).expect("first lock");
    let Err(refused) = other.lock(lock) else {
        panic!("second lock while held");
    };
    assert!(refused.to_string().contains("in use"), "{refused}");
    drop(held);
    // Closed by its holder: taken over.
    let again = other.lock(lock).expect("lock after release");
    // Its holder dies (never closes, client gone): the lease lapses (5 s in these tests,
    // 60 s in HDFS) and the next server takes the lock.
    std::mem::forget(again);
    drop(other);
    let patient = connect().with_lock_wait(Duration::from_secs(60));
    let started = Instant::now();
    let taken = patient.lock(lock).expect("lock after the holder died");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "taken while the lease was held"
    );
    drop(taken);
    fs.delete_dir_all(Path::new("/t3")).expect("cleanup");
}

#[test]
fn an_unreachable_namenode_is_a_prompt_error_naming_it() {
    let port = free_port().expect("port");
    let url = format!("hdfs://127.0.0.1:{port}");
    let started = Instant::now();
    let Err(err) = HdfsFs::connect(&url) else {
        panic!("nothing listens there");
    };
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

fn writes_go_on_when_a_datanode_dies_mid_file(fs: HdfsFs, dfs: &mut MiniDfs) {
    let path = Path::new("/t5/pipeline");
    let mut w = fs.create(path).expect("create");
    let mut expected = Vec::new();
    for i in 0..10u8 {
        let chunk = vec![i; 64 * 1024];
        w.append(&chunk).expect("append");
        expected.extend_from_slice(&chunk);
        w.flush().expect("hsync before the DataNode dies");
    }
    dfs.stop_datanode(2).expect("stop a DataNode");
    for i in 10..20u8 {
        let chunk = vec![i; 64 * 1024];
        w.append(&chunk).expect("append");
        expected.extend_from_slice(&chunk);
        w.flush().expect("hsync after a DataNode died");
    }
    drop(w);
    let r = fs.open(path).expect("open");
    assert_eq!(r.len(), expected.len() as u64);
    assert_eq!(
        &r.read_at(0, expected.len()).expect("read")[..],
        &expected[..]
    );
}
