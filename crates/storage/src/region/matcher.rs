//! Which cells of a row are visible: HBase's delete, version, TTL and time-range rules,
//! applied to one family's cells in key order.
//!
//! Rules, per column, newest first:
//! - a cell whose write the read point does not see (later, in flight, aborted) does not exist;
//! - of several puts at the same timestamp only the newest (highest sequence id) counts;
//! - a put is masked by a `DeleteFamily` with timestamp ≥ its own, a `DeleteFamilyVersion` or
//!   `Delete` at exactly its timestamp, or a `DeleteColumn` at or after it — whatever the order
//!   the two were written in (HBase's default: a delete masks later puts with older timestamps
//!   until a major compaction removes the marker);
//! - the family's `max_versions` newest unmasked puts exist, older ones do not;
//! - of those, puts older than the TTL are expired, except the `min_versions` newest;
//! - a read then applies its time range, its columns and its own version count.
//!
//! Departure from HBase, on purpose: the family's version limit is applied before the time
//! range, so a read returns the same answer before and after a compaction (in HBase a
//! time-ranged read can see a version that a later compaction removes).
//!
//! HOT PATH for every read: no allocation per cell.

use super::mvcc::ReadPoint;
use crate::model::key::KeyRef;
use crate::model::{CellType, FamilySchema, TimeRange};
use bytes::Bytes;

/// What a read wants from a family.
#[derive(Clone, Debug)]
pub struct ReadSpec {
    pub read_point: ReadPoint,
    pub time_range: TimeRange,
    pub max_versions: u32,
    /// Sorted qualifiers to return; `None`: all.
    pub qualifiers: Option<Vec<Bytes>>,
    /// A raw read: every cell the read point sees — delete markers, masked puts, versions
    /// past the family's limit, expired cells — in its time range and columns, up to
    /// `max_versions` puts per column.
    pub raw: bool,
}

/// Streaming matcher for one row of one family. Feed cells in key order; reset per row.
pub struct RowMatcher<'a> {
    family: &'a FamilySchema,
    spec: &'a ReadSpec,
    /// Cells with timestamps below this are expired (0: no TTL).
    expire_before: u64,
    /// Highest `DeleteFamily` timestamp seen in the row.
    family_delete: Option<u64>,
    /// Timestamps of `DeleteFamilyVersion` markers (few: a small vector).
    family_version_deletes: Vec<u64>,
    column: ColumnState,
    /// Current qualifier, copied into a reused buffer.
    qualifier: Vec<u8>,
    started: bool,
    /// The reader's buffer for the column to skip past ([`super::read_row_cells`]).
    pub(crate) skip_to: Vec<u8>,
}

/// A matcher's buffers, kept by a reader that matches row after row (a scanner), so that a
/// row's matcher starts with them allocated: no allocation per row.
#[derive(Default)]
pub struct MatcherScratch {
    family_version_deletes: Vec<u64>,
    version_deletes: Vec<u64>,
    qualifier: Vec<u8>,
    skip_to: Vec<u8>,
}

#[derive(Default)]
struct ColumnState {
    delete_column: Option<u64>,
    version_deletes: Vec<u64>,
    last_put_ts: Option<u64>,
    /// Unmasked puts seen (the family's version count).
    versions: u32,
    /// Puts returned to the reader.
    returned: u32,
}

