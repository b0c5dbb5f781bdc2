//! Split primitives: where to split, and daughters that read their parent's files through
//! references until a compaction rewrites them (HBase's reference files).
//!
//! A split: the parent stops taking writes and flushes; each daughter directory gets a
//! descriptor with its half of the key range and, per family, one `.ref` file per parent store
//! file naming that file and the daughter's rows. Daughters open at once (nothing is copied);
//! their first compaction rewrites the references into files of their own, after which the
//! parent's directory can be removed ([`Region::has_references`] tells when).

use super::descriptor::{self, RegionInfo};
use super::store_files::{ref_file_name, Reference};
use super::Region;
use bytes::Bytes;
use cellar_model::key::KeyRef;
use cellar_model::{Error, Result};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

impl Region {
    /// Where to split: the middle row of the largest sorted run of the largest store (HBase's
    /// rule is the largest file's middle; a run of sequential files is one file cut in pieces,
    /// so its middle is the middle row of the file holding the run's middle byte). `None` when
    /// the region holds too little to split, or the middle row is its first row (a daughter
    /// would be empty).
    pub fn middle_row(&self) -> Option<Bytes> {
        let inner = &self.inner;
        let store = inner
            .stores
            .iter()
            .max_by_key(|s| s.view().files.iter().map(|f| f.size()).sum::<u64>())?;
        let view = store.view();
        let run = view.runs.iter().max_by_key(|r| r.size)?;
        let mut before = 0u64;
        let file = run.files.iter().find(|f| {
            before += f.size();
            before * 2 >= run.size
        })?;
        let mid = file.file.middle_key()?;
        let row = KeyRef::parse(&mid)?.row().to_vec();
        let first = KeyRef::parse(&file.file.meta().first_key)?.row().to_vec();
        let in_ref = file.reference.as_ref().is_none_or(|r| {
            row.as_slice() > r.start.as_slice()
                && (r.end.is_empty() || row.as_slice() < r.end.as_slice())
        });
        (row != first
            && in_ref
            && inner.info.contains_row(&row)
            && row.as_slice() != &inner.info.start_key[..])
            .then(|| Bytes::from(row))
    }

    /// Whether any store still reads a parent's files through references.
    pub fn has_references(&self) -> bool {
        self.inner
            .stores
            .iter()
            .any(|s| s.view().files.iter().any(|f| f.reference.is_some()))
    }

    /// Splits at `split_row` into daughters `(dir, id)` for `[start, split_row)` and
    /// `[split_row, end)`. Writes stop, memstores are flushed, references are written; the
    /// region is closed. Open the daughters with [`Region::open_in`].
    pub fn split(
        self,
        split_row: &[u8],
        lower: (PathBuf, u64),
        upper: (PathBuf, u64),
    ) -> Result<(RegionInfo, RegionInfo)> {
        let inner = &self.inner;
        if !inner.info.contains_row(split_row) || split_row == &inner.info.start_key[..] {
            return Err(Error::InvalidArgument(format!(
                "split row {:?} is not strictly inside region {}",
                String::from_utf8_lossy(split_row),
                inner.info.id
            )));
        }
        inner.check_open()?;
        inner.closed.store(true, Ordering::SeqCst);
        self.wait_for_background();
        inner.flush_unchecked()?;
        // A compaction may have started before we closed; let it finish so the file set is final.
        self.wait_for_background();
        let split = Bytes::copy_from_slice(split_row);
        let infos = [
            (
                lower.0,
                RegionInfo {
                    id: lower.1,
                    start_key: inner.info.start_key.clone(),
                    end_key: split.clone(),
                },
            ),
            (
                upper.0,
                RegionInfo {
                    id: upper.1,
                    start_key: split,
                    end_key: inner.info.end_key.clone(),
                },
            ),
        ];
        let fs = &inner.services.fs;
        for (dir, info) in &infos {
            crate::fs::create_dir_durable(fs.as_ref(), dir)?;
            for store in &inner.stores {
                let family_dir = dir.join(&store.family.name);
                crate::fs::create_dir_durable(fs.as_ref(), &family_dir)?;
                for f in &store.view().files {
                    let (parent, mut start, mut end) = match &f.reference {
                        Some(r) => (r.parent.clone(), r.start.clone(), r.end.clone()),
                        None => (f.own_path.clone(), Vec::new(), Vec::new()),
                    };
                    start = start.max(info.start_key.to_vec());
                    end = match (end.is_empty(), info.end_key.is_empty()) {
                        (true, _) => info.end_key.to_vec(),
                        (false, true) => end,
                        (false, false) => end.min(info.end_key.to_vec()),
                    };
                    if !end.is_empty() && start >= end {
                        continue;
                    }
                    if !f.may_overlap_rows(&start, &end) {
                        continue;
                    }
                    Reference { parent, start, end }
                        .write(fs, &family_dir.join(ref_file_name(f.number)))?;
                }
                fs.sync_dir(&family_dir)?;
            }
            descriptor::write(fs.as_ref(), dir, info, &inner.schema)?;
        }
        let [(_, a), (_, b)] = infos;
        self.close()?;
        Ok((a, b))
    }
}
