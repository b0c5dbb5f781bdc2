//! Opening a data directory: meta is read, interrupted operations are finished or rolled
//! back, every region of an enabled table is opened with its WAL records, and leftovers of
//! interrupted creates, deletes and splits are removed.
//!
//! Commit points (see `docs/design/0002-server.md`): a table exists once its meta table row
//! exists; a split is done once the parent row says `SPLIT`; a truncate is decided once the
//! table row names the replacing region. Anything on disk or in meta that no commit point
//! vouches for is garbage and goes.

use super::RetiredRegion;
use super::{RegionServer, Role};
use crate::error::ServerError;
use crate::meta::{RegionRecord, TableRecord, META_REGION_ID};
use crate::names;
use crate::router::{HostedRegion, RegionState, TableRoute, TableState};
use bytes::Bytes;
use cellar_model::Error;
use cellar_storage::region::RegionInfo;
use cellar_storage::wal::WalRecord;
use std::collections::{BTreeMap, HashMap, HashSet};

impl RegionServer {
    pub(super) fn recover(&self, records: &[WalRecord]) -> Result<(), ServerError> {
        for r in records {
            self.note_region_id(r.region);
            if let Some(n) = cellar_storage::region::wal_payload::nonce(&r.payload) {
                self.nonces.replayed(n);
            }
        }
        let contents = self.meta()?.load()?;
        self.authz.load(contents.permissions);
        *self.namespaces.write() = contents
            .namespaces
            .into_iter()
            .map(|n| (n.name, n.configuration))
            .collect();
        let mut tables: BTreeMap<String, TableRecord> = contents
            .tables
            .into_iter()
            .map(|t| (t.schema.name.clone(), t))
            .collect();
        let mut regions = Vec::new();
        for r in contents.regions {
            self.note_region_id(r.info.id);
            for d in [&r.split_a, &r.split_b, &r.merged_into]
                .into_iter()
                .flatten()
                .chain(&r.merge_parents)
            {
                self.note_region_id(d.id);
            }
            if tables.contains_key(&r.table) {
                regions.push(r);
            } else {
                // A create that crashed before its table row, or a delete after it.
                tracing::info!(table = %r.table, region = r.info.id, "removing the meta row of a region without a table");
                self.meta()?.delete_region(&r.table, &r.info)?;
            }
        }
        for t in tables.values_mut() {
            if let Some(id) = t.truncate_to {
                self.finish_truncate(t, id, &mut regions)?;
            }
        }
        let regions = self.recover_merges(regions)?;
        let serving = self.recover_splits(regions)?;

        let mut by_region: HashMap<u64, Vec<WalRecord>> = HashMap::new();
        for r in records {
            by_region.entry(r.region).or_default().push(r.clone());
        }
        let mut opened: HashSet<u64> = HashSet::from([META_REGION_ID]);
        let mut per_table: HashMap<String, Vec<RegionRecord>> = HashMap::new();
        for r in serving {
            per_table.entry(r.table.clone()).or_default().push(r);
        }
        for (name, t) in &tables {
            let mut mine = per_table.remove(name).unwrap_or_default();
            mine.sort_by(|a, b| a.info.start_key.cmp(&b.info.start_key));
            check_coverage(name, &mine)?;
            let mut route = TableRoute::new(t.schema.clone(), t.state, t.splits);
            for mut rec in mine {
                let dir = self.region_dir(name, rec.info.id);
                if let Role::Master(a) = &self.role {
                    // Regions are on region servers: the assignment loop confirms each with
                    // the server meta names (if it is alive) or opens it elsewhere.
                    let hosted = HostedRegion::new(name, rec.info.clone(), &dir, None);
                    hosted.note_open_seq(rec.open_seq);
                    if t.state == TableState::Enabled {
                        hosted.assign(
                            a.live_server(&rec.server, rec.startcode),
                            RegionState::Offline,
                        );
                    }
                    route.regions.insert(rec.info.start_key.clone(), hosted);
                    continue;
                }
                let region = if t.state == TableState::Enabled {
                    let replay = by_region.get(&rec.info.id).map_or(&[][..], Vec::as_slice);
                    let region = self.open_region(name, &rec.info, &t.schema, replay)?;
                    opened.insert(rec.info.id);
                    Some(region)
                } else {
                    None
                };
                let state = if region.is_some() {
                    RegionState::Open
                } else {
                    RegionState::Closed
                };
                if rec.state != state
                    || rec.server != self.advertised
                    || rec.startcode != self.startcode
                {
                    rec.state = state;
                    rec.server = self.advertised.clone();
                    rec.startcode = self.startcode;
                    self.meta()?.put_region(&rec)?;
                }
                route.regions.insert(
                    rec.info.start_key.clone(),
                    HostedRegion::new(name, rec.info.clone(), &dir, region),
                );
            }
            self.router.insert_table(name, route);
        }
        self.sweep_orphan_dirs()?;
        // Records of regions that will not open here (deleted tables, split parents, disabled
        // tables: all flushed) must not pin WAL segments forever.
        for id in by_region.keys().filter(|id| !opened.contains(id)) {
            self.services.wal.mark_flushed(*id, u64::MAX);
        }
        Ok(())
    }

