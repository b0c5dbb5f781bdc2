//! The query cache (Hypertable's): the results of Gets, per row and read shape (columns, time
//! range, versions), kept in memory up to a byte budget shared by every region of a server.
//! A hit answers a Get without looking at a memstore, a bloom filter or a block.
//!
//! Never a stale read. A write to a row *begins* (before its cells can become visible) and
//! *ends* (after they are visible, or it aborted) in the cache:
//! - beginning drops the row's entries and marks the row as being written; while it is, Gets
//!   of the row neither read nor fill the cache;
//! - both bump their shard's generation. A Get that misses notes the generation, then takes
//!   its read point and reads; it may fill the cache only if the generation is unchanged, so no
//!   write of a row in the shard began or ended in between.
//!
//! So an entry, once in, reflects every write to its row that ended before it was read, and
//! any later write removes it when it begins, before it can be acknowledged. The writer does
//! this in the region's write path (`RegionInner::start` and `PendingWrite::settle`), under
//! no lock of the region.
//!
//! Rows are hashed with the region's id into 64 shards, each a mutex over a map and a CLOCK
//! ring for eviction (approximate LRU: an entry hit since the hand last passed gets another
//! turn). Two rows with one hash share a slot: the later evicts the earlier; a write to one
//! invalidates both. Filters are not cached (a filtered Get always reads).

use bytes::Bytes;
use cellar_model::{CellRef, CellSink, CellType, Column, TimeRange};
use parking_lot::Mutex;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const SHARDS: usize = 64;
/// Bytes counted per entry and per result beside their data: map slot, vectors, `Bytes` heads.
const ENTRY_OVERHEAD: usize = 96;
const RESULT_OVERHEAD: usize = 128;

/// A Get's result as the cache keeps it: one buffer of its cells, each
/// `u8 family | u32 qualifier_len | qualifier | u64 timestamp | u8 type | u64 seq |
/// u32 value_len | value` (little-endian), families by index into `families`. About 26 bytes
/// per cell beside its qualifier and value, where `Cell`s would take ~120.
#[derive(Debug, Clone, Default)]
pub(crate) struct CachedResult {
    row: Bytes,
    families: Vec<Bytes>,
    data: Bytes,
}

impl CachedResult {
    /// Bytes this result holds.
    pub fn size(&self) -> usize {
        self.row.len() + self.data.len() + self.families.iter().map(|f| f.len()).sum::<usize>()
    }

    /// Gives the cells to `sink` as a read would: family by family.
    pub fn replay<S: CellSink>(&self, sink: &mut S) {
        let mut d = &self.data[..];
        let mut current: Option<u8> = None;
        // Each cell: family index (1 byte), qualifier length (u32 LE), qualifier, timestamp
        // (u64 LE), type (1 byte), sequence id (u64 LE), value length (u32 LE), value.
        while let Some((&[fam, q0, q1, q2, q3], rest)) = d.split_first_chunk::<5>() {
            let ql = u32::from_le_bytes([q0, q1, q2, q3]) as usize;
            let Some(family) = self.families.get(fam as usize) else {
                return;
            };
            let Some((qualifier, rest)) = rest.split_at_checked(ql) else {
                return;
            };
            let Some((timestamp, rest)) = rest.split_first_chunk::<8>() else {
                return;
            };
            let Some((&code, rest)) = rest.split_first() else {
                return;
            };
            let Some((seq_id, rest)) = rest.split_first_chunk::<8>() else {
                return;
            };
            let Some((vl, rest)) = rest.split_first_chunk::<4>() else {
                return;
            };
            let Some((value, rest)) = rest.split_at_checked(u32::from_le_bytes(*vl) as usize)
            else {
                return;
            };
            let timestamp = u64::from_le_bytes(*timestamp);
            let cell_type = CellType::from_code(code).unwrap_or(CellType::Put);
            let seq_id = u64::from_le_bytes(*seq_id);
            if current.is_some_and(|c| c != fam) {
                sink.end_family();
            }
            current = Some(fam);
            sink.cell(CellRef {
                row: &self.row,
                family,
                qualifier,
                timestamp,
                cell_type,
                seq_id,
                value,
            });
            d = rest;
        }
        if current.is_some() {
            sink.end_family();
        }
    }
}

