//! The checks every [`RegionApi`] passes: the same answers from the storage engine's region
//! and from [`super::MemRegion`], so a fake built on the one behaves as the other. Run by
//! `cellar-model`'s tests (on `MemRegion`) and `cellar-storage`'s (on `Region`, with the
//! feature `conformance`); the checks panic on the first difference.

use super::{RegionApi, RowScanner};
use crate::cell::{Cell, CellRef, CellSink, CellType};
use crate::error::Error;
use crate::mutation::RowMutation;
use crate::query::{Get, Scan};
use crate::schema::{FamilySchema, TableSchema};
use crate::LATEST_TIMESTAMP;

/// The table the checks write: family `a` keeps 2 versions, `b` 1.
pub fn schema() -> TableSchema {
    let mut a = FamilySchema::new("a");
    a.max_versions = 2;
    TableSchema::new("conformance", vec![a, FamilySchema::new("b")])
}

/// A cell as the checks compare it: `row/family:qualifier@ts=value` (`type` for markers).
fn show(c: &Cell) -> String {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let what = match c.cell_type {
        CellType::Put => format!("={}", text(&c.value)),
        t => format!(" {t:?}"),
    };
    format!(
        "{}/{}:{}@{}{what}",
        text(&c.row),
        text(&c.family),
        text(&c.qualifier),
        c.timestamp
    )
}

/// The row of a cell [`show`] wrote.
fn row_of(shown: &str) -> String {
    shown.split('/').next().unwrap_or_default().to_string()
}

fn get<R: RegionApi>(r: &R, g: Get) -> Vec<String> {
    let cells = r
        .get(&g)
        .unwrap_or_else(|e| panic!("get of {:?}: {e}", g.row));
    cells.iter().map(show).collect()
}

fn scan<R: RegionApi>(r: &R, s: &Scan) -> Vec<Vec<String>> {
    r.scan(s)
        .unwrap_or_else(|e| panic!("scan {s:?}: {e}"))
        .map(|row| match row {
            Ok(cells) => cells.iter().map(show).collect(),
            Err(e) => panic!("scan {s:?}: {e}"),
        })
        .collect()
}

fn write<R: RegionApi>(r: &R, m: RowMutation) {
    r.mutate(&m)
        .unwrap_or_else(|e| panic!("mutation of {:?}: {e}", m.row));
}

/// Counts what a sink is given: cells, and families ended after at least one cell.
#[derive(Default)]
struct Tally {
    cells: usize,
    families: usize,
    in_family: bool,
}

impl CellSink for Tally {
    fn cell(&mut self, _: CellRef<'_>) {
        self.cells += 1;
        self.in_family = true;
    }

    fn end_family(&mut self) {
        if std::mem::take(&mut self.in_family) {
            self.families += 1;
        }
    }
}

/// Runs every check on regions `open` gives, of [`schema`]'s table, initially empty. `open`
/// is called again after [`RegionApi::close`]: it must give the same region, reopened.
pub fn check<R: RegionApi>(mut open: impl FnMut() -> R) {
    let r = open();
    writes_and_reads(&r);
    scans_in_order(&r);
    deletes(&r);
    refused(&r);
    let expected = everything(&r);
    r.flush().expect("flush");
    assert_eq!(everything(&r), expected, "after a flush");
    r.compact(true).expect("major compaction");
    assert_eq!(everything(&r), expected, "after a major compaction");
    r.close().expect("close");
    let r = open();
    assert_eq!(everything(&r), expected, "after reopening");
    write(&r, RowMutation::new("r9").put(b"b", b"x", 5, "after"));
    assert_eq!(get(&r, Get::new("r9")), ["r9/b:x@5=after"]);
    r.close().expect("close");
}

/// Every row, every version, both directions.
fn everything<R: RegionApi>(r: &R) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    (
        scan(r, &Scan::new().versions(10)),
        scan(r, &Scan::new().versions(10).reversed()),
    )
}

