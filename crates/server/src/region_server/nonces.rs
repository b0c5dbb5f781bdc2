//! Nonces: a retried increment or append is applied once (HBase's server nonce manager).
//!
//! An HBase client names each increment and append with a nonce and resends it with the same
//! nonce when it gets no answer (the server was killed mid-call, the call timed out). The
//! server remembers the nonces it applied for [`NONCE_TTL`] and answers a retry with the
//! current values of its columns instead of applying it again (HBase turns it into a Get the
//! same way). A retry that arrives while the first attempt still runs waits for it. The nonce
//! is logged in the WAL record with the edit (`cellar_storage::region::wal_payload`), so a
//! restart learns the nonces of the edits it replays: a retry sent to the restarted server is
//! caught too, as long as the record is still in the log.
//!
//! Thread-safety: all methods take `&self`; the table is one mutex (held for a hash lookup).

use cellar_model::Nonce;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long an applied nonce is remembered (HBase: `hbase.server.hashNonce.cleanupInterval`,
/// 30 minutes): far longer than any client retries.
pub const NONCE_TTL: Duration = Duration::from_secs(30 * 60);
/// How often expired nonces are swept, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What to do with an operation carrying a nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// First time: apply it, then call [`Nonces::end`].
    Proceed,
    /// Already applied: answer without applying it again.
    Duplicate,
}

enum State {
    Running,
    Done(Instant),
}

struct Table {
    nonces: HashMap<Nonce, State>,
    swept: Instant,
}

pub struct Nonces {
    table: Mutex<Table>,
    ended: Condvar,
}

impl Default for Nonces {
    fn default() -> Self {
        Nonces {
            table: Mutex::new(Table {
                nonces: HashMap::new(),
                swept: Instant::now(),
            }),
            ended: Condvar::new(),
        }
    }
}

impl Nonces {
    /// Claims `nonce` for an operation about to run; waits while another attempt of the same
    /// operation runs.
    pub fn start(&self, nonce: Nonce) -> Start {
        let mut t = self.table.lock();
        let now = Instant::now();
        if now.duration_since(t.swept) >= SWEEP_EVERY {
            t.nonces.retain(
                |_, s| !matches!(s, State::Done(at) if now.duration_since(*at) > NONCE_TTL),
            );
            t.swept = now;
        }
        loop {
            match t.nonces.get(&nonce) {
                None => {
                    t.nonces.insert(nonce, State::Running);
                    return Start::Proceed;
                }
                Some(State::Done(_)) => return Start::Duplicate,
                Some(State::Running) => self.ended.wait(&mut t),
            }
        }
    }

    /// The operation claimed by [`Nonces::start`] ended: `applied` remembers it; otherwise
    /// (it failed) a retry may apply it.
    pub fn end(&self, nonce: Nonce, applied: bool) {
        let mut t = self.table.lock();
        if applied {
            t.nonces.insert(nonce, State::Done(Instant::now()));
        } else {
            t.nonces.remove(&nonce);
        }
        drop(t);
        self.ended.notify_all();
    }

    /// An edit replayed from the WAL carried `nonce`: it was applied.
    pub fn replayed(&self, nonce: Nonce) {
        self.table
            .lock()
            .nonces
            .insert(nonce, State::Done(Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const N: Nonce = Nonce {
        group: 1,
        nonce: 42,
    };

    #[test]
    fn an_applied_nonce_is_a_duplicate_a_failed_one_is_not() {
        let n = Nonces::default();
        assert_eq!(n.start(N), Start::Proceed);
        n.end(N, false);
        assert_eq!(
            n.start(N),
            Start::Proceed,
            "a failed attempt may be retried"
        );
        n.end(N, true);
        assert_eq!(n.start(N), Start::Duplicate);
        let other = Nonce { group: 2, ..N };
        assert_eq!(n.start(other), Start::Proceed, "nonces are per group");
        n.replayed(Nonce { nonce: 7, ..N });
        assert_eq!(n.start(Nonce { nonce: 7, ..N }), Start::Duplicate);
    }

    #[test]
    fn a_retry_waits_for_the_attempt_still_running() {
        let n = Arc::new(Nonces::default());
        assert_eq!(n.start(N), Start::Proceed);
        let n2 = Arc::clone(&n);
        let retry = std::thread::spawn(move || n2.start(N));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!retry.is_finished());
        n.end(N, true);
        assert_eq!(retry.join().expect("retry"), Start::Duplicate);
    }
}
