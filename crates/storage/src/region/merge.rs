//! Merges: one region that reads several adjacent regions' files through references, the
//! converse of a split (`split.rs`). Nothing is copied: the merged region's first compaction
//! rewrites the references into files of its own, after which the parents' directories can be
//! removed ([`Region::has_references`] tells when).
//!
//! A merge: each parent stops taking writes and flushes; the merged directory gets a
//! descriptor with the union of the parents' key ranges and, per family, one `.ref` file per
//! parent store file. File numbers are unique only within a region, so the references are
//! numbered afresh: the first parent's files first, each parent's in its own order (the order
//! that decides which of two equal cells is newer; parents' rows are disjoint, so the order
//! between parents decides nothing).

use super::descriptor::{self, RegionInfo};
use super::store_files::{ref_file_name, Reference};
use super::Region;
use cellar_model::{Error, Result};
use std::path::Path;
use std::sync::atomic::Ordering;

impl Region {
    /// Whether `parents` can merge: at least two, open, adjacent in key order, one schema.
    pub fn check_merge(parents: &[&Region]) -> Result<()> {
        if parents.len() < 2 {
            return Err(Error::InvalidArgument(
                "a merge needs at least two regions".into(),
            ));
        }
        for (a, b) in parents.iter().zip(parents.iter().skip(1)) {
            let (a, b) = (&a.inner.info, &b.inner.info);
            if a.end_key.is_empty() || a.end_key != b.start_key {
                return Err(Error::InvalidArgument(format!(
                    "regions {} and {} are not adjacent: the first ends at {:?}, the second \
                     starts at {:?}",
                    a.id,
                    b.id,
                    String::from_utf8_lossy(&a.end_key),
                    String::from_utf8_lossy(&b.start_key)
                )));
            }
        }
        let Some(first) = parents.first() else {
            return Err(Error::InvalidArgument("a merge needs regions".into()));
        };
        if let Some(other) = parents
            .iter()
            .find(|p| p.inner.schema != first.inner.schema)
        {
            return Err(Error::InvalidArgument(format!(
                "region {} has another schema than region {}",
                other.inner.info.id, first.inner.info.id
            )));
        }
        parents.iter().try_for_each(|p| p.inner.check_open())
    }

    /// Merges `parents` (adjacent, in key order: each ends where the next starts) into region
    /// `id` written at `dir`. Writes stop, memstores are flushed, references are written; the
    /// parents are closed. Open the merged region with [`Region::open_in`].
    pub fn merge(parents: Vec<Region>, dir: &Path, id: u64) -> Result<RegionInfo> {
        Region::check_merge(&parents.iter().collect::<Vec<_>>())?;
        let Some(first) = parents.first() else {
            return Err(Error::InvalidArgument("a merge needs regions".into()));
        };
        let schema = first.inner.schema.clone();
        for p in &parents {
            p.inner.closed.store(true, Ordering::SeqCst);
        }
        for p in &parents {
            p.wait_for_background();
            p.inner.flush_unchecked()?;
            // A compaction may have started before we closed; the file set must be final.
            p.wait_for_background();
        }
        let info = RegionInfo {
            id,
            start_key: first.inner.info.start_key.clone(),
            end_key: parents
                .last()
                .map(|p| p.inner.info.end_key.clone())
                .unwrap_or_default(),
        };
        let fs = &first.inner.services.fs;
        crate::fs::create_dir_durable(fs.as_ref(), dir)?;
        for family in &schema.families {
            let family_dir = dir.join(&family.name);
            crate::fs::create_dir_durable(fs.as_ref(), &family_dir)?;
            let mut number = 0u64;
            for p in &parents {
                let Some(store) = p.inner.stores.iter().find(|s| s.family.name == family.name)
                else {
                    continue;
                };
                let pinfo = &p.inner.info;
                let mut files = store.view().files.clone();
                files.sort_by_key(|f| f.number);
                for f in &files {
                    // A parent's own reference points at a file further up: keep pointing
                    // there, with the narrower of the two ranges (never a reference to one).
                    let (parent, start, end) = match &f.reference {
                        Some(r) => (
                            r.parent.clone(),
                            r.start.clone().max(pinfo.start_key.to_vec()),
                            narrower_end(&r.end, &pinfo.end_key),
                        ),
                        None => (
                            f.own_path.clone(),
                            pinfo.start_key.to_vec(),
                            pinfo.end_key.to_vec(),
                        ),
                    };
                    if !end.is_empty() && start >= end {
                        continue;
                    }
                    number += 1;
                    Reference { parent, start, end }
                        .write(fs, &family_dir.join(ref_file_name(number)))?;
                }
            }
            fs.sync_dir(&family_dir)?;
        }
        descriptor::write(fs.as_ref(), dir, &info, &schema)?;
        for p in parents {
            p.close()?;
        }
        Ok(info)
    }
}

/// The lower of two exclusive end rows, where empty means unbounded.
fn narrower_end(a: &[u8], b: &[u8]) -> Vec<u8> {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_vec(),
        (false, true) => a.to_vec(),
        (false, false) => a.min(b).to_vec(),
    }
}
