//! `cellar bench breakdown`: where the time of one Get and one Put goes, stage by stage
//! (client serialization, send preparation, wire out, server queue wait, server processing,
//! server serialization, wire back, client processing), averaged over many calls, in the
//! manner of seed 000's Figure 7. The stages come from `Table::get_with_timing` and
//! `Table::put_with_timing`, which ask the server for its share of each call.

mod stages;

use cellar_client::{
    CallTiming, Client, FamilySchema, Get, RowMutation, TableSchema, LATEST_TIMESTAMP,
};
use stages::StageMeans;
use std::path::PathBuf;

/// The column family the benchmark table holds.
const FAMILY: &str = "f";

/// Command-line options of `cellar bench breakdown`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server: cellar://HOST:PORT (TCP) or cellar+ucx://HOST:PORT (UCX: shared memory,
    /// RDMA, or UCX's TCP, as UCX_TLS allows).
    #[arg(long, default_value = "cellar://127.0.0.1:16200")]
    pub db: String,
    /// Timed calls of each kind (Get and Put).
    #[arg(long, default_value_t = 10_000)]
    pub ops: u64,
    /// Bytes of each value put and read back.
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
    /// The table used (created when missing).
    #[arg(long, default_value = "bench_breakdown")]
    pub table: String,
    /// Also write the result as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), String> {
    let (addr, transport) = server_address(&args.db)?;
    if args.ops == 0 {
        return Err("--ops must be at least 1".into());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let (get, put) = runtime.block_on(measure(&addr, transport, &args))?;
    print!("{}", stages::table(args.ops, args.value_size, &get, &put));
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "tool": "cellar-bench",
            "kind": "breakdown",
            "db": args.db,
            "value_size": args.value_size,
            "ops": args.ops,
            "stages": { "get": get.to_json(), "put": put.to_json() },
        });
        let text = serde_json::to_string_pretty(&doc)
            .map_err(|e| format!("cannot encode the JSON result: {e}"))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// HOST:PORT and transport of a `cellar://` or `cellar+ucx://` address; the breakdown needs
/// a server.
fn server_address(db: &str) -> Result<(String, cellar_client::Transport), String> {
    cellar_client::parse_url(db).ok_or_else(|| {
        format!(
            "--db {db:?}: the breakdown measures a server's RPC path and needs cellar://HOST:PORT or cellar+ucx://HOST:PORT"
        )
    })
}

fn row_key(i: u64) -> String {
    format!("{i:016}")
}

/// Warms up (untimed puts of every row, which also opens the connection and caches the
/// region), then times `ops` puts and `ops` gets of those rows.
async fn measure(
    addr: &str,
    transport: cellar_client::Transport,
    args: &Args,
) -> Result<(StageMeans, StageMeans), String> {
    let config = cellar_client::ClientConfig {
        transport,
        ..cellar_client::ClientConfig::default()
    };
    let client = Client::connect_with(addr, config)
        .await
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let admin = client.admin();
    let exists = admin
        .table_exists(&args.table)
        .await
        .map_err(|e| format!("cannot look up table {}: {e}", args.table))?;
    if !exists {
        let schema = TableSchema::new(args.table.clone(), vec![FamilySchema::new(FAMILY)]);
        admin
            .create_table(schema, Vec::new())
            .await
            .map_err(|e| format!("cannot create table {}: {e}", args.table))?;
    }
    let table = client.table(&args.table);
    let value = vec![b'v'; args.value_size];
    let mutation = |i: u64| {
        RowMutation::new(row_key(i)).put(FAMILY.as_bytes(), b"q", LATEST_TIMESTAMP, value.clone())
    };
    let warmup = args.ops.min(1000);
    for i in 0..warmup {
        table
            .put(mutation(i))
            .await
            .map_err(|e| format!("warm-up put of row {}: {e}", row_key(i)))?;
    }
    let mut put = StageMeans::default();
    for i in 0..args.ops {
        let t: CallTiming = table
            .put_with_timing(mutation(i))
            .await
            .map_err(|e| format!("timed put of row {}: {e}", row_key(i)))?;
        put.add(&t);
    }
    let mut get = StageMeans::default();
    for i in 0..args.ops {
        let (row, t) = table
            .get_with_timing(Get::new(row_key(i)))
            .await
            .map_err(|e| format!("timed get of row {}: {e}", row_key(i)))?;
        if row.value(FAMILY.as_bytes(), b"q").map(|v| v.len()) != Some(args.value_size) {
            return Err(format!(
                "get of row {} did not return the {}-byte value just put",
                row_key(i),
                args.value_size
            ));
        }
        get.add(&t);
    }
    Ok((get, put))
}
