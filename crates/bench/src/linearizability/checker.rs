//! Whether a history is linearizable: Wing and Gong's search for a total order of the
//! operations that respects real time and the register's sequential specification
//! ([`super::model`]), with Lowe's memoisation (a configuration — the set of operations
//! already placed and the register's state — is explored once; one that only adds unknown
//! operations to an explored one is skipped, see [`Memo`]). Linearizability is
//! P-compositional: a history is linearizable when the sub-history of each key is, so each
//! key is searched on its own.
//!
//! Operations that failed took no effect and are left out; so are gets that did not complete
//! (they constrain nothing). An `unknown` operation never completes: it may be placed
//! anywhere after its invocation, including after everything else, which is the same as not
//! having happened. Every register starts empty.
//!
//! Real-time order: A precedes B only when A's answer came strictly before B was invoked;
//! operations whose times touch are concurrent (the checker never assumes an order the
//! clock cannot prove).

use super::history::{Op, Outcome};
use super::model::{self, State};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// How much searching a check may do before it answers "undecided".
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Search steps per key.
    pub steps_per_key: u64,
    /// Configurations remembered per key (each holds a bit per operation).
    pub configurations_per_key: usize,
    /// No search step after this instant.
    pub deadline: Option<Instant>,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            steps_per_key: 50_000_000,
            configurations_per_key: 5_000_000,
            deadline: None,
        }
    }
}

/// Why the search found no linearization: the longest prefix it could build, and the
/// operation that then had to be placed and could not be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Indices (into the key's operations) of the longest sequence placed, in order; for
    /// very long histories only its last operations.
    pub longest: Vec<usize>,
    /// How many operations that sequence had in all.
    pub longest_len: usize,
    /// The register's state after it.
    pub state: State,
    /// The operation whose answer arrived before it could be placed after that sequence.
    pub stuck: usize,
}

/// The result for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    Violation(Violation),
    /// The budget ran out first.
    Undecided(String),
}

/// One key's check.
#[derive(Debug, Clone)]
pub struct KeyReport {
    pub key: String,
    /// The key's operations, in the order of the input history.
    pub ops: Vec<Op>,
    /// How many of them the search had to place (not failed, not unanswered gets).
    pub relevant: usize,
    pub verdict: Verdict,
    pub steps: u64,
}

/// Checks every key of `history` on its own; the reports are in key order.
pub fn check(history: &[Op], budget: &Budget) -> Vec<KeyReport> {
    let mut by_key: BTreeMap<&str, Vec<Op>> = BTreeMap::new();
    for op in history {
        by_key.entry(op.key.as_str()).or_default().push(op.clone());
    }
    by_key
        .into_iter()
        .map(|(key, ops)| {
            let (verdict, relevant, steps) = check_key(&ops, budget);
            KeyReport {
                key: key.to_string(),
                ops,
                relevant,
                verdict,
                steps,
            }
        })
        .collect()
}

/// Whether an operation takes part in the search.
pub fn is_relevant(op: &Op) -> bool {
    match op.outcome {
        Outcome::Ok => true,
        Outcome::Fail => false,
        Outcome::Unknown => op.call.writes(),
    }
}

/// Checks the operations of one key (all of `ops` are taken to be on one register):
/// the verdict, how many operations took part, and the steps the search made. Indices in a
/// [`Violation`] are into `ops`.
pub fn check_key(ops: &[Op], budget: &Budget) -> (Verdict, usize, u64) {
    let index: Vec<usize> = (0..ops.len()).filter(|&i| is_relevant(&ops[i])).collect();
    let relevant: Vec<&Op> = index.iter().map(|&i| &ops[i]).collect();
    let (verdict, steps) = Search::new(&relevant).run(budget);
    let verdict = match verdict {
        Verdict::Violation(v) => Verdict::Violation(Violation {
            longest: v.longest.iter().map(|&i| index[i]).collect(),
            longest_len: v.longest_len,
            state: v.state,
            stuck: index[v.stuck],
        }),
        other => other,
    };
    (verdict, relevant.len(), steps)
}

/// End of the entry list.
const NONE: usize = usize::MAX;
/// The list's head sentinel.
const HEAD: usize = 0;
/// Longest placed sequence kept in a violation report.
const LONGEST_KEPT: usize = 200;

