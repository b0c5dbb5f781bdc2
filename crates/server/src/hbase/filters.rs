//! HBase filters and comparators (a Java class name plus that class's serialized protobuf)
//! → Cellar's model filters. Only classes with an exact Cellar equivalent are accepted;
//! anything else is a DoNotRetryIOException naming the class, so a client never gets rows
//! a filter it believes in would have dropped.

use super::HbaseError;
use bytes::Bytes;
use cellar_model::filter::{Comparator, CompareOp, Filter, FuzzyKey, ListOp, RowRange};
use cellar_proto::hbase;
use prost::Message;

type Result<T> = std::result::Result<T, HbaseError>;

/// The package of HBase's filters and comparators.
const PACKAGE: &str = "org.apache.hadoop.hbase.filter.";

/// Java's `java.util.regex.Pattern` flags that change matching.
const CASE_INSENSITIVE: i32 = 0x02;
const COMMENTS: i32 = 0x04;
const MULTILINE: i32 = 0x08;
const LITERAL: i32 = 0x10;
const DOTALL: i32 = 0x20;
const CANON_EQ: i32 = 0x80;

fn decode<M: Message + Default>(class: &str, bytes: &Option<Bytes>) -> Result<M> {
    M::decode(bytes.clone().unwrap_or_default())
        .map_err(|e| HbaseError::do_not_retry(format!("malformed {class}: {e}")))
}

fn unsupported<T>(kind: &str, class: &str) -> Result<T> {
    Err(HbaseError::do_not_retry(format!(
        "{kind} {class} is not supported by Cellar"
    )))
}

/// HBase's CompareType as a filter operator: filters compare the cell against the operand
/// (`cell op operand`), as Cellar's filters do. Here rather than in `convert`, whose
/// check-and-mutate conditions use it too: `convert` depends on the filters, not back.
pub(crate) fn compare_op(t: i32) -> Result<CompareOp> {
    use hbase::CompareType as T;
    Ok(match T::try_from(t) {
        Ok(T::Less) => CompareOp::Less,
        Ok(T::LessOrEqual) => CompareOp::LessOrEqual,
        Ok(T::Equal) => CompareOp::Equal,
        Ok(T::NotEqual) => CompareOp::NotEqual,
        Ok(T::GreaterOrEqual) => CompareOp::GreaterOrEqual,
        Ok(T::Greater) => CompareOp::Greater,
        Ok(T::NoOp) => CompareOp::NoOp,
        Err(_) => {
            return Err(HbaseError::do_not_retry(format!(
                "unknown compare type {t}"
            )))
        }
    })
}

/// A filter the client sent, converted and checked (regular expressions compile). Inside a
/// reversed scan `reversed` is true (InclusiveStopFilter depends on the direction).
pub(crate) fn checked_filter_from_hbase(f: &hbase::Filter, reversed: bool) -> Result<Filter> {
    let filter = filter_from_hbase(f, reversed)?;
    filter
        .validate()
        .map_err(|e| HbaseError::do_not_retry(format!("filter {}: {e}", f.name)))?;
    Ok(filter)
}

