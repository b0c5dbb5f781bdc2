//! Replays every checked-in seed and regression input through its target on stable Rust:
//! `cargo test --manifest-path fuzz/Cargo.toml -p cellar-fuzz-common`. A regression input that
//! crashes again fails here without nightly or libFuzzer.

use cellar_fuzz_common::targets::ALL;
use std::path::Path;

fn replay(dir: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let mut n = 0;
    for (name, target) in ALL {
        let Ok(entries) = std::fs::read_dir(root.join(name)) else {
            continue;
        };
        for e in entries {
            let path = e.expect("directory entry").path();
            let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
            // Only the checked-in seeds: a local run adds thousands of inputs to the corpus.
            if dir == "corpus" && !file.is_some_and(|f| f.starts_with("seed-")) {
                continue;
            }
            let data = std::fs::read(&path).expect("readable input");
            target(&data);
            n += 1;
        }
    }
    n
}

#[test]
fn every_seed_runs_clean() {
    assert!(replay("corpus") >= ALL.len(), "every target has seeds");
}

#[test]
fn every_regression_input_runs_clean() {
    assert!(replay("regressions") > 0);
}

#[test]
fn the_seeds_are_what_the_seed_writer_writes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    for (target, name, bytes) in cellar_fuzz_common::seeds::all() {
        let path = root.join(target).join(format!("seed-{name}"));
        let on_disk = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            on_disk,
            bytes,
            "{} is stale: run make-seeds",
            path.display()
        );
    }
}
