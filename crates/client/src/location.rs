//! Where regions are: a cache of region locations per table, keyed by start key, filled from
//! LOCATE_REGION and LIST_REGIONS answers and pruned when a region turns out not to be served
//! where the cache said (split, moved, closed).

use bytes::Bytes;
use cellar_proto::pb;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};

/// A region and the server that serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionLocation {
    pub table: String,
    pub region_id: u64,
    /// Inclusive; empty: the table's first region.
    pub start_key: Bytes,
    /// Exclusive; empty: the table's last region.
    pub end_key: Bytes,
    /// `host:port` of the server's native RPC endpoint.
    pub server: String,
    /// HBase-style region name, `table,start_key,region_id`.
    pub name: String,
}

impl RegionLocation {
    pub(crate) fn from_pb(l: pb::RegionLocation) -> RegionLocation {
        RegionLocation {
            table: l.table,
            region_id: l.region_id,
            start_key: l.start_key,
            end_key: l.end_key,
            server: l.server,
            name: l.name,
        }
    }

    /// Whether `row` lies in this region.
    pub fn contains(&self, row: &[u8]) -> bool {
        row >= &self.start_key[..] && (self.end_key.is_empty() || row < &self.end_key[..])
    }

    /// Whether this region holds the rows just below `key` (start < key ≤ end); an empty key
    /// stands for the end of the table, held by the last region.
    pub(crate) fn holds_rows_below(&self, key: &[u8]) -> bool {
        if key.is_empty() {
            return self.end_key.is_empty();
        }
        &self.start_key[..] < key && (self.end_key.is_empty() || key <= &self.end_key[..])
    }

    pub(crate) fn region_ref(&self) -> pb::RegionRef {
        pb::RegionRef {
            table: self.table.clone(),
            region_id: self.region_id,
        }
    }

    fn overlaps(&self, other: &RegionLocation) -> bool {
        let starts_before_other_ends =
            other.end_key.is_empty() || self.start_key[..] < other.end_key[..];
        let ends_after_other_starts =
            self.end_key.is_empty() || self.end_key[..] > other.start_key[..];
        starts_before_other_ends && ends_after_other_starts
    }
}

/// Cached locations of every table this client has touched.
#[derive(Default)]
pub(crate) struct LocationCache {
    tables: Mutex<HashMap<String, BTreeMap<Bytes, RegionLocation>>>,
}

impl LocationCache {
    /// The cached region holding `row`.
    pub fn lookup(&self, table: &str, row: &[u8]) -> Option<RegionLocation> {
        let tables = self.tables.lock();
        let (_, loc) = tables
            .get(table)?
            .range(..=Bytes::copy_from_slice(row))
            .next_back()?;
        loc.contains(row).then(|| loc.clone())
    }

    /// The cached region holding the rows just below `key` (empty: the last region).
    pub fn lookup_below(&self, table: &str, key: &[u8]) -> Option<RegionLocation> {
        let tables = self.tables.lock();
        let regions = tables.get(table)?;
        let loc = if key.is_empty() {
            regions.values().next_back()?
        } else {
            regions.range(..Bytes::copy_from_slice(key)).next_back()?.1
        };
        loc.holds_rows_below(key).then(|| loc.clone())
    }

    /// Caches a location, evicting the entries it overlaps (a split's parent when a daughter
    /// arrives, the daughters when a stale parent does).
    pub fn insert(&self, loc: RegionLocation) {
        let mut tables = self.tables.lock();
        let regions = tables.entry(loc.table.clone()).or_default();
        let mut stale = Vec::new();
        let candidates: Box<dyn DoubleEndedIterator<Item = (&Bytes, &RegionLocation)>> =
            if loc.end_key.is_empty() {
                Box::new(regions.iter())
            } else {
                Box::new(regions.range(..loc.end_key.clone()))
            };
        // Cached regions do not overlap each other, so walking down from the last one starting
        // before the new end, the overlapping ones come first.
        for (start, cached) in candidates.rev() {
            if !cached.overlaps(&loc) {
                break;
            }
            stale.push(start.clone());
        }
        for s in stale {
            regions.remove(&s);
        }
        regions.insert(loc.start_key.clone(), loc);
    }

    /// Drops a location found stale, unless the entry already names another region.
    pub fn invalidate(&self, loc: &RegionLocation) {
        let mut tables = self.tables.lock();
        if let Some(regions) = tables.get_mut(&loc.table) {
            if regions
                .get(&loc.start_key)
                .is_some_and(|c| c.region_id == loc.region_id)
            {
                regions.remove(&loc.start_key);
            }
        }
    }

