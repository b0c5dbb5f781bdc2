//! Conversions between the data model and the wire messages. `*_to_pb` never fails;
//! `*_from_pb` checks what a peer sent and names the first bad field.

use crate::cellblock::{self, CellReader};
use crate::pb;
use bytes::{Bytes, BytesMut};
use cellar_model::filter::{Comparator, CompareOp, Condition, Filter, FuzzyKey, ListOp, RowRange};
use cellar_model::status::{RegionLoad, ServerLoad, ServerStatus};
use cellar_model::MutationKind;
use cellar_model::{
    BloomType, Cell, CellType, Column, Compression, Durability, Entry, FamilySchema, Get,
    RowMutation, Scan, TableSchema, TimeRange,
};
use std::time::Duration;

/// A message that does not describe a valid request or response.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ConvertError(pub String);

type Result<T> = std::result::Result<T, ConvertError>;

fn bad<T>(msg: impl Into<String>) -> Result<T> {
    Err(ConvertError(msg.into()))
}

// ---- reads ----

pub fn column_to_pb(c: &Column) -> pb::Column {
    pb::Column {
        family: c.family.clone(),
        qualifier: c.qualifier.clone(),
    }
}

pub fn column_from_pb(c: pb::Column) -> Result<Column> {
    if c.family.is_empty() {
        return bad("column names an empty family");
    }
    Ok(Column {
        family: c.family,
        qualifier: c.qualifier,
    })
}

pub fn time_range_to_pb(t: &TimeRange) -> pb::TimeRange {
    pb::TimeRange {
        min: t.min,
        max: (t.max != u64::MAX).then_some(t.max),
    }
}

pub fn time_range_from_pb(t: Option<pb::TimeRange>) -> Result<TimeRange> {
    let Some(t) = t else {
        return Ok(TimeRange::ALL);
    };
    let max = t.max.unwrap_or(u64::MAX);
    if t.min > max {
        return bad(format!("time range min {} is above max {max}", t.min));
    }
    Ok(TimeRange { min: t.min, max })
}

pub fn get_to_pb(g: &Get) -> pb::Get {
    pb::Get {
        row: g.row.clone(),
        columns: g.columns.iter().map(column_to_pb).collect(),
        time_range: Some(time_range_to_pb(&g.time_range)),
        max_versions: g.max_versions,
        filter: g.filter.as_ref().map(filter_to_pb),
    }
}

pub fn get_from_pb(g: pb::Get) -> Result<Get> {
    Ok(Get {
        row: g.row,
        columns: g
            .columns
            .into_iter()
            .map(column_from_pb)
            .collect::<Result<_>>()?,
        time_range: time_range_from_pb(g.time_range)?,
        max_versions: g.max_versions.max(1),
        filter: g.filter.map(checked_filter_from_pb).transpose()?,
    })
}

/// `caching` is the client's business and does not travel.
pub fn scan_to_pb(s: &Scan) -> pb::Scan {
    pb::Scan {
        start_row: s.start_row.clone(),
        stop_row: s.stop_row.clone(),
        columns: s.columns.iter().map(column_to_pb).collect(),
        time_range: Some(time_range_to_pb(&s.time_range)),
        max_versions: s.max_versions,
        limit: s.limit,
        reversed: s.reversed,
        cache_blocks: s.cache_blocks,
        filter: s.filter.as_ref().map(filter_to_pb),
        batch: s.batch,
        raw: s.raw,
    }
}

pub fn scan_from_pb(s: pb::Scan) -> Result<Scan> {
    Ok(Scan {
        start_row: s.start_row,
        stop_row: s.stop_row,
        columns: s
            .columns
            .into_iter()
            .map(column_from_pb)
            .collect::<Result<_>>()?,
        time_range: time_range_from_pb(s.time_range)?,
        max_versions: s.max_versions.max(1),
        limit: s.limit,
        reversed: s.reversed,
        cache_blocks: s.cache_blocks,
        filter: s.filter.map(checked_filter_from_pb).transpose()?,
        caching: 0,
        batch: s.batch,
        compress: false,
        raw: s.raw,
        // The native protocol carries no read point: its scans read what is committed when
        // each region's scanner opens.
        read_point: 0,
    })
}

