//! Corruption reaches the user as a checksum or corruption error naming the file, never as
//! wrong data; a torn WAL tail is cut off and the region opens.

use cellar_model::{Durability, FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::region::{Region, StorageConfig};
use std::path::{Path, PathBuf};

fn schema() -> TableSchema {
    let mut f = FamilySchema::new("cf");
    f.block_size = 1024;
    f.bloom = cellar_model::BloomType::None; // reads must reach the data blocks
    TableSchema::new("corrupt", vec![f])
}

fn config() -> StorageConfig {
    StorageConfig {
        background: false,
        block_cache_bytes: 0,
        ..StorageConfig::default()
    }
}

fn fill(dir: &Path, n: u32, flush: bool) {
    let r = Region::open_with_config(dir, schema(), config()).expect("open");
    for i in 0..n {
        let k = format!("row{i:05}");
        r.mutate(
            &RowMutation::new(k.into_bytes())
                .put(b"cf", b"q", 7, vec![b'x'; 100])
                .with_durability(Durability::SyncWal),
        )
        .expect("put");
    }
    if flush {
        r.flush().expect("flush");
        r.close().expect("close");
    } else {
        drop(r); // leave the data in the WAL only
    }
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in walk(dir) {
        if e.extension().is_some_and(|x| x == ext) {
            out.push(e);
        }
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The WAL segment holding the writes (the largest: later ones are empty).
fn wal_segment_with_data(region_dir: &Path) -> PathBuf {
    files_with_ext(&region_dir.join("wal"), "log")
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a segment")
}

/// Reads everything; returns the first error's message.
fn read_all(dir: &Path, n: u32) -> Result<(), String> {
    let r = Region::open_with_config(dir, schema(), config()).map_err(|e| e.to_string())?;
    for row in r.scan(&Scan::new()).map_err(|e| e.to_string())? {
        let row = row.map_err(|e| e.to_string())?;
        assert_eq!(
            row[0].value,
            vec![b'x'; 100],
            "wrong data returned instead of an error"
        );
    }
    for i in 0..n {
        let cells = r
            .get(&Get::new(format!("row{i:05}").into_bytes()))
            .map_err(|e| e.to_string())?;
        assert!(
            cells.iter().all(|c| c.value == vec![b'x'; 100]),
            "wrong data returned"
        );
    }
    Ok(())
}

#[test]
fn flipped_byte_in_a_store_file_is_a_checksum_error_naming_the_file() {
    for offset_frac in [0.1, 0.5, 0.9, 0.999] {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(dir.path(), 500, true);
        let sf = files_with_ext(dir.path(), "sf");
        assert_eq!(sf.len(), 1);
        let mut bytes = std::fs::read(&sf[0]).expect("read sf");
        let at = ((bytes.len() as f64) * offset_frac) as usize;
        bytes[at] ^= 0x5a;
        std::fs::write(&sf[0], &bytes).expect("write sf");
        let err = read_all(dir.path(), 500).expect_err("corruption must be detected");
        let name = sf[0]
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(err.contains(&name), "error names the file: {err}");
        assert!(
            err.contains("checksum") || err.contains("corrupt"),
            "error says what: {err}"
        );
    }
}

#[test]
fn truncated_store_file_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(dir.path(), 300, true);
    let sf = &files_with_ext(dir.path(), "sf")[0];
    let len = std::fs::metadata(sf).expect("meta").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(sf)
        .expect("open")
        .set_len(len / 2)
        .expect("truncate");
    let err = read_all(dir.path(), 300).expect_err("truncation must be detected");
    assert!(
        err.contains(&*sf.file_name().expect("name").to_string_lossy()),
        "{err}"
    );
}

#[test]
fn corrupt_wal_record_before_the_tail_is_an_error_naming_the_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(dir.path(), 200, false);
    let seg = &wal_segment_with_data(dir.path());
    let mut bytes = std::fs::read(seg).expect("read");
    let at = bytes.len() / 3;
    bytes[at] ^= 0xff;
    std::fs::write(seg, &bytes).expect("write");
    let err = Region::open_with_config(dir.path(), schema(), config())
        .err()
        .expect("open must fail")
        .to_string();
    assert!(
        err.contains(&*seg.file_name().expect("name").to_string_lossy()),
        "{err}"
    );
}

#[test]
fn torn_wal_tail_is_truncated_and_earlier_writes_survive() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(dir.path(), 200, false);
    let seg = &wal_segment_with_data(dir.path());
    let len = std::fs::metadata(seg).expect("meta").len();
    // Cut into the last record.
    std::fs::OpenOptions::new()
        .write(true)
        .open(seg)
        .expect("open")
        .set_len(len - 7)
        .expect("truncate");
    let r =
        Region::open_with_config(dir.path(), schema(), config()).expect("a torn tail is not fatal");
    let rows = r.scan(&Scan::new()).expect("scan").count();
    assert_eq!(rows, 199, "all but the torn last write are back");
    r.close().expect("close");
}
