//! MULTI: gets and mutations batched by region. Plain region actions run each action on its
//! own (a failing action gets its exception, the others run); atomic or conditional ones
//! (RowMutations, checkAndMutate) run as one row mutation.

use super::get::{check_get, get_result, read_row_metered};
use super::mutate::{check_mutation, mutation_result, PendingMutation};
use super::{region, user_region, Call, Result};
use crate::hbase::convert::{self, HCondition, HMutation};
use crate::hbase::names::RegionTarget;
use crate::hbase::{CallCtx, HbaseError, HbaseService, Reply, Request};
use bytes::{Bytes, BytesMut};
use cellar_model::MutationKind;
use cellar_model::{Durability, Get, RowMutation};
use cellar_proto::cellblock::CellReader;
use cellar_proto::hbase;

/// A Multi as its decode half hands it on: its region actions, in order, each decoded as far
/// as it can be (a region action or action that cannot run carries the exception it gets).
#[derive(Debug, Clone)]
pub(crate) struct MultiCall {
    pub(crate) regions: Vec<RegionCall>,
}

/// One region action, decoded.
#[derive(Debug, Clone)]
pub(crate) enum RegionCall {
    /// It fails whole with this (its region is not one, or an atomic action names meta);
    /// its cells were skipped.
    Failed(HbaseError),
    /// Each action on its own; actions keep their index.
    Plain {
        target: RegionTarget,
        actions: Vec<(Option<u32>, Result<ActionCall>)>,
    },
    /// An atomic or conditional region action.
    Atomic(AtomicCall),
}

/// One action of a plain region action.
#[derive(Debug, Clone)]
pub(crate) enum ActionCall {
    /// A mutation of a user region.
    Mutate(PendingMutation),
    Get {
        get: Get,
        exists_only: bool,
        /// `query_metrics_enabled`: the result carries the block bytes the read scanned.
        metrics: bool,
    },
}

/// An atomic (RowMutations) or conditional (checkAndMutate) region action of a user region:
/// every action a mutation of one row, applied under the row lock as one.
#[derive(Debug, Clone)]
pub(crate) struct AtomicCall {
    pub(crate) table: String,
    pub(crate) region_id: u64,
    /// Each action's mutation, or why it is not one, with the action's index.
    pub(crate) actions: Vec<(Option<u32>, Result<PendingMutation>)>,
    /// The condition, converted; a malformed one fails the region action only when every
    /// action is ready.
    pub(crate) condition: Result<Option<HCondition>>,
}

/// The decode half: a MultiRequest, each mutation's cells taken from the cell block in request
/// order.
pub(crate) fn decode(param: Bytes, cellblock: Bytes) -> Result<Request> {
    let req: hbase::MultiRequest = crate::hbase::message(param, "MultiRequest")?;
    Ok(Call::Multi(MultiCall::new(&req, cellblock, region)).into())
}

impl MultiCall {
    /// `req`'s region actions, cells taken from `cellblock` in request order (and skipped for
    /// actions that will not run, so later actions find their own). `resolve` names regions
    /// (tests substitute it).
    #[allow(deprecated)] // MultiRequest.condition: older clients use it.
    pub(crate) fn new(
        req: &hbase::MultiRequest,
        cellblock: Bytes,
        resolve: impl Fn(&hbase::RegionSpecifier) -> Result<RegionTarget>,
    ) -> MultiCall {
        let mut cells = CellReader::new(cellblock);
        // Old clients put a RowMutations' condition on the request, not the region action.
        let legacy_condition = (req.region_action.len() == 1)
            .then_some(req.condition.as_ref())
            .flatten();
        let mut regions = Vec::with_capacity(req.region_action.len());
        for ra in &req.region_action {
            let condition = ra.condition.as_ref().or(legacy_condition);
            let target = match resolve(&ra.region) {
                Ok(t) => t,
                Err(e) => {
                    skip_cells(&ra.action, &mut cells);
                    regions.push(RegionCall::Failed(e));
                    continue;
                }
            };
            regions.push(if ra.atomic.unwrap_or(false) || condition.is_some() {
                atomic(&target, ra, condition, req.nonce_group, &mut cells)
            } else {
                let actions = ra
                    .action
                    .iter()
                    .map(|a| (a.index, action(&target, a, req.nonce_group, &mut cells)))
                    .collect();
                RegionCall::Plain { target, actions }
            });
        }
        MultiCall { regions }
    }
}

