//! Prometheus metrics: what the RPC front end counts ([`RpcMetrics`]: calls and latency per
//! method, errors by code, bytes, connections, queue depth) and what the region server reports
//! ([`Gauges`], defined with the rest of its status in [`crate::status`]), rendered in Prometheus' text format by [`render`].
//!
//! Counters and histograms are plain atomics, so a handler thread records a call without a
//! lock and `/metrics` reads a consistent-enough snapshot without stopping anyone.

pub mod slow;

use crate::status::Gauges;
use cellar_proto::pb;
pub use slow::{SlowCall, SlowCalls};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

/// This process's resident memory and the most it may use (the machine's memory, or its
/// memory cgroup's limit when lower), in bytes; 0 when unknown.
pub fn process_memory() -> (u64, u64) {
    let kib_field = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    let used = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| kib_field(&s, "VmRSS:"));
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| kib_field(&s, "MemTotal:"));
    // A memory cgroup's limit, when lower (v2, then v1).
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok());
    let max = match (machine, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    };
    (used.unwrap_or(0), max.unwrap_or(0))
}

/// Upper bounds of the latency buckets, in microseconds (25 µs … 10 s). Fixed so that series
/// from different servers and restarts add up.
pub const LATENCY_BUCKETS_US: [u64; 18] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// A latency histogram with [`LATENCY_BUCKETS_US`] buckets and a `+Inf` bucket.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per-bucket (not cumulative) counts; the last one is `+Inf`.
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len() + 1],
    sum_nanos: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    pub fn record(&self, d: Duration) {
        let us = d.as_micros();
        let i = LATENCY_BUCKETS_US
            .iter()
            .position(|&b| us <= b as u128)
            .unwrap_or(LATENCY_BUCKETS_US.len());
        self.buckets[i].fetch_add(1, Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Appends `name_bucket`, `name_sum` and `name_count` lines; `labels` is either empty or
    /// `key="value",…` without braces.
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0u64;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Relaxed);
            let le = match LATENCY_BUCKETS_US.get(i) {
                Some(us) => format!("{}", *us as f64 / 1e6),
                None => "+Inf".to_string(),
            };
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let sum = self.sum_nanos.load(Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        // The count is the +Inf bucket, so the two always agree in one rendering.
        let _ = writeln!(out, "{name}_count{braces} {cumulative}");
    }
}

/// Method and error-code numbers below this are counted on their own; protocol enums stay far
/// below it (methods reach 31, error codes 17), and anything above is folded into slot 0.
const SLOTS: usize = 64;

fn slot(n: i32) -> usize {
    usize::try_from(n).ok().filter(|&i| i < SLOTS).unwrap_or(0)
}

/// Calls of one method: how many and how long each took on the server.
#[derive(Debug, Default)]
struct MethodStats {
    latency: Histogram,
}

/// What the RPC front end counts. Shared by the front end (writes) and `/metrics` (reads).
#[derive(Debug)]
pub struct RpcMetrics {
    methods: Vec<MethodStats>,
    errors: Vec<AtomicU64>,
    /// Time a call waited in the handler queue before a handler took it.
    queue_wait: Histogram,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    connections_open: AtomicUsize,
    connections_total: AtomicU64,
    queue_depth: AtomicUsize,
    handlers_busy: AtomicUsize,
    /// Bytes of requests read and not yet answered plus answers not yet written, over all
    /// connections (`crate::rpc::budget`).
    in_flight_bytes: AtomicU64,
    /// The most `in_flight_bytes` has been since start.
    in_flight_peak: AtomicU64,
    /// The configured bound of `in_flight_bytes` (`rpc.max_in_flight_bytes`).
    in_flight_limit: AtomicU64,
    /// Calls refused as busy because the handler queue was full.
    refused_queue_full: AtomicU64,
    /// Calls refused as busy because in-flight bytes were past their bound.
    refused_in_flight: AtomicU64,
    /// Connections not being read now because their own in-flight bytes are past their bound.
    stalled_connections: AtomicUsize,
    /// Connections closed because a handshake, a frame or a write did not finish in time.
    connection_timeouts: AtomicU64,
    /// TLS handshakes that failed (an untrusted, expired or missing client certificate, a
    /// client that gave up) on a TLS port.
    tls_handshake_failures: AtomicU64,
    /// Plaintext clients turned away from a TLS port.
    tls_plaintext_refused: AtomicU64,
    /// Calls slower than `rpc.slow_call_ms`.
    slow: SlowCalls,
}