/// Appends a result's cells to `cells` and describes them.
pub fn result_to_pb(row_cells: &[Cell], partial: bool, cells: &mut BytesMut) -> pb::Result {
    for c in row_cells {
        cellblock::put(cells, c);
    }
    pb::Result {
        cell_count: row_cells.len() as u32,
        partial,
    }
}

/// Takes a result's cells from the response's cell block.
pub fn result_from_pb(r: &pb::Result, cells: &mut CellReader) -> Result<Vec<Cell>> {
    cells
        .take(r.cell_count as usize)
        .map_err(|e| ConvertError(e.to_string()))
}

// ---- writes ----

pub fn durability_to_pb(d: Durability) -> pb::Durability {
    match d {
        Durability::UseDefault => pb::Durability::UseDefault,
        Durability::SkipWal => pb::Durability::SkipWal,
        Durability::AsyncWal => pb::Durability::AsyncWal,
        Durability::SyncWal => pb::Durability::SyncWal,
        Durability::FsyncWal => pb::Durability::FsyncWal,
    }
}

pub fn durability_from_pb(d: i32) -> Result<Durability> {
    Ok(match pb::Durability::try_from(d) {
        Ok(pb::Durability::UseDefault) => Durability::UseDefault,
        Ok(pb::Durability::SkipWal) => Durability::SkipWal,
        Ok(pb::Durability::AsyncWal) => Durability::AsyncWal,
        Ok(pb::Durability::SyncWal) => Durability::SyncWal,
        Ok(pb::Durability::FsyncWal) => Durability::FsyncWal,
        Err(_) => return bad(format!("unknown durability {d}")),
    })
}

/// The wire's name for a mutation kind.
pub fn mutation_kind_to_pb(kind: MutationKind) -> pb::MutationKind {
    match kind {
        MutationKind::PutDelete => pb::MutationKind::PutDelete,
        MutationKind::Increment => pb::MutationKind::Increment,
        MutationKind::Append => pb::MutationKind::Append,
    }
}

/// Describes a row mutation and appends its entries to the request's cell block. `kind` says
/// how the entries' values are read (for increments, 8-byte big-endian amounts).
pub fn mutation_to_pb(m: &RowMutation, kind: MutationKind, cells: &mut BytesMut) -> pb::Mutation {
    for e in &m.entries {
        cellblock::put_cell(
            cells,
            &m.row,
            &e.family,
            &e.qualifier,
            e.timestamp,
            e.cell_type,
            &e.value,
        );
    }
    pb::Mutation {
        row: m.row.clone(),
        kind: mutation_kind_to_pb(kind) as i32,
        cell_count: m.entries.len() as u32,
        durability: durability_to_pb(m.durability) as i32,
        cluster_ids: m
            .cluster_ids
            .iter()
            .map(|id| Bytes::copy_from_slice(&id.to_be_bytes()))
            .collect(),
    }
}

/// The most cluster ids one mutation may carry (a chain of replication peers).
pub const MAX_CLUSTER_IDS: usize = 64;

/// Reads a mutation's entries from the request's cell block; every cell must be of the
/// mutation's row.
pub fn mutation_from_pb(
    m: &pb::Mutation,
    cells: &mut CellReader,
) -> Result<(RowMutation, MutationKind)> {
    let kind = match pb::MutationKind::try_from(m.kind) {
        Ok(pb::MutationKind::PutDelete) => MutationKind::PutDelete,
        Ok(pb::MutationKind::Increment) => MutationKind::Increment,
        Ok(pb::MutationKind::Append) => MutationKind::Append,
        Ok(pb::MutationKind::Unspecified) | Err(_) => {
            return bad(format!("unknown mutation kind {}", m.kind))
        }
    };
    if m.row.is_empty() {
        return bad("mutation of an empty row key");
    }
    // `cell_count` comes from the peer: the buffer is sized by what the block can hold.
    let mut entries = Vec::with_capacity((m.cell_count as usize).min(cells.max_cells()));
    for c in cells
        .take(m.cell_count as usize)
        .map_err(|e| ConvertError(e.to_string()))?
    {
        if c.row != m.row {
            return bad(format!(
                "a cell of row {:?} inside the mutation of row {:?}",
                String::from_utf8_lossy(&c.row),
                String::from_utf8_lossy(&m.row)
            ));
        }
        if kind != MutationKind::PutDelete && c.cell_type != CellType::Put {
            return bad("increment and append cells must be of type Put");
        }
        if kind == MutationKind::Increment && c.value.len() != 8 {
            return bad(format!(
                "increment amount must be 8 bytes (a big-endian i64), got {}",
                c.value.len()
            ));
        }
        entries.push(Entry {
            family: c.family,
            qualifier: c.qualifier,
            timestamp: c.timestamp,
            cell_type: c.cell_type,
            value: c.value,
        });
    }
    Ok((
        RowMutation {
            row: m.row.clone(),
            entries,
            durability: durability_from_pb(m.durability)?,
            nonce: None,
            cluster_ids: cluster_ids_from_pb(&m.cluster_ids)?,
        },
        kind,
    ))
}

