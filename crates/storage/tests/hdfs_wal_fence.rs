//! The WAL fence on a real HDFS (a MiniDFS on 127.0.0.1, `java/minidfs`): a region server's
//! log, taken over by a master as when the server was paused past its ZooKeeper session
//! (the master renames `wal/<server>` to `wal/<server>-splitting`, recovers the lease of
//! every segment in it, splits it by region and removes it), acknowledges nothing from then
//! on, and every write it acknowledged before is in what the master split.
//!
//! A server "wakes" here by carrying on with the `Wal` it had open: the checks run one after
//! the other on one MiniDFS, which is stopped by PID at the end.

use cellar_model::Durability;
use cellar_storage::fs::{FileSystem, FsRef, HdfsFs};
use cellar_storage::wal::{log_split, Wal, WalOptions};
use cellar_testing::MiniDfs;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[test]
fn a_fenced_wal_on_hdfs_acknowledges_nothing_and_loses_nothing() {
    let dfs = MiniDfs::start(3).expect("start MiniDFS");
    let url = dfs.url.clone();
    let connect = || -> FsRef { Arc::new(HdfsFs::connect(&url).expect("connect to HDFS")) };
    // The master has its own client, as it has its own process.
    let master = connect();
    no_parent_create_fails_where_the_directory_is_gone(&*connect());
    a_write_to_the_old_segment_after_the_split_is_refused(connect(), &*master);
    a_roll_after_the_split_cannot_recreate_the_directory(connect(), &*master);
    writes_between_the_rename_and_the_split_are_refused_or_split(connect(), &*master);
}

/// A server's WAL directory and where its regions' recovered edits go, under `root`.
struct Layout {
    wal: PathBuf,
    splitting: PathBuf,
    regions: PathBuf,
}

fn layout(root: &str) -> Layout {
    let root = Path::new(root);
    Layout {
        wal: root.join("wal/rs1,1,1"),
        splitting: root.join("wal/rs1,1,1-splitting"),
        regions: root.join("regions"),
    }
}

/// How a cluster's region server opens its log on HDFS: no directory check (`fence_dir`
/// is off where the file system's leases fence writers), small segments.
fn open_wal(fs: FsRef, dir: &Path) -> Arc<Wal> {
    assert!(
        fs.fences_writers(),
        "HDFS shuts out a writer whose lease is recovered"
    );
    let opts = WalOptions {
        segment_size: 4096,
        fence_dir: !fs.fences_writers(),
        ..WalOptions::default()
    };
    let (wal, replayed) = Wal::open(fs, dir, opts).expect("open the WAL on HDFS");
    assert!(replayed.is_empty());
    wal
}

/// Writes one record for region 1 with `seq`, SYNC_WAL (an hsync on HDFS): whether it was
/// acknowledged.
fn put(wal: &Wal, seq: u64) -> bool {
    wal.append(1, seq, format!("edit {seq}").as_bytes())
        .and_then(|t| wal.sync(t, Durability::SyncWal))
        .is_ok()
}

/// What the master does to a dead server's log: rename (the fence), split (lease recovery of
/// every segment, then the records by region), remove.
fn rename(master: &dyn FileSystem, l: &Layout) {
    master
        .rename(&l.wal, &l.splitting)
        .expect("the master's rename");
}

fn split_and_remove(master: &dyn FileSystem, l: &Layout) {
    let regions = l.regions.clone();
    log_split::split(master, &l.splitting, false, |id| {
        Some(regions.join(id.to_string()))
    })
    .expect("the master's split");
    master
        .delete_dir_all(&l.splitting)
        .expect("the master removes the split log");
}

/// The sequence ids the master's splits put into region 1's recovered edits.
fn split_seqs(master: &dyn FileSystem, l: &Layout) -> BTreeSet<u64> {
    log_split::read_recovered(master, &l.regions.join("1"))
        .expect("read the recovered edits")
        .iter()
        .map(|r| r.seq)
        .collect()
}