/// Why a call was refused as busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overload {
    /// The handler queue was full (`rpc.max_queued_calls`).
    CallQueue,
    /// In-flight bytes were past `rpc.max_in_flight_bytes` (or the connection's answer would
    /// have taken it past `rpc.max_connection_in_flight_bytes`).
    InFlightBytes,
}

impl Default for RpcMetrics {
    fn default() -> Self {
        RpcMetrics {
            methods: (0..SLOTS).map(|_| MethodStats::default()).collect(),
            errors: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            queue_wait: Histogram::default(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            connections_open: AtomicUsize::new(0),
            connections_total: AtomicU64::new(0),
            queue_depth: AtomicUsize::new(0),
            handlers_busy: AtomicUsize::new(0),
            in_flight_bytes: AtomicU64::new(0),
            in_flight_peak: AtomicU64::new(0),
            in_flight_limit: AtomicU64::new(0),
            refused_queue_full: AtomicU64::new(0),
            refused_in_flight: AtomicU64::new(0),
            stalled_connections: AtomicUsize::new(0),
            connection_timeouts: AtomicU64::new(0),
            tls_handshake_failures: AtomicU64::new(0),
            tls_plaintext_refused: AtomicU64::new(0),
            slow: SlowCalls::default(),
        }
    }
}

impl RpcMetrics {
    /// A call answered (successfully or not) after `elapsed` on the server.
    pub fn record_call(&self, method: pb::Method, elapsed: Duration) {
        self.methods[slot(method as i32)].latency.record(elapsed);
        self.slow
            .record("native", method.as_str_name(), elapsed, false);
    }

    /// A call of `method` of a protocol without Cellar method numbers (HBase's), answered
    /// after `elapsed`.
    pub fn record_other_call(&self, method: &str, elapsed: Duration, failed: bool) {
        self.methods[0].latency.record(elapsed);
        self.slow.record("hbase", method, elapsed, failed);
        if failed {
            self.errors[0].fetch_add(1, Relaxed);
        }
    }

    /// A call answered with an error.
    pub fn record_error(&self, code: pb::ErrorCode) {
        self.errors[slot(code as i32)].fetch_add(1, Relaxed);
    }

    pub fn record_queue_wait(&self, waited: Duration) {
        self.queue_wait.record(waited);
    }

    pub fn add_bytes_in(&self, n: usize) {
        self.bytes_in.fetch_add(n as u64, Relaxed);
    }

    pub fn add_bytes_out(&self, n: usize) {
        self.bytes_out.fetch_add(n as u64, Relaxed);
    }

