//! Cellar's server: the region server ([`region_server`], the data plane), the master
//! ([`master`], the catalog's keeper) and the front ends that call them ([`native_service`]
//! over [`rpc`], and [`hbase`]); standalone runs all of them in one process.
//!
//! Request path: [`rpc`] (TCP listener, one task per connection reading frames) → handler
//! pool → [`native_service`] (decodes a method's message, calls [`region_server`]) →
//! [`router`] (table + row → open region) → `cellar_storage::region::Region`. Admin calls go
//! to the [`master`] ([`catalog`]), which keeps tables and regions in the [`meta`] table and
//! splits regions that grew past their table's split size; [`scanners`] holds open scanners
//! under leases. `docs/server-layout.md` has the map.

pub mod bulk_files;
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
pub mod names;
pub mod native_service;
pub mod node;
pub mod prepared;
pub mod region_server;
pub mod router;
pub mod rpc;
pub mod scanners;
pub mod security;
pub mod snapshot;
pub mod status;
pub mod thrift;
pub mod web;
/// The standalone server is a [`node::Node`] in the standalone role.
pub mod standalone {
    pub use crate::node::{Node, NodeRole, Standalone};
}

pub use config::ServerConfig;
