//! Every acknowledged write survives `kill -9` of a busy server.
//!
//! Each round starts `cellar standalone` on the same data directory, checks everything written
//! so far, lets several clients (one connection each) write for a random 0.2–1.5 s, and kills
//! the server by PID with SIGKILL while they write. The writers mix single puts, batches across
//! regions, deletes of their own acknowledged rows and increments of their own counter, with
//! durabilities default (SYNC_WAL), SYNC_WAL, FSYNC_WAL and a few ASYNC_WAL puts. Every call is
//! recorded with when it was issued, when it finished and what it acknowledged (a call still
//! unanswered 200 ms after the killed server was reaped is abandoned: not acknowledged). Each
//! round must have had acknowledged calls, calls in flight at the kill, and failed calls after
//! it; a call that failed while the server was up fails the test.
//!
//! After each restart, a full scan and point reads check:
//! - every acknowledged put is there with its exact value, whole (both of its columns);
//! - every acknowledged delete stays deleted;
//! - each counter holds at least its last acknowledged value and at most that plus the
//!   increments not acknowledged; the first increment after a restart continues from the value
//!   read;
//! - no row appears that no writer attempted, and no value that was never written;
//! - a write not acknowledged (in flight at the kill) may be there or not, but once a restart
//!   showed it there or gone, it stays so; ASYNC_WAL puts may be lost, never damaged.
//!
//! A failure names the row, the round and the durability, keeps the data directory (with each
//! server's log and every call made) and prints the seed; `CELLAR_DURABILITY_SEED=N` repeats the
//! writers' choices (the timing is the machine's).

mod support;

use bytes::Bytes;
use cellar_client::{
    BatchOp, BatchOutcome, Client, ClientConfig, Durability, FamilySchema, Get, RowMutation, Scan,
    TableSchema, LATEST_TIMESTAMP,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::Server;
use tokio::sync::watch;

const ROUNDS: u32 = 12;
const WRITERS: usize = 6;
const TABLE: &str = "dur";
/// The table's split keys; rows start with one of `PREFIXES`, so a batch spans regions.
const SPLITS: [&[u8]; 3] = [b"b", b"c", b"d"];
const PREFIXES: [char; 4] = ['a', 'b', 'c', 'd'];
/// Calls one writer may make in a round (it is killed long before).
const MAX_CALLS: usize = 200_000;
/// Small memstores and a small first split size, so flushes and region splits (and their WAL
/// and meta bookkeeping) happen while the server is killed.
const CONFIG: &str = "[split]\ninitial_bytes = 1048576\ncheck_interval_ms = 100\n[storage]\nmemstore_flush_bytes = 262144\nmemstore_chunk_pool_bytes = 16777216\nmemstore_chunks_ready_bytes = 4194304\n";

/// A put's durability, as the writer asked for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Default,
    Sync,
    Fsync,
    Async,
}

impl Level {
    fn durability(self) -> Durability {
        match self {
            Level::Default => Durability::UseDefault,
            Level::Sync => Durability::SyncWal,
            Level::Fsync => Durability::FsyncWal,
            Level::Async => Durability::AsyncWal,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Default => "default (SYNC_WAL)",
            Level::Sync => "SYNC_WAL",
            Level::Fsync => "FSYNC_WAL",
            Level::Async => "ASYNC_WAL",
        }
    }

    /// Default, SYNC or FSYNC, evenly.
    fn durable(rng: &mut StdRng) -> Level {
        [Level::Default, Level::Sync, Level::Fsync][rng.gen_range(0..3)]
    }
}

/// The value of a row's column: a function of both, 20 B to about 1 KiB long.
fn value_of(row: &str, column: &str) -> Bytes {
    let h = row.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    Bytes::from(format!("{row}/{column}|").repeat(1 + (h % 48) as usize))
}

fn counter_row(w: usize) -> String {
    format!("cnt-{w}")
}

fn put_of(row: &str, level: Level) -> RowMutation {
    RowMutation::new(Bytes::from(row.to_string()))
        .put(b"cf", b"a", LATEST_TIMESTAMP, value_of(row, "a"))
        .put(b"cf", b"b", LATEST_TIMESTAMP, value_of(row, "b"))
        .with_durability(level.durability())
}

