//! [`MemRegion`]: a [`RegionApi`] over a sorted map behind a lock, for fakes and tests.
//!
//! It keeps every cell written (puts and delete markers) and answers reads with the storage
//! engine's rules (`crates/storage/src/region/matcher.rs`): a put is masked by a family
//! delete at or after it, a family-version or version delete at its timestamp, a column
//! delete at or after it, whatever the order they were written in; the family's
//! `max_versions` newest unmasked puts exist; TTL expires older ones but the `min_versions`
//! newest; then the read's time range, columns and version count apply. Raw scans return
//! markers too. Nothing is ever dropped: flush and compaction do nothing, and reads are the
//! same before and after them, as the engine's are. The conformance checks
//! ([`super::conformance`]) hold it to the engine.

use super::{cell_ref, replay_cells, RegionApi, RowScanner};
use crate::cell::{Cell, CellSink, CellType};
use crate::error::{Error, Result};
use crate::mutation::RowMutation;
use crate::query::{Column, Get, Scan, TimeRange};
use crate::schema::{FamilySchema, TableSchema};
use crate::LATEST_TIMESTAMP;
use bytes::Bytes;
use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, PoisonError, RwLock};

/// A cell's coordinates in the engine's order: row, family, qualifier ascending; timestamp,
/// type code and sequence id descending (newest first, a marker before the put it covers).
type Key = (Bytes, Bytes, Bytes, Reverse<u64>, Reverse<u8>, Reverse<u64>);

/// The smallest key of `row` (and of `family` in it).
fn first_of(row: &Bytes, family: Bytes) -> Key {
    (
        row.clone(),
        family,
        Bytes::new(),
        Reverse(u64::MAX),
        Reverse(u8::MAX),
        Reverse(u64::MAX),
    )
}

#[derive(Default)]
struct State {
    cells: BTreeMap<Key, Bytes>,
    /// The last sequence id given to a mutation.
    seq: u64,
}

type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// One region holding every row of a table, in memory. Thread-safe; [`MemRegion::reopen`]
/// gives another handle on the same data, as opening a region's directory again does.
pub struct MemRegion {
    /// Families sorted by name: the order reads return them in.
    schema: Arc<TableSchema>,
    state: Arc<RwLock<State>>,
    clock: Clock,
}

fn system_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What one read wants of one family.
struct ReadSpec {
    /// Sorted; `None`: every qualifier.
    qualifiers: Option<Vec<Bytes>>,
    time_range: TimeRange,
    max_versions: u32,
    raw: bool,
}

impl ReadSpec {
    fn wants(&self, qualifier: &[u8]) -> bool {
        self.qualifiers
            .as_ref()
            .is_none_or(|qs| qs.binary_search_by(|q| q.as_ref().cmp(qualifier)).is_ok())
    }
}

impl MemRegion {
    /// An empty region of `schema`'s table, on the system clock.
    pub fn new(schema: TableSchema) -> Result<MemRegion> {
        schema.validate()?;
        let mut schema = schema;
        schema.families.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(MemRegion {
            schema: Arc::new(schema),
            state: Arc::default(),
            clock: Arc::new(system_millis),
        })
    }

    /// The region with `clock` (milliseconds since the epoch) for timestamps and TTLs.
    pub fn with_clock(mut self, clock: impl Fn() -> u64 + Send + Sync + 'static) -> MemRegion {
        self.clock = Arc::new(clock);
        self
    }

    /// Another handle on the same data (and schema and clock).
    pub fn reopen(&self) -> MemRegion {
        MemRegion {
            schema: Arc::clone(&self.schema),
            state: Arc::clone(&self.state),
            clock: Arc::clone(&self.clock),
        }
    }