fn cluster_ids_from_pb(ids: &[Bytes]) -> Result<Vec<u128>> {
    if ids.len() > MAX_CLUSTER_IDS {
        return bad(format!(
            "{} cluster ids on one mutation; at most {MAX_CLUSTER_IDS}",
            ids.len()
        ));
    }
    ids.iter()
        .map(|id| match <[u8; 16]>::try_from(id.as_ref()) {
            Ok(b) => Ok(u128::from_be_bytes(b)),
            Err(_) => bad(format!("a cluster id of {} bytes; a UUID is 16", id.len())),
        })
        .collect()
}

pub fn condition_to_pb(c: &Condition) -> pb::Condition {
    pb::Condition {
        row: c.row.clone(),
        family: c.family.clone(),
        qualifier: c.qualifier.clone(),
        op: compare_op_to_pb(c.op) as i32,
        value: c.value.clone(),
    }
}

pub fn condition_from_pb(c: pb::Condition) -> Result<Condition> {
    Ok(Condition {
        row: c.row,
        family: c.family,
        qualifier: c.qualifier,
        op: compare_op_from_pb(c.op)?,
        value: c.value,
    })
}

// ---- filters ----

pub fn compare_op_to_pb(op: CompareOp) -> pb::CompareOp {
    match op {
        CompareOp::Less => pb::CompareOp::Less,
        CompareOp::LessOrEqual => pb::CompareOp::LessOrEqual,
        CompareOp::Equal => pb::CompareOp::Equal,
        CompareOp::NotEqual => pb::CompareOp::NotEqual,
        CompareOp::GreaterOrEqual => pb::CompareOp::GreaterOrEqual,
        CompareOp::Greater => pb::CompareOp::Greater,
        CompareOp::NoOp => pb::CompareOp::NoOp,
    }
}

pub fn compare_op_from_pb(op: i32) -> Result<CompareOp> {
    Ok(match pb::CompareOp::try_from(op) {
        Ok(pb::CompareOp::Less) => CompareOp::Less,
        Ok(pb::CompareOp::LessOrEqual) => CompareOp::LessOrEqual,
        Ok(pb::CompareOp::Equal) => CompareOp::Equal,
        Ok(pb::CompareOp::NotEqual) => CompareOp::NotEqual,
        Ok(pb::CompareOp::GreaterOrEqual) => CompareOp::GreaterOrEqual,
        Ok(pb::CompareOp::Greater) => CompareOp::Greater,
        Ok(pb::CompareOp::NoOp) => CompareOp::NoOp,
        Err(_) => return bad(format!("unknown compare op {op}")),
    })
}

fn comparator_to_pb(c: &Comparator) -> pb::Comparator {
    use pb::comparator::Kind;
    pb::Comparator {
        kind: Some(match c {
            Comparator::Binary(b) => Kind::Binary(b.clone()),
            Comparator::BinaryPrefix(b) => Kind::BinaryPrefix(b.clone()),
            Comparator::Substring(s) => Kind::Substring(s.clone()),
            Comparator::Regex(s) => Kind::Regex(s.clone()),
        }),
    }
}

fn comparator_from_pb(c: Option<pb::Comparator>) -> Result<Comparator> {
    use pb::comparator::Kind;
    Ok(match c.and_then(|c| c.kind) {
        Some(Kind::Binary(b)) => Comparator::Binary(b),
        Some(Kind::BinaryPrefix(b)) => Comparator::BinaryPrefix(b),
        Some(Kind::Substring(s)) => Comparator::Substring(s),
        Some(Kind::Regex(s)) => Comparator::Regex(s),
        None => return bad("filter has no comparator"),
    })
}

