//! HBase's names for tables and regions, and the order of `hbase:meta`'s rows.
//!
//! The Java client recomputes a region's name from its RegionInfo (table, start key, region
//! id, with an MD5 "encoded name" suffix) and sends that name back in every data call, so
//! Cellar must derive region names exactly as HBase does.

use super::HbaseError;
use bytes::Bytes;

/// Meta's region name, as HBase 2 clients know it (old format, no encoded suffix).
pub(crate) const META_REGION_NAME: &[u8] = b"hbase:meta,,1";

/// What a region specifier names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RegionTarget {
    Meta,
    /// A user region: Cellar's table name (`default:` dropped) and region id.
    User {
        table: String,
        region_id: u64,
    },
}

/// The region a RegionSpecifier names (`kind` is its RegionSpecifierType: 1 REGION_NAME,
/// 2 ENCODED_REGION_NAME). A name that does not parse is a DoNotRetryIOException naming it.
pub(crate) fn parse_region(kind: i32, value: &[u8]) -> Result<RegionTarget, HbaseError> {
    let _ = (kind, value);
    Err(HbaseError::do_not_retry("region names are not parsed yet"))
}

/// A region's full name: `<table>,<start key>,<region id>.<md5 hex of the preceding part>.`
/// (`<table>` without the `default:` namespace).
pub(crate) fn region_name(table: &str, start_key: &[u8], region_id: u64) -> Bytes {
    let _ = (table, start_key, region_id);
    Bytes::new()
}
