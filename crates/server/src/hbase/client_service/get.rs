//! GET: one row of a user region or of `hbase:meta`; also the reactor's fast path for the
//! common Get ([`get_inline`]). A Get with `query_metrics_enabled` gets the bytes of store
//! file blocks its read went through (cached or not; 0 for rows only in memory and for
//! `hbase:meta`, computed from the catalog) in `Result.metrics`, as HBase 2.6.4 answers;
//! an existence-only Get gets none, as from HBase.

use super::{region, Call, Result};
use crate::hbase::meta_view;
use crate::hbase::names::RegionTarget;
use crate::hbase::{convert, CallCtx, HbaseService, Reply, Request};
use crate::region_server::ReactorRead;
use bytes::{Bytes, BytesMut};
use cellar_model::filter::FilterEval;
use cellar_model::{Cell, Get};
use cellar_proto::hbase;
use cellar_storage::storefile::block_bytes_scanned;

/// A Get as its decode half hands it on: the region and the row's selection.
#[derive(Debug, Clone)]
pub(crate) struct GetCall {
    pub(crate) region: RegionTarget,
    pub(crate) get: Get,
    /// Only whether the row exists is asked for.
    pub(crate) exists_only: bool,
    /// `query_metrics_enabled`: the answer says how many block bytes the read scanned.
    pub(crate) metrics: bool,
}

impl GetCall {
    /// The Get of `g` on `region`.
    pub(crate) fn new(region: RegionTarget, g: &hbase::Get) -> Result<GetCall> {
        let (get, exists_only) = convert::get_from_hbase(g)?;
        Ok(GetCall {
            region,
            get,
            exists_only,
            metrics: g.query_metrics_enabled == Some(true),
        })
    }
}

/// The decode half: a GetRequest (it carries no cells).
pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
    Ok(Call::Get(get_call(param)?).into())
}

fn get_call(param: Bytes) -> Result<GetCall> {
    let req: hbase::GetRequest = crate::hbase::message(param, "GetRequest")?;
    GetCall::new(region(&req.region)?, &req.get)
}

/// The execute half: the caller's permissions narrow the Get, then the row is read.
pub(crate) fn execute(svc: &HbaseService, ctx: &CallCtx, call: GetCall) -> Result<Reply> {
    let GetCall {
        region,
        mut get,
        exists_only,
        metrics,
    } = call;
    check_get(svc, ctx, &region, &mut get, "get")?;
    let (cells, scanned) = read_row_metered(svc, &region, &get, metrics)?;
    Ok(get_reply(ctx, &cells, exists_only, scanned))
}

/// A Get answered from memstores and the block cache
/// ([`crate::region_server::RegionServer::read_on_reactor`]), or `None` to send it to the
/// pool (meta, malformed requests and anything needing disk go there).
pub(crate) fn get_inline(
    svc: &HbaseService,
    ctx: &CallCtx,
    param: &Bytes,
) -> Option<Result<Reply>> {
    let GetCall {
        region: RegionTarget::User { table, region_id },
        get,
        exists_only,
        metrics,
    } = get_call(param.clone()).ok()?
    else {
        return None;
    };
    let into_block = ctx.cell_blocks && !exists_only;
    let scan_started = block_bytes_scanned();
    let read = match svc
        .rs
        .read_on_reactor(&ctx.caller, &table, region_id, get, into_block)?
    {
        Ok(read) => read,
        Err(e) => return Some(Err(e.into())),
    };
    let scanned = metrics.then(|| block_bytes_scanned().wrapping_sub(scan_started));
    Some(Ok(match read {
        // The common Get: cells went from the memstore or block straight into the answer.
        ReactorRead::Block { cell_count, block } => Reply::with_cells(
            &hbase::GetResponse {
                result: Some(hbase::Result {
                    associated_cell_count: Some(cell_count as i32),
                    metrics: scanned.map(query_metrics),
                    ..Default::default()
                }),
            },
            block,
        ),
        ReactorRead::Cells(cells) => get_reply(ctx, &cells, exists_only, scanned),
    }))
}

/// Narrows a Get of a user region to what the caller may see. Meta, as this front end
/// computes it, holds only table and region rows: every authenticated caller may read it.
pub(super) fn check_get(
    svc: &HbaseService,
    ctx: &CallCtx,
    target: &RegionTarget,
    get: &mut Get,
    what: &str,
) -> Result<()> {
    match target {
        RegionTarget::Meta => Ok(svc.rs.authz.authenticate(&ctx.caller)?),
        RegionTarget::User { table, .. } => {
            Ok(svc.rs.authz.check_get(&ctx.caller, table, get, what)?)
        }
    }
}

/// The cells a Get selects, from meta or a user region.
pub(super) fn read_row(svc: &HbaseService, target: &RegionTarget, get: &Get) -> Result<Vec<Cell>> {
    match target {
        RegionTarget::User { table, region_id } => Ok(svc.rs.get(table, *region_id, get)?),
        RegionTarget::Meta => {
            let mut families = Vec::new();
            let mut columns = Vec::new();
            for c in &get.columns {
                match &c.qualifier {
                    None => families.push(c.family.clone()),
                    Some(q) => columns.push((c.family.clone(), q.clone())),
                }
            }
            let cells = meta_view::get(svc, &get.row, &families, &columns)?;
            Ok(match &get.filter {
                Some(f) => FilterEval::new(f).filter_row(cells).unwrap_or_default(),
                None => cells,
            })
        }
    }
}

/// A Get's result: the cells, or only whether there are any; with `scanned`, the block
/// bytes the read went through (not for an existence-only Get, as HBase answers it).
pub(super) fn get_result(
    ctx: &CallCtx,
    cells: &[Cell],
    exists_only: bool,
    scanned: Option<u64>,
    out: &mut BytesMut,
) -> hbase::Result {
    if exists_only {
        convert::exists_result(!cells.is_empty())
    } else {
        hbase::Result {
            metrics: scanned.map(query_metrics),
            ..convert::result_to_hbase(cells, false, ctx.cell_blocks, out)
        }
    }
}

/// HBase's per-result query metrics: the store file block bytes a read went through.
pub(super) fn query_metrics(block_bytes_scanned: u64) -> hbase::QueryMetrics {
    hbase::QueryMetrics {
        block_bytes_scanned: Some(block_bytes_scanned),
    }
}

/// [`read_row`], and with `metrics` the block bytes it scanned.
pub(super) fn read_row_metered(
    svc: &HbaseService,
    target: &RegionTarget,
    get: &Get,
    metrics: bool,
) -> Result<(Vec<Cell>, Option<u64>)> {
    let scan_started = block_bytes_scanned();
    let cells = read_row(svc, target, get)?;
    Ok((
        cells,
        metrics.then(|| block_bytes_scanned().wrapping_sub(scan_started)),
    ))
}

fn get_reply(ctx: &CallCtx, cells: &[Cell], exists_only: bool, scanned: Option<u64>) -> Reply {
    let mut out = BytesMut::new();
    let result = get_result(ctx, cells, exists_only, scanned, &mut out);
    Reply::with_cells(
        &hbase::GetResponse {
            result: Some(result),
        },
        out,
    )
}
