//! PrepareBulkLoad, BulkLoadHFile and CleanupBulkLoad: HBase's bulk load (`completebulkload`,
//! `BulkLoadHFilesTool`) into a user region, through the same path as the native
//! BULK_LOAD_REGION (`crate::region_server::RegionServer::bulk_load_call`): the files are read
//! where they are (never moved: the caller's copies stay), and only under the server's
//! `bulk_load.dirs`. Every call needs CREATE or ADMIN on the table, as HBase's do.

use super::{region, user_region, Call, Result};
use crate::hbase::names::{self, RegionTarget};
use crate::hbase::{CallCtx, HbaseError, HbaseService, Reply, Request};
use bytes::Bytes;
use cellar_proto::{hbase, pb};

#[derive(Debug)]
pub(crate) enum BulkLoadCall {
    Prepare { table: String },
    Load(hbase::BulkLoadHFileRequest),
    Cleanup(hbase::CleanupBulkLoadRequest),
}

pub(crate) fn decode_prepare(param: Bytes, _cellblock: Bytes) -> Result<Request> {
    let req: hbase::PrepareBulkLoadRequest =
        crate::hbase::message(param, "PrepareBulkLoadRequest")?;
    let table = names::table_from_pb(&req.table_name)?;
    Ok(Call::BulkLoad(BulkLoadCall::Prepare { table }).into())
}

pub(crate) fn decode_load(param: Bytes, _cellblock: Bytes) -> Result<Request> {
    let req: hbase::BulkLoadHFileRequest = crate::hbase::message(param, "BulkLoadHFileRequest")?;
    Ok(Call::BulkLoad(BulkLoadCall::Load(req)).into())
}

pub(crate) fn decode_cleanup(param: Bytes, _cellblock: Bytes) -> Result<Request> {
    let req: hbase::CleanupBulkLoadRequest =
        crate::hbase::message(param, "CleanupBulkLoadRequest")?;
    Ok(Call::BulkLoad(BulkLoadCall::Cleanup(req)).into())
}

pub(crate) fn execute(svc: &HbaseService, ctx: &CallCtx, call: BulkLoadCall) -> Result<Reply> {
    match call {
        BulkLoadCall::Prepare { table } => {
            svc.rs
                .authz
                .require_table_admin(&ctx.caller, &table, "prepare a bulk load")?;
            // Nothing is staged: the files are read where they are. The token only pairs the
            // calls of one load in logs.
            let bulk_token = format!("cellar-bulk-load-{table}-{:016x}", rand_token());
            Ok(Reply::message(&hbase::PrepareBulkLoadResponse {
                bulk_token,
            }))
        }
        BulkLoadCall::Load(req) => {
            let target = region(&req.region)?;
            let (table, region_id) = user_region(&target)?;
            svc.rs
                .authz
                .require_table_admin(&ctx.caller, table, "bulk load into a table")?;
            let files = req
                .family_path
                .iter()
                .map(|fp| {
                    let family = String::from_utf8(fp.family.to_vec()).map_err(|_| {
                        HbaseError::do_not_retry("a bulk load family name is not UTF-8")
                    })?;
                    Ok(pb::BulkLoadFile {
                        family,
                        path: fp.path.clone(),
                        ..pb::BulkLoadFile::default()
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            svc.rs.bulk_load_call(table, region_id, files)?;
            Ok(Reply::message(&hbase::BulkLoadHFileResponse {
                loaded: true,
            }))
        }
        BulkLoadCall::Cleanup(req) => {
            let target = req.region.as_ref().map(region).transpose()?;
            match &target {
                Some(RegionTarget::User { table, .. }) => {
                    svc.rs
                        .authz
                        .require_table_admin(&ctx.caller, table, "clean up a bulk load")?
                }
                _ => svc.rs.authz.authenticate(&ctx.caller)?,
            }
            Ok(Reply::message(&hbase::CleanupBulkLoadResponse {}))
        }
    }
}

/// 64 random bits for a token (the clock and a counter: unique, not secret).
fn rand_token() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    now ^ N.fetch_add(1, Ordering::Relaxed).rotate_left(32)
}