/// What one call asked for and what the server answered.
#[derive(Debug, Clone)]
enum Call {
    Put {
        row: String,
        level: Level,
        acked: bool,
    },
    /// Puts of several rows in one batch: each row's level and whether it was acknowledged.
    Batch { rows: Vec<(String, Level, bool)> },
    Delete {
        row: String,
        level: Level,
        acked: bool,
    },
    /// The counter's new value when acknowledged.
    Increment { row: String, acked: Option<i64> },
}

impl Call {
    fn acked(&self) -> bool {
        match self {
            Call::Put { acked, .. } | Call::Delete { acked, .. } => *acked,
            Call::Batch { rows } => rows.iter().all(|r| r.2),
            Call::Increment { acked, .. } => acked.is_some(),
        }
    }
}

/// One call of one writer, timed.
#[derive(Debug, Clone)]
struct Record {
    writer: usize,
    issued: Instant,
    finished: Instant,
    call: Call,
    /// The error of a call that failed.
    error: Option<String>,
}

/// Writers' retries ride over a region split on a loaded machine (about 7 s in all); once the
/// server is killed, their calls are abandoned instead (see [`unless_abandoned`]).
fn writer_config() -> ClientConfig {
    ClientConfig {
        retries: 10,
        retry_backoff: Duration::from_millis(20),
        rpc_timeout: Duration::from_secs(30),
        ..ClientConfig::default()
    }
}

/// How long a call may still be answered once the killed server is reaped: only an answer it
/// sent before dying can come, and that one is already waiting to be read.
const GRACE: Duration = Duration::from_millis(200);

/// `call`'s outcome, or an error once the server has been killed and reaped and [`GRACE`] has
/// passed: the call is abandoned and counts as not acknowledged.
async fn unless_abandoned<T>(
    call: impl std::future::Future<Output = cellar_client::Result<T>>,
    killed: &mut watch::Receiver<bool>,
) -> Result<T, String> {
    let abandon = async {
        let _ = killed.wait_for(|k| *k).await;
        tokio::time::sleep(GRACE).await;
    };
    tokio::select! {
        r = call => r.map_err(|e| e.to_string()),
        () = abandon => Err(format!("abandoned: no answer {GRACE:?} after the server was reaped")),
    }
}

/// What the writers are doing, for the killer.
#[derive(Default)]
struct Progress {
    /// Calls acknowledged so far.
    acks: AtomicU64,
    /// Calls issued and not yet answered.
    in_flight: AtomicUsize,
}

