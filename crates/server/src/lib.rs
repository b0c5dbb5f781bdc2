//! Cellar's server: master and region server roles in one process (`cellar standalone`).
//!
//! Request path: [`rpc`] (TCP listener, one task per connection reading frames) → handler
//! pool → [`service`] (decodes a method's message, calls [`region_server`]) → [`router`]
//! (table + row → open region) → `cellar_storage::region::Region`. Admin calls go to
//! [`catalog`], which keeps tables and regions in the [`meta`] table. [`split`] splits regions
//! that grew past their table's split size; [`scanners`] holds open scanners under leases.

pub mod catalog;
pub mod config;
pub mod coord;
pub mod error;
pub mod faults;
pub mod hbase;
pub mod http;
pub mod logs;
pub mod master;
pub mod meta;
pub mod metrics;
pub mod native_service;
pub mod node;
pub mod prepared;
pub mod region_server;
pub mod router;
pub mod rpc;
pub mod scanners;
pub mod security;
pub mod status;
pub mod thrift;
pub mod web;
/// The standalone server is a [`node::Node`] in the standalone role.
pub mod standalone {
    pub use crate::node::{Node, NodeRole, Standalone};
}

pub use config::ServerConfig;
