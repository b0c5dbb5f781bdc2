//! MasterService: table admin. DDL runs synchronously; its procedure id and outcome are kept
//! so `getProcedureResult` can answer the client's polling.

use super::{CallCtx, HReply, HbaseError, HbaseService};
use bytes::Bytes;

/// Finished procedures, by id.
#[derive(Debug, Default)]
pub(crate) struct Procedures {}

pub(crate) fn call(
    _svc: &HbaseService,
    _ctx: &CallCtx,
    method: &str,
    _param: Bytes,
) -> Result<HReply, HbaseError> {
    Err(HbaseError::unknown_method("MasterService", method))
}
