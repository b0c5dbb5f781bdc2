//! `scripts/cluster.sh` as the README runs it: `up 1`, a row written, `down`, `up 1` again in
//! the same directory brings the same cluster back (ZooKeeper's data and MiniDFS's together)
//! with the row; `up --fresh` starts an empty one. Real ZooKeeper, MiniDFS and `cellar`
//! processes, all stopped by `down` (by PID), and by the guard if the test fails midway.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cluster(dir: &Path, args: &[&str]) -> Output {
    Command::new(repo().join("scripts/cluster.sh"))
        .args(args)
        .env("CLUSTER_DIR", dir)
        .env("CELLAR_BIN", env!("CARGO_BIN_EXE_cellar"))
        .output()
        .expect("run scripts/cluster.sh")
}

/// `up`, returning the master's native address from its `master1 listening native=` line.
fn up(dir: &Path, args: &[&str]) -> String {
    let out = cluster(dir, &[&["up"], args].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cluster.sh up failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("master1 listening native="))
        .unwrap_or_else(|| panic!("no master address in:\n{stdout}"))
        .to_string()
}

fn shell(master: &str, script: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["shell", "--connect", master, "-e", script])
        .output()
        .expect("run cellar shell")
}

/// Brings the cluster down whatever happens to the test.
struct Down<'a>(&'a Path);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = cluster(self.0, &["down"]);
    }
}

#[test]
fn up_after_down_brings_the_same_cluster_back_and_fresh_starts_an_empty_one() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("cellar-cluster");
    let _down = Down(&dir);

    let master = up(&dir, &["1"]);
    let out = shell(&master, "create 'kept', 'f'; put 'kept', 'r1', 'f:q', 'v1'");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(cluster(&dir, &["down"]).status.success());

    // The README's second try: the same directory, the same cluster, its row.
    let master = up(&dir, &["1"]);
    let out = shell(&master, "get 'kept', 'r1'");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("value=v1"),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(cluster(&dir, &["down"]).status.success());

    let master = up(&dir, &["1", "--fresh"]);
    let out = shell(&master, "list");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("kept"), "a fresh cluster lists: {stdout}");
}
