//! `linkedlist generate`: writers building circular linked lists of random rows.
//!
//! A writer works in circles. A circle starts with a batch of `width` new nodes (random
//! keys, no predecessor yet): the heads of `width` lists. Each next batch adds one node to
//! every list, pointing at the list's current last node, and is written only once the batch
//! before it was acknowledged — so an acknowledged node never points at one that was not.
//! After `wrap` batches (or when the run ends) the circle is closed: the first node of list
//! `i` is rewritten to point at the last node of list `i + 1`, joining the lists into one
//! circle in which every node is pointed at exactly once. A lost node then shows up as a
//! reference to a row that does not exist.
//!
//! Writes that fail or whose outcome is unknown are sent again until acknowledged (a node is
//! written whole, so sending it twice is harmless) or until the grace period after the run
//! ends. What never got acknowledged is reported as unsettled: it may or may not be there.

use super::node::{self, Key, Node};
use super::Summary;
use bytes::Bytes;
use cellar_client::{BatchOp, Client, ClientConfig, FamilySchema, TableSchema};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What generate is asked to do.
#[derive(Debug, Clone)]
pub struct Settings {
    pub addr: String,
    pub table: String,
    pub writers: u32,
    /// Nodes in all (0: no limit).
    pub nodes: u64,
    /// How long to write new nodes (`None`: until `nodes` are written).
    pub duration: Option<Duration>,
    pub width: u32,
    pub wrap: u32,
    /// New nodes per second over all writers (0: as fast as acknowledgements come).
    pub rate: u64,
    /// Create the table (pre-split into `regions`) first.
    pub create: bool,
    pub regions: u32,
    /// After the run, how long to keep resending writes not yet acknowledged.
    pub grace: Duration,
    pub status_interval: Duration,
}

/// Counters shared by the writers, for the status line and the summary.
#[derive(Default)]
struct Counters {
    acknowledged: AtomicU64,
    unsettled: AtomicU64,
    open_heads: AtomicU64,
    circles_closed: AtomicU64,
    resent: AtomicU64,
    waiting: AtomicU64,
}

struct Shared {
    settings: Settings,
    run: u32,
    /// No new batch after this.
    stop: Option<Instant>,
    counters: Counters,
}

