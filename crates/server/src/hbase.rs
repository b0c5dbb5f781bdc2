//! The HBase 2.x wire-compatible front end: the unmodified Apache HBase Java client (and
//! anything else speaking HBase's RPC) talks to Cellar through it. One listener answers every
//! role a client looks for: the connection registry (ClientMetaService), the master
//! (MasterService), the region server (ClientService, AdminService) and the server hosting
//! `hbase:meta`. Protocol facts: `docs/hbase-protocol.md`.
//!
//! Request path: [`server`] (listener, one reader and one writer task per connection;
//! preambles and frames in [`protocol`], over the connection loop both front ends share) → handler threads → [`HbaseService::call`] routes by
//! service and method through [`SERVICES`], one table of every service's methods: the
//! method's decode half turns the request's bytes into a typed [`Request`] (no server state:
//! the fuzz target runs the same decode halves, [`fuzzing`]), then its execute half runs it.
//! The services keep one file per call family, after gohbase's `hrpc`: [`client_service`]
//! (`get`, `mutate`, `multi`, `scan`; the reactor's fast paths for Get and Mutate live in
//! `get` and `mutate`), [`master_service`] (`tables`, `table_info`, `namespaces`, `cluster`,
//! `procedures`, `access`), [`registry`] (ClientMetaService) and [`admin_service`]. Those
//! translate HBase's messages ([`convert`], [`filters`], [`schema`]) and call the same typed
//! [`RegionServer`] methods the native front end uses, so both protocols share regions,
//! scanners, row locks and splits.
//! `hbase:meta` is answered from [`meta_view`]: rows in HBase's format (region names with
//! their MD5 suffix, [`names`]) computed from the catalog, not stored twice.
//!
//! Everything here decodes bytes from the network: indexing that could panic is denied
//! (`clippy::indexing_slicing`); the few places that index in bounds by construction say why.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

mod admin_service;
mod client_service;
mod cluster_status;
mod convert;
pub mod exceptions;
mod filters;
#[doc(hidden)]
pub mod fuzzing;
mod master_service;
mod meta_view;
pub(crate) mod names;
mod protocol;
mod registry;
mod schema;
mod server;

pub use exceptions::HbaseError;
pub use server::start_in;

use crate::region_server::RegionServer;
pub use crate::rpc::Reply;
use bytes::Bytes;
use prost::Message;
use std::sync::Arc;

/// The HBase services of one Cellar process.
pub struct HbaseService {
    pub(crate) rs: Arc<RegionServer>,
    /// The catalog's keeper (DDL, namespaces, grants, balancing); `None` on a cluster's
    /// region server, which refuses those calls naming the master.
    pub(crate) master: Option<Arc<crate::master::Master>>,
    /// This server as clients must address it: the HBase listener's host and port, and the
    /// region server's start code (meta's `info:serverstartcode`).
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) start_code: u64,
    /// Answered by `GetClusterId` and the registry preamble; stable across restarts.
    pub(crate) cluster_id: String,
    pub(crate) procedures: master_service::Procedures,
}

/// Wall-clock milliseconds since the epoch, as HBase's messages carry times.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A request message, or the error a malformed one is answered with (`what` names it).
pub(crate) fn message<M: Message + Default>(param: Bytes, what: &str) -> Result<M, HbaseError> {
    M::decode(param).map_err(|e| HbaseError::malformed(what, e))
}

/// Who is calling and what they negotiated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallCtx {
    /// Ties scanners to the connection that opened them.
    pub conn_id: u64,
    /// The connection header named a cell block codec: results may travel in cell blocks.
    pub cell_blocks: bool,
    /// Who the calls are from: the client certificate's user, else the connection header's
    /// (HBase's SIMPLE authentication; the server decides whether to take it).
    pub caller: crate::security::Caller,
}

/// A call's request as its decode half hands it to its execute half (gohbase's `hrpc`
/// calls): one typed, checked request per method, by service.
#[derive(Debug)]
pub(crate) enum Request {
    Client(client_service::Call),
    Master(master_service::Call),
    Registry(registry::Call),
    Admin(admin_service::Call),
}

impl Request {
    /// The execute half: the request run against the region server or the master.
    fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply, HbaseError> {
        match self {
            Request::Client(call) => client_service::execute(svc, ctx, call),
            Request::Master(call) => master_service::execute(svc, ctx, call),
            Request::Registry(call) => call.execute(svc),
            Request::Admin(call) => admin_service::execute(svc, ctx, call),
        }
    }
}

/// A decode half: a call's param and cell block to its typed request, checked as far as can
/// be without the server. Pure: no server state, so the fuzz target runs them as they are.
pub(crate) type Decode = fn(Bytes, Bytes) -> Result<Request, HbaseError>;

