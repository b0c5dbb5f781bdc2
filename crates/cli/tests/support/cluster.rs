//! A cluster under test: the native client, writers that record what was acknowledged, and
//! the checks the cluster tests share.

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{ClientConfig, FamilySchema, RowMutation, Scan, TableSchema};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::wait_for;

/// The table the cluster tests write.
pub const TABLE: &str = "clustered";

pub fn client(master: &str) -> Client {
    let config = ClientConfig {
        rpc_timeout: Duration::from_secs(10),
        retries: 2,
        retry_backoff: Duration::from_millis(50),
        ..ClientConfig::default()
    };
    Client::connect_with(master, config).expect("connect to the master")
}

/// Whether a row is one the tests number themselves (the others are the writers').
pub fn is_numbered(row: &[u8]) -> bool {
    row.windows(5).any(|w| w == b"-row-")
}

/// Writers putting rows `w-<writer>-<n>` (100-byte values) until stopped, each row until it
/// is acknowledged or the writer's time runs out; what each had acknowledged.
pub struct Writers {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<BTreeSet<Bytes>>>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Writers {
    pub fn start(master: &str, n: usize) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(BTreeSet::new()));
        let handles = (0..n)
            .map(|w| {
                let (stop, acked, master) = (stop.clone(), acked.clone(), master.to_string());
                std::thread::spawn(move || {
                    let c = client(&master);
                    let t = c.table(TABLE);
                    let deadline = Instant::now() + Duration::from_secs(240);
                    for i in 0..100_000u32 {
                        if stop.load(Ordering::SeqCst) || Instant::now() > deadline {
                            return;
                        }
                        // Spread over the regions: the first character picks the region.
                        let row = Bytes::from(format!("{}-w{w}-{i:06}", i % 10));
                        let m = RowMutation::new(row.clone()).put(
                            b"f",
                            b"q",
                            cellar_client::LATEST_TIMESTAMP,
                            vec![b'x'; 100],
                        );
                        while Instant::now() < deadline {
                            if t.put(m.clone()).is_ok() {
                                acked.lock().expect("lock").insert(row.clone());
                                break;
                            }
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                })
            })
            .collect();
        Writers {
            stop,
            acked,
            handles,
        }
    }

    pub fn acked(&self) -> usize {
        self.acked.lock().expect("lock").len()
    }

    /// The rows acknowledged so far.
    pub fn acked_rows(&self) -> BTreeSet<Bytes> {
        self.acked.lock().expect("lock").clone()
    }

    /// Waits until `more` rows beyond `from` are acknowledged (at most a minute).
    pub fn wait_progress(&self, from: usize, more: usize, what: &str) {
        self.wait_progress_or(from, more, what, String::new);
    }

    /// [`Writers::wait_progress`], adding `context()` (servers' logs) to a failure.
    pub fn wait_progress_or(
        &self,
        from: usize,
        more: usize,
        what: &str,
        context: impl FnOnce() -> String,
    ) {
        let done = wait_for(Duration::from_secs(60), || {
            (self.acked() >= from + more).then_some(())
        });
        assert!(
            done.is_some(),
            "writers stalled {what}: {} acknowledged\n{}",
            self.acked(),
            context()
        );
    }

    pub fn stop(self) -> BTreeSet<Bytes> {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles {
            h.join().expect("writer thread");
        }
        let acked = self.acked.lock().expect("lock").clone();
        acked
    }
}

/// Waits until `servers` region servers are registered, creates `TABLE` split at 2, 4, 6 and 8
/// (the writers' rows spread over its five regions) and waits until every region is open;
/// their locations, or what was not reached in time.
pub fn create_spread_table(
    c: &Client,
    servers: usize,
) -> Result<Vec<cellar_client::RegionLocation>, String> {
    wait_for(Duration::from_secs(30), || {
        let s = c.admin().status().ok()?;
        (s.servers
            .iter()
            .filter(|l| !l.native_addr.is_empty())
            .count()
            >= servers)
            .then_some(())
    })
    .ok_or_else(|| format!("{servers} region servers did not register"))?;
    let splits: Vec<Bytes> = ["2", "4", "6", "8"]
        .iter()
        .map(|s| Bytes::from_static(s.as_bytes()))
        .collect();
    c.admin()
        .create_table(
            TableSchema::new(TABLE, vec![FamilySchema::new("f")]),
            splits,
        )
        .map_err(|e| format!("create {TABLE}: {e}"))?;
    wait_for(Duration::from_secs(60), || {
        let r = c.admin().list_regions(TABLE).ok()?;
        (r.len() == 5 && r.iter().all(|l| !l.server.is_empty())).then_some(r)
    })
    .ok_or_else(|| format!("the regions of {TABLE} did not all open"))
}

/// Every acknowledged writer row is in the table once, in order (rows a writer sent but did
/// not see acknowledged may or may not be there).
pub fn assert_writer_rows(c: &Client, acked: &BTreeSet<Bytes>, when: &str) {
    let mut s = c.table(TABLE).scan(Scan::new().caching(500));
    let mut seen = Vec::new();
    while let Some(r) = s.next_row().expect("scan") {
        if !is_numbered(&r.row) {
            seen.push(r.row.clone());
        }
    }
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "{when}: rows repeated or out of order"
    );
    let present: BTreeSet<Bytes> = seen.into_iter().collect();
    let missing: Vec<&Bytes> = acked.difference(&present).take(5).collect();
    assert!(
        missing.is_empty(),
        "{when}: {} acknowledged rows missing, e.g. {missing:?}",
        acked.difference(&present).count()
    );
}