/// One writer: calls until the first failure (the kill), `MAX_CALLS` or `deadline`.
async fn writer(
    client: Client,
    w: usize,
    round: u32,
    mut rng: StdRng,
    deadline: Instant,
    progress: Arc<Progress>,
    mut killed: watch::Receiver<bool>,
) -> Vec<Record> {
    let table = client.table(TABLE);
    let mut records = Vec::new();
    // This round's acknowledged durable rows of this writer, which it may delete.
    let mut deletable: Vec<String> = Vec::new();
    let mut next_row = 0usize;
    let mut fresh_row = |rng: &mut StdRng| {
        let p = PREFIXES[rng.gen_range(0..PREFIXES.len())];
        next_row += 1;
        format!("{p}{w}-{round:02}-{next_row:06}")
    };
    for _ in 0..MAX_CALLS {
        if Instant::now() >= deadline {
            break;
        }
        let pick = rng.gen_range(0..100);
        progress.in_flight.fetch_add(1, Ordering::SeqCst);
        let issued = Instant::now();
        let (call, error) = if pick < 40 {
            let level = if rng.gen_range(0..100) < 8 {
                Level::Async
            } else {
                Level::durable(&mut rng)
            };
            let row = fresh_row(&mut rng);
            let r = unless_abandoned(table.put(put_of(&row, level)), &mut killed).await;
            if r.is_ok() && level != Level::Async {
                deletable.push(row.clone());
            }
            let error = r.err();
            let acked = error.is_none();
            (Call::Put { row, level, acked }, error)
        } else if pick < 65 {
            let n = rng.gen_range(2..=8);
            let rows: Vec<(String, Level)> = (0..n)
                .map(|_| (fresh_row(&mut rng), Level::durable(&mut rng)))
                .collect();
            let ops = rows
                .iter()
                .map(|(row, level)| BatchOp::Mutate(put_of(row, *level)))
                .collect();
            match unless_abandoned(table.batch(ops), &mut killed).await {
                Ok(outcomes) => {
                    let mut error = None;
                    let mut done = Vec::new();
                    for ((row, level), o) in rows.into_iter().zip(outcomes) {
                        let ok = matches!(o, Ok(BatchOutcome::Done));
                        if !ok && error.is_none() {
                            error = Some(format!("batch put of {row}: {o:?}"));
                        }
                        if ok {
                            deletable.push(row.clone());
                        }
                        done.push((row, level, ok));
                    }
                    (Call::Batch { rows: done }, error)
                }
                Err(e) => (
                    Call::Batch {
                        rows: rows.into_iter().map(|(r, l)| (r, l, false)).collect(),
                    },
                    Some(e),
                ),
            }
        } else if pick < 80 && !deletable.is_empty() {
            let row = deletable.swap_remove(rng.gen_range(0..deletable.len()));
            let level = Level::durable(&mut rng);
            let m = RowMutation::new(Bytes::from(row.clone()))
                .delete_family(b"cf", LATEST_TIMESTAMP)
                .with_durability(level.durability());
            let error = unless_abandoned(table.delete(m), &mut killed).await.err();
            let acked = error.is_none();
            (Call::Delete { row, level, acked }, error)
        } else {
            let row = counter_row(w);
            let inc = table.increment(row.as_bytes(), b"cf", b"n", 1);
            match unless_abandoned(inc, &mut killed).await {
                Ok(v) => (
                    Call::Increment {
                        row,
                        acked: Some(v),
                    },
                    None,
                ),
                Err(e) => (Call::Increment { row, acked: None }, Some(e)),
            }
        };
        let finished = Instant::now();
        progress.in_flight.fetch_sub(1, Ordering::SeqCst);
        let failed = error.is_some();
        if !failed {
            progress.acks.fetch_add(1, Ordering::Relaxed);
        }
        records.push(Record {
            writer: w,
            issued,
            finished,
            call,
            error,
        });
        if failed {
            break; // the server is gone (a failure while it lived fails the round)
        }
    }
    records
}

/// What a row must look like after a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Acknowledged (or seen after a restart): there, whole, with its exact values.
    Present,
    /// Deleted with an acknowledgement (or seen gone after a restart): not there.
    Absent,
    /// The outcome of its last write is unknown (in flight at a kill): either, whole if there.
    Either,
    /// Written with ASYNC_WAL: may be lost at any kill, never damaged.
    Async,
}

#[derive(Debug)]
struct RowFate {
    expect: Expect,
    /// The round of its last write, for the point reads after the next restart.
    round: u32,
    /// What was done to it, for failure messages.
    history: Vec<String>,
}

#[derive(Debug)]
struct CounterFate {
    /// The last acknowledged value (or the value read after a restart).
    lo: i64,
    /// `lo` plus the increments not acknowledged since.
    hi: i64,
    history: Vec<String>,
}

/// Every row any writer attempted, and what must be true of it.
#[derive(Default)]
struct Model {
    rows: HashMap<String, RowFate>,
    counters: HashMap<String, CounterFate>,
}

impl Model {
    fn write(&mut self, row: &str, round: u32, expect: Expect, note: String) {
        let fate = self.rows.entry(row.to_string()).or_insert(RowFate {
            expect,
            round,
            history: Vec::new(),
        });
        fate.expect = expect;
        fate.round = round;
        fate.history.push(note);
    }

