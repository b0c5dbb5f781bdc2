//! Compaction: merging a store's files into one.
//!
//! Minor compactions pick sorted runs (`runs.rs`: files with disjoint row ranges count as
//! one) by HBase's ratio rule and keep every cell (delete markers must stay while files they
//! mask are outside the compaction). Major compactions take every file and keep only what a
//! reader could see: deleted, expired and excess-version cells and the delete markers go. A
//! minor selection that happens to take every file of the store is run as a major one
//! (HBase's rule: with no file left out, nothing outside can need what it drops).
//!
//! Periodic major compaction (HBase's `hbase.hregion.majorcompaction`): a store whose oldest
//! file is older than `major_compaction_period_ms`, moved per store by up to
//! `major_compaction_jitter` of it, is major compacted, unless it is one file written by a major
//! compaction in which no cell can have expired since (nothing to drop). Files record when they
//! were written (`FileMeta::created_ms`); older files count from the region's open.
//!
//! Concurrency: two compactions of one store merge disjoint sets of runs (each claims its
//! files; the other chooses among the rest), so while a long merge of the old runs goes on,
//! the runs new flushes make are merged beside it instead of piling up until writers are held
//! back (HBase's small and large compaction threads). A major compaction, which needs every
//! file, waits for the compactions running to finish; the space rule applies only when no
//! run is claimed.
//!
//! Crash safety: the output is written under a temporary name and synced; a marker naming the
//! inputs is written; the output is renamed into place; only then are the inputs deleted.
//! Opening a store finishes a compaction whose output exists and forgets one whose output does
//! not (see `store.rs`). Readers holding an input keep it until they finish.

use super::matcher::{ReadSpec, RowMatcher};
use super::runs::{Run, RunIter};
use super::store::Store;
use super::store_files::StoreFileHandle;
use super::RegionInner;
use crate::iter::{CellIter, MergeIter};
use cellar_model::key::KeyRef;
use cellar_model::{Error, Result, TimeRange};
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What one store's compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compacted {
    /// No files qualified.
    Nothing,
    /// Some of the files were merged; every cell kept.
    Minor,
    /// Every file was merged into one holding only what a reader could see.
    Major,
}

/// The period after which `store_key`'s store is due a major compaction: `period_ms` moved by
/// up to `jitter × period_ms`, the same each time for one store (so one server's stores spread
/// out instead of all compacting together after a restart).
pub fn jittered_period(period_ms: u64, jitter: f64, store_key: (u64, &[u8])) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    store_key.hash(&mut h);
    // A uniform fraction in [-1, 1).
    let unit = (h.finish() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    let shift = period_ms as f64 * jitter.clamp(0.0, 1.0) * unit;
    (period_ms as f64 + shift).max(1.0) as u64
}

/// Files a compaction is merging, given back to the store when it ends (committed or not).
struct Claim<'a> {
    store: &'a Store,
    numbers: Vec<u64>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut busy = self.store.compacting.lock();
        for n in &self.numbers {
            busy.remove(n);
        }
        self.store.compaction_done.notify_all();
    }
}

/// Compactions account their bytes to the throttle in steps of this much.
const THROTTLE_EVERY: u64 = 256 * 1024;

/// Picks sorted runs for a minor compaction (`sizes`: the runs' bytes, newest first; returns
/// the chosen runs' indexes into it): HBase's ratio rule, over runs instead of files. Walking
/// from the oldest run, a run is skipped while it is larger than `ratio ×` the total of the
/// newer runs that would join it; the first run that passes starts the selection, which takes
/// up to `max_runs` runs and needs at least `min_runs`.
pub fn select_minor(
    sizes: &[u64],
    min_runs: usize,
    max_runs: usize,
    ratio: f64,
) -> std::ops::Range<usize> {
    let n = sizes.len();
    let oldest_first: Vec<u64> = sizes.iter().rev().copied().collect();
    for start in 0..n {
        let end = (start + max_runs).min(n);
        if end - start < min_runs {
            break;
        }
        let newer: u64 = oldest_first.get(start + 1..end).unwrap_or(&[]).iter().sum();
        if oldest_first
            .get(start)
            .is_some_and(|&s| s as f64 <= ratio * newer as f64)
        {
            // Oldest-first `start..end` is newest-first `n - end..n - start`.
            return n - end..n - start;
        }
    }
    0..0
}

