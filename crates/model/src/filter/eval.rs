//! The evaluation tree behind [`super::FilterEval`].
//!
//! A row is evaluated as a vector of per-cell verdicts: `None` drops the cell, `Some(shape)`
//! keeps it with the value shape the key-only transforms left. Each node maps the verdicts of
//! its input to its output, so a filter list composes its members:
//!
//! - AND runs members in order, each seeing only the cells the previous ones kept (so
//!   `FirstKeyOnly` after a qualifier filter keeps the first *matching* cell, as in HBase);
//! - OR runs every member on the list's input and keeps a cell any member kept.
//!
//! Row-level members keep all their input cells or none, and judge the row by all of its
//! visible cells.

use super::compare::Matcher;
use super::{CompareOp, Filter, FuzzyKey, ListOp, RowRange};
use crate::cell::Cell;
use bytes::Bytes;

/// The value a surviving cell carries to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Whole,
    Empty,
    /// The length of the value before the transform, as 4 big-endian bytes.
    Length(u32),
}

impl Shape {
    fn current_len(self, original: usize) -> u32 {
        match self {
            Shape::Whole => u32::try_from(original).unwrap_or(u32::MAX),
            Shape::Empty => 0,
            Shape::Length(_) => 4,
        }
    }

    fn key_only(self, len_as_value: bool, original: usize) -> Shape {
        if len_as_value {
            Shape::Length(self.current_len(original))
        } else {
            Shape::Empty
        }
    }

    pub(super) fn apply(self, mut cell: Cell) -> Cell {
        match self {
            Shape::Whole => {}
            Shape::Empty => cell.value = Bytes::new(),
            Shape::Length(n) => cell.value = Bytes::copy_from_slice(&n.to_be_bytes()),
        }
        cell
    }
}

pub(super) type Verdicts = Vec<Option<Shape>>;

/// A filter prepared for evaluation, carrying its state (page counts).
#[derive(Debug, Clone)]
pub(super) enum Node {
    RowPrefix(Bytes),
    ColumnPrefix(Bytes),
    ColumnRange {
        min: Option<Bytes>,
        min_inclusive: bool,
        max: Option<Bytes>,
        max_inclusive: bool,
    },
    Row(CompareOp, Matcher),
    Family(CompareOp, Matcher),
    Qualifier(CompareOp, Matcher),
    Value(CompareOp, Matcher),
    SingleColumnValue {
        family: Bytes,
        qualifier: Bytes,
        op: CompareOp,
        matcher: Matcher,
        filter_if_missing: bool,
        latest_version_only: bool,
    },
    KeyOnly {
        len_as_value: bool,
    },
    FirstKeyOnly,
    Page {
        limit: u64,
        passed: u64,
    },
    RowRanges(Vec<RowRange>),
    FuzzyRow(Vec<FuzzyKey>),
    /// Sorted.
    Timestamps(Vec<u64>),
    ColumnPage {
        limit: u32,
        offset: u32,
        column_offset: Option<Bytes>,
    },
    ColumnCount {
        limit: u32,
        /// A row had more than `limit` columns: nothing passes any more.
        ended: bool,
    },
    Skip(Box<Node>),
    WhileMatch {
        inner: Box<Node>,
        /// The inner filter has dropped a cell: nothing passes any more.
        ended: bool,
    },
    List(ListOp, Vec<Node>),
}

impl Node {
    pub(super) fn build(filter: &Filter) -> Node {
        match filter {
            Filter::Prefix(p) => Node::RowPrefix(p.clone()),
            Filter::ColumnPrefix(p) => Node::ColumnPrefix(p.clone()),
            Filter::ColumnRange {
                min,
                min_inclusive,
                max,
                max_inclusive,
            } => Node::ColumnRange {
                min: min.clone(),
                min_inclusive: *min_inclusive,
                max: max.clone(),
                max_inclusive: *max_inclusive,
            },
            Filter::Row(op, c) => Node::Row(*op, Matcher::new(c)),
            Filter::Family(op, c) => Node::Family(*op, Matcher::new(c)),
            Filter::Qualifier(op, c) => Node::Qualifier(*op, Matcher::new(c)),
            Filter::Value(op, c) => Node::Value(*op, Matcher::new(c)),
            Filter::SingleColumnValue {
                family,
                qualifier,
                op,
                comparator,
                filter_if_missing,
                latest_version_only,
            } => Node::SingleColumnValue {
                family: family.clone(),
                qualifier: qualifier.clone(),
                op: *op,
                matcher: Matcher::new(comparator),
                filter_if_missing: *filter_if_missing,
                latest_version_only: *latest_version_only,
            },
            Filter::KeyOnly { len_as_value } => Node::KeyOnly {
                len_as_value: *len_as_value,
            },
            Filter::FirstKeyOnly => Node::FirstKeyOnly,
            Filter::Page(limit) => Node::Page {
                limit: *limit,
                passed: 0,
            },
            Filter::RowRanges(ranges) => Node::RowRanges(ranges.clone()),
            Filter::FuzzyRow(keys) => Node::FuzzyRow(keys.clone()),
            Filter::Timestamps(ts) => {
                let mut ts = ts.clone();
                ts.sort_unstable();
                Node::Timestamps(ts)
            }
            Filter::ColumnPage {
                limit,
                offset,
                column_offset,
            } => Node::ColumnPage {
                limit: *limit,
                offset: *offset,
                column_offset: column_offset.clone(),
            },
            Filter::ColumnCount(limit) => Node::ColumnCount {
                limit: *limit,
                ended: false,
            },
            Filter::Skip(inner) => Node::Skip(Box::new(Node::build(inner))),
            Filter::WhileMatch(inner) => Node::WhileMatch {
                inner: Box::new(Node::build(inner)),
                ended: false,
            },
            Filter::List(op, members) => Node::List(*op, members.iter().map(Node::build).collect()),
        }
    }

