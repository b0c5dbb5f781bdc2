//! Where YCSB's operations go: a Cellar server over the native client (`cellar://HOST:PORT`),
//! or the storage engine in this process (`embedded:DIR`), to tell engine cost from network
//! cost. Both map a YCSB record to one row: each field is a column of one family.

use super::db::{Db, Fields, Status};
use bytes::Bytes;
use cellar_client::blocking;
use cellar_model::{
    Cell, Durability, FamilySchema, Get, RegionApi, RowMutation, Scan, TableSchema,
    LATEST_TIMESTAMP,
};
use cellar_storage::region::Region;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// How to prepare a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetOptions {
    /// YCSB's `table`.
    pub table: String,
    /// The column family holding the fields (property `columnfamily`).
    pub family: String,
    /// Create the table if missing (the load phase); otherwise it must exist.
    pub create: bool,
    /// Regions to create the table with (property `presplit`); 0 or 1: one.
    pub presplit: u64,
    /// Durability of inserts and updates (property `durability`, as the HBase binding's).
    pub durability: Durability,
    /// Create the family with `QUERY_CACHE => true` (property `querycache`, Cellar's).
    pub query_cache: bool,
    /// Scans run as executions of prepared scans (property `preparedscan`, Cellar's; seed 003).
    pub prepared_scan: bool,
    /// Scan results travel zstd-compressed (property `scancompress`, Cellar's).
    pub scan_compress: bool,
    /// Rows per scan call (property `scancaching`, Cellar's; 0: the scan's length, at most 1000).
    pub scan_caching: u32,
    /// TLS to the server (properties `tls.ca`, `tls.cert`, `tls.key`, Cellar's).
    pub tls: Option<cellar_client::TlsClientConfig>,
    /// The user the client says it is (property `user`, Cellar's; HBase's SIMPLE).
    pub user: Option<String>,
}

/// Parses the `durability` property: HBase's names.
pub fn parse_durability(value: &str) -> Result<Durability, String> {
    value
        .parse()
        .map_err(|e| format!("property durability={value}: {e}"))
}

/// A target the runner can use, closed cleanly at the end.
pub trait Target: Db {
    /// Flushes and closes what the target opened.
    fn finish(self: Box<Self>) -> Result<(), String>;
}

/// Opens the target `url` names: `cellar://HOST:PORT` (TCP), `cellar+ucx://HOST:PORT` (UCX)
/// or `embedded:DIR`.
pub fn open(url: &str, opts: &TargetOptions) -> Result<Box<dyn Target>, String> {
    if let Some((addr, transport)) = cellar_client::parse_url(url) {
        Ok(Box::new(CellarDb::connect(&addr, transport, opts)?))
    } else if url.starts_with("cellar://") || url.starts_with("cellar+ucx://") {
        Err(format!(
            "--db {url}: expected cellar://HOST:PORT or cellar+ucx://HOST:PORT"
        ))
    } else if let Some(dir) = url.strip_prefix("embedded:") {
        if dir.is_empty() {
            return Err(format!("--db {url}: expected embedded:DIR"));
        }
        Ok(Box::new(EmbeddedDb::open(PathBuf::from(dir), opts)?))
    } else {
        Err(format!(
            "--db {url}: unknown target; use cellar://HOST:PORT, cellar+ucx://HOST:PORT or embedded:DIR"
        ))
    }
}

/// Split points for `regions` regions over YCSB's `user…` key space, as the HBase YCSB guide
/// makes them: `user` followed by numbers spread evenly over 1000..9999.
pub fn split_keys(regions: u64) -> Vec<Bytes> {
    if regions <= 1 {
        return Vec::new();
    }
    (1..regions)
        .map(|i| Bytes::from(format!("user{}", 1000 + i * (9999 - 1000) / regions)))
        .collect()
}

fn schema(opts: &TargetOptions) -> Result<TableSchema, String> {
    let mut family = FamilySchema::new(&opts.family);
    family.query_cache = opts.query_cache;
    let schema = TableSchema::new(opts.table.clone(), vec![family]);
    schema
        .validate()
        .map_err(|e| format!("table '{}', family '{}': {e}", opts.table, opts.family))?;
    Ok(schema)
}

