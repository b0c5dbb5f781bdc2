//! In-process coordination for the embedded default: one process is the whole cluster, so
//! every answer is a field. Same contract as ZooKeeper's: the first master wins, servers
//! vanish when closed.

use super::{CoordError, Coordination, Election, ServerRecord, SessionState};
use parking_lot::Mutex;

#[derive(Default)]
struct State {
    cluster_id: Option<String>,
    servers: Vec<ServerRecord>,
    master: Option<ServerRecord>,
    backups: Vec<ServerRecord>,
    meta: Option<ServerRecord>,
    balancer: Option<bool>,
    closed: bool,
}

/// Coordination inside one process.
#[derive(Default)]
pub struct LocalCoordination {
    state: Mutex<State>,
}

impl LocalCoordination {
    pub fn new() -> LocalCoordination {
        LocalCoordination::default()
    }

    fn open(&self) -> Result<parking_lot::MutexGuard<'_, State>, CoordError> {
        let state = self.state.lock();
        if state.closed {
            return Err(CoordError::Failed {
                what: "in-process coordination".into(),
                reason: "closed".into(),
            });
        }
        Ok(state)
    }
}

impl Coordination for LocalCoordination {
    fn describe(&self) -> String {
        "in-process".to_string()
    }

    fn cluster_id(&self) -> Result<Option<String>, CoordError> {
        Ok(self.open()?.cluster_id.clone())
    }

    fn publish_cluster_id(&self, id: &str) -> Result<(), CoordError> {
        self.open()?.cluster_id = Some(id.to_string());
        Ok(())
    }

    fn register_server(&self, me: &ServerRecord) -> Result<(), CoordError> {
        let mut state = self.open()?;
        if state.servers.iter().any(|s| s.name == me.name) {
            return Err(CoordError::Conflict(format!(
                "a region server named {} is already registered",
                me.name
            )));
        }
        state.servers.push(me.clone());
        Ok(())
    }

    fn live_servers(&self) -> Result<Vec<ServerRecord>, CoordError> {
        Ok(self.open()?.servers.clone())
    }

    fn try_become_master(&self, me: &ServerRecord) -> Result<Election, CoordError> {
        let mut state = self.open()?;
        match &state.master {
            None => {
                state.master = Some(me.clone());
                state.backups.retain(|b| b.name != me.name);
                Ok(Election::Active)
            }
            Some(m) if m.name == me.name => Ok(Election::Active),
            Some(m) => {
                let active = Some(m.clone());
                if !state.backups.iter().any(|b| b.name == me.name) {
                    state.backups.push(me.clone());
                }
                Ok(Election::Backup { active })
            }
        }
    }

    fn active_master(&self) -> Result<Option<ServerRecord>, CoordError> {
        Ok(self.open()?.master.clone())
    }

    fn backup_masters(&self) -> Result<Vec<ServerRecord>, CoordError> {
        Ok(self.open()?.backups.clone())
    }

    fn publish_meta_location(&self, server: &ServerRecord) -> Result<(), CoordError> {
        self.open()?.meta = Some(server.clone());
        Ok(())
    }

    fn meta_location(&self) -> Result<Option<ServerRecord>, CoordError> {
        Ok(self.open()?.meta.clone())
    }

    fn publish_balancer(&self, on: bool) -> Result<(), CoordError> {
        self.open()?.balancer = Some(on);
        Ok(())
    }

    fn balancer(&self) -> Result<Option<bool>, CoordError> {
        Ok(self.open()?.balancer)
    }

    fn session(&self) -> SessionState {
        if self.state.lock().closed {
            SessionState::Closed
        } else {
            SessionState::Connected
        }
    }

    fn close(&self) {
        let mut state = self.state.lock();
        state.closed = true;
        state.servers.clear();
        state.master = None;
        state.backups.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coord::ServerName;

    fn server(port: u16) -> ServerRecord {
        ServerRecord {
            name: ServerName {
                host: "127.0.0.1".into(),
                port,
                start_code: 1,
            },
            native_addr: format!("127.0.0.1:{}", port + 1),
            http_addr: String::new(),
        }
    }

    #[test]
    fn the_first_master_wins_and_the_second_waits() {
        let c = LocalCoordination::new();
        assert_eq!(c.try_become_master(&server(1)), Ok(Election::Active));
        assert_eq!(
            c.try_become_master(&server(2)),
            Ok(Election::Backup {
                active: Some(server(1))
            })
        );
        assert_eq!(c.backup_masters(), Ok(vec![server(2)]));
        assert_eq!(c.try_become_master(&server(1)), Ok(Election::Active));
    }

    #[test]
    fn servers_register_once_and_go_at_close() {
        let c = LocalCoordination::new();
        c.register_server(&server(1)).expect("register");
        assert!(matches!(
            c.register_server(&server(1)),
            Err(CoordError::Conflict(_))
        ));
        assert_eq!(c.live_servers(), Ok(vec![server(1)]));
        c.close();
        assert_eq!(c.session(), SessionState::Closed);
        assert!(c.live_servers().is_err());
    }
}
