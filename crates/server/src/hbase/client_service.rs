//! ClientService: Get, Mutate, Multi and Scan on user regions and on `hbase:meta`.
//!
//! Each call names its region by HBase's region name; [`names::parse_region`] says whether
//! that is meta (answered from [`meta_view`], read-only) or a user region (the same
//! [`RegionServer`](crate::region_server::RegionServer) methods the native protocol calls).
//! Results travel in the response cell block when the connection negotiated a codec.

use super::convert::{self, HMutation};
use super::meta_view::{self, MetaScan};
use super::names::{self, RegionTarget};
use super::{filters, CallCtx, HReply, HbaseError, HbaseService, Inline};
use bytes::{Bytes, BytesMut};
use cellar_model::filter::FilterEval;
use cellar_model::{Cell, Durability, Get, RowMutation};
use cellar_proto::cellblock::{CellBlockWriter, CellReader};
use cellar_proto::hbase;
use cellar_proto::pb::MutationKind;
use prost::Message;

type Result<T> = std::result::Result<T, HbaseError>;

fn decode<M: Message + Default>(param: Bytes, what: &str) -> Result<M> {
    M::decode(param).map_err(|e| HbaseError::malformed(what, e))
}

pub(crate) fn call(
    svc: &HbaseService,
    ctx: &CallCtx,
    method: &str,
    param: Bytes,
    cellblock: Bytes,
) -> Result<HReply> {
    match method {
        "Get" => {
            let req: hbase::GetRequest = decode(param, "GetRequest")?;
            get(svc, ctx, &region(&req.region)?, &req.get)
        }
        "Mutate" => {
            let req: hbase::MutateRequest = decode(param, "MutateRequest")?;
            let target = region(&req.region)?;
            mutate(svc, ctx, &target, &req, &mut CellReader::new(cellblock))
        }
        "Multi" => {
            let req: hbase::MultiRequest = decode(param, "MultiRequest")?;
            let (resp, cells) = multi(svc, ctx, &req, cellblock, region);
            Ok(HReply::with_cells(&resp, cells))
        }
        "Scan" => {
            let req: hbase::ScanRequest = decode(param, "ScanRequest")?;
            scan(svc, ctx, &req, region)
        }
        _ => Err(HbaseError::unknown_method("ClientService", method)),
    }
}

/// A Get answered from memstores and the block cache, or `None` to send it to the pool
/// (meta, malformed requests and anything needing disk go there).
pub(crate) fn get_inline(
    svc: &HbaseService,
    ctx: &CallCtx,
    param: &Bytes,
) -> Option<Result<HReply>> {
    if !svc.rs.config().rpc.inline_gets {
        return None;
    }
    let req = hbase::GetRequest::decode(param.clone()).ok()?;
    let RegionTarget::User { table, region_id } = region(&req.region).ok()? else {
        return None;
    };
    let (mut get, exists_only) = convert::get_from_hbase(&req.get).ok()?;
    // Refused here, it is refused (and audited) again on the handler pool.
    crate::security::authz::quietly(|| {
        svc.rs.authz.check_get(&ctx.caller, &table, &mut get, "get")
    })
    .ok()?;
    let reply = if ctx.cell_blocks && !exists_only && get.filter.is_none() {
        // The common Get: cells go from the memstore or block straight into the answer.
        let mut block = CellBlockWriter::default();
        if let Err(e) = svc
            .rs
            .get_inline_into(&table, region_id, &get, &mut block)?
        {
            return Some(Err(e.into()));
        }
        let (count, block) = block.finish();
        let result = hbase::Result {
            associated_cell_count: Some(count as i32),
            ..Default::default()
        };
        HReply::with_cells(
            &hbase::GetResponse {
                result: Some(result),
            },
            block,
        )
    } else {
        match svc.rs.get_inline(&table, region_id, &get)? {
            Ok(cells) => get_reply(ctx, &cells, exists_only),
            Err(e) => return Some(Err(e.into())),
        }
    };
    svc.rs
        .requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Some(Ok(reply))
}

