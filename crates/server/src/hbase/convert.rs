//! HBase's client messages ↔ Cellar's data model: Get, Scan, MutationProto, Condition and
//! Result. Decoders check what a client sent and name the first bad field; every refusal is
//! a DoNotRetryIOException, since asking again cannot make it valid.

use super::filters;
use super::HbaseError;
use crate::region_server::Check;
use bytes::{Bytes, BytesMut};
use cellar_model::filter::{Comparator, CompareOp, Condition, Filter, ListOp};
use cellar_model::MutationKind;
use cellar_model::{
    Cell, CellType, Column, Durability, Entry, Get, Nonce, RowMutation, Scan, TimeRange,
    LATEST_TIMESTAMP,
};
use cellar_proto::cellblock::{self, CellReader};
use cellar_proto::hbase;
use cellar_proto::hbase::mutation_proto::{DeleteType, MutationType};

/// The attribute by which a client asks an increment or append not to return its results
/// (`Mutation.setReturnResults(false)` sends a single zero byte).
pub(crate) const RETURN_RESULTS_ATTRIBUTE: &str = "_rr_";

type Result<T> = std::result::Result<T, HbaseError>;

fn refuse<T>(message: impl Into<String>) -> Result<T> {
    Err(HbaseError::do_not_retry(message))
}