/// Takes the cells of actions that will not run, so later actions find their own.
fn skip_cells(actions: &[hbase::Action], cells: &mut CellReader) {
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

/// One action of a plain region action. A mutation's cells are taken even when it names
/// meta (read-only, refused before a malformed mutation is).
fn action(
    target: &RegionTarget,
    a: &hbase::Action,
    nonce_group: Option<u64>,
    cells: &mut CellReader,
) -> Result<ActionCall> {
    if let Some(m) = &a.mutation {
        let decoded = PendingMutation::new(m, nonce_group, cells);
        user_region(target)?;
        return Ok(ActionCall::Mutate(decoded?));
    }
    if let Some(g) = &a.get {
        let (get, exists_only) = convert::get_from_hbase(g)?;
        return Ok(ActionCall::Get {
            get,
            exists_only,
            metrics: g.query_metrics_enabled == Some(true),
        });
    }
    if a.service_call.is_some() {
        return Err(HbaseError::unsupported("a coprocessor service call"));
    }
    Err(HbaseError::do_not_retry(format!(
        "action {} has neither a mutation nor a get",
        a.index.unwrap_or(0)
    )))
}

/// An atomic or conditional region action: meta is refused whole (its cells skipped); every
/// action is decoded, a non-mutation refused in its place.
fn atomic(
    target: &RegionTarget,
    ra: &hbase::RegionAction,
    condition: Option<&hbase::Condition>,
    nonce_group: Option<u64>,
    cells: &mut CellReader,
) -> RegionCall {
    let (table, region_id) = match user_region(target) {
        Ok(t) => t,
        Err(e) => {
            skip_cells(&ra.action, cells);
            return RegionCall::Failed(e);
        }
    };
    let actions = ra
        .action
        .iter()
        .map(|a| {
            let m = match &a.mutation {
                Some(m) => PendingMutation::new(m, nonce_group, cells),
                None => Err(HbaseError::do_not_retry(
                    "an atomic or conditional region action holds only mutations",
                )),
            };
            (a.index, m)
        })
        .collect();
    RegionCall::Atomic(AtomicCall {
        table: table.to_string(),
        region_id,
        actions,
        condition: condition.map(convert::condition_from_hbase).transpose(),
    })
}

/// The execute half.
pub(crate) fn execute(svc: &HbaseService, ctx: &CallCtx, call: MultiCall) -> Result<Reply> {
    let (resp, cells) = run(svc, ctx, call);
    Ok(Reply::with_cells(&resp, cells))
}

/// MULTI: one RegionActionResult per RegionAction, in order, and the cell block of their
/// results.
#[allow(deprecated)] // MultiResponse.processed: older clients read it.
pub(crate) fn run(
    svc: &HbaseService,
    ctx: &CallCtx,
    call: MultiCall,
) -> (hbase::MultiResponse, BytesMut) {
    let mut out = BytesMut::new();
    let mut results = Vec::with_capacity(call.regions.len());
    let mut processed: Option<bool> = None;
    for rc in call.regions {
        results.push(match rc {
            RegionCall::Failed(e) => region_failure(&e),
            RegionCall::Plain { target, actions } => {
                plain_region_action(svc, ctx, &target, actions, &mut out)
            }
            RegionCall::Atomic(a) => match atomic_region_action(svc, ctx, a, &mut out) {
                Ok(r) => {
                    // Old clients read the request-level flag.
                    let held = r.processed.unwrap_or(false);
                    processed = Some(processed.unwrap_or(true) && held);
                    r
                }
                Err(e) => region_failure(&e),
            },
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

fn exception(e: &HbaseError) -> hbase::NameBytesPair {
    hbase::NameBytesPair {
        name: e.class.to_string(),
        value: Some(Bytes::from(e.message.clone().into_bytes())),
    }
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
    actions: Vec<(Option<u32>, Result<ActionCall>)>,
    out: &mut BytesMut,
) -> hbase::RegionActionResult {
    let mut roe = Vec::with_capacity(actions.len());
    for (index, a) in actions {
        let r = a.and_then(|a| run_action(svc, ctx, target, a, out));
        roe.push(match r {
            Ok(result) => hbase::ResultOrException {
                index,
                result: Some(result),
                ..Default::default()
            },
            Err(e) => hbase::ResultOrException {
                index,
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
    a: ActionCall,
    out: &mut BytesMut,
) -> Result<hbase::Result> {
    match a {
        ActionCall::Mutate(m) => {
            let (table, region_id) = user_region(target)?;
            let m = m.ready(svc, table)?;
            check_mutation(svc, ctx, table, &m.mutation, m.kind, None)?;
            let outcome =
                svc.rs
                    .mutate_reading(table, region_id, &m.mutation, m.kind, None, m.read_range)?;
            Ok(mutation_result(
                ctx,
                m.kind,
                m.return_results,
                &outcome.cells,
                out,
            ))
        }
        ActionCall::Get {
            mut get,
            exists_only,
            metrics,
        } => {
            check_get(svc, ctx, target, &mut get, "get")?;
            let (row, scanned) = read_row_metered(svc, target, &get, metrics)?;
            Ok(get_result(ctx, &row, exists_only, scanned, out))
        }
    }
}

/// Several puts/deletes merge into one row mutation; an increment or append must be the only
/// action. Mutations of several rows cannot be atomic in Cellar and are refused.
fn atomic_region_action(
    svc: &HbaseService,
    ctx: &CallCtx,
    call: AtomicCall,
    out: &mut BytesMut,
) -> Result<hbase::RegionActionResult> {
    let AtomicCall {
        table,
        region_id,
        actions,
        condition,
    } = call;
    let mut decoded = Vec::with_capacity(actions.len());
    let mut first_error = None;
    for (index, m) in actions {
        match m.and_then(|m| m.ready(svc, &table)) {
            Ok(m) => decoded.push((index, m)),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let condition = condition?;
    let (mutation, kind, return_results) = merge(&decoded)?;
    // An increment or append is the only action (`merge`): its range is the one read.
    let read_range = match decoded.as_slice() {
        [(_, only)] => only.read_range,
        _ => cellar_model::TimeRange::ALL,
    };
    check_mutation(svc, ctx, &table, &mutation, kind, condition.as_ref())?;
    let outcome = svc.rs.mutate_reading(
        &table,
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
pub(crate) fn merge(
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