/// A plain put (no condition, no increment or append) applied on the reactor, or `None` to
/// send the call to the pool: anything else, malformed requests, and every write that could
/// wait ([`crate::region_server::RegionServer::mutate_deferred`]).
pub(crate) fn mutate_inline(
    svc: &HbaseService,
    ctx: &CallCtx,
    param: &Bytes,
    cellblock: &Bytes,
) -> Option<Inline> {
    if !svc.rs.config().rpc.inline_puts {
        return None;
    }
    let req = hbase::MutateRequest::decode(param.clone()).ok()?;
    let is_put = req.mutation.mutate_type == Some(hbase::mutation_proto::MutationType::Put as i32);
    if req.condition.is_some() || !is_put {
        return None;
    }
    let RegionTarget::User { table, region_id } = region(&req.region).ok()? else {
        return None;
    };
    let m = convert::mutation_from_hbase(
        &req.mutation,
        req.nonce_group,
        &mut CellReader::new(cellblock.clone()),
    )
    .ok()?;
    if m.kind != MutationKind::PutDelete || m.whole_row_delete {
        return None;
    }
    crate::security::authz::quietly(|| {
        svc.rs
            .authz
            .check_mutation(&ctx.caller, &table, &m.mutation, m.kind, None)
    })
    .ok()?;
    let pending = match svc.rs.mutate_deferred(&table, region_id, &m.mutation)? {
        Ok(p) => p,
        Err(e) => return Some(Inline::Ready(Err(e.into()))),
    };
    svc.rs
        .requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Some(Inline::AfterWal(
        pending,
        HReply::message(&hbase::MutateResponse {
            result: None,
            processed: Some(true),
            metrics: None,
        }),
    ))
}