    /// Applies one writer's calls of `round`, in its order; wrong increment answers are
    /// returned as problems.
    fn apply(&mut self, round: u32, records: &[Record], problems: &mut Vec<String>) {
        for rec in records {
            let fate = if rec.call.acked() {
                "acknowledged"
            } else {
                "not acknowledged"
            };
            match &rec.call {
                Call::Put { row, level, acked } => {
                    let expect = match (level, acked) {
                        (Level::Async, _) => Expect::Async,
                        (_, true) => Expect::Present,
                        (_, false) => Expect::Either,
                    };
                    let note = format!("round {round}: {} put, {fate}", level.name());
                    self.write(row, round, expect, note);
                }
                Call::Batch { rows } => {
                    let n = rows.len();
                    for (row, level, acked) in rows {
                        let expect = if *acked {
                            Expect::Present
                        } else {
                            Expect::Either
                        };
                        let fate = if *acked {
                            "acknowledged"
                        } else {
                            "not acknowledged"
                        };
                        let note = format!(
                            "round {round}: {} put in a batch of {n}, {fate}",
                            level.name()
                        );
                        self.write(row, round, expect, note);
                    }
                }
                Call::Delete { row, level, acked } => {
                    let expect = if *acked {
                        Expect::Absent
                    } else {
                        Expect::Either
                    };
                    let note = format!("round {round}: {} delete, {fate}", level.name());
                    self.write(row, round, expect, note);
                }
                Call::Increment { row, acked } => {
                    let c = self.counters.entry(row.clone()).or_insert(CounterFate {
                        lo: 0,
                        hi: 0,
                        history: Vec::new(),
                    });
                    match acked {
                        Some(v) => {
                            if *v != c.hi + 1 || c.lo != c.hi {
                                problems.push(format!(
                                    "round {round}: counter {row}: increment by 1 answered {v}, \
                                     expected {} (history: {})",
                                    c.hi + 1,
                                    c.history.join("; ")
                                ));
                            }
                            c.lo = *v;
                            c.hi = *v;
                            c.history
                                .push(format!("round {round}: increment acknowledged = {v}"));
                        }
                        None => {
                            c.hi += 1;
                            c.history.push(format!(
                                "round {round}: increment not acknowledged (now {}..={})",
                                c.lo, c.hi
                            ));
                        }
                    }
                }
            }
        }
    }
}

/// What a check saw.
#[derive(Default, Debug)]
struct Seen {
    rows: usize,
    async_lost: usize,
    unknown_present: usize,
    unknown_gone: usize,
    point_reads: usize,
}

