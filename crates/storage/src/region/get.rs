//! Get: one row's cells from each family asked for.
//!
//! HOT PATH for point reads. First the region-level gate: the row is hashed once and checked
//! against every file's key range, time range and blooms and every memstore's row index; a
//! family where all say no is skipped before anything is allocated, searched or read, so a
//! Get of an absent row costs a hash and a few bit probes. Sources are the memstores whose row
//! index knows the row and the files that admit it. When a Get names its columns and several files
//! qualify, files are consulted newest first (by their largest timestamp) and the rest are
//! skipped once every column asked for is *settled*: it has enough surviving versions newer
//! than anything the remaining files hold. Those files can then change nothing — their puts
//! are older, and their delete markers, with timestamps no larger than the file's, cannot
//! mask newer cells (HBase's lazy seek, which saves a block read per overwritten row).

use super::matcher::{ReadSpec, RowMatcher};
use super::mvcc::ReadPoint;
use super::sink::RowCells;
use super::store::{candidate_files, memstore_sources, memstore_sources_for_row, Store};
use super::{read_row_cells, RegionInner, RowEnd};
use crate::iter::MergeIter;
use crate::query_cache::{GetShape, Lookup, Recorder};
use crate::storefile::RowProbe;
use bytes::Bytes;
use cellar_model::key::first_on_row;
use cellar_model::{Cell, CellSink, Get, Result, TimeRange};
use std::cmp::Reverse;

impl RegionInner {
    /// A Get through the query cache when every family it reads enables it and it has no
    /// filter; otherwise a read at the current read point. See [`crate::query_cache`] for why
    /// the generation is noted before the read point is taken.
    pub(crate) fn get_through_cache<S: CellSink>(&self, get: &Get, sink: &mut S) -> Result<()> {
        if !self.query_cacheable(get) {
            return self.get_into(get, self.mvcc.read_point(), sink);
        }
        let cache = &self.services.query_cache;
        let now = self.services.config.clock.now_millis();
        let shape = GetShape {
            columns: get.columns.clone(),
            time_range: get.time_range,
            max_versions: get.max_versions,
        };
        match cache.lookup(self.uid, &get.row, &shape, now) {
            Lookup::Hit(result) => {
                result.replay(sink);
                Ok(())
            }
            Lookup::Bypass => self.get_into(get, self.mvcc.read_point(), sink),
            Lookup::Miss(ticket) => {
                let mut recorder = Recorder::new(sink);
                self.get_into(get, self.mvcc.read_point(), &mut recorder)?;
                if let Some((result, ages)) = recorder.finish(&get.row) {
                    let expires_at = self.expiry(&ages);
                    cache.fill(ticket, self.uid, &get.row, shape, result, expires_at);
                }
                Ok(())
            }
        }
    }

    /// Whether `get` may be answered from the query cache.
    fn query_cacheable(&self, get: &Get) -> bool {
        if get.filter.is_some() || !self.query_cached.contains(&true) {
            return false;
        }
        if get.columns.is_empty() {
            return self.query_cached.iter().all(|&c| c);
        }
        get.columns.iter().all(|c| {
            self.stores
                .iter()
                .position(|s| s.name == c.family)
                .is_some_and(|i| self.query_cached.get(i) == Some(&true))
        })
    }

