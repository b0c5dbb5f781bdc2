//! A store: one column family of one region. A memstore taking writes, at most one memstore
//! snapshot being flushed, and the store files, published together as an immutable
//! [`StoreView`] so a reader takes one consistent picture with one lock-free-ish Arc clone.

use super::levels::{check_levels, Busy};
use super::mvcc::ReadPoint;
use super::runs::{group, Run, RunIter};
use super::store_files::{
    new_writer_tag, parse_number, read_marker, store_file_name, tagged_marker_file_name,
    tagged_store_file_name, write_marker, Marker, StoreFileHandle,
};
use crate::block_cache::{BlockCache, Priority};
use crate::fs::{tmp_path, FsRef};
use crate::iter::CellIter;
use crate::memstore::Memstore;
use crate::storefile::{RowProbe, StoreFileOptions, StoreFileWriter};
use bytes::Bytes;
use cellar_model::key::KeyRef;
use cellar_model::{FamilySchema, Result, TimeRange};
use parking_lot::{Condvar, Mutex, RwLock};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What readers see of a store. Replaced, never mutated (besides the active memstore's inserts).
pub struct StoreView {
    pub active: Arc<Memstore>,
    pub snapshot: Option<Arc<Memstore>>,
    /// Newest first.
    pub files: Vec<Arc<StoreFileHandle>>,
    /// The same files as sorted runs (`runs.rs`), newest run first.
    pub runs: Vec<Run>,
}

impl StoreView {
    pub fn new(
        active: Arc<Memstore>,
        snapshot: Option<Arc<Memstore>>,
        files: Vec<Arc<StoreFileHandle>>,
    ) -> StoreView {
        StoreView {
            active,
            snapshot,
            runs: group(&files),
            files,
        }
    }
}

pub struct Store {
    pub family: FamilySchema,
    pub name: Bytes,
    pub dir: PathBuf,
    view: RwLock<Arc<StoreView>>,
    /// The files compactions are merging now and the level ranges they write. Two
    /// compactions of one store take disjoint files: new flushes are merged beside a long
    /// merge of the old ones instead of piling up behind it until writers are held back
    /// (`compaction.rs`, `levels.rs`).
    pub(crate) compacting: Mutex<Busy>,
    /// Signalled when a compaction lets its files go.
    pub(crate) compaction_done: Condvar,
    /// Per level, the last row of the file leveled compaction merged down last: the next
    /// merge takes the file after it (`levels.rs`).
    pub(crate) level_cursors: Mutex<Vec<Vec<u8>>>,
    /// Markers of committed compactions whose inputs a reader may still hold: deleted once
    /// the inputs are gone (`cleanup_markers`), else on the next open.
    pending_markers: Mutex<Vec<u64>>,
    /// This open's writer tag, in the names of the files it writes (`store_files.rs`).
    writer: u64,
    fs: FsRef,
    cache: Option<Arc<BlockCache>>,
}

impl Store {
    /// Opens the store directory: deletes half-written files, finishes interrupted compactions,
    /// opens the store files. Returns the store and the highest file number in it.
    pub fn open(
        fs: &FsRef,
        dir: &Path,
        family: FamilySchema,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<(Store, u64)> {
        crate::fs::create_dir_durable(fs.as_ref(), dir)?;
        let mut names = fs.list(dir)?;
        // Markers first. A version 2 marker is written once every output is complete (synced
        // under its `.tmp` name): it commits the compaction. Outputs still under their `.tmp`
        // names are renamed into place (the crash came between two renames) and the inputs
        // that are left go. An output that is in neither place was merged away by a later
        // compaction (a marker outlives its compaction while a reader holds an input). A
        // version 1 marker (no outputs named) committed if its one output is in place. A
        // damaged marker changes nothing.
        for name in names.clone().iter().filter(|n| n.ends_with(".compaction")) {
            let Some((number, _)) = parse_number(name) else {
                continue;
            };
            let marker = dir.join(name);
            match read_marker(fs, &marker)? {
                Some(Marker {
                    inputs,
                    outputs: Some(outputs),
                }) => {
                    for output in &outputs {
                        let tmp = format!("{output}.tmp");
                        if !names.contains(output) && names.contains(&tmp) {
                            fs.rename(&dir.join(&tmp), &dir.join(output))?;
                            names.retain(|n| *n != tmp);
                            names.push(output.clone());
                        }
                    }
                    delete_listed(fs, dir, &mut names, &inputs)?;
                }
                Some(Marker {
                    inputs,
                    outputs: None,
                }) if names.contains(&store_file_name(number)) => {
                    delete_listed(fs, dir, &mut names, &inputs)?;
                }
                _ => {}
            }
            fs.delete(&marker)?;
            names.retain(|n| n != name);
        }
        for name in names.iter().filter(|n| n.ends_with(".tmp")) {
            fs.delete(&dir.join(name))?;
        }
        names.retain(|n| !n.ends_with(".tmp"));
        fs.sync_dir(dir)?;
        let priority = if family.in_memory {
            Priority::InMemory
        } else {
            Priority::Normal
        };
        let mut files = Vec::new();
        let mut max_number = 0;
        for name in &names {
            let Some((number, ext)) = parse_number(name) else {
                tracing::warn!(file = %dir.join(name).display(), "ignoring an unknown file in a store directory");
                continue;
            };
            if ext != "sf" && ext != "ref" {
                continue;
            }
            max_number = max_number.max(number);
            files.push(StoreFileHandle::open(
                fs,
                dir.join(name),
                number,
                cache.clone(),
                priority,
            )?);
        }
        files.sort_by_key(|f| std::cmp::Reverse(f.number));
        check_levels(&files);
        let view = StoreView::new(Arc::new(Memstore::new()), None, files);
        Ok((
            Store {
                name: Bytes::copy_from_slice(family.name.as_bytes()),
                family,
                dir: dir.to_path_buf(),
                view: RwLock::new(Arc::new(view)),
                compacting: Mutex::new(Busy::default()),
                compaction_done: Condvar::new(),
                level_cursors: Mutex::new(Vec::new()),
                pending_markers: Mutex::new(Vec::new()),
                writer: new_writer_tag(),
                fs: Arc::clone(fs),
                cache,
            },
            max_number,
        ))
    }

    pub fn view(&self) -> Arc<StoreView> {
        Arc::clone(&self.view.read())
    }

    /// Highest sequence id in the store files: WAL records up to it are already persisted.
    pub fn max_flushed_seq(&self) -> u64 {
        self.view()
            .files
            .iter()
            .map(|f| f.file.meta().max_seq)
            .max()
            .unwrap_or(0)
    }

    /// Inserts into the active memstore. Callers hold the region's write lock, which is also
    /// what `swap_for_flush` takes, so an insert never lands in a memstore being flushed.
    pub fn insert(&self, key: &[u8], value: &[u8]) {
        self.view.read().active.insert(key, value);
    }

    /// [`Store::insert`] of several cells; cheapest in key order.
    pub fn insert_all<'k>(&self, cells: impl IntoIterator<Item = (&'k [u8], &'k [u8])>) {
        self.view.read().active.insert_all(cells);
    }

    pub fn memstore_bytes(&self) -> usize {
        let v = self.view();
        v.active.approximate_bytes() + v.snapshot.as_ref().map_or(0, |s| s.approximate_bytes())
    }

    /// Sorted runs: what compaction counts (and writers are held back by).
    pub fn run_count(&self) -> usize {
        self.view.read().runs.len()
    }

    /// Moves the active memstore aside for flushing (unless a failed flush left a snapshot,
    /// which is retried first). Called under the region's write lock.
    pub fn swap_for_flush(&self) {
        let mut view = self.view.write();
        if view.snapshot.is_some() || view.active.is_empty() {
            return;
        }
        *view = Arc::new(StoreView {
            active: Arc::new(Memstore::new()),
            snapshot: Some(Arc::clone(&view.active)),
            files: view.files.clone(),
            runs: view.runs.clone(),
        });
    }

    /// Writes the snapshot (if any) to store file `number`, with only the cells `keep` sees
    /// (aborted writes' cells stay out), and publishes it. Returns whether a file was written.
    pub fn flush_snapshot(&self, number: u64, keep: &ReadPoint, now_ms: u64) -> Result<bool> {
        let Some(snapshot) = self.view().snapshot.clone() else {
            return Ok(false);
        };
        let handle = self.write_file(number, |w| {
            w.set_created_ms(now_ms);
            let mut it = snapshot.iter();
            it.seek_to_first()?;
            while it.valid() {
                let kept = KeyRef::parse(it.key()).is_none_or(|k| keep.sees(k.seq()));
                if kept {
                    w.add(it.key(), it.value())?;
                }
                it.next()?;
            }
            Ok(())
        })?;
        let mut view = self.view.write();
        let mut files = Vec::with_capacity(view.files.len() + 1);
        files.push(handle);
        files.extend(view.files.iter().cloned());
        *view = Arc::new(StoreView::new(Arc::clone(&view.active), None, files));
        Ok(true)
    }

    /// Publishes installed files (a bulk load's: `ingest.rs`) beside the ones there are.
    pub fn add_files(&self, added: Vec<Arc<StoreFileHandle>>) {
        let mut view = self.view.write();
        let mut files: Vec<_> = view.files.iter().cloned().chain(added).collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.number));
        *view = Arc::new(StoreView::new(
            Arc::clone(&view.active),
            view.snapshot.clone(),
            files,
        ));
    }

    /// Writes a new store file through `fill`, syncs it and renames it into place.
    pub fn write_file(
        &self,
        number: u64,
        fill: impl FnOnce(&mut StoreFileWriter) -> Result<()>,
    ) -> Result<Arc<StoreFileHandle>> {
        let (mut writer, pending) = self.create_output(number)?;
        fill(&mut writer)?;
        writer.finish()?;
        let mut installed = self.install(vec![pending], None)?;
        installed.pop().ok_or_else(|| {
            cellar_model::Error::corruption(self.dir.display(), 0, "an installed file is missing")
        })
    }

    /// Starts store file `number` under its temporary name. The [`PendingFile`] deletes it
    /// unless it is installed (a full disk must not stay full of half-written files until
    /// the next open).
    pub fn create_output(&self, number: u64) -> Result<(StoreFileWriter, PendingFile)> {
        let path = self.dir.join(tagged_store_file_name(number, self.writer));
        let tmp = tmp_path(&path);
        let pending = PendingFile {
            number,
            tmp,
            path,
            fs: Arc::clone(&self.fs),
            installed: false,
        };
        let writer = StoreFileWriter::create(
            &self.fs,
            &pending.tmp,
            StoreFileOptions::from_family(&self.family),
        )?;
        Ok((writer, pending))
    }

    /// Renames finished (synced) files into place and opens them. With `replaces` (a
    /// compaction's inputs and its marker's number), a marker naming the inputs and `files`
    /// is written first: it commits the compaction, and a crash (or a failed rename) part way
    /// through is finished on the next open.
    pub fn install(
        &self,
        mut files: Vec<PendingFile>,
        replaces: Option<(&[Arc<StoreFileHandle>], u64)>,
    ) -> Result<Vec<Arc<StoreFileHandle>>> {
        if let Some((inputs, number)) = replaces {
            let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
            let marker = Marker {
                inputs: inputs.iter().filter_map(|h| name(&h.own_path)).collect(),
                outputs: Some(files.iter().filter_map(|f| name(&f.path)).collect()),
            };
            write_marker(
                &self.fs,
                &self.dir.join(tagged_marker_file_name(number, self.writer)),
                &marker,
            )?;
        }
        for i in 0..files.len() {
            let renamed = files
                .get(i)
                .map_or(Ok(()), |f| self.fs.rename(&f.tmp, &f.path));
            if let Err(e) = renamed {
                if replaces.is_some() {
                    // The marker committed the compaction: the next open renames the rest.
                    for f in &mut files {
                        f.installed = true;
                    }
                }
                return Err(e);
            }
            if let Some(f) = files.get_mut(i) {
                f.installed = true;
            }
        }
        self.fs.sync_dir(&self.dir)?;
        let priority = if self.family.in_memory {
            Priority::InMemory
        } else {
            Priority::Normal
        };
        files
            .iter()
            .map(|f| {
                StoreFileHandle::open(
                    &self.fs,
                    f.path.clone(),
                    f.number,
                    self.cache.clone(),
                    priority,
                )
            })
            .collect()
    }

    /// Replaces `inputs` by `outputs` in the published file set; the inputs' files are
    /// deleted once no reader holds them, then the compaction marker (`number`) goes.
    pub fn commit_compaction(
        &self,
        inputs: &[Arc<StoreFileHandle>],
        outputs: Vec<Arc<StoreFileHandle>>,
        number: u64,
    ) -> Result<()> {
        {
            let mut view = self.view.write();
            let mut files: Vec<_> = view
                .files
                .iter()
                .filter(|f| !inputs.iter().any(|i| i.number == f.number))
                .cloned()
                .collect();
            files.extend(outputs);
            files.sort_by_key(|f| std::cmp::Reverse(f.number));
            *view = Arc::new(StoreView::new(
                Arc::clone(&view.active),
                view.snapshot.clone(),
                files,
            ));
        }
        for input in inputs {
            input.mark_obsolete();
        }
        self.pending_markers.lock().push(number);
        Ok(())
    }

    /// Deletes the markers of committed compactions whose inputs are all gone (callers let
    /// their own handles of the inputs go first). One whose inputs a reader still holds is
    /// kept for a later call, or the next open.
    pub fn cleanup_markers(&self) -> Result<()> {
        let pending = std::mem::take(&mut *self.pending_markers.lock());
        let mut kept = Vec::new();
        let mut result = Ok(());
        for number in pending {
            match self.marker_done(number) {
                Ok(true) => {}
                Ok(false) => kept.push(number),
                Err(e) => {
                    kept.push(number);
                    result = Err(e);
                }
            }
        }
        self.pending_markers.lock().extend(kept);
        result
    }

    /// Deletes marker `number` if its inputs are gone; whether it is gone.
    fn marker_done(&self, number: u64) -> Result<bool> {
        let marker = self.dir.join(tagged_marker_file_name(number, self.writer));
        if !self.fs.exists(&marker)? {
            return Ok(true);
        }
        let inputs = read_marker(&self.fs, &marker)?.map_or_else(Vec::new, |m| m.inputs);
        for input in &inputs {
            if self.fs.exists(&self.dir.join(input))? {
                return Ok(false);
            }
        }
        self.fs.delete(&marker)?;
        Ok(true)
    }

    /// Sources for a read of rows `[start, end)`: memstores and the store files that may hold
    /// such rows and cells in the time range. `row_probe`: for a single-row read, the row and
    /// the qualifiers wanted, checked against bloom filters.
    pub fn sources(
        &self,
        view: &StoreView,
        start: &[u8],
        end: &[u8],
        time_range: &TimeRange,
        row_probe: Option<(&RowProbe<'_>, Option<&[Bytes]>)>,
        fill_cache: bool,
    ) -> Vec<Box<dyn CellIter>> {
        let mut out = match row_probe {
            Some((probe, _)) => memstore_sources_for_row(view, probe),
            None => memstore_sources(view),
        };
        if row_probe.is_some() {
            for f in candidate_files(view, start, end, time_range, row_probe) {
                out.push(f.iter(fill_cache));
            }
            return out;
        }
        for run in &view.runs {
            let files: Vec<&Arc<StoreFileHandle>> = run
                .overlapping(start, end)
                .iter()
                .filter(|f| f.file.meta().max_timestamp >= time_range.min)
                .collect();
            match files.as_slice() {
                [] => {}
                [only] => out.push(only.iter(fill_cache)),
                _ => out.push(Box::new(RunIter::new(
                    files.into_iter().cloned().collect(),
                    fill_cache,
                ))),
            }
        }
        out
    }
}