fn put_of(key: &str, family: &[u8], values: &Fields, durability: Durability) -> RowMutation {
    values
        .iter()
        .fold(RowMutation::new(key.to_string()), |m, (f, v)| {
            m.put(family, f.as_bytes(), LATEST_TIMESTAMP, v.clone())
        })
        .with_durability(durability)
}

fn get_of(key: &str, family: &[u8], fields: Option<&[String]>) -> Get {
    match fields {
        None => Get::new(key.to_string()).family(family),
        Some(fs) => fs.iter().fold(Get::new(key.to_string()), |g, f| {
            g.column(family, f.as_bytes())
        }),
    }
}

fn scan_of(start_key: &str, n: usize, family: &[u8], fields: Option<&[String]>) -> Scan {
    let scan = Scan::new()
        .range(start_key.as_bytes(), b"")
        .limit(n as u64)
        .caching(u32::try_from(n).unwrap_or(u32::MAX).clamp(1, 1000));
    match fields {
        None => scan.family(family),
        Some(fs) => fs.iter().fold(scan, |s, f| s.column(family, f.as_bytes())),
    }
}

fn fields_of(cells: &[Cell]) -> Fields {
    cells
        .iter()
        .map(|c| {
            (
                String::from_utf8_lossy(&c.qualifier).into_owned(),
                c.value.clone(),
            )
        })
        .collect()
}

fn error(e: impl std::fmt::Display) -> Status {
    Status::Error(e.to_string())
}

/// Prepared scans by the table and fields they read.
type PreparedScans = HashMap<(String, Option<Vec<String>>), Arc<blocking::PreparedScan>>;

/// A Cellar server, through one shared blocking client.
pub struct CellarDb {
    client: blocking::Client,
    table: blocking::Table,
    family: Bytes,
    durability: Durability,
    prepared_scan: bool,
    scan_compress: bool,
    scan_caching: u32,
    /// With `prepared_scan`: one prepared scan per (table, fields) read, shared by threads.
    prepared: Mutex<PreparedScans>,
}

impl CellarDb {
    /// Connects, and makes sure the table exists with the family (creating it if allowed).
    pub fn connect(
        addr: &str,
        transport: cellar_client::Transport,
        opts: &TargetOptions,
    ) -> Result<CellarDb, String> {
        let config = cellar_client::ClientConfig {
            transport,
            tls: opts.tls.clone(),
            user: opts.user.clone(),
            ..cellar_client::ClientConfig::default()
        };
        let client = blocking::Client::connect_with(addr, config)
            .map_err(|e| format!("cannot connect to cellar://{addr}: {e}"))?;
        let ucx = client
            .uses_ucx()
            .map_err(|e| format!("cannot connect to cellar://{addr}: {e}"))?;
        eprintln!(
            "cellar bench: {addr} transport={}",
            if ucx { "ucx" } else { "tcp" }
        );
        let admin = client.admin();
        let exists = admin
            .table_exists(&opts.table)
            .map_err(|e| format!("table '{}' on cellar://{addr}: {e}", opts.table))?;
        if !exists {
            if !opts.create {
                return Err(format!(
                    "table '{}' does not exist on cellar://{addr}; run `cellar bench load` first",
                    opts.table
                ));
            }
            let created = admin.create_table(schema(opts)?, split_keys(opts.presplit));
            // Another loader may have created it meanwhile; the check below decides.
            if let Err(e) = created {
                if !admin.table_exists(&opts.table).unwrap_or(false) {
                    return Err(format!(
                        "cannot create table '{}' on cellar://{addr}: {e}",
                        opts.table
                    ));
                }
            }
        }
        let info = admin
            .describe_table(&opts.table)
            .map_err(|e| format!("table '{}' on cellar://{addr}: {e}", opts.table))?;
        if info.schema.family(opts.family.as_bytes()).is_none() {
            let have: Vec<&str> = info
                .schema
                .families
                .iter()
                .map(|f| f.name.as_str())
                .collect();
            return Err(format!(
                "table '{}' has no family '{}' (it has: {}); set -p columnfamily=NAME",
                opts.table,
                opts.family,
                have.join(", ")
            ));
        }
        let table = client.table(&opts.table);
        Ok(CellarDb {
            client,
            table,
            family: Bytes::from(opts.family.clone().into_bytes()),
            durability: opts.durability,
            prepared_scan: opts.prepared_scan,
            scan_compress: opts.scan_compress,
            scan_caching: opts.scan_caching,
            prepared: Mutex::new(HashMap::new()),
        })
    }

