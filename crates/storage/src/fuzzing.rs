//! What the fuzz targets in `fuzz/` reach beneath the engine's API: the on-disk formats'
//! decoders and encoders on their own, without a region or a server around them. Not API:
//! hidden from the docs, and it changes whenever a format does.

/// Store-file blocks and the block codecs, without a file around them.
pub mod storefile_block {
    pub use crate::storefile::fuzzing::*;
}

/// The WAL segment format (`docs/wal-format.md`): header, record framing, decoding, and the
/// replay of one segment's bytes.
pub mod wal_segment {
    pub use crate::wal::format::*;
    pub use crate::wal::reader::{replay_segment, Damage, SegmentReplay};
}

/// A region's descriptor, `.regioninfo` (`docs/region-layout.md`).
pub mod region_descriptor {
    pub use crate::region::descriptor::{read, write, DESCRIPTOR_FILE};
}

/// A store's reference files and compaction markers, and its files' names
/// (`docs/region-layout.md`).
pub mod store_files {
    pub use crate::region::store_files::{
        read_marker, ref_file_name, store_file_name, write_marker, Marker, Reference,
    };
}
