//! Merges on a real cluster (ZooKeeper, a master and two region servers on a `file://` root):
//! regions on different servers are moved together and merged while writers keep writing; no
//! acknowledged row is lost, repeated or out of order; clients follow the merged regions; a
//! merged region survives the kill -9 of the server it opened on; the janitor removes the
//! parents' directories once the merged regions compacted their references away.

mod support;

use std::path::Path;
use std::time::Duration;
use support::cluster::{assert_writer_rows, client, create_spread_table, Writers, TABLE};
use support::{wait_for, Server};

fn region_dirs(root: &Path) -> usize {
    std::fs::read_dir(root.join("data/default").join(TABLE))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().parse::<u64>().is_ok())
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn regions_on_two_servers_merge_under_load_and_survive_a_kill() {
    let zk = cellar_testing::ZooKeeper::start(200).expect("start ZooKeeper");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root_dir = tmp.path().join("root");
    let root = format!("file://{}", root_dir.display());
    let config = tmp.path().join("cellar.toml");
    // A short scanner lease: the janitor waits two of them before removing a parent.
    std::fs::write(
        &config,
        "[cluster]\nzookeeper_session_timeout_ms = 3000\nbalancer_period_ms = 600000\n\
         [scanner]\nlease_ms = 1000\n[split]\nauto = false\n",
    )
    .expect("write config");
    let args = ["--zk", zk.addr.as_str(), "--root", root.as_str()];
    let data = tmp.path().join("unused");
    let master = Server::start_role("master", &data, Some(&config), &args);
    let mut servers: Vec<Server> = (0..2)
        .map(|_| Server::start_role("regionserver", &data, Some(&config), &args))
        .collect();
    let logs = |servers: &[Server]| {
        let mut out = format!("master:\n{}\n", master.output());
        for (i, s) in servers.iter().enumerate() {
            out += &format!("region server {i}:\n{}\n", s.output());
        }
        out
    };
    let c = client(&master.native);
    let open = create_spread_table(&c, 2).unwrap_or_else(|e| panic!("{e}\n{}", logs(&servers)));
    let servers_used: std::collections::BTreeSet<&str> =
        open.iter().map(|l| l.server.as_str()).collect();
    assert_eq!(servers_used.len(), 2, "regions on both servers: {open:?}");

    let writers = Writers::start(&master.native, 3);
    writers.wait_progress_or(0, 300, "before the merges", || logs(&servers));
    // [0,2) + [2,4) + [4,6) into one region, then [6,8) + [8,): at least one pair spans both
    // servers (regions alternate between them).
    let names: Vec<String> = open.iter().map(|l| l.region_id.to_string()).collect();
    let first = c
        .admin()
        .merge_regions(&[&names[0], &names[1], &names[2]], false)
        .unwrap_or_else(|e| panic!("merge three: {e}\n{}", logs(&servers)))
        .expect("the merged region");
    let second = c
        .admin()
        .merge_regions(&[&names[3], &names[4]], false)
        .unwrap_or_else(|e| panic!("merge two: {e}\n{}", logs(&servers)))
        .expect("the merged region");
    assert_eq!(
        (&first.start_key[..], &first.end_key[..]),
        (&b""[..], &b"6"[..])
    );
    assert_eq!(
        (&second.start_key[..], &second.end_key[..]),
        (&b"6"[..], &b""[..])
    );
    assert!(
        master.output().contains("region moved"),
        "a parent was moved to its neighbour's server\n{}",
        logs(&servers)
    );
    let at = writers.acked();
    writers.wait_progress_or(at, 300, "after the merges", || logs(&servers));
    let regions = c.admin().list_regions(TABLE).expect("regions");
    assert_eq!(
        regions.iter().map(|r| r.region_id).collect::<Vec<_>>(),
        vec![first.region_id, second.region_id],
        "the merged regions serve"
    );

    // Kill -9 the server the first merged region opened on: it reopens elsewhere from its
    // references (the parents' files), with every acknowledged row.
    let victim = regions[0].server.clone();
    let at = writers.acked();
    let i = servers
        .iter()
        .position(|s| s.native == victim)
        .expect("the merged region's server");
    servers[i].kill9();
    writers.wait_progress_or(at, 300, "after the kill", || logs(&servers));
    let acked = writers.stop();
    assert_writer_rows(&c, &acked, "after merges and a kill");

    // Compacted, the merged regions stop reading the parents, and the janitor removes them.
    c.admin().compact(TABLE, true).expect("major compaction");
    let cleaned = wait_for(Duration::from_secs(90), || {
        (region_dirs(&root_dir) == 2).then_some(())
    });
    assert!(
        cleaned.is_some(),
        "{} region directories left\n{}",
        region_dirs(&root_dir),
        logs(&servers)
    );
    assert_writer_rows(&c, &acked, "after the parents were removed");
    // Adjacent regions only: a merge of regions with a gap is refused.
    let err = c
        .admin()
        .merge_regions(&[&names[0], &names[4]], false)
        .expect_err("parents are gone");
    assert!(err.to_string().contains("no region"), "{err}");
    drop(servers);
}
