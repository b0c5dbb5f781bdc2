//! Server configuration: `cellar.toml`. Every option has a default (HBase's where HBase has
//! one); an unknown key or a bad value is an error that names it. Reference: `docs/configuration.md`.

use cellar_storage::fs::HDFS_DEFAULT_WRITE_BUFFER;
use cellar_storage::memstore::chunk_pool;
use cellar_storage::region::{CompactionStyle, StorageConfig};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Native RPC port when `--listen` is not given (HBase's own 16000/16020 stay free for the
/// HBase-compatible front end).
pub const DEFAULT_NATIVE_PORT: u16 = 16200;
/// Metrics and status HTTP port.
pub const DEFAULT_HTTP_PORT: u16 = 16210;
/// HBase-compatible RPC port: HBase's region server port, so HBase clients' defaults fit.
pub const DEFAULT_HBASE_PORT: u16 = 16020;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Where tables, the meta table and the WAL live.
    pub data_dir: PathBuf,
    /// The same as a URL, choosing the file system: `file:///PATH` (local disk) or
    /// `hdfs://HOST:PORT/PATH` (HDFS). Empty: `data_dir` on local disk.
    pub root: String,
    /// Native RPC address.
    pub listen: String,
    /// Metrics (`/metrics`) and status (`/status`) address.
    pub http_listen: String,
    /// HBase-compatible RPC address (`docs/hbase-protocol.md`); empty: no HBase front end.
    pub hbase_listen: String,
    pub rpc: RpcConfig,
    pub scanner: ScannerConfig,
    pub split: SplitConfig,
    pub storage: StorageSection,
    pub cluster: ClusterConfig,
    pub tls: TlsConfig,
    pub security: SecurityConfig,
    pub thrift: ThriftConfig,
    pub bulk_load: BulkLoadConfig,
}

/// Bulk load (`docs/migration.md`): the directories a region server reads HBase store files
/// from when a caller asks it to bring them into a region: local directories, or HDFS ones
/// given as `hdfs://HOST:PORT/DIR` (an HBase root on HDFS). Nothing else is ever read for a
/// caller: a path that is not under one of them (symbolic links resolved; an HDFS URL on
/// another NameNode) is refused (`bulk_files.rs`). Empty: bulk load is off.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BulkLoadConfig {
    pub dirs: Vec<PathBuf>,
}

/// The Thrift gateway (HBase's Thrift1 interface, `docs/thrift.md`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ThriftConfig {
    /// Where the gateway listens (`--thrift-listen`); empty: no gateway. HBase's Thrift
    /// server uses port 9090.
    pub listen: String,
    /// The user Thrift callers without a client certificate act as: every call of a plain
    /// Thrift port, and of a TLS one (`tls`) whose caller presented no certificate. The
    /// gateway makes its calls for them as this user (never as the server's own, superuser,
    /// identity). With `security.authorization` on it must be set, and not be a superuser,
    /// unless every caller presents a certificate; empty with authorization off: the user
    /// running the server.
    pub user: String,
    /// Serve TLS on the Thrift port with the server's `[tls]` certificate, asking callers
    /// for client certificates signed by `tls.client_ca` (`tls.client_auth`); a caller with
    /// one is the user it names, and the gateway calls for that user (HBase's Thrift server
    /// with `hbase.thrift.ssl.enabled` and `doAs`). happybase speaks no TLS.
    pub tls: bool,
    /// Threads serving Thrift connections.
    pub threads: usize,
    /// Open connections beyond this are refused.
    pub max_connections: u32,
    /// Open scanners beyond this are refused (a client that never closes its scanners).
    pub max_scanners: usize,
    /// The largest call accepted, framed or not (HBase's default frame limit is 2 MiB; a
    /// batch of puts can be larger). A call's decoded values may take twice this in memory.
    pub max_message_bytes: u64,
    /// A scanner unused this long is closed (HBase forgets one after twice
    /// `hbase.client.scanner.timeout.period`: 120 s).
    pub scanner_lease_ms: u64,
}

impl Default for ThriftConfig {
    fn default() -> Self {
        ThriftConfig {
            listen: String::new(),
            user: String::new(),
            tls: false,
            threads: 2,
            max_connections: 1000,
            max_scanners: 10_000,
            max_message_bytes: 64 * 1024 * 1024,
            scanner_lease_ms: 120_000,
        }
    }
}