fn compare_to_pb(op: CompareOp, c: &Comparator) -> pb::CompareFilter {
    pb::CompareFilter {
        op: compare_op_to_pb(op) as i32,
        comparator: Some(comparator_to_pb(c)),
    }
}

fn compare_from_pb(f: pb::CompareFilter) -> Result<(CompareOp, Comparator)> {
    Ok((compare_op_from_pb(f.op)?, comparator_from_pb(f.comparator)?))
}

pub fn filter_to_pb(f: &Filter) -> pb::Filter {
    use pb::filter::Kind;
    let kind = match f {
        Filter::Prefix(p) => Kind::Prefix(p.clone()),
        Filter::ColumnPrefix(p) => Kind::ColumnPrefix(p.clone()),
        Filter::ColumnRange {
            min,
            min_inclusive,
            max,
            max_inclusive,
        } => Kind::ColumnRange(pb::ColumnRangeFilter {
            min: min.clone(),
            min_inclusive: *min_inclusive,
            max: max.clone(),
            max_inclusive: *max_inclusive,
        }),
        Filter::Row(op, c) => Kind::Row(compare_to_pb(*op, c)),
        Filter::Family(op, c) => Kind::Family(compare_to_pb(*op, c)),
        Filter::Qualifier(op, c) => Kind::Qualifier(compare_to_pb(*op, c)),
        Filter::Value(op, c) => Kind::Value(compare_to_pb(*op, c)),
        Filter::SingleColumnValue {
            family,
            qualifier,
            op,
            comparator,
            filter_if_missing,
            latest_version_only,
        } => Kind::SingleColumnValue(pb::SingleColumnValueFilter {
            family: family.clone(),
            qualifier: qualifier.clone(),
            op: compare_op_to_pb(*op) as i32,
            comparator: Some(comparator_to_pb(comparator)),
            filter_if_missing: *filter_if_missing,
            latest_version_only: *latest_version_only,
        }),
        Filter::KeyOnly { len_as_value } => Kind::KeyOnly(pb::KeyOnlyFilter {
            len_as_value: *len_as_value,
        }),
        Filter::FirstKeyOnly => Kind::FirstKeyOnly(pb::Empty {}),
        Filter::Page(n) => Kind::Page(*n),
        Filter::RowRanges(ranges) => Kind::RowRanges(pb::RowRangesFilter {
            ranges: ranges
                .iter()
                .map(|r| pb::RowRange {
                    start: r.start.clone(),
                    start_inclusive: r.start_inclusive,
                    stop: r.stop.clone(),
                    stop_inclusive: r.stop_inclusive,
                })
                .collect(),
        }),
        Filter::ColumnPage {
            limit,
            offset,
            column_offset,
        } => Kind::ColumnPage(pb::ColumnPageFilter {
            limit: *limit,
            offset: *offset,
            column_offset: column_offset.clone(),
        }),
        Filter::Skip(inner) => Kind::Skip(Box::new(filter_to_pb(inner))),
        Filter::WhileMatch(inner) => Kind::WhileMatch(Box::new(filter_to_pb(inner))),
        Filter::FuzzyRow(keys) => Kind::FuzzyRow(pb::FuzzyRowFilter {
            keys: keys
                .iter()
                .map(|k| pb::FuzzyKey {
                    key: k.key.clone(),
                    mask: k.mask.clone(),
                })
                .collect(),
        }),
        Filter::ColumnCount(limit) => Kind::ColumnCount(*limit),
        Filter::Timestamps(ts) => Kind::Timestamps(pb::TimestampsFilter {
            timestamps: ts.clone(),
        }),
        Filter::List(op, filters) => Kind::List(pb::FilterList {
            must_pass_one: *op == ListOp::MustPassOne,
            filters: filters.iter().map(filter_to_pb).collect(),
        }),
    };
    pb::Filter { kind: Some(kind) }
}

/// [`filter_from_pb`], then [`Filter::validate`] (regular expressions compile, ...).
pub fn checked_filter_from_pb(f: pb::Filter) -> Result<Filter> {
    let f = filter_from_pb(f)?;
    f.validate().map_err(|e| ConvertError(e.to_string()))?;
    Ok(f)
}

