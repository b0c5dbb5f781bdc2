//! Cellar's data model: cells, keys and their order, mutations, schemas and errors.
//!
//! This crate does no IO. Everything above it (storage, server, client) shares these types,
//! so the key order defined in [`key`] is the one order of the whole system.

pub mod cell;
pub mod error;
pub mod filter;
pub mod key;
pub mod mutation;
pub mod query;
pub mod region_api;
pub mod schema;
pub mod status;
pub mod text;

pub use cell::{Cell, CellRef, CellSink, CellType, LATEST_TIMESTAMP};
pub use error::{Error, Result};
pub use filter::{
    parse_filter, Comparator, CompareOp, Condition, Filter, FilterEval, FuzzyKey, ListOp, RowRange,
};
pub use mutation::{Durability, Entry, MutationKind, Nonce, RowMutation};
pub use query::{prefix_successor, Column, Get, Scan, TimeRange};
pub use region_api::{MemRegion, RegionApi, RowScanner};
pub use schema::{BloomType, Compression, FamilySchema, TableOptions, TableSchema};
pub use status::{RegionLoad, ServerLoad, ServerStatus};
pub use text::to_string_binary;