/// Who may do what (`docs/security.md`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityConfig {
    /// Check every call of both front ends against the granted permissions (HBase's
    /// `hbase.security.authorization`). Off: everyone may do everything.
    pub authorization: bool,
    /// Users, and `@groups`, who may do everything (HBase's `hbase.superuser`). The user
    /// running the server and the user of the server's own certificate always are.
    pub superusers: Vec<String>,
    /// Groups and their members: `ops = ["alice", "bob"]` (HBase asks the OS; a grant to
    /// `@ops` is a grant to each member).
    pub groups: std::collections::BTreeMap<String, Vec<String>>,
    /// Whose word is taken for who a client is when it presents no certificate (HBase's SIMPLE
    /// authentication): `loopback` (clients on this machine), `always`, or `never`.
    pub simple_users: SimpleUsers,
    /// The audit log: authentication failures and denied calls, one JSON line each; empty:
    /// `<data_dir>/audit.log` (a local path even with an HDFS root).
    pub audit_log: Option<PathBuf>,
    /// A file holding the token `/metrics` and `/status` require (`Authorization: Bearer
    /// TOKEN`); unset: no token. With TLS and a client CA, a client certificate also lets a
    /// scraper in.
    pub http_token_file: Option<PathBuf>,
    /// Who may act for whom (HBase's `hadoop.proxyuser.<user>.users` / `.groups`): a
    /// connection's user that is a key here may make calls as the users (`"alice"`), members
    /// of the groups (`"@ops"`) or anyone (`"*"`) its list names, by the request header's
    /// `effective_user`; the Thrift gateway calls for its callers so. Nobody else may.
    pub proxy_users: std::collections::BTreeMap<String, Vec<String>>,
}

/// Whose word is taken for a connection's user without a certificate.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum SimpleUsers {
    #[default]
    Loopback,
    Always,
    Never,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            authorization: false,
            superusers: Vec::new(),
            groups: std::collections::BTreeMap::new(),
            simple_users: SimpleUsers::Loopback,
            audit_log: None,
            http_token_file: None,
            proxy_users: std::collections::BTreeMap::new(),
        }
    }
}

/// TLS on every listener: native, HBase and HTTP (`docs/security.md`). Off until `cert` and
/// `key` are set; then every port speaks only TLS 1.2 or 1.3.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// The server's certificate chain (PEM), leaf first.
    pub cert: Option<PathBuf>,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
    /// CA certificates (PEM) that sign client certificates. Set: clients are asked for a
    /// certificate, and its subject's CN (else its first SAN) is the user.
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: whether a client must present a certificate (`required`, HBase's
    /// `NEED`) or may connect without one (`optional`, HBase's `WANT`).
    pub client_auth: ClientAuth,
    /// CA certificates (PEM) this server trusts when it calls other servers of its cluster
    /// (its own certificate is its client certificate then); default: `client_ca`.
    pub ca: Option<PathBuf>,
    /// How often the files are checked for changes: a changed certificate, key or CA bundle
    /// serves new connections without a restart.
    pub reload_check_ms: u64,
}

/// Whether a TLS port requires client certificates.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    #[default]
    Required,
    Optional,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            cert: None,
            key: None,
            client_ca: None,
            client_auth: ClientAuth::Required,
            ca: None,
            reload_check_ms: 1000,
        }
    }
}

impl TlsConfig {
    /// Whether the listeners serve TLS.
    pub fn enabled(&self) -> bool {
        self.cert.is_some()
    }

    /// How often the files are checked for changes.
    pub fn reload_interval(&self) -> Duration {
        Duration::from_millis(self.reload_check_ms)
    }
}

/// Where a server's files live, from `root` (docs/design/0004-cluster.md §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Root {
    /// A directory on local disk.
    Local(PathBuf),
    /// A directory on HDFS: the NameNode's URL (`hdfs://host:port`) and the path in it.
    Hdfs { namenode: String, path: PathBuf },
}

impl Root {
    /// Parses `file:///PATH` or `hdfs://HOST:PORT/PATH`; errors name the key and the value.
    pub fn parse(url: &str) -> Result<Root, String> {
        let bad = |why: &str| {
            format!("root {url:?}: {why} (expected file:///PATH or hdfs://HOST:PORT/PATH)")
        };
        if let Some(path) = url.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(bad("a file root needs an absolute path"));
            }
            return Ok(Root::Local(PathBuf::from(path)));
        }
        if let Some(rest) = url.strip_prefix("hdfs://") {
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, ""),
            };
            let port_ok = authority
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
            if !port_ok {
                return Err(bad("the NameNode must be HOST:PORT"));
            }
            let path = path.trim_end_matches('/');
            if path.is_empty() {
                return Err(bad("an HDFS root needs a directory, such as /cellar"));
            }
            return Ok(Root::Hdfs {
                namenode: format!("hdfs://{authority}"),
                path: PathBuf::from(path),
            });
        }
        Err(bad("unknown scheme"))
    }

    /// The directory, as the file system names it.
    pub fn path(&self) -> &Path {
        match self {
            Root::Local(p) => p,
            Root::Hdfs { path, .. } => path,
        }
    }
}