    /// The verdicts of this node for `cells` (one row), given its input verdicts. Mutable
    /// for the nodes that remember what they saw (`WhileMatch`).
    pub(super) fn eval(&mut self, cells: &[Cell], input: &[Option<Shape>]) -> Verdicts {
        match self {
            Node::RowPrefix(p) => whole_row(input, row_of(cells).starts_with(p)),
            Node::Row(op, m) => whole_row(input, m.passes(*op, row_of(cells))),
            Node::RowRanges(ranges) => {
                let row = row_of(cells);
                whole_row(input, ranges.iter().any(|r| in_range(r, row)))
            }
            Node::FuzzyRow(keys) => {
                let row = row_of(cells);
                whole_row(input, keys.iter().any(|k| k.matches(row)))
            }
            Node::SingleColumnValue {
                family,
                qualifier,
                op,
                matcher,
                filter_if_missing,
                latest_version_only,
            } => {
                let mut versions = cells
                    .iter()
                    .filter(|c| c.family == *family && c.qualifier == *qualifier);
                let pass = match versions.next() {
                    None => !*filter_if_missing,
                    Some(newest) if *latest_version_only => matcher.passes(*op, &newest.value),
                    Some(newest) => {
                        matcher.passes(*op, &newest.value)
                            || versions.any(|c| matcher.passes(*op, &c.value))
                    }
                };
                whole_row(input, pass)
            }
            Node::Page { limit, passed } => whole_row(input, passed < limit),
            Node::ColumnPrefix(p) => per_cell(cells, input, |c| c.qualifier.starts_with(p)),
            Node::ColumnRange {
                min,
                min_inclusive,
                max,
                max_inclusive,
            } => per_cell(cells, input, |c| {
                let q = &c.qualifier[..];
                let above = min
                    .as_ref()
                    .is_none_or(|m| q > &m[..] || (*min_inclusive && q == &m[..]));
                let below = max
                    .as_ref()
                    .is_none_or(|m| q < &m[..] || (*max_inclusive && q == &m[..]));
                above && below
            }),
            Node::Family(op, m) => per_cell(cells, input, |c| m.passes(*op, &c.family)),
            Node::Qualifier(op, m) => per_cell(cells, input, |c| m.passes(*op, &c.qualifier)),
            Node::Value(op, m) => per_cell(cells, input, |c| m.passes(*op, &c.value)),
            Node::Timestamps(ts) => {
                per_cell(cells, input, |c| ts.binary_search(&c.timestamp).is_ok())
            }
            Node::KeyOnly { len_as_value } => input
                .iter()
                .zip(cells)
                .map(|(v, c)| v.map(|s| s.key_only(*len_as_value, c.value.len())))
                .collect(),
            Node::FirstKeyOnly => {
                let mut seen = false;
                input
                    .iter()
                    .map(|v| match v {
                        Some(s) if !seen => {
                            seen = true;
                            Some(*s)
                        }
                        _ => None,
                    })
                    .collect()
            }
            Node::ColumnPage {
                limit,
                offset,
                column_offset,
            } => {
                // Columns are counted as they come, among the cells still kept; each counted
                // column keeps its first (newest) version only.
                let mut out = vec![None; input.len()];
                let mut counted = 0u64;
                for (i, shape, c) in column_heads(cells, input) {
                    let from = match column_offset {
                        Some(q) if c.qualifier < *q => continue,
                        Some(_) => 0,
                        None => u64::from(*offset),
                    };
                    if counted >= from && counted < from + u64::from(*limit) {
                        out[i] = Some(shape);
                    }
                    counted += 1;
                }
                out
            }
            Node::ColumnCount { ended: true, .. } => vec![None; input.len()],
            Node::ColumnCount { limit, ended } => {
                // Each column's first (newest) version counts; the column past the limit
                // ends the scan, as HBase's filter reports all remaining filtered there.
                let mut out = vec![None; input.len()];
                for (n, (i, shape, _)) in column_heads(cells, input).enumerate() {
                    if n >= *limit as usize {
                        *ended = true;
                        break;
                    }
                    out[i] = Some(shape);
                }
                out
            }
            Node::WhileMatch { .. } if self.exhausted() => vec![None; input.len()],
            Node::WhileMatch { inner, ended } => {
                let mut kept = inner.eval(cells, input);
                let dropped = input
                    .iter()
                    .zip(&kept)
                    .position(|(i, k)| i.is_some() && k.is_none());
                if let Some(first) = dropped {
                    // HBase ends the scan at that cell: the cells before it stay.
                    kept[first..].fill(None);
                    *ended = true;
                }
                kept
            }
            Node::Skip(inner) => {
                let kept = inner.eval(cells, input);
                let all = input
                    .iter()
                    .zip(&kept)
                    .all(|(i, k)| i.is_none() || k.is_some());
                if all {
                    kept
                } else {
                    vec![None; input.len()]
                }
            }
            Node::List(_, members) if members.is_empty() => input.to_vec(),
            Node::List(ListOp::MustPassAll, members) => {
                let mut v = input.to_vec();
                for m in members.iter_mut() {
                    if v.iter().all(Option::is_none) {
                        break;
                    }
                    v = m.eval(cells, &v);
                }
                v
            }
            Node::List(ListOp::MustPassOne, members) => {
                let outputs: Vec<Verdicts> =
                    members.iter_mut().map(|m| m.eval(cells, input)).collect();
                (0..input.len())
                    .map(|i| either(input[i], outputs.iter().map(|o| o[i])))
                    .collect()
            }
        }
    }