    /// The prepared scan reading `fields` of `table`, prepared on first use.
    fn prepared(&self, table: &str, fields: Option<&[String]>) -> Arc<blocking::PreparedScan> {
        let key = (table.to_string(), fields.map(<[String]>::to_vec));
        let mut map = self.prepared.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(map.entry(key).or_insert_with(|| {
            let shape = scan_of("", 0, &self.family, fields);
            Arc::new(self.table(table).prepare_scan(shape, self.scan_compress))
        }))
    }

    fn table(&self, name: &str) -> blocking::Table {
        if name == self.table.name() {
            self.table.clone()
        } else {
            self.client.table(name)
        }
    }
}

impl Db for CellarDb {
    fn read(&self, table: &str, key: &str, fields: Option<&[String]>) -> (Status, Fields) {
        match self.table(table).get(get_of(key, &self.family, fields)) {
            Ok(row) if row.is_empty() => (Status::NotFound, Vec::new()),
            Ok(row) => (Status::Ok, fields_of(&row.cells)),
            Err(e) => (error(e), Vec::new()),
        }
    }

    fn scan(
        &self,
        table: &str,
        start_key: &str,
        record_count: usize,
        fields: Option<&[String]>,
    ) -> (Status, Vec<Fields>) {
        let caching = if self.scan_caching > 0 {
            self.scan_caching
        } else {
            u32::try_from(record_count)
                .unwrap_or(u32::MAX)
                .clamp(1, 1000)
        };
        let scanner = if self.prepared_scan {
            self.prepared(table, fields).execute(
                Bytes::copy_from_slice(start_key.as_bytes()),
                Bytes::new(),
                record_count as u64,
                caching,
            )
        } else {
            let mut scan = scan_of(start_key, record_count, &self.family, fields);
            scan.compress = self.scan_compress;
            scan.caching = caching;
            self.table(table).scan(scan)
        };
        let mut rows = Vec::new();
        for row in scanner.take(record_count) {
            match row {
                Ok(r) => rows.push(fields_of(&r.cells)),
                Err(e) => return (error(e), rows),
            }
        }
        (Status::Ok, rows)
    }

    fn update(&self, table: &str, key: &str, values: &Fields) -> Status {
        match self
            .table(table)
            .put(put_of(key, &self.family, values, self.durability))
        {
            Ok(()) => Status::Ok,
            Err(e) => error(e),
        }
    }

    fn insert(&self, table: &str, key: &str, values: &Fields) -> Status {
        self.update(table, key, values)
    }

    fn delete(&self, table: &str, key: &str) -> Status {
        let m = RowMutation::new(key.to_string()).delete_family(&self.family, LATEST_TIMESTAMP);
        match self.table(table).delete(m) {
            Ok(()) => Status::Ok,
            Err(e) => error(e),
        }
    }
}

impl Target for CellarDb {
    fn finish(self: Box<Self>) -> Result<(), String> {
        // The server owns the data; closing the connections is all there is.
        Ok(())
    }
}

/// The storage engine in this process: one region (its own WAL, SYNC_WAL writes) per table
/// at `DIR/<table>`. Reads and writes go through [`RegionApi`], so the target runs over any
/// region (tests use [`cellar_model::MemRegion`]).
pub struct EmbeddedDb<R = Region> {
    /// `None` once closed.
    region: Mutex<Option<Arc<R>>>,
    table: String,
    family: Bytes,
    dir: PathBuf,
    durability: Durability,
}

impl EmbeddedDb<Region> {
    pub fn open(dir: PathBuf, opts: &TargetOptions) -> Result<EmbeddedDb<Region>, String> {
        let name = &opts.table;
        let safe = !name.is_empty()
            && name != "."
            && name != ".."
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !safe {
            return Err(format!(
                "table '{name}': embedded tables are directories, so the name may hold only letters, digits, '_', '-' and '.'"
            ));
        }
        let at = dir.join(name);
        if !opts.create && !at.exists() {
            return Err(format!(
                "table '{name}' does not exist under {}; run `cellar bench load` first",
                dir.display()
            ));
        }
        let region = Region::open(&at, schema(opts)?)
            .map_err(|e| format!("cannot open table '{name}' at {}: {e}", at.display()))?;
        Ok(EmbeddedDb::over(region, dir, opts))
    }
}