fn writes_and_reads<R: RegionApi>(r: &R) {
    write(
        r,
        RowMutation::new("r1")
            .put(b"b", b"x", 10, "bx")
            .put(b"a", b"q2", 10, "q2")
            .put(b"a", b"q1", 10, "v1"),
    );
    write(r, RowMutation::new("r2").put(b"a", b"q1", 10, "r2"));
    write(r, RowMutation::new("r3").put(b"b", b"x", 10, "r3"));
    assert_eq!(
        get(r, Get::new("r1")),
        ["r1/a:q1@10=v1", "r1/a:q2@10=q2", "r1/b:x@10=bx"],
        "families, then qualifiers, in order"
    );
    assert_eq!(
        get(r, Get::new("r1").column(b"a", b"q2")),
        ["r1/a:q2@10=q2"]
    );
    assert_eq!(get(r, Get::new("r1").family(b"b")), ["r1/b:x@10=bx"]);
    assert!(get(r, Get::new("nope")).is_empty());

    // Versions: the family keeps 2; a Get returns 1 unless asked; the time range applies to
    // the versions the family keeps.
    write(r, RowMutation::new("r1").put(b"a", b"q1", 20, "v2"));
    write(r, RowMutation::new("r1").put(b"a", b"q1", 30, "v3"));
    let q1 = || Get::new("r1").column(b"a", b"q1");
    assert_eq!(get(r, q1()), ["r1/a:q1@30=v3"]);
    assert_eq!(get(r, q1().versions(5)), ["r1/a:q1@30=v3", "r1/a:q1@20=v2"]);
    assert_eq!(
        get(r, q1().versions(5).time_range(0, 25)),
        ["r1/a:q1@20=v2"]
    );
    assert!(get(r, q1().versions(5).time_range(0, 15)).is_empty());
    // A put at an existing version replaces its value.
    write(r, RowMutation::new("r1").put(b"a", b"q1", 20, "v2'"));
    assert_eq!(
        get(r, q1().versions(2)),
        ["r1/a:q1@30=v3", "r1/a:q1@20=v2'"]
    );

    // A put at LATEST_TIMESTAMP takes the region's clock.
    let before = r.now_millis();
    write(
        r,
        RowMutation::new("r5").put(b"b", b"now", LATEST_TIMESTAMP, "n"),
    );
    let cells = r.get(&Get::new("r5")).expect("get r5");
    let ts = cells.first().map(|c| c.timestamp);
    assert!(
        ts.is_some_and(|ts| ts >= before && ts < LATEST_TIMESTAMP),
        "{ts:?} is not the clock's (it read {before} before the write)"
    );

    // Into a sink: cells as they lie, each family ended.
    let mut tally = Tally::default();
    r.get_into(&Get::new("r1"), &mut tally).expect("get_into");
    assert_eq!((tally.cells, tally.families), (3, 2));
}

fn scans_in_order<R: RegionApi>(r: &R) {
    let rows = |s: Scan| -> Vec<String> {
        scan(r, &s)
            .iter()
            .map(|cells| cells.first().map(|c| row_of(c)).unwrap_or_default())
            .collect()
    };
    assert_eq!(rows(Scan::new()), ["r1", "r2", "r3", "r5"]);
    assert_eq!(rows(Scan::new().range(b"r2", b"r5")), ["r2", "r3"]);
    assert_eq!(rows(Scan::new().range(b"r10", b"")), ["r2", "r3", "r5"]);
    assert_eq!(rows(Scan::new().limit(2)), ["r1", "r2"]);
    assert_eq!(rows(Scan::new().reversed()), ["r5", "r3", "r2", "r1"]);
    assert_eq!(
        rows(Scan::new().range(b"r3", b"r1").reversed()),
        ["r3", "r2"],
        "reversed: from the start row down to the stop row, exclusive"
    );
    assert_eq!(
        rows(Scan::new().family(b"a")),
        ["r1", "r2"],
        "rows without `a` are skipped"
    );
    assert_eq!(
        scan(
            r,
            &Scan::new()
                .range(b"r1", b"r2")
                .column(b"a", b"q1")
                .versions(3)
        ),
        [vec!["r1/a:q1@30=v3", "r1/a:q1@20=v2'"]]
    );

    // Row by row into a sink.
    let mut scanner = r.scan(&Scan::new()).expect("scan");
    let mut tally = Tally::default();
    let mut rows = 0;
    while scanner.next_row_into(&mut tally).expect("next row") {
        rows += 1;
    }
    assert_eq!((rows, tally.cells, tally.families), (4, 6, 5));
}