    /// Counts a row that passed the whole filter on every page node.
    pub(super) fn count_passed_row(&mut self) {
        match self {
            Node::Page { passed, .. } => *passed = passed.saturating_add(1),
            Node::List(_, members) => members.iter_mut().for_each(Node::count_passed_row),
            Node::Skip(inner) | Node::WhileMatch { inner, .. } => inner.count_passed_row(),
            _ => {}
        }
    }

    /// Whether this node can pass no further row.
    pub(super) fn exhausted(&self) -> bool {
        match self {
            Node::Page { limit, passed } => passed >= limit,
            Node::List(ListOp::MustPassAll, members) => members.iter().any(Node::exhausted),
            Node::Skip(inner) => inner.exhausted(),
            Node::WhileMatch { inner, ended } => *ended || inner.exhausted(),
            Node::ColumnCount { ended, .. } => *ended,
            Node::List(ListOp::MustPassOne, members) => {
                !members.is_empty() && members.iter().all(Node::exhausted)
            }
            _ => false,
        }
    }
}

/// The index, shape and cell of each column's first (newest) cell still kept, in order: what
/// the column-counting filters count (a column's older versions are HBase's NEXT_COL).
fn column_heads<'a>(
    cells: &'a [Cell],
    input: &'a [Option<Shape>],
) -> impl Iterator<Item = (usize, Shape, &'a Cell)> + 'a {
    let mut column: Option<(&[u8], &[u8])> = None;
    input
        .iter()
        .zip(cells)
        .enumerate()
        .filter_map(move |(i, (v, c))| {
            let shape = (*v)?;
            let this = (&c.family[..], &c.qualifier[..]);
            if column == Some(this) {
                return None;
            }
            column = Some(this);
            Some((i, shape, c))
        })
}

fn row_of(cells: &[Cell]) -> &[u8] {
    cells.first().map(|c| &c.row[..]).unwrap_or_default()
}

fn whole_row(input: &[Option<Shape>], pass: bool) -> Verdicts {
    if pass {
        input.to_vec()
    } else {
        vec![None; input.len()]
    }
}

fn per_cell(cells: &[Cell], input: &[Option<Shape>], keep: impl Fn(&Cell) -> bool) -> Verdicts {
    input
        .iter()
        .zip(cells)
        .map(|(v, c)| v.filter(|_| keep(c)))
        .collect()
}

/// An OR list's verdict for one cell: kept if any member kept it; a member that transformed
/// the value wins over one that passed it unchanged (later transforms over earlier ones).
fn either(input: Option<Shape>, members: impl Iterator<Item = Option<Shape>>) -> Option<Shape> {
    let mut out = None;
    for shape in members.flatten() {
        out = match out {
            Some(prev) if Some(shape) == input => Some(prev),
            _ => Some(shape),
        };
    }
    out
}

fn in_range(r: &RowRange, row: &[u8]) -> bool {
    let start = &r.start[..];
    let stop = &r.stop[..];
    let after_start = start.is_empty() || row > start || (r.start_inclusive && row == start);
    let before_stop = stop.is_empty() || row < stop || (r.stop_inclusive && row == stop);
    after_start && before_stop
}