/// A service of this front end: its name, what it checks before decoding, and its calls.
pub(crate) struct Service {
    pub(crate) name: &'static str,
    /// Checked by method name before the request is decoded (MasterService's global ADMIN
    /// for calls on the cluster rather than a table).
    pub(crate) admit: fn(&HbaseService, &CallCtx, &str) -> Result<(), HbaseError>,
    /// Each method and its decode half. The fuzz target picks a call by its index in
    /// [`SERVICES`]' order: new methods go at the end.
    pub(crate) calls: &'static [(&'static str, Decode)],
}

impl Service {
    /// The decode half of `method` run on its request; UnknownProtocol for a method the
    /// service does not have.
    pub(crate) fn decode(
        &self,
        method: &str,
        param: Bytes,
        cellblock: Bytes,
    ) -> Result<Request, HbaseError> {
        let (_, decode) = self
            .calls
            .iter()
            .find(|(name, _)| *name == method)
            .ok_or_else(|| HbaseError::unknown_method(self.name, method))?;
        decode(param, cellblock)
    }
}

/// No check before decoding: the caller was authenticated, and each call checks its own
/// permissions.
pub(crate) fn admit_all(_: &HbaseService, _: &CallCtx, _: &str) -> Result<(), HbaseError> {
    Ok(())
}

/// Every service and its calls: the one table [`HbaseService::call`] routes by and the fuzz
/// target ([`fuzzing`]) decodes with.
pub(crate) const SERVICES: [&Service; 4] = [
    &client_service::SERVICE,
    &master_service::SERVICE,
    &registry::SERVICE,
    &admin_service::SERVICE,
];

/// The service clients call `name`; UnknownProtocol for one this front end does not serve.
pub(crate) fn find_service(name: &str) -> Result<&'static Service, HbaseError> {
    SERVICES
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| HbaseError::unknown_service(name))
}

/// A call answered on the network reactor.
pub enum Inline {
    /// The answer, to send as it is.
    Ready(Result<Reply, HbaseError>),
    /// A write applied to the memstores whose WAL record is not yet in the OS: finish it, then
    /// send the answer (or, if finishing fails, its error). Finishing several in a row costs
    /// one WAL write.
    AfterWal(crate::region_server::DeferredPut, Reply),
}

impl HbaseService {
    /// `host:port` of the HBase listener as clients reach it, and `rs`'s start code.
    pub fn new(
        rs: Arc<RegionServer>,
        master: Option<Arc<crate::master::Master>>,
        host: String,
        port: u16,
        cluster_id: String,
    ) -> HbaseService {
        let start_code = rs.startcode;
        HbaseService {
            rs,
            master,
            host,
            port,
            start_code,
            cluster_id,
            procedures: master_service::Procedures::default(),
        }
    }

    /// The master of this process, or the refusal a cluster's region server answers.
    pub(crate) fn master(&self) -> Result<&crate::master::Master, crate::error::ServerError> {
        self.master
            .as_deref()
            .ok_or_else(crate::error::ServerError::not_the_master)
    }

    /// One call. May block on disk: run on a handler thread, never on the reactor.
    pub fn call(
        &self,
        ctx: &CallCtx,
        service: &str,
        method: &str,
        param: Bytes,
        cellblock: Bytes,
    ) -> Result<Reply, HbaseError> {
        self.rs
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // With authorization on, nobody the server cannot name is served anything, not even
        // the connection registry's answers or meta's rows.
        self.rs.authz.authenticate(&ctx.caller)?;
        // A master that is no longer the active one answers nothing (not even the registry's
        // "who is the master"), naming why.
        self.rs.check_master()?;
        let outcome = self.route(ctx, service, method, param, cellblock);
        if let Err(e) = &outcome {
            // Unsupported methods were logged where they were refused.
            if e.class == exceptions::UNKNOWN_PROTOCOL {
                tracing::info!(service, method, error = %e.message, "HBase call not supported");
            } else {
                tracing::debug!(service, method, class = e.class, error = %e.message, "HBase call failed");
            }
        }
        outcome
    }

    /// A call routed by [`SERVICES`]: the service's admission check, the method's decode
    /// half, then the request's execute half.
    fn route(
        &self,
        ctx: &CallCtx,
        service: &str,
        method: &str,
        param: Bytes,
        cellblock: Bytes,
    ) -> Result<Reply, HbaseError> {
        let service = find_service(service)?;
        (service.admit)(self, ctx, method)?;
        service.decode(method, param, cellblock)?.execute(self, ctx)
    }

    /// The reactor's fast path: a Get answered from memory, or `None` to queue the call.
    pub fn call_inline(
        &self,
        ctx: &CallCtx,
        service: &str,
        method: &str,
        param: &Bytes,
        cellblock: &Bytes,
    ) -> Option<Inline> {
        if service != "ClientService" || !self.rs.master_fresh() {
            return None;
        }
        match method {
            "Get" => client_service::get_inline(self, ctx, param).map(Inline::Ready),
            "Mutate" => client_service::mutate_inline(self, ctx, param, cellblock),
            _ => None,
        }
    }

    /// A connection closed: its scanners go with it.
    pub fn connection_closed(&self, conn_id: u64) {
        self.rs.scanners.connection_closed(conn_id);
    }
}
