//! The client handle: connects, then hands out tables and admin over one shared core
//! (`cluster.rs`).

use crate::admin::Admin;
use crate::cluster::Inner;
use crate::config::ClientConfig;
use crate::error::Result;
use crate::table::Table;
use cellar_proto::pb::{self, Method};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A connection to a Cellar server (or cluster, through the server given to `connect`).
/// Cheap to clone: clones share connections and the region location cache.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.bootstrap)
            .finish()
    }
}

impl Client {
    /// Connects with the default configuration.
    pub async fn connect(addr: &str) -> Result<Client> {
        Client::connect_with(addr, ClientConfig::default()).await
    }

    /// Connects to `addr` (`host:port` of the native endpoint); fails if it cannot be reached.
    /// A cluster's masters may be listed, `host:port,host:port`: admin and location calls go
    /// to the first that answers and move on to the next when it fails (a backup master that
    /// took over), as HBase's master registry does.
    pub async fn connect_with(addr: &str, config: ClientConfig) -> Result<Client> {
        Ok(Client {
            inner: Inner::connect(addr, config).await?,
        })
    }

    /// A handle on one table; nothing is checked until the first call.
    pub fn table(&self, name: &str) -> Table {
        Table::new(self.inner.clone(), name)
    }

    pub fn admin(&self) -> Admin {
        Admin::new(self.inner.clone())
    }

    /// One round trip to the server.
    pub async fn ping(&self) -> Result<Duration> {
        let conn = self.inner.connection(&self.inner.master()).await?;
        let started = Instant::now();
        conn.call(Method::Ping, &pb::Empty {}, &[]).await?;
        Ok(started.elapsed())
    }

    /// Whether calls to the server given to `connect` travel over UCX (`transport = ucx`, or
    /// `auto` where both sides have it).
    pub async fn uses_ucx(&self) -> Result<bool> {
        Ok(self.inner.connection(&self.inner.master()).await?.on_ucx())
    }

    /// The configuration this client was made with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }
}
