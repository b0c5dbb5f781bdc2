//! The sequential specification the checker holds a history to: one register holding an i64
//! or nothing, with put, get, check-and-mutate and increment as Cellar runs them on one
//! column (a missing column counts as 0 for an increment; sums wrap, as Cellar's counters do).

use super::history::{Call, Outcome, Ret};

/// The register's value; `None`: the column does not exist.
pub type State = Option<i64>;

/// What running `call` on `state` gives when the operation ended with `outcome` and answered
/// `ret`: the new state, or `None` when the answer is impossible from this state.
///
/// An `unknown` operation has no answer to match: it takes effect as it would (a
/// check-and-mutate writes if its condition holds in `state`). Operations that failed are
/// not given to the model; they did not happen.
pub fn step(state: State, call: Call, outcome: Outcome, ret: Option<Ret>) -> Option<State> {
    let known = match outcome {
        Outcome::Ok => ret,
        Outcome::Unknown | Outcome::Fail => None,
    };
    match (call, known) {
        (Call::Put { value }, _) => Some(Some(value)),
        (Call::Get, Some(Ret::Read(seen))) => (seen == state).then_some(state),
        // An unanswered get constrains nothing (the checker leaves such gets out).
        (Call::Get, _) => Some(state),
        (Call::Cas { expected, new }, answer) => {
            let holds = state == expected;
            match answer {
                Some(Ret::Applied(applied)) if applied != holds => None,
                _ if holds => Some(Some(new)),
                _ => Some(state),
            }
        }
        (Call::Incr { delta }, answer) => {
            let sum = state.unwrap_or(0).wrapping_add(delta);
            match answer {
                Some(Ret::Counter(n)) if n != sum => None,
                _ => Some(Some(sum)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(state: State, call: Call, ret: Ret) -> Option<State> {
        step(state, call, Outcome::Ok, Some(ret))
    }

    #[test]
    fn answered_operations_must_match_the_state() {
        assert_eq!(
            ok(None, Call::Put { value: 4 }, Ret::Written),
            Some(Some(4))
        );
        assert_eq!(ok(Some(4), Call::Get, Ret::Read(Some(4))), Some(Some(4)));
        assert_eq!(ok(Some(4), Call::Get, Ret::Read(None)), None);
        assert_eq!(ok(None, Call::Get, Ret::Read(None)), Some(None));
        let cas = Call::Cas {
            expected: Some(4),
            new: 5,
        };
        assert_eq!(ok(Some(4), cas, Ret::Applied(true)), Some(Some(5)));
        assert_eq!(ok(Some(4), cas, Ret::Applied(false)), None);
        assert_eq!(ok(Some(3), cas, Ret::Applied(false)), Some(Some(3)));
        assert_eq!(ok(None, cas, Ret::Applied(true)), None);
        let cas_absent = Call::Cas {
            expected: None,
            new: 1,
        };
        assert_eq!(ok(None, cas_absent, Ret::Applied(true)), Some(Some(1)));
        assert_eq!(ok(Some(0), cas_absent, Ret::Applied(true)), None);
        let incr = Call::Incr { delta: 2 };
        assert_eq!(ok(None, incr, Ret::Counter(2)), Some(Some(2)));
        assert_eq!(ok(Some(5), incr, Ret::Counter(7)), Some(Some(7)));
        assert_eq!(ok(Some(5), incr, Ret::Counter(2)), None);
        assert_eq!(
            ok(
                Some(i64::MAX),
                Call::Incr { delta: 1 },
                Ret::Counter(i64::MIN)
            ),
            Some(Some(i64::MIN))
        );
    }

    #[test]
    fn unknown_operations_take_effect_as_they_would() {
        let u = |s, c| step(s, c, Outcome::Unknown, None);
        assert_eq!(u(None, Call::Put { value: 9 }), Some(Some(9)));
        let cas = Call::Cas {
            expected: Some(1),
            new: 2,
        };
        assert_eq!(u(Some(1), cas), Some(Some(2)));
        assert_eq!(u(Some(3), cas), Some(Some(3)));
        assert_eq!(u(Some(3), Call::Incr { delta: -1 }), Some(Some(2)));
    }
}
