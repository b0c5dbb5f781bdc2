//! Leveled compaction (`region/levels.rs`): overwrites settle into levels of disjoint files
//! whose space stays near the live data, sequential writes move down without being rewritten,
//! minor merges drop overwritten versions only when no file outside holds delete markers, and
//! a crash part way through a multi-file compaction is finished on open.

use cellar_model::{FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::region::{Compacted, CompactionStyle, Region, StorageConfig, StoreFileInfo};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn config(style: CompactionStyle) -> StorageConfig {
    StorageConfig {
        background: false,
        compaction_style: style,
        compaction_min_files: 3,
        // Small levels and files, so a few hundred KiB use several of each.
        level_base_bytes: 32 * 1024,
        level_fanout: 4,
        compaction_file_bytes: 16 * 1024,
        compaction_max_space_amp: 0.0,
        ..StorageConfig::default()
    }
}

fn open(dir: &Path, style: CompactionStyle) -> Region {
    let mut f = FamilySchema::new("cf");
    f.block_size = 1024;
    Region::open_with_config(dir, TableSchema::new("t", vec![f]), config(style)).expect("open")
}

fn row(i: u32) -> Vec<u8> {
    format!("r{i:06}").into_bytes()
}

fn put(region: &Region, i: u32, ts: u64, value: &[u8]) {
    let m = RowMutation::new(row(i)).put(b"cf", b"q", ts, value.to_vec());
    region.mutate(&m).expect("put");
}

/// Runs compactions until the store wants none (bounded); returns what they did.
fn settle(region: &Region) -> Vec<Compacted> {
    let mut done = Vec::new();
    for _ in 0..200 {
        match region.compact_stores(false).expect("compact").as_slice() {
            [Compacted::Nothing] => return done,
            [c] => done.push(*c),
            other => panic!("one store, got {other:?}"),
        }
    }
    panic!("compaction did not settle: {done:?}");
}

/// A file's first and last row.
type Rows = (Vec<u8>, Vec<u8>);

/// Every level below 0 holds files with disjoint, increasing row ranges.
fn assert_levels_disjoint(files: &[StoreFileInfo]) {
    let mut by_level: BTreeMap<u8, Vec<Rows>> = BTreeMap::new();
    for f in files.iter().filter(|f| f.level > 0) {
        let rows = f.rows.clone().expect("a file below level 0 has rows");
        by_level.entry(f.level).or_default().push(rows);
    }
    for (level, mut ranges) in by_level {
        ranges.sort();
        for w in ranges.windows(2) {
            assert!(
                w[0].1 < w[1].0,
                "level {level}: {:?} overlaps {:?}",
                w[0],
                w[1]
            );
        }
    }
}

fn value(region: &Region, i: u32) -> Option<Vec<u8>> {
    let cells = region.get(&Get::new(row(i))).expect("get");
    cells.first().map(|c| c.value.to_vec())
}

#[test]
fn overwrites_settle_into_disjoint_levels_near_the_live_size() {
    const ROWS: u32 = 4000;
    let dir = tempfile::tempdir().expect("tempdir");
    let region = open(dir.path(), CompactionStyle::Leveled);
    let mut model: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    // Rounds of overwrites in a scattered order, one write in 50 a row delete, a flush each:
    // every flush overlaps every level.
    let mut x: u32 = 12345;
    let mut ts = 0u64;
    for round in 0..24u32 {
        for _ in 0..ROWS / 2 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let i = (x >> 8) % ROWS;
            ts += 1;
            if x.is_multiple_of(50) {
                let m = RowMutation::new(row(i)).delete_family(b"cf", ts);
                region.mutate(&m).expect("delete");
                model.remove(&i);
                continue;
            }
            let v = format!("{round:04}-{i:06}-{}", "v".repeat(80)).into_bytes();
            put(&region, i, ts, &v);
            model.insert(i, v);
        }
        region.flush().expect("flush");
        settle(&region);
        assert_levels_disjoint(&region.store_files("cf"));
    }
    // With no reader holding a replaced file, no compaction marker is left behind.
    let markers = sf_names(&store_dir(dir.path()))
        .into_iter()
        .filter(|n| n.ends_with(".compaction"))
        .count();
    assert_eq!(markers, 0);
    let files = region.store_files("cf");
    let levels: std::collections::BTreeSet<u8> = files.iter().map(|f| f.level).collect();
    assert!(
        levels.iter().filter(|&&l| l > 0).count() >= 2,
        "two levels below 0 at least: {files:?}"
    );
    // Reads see the newest value of every row (none for a deleted one), Gets and a scan
    // alike.
    for i in 0..ROWS {
        assert_eq!(value(&region, i).as_ref(), model.get(&i), "row {i}");
    }
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = region
        .scan(&Scan::default())
        .expect("scan")
        .map(|r| {
            let c = r.expect("row").into_iter().next().expect("a cell");
            (c.row.to_vec(), c.value.to_vec())
        })
        .collect();
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().map(|(&i, v)| (row(i), v.clone())).collect();
    assert_eq!(scanned, expected);
    // The space the levels take is close to one copy of the live data: a major compaction
    // (one version of every row) frees little.
    let before = region.stats().store_file_bytes;
    region.compact(true).expect("major");
    let live = region.stats().store_file_bytes;
    assert!(
        before * 10 <= live * 14,
        "levels hold {before} bytes for {live} live"
    );
    assert_levels_disjoint(&region.store_files("cf"));
    for i in (0..ROWS).step_by(7) {
        assert_eq!(
            value(&region, i).as_ref(),
            model.get(&i),
            "row {i} after major"
        );
    }
    region.close().expect("close");
    // Levels are in the files: the same layout after a reopen.
    let region = open(dir.path(), CompactionStyle::Leveled);
    let again = region.store_files("cf");
    assert!(again.iter().all(|f| f.level == 6), "{again:?}");
    region.close().expect("close");
}

