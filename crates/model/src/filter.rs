//! Server-side filters (HBase's filter family) and check-and-mutate conditions.
//!
//! Filters run on the server after the version/delete/TTL matcher has produced a row's visible
//! cells: [`FilterEval::filter_row`] takes a row's cells and returns what the client receives,
//! or nothing when the row is filtered out. Cell-level filters (column prefix/range,
//! qualifier, family, value, key-only, first-key-only) trim the row; row-level filters (prefix,
//! row, row ranges, single-column-value, page) keep or drop it whole. A [`FilterEval`] is
//! created once per region scanner because some filters keep state (page counts rows).

mod compare;

pub use compare::{compile_regex, MAX_REGEX_BYTES};
mod eval;
mod lang;
pub use lang::parse_filter;
#[cfg(test)]
mod tests;

use crate::cell::Cell;
use crate::error::Result;
use bytes::Bytes;
use eval::{Node, Shape};

/// HBase's `CompareOperator`, in HBase's wire order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    Less,
    LessOrEqual,
    Equal,
    NotEqual,
    GreaterOrEqual,
    Greater,
    /// Never matches (HBase's `NO_OP`).
    NoOp,
}

impl CompareOp {
    /// Whether `left op right` holds, given how `left` orders against `right`.
    pub fn holds(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CompareOp::Less => ord == Less,
            CompareOp::LessOrEqual => ord != Greater,
            CompareOp::Equal => ord == Equal,
            CompareOp::NotEqual => ord != Equal,
            CompareOp::GreaterOrEqual => ord != Less,
            CompareOp::Greater => ord == Greater,
            CompareOp::NoOp => false,
        }
    }
}

/// What a compared byte string (row, family, qualifier or value) is compared with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparator {
    /// Lexicographic byte comparison.
    Binary(Bytes),
    /// Lexicographic comparison of the first `len(prefix)` bytes.
    BinaryPrefix(Bytes),
    /// Case-insensitive substring test: only `Equal` / `NotEqual` are meaningful.
    Substring(String),
    /// Regular expression over the bytes read as (lossy) UTF-8: `Equal` / `NotEqual`.
    Regex(String),
}

/// Whether every filter of a list must pass (AND) or one suffices (OR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOp {
    MustPassAll,
    MustPassOne,
}

/// One row range of a multi-row-range filter: `[start, stop)` by default; empty `stop` is open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRange {
    pub start: Bytes,
    pub start_inclusive: bool,
    pub stop: Bytes,
    pub stop_inclusive: bool,
}

/// One key of a fuzzy row filter: a row matches where `mask` is 0 (fixed) and may hold
/// anything where it is 1. Only the positions both the row and the key have are compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuzzyKey {
    pub key: Bytes,
    pub mask: Bytes,
}

impl FuzzyKey {
    /// Whether `row` matches this key.
    pub fn matches(&self, row: &[u8]) -> bool {
        row.iter()
            .zip(self.key.iter().zip(self.mask.iter()))
            .all(|(r, (k, m))| *m != 0 || r == k)
    }
}

/// A server-side filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Rows whose key starts with the prefix.
    Prefix(Bytes),
    /// Cells whose qualifier starts with the prefix.
    ColumnPrefix(Bytes),
    /// Cells whose qualifier lies in the range; `None` bounds are open.
    ColumnRange {
        min: Option<Bytes>,
        min_inclusive: bool,
        max: Option<Bytes>,
        max_inclusive: bool,
    },
    /// Rows whose key compares as asked.
    Row(CompareOp, Comparator),
    /// Cells whose family compares as asked.
    Family(CompareOp, Comparator),
    /// Cells whose qualifier compares as asked.
    Qualifier(CompareOp, Comparator),
    /// Cells whose value compares as asked.
    Value(CompareOp, Comparator),
    /// Rows whose `family:qualifier` value compares as asked (HBase's
    /// `SingleColumnValueFilter`). A row without the column passes unless `filter_if_missing`.
    SingleColumnValue {
        family: Bytes,
        qualifier: Bytes,
        op: CompareOp,
        comparator: Comparator,
        filter_if_missing: bool,
        latest_version_only: bool,
    },
    /// Cells lose their values (or, with `len_as_value`, carry the value length as 4 BE bytes).
    KeyOnly { len_as_value: bool },
    /// Only the first cell of each row.
    FirstKeyOnly,
    /// At most this many rows per region scanner (clients stop once they have enough).
    Page(u64),
    /// Rows inside any of the ranges (HBase's `MultiRowRangeFilter`).
    RowRanges(Vec<RowRange>),
    /// Rows matching any of the keys (HBase's `FuzzyRowFilter`).
    FuzzyRow(Vec<FuzzyKey>),
    /// Cells whose timestamp is one of these (HBase's `TimestampsFilter`). It sees every
    /// version the family keeps, so a one-version read returns the newest listed version.
    Timestamps(Vec<u64>),
    /// Per row, one page of its columns, one version each (HBase's `ColumnPaginationFilter`):
    /// at most `limit` columns, from the `offset`-th (0-based) on, or from the first whose
    /// qualifier is at least `column_offset` when that is set.
    ColumnPage {
        limit: u32,
        offset: u32,
        column_offset: Option<Bytes>,
    },
    /// Per row, the first `limit` columns, one version each; a row with more columns ends the
    /// scan after it (HBase's `ColumnCountGetFilter`, meant for Gets).
    ColumnCount(u32),
    /// Rows in which the inner filter keeps every cell; any other row is dropped whole
    /// (HBase's `SkipFilter`).
    Skip(Box<Filter>),
    /// Rows up to the first cell the inner filter drops: that row keeps only the cells
    /// before it, and no later row passes (HBase's `WhileMatchFilter`).
    WhileMatch(Box<Filter>),
    /// A list of filters combined with AND or OR.
    List(ListOp, Vec<Filter>),
}