pub fn filter_from_pb(f: pb::Filter) -> Result<Filter> {
    use pb::filter::Kind;
    Ok(match f.kind {
        None => return bad("filter of no known kind"),
        Some(Kind::Prefix(p)) => Filter::Prefix(p),
        Some(Kind::ColumnPrefix(p)) => Filter::ColumnPrefix(p),
        Some(Kind::ColumnRange(r)) => Filter::ColumnRange {
            min: r.min,
            min_inclusive: r.min_inclusive,
            max: r.max,
            max_inclusive: r.max_inclusive,
        },
        Some(Kind::Row(c)) => {
            let (op, c) = compare_from_pb(c)?;
            Filter::Row(op, c)
        }
        Some(Kind::Family(c)) => {
            let (op, c) = compare_from_pb(c)?;
            Filter::Family(op, c)
        }
        Some(Kind::Qualifier(c)) => {
            let (op, c) = compare_from_pb(c)?;
            Filter::Qualifier(op, c)
        }
        Some(Kind::Value(c)) => {
            let (op, c) = compare_from_pb(c)?;
            Filter::Value(op, c)
        }
        Some(Kind::SingleColumnValue(s)) => Filter::SingleColumnValue {
            family: s.family,
            qualifier: s.qualifier,
            op: compare_op_from_pb(s.op)?,
            comparator: comparator_from_pb(s.comparator)?,
            filter_if_missing: s.filter_if_missing,
            latest_version_only: s.latest_version_only,
        },
        Some(Kind::KeyOnly(k)) => Filter::KeyOnly {
            len_as_value: k.len_as_value,
        },
        Some(Kind::FirstKeyOnly(_)) => Filter::FirstKeyOnly,
        Some(Kind::Page(n)) => Filter::Page(n),
        Some(Kind::ColumnPage(p)) => Filter::ColumnPage {
            limit: p.limit,
            offset: p.offset,
            column_offset: p.column_offset,
        },
        Some(Kind::Skip(inner)) => Filter::Skip(Box::new(filter_from_pb(*inner)?)),
        Some(Kind::WhileMatch(inner)) => Filter::WhileMatch(Box::new(filter_from_pb(*inner)?)),
        Some(Kind::FuzzyRow(f)) => Filter::FuzzyRow(
            f.keys
                .into_iter()
                .map(|k| FuzzyKey {
                    key: k.key,
                    mask: k.mask,
                })
                .collect(),
        ),
        Some(Kind::Timestamps(t)) => Filter::Timestamps(t.timestamps),
        Some(Kind::ColumnCount(limit)) => Filter::ColumnCount(limit),
        Some(Kind::RowRanges(r)) => Filter::RowRanges(
            r.ranges
                .into_iter()
                .map(|r| RowRange {
                    start: r.start,
                    start_inclusive: r.start_inclusive,
                    stop: r.stop,
                    stop_inclusive: r.stop_inclusive,
                })
                .collect(),
        ),
        Some(Kind::List(l)) => Filter::List(
            if l.must_pass_one {
                ListOp::MustPassOne
            } else {
                ListOp::MustPassAll
            },
            l.filters
                .into_iter()
                .map(filter_from_pb)
                .collect::<Result<_>>()?,
        ),
    })
}

// ---- schemas ----

pub fn family_to_pb(f: &FamilySchema) -> pb::FamilySchema {
    pb::FamilySchema {
        name: f.name.clone(),
        max_versions: f.max_versions,
        min_versions: f.min_versions,
        ttl_secs: f.ttl_secs,
        compression: match f.compression {
            Compression::None => pb::Compression::None,
            Compression::Lz4 => pb::Compression::Lz4,
            Compression::Zstd => pb::Compression::Zstd,
            Compression::Snappy => pb::Compression::Snappy,
        } as i32,
        bloom: match f.bloom {
            BloomType::None => pb::BloomType::None,
            BloomType::Row => pb::BloomType::Row,
            BloomType::RowCol => pb::BloomType::RowCol,
        } as i32,
        bloom_bits_per_key: f.bloom_bits_per_key,
        block_size: f.block_size,
        in_memory: f.in_memory,
        query_cache: f.query_cache,
        keep_deleted_cells: f.keep_deleted_cells,
    }
}