/// A sink that passes cells on to another and records them as a [`CachedResult`]; also the
/// oldest timestamp of each family seen, for TTL expiry.
pub(crate) struct Recorder<'s, S> {
    inner: &'s mut S,
    families: Vec<Bytes>,
    oldest: Vec<u64>,
    data: Vec<u8>,
    row: Option<Bytes>,
}

impl<'s, S: CellSink> Recorder<'s, S> {
    pub fn new(inner: &'s mut S) -> Recorder<'s, S> {
        Recorder {
            inner,
            families: Vec::new(),
            oldest: Vec::new(),
            data: Vec::new(),
            row: None,
        }
    }

    /// The recorded result of `row`, and each family with its oldest cell's timestamp;
    /// `None` for a row of more than 256 families (not cached).
    pub fn finish(self, row: &Bytes) -> Option<(CachedResult, Vec<(Bytes, u64)>)> {
        if self.families.len() > 256 {
            return None;
        }
        let ages = self
            .families
            .iter()
            .cloned()
            .zip(self.oldest.iter().copied())
            .collect();
        Some((
            CachedResult {
                row: self.row.unwrap_or_else(|| row.clone()),
                families: self.families,
                data: Bytes::from(self.data),
            },
            ages,
        ))
    }
}

impl<S: CellSink> CellSink for Recorder<'_, S> {
    fn cell(&mut self, c: CellRef<'_>) {
        self.inner.cell(c);
        if self.row.is_none() {
            self.row = Some(Bytes::copy_from_slice(c.row));
        }
        let fam = match self.families.iter().position(|f| f == c.family) {
            Some(i) => i,
            None => {
                self.families.push(c.family.clone());
                self.oldest.push(u64::MAX);
                self.families.len() - 1
            }
        };
        if let Some(oldest) = self.oldest.get_mut(fam) {
            *oldest = (*oldest).min(c.timestamp);
        }
        let d = &mut self.data;
        d.push(fam.min(255) as u8);
        d.extend_from_slice(&(c.qualifier.len() as u32).to_le_bytes());
        d.extend_from_slice(c.qualifier);
        d.extend_from_slice(&c.timestamp.to_le_bytes());
        d.push(c.cell_type.code());
        d.extend_from_slice(&c.seq_id.to_le_bytes());
        d.extend_from_slice(&(c.value.len() as u32).to_le_bytes());
        d.extend_from_slice(c.value);
    }

    fn end_family(&mut self) {
        self.inner.end_family();
    }
}

/// What a Get asked for besides its row; entries are per row and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GetShape {
    pub columns: Vec<Column>,
    pub time_range: TimeRange,
    pub max_versions: u32,
}

/// The answer of [`QueryCache::lookup`].
pub(crate) enum Lookup {
    /// The cells, as the Get returned them when it was cached.
    Hit(Arc<CachedResult>),
    /// Not cached: read, then offer the result with [`QueryCache::fill`] and this ticket.
    Miss(Ticket),
    /// A write of the row is in progress: read, and do not fill.
    Bypass,
}

/// The shard generation a missed Get saw before it took its read point.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    hash: u64,
    generation: u64,
}

/// Counters since the cache was made, and its current size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryCacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Gets that read past the cache because their row was being written.
    pub bypasses: u64,
    pub fills: u64,
    /// Fills refused because a write in the shard began or ended while the Get read.
    pub fills_refused: u64,
    pub evictions: u64,
    /// Rows whose entries a write dropped.
    pub invalidations: u64,
    pub bytes: u64,
    pub entries: u64,
    pub capacity: u64,
}

