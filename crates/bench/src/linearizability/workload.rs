//! The register workload: concurrent clients run random puts, gets, check-and-mutates and
//! increments on a few rows of a Cellar server and record every operation with its times
//! and outcome, ready for the checker.
//!
//! Each client has its own connection, a short call timeout and no retries, so that one
//! call is one attempt and its outcome can be told: answered (`ok`), refused before it was
//! sent or by a server that did not run it (`fail`), or anything else — a timeout, a
//! connection that broke after sending, a killed server — (`unknown`). Clients reconnect on
//! their own when the server is back.
//!
//! Registers are rows `RUN/rSLOT/GENERATION` (`cSLOT` for counters, see [`Mix`]): `keys`
//! slots are in use at a time, and a slot moves to a fresh row after `ops_per_key`
//! operations that were not refused, or `unknown_per_key` writes of unknown outcome. That
//! keeps each register's history small enough to check exactly while still spanning server
//! restarts. `RUN` is random per run, so a table can be reused.
//!
//! After a call that did not succeed, a client pings the server until it answers before
//! its next call: calls made while the server is still starting would only time out, and
//! each such write would be one more unknown for the checker to place.

use super::history::{write_op, Call, Op, Outcome, Ret};
use bytes::Bytes;
use cellar_client::{
    Client, ClientConfig, CompareOp, Condition, Error, ErrorCode, FamilySchema, Get, RowMutation,
    Table, TableSchema, LATEST_TIMESTAMP,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The column family of the register table.
pub const FAMILY: &[u8] = b"f";
/// The column holding a register's value (8 bytes, big-endian i64).
pub const QUALIFIER: &[u8] = b"v";

/// Which calls go to which registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    /// Every register gets all four kinds of call.
    Mixed,
    /// Increments go to registers of their own (counters: increments and gets); the others
    /// get puts, gets and check-and-mutates. An increment stamps its cell past the previous
    /// cell's timestamp while a put takes the clock's, so on one column a put acknowledged
    /// right after increments can be hidden behind them (`docs/reliability.md`, Chaos).
    Separate,
}

/// What the workload is asked to do.
#[derive(Debug, Clone)]
pub struct Settings {
    pub mix: Mix,
    /// HOST:PORT of the native endpoint.
    pub addr: String,
    pub table: String,
    pub clients: u32,
    pub keys: u32,
    pub ops_per_key: u64,
    /// Unknown writes on one row before its slot moves to a fresh row: each one the checker
    /// may have to place anywhere after its call, so they are what makes a search long.
    pub unknown_per_key: u64,
    pub duration: Duration,
    /// Operations per second over all clients; 0: as fast as they go.
    pub rate: u64,
    pub rpc_timeout: Duration,
    /// Where to stream the history (JSON lines) as it is made.
    pub history: Option<PathBuf>,
    pub seed: u64,
    /// A status line this often.
    pub status_interval: Duration,
}

/// What the clients did.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub ok: u64,
    pub fail: u64,
    pub unknown: u64,
    /// Per call kind (put, get, cas, incr): ok, fail, unknown.
    pub by_kind: [[u64; 3]; 4],
    /// Check-and-mutates answered "written".
    pub cas_applied: u64,
    /// Gets that returned something other than an 8-byte value (never written by anyone).
    pub malformed: u64,
    /// Distinct registers used.
    pub registers: u64,
}

/// The kinds in [`Tally::by_kind`]'s order.
pub const KINDS: [&str; 4] = ["put", "get", "cas", "incr"];

fn kind_index(call: &Call) -> usize {
    match call {
        Call::Put { .. } => 0,
        Call::Get => 1,
        Call::Cas { .. } => 2,
        Call::Incr { .. } => 3,
    }
}

impl Tally {
    fn add(&mut self, op: &Op) {
        let col = match op.outcome {
            Outcome::Ok => {
                self.ok += 1;
                0
            }
            Outcome::Fail => {
                self.fail += 1;
                1
            }
            Outcome::Unknown => {
                self.unknown += 1;
                2
            }
        };
        if let Some(row) = self.by_kind.get_mut(kind_index(&op.call)) {
            row[col] += 1;
        }
        if op.ret == Some(Ret::Applied(true)) {
            self.cas_applied += 1;
        }
    }

    pub fn total(&self) -> u64 {
        self.ok + self.fail + self.unknown
    }
}

/// One slot's current row and how used it is.
#[derive(Debug, Default)]
struct Slot {
    generation: u64,
    /// Operations on the current row that were not refused.
    ops: u64,
    unknown_writes: u64,
}

