//! What the server says of a region, and where it is: the region API's own types. The native
//! protocol's messages are made from these at its edge (`native_service.rs`), the HBase front end's
//! at its own; meta stores the state by name (`meta.rs`).

use cellar_storage::region::RegionInfo;

/// A region's state (HBase's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegionState {
    Open,
    Closed,
    Splitting,
    Split,
    Offline,
    /// Being merged with its neighbours (a parent), or not yet committed (the merged region).
    Merging,
    /// Merged into another region; its directory waits for the janitor.
    Merged,
}

impl RegionState {
    /// HBase's name, as meta's `info:state` holds it.
    pub fn name(self) -> &'static str {
        match self {
            RegionState::Open => "OPEN",
            RegionState::Closed => "CLOSED",
            RegionState::Splitting => "SPLITTING",
            RegionState::Split => "SPLIT",
            RegionState::Offline => "OFFLINE",
            RegionState::Merging => "MERGING",
            RegionState::Merged => "MERGED",
        }
    }

    pub fn from_name(name: &[u8]) -> Option<RegionState> {
        Some(match name {
            b"OPEN" => RegionState::Open,
            b"CLOSED" => RegionState::Closed,
            b"SPLITTING" => RegionState::Splitting,
            b"SPLIT" => RegionState::Split,
            b"OFFLINE" => RegionState::Offline,
            b"MERGING" => RegionState::Merging,
            b"MERGED" => RegionState::Merged,
            _ => return None,
        })
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            RegionState::Open => 1,
            RegionState::Closed => 2,
            RegionState::Splitting => 3,
            RegionState::Split => 4,
            RegionState::Offline => 5,
            RegionState::Merging => 6,
            RegionState::Merged => 7,
        }
    }

    pub(crate) fn from_code(code: u8) -> RegionState {
        match code {
            1 => RegionState::Open,
            2 => RegionState::Closed,
            3 => RegionState::Splitting,
            4 => RegionState::Split,
            6 => RegionState::Merging,
            7 => RegionState::Merged,
            _ => RegionState::Offline,
        }
    }
}

/// Where a region is served, for clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionLocation {
    pub table: String,
    pub info: RegionInfo,
    /// `host:port` of the native RPC endpoint serving it.
    pub server: String,
    /// HBase's region name: `table,start_key,region_id`.
    pub name: String,
    pub state: RegionState,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_round_trip() {
        for s in [
            RegionState::Open,
            RegionState::Closed,
            RegionState::Splitting,
            RegionState::Split,
            RegionState::Offline,
            RegionState::Merging,
            RegionState::Merged,
        ] {
            assert_eq!(RegionState::from_name(s.name().as_bytes()), Some(s));
            assert_eq!(RegionState::from_code(s.code()), s);
        }
        assert_eq!(RegionState::from_name(b"open"), None);
    }
}
