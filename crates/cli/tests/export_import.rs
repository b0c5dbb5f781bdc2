//! `cellar export` and `cellar import` between two real `cellar standalone` processes: a table
//! with several regions, families, versions, binary keys and a cell larger than a block
//! travels whole (schema, region boundaries, every version with its timestamp); a damaged or
//! cut file, an existing table or an existing output file are refused with a clear error and
//! nothing half-done left behind.

mod support;

use bytes::Bytes;
use cellar_client::{Cell, FamilySchema, RowMutation, Scan, TableSchema};
use std::path::Path;
use std::process::Command;
use support::{connect_blocking, Server};

fn cellar(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(args)
        .output()
        .expect("run cellar");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn all_cells(native: &str, table: &str) -> Vec<Cell> {
    let c = connect_blocking(native);
    c.table(table)
        .scan(Scan::new().versions(10))
        .flat_map(|r| r.expect("scan").cells)
        .map(|mut c| {
            c.seq_id = 0;
            c
        })
        .collect()
}

fn load(native: &str) -> usize {
    let c = connect_blocking(native);
    let mut f = FamilySchema::new("f");
    f.max_versions = 3;
    c.admin()
        .create_table(
            TableSchema::new("events", vec![f, FamilySchema::new("g")]),
            vec![Bytes::from_static(b"m"), Bytes::from_static(b"\x80")],
        )
        .expect("create");
    let t = c.table("events");
    let mut batch = Vec::new();
    for i in 0..3000u32 {
        // Keys below and above 0x80 and text keys: all three regions.
        let row = match i % 3 {
            0 => Bytes::from(format!("a{i:05}")),
            1 => Bytes::from([&[0xf0u8, 0x00][..], &i.to_be_bytes()].concat()),
            _ => Bytes::from(format!("q{i:05}")),
        };
        let mut m = RowMutation::new(row);
        for ts in 1..=4u64 {
            m = m.put(b"f", b"v", ts * 1000, format!("{i}@{ts}").into_bytes());
        }
        m = m.put(b"g", b"", 42, vec![i as u8; 300]);
        batch.push(m);
        if batch.len() == 500 {
            t.put_all(std::mem::take(&mut batch)).expect("put");
        }
    }
    t.put_all(batch).expect("put");
    // A cell of 3 MiB: larger than an export block.
    t.put(RowMutation::new(Bytes::from_static(b"big")).put(b"g", b"blob", 7, vec![b'z'; 3 << 20]))
        .expect("put big");
    // Deleted data is not exported.
    t.put(
        RowMutation::new(Bytes::from_static(b"a00000"))
            .delete_family(b"f", cellar_client::LATEST_TIMESTAMP)
            .delete_family(b"g", cellar_client::LATEST_TIMESTAMP),
    )
    .expect("delete");
    c.admin().flush("events").expect("flush");
    // f keeps 3 versions: 3000 rows × (3 + 1) cells + the big one − the deleted row's 4.
    3000 * 4 + 1 - 4
}

#[test]
fn a_table_travels_whole_and_bad_files_are_refused() {
    let a = Server::start();
    let b = Server::start();
    let cells = load(&a.native);
    let tmp = tempfile::tempdir().expect("tmp");
    let file = tmp.path().join("events.cellar-export");
    let f = file.to_str().expect("utf-8 path");

    let (ok, out, err) = cellar(&[
        "export",
        "--connect",
        &a.native,
        "--table",
        "events",
        "--out",
        f,
    ]);
    assert!(ok, "export: {out}\n{err}");
    assert!(
        out.contains(&format!("{cells} cells")) && out.contains("3 regions"),
        "{out}"
    );
    assert!(!Path::new(&format!("{f}.partial")).exists());
    let (ok, _, err) = cellar(&[
        "export",
        "--connect",
        &a.native,
        "--table",
        "events",
        "--out",
        f,
    ]);
    assert!(!ok && err.contains("already exists"), "{err}");

    let (ok, out, err) = cellar(&["import", "--connect", &b.native, "--in", f]);
    assert!(ok, "import: {out}\n{err}");
    assert!(
        out.contains(&format!("{cells} cells into table events")),
        "{out}"
    );
    let (src, dst) = (
        all_cells(&a.native, "events"),
        all_cells(&b.native, "events"),
    );
    assert_eq!(src.len(), cells);
    assert!(src == dst, "every cell, version and timestamp arrives");
    let info = connect_blocking(&b.native)
        .admin()
        .describe_table("events")
        .expect("describe");
    assert_eq!(info.schema.families.len(), 2);
    assert_eq!(info.schema.families[0].max_versions, 3);
    let mut starts: Vec<Bytes> = info.regions.iter().map(|r| r.start_key.clone()).collect();
    starts.sort();
    assert_eq!(starts, [&b""[..], b"m", b"\x80"]);

    // The same file again: the table exists.
    let (ok, _, err) = cellar(&["import", "--connect", &b.native, "--in", f]);
    assert!(!ok && err.contains("already exists"), "{err}");
    // Into the existing table on purpose: the same cells (puts are idempotent).
    let (ok, out, err) = cellar(&[
        "import",
        "--connect",
        &b.native,
        "--in",
        f,
        "--into-existing",
    ]);
    assert!(ok, "{out}\n{err}");
    assert_eq!(all_cells(&b.native, "events").len(), cells);

    // A damaged copy and a cut copy: refused before any table is made.
    let bytes = std::fs::read(&file).expect("read export");
    let damaged = tmp.path().join("damaged");
    let mut d = bytes.clone();
    let mid = d.len() / 2;
    d[mid] ^= 0x20;
    std::fs::write(&damaged, &d).expect("write");
    let cut = tmp.path().join("cut");
    std::fs::write(&cut, &bytes[..bytes.len() - 30]).expect("write");
    for (path, why) in [(&damaged, "checksum"), (&cut, "cut short")] {
        let p = path.to_str().expect("utf-8");
        let (ok, _, err) = cellar(&[
            "import",
            "--connect",
            &b.native,
            "--in",
            p,
            "--table",
            "copy",
        ]);
        assert!(!ok, "{p} was imported");
        assert!(
            err.contains(why) && err.contains("nothing was imported"),
            "{err}"
        );
        let exists = connect_blocking(&b.native)
            .admin()
            .table_exists("copy")
            .expect("exists");
        assert!(!exists, "no table is left from a refused import");
    }
    // A READONLY table's export comes back READONLY, with its cells.
    let ca = connect_blocking(&a.native);
    let mut options = ca
        .admin()
        .describe_table("events")
        .expect("describe")
        .schema
        .options;
    options.read_only = true;
    ca.admin()
        .alter_table_with("events", vec![], vec![], Some(options))
        .expect("make read-only");
    let ro_file = format!("{f}.ro");
    let (ok, out, err) = cellar(&[
        "export",
        "--connect",
        &a.native,
        "--table",
        "events",
        "--out",
        &ro_file,
    ]);
    assert!(ok, "{out}\n{err}");
    let (ok, out, err) = cellar(&[
        "import",
        "--connect",
        &b.native,
        "--in",
        &ro_file,
        "--table",
        "ro",
    ]);
    assert!(ok, "{out}\n{err}");
    assert_eq!(all_cells(&b.native, "ro").len(), cells);
    let cb = connect_blocking(&b.native);
    assert!(
        cb.admin()
            .describe_table("ro")
            .expect("describe")
            .schema
            .options
            .read_only
    );
    let refused = cb
        .table("ro")
        .put(RowMutation::new(Bytes::from_static(b"x")).put(b"f", b"v", 1, b"v".to_vec()));
    assert!(refused.is_err(), "the copy is read-only");

    let (ok, _, err) = cellar(&["import", "--connect", &b.native, "--in", "/nonexistent/x"]);
    assert!(!ok && err.contains("cannot open /nonexistent/x"), "{err}");
    let (ok, _, err) = cellar(&[
        "export",
        "--connect",
        &a.native,
        "--table",
        "nope",
        "--out",
        &format!("{f}.2"),
    ]);
    assert!(!ok && err.contains("nope"), "{err}");
    assert!(
        !Path::new(&format!("{f}.2")).exists() && !Path::new(&format!("{f}.2.partial")).exists()
    );
}

/// The stopped-server backup `docs/operations.md` describes: SIGTERM, copy the data
/// directory, start a server on the copy; it serves everything.
#[test]
fn a_copy_of_a_stopped_servers_data_directory_serves_everything() {
    let mut a = Server::start();
    let cells = load(&a.native);
    let before = all_cells(&a.native, "events");
    assert_eq!(before.len(), cells);
    assert!(a.terminate().success(), "clean stop:\n{}", a.output());
    let tmp = tempfile::tempdir().expect("tmp");
    let copy = tmp.path().join("copy");
    let ok = Command::new("cp")
        .arg("-a")
        .arg(&a.data_dir)
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(ok.success());
    drop(a);
    let b = Server::start_in(&copy, None);
    assert!(
        all_cells(&b.native, "events") == before,
        "the copy serves every cell"
    );
}
