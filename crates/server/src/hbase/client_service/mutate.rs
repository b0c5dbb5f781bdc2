//! MUTATE: one put, delete, increment or append, maybe conditional (checkAndMutate); also the
//! reactor's fast path for the plain put ([`mutate_inline`]).

use super::{region, user_region, Call, Result};
use crate::hbase::convert::{self, HCondition, HMutation};
use crate::hbase::names::RegionTarget;
use crate::hbase::{CallCtx, HbaseError, HbaseService, Inline, Reply, Request};
use bytes::{Bytes, BytesMut};
use cellar_model::MutationKind;
use cellar_model::{Cell, RowMutation};
use cellar_proto::cellblock::CellReader;
use cellar_proto::hbase;

/// A mutation as decoded, its cells taken from the cell block: all it still lacks is the
/// families a whole-row delete stands for (the table's, which only the server knows).
#[derive(Debug, Clone)]
pub(crate) struct PendingMutation {
    pub(crate) m: HMutation,
    /// The time a whole-row delete deletes at.
    pub(crate) timestamp: u64,
}

impl PendingMutation {
    /// `proto`, its cells taken from `cells` (see [`convert::mutation_from_hbase`]).
    pub(crate) fn new(
        proto: &hbase::MutationProto,
        nonce_group: Option<u64>,
        cells: &mut CellReader,
    ) -> Result<PendingMutation> {
        Ok(PendingMutation {
            m: convert::mutation_from_hbase(proto, nonce_group, cells)?,
            timestamp: convert::mutation_timestamp(proto),
        })
    }

    /// The mutation, a whole-row delete expanded to one delete per family of `families`.
    pub(crate) fn expand(self, families: impl IntoIterator<Item = Bytes>) -> HMutation {
        let PendingMutation { mut m, timestamp } = self;
        m.expand_whole_row(families, timestamp);
        m
    }

    /// The mutation ready for its region of `table` (a whole-row delete expanded to the
    /// table's families).
    pub(super) fn ready(self, svc: &HbaseService, table: &str) -> Result<HMutation> {
        if !self.m.whole_row_delete {
            return Ok(self.m);
        }
        Ok(self.expand(families(svc, table)?))
    }
}

/// A Mutate as its decode half hands it on.
#[derive(Debug, Clone)]
pub(crate) struct MutateCall {
    pub(crate) table: String,
    pub(crate) region_id: u64,
    pub(crate) mutation: PendingMutation,
    /// The checkAndMutate condition, converted; a malformed one fails the call only after
    /// the table's families are looked up, as the handler always ordered it.
    pub(crate) condition: Result<Option<HCondition>>,
}

impl MutateCall {
    /// `req` on `target`, its cells taken from `cells`. Meta is refused (after the cells
    /// are taken), before a malformed mutation is.
    pub(crate) fn new(
        target: &RegionTarget,
        req: &hbase::MutateRequest,
        cells: &mut CellReader,
    ) -> Result<MutateCall> {
        let mutation = PendingMutation::new(&req.mutation, req.nonce_group, cells);
        let (table, region_id) = user_region(target)?;
        Ok(MutateCall {
            table: table.to_string(),
            region_id,
            mutation: mutation?,
            condition: req
                .condition
                .as_ref()
                .map(convert::condition_from_hbase)
                .transpose(),
        })
    }
}

fn request(param: Bytes) -> Result<hbase::MutateRequest> {
    crate::hbase::message(param, "MutateRequest")
}

/// The decode half: a MutateRequest, its cells from the cell block.
pub(crate) fn decode(param: Bytes, cellblock: Bytes) -> Result<Request> {
    let req = request(param)?;
    let target = region(&req.region)?;
    let call = MutateCall::new(&target, &req, &mut CellReader::new(cellblock))?;
    Ok(Call::Mutate(call).into())
}

/// The execute half: checks, applies, and answers with what an increment or append wrote.
pub(crate) fn execute(svc: &HbaseService, ctx: &CallCtx, call: MutateCall) -> Result<Reply> {
    let MutateCall {
        table,
        region_id,
        mutation,
        condition,
    } = call;
    let m = mutation.ready(svc, &table)?;
    let condition = condition?;
    check_mutation(svc, ctx, &table, &m.mutation, m.kind, condition.as_ref())?;
    let outcome = svc.rs.mutate_reading(
        &table,
        region_id,
        &m.mutation,
        m.kind,
        condition.as_ref().map(|c| c.check()),
        m.read_range,
    )?;
    let mut out = BytesMut::new();
    let result = (!m.is_put_or_delete())
        .then(|| mutation_result(ctx, m.kind, m.return_results, &outcome.cells, &mut out));
    Ok(Reply::with_cells(
        &hbase::MutateResponse {
            result,
            processed: Some(outcome.processed),
            metrics: None,
        },
        out,
    ))
}

/// A plain put (no condition, no increment or append) applied on the reactor, or `None` to
/// send the call to the pool: anything else, malformed requests, and every write that could
/// wait ([`crate::region_server::RegionServer::put_on_reactor`]).
pub(crate) fn mutate_inline(
    svc: &HbaseService,
    ctx: &CallCtx,
    param: &Bytes,
    cellblock: &Bytes,
) -> Option<Inline> {
    // Only the message is read before anything but a plain put is sent on.
    let req = request(param.clone()).ok()?;
    let is_put = req.mutation.mutate_type == Some(hbase::mutation_proto::MutationType::Put as i32);
    if req.condition.is_some() || !is_put {
        return None;
    }
    let target = region(&req.region).ok()?;
    let call = MutateCall::new(&target, &req, &mut CellReader::new(cellblock.clone())).ok()?;
    let m = &call.mutation.m;
    if m.kind != MutationKind::PutDelete || m.whole_row_delete {
        return None;
    }
    let pending =
        match svc
            .rs
            .put_on_reactor(&ctx.caller, &call.table, call.region_id, &m.mutation)?
        {
            Ok(p) => p,
            Err(e) => return Some(Inline::Ready(Err(e.into()))),
        };
    Some(Inline::AfterWal(
        pending,
        Reply::message(&hbase::MutateResponse {
            result: None,
            processed: Some(true),
            metrics: None,
        }),
    ))
}

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

/// WRITE on the families a mutation touches; READ on a condition's family too (a filter
/// condition reads the row: READ on the table).
pub(super) fn check_mutation(
    svc: &HbaseService,
    ctx: &CallCtx,
    table: &str,
    m: &RowMutation,
    kind: MutationKind,
    condition: Option<&HCondition>,
) -> Result<()> {
    let column = match condition {
        Some(HCondition::Column(c)) => Some(c),
        Some(HCondition::RowFilter { .. }) => {
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

/// The result a mutation returns: increments and appends their new cells (unless the
/// client asked not to have them), puts and deletes an empty one.
pub(super) fn mutation_result(
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