    pub fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Relaxed);
        self.connections_total.fetch_add(1, Relaxed);
    }

    pub fn connection_closed(&self) {
        // Saturating: a miscount must not wrap the gauge to 2^64.
        let _ = self
            .connections_open
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
    }

    /// A call of this front end joined the handler queue (which both front ends share).
    pub(crate) fn queued(&self) {
        self.queue_depth.fetch_add(1, Relaxed);
    }

    /// A call of this front end left the handler queue; called under the queue's lock, after
    /// its [`RpcMetrics::queued`], so the gauge never goes below zero.
    pub(crate) fn dequeued(&self) {
        let _ = self
            .queue_depth
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
    }

    pub(crate) fn handler_started(&self) {
        self.handlers_busy.fetch_add(1, Relaxed);
    }

    pub(crate) fn handler_finished(&self) {
        let _ = self
            .handlers_busy
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
    }

    pub(crate) fn add_in_flight(&self, n: u64) {
        let now = self.in_flight_bytes.fetch_add(n, Relaxed).wrapping_add(n);
        // Read first: the peak's line is written only when a new peak is reached.
        if now > self.in_flight_peak.load(Relaxed) {
            self.in_flight_peak.fetch_max(now, Relaxed);
        }
    }

    pub(crate) fn sub_in_flight(&self, n: u64) {
        self.in_flight_bytes.fetch_sub(n, Relaxed);
    }

    pub(crate) fn set_in_flight_limit(&self, limit: u64) {
        self.in_flight_limit.store(limit, Relaxed);
    }

    /// A call refused as busy because the server is overloaded.
    pub fn record_overload(&self, why: Overload) {
        match why {
            Overload::CallQueue => &self.refused_queue_full,
            Overload::InFlightBytes => &self.refused_in_flight,
        }
        .fetch_add(1, Relaxed);
    }

    pub(crate) fn connection_stalled(&self) {
        self.stalled_connections.fetch_add(1, Relaxed);
    }

    pub(crate) fn connection_resumed(&self) {
        let _ = self
            .stalled_connections
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
    }

    pub(crate) fn connection_timed_out(&self) {
        self.connection_timeouts.fetch_add(1, Relaxed);
    }

    pub(crate) fn tls_handshake_failed(&self) {
        self.tls_handshake_failures.fetch_add(1, Relaxed);
    }

    pub(crate) fn tls_plaintext_refused(&self) {
        self.tls_plaintext_refused.fetch_add(1, Relaxed);
    }

    /// The calls slower than `rpc.slow_call_ms`.
    pub fn slow_calls(&self) -> &SlowCalls {
        &self.slow
    }

    /// Handlers running a call of this front end now.
    pub fn handlers_busy(&self) -> usize {
        self.handlers_busy.load(Relaxed)
    }

    /// Failed TLS handshakes since start.
    pub fn tls_handshake_failures(&self) -> u64 {
        self.tls_handshake_failures.load(Relaxed)
    }

    /// Plaintext clients turned away from a TLS port since start.
    pub fn tls_plaintext_refusals(&self) -> u64 {
        self.tls_plaintext_refused.load(Relaxed)
    }

    /// Bytes of requests read and not yet answered plus answers not yet written, now.
    pub fn in_flight_bytes(&self) -> u64 {
        self.in_flight_bytes.load(Relaxed)
    }

    /// The most [`RpcMetrics::in_flight_bytes`] has been since start.
    pub fn in_flight_peak(&self) -> u64 {
        self.in_flight_peak.load(Relaxed)
    }

    /// The configured bound of [`RpcMetrics::in_flight_bytes`].
    pub fn in_flight_limit(&self) -> u64 {
        self.in_flight_limit.load(Relaxed)
    }

    /// Calls refused as busy for `why` since start.
    pub fn overload_refusals(&self, why: Overload) -> u64 {
        match why {
            Overload::CallQueue => &self.refused_queue_full,
            Overload::InFlightBytes => &self.refused_in_flight,
        }
        .load(Relaxed)
    }

    /// Connections whose reading is paused until their answers drain.
    pub fn stalled_connections(&self) -> usize {
        self.stalled_connections.load(Relaxed)
    }

    /// Connections closed by a handshake, frame or write timeout since start.
    pub fn connection_timeouts(&self) -> u64 {
        self.connection_timeouts.load(Relaxed)
    }

    /// Calls of `method` answered so far.
    pub fn calls(&self, method: pb::Method) -> u64 {
        self.methods[slot(method as i32)].latency.count()
    }

    /// Calls answered so far, all methods.
    pub fn total_calls(&self) -> u64 {
        self.methods.iter().map(|m| m.latency.count()).sum()
    }

    /// Errors of `code` answered so far.
    pub fn errors(&self, code: pb::ErrorCode) -> u64 {
        self.errors[slot(code as i32)].load(Relaxed)
    }

    pub fn open_connections(&self) -> usize {
        self.connections_open.load(Relaxed)
    }

    pub fn queue_depth(&self) -> usize {
        self.queue_depth.load(Relaxed)
    }

    pub fn bytes_in(&self) -> u64 {
        self.bytes_in.load(Relaxed)
    }

    pub fn bytes_out(&self) -> u64 {
        self.bytes_out.load(Relaxed)
    }
}

