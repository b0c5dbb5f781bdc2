//! `cellar import-hbase --snapshot NAME --hbase-root DIR`: brings an HBase table in from one of
//! its snapshots, reading HBase's own files (`cellar_hfile::snapshot`): the table is created
//! with the snapshot's families and region boundaries, and each region's store files are
//! bulk loaded into the Cellar region with the same boundaries (`Admin::bulk_load`), never
//! through the write path. The root is a local directory or on HDFS (`hdfs://NAMENODE/DIR`,
//! read with Cellar's own HDFS client). This command reads the manifests and checks every
//! file; the servers then read the files themselves, so the root must be under their
//! `bulk_load.dirs` (a local root: on their machines too) (`docs/migration.md`).

use crate::tls_args::ClientTlsArgs;
use cellar_client::BulkLoadFile;
use cellar_hfile::snapshot::{Family, Files, LocalFiles, Snapshot};
use cellar_model::{BloomType, Compression, FamilySchema, TableSchema};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The snapshot to import (HBase's `snapshot 'TABLE', 'NAME'`).
    #[arg(long)]
    snapshot: String,
    /// HBase's root directory (its `hbase.rootdir`: a local path, a file:// URL, or an HDFS
    /// one, hdfs://HOST:PORT/DIR) holding `.hbase-snapshot/`, `data/` and `archive/`.
    #[arg(long, value_name = "DIR")]
    hbase_root: String,
    /// The server to import into: a standalone server's or a cluster's masters' native
    /// address(es), HOST:PORT[,HOST:PORT...].
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:16200")]
    connect: String,
    /// Create the table under this name instead of the snapshot's table's.
    #[arg(long)]
    table: Option<String>,
    /// The user to say you are to a server that takes your word (`security.simple_users`).
    #[arg(long)]
    user: Option<String>,
    #[command(flatten)]
    tls: ClientTlsArgs,
}

pub fn run(args: Args) -> Result<(), String> {
    let root = Root::parse(&args.hbase_root)?;
    let files = root.files()?;
    let snapshot = Snapshot::open_in(files.as_ref(), &root.path, &args.snapshot)?;
    let table = args.table.clone().unwrap_or_else(|| snapshot.table());
    let families = snapshot
        .families
        .iter()
        .map(|f| family_schema(&snapshot.table(), f))
        .collect::<Result<Vec<_>, String>>()?;
    let splits: Vec<bytes::Bytes> = snapshot
        .regions
        .iter()
        .filter(|r| !r.start_key.is_empty())
        .map(|r| bytes::Bytes::from(r.start_key.clone()))
        .collect();
    verify(&snapshot, files.as_ref(), &root)?;
    let client = crate::backup::connect(&args.connect, &args.tls, args.user)?;
    let admin = client.admin();
    if admin.table_exists(&table).map_err(|e| e.to_string())? {
        return Err(format!(
            "table '{table}' exists already; import under another name with --table NAME"
        ));
    }
    let mut schema = TableSchema::new(table.clone(), families);
    if let Some(max) = snapshot
        .table_attributes
        .get("MAX_FILESIZE")
        .and_then(|v| v.parse().ok())
    {
        schema.options.max_file_size = Some(max);
    }
    admin
        .create_table(schema, splits)
        .map_err(|e| format!("cannot create table '{table}': {e}"))?;
    let started = Instant::now();
    let n = snapshot.regions.len();
    // Regions load side by side (each load is atomic on its own); the first failure stops
    // the loads not yet started.
    let next = AtomicUsize::new(0);
    let totals = Mutex::new((0u64, 0u64, 0u64));
    let failed: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..workers(n) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(region) = snapshot.regions.get(i) else {
                    return;
                };
                if lock(&failed).is_some() {
                    return;
                }
                if region.files.is_empty() {
                    continue;
                }
                let load: Vec<BulkLoadFile> = region
                    .files
                    .iter()
                    .map(|f| BulkLoadFile {
                        family: f.family.clone(),
                        path: root.url(&f.path),
                        keep_from: f.keep_from.clone().into(),
                        keep_to: f.keep_to.clone().into(),
                    })
                    .collect();
                match admin.bulk_load(&table, &region.start_key, load) {
                    Ok(done) => {
                        let mut t = lock(&totals);
                        t.0 += done.files;
                        t.1 += done.cells;
                        t.2 += done.bytes_read;
                        eprintln!(
                            "region {}/{n} {}: {} files, {} cells, {:.1} MiB",
                            i + 1,
                            region.encoded_name,
                            done.files,
                            done.cells,
                            done.bytes_read as f64 / (1 << 20) as f64
                        );
                    }
                    Err(e) => {
                        let mut f = lock(&failed);
                        if f.is_none() {
                            *f = Some(format!(
                                "region {} of {n} ({}): {e}",
                                i + 1,
                                region.encoded_name
                            ));
                        }
                        return;
                    }
                }
            });
        }
    });
    if let Some(e) = lock(&failed).take() {
        return Err(e);
    }
    let (files, cells, bytes) = *lock(&totals);
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    println!(
        "imported snapshot '{}' of {} into table '{table}': {n} regions, {files} files, {cells} cells, {:.1} MiB of HFiles in {secs:.1} s ({:.1} MiB/s)",
        args.snapshot,
        snapshot.table(),
        bytes as f64 / (1 << 20) as f64,
        bytes as f64 / (1 << 20) as f64 / secs
    );
    Ok(())
}

