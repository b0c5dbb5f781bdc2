//! Cellar's native wire protocol, version 1: the connection preamble and frames ([`frame`]),
//! the protobuf messages ([`pb`], from `proto/cellar.proto`), cell blocks ([`cellblock`], the
//! KeyValue layout HBase's codec uses) and conversions to and from the data model
//! ([`convert`]). Specification: `docs/native-protocol.md`.
//!
//! It also holds the HBase 2.x wire format Cellar speaks to unmodified HBase clients: the
//! messages ([`hbase`]) and the framing ([`hbase_wire`]); see `docs/hbase-protocol.md`.

// Policy: nothing read from the network may panic the decoder, so no slice indexing outside
// tests; where an index is in bounds by construction, an `allow` on the smallest item says why.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

pub mod cellblock;
pub mod convert;
pub mod frame;
pub mod hbase_wire;
pub mod prepared;

/// The generated protobuf messages of `proto/cellar.proto`.
#[allow(clippy::all, clippy::unwrap_used)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/cellar.v1.rs"));
}

/// HBase 2.x wire messages (Cellar's own subset; package hbase.pb). Field numbers and names
/// are HBase's wire facts; see `proto/hbase/` and `docs/hbase-protocol.md`.
#[allow(clippy::all, clippy::unwrap_used)]
pub mod hbase {
    include!(concat!(env!("OUT_DIR"), "/hbase.pb.rs"));
}

pub use frame::{FrameError, PREAMBLE, PROTOCOL_VERSION};
