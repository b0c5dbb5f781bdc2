//! ClientService: Get, Mutate, Multi and Scan on user regions and on `hbase:meta`, and bulk
//! load into user regions, one file per call family ([`get`], [`mutate`], [`multi`],
//! [`scan`], [`bulk_load`]). Each has a decode half (the
//! request's bytes, param and cell block, to a typed request, checked as far as can be
//! without the server) and an execute half (that request run against the region server).
//!
//! Each call names its region by HBase's region name; [`names::parse_region`] says whether
//! that is meta (answered from [`meta_view`](super::meta_view), read-only) or a user region
//! (the same [`RegionServer`](crate::region_server::RegionServer) methods the native protocol
//! calls). Results travel in the response cell block when the connection negotiated a codec.

pub(super) mod bulk_load;
pub(super) mod get;
pub(super) mod multi;
pub(super) mod mutate;
pub(super) mod scan;

pub(crate) use get::get_inline;
pub(crate) use mutate::mutate_inline;

use super::names::{self, RegionTarget};
use super::{CallCtx, HbaseError, HbaseService, Reply, Request, Service};
use cellar_proto::hbase;

type Result<T> = std::result::Result<T, HbaseError>;

/// A ClientService request, decoded.
#[derive(Debug)]
pub(crate) enum Call {
    Get(get::GetCall),
    Mutate(mutate::MutateCall),
    Multi(multi::MultiCall),
    Scan(scan::ScanCall),
    BulkLoad(bulk_load::BulkLoadCall),
}

/// ClientService's calls and their decode halves.
pub(crate) const SERVICE: Service = Service {
    name: "ClientService",
    admit: super::admit_all,
    calls: &[
        ("Get", get::decode),
        ("Mutate", mutate::decode),
        ("Multi", multi::decode),
        ("Scan", scan::decode),
        ("PrepareBulkLoad", bulk_load::decode_prepare),
        ("BulkLoadHFile", bulk_load::decode_load),
        ("CleanupBulkLoad", bulk_load::decode_cleanup),
    ],
};

impl From<Call> for Request {
    fn from(call: Call) -> Request {
        Request::Client(call)
    }
}

/// The execute halves.
pub(crate) fn execute(svc: &HbaseService, ctx: &CallCtx, call: Call) -> Result<Reply> {
    match call {
        Call::Get(call) => get::execute(svc, ctx, call),
        Call::Mutate(call) => mutate::execute(svc, ctx, call),
        Call::Multi(call) => multi::execute(svc, ctx, call),
        Call::Scan(call) => scan::execute(svc, ctx, call),
        Call::BulkLoad(call) => bulk_load::execute(svc, ctx, call),
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