/// One filter, recursively (filter lists and wrapping filters).
pub(crate) fn filter_from_hbase(f: &hbase::Filter, reversed: bool) -> Result<Filter> {
    let class = f.name.as_str();
    let simple = class.strip_prefix(PACKAGE).unwrap_or("");
    let bytes = &f.serialized_filter;
    Ok(match simple {
        "PrefixFilter" => {
            let p: hbase::PrefixFilter = decode(class, bytes)?;
            Filter::Prefix(p.prefix.unwrap_or_default())
        }
        "ColumnPrefixFilter" => {
            let p: hbase::ColumnPrefixFilter = decode(class, bytes)?;
            Filter::ColumnPrefix(p.prefix)
        }
        "MultipleColumnPrefixFilter" => {
            let p: hbase::MultipleColumnPrefixFilter = decode(class, bytes)?;
            Filter::List(
                ListOp::MustPassOne,
                p.sorted_prefixes
                    .into_iter()
                    .map(Filter::ColumnPrefix)
                    .collect(),
            )
        }
        "ColumnRangeFilter" => {
            let r: hbase::ColumnRangeFilter = decode(class, bytes)?;
            Filter::ColumnRange {
                min: r.min_column,
                min_inclusive: r.min_column_inclusive.unwrap_or(false),
                max: r.max_column,
                max_inclusive: r.max_column_inclusive.unwrap_or(false),
            }
        }
        "RowFilter" => {
            let r: hbase::RowFilter = decode(class, bytes)?;
            let (op, c) = compare_filter(class, &r.compare_filter)?;
            Filter::Row(op, c)
        }
        "FamilyFilter" => {
            let r: hbase::FamilyFilter = decode(class, bytes)?;
            let (op, c) = compare_filter(class, &r.compare_filter)?;
            Filter::Family(op, c)
        }
        "QualifierFilter" => {
            let r: hbase::QualifierFilter = decode(class, bytes)?;
            let (op, c) = compare_filter(class, &r.compare_filter)?;
            Filter::Qualifier(op, c)
        }
        "ValueFilter" => {
            let r: hbase::ValueFilter = decode(class, bytes)?;
            let (op, c) = compare_filter(class, &r.compare_filter)?;
            Filter::Value(op, c)
        }
        "SingleColumnValueFilter" => {
            let s: hbase::SingleColumnValueFilter = decode(class, bytes)?;
            single_column_value(&s)?
        }
        "SingleColumnValueExcludeFilter" => {
            // The row test of SingleColumnValueFilter, then the tested column dropped.
            let s: hbase::SingleColumnValueExcludeFilter = decode(class, bytes)?;
            let inner = &s.single_column_value_filter;
            let family = inner.column_family.clone().unwrap_or_default();
            let qualifier = inner.column_qualifier.clone().unwrap_or_default();
            Filter::List(
                ListOp::MustPassAll,
                vec![
                    single_column_value(inner)?,
                    Filter::List(
                        ListOp::MustPassOne,
                        vec![
                            Filter::Family(CompareOp::NotEqual, Comparator::Binary(family)),
                            Filter::Qualifier(CompareOp::NotEqual, Comparator::Binary(qualifier)),
                        ],
                    ),
                ],
            )
        }
        "KeyOnlyFilter" => {
            let k: hbase::KeyOnlyFilter = decode(class, bytes)?;
            Filter::KeyOnly {
                len_as_value: k.len_as_val,
            }
        }
        "FirstKeyOnlyFilter" => Filter::FirstKeyOnly,
        "PageFilter" => {
            let p: hbase::PageFilter = decode(class, bytes)?;
            let size = u64::try_from(p.page_size).map_err(|_| {
                HbaseError::do_not_retry(format!("{class}: page size {} is negative", p.page_size))
            })?;
            Filter::Page(size)
        }
        "MultiRowRangeFilter" => {
            let m: hbase::MultiRowRangeFilter = decode(class, bytes)?;
            Filter::RowRanges(
                m.row_range_list
                    .into_iter()
                    .map(|r| RowRange {
                        start: r.start_row.unwrap_or_default(),
                        start_inclusive: r.start_row_inclusive.unwrap_or(true),
                        stop: r.stop_row.unwrap_or_default(),
                        stop_inclusive: r.stop_row_inclusive.unwrap_or(false),
                    })
                    .collect(),
            )
        }
        "InclusiveStopFilter" => {
            // Rows up to and including the stop row in scan order (HBase also ends the scan
            // there; Cellar reads on and filters, with the same rows returned).
            let s: hbase::InclusiveStopFilter = decode(class, bytes)?;
            let op = if reversed {
                CompareOp::GreaterOrEqual
            } else {
                CompareOp::LessOrEqual
            };
            Filter::Row(op, Comparator::Binary(s.stop_row_key.unwrap_or_default()))
        }
        "FilterAllFilter" => Filter::Row(CompareOp::NoOp, Comparator::Binary(Bytes::new())),
        "ColumnPaginationFilter" => {
            let p: hbase::ColumnPaginationFilter = decode(class, bytes)?;
            let count = |what: &str, n: i32| {
                u32::try_from(n).map_err(|_| {
                    HbaseError::do_not_retry(format!("{class}: {what} {n} is negative"))
                })
            };
            Filter::ColumnPage {
                limit: count("limit", p.limit)?,
                offset: count("offset", p.offset.unwrap_or(0))?,
                column_offset: p.column_offset,
            }
        }
        "SkipFilter" => {
            let s: hbase::SkipFilter = decode(class, bytes)?;
            Filter::Skip(Box::new(filter_from_hbase(&s.filter, reversed)?))
        }
        "FuzzyRowFilter" => {
            let f: hbase::FuzzyRowFilter = decode(class, bytes)?;
            let wildcard = if f.is_mask_v2.unwrap_or(false) { 2 } else { 0 };
            Filter::FuzzyRow(
                f.fuzzy_keys_data
                    .into_iter()
                    .enumerate()
                    .map(|(i, pair)| fuzzy_key(class, i, pair, wildcard))
                    .collect::<Result<_>>()?,
            )
        }
        "ColumnCountGetFilter" => {
            let c: hbase::ColumnCountGetFilter = decode(class, bytes)?;
            Filter::ColumnCount(u32::try_from(c.limit).map_err(|_| {
                HbaseError::do_not_retry(format!("{class}: limit {} is negative", c.limit))
            })?)
        }
        "TimestampsFilter" => {
            // `can_hint` only lets HBase seek between the listed timestamps: same cells.
            let t: hbase::TimestampsFilter = decode(class, bytes)?;
            Filter::Timestamps(
                t.timestamps
                    .into_iter()
                    .map(|ts| {
                        u64::try_from(ts).map_err(|_| {
                            HbaseError::do_not_retry(format!("{class}: timestamp {ts} is negative"))
                        })
                    })
                    .collect::<Result<_>>()?,
            )
        }
        "WhileMatchFilter" => {
            let w: hbase::WhileMatchFilter = decode(class, bytes)?;
            Filter::WhileMatch(Box::new(filter_from_hbase(&w.filter, reversed)?))
        }
        "FilterList" => {
            let l: hbase::FilterList = decode(class, bytes)?;
            let op = match hbase::filter_list::Operator::try_from(l.operator) {
                Ok(hbase::filter_list::Operator::MustPassAll) => ListOp::MustPassAll,
                Ok(hbase::filter_list::Operator::MustPassOne) => ListOp::MustPassOne,
                Err(_) => {
                    return Err(HbaseError::do_not_retry(format!(
                        "{class}: unknown operator {}",
                        l.operator
                    )))
                }
            };
            Filter::List(
                op,
                l.filters
                    .iter()
                    .map(|m| filter_from_hbase(m, reversed))
                    .collect::<Result<_>>()?,
            )
        }
        _ => return unsupported("filter", class),
    })
}

