//! Bulk load: whole store files brought into a region without the write path (no WAL, no
//! memstore), as HBase's bulk load does with HFiles (`docs/migration.md`).
//!
//! Order, and why:
//! 1. One sequence id per file is taken under the write lock and completed at once: no cell
//!    carries one yet, and the files that will are in no store's view.
//! 2. The region is flushed. WAL replay skips, per store, what the store's files cover (their
//!    highest sequence id); every cell with a smaller id than the ones just taken was in a
//!    memstore before they were taken, so it is now in a file, and a crash after the new files
//!    are in place loses nothing. Writes go on meanwhile: theirs are larger ids.
//! 3. Each file is written through its `fill`, every key at its sequence id, under no lock.
//! 4. Under the write lock, every file is renamed into its store and published: a reader sees
//!    all of them or none of a store's, and no write lands between two stores' files. A file
//!    that failed to be written is deleted, and nothing of the load is published.

use super::store_files::StoreFileHandle;
use super::{Region, RegionInner};
use crate::storefile::StoreFileWriter;
use cellar_model::{Error, Result};
use std::sync::Arc;

/// One store file to bring in: its family, and what writes its cells. `fill` adds cells in
/// key order, every key carrying the sequence id it is given, and returns how many it added.
pub struct IngestFile {
    pub family: String,
    #[allow(clippy::type_complexity, reason = "a one-shot writer callback")]
    pub fill: Box<dyn FnOnce(&mut StoreFileWriter, u64) -> Result<u64> + Send>,
}

impl Region {
    /// Brings `files` into the region (in order: a later file's cells are newer than an
    /// earlier one's at the same coordinates). Returns the cells added.
    pub fn ingest(&self, files: Vec<IngestFile>) -> Result<u64> {
        self.inner.ingest(files)
    }
}