fn deletes<R: RegionApi>(r: &R) {
    // The newest version: the one before it shows.
    write(
        r,
        RowMutation::new("r1").delete_version(b"a", b"q1", LATEST_TIMESTAMP),
    );
    assert_eq!(
        get(r, Get::new("r1").column(b"a", b"q1").versions(5)),
        ["r1/a:q1@20=v2'", "r1/a:q1@10=v1"],
        "the family's two versions are counted among the puts not deleted"
    );
    // One version at its timestamp.
    write(
        r,
        RowMutation::new("r4")
            .put(b"a", b"q", 5, "five")
            .put(b"a", b"q", 6, "six"),
    );
    write(r, RowMutation::new("r4").delete_version(b"a", b"q", 6));
    assert_eq!(get(r, Get::new("r4").versions(5)), ["r4/a:q@5=five"]);
    // A column at or before a timestamp; a put older than a delete stays hidden.
    write(r, RowMutation::new("r1").delete_column(b"a", b"q2", 10));
    write(r, RowMutation::new("r1").put(b"a", b"q2", 9, "older"));
    assert_eq!(get(r, Get::new("r1").family(b"a")), ["r1/a:q1@20=v2'"]);
    write(r, RowMutation::new("r1").put(b"a", b"q2", 11, "newer"));
    assert_eq!(
        get(r, Get::new("r1").family(b"a")),
        ["r1/a:q1@20=v2'", "r1/a:q2@11=newer"]
    );
    // A family: the row is gone from scans once nothing is left.
    write(
        r,
        RowMutation::new("r3").delete_family(b"b", LATEST_TIMESTAMP),
    );
    assert!(get(r, Get::new("r3")).is_empty());
    // A family version: only puts at exactly that timestamp.
    write(
        r,
        RowMutation::new("r6")
            .put(b"a", b"x", 7, "x7")
            .put(b"a", b"y", 7, "y7")
            .put(b"a", b"y", 8, "y8"),
    );
    write(r, RowMutation::new("r6").delete_family_version(b"a", 7));
    assert_eq!(get(r, Get::new("r6").versions(5)), ["r6/a:y@8=y8"]);
    // Raw: the markers too.
    let raw = scan(r, &Scan::new().range(b"r4", b"r5").versions(5).raw());
    assert_eq!(
        raw,
        [vec!["r4/a:q@6 Delete", "r4/a:q@6=six", "r4/a:q@5=five"]]
    );

    let rows: Vec<String> = scan(r, &Scan::new())
        .iter()
        .filter_map(|cells| cells.first().map(|c| row_of(c)))
        .collect();
    assert_eq!(rows, ["r1", "r2", "r4", "r5", "r6"]);
}

fn refused<R: RegionApi>(r: &R) {
    let e = r
        .mutate(&RowMutation::new("r1").put(b"zz", b"q", 1, "v"))
        .expect_err("an unknown family");
    assert!(matches!(e, Error::NoSuchFamily(_)), "{e}");
    let e = r
        .get(&Get::new("r1").family(b"zz"))
        .expect_err("unknown family");
    assert!(matches!(e, Error::NoSuchFamily(_)), "{e}");
    assert!(
        r.scan(&Scan::new().family(b"zz")).is_err(),
        "unknown family"
    );
    let e = r.mutate(&RowMutation::new("r1")).expect_err("no cells");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let e = r
        .mutate(&RowMutation::new("").put(b"a", b"q", 1, "v"))
        .expect_err("an empty row");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}