    /// When the first cell of a result expires by its family's TTL (ms since the epoch), or
    /// `u64::MAX`; `ages`: each family read with its oldest cell's timestamp.
    fn expiry(&self, ages: &[(Bytes, u64)]) -> u64 {
        ages.iter()
            .filter_map(|(family, oldest)| {
                let ttl = self
                    .stores
                    .iter()
                    .find(|s| s.name == *family)?
                    .family
                    .ttl_secs?;
                Some(oldest.saturating_add(ttl.saturating_mul(1000)))
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    pub(crate) fn get_at(&self, get: &Get, read_point: ReadPoint) -> Result<Vec<Cell>> {
        let mut out = Vec::new();
        self.get_into(get, read_point, &mut RowCells::new(&mut out))?;
        Ok(out)
    }

    /// The cells `get` selects at `read_point`, given to `sink` family by family.
    pub(crate) fn get_into<S: CellSink>(
        &self,
        get: &Get,
        read_point: ReadPoint,
        sink: &mut S,
    ) -> Result<()> {
        for c in &get.columns {
            self.store_index(&c.family)?;
        }
        let probe = RowProbe::new(&get.row);
        let gate = self.services.config.region_gate;
        let mut bounds: Option<(Vec<u8>, u64)> = None;
        for store in &self.stores {
            let Some(spec) = self.read_spec(
                &get.columns,
                &store.name,
                read_point.clone(),
                get.time_range,
                get.max_versions,
            ) else {
                continue;
            };
            let view = store.view();
            // The region-level gate: the row's hash against every file's key range and blooms,
            // the memstores' row indexes; nothing allocated, searched or read if all say no.
            let mut files = candidate_files(
                &view,
                &[],
                &[],
                &get.time_range,
                Some((&probe, spec.qualifiers.as_deref())),
            );
            let memstores = if gate {
                memstore_sources_for_row(&view, &probe)
            } else {
                memstore_sources(&view)
            };
            if gate && files.is_empty() && memstores.is_empty() {
                continue;
            }
            // The clock is read only for TTLs (3 % of a cached Get otherwise).
            let (row_start, now) = bounds.get_or_insert_with(|| {
                let ttl = self.stores.iter().any(|s| s.family.ttl_secs.is_some());
                let now = if ttl {
                    self.services.config.clock.now_millis()
                } else {
                    0
                };
                (first_on_row(&get.row), now)
            });
            let mut merge = MergeIter::new(memstores);
            match spec.qualifiers.as_deref() {
                Some(qs) if files.len() > 1 => {
                    files.sort_by_key(|f| Reverse(f.file.meta().max_timestamp));
                    for (i, f) in files.iter().enumerate() {
                        let consulted_any = i > 0 || merge.has_children();
                        if consulted_any
                            && settled(
                                &mut merge,
                                row_start,
                                &get.row,
                                store,
                                &spec,
                                qs,
                                f.file.meta().max_timestamp,
                            )?
                        {
                            break;
                        }
                        merge.push(f.iter(true));
                    }
                }
                _ => {
                    for f in files {
                        merge.push(f.iter(true));
                    }
                }
            }
            if !merge.has_children() {
                continue;
            }
            // From the row's first cell: family delete markers sort there.
            merge.seek(row_start)?;
            let mut matcher = RowMatcher::new(&store.family, &spec, *now);
            read_row_cells(
                &mut merge,
                &get.row,
                &store.name,
                &mut matcher,
                sink,
                RowEnd::WhenDone,
            )?;
        }
        Ok(())
    }
}

/// Whether every qualifier in `qs` has, among the sources in `merge`, as many surviving
/// versions newer than `cutoff` as the read can use.
fn settled(
    merge: &mut MergeIter,
    row_start: &[u8],
    row: &[u8],
    store: &Store,
    spec: &ReadSpec,
    qs: &[Bytes],
    cutoff: u64,
) -> Result<bool> {
    let family = &store.family;
    // Past the family's version limit nothing is visible; with a time range or a TTL, which of
    // those versions the read keeps depends on them all.
    let needed = if spec.time_range == TimeRange::ALL && family.ttl_secs.is_none() {
        spec.max_versions.min(family.max_versions)
    } else {
        family.max_versions
    };
    let check = ReadSpec {
        read_point: spec.read_point.clone(),
        time_range: TimeRange::ALL,
        max_versions: u32::MAX,
        qualifiers: None,
        raw: false,
    };
    // now = 0: nothing counts as expired; only deletes and the version limit decide.
    let mut matcher = RowMatcher::new(family, &check, 0);
    let mut counts = vec![0u32; qs.len()];
    let last = qs.last().map(Bytes::as_ref).unwrap_or_default();
    merge.seek(row_start)?;
    // Stops as soon as the answer is known: past the last column asked for, nothing counts,
    // and reading on to the row's end could mean reading the next block.
    while let Some(key) = merge.key_in_row(row)? {
        if key.qualifier() > last {
            break;
        }
        if matcher.survives(&key) && key.timestamp() > cutoff {
            let asked = qs.binary_search_by(|q| q.as_ref().cmp(key.qualifier()));
            if let Some(n) = asked.ok().and_then(|i| counts.get_mut(i)) {
                *n += 1;
                if *n >= needed && counts.iter().all(|&c| c >= needed) {
                    return Ok(true);
                }
            }
        }
        merge.advance()?;
    }
    Ok(counts.iter().all(|&c| c >= needed))
}
