//! Cellar's native wire protocol, version 1: the connection preamble and frames ([`frame`]),
//! the protobuf messages ([`pb`], from `proto/cellar.proto`), cell blocks ([`cellblock`], the
//! KeyValue layout HBase's codec uses) and conversions to and from the data model
//! ([`convert`]). Specification: `docs/native-protocol.md`.

pub mod cellblock;
pub mod convert;
pub mod frame;

/// The generated protobuf messages of `proto/cellar.proto`.
#[allow(clippy::all, clippy::unwrap_used)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/cellar.v1.rs"));
}

pub use frame::{FrameError, PREAMBLE, PROTOCOL_VERSION};