/// A condition of check-and-mutate: the newest visible value of `family:qualifier` in `row`,
/// compared with `value` (`None`: the column must not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub row: Bytes,
    pub family: Bytes,
    pub qualifier: Bytes,
    pub op: CompareOp,
    pub value: Option<Bytes>,
}

impl Filter {
    /// Checks what can be wrong with a filter built from user input (today: regular
    /// expressions that do not compile), naming the offending pattern. Servers call this
    /// before evaluating; [`FilterEval`] treats an invalid pattern as matching nothing.
    pub fn validate(&self) -> Result<()> {
        let comparator = match self {
            Filter::Row(_, c)
            | Filter::Family(_, c)
            | Filter::Qualifier(_, c)
            | Filter::Value(_, c) => c,
            Filter::SingleColumnValue { comparator, .. } => comparator,
            Filter::List(_, members) => return members.iter().try_for_each(Filter::validate),
            Filter::Skip(inner) | Filter::WhileMatch(inner) => return inner.validate(),
            Filter::FuzzyRow(keys) => return keys.iter().enumerate().try_for_each(check_fuzzy_key),
            _ => return Ok(()),
        };
        match comparator {
            Comparator::Regex(pattern) => compare::compile_regex(pattern).map(|_| ()),
            _ => Ok(()),
        }
    }
}

/// A fuzzy key's mask is as long as its key and holds only 0s and 1s.
fn check_fuzzy_key((i, k): (usize, &FuzzyKey)) -> Result<()> {
    let bad = |why: String| {
        Err(crate::error::Error::InvalidArgument(format!(
            "fuzzy key {i}: {why}"
        )))
    };
    if k.key.len() != k.mask.len() {
        return bad(format!(
            "the mask has {} bytes for a key of {}",
            k.mask.len(),
            k.key.len()
        ));
    }
    match k.mask.iter().position(|m| *m > 1) {
        Some(at) => bad(format!(
            "mask byte {at} is {}: only 0 (fixed) and 1 (any) are allowed",
            k.mask[at]
        )),
        None => Ok(()),
    }
}

/// The running state of one filter over one scanner's rows.
///
/// Versions follow HBase 2 (HBASE-17125): the filter sees every version of a column the
/// family keeps, and the read's own version count ([`FilterEval::versions`]) applies to the
/// cells it lets through. So a one-version read with a value filter returns the newest
/// version whose value matches, not nothing when the newest does not. Readers with a filter
/// therefore ask the engine for every version the family keeps.
#[derive(Debug, Clone)]
pub struct FilterEval {
    root: Node,
    /// Versions per column a row keeps after the filter.
    max_versions: u32,
}

impl FilterEval {
    pub fn new(filter: &Filter) -> FilterEval {
        FilterEval {
            root: Node::build(filter),
            max_versions: u32::MAX,
        }
    }

    /// Keeps at most `max_versions` of each column's cells that pass (the read's version
    /// count); unlimited unless set.
    pub fn versions(mut self, max_versions: u32) -> FilterEval {
        self.max_versions = max_versions;
        self
    }

    /// The cells of `cells` (one row, in key order, as the matcher returned them) that the
    /// client receives; `None` drops the row.
    pub fn filter_row(&mut self, cells: Vec<Cell>) -> Option<Vec<Cell>> {
        if cells.is_empty() {
            return None;
        }
        let verdicts = self
            .root
            .eval(&cells, &vec![Some(Shape::Whole); cells.len()]);
        let mut column: Option<(Bytes, Bytes)> = None;
        let mut in_column = 0u32;
        let kept: Vec<Cell> = cells
            .into_iter()
            .zip(verdicts)
            .filter_map(|(cell, v)| v.map(|shape| shape.apply(cell)))
            .filter(|cell| {
                let same = column
                    .as_ref()
                    .is_some_and(|(f, q)| *f == cell.family && *q == cell.qualifier);
                if !same {
                    column = Some((cell.family.clone(), cell.qualifier.clone()));
                    in_column = 0;
                }
                in_column += 1;
                in_column <= self.max_versions
            })
            .collect();
        if kept.is_empty() {
            return None;
        }
        self.root.count_passed_row();
        Some(kept)
    }

    /// Whether no later row can pass (a page filter has its rows): the scan may stop early.
    pub fn all_remaining_filtered(&self) -> bool {
        self.root.exhausted()
    }
}
