//! Bad input is refused with an error that names the problem; nothing is written.

use cellar_model::{Error, FamilySchema, Get, RowMutation, TableSchema, LATEST_TIMESTAMP};
use cellar_storage::region::{Region, StorageConfig};

fn config() -> StorageConfig {
    StorageConfig {
        background: false,
        ..StorageConfig::default()
    }
}

fn schema() -> TableSchema {
    TableSchema::new("t", vec![FamilySchema::new("cf")])
}

#[test]
fn invalid_schema_option_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut f = FamilySchema::new("cf");
    f.min_versions = 5;
    f.max_versions = 2;
    let err = Region::open_with_config(dir.path(), TableSchema::new("t", vec![f]), config())
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("min_versions") && err.contains("cf"), "{err}");
    let err = Region::open_with_config(dir.path(), TableSchema::new("t", vec![]), config())
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("no column family"), "{err}");
}

#[test]
fn wrong_magic_or_newer_descriptor_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    Region::open_with_config(dir.path(), schema(), config())
        .expect("create")
        .close()
        .expect("close");
    let path = dir.path().join(".regioninfo");
    let good = std::fs::read(&path).expect("read");

    let mut newer = good.clone();
    newer[8..12].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&path, &newer).expect("write");
    let err = Region::open_with_config(dir.path(), schema(), config())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("version 2") && err.contains(".regioninfo"),
        "{err}"
    );

    let mut wrong = good.clone();
    wrong[..8].copy_from_slice(b"NOTCELLR");
    std::fs::write(&path, &wrong).expect("write");
    let err = Region::open_with_config(dir.path(), schema(), config())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("bad magic") && err.contains("region descriptor"),
        "{err}"
    );

    std::fs::write(&path, &good).expect("restore");
    Region::open_with_config(dir.path(), schema(), config())
        .expect("opens again")
        .close()
        .expect("close");
}

#[test]
fn store_file_with_wrong_magic_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = Region::open_with_config(dir.path(), schema(), config()).expect("open");
    r.mutate(&RowMutation::new(b"r".to_vec()).put(b"cf", b"q", 1, b"v".to_vec()))
        .expect("put");
    r.close().expect("close flushes");
    let sf = std::fs::read_dir(dir.path().join("cf"))
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "sf"))
        .expect("store file");
    let mut bytes = std::fs::read(&sf).expect("read");
    let n = bytes.len();
    for b in &mut bytes[n - 8..] {
        *b = b'Z';
    }
    std::fs::write(&sf, &bytes).expect("write");
    let err = Region::open_with_config(dir.path(), schema(), config())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains(&*sf.file_name().expect("name").to_string_lossy()),
        "{err}"
    );
}

#[test]
fn bad_mutations_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = Region::open_with_config(dir.path(), schema(), config()).expect("open");
    let err = r
        .mutate(&RowMutation::new(b"r".to_vec()).put(b"nope", b"q", 1, b"v".to_vec()))
        .expect_err("unknown family");
    assert!(
        matches!(err, Error::NoSuchFamily(_)) && err.to_string().contains("nope"),
        "{err}"
    );
    let err = r
        .mutate(&RowMutation::new(Vec::new()).put(b"cf", b"q", 1, b"v".to_vec()))
        .expect_err("empty row");
    assert!(err.to_string().contains("empty"), "{err}");
    let err = r
        .mutate(&RowMutation::new(vec![b'x'; 40_000]).put(b"cf", b"q", 1, b"v".to_vec()))
        .expect_err("long row");
    assert!(err.to_string().contains("limit"), "{err}");
    let err = r
        .mutate(&RowMutation::new(b"r".to_vec()).put(
            b"cf",
            b"q",
            LATEST_TIMESTAMP + 1,
            b"v".to_vec(),
        ))
        .expect_err("ts");
    assert!(err.to_string().contains("timestamp"), "{err}");
    let err = r
        .get(&Get::new(b"r".to_vec()).family(b"nope"))
        .expect_err("unknown family");
    assert!(err.to_string().contains("nope"), "{err}");
    assert!(
        r.get(&Get::new(b"r".to_vec())).expect("get").is_empty(),
        "nothing was written"
    );
    r.close().expect("close");
}