/// Deletes the files of `names` that `listed` names, and forgets them.
fn delete_listed(fs: &FsRef, dir: &Path, names: &mut Vec<String>, listed: &[String]) -> Result<()> {
    for file in listed {
        if names.contains(file) {
            fs.delete(&dir.join(file))?;
        }
    }
    names.retain(|n| !listed.contains(n));
    Ok(())
}

/// A store file written under its temporary name, not yet in the store: deleted when dropped
/// unless [`Store::install`] renamed it into place.
pub struct PendingFile {
    pub number: u64,
    tmp: PathBuf,
    path: PathBuf,
    fs: FsRef,
    installed: bool,
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if self.installed {
            return;
        }
        if let Err(e) = self.fs.delete(&self.tmp) {
            tracing::debug!(file = %self.tmp.display(), error = %e, "cannot delete a half-written store file; it goes on the next open");
        }
    }
}

/// Iterators over the memstores that hold anything.
pub fn memstore_sources(view: &StoreView) -> Vec<Box<dyn CellIter>> {
    let mut out: Vec<Box<dyn CellIter>> = Vec::with_capacity(2 + view.files.len());
    if !view.active.is_empty() {
        out.push(Box::new(view.active.iter()));
    }
    if let Some(s) = &view.snapshot {
        out.push(Box::new(s.iter()));
    }
    out
}

