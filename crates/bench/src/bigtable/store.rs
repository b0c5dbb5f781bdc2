//! Where the Bigtable suite reads and writes: a Cellar server through the client, or a
//! [`Region`] in this process. One table per value size (and one IN_MEMORY table for the
//! read-from-memory test), one family `f`, one column `f:v` per row.

use cellar_client::blocking;
use cellar_model::{FamilySchema, Get, RowMutation, Scan, TableSchema, LATEST_TIMESTAMP};
use cellar_storage::region::Region;
use std::path::{Path, PathBuf};

pub const FAMILY: &[u8] = b"f";
pub const QUALIFIER: &[u8] = b"v";

/// What `--db` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `cellar://HOST:PORT`.
    Server(String),
    /// `embedded:DIR`: regions under DIR, one directory per table.
    Embedded(PathBuf),
}

impl Target {
    pub fn parse(db: &str) -> Result<Target, String> {
        if let Some(addr) = db.strip_prefix("cellar://").filter(|a| !a.is_empty()) {
            return Ok(Target::Server(addr.to_string()));
        }
        if let Some(dir) = db.strip_prefix("embedded:").filter(|d| !d.is_empty()) {
            return Ok(Target::Embedded(PathBuf::from(dir)));
        }
        Err(format!(
            "--db {db:?}: expected cellar://HOST:PORT or embedded:DIR"
        ))
    }

    /// A fresh, empty table `name` (dropped first if a previous run left it).
    pub fn fresh_table(&self, name: &str, in_memory: bool) -> Result<Store, String> {
        let mut family = FamilySchema::new("f");
        family.in_memory = in_memory;
        let schema = TableSchema::new(name, vec![family]);
        match self {
            Target::Server(addr) => {
                let client = blocking::Client::connect(addr)
                    .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
                let admin = client.admin();
                let exists = admin
                    .table_exists(name)
                    .map_err(|e| format!("table {name}: {e}"))?;
                if exists {
                    admin
                        .disable_table(name)
                        .and_then(|_| admin.delete_table(name))
                        .map_err(|e| format!("cannot drop the old table {name}: {e}"))?;
                }
                admin
                    .create_table(schema, Vec::new())
                    .map_err(|e| format!("cannot create table {name}: {e}"))?;
                Ok(Store::Server {
                    table: client.table(name),
                    client,
                })
            }
            Target::Embedded(dir) => {
                let dir = dir.join(name);
                remove_old(&dir)?;
                let region = Region::open(&dir, schema)
                    .map_err(|e| format!("cannot open region {}: {e}", dir.display()))?;
                Ok(Store::Embedded(region))
            }
        }
    }
}

fn remove_old(dir: &Path) -> Result<(), String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| format!("cannot remove the old table {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// One benchmark table.
pub enum Store {
    Server {
        client: blocking::Client,
        table: blocking::Table,
    },
    Embedded(Region),
}

impl Store {
    pub fn put(&self, row: &[u8], value: &[u8]) -> Result<(), String> {
        let m =
            RowMutation::new(row.to_vec()).put(FAMILY, QUALIFIER, LATEST_TIMESTAMP, value.to_vec());
        match self {
            Store::Server { table, .. } => table.put(m).map_err(|e| e.to_string()),
            Store::Embedded(r) => r.mutate(&m).map_err(|e| e.to_string()),
        }
        .map_err(|e| format!("put of row {}: {e}", String::from_utf8_lossy(row)))
    }

    /// The value's length; an error when the row is missing.
    pub fn get(&self, row: &[u8]) -> Result<usize, String> {
        let get = Get::new(row.to_vec()).column(FAMILY, QUALIFIER);
        let len = match self {
            Store::Server { table, .. } => table
                .get(get)
                .map_err(|e| e.to_string())?
                .value(FAMILY, QUALIFIER)
                .map(|v| v.len()),
            Store::Embedded(r) => r
                .get(&get)
                .map_err(|e| e.to_string())?
                .first()
                .map(|c| c.value.len()),
        };
        len.ok_or_else(|| format!("row {} is missing", String::from_utf8_lossy(row)))
    }

    /// Scans the whole table fetching `caching` rows per call; (rows, value bytes).
    pub fn scan_all(&self, caching: u32) -> Result<(u64, u64), String> {
        let mut scan = Scan::new().column(FAMILY, QUALIFIER);
        scan.caching = caching;
        let (mut rows, mut bytes) = (0u64, 0u64);
        match self {
            Store::Server { table, .. } => {
                let mut scanner = table.scan(scan);
                while let Some(row) = scanner.next_row().map_err(|e| format!("scan: {e}"))? {
                    rows += 1;
                    bytes += row.value(FAMILY, QUALIFIER).map_or(0, |v| v.len() as u64);
                }
            }
            Store::Embedded(r) => {
                for cells in r.scan(&scan).map_err(|e| format!("scan: {e}"))? {
                    let cells = cells.map_err(|e| format!("scan: {e}"))?;
                    rows += 1;
                    bytes += cells.iter().map(|c| c.value.len() as u64).sum::<u64>();
                }
            }
        }
        Ok((rows, bytes))
    }

    /// Writes the memstore out so reads come from store files (and the block cache).
    pub fn flush(&self) -> Result<(), String> {
        match self {
            Store::Server { client, table } => client
                .admin()
                .flush(table.name())
                .map_err(|e| e.to_string()),
            Store::Embedded(r) => r.flush().map_err(|e| e.to_string()),
        }
        .map_err(|e| format!("flush: {e}"))
    }
}