/// Shared by the clients.
struct Shared {
    settings: Settings,
    started: Instant,
    deadline: Instant,
    run: u32,
    slots: Vec<Mutex<Slot>>,
    history: Mutex<(Vec<Op>, Tally)>,
    out: Option<Mutex<std::io::BufWriter<std::fs::File>>>,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn record(&self, op: Op) -> Result<(), String> {
        if let Some(out) = &self.out {
            let mut w = out.lock().map_err(|_| "history writer poisoned")?;
            write_op(&mut *w, &op).map_err(|e| format!("cannot write the history: {e}"))?;
        }
        let mut h = self.history.lock().map_err(|_| "history poisoned")?;
        h.1.add(&op);
        h.0.push(op);
        Ok(())
    }
}

/// Runs the workload for `settings.duration`; returns the history (in completion order)
/// and the tally. Waits for the server (and creates the table) as long as the run lasts.
pub async fn run(settings: Settings) -> Result<(Vec<Op>, Tally), String> {
    if settings.clients == 0
        || settings.keys == 0
        || settings.ops_per_key == 0
        || settings.unknown_per_key == 0
    {
        return Err(
            "--clients, --keys, --ops-per-key and --unknown-per-key must be at least 1".into(),
        );
    }
    let out = match &settings.history {
        Some(p) => Some(Mutex::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))?,
        ))),
        None => None,
    };
    let started = Instant::now();
    let shared = Arc::new(Shared {
        deadline: started + settings.duration,
        started,
        run: rand::random(),
        slots: (0..settings.keys)
            .map(|_| Mutex::new(Slot::default()))
            .collect(),
        history: Mutex::new((Vec::new(), Tally::default())),
        out,
        settings,
    });
    ensure_table(&shared).await?;
    let status = tokio::spawn(report_status(shared.clone()));
    let mut tasks = Vec::new();
    for id in 0..shared.settings.clients {
        tasks.push(tokio::spawn(client_loop(id, shared.clone())));
    }
    let mut first_error = None;
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(format!("a client task failed: {e}"));
            }
        }
    }
    status.abort();
    if let Some(out) = &shared.out {
        let mut w = out.lock().map_err(|_| "history writer poisoned")?;
        w.flush()
            .map_err(|e| format!("cannot write the history: {e}"))?;
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let mut h = shared.history.lock().map_err(|_| "history poisoned")?;
    let (ops, mut tally) = std::mem::take(&mut *h);
    tally.registers = {
        let mut keys: Vec<&str> = ops.iter().map(|o| o.key.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        keys.len() as u64
    };
    Ok((ops, tally))
}

fn config(s: &Settings) -> ClientConfig {
    ClientConfig {
        rpc_timeout: s.rpc_timeout,
        retries: 0,
        retry_backoff: Duration::from_millis(10),
        ..ClientConfig::default()
    }
}

/// Creates the register table unless it exists, waiting for the server up to the deadline.
async fn ensure_table(shared: &Shared) -> Result<(), String> {
    let s = &shared.settings;
    let mut last = String::new();
    while Instant::now() < shared.deadline {
        match try_ensure_table(s).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "cannot prepare table '{}' on cellar://{} before the run ended: {last}",
        s.table, s.addr
    ))
}

async fn try_ensure_table(s: &Settings) -> Result<(), String> {
    let client = Client::connect_with(&s.addr, config(s))
        .await
        .map_err(|e| e.to_string())?;
    let admin = client.admin();
    if admin
        .table_exists(&s.table)
        .await
        .map_err(|e| e.to_string())?
    {
        return Ok(());
    }
    let schema = TableSchema::new(
        s.table.clone(),
        vec![FamilySchema::new(
            String::from_utf8_lossy(FAMILY).into_owned(),
        )],
    );
    match admin.create_table(schema, Vec::new()).await {
        Ok(()) => Ok(()),
        // Created by someone else meanwhile, or by us before the answer was lost.
        Err(e) => match admin.table_exists(&s.table).await {
            Ok(true) => Ok(()),
            _ => Err(e.to_string()),
        },
    }
}

async fn report_status(shared: Arc<Shared>) {
    let every = shared.settings.status_interval;
    loop {
        tokio::time::sleep(every).await;
        let t = match shared.history.lock() {
            Ok(h) => h.1.clone(),
            Err(_) => return,
        };
        eprintln!(
            "linearizability: {:.0} s: {} operations: {} ok, {} fail, {} unknown",
            shared.started.elapsed().as_secs_f64(),
            t.total(),
            t.ok,
            t.fail,
            t.unknown
        );
    }
}