/// Escapes a label value for the text format (backslash, quote, newline).
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn single(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    header(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// The Prometheus text exposition (format 0.0.4) of the RPC counters and the region server's
/// gauges.
pub fn render(rpc: &RpcMetrics, hbase: Option<&RpcMetrics>, gauges: &Gauges) -> String {
    let mut out = String::with_capacity(8 * 1024);
    render_rpc(&mut out, rpc);
    if let Some(h) = hbase {
        render_hbase(&mut out, h);
    }
    render_gauges(&mut out, gauges);
    out
}

/// The HBase-compatible front end's counters (its calls are not split by method: HBase
/// method names are strings, counted together).
fn render_hbase(out: &mut String, rpc: &RpcMetrics) {
    let name = "cellar_hbase_call_duration_seconds";
    header(
        out,
        name,
        "histogram",
        "HBase protocol calls: time from a request's arrival to its response being queued.",
    );
    rpc.methods[0].latency.render(out, name, "");
    let name = "cellar_hbase_queue_wait_seconds";
    header(
        out,
        name,
        "histogram",
        "Time an HBase call waited for a handler.",
    );
    rpc.queue_wait.render(out, name, "");
    single(
        out,
        "cellar_hbase_errors_total",
        "counter",
        "HBase protocol calls answered with an exception.",
        rpc.errors[0].load(Relaxed),
    );
    single(
        out,
        "cellar_hbase_received_bytes_total",
        "counter",
        "Bytes read from HBase protocol connections.",
        rpc.bytes_in(),
    );
    single(
        out,
        "cellar_hbase_sent_bytes_total",
        "counter",
        "Bytes written to HBase protocol connections.",
        rpc.bytes_out(),
    );
    single(
        out,
        "cellar_hbase_open_connections",
        "gauge",
        "HBase protocol connections open now.",
        rpc.open_connections(),
    );
    single(
        out,
        "cellar_hbase_call_queue_length",
        "gauge",
        "HBase calls waiting for a handler thread.",
        rpc.queue_depth(),
    );
    render_overload(out, "cellar_hbase", "HBase protocol", rpc);
}

/// In-flight bytes, refusals for overload, stalled and timed-out connections of one front end.
fn render_overload(out: &mut String, prefix: &str, front: &str, rpc: &RpcMetrics) {
    single(
        out,
        &format!("{prefix}_in_flight_bytes"),
        "gauge",
        &format!(
            "{front}: bytes of requests read and not yet answered plus answers not yet written."
        ),
        rpc.in_flight_bytes(),
    );
    single(
        out,
        &format!("{prefix}_in_flight_bytes_peak"),
        "gauge",
        &format!("{front}: the most in-flight bytes since start."),
        rpc.in_flight_peak(),
    );
    single(
        out,
        &format!("{prefix}_in_flight_bytes_limit"),
        "gauge",
        &format!("{front}: the bound on in-flight bytes (rpc.max_in_flight_bytes)."),
        rpc.in_flight_limit(),
    );
    let name = format!("{prefix}_overload_refusals_total");
    header(
        out,
        &name,
        "counter",
        &format!("{front}: calls refused as busy because the server was overloaded, by reason."),
    );
    for (reason, why) in [
        ("call_queue", Overload::CallQueue),
        ("in_flight_bytes", Overload::InFlightBytes),
    ] {
        let _ = writeln!(
            out,
            "{name}{{reason=\"{reason}\"}} {}",
            rpc.overload_refusals(why)
        );
    }
    single(
        out,
        &format!("{prefix}_stalled_connections"),
        "gauge",
        &format!("{front}: connections not read now because their unanswered and unwritten bytes are past rpc.max_connection_in_flight_bytes."),
        rpc.stalled_connections(),
    );
    single(
        out,
        &format!("{prefix}_connection_timeouts_total"),
        "counter",
        &format!("{front}: connections closed because a handshake, a frame or a write did not finish in time."),
        rpc.connection_timeouts(),
    );
    single(
        out,
        &format!("{prefix}_tls_handshake_failures_total"),
        "counter",
        &format!("{front}: TLS handshakes that failed (untrusted, expired or missing client certificate)."),
        rpc.tls_handshake_failures(),
    );
    single(
        out,
        &format!("{prefix}_tls_plaintext_refused_total"),
        "counter",
        &format!("{front}: plaintext connections turned away from a TLS port."),
        rpc.tls_plaintext_refusals(),
    );
}

fn render_rpc(out: &mut String, rpc: &RpcMetrics) {
    let name = "cellar_rpc_call_duration_seconds";
    header(
        out,
        name,
        "histogram",
        "Time from a request frame's arrival to its response being queued, per method.",
    );
    for (i, m) in rpc.methods.iter().enumerate() {
        if m.latency.count() == 0 {
            continue;
        }
        let method = pb::Method::try_from(i as i32)
            .map(|m| m.as_str_name())
            .unwrap_or("OTHER");
        m.latency.render(out, name, &format!("method=\"{method}\""));
    }
    let name = "cellar_rpc_queue_wait_seconds";
    header(
        out,
        name,
        "histogram",
        "Time a call waited in the handler queue.",
    );
    rpc.queue_wait.render(out, name, "");

    let name = "cellar_rpc_errors_total";
    header(
        out,
        name,
        "counter",
        "Calls answered with an error, by code.",
    );
    for (i, e) in rpc.errors.iter().enumerate() {
        let n = e.load(Relaxed);
        if n == 0 {
            continue;
        }
        let code = pb::ErrorCode::try_from(i as i32)
            .map(|c| c.as_str_name())
            .unwrap_or("OTHER");
        let _ = writeln!(out, "{name}{{code=\"{code}\"}} {n}");
    }
    single(
        out,
        "cellar_rpc_received_bytes_total",
        "counter",
        "Bytes read from native RPC connections.",
        rpc.bytes_in(),
    );
    single(
        out,
        "cellar_rpc_sent_bytes_total",
        "counter",
        "Bytes written to native RPC connections.",
        rpc.bytes_out(),
    );
    single(
        out,
        "cellar_rpc_open_connections",
        "gauge",
        "Native RPC connections open now.",
        rpc.open_connections(),
    );
    single(
        out,
        "cellar_rpc_connections_total",
        "counter",
        "Native RPC connections accepted since start.",
        rpc.connections_total.load(Relaxed),
    );
    single(
        out,
        "cellar_rpc_call_queue_length",
        "gauge",
        "Calls waiting for a handler thread.",
        rpc.queue_depth(),
    );
    single(
        out,
        "cellar_rpc_handlers_busy",
        "gauge",
        "Handler threads running a call now.",
        rpc.handlers_busy.load(Relaxed),
    );
    render_overload(out, "cellar_rpc", "Native RPC", rpc);
}

fn render_gauges(out: &mut String, g: &Gauges) {
    single(
        out,
        "cellar_memstore_bytes",
        "gauge",
        "Bytes held in memstores.",
        g.memstore_bytes,
    );
    single(
        out,
        "cellar_store_file_bytes",
        "gauge",
        "Bytes of store files.",
        g.store_file_bytes,
    );
    single(
        out,
        "cellar_store_files",
        "gauge",
        "Store files open.",
        g.store_files,
    );
    single(
        out,
        "cellar_block_cache_hits_total",
        "counter",
        "Block cache lookups that hit.",
        g.block_cache_hits,
    );
    single(
        out,
        "cellar_block_cache_misses_total",
        "counter",
        "Block cache lookups that missed.",
        g.block_cache_misses,
    );
    let q = &g.query_cache;
    for (name, kind, help, value) in [
        (
            "cellar_query_cache_hits_total",
            "counter",
            "Gets answered from the query cache.",
            q.hits,
        ),
        (
            "cellar_query_cache_misses_total",
            "counter",
            "Query-cacheable Gets that read (then offered their result).",
            q.misses,
        ),
        (
            "cellar_query_cache_bypasses_total",
            "counter",
            "Query-cacheable Gets that read past the cache: a write of their row was in progress.",
            q.bypasses,
        ),
        (
            "cellar_query_cache_fills_total",
            "counter",
            "Results put into the query cache.",
            q.fills,
        ),
        (
            "cellar_query_cache_fills_refused_total",
            "counter",
            "Results not kept: a write in their shard began or ended while the Get read.",
            q.fills_refused,
        ),
        (
            "cellar_query_cache_evictions_total",
            "counter",
            "Query cache entries evicted for room.",
            q.evictions,
        ),
        (
            "cellar_query_cache_invalidations_total",
            "counter",
            "Rows whose cached results a write dropped.",
            q.invalidations,
        ),
        (
            "cellar_query_cache_bytes",
            "gauge",
            "Bytes the query cache holds.",
            q.bytes,
        ),
        (
            "cellar_query_cache_entries",
            "gauge",
            "Rows the query cache holds results of.",
            q.entries,
        ),
        (
            "cellar_query_cache_capacity_bytes",
            "gauge",
            "The query cache's budget (storage.query_cache_bytes).",
            q.capacity,
        ),
    ] {
        single(out, name, kind, help, value);
    }
    single(
        out,
        "cellar_block_cache_hit_ratio",
        "gauge",
        "Block cache hits over lookups since start.",
        g.block_cache_hit_ratio(),
    );
    single(
        out,
        "cellar_flush_queue_length",
        "gauge",
        "Regions waiting for or running a flush.",
        g.flush_queue,
    );
    single(
        out,
        "cellar_compaction_queue_length",
        "gauge",
        "Stores waiting for or running a compaction.",
        g.compaction_queue,
    );
    single(
        out,
        "cellar_open_scanners",
        "gauge",
        "Scanners open under a lease.",
        g.open_scanners,
    );
    single(
        out,
        "cellar_prepared_scan_open",
        "gauge",
        "Prepared scans held for their connections.",
        g.prepared_scans_open,
    );
    single(
        out,
        "cellar_prepared_scan_prepared_total",
        "counter",
        "Scans prepared (PREPARE_SCAN).",
        g.prepared_scans_total,
    );
    single(
        out,
        "cellar_prepared_scan_executions_total",
        "counter",
        "Executions of prepared scans (SCAN_OPEN with a handle).",
        g.prepared_scan_executions,
    );
    single(
        out,
        "cellar_splits_total",
        "counter",
        "Region splits since start.",
        g.splits,
    );
    let sink = &g.replication_sink;
    for (name, help, value) in [
        (
            "cellar_replication_sink_batches_total",
            "ReplicateWALEntry calls applied whole (HBase's sink.appliedBatches).",
            sink.batches,
        ),
        (
            "cellar_replication_sink_failed_batches_total",
            "ReplicateWALEntry calls that failed; their source sends them again (sink.failedBatches).",
            sink.failed_batches,
        ),
        (
            "cellar_replication_sink_entries_total",
            "WAL entries replicated in and applied (sink.appliedOps).",
            sink.entries,
        ),
        (
            "cellar_replication_sink_cells_total",
            "Cells replicated in and applied.",
            sink.cells,
        ),
        (
            "cellar_replication_sink_bytes_total",
            "Encoded bytes of the cells replicated in and applied.",
            sink.bytes,
        ),
        (
            "cellar_replication_sink_hfiles_total",
            "Bulk-loaded files replicated in and applied (sink.appliedHFiles).",
            sink.hfiles,
        ),
        (
            "cellar_replication_sink_hfile_cells_total",
            "Cells of replicated bulk-loaded files applied.",
            sink.hfile_cells,
        ),
    ] {
        single(out, name, "counter", help, value);
    }
    single(
        out,
        "cellar_replication_sink_lag_ms",
        "gauge",
        "How far behind its source (its write time) the last replicated batch was when applied (sink.ageOfLastAppliedOp).",
        sink.lag_ms,
    );
    single(
        out,
        "cellar_region_read_requests_total",
        "counter",
        "Gets and scanned rows served by the regions open here (each counted since it opened here).",
        g.read_requests,
    );
    single(
        out,
        "cellar_region_write_requests_total",
        "counter",
        "Mutations admitted by the regions open here (each counted since it opened here).",
        g.write_requests,
    );
    single(
        out,
        "cellar_region_writes_blocked_total",
        "counter",
        "Writes held back by a full memstore or too many store files until flushes and compactions caught up (each region counted since it opened here).",
        g.writes_blocked,
    );
    single(
        out,
        "cellar_region_writes_blocked_ms_total",
        "counter",
        "Milliseconds writes were held back by a full memstore or too many store files (HBase's updatesBlockedTime).",
        g.writes_blocked_ms,
    );
    single(
        out,
        "cellar_wal_healthy",
        "gauge",
        "1 while the write-ahead log accepts writes; 0 when a failure makes it refuse them (see /status).",
        u64::from(g.wal_state == "ok"),
    );
    single(
        out,
        "cellar_wal_failures_total",
        "counter",
        "Failed WAL writes and syncs since start.",
        g.wal_failures,
    );
    single(
        out,
        "cellar_wal_recoveries_total",
        "counter",
        "Times the WAL recovered by itself from a failed write (a full disk that freed up).",
        g.wal_recoveries,
    );
    single(
        out,
        "cellar_wal_buffered_bytes",
        "gauge",
        "WAL records waiting to be handed to the OS.",
        g.wal_buffered_bytes,
    );
    let name = "cellar_regions";
    header(out, name, "gauge", "Regions open, per table.");
    for (table, n) in &g.regions_per_table {
        let _ = writeln!(out, "{name}{{table=\"{}\"}} {n}", escape_label(table));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_count_matches() {
        let h = Histogram::default();
        h.record(Duration::from_micros(10));
        h.record(Duration::from_micros(30));
        h.record(Duration::from_secs(60));
        let mut out = String::new();
        h.render(&mut out, "x", "method=\"GET\"");
        assert!(
            out.contains("x_bucket{method=\"GET\",le=\"0.000025\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{method=\"GET\",le=\"0.00005\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{method=\"GET\",le=\"10\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{method=\"GET\",le=\"+Inf\"} 3\n"),
            "{out}"
        );
        assert!(out.contains("x_count{method=\"GET\"} 3\n"), "{out}");
        assert!(out.contains("x_sum{method=\"GET\"} 60.00004\n"), "{out}");
    }

    #[test]
    fn render_names_methods_codes_and_tables() {
        let m = RpcMetrics::default();
        m.record_call(pb::Method::Get, Duration::from_micros(700));
        m.record_error(pb::ErrorCode::ServerBusy);
        m.record_overload(Overload::InFlightBytes);
        m.add_in_flight(300);
        m.sub_in_flight(100);
        m.connection_opened();
        m.connection_opened();
        m.connection_closed();
        m.connection_closed();
        m.connection_closed();
        let g = Gauges {
            regions_per_table: vec![("hbase:meta".into(), 1), ("we\"ird".into(), 3)],
            block_cache_hits: 3,
            block_cache_misses: 1,
            ..Gauges::default()
        };
        let text = render(&m, None, &g);
        assert!(
            !text.contains("cellar_hbase_"),
            "no HBase section without that front end"
        );
        assert!(text.contains("cellar_rpc_call_duration_seconds_count{method=\"GET\"} 1\n"));
        assert!(text.contains("cellar_rpc_errors_total{code=\"SERVER_BUSY\"} 1\n"));
        assert!(text.contains("cellar_rpc_in_flight_bytes 200\n"), "{text}");
        assert!(
            text.contains("cellar_rpc_in_flight_bytes_peak 300\n"),
            "{text}"
        );
        assert!(
            text.contains("cellar_rpc_overload_refusals_total{reason=\"in_flight_bytes\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("cellar_rpc_overload_refusals_total{reason=\"call_queue\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("cellar_rpc_open_connections 0\n"), "{text}");
        assert!(text.contains("cellar_regions{table=\"hbase:meta\"} 1\n"));
        assert!(text.contains("cellar_regions{table=\"we\\\"ird\"} 3\n"));
        assert!(text.contains("cellar_block_cache_hit_ratio 0.75\n"));
        assert_eq!(m.calls(pb::Method::Get), 1);
        assert_eq!(m.total_calls(), 1);

        let h = RpcMetrics::default();
        h.record_other_call("Get", Duration::from_micros(40), false);
        h.record_other_call("Get", Duration::from_micros(90), true);
        h.connection_opened();
        let text = render(&m, Some(&h), &g);
        assert!(
            text.contains("cellar_hbase_call_duration_seconds_count 2\n"),
            "{text}"
        );
        assert!(text.contains("cellar_hbase_errors_total 1\n"), "{text}");
        assert!(text.contains("cellar_hbase_open_connections 1\n"), "{text}");
        assert!(text.contains("cellar_hbase_in_flight_bytes 0\n"), "{text}");
        assert!(text.contains("cellar_rpc_call_duration_seconds_count{method=\"GET\"} 1\n"));
    }
}