/// Runs the writers; the summary says what was acknowledged and what is unsettled.
pub async fn run(settings: Settings) -> Result<Summary, String> {
    if settings.writers == 0 || settings.width == 0 || settings.wrap == 0 {
        return Err("--writers, --width and --wrap must be at least 1".into());
    }
    if settings.nodes == 0 && settings.duration.is_none() {
        return Err("give --nodes or --duration (or both): the run must end".into());
    }
    let started = Instant::now();
    let first = connect(
        &settings.addr,
        started + settings.grace.max(Duration::from_secs(60)),
    )
    .await
    .ok_or_else(|| format!("cannot connect to cellar://{}", settings.addr))?;
    prepare_table(&first, &settings).await?;
    drop(first);
    let shared = Arc::new(Shared {
        stop: settings.duration.map(|d| started + d),
        run: rand::random(),
        counters: Counters::default(),
        settings,
    });
    let status = tokio::spawn(report_status(shared.clone(), started));
    let writers = shared.settings.writers;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let quota = share(shared.settings.nodes, writers, w);
        tasks.push(tokio::spawn(writer(w, quota, shared.clone())));
    }
    for t in tasks {
        t.await.map_err(|e| format!("a writer task failed: {e}"))?;
    }
    status.abort();
    let c = &shared.counters;
    Ok(Summary {
        table: shared.settings.table.clone(),
        writers,
        acknowledged: c.acknowledged.load(Ordering::Relaxed),
        unsettled: c.unsettled.load(Ordering::Relaxed),
        open_heads: c.open_heads.load(Ordering::Relaxed),
        circles_closed: c.circles_closed.load(Ordering::Relaxed),
        resent: c.resent.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Writer `w`'s part of `nodes` (0: no limit).
fn share(nodes: u64, writers: u32, w: u32) -> u64 {
    if nodes == 0 {
        return u64::MAX;
    }
    let (n, w) = (u64::from(writers), u64::from(w));
    nodes / n + u64::from(w < nodes % n)
}

fn client_config() -> ClientConfig {
    ClientConfig {
        rpc_timeout: Duration::from_secs(10),
        retries: 2,
        retry_backoff: Duration::from_millis(100),
        ..ClientConfig::default()
    }
}

/// A client, trying until `until`.
async fn connect(addr: &str, until: Instant) -> Option<Client> {
    loop {
        if let Ok(c) = Client::connect_with(addr, client_config()).await {
            return Some(c);
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn prepare_table(client: &Client, s: &Settings) -> Result<(), String> {
    let admin = client.admin();
    let exists = admin
        .table_exists(&s.table)
        .await
        .map_err(|e| format!("table '{}': {e}", s.table))?;
    if s.create {
        if exists {
            return Err(format!(
                "table '{}' already exists; drop it, or leave out --create to add to it",
                s.table
            ));
        }
        let schema = TableSchema::new(
            s.table.clone(),
            vec![FamilySchema::new(
                String::from_utf8_lossy(node::FAMILY).into_owned(),
            )],
        );
        admin
            .create_table(schema, node::split_keys(s.regions))
            .await
            .map_err(|e| format!("cannot create table '{}': {e}", s.table))?;
        eprintln!(
            "linkedlist generate: created table '{}' in {} regions",
            s.table,
            s.regions.max(1)
        );
    } else if !exists {
        return Err(format!(
            "table '{}' does not exist; add --create to make it",
            s.table
        ));
    }
    Ok(())
}

async fn report_status(shared: Arc<Shared>, started: Instant) {
    let c = &shared.counters;
    loop {
        tokio::time::sleep(shared.settings.status_interval).await;
        let secs = started.elapsed().as_secs_f64();
        let acked = c.acknowledged.load(Ordering::Relaxed);
        eprintln!(
            "linkedlist generate: {secs:.0} s: {acked} nodes acknowledged ({:.0}/s), {} circles closed, {} writes resent, {} writers waiting for the server",
            acked as f64 / secs.max(0.001),
            c.circles_closed.load(Ordering::Relaxed),
            c.resent.load(Ordering::Relaxed),
            c.waiting.load(Ordering::Relaxed),
        );
    }
}

/// One writer: circles until its quota or the run's end.
async fn writer(w: u32, quota: u64, shared: Arc<Shared>) {
    let s = &shared.settings;
    let mut rng = SmallRng::from_entropy();
    let name = Bytes::from(format!("{:08x}-{w}", shared.run));
    let mut count: u64 = 0;
    let mut session = Session {
        addr: s.addr.clone(),
        table: s.table.clone(),
        client: None,
        shared: shared.clone(),
    };
    let running = |count: u64| count < quota && shared.stop.is_none_or(|t| Instant::now() < t);
    let settle_by = || shared.stop.unwrap_or_else(Instant::now) + s.grace;
    // With a rate, batch k of this writer starts no earlier than k batch-times after the
    // first (each writer takes its share of the rate).
    let per_writer = s.rate as f64 / f64::from(s.writers.max(1));
    let mut next_batch = Instant::now();
    while running(count) {
        // A circle: its first batch (the lists' heads) and each list's last node.
        let mut first: Vec<Node> = Vec::new();
        let mut tails: Vec<Key> = Vec::new();
        for _ in 0..s.wrap {
            if !running(count) {
                break;
            }
            let width = u64::from(s.width).min(quota - count);
            let width = usize::try_from(width)
                .unwrap_or(usize::MAX)
                .min(if first.is_empty() {
                    usize::MAX
                } else {
                    first.len()
                });
            let batch: Vec<Node> = (0..width)
                .map(|i| {
                    let mut key = [0u8; 16];
                    rng.fill_bytes(&mut key);
                    Node {
                        key,
                        prev: tails.get(i).copied(),
                        client: name.clone(),
                        count: count + i as u64,
                    }
                })
                .collect();
            if per_writer > 0.0 {
                let now = Instant::now();
                if next_batch > now {
                    tokio::time::sleep(next_batch - now).await;
                }
                // After an outage, carry on at the rate rather than catching up in a burst.
                next_batch =
                    next_batch.max(now) + Duration::from_secs_f64(batch.len() as f64 / per_writer);
            }
            let acked = session.write_all(&batch, settle_by()).await;
            if acked < batch.len() {
                // The run ended with this batch unacknowledged: it may or may not be there.
                shared
                    .counters
                    .acknowledged
                    .fetch_add(acked as u64, Ordering::Relaxed);
                shared
                    .counters
                    .unsettled
                    .fetch_add((batch.len() - acked) as u64, Ordering::Relaxed);
                // Nothing points at the lists' last acknowledged nodes, nor at the nodes of
                // this batch that were acknowledged.
                shared
                    .counters
                    .open_heads
                    .fetch_add((tails.len() + acked) as u64, Ordering::Relaxed);
                return;
            }
            shared
                .counters
                .acknowledged
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            count += batch.len() as u64;
            for (i, n) in batch.iter().enumerate() {
                match tails.get_mut(i) {
                    Some(t) => *t = n.key,
                    None => tails.push(n.key),
                }
            }
            if first.is_empty() {
                first = batch;
            }
        }
        if first.is_empty() {
            return;
        }
        // Close: list i's head points at list i+1's last node.
        let closing: Vec<Node> = first
            .iter()
            .enumerate()
            .map(|(i, n)| Node {
                prev: tails.get((i + 1) % tails.len().max(1)).copied(),
                ..n.clone()
            })
            .collect();
        let acked = session.write_all(&closing, settle_by()).await;
        shared
            .counters
            .open_heads
            .fetch_add((closing.len() - acked) as u64, Ordering::Relaxed);
        if acked == closing.len() {
            shared
                .counters
                .circles_closed
                .fetch_add(1, Ordering::Relaxed);
        } else {
            return;
        }
    }
}

/// A writer's connection, replaced when the server goes away.
struct Session {
    addr: String,
    table: String,
    client: Option<Client>,
    shared: Arc<Shared>,
}

impl Session {
    /// Writes every node, resending what fails, until all are acknowledged or `until`;
    /// returns how many were acknowledged (the nodes not acknowledged are its last ones in
    /// no particular order — only the count matters).
    async fn write_all(&mut self, nodes: &[Node], until: Instant) -> usize {
        let mut pending: Vec<&Node> = nodes.iter().collect();
        let mut waiting = false;
        let counters = &self.shared.counters;
        while !pending.is_empty() {
            if Instant::now() >= until {
                break;
            }
            let client = match &self.client {
                Some(c) => c.clone(),
                None => match Client::connect_with(&self.addr, client_config()).await {
                    Ok(c) => {
                        self.client = Some(c.clone());
                        c
                    }
                    Err(_) => {
                        if !waiting {
                            waiting = true;
                            counters.waiting.fetch_add(1, Ordering::Relaxed);
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                },
            };
            let ops = pending
                .iter()
                .map(|n| BatchOp::Mutate(n.mutation()))
                .collect();
            // A call that failed as a whole leaves every node pending.
            let answer = client.table(&self.table).batch(ops).await;
            if let Some(outcomes) = answer.ok().filter(|o| o.len() == pending.len()) {
                let mut left = Vec::new();
                for (n, o) in pending.iter().zip(outcomes) {
                    if o.is_err() {
                        left.push(*n);
                    }
                }
                pending = left;
            }
            if !pending.is_empty() {
                counters
                    .resent
                    .fetch_add(pending.len() as u64, Ordering::Relaxed);
                if !waiting {
                    waiting = true;
                    counters.waiting.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        if waiting {
            counters.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        nodes.len() - pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_add_up() {
        for (nodes, writers) in [(10, 3), (3, 5), (100, 1), (7, 7)] {
            let total: u64 = (0..writers).map(|w| share(nodes, writers, w)).sum();
            assert_eq!(total, nodes, "{nodes} over {writers}");
        }
        assert_eq!(share(0, 4, 2), u64::MAX);
    }
}
