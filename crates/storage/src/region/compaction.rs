//! Compaction: merging a store's files into fewer.
//!
//! What to merge comes from the store's compaction style (`StorageConfig::compaction_style`):
//! leveled (`levels.rs`, the default: one file's range into the level below, outputs cut
//! into `compaction_file_bytes` files) or tiered (HBase's ratio rule over sorted runs,
//! `runs.rs`: files with disjoint row ranges count as one; one output file). A minor
//! compaction drops the cells its inputs' delete markers mask and the versions beyond the
//! family's limit (HBase's minor compaction) and keeps the markers, which files outside it may
//! need; in rows where a file outside may hold a marker deleting one version, it keeps every
//! cell (that marker could uncover a version the merge would drop). Major compactions take
//! every file and keep only what a reader could see: deleted, expired and excess-version cells
//! and the delete markers go. A selection that happens to take every file of the store is run
//! as a major one (HBase's rule: with no file left out, nothing outside can need what it
//! drops).
//!
//! Periodic major compaction (HBase's `hbase.hregion.majorcompaction`): a store whose oldest
//! file is older than `major_compaction_period_ms`, moved per store by up to
//! `major_compaction_jitter` of it, is major compacted, unless every file was written by a
//! major compaction and no cell in them can have expired since (nothing to drop). Files record when they
//! were written (`FileMeta::created_ms`); older files count from the region's open.
//!
//! Concurrency: two compactions of one store merge disjoint sets of files (each claims its
//! files, and a leveled one the rows it writes into its level; the other chooses among the
//! rest), so while a long merge goes on, the files new flushes make are merged beside it
//! instead of piling up until writers are held back (HBase's small and large compaction
//! threads). A major compaction, which needs every
//! file, waits for the compactions running to finish; the space rule applies only when no
//! run is claimed.
//!
//! Crash safety: the outputs are written under temporary names and synced; a marker naming
//! the inputs and the outputs is written (it commits the compaction); the outputs are renamed
//! into place; only then are the inputs deleted. Opening a store finishes a compaction whose
//! marker exists (`store.rs`). Readers holding an input keep it until they finish.

use super::config::CompactionStyle;
use super::levels::{self, LevelOptions, MAX_LEVEL};
use super::matcher::{ReadSpec, RowMatcher};
use super::runs::{group, Run, RunIter};
use super::store::{PendingFile, Store};
use super::store_files::StoreFileHandle;
use super::RegionInner;
use crate::iter::{CellIter, MergeIter};
use crate::storefile::StoreFileWriter;
use cellar_model::key::KeyRef;
use cellar_model::{Error, Result, TimeRange};
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What one store's compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compacted {
    /// No files qualified.
    Nothing,
    /// Some of the files were merged; delete markers kept.
    Minor,
    /// Files moved down a level without being rewritten (leveled compaction).
    Moved,
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

/// Files a compaction is merging (and the level range it writes), given back to the store
/// when it ends, committed or not.
struct Claim<'a> {
    store: &'a Store,
    numbers: Vec<u64>,
    id: u64,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut busy = self.store.compacting.lock();
        for n in &self.numbers {
            busy.files.remove(n);
        }
        busy.writing.retain(|w| w.0 != self.id);
        self.store.compaction_done.notify_all();
    }
}

static NEXT_CLAIM: AtomicU64 = AtomicU64::new(1);