#[test]
fn sequential_writes_move_down_without_being_rewritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = open(dir.path(), CompactionStyle::Leveled);
    for file in 0..9u32 {
        for i in file * 300..(file + 1) * 300 {
            put(&region, i, 1, &[b'a'; 100]);
        }
        region.flush().expect("flush");
        let done = settle(&region);
        assert!(
            done.iter().all(|c| *c == Compacted::Moved),
            "file {file}: {done:?}"
        );
    }
    let s = region.stats();
    assert_eq!(
        (s.compactions, s.bytes_compacted, s.store_files),
        (0, 0, 9),
        "{s:?}"
    );
    let files = region.store_files("cf");
    assert!(files.iter().all(|f| f.level > 0), "{files:?}");
    assert_levels_disjoint(&files);
    assert_eq!(value(&region, 0), Some(vec![b'a'; 100]));
    assert_eq!(value(&region, 2699), Some(vec![b'a'; 100]));
    region.close().expect("close");
}

#[test]
fn a_minor_merge_keeps_old_versions_where_a_file_outside_may_delete_one_version() {
    // The ratio rule leaves the big file out: three small files are merged.
    for with_marker in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let region = open(dir.path(), CompactionStyle::Tiered);
        // The big file: many rows around the small files' (so it is a run of its own), and (in
        // the second pass) a `Delete` of version 2 of row 5.
        for i in (0..3000).filter(|i| !(5..=7).contains(i)) {
            put(&region, i, 1, &[b'x'; 100]);
        }
        if with_marker {
            let m = RowMutation::new(row(5)).delete_version(b"cf", b"q", 2);
            region.mutate(&m).expect("delete a version");
        }
        // A row delete and a column delete elsewhere uncover nothing: they do not keep the
        // merge from dropping versions.
        let m = RowMutation::new(row(2000)).delete_family(b"cf", 1);
        region.mutate(&m).expect("delete a row");
        let m = RowMutation::new(row(2001)).delete_column(b"cf", b"q", 1);
        region.mutate(&m).expect("delete a column");
        region.flush().expect("flush");
        // Three small files, overlapping in row 7: row 5 at version 1, then version 2, then
        // row 6.
        for (i, ts, v) in [(5, 1, &b"one"[..]), (5, 2, b"two"), (6, 1, b"six")] {
            put(&region, i, ts, v);
            put(&region, 7, 1, v);
            region.flush().expect("flush");
        }
        let before = value(&region, 5);
        assert_eq!(
            region.compact_stores(false).expect("compact"),
            vec![Compacted::Minor]
        );
        assert_eq!(region.stats().store_files, 2);
        // Same answer after the merge: the version the marker outside uncovers is kept; with
        // no such marker, version 1 is gone from the file (the family keeps one version).
        assert_eq!(value(&region, 5), before);
        let expected: &[u8] = if with_marker { b"one" } else { b"two" };
        assert_eq!(before.as_deref(), Some(expected));
        let merged = region
            .store_files("cf")
            .into_iter()
            .max_by_key(|f| f.number)
            .expect("the merged file");
        // Row 5 keeps both versions where the marker may reach it; row 7 (no marker outside
        // can hold it) loses its two older writes either way.
        assert_eq!(merged.cells, if with_marker { 4 } else { 3 }, "{merged:?}");
        assert_eq!(value(&region, 7), Some(b"six".to_vec()));
        region.close().expect("close");
    }
}