    pub fn schema(&self) -> &TableSchema {
        &self.schema
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn family(&self, name: &[u8]) -> Result<&FamilySchema> {
        self.schema.family(name).ok_or_else(|| {
            Error::NoSuchFamily(format!(
                "'{}' in table '{}'",
                String::from_utf8_lossy(name),
                self.schema.name
            ))
        })
    }

    /// The families a read of `columns` reads, with what it wants of each.
    fn specs(
        &self,
        columns: &[Column],
        time_range: TimeRange,
        max_versions: u32,
        raw: bool,
    ) -> Result<Vec<(&FamilySchema, ReadSpec)>> {
        for c in columns {
            self.family(&c.family)?;
        }
        Ok(self
            .schema
            .families
            .iter()
            .filter_map(|f| {
                let qualifiers = if columns.is_empty() {
                    None
                } else {
                    let mine: Vec<&Column> = columns
                        .iter()
                        .filter(|c| c.family == f.name.as_bytes())
                        .collect();
                    if mine.is_empty() {
                        return None;
                    }
                    if mine.iter().any(|c| c.qualifier.is_none()) {
                        None
                    } else {
                        let mut qs: Vec<Bytes> =
                            mine.iter().filter_map(|c| c.qualifier.clone()).collect();
                        qs.sort();
                        qs.dedup();
                        Some(qs)
                    }
                };
                let spec = ReadSpec {
                    qualifiers,
                    time_range,
                    max_versions: max_versions.max(1),
                    raw,
                };
                Some((f, spec))
            })
            .collect())
    }

    /// The visible cells of `row`, family by family, in read order.
    fn read_row(
        state: &State,
        row: &Bytes,
        specs: &[(&FamilySchema, ReadSpec)],
        now: u64,
        out: &mut Vec<Cell>,
    ) {
        for (family, spec) in specs {
            let name = Bytes::copy_from_slice(family.name.as_bytes());
            let cells: Vec<(&Key, &Bytes)> = state
                .cells
                .range(first_of(row, name.clone())..)
                .take_while(|(k, _)| k.0 == row && k.1 == name)
                .collect();
            if spec.raw {
                read_raw(&cells, spec, out);
            } else {
                read_visible(&cells, family, spec, now, out);
            }
        }
    }

    /// Timestamp of the newest visible version of a column.
    fn latest_ts(
        &self,
        state: &State,
        row: &Bytes,
        family: &[u8],
        qualifier: &[u8],
    ) -> Option<u64> {
        let get = Get::new(row.clone()).column(family, qualifier);
        let specs = self.specs(&get.columns, get.time_range, 1, false).ok()?;
        let mut cells = Vec::new();
        MemRegion::read_row(state, row, &specs, (self.clock)(), &mut cells);
        cells.first().map(|c| c.timestamp)
    }

    fn validate(&self, m: &RowMutation) -> Result<()> {
        m.validate(|family| self.family(family).map(|_| ()))
    }
}

/// The engine's visibility rules over one row's cells of one family (see the module's notes).
fn read_visible(
    cells: &[(&Key, &Bytes)],
    family: &FamilySchema,
    spec: &ReadSpec,
    now: u64,
    out: &mut Vec<Cell>,
) {
    let expire_before = family
        .ttl_secs
        .map_or(0, |ttl| now.saturating_sub(ttl.saturating_mul(1000)));
    // With KEEP_DELETED_CELLS, a read that ends at or before a marker does not see it.
    let counts = |ts: u64| !(family.keep_deleted_cells && ts >= spec.time_range.max);
    let marker = |t: CellType| {
        cells
            .iter()
            .filter(move |(k, _)| k.4 .0 == t.code() && counts(k.3 .0))
            .map(|(k, _)| (k.2.clone(), k.3 .0))
    };
    let family_delete = marker(CellType::DeleteFamily).map(|(_, ts)| ts).max();
    let family_version_deletes: Vec<u64> = marker(CellType::DeleteFamilyVersion)
        .map(|(_, ts)| ts)
        .collect();
    for column in cells.chunk_by(|a, b| a.0 .2 == b.0 .2) {
        let Some(((_, _, qualifier, _, _, _), _)) = column.first() else {
            continue;
        };
        let of_column = |t: CellType| {
            column
                .iter()
                .filter(move |(k, _)| k.4 .0 == t.code() && counts(k.3 .0))
                .map(|(k, _)| k.3 .0)
        };
        let column_delete = of_column(CellType::DeleteColumn).max();
        let version_deletes: Vec<u64> = of_column(CellType::Delete).collect();
        let masked = |ts: u64| {
            family_delete.is_some_and(|d| ts <= d)
                || family_version_deletes.contains(&ts)
                || column_delete.is_some_and(|d| ts <= d)
                || version_deletes.contains(&ts)
        };
        let (mut last_put_ts, mut versions, mut returned) = (None, 0u32, 0u32);
        for (k, value) in column {
            let ts = k.3 .0;
            if k.4 .0 != CellType::Put.code() || last_put_ts == Some(ts) {
                continue; // a marker, or an older write of the same version
            }
            last_put_ts = Some(ts);
            if masked(ts) {
                continue;
            }
            versions += 1;
            let exists = versions <= family.max_versions
                && (ts >= expire_before || versions <= family.min_versions);
            if exists && spec.time_range.contains(ts) && spec.wants(qualifier) {
                returned += 1;
                if returned <= spec.max_versions {
                    out.push(cell_of(k, value, CellType::Put));
                }
            }
        }
    }
}

/// A raw read: every cell in the time range and columns, markers included (family markers
/// whatever the columns), up to the read's versions of puts per column.
fn read_raw(cells: &[(&Key, &Bytes)], spec: &ReadSpec, out: &mut Vec<Cell>) {
    for column in cells.chunk_by(|a, b| a.0 .2 == b.0 .2) {
        let mut returned = 0u32;
        for (k, value) in column {
            let Some(t) = CellType::from_code(k.4 .0) else {
                continue;
            };
            let ts = k.3 .0;
            if !spec.time_range.contains(ts) {
                continue;
            }
            if !spec.wants(&k.2) {
                if t.is_family_delete() {
                    out.push(cell_of(k, value, t));
                }
                continue;
            }
            if t == CellType::Put {
                returned += 1;
                if returned > spec.max_versions {
                    continue;
                }
            }
            out.push(cell_of(k, value, t));
        }
    }
}

fn cell_of(k: &Key, value: &Bytes, cell_type: CellType) -> Cell {
    Cell {
        row: k.0.clone(),
        family: k.1.clone(),
        qualifier: k.2.clone(),
        timestamp: k.3 .0,
        cell_type,
        seq_id: k.5 .0,
        value: value.clone(),
    }
}

/// The rows a [`MemRegion`] scan selected, read when it started.
pub struct MemScanner {
    rows: VecDeque<Vec<Cell>>,
}

impl Iterator for MemScanner {
    type Item = Result<Vec<Cell>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rows.pop_front().map(Ok)
    }
}

