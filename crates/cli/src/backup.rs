//! `cellar export` and `cellar import`: a table to one file and back, through the client, so
//! they work the same against a standalone server and a cluster, while it serves (HBase's
//! Export and Import tools, without MapReduce). The file: `backup/format.rs`,
//! `docs/export-format.md`.
//!
//! An export is a scan: each row is read whole and consistent, the table as a whole is not a
//! point-in-time snapshot (writes during the export may or may not be in it), as with HBase's
//! Export. It is written to `FILE.partial`, synced and renamed, so `FILE` exists only whole.

pub mod format;

use crate::tls_args::ClientTlsArgs;
use cellar_client::blocking::Client;
use cellar_model::{CellType, RowMutation, Scan};
use format::{ExportReader, ExportWriter, Header};
use std::io::{BufReader, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct ExportArgs {
    /// The server to read from: a standalone server's or a cluster's masters' native
    /// address(es), HOST:PORT[,HOST:PORT...].
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:16200")]
    connect: String,
    /// The table to export (`namespace:table` for another namespace than default).
    #[arg(long)]
    table: String,
    /// The file to write; it must not exist yet.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Versions per column to export [default: every version the table keeps].
    #[arg(long)]
    versions: Option<u32>,
    /// The user to say you are to a server that takes your word (`security.simple_users`).
    #[arg(long)]
    user: Option<String>,
    #[command(flatten)]
    tls: ClientTlsArgs,
}

#[derive(clap::Args)]
pub struct ImportArgs {
    /// The server to write to: a standalone server's or a cluster's masters' native
    /// address(es), HOST:PORT[,HOST:PORT...].
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:16200")]
    connect: String,
    /// The export file (`cellar export --out`).
    #[arg(long = "in", value_name = "FILE")]
    input: PathBuf,
    /// Import under this name instead of the exported table's.
    #[arg(long)]
    table: Option<String>,
    /// Write into a table that already exists (its families must include the export's);
    /// without it the table is created with the export's schema and region boundaries.
    #[arg(long)]
    into_existing: bool,
    /// The user to say you are to a server that takes your word (`security.simple_users`).
    #[arg(long)]
    user: Option<String>,
    #[command(flatten)]
    tls: ClientTlsArgs,
}

pub(crate) fn connect(
    addr: &str,
    tls: &ClientTlsArgs,
    user: Option<String>,
) -> Result<Client, String> {
    let config = cellar_client::ClientConfig {
        tls: tls.config()?,
        user: user
            .or_else(|| std::env::var("USER").ok())
            .filter(|u| !u.is_empty()),
        ..cellar_client::ClientConfig::default()
    };
    Client::connect_with(addr, config).map_err(|e| format!("cannot connect to {addr}: {e}"))
}

/// Progress on standard error: rewritten in place on a terminal, a line every 10 s otherwise.
struct Progress {
    verb: &'static str,
    started: Instant,
    last: Instant,
    terminal: bool,
}

impl Progress {
    fn new(verb: &'static str) -> Progress {
        let now = Instant::now();
        Progress {
            verb,
            started: now,
            last: now,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn tick(&mut self, rows: u64, cells: u64, bytes: u64) {
        let every = if self.terminal {
            Duration::from_millis(250)
        } else {
            Duration::from_secs(10)
        };
        if self.last.elapsed() < every {
            return;
        }
        self.last = Instant::now();
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let line = format!(
            "{} {rows} rows, {cells} cells, {:.1} MiB ({:.0} cells/s)",
            self.verb,
            bytes as f64 / (1 << 20) as f64,
            cells as f64 / secs
        );
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r{line}\x1b[K");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    fn done(&self) {
        if self.terminal {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}

fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

pub fn export(args: ExportArgs) -> Result<(), String> {
    if args.out.exists() {
        return Err(format!(
            "{} already exists; remove it or export to another file",
            args.out.display()
        ));
    }
    let client = connect(&args.connect, &args.tls, args.user)?;
    let admin = client.admin();
    let info = admin
        .describe_table(&args.table)
        .map_err(|e| format!("cannot read table '{}': {e}", args.table))?;
    let mut regions = admin
        .list_regions(&args.table)
        .map_err(|e| format!("cannot list the regions of '{}': {e}", args.table))?;
    regions.sort_by(|a, b| a.start_key.cmp(&b.start_key));
    let header = Header {
        split_keys: regions
            .iter()
            .filter(|r| !r.start_key.is_empty())
            .map(|r| r.start_key.clone())
            .collect(),
        schema: info.schema,
    };
    let versions = args.versions.unwrap_or_else(|| {
        header
            .schema
            .families
            .iter()
            .map(|f| f.max_versions)
            .max()
            .unwrap_or(1)
    });
    let partial = partial_path(&args.out);
    let file = std::fs::File::create(&partial)
        .map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    let result = (|| {
        let mut w = ExportWriter::new(BufWriter::with_capacity(1 << 20, &file), &header)
            .map_err(|e| format!("cannot write {}: {e}", partial.display()))?;
        let mut progress = Progress::new("exported");
        let scan = Scan::new().versions(versions.max(1)).caching(1000);
        for row in client.table(&args.table).scan(scan) {
            let row = row.map_err(|e| format!("the scan of '{}' failed: {e}", args.table))?;
            for c in &row.cells {
                w.cell(c)
                    .map_err(|e| format!("cannot write {}: {e}", partial.display()))?;
            }
            let t = w.totals();
            progress.tick(t.rows, t.cells, w.bytes());
        }
        progress.done();
        let (out, totals, bytes) = w
            .finish()
            .map_err(|e| format!("cannot write {}: {e}", partial.display()))?;
        drop(out);
        file.sync_all()
            .map_err(|e| format!("cannot sync {}: {e}", partial.display()))?;
        Ok((totals, bytes))
    })();
    let (totals, bytes) = match result {
        Ok(t) => t,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, &args.out).map_err(|e| {
        format!(
            "cannot rename {} to {}: {e}",
            partial.display(),
            args.out.display()
        )
    })?;
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    println!(
        "exported table {}: {} rows, {} cells, {} regions, {bytes} bytes to {}",
        args.table,
        totals.rows,
        totals.cells,
        header.split_keys.len() + 1,
        args.out.display()
    );
    Ok(())
}

/// Puts sent per call.
const BATCH_ROWS: usize = 500;
const BATCH_BYTES: usize = 4 << 20;

fn open_export(path: &Path) -> Result<ExportReader<BufReader<std::fs::File>>, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    ExportReader::open(BufReader::with_capacity(1 << 20, file))
        .map_err(|e| format!("{}: {e}", path.display()))
}

pub fn import(args: ImportArgs) -> Result<(), String> {
    // The whole file is checked before anything is written: a damaged or cut export is
    // refused without leaving half a table behind.
    let mut check = open_export(&args.input)?;
    let mut progress = Progress::new("checked");
    while check
        .next_block()
        .map_err(|e| format!("{}: {e} (nothing was imported)", args.input.display()))?
        .is_some()
    {
        let t = check.totals();
        progress.tick(t.rows, t.cells, check.offset());
    }
    progress.done();
    drop(check);
    let mut reader = open_export(&args.input)?;
    let mut schema = reader.header().schema.clone();
    let split_keys = reader.header().split_keys.clone();
    if let Some(name) = &args.table {
        schema.name = name.clone();
    }
    let table = schema.name.clone();
    let client = connect(&args.connect, &args.tls, args.user)?;
    let admin = client.admin();
    let exists = admin
        .table_exists(&table)
        .map_err(|e| format!("cannot ask whether table '{table}' exists: {e}"))?;
    // The export's options, READONLY included (the table is created writable first).
    let schema_options = schema.options;
    let was_read_only = schema_options.read_only;
    match (exists, args.into_existing) {
        (true, false) => {
            return Err(format!(
                "table '{table}' already exists; import under another name (--table NAME), or \
                 into it with --into-existing"
            ))
        }
        (false, true) => {
            return Err(format!(
                "table '{table}' does not exist (--into-existing writes into a table that does)"
            ))
        }
        (false, false) => {
            // A read-only table is written first and made read-only after its cells.
            schema.options.read_only = false;
            admin
                .create_table(schema, split_keys)
                .map_err(|e| format!("cannot create table '{table}': {e}"))?;
        }
        (true, true) => {}
    }
    let t = client.table(&table);
    let mut progress = Progress::new("imported");
    let mut batch: Vec<RowMutation> = Vec::new();
    let mut batch_bytes = 0usize;
    let mut current: Option<RowMutation> = None;
    let (mut rows, mut cells) = (0u64, 0u64);
    let send = |batch: &mut Vec<RowMutation>| -> Result<(), String> {
        if batch.is_empty() {
            return Ok(());
        }
        t.put_all(std::mem::take(batch))
            .map_err(|e| format!("writing to '{table}' failed: {e}"))
    };
    while let Some(block) = reader
        .next_block()
        .map_err(|e| format!("{}: {e}", args.input.display()))?
    {
        for c in block {
            if c.cell_type != CellType::Put {
                return Err(format!(
                    "{}: a cell of type {:?} in an export (exports hold puts only)",
                    args.input.display(),
                    c.cell_type
                ));
            }
            if current.as_ref().is_some_and(|m| m.row != c.row) {
                if let Some(m) = current.take() {
                    batch.push(m);
                    rows += 1;
                }
                if batch.len() >= BATCH_ROWS || batch_bytes >= BATCH_BYTES {
                    send(&mut batch)?;
                    batch_bytes = 0;
                }
            }
            batch_bytes += c.row.len() + c.family.len() + c.qualifier.len() + c.value.len() + 16;
            cells += 1;
            let m = current
                .take()
                .unwrap_or_else(|| RowMutation::new(c.row.clone()));
            current = Some(m.put(&c.family, &c.qualifier, c.timestamp, c.value));
        }
        progress.tick(rows, cells, reader.offset());
    }
    if let Some(m) = current.take() {
        batch.push(m);
        rows += 1;
    }
    send(&mut batch)?;
    progress.done();
    if was_read_only && !args.into_existing {
        admin
            .alter_table_with(&table, Vec::new(), Vec::new(), Some(schema_options))
            .map_err(|e| {
                format!("the cells are in '{table}' but it could not be made READONLY again: {e}")
            })?;
    }
    let totals = reader.totals();
    println!(
        "imported {} rows, {} cells into table {table} from {}",
        totals.rows,
        totals.cells,
        args.input.display(),
    );
    debug_assert_eq!(totals.rows, rows);
    Ok(())
}
