//! The storage-engine benchmark: Cellar's region against RocksDB, side by side.
//!
//! Layout: [`args`] (flags), [`keys`] (key and value generation), [`engines`] (the [`Engine`]
//! trait and one adapter per engine), [`workload`] (timed loops), [`sys`] (what `/proc` says
//! about this process), [`report`] (results, JSON, the Markdown table), [`child`] (one engine in
//! one process, driven over stdin/stdout), [`driver`] (the parent that starts the children) and
//! [`cgroup`] (`--read-memory`: the same memory for each engine's reads).
//! How to run it and what it measures: `docs/engine-bench.md`.

pub mod args;
pub mod cgroup;
pub mod child;
pub mod driver;
pub mod engines;
pub mod error;
pub mod keys;
pub mod report;
pub mod sys;
pub mod workload;

pub use engines::{Engine, Session};
pub use error::{BenchError, Result};