    /// Completes a truncate whose table row names `new_id`: the table's other region rows go,
    /// the new region's row is written if missing, the table ends enabled with no splits.
    fn finish_truncate(
        &self,
        t: &mut TableRecord,
        new_id: u64,
        regions: &mut Vec<RegionRecord>,
    ) -> Result<(), ServerError> {
        let table = t.schema.name.clone();
        tracing::info!(table = %table, "finishing an interrupted truncate");
        let mut have_new = false;
        let mut kept = Vec::with_capacity(regions.len());
        for r in regions.drain(..) {
            if r.table != table {
                kept.push(r);
            } else if r.info.id == new_id {
                have_new = true;
                kept.push(r);
            } else {
                self.meta()?.delete_region(&r.table, &r.info)?;
            }
        }
        if !have_new {
            let rec = RegionRecord::new(&table, RegionInfo::whole(new_id), RegionState::Open);
            self.meta()?.put_region(&rec)?;
            kept.push(rec);
        }
        *regions = kept;
        t.truncate_to = None;
        t.splits = 0;
        t.state = TableState::Enabled;
        self.meta()?.put_table(t)
    }

    /// Rolls back merges that did not reach their commit point (merged row `MERGING`: its
    /// directory and row go, the parents serve again) and rolls forward committed ones (a
    /// merged row that still names its parents: their rows are marked `MERGED`). `MERGED`
    /// regions wait for the janitor. Returns the other regions.
    fn recover_merges(&self, regions: Vec<RegionRecord>) -> Result<Vec<RegionRecord>, ServerError> {
        let mut merged_into: HashMap<u64, RegionInfo> = HashMap::new();
        for r in &regions {
            if r.state != RegionState::Merging {
                for p in &r.merge_parents {
                    merged_into.insert(p.id, r.info.clone());
                }
            }
        }
        let mut rest = Vec::with_capacity(regions.len());
        for mut r in regions {
            if r.state == RegionState::Merging {
                tracing::info!(table = %r.table, region = r.info.id, "rolling back an interrupted merge");
                self.services
                    .fs
                    .delete_dir_all(&self.region_dir(&r.table, r.info.id))?;
                self.meta()?.delete_region(&r.table, &r.info)?;
                continue;
            }
            if let Some(m) = merged_into.get(&r.info.id) {
                if r.state != RegionState::Merged {
                    tracing::info!(table = %r.table, region = r.info.id, merged = m.id, "finishing an interrupted merge: marking the parent merged");
                    self.mark_merged(&r.table, std::iter::once(&r.info), m)?;
                    r.state = RegionState::Merged;
                    r.merged_into = Some(m.clone());
                }
            }
            if r.state == RegionState::Merged {
                let Some(m) = &r.merged_into else {
                    return Err(Error::corruption(
                        crate::meta::META_TABLE,
                        0,
                        format!(
                            "region row {:?} is MERGED without the region it became part of",
                            String::from_utf8_lossy(&r.row())
                        ),
                    )
                    .into());
                };
                self.retired_regions.lock().push(RetiredRegion {
                    table: r.table.clone(),
                    info: r.info.clone(),
                    successors: vec![m.id],
                });
                continue;
            }
            rest.push(r);
        }
        Ok(rest)
    }