/// Zero numeric options take HBase's defaults, so a sparse message means "defaults".
pub fn family_from_pb(f: pb::FamilySchema) -> Result<FamilySchema> {
    let d = FamilySchema::new(f.name.clone());
    Ok(FamilySchema {
        max_versions: if f.max_versions == 0 {
            d.max_versions
        } else {
            f.max_versions
        },
        min_versions: f.min_versions,
        ttl_secs: f.ttl_secs,
        compression: match pb::Compression::try_from(f.compression) {
            Ok(pb::Compression::None) => Compression::None,
            Ok(pb::Compression::Lz4) => Compression::Lz4,
            Ok(pb::Compression::Zstd) => Compression::Zstd,
            Ok(pb::Compression::Snappy) => Compression::Snappy,
            Err(_) => {
                return bad(format!(
                    "family '{}': unknown compression {}",
                    f.name, f.compression
                ))
            }
        },
        bloom: match pb::BloomType::try_from(f.bloom) {
            Ok(pb::BloomType::None) => BloomType::None,
            Ok(pb::BloomType::Row) => BloomType::Row,
            Ok(pb::BloomType::RowCol) => BloomType::RowCol,
            Err(_) => {
                return bad(format!(
                    "family '{}': unknown bloom type {}",
                    f.name, f.bloom
                ))
            }
        },
        bloom_bits_per_key: if f.bloom_bits_per_key == 0 {
            d.bloom_bits_per_key
        } else {
            f.bloom_bits_per_key
        },
        block_size: if f.block_size == 0 {
            d.block_size
        } else {
            f.block_size
        },
        in_memory: f.in_memory,
        query_cache: f.query_cache,
        keep_deleted_cells: f.keep_deleted_cells,
        name: f.name,
    })
}

pub fn options_to_pb(o: &cellar_model::TableOptions) -> pb::TableOptions {
    pb::TableOptions {
        max_file_size: o.max_file_size.unwrap_or(0),
        durability: durability_to_pb(o.durability) as i32,
        read_only: o.read_only,
    }
}

pub fn options_from_pb(o: pb::TableOptions) -> Result<cellar_model::TableOptions> {
    Ok(cellar_model::TableOptions {
        max_file_size: (o.max_file_size > 0).then_some(o.max_file_size),
        durability: durability_from_pb(o.durability)?,
        read_only: o.read_only,
    })
}

pub fn schema_to_pb(s: &TableSchema) -> pb::TableSchema {
    pb::TableSchema {
        name: s.name.clone(),
        families: s.families.iter().map(family_to_pb).collect(),
        max_file_size: s.options.max_file_size.unwrap_or(0),
        durability: durability_to_pb(s.options.durability) as i32,
        read_only: s.options.read_only,
    }
}

pub fn schema_from_pb(s: pb::TableSchema) -> Result<TableSchema> {
    Ok(TableSchema {
        name: s.name,
        families: s
            .families
            .into_iter()
            .map(family_from_pb)
            .collect::<Result<_>>()?,
        options: cellar_model::TableOptions {
            max_file_size: (s.max_file_size > 0).then_some(s.max_file_size),
            durability: durability_from_pb(s.durability)?,
            read_only: s.read_only,
        },
    })
}

/// A row mutation of one put, for tests and examples.
pub fn single_put(row: &[u8], family: &[u8], qualifier: &[u8], value: &[u8]) -> RowMutation {
    RowMutation::new(Bytes::copy_from_slice(row)).put(
        family,
        qualifier,
        cellar_model::LATEST_TIMESTAMP,
        Bytes::copy_from_slice(value),
    )
}