/// Whether `runs` (newest first) add up to more than `max_amp ×` the oldest (0: never).
pub fn space_amp_exceeded(runs: &[Run], max_amp: f64) -> bool {
    let (Some(oldest), true) = (runs.last(), runs.len() >= 2 && max_amp > 0.0) else {
        return false;
    };
    let total: u64 = runs.iter().map(|r| r.size).sum();
    total as f64 > max_amp * oldest.size as f64
}

impl RegionInner {
    /// Whether `store` is due its periodic major compaction at `now` (see the module docs).
    pub(crate) fn major_compaction_due(&self, store: &Store, now: u64) -> bool {
        let cfg = &self.services.config;
        if cfg.major_compaction_period_ms == 0 {
            return false;
        }
        let view = store.view();
        let Some(oldest) = view
            .files
            .iter()
            .map(|f| match f.file.meta().created_ms {
                0 => self.opened_ms,
                t => t,
            })
            .min()
        else {
            return false;
        };
        let period = jittered_period(
            cfg.major_compaction_period_ms,
            cfg.major_compaction_jitter,
            (self.info.id, store.family.name.as_bytes()),
        );
        if now.saturating_sub(oldest) < period {
            return false;
        }
        match view.files.as_slice() {
            [only] if only.file.meta().major_compaction && only.reference.is_none() => {
                // Already compacted: worth redoing only if a cell may have expired since (an
                // empty file has nothing to expire).
                let ttl_ms = store.family.ttl_secs.map(|s| s.saturating_mul(1000));
                let meta = only.file.meta();
                ttl_ms.is_some_and(|ttl| {
                    meta.cell_count > 0 && now.saturating_sub(meta.min_timestamp) > ttl
                })
            }
            _ => true,
        }
    }

