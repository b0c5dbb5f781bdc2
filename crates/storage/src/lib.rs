//! Cellar's storage engine.
//!
//! Write path: [`region::Region::mutate`] → [`wal`] (group commit) → [`memstore`] →
//! flush to a [`storefile`] → compaction.
//! Read path: [`region::Region::get`] / [`region::Region::scan`] → per-family store scanners
//! merging the memstore and store files ([`iter`]) under an MVCC read point, store files read
//! through the [`block_cache`]; Gets of families with the query cache on are answered from
//! [`query_cache`] when they can be.
//! All file access goes through [`fs::FileSystem`].
//!
//! What callers use is public; how the engine does it is not. [`region`] (regions, their
//! configuration and shared services, [`region::RegionDir`] for offline tools), [`wal`] (the
//! shared log, and [`wal::log_split`] for failover), [`fs`], [`storefile`], [`block_cache`],
//! [`query_cache`], [`memstore`] and [`iter`] export their types from the module itself; the
//! files behind them (matcher, MVCC, store, compaction planning, segment writer, block
//! layout...) are private. The fuzz targets reach the format codecs through the hidden
//! `fuzzing` module, which is not API.

// Policy: nothing read from a file or the network may panic the reader, so no slice indexing
// outside tests; where an index is in bounds by construction, an `allow` on the smallest item
// says why.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
// Every type a caller can get hold of, it can also name: a public type left inside a private
// module is either re-exported or not handed out.
#![warn(unnameable_types)]

pub mod block_cache;
mod counter;
pub mod deadline_wait;
pub mod fs;
#[doc(hidden)]
pub mod fuzzing;
mod heap;
pub mod iter;
pub mod memstore;
pub mod query_cache;
pub mod region;
pub mod storefile;
pub mod wal;

pub use cellar_model as model;