struct Variant {
    shape: GetShape,
    result: Arc<CachedResult>,
    /// Milliseconds since the epoch when a cell of the result expires (its family's TTL);
    /// `u64::MAX` when none does.
    expires_at: u64,
    bytes: usize,
}

struct Entry {
    region: u64,
    row: Bytes,
    variants: Vec<Variant>,
    referenced: bool,
    bytes: usize,
}

#[derive(Default)]
struct Shard {
    entries: HashMap<u64, Entry>,
    /// Rows (by hash) with writes in progress, and how many.
    writing: HashMap<u64, u32>,
    generation: u64,
    /// CLOCK ring of entry hashes; may hold hashes whose entry is gone (skipped).
    ring: VecDeque<u64>,
    bytes: usize,
}

impl Shard {
    fn remove(&mut self, hash: u64) -> bool {
        match self.entries.remove(&hash) {
            Some(e) => {
                self.bytes -= e.bytes;
                true
            }
            None => false,
        }
    }

    /// Evicts until the shard holds at most `budget` bytes; returns how many entries went.
    fn evict_to(&mut self, budget: usize) -> u64 {
        let mut evicted = 0;
        // Each hash gets at most a second chance per pass, so this ends within two turns.
        let mut turns = 2 * self.ring.len() + 1;
        while self.bytes > budget && turns > 0 {
            turns -= 1;
            let Some(hash) = self.ring.pop_front() else {
                break;
            };
            match self.entries.get_mut(&hash) {
                Some(e) if e.referenced => {
                    e.referenced = false;
                    self.ring.push_back(hash);
                }
                Some(_) => {
                    self.remove(hash);
                    evicted += 1;
                }
                None => {}
            }
        }
        // Drop stale hashes once they outnumber the live entries.
        if self.ring.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            let mut seen = std::collections::HashSet::with_capacity(entries.len());
            self.ring
                .retain(|h| entries.contains_key(h) && seen.insert(*h));
        }
        evicted
    }
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    bypasses: AtomicU64,
    fills: AtomicU64,
    fills_refused: AtomicU64,
    evictions: AtomicU64,
    invalidations: AtomicU64,
}

/// A server's query cache. Thread-safe.
pub struct QueryCache {
    shards: Box<[Mutex<Shard>]>,
    shard_budget: usize,
    capacity: u64,
    hasher: RandomState,
    counters: Counters,
}

