//! Whether this master is still the active one (`docs/design/0004-cluster.md` §5): HBase's
//! master aborts when its ZooKeeper session expires or its `/hbase/master` node names
//! another; so does this one. Everything a master does as master — answering calls, writing
//! meta, asking region servers to open or close regions, splitting logs — first asks
//! [`Tenure::check`].
//!
//! A check passes without ZooKeeper only while the last confirmation is recent: a read of
//! `/hbase/master` naming this master, sent less than a third of the session timeout ago by
//! the monotonic clock (which runs on while the process is stopped). ZooKeeper answered that
//! read on a live session, so the session cannot expire, and no backup can take over, before
//! a whole timeout after it. Later, a check reads `/hbase/master` again through the session:
//! an expired session, or the node naming another master or none, makes this master step
//! down for good. So a master paused past its session (SIGSTOP, a long stall) and resumed
//! refuses everything before it acts, whichever of its threads runs first.

use crate::coord::{CoordError, CoordRef, ServerName, SessionState};
use crate::error::ServerError;
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// The active master's hold on its office.
pub struct Tenure {
    coord: CoordRef,
    me: ServerName,
    /// How long a confirmation stands: a third of the session timeout.
    valid_for: Duration,
    /// When the last confirming read was sent.
    confirmed: Mutex<Option<Instant>>,
    /// Why this master stepped down; final.
    lost: Mutex<Option<String>>,
    /// One confirming read at a time.
    confirming: Mutex<()>,
}

impl Tenure {
    pub fn new(coord: CoordRef, me: ServerName, session_timeout: Duration) -> Tenure {
        Tenure {
            coord,
            me,
            valid_for: session_timeout / 3,
            confirmed: Mutex::new(None),
            lost: Mutex::new(None),
            confirming: Mutex::new(()),
        }
    }

    pub fn coord(&self) -> &CoordRef {
        &self.coord
    }

    /// This master's name, as `/hbase/master` holds it.
    pub fn me(&self) -> &ServerName {
        &self.me
    }

    /// Why this master stepped down, if it did.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().clone()
    }

    /// Whether a confirmation stands now (no ZooKeeper call).
    pub fn fresh(&self) -> bool {
        let stepped_down = self.lost.lock().is_some();
        !stepped_down && self.age().is_some_and(|a| a < self.valid_for)
    }

    fn age(&self) -> Option<Duration> {
        self.confirmed.lock().map(|at| at.elapsed())
    }

    /// Ok while this is the active master: at once if a confirmation stands, else after
    /// reading `/hbase/master` again. The error is retriable and names why (clients go to
    /// the active master).
    pub fn check(&self) -> Result<(), ServerError> {
        if let Some(why) = self.lost() {
            return Err(ServerError::NotActiveMaster(why));
        }
        if self.fresh() {
            return Ok(());
        }
        self.confirm()
    }

    /// Reads `/hbase/master` through the session: this master's name there renews the
    /// confirmation; an expired session or another name (or none) steps down. A read that
    /// fails otherwise (ZooKeeper slow or unreachable, the session perhaps recovering) is an
    /// error for the caller but no step down.
    pub fn confirm(&self) -> Result<(), ServerError> {
        let _one = self.confirming.lock();
        if let Some(why) = self.lost() {
            return Err(ServerError::NotActiveMaster(why));
        }
        if self.fresh() {
            return Ok(());
        }
        match self.coord.session() {
            SessionState::Expired => return Err(self.step_down("its ZooKeeper session expired")),
            SessionState::Closed => return Err(self.step_down("its ZooKeeper session is closed")),
            SessionState::Connected | SessionState::Disconnected => {}
        }
        let sent = Instant::now();
        match self.coord.active_master() {
            Ok(Some(active)) if active.name == self.me => {
                *self.confirmed.lock() = Some(sent);
                Ok(())
            }
            Ok(Some(other)) => Err(self.step_down(&format!(
                "{} (native {}) is the active master now",
                other.name, other.native_addr
            ))),
            Ok(None) => Err(self.step_down("its active-master node in ZooKeeper is gone")),
            Err(CoordError::SessionExpired { .. }) => {
                Err(self.step_down("its ZooKeeper session expired"))
            }
            Err(e) => Err(ServerError::NotActiveMaster(format!(
                "it cannot confirm with ZooKeeper that it still is ({e})"
            ))),
        }
    }

    /// The watcher's round: steps down at once on an expired session; renews a confirmation
    /// past half its life.
    pub fn watch(&self) {
        if self.lost().is_some() {
            return;
        }
        if self.coord.session() == SessionState::Expired {
            self.step_down("its ZooKeeper session expired");
            return;
        }
        if self.age().is_none_or(|a| a >= self.valid_for / 2) {
            let _ = self.force_confirm();
        }
    }

    /// [`Tenure::confirm`] even while a confirmation stands.
    fn force_confirm(&self) -> Result<(), ServerError> {
        let keep = self.confirmed.lock().take();
        let r = self.confirm();
        if r.is_err() {
            // Not confirmed again: the earlier confirmation still runs out when it would.
            let stepped_down = self.lost.lock().is_some();
            let mut c = self.confirmed.lock();
            if c.is_none() && !stepped_down {
                *c = keep;
            }
        }
        r
    }

    /// Gives up the office for good; the error callers return.
    pub fn step_down(&self, why: &str) -> ServerError {
        let mut lost = self.lost.lock();
        if lost.is_none() {
            tracing::error!(server = %self.me, reason = why,
                "this master stepped down: it is no longer the active master");
            *lost = Some(why.to_string());
        }
        *self.confirmed.lock() = None;
        ServerError::NotActiveMaster(lost.clone().unwrap_or_default())
    }
}
