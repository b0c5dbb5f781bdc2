//! ClientService: Get, Mutate, Multi and Scan on user regions and on `hbase:meta`.

use super::{CallCtx, HReply, HbaseError, HbaseService};
use bytes::Bytes;

pub(crate) fn call(
    _svc: &HbaseService,
    _ctx: &CallCtx,
    method: &str,
    _param: Bytes,
    _cellblock: Bytes,
) -> Result<HReply, HbaseError> {
    Err(HbaseError::unknown_method("ClientService", method))
}

/// A Get answered from memstores and the block cache, or `None` to send it to the pool.
pub(crate) fn get_inline(
    _svc: &HbaseService,
    _ctx: &CallCtx,
    _param: &Bytes,
) -> Option<Result<HReply, HbaseError>> {
    None
}