/// The search's entry list: a call and a return entry per operation, in time order, with
/// entries of placed operations unlinked ("lifted"). Entry 0 is the head.
struct Search<'a> {
    ops: &'a [&'a Op],
    /// Per entry (after the head): its operation, and whether it is the call.
    op_of: Vec<usize>,
    is_call: Vec<bool>,
    /// Per call entry: its return entry.
    matching: Vec<usize>,
    next: Vec<usize>,
    prev: Vec<usize>,
}

impl<'a> Search<'a> {
    fn new(ops: &'a [&'a Op]) -> Search<'a> {
        // (time, 0 for calls / 1 for returns, op): calls before returns at one instant, so
        // touching operations are concurrent.
        let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            events.push((op.invoke_ns, 0, i));
            let end = match op.outcome {
                Outcome::Ok => op.end_ns,
                _ => u64::MAX,
            };
            events.push((end, 1, i));
        }
        events.sort_unstable();
        let n = events.len() + 1;
        let mut s = Search {
            ops,
            op_of: vec![NONE; n],
            is_call: vec![false; n],
            matching: vec![NONE; n],
            next: vec![NONE; n],
            prev: vec![NONE; n],
        };
        let mut call_entry = vec![NONE; ops.len()];
        for (pos, &(_, kind, op)) in events.iter().enumerate() {
            let e = pos + 1;
            s.op_of[e] = op;
            s.is_call[e] = kind == 0;
            if kind == 0 {
                call_entry[op] = e;
            } else if let Some(&c) = call_entry.get(op) {
                s.matching[c] = e;
            }
        }
        for e in 0..n {
            s.next[e] = if e + 1 < n { e + 1 } else { NONE };
            s.prev[e] = if e == 0 { NONE } else { e - 1 };
        }
        s
    }

    /// Unlinks a call entry and its return.
    fn lift(&mut self, call: usize) {
        for e in [call, self.matching[call]] {
            let (p, n) = (self.prev[e], self.next[e]);
            self.next[p] = n;
            if n != NONE {
                self.prev[n] = p;
            }
        }
    }

    /// Links back what [`Search::lift`] unlinked (the return first).
    fn unlift(&mut self, call: usize) {
        for e in [self.matching[call], call] {
            let (p, n) = (self.prev[e], self.next[e]);
            self.next[p] = e;
            if n != NONE {
                self.prev[n] = e;
            }
        }
    }

    fn run(mut self, budget: &Budget) -> (Verdict, u64) {
        let mut memo = Memo::new(self.ops);
        // Placed call entries, with the state before each and the pass they were placed in.
        let mut stack: Vec<(usize, State, bool)> = Vec::new();
        let mut state: State = None;
        // Each level tries the answered operations first and the unknown ones in a second
        // pass: an unknown operation is placed early only when no answered one fits, so the
        // common case — its effect never seen — costs little.
        let mut unknown_pass = false;
        let mut best: Option<Violation> = None;
        let mut steps: u64 = 0;
        // Done when every answered operation is placed: the unknown ones left can go last,
        // where they change nothing anyone saw.
        let mut answered_left = self.ops.iter().filter(|o| o.outcome == Outcome::Ok).count();
        let mut entry = self.next[HEAD];
        while answered_left > 0 {
            steps += 1;
            if steps > budget.steps_per_key {
                return (
                    Verdict::Undecided(format!(
                        "no answer within {} search steps",
                        budget.steps_per_key
                    )),
                    steps,
                );
            }
            if steps.is_multiple_of(4096) {
                if let Some(d) = budget.deadline {
                    if Instant::now() >= d {
                        return (Verdict::Undecided("the check's time ran out".into()), steps);
                    }
                }
            }
            if entry == NONE {
                // Cannot happen: the list ends with return entries, handled below.
                break;
            }
            let i = self.op_of[entry];
            if self.is_call[entry] {
                let op = self.ops[i];
                if (op.outcome != Outcome::Ok) != unknown_pass {
                    entry = self.next[entry];
                    continue;
                }
                if let Some(after) = model::step(state, op.call, op.outcome, op.ret) {
                    memo.place(i, true);
                    if memo.remember(after) {
                        if memo.size > budget.configurations_per_key {
                            return (
                                Verdict::Undecided(format!(
                                    "more than {} configurations to remember",
                                    budget.configurations_per_key
                                )),
                                steps,
                            );
                        }
                        stack.push((entry, state, unknown_pass));
                        answered_left -= usize::from(op.outcome == Outcome::Ok);
                        state = after;
                        self.lift(entry);
                        unknown_pass = false;
                        entry = self.next[HEAD];
                        continue;
                    }
                    memo.place(i, false);
                }
                entry = self.next[entry];
            } else if !unknown_pass {
                unknown_pass = true;
                entry = self.next[HEAD];
            } else {
                // The answer of operation `i` came, and it is not placed: what is placed so
                // far cannot be extended past this point. Back up one.
                if best.as_ref().is_none_or(|b| stack.len() > b.longest_len) {
                    let from = stack.len().saturating_sub(LONGEST_KEPT);
                    best = Some(Violation {
                        longest: stack[from..]
                            .iter()
                            .map(|&(e, _, _)| self.op_of[e])
                            .collect(),
                        longest_len: stack.len(),
                        state,
                        stuck: i,
                    });
                }
                let Some((call, before, pass)) = stack.pop() else {
                    let v = best.unwrap_or(Violation {
                        longest: Vec::new(),
                        longest_len: 0,
                        state,
                        stuck: i,
                    });
                    return (Verdict::Violation(v), steps);
                };
                state = before;
                unknown_pass = pass;
                memo.place(self.op_of[call], false);
                answered_left += usize::from(
                    self.ops
                        .get(self.op_of[call])
                        .is_some_and(|o| o.outcome == Outcome::Ok),
                );
                self.unlift(call);
                entry = self.next[call];
            }
        }
        (Verdict::Linearizable, steps)
    }
}

