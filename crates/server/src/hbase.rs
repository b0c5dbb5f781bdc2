//! The HBase 2.x wire-compatible front end: the unmodified Apache HBase Java client (and
//! anything else speaking HBase's RPC) talks to Cellar through it. One listener answers every
//! role a client looks for: the connection registry (ClientMetaService), the master
//! (MasterService), the region server (ClientService, AdminService) and the server hosting
//! `hbase:meta`. Protocol facts: `docs/hbase-protocol.md`.
//!
//! Request path: [`server`] (listener, one reader and one writer task per connection;
//! preambles and frames in [`connection`]) → handler threads → [`HbaseService::call`] routes by
//! service and method to [`client`] (Get, Mutate, Multi, Scan), [`master`] (table admin and
//! procedures), [`registry`] or [`admin_service`]. Those translate HBase's messages
//! ([`convert`], [`filters`], [`schema`]) and call the same typed [`RegionServer`] methods the
//! native front end uses, so both protocols share regions, scanners, row locks and splits.
//! `hbase:meta` is answered from [`meta_view`]: rows in HBase's format (region names with
//! their MD5 suffix, [`names`]) computed from the catalog, not stored twice.
//!
//! Everything here decodes bytes from the network: indexing that could panic is denied
//! (`clippy::indexing_slicing`); the few places that index in bounds by construction say why.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

mod admin_service;
mod client_service;
mod cluster_status;
mod connection;
mod convert;
pub mod exceptions;
mod filters;
#[doc(hidden)]
pub mod fuzzing;
mod master_service;
mod meta_view;
pub(crate) mod names;
mod registry;
mod schema;
mod server;

pub use exceptions::HbaseError;
pub use server::HbaseServer;

use crate::region_server::RegionServer;
use bytes::{Bytes, BytesMut};
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

/// A call answered on the network reactor.
pub enum Inline {
    /// The answer, to send as it is.
    Ready(Result<HReply, HbaseError>),
    /// A write applied to the memstores whose WAL record is not yet in the OS: finish it, then
    /// send the answer (or, if finishing fails, its error). Finishing several in a row costs
    /// one WAL write.
    AfterWal(crate::region_server::DeferredPut, HReply),
}

/// A successful call's answer: the encoded response message and its cell block.
#[derive(Debug, Clone, Default)]
pub struct HReply {
    pub param: Bytes,
    pub cellblock: Bytes,
}

impl HReply {
    pub fn message(m: &impl Message) -> HReply {
        HReply {
            param: m.encode_to_vec().into(),
            cellblock: Bytes::new(),
        }
    }

    pub fn with_cells(m: &impl Message, cells: BytesMut) -> HReply {
        HReply {
            param: m.encode_to_vec().into(),
            cellblock: cells.freeze(),
        }
    }
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
    ) -> Result<HReply, HbaseError> {
        self.rs
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // With authorization on, nobody the server cannot name is served anything, not even
        // the connection registry's answers or meta's rows.
        self.rs.authz.authenticate(&ctx.caller)?;
        // A master that is no longer the active one answers nothing (not even the registry's
        // "who is the master"), naming why.
        self.rs.check_master()?;
        let outcome = match service {
            "ClientService" => client_service::call(self, ctx, method, param, cellblock),
            "MasterService" => master_service::call(self, ctx, method, param),
            "ClientMetaService" => registry::call(self, method, param),
            "AdminService" => admin_service::call(self, ctx, method, param),
            _ => Err(HbaseError::unknown_service(service)),
        };
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