/// Checks the table against the model after a restart (see the module doc), then pins what
/// was unknown to what was seen. Returns the problems found.
async fn check(client: &Client, model: &mut Model, last_round: Option<u32>) -> (Seen, Vec<String>) {
    let table = client.table(TABLE);
    let mut problems = Vec::new();
    let mut seen = Seen::default();
    let mut scanned: BTreeMap<String, Vec<cellar_client::Cell>> = BTreeMap::new();
    let mut scanner = table.scan(Scan::new().caching(1000));
    for _ in 0..10_000_000 {
        match scanner.next().await {
            Ok(Some(r)) => {
                let key = String::from_utf8_lossy(&r.row).into_owned();
                if scanned.insert(key.clone(), r.cells).is_some() {
                    problems.push(format!("the scan returned row {key} twice"));
                }
            }
            Ok(None) => break,
            Err(e) => {
                problems.push(format!("the scan failed after {} rows: {e}", scanned.len()));
                return (seen, problems);
            }
        }
    }
    seen.rows = scanned.len();
    for (key, cells) in &scanned {
        if let Some(c) = model.counters.get_mut(key) {
            let v = match cells.as_slice() {
                [cell] if &cell.family[..] == b"cf" && &cell.qualifier[..] == b"n" => {
                    <[u8; 8]>::try_from(&cell.value[..])
                        .map(i64::from_be_bytes)
                        .ok()
                }
                _ => None,
            };
            match v {
                Some(v) if (c.lo..=c.hi).contains(&v) => {
                    c.history.push(format!("read {v} after a restart"));
                    c.lo = v;
                    c.hi = v;
                }
                Some(v) => problems.push(format!(
                    "counter {key} reads {v}, outside {}..={} (history: {})",
                    c.lo,
                    c.hi,
                    c.history.join("; ")
                )),
                None => problems.push(format!(
                    "counter {key} holds {}, not one 8-byte cf:n (history: {})",
                    describe(cells),
                    c.history.join("; ")
                )),
            }
            continue;
        }
        let Some(fate) = model.rows.get_mut(key) else {
            problems.push(format!(
                "phantom row {key}: no writer ever attempted it; it holds {}",
                describe(cells)
            ));
            continue;
        };
        let whole = cells.len() == 2
            && cells.iter().zip(["a", "b"]).all(|(c, col)| {
                &c.family[..] == b"cf"
                    && &c.qualifier[..] == col.as_bytes()
                    && c.value == value_of(key, col)
            });
        if !whole {
            problems.push(format!(
                "row {key} holds {} instead of its two written values (history: {})",
                describe(cells),
                fate.history.join("; ")
            ));
        }
        match fate.expect {
            Expect::Absent => problems.push(format!(
                "row {key} is back after its delete (history: {})",
                fate.history.join("; ")
            )),
            Expect::Either => {
                seen.unknown_present += 1;
                fate.expect = Expect::Present;
                fate.history.push("there after a restart".into());
            }
            Expect::Present | Expect::Async => {}
        }
    }
    for (key, fate) in model.rows.iter_mut() {
        if scanned.contains_key(key) {
            continue;
        }
        match fate.expect {
            Expect::Present => problems.push(format!(
                "row {key} is lost (history: {})",
                fate.history.join("; ")
            )),
            Expect::Either => {
                seen.unknown_gone += 1;
                fate.expect = Expect::Absent;
                fate.history.push("gone after a restart".into());
            }
            Expect::Async => seen.async_lost += 1,
            Expect::Absent => {}
        }
    }
    for (key, c) in model.counters.iter_mut() {
        if !scanned.contains_key(key) {
            if c.lo == 0 {
                c.hi = 0;
            } else {
                problems.push(format!(
                    "counter {key} is lost; it held at least {} (history: {})",
                    c.lo,
                    c.history.join("; ")
                ));
            }
        }
    }
    // Point reads (the get path, which may answer from memory) of last round's rows.
    if let Some(round) = last_round {
        let rows: Vec<(&String, &RowFate)> = model
            .rows
            .iter()
            .filter(|(_, f)| f.round == round && f.expect != Expect::Async)
            .collect();
        for chunk in rows.chunks(500) {
            let ops = chunk
                .iter()
                .map(|(k, _)| BatchOp::Get(Get::new(Bytes::from((*k).clone()))))
                .collect();
            let outcomes = match table.batch(ops).await {
                Ok(o) => o,
                Err(e) => {
                    problems.push(format!("batch get failed: {e}"));
                    break;
                }
            };
            for ((key, fate), o) in chunk.iter().zip(outcomes) {
                seen.point_reads += 1;
                let row = match o {
                    Ok(BatchOutcome::Row(r)) => r,
                    other => {
                        problems.push(format!("get of row {key}: {other:?}"));
                        continue;
                    }
                };
                let want: Option<Vec<Bytes>> = match fate.expect {
                    Expect::Present => Some(vec![value_of(key, "a"), value_of(key, "b")]),
                    _ => None,
                };
                let got: Option<Vec<Bytes>> =
                    (!row.is_empty()).then(|| row.cells.iter().map(|c| c.value.clone()).collect());
                if got != want {
                    problems.push(format!(
                        "get of row {key} returned {} where the scan agreed with {:?} (history: {})",
                        describe(&row.cells),
                        fate.expect,
                        fate.history.join("; ")
                    ));
                }
            }
        }
    }
    (seen, problems)
}

