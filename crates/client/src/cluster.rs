//! The shared core of one client: its configuration, connections and region location cache,
//! and the retry loop every region call goes through. Tables, admin, scanners, batches and
//! prepared scans all work through it; `client.rs` only hands them out.

use crate::config::ClientConfig;
use crate::connection::{Connection, Pool, Response};
use crate::error::{missing, Error, Handling, Result};
use crate::location::{LocationCache, RegionLocation};
use crate::retry::Retrier;
use cellar_proto::pb::{self, ErrorCode, Method};
use prost::Message;
use std::sync::Arc;

/// What every handle of one client shares.
pub(crate) struct Inner {
    /// The address given to `connect`.
    pub bootstrap: String,
    /// The servers location lookups and admin calls go to (one, or a cluster's masters).
    pub masters: Vec<String>,
    /// Which of `masters` is in use.
    pub current: std::sync::atomic::AtomicUsize,
    pub config: ClientConfig,
    pub pool: Pool,
    pub cache: LocationCache,
    /// Where best-effort background work (closing dropped scanners) runs.
    pub runtime: tokio::runtime::Handle,
}

impl Inner {
    /// Connects to the first of `addr`'s servers that answers (see `Client::connect_with`).
    pub async fn connect(addr: &str, config: ClientConfig) -> Result<Arc<Inner>> {
        let masters: Vec<String> = addr
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect();
        if masters.is_empty() {
            return Err(Error::Protocol(format!("no server address in {addr:?}")));
        }
        let inner = Arc::new(Inner {
            bootstrap: addr.to_string(),
            masters,
            current: std::sync::atomic::AtomicUsize::new(0),
            config,
            pool: Pool::default(),
            cache: LocationCache::default(),
            runtime: tokio::runtime::Handle::current(),
        });
        let mut last = None;
        for i in 0..inner.masters.len() {
            match inner.connection(&inner.masters[i]).await {
                Ok(_) => {
                    inner.current.store(i, std::sync::atomic::Ordering::Relaxed);
                    return Ok(inner);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Protocol("no server to connect to".into())))
    }

    pub fn retrier(&self) -> Retrier {
        Retrier::new(self.config.retries, self.config.retry_backoff)
    }

    /// Where admin and location calls go now.
    pub fn master(&self) -> String {
        let i = self.current.load(std::sync::atomic::Ordering::Relaxed);
        self.masters[i % self.masters.len()].clone()
    }

    /// Moves on to the next listed master (the current one failed).
    pub fn next_master(&self) {
        if self.masters.len() > 1 {
            self.current
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    pub async fn connection(&self, addr: &str) -> Result<Arc<Connection>> {
        self.pool.get(addr, &self.config).await
    }

    /// A call to the server given to `connect` (admin and location calls). A call whose
    /// connection could not be opened, or that the server refused as busy, was not run and is
    /// retried; `idempotent` calls are also retried when the connection drops mid-call.
    pub async fn master_call(
        &self,
        method: Method,
        param: &impl Message,
        idempotent: bool,
    ) -> Result<Response> {
        let mut retrier = self.retrier();
        loop {
            let conn = match self.connection(&self.master()).await {
                Ok(c) => c,
                Err(e) => {
                    self.next_master();
                    retrier.failed(e).await?;
                    continue;
                }
            };
            match conn.call(method, param, &[]).await {
                Ok(r) => return Ok(r),
                Err(e) => {
                    if e.code() == Some(ErrorCode::ServerStopping) || e.code().is_none() {
                        self.next_master();
                    }
                    let not_run = e.code() == Some(ErrorCode::ServerBusy);
                    if idempotent || not_run {
                        retrier.failed(e).await?;
                    } else {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// The region holding `row`: from the cache, else asked of the server (one attempt; the
    /// caller's retry loop covers failures).
    pub async fn locate(&self, table: &str, row: &[u8]) -> Result<RegionLocation> {
        if let Some(loc) = self.cache.lookup(table, row) {
            return Ok(loc);
        }
        let conn = match self.connection(&self.master()).await {
            Ok(c) => c,
            Err(e) => {
                self.next_master();
                return Err(e);
            }
        };
        let req = pb::LocateRegionRequest {
            table: table.to_string(),
            row: bytes::Bytes::copy_from_slice(row),
        };
        let resp: pb::LocateRegionResponse = match conn.call(Method::LocateRegion, &req, &[]).await
        {
            Ok(r) => r.decode("LocateRegionResponse")?,
            Err(e) => {
                // A master that stopped, or stepped down: the next listed one may be active.
                if e.code() == Some(ErrorCode::ServerStopping) {
                    self.next_master();
                }
                return Err(e);
            }
        };
        let loc = RegionLocation::from_pb(resp.location.ok_or_else(|| missing("a location"))?);
        if !loc.contains(row) || loc.table != table {
            return Err(Error::Protocol(format!(
                "server located row {:?} of table '{table}' in region {} which does not hold it",
                String::from_utf8_lossy(row),
                loc.name
            )));
        }
        self.cache.insert(loc.clone());
        Ok(loc)
    }

    /// The region holding the rows just below `key` (empty: the table's last region), for
    /// reversed scans moving to the previous region.
    pub async fn locate_below(&self, table: &str, key: &[u8]) -> Result<RegionLocation> {
        if let Some(loc) = self.cache.lookup_below(table, key) {
            return Ok(loc);
        }
        let regions = self.list_regions(table).await?;
        regions
            .into_iter()
            .find(|r| r.holds_rows_below(key))
            .ok_or_else(|| {
                // Mid-split listings can have a gap; the retry loop asks again.
                Error::rpc(
                    ErrorCode::NotServingRegion,
                    format!(
                        "no region of table '{table}' holds the rows below {:?}",
                        String::from_utf8_lossy(key)
                    ),
                )
            })
    }

    /// Every region of a table, in key order; refreshes the cache.
    pub async fn list_regions(&self, table: &str) -> Result<Vec<RegionLocation>> {
        let req = pb::ListRegionsRequest {
            table: table.to_string(),
        };
        let resp: pb::ListRegionsResponse = self
            .master_call(Method::ListRegions, &req, true)
            .await?
            .decode("ListRegionsResponse")?;
        let regions: Vec<RegionLocation> = resp
            .regions
            .into_iter()
            .map(RegionLocation::from_pb)
            .collect();
        self.cache.replace_table(table, &regions);
        Ok(regions)
    }

    /// A call on the region holding `row`, retried (relocating the region when needed) until
    /// it succeeds, fails for good, or runs out of retries. `make` builds the request for the
    /// region it is sent to. A call that is not `idempotent` (increment, append,
    /// check-and-mutate) is not resent once its connection broke after sending it: it may
    /// have been applied, and the caller gets the error.
    pub async fn region_call<M: Message>(
        &self,
        table: &str,
        row: &[u8],
        method: Method,
        make: impl Fn(pb::RegionRef) -> M,
        cellblock: &[u8],
        idempotent: bool,
    ) -> Result<Response> {
        let mut retrier = self.retrier();
        loop {
            let loc = match self.locate(table, row).await {
                Ok(loc) => loc,
                Err(e) => {
                    retrier.failed(e).await?;
                    continue;
                }
            };
            let (e, sent) = match self.connection(&loc.server).await {
                Err(e) => (e, false),
                Ok(conn) => match conn.call(method, &make(loc.region_ref()), cellblock).await {
                    Ok(r) => return Ok(r),
                    Err(e) => (e, true),
                },
            };
            if e.handling() == Handling::Relocate {
                self.cache.invalidate(&loc);
            }
            let maybe_applied = sent && matches!(e, Error::Closed | Error::Io(_));
            if maybe_applied && !idempotent {
                return Err(e);
            }
            retrier.failed(e).await?;
        }
    }
}
