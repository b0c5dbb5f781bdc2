//! The comparison itself: two ordered streams of rows merged by key and cut into ranges of
//! about `rows_per_range` rows. Each side of a range gets a row and cell count and a
//! SHA-256 over its cells (row, family, qualifier, timestamp, type, value, each
//! length-prefixed), so equal ranges have equal digests; rows that differ are named, the
//! first `show` of each range with what differs.

use super::cluster::{printable, Row};
use bytes::Bytes;
use cellar_model::Cell;
use ring::digest::{Context, SHA256};

/// One side of a range.
pub struct Side {
    pub rows: u64,
    pub cells: u64,
    digest: Context,
}

impl Side {
    fn new() -> Side {
        Side {
            rows: 0,
            cells: 0,
            digest: Context::new(&SHA256),
        }
    }

    fn add(&mut self, row: &Row) {
        self.rows += 1;
        self.cells += row.cells.len() as u64;
        for c in &row.cells {
            for part in [&c.row, &c.family, &c.qualifier] {
                self.digest.update(&(part.len() as u32).to_be_bytes());
                self.digest.update(part);
            }
            self.digest.update(&c.timestamp.to_be_bytes());
            self.digest.update(&[c.cell_type as u8]);
            self.digest.update(&(c.value.len() as u32).to_be_bytes());
            self.digest.update(&c.value);
        }
    }
}

/// A range of rows compared: [start, end), `end` empty for the end of the table.
pub struct RangeReport {
    pub start: Bytes,
    pub end: Bytes,
    pub source: (u64, u64, String),
    pub target: (u64, u64, String),
    /// Rows that differ, and the first few of them with what differs.
    pub differing_rows: u64,
    pub first: Vec<(Bytes, String)>,
}

impl RangeReport {
    pub fn equal(&self) -> bool {
        self.differing_rows == 0 && self.source.2 == self.target.2
    }
}

struct Open {
    start: Bytes,
    merged: u64,
    source: Side,
    target: Side,
    differing_rows: u64,
    first: Vec<(Bytes, String)>,
}

impl Open {
    fn new(start: Bytes) -> Open {
        Open {
            start,
            merged: 0,
            source: Side::new(),
            target: Side::new(),
            differing_rows: 0,
            first: Vec::new(),
        }
    }