fn printable(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// ---- reads ----

/// HBase's time range `[from, to)`; `to` at or beyond `Long.MAX_VALUE` (HBase's "all time")
/// is unbounded.
pub(crate) fn time_range(t: Option<&hbase::TimeRange>) -> Result<TimeRange> {
    let Some(t) = t else {
        return Ok(TimeRange::ALL);
    };
    let min = t.from.unwrap_or(0);
    let max = match t.to {
        None => u64::MAX,
        Some(to) if to >= LATEST_TIMESTAMP => u64::MAX,
        Some(to) => to,
    };
    if min > max {
        return refuse(format!("time range from {min} is above to {max}"));
    }
    Ok(TimeRange { min, max })
}

/// `Column{family, qualifiers}` lists: a family without qualifiers means the whole family.
fn columns(cols: &[hbase::Column]) -> Result<Vec<Column>> {
    let mut out = Vec::new();
    for c in cols {
        if c.family.is_empty() {
            return refuse("a column names an empty family");
        }
        if c.qualifier.is_empty() {
            out.push(Column {
                family: c.family.clone(),
                qualifier: None,
            });
        }
        for q in &c.qualifier {
            out.push(Column {
                family: c.family.clone(),
                qualifier: Some(q.clone()),
            });
        }
    }
    Ok(out)
}

/// Per-family time ranges and per-family limits have no Cellar equivalent.
fn refuse_unsupported_read_options(
    what: &str,
    cf_time_range: &[hbase::ColumnFamilyTimeRange],
    store_limit: Option<u32>,
    store_offset: Option<u32>,
) -> Result<()> {
    if !cf_time_range.is_empty() {
        return refuse(format!(
            "{what}: per-family time ranges (setColumnFamilyTimeRange) are not supported by Cellar"
        ));
    }
    if store_limit.is_some_and(|l| l != u32::MAX) || store_offset.is_some_and(|o| o > 0) {
        return refuse(format!(
            "{what}: per-family result limits (setMaxResultsPerColumnFamily/setRowOffsetPerColumnFamily) are not supported by Cellar"
        ));
    }
    Ok(())
}

/// HBase 2's answer to `Get.closest_row_before` (the old `getClosestRowBefore`, which HBase
/// 1 turned into a reversed scan of one row): HBase 2.0 removed it, and HBase 2.6's region
/// server refuses it, in Get and in each Multi action, with `UnknownProtocolException` (a
/// `DoNotRetryIOException`). The class is what matters: AsyncHBase (OpenTSDB) tries the Get
/// first and switches to reversed scans of `hbase:meta` only on this class (HBASE-20225);
/// any other error fails its region lookups.
pub(crate) fn closest_row_before_refused() -> HbaseError {
    HbaseError::new(
        super::exceptions::UNKNOWN_PROTOCOL,
        "Get.closest_row_before (getClosestRowBefore) was removed in HBase 2.0.0: \
         use a reversed Scan of one row (a pre-1.0 or AsyncHBase client?)",
        true,
    )
}

/// A Get, and whether only the row's existence is asked for.
pub(crate) fn get_from_hbase(g: &hbase::Get) -> Result<(Get, bool)> {
    if g.closest_row_before.unwrap_or(false) {
        return Err(closest_row_before_refused());
    }
    if g.row.is_empty() {
        return refuse("Get names an empty row");
    }
    refuse_unsupported_read_options("Get", &g.cf_time_range, g.store_limit, g.store_offset)?;
    let get = Get {
        row: g.row.clone(),
        columns: columns(&g.column)?,
        time_range: time_range(g.time_range.as_ref())?,
        max_versions: g.max_versions.unwrap_or(1).max(1),
        filter: g
            .filter
            .as_ref()
            .map(|f| filters::checked_filter_from_hbase(f, false))
            .transpose()?,
    };
    Ok((get, g.existence_only.unwrap_or(false)))
}

/// The row right after `row` in byte order.
fn successor(row: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(row.len() + 1);
    v.extend_from_slice(row);
    v.push(0);
    Bytes::from(v)
}

/// Adds a filter that runs before the client's own (so page filters count only rows inside
/// the bounds).
fn and_before(bound: Filter, user: Option<Filter>) -> Option<Filter> {
    Some(match user {
        None => bound,
        Some(Filter::List(ListOp::MustPassAll, mut members)) => {
            members.insert(0, bound);
            Filter::List(ListOp::MustPassAll, members)
        }
        Some(f) => Filter::List(ListOp::MustPassAll, vec![bound, f]),
    })
}

/// A Scan (the first message of a scanner). `limit` is the request's `limit_of_rows`.
///
/// Cellar's bounds are an inclusive start and an exclusive stop (for reversed scans: the row
/// to go down from and an exclusive lower bound). HBase's other combinations map as:
/// forward exclusive start → start's successor; forward inclusive stop → stop's successor;
/// reversed exclusive start → inclusive start plus a filter dropping that one row; reversed
/// inclusive stop → the stop without its last byte as the (exclusive) lower bound plus a
/// filter keeping rows ≥ stop, so only rows sharing that shorter prefix are read in vain.
pub(crate) fn scan_from_hbase(s: &hbase::Scan, limit: u32) -> Result<Scan> {
    refuse_unsupported_read_options("Scan", &s.cf_time_range, s.store_limit, s.store_offset)?;
    let reversed = s.reversed.unwrap_or(false);
    let mut start = s.start_row.clone().unwrap_or_default();
    let mut stop = s.stop_row.clone().unwrap_or_default();
    let include_start = s.include_start_row.unwrap_or(true);
    let include_stop = s.include_stop_row.unwrap_or(false);
    let mut filter = s
        .filter
        .as_ref()
        .map(|f| filters::checked_filter_from_hbase(f, reversed))
        .transpose()?;
    if !reversed {
        if !include_start && !start.is_empty() {
            start = successor(&start);
        }
        if include_stop && !stop.is_empty() {
            stop = successor(&stop);
        }
    } else {
        if !include_start && !start.is_empty() {
            let skip = Filter::Row(CompareOp::NotEqual, Comparator::Binary(start.clone()));
            filter = and_before(skip, filter);
        }
        if include_stop && !stop.is_empty() {
            let at_least = Filter::Row(CompareOp::GreaterOrEqual, Comparator::Binary(stop.clone()));
            filter = and_before(at_least, filter);
            stop = stop.slice(..stop.len() - 1);
        }
    }
    Ok(Scan {
        start_row: start,
        stop_row: stop,
        columns: columns(&s.column)?,
        time_range: time_range(s.time_range.as_ref())?,
        max_versions: s.max_versions.unwrap_or(1).max(1),
        limit: u64::from(limit),
        reversed,
        cache_blocks: s.cache_blocks.unwrap_or(true),
        filter,
        caching: s.caching.unwrap_or(0),
        batch: s.batch_size.unwrap_or(0),
        compress: false,
        // HBase's Scan.setRaw travels as the attribute `_raw_` (a boolean's byte).
        raw: s.attribute.iter().any(|a| {
            a.name == "_raw_"
                && a.value
                    .as_deref()
                    .is_some_and(|v| v.first() == Some(&0xff) || v == b"true")
        }),
        // HBase's synchronous client sends back the read point the region's first open
        // answered when it reopens the scan there (after a move or a lost scanner).
        read_point: s.mvcc_read_point.unwrap_or(0),
    })
}

// ---- writes ----

fn durability(d: Option<i32>) -> Result<Durability> {
    use hbase::mutation_proto::Durability as D;
    Ok(match d.map(D::try_from).unwrap_or(Ok(D::UseDefault)) {
        Ok(D::UseDefault) => Durability::UseDefault,
        Ok(D::SkipWal) => Durability::SkipWal,
        Ok(D::AsyncWal) => Durability::AsyncWal,
        Ok(D::SyncWal) => Durability::SyncWal,
        Ok(D::FsyncWal) => Durability::FsyncWal,
        Err(_) => return refuse(format!("unknown durability {}", d.unwrap_or(-1))),
    })
}

/// A decoded MutationProto.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HMutation {
    pub mutation: RowMutation,
    pub kind: MutationKind,
    /// A delete naming no column: every family of the row (the caller knows the families).
    pub whole_row_delete: bool,
    /// Increment/append: whether the client wants the new values back.
    pub return_results: bool,
    /// Increment/append: the versions the current value is read from (the proto's
    /// `time_range`, all time without it); everything else ignores it, as HBase does.
    pub read_range: TimeRange,
}

