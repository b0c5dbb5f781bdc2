//! The reactor's fast path, for both front ends: a Get that memstores and the block cache can
//! answer, and a plain put that need not wait, served on the network reactor where the
//! request arrived (two thread hand-offs saved). Each protocol decodes its own request and
//! encodes its own answer; what is served here, for whom and when is decided once.
//!
//! `None` from either sends the call to the handler pool, which serves it the slow way and
//! reports any refusal: the server not running or not sure of its master, a row outside the
//! region, a caller without the grant (checked here quietly: the pool checks it again and
//! audits it), anything that would touch disk or wait.

use super::{DeferredPut, RegionServer};
use crate::error::ServerError;
use crate::security::Caller;
use bytes::BytesMut;
use cellar_model::{Cell, Get, MutationKind, RowMutation};
use cellar_proto::cellblock::CellBlockWriter;
use std::sync::atomic::Ordering;

/// A Get's cells as served on the reactor.
pub enum ReactorRead {
    /// The row's cells (a Get with a filter, or for a protocol answering without cell blocks).
    Cells(Vec<Cell>),
    /// The row's cells written straight from the memstore or block into a cell block.
    Block { cell_count: u32, block: BytesMut },
}

impl RegionServer {
    /// Whether calls may be served on the reactor at all now.
    fn serves_on_reactor(&self) -> bool {
        self.check_running().is_ok() && self.master_fresh()
    }

    /// `get` of region `region_id` of `table` for `caller`, served on the reactor: into a cell
    /// block when `into_block` and the Get has no filter, else as cells. `None`: queue it.
    pub fn read_on_reactor(
        &self,
        caller: &Caller,
        table: &str,
        region_id: u64,
        mut get: Get,
        into_block: bool,
    ) -> Option<Result<ReactorRead, ServerError>> {
        if !self.config().rpc.inline_gets || !self.serves_on_reactor() {
            return None;
        }
        crate::security::authz::quietly(|| self.authz.check_get(caller, table, &mut get, "get"))
            .ok()?;
        let read = if into_block && get.filter.is_none() {
            let mut block = CellBlockWriter::default();
            match self.get_inline_into(table, region_id, &get, &mut block)? {
                Ok(()) => {
                    let (cell_count, block) = block.finish();
                    Ok(ReactorRead::Block { cell_count, block })
                }
                Err(e) => Err(e),
            }
        } else {
            self.get_inline(table, region_id, &get)?
                .map(ReactorRead::Cells)
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        Some(read)
    }

    /// A plain put (`m` of kind PutDelete, no condition) for `caller`, applied on the reactor:
    /// the caller finishes its WAL write before acknowledging it
    /// ([`RegionServer::mutate_deferred`]). `None`: queue it.
    pub fn put_on_reactor(
        &self,
        caller: &Caller,
        table: &str,
        region_id: u64,
        m: &RowMutation,
    ) -> Option<Result<DeferredPut, ServerError>> {
        if !self.config().rpc.inline_puts || !self.serves_on_reactor() {
            return None;
        }
        crate::security::authz::quietly(|| {
            self.authz
                .check_mutation(caller, table, m, MutationKind::PutDelete, None)
        })
        .ok()?;
        let put = self.mutate_deferred(table, region_id, m)?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        Some(put)
    }
}