fn describe(cells: &[cellar_client::Cell]) -> String {
    if cells.is_empty() {
        return "no cells".into();
    }
    let mut s = String::new();
    for c in cells {
        let _ = write!(
            s,
            "[{}:{} = {} bytes {:?}…] ",
            String::from_utf8_lossy(&c.family),
            String::from_utf8_lossy(&c.qualifier),
            c.value.len(),
            String::from_utf8_lossy(&c.value[..c.value.len().min(24)])
        );
    }
    s
}

/// Keeps the data directory, the servers' logs and every call, and fails with the problems.
fn fail(dir: tempfile::TempDir, seed: u64, when: &str, problems: &[String], calls: &str) -> ! {
    let kept: PathBuf = dir.keep();
    let _ = std::fs::write(kept.join("calls.txt"), calls);
    let _ = std::fs::write(kept.join("problems.txt"), problems.join("\n"));
    let shown = problems
        .iter()
        .take(20)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n  ");
    panic!(
        "{when}: {} problem(s) (seed {seed}; data directory, server logs and calls kept in {}):\n  {shown}",
        problems.len(),
        kept.display()
    );
}

fn save_log(dir: &Path, name: &str, server: &Server) {
    let _ = std::fs::write(dir.join(name), server.output());
}

/// How the calls of a round went.
#[derive(Default, Debug)]
struct RoundStats {
    acked_calls: usize,
    acked_puts: BTreeMap<Level, usize>,
    acked_batches: usize,
    acked_batch_rows: usize,
    acked_deletes: usize,
    acked_increments: usize,
    /// Issued before the SIGKILL and finished after it.
    in_flight: usize,
    /// Of those, the ones that failed.
    in_flight_failed: usize,
    failed: usize,
}