impl HMutation {
    pub fn is_put_or_delete(&self) -> bool {
        self.kind == MutationKind::PutDelete
    }

    /// Turns a whole-row delete into family deletes at its timestamp, one per family.
    pub fn expand_whole_row(&mut self, families: impl IntoIterator<Item = Bytes>, ts: u64) {
        if !self.whole_row_delete {
            return;
        }
        for family in families {
            self.mutation.entries.push(Entry {
                family,
                qualifier: Bytes::new(),
                timestamp: ts,
                cell_type: CellType::DeleteFamily,
                value: Bytes::new(),
            });
        }
        self.whole_row_delete = false;
    }
}

fn delete_type(t: Option<i32>) -> Result<CellType> {
    Ok(
        match t
            .map(DeleteType::try_from)
            .unwrap_or(Ok(DeleteType::DeleteOneVersion))
        {
            Ok(DeleteType::DeleteOneVersion) => CellType::Delete,
            Ok(DeleteType::DeleteMultipleVersions) => CellType::DeleteColumn,
            Ok(DeleteType::DeleteFamily) => CellType::DeleteFamily,
            Ok(DeleteType::DeleteFamilyVersion) => CellType::DeleteFamilyVersion,
            Err(_) => return refuse(format!("unknown delete type {}", t.unwrap_or(-1))),
        },
    )
}

/// The mutation's timestamp when the client gave none: HBase's "latest" (the server clock).
pub(crate) fn mutation_timestamp(m: &hbase::MutationProto) -> u64 {
    m.timestamp.unwrap_or(LATEST_TIMESTAMP)
}