/// STATUS as the server sends it.
pub fn status_to_pb(s: ServerStatus) -> pb::StatusResponse {
    pb::StatusResponse {
        version: s.version,
        uptime_ms: u64::try_from(s.uptime.as_millis()).unwrap_or(u64::MAX),
        tables: s.tables,
        regions: s.regions,
        requests: s.requests,
        memstore_bytes: s.memstore_bytes,
        store_file_bytes: s.store_file_bytes,
        block_cache_hits: s.block_cache_hits,
        block_cache_misses: s.block_cache_misses,
        data_dir: s.data_dir,
        server: s.server,
        role: s.role,
        servers: s.servers.into_iter().map(server_load_to_pb).collect(),
        dead_servers: s.dead_servers.into_iter().map(server_load_to_pb).collect(),
        balancer_on: s.balancer_on,
        region_loads: s
            .region_loads
            .into_iter()
            .map(|l| pb::RegionLoad {
                table: l.table,
                start_key: l.start_key,
                region_id: l.region_id,
                stores: l.stores,
                store_files: l.store_files,
                store_file_bytes: l.store_file_bytes,
                memstore_bytes: l.memstore_bytes,
                read_requests: l.read_requests,
                write_requests: l.write_requests,
            })
            .collect(),
        used_memory_bytes: s.used_memory_bytes,
        max_memory_bytes: s.max_memory_bytes,
    }
}

fn server_load_to_pb(l: ServerLoad) -> pb::ServerLoad {
    pb::ServerLoad {
        name: l.name,
        native_addr: l.native_addr,
        http_addr: l.http_addr,
        regions: l.regions,
    }
}

fn server_load_from_pb(l: pb::ServerLoad) -> ServerLoad {
    ServerLoad {
        name: l.name,
        native_addr: l.native_addr,
        http_addr: l.http_addr,
        regions: l.regions,
    }
}