/// What a compaction merges and where its output goes.
struct Job {
    /// Merge sources: each a run's files in row order.
    sources: Vec<Vec<Arc<StoreFileHandle>>>,
    /// The output's level (`levels.rs`; 0 for tiered compaction).
    level: u8,
    /// Outputs end at the first row boundary past this many bytes; 0: one output.
    file_bytes: u64,
    /// The level and rows the output may span, while it is being written.
    range: Option<(u8, Vec<u8>, Vec<u8>)>,
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
        let compacted = view
            .files
            .iter()
            .all(|f| f.file.meta().major_compaction && f.reference.is_none());
        if !compacted {
            return true;
        }
        // Already compacted (into one file, or one level of files): worth redoing only if a
        // cell may have expired since (an empty file has nothing to expire).
        let ttl_ms = store.family.ttl_secs.map(|s| s.saturating_mul(1000));
        view.files.iter().any(|f| {
            let meta = f.file.meta();
            ttl_ms.is_some_and(|ttl| {
                meta.cell_count > 0 && now.saturating_sub(meta.min_timestamp) > ttl
            })
        })
    }

    /// The level sizes of leveled compaction, from the configuration.
    pub(crate) fn level_options(&self) -> LevelOptions {
        let cfg = &self.services.config;
        LevelOptions {
            l0_trigger: cfg.compaction_min_files,
            // As many flushes' worth.
            l0_trigger_bytes: (cfg.compaction_min_files as u64)
                .saturating_mul(cfg.memstore_flush_bytes),
            base_bytes: cfg.level_base_bytes,
            fanout: cfg.level_fanout,
        }
    }

    /// Compacts store `i`: one merge (or move) of the files its compaction style picks, or
    /// of every file when `major`. Returns without doing anything when nothing qualifies.
    pub(crate) fn compact_store(&self, i: usize, major: bool) -> Result<Compacted> {
        let Some(store) = self.stores.get(i) else {
            return Ok(Compacted::Nothing);
        };
        let cfg = &self.services.config;
        let leveled = cfg.compaction_style == CompactionStyle::Leveled;
        let mut busy = store.compacting.lock();
        if major {
            // Every file: after the compactions running now.
            while !busy.is_empty() {
                store.compaction_done.wait(&mut busy);
            }
        }
        let view = store.view();
        let runs = &view.runs;
        let job = if major {
            // Leveled: into the bottom level, over every row there is.
            let mut rows = view.files.iter().filter_map(|f| f.file.rows());
            let range = rows.next().map(|(lo, hi)| {
                let (lo, hi) = rows.fold((lo, hi), |(a, b), (c, d)| (a.min(c), b.max(d)));
                (MAX_LEVEL, lo.to_vec(), hi.to_vec())
            });
            Job {
                sources: runs.iter().map(|r| r.files.clone()).collect(),
                level: if leveled { MAX_LEVEL } else { 0 },
                file_bytes: if leveled {
                    cfg.compaction_file_bytes
                } else {
                    0
                },
                range: range.filter(|_| leveled),
            }
        } else if leveled {
            let opts = self.level_options();
            let mut cursors = store.level_cursors.lock();
            let Some(plan) = levels::pick(&view.files, &busy, &opts, &cursors) else {
                return Ok(Compacted::Nothing);
            };
            if plan.from > 0 {
                let last_row = plan
                    .inputs
                    .first()
                    .and_then(|f| f.file.rows())
                    .map(|(_, last)| last.to_vec());
                let at = usize::from(plan.from);
                if cursors.len() <= at {
                    cursors.resize(at + 1, Vec::new());
                }
                if let (Some(c), Some(row)) = (cursors.get_mut(at), last_row) {
                    *c = row;
                }
            }
            if plan.trivial {
                for f in &plan.inputs {
                    f.set_level(plan.to);
                }
                tracing::debug!(region = self.info.id, family = %store.family.name, files = plan.inputs.len(), from = plan.from, to = plan.to, "moved store files down a level");
                self.notify_pressure();
                return Ok(Compacted::Moved);
            }
            Job {
                sources: group(&plan.inputs).into_iter().map(|r| r.files).collect(),
                level: plan.to,
                file_bytes: if plan.to == 0 {
                    0
                } else {
                    cfg.compaction_file_bytes
                },
                range: plan.range.map(|(lo, hi)| (plan.to, lo, hi)),
            }
        } else {
            // The runs no other compaction is merging.
            let free: Vec<Run> = runs
                .iter()
                .filter(|r| r.files.iter().all(|f| !busy.files.contains(&f.number)))
                .cloned()
                .collect();
            let all_free = free.len() == runs.len();
            // Past the space limit every run is merged (then major: every file is taken).
            let chosen: Vec<Run> =
                if all_free && space_amp_exceeded(runs, cfg.compaction_max_space_amp) {
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
            Job {
                sources: chosen.into_iter().map(|r| r.files).collect(),
                level: 0,
                file_bytes: 0,
                range: None,
            }
        };
        // A major compaction of one run still rewrites it, as does a leveled merge (into
        // another level); a tiered minor one merges two runs or more.
        if job.sources.len() < if major || leveled { 1 } else { 2 } {
            return Ok(Compacted::Nothing);
        }
        let inputs: Vec<Arc<StoreFileHandle>> = job.sources.iter().flatten().cloned().collect();
        let claim = Claim {
            store,
            numbers: inputs.iter().map(|f| f.number).collect(),
            id: NEXT_CLAIM.fetch_add(1, Ordering::Relaxed),
        };
        busy.files.extend(claim.numbers.iter().copied());
        if let Some((level, lo, hi)) = &job.range {
            busy.writing
                .push((claim.id, *level, lo.clone(), hi.clone()));
        }
        drop(busy);
        // Every file taken: nothing outside the compaction can need what a major one drops.
        let major = major || inputs.len() == view.files.len();
        // A minor compaction drops what the delete markers and version limits among its inputs
        // rule out (HBase's minor compaction) and keeps the markers, except in rows where a
        // file outside may hold a marker deleting one version: it could make an older version
        // here visible again, and the same read must give the same answer before and after.
        let taken: HashSet<u64> = claim.numbers.iter().copied().collect();
        let guards: Vec<Arc<StoreFileHandle>> = view
            .files
            .iter()
            .filter(|f| {
                let meta = f.file.meta();
                !taken.contains(&f.number) && meta.version_deletes.unwrap_or(meta.delete_count) > 0
            })
            .cloned()
            .collect();
        let result = self.merge(store, &job, &inputs, major, &guards, runs.len());
        drop(claim);
        crate::heap::release_free_memory();
        let bytes_out = result?;
        let (files_in, bytes_in) = (inputs.len(), inputs.iter().map(|f| f.size()).sum::<u64>());
        // The inputs' files go when the last handle does: this compaction's first, then the
        // marker, unless a reader still holds one.
        let level = job.level;
        drop((job, inputs, view));
        if let Err(e) = store.cleanup_markers() {
            tracing::warn!(region = self.info.id, family = %store.family.name, error = %e, "cannot delete a compaction marker; it goes on the next open");
        }
        self.compactions.fetch_add(1, Ordering::Relaxed);
        if major {
            self.major_compactions.fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_compacted.fetch_add(bytes_out, Ordering::Relaxed);
        tracing::debug!(region = self.info.id, family = %store.family.name, files = files_in, bytes_in, bytes_out, major, level, "compacted");
        self.notify_pressure();
        Ok(if major {
            Compacted::Major
        } else {
            Compacted::Minor
        })
    }

    /// Merges `job`'s sources into new files and commits them in place of `inputs`. Returns
    /// the bytes written.
    fn merge(
        &self,
        store: &Store,
        job: &Job,
        inputs: &[Arc<StoreFileHandle>],
        major: bool,
        guards: &[Arc<StoreFileHandle>],
        runs: usize,
    ) -> Result<u64> {
        let cfg = &self.services.config;
        let now = cfg.clock.now_millis();
        let spec = ReadSpec {
            read_point: super::mvcc::ReadPoint::ALL,
            time_range: TimeRange::ALL,
            max_versions: u32::MAX,
            qualifiers: None,
            raw: false,
        };
        let mut out = Outputs {
            region: self,
            store,
            level: job.level,
            file_bytes: job.file_bytes,
            major,
            now,
            max_seq: inputs
                .iter()
                .map(|f| f.file.meta().max_seq)
                .max()
                .unwrap_or(0),
            current: None,
            pending: Vec::new(),
        };
        // Throttled, and at the compaction threads' lower priority, unless writers are
        // waiting on this store's file count.
        super::background::compaction_priority(runs >= cfg.blocking_store_files);
        let throttle = (runs < cfg.blocking_store_files)
            .then_some(&self.services.compaction_throttle)
            .filter(|t| t.rate() > 0);
        let mut unthrottled_bytes = 0u64;
        // One source per run: a run's files are read one after another.
        let mut merge = MergeIter::new(
            job.sources
                .iter()
                .map(|files| -> Box<dyn CellIter> {
                    match files.as_slice() {
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
        // Whether the row may have a version delete outside the compaction.
        let mut guarded = false;
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
            let new_row = key.row() != row.as_slice();
            if new_row {
                row.clear();
                row.extend_from_slice(key.row());
                matcher.reset();
                guarded = guards.iter().any(|f| f.file.may_contain_row(key.row()));
            }
            if let Some(t) = throttle {
                unthrottled_bytes += (key_bytes.len() + merge.value().len()) as u64;
                if unthrottled_bytes >= THROTTLE_EVERY {
                    t.consume(unthrottled_bytes);
                    unthrottled_bytes = 0;
                }
            }
            let keep = if store.family.keep_deleted_cells {
                matcher.survives_keeping_deleted(&key)
            } else if major {
                matcher.survives(&key)
            } else if !guarded {
                // `survives` sees every cell (markers included) to know what they mask.
                matcher.survives(&key) || key.cell_type().is_none_or(|t| t.is_delete())
            } else {
                true
            };
            if keep {
                out.add(key_bytes, merge.value(), new_row)?;
            }
            prev_key.clear();
            prev_key.extend_from_slice(key_bytes);
            merge.advance()?;
        }
        let pending = out.finish()?;
        let marker = pending.first().map_or(0, |p| p.number);
        let outputs = store.install(pending, Some((inputs, marker)))?;
        let bytes_out = outputs.iter().map(|f| f.size()).sum();
        store.commit_compaction(inputs, outputs, marker)?;
        Ok(bytes_out)
    }
}

/// A compaction's output files: a new one starts at the first row boundary past
/// `file_bytes`. At least one file is written, empty if nothing is kept: its sequence ids
/// say the inputs' writes are persisted (or the WAL would replay what was dropped).
struct Outputs<'a> {
    region: &'a RegionInner,
    store: &'a Store,
    level: u8,
    file_bytes: u64,
    major: bool,
    now: u64,
    max_seq: u64,
    current: Option<StoreFileWriter>,
    pending: Vec<PendingFile>,
}

impl Outputs<'_> {
    fn add(&mut self, key: &[u8], value: &[u8], new_row: bool) -> Result<()> {
        let full = self
            .current
            .as_ref()
            .is_some_and(|w| self.file_bytes > 0 && w.estimated_size() >= self.file_bytes);
        if new_row && full {
            self.close()?;
        }
        match &mut self.current {
            Some(w) => w.add(key, value),
            None => {
                let mut w = self.open(self.level)?;
                let added = w.add(key, value);
                self.current = Some(w);
                added
            }
        }
    }

    fn open(&mut self, level: u8) -> Result<StoreFileWriter> {
        let (mut w, pending) = self.store.create_output(self.region.next_file_number())?;
        self.pending.push(pending);
        w.raise_max_seq(self.max_seq);
        w.set_created_ms(self.now);
        w.set_level(level);
        if self.major {
            w.mark_major_compaction();
        }
        Ok(w)
    }

    fn close(&mut self) -> Result<()> {
        match self.current.take() {
            Some(w) => w.finish().map(drop),
            None => Ok(()),
        }
    }

    /// The files written, finished and synced.
    fn finish(mut self) -> Result<Vec<PendingFile>> {
        if self.pending.is_empty() {
            // Nothing kept: an empty file, at level 0 (it has no rows to place it by).
            self.current = Some(self.open(0)?);
        }
        self.close()?;
        Ok(std::mem::take(&mut self.pending))
    }
}

#[cfg(test)]
mod tests {
    use super::jittered_period;

    #[test]
    fn jitter_spreads_stores_and_is_stable_per_store() {
        let week = 7 * 24 * 3600 * 1000;
        let periods: Vec<u64> = (0..200u64)
            .map(|id| jittered_period(week, 0.5, (id, b"cf")))
            .collect();
        assert!(periods
            .iter()
            .all(|&p| p >= week / 2 && p <= week + week / 2));
        let min = periods.iter().min().copied().unwrap_or(0);
        let max = periods.iter().max().copied().unwrap_or(0);
        assert!(
            max - min > week / 2,
            "spread across the window: {min}..{max}"
        );
        assert_eq!(
            jittered_period(week, 0.5, (7, b"cf")),
            jittered_period(week, 0.5, (7, b"cf"))
        );
        assert_eq!(jittered_period(week, 0.0, (7, b"cf")), week);
    }
}