    /// Forgets a table's regions (after it was deleted, truncated, split or altered).
    /// Forgets every cached location (regions moved).
    pub fn clear(&self) {
        self.tables.lock().clear();
    }

    pub fn invalidate_table(&self, table: &str) {
        self.tables.lock().remove(table);
    }

    /// Replaces a table's regions with a full listing.
    pub fn replace_table(&self, table: &str, regions: &[RegionLocation]) {
        let map = regions
            .iter()
            .map(|r| (r.start_key.clone(), r.clone()))
            .collect();
        self.tables.lock().insert(table.to_string(), map);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(id: u64, start: &str, end: &str) -> RegionLocation {
        RegionLocation {
            table: "t".into(),
            region_id: id,
            start_key: Bytes::copy_from_slice(start.as_bytes()),
            end_key: Bytes::copy_from_slice(end.as_bytes()),
            server: "127.0.0.1:1".into(),
            name: format!("t,{start},{id}"),
        }
    }

    fn ids(c: &LocationCache) -> Vec<u64> {
        c.tables
            .lock()
            .get("t")
            .map(|m| m.values().map(|l| l.region_id).collect())
            .unwrap_or_default()
    }

    #[test]
    fn lookup_finds_the_region_holding_a_row() {
        let c = LocationCache::default();
        c.insert(loc(1, "", "g"));
        c.insert(loc(2, "g", "p"));
        assert_eq!(c.lookup("t", b"").map(|l| l.region_id), Some(1));
        assert_eq!(c.lookup("t", b"f\xff").map(|l| l.region_id), Some(1));
        assert_eq!(c.lookup("t", b"g").map(|l| l.region_id), Some(2));
        assert_eq!(c.lookup("t", b"p"), None, "past the last cached region");
        assert_eq!(c.lookup("other", b"a"), None);
        c.insert(loc(3, "p", ""));
        assert_eq!(c.lookup("t", b"zzz").map(|l| l.region_id), Some(3));
    }

    #[test]
    fn lookup_below_finds_the_region_before_a_boundary() {
        let c = LocationCache::default();
        c.insert(loc(1, "", "g"));
        c.insert(loc(2, "g", "p"));
        assert_eq!(c.lookup_below("t", b"g").map(|l| l.region_id), Some(1));
        assert_eq!(c.lookup_below("t", b"h").map(|l| l.region_id), Some(2));
        assert_eq!(c.lookup_below("t", b"p").map(|l| l.region_id), Some(2));
        assert_eq!(c.lookup_below("t", b""), None, "last region not cached");
        c.insert(loc(3, "p", ""));
        assert_eq!(c.lookup_below("t", b"").map(|l| l.region_id), Some(3));
        assert_eq!(c.lookup_below("t", b"a").map(|l| l.region_id), Some(1));
    }

    #[test]
    fn a_split_replaces_its_parent_and_a_stale_parent_replaces_daughters() {
        let c = LocationCache::default();
        c.insert(loc(1, "", "g"));
        c.insert(loc(2, "g", ""));
        // Region 2 split at "m": the first daughter evicts the parent.
        c.insert(loc(3, "g", "m"));
        assert_eq!(ids(&c), vec![1, 3]);
        assert_eq!(c.lookup("t", b"n"), None);
        c.insert(loc(4, "m", ""));
        assert_eq!(ids(&c), vec![1, 3, 4]);
        // A location covering everything evicts all.
        c.insert(loc(9, "", ""));
        assert_eq!(ids(&c), vec![9]);
    }

    #[test]
    fn invalidation_drops_only_the_named_region() {
        let c = LocationCache::default();
        c.insert(loc(1, "", "g"));
        c.insert(loc(2, "g", ""));
        c.invalidate(&loc(7, "g", "")); // another region id at that start: kept
        assert_eq!(ids(&c), vec![1, 2]);
        c.invalidate(&loc(2, "g", ""));
        assert_eq!(ids(&c), vec![1]);
        c.invalidate_table("t");
        assert_eq!(ids(&c), Vec::<u64>::new());
        c.replace_table("t", &[loc(5, "", "k"), loc(6, "k", "")]);
        assert_eq!(c.lookup("t", b"z").map(|l| l.region_id), Some(6));
    }
}