/// Coordination (docs/design/0004-cluster.md).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// ZooKeeper ensemble, `host:port[,host:port…]` (HBase's `hbase.zookeeper.quorum`);
    /// empty: coordination in process (one server is the whole cluster).
    pub zookeeper: String,
    /// Parent znode of the cluster (HBase's `zookeeper.znode.parent`).
    pub znode_parent: String,
    /// ZooKeeper session timeout (HBase's `zookeeper.session.timeout`, 90 s there; the
    /// ensemble may clamp it to its own bounds).
    pub zookeeper_session_timeout_ms: u64,
    /// How long startup waits for ZooKeeper before giving up with an error.
    pub zookeeper_connect_timeout_ms: u64,
    /// How often a cluster's master evens out region counts across region servers when the
    /// balancer is on (HBase's `hbase.balancer.period`).
    pub balancer_period_ms: u64,
    /// How long a cluster's master waits for a region server to answer an OPEN_REGION. An
    /// open not answered in time is never retried elsewhere before that server answers a
    /// CLOSE_REGION or is known dead (`docs/design/0004-cluster.md` §5).
    pub open_region_timeout_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            zookeeper: String::new(),
            znode_parent: "/hbase".to_string(),
            zookeeper_session_timeout_ms: 30_000,
            zookeeper_connect_timeout_ms: 10_000,
            balancer_period_ms: 300_000,
            open_region_timeout_ms: 60_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RpcConfig {
    /// Threads that run calls which may touch disk (HBase's `hbase.regionserver.handler.count`).
    pub handler_count: usize,
    /// Calls queued for the handlers before new ones are refused with SERVER_BUSY
    /// (HBase's `hbase.ipc.server.max.callqueue.length`: handlers × 10).
    pub max_queued_calls: usize,
    /// The largest request frame accepted (HBase's `hbase.ipc.max.request.size`: 256 MiB).
    pub max_request_bytes: u32,
    /// Bytes of requests read and not yet answered plus answers not yet written, over all
    /// connections of one front end; past it new calls are refused as busy (HBase's
    /// `hbase.ipc.server.max.callqueue.size`: 1 GiB).
    pub max_in_flight_bytes: u64,
    /// The same, for one connection; past it the server stops reading that connection until
    /// its answers drain (HBase 2.6's `hbase.server.netty.writable.watermark.high`, off by
    /// default there).
    pub max_connection_in_flight_bytes: u64,
    /// A connection that has not finished its preamble (and, on the HBase port, its connection
    /// header) by then is closed.
    pub handshake_timeout_ms: u64,
    /// A request frame must arrive whole within this long of its first byte, else the
    /// connection is closed (the client's own call timeout has passed by then).
    pub frame_timeout_ms: u64,
    /// A connection whose answers cannot be written for this long (the client does not read)
    /// is closed (HBase's `hbase.ipc.client.call.purge.timeout`: 2 × the RPC timeout).
    pub write_timeout_ms: u64,
    /// Threads of the network reactor.
    pub io_threads: usize,
    /// Gets that memstores and the block cache can answer are served on the reactor,
    /// skipping the handler pool (two thread hand-offs); off: every call is queued.
    pub inline_gets: bool,
    /// Plain puts are applied on the reactor when nothing would make them wait (no fdatasync,
    /// no back-pressure, the row not locked); the puts of one read share one WAL write there,
    /// made before their answers are sent. Off: every write is queued for the handlers.
    pub inline_puts: bool,
    /// Offer UCX (shared memory, RDMA) to native clients that ask for it over their TCP
    /// connection (`TRANSPORT_HELLO`). The UCX library is loaded on the first such request;
    /// off, or without the library, such clients are told so and stay on TCP.
    pub ucx: bool,
    /// A call that takes longer than this on the server is a slow call: kept for the web UI's
    /// server page and logged (at most once a second). HBase's `hbase.ipc.warn.response.time`
    /// is 10 s; 0 turns the log off.
    pub slow_call_ms: u64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ScannerConfig {
    /// An open scanner untouched for this long is closed (HBase's
    /// `hbase.client.scanner.timeout.period`: 60 s).
    pub lease_ms: u64,
    /// Rows per scan call when the client does not say (HBase's `hbase.client.scanner.caching`,
    /// unbounded since HBase 2: `max_result_bytes` bounds each call).
    pub default_caching: u32,
    /// A scan reply stops growing past this many bytes (HBase's
    /// `hbase.client.scanner.max.result.size`: 2 MiB).
    pub max_result_bytes: u64,
    /// Prepared scans one connection may hold at once.
    pub max_prepared_per_connection: usize,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SplitConfig {
    /// Regions split on their own once they outgrow their table's split size.
    pub auto: bool,
    /// A table's first split size; it doubles with each split of the table up to `max_bytes`
    /// (Hypertable's policy: new tables spread over servers early, big tables stay coarse).
    pub initial_bytes: u64,
    /// The largest split size (HBase's `hbase.hregion.max.filesize`: 10 GiB).
    pub max_bytes: u64,
    /// How often regions are checked.
    pub check_interval_ms: u64,
}

/// `[storage]`: the engine's options, named as the fields of
/// `cellar_storage::region::StorageConfig` (whose comments say what each does), and the sizes
/// of the engine's process-wide pools. A key not given keeps the engine's default, so every
/// default is written once, in the storage crate; `docs/configuration.md` lists them.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSection {
    pub block_cache_bytes: Option<u64>,
    pub block_cache_compressed: Option<bool>,
    pub memstore_flush_bytes: Option<u64>,
    pub memstore_block_multiplier: Option<u64>,
    /// `leveled` or `tiered`.
    pub compaction_style: Option<String>,
    pub level_base_bytes: Option<u64>,
    pub level_fanout: Option<u64>,
    pub compaction_file_bytes: Option<u64>,
    pub compaction_min_files: Option<usize>,
    pub compaction_max_files: Option<usize>,
    pub compaction_ratio: Option<f64>,
    pub compaction_max_space_amp: Option<f64>,
    pub compaction_bytes_per_sec: Option<u64>,
    pub compaction_threads: Option<usize>,
    pub compaction_nice: Option<i32>,
    pub major_compaction_period_ms: Option<u64>,
    pub major_compaction_jitter: Option<f64>,
    pub blocking_store_files: Option<usize>,
    /// `blocking_wait`, in milliseconds.
    pub blocking_wait_ms: Option<u64>,
    pub region_gate: Option<bool>,
    pub query_cache_bytes: Option<u64>,
    /// The WAL's `segment_size`.
    pub wal_segment_bytes: Option<u64>,
    /// The WAL's `max_buffered_bytes`.
    pub wal_max_buffered_bytes: Option<u64>,
    /// The WAL's `skip_errors`.
    pub wal_skip_errors: Option<bool>,
    /// Bytes of freed memstore chunks kept for reuse ([`StorageSection::chunk_pool_limit`]).
    pub memstore_chunk_pool_bytes: Option<u64>,
    /// Bytes of fresh memstore chunks a background thread keeps faulted in
    /// ([`StorageSection::chunks_ready`]).
    pub memstore_chunks_ready_bytes: Option<u64>,
    /// With an `hdfs://` root: bytes a file writer buffers
    /// ([`StorageSection::hdfs_write_buffer`]).
    pub hdfs_write_buffer_bytes: Option<u64>,
    /// How often the server looks for stores due a compaction outside of flushes
    /// ([`StorageSection::compaction_check_interval`]).
    pub compaction_check_interval_ms: Option<u64>,
}

/// How often the server looks for stores due a compaction when not configured.
const DEFAULT_COMPACTION_CHECK_INTERVAL_MS: u64 = 10 * 60 * 1000;

impl StorageSection {
    /// The engine configuration: the engine's defaults, and the keys given in their place.
    /// Values `ServerConfig::validate` would refuse are not checked here.
    pub fn engine_config(&self) -> StorageConfig {
        fn given<T>(field: &mut T, value: Option<T>) {
            if let Some(v) = value {
                *field = v;
            }
        }
        let mut c = StorageConfig::default();
        given(&mut c.block_cache_bytes, self.block_cache_bytes);
        given(&mut c.block_cache_compressed, self.block_cache_compressed);
        given(&mut c.memstore_flush_bytes, self.memstore_flush_bytes);
        given(
            &mut c.memstore_block_multiplier,
            self.memstore_block_multiplier,
        );
        given(
            &mut c.compaction_style,
            self.compaction_style
                .as_deref()
                .and_then(CompactionStyle::parse),
        );
        given(&mut c.level_base_bytes, self.level_base_bytes);
        given(&mut c.level_fanout, self.level_fanout);
        given(&mut c.compaction_file_bytes, self.compaction_file_bytes);
        given(&mut c.compaction_min_files, self.compaction_min_files);
        given(&mut c.compaction_max_files, self.compaction_max_files);
        given(&mut c.compaction_ratio, self.compaction_ratio);
        given(
            &mut c.compaction_max_space_amp,
            self.compaction_max_space_amp,
        );
        given(
            &mut c.compaction_bytes_per_sec,
            self.compaction_bytes_per_sec,
        );
        given(&mut c.compaction_threads, self.compaction_threads);
        given(&mut c.compaction_nice, self.compaction_nice);
        given(
            &mut c.major_compaction_period_ms,
            self.major_compaction_period_ms,
        );
        given(&mut c.major_compaction_jitter, self.major_compaction_jitter);
        given(&mut c.blocking_store_files, self.blocking_store_files);
        given(
            &mut c.blocking_wait,
            self.blocking_wait_ms.map(Duration::from_millis),
        );
        given(&mut c.region_gate, self.region_gate);
        given(&mut c.query_cache_bytes, self.query_cache_bytes);
        given(
            &mut c.wal.segment_size,
            self.wal_segment_bytes.map(|b| b.max(1)),
        );
        given(
            &mut c.wal.max_buffered_bytes,
            self.wal_max_buffered_bytes
                .map(|b| usize::try_from(b).unwrap_or(usize::MAX).max(1)),
        );
        given(&mut c.wal.skip_errors, self.wal_skip_errors);
        c
    }

    /// The bound of the memstore chunk pool (`cellar_storage::memstore::chunk_pool::set_limit`).
    pub fn chunk_pool_limit(&self) -> usize {
        self.memstore_chunk_pool_bytes
            .map_or(chunk_pool::DEFAULT_LIMIT, saturating_usize)
    }

    /// Fresh chunks kept ready (`cellar_storage::memstore::chunk_pool::keep_ready`).
    pub fn chunks_ready(&self) -> usize {
        self.memstore_chunks_ready_bytes
            .map_or(chunk_pool::DEFAULT_READY, saturating_usize)
    }

    /// An HDFS file writer's buffer (`HdfsFs::with_write_buffer`).
    pub fn hdfs_write_buffer(&self) -> usize {
        self.hdfs_write_buffer_bytes
            .map_or(HDFS_DEFAULT_WRITE_BUFFER, saturating_usize)
    }

    /// How often the server's compaction checker runs.
    pub fn compaction_check_interval(&self) -> Duration {
        Duration::from_millis(
            self.compaction_check_interval_ms
                .unwrap_or(DEFAULT_COMPACTION_CHECK_INTERVAL_MS),
        )
    }
}

fn saturating_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            data_dir: PathBuf::from("./cellar-data"),
            root: String::new(),
            listen: format!("127.0.0.1:{DEFAULT_NATIVE_PORT}"),
            http_listen: format!("127.0.0.1:{DEFAULT_HTTP_PORT}"),
            hbase_listen: format!("127.0.0.1:{DEFAULT_HBASE_PORT}"),
            rpc: RpcConfig::default(),
            scanner: ScannerConfig::default(),
            split: SplitConfig::default(),
            storage: StorageSection::default(),
            cluster: ClusterConfig::default(),
            tls: TlsConfig::default(),
            security: SecurityConfig::default(),
            thrift: ThriftConfig::default(),
            bulk_load: BulkLoadConfig::default(),
        }
    }
}

