//! HFiles written by Apache HBase 2.6.4's own store file writer (`scripts/hfile-fixtures.sh`),
//! one per data block encoding and compression, read here and compared cell for cell with what
//! HBase's own reader read back from them (`cells.txt`). The committed set is in
//! `tests/fixtures`; `CELLAR_HFILE_FIXTURES` points at another (scripts/test.sh writes a fresh
//! one, and one with a 6 MiB cell, with the HBase of the day).

use cellar_hfile::{Error, HFile};
use std::path::{Path, PathBuf};

fn fixtures() -> Vec<PathBuf> {
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")];
    if let Ok(more) = std::env::var("CELLAR_HFILE_FIXTURES") {
        dirs.extend(more.split(':').filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    dirs
}

fn hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "-".into();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A cell as `HFileFixtures.line` prints it.
fn line(c: &cellar_hfile::Cell) -> String {
    let value = if c.value.len() <= 64 {
        hex(&c.value)
    } else {
        format!("len{}:crc{:x}", c.value.len(), crc32fast::hash(&c.value))
    };
    format!(
        "{} {} {} {} {} {} {} {}",
        hex(&c.row),
        hex(&c.family),
        hex(&c.qualifier),
        c.timestamp,
        c.kind,
        value,
        hex(&c.tags),
        c.sequence_id
    )
}

fn read_all(path: &Path) -> Result<Vec<String>, Error> {
    let file = HFile::open(path)?;
    file.cells().map(|c| c.map(|c| line(&c))).collect()
}

#[test]
fn every_encoding_and_compression_reads_as_hbase_reads_it() {
    let mut files = 0;
    for dir in fixtures() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        let expected: Vec<String> = std::fs::read_to_string(dir.join("cells.txt"))
            .unwrap_or_else(|e| panic!("{}/cells.txt: {e}", dir.display()))
            .lines()
            .map(str::to_string)
            .collect();
        for path in paths
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "hfile"))
        {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let got = read_all(path).unwrap_or_else(|e| panic!("{e}"));
            if name == "empty.hfile" {
                assert!(got.is_empty(), "{name}: {} cells", got.len());
            } else {
                assert_eq!(got.len(), expected.len(), "{name}: cell count");
                for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
                    assert_eq!(g, e, "{name}: cell {i}");
                }
            }
            files += 1;
        }
    }
    assert!(files >= 15, "only {files} fixture files found");
}

#[test]
fn what_each_file_says_about_itself() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let f = HFile::open(dir.join("fast_diff-zstd.hfile")).expect("open");
    assert_eq!((f.trailer.major, f.trailer.minor), (3, 3));
    assert_eq!(f.trailer.codec.name(), "ZSTD");
    assert_eq!(f.encoding(), "FAST_DIFF");
    assert!(f.format().includes_tags && f.format().compress_tags && f.format().includes_mvcc);
    assert!(
        f.trailer.data_index_levels >= 2,
        "a multi-level index: {:?}",
        f.trailer
    );
    assert_eq!(f.info.string(b"BLOOM_FILTER_TYPE").as_deref(), Some("ROW"));
    let plain = HFile::open(dir.join("diff-none-plaintags.hfile")).expect("open");
    assert!(plain.format().includes_tags && !plain.format().compress_tags);
}

/// Copies a fixture to a temporary file with `damage` applied.
fn damaged(name: &str, damage: impl FnOnce(&mut Vec<u8>)) -> (tempfile::TempDir, PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let mut bytes = std::fs::read(&src).expect("fixture");
    damage(&mut bytes);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write");
    (dir, path)
}

#[test]
fn a_damaged_file_is_an_error_naming_it_and_where() {
    // A flipped byte inside the first data block: its checksum no longer matches.
    let (_d, path) = damaged("fast_diff-gz.hfile", |b| b[100] ^= 0x40);
    let err = read_all(&path).expect_err("damaged");
    let msg = err.to_string();
    assert!(
        msg.contains("fast_diff-gz.hfile")
            && msg.contains("offset 0")
            && msg.contains("checksum mismatch"),
        "{msg}"
    );

    // Cut short: the trailer is gone.
    let (_d, path) = damaged("none-none.hfile", |b| b.truncate(b.len() - 1000));
    let msg = HFile::open(&path).expect_err("truncated").to_string();
    assert!(msg.contains("none-none.hfile"), "{msg}");

    // Not an HFile at all.
    let (_d, path) = damaged("none-none.hfile", |b| {
        b.clear();
        b.extend_from_slice(b"this is a text file, not a store file\n");
    });
    let msg = HFile::open(&path).expect_err("text").to_string();
    assert!(msg.contains("not an HFile"), "{msg}");

    // A block whose length field lies: refused before anything that large is allocated.
    let (_d, path) = damaged("none-none.hfile", |b| {
        b[8..12].copy_from_slice(&0x7fff_fff0u32.to_be_bytes())
    });
    let msg = read_all(&path).expect_err("huge").to_string();
    assert!(msg.contains("offset 0"), "{msg}");
}