/// Reads every file the snapshot names, whole, checking every block: a damaged file refuses the
/// import before anything is created. Files are read side by side, one per core.
fn verify(snapshot: &Snapshot, fs: &dyn Files, root: &Root) -> Result<(), String> {
    let files: Vec<&cellar_hfile::snapshot::StoreFile> =
        snapshot.regions.iter().flat_map(|r| &r.files).collect();
    let total = files.len();
    let started = Instant::now();
    let (next, done) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let failed: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..workers(total) {
            scope.spawn(|| loop {
                let Some(f) = files.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return;
                };
                if lock(&failed).is_some() {
                    return;
                }
                let checked = open_hfile(fs, &f.path, root).and_then(|file| {
                    file.cells().try_for_each(|c| {
                        let c = c.map_err(|e| e.to_string())?;
                        if c.is_mob_reference() {
                            return Err(format!(
                                "{}: a MOB reference cell (row '{}'): {}",
                                root.url(&f.path),
                                c.row.escape_ascii(),
                                mob_advice(&snapshot.table(), &f.family)
                            ));
                        }
                        Ok(())
                    })
                });
                if let Err(e) = checked {
                    lock(&failed).get_or_insert(e);
                    return;
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if started.elapsed().as_secs() >= 2 {
                    eprint!("\rchecked {n}/{total} files");
                }
            });
        }
    });
    if let Some(e) = lock(&failed).take() {
        return Err(e);
    }
    eprintln!(
        "checked {total} HBase files of snapshot '{}': every block reads",
        snapshot.name
    );
    Ok(())
}

/// Opens an HFile the snapshot names on `fs`.
fn open_hfile(fs: &dyn Files, path: &Path, root: &Root) -> Result<cellar_hfile::HFile, String> {
    let name = PathBuf::from(root.url(path));
    let (source, size) = fs
        .open(path)?
        .ok_or_else(|| format!("{}: missing (it was there a moment ago)", name.display()))?;
    cellar_hfile::HFile::from_source(name, source, size).map_err(|e| e.to_string())
}

/// Where the HBase root is: a local directory, or a directory on HDFS.
struct Root {
    /// `hdfs://HOST:PORT` for a root on HDFS.
    namenode: Option<String>,
    /// The directory (on local disk, links resolved; or on HDFS).
    path: PathBuf,
}