impl QueryCache {
    /// A cache holding at most about `capacity` bytes of results.
    pub fn new(capacity: u64) -> QueryCache {
        QueryCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_budget: usize::try_from(capacity / SHARDS as u64).unwrap_or(usize::MAX),
            capacity,
            hasher: RandomState::new(),
            counters: Counters::default(),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    fn hash(&self, region: u64, row: &[u8]) -> u64 {
        self.hasher.hash_one((region, row))
    }

    #[allow(
        clippy::indexing_slicing,
        reason = "the index is taken modulo SHARDS, the number of shards `new` makes"
    )]
    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        // The low bits pick the map bucket; shards take high bits.
        &self.shards[(hash >> 58) as usize % SHARDS]
    }

    /// The cached result of a Get of `row` with `shape` in region `region`, if any and not
    /// expired at `now` (ms).
    pub(crate) fn lookup(&self, region: u64, row: &[u8], shape: &GetShape, now: u64) -> Lookup {
        let hash = self.hash(region, row);
        let mut shard = self.shard(hash).lock();
        if shard.writing.contains_key(&hash) {
            drop(shard);
            self.counters.bypasses.fetch_add(1, Ordering::Relaxed);
            return Lookup::Bypass;
        }
        let generation = shard.generation;
        if let Some(e) = shard.entries.get_mut(&hash) {
            if e.region == region && e.row == row {
                if let Some(v) = e
                    .variants
                    .iter()
                    .find(|v| v.shape == *shape && now < v.expires_at)
                {
                    e.referenced = true;
                    let result = Arc::clone(&v.result);
                    drop(shard);
                    self.counters.hits.fetch_add(1, Ordering::Relaxed);
                    return Lookup::Hit(result);
                }
            }
        }
        drop(shard);
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        Lookup::Miss(Ticket { hash, generation })
    }

    /// Offers the result of a Get that missed with `ticket`; kept unless a write in its shard
    /// began or ended since the lookup. `expires_at`: as [`Variant::expires_at`].
    pub(crate) fn fill(
        &self,
        ticket: Ticket,
        region: u64,
        row: &Bytes,
        shape: GetShape,
        result: CachedResult,
        expires_at: u64,
    ) {
        let bytes = RESULT_OVERHEAD
            + shape
                .columns
                .iter()
                .map(|c| c.family.len() + c.qualifier.as_ref().map_or(0, |q| q.len()) + 48)
                .sum::<usize>()
            + result.size();
        if bytes + row.len() > self.shard_budget {
            return;
        }
        let mut shard = self.shard(ticket.hash).lock();
        if shard.generation != ticket.generation || shard.writing.contains_key(&ticket.hash) {
            drop(shard);
            self.counters.fills_refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let variant = Variant {
            shape,
            result: Arc::new(result),
            expires_at,
            bytes,
        };
        let shard = &mut *shard;
        match shard.entries.get_mut(&ticket.hash) {
            Some(e) if e.region == region && e.row == *row => {
                // Replace the same shape (an expired result), or add one.
                if let Some(i) = e.variants.iter().position(|v| v.shape == variant.shape) {
                    let old = e.variants.swap_remove(i);
                    e.bytes -= old.bytes;
                    shard.bytes -= old.bytes;
                }
                e.bytes += variant.bytes;
                shard.bytes += variant.bytes;
                e.variants.push(variant);
                e.referenced = true;
            }
            _ => {
                shard.remove(ticket.hash);
                let entry_bytes = ENTRY_OVERHEAD + row.len() + variant.bytes;
                shard.entries.insert(
                    ticket.hash,
                    Entry {
                        region,
                        row: row.clone(),
                        variants: vec![variant],
                        referenced: false,
                        bytes: entry_bytes,
                    },
                );
                shard.bytes += entry_bytes;
                shard.ring.push_back(ticket.hash);
            }
        }
        let evicted = shard.evict_to(self.shard_budget);
        self.counters.fills.fetch_add(1, Ordering::Relaxed);
        if evicted > 0 {
            self.counters
                .evictions
                .fetch_add(evicted, Ordering::Relaxed);
        }
    }

    /// A write of `row` in `region` is about to make cells visible: drops the row's entries
    /// and keeps Gets of it away from the cache until [`QueryCache::write_ends`].
    pub(crate) fn write_begins(&self, region: u64, row: &[u8]) {
        let hash = self.hash(region, row);
        let mut shard = self.shard(hash).lock();
        shard.generation += 1;
        *shard.writing.entry(hash).or_insert(0) += 1;
        let removed = shard.remove(hash);
        drop(shard);
        if removed {
            self.counters.invalidations.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The write [`QueryCache::write_begins`] announced is visible (or aborted).
    pub(crate) fn write_ends(&self, region: u64, row: &[u8]) {
        let hash = self.hash(region, row);
        let mut shard = self.shard(hash).lock();
        shard.generation += 1;
        if let Some(n) = shard.writing.get_mut(&hash) {
            *n -= 1;
            if *n == 0 {
                shard.writing.remove(&hash);
            }
        }
    }

    /// Cells of `region` changed without a write of a row (a bulk load): drops its entries,
    /// and refuses the fills of Gets that looked up before.
    pub(crate) fn region_changed(&self, region: u64) {
        self.forget_region(region);
        for shard in self.shards.iter() {
            shard.lock().generation += 1;
        }
    }

    /// Drops every entry of `region` (closed: its id is never used again).
    pub(crate) fn forget_region(&self, region: u64) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let gone: Vec<u64> = shard
                .entries
                .iter()
                .filter(|(_, e)| e.region == region)
                .map(|(h, _)| *h)
                .collect();
            for h in gone {
                shard.remove(h);
            }
        }
    }

    pub fn stats(&self) -> QueryCacheStats {
        let c = &self.counters;
        let (mut bytes, mut entries) = (0u64, 0u64);
        for shard in self.shards.iter() {
            let s = shard.lock();
            bytes += s.bytes as u64;
            entries += s.entries.len() as u64;
        }
        QueryCacheStats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            bypasses: c.bypasses.load(Ordering::Relaxed),
            fills: c.fills.load(Ordering::Relaxed),
            fills_refused: c.fills_refused.load(Ordering::Relaxed),
            evictions: c.evictions.load(Ordering::Relaxed),
            invalidations: c.invalidations.load(Ordering::Relaxed),
            bytes,
            entries,
            capacity: self.capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::Cell;

    fn shape() -> GetShape {
        GetShape {
            columns: Vec::new(),
            time_range: TimeRange::ALL,
            max_versions: 1,
        }
    }

    fn cell(row: &str, value: &str) -> Cell {
        Cell {
            row: Bytes::copy_from_slice(row.as_bytes()),
            family: Bytes::from_static(b"cf"),
            qualifier: Bytes::from_static(b"q"),
            timestamp: 1,
            cell_type: CellType::Put,
            seq_id: 1,
            value: Bytes::copy_from_slice(value.as_bytes()),
        }
    }

    /// Collects cells and family ends.
    #[derive(Default)]
    struct Collect(Vec<Cell>, usize);

    impl CellSink for Collect {
        fn cell(&mut self, c: CellRef<'_>) {
            self.0.push(c.to_cell());
        }
        fn end_family(&mut self) {
            self.1 += 1;
        }
    }

    fn record(cells: &[Cell]) -> CachedResult {
        let mut out = Collect::default();
        let mut r = Recorder::new(&mut out);
        let mut family = None;
        for c in cells {
            if family.is_some_and(|f: &Bytes| *f != c.family) {
                r.end_family();
            }
            family = Some(&c.family);
            r.cell(CellRef {
                row: &c.row,
                family: &c.family,
                qualifier: &c.qualifier,
                timestamp: c.timestamp,
                cell_type: c.cell_type,
                seq_id: c.seq_id,
                value: &c.value,
            });
        }
        let row = cells.first().map(|c| c.row.clone()).unwrap_or_default();
        let (result, _) = r.finish(&row).expect("few families");
        assert_eq!(out.0, cells, "the recorder passes every cell on");
        result
    }

    #[test]
    fn a_recorded_result_replays_the_same_cells_and_family_ends() {
        let mut cells = vec![cell("r", "a"), cell("r", "b")];
        cells[1].qualifier = Bytes::from_static(b"q2");
        cells[1].cell_type = CellType::DeleteColumn;
        let mut other = cell("r", "c");
        other.family = Bytes::from_static(b"other");
        other.timestamp = u64::MAX - 1;
        cells.push(other);
        let result = record(&cells);
        let mut out = Collect::default();
        result.replay(&mut out);
        assert_eq!(out.0, cells);
        assert_eq!(out.1, 2, "one end per family");
        assert!(result.size() < cells.iter().map(|c| c.value.len() + 40).sum::<usize>());
    }

    fn fill(c: &QueryCache, region: u64, row: &str, value: &str) -> bool {
        let Lookup::Miss(t) = c.lookup(region, row.as_bytes(), &shape(), 0) else {
            return false;
        };
        c.fill(
            t,
            region,
            &Bytes::copy_from_slice(row.as_bytes()),
            shape(),
            record(&[cell(row, value)]),
            u64::MAX,
        );
        true
    }

    fn hit(c: &QueryCache, region: u64, row: &str) -> Option<String> {
        match c.lookup(region, row.as_bytes(), &shape(), 0) {
            Lookup::Hit(result) => {
                let mut out = Collect::default();
                result.replay(&mut out);
                Some(String::from_utf8_lossy(&out.0[0].value).into_owned())
            }
            _ => None,
        }
    }

    #[test]
    fn hits_after_a_fill_per_region_row_and_shape() {
        let c = QueryCache::new(1 << 20);
        assert!(fill(&c, 1, "r", "v"));
        assert_eq!(hit(&c, 1, "r").as_deref(), Some("v"));
        assert_eq!(hit(&c, 2, "r"), None, "another region");
        assert_eq!(hit(&c, 1, "s"), None, "another row");
        let other = GetShape {
            max_versions: 3,
            ..shape()
        };
        assert!(matches!(c.lookup(1, b"r", &other, 0), Lookup::Miss(_)));
        let s = c.stats();
        assert_eq!((s.hits, s.fills, s.entries), (1, 1, 1));
    }

    #[test]
    fn a_write_drops_the_row_and_bypasses_until_it_ends() {
        let c = QueryCache::new(1 << 20);
        fill(&c, 1, "r", "old");
        c.write_begins(1, b"r");
        assert!(matches!(c.lookup(1, b"r", &shape(), 0), Lookup::Bypass));
        c.write_ends(1, b"r");
        assert_eq!(hit(&c, 1, "r"), None);
        assert_eq!(c.stats().invalidations, 1);
    }

    #[test]
    fn a_fill_racing_a_write_is_refused() {
        let c = QueryCache::new(1 << 20);
        // The Get misses, then a write begins and ends before the Get offers its result: the
        // result may predate the write, so it must not be kept.
        let Lookup::Miss(t) = c.lookup(1, b"r", &shape(), 0) else {
            panic!("expected a miss");
        };
        c.write_begins(1, b"r");
        c.write_ends(1, b"r");
        c.fill(
            t,
            1,
            &Bytes::from_static(b"r"),
            shape(),
            record(&[cell("r", "stale")]),
            u64::MAX,
        );
        assert_eq!(hit(&c, 1, "r"), None);
        assert_eq!(c.stats().fills_refused, 1);
    }

    #[test]
    fn expired_results_miss() {
        let c = QueryCache::new(1 << 20);
        let Lookup::Miss(t) = c.lookup(1, b"r", &shape(), 0) else {
            panic!("expected a miss");
        };
        c.fill(
            t,
            1,
            &Bytes::from_static(b"r"),
            shape(),
            record(&[cell("r", "v")]),
            100,
        );
        assert!(matches!(c.lookup(1, b"r", &shape(), 99), Lookup::Hit(_)));
        assert!(matches!(c.lookup(1, b"r", &shape(), 100), Lookup::Miss(_)));
    }

    #[test]
    fn stays_within_its_budget_and_keeps_hot_rows() {
        let c = QueryCache::new(64 * 64 * 1024);
        let value = "x".repeat(200);
        for i in 0..20_000 {
            fill(&c, 1, &format!("row{i}"), &value);
            // Row "hot" is read all along.
            if hit(&c, 1, "hot").is_none() {
                fill(&c, 1, "hot", "h");
            }
        }
        let s = c.stats();
        assert!(
            s.bytes <= s.capacity,
            "{} bytes over {}",
            s.bytes,
            s.capacity
        );
        assert!(s.evictions > 0);
        assert!(s.entries > 1000, "{} entries left", s.entries);
        assert_eq!(hit(&c, 1, "hot").as_deref(), Some("h"));
    }

    #[test]
    fn forgetting_a_region_drops_only_its_entries() {
        let c = QueryCache::new(1 << 20);
        fill(&c, 1, "a", "1");
        fill(&c, 2, "a", "2");
        c.forget_region(1);
        assert_eq!(hit(&c, 1, "a"), None);
        assert_eq!(hit(&c, 2, "a").as_deref(), Some("2"));
    }
}