    /// Rolls back splits that did not reach their commit point (parent `SPLITTING`: daughter
    /// directories removed, parent serves again) and rolls forward committed ones (parent
    /// `SPLIT`: missing daughter rows written, parent left for the janitor). Returns the
    /// regions that serve.
    fn recover_splits(&self, regions: Vec<RegionRecord>) -> Result<Vec<RegionRecord>, ServerError> {
        let known: HashSet<u64> = regions.iter().map(|r| r.info.id).collect();
        let mut serving = Vec::with_capacity(regions.len());
        let mut added = Vec::new();
        for mut r in regions {
            match r.state {
                RegionState::Split => {
                    let (Some(a), Some(b)) = (r.split_a.clone(), r.split_b.clone()) else {
                        return Err(Error::corruption(
                            crate::meta::META_TABLE,
                            0,
                            format!(
                                "region row {:?} is SPLIT without both daughters",
                                String::from_utf8_lossy(&r.row())
                            ),
                        )
                        .into());
                    };
                    for d in [&a, &b] {
                        if !known.contains(&d.id) {
                            tracing::info!(table = %r.table, parent = r.info.id, daughter = d.id, "finishing an interrupted split: writing the daughter's meta row");
                            let rec = RegionRecord::new(&r.table, d.clone(), RegionState::Open);
                            self.meta()?.put_region(&rec)?;
                            added.push(rec);
                        }
                    }
                    self.retired_regions.lock().push(RetiredRegion {
                        table: r.table.clone(),
                        info: r.info.clone(),
                        successors: vec![a.id, b.id],
                    });
                }
                RegionState::Splitting => {
                    tracing::info!(table = %r.table, region = r.info.id, "rolling back an interrupted split");
                    for d in [&r.split_a, &r.split_b].into_iter().flatten() {
                        self.services
                            .fs
                            .delete_dir_all(&self.region_dir(&r.table, d.id))?;
                    }
                    r.split_a = None;
                    r.split_b = None;
                    r.state = RegionState::Open;
                    self.meta()?.put_region(&r)?;
                    serving.push(r);
                }
                _ => serving.push(r),
            }
        }
        serving.extend(added);
        Ok(serving)
    }

    /// Marks merged parents' rows `MERGED`, naming the region they became part of.
    pub(crate) fn mark_merged<'a>(
        &self,
        table: &str,
        parents: impl Iterator<Item = &'a RegionInfo>,
        merged: &RegionInfo,
    ) -> Result<(), ServerError> {
        for p in parents {
            let mut r = RegionRecord::new(table, p.clone(), RegionState::Merged);
            r.merged_into = Some(merged.clone());
            self.meta()?.put_region(&r)?;
        }
        Ok(())
    }

    /// Removes table and region directories meta does not know: leftovers of creates,
    /// deletes, truncates and splits interrupted before (or after) their commit point.
    fn sweep_orphan_dirs(&self) -> Result<(), ServerError> {
        let fs = &self.services.fs;
        let root = names::data_root(&self.config.data_dir);
        if !fs.exists(&root)? {
            return Ok(());
        }
        let mut keep: HashSet<u64> = self
            .router
            .all_regions()
            .iter()
            .map(|r| r.info.id)
            .collect();
        keep.extend(self.retired_regions.lock().iter().map(|p| p.info.id));
        for ns in fs.list(&root)? {
            let ns_dir = root.join(&ns);
            for q in fs.list(&ns_dir)? {
                let table = names::table_of_dir(&ns, &q);
                let table_dir = ns_dir.join(&q);
                if !self.router.contains(&table) {
                    tracing::info!(table = %table, "removing the directory of a table meta does not know");
                    fs.delete_dir_all(&table_dir)?;
                    continue;
                }
                for name in fs.list(&table_dir)? {
                    match name.parse::<u64>() {
                        Ok(id) if !keep.contains(&id) => {
                            tracing::info!(table = %table, region = id, "removing the directory of a region meta does not know");
                            fs.delete_dir_all(&table_dir.join(&name))?;
                        }
                        Ok(_) => {}
                        Err(_) => {
                            tracing::warn!(table = %table, entry = %name, "unexpected entry in a table directory; left alone")
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The regions of a table, sorted by start key, must tile the key space.
fn check_coverage(table: &str, regions: &[RegionRecord]) -> Result<(), ServerError> {
    let bad = |detail: String| -> ServerError {
        Error::corruption(
            crate::meta::META_TABLE,
            0,
            format!("the regions of table '{table}' do not cover every row: {detail}"),
        )
        .into()
    };
    let mut expect = Bytes::new();
    for (i, r) in regions.iter().enumerate() {
        if r.info.start_key != expect {
            return Err(bad(format!(
                "region {} starts at {:?}, expected {:?}",
                r.info.id,
                String::from_utf8_lossy(&r.info.start_key),
                String::from_utf8_lossy(&expect)
            )));
        }
        if r.info.end_key.is_empty() && i + 1 != regions.len() {
            return Err(bad(format!(
                "region {} is unbounded but not last",
                r.info.id
            )));
        }
        expect = r.info.end_key.clone();
    }
    if regions.is_empty() || !expect.is_empty() {
        return Err(bad("the last region is bounded or there is none".into()));
    }
    Ok(())
}