fn no_parent_create_fails_where_the_directory_is_gone(fs: &dyn FileSystem) {
    let dir = Path::new("/fence0/dir");
    fs.create_dir_all(dir).expect("mkdir");
    let mut f = fs
        .create_in_existing_dir(&dir.join("a"))
        .expect("a create in a directory that exists");
    f.append(b"x").expect("append");
    f.sync().expect("sync");
    drop(f);
    let Err(e) = fs.create_in_existing_dir(Path::new("/fence0/gone/a")) else {
        panic!("a create in a missing directory must fail, not make the directory");
    };
    assert_eq!(e.io_kind(), Some(std::io::ErrorKind::NotFound), "{e}");
    assert!(!fs.exists(Path::new("/fence0/gone")).expect("exists"));
    fs.delete_dir_all(Path::new("/fence0")).expect("cleanup");
}

/// The server wakes and writes to the segment it had open: the lease recovery shut it out.
fn a_write_to_the_old_segment_after_the_split_is_refused(server: FsRef, master: &dyn FileSystem) {
    let l = layout("/fence1");
    let wal = open_wal(Arc::clone(&server), &l.wal);
    assert!(put(&wal, 1), "acknowledged while the log is the server's");
    rename(master, &l);
    split_and_remove(master, &l);
    assert!(
        !put(&wal, 2),
        "a write to a segment whose lease the master recovered was acknowledged"
    );
    assert_eq!(split_seqs(master, &l), BTreeSet::from([1]));
    assert!(
        !master.exists(&l.wal).expect("exists"),
        "nothing recreated the log"
    );
    drop(wal);
    master
        .delete_dir_all(Path::new("/fence1"))
        .expect("cleanup");
}

/// The server wakes and rolls its log first (its segment had filled just before it was
/// paused): the new segment must not come into being, and nothing may be acknowledged.
/// Before HDFS creates stopped making parents, the roll recreated `wal/<server>/` and the
/// write after it was acknowledged into a log no split had seen.
fn a_roll_after_the_split_cannot_recreate_the_directory(server: FsRef, master: &dyn FileSystem) {
    let l = layout("/fence2");
    let wal = open_wal(Arc::clone(&server), &l.wal);
    assert!(put(&wal, 1), "acknowledged while the log is the server's");
    rename(master, &l);
    split_and_remove(master, &l);
    let rolled = wal.roll();
    let acked = put(&wal, 2);
    let recreated = master.exists(&l.wal).expect("exists");
    assert!(
        rolled.is_err() && !acked && !recreated,
        "a fenced server rolled its log (roll: {rolled:?}), recreated its WAL directory \
         ({recreated}) and acknowledged a write after the master split its log ({acked})"
    );
    assert_eq!(split_seqs(master, &l), BTreeSet::from([1]));
    drop(wal);
    master
        .delete_dir_all(Path::new("/fence2"))
        .expect("cleanup");
}

/// The server writes and rolls between the master's rename and its split: what it
/// acknowledged went to a segment that moved with the directory, which the split takes over
/// and reads; the roll finds no directory to create its segment in.
fn writes_between_the_rename_and_the_split_are_refused_or_split(
    server: FsRef,
    master: &dyn FileSystem,
) {
    let l = layout("/fence3");
    let wal = open_wal(Arc::clone(&server), &l.wal);
    let mut acked = BTreeSet::new();
    for seq in 1..=3 {
        assert!(put(&wal, seq), "acknowledged while the log is the server's");
        acked.insert(seq);
    }
    rename(master, &l);
    for seq in 4..=6 {
        if put(&wal, seq) {
            acked.insert(seq);
        }
    }
    let rolled = wal.roll();
    assert!(
        rolled.is_err(),
        "a roll after the rename created a segment outside the log the master splits"
    );
    if put(&wal, 7) {
        acked.insert(7);
    }
    split_and_remove(master, &l);
    for seq in 8..=9 {
        assert!(!put(&wal, seq), "acknowledged after the split");
    }
    assert!(
        !master.exists(&l.wal).expect("exists"),
        "nothing recreated the log"
    );
    let split = split_seqs(master, &l);
    assert!(
        acked.is_subset(&split),
        "acknowledged {acked:?}, but the split found only {split:?}"
    );
    drop(wal);
    master
        .delete_dir_all(Path::new("/fence3"))
        .expect("cleanup");
}