/// A fuzzy key as the Java client sends it. Its mask is either as its user wrote it (0 fixed,
/// 1 any) or as HBase's client preprocesses it on most platforms (0xff fixed; 0, or 2 with
/// `is_mask_v2`, any). As HBase's server does, a mask made only of 0xff and that wildcard is
/// taken as preprocessed.
fn fuzzy_key(class: &str, i: usize, pair: hbase::BytesBytesPair, wildcard: u8) -> Result<FuzzyKey> {
    let preprocessed = pair.second.iter().all(|m| *m == 0xff || *m == wildcard);
    let mask = pair
        .second
        .iter()
        .map(|m| match (preprocessed, *m) {
            (true, 0xff) | (false, 0) => Ok(0),
            (true, _) | (false, 1) => Ok(1),
            (false, other) => Err(HbaseError::do_not_retry(format!(
                "{class}: fuzzy key {i}: mask byte {other} is neither 0 (fixed) nor 1 (any)"
            ))),
        })
        .collect::<Result<Vec<u8>>>()?;
    Ok(FuzzyKey {
        key: pair.first,
        mask: mask.into(),
    })
}

fn single_column_value(s: &hbase::SingleColumnValueFilter) -> Result<Filter> {
    Ok(Filter::SingleColumnValue {
        family: s.column_family.clone().unwrap_or_default(),
        qualifier: s.column_qualifier.clone().unwrap_or_default(),
        op: compare_op(s.compare_op)?,
        comparator: comparator_from_hbase(&s.comparator)?,
        filter_if_missing: s.filter_if_missing.unwrap_or(false),
        latest_version_only: s.latest_version_only.unwrap_or(true),
    })
}