/// A MutationProto. Its cells come from the proto's ColumnValues, or from the request's cell
/// block (`associated_cell_count` of them, taken from `cells` in request order), or both.
/// `nonce_group`: the request's (the client's); with the mutation's own nonce it names an
/// increment or append for retries (0 is no nonce, as in HBase).
pub(crate) fn mutation_from_hbase(
    m: &hbase::MutationProto,
    nonce_group: Option<u64>,
    cells: &mut CellReader,
) -> Result<HMutation> {
    // Cells are taken first so a bad mutation does not leave them for the next one.
    let count = m.associated_cell_count.unwrap_or(0);
    let block_cells = if count > 0 {
        cells
            .take(count as usize)
            .map_err(|e| HbaseError::malformed("request cell block", e))?
    } else {
        Vec::new()
    };
    let row = m.row.clone().unwrap_or_default();
    if row.is_empty() {
        return refuse("mutation names an empty row");
    }
    let mutate_type = m
        .mutate_type
        .ok_or_else(|| HbaseError::do_not_retry("mutation has no mutate_type"))?;
    let mutate_type = MutationType::try_from(mutate_type)
        .map_err(|_| HbaseError::do_not_retry(format!("unknown mutate_type {mutate_type}")))?;
    let kind = match mutate_type {
        MutationType::Put | MutationType::Delete => MutationKind::PutDelete,
        MutationType::Increment => MutationKind::Increment,
        MutationType::Append => MutationKind::Append,
    };
    let ts = mutation_timestamp(m);
    let mut entries = Vec::new();
    for c in block_cells {
        if c.row != row {
            return refuse(format!(
                "a cell of the mutation of row '{}' belongs to row '{}'",
                printable(&row),
                printable(&c.row)
            ));
        }
        let cell_type = match mutate_type {
            MutationType::Delete if c.cell_type == CellType::Put => {
                return refuse(format!(
                    "delete of row '{}' carries a put cell",
                    printable(&row)
                ))
            }
            MutationType::Delete => c.cell_type,
            _ if c.cell_type != CellType::Put => {
                return refuse(format!(
                    "{} of row '{}' carries a delete cell",
                    mutate_type.as_str_name(),
                    printable(&row)
                ))
            }
            _ => CellType::Put,
        };
        entries.push(entry(
            c.family,
            c.qualifier,
            c.timestamp,
            cell_type,
            c.value,
        ));
    }
    for cv in &m.column_value {
        if cv.family.is_empty() {
            return refuse(format!(
                "mutation of row '{}' names an empty family",
                printable(&row)
            ));
        }
        for qv in &cv.qualifier_value {
            let cell_type = match mutate_type {
                MutationType::Delete => delete_type(qv.delete_type)?,
                _ => CellType::Put,
            };
            entries.push(entry(
                cv.family.clone(),
                qv.qualifier.clone().unwrap_or_default(),
                qv.timestamp.unwrap_or(ts),
                cell_type,
                qv.value.clone().unwrap_or_default(),
            ));
        }
    }
    let whole_row_delete = mutate_type == MutationType::Delete && entries.is_empty();
    if entries.is_empty() && !whole_row_delete {
        return refuse(format!(
            "{} of row '{}' has no cells",
            mutate_type.as_str_name(),
            printable(&row)
        ));
    }
    let read_range = match kind {
        MutationKind::Increment | MutationKind::Append => time_range(m.time_range.as_ref())?,
        _ => TimeRange::ALL,
    };
    let return_results = m
        .attribute
        .iter()
        .find(|a| a.name == RETURN_RESULTS_ATTRIBUTE)
        .and_then(|a| a.value.as_ref())
        .is_none_or(|v| v.first().is_some_and(|b| *b != 0));
    Ok(HMutation {
        mutation: RowMutation {
            row,
            entries,
            durability: durability(m.durability)?,
            nonce: m.nonce.filter(|&n| n != 0).map(|nonce| Nonce {
                group: nonce_group.unwrap_or(0),
                nonce,
            }),
            cluster_ids: Vec::new(),
        },
        kind,
        whole_row_delete,
        return_results,
        read_range,
    })
}

/// Family-wide deletes live under the empty qualifier, whatever the client sent.
fn entry(
    family: Bytes,
    qualifier: Bytes,
    timestamp: u64,
    cell_type: CellType,
    value: Bytes,
) -> Entry {
    let qualifier = if cell_type.is_family_delete() {
        Bytes::new()
    } else {
        qualifier
    };
    let value = if cell_type.is_delete() {
        Bytes::new()
    } else {
        value
    };
    Entry {
        family,
        qualifier,
        timestamp,
        cell_type,
        value,
    }
}

/// HBase's check-and-mutate compares the operand against the stored value
/// (`operand op stored`, `HRegion.checkAndMutate`), Cellar's the other way round
/// (`stored op operand`): the order-sensitive operators swap.
fn condition_op(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Less => CompareOp::Greater,
        CompareOp::LessOrEqual => CompareOp::GreaterOrEqual,
        CompareOp::Greater => CompareOp::Less,
        CompareOp::GreaterOrEqual => CompareOp::LessOrEqual,
        other => other,
    }
}

/// A check-and-mutate condition on one column with a binary comparator. An empty operand is
/// HBase's "null": the column must be absent (or empty). Filter conditions and time-ranged
/// conditions are refused: Cellar checks a column's newest value only.
/// A checkAndMutate condition: a column compared with a value, or a filter on the row.
#[derive(Debug, Clone)]
pub(crate) enum HCondition {
    Column(Condition),
    RowFilter { row: Bytes, filter: Filter },
}