impl<'a> RowMatcher<'a> {
    pub fn new(family: &'a FamilySchema, spec: &'a ReadSpec, now_ms: u64) -> RowMatcher<'a> {
        RowMatcher::with_scratch(family, spec, now_ms, MatcherScratch::default())
    }

    /// [`RowMatcher::new`] with buffers from an earlier matcher ([`RowMatcher::into_scratch`]).
    pub fn with_scratch(
        family: &'a FamilySchema,
        spec: &'a ReadSpec,
        now_ms: u64,
        scratch: MatcherScratch,
    ) -> RowMatcher<'a> {
        let expire_before = family
            .ttl_secs
            .map_or(0, |ttl| now_ms.saturating_sub(ttl.saturating_mul(1000)));
        let MatcherScratch {
            mut family_version_deletes,
            mut version_deletes,
            mut qualifier,
            mut skip_to,
        } = scratch;
        family_version_deletes.clear();
        version_deletes.clear();
        qualifier.clear();
        skip_to.clear();
        RowMatcher {
            family,
            spec,
            expire_before,
            family_delete: None,
            family_version_deletes,
            column: ColumnState {
                version_deletes,
                ..ColumnState::default()
            },
            qualifier,
            started: false,
            skip_to,
        }
    }

    /// The matcher's buffers, for the next row's matcher.
    pub fn into_scratch(self) -> MatcherScratch {
        MatcherScratch {
            family_version_deletes: self.family_version_deletes,
            version_deletes: self.column.version_deletes,
            qualifier: self.qualifier,
            skip_to: self.skip_to,
        }
    }

    /// Starts a new row.
    pub fn reset(&mut self) {
        self.family_delete = None;
        self.family_version_deletes.clear();
        let deletes = std::mem::take(&mut self.column.version_deletes);
        self.column = ColumnState {
            version_deletes: deletes,
            ..ColumnState::default()
        };
        self.column.version_deletes.clear();
        self.started = false;
    }

    fn masked(&self, ts: u64) -> bool {
        self.family_delete.is_some_and(|d| ts <= d)
            || self.family_version_deletes.contains(&ts)
            || self.column.delete_column.is_some_and(|d| ts <= d)
            || self.column.version_deletes.contains(&ts)
    }

    fn wanted_qualifier(&self, q: &[u8]) -> bool {
        match &self.spec.qualifiers {
            None => true,
            Some(qs) => qs.binary_search_by(|x| x.as_ref().cmp(q)).is_ok(),
        }
    }

    /// Whether the cell at `key` exists for a reader (deletes resolved, versions and TTL
    /// applied), without the read's own time range, columns and version count. The basis of
    /// both reads and major compaction.
    pub fn survives(&mut self, key: &KeyRef<'_>) -> bool {
        if !self.spec.read_point.sees(key.seq()) {
            return false;
        }
        self.enter_column(key);
        let ts = key.timestamp();
        // KEEP_DELETED_CELLS: a read that ends at or before a marker does not see it, so it
        // sees the cells as they were before the delete.
        if self.family.keep_deleted_cells
            && ts >= self.spec.time_range.max
            && key.cell_type().is_some_and(CellType::is_delete)
        {
            return false;
        }
        match key.cell_type() {
            Some(CellType::DeleteFamily) => {
                self.family_delete = Some(self.family_delete.map_or(ts, |d| d.max(ts)));
                false
            }
            Some(CellType::DeleteFamilyVersion) => {
                self.family_version_deletes.push(ts);
                false
            }
            Some(CellType::DeleteColumn) => {
                self.column.delete_column =
                    Some(self.column.delete_column.map_or(ts, |d| d.max(ts)));
                false
            }
            Some(CellType::Delete) => {
                self.column.version_deletes.push(ts);
                false
            }
            Some(CellType::Put) => {
                if self.column.last_put_ts == Some(ts) {
                    return false; // an older write of the same version
                }
                self.column.last_put_ts = Some(ts);
                if self.masked(ts) {
                    return false;
                }
                self.column.versions += 1;
                if self.column.versions > self.family.max_versions {
                    return false;
                }
                ts >= self.expire_before || self.column.versions <= self.family.min_versions
            }
            None => false,
        }
    }

    /// Starts the column of `key` when it is not the current one.
    fn enter_column(&mut self, key: &KeyRef<'_>) {
        if !self.started || key.qualifier() != self.qualifier.as_slice() {
            self.started = true;
            self.qualifier.clear();
            self.qualifier.extend_from_slice(key.qualifier());
            let deletes = std::mem::take(&mut self.column.version_deletes);
            self.column = ColumnState {
                version_deletes: deletes,
                ..ColumnState::default()
            };
            self.column.version_deletes.clear();
        }
    }

    /// After [`RowMatcher::matches`] on `key`: no later cell of `key`'s column can be
    /// returned, so a reader may seek past the column instead of walking its older versions
    /// (a hot row's column can hold thousands in a memstore). True once the family's or the
    /// read's version count is reached, a `DeleteColumn` masks everything older, or the read
    /// does not want the column. Never for the empty qualifier, whose column shares its key
    /// range with the family delete markers that every other column needs.
    pub fn column_done(&self, key: &KeyRef<'_>) -> bool {
        if self.spec.raw
            || !self.started
            || key.qualifier().is_empty()
            || key.qualifier() != self.qualifier
        {
            return false;
        }
        let c = &self.column;
        c.versions >= self.family.max_versions
            || c.returned >= self.spec.max_versions
            || c.delete_column.is_some()
            || !self.wanted_qualifier(key.qualifier())
    }

    /// Whether nothing at or after `key` in this row can be returned: the read names its
    /// columns and `key` is past the last of them, or in the last and that column is done. A
    /// Get stops there instead of reading on to the row's end, which for a row whose cells
    /// end a block meant reading the next block (one Get in ~60 at 64 KiB blocks of 1 KiB
    /// cells, disk reads where the block is cold). Call after [`RowMatcher::matches`].
    pub fn row_done(&self, key: &KeyRef<'_>) -> bool {
        if self.spec.raw {
            return false;
        }
        let Some(last) = self.spec.qualifiers.as_ref().and_then(|qs| qs.last()) else {
            return false;
        };
        match key.qualifier().cmp(last.as_ref()) {
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal => self.column_done(key),
            std::cmp::Ordering::Greater => true,
        }
    }

    /// Whether the reader gets this cell.
    pub fn matches(&mut self, key: &KeyRef<'_>) -> bool {
        if self.spec.raw {
            return self.matches_raw(key);
        }
        if !self.survives(key) {
            return false;
        }
        if !self.spec.time_range.contains(key.timestamp())
            || !self.wanted_qualifier(key.qualifier())
        {
            return false;
        }
        self.column.returned += 1;
        self.column.returned <= self.spec.max_versions
    }

    /// [`RowMatcher::matches`] of a raw read: nothing is masked, expired or over the
    /// family's version limit; markers always come through, puts up to the read's versions.
    fn matches_raw(&mut self, key: &KeyRef<'_>) -> bool {
        if !self.spec.read_point.sees(key.seq()) {
            return false;
        }
        self.enter_column(key);
        if !self.spec.time_range.contains(key.timestamp())
            || !self.wanted_qualifier(key.qualifier())
        {
            // Family markers live under the empty qualifier and belong to every column read.
            return key.cell_type().is_some_and(CellType::is_family_delete)
                && self.spec.time_range.contains(key.timestamp());
        }
        match key.cell_type() {
            Some(CellType::Put) => {
                self.column.returned += 1;
                self.column.returned <= self.spec.max_versions
            }
            Some(_) => true,
            None => false,
        }
    }

    /// What a compaction keeps of a family with `keep_deleted_cells`: every delete marker
    /// and every put up to the family's versions (masked ones counted too) and TTL.
    pub fn survives_keeping_deleted(&mut self, key: &KeyRef<'_>) -> bool {
        if !self.spec.read_point.sees(key.seq()) {
            return false;
        }
        self.enter_column(key);
        let ts = key.timestamp();
        match key.cell_type() {
            Some(CellType::Put) => {
                if self.column.last_put_ts == Some(ts) {
                    return false; // an older write of the same version
                }
                self.column.last_put_ts = Some(ts);
                self.column.versions += 1;
                if self.column.versions > self.family.max_versions {
                    return false;
                }
                ts >= self.expire_before || self.column.versions <= self.family.min_versions
            }
            Some(_) => true,
            None => false,
        }
    }
}