    fn close(self, end: Bytes) -> RangeReport {
        let hex = |s: Side| -> String {
            s.digest
                .finish()
                .as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        RangeReport {
            start: self.start,
            end,
            source: (self.source.rows, self.source.cells, hex(self.source)),
            target: (self.target.rows, self.target.cells, hex(self.target)),
            differing_rows: self.differing_rows,
            first: self.first,
        }
    }

    fn differs(&mut self, row: &Bytes, what: String, show: usize) {
        self.differing_rows += 1;
        if self.first.len() < show {
            self.first.push((row.clone(), what));
        }
    }
}

/// Merges `source` and `target` (each in row order) over [start, stop) into ranges.
/// `each` sees every range as it closes.
pub fn compare_streams(
    mut source: impl Iterator<Item = Result<Row, String>>,
    mut target: impl Iterator<Item = Result<Row, String>>,
    start: Bytes,
    stop: Bytes,
    rows_per_range: u64,
    show: usize,
    each: &mut dyn FnMut(RangeReport),
) -> Result<(), String> {
    let mut s = source.next().transpose()?;
    let mut t = target.next().transpose()?;
    let mut open = Open::new(start);
    loop {
        let key = match (&s, &t) {
            (None, None) => break,
            (Some(a), None) => a.key.clone(),
            (None, Some(b)) => b.key.clone(),
            (Some(a), Some(b)) => a.key.clone().min(b.key.clone()),
        };
        if open.merged >= rows_per_range.max(1) {
            let next = Open::new(key.clone());
            each(std::mem::replace(&mut open, next).close(key.clone()));
        }
        open.merged += 1;
        let from_source = s.take_if(|r| r.key == key);
        let from_target = t.take_if(|r| r.key == key);
        match (&from_source, &from_target) {
            (Some(a), Some(b)) => {
                open.source.add(a);
                open.target.add(b);
                if let Some(what) = row_difference(&a.cells, &b.cells) {
                    open.differs(&key, what, show);
                }
            }
            (Some(a), None) => {
                open.source.add(a);
                let what = format!(
                    "missing on the target ({} cells on the source)",
                    a.cells.len()
                );
                open.differs(&key, what, show);
            }
            (None, Some(b)) => {
                open.target.add(b);
                let what = format!(
                    "missing on the source ({} cells on the target)",
                    b.cells.len()
                );
                open.differs(&key, what, show);
            }
            (None, None) => {}
        }
        if from_source.is_some() {
            s = source.next().transpose()?;
        }
        if from_target.is_some() {
            t = target.next().transpose()?;
        }
    }
    each(open.close(stop));
    Ok(())
}

/// What differs first between two versions of a row, `None` when nothing does. Cells are
/// walked in HBase's order within a row (family, qualifier, newest first, deletes before
/// puts), so a cell only one side has is named as such.
fn row_difference(a: &[Cell], b: &[Cell]) -> Option<String> {
    let key = |c: &Cell| {
        (
            c.family.clone(),
            c.qualifier.clone(),
            std::cmp::Reverse(c.timestamp),
            std::cmp::Reverse(c.cell_type as u8),
        )
    };
    let (mut i, mut j) = (0, 0);
    loop {
        match (a.get(i), b.get(j)) {
            (None, None) => return None,
            (Some(x), None) => return Some(format!("only the source has {}", describe(x))),
            (None, Some(y)) => return Some(format!("only the target has {}", describe(y))),
            (Some(x), Some(y)) => match key(x).cmp(&key(y)) {
                std::cmp::Ordering::Less => {
                    return Some(format!("only the source has {}", describe(x)))
                }
                std::cmp::Ordering::Greater => {
                    return Some(format!("only the target has {}", describe(y)))
                }
                std::cmp::Ordering::Equal if x.value != y.value => {
                    return Some(format!(
                        "{}:{} @{} {:?}: source '{}', target '{}'",
                        printable(&x.family),
                        printable(&x.qualifier),
                        x.timestamp,
                        x.cell_type,
                        value(&x.value),
                        value(&y.value)
                    ))
                }
                std::cmp::Ordering::Equal => {
                    i += 1;
                    j += 1;
                }
            },
        }
    }
}

/// A value as printed: at most 32 bytes of it, and its length when longer.
fn value(v: &[u8]) -> String {
    let mut out = printable(&v[..v.len().min(32)]);
    if v.len() > 32 {
        out.push_str(&format!("... ({} bytes)", v.len()));
    }
    out
}

fn describe(c: &Cell) -> String {
    format!(
        "{}:{} @{} {:?} '{}'",
        printable(&c.family),
        printable(&c.qualifier),
        c.timestamp,
        c.cell_type,
        value(&c.value)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::CellType;

    fn row(key: &str, cells: &[(&str, u64, &str)]) -> Result<Row, String> {
        Ok(Row {
            key: Bytes::copy_from_slice(key.as_bytes()),
            cells: cells
                .iter()
                .map(|(q, ts, v)| Cell {
                    row: Bytes::copy_from_slice(key.as_bytes()),
                    family: Bytes::from_static(b"f"),
                    qualifier: Bytes::copy_from_slice(q.as_bytes()),
                    timestamp: *ts,
                    cell_type: CellType::Put,
                    seq_id: 0,
                    value: Bytes::copy_from_slice(v.as_bytes()),
                })
                .collect(),
        })
    }

    fn run(
        source: Vec<Result<Row, String>>,
        target: Vec<Result<Row, String>>,
        per_range: u64,
    ) -> Vec<RangeReport> {
        let mut out = Vec::new();
        compare_streams(
            source.into_iter(),
            target.into_iter(),
            Bytes::new(),
            Bytes::new(),
            per_range,
            10,
            &mut |r| out.push(r),
        )
        .expect("compares");
        out
    }

    #[test]
    fn equal_tables_give_equal_ranges_with_equal_digests() {
        let rows = || {
            (0..10)
                .map(|i| row(&format!("r{i}"), &[("a", 1, "x"), ("b", 2, "y")]))
                .collect::<Vec<_>>()
        };
        let ranges = run(rows(), rows(), 4);
        assert_eq!(ranges.len(), 3);
        assert!(ranges.iter().all(RangeReport::equal));
        assert_eq!(ranges[0].end.as_ref(), b"r4");
        assert_eq!(ranges[1].start.as_ref(), b"r4");
        assert_eq!(ranges[2].end.as_ref(), b"");
        assert_eq!(ranges[0].source.0, 4);
        assert_eq!(ranges[0].source.1, 8);
    }

    #[test]
    fn a_missing_row_a_changed_value_and_an_extra_row_are_named() {
        let source = vec![
            row("a", &[("q", 1, "x")]),
            row("b", &[("q", 1, "x")]),
            row("c", &[("q", 1, "x")]),
        ];
        let target = vec![
            row("a", &[("q", 1, "x")]),
            row("c", &[("q", 1, "changed")]),
            row("d", &[("q", 1, "x")]),
        ];
        let ranges = run(source, target, 100);
        assert_eq!(ranges.len(), 1);
        let r = &ranges[0];
        assert!(!r.equal());
        assert_eq!(r.differing_rows, 3);
        let named: Vec<&[u8]> = r.first.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(named, [b"b".as_ref(), b"c", b"d"]);
        assert!(
            r.first[0].1.contains("missing on the target"),
            "{}",
            r.first[0].1
        );
        assert_eq!(r.first[1].1, "f:q @1 Put: source 'x', target 'changed'");
        assert!(
            r.first[2].1.contains("missing on the source"),
            "{}",
            r.first[2].1
        );
    }

    #[test]
    fn an_extra_version_differs_and_says_which_side_has_it() {
        let ranges = run(
            vec![row("a", &[("q", 2, "new"), ("q", 1, "old")])],
            vec![row("a", &[("q", 2, "new")])],
            100,
        );
        assert_eq!(ranges[0].differing_rows, 1);
        assert_eq!(ranges[0].first[0].1, "only the source has f:q @1 Put 'old'");
    }

    #[test]
    fn a_scan_error_stops_the_comparison() {
        let mut out = Vec::new();
        let failed = compare_streams(
            vec![row("a", &[]), Err("region gone".to_string())].into_iter(),
            vec![row("a", &[])].into_iter(),
            Bytes::new(),
            Bytes::new(),
            100,
            10,
            &mut |r| out.push(r),
        );
        assert_eq!(failed.err().as_deref(), Some("region gone"));
    }
}