/// The store directory of the region's one family.
fn store_dir(region_dir: &Path) -> PathBuf {
    for entry in std::fs::read_dir(region_dir).expect("region dir").flatten() {
        let p = entry.path();
        let has_files = p.is_dir()
            && std::fs::read_dir(&p)
                .map(|d| {
                    d.flatten()
                        .any(|e| e.path().extension().is_some_and(|x| x == "sf"))
                })
                .unwrap_or(false);
        if has_files {
            return p;
        }
    }
    panic!(
        "no store directory with store files in {}",
        region_dir.display()
    );
}

fn sf_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A compaction of the two files into outputs `a0` and `a1` (copies of the inputs: the same
/// cells), interrupted after its marker was written (every output complete under its `.tmp`
/// name) and `renamed` of its outputs were renamed into place: the next open finishes it.
#[test]
fn a_crash_inside_a_multi_file_compaction_is_finished_on_open() {
    for renamed in [0usize, 1, 2] {
        let dir = tempfile::tempdir().expect("tempdir");
        let region = open(dir.path(), CompactionStyle::Leveled);
        for (file, tag) in [(0u32, b'a'), (1, b'b')] {
            for i in file * 100..(file + 1) * 100 {
                put(&region, i, 1, &[tag; 10]);
            }
            region.flush().expect("flush");
        }
        region.close().expect("close");
        let store = store_dir(dir.path());
        let inputs: Vec<String> = sf_names(&store)
            .into_iter()
            .filter(|n| n.ends_with(".sf"))
            .collect();
        assert_eq!(inputs.len(), 2, "{inputs:?}");
        let outputs = ["00000000000000a0.sf", "00000000000000a1.sf"];
        for (i, (input, output)) in inputs.iter().zip(outputs).enumerate() {
            let name = if i < renamed {
                output.to_string()
            } else {
                format!("{output}.tmp")
            };
            std::fs::copy(store.join(input), store.join(name)).expect("copy");
        }
        let body = format!(
            "cellar-compaction v2\nin {}\nin {}\nout {}\nout {}",
            inputs[0], inputs[1], outputs[0], outputs[1]
        );
        let text = format!("{body}\ncrc={:08x}\n", crc32c::crc32c(body.as_bytes()));
        std::fs::write(store.join("00000000000000a0.compaction"), text).expect("marker");

        let region = open(dir.path(), CompactionStyle::Leveled);
        assert_eq!(
            sf_names(&store),
            outputs.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "{renamed} of 2 outputs renamed before the crash"
        );
        assert_eq!(value(&region, 5), Some(vec![b'a'; 10]));
        assert_eq!(value(&region, 150), Some(vec![b'b'; 10]));
        assert_eq!(region.stats().store_files, 2);
        region.close().expect("close");
    }
}

/// Without a marker, outputs under `.tmp` names are a compaction that never committed: they
/// go, the inputs stay.
#[test]
fn outputs_without_a_marker_are_forgotten_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = open(dir.path(), CompactionStyle::Leveled);
    for i in 0..100 {
        put(&region, i, 1, b"v");
    }
    region.flush().expect("flush");
    region.close().expect("close");
    let store = store_dir(dir.path());
    let input = sf_names(&store).pop().expect("a store file");
    std::fs::copy(store.join(&input), store.join("00000000000000a0.sf.tmp")).expect("copy");
    let region = open(dir.path(), CompactionStyle::Leveled);
    assert_eq!(sf_names(&store), vec![input]);
    assert_eq!(value(&region, 7), Some(b"v".to_vec()));
    region.close().expect("close");
}