/// A set of operations, a bit each.
type Bits = Box<[u64]>;

/// The configurations explored: which operations are placed, and the register's state.
///
/// Answered and unknown operations are kept apart because an unknown one placed adds
/// nothing: whatever completes a configuration with it placed also completes the same
/// configuration without it (the same operations in the same order, and the unknown one
/// last, where it changes nothing anyone saw; the search ends once every answered one is
/// placed, so that last step is never needed). So a configuration is skipped when one with
/// the same answered operations and state, and a subset of its unknown ones, was explored —
/// this keeps a search with many unknown writes from trying every subset of them.
struct Memo {
    /// Per operation: whether it is unknown, and its bit among its kind.
    bit: Vec<(bool, usize)>,
    answered: Vec<u64>,
    unknown: Vec<u64>,
    /// (answered placed, state) → the minimal sets of unknown ones explored with them.
    seen: HashMap<(Bits, State), Vec<Bits>>,
    /// Sets stored in all.
    size: usize,
}

impl Memo {
    fn new(ops: &[&Op]) -> Memo {
        let (mut answered, mut unknown) = (0usize, 0usize);
        let bit = ops
            .iter()
            .map(|op| {
                if op.outcome == Outcome::Ok {
                    answered += 1;
                    (false, answered - 1)
                } else {
                    unknown += 1;
                    (true, unknown - 1)
                }
            })
            .collect();
        Memo {
            bit,
            answered: vec![0; answered.div_ceil(64)],
            unknown: vec![0; unknown.div_ceil(64)],
            seen: HashMap::new(),
            size: 0,
        }
    }

    /// Marks operation `i` placed or not.
    fn place(&mut self, i: usize, on: bool) {
        let Some(&(unknown, b)) = self.bit.get(i) else {
            return;
        };
        let bits = if unknown {
            &mut self.unknown
        } else {
            &mut self.answered
        };
        if let Some(w) = bits.get_mut(b / 64) {
            let mask = 1u64 << (b % 64);
            if on {
                *w |= mask;
            } else {
                *w &= !mask;
            }
        }
    }

    /// Records the current placement with `state`; false when it (or one it is no better
    /// than) was explored already.
    fn remember(&mut self, state: State) -> bool {
        let sets = self
            .seen
            .entry((self.answered.clone().into_boxed_slice(), state))
            .or_default();
        let now = &self.unknown[..];
        if sets.iter().any(|explored| subset(explored, now)) {
            return false;
        }
        let before = sets.len();
        sets.retain(|explored| !subset(now, explored));
        sets.push(now.into());
        self.size = self.size + sets.len() - before;
        true
    }
}

/// Whether every bit of `a` is set in `b` (same length).
fn subset(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x & !y == 0)
}
