//! ClientService: Get, Mutate, Multi and Scan on user regions and on `hbase:meta`, one file
//! per call family ([`get`], [`mutate`], [`multi`], [`scan`]). Each has a decode half (the
//! request's bytes, param and cell block, to a typed request, checked as far as can be
//! without the server) and an execute half (that request run against the region server).
//!
//! Each call names its region by HBase's region name; [`names::parse_region`] says whether
//! that is meta (answered from [`meta_view`](super::meta_view), read-only) or a user region
//! (the same [`RegionServer`](crate::region_server::RegionServer) methods the native protocol
//! calls). Results travel in the response cell block when the connection negotiated a codec.

pub(super) mod get;
pub(super) mod multi;
pub(super) mod mutate;
pub(super) mod scan;

pub(crate) use get::get_inline;
pub(crate) use mutate::mutate_inline;

use super::names::{self, RegionTarget};
use super::{CallCtx, HReply, HbaseError, HbaseService};
use bytes::Bytes;
use cellar_proto::hbase;

type Result<T> = std::result::Result<T, HbaseError>;

pub(crate) fn call(
    svc: &HbaseService,
    ctx: &CallCtx,
    method: &str,
    param: Bytes,
    cellblock: Bytes,
) -> Result<HReply> {
    match method {
        "Get" => get::execute(svc, ctx, get::decode(param, cellblock)?),
        "Mutate" => mutate::execute(svc, ctx, mutate::decode(param, cellblock)?),
        "Multi" => multi::execute(svc, ctx, multi::decode(param, cellblock)?),
        "Scan" => scan::execute(svc, ctx, scan::decode(param, cellblock)?),
        _ => Err(HbaseError::unknown_method("ClientService", method)),
    }
}

/// The region a call names (encoded names need the server: data calls use full names).
pub(crate) fn region(spec: &hbase::RegionSpecifier) -> Result<RegionTarget> {
    names::parse_region(spec.r#type, &spec.value)
}

/// A user region's table and id; meta is computed from the catalog and takes no writes.
fn user_region(target: &RegionTarget) -> Result<(&str, u64)> {
    match target {
        RegionTarget::Meta => Err(HbaseError::do_not_retry(
            "hbase:meta is read-only: Cellar computes it from its catalog",
        )),
        RegionTarget::User { table, region_id } => Ok((table, *region_id)),
    }
}

#[cfg(test)]
mod tests;