impl RegionInner {
    fn ingest(self: &Arc<Self>, files: Vec<IngestFile>) -> Result<u64> {
        self.check_open()?;
        let mut targets = Vec::with_capacity(files.len());
        for f in &files {
            targets.push(self.store_index(f.family.as_bytes())?);
        }
        let seqs: Vec<u64> = {
            let _w = self.write_lock.lock();
            files.iter().map(|_| self.mvcc.begin()).collect()
        };
        for &seq in &seqs {
            self.mvcc.complete(seq);
        }
        self.flush_unchecked()?;
        let mut written = Vec::with_capacity(files.len());
        let mut cells = 0;
        for ((file, &i), &seq) in files.into_iter().zip(&targets).zip(&seqs) {
            let store = self
                .stores
                .get(i)
                .ok_or_else(|| Error::InvalidArgument("a store index out of range".into()))?;
            let (mut writer, pending) = store.create_output(self.next_file_number())?;
            writer.set_created_ms(self.services.config.clock.now_millis());
            cells += (file.fill)(&mut writer, seq)?;
            writer.finish()?;
            written.push((i, pending));
        }
        let _w = self.write_lock.lock();
        self.check_open()?;
        let mut installed: Vec<(usize, Vec<Arc<StoreFileHandle>>)> = Vec::new();
        for (i, pending) in written {
            let store = self
                .stores
                .get(i)
                .ok_or_else(|| Error::InvalidArgument("a store index out of range".into()))?;
            let handles = store.install(vec![pending], None)?;
            match installed.iter_mut().find(|(j, _)| *j == i) {
                Some((_, hs)) => hs.extend(handles),
                None => installed.push((i, handles)),
            }
        }
        for (i, handles) in installed {
            if let Some(store) = self.stores.get(i) {
                store.add_files(handles);
            }
        }
        if self.query_cached.contains(&true) {
            // Rows changed without writes of them: no cached answer of the region holds.
            self.services.query_cache.region_changed(self.uid);
        }
        drop(_w);
        self.notify_pressure();
        self.request_compaction_if_needed();
        Ok(cells)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::key::make_key;
    use cellar_model::{CellType, FamilySchema, Get, RowMutation, TableSchema};

    fn schema() -> TableSchema {
        TableSchema::new("t", vec![FamilySchema::new("a"), FamilySchema::new("b")])
    }

    fn file(family: &str, rows: &[(&'static str, u64, &'static str)]) -> IngestFile {
        let rows = rows.to_vec();
        IngestFile {
            family: family.into(),
            fill: Box::new(move |w, seq| {
                for (row, ts, value) in &rows {
                    w.add(
                        &make_key(row.as_bytes(), b"q", *ts, CellType::Put, seq),
                        value.as_bytes(),
                    )?;
                }
                Ok(rows.len() as u64)
            }),
        }
    }

    fn value(r: &Region, row: &str, family: &str) -> Option<String> {
        let got = r.get(&Get::new(row.as_bytes().to_vec())).expect("get");
        got.iter()
            .find(|c| &c.family[..] == family.as_bytes() && &c.qualifier[..] == b"q")
            .map(|c| String::from_utf8_lossy(&c.value).into_owned())
    }

    #[test]
    fn ingested_files_are_read_and_survive_a_reopen_beside_logged_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let r = Region::open(dir.path(), schema()).expect("open");
            r.mutate(&RowMutation::new(b"r1".to_vec()).put(
                b"a",
                b"q",
                5,
                b"logged-before".to_vec(),
            ))
            .expect("put");
            let n = r
                .ingest(vec![
                    file("a", &[("r1", 3, "old"), ("r2", 7, "bulk-a")]),
                    file("b", &[("r2", 7, "bulk-b")]),
                ])
                .expect("ingest");
            assert_eq!(n, 3);
            r.mutate(&RowMutation::new(b"r3".to_vec()).put(
                b"a",
                b"q",
                9,
                b"logged-after".to_vec(),
            ))
            .expect("put");
            assert_eq!(
                value(&r, "r1", "a").as_deref(),
                Some("logged-before"),
                "ts 5 beats the bulk ts 3"
            );
            assert_eq!(value(&r, "r2", "a").as_deref(), Some("bulk-a"));
            assert_eq!(value(&r, "r2", "b").as_deref(), Some("bulk-b"));
            // Dropped without a flush: the write after the load is only in the WAL.
        }
        let r = Region::open(dir.path(), schema()).expect("reopen");
        assert_eq!(value(&r, "r1", "a").as_deref(), Some("logged-before"));
        assert_eq!(value(&r, "r2", "a").as_deref(), Some("bulk-a"));
        assert_eq!(value(&r, "r2", "b").as_deref(), Some("bulk-b"));
        assert_eq!(
            value(&r, "r3", "a").as_deref(),
            Some("logged-after"),
            "replayed from the WAL"
        );
    }

    #[test]
    fn a_cached_answer_does_not_outlive_a_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut a = FamilySchema::new("a");
        a.query_cache = true;
        let r = Region::open(dir.path(), TableSchema::new("t", vec![a])).expect("open");
        r.mutate(&RowMutation::new(b"r".to_vec()).put(b"a", b"q", 1, b"before".to_vec()))
            .expect("put");
        assert_eq!(value(&r, "r", "a").as_deref(), Some("before"));
        assert_eq!(
            value(&r, "r", "a").as_deref(),
            Some("before"),
            "from the cache"
        );
        r.ingest(vec![file("a", &[("r", 2, "loaded")])])
            .expect("ingest");
        assert_eq!(value(&r, "r", "a").as_deref(), Some("loaded"));
    }

    #[test]
    fn a_later_file_wins_at_the_same_coordinates_and_a_failed_load_publishes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = Region::open(dir.path(), schema()).expect("open");
        r.ingest(vec![
            file("a", &[("r", 1, "first")]),
            file("a", &[("r", 1, "second")]),
        ])
        .expect("ingest");
        assert_eq!(value(&r, "r", "a").as_deref(), Some("second"));
        let bad = IngestFile {
            family: "b".into(),
            fill: Box::new(|_, _| Err(Error::InvalidArgument("a damaged source file".into()))),
        };
        let err = r
            .ingest(vec![file("a", &[("s", 1, "never")]), bad])
            .expect_err("fails");
        assert!(err.to_string().contains("damaged source"), "{err}");
        assert_eq!(
            value(&r, "s", "a"),
            None,
            "nothing of a failed load is visible"
        );
        let unknown = r
            .ingest(vec![file("zz", &[("s", 1, "x")])])
            .expect_err("no family");
        assert!(unknown.to_string().contains("zz"), "{unknown}");
    }
}