    /// Compacts store `i`. Returns without doing anything when a minor compaction finds no
    /// qualifying files.
    pub(crate) fn compact_store(&self, i: usize, major: bool) -> Result<Compacted> {
        let Some(store) = self.stores.get(i) else {
            return Ok(Compacted::Nothing);
        };
        let cfg = &self.services.config;
        let mut busy = store.compacting.lock();
        if major {
            // Every file: after the compactions running now.
            while !busy.is_empty() {
                store.compaction_done.wait(&mut busy);
            }
        }
        let view = store.view();
        let runs = &view.runs;
        // The runs no other compaction is merging.
        let free: Vec<Run> = runs
            .iter()
            .filter(|r| r.files.iter().all(|f| !busy.contains(&f.number)))
            .cloned()
            .collect();
        let all_free = free.len() == runs.len();
        // Past the space limit every run is merged (then major: every file is taken).
        let chosen: Vec<Run> =
            if major || (all_free && space_amp_exceeded(runs, cfg.compaction_max_space_amp)) {
                free
            } else if runs.len() >= cfg.blocking_store_files {
                // Writers are held back: the ratio rule can settle at exactly this many runs,
                // so merge the newest (smallest) ones regardless of it, as HBase does when
                // "stuck".
                free.into_iter()
                    .take(cfg.compaction_max_files.max(2))
                    .collect()
            } else {
                let sizes: Vec<u64> = free.iter().map(|r| r.size).collect();
                let picked = select_minor(
                    &sizes,
                    cfg.compaction_min_files,
                    cfg.compaction_max_files,
                    cfg.compaction_ratio,
                );
                free.get(picked).map(<[Run]>::to_vec).unwrap_or_default()
            };
        // A major compaction of one run still rewrites it; a minor one merges two or more.
        if chosen.len() < if major { 1 } else { 2 } {
            return Ok(Compacted::Nothing);
        }
        let inputs: Vec<Arc<StoreFileHandle>> = chosen
            .iter()
            .flat_map(|r| r.files.iter().cloned())
            .collect();
        busy.extend(inputs.iter().map(|f| f.number));
        drop(busy);
        let _claim = Claim {
            store,
            numbers: inputs.iter().map(|f| f.number).collect(),
        };
        // Every file taken: nothing outside the compaction can need what a major one drops.
        let major = major || inputs.len() == view.files.len();
        let bytes_in: u64 = inputs.iter().map(|f| f.size()).sum();
        let number = self.next_file_number();
        let now = cfg.clock.now_millis();
        let spec = ReadSpec {
            read_point: super::mvcc::ReadPoint::ALL,
            time_range: TimeRange::ALL,
            max_versions: u32::MAX,
            qualifiers: None,
        };
        let inputs_max_seq = inputs
            .iter()
            .map(|f| f.file.meta().max_seq)
            .max()
            .unwrap_or(0);
        // Throttled unless writers are waiting on this store's file count.
        let throttle = (runs.len() < cfg.blocking_store_files)
            .then_some(&self.services.compaction_throttle)
            .filter(|t| t.rate() > 0);
        let output = store.write_file(number, Some(&inputs), |w| {
            let mut unthrottled_bytes = 0u64;
            w.raise_max_seq(inputs_max_seq);
            w.set_created_ms(now);
            if major {
                w.mark_major_compaction();
            }
            // One source per run: a run's files are read one after another.
            let mut merge = MergeIter::new(
                chosen
                    .iter()
                    .map(|r| -> Box<dyn CellIter> {
                        match r.files.as_slice() {
                            [only] => only.iter(false),
                            files => Box::new(RunIter::new(files.to_vec(), false)),
                        }
                    })
                    .collect(),
            );
            merge.seek_to_first()?;
            let mut matcher = RowMatcher::new(&store.family, &spec, now);
            let mut prev_key: Vec<u8> = Vec::new();
            let mut row: Vec<u8> = Vec::new();
            while merge.valid() {
                let key_bytes = merge.key();
                // The same cell twice: only after an interrupted compaction.
                if key_bytes == prev_key.as_slice() {
                    merge.advance()?;
                    continue;
                }
                // Never drop what cannot be parsed: fail the compaction, keep the inputs.
                let key = KeyRef::parse(key_bytes).ok_or_else(|| {
                    Error::corruption(
                        store.dir.display(),
                        0,
                        "malformed key in a compaction input",
                    )
                })?;
                if key.row() != row.as_slice() {
                    row.clear();
                    row.extend_from_slice(key.row());
                    matcher.reset();
                }
                if let Some(t) = throttle {
                    unthrottled_bytes += (key_bytes.len() + merge.value().len()) as u64;
                    if unthrottled_bytes >= THROTTLE_EVERY {
                        t.consume(unthrottled_bytes);
                        unthrottled_bytes = 0;
                    }
                }
                let keep = if major { matcher.survives(&key) } else { true };
                if keep {
                    w.add(key_bytes, merge.value())?;
                }
                prev_key.clear();
                prev_key.extend_from_slice(key_bytes);
                merge.advance()?;
            }
            Ok(())
        })?;
        let bytes_out = output.size();
        // Kept even when empty (everything deleted): its existence is what commits the
        // compaction on the next open.
        store.commit_compaction(&inputs, Some(output), number)?;
        self.compactions.fetch_add(1, Ordering::Relaxed);
        if major {
            self.major_compactions.fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_compacted.fetch_add(bytes_out, Ordering::Relaxed);
        tracing::debug!(region = self.info.id, family = %store.family.name, files = inputs.len(), bytes_in, bytes_out, major, "compacted");
        self.notify_pressure();
        Ok(if major {
            Compacted::Major
        } else {
            Compacted::Minor
        })
    }
}