impl<R: RegionApi> EmbeddedDb<R> {
    /// The target over `region`, which holds table `opts.table` (`dir`: where, for messages).
    pub fn over(region: R, dir: PathBuf, opts: &TargetOptions) -> EmbeddedDb<R> {
        EmbeddedDb {
            region: Mutex::new(Some(Arc::new(region))),
            table: opts.table.clone(),
            family: Bytes::from(opts.family.clone().into_bytes()),
            dir,
            durability: opts.durability,
        }
    }

    /// The table's region, or why there is none.
    fn region(&self, table: &str) -> Result<Arc<R>, Status> {
        if table != self.table {
            return Err(Status::BadRequest(format!(
                "table '{table}' is not open (this run opened '{}' under {})",
                self.table,
                self.dir.display()
            )));
        }
        let guard = match self.region.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard
            .as_ref()
            .map(Arc::clone)
            .ok_or_else(|| Status::Error(format!("table '{table}' is closed")))
    }

    fn write(&self, table: &str, m: &RowMutation) -> Status {
        match self.region(table) {
            Ok(r) => match r.mutate(m) {
                Ok(()) => Status::Ok,
                Err(e) => error(e),
            },
            Err(s) => s,
        }
    }
}

impl<R: RegionApi + Send + Sync> Db for EmbeddedDb<R> {
    fn read(&self, table: &str, key: &str, fields: Option<&[String]>) -> (Status, Fields) {
        let region = match self.region(table) {
            Ok(r) => r,
            Err(s) => return (s, Vec::new()),
        };
        match region.get(&get_of(key, &self.family, fields)) {
            Ok(cells) if cells.is_empty() => (Status::NotFound, Vec::new()),
            Ok(cells) => (Status::Ok, fields_of(&cells)),
            Err(e) => (error(e), Vec::new()),
        }
    }

    fn scan(
        &self,
        table: &str,
        start_key: &str,
        record_count: usize,
        fields: Option<&[String]>,
    ) -> (Status, Vec<Fields>) {
        let region = match self.region(table) {
            Ok(r) => r,
            Err(s) => return (s, Vec::new()),
        };
        let scanner = match region.scan(&scan_of(start_key, record_count, &self.family, fields)) {
            Ok(s) => s,
            Err(e) => return (error(e), Vec::new()),
        };
        let mut rows = Vec::new();
        for row in scanner.take(record_count) {
            match row {
                Ok(cells) => rows.push(fields_of(&cells)),
                Err(e) => return (error(e), rows),
            }
        }
        (Status::Ok, rows)
    }

    fn update(&self, table: &str, key: &str, values: &Fields) -> Status {
        self.write(table, &put_of(key, &self.family, values, self.durability))
    }

    fn insert(&self, table: &str, key: &str, values: &Fields) -> Status {
        self.update(table, key, values)
    }

    fn delete(&self, table: &str, key: &str) -> Status {
        let m = RowMutation::new(key.to_string()).delete_family(&self.family, LATEST_TIMESTAMP);
        self.write(table, &m)
    }
}