/// STATUS as the client reads it.
pub fn status_from_pb(r: pb::StatusResponse) -> ServerStatus {
    ServerStatus {
        version: r.version,
        uptime: Duration::from_millis(r.uptime_ms),
        tables: r.tables,
        regions: r.regions,
        requests: r.requests,
        memstore_bytes: r.memstore_bytes,
        store_file_bytes: r.store_file_bytes,
        block_cache_hits: r.block_cache_hits,
        block_cache_misses: r.block_cache_misses,
        data_dir: r.data_dir,
        server: r.server,
        role: r.role,
        servers: r.servers.into_iter().map(server_load_from_pb).collect(),
        dead_servers: r
            .dead_servers
            .into_iter()
            .map(server_load_from_pb)
            .collect(),
        balancer_on: r.balancer_on,
        region_loads: r
            .region_loads
            .into_iter()
            .map(|l| RegionLoad {
                table: l.table,
                start_key: l.start_key,
                region_id: l.region_id,
                stores: l.stores,
                store_files: l.store_files,
                store_file_bytes: l.store_file_bytes,
                memstore_bytes: l.memstore_bytes,
                read_requests: l.read_requests,
                write_requests: l.write_requests,
            })
            .collect(),
        used_memory_bytes: r.used_memory_bytes,
        max_memory_bytes: r.max_memory_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_with_filters_round_trips() {
        let scan = Scan::new()
            .prefix(b"user1")
            .column(b"cf", b"q")
            .versions(3)
            .time_range(5, 100)
            .batch(10)
            .filter(Filter::List(
                ListOp::MustPassOne,
                vec![
                    Filter::Qualifier(CompareOp::Equal, Comparator::Regex("a.*".into())),
                    Filter::SingleColumnValue {
                        family: Bytes::from_static(b"cf"),
                        qualifier: Bytes::from_static(b"q"),
                        op: CompareOp::GreaterOrEqual,
                        comparator: Comparator::Binary(Bytes::from_static(b"5")),
                        filter_if_missing: true,
                        latest_version_only: true,
                    },
                    Filter::Page(3),
                    Filter::FirstKeyOnly,
                    Filter::ColumnPage {
                        limit: 4,
                        offset: 2,
                        column_offset: Some(Bytes::from_static(b"q")),
                    },
                    Filter::Skip(Box::new(Filter::Value(
                        CompareOp::NotEqual,
                        Comparator::Binary(Bytes::from_static(b"0")),
                    ))),
                    Filter::WhileMatch(Box::new(Filter::Prefix(Bytes::from_static(b"u")))),
                    Filter::FuzzyRow(vec![FuzzyKey {
                        key: Bytes::from_static(b"ab"),
                        mask: Bytes::from_static(&[1, 0]),
                    }]),
                    Filter::Timestamps(vec![7, 3]),
                    Filter::ColumnCount(2),
                ],
            ));
        assert_eq!(scan_from_pb(scan_to_pb(&scan)).expect("round trip"), scan);
    }

    #[test]
    fn a_bad_regex_is_refused_when_the_request_arrives() {
        let get = Get::new(Bytes::from_static(b"r")).filter(Filter::Value(
            CompareOp::Equal,
            Comparator::Regex("(unclosed".into()),
        ));
        let e = get_from_pb(get_to_pb(&get)).expect_err("bad regex");
        assert!(e.0.contains("(unclosed"), "{e}");
    }

    #[test]
    fn mutations_round_trip_through_a_cell_block() {
        let m = RowMutation::new(Bytes::from_static(b"r"))
            .put(b"cf", b"a", 7, Bytes::from_static(b"v"))
            .delete_column(b"cf", b"b", 9)
            .delete_family(b"cf2", 11);
        let mut cells = BytesMut::new();
        let p = mutation_to_pb(&m, MutationKind::PutDelete, &mut cells);
        let mut reader = CellReader::new(cells.freeze());
        let (back, kind) = mutation_from_pb(&p, &mut reader).expect("decodes");
        assert_eq!((back, kind), (m, MutationKind::PutDelete));
        let mut wrong = p.clone();
        wrong.row = Bytes::from_static(b"other");
        wrong.cell_count = 1;
        let mut cells = BytesMut::new();
        mutation_to_pb(
            &single_put(b"r", b"cf", b"q", b"v"),
            MutationKind::PutDelete,
            &mut cells,
        );
        let e = mutation_from_pb(&wrong, &mut CellReader::new(cells.freeze()))
            .expect_err("row mismatch");
        assert!(e.0.contains("inside the mutation of row"), "{e}");
    }

    #[test]
    fn schemas_round_trip_and_sparse_families_get_defaults() {
        let mut f = FamilySchema::new("cf");
        f.max_versions = 3;
        f.ttl_secs = Some(60);
        f.compression = Compression::Zstd;
        f.bloom = BloomType::RowCol;
        let s = TableSchema::new("t", vec![f, FamilySchema::new("g")]);
        assert_eq!(schema_from_pb(schema_to_pb(&s)).expect("round trip"), s);
        let sparse = pb::FamilySchema {
            name: "x".into(),
            ..Default::default()
        };
        assert_eq!(
            family_from_pb(sparse).expect("defaults"),
            FamilySchema::new("x")
        );
    }

    /// A replicated row sent on to the server of its region keeps the clusters it has been
    /// through; ids that are not UUIDs, or too many, are refused.
    #[test]
    fn cluster_ids_travel_with_a_mutation_and_bad_ones_are_refused() {
        let mut m = RowMutation::new(b"r".to_vec()).put(b"f", b"q", 1, b"v".to_vec());
        m.cluster_ids = vec![u128::MAX, 7];
        let mut cells = BytesMut::new();
        let pb = mutation_to_pb(&m, MutationKind::PutDelete, &mut cells);
        let (back, _) =
            mutation_from_pb(&pb, &mut CellReader::new(cells.clone().freeze())).expect("decodes");
        assert_eq!(back.cluster_ids, m.cluster_ids);
        let mut short = pb.clone();
        short.cluster_ids.push(Bytes::from_static(b"not16"));
        assert!(mutation_from_pb(&short, &mut CellReader::new(cells.clone().freeze())).is_err());
        let mut many = pb;
        many.cluster_ids = vec![Bytes::from(vec![0u8; 16]); MAX_CLUSTER_IDS + 1];
        assert!(mutation_from_pb(&many, &mut CellReader::new(cells.freeze())).is_err());
    }

    /// The count of a mutation's cells comes from the peer: u32::MAX of them in an empty cell
    /// block is an error, not a buffer of u32::MAX entries (what the `cellblock` fuzz target
    /// found in `CellReader::take`, which this conversion sized its buffer like).
    #[test]
    fn a_huge_cell_count_is_refused_without_allocating_for_it() {
        let m = pb::Mutation {
            row: Bytes::from_static(b"r"),
            kind: pb::MutationKind::PutDelete as i32,
            cell_count: u32::MAX,
            durability: 0,
            cluster_ids: vec![],
        };
        let e = mutation_from_pb(&m, &mut CellReader::new(Bytes::new())).expect_err("no cells");
        assert!(e.0.contains("expected 4294967295 cells"), "{e}");
    }
}