/// The memstores that may hold the probed row, as sources of a single-row read: a memstore
/// whose row index lacks the row is not searched at all. With [`candidate_files`] given the
/// same probe, this is the region-level gate (seed 004's "binary gate"): when both come back
/// empty, the family cannot hold the row and the read skips it, having allocated, searched
/// and read nothing.
pub fn memstore_sources_for_row(view: &StoreView, probe: &RowProbe<'_>) -> Vec<Box<dyn CellIter>> {
    // Allocates only for a memstore that holds the row.
    let mut out: Vec<Box<dyn CellIter>> = Vec::new();
    if view.active.may_contain_row(probe.row()) {
        out.push(Box::new(view.active.iter()));
    }
    if let Some(s) = view
        .snapshot
        .as_ref()
        .filter(|s| s.may_contain_row(probe.row()))
    {
        out.push(Box::new(s.iter()));
    }
    out
}

/// The store files a read of rows `[start, end)` must consult: those whose key range, time
/// range and (for single-row reads, `row_probe`: the row and the qualifiers wanted; `start`
/// and `end` are then not looked at) row and column blooms do not rule them out. Allocates
/// nothing when no file qualifies (a Get of an absent row).
pub fn candidate_files<'v>(
    view: &'v StoreView,
    start: &[u8],
    end: &[u8],
    time_range: &TimeRange,
    row_probe: Option<(&RowProbe<'_>, Option<&[Bytes]>)>,
) -> Vec<&'v Arc<StoreFileHandle>> {
    let mut out = Vec::new();
    // Per run, a binary search finds the one file that can hold a probed row.
    for run in &view.runs {
        let files = match row_probe {
            None => run.overlapping(start, end),
            Some((probe, _)) => run
                .holding(probe.row())
                .map_or(&[][..], std::slice::from_ref),
        };
        for f in files {
            // Cells older than the range may be delete markers, but a file whose newest cell
            // is older than the range holds nothing the read needs.
            if f.file.meta().max_timestamp < time_range.min {
                continue;
            }
            let hit = match row_probe {
                None => true,
                // The row first (its hash is computed once for all files), then the columns;
                // family-wide delete markers live under the empty qualifier.
                Some((probe, qualifiers)) => {
                    f.may_contain_row(probe)
                        && qualifiers.is_none_or(|qs| {
                            f.file.may_contain_probe_column(probe, b"")
                                || qs.iter().any(|q| f.file.may_contain_probe_column(probe, q))
                        })
                }
            };
            if hit {
                out.push(f);
            }
        }
    }
    out
}
