//! AdminService: the region-server admin calls a client makes on its way (region info,
//! flush, compact).

use super::{CallCtx, HReply, HbaseError, HbaseService};
use bytes::Bytes;

pub(crate) fn call(
    _svc: &HbaseService,
    _ctx: &CallCtx,
    method: &str,
    _param: Bytes,
) -> Result<HReply, HbaseError> {
    Err(HbaseError::unknown_method("AdminService", method))
}