impl Default for RpcConfig {
    fn default() -> Self {
        RpcConfig {
            handler_count: 30,
            max_queued_calls: 300,
            max_request_bytes: 64 * 1024 * 1024,
            max_in_flight_bytes: 1024 * 1024 * 1024,
            max_connection_in_flight_bytes: 128 * 1024 * 1024,
            handshake_timeout_ms: 30_000,
            frame_timeout_ms: 60_000,
            write_timeout_ms: 120_000,
            io_threads: 2,
            inline_gets: true,
            inline_puts: true,
            ucx: true,
            slow_call_ms: 1000,
        }
    }
}

impl Default for ScannerConfig {
    fn default() -> Self {
        ScannerConfig {
            lease_ms: 60_000,
            default_caching: u32::MAX,
            max_result_bytes: 2 * 1024 * 1024,
            max_prepared_per_connection: 64,
        }
    }
}

impl Default for SplitConfig {
    fn default() -> Self {
        SplitConfig {
            auto: true,
            initial_bytes: 64 * 1024 * 1024,
            max_bytes: 10 * 1024 * 1024 * 1024,
            check_interval_ms: 1_000,
        }
    }
}

/// A configuration file that cannot be used; the message names the file and the bad key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl ServerConfig {
    /// The root as users name it, with its scheme: `root` when set (`hdfs://HOST:PORT/PATH`
    /// or `file:///PATH`), else `file://` and the data directory's absolute path.
    pub fn root_url(&self) -> String {
        if !self.root.is_empty() {
            let trimmed = self.root.trim_end_matches('/');
            return if trimmed.contains("://") {
                trimmed.to_string()
            } else {
                self.root.clone()
            };
        }
        let dir = std::path::absolute(&self.data_dir).unwrap_or_else(|_| self.data_dir.clone());
        format!("file://{}", dir.display())
    }

    /// Reads a TOML file; keys not given keep their defaults.
    pub fn from_file(path: &Path) -> Result<ServerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        ServerConfig::from_toml(&text).map_err(|message| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses TOML text and checks the values.
    pub fn from_toml(text: &str) -> Result<ServerConfig, String> {
        let c: ServerConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        c.validate()?;
        Ok(c)
    }

    /// Checks values that parse but make no sense, naming the key.
    pub fn validate(&self) -> Result<(), String> {
        // `[storage]` is checked as the engine will get it: a key not given is its default.
        let storage = self.storage.engine_config();
        let positive = [
            ("rpc.handler_count", self.rpc.handler_count as u64),
            ("rpc.max_queued_calls", self.rpc.max_queued_calls as u64),
            ("rpc.max_request_bytes", self.rpc.max_request_bytes as u64),
            ("rpc.io_threads", self.rpc.io_threads as u64),
            ("rpc.max_in_flight_bytes", self.rpc.max_in_flight_bytes),
            (
                "rpc.max_connection_in_flight_bytes",
                self.rpc.max_connection_in_flight_bytes,
            ),
            ("rpc.handshake_timeout_ms", self.rpc.handshake_timeout_ms),
            ("rpc.frame_timeout_ms", self.rpc.frame_timeout_ms),
            ("rpc.write_timeout_ms", self.rpc.write_timeout_ms),
            ("scanner.lease_ms", self.scanner.lease_ms),
            (
                "scanner.default_caching",
                self.scanner.default_caching as u64,
            ),
            ("scanner.max_result_bytes", self.scanner.max_result_bytes),
            ("split.initial_bytes", self.split.initial_bytes),
            ("tls.reload_check_ms", self.tls.reload_check_ms),
            ("thrift.threads", self.thrift.threads as u64),
            (
                "thrift.max_connections",
                u64::from(self.thrift.max_connections),
            ),
            ("thrift.max_scanners", self.thrift.max_scanners as u64),
            ("thrift.max_message_bytes", self.thrift.max_message_bytes),
            ("thrift.scanner_lease_ms", self.thrift.scanner_lease_ms),
            ("split.check_interval_ms", self.split.check_interval_ms),
            (
                "cluster.zookeeper_session_timeout_ms",
                self.cluster.zookeeper_session_timeout_ms,
            ),
            (
                "cluster.zookeeper_connect_timeout_ms",
                self.cluster.zookeeper_connect_timeout_ms,
            ),
            (
                "cluster.balancer_period_ms",
                self.cluster.balancer_period_ms,
            ),
            (
                "cluster.open_region_timeout_ms",
                self.cluster.open_region_timeout_ms,
            ),
            ("storage.memstore_flush_bytes", storage.memstore_flush_bytes),
            (
                "storage.memstore_block_multiplier",
                storage.memstore_block_multiplier,
            ),
            (
                "storage.compaction_min_files",
                storage.compaction_min_files as u64,
            ),
            (
                "storage.compaction_threads",
                storage.compaction_threads as u64,
            ),
            ("storage.level_base_bytes", storage.level_base_bytes),
            (
                "storage.compaction_file_bytes",
                storage.compaction_file_bytes,
            ),
        ];
        for (key, v) in positive {
            if v == 0 {
                return Err(format!("{key} must be positive"));
            }
        }
        if !(0..=19).contains(&storage.compaction_nice) {
            return Err(format!(
                "storage.compaction_nice must be within 0..=19 (a nice value), not {}",
                storage.compaction_nice
            ));
        }
        // A request must fit the server's bound, or it would be refused as busy forever.
        if u64::from(self.rpc.max_request_bytes) > self.rpc.max_in_flight_bytes {
            return Err(format!(
                "rpc.max_request_bytes ({}) is above rpc.max_in_flight_bytes ({})",
                self.rpc.max_request_bytes, self.rpc.max_in_flight_bytes
            ));
        }
        if self.rpc.max_connection_in_flight_bytes > self.rpc.max_in_flight_bytes {
            return Err(format!(
                "rpc.max_connection_in_flight_bytes ({}) is above rpc.max_in_flight_bytes ({})",
                self.rpc.max_connection_in_flight_bytes, self.rpc.max_in_flight_bytes
            ));
        }
        if !self.root.is_empty() {
            Root::parse(&self.root)?;
        }
        for (proxy, users) in &self.security.proxy_users {
            if proxy.is_empty() || proxy.starts_with('@') {
                return Err(format!(
                    "security.proxy_users: {proxy:?} is not a user (a key is the user that acts for others)"
                ));
            }
            if let Some(bad) = users.iter().find(|u| u.is_empty() || u.as_str() == "@") {
                return Err(format!(
                    "security.proxy_users.{proxy}: {bad:?} is neither a user, an @group nor \"*\""
                ));
            }
        }
        if !self.cluster.znode_parent.starts_with('/') || self.cluster.znode_parent.len() < 2 {
            return Err(format!(
                "cluster.znode_parent ({:?}) must be an absolute znode path such as /hbase",
                self.cluster.znode_parent
            ));
        }
        for host in self
            .cluster
            .zookeeper
            .split(',')
            .filter(|_| !self.cluster.zookeeper.is_empty())
        {
            let ok = host
                .trim()
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
            if !ok {
                return Err(format!(
                    "cluster.zookeeper: {host:?} is not host:port (expected host:port[,host:port...])"
                ));
            }
        }
        if self.split.max_bytes < self.split.initial_bytes {
            return Err(format!(
                "split.max_bytes ({}) is below split.initial_bytes ({})",
                self.split.max_bytes, self.split.initial_bytes
            ));
        }
        if storage.compaction_max_files < storage.compaction_min_files {
            return Err(
                "storage.compaction_max_files is below storage.compaction_min_files".into(),
            );
        }
        if let Some(style) = &self.storage.compaction_style {
            if CompactionStyle::parse(style).is_none() {
                return Err(format!(
                    "storage.compaction_style must be \"leveled\" or \"tiered\", got {style:?}"
                ));
            }
        }
        if storage.level_fanout < 2 {
            return Err(format!(
                "storage.level_fanout must be at least 2, got {}",
                storage.level_fanout
            ));
        }
        if storage.compaction_ratio.is_nan() || storage.compaction_ratio <= 0.0 {
            return Err("storage.compaction_ratio must be positive".into());
        }
        let amp = storage.compaction_max_space_amp;
        if !(amp == 0.0 || amp >= 1.0) {
            return Err(format!(
                "storage.compaction_max_space_amp must be 0 (off) or at least 1, got {amp}"
            ));
        }
        let jitter = storage.major_compaction_jitter;
        if !(0.0..=1.0).contains(&jitter) {
            return Err(format!(
                "storage.major_compaction_jitter must be between 0 and 1, got {jitter}"
            ));
        }
        if self.storage.compaction_check_interval_ms == Some(0) {
            return Err("storage.compaction_check_interval_ms must be at least 1".into());
        }
        for who in &self.security.superusers {
            if who.is_empty() || who == "@" {
                return Err("security.superusers holds an empty name".into());
            }
        }
        for (group, members) in &self.security.groups {
            if group.is_empty() || group.starts_with('@') {
                return Err(format!(
                    "security.groups: {group:?} is not a group name (no leading '@' here)"
                ));
            }
            if members.iter().any(|m| m.is_empty()) {
                return Err(format!("security.groups.{group} holds an empty user name"));
            }
        }
        let tls = &self.tls;
        match (&tls.cert, &tls.key) {
            (Some(_), None) => return Err("tls.cert is set without tls.key (--tls-key)".into()),
            (None, Some(_)) => return Err("tls.key is set without tls.cert (--tls-cert)".into()),
            (None, None) if tls.client_ca.is_some() => {
                return Err(
                    "tls.client_ca needs tls.cert and tls.key: client certificates are asked for only over TLS"
                        .into(),
                )
            }
            _ => {}
        }
        Ok(())
    }

    /// The engine configuration these options describe.
    pub fn storage_config(&self) -> StorageConfig {
        self.storage.engine_config()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_root_is_shown_with_its_scheme() {
        let with = |root: &str, dir: &str| ServerConfig {
            root: root.to_string(),
            data_dir: PathBuf::from(dir),
            ..ServerConfig::default()
        };
        assert_eq!(
            with("hdfs://nn:8020/cellar/", "/cellar").root_url(),
            "hdfs://nn:8020/cellar"
        );
        assert_eq!(with("file:///srv/c", "/srv/c").root_url(), "file:///srv/c");
        assert_eq!(with("file:///", "/").root_url(), "file:///");
        assert_eq!(with("", "/var/cellar").root_url(), "file:///var/cellar");
    }

    use super::*;

    #[test]
    fn empty_file_is_all_defaults_and_bad_keys_are_named() {
        assert_eq!(
            ServerConfig::from_toml("").expect("empty"),
            ServerConfig::default()
        );
        let c =
            ServerConfig::from_toml("[rpc]\nhandler_count = 8\n[split]\ninitial_bytes = 1024\n")
                .expect("partial");
        assert_eq!(c.rpc.handler_count, 8);
        assert_eq!(c.split.initial_bytes, 1024);
        assert_eq!(c.scanner, ScannerConfig::default());
        let e = ServerConfig::from_toml("[rpc]\nhandler_cuont = 8\n").expect_err("typo");
        assert!(e.contains("handler_cuont"), "{e}");
        let e = ServerConfig::from_toml("[rpc]\nhandler_count = \"many\"\n").expect_err("type");
        assert!(e.contains("handler_count"), "{e}");
        let e = ServerConfig::from_toml("[scanner]\nlease_ms = 0\n").expect_err("zero");
        assert!(e.contains("scanner.lease_ms"), "{e}");
        let e = ServerConfig::from_toml("[rpc]\nmax_in_flight_bytes = 1000\n").expect_err("small");
        assert!(e.contains("rpc.max_request_bytes"), "{e}");
        let e = ServerConfig::from_toml(
            "[rpc]\nmax_request_bytes = 100\nmax_connection_in_flight_bytes = 2000\nmax_in_flight_bytes = 1000\n",
        )
        .expect_err("connection above server");
        assert!(e.contains("rpc.max_connection_in_flight_bytes"), "{e}");
    }

    #[test]
    fn storage_keys_given_reach_the_engine_and_the_rest_keep_its_defaults() {
        let c = ServerConfig::from_toml(
            "[storage]\ncompaction_style = \"tiered\"\nblocking_wait_ms = 250\nwal_segment_bytes = 0\nmemstore_chunk_pool_bytes = 4096\n",
        )
        .expect("storage keys");
        let engine = c.storage_config();
        let default = StorageConfig::default();
        assert_eq!(engine.compaction_style, CompactionStyle::Tiered);
        assert_eq!(engine.blocking_wait, Duration::from_millis(250));
        assert_eq!(
            engine.wal.segment_size, 1,
            "a segment holds at least a byte"
        );
        assert_eq!(engine.memstore_flush_bytes, default.memstore_flush_bytes);
        assert_eq!(
            engine.wal.max_buffered_bytes,
            default.wal.max_buffered_bytes
        );
        assert_eq!(c.storage.chunk_pool_limit(), 4096);
        assert_eq!(c.storage.chunks_ready(), chunk_pool::DEFAULT_READY);
        let e =
            ServerConfig::from_toml("[storage]\ncompaction_style = \"lsm\"\n").expect_err("style");
        assert!(e.contains("storage.compaction_style"), "{e}");
        let e = ServerConfig::from_toml("[storage]\ncompaction_max_files = 2\n")
            .expect_err("fewer than the default minimum");
        assert!(e.contains("storage.compaction_max_files"), "{e}");
    }
}

#[cfg(test)]
mod root_tests {
    use super::Root;
    use std::path::PathBuf;

    #[test]
    fn roots_parse_or_name_the_problem() {
        assert_eq!(
            Root::parse("file:///var/lib/cellar"),
            Ok(Root::Local(PathBuf::from("/var/lib/cellar")))
        );
        assert_eq!(
            Root::parse("hdfs://nn.example:9000/cellar/"),
            Ok(Root::Hdfs {
                namenode: "hdfs://nn.example:9000".into(),
                path: PathBuf::from("/cellar")
            })
        );
        for (bad, why) in [
            ("file://relative", "absolute path"),
            ("hdfs://nn:9000", "needs a directory"),
            ("hdfs://nn:9000/", "needs a directory"),
            ("hdfs://nn/cellar", "HOST:PORT"),
            ("s3://bucket/x", "unknown scheme"),
            ("/plain/path", "unknown scheme"),
        ] {
            let e = Root::parse(bad).expect_err(bad);
            assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
        }
    }
}