pub(crate) fn region(spec: &hbase::RegionSpecifier) -> Result<RegionTarget> {
    names::parse_region(spec.r#type, &spec.value)
}

fn user_region(target: &RegionTarget) -> Result<(&str, u64)> {
    match target {
        RegionTarget::Meta => Err(HbaseError::do_not_retry(
            "hbase:meta is read-only: Cellar computes it from its catalog",
        )),
        RegionTarget::User { table, region_id } => Ok((table, *region_id)),
    }
}

// ---- Permissions ----

/// Narrows a Get of a user region to what the caller may see. Meta, as this front end
/// computes it, holds only table and region rows: every authenticated caller may read it.
fn check_get(
    svc: &HbaseService,
    ctx: &CallCtx,
    target: &RegionTarget,
    get: &mut cellar_model::Get,
    what: &str,
) -> Result<()> {
    match target {
        RegionTarget::Meta => Ok(svc.rs.authz.authenticate(&ctx.caller)?),
        RegionTarget::User { table, .. } => {
            Ok(svc.rs.authz.check_get(&ctx.caller, table, get, what)?)
        }
    }
}

/// WRITE on the families a mutation touches; READ on a condition's family too (a filter
/// condition reads the row: READ on the table).
fn check_mutation(
    svc: &HbaseService,
    ctx: &CallCtx,
    table: &str,
    m: &RowMutation,
    kind: MutationKind,
    condition: Option<&convert::HCondition>,
) -> Result<()> {
    let column = match condition {
        Some(convert::HCondition::Column(c)) => Some(c),
        Some(convert::HCondition::RowFilter { .. }) => {
            svc.rs.authz.require(
                &ctx.caller,
                crate::security::acl::Action::Read,
                &crate::security::acl::Scope::table(table),
                "check and mutate",
            )?;
            None
        }
        None => None,
    };
    Ok(svc
        .rs
        .authz
        .check_mutation(&ctx.caller, table, m, kind, column)?)
}

// ---- Get ----

/// The cells a Get selects, from meta or a user region.
fn read_row(svc: &HbaseService, target: &RegionTarget, get: &Get) -> Result<Vec<Cell>> {
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

fn get_result(
    ctx: &CallCtx,
    cells: &[Cell],
    exists_only: bool,
    out: &mut BytesMut,
) -> hbase::Result {
    if exists_only {
        convert::exists_result(!cells.is_empty())
    } else {
        convert::result_to_hbase(cells, false, ctx.cell_blocks, out)
    }
}

fn get_reply(ctx: &CallCtx, cells: &[Cell], exists_only: bool) -> HReply {
    let mut out = BytesMut::new();
    let result = get_result(ctx, cells, exists_only, &mut out);
    HReply::with_cells(
        &hbase::GetResponse {
            result: Some(result),
        },
        out,
    )
}

pub(crate) fn get(
    svc: &HbaseService,
    ctx: &CallCtx,
    target: &RegionTarget,
    g: &hbase::Get,
) -> Result<HReply> {
    let (mut get, exists_only) = convert::get_from_hbase(g)?;
    check_get(svc, ctx, target, &mut get, "get")?;
    let cells = read_row(svc, target, &get)?;
    Ok(get_reply(ctx, &cells, exists_only))
}

// ---- Mutate ----

/// The families of a table, for whole-row deletes.
fn families(svc: &HbaseService, table: &str) -> Result<Vec<Bytes>> {
    let route =
        svc.rs.router.table(table).ok_or_else(|| {
            HbaseError::from(crate::error::ServerError::TableNotFound(table.into()))
        })?;
    Ok(route
        .schema
        .families
        .iter()
        .map(|f| Bytes::copy_from_slice(f.name.as_bytes()))
        .collect())
}

/// A decoded mutation made ready for its region (a whole-row delete expanded to families).
fn prepare(
    svc: &HbaseService,
    table: &str,
    proto: &hbase::MutationProto,
    nonce_group: Option<u64>,
    cells: &mut CellReader,
) -> Result<HMutation> {
    let mut m = convert::mutation_from_hbase(proto, nonce_group, cells)?;
    if m.whole_row_delete {
        m.expand_whole_row(families(svc, table)?, convert::mutation_timestamp(proto));
    }
    Ok(m)
}

/// The result a mutation returns: increments and appends their new cells (unless the
/// client asked not to have them), puts and deletes an empty one.
fn mutation_result(
    ctx: &CallCtx,
    kind: MutationKind,
    return_results: bool,
    cells: &[Cell],
    out: &mut BytesMut,
) -> hbase::Result {
    let cells = if kind != MutationKind::PutDelete && return_results {
        cells
    } else {
        &[]
    };
    convert::result_to_hbase(cells, false, ctx.cell_blocks, out)
}

pub(crate) fn mutate(
    svc: &HbaseService,
    ctx: &CallCtx,
    target: &RegionTarget,
    req: &hbase::MutateRequest,
    cells: &mut CellReader,
) -> Result<HReply> {
    let m = convert::mutation_from_hbase(&req.mutation, req.nonce_group, cells);
    let (table, region_id) = user_region(target)?;
    let mut m = m?;
    if m.whole_row_delete {
        m.expand_whole_row(
            families(svc, table)?,
            convert::mutation_timestamp(&req.mutation),
        );
    }
    let condition = req
        .condition
        .as_ref()
        .map(convert::condition_from_hbase)
        .transpose()?;
    check_mutation(svc, ctx, table, &m.mutation, m.kind, condition.as_ref())?;
    let outcome = svc.rs.mutate_reading(
        table,
        region_id,
        &m.mutation,
        m.kind,
        condition.as_ref().map(|c| c.check()),
        m.read_range,
    )?;
    let mut out = BytesMut::new();
    let result = (!m.is_put_or_delete())
        .then(|| mutation_result(ctx, m.kind, m.return_results, &outcome.cells, &mut out));
    Ok(HReply::with_cells(
        &hbase::MutateResponse {
            result,
            processed: Some(outcome.processed),
            metrics: None,
        },
        out,
    ))
}

// ---- Multi ----

fn exception(e: &HbaseError) -> hbase::NameBytesPair {
    hbase::NameBytesPair {
        name: e.class.to_string(),
        value: Some(Bytes::from(e.message.clone().into_bytes())),
    }
}

/// Takes the cells of actions that will not run, so later actions find their own.
pub(super) fn skip_cells(actions: &[hbase::Action], cells: &mut CellReader) {
    for a in actions {
        if let Some(m) = &a.mutation {
            let n = m.associated_cell_count.unwrap_or(0);
            if n > 0 {
                // A short block fails the action that reads past it; nothing to report here.
                let _ = cells.take(n as usize);
            }
        }
    }
}

/// MULTI: one RegionActionResult per RegionAction, in order. Plain region actions run each
/// action on its own (a failing action gets its exception, the others run); atomic or
/// conditional ones run as one row mutation. `resolve` names regions (tests substitute it).
#[allow(deprecated)] // MultiRequest.condition / MultiResponse.processed: older clients use them.
pub(crate) fn multi(
    svc: &HbaseService,
    ctx: &CallCtx,
    req: &hbase::MultiRequest,
    cellblock: Bytes,
    resolve: impl Fn(&hbase::RegionSpecifier) -> Result<RegionTarget>,
) -> (hbase::MultiResponse, BytesMut) {
    let mut cells = CellReader::new(cellblock);
    let mut out = BytesMut::new();
    let mut results = Vec::with_capacity(req.region_action.len());
    let mut processed: Option<bool> = None;
    // Old clients put a RowMutations' condition on the request, not the region action.
    let legacy_condition = (req.region_action.len() == 1)
        .then_some(req.condition.as_ref())
        .flatten();
    for ra in &req.region_action {
        let condition = ra.condition.as_ref().or(legacy_condition);
        let target = match resolve(&ra.region) {
            Ok(t) => t,
            Err(e) => {
                skip_cells(&ra.action, &mut cells);
                results.push(region_failure(&e));
                continue;
            }
        };
        let r = if ra.atomic.unwrap_or(false) || condition.is_some() {
            atomic_region_action(
                svc,
                ctx,
                &target,
                ra,
                Atomic {
                    condition,
                    nonce_group: req.nonce_group,
                },
                &mut cells,
                &mut out,
            )
        } else {
            Ok(plain_region_action(
                svc,
                ctx,
                &target,
                ra,
                req.nonce_group,
                &mut cells,
                &mut out,
            ))
        };
        results.push(match r {
            Ok(r) => {
                if condition.is_some() || ra.atomic.unwrap_or(false) {
                    // Old clients read the request-level flag.
                    let held = r.processed.unwrap_or(false);
                    processed = Some(processed.unwrap_or(true) && held);
                }
                r
            }
            Err(e) => region_failure(&e),
        });
    }
    (
        hbase::MultiResponse {
            region_action_result: results,
            processed,
            region_statistics: None,
        },
        out,
    )
}

fn region_failure(e: &HbaseError) -> hbase::RegionActionResult {
    hbase::RegionActionResult {
        result_or_exception: Vec::new(),
        exception: Some(exception(e)),
        processed: None,
    }
}

/// Each action on its own; results and exceptions echo the action's index.
fn plain_region_action(
    svc: &HbaseService,
    ctx: &CallCtx,
    target: &RegionTarget,
    ra: &hbase::RegionAction,
    nonce_group: Option<u64>,
    cells: &mut CellReader,
    out: &mut BytesMut,
) -> hbase::RegionActionResult {
    let mut roe = Vec::with_capacity(ra.action.len());
    for a in &ra.action {
        let r = run_action(svc, ctx, target, a, nonce_group, cells, out);
        roe.push(match r {
            Ok(result) => hbase::ResultOrException {
                index: a.index,
                result: Some(result),
                ..Default::default()
            },
            Err(e) => hbase::ResultOrException {
                index: a.index,
                exception: Some(exception(&e)),
                ..Default::default()
            },
        });
    }
    hbase::RegionActionResult {
        result_or_exception: roe,
        exception: None,
        processed: None,
    }
}

fn run_action(
    svc: &HbaseService,
    ctx: &CallCtx,
    target: &RegionTarget,
    a: &hbase::Action,
    nonce_group: Option<u64>,
    cells: &mut CellReader,
    out: &mut BytesMut,
) -> Result<hbase::Result> {
    if let Some(m) = &a.mutation {
        let decoded = convert::mutation_from_hbase(m, nonce_group, cells);
        let (table, region_id) = user_region(target)?;
        let mut m_ready = decoded?;
        if m_ready.whole_row_delete {
            m_ready.expand_whole_row(families(svc, table)?, convert::mutation_timestamp(m));
        }
        check_mutation(svc, ctx, table, &m_ready.mutation, m_ready.kind, None)?;
        let outcome = svc.rs.mutate_reading(
            table,
            region_id,
            &m_ready.mutation,
            m_ready.kind,
            None,
            m_ready.read_range,
        )?;
        return Ok(mutation_result(
            ctx,
            m_ready.kind,
            m_ready.return_results,
            &outcome.cells,
            out,
        ));
    }
    if let Some(g) = &a.get {
        let (mut get, exists_only) = convert::get_from_hbase(g)?;
        check_get(svc, ctx, target, &mut get, "get")?;
        let row = read_row(svc, target, &get)?;
        return Ok(get_result(ctx, &row, exists_only, out));
    }
    if a.service_call.is_some() {
        return Err(HbaseError::unsupported("a coprocessor service call"));
    }
    Err(HbaseError::do_not_retry(format!(
        "action {} has neither a mutation nor a get",
        a.index.unwrap_or(0)
    )))
}

/// What governs an atomic or conditional region action besides its mutations.
#[derive(Clone, Copy)]
struct Atomic<'a> {
    condition: Option<&'a hbase::Condition>,
    /// The request's nonce group (see `convert::mutation_from_hbase`).
    nonce_group: Option<u64>,
}

/// An atomic (RowMutations) or conditional (checkAndMutate) region action: every action a
/// mutation of one row, applied under the row lock as one. Several puts/deletes merge into
/// one row mutation; an increment or append must be the only action. Mutations of several
/// rows cannot be atomic in Cellar and are refused.
fn atomic_region_action(
    svc: &HbaseService,
    ctx: &CallCtx,
    target: &RegionTarget,
    ra: &hbase::RegionAction,
    rules: Atomic<'_>,
    cells: &mut CellReader,
    out: &mut BytesMut,
) -> Result<hbase::RegionActionResult> {
    let Atomic {
        condition,
        nonce_group,
    } = rules;
    let table = match user_region(target) {
        Ok((table, _)) => table,
        Err(e) => {
            skip_cells(&ra.action, cells);
            return Err(e);
        }
    };
    let mut decoded = Vec::with_capacity(ra.action.len());
    let mut first_error = None;
    for a in &ra.action {
        let r = match &a.mutation {
            Some(m) => prepare(svc, table, m, nonce_group, cells),
            None => Err(HbaseError::do_not_retry(
                "an atomic or conditional region action holds only mutations",
            )),
        };
        match r {
            Ok(m) => decoded.push((a.index, m)),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let (_, region_id) = user_region(target)?;
    let condition = condition.map(convert::condition_from_hbase).transpose()?;
    let (mutation, kind, return_results) = merge(&decoded)?;
    // An increment or append is the only action (`merge`): its range is the one read.
    let read_range = match decoded.as_slice() {
        [(_, only)] => only.read_range,
        _ => cellar_model::TimeRange::ALL,
    };
    check_mutation(svc, ctx, table, &mutation, kind, condition.as_ref())?;
    let outcome = svc.rs.mutate_reading(
        table,
        region_id,
        &mutation,
        kind,
        condition.as_ref().map(|c| c.check()),
        read_range,
    )?;
    // As HBase's region server answers atomic and conditional region actions: one entry per
    // action, indexed by POSITION (the client's AsyncProcess reads them so), the increment or
    // append result on the first; a conditional put/delete carries no result, an atomic one
    // an empty result.
    let first_result = (kind != MutationKind::PutDelete && return_results && outcome.processed)
        .then(|| mutation_result(ctx, kind, true, &outcome.cells, out));
    let roe = (0..decoded.len())
        .map(|i| hbase::ResultOrException {
            index: Some(i as u32),
            result: match (i, &first_result) {
                (0, Some(r)) => Some(r.clone()),
                _ if condition.is_some() => None,
                _ => Some(hbase::Result::default()),
            },
            ..Default::default()
        })
        .collect();
    Ok(hbase::RegionActionResult {
        result_or_exception: roe,
        exception: None,
        processed: Some(outcome.processed),
    })
}

/// The actions of an atomic region action as one row mutation.
pub(super) fn merge(
    actions: &[(Option<u32>, HMutation)],
) -> Result<(RowMutation, MutationKind, bool)> {
    let Some((_, first)) = actions.first() else {
        return Err(HbaseError::do_not_retry("region action has no actions"));
    };
    if actions.len() == 1 {
        return Ok((first.mutation.clone(), first.kind, first.return_results));
    }
    let mut merged = RowMutation::new(first.mutation.row.clone());
    for (_, m) in actions {
        if m.mutation.row != merged.row {
            return Err(HbaseError::do_not_retry(format!(
                "atomic mutations of several rows ('{}' and '{}') are not supported by Cellar",
                String::from_utf8_lossy(&merged.row),
                String::from_utf8_lossy(&m.mutation.row)
            )));
        }
        if !m.is_put_or_delete() {
            return Err(HbaseError::do_not_retry(
                "an increment or append in RowMutations with other mutations is not supported by Cellar",
            ));
        }
        merged.entries.extend(m.mutation.entries.iter().cloned());
        if merged.durability == Durability::UseDefault {
            merged.durability = m.mutation.durability;
        }
    }
    Ok((merged, MutationKind::PutDelete, false))
}

// ---- Scan ----

fn ttl(svc: &HbaseService) -> u32 {
    svc.rs.config().scanner.lease_ms.min(u64::from(u32::MAX)) as u32
}

/// Results and their flags as the connection takes them.
fn scan_response(
    ctx: &CallCtx,
    scanner_id: u64,
    results: &[(Vec<Cell>, bool)],
    more_in_region: bool,
    ttl: u32,
) -> HReply {
    let mut out = BytesMut::new();
    let mut resp = hbase::ScanResponse {
        scanner_id: Some(scanner_id),
        more_results: Some(true),
        more_results_in_region: Some(more_in_region),
        ttl: Some(ttl),
        ..Default::default()
    };
    for (cells, partial) in results {
        if ctx.cell_blocks {
            for c in cells {
                cellar_proto::cellblock::put(&mut out, c);
            }
            resp.cells_per_result.push(cells.len() as u32);
            resp.partial_flag_per_result.push(*partial);
        } else {
            resp.results
                .push(convert::result_to_hbase(cells, *partial, false, &mut out));
        }
    }
    HReply::with_cells(&resp, out)
}

/// SCAN: open (region + scan), next (scanner id), renew (lease only) or close. A meta scan's
/// rows are computed whole at the open and handed out `number_of_rows` at a time by a
/// scanner like a region's. `more_results` stays true: the client
/// stops by itself at its stop row and limit, and moves on to the next region when
/// `more_results_in_region` is false. A `next_call_seq` on any call is checked against the
/// scanner's call sequence (the open is call 0): a number out of order gets HBase's
/// `OutOfOrderScannerNextException` and the scanner stays as it was.
pub(crate) fn scan(
    svc: &HbaseService,
    ctx: &CallCtx,
    req: &hbase::ScanRequest,
    resolve: impl Fn(&hbase::RegionSpecifier) -> Result<RegionTarget>,
) -> Result<HReply> {
    if let Some(id) = req.scanner_id {
        svc.rs.check_scanner_owner(ctx.conn_id, id)?;
        if req.close_scanner.unwrap_or(false) {
            if let Some(seq) = req.next_call_seq {
                svc.rs.scan_take_call_seq(id, seq)?;
            }
            svc.rs.scan_close(id);
            return Ok(HReply::message(&hbase::ScanResponse {
                scanner_id: Some(id),
                more_results: Some(false),
                more_results_in_region: Some(false),
                ..Default::default()
            }));
        }
        let rows = if req.renew.unwrap_or(false) {
            0
        } else {
            req.number_of_rows.unwrap_or(0)
        };
        let batch = svc.rs.scan_next_in_order(id, rows, req.next_call_seq)?;
        let results: Vec<_> = batch
            .results
            .into_iter()
            .map(|r| (r.cells, r.partial))
            .collect();
        return Ok(scan_response(
            ctx,
            id,
            &results,
            batch.more_in_region,
            ttl(svc),
        ));
    }
    let spec = req.region.as_ref().ok_or_else(|| {
        HbaseError::do_not_retry("ScanRequest has neither a scanner id nor a region")
    })?;
    let s = req
        .scan
        .as_ref()
        .ok_or_else(|| HbaseError::do_not_retry("ScanRequest opens a scanner without a scan"))?;
    let limit = req.limit_of_rows.unwrap_or(0);
    // A numbered open is the new scanner's call 0, as in HBase.
    if let Some(got) = req.next_call_seq.filter(|s| *s != 0) {
        return Err(crate::error::ServerError::OutOfOrderScannerNext {
            scanner: 0,
            expected: 0,
            got,
        }
        .into());
    }
    match resolve(spec)? {
        RegionTarget::Meta => {
            // Computed whole from the catalog, answered `number_of_rows` at a time.
            let rows = meta_view::scan(svc, &meta_scan(s, limit)?)?;
            let batch = svc.rs.scan_open_rows(
                ctx.conn_id,
                rows,
                req.number_of_rows.unwrap_or(0),
                crate::scanners::ResultFormat::CellBlock,
            );
            if let (Some(seq), true) = (req.next_call_seq, batch.more_in_region) {
                svc.rs.scan_take_call_seq(batch.scanner_id, seq)?;
            }
            let results: Vec<_> = batch
                .results
                .into_iter()
                .map(|r| (r.cells, r.partial))
                .collect();
            Ok(scan_response(
                ctx,
                batch.scanner_id,
                &results,
                batch.more_in_region,
                ttl(svc),
            ))
        }
        RegionTarget::User { table, region_id } => {
            let mut scan = convert::scan_from_hbase(s, limit)?;
            svc.rs
                .authz
                .check_scan(&ctx.caller, &table, &mut scan, "scan")?;
            let batch = svc.rs.scan_open(
                ctx.conn_id,
                &table,
                region_id,
                &scan,
                req.number_of_rows.unwrap_or(0),
                crate::scanners::ResultFormat::CellBlock,
            )?;
            if let (Some(seq), true) = (req.next_call_seq, batch.more_in_region) {
                svc.rs.scan_take_call_seq(batch.scanner_id, seq)?;
            }
            let results: Vec<_> = batch
                .results
                .into_iter()
                .map(|r| (r.cells, r.partial))
                .collect();
            Ok(scan_response(
                ctx,
                batch.scanner_id,
                &results,
                batch.more_in_region,
                ttl(svc),
            ))
        }
    }
}

/// A scan of meta in HBase's own terms (bounds with their inclusiveness).
pub(super) fn meta_scan(s: &hbase::Scan, limit: u32) -> Result<MetaScan> {
    let reversed = s.reversed.unwrap_or(false);
    let mut families = Vec::new();
    let mut columns = Vec::new();
    for c in &s.column {
        if c.qualifier.is_empty() {
            families.push(c.family.clone());
        }
        for q in &c.qualifier {
            columns.push((c.family.clone(), q.clone()));
        }
    }
    Ok(MetaScan {
        start: s.start_row.clone().unwrap_or_default(),
        include_start: s.include_start_row.unwrap_or(true),
        stop: s.stop_row.clone().unwrap_or_default(),
        include_stop: s.include_stop_row.unwrap_or(false),
        reversed,
        families,
        columns,
        filter: s
            .filter
            .as_ref()
            .map(|f| filters::checked_filter_from_hbase(f, reversed))
            .transpose()?,
        limit: limit as usize,
    })
}

#[cfg(test)]
mod tests;