impl HCondition {
    pub(crate) fn check(&self) -> Check<'_> {
        match self {
            HCondition::Column(c) => Check::Column(c),
            HCondition::RowFilter { row, filter } => Check::RowFilter { row, filter },
        }
    }
}

pub(crate) fn condition_from_hbase(c: &hbase::Condition) -> Result<HCondition> {
    if time_range(c.time_range.as_ref())? != TimeRange::ALL {
        return refuse("checkAndMutate with a time range is not supported by Cellar");
    }
    if let Some(f) = &c.filter {
        return Ok(HCondition::RowFilter {
            row: c.row.clone(),
            filter: filters::checked_filter_from_hbase(f, false)?,
        });
    }
    column_condition(c).map(HCondition::Column)
}

fn column_condition(c: &hbase::Condition) -> Result<Condition> {
    if time_range(c.time_range.as_ref())? != TimeRange::ALL {
        return refuse("checkAndMutate with a time range is not supported by Cellar");
    }
    let family = c.family.clone().unwrap_or_default();
    if family.is_empty() {
        return refuse("checkAndMutate condition names no family");
    }
    let op = filters::compare_op(c.compare_type.ok_or_else(|| {
        HbaseError::do_not_retry("checkAndMutate condition has no compare_type")
    })?)?;
    let value = match &c.comparator {
        None => None,
        Some(cmp) => match filters::comparator_from_hbase(cmp)? {
            Comparator::Binary(v) => (!v.is_empty()).then_some(v),
            _ => {
                return refuse(format!(
                    "checkAndMutate with comparator {} is not supported by Cellar (only BinaryComparator)",
                    cmp.name
                ))
            }
        },
    };
    Ok(Condition {
        row: c.row.clone(),
        family,
        qualifier: c.qualifier.clone().unwrap_or_default(),
        op: condition_op(op),
        value,
    })
}

// ---- results ----

fn cell_to_hbase(c: &Cell) -> hbase::Cell {
    hbase::Cell {
        row: Some(c.row.clone()),
        family: Some(c.family.clone()),
        qualifier: Some(c.qualifier.clone()),
        timestamp: Some(c.timestamp),
        cell_type: Some(i32::from(c.cell_type.code())),
        value: Some(c.value.clone()),
        tags: None,
    }
}

/// A result: its cells go to the response cell block (`associated_cell_count`) when the
/// connection negotiated a codec, otherwise inside the message.
pub(crate) fn result_to_hbase(
    cells: &[Cell],
    partial: bool,
    cell_blocks: bool,
    out: &mut BytesMut,
) -> hbase::Result {
    let mut r = hbase::Result {
        partial: partial.then_some(true),
        ..Default::default()
    };
    if cell_blocks {
        // One reservation for the whole block instead of a regrowth every few cells.
        out.reserve(
            cells
                .iter()
                .map(|c| cellblock::encoded_len(&c.row, &c.family, &c.qualifier, &c.value))
                .sum(),
        );
        for c in cells {
            cellblock::put(out, c);
        }
        r.associated_cell_count = Some(cells.len() as i32);
    } else {
        r.cell = cells.iter().map(cell_to_hbase).collect();
    }
    r
}

/// The answer to an existence-only Get.
pub(crate) fn exists_result(exists: bool) -> hbase::Result {
    hbase::Result {
        exists: Some(exists),
        ..Default::default()
    }
}

/// Cells carried inside a Result (tests and clients decoding non-cell-block answers).
#[cfg(test)]
pub(crate) fn cells_from_hbase(r: &hbase::Result) -> Vec<Cell> {
    r.cell
        .iter()
        .map(|c| Cell {
            row: c.row.clone().unwrap_or_default(),
            family: c.family.clone().unwrap_or_default(),
            qualifier: c.qualifier.clone().unwrap_or_default(),
            timestamp: c.timestamp.unwrap_or(0),
            cell_type: CellType::from_code(c.cell_type.unwrap_or(4) as u8).unwrap_or(CellType::Put),
            seq_id: 0,
            value: c.value.clone().unwrap_or_default(),
        })
        .collect()
}