impl Root {
    fn parse(given: &str) -> Result<Root, String> {
        if let Some(rest) = given.strip_prefix("hdfs://") {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            if authority.is_empty() {
                return Err(format!(
                    "--hbase-root {given}: name the NameNode, hdfs://HOST:PORT/DIR"
                ));
            }
            return Ok(Root {
                namenode: Some(format!("hdfs://{authority}")),
                path: PathBuf::from(if path.is_empty() { "/" } else { path }),
            });
        }
        if given.contains("://") && !given.starts_with("file://") {
            return Err(format!(
                "--hbase-root {given}: a local directory, a file:// URL or an hdfs:// URL is \
                 read; copy the snapshot to one of them first (HBase's ExportSnapshot)"
            ));
        }
        let local = Path::new(given.strip_prefix("file://").unwrap_or(given));
        let path = std::fs::canonicalize(local).map_err(|e| format!("{}: {e}", local.display()))?;
        Ok(Root {
            namenode: None,
            path,
        })
    }

    fn files(&self) -> Result<Box<dyn Files>, String> {
        match &self.namenode {
            None => Ok(Box::new(LocalFiles)),
            Some(url) => {
                let fs = cellar_storage::fs::HdfsFs::shared(url)
                    .map_err(|e| format!("--hbase-root: {e}"))?;
                Ok(Box::new(cellar_server::bulk_files::FsFiles(fs)))
            }
        }
    }

    /// How a server is told where `path` is.
    fn url(&self, path: &Path) -> String {
        match &self.namenode {
            None => path.to_string_lossy().into_owned(),
            Some(url) => format!("{url}{}", path.display()),
        }
    }
}

/// Threads for `tasks` independent tasks: one per core, at most 8, at most one per task.
fn workers(tasks: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    cores.clamp(1, 8).min(tasks).max(1)
}

/// A mutex's value; a thread that panicked holding it left nothing half-done that matters
/// here (counters and the first error).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What to do about a MOB family: HBase's own way of moving its values back into the store
/// files, after which the import reads them.
fn mob_advice(table: &str, family: &str) -> String {
    format!(
        "family '{family}' keeps its large values in HBase's MOB files, which Cellar does not \
         import. Move them into the store files on HBase first (HBase's steps for leaving MOB): \
         alter '{table}', {{NAME => '{family}', MOB_THRESHOLD => '2147483647'}}; \
         major_compact '{table}'; once it is done, alter '{table}', {{NAME => '{family}', \
         IS_MOB => false}}; then take the snapshot again (docs/migration.md)"
    )
}

/// A Cellar family with the settings HBase gave it (HBase's defaults where it stored none).
fn family_schema(table: &str, f: &Family) -> Result<FamilySchema, String> {
    let mut s = FamilySchema::new(f.name.clone());
    let bad = |key: &str, v: &str| format!("family '{}': {key} => '{v}' is not understood", f.name);
    for (key, v) in &f.attributes {
        match key.as_str() {
            "VERSIONS" => s.max_versions = v.parse().map_err(|_| bad(key, v))?,
            "MIN_VERSIONS" => s.min_versions = v.parse().map_err(|_| bad(key, v))?,
            "TTL" => {
                let secs: u64 = v.parse().map_err(|_| bad(key, v))?;
                // HBase's FOREVER is Integer.MAX_VALUE seconds.
                s.ttl_secs = (secs < i32::MAX as u64).then_some(secs);
            }
            "IS_MOB" if v.eq_ignore_ascii_case("true") => return Err(mob_advice(table, &f.name)),
            "KEEP_DELETED_CELLS" => s.keep_deleted_cells = v.eq_ignore_ascii_case("TRUE"),
            "IN_MEMORY" => s.in_memory = v.eq_ignore_ascii_case("true"),
            "BLOCKSIZE" => s.block_size = v.parse().map_err(|_| bad(key, v))?,
            "BLOOMFILTER" => {
                s.bloom = match v.to_ascii_uppercase().as_str() {
                    "NONE" => BloomType::None,
                    "ROWCOL" => BloomType::RowCol,
                    _ => BloomType::Row,
                }
            }
            "COMPRESSION" => {
                // Cellar writes LZ4, ZSTD and SNAPPY; HBase's GZ and others become ZSTD, the
                // closest in ratio.
                s.compression = match v.to_ascii_uppercase().as_str() {
                    "NONE" => Compression::None,
                    "SNAPPY" => Compression::Snappy,
                    "LZ4" => Compression::Lz4,
                    _ => Compression::Zstd,
                }
            }
            _ => {}
        }
    }
    Ok(s)
}
