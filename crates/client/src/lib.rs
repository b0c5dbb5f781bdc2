//! Cellar's Rust client over the native protocol (`cellar_proto`).
//!
//! ```no_run
//! # async fn demo() -> cellar_client::Result<()> {
//! use cellar_client::{Client, Get, RowMutation, LATEST_TIMESTAMP};
//! let client = Client::connect("127.0.0.1:16200").await?;
//! let users = client.table("users");
//! users
//!     .put(RowMutation::new("u1").put(b"info", b"name", LATEST_TIMESTAMP, "Ada"))
//!     .await?;
//! let row = users.get(Get::new("u1")).await?;
//! assert_eq!(row.value(b"info", b"name").map(|v| &v[..]), Some(&b"Ada"[..]));
//! # Ok(()) }
//! ```
//!
//! A [`Client`] keeps one connection per server and a cache of region locations shared by
//! all its tables. Calls on a region that split or moved, on a dropped connection, or on a
//! busy server are retried (HBase's pause and backoff table) after looking the region up
//! again; errors retrying cannot fix (unknown table or family, bad arguments, a disabled
//! table) reach the caller at once with the server's message. Increments, appends and
//! check-and-mutate are not resent once a connection broke after sending them (they may have
//! been applied). A scanner idle past its server lease fails with UNKNOWN_SCANNER; one the
//! server lost to a split or a dropped connection reopens after the last row returned.
//! [`blocking`] wraps the same client for synchronous code.

mod admin;
mod batch;
pub mod blocking;
mod client;
mod cluster;
mod config;
mod connection;
mod error;
mod location;
mod prepared;
mod retry;
mod row;
mod scan_shape;
mod scanner;
mod table;
mod timing;
mod tls;
mod transport;

pub use admin::{Admin, BulkLoadFile, BulkLoaded, TableInfo};
pub use batch::{BatchOp, BatchOutcome};
/// What a server reports about itself: the model's type, as the server fills it in.
pub use cellar_model::{RegionLoad, ServerLoad, ServerStatus as Status};
pub use client::Client;
pub use config::ClientConfig;
pub use error::{Error, Result};
pub use location::RegionLocation;
pub use prepared::PreparedScan;
pub use row::Row;
pub use scanner::Scanner;
pub use table::Table;
pub use timing::CallTiming;
pub use tls::TlsClientConfig;
pub use transport::{parse_url, Transport};

pub use cellar_model::{
    BloomType, Cell, CellType, Column, Comparator, CompareOp, Compression, Condition, Durability,
    FamilySchema, Filter, Get, ListOp, RowMutation, RowRange, Scan, TableSchema, TimeRange,
    LATEST_TIMESTAMP,
};
pub use cellar_proto::pb::{ErrorCode, Permission, PermissionScope};
