//! Shrinking a key's non-linearizable history to a small witness, by steps that keep it a
//! proof: each step turns a history H into H' such that H linearizable implies H'
//! linearizable, and a step is kept only when H' is still not linearizable. So the witness
//! being non-linearizable proves the original was.
//!
//! The steps:
//! - **cutting at a time T**: keep the operations invoked by T; one answered after T becomes
//!   `unknown` (its answer was not known at T; an unanswered get is dropped). A
//!   linearization of H restricted to these operations is one of H' (everything placed
//!   before an operation answered by T was invoked by T). Non-linearizability only grows
//!   with T, so the shortest such cut is found by bisection.
//! - **dropping a read**: an answered get or a check-and-mutate that did not write changes
//!   nothing, so removing it from a linearization of H leaves one of H'.
//!
//! Writes are never dropped: a later read may need them.

use super::checker::{check_key, is_relevant, Budget, Verdict};
use super::history::{Call, Op, Outcome, Ret};
use std::time::{Duration, Instant};

/// Checks a shrinking step may spend.
const MAX_CHECKS: usize = 4000;

/// A smaller history of the same key that is still not linearizable, or `ops` itself when
/// it is linearizable (or undecided) to begin with. Spends at most about `time`.
pub fn minimize(ops: &[Op], time: Duration) -> Vec<Op> {
    let deadline = Instant::now() + time;
    let budget = Budget {
        steps_per_key: 5_000_000,
        configurations_per_key: 1_000_000,
        deadline: Some(deadline),
    };
    let violates = |h: &[Op]| matches!(check_key(h, &budget).0, Verdict::Violation(_));
    if !violates(ops) {
        return ops.to_vec();
    }
    // Operations the search ignores go first.
    let ops: Vec<Op> = ops.iter().filter(|o| is_relevant(o)).cloned().collect();
    let ops = &ops[..];
    let mut checks = 0usize;

    // The shortest violating cut: candidates are the answer times of answered operations.
    let mut times: Vec<u64> = ops
        .iter()
        .filter(|o| o.outcome == Outcome::Ok)
        .map(|o| o.end_ns)
        .collect();
    times.sort_unstable();
    times.dedup();
    let mut best = ops.to_vec();
    let (mut lo, mut hi) = (0usize, times.len());
    while lo < hi && checks < MAX_CHECKS && Instant::now() < deadline {
        let mid = lo + (hi - lo) / 2;
        let Some(&t) = times.get(mid) else { break };
        let cut = cut_at(ops, t);
        checks += 1;
        if violates(&cut) {
            best = cut;
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }

    // Drop reads one at a time, latest first (early reads often set up the witness).
    let mut i = best.len();
    while i > 0 && checks < MAX_CHECKS && Instant::now() < deadline {
        i -= 1;
        if !is_read(&best[i]) {
            continue;
        }
        let mut fewer = best.clone();
        fewer.remove(i);
        checks += 1;
        if violates(&fewer) {
            best = fewer;
        }
    }
    best.sort_by_key(|o| (o.invoke_ns, o.client));
    best
}

/// The history as known at `t` (see the module's description).
pub fn cut_at(ops: &[Op], t: u64) -> Vec<Op> {
    ops.iter()
        .filter(|o| o.invoke_ns <= t)
        .filter_map(|o| {
            if o.outcome != Outcome::Ok || o.end_ns <= t {
                return Some(o.clone());
            }
            if !o.call.writes() {
                return None;
            }
            let mut pending = o.clone();
            pending.outcome = Outcome::Unknown;
            pending.ret = None;
            pending.error = Some(format!("answered after the cut at {t} ns"));
            Some(pending)
        })
        .collect()
}

/// Whether an operation only observed the register.
fn is_read(op: &Op) -> bool {
    op.outcome == Outcome::Ok
        && match op.call {
            Call::Get => true,
            Call::Cas { .. } => op.ret == Some(Ret::Applied(false)),
            _ => false,
        }
}