fn compare_filter(class: &str, c: &hbase::CompareFilter) -> Result<(CompareOp, Comparator)> {
    let op = compare_op(c.compare_op)?;
    let comparator = c
        .comparator
        .as_ref()
        .ok_or_else(|| HbaseError::do_not_retry(format!("{class} has no comparator")))?;
    Ok((op, comparator_from_hbase(comparator)?))
}

/// A comparator: binary, binary prefix, substring or regular expression.
pub(crate) fn comparator_from_hbase(c: &hbase::Comparator) -> Result<Comparator> {
    let class = c.name.as_str();
    let simple = class.strip_prefix(PACKAGE).unwrap_or("");
    let bytes = &c.serialized_comparator;
    Ok(match simple {
        "BinaryComparator" => {
            let b: hbase::BinaryComparator = decode(class, bytes)?;
            Comparator::Binary(b.comparable.value.unwrap_or_default())
        }
        "BinaryPrefixComparator" => {
            let b: hbase::BinaryPrefixComparator = decode(class, bytes)?;
            Comparator::BinaryPrefix(b.comparable.value.unwrap_or_default())
        }
        "SubstringComparator" => {
            let s: hbase::SubstringComparator = decode(class, bytes)?;
            Comparator::Substring(s.substr)
        }
        "RegexStringComparator" => {
            let r: hbase::RegexStringComparator = decode(class, bytes)?;
            Comparator::Regex(java_regex(&r.pattern, r.pattern_flags)?)
        }
        _ => return unsupported("comparator", class),
    })
}

/// A Java pattern with its `Pattern` flags as Cellar's regex (inline flags). Cellar's
/// patterns match `.` across newlines unless told otherwise; Java's only with DOTALL (which
/// HBase's comparator sets by default). The subject is read as UTF-8, not the comparator's
/// charset.
fn java_regex(pattern: &str, flags: i32) -> Result<String> {
    if flags & CANON_EQ != 0 {
        return Err(HbaseError::do_not_retry(format!(
            "regular expression '{pattern}': the CANON_EQ flag is not supported by Cellar"
        )));
    }
    let body = if flags & LITERAL != 0 {
        escape(pattern)
    } else {
        pattern.to_string()
    };
    let mut on = String::new();
    if flags & CASE_INSENSITIVE != 0 {
        on.push('i');
    }
    if flags & MULTILINE != 0 {
        on.push('m');
    }
    if flags & COMMENTS != 0 && flags & LITERAL == 0 {
        on.push('x');
    }
    let off = if flags & DOTALL == 0 { "-s" } else { "" };
    if on.is_empty() && off.is_empty() {
        return Ok(body);
    }
    Ok(format!("(?{on}{off}){body}"))
}

/// Escapes every regex metacharacter so the pattern matches itself.
fn escape(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len() * 2);
    for ch in literal.chars() {
        if r"\.+*?()|[]{}^$#&-~".contains(ch) {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests;