/// A cluster on one machine: a real ZooKeeper, a master and region servers, all on a root on
/// local disk. Dropped in field order: region servers, master, ZooKeeper, the directory.
pub struct LocalCluster {
    pub region_servers: Vec<super::Server>,
    pub master: super::Server,
    pub zk: cellar_testing::ZooKeeper,
    _tmp: tempfile::TempDir,
}

impl LocalCluster {
    /// ZooKeeper, one master and `n` region servers, each started and listening.
    pub fn start(n: usize) -> LocalCluster {
        let zk = cellar_testing::ZooKeeper::start(200).expect("start ZooKeeper");
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = format!("file://{}", tmp.path().join("root").display());
        let args = ["--zk", zk.addr.as_str(), "--root", root.as_str()];
        let data = tmp.path().join("unused");
        let master = super::Server::start_role("master", &data, None, &args);
        let region_servers = (0..n)
            .map(|_| super::Server::start_role("regionserver", &data, None, &args))
            .collect();
        LocalCluster {
            region_servers,
            master,
            zk,
            _tmp: tmp,
        }
    }
}

/// A cluster on HDFS: a real ZooKeeper, a MiniDFS with `datanodes` DataNodes, a master and two
/// region servers whose root is on HDFS, with `TABLE` created in ten regions, every one open
/// and some on the first server. Dropped in field order: region servers, master, MiniDFS,
/// ZooKeeper, the directory.
pub struct HdfsCluster {
    pub servers: Vec<super::Server>,
    pub master: super::Server,
    pub dfs: cellar_testing::MiniDfs,
    pub zk: cellar_testing::ZooKeeper,
    _tmp: tempfile::TempDir,
}

impl HdfsCluster {
    /// Starts it; `config` is the servers' `cellar.toml` (a 2 s ZooKeeper session, splits off,
    /// and whatever else the test needs).
    pub fn start(datanodes: u32, config: &str) -> HdfsCluster {
        use cellar_server::coord::zk::{ZkCoordination, ZkOptions};
        use cellar_server::coord::Coordination;
        let zk = cellar_testing::ZooKeeper::start(200).expect("start ZooKeeper");
        let dfs = cellar_testing::MiniDfs::start(datanodes).expect("start MiniDFS");
        let root = format!("{}/cellar", dfs.url);
        let tmp = tempfile::tempdir().expect("tempdir");
        let config_path = tmp.path().join("cellar.toml");
        std::fs::write(&config_path, config).expect("write config");
        let args = ["--zk", zk.addr.as_str(), "--root", root.as_str()];
        let data = tmp.path().join("unused");
        let master = super::Server::start_role("master", &data, Some(&config_path), &args);
        let servers: Vec<super::Server> = (0..2)
            .map(|_| super::Server::start_role("regionserver", &data, Some(&config_path), &args))
            .collect();
        let zk_view = ZkCoordination::connect(ZkOptions::new(&zk.addr)).expect("read ZooKeeper");
        wait_for(Duration::from_secs(30), || {
            (zk_view.live_servers().ok()?.len() == 2).then_some(())
        })
        .expect("two region servers registered");

        let c = client(&master.native);
        let splits: Vec<Bytes> = (1..10).map(|d| Bytes::from(d.to_string())).collect();
        c.admin()
            .create_table(
                TableSchema::new(TABLE, vec![FamilySchema::new("f")]),
                splits,
            )
            .expect("create table on HDFS");
        let placed = wait_for(Duration::from_secs(30), || {
            let regions = c.admin().list_regions(TABLE).ok()?;
            regions
                .iter()
                .all(|r| !r.server.is_empty())
                .then_some(regions)
        })
        .expect("every region open");
        assert!(
            placed.iter().any(|r| r.server == servers[0].native),
            "the first server holds regions"
        );
        HdfsCluster {
            servers,
            master,
            dfs,
            zk,
            _tmp: tmp,
        }
    }
}