fn round_stats(records: &[Record], kill_sent: Instant) -> RoundStats {
    let mut s = RoundStats::default();
    for r in records {
        if r.issued < kill_sent && r.finished >= kill_sent {
            s.in_flight += 1;
            if r.error.is_some() {
                s.in_flight_failed += 1;
            }
        }
        if r.error.is_some() {
            s.failed += 1;
            continue;
        }
        s.acked_calls += 1;
        match &r.call {
            Call::Put { level, .. } => *s.acked_puts.entry(*level).or_default() += 1,
            Call::Batch { rows } => {
                s.acked_batches += 1;
                s.acked_batch_rows += rows.len();
            }
            Call::Delete { .. } => s.acked_deletes += 1,
            Call::Increment { .. } => s.acked_increments += 1,
        }
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_mid_write() {
    let seed: u64 = std::env::var("CELLAR_DURABILITY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("seed {seed} (CELLAR_DURABILITY_SEED={seed} repeats the writers' choices)");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let config = dir.path().join("cellar.toml");
    std::fs::write(&config, CONFIG).expect("config");
    let mut model = Model::default();
    let mut calls_log = String::new();
    let started = Instant::now();
    for round in 0..=ROUNDS {
        let mut server = Server::start_in(&data, Some(&config));
        let client = Client::connect(&server.native).await.expect("connect");
        if round == 0 {
            client
                .admin()
                .create_table(
                    TableSchema::new(TABLE, vec![FamilySchema::new("cf")]),
                    SPLITS.iter().map(|s| Bytes::from_static(s)).collect(),
                )
                .await
                .expect("create");
        } else {
            let (seen, problems) = check(&client, &mut model, Some(round - 1)).await;
            if !problems.is_empty() {
                save_log(dir.path(), &format!("server-{round}.log"), &server);
                drop(server);
                fail(
                    dir,
                    seed,
                    &format!("after the restart that followed round {}", round - 1),
                    &problems,
                    &calls_log,
                );
            }
            let regions = client
                .admin()
                .list_regions(TABLE)
                .await
                .map(|r| r.len())
                .unwrap_or(0);
            eprintln!(
                "  restart {round}: {regions} regions, {} rows scanned, {} point reads; unacknowledged writes: {} there, {} gone; ASYNC_WAL rows lost: {}",
                seen.rows, seen.point_reads, seen.unknown_present, seen.unknown_gone, seen.async_lost
            );
        }
        if round == ROUNDS {
            break;
        }

        // Several clients write; the kill lands while they do.
        let progress = Arc::new(Progress::default());
        let (killed_tx, killed_rx) = watch::channel(false);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let c = Client::connect_with(&server.native, writer_config())
                .await
                .expect("writer connect");
            let wrng = StdRng::seed_from_u64(rng.gen());
            writers.push(tokio::spawn(writer(
                c,
                w,
                round,
                wrng,
                deadline,
                progress.clone(),
                killed_rx.clone(),
            )));
        }
        // The killer runs on its own thread, so the writers' scheduling cannot delay it: after
        // the first acknowledgement and a random 0.2-1.5 s of writing, it sends SIGKILL at a
        // moment when calls are in flight.
        let writing = Duration::from_millis(rng.gen_range(200..=1500));
        let pid = server.pid();
        let killer = {
            let progress = progress.clone();
            tokio::task::spawn_blocking(move || {
                let first_ack_by = Instant::now() + Duration::from_secs(60);
                while progress.acks.load(Ordering::Relaxed) == 0 && Instant::now() < first_ack_by {
                    std::thread::sleep(Duration::from_millis(2));
                }
                std::thread::sleep(writing);
                let busy_by = Instant::now() + Duration::from_secs(5);
                while progress.in_flight.load(Ordering::SeqCst) == 0 && Instant::now() < busy_by {
                    std::thread::yield_now();
                }
                let in_flight = progress.in_flight.load(Ordering::SeqCst);
                let kill_sent = Instant::now();
                server.kill9();
                let _ = killed_tx.send(true);
                (server, kill_sent, in_flight)
            })
        };
        let (server, kill_sent, in_flight_seen) = killer.await.expect("killer thread");
        let mut records = Vec::new();
        for w in writers {
            let r = tokio::time::timeout(Duration::from_secs(60), w)
                .await
                .expect("writers stop once the server is gone")
                .expect("writer task");
            records.push(r);
        }
        save_log(dir.path(), &format!("server-{round}.log"), &server);
        drop(client);
        drop(server);

        let mut problems = Vec::new();
        for rec in records.iter().flatten() {
            let _ = writeln!(
                calls_log,
                "round {round} writer {} issued {:?} finished {:?} (kill at {:?}): {:?} {}",
                rec.writer,
                rec.issued - started,
                rec.finished - started,
                kill_sent - started,
                rec.call,
                rec.error.as_deref().unwrap_or("")
            );
            if rec.error.is_some() && rec.finished < kill_sent {
                problems.push(format!(
                    "round {round}: writer {} failed while the server was up: {:?}: {}",
                    rec.writer,
                    rec.call,
                    rec.error.as_deref().unwrap_or("")
                ));
            }
        }
        for recs in &records {
            model.apply(round, recs, &mut problems);
        }
        let all: Vec<Record> = records.into_iter().flatten().collect();
        let s = round_stats(&all, kill_sent);
        eprintln!(
            "round {round}: killed pid {pid} after {writing:?} of writing, {in_flight_seen} calls in flight; acknowledged calls: {} (puts {:?}, {} batches of {} rows, {} deletes, {} increments); issued before the kill and answered after it: {} ({} failed); failed calls: {}",
            s.acked_calls,
            s.acked_puts,
            s.acked_batches,
            s.acked_batch_rows,
            s.acked_deletes,
            s.acked_increments,
            s.in_flight,
            s.in_flight_failed,
            s.failed
        );
        if s.acked_calls == 0 {
            problems.push(format!(
                "round {round}: the server acknowledged no write before the kill"
            ));
        }
        if s.in_flight == 0 {
            problems.push(format!(
                "round {round}: no call was in flight at the kill: it did not land mid-write"
            ));
        }
        if s.failed == 0 {
            problems.push(format!("round {round}: no call failed after the kill"));
        }
        if !problems.is_empty() {
            fail(dir, seed, &format!("round {round}"), &problems, &calls_log);
        }
    }
    eprintln!(
        "{ROUNDS} kills in {:?}; {} rows attempted, {} counters",
        started.elapsed(),
        model.rows.len(),
        model.counters.len()
    );
}
