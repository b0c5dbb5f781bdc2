//! Compaction: merging a store's files into one.
//!
//! Minor compactions pick files by HBase's ratio rule and keep every cell (delete markers must
//! stay while files they mask are outside the compaction). Major compactions take every file
//! and keep only what a reader could see: deleted, expired and excess-version cells and the
//! delete markers go.
//!
//! Crash safety: the output is written under a temporary name and synced; a marker naming the
//! inputs is written; the output is renamed into place; only then are the inputs deleted.
//! Opening a store finishes a compaction whose output exists and forgets one whose output does
//! not (see `store.rs`). Readers holding an input keep it until they finish.

use super::matcher::{ReadSpec, RowMatcher};
use super::store_files::StoreFileHandle;
use super::RegionInner;
use crate::iter::MergeIter;
use cellar_model::key::KeyRef;
use cellar_model::{Error, Result, TimeRange};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Compactions account their bytes to the throttle in steps of this much.
const THROTTLE_EVERY: u64 = 256 * 1024;

/// Picks files for a minor compaction (newest first in `files`): HBase's ratio rule. Walking
/// from the oldest file, a file is skipped while it is larger than `ratio ×` the total of the
/// newer files that would join it; the first file that passes starts the selection, which
/// takes up to `max_files` files and needs at least `min_files`.
pub fn select_minor(
    files: &[Arc<StoreFileHandle>],
    min_files: usize,
    max_files: usize,
    ratio: f64,
) -> Vec<Arc<StoreFileHandle>> {
    let oldest_first: Vec<&Arc<StoreFileHandle>> = files.iter().rev().collect();
    let sizes: Vec<u64> = oldest_first.iter().map(|f| f.size()).collect();
    for start in 0..oldest_first.len() {
        let end = (start + max_files).min(oldest_first.len());
        if end - start < min_files {
            break;
        }
        let newer: u64 = sizes[start + 1..end].iter().sum();
        if sizes[start] as f64 <= ratio * newer as f64 {
            return oldest_first[start..end]
                .iter()
                .map(|f| Arc::clone(f))
                .collect();
        }
    }
    Vec::new()
}

impl RegionInner {
    /// Compacts store `i`. Returns without doing anything when a minor compaction finds no
    /// qualifying files.
    pub(crate) fn compact_store(&self, i: usize, major: bool) -> Result<()> {
        let Some(store) = self.stores.get(i) else {
            return Ok(());
        };
        let _guard = store.compact_lock.lock();
        let view = store.view();
        let cfg = &self.services.config;
        let inputs: Vec<Arc<StoreFileHandle>> = if major {
            view.files.clone()
        } else if view.files.len() >= cfg.blocking_store_files {
            // Writers are held back: the ratio rule can settle at exactly this many files, so
            // merge the newest (smallest) ones regardless of it, as HBase does when "stuck".
            view.files
                .iter()
                .take(cfg.compaction_max_files.max(2))
                .cloned()
                .collect()
        } else {
            select_minor(
                &view.files,
                cfg.compaction_min_files,
                cfg.compaction_max_files,
                cfg.compaction_ratio,
            )
        };
        if inputs.len() < if major { 1 } else { 2 } {
            return Ok(());
        }
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
        let throttle = (view.files.len() < cfg.blocking_store_files)
            .then_some(&self.services.compaction_throttle)
            .filter(|t| t.rate() > 0);
        let output = store.write_file(number, Some(&inputs), |w| {
            let mut unthrottled_bytes = 0u64;
            w.raise_max_seq(inputs_max_seq);
            let mut merge = MergeIter::new(inputs.iter().map(|f| f.iter(false)).collect());
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
        self.bytes_compacted.fetch_add(bytes_out, Ordering::Relaxed);
        tracing::debug!(region = self.info.id, family = %store.family.name, files = inputs.len(), bytes_in, bytes_out, major, "compacted");
        self.notify_pressure();
        Ok(())
    }
}