/// One client: one call at a time until the deadline.
async fn client_loop(id: u32, shared: Arc<Shared>) -> Result<(), String> {
    let s = &shared.settings;
    let mut rng = SmallRng::seed_from_u64(s.seed ^ (u64::from(id) << 32) ^ 0x9e37_79b9);
    let mut client: Option<Client> = None;
    let mut suspect = false;
    let mut seq: u64 = 0;
    // The last value this client saw in each register: check-and-mutate expects it.
    let mut seen: HashMap<String, Option<i64>> = HashMap::new();
    let pace = if s.rate == 0 {
        Duration::ZERO
    } else {
        Duration::from_secs_f64(f64::from(s.clients) / s.rate as f64)
    };
    // A call gives up after its own timeouts (locate + call); this only guards against hangs.
    let guard = s.rpc_timeout * 3 + Duration::from_secs(1);
    while Instant::now() < shared.deadline {
        let began = Instant::now();
        let c = match &client {
            Some(c) => c.clone(),
            None => match Client::connect_with(&s.addr, config(s)).await {
                Ok(c) => {
                    client = Some(c.clone());
                    c
                }
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        if suspect {
            // The last call went wrong: wait until the server answers a ping before making
            // the next one, so that calls are not spent (as unknowns) on a server that is
            // still starting.
            match tokio::time::timeout(guard, c.ping()).await {
                Ok(Ok(_)) => {}
                _ => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            }
        }
        let table = c.table(&s.table);
        let slot = rng.gen_range(0..s.keys);
        let Some(slot_state) = shared.slots.get(slot as usize) else {
            return Err(format!("slot {slot} out of range"));
        };
        let generation = slot_state.lock().map_err(|_| "slot poisoned")?.generation;
        let counter = s.mix == Mix::Separate && slot % 2 == 1;
        let kind = if counter { 'c' } else { 'r' };
        let key = format!("{:08x}/{kind}{slot}/{generation}", shared.run);
        seq += 1;
        let fresh = ((i64::from(id) + 1) << 40) | (seq as i64 & 0xff_ffff_ffff);
        let call = match (s.mix, counter) {
            (Mix::Mixed, _) => choose(&mut rng, fresh, seen.get(&key).copied()),
            (Mix::Separate, true) => choose_counter(&mut rng),
            (Mix::Separate, false) => choose_value(&mut rng, fresh, seen.get(&key).copied()),
        };
        let invoke_ns = shared.now_ns();
        let answer = match tokio::time::timeout(guard, perform(&table, &key, call)).await {
            Ok(a) => a,
            Err(_) => Err(Failure::Unknown(format!("no answer within {guard:?}"))),
        };
        let end_ns = shared.now_ns().max(invoke_ns);
        let (outcome, ret, error, malformed) = match answer {
            Ok(ret) => (Outcome::Ok, Some(ret), None, false),
            Err(Failure::Refused(e)) => (Outcome::Fail, None, Some(e), false),
            Err(Failure::Unknown(e)) => (Outcome::Unknown, None, Some(e), false),
            Err(Failure::Malformed(e)) => (Outcome::Unknown, None, Some(e), true),
        };
        match (call, ret) {
            (Call::Put { value }, Some(_)) => {
                seen.insert(key.clone(), Some(value));
            }
            (_, Some(Ret::Read(v))) => {
                seen.insert(key.clone(), v);
            }
            (Call::Cas { new, .. }, Some(Ret::Applied(true))) => {
                seen.insert(key.clone(), Some(new));
            }
            (_, Some(Ret::Counter(n))) => {
                seen.insert(key.clone(), Some(n));
            }
            _ => {}
        }
        {
            let mut st = slot_state.lock().map_err(|_| "slot poisoned")?;
            if st.generation == generation {
                st.ops += u64::from(outcome != Outcome::Fail);
                st.unknown_writes += u64::from(outcome == Outcome::Unknown && call.writes());
                if st.ops >= s.ops_per_key || st.unknown_writes >= s.unknown_per_key {
                    *st = Slot {
                        generation: generation + 1,
                        ..Slot::default()
                    };
                }
            }
        }
        suspect = outcome != Outcome::Ok;
        shared.record(Op {
            client: id,
            key,
            call,
            invoke_ns,
            end_ns,
            outcome,
            ret,
            error,
        })?;
        if malformed {
            if let Ok(mut h) = shared.history.lock() {
                h.1.malformed += 1;
            }
        }
        let mut pause = pace.saturating_sub(began.elapsed());
        if outcome != Outcome::Ok {
            // The server is likely down or starting: do not spin.
            pause = pause.max(Duration::from_millis(20));
        }
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    Ok(())
}

/// A random call: gets 40 %, puts, check-and-mutates and increments 20 % each.
fn choose(rng: &mut SmallRng, fresh: i64, last_seen: Option<Option<i64>>) -> Call {
    match rng.gen_range(0..10) {
        0..=3 => Call::Get,
        4 | 5 => Call::Put { value: fresh },
        6 | 7 => cas(rng, fresh, last_seen),
        _ => increment(rng),
    }
}

/// For a value register: gets 40 %, puts and check-and-mutates 30 % each.
fn choose_value(rng: &mut SmallRng, fresh: i64, last_seen: Option<Option<i64>>) -> Call {
    match rng.gen_range(0..10) {
        0..=3 => Call::Get,
        4..=6 => Call::Put { value: fresh },
        _ => cas(rng, fresh, last_seen),
    }
}

/// For a counter: gets and increments, half each.
fn choose_counter(rng: &mut SmallRng) -> Call {
    if rng.gen_bool(0.5) {
        Call::Get
    } else {
        increment(rng)
    }
}

/// A check-and-mutate mostly expects the value this client last saw, so that some succeed.
fn cas(rng: &mut SmallRng, fresh: i64, last_seen: Option<Option<i64>>) -> Call {
    let expected = match last_seen {
        Some(v) if rng.gen_bool(0.8) => v,
        Some(Some(v)) => Some(v.wrapping_add(1)),
        _ => None,
    };
    Call::Cas {
        expected,
        new: fresh,
    }
}

fn increment(rng: &mut SmallRng) -> Call {
    Call::Incr {
        delta: rng.gen_range(1..=5),
    }
}

/// Why a call did not give an answer.
enum Failure {
    /// Certainly not applied.
    Refused(String),
    /// Perhaps applied.
    Unknown(String),
    /// The server answered with a value no client writes.
    Malformed(String),
}

/// Whether an error proves the call was not applied. The client makes one attempt (no
/// retries), so the error is that attempt's: a refused TCP connection means nothing was
/// sent; these server codes are answers to calls the server did not run.
fn failure(e: Error) -> Failure {
    let last = match &e {
        Error::RetriesExhausted { last, .. } => &**last,
        other => other,
    };
    let refused = match last {
        Error::Io(io) => io.kind() == std::io::ErrorKind::ConnectionRefused,
        Error::Rpc { code, .. } => matches!(
            code,
            ErrorCode::NotServingRegion | ErrorCode::ServerBusy | ErrorCode::TableNotFound
        ),
        _ => false,
    };
    if refused {
        Failure::Refused(e.to_string())
    } else {
        Failure::Unknown(e.to_string())
    }
}

fn value_bytes(v: i64) -> Bytes {
    Bytes::copy_from_slice(&v.to_be_bytes())
}

async fn perform(table: &Table, key: &str, call: Call) -> Result<Ret, Failure> {
    let row = Bytes::from(key.to_string());
    match call {
        Call::Put { value } => {
            let m =
                RowMutation::new(row).put(FAMILY, QUALIFIER, LATEST_TIMESTAMP, value_bytes(value));
            table.put(m).await.map_err(failure)?;
            Ok(Ret::Written)
        }
        Call::Get => {
            let r = table
                .get(Get::new(row).column(FAMILY, QUALIFIER))
                .await
                .map_err(failure)?;
            match r.value(FAMILY, QUALIFIER) {
                None => Ok(Ret::Read(None)),
                Some(v) => match <[u8; 8]>::try_from(&v[..]) {
                    Ok(b) => Ok(Ret::Read(Some(i64::from_be_bytes(b)))),
                    Err(_) => Err(Failure::Malformed(format!(
                        "read a {}-byte value; every write is 8 bytes",
                        v.len()
                    ))),
                },
            }
        }
        Call::Cas { expected, new } => {
            let cond = Condition {
                row: row.clone(),
                family: Bytes::from_static(FAMILY),
                qualifier: Bytes::from_static(QUALIFIER),
                op: CompareOp::Equal,
                value: expected.map(value_bytes),
            };
            let m =
                RowMutation::new(row).put(FAMILY, QUALIFIER, LATEST_TIMESTAMP, value_bytes(new));
            let applied = table.check_and_mutate(cond, m).await.map_err(failure)?;
            Ok(Ret::Applied(applied))
        }
        Call::Incr { delta } => {
            let n = table
                .increment(key.as_bytes(), FAMILY, QUALIFIER, delta)
                .await
                .map_err(|e| match e {
                    // A counter the server could not read as 8 bytes.
                    Error::Protocol(m) if m.contains("counter") => Failure::Malformed(m),
                    other => failure(other),
                })?;
            Ok(Ret::Counter(n))
        }
    }
}