impl<R: RegionApi + Send + Sync> Target for EmbeddedDb<R> {
    fn finish(self: Box<Self>) -> Result<(), String> {
        let taken = match self.region.lock() {
            Ok(mut g) => g.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        let Some(region) = taken else {
            return Ok(());
        };
        let region = Arc::try_unwrap(region).map_err(|_| {
            format!(
                "table '{}' is still in use; cannot close it cleanly",
                self.table
            )
        })?;
        region
            .close()
            .map_err(|e| format!("closing table '{}': {e}", self.table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(create: bool) -> TargetOptions {
        TargetOptions {
            table: "usertable".into(),
            family: "family".into(),
            create,
            presplit: 0,
            query_cache: false,
            prepared_scan: false,
            scan_compress: false,
            scan_caching: 0,
            tls: None,
            user: None,
            durability: Durability::UseDefault,
        }
    }

    #[test]
    fn durability_names_are_hbase_s() {
        assert_eq!(parse_durability("fsync_wal"), Ok(Durability::FsyncWal));
        assert_eq!(parse_durability("SKIP_WAL"), Ok(Durability::SkipWal));
        let e = parse_durability("FSYNC").expect_err("unknown");
        assert!(
            e.contains("durability=FSYNC") && e.contains("FSYNC_WAL"),
            "{e}"
        );
    }

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Bytes::from(v.to_string())))
            .collect()
    }

    #[test]
    fn split_keys_follow_the_hbase_guide() {
        assert!(split_keys(1).is_empty());
        let keys = split_keys(4);
        assert_eq!(keys.len(), 3);
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        assert_eq!(keys[0], Bytes::from_static(b"user3249"));
    }

    #[test]
    fn urls_are_checked() {
        for bad in ["cellar://", "embedded:", "hbase://x:1"] {
            let e = open(bad, &opts(true)).err().expect("rejected");
            assert!(e.contains(bad), "{e}");
        }
    }

    /// The embedded target over the in-memory region: its record-to-row mapping, whatever
    /// the region.
    #[test]
    fn embedded_works_over_any_region() {
        let o = opts(true);
        let region = cellar_model::MemRegion::new(schema(&o).expect("schema")).expect("region");
        let db: Box<dyn Target> = Box::new(EmbeddedDb::over(region, PathBuf::from("mem"), &o));
        let t = "usertable";
        for k in ["user1", "user2", "user3"] {
            assert_eq!(db.insert(t, k, &fields(&[("field0", k)])), Status::Ok);
        }
        assert_eq!(
            db.update(t, "user2", &fields(&[("field1", "x")])),
            Status::Ok
        );
        let (s, f) = db.read(t, "user2", None);
        assert_eq!(
            (s, f),
            (Status::Ok, fields(&[("field0", "user2"), ("field1", "x")]))
        );
        assert_eq!(db.delete(t, "user1"), Status::Ok);
        let (s, rows) = db.scan(t, "user", 5, Some(&["field0".to_string()]));
        assert_eq!(s, Status::Ok);
        assert_eq!(
            rows,
            [
                fields(&[("field0", "user2")]),
                fields(&[("field0", "user3")])
            ]
        );
        db.finish().expect("close");
    }

    #[test]
    fn embedded_reads_what_it_wrote_and_survives_reopen() {
        let dir = tempfile::tempdir().expect("tmp");
        let url = format!("embedded:{}", dir.path().display());
        assert!(open(&url, &opts(false)).is_err(), "run before load");
        let db = open(&url, &opts(true)).expect("open");
        let t = "usertable";
        for i in 0..5 {
            let k = format!("user{i}");
            assert_eq!(
                db.insert(t, &k, &fields(&[("field0", "a"), ("field1", "b")])),
                Status::Ok
            );
        }
        assert_eq!(
            db.update(t, "user1", &fields(&[("field1", "c")])),
            Status::Ok
        );
        let (s, f) = db.read(t, "user1", None);
        assert_eq!(s, Status::Ok);
        assert_eq!(f, fields(&[("field0", "a"), ("field1", "c")]));
        let (s, f) = db.read(t, "user1", Some(&["field0".to_string()]));
        assert_eq!((s, f), (Status::Ok, fields(&[("field0", "a")])));
        assert_eq!(db.read(t, "nope", None).0, Status::NotFound);
        let (s, rows) = db.scan(t, "user2", 2, None);
        assert_eq!(s, Status::Ok);
        assert_eq!(rows.len(), 2);
        assert_eq!(db.delete(t, "user3"), Status::Ok);
        assert_eq!(db.read(t, "user3", None).0, Status::NotFound);
        assert!(matches!(
            db.read("other", "user1", None).0,
            Status::BadRequest(_)
        ));
        db.finish().expect("close");

        let db = open(&url, &opts(false)).expect("reopen");
        assert_eq!(db.read(t, "user4", None).0, Status::Ok);
        assert_eq!(db.read(t, "user3", None).0, Status::NotFound);
        db.finish().expect("close");
    }
}
