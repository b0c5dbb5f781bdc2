//! ClientMetaService: how a client configured with HBase's RPC connection registry finds the
//! cluster id, the active master and `hbase:meta`.

use super::{HReply, HbaseError, HbaseService};
use bytes::Bytes;

pub(crate) fn call(_svc: &HbaseService, method: &str, _param: Bytes) -> Result<HReply, HbaseError> {
    Err(HbaseError::unknown_method("ClientMetaService", method))
}