impl RowScanner for MemScanner {
    fn next_row_into<S: CellSink>(&mut self, sink: &mut S) -> Result<bool> {
        match self.rows.pop_front() {
            Some(cells) => {
                replay_cells(&cells, sink);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl RegionApi for MemRegion {
    type Scanner = MemScanner;

    fn get_into<S: CellSink>(&self, get: &Get, sink: &mut S) -> Result<()> {
        let specs = self.specs(&get.columns, get.time_range, get.max_versions, false)?;
        let now = (self.clock)();
        let state = self.read();
        let mut cells = Vec::new();
        // Family by family; every family read ends, cells or not, as the engine's reads do.
        for spec in &specs {
            cells.clear();
            MemRegion::read_row(
                &state,
                &get.row,
                std::slice::from_ref(spec),
                now,
                &mut cells,
            );
            for c in &cells {
                sink.cell(cell_ref(c));
            }
            sink.end_family();
        }
        Ok(())
    }

    fn scan(&self, scan: &Scan) -> Result<MemScanner> {
        let specs = self.specs(&scan.columns, scan.time_range, scan.max_versions, scan.raw)?;
        let now = (self.clock)();
        let state = self.read();
        let in_range = |row: &Bytes| {
            if scan.reversed {
                (scan.start_row.is_empty() || *row <= scan.start_row)
                    && (scan.stop_row.is_empty() || *row > scan.stop_row)
            } else {
                *row >= scan.start_row && (scan.stop_row.is_empty() || *row < scan.stop_row)
            }
        };
        let mut rows: Vec<&Bytes> = state
            .cells
            .keys()
            .map(|k| &k.0)
            .filter(|r| in_range(r))
            .collect();
        rows.dedup();
        if scan.reversed {
            rows.reverse();
        }
        let mut out = VecDeque::new();
        for row in rows {
            if scan.limit > 0 && out.len() as u64 >= scan.limit {
                break;
            }
            let mut cells = Vec::new();
            MemRegion::read_row(&state, row, &specs, now, &mut cells);
            if !cells.is_empty() {
                out.push_back(cells);
            }
        }
        Ok(MemScanner { rows: out })
    }

    fn mutate(&self, m: &RowMutation) -> Result<()> {
        self.validate(m)?;
        let now = (self.clock)();
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let stamps: Vec<u64> = m
            .entries
            .iter()
            .map(|e| {
                if e.timestamp != LATEST_TIMESTAMP {
                    e.timestamp
                } else if e.cell_type == CellType::Delete {
                    self.latest_ts(&state, &m.row, &e.family, &e.qualifier)
                        .unwrap_or(now)
                } else {
                    now
                }
            })
            .collect();
        state.seq += 1;
        let seq = state.seq;
        for (e, ts) in m.entries.iter().zip(stamps) {
            // Of equal coordinates in one mutation the last written is kept.
            state.cells.insert(
                (
                    m.row.clone(),
                    e.family.clone(),
                    e.qualifier.clone(),
                    Reverse(ts),
                    Reverse(e.cell_type.code()),
                    Reverse(seq),
                ),
                e.value.clone(),
            );
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn compact(&self, _major: bool) -> Result<()> {
        Ok(())
    }

    fn now_millis(&self) -> u64 {
        (self.clock)()
    }

    fn close(self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_the_region_conformance_checks() {
        let region = MemRegion::new(super::super::conformance::schema()).expect("schema");
        super::super::conformance::check(|| region.reopen());
    }

    #[test]
    fn ttl_expires_all_but_min_versions_on_its_clock() {
        let mut family = FamilySchema::new("f");
        family.ttl_secs = Some(10);
        family.max_versions = 5;
        family.min_versions = 1;
        let now = Arc::new(std::sync::atomic::AtomicU64::new(100_000));
        let clock = Arc::clone(&now);
        let r = MemRegion::new(TableSchema::new("t", vec![family]))
            .expect("schema")
            .with_clock(move || clock.load(std::sync::atomic::Ordering::Relaxed));
        r.mutate(&RowMutation::new("r").put(b"f", b"q", 95_000, "old"))
            .expect("put");
        r.mutate(&RowMutation::new("r").put(b"f", b"q", 99_000, "new"))
            .expect("put");
        let all = Get::new("r").versions(5);
        assert_eq!(r.get(&all).expect("get").len(), 2);
        now.store(106_000, std::sync::atomic::Ordering::Relaxed);
        let values = |r: &MemRegion| -> Vec<Bytes> {
            r.get(&all)
                .expect("get")
                .into_iter()
                .map(|c| c.value)
                .collect()
        };
        assert_eq!(values(&r), ["new"], "95 000 is past the TTL");
        now.store(200_000, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            values(&r),
            ["new"],
            "both past the TTL; min_versions keeps one"
        );
    }
}
