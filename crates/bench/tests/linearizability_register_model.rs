//! Histories made by a sequential in-memory register always check as linearizable: each
//! operation takes effect at its own instant, and its call and answer are placed anywhere
//! around that instant (random, often overlapping windows). Some operations end unknown —
//! applied or not — and some fail (not applied). Changing one answer to a value that was
//! never written makes the same history a violation. And on small random histories, most of
//! them not linearizable, the search agrees with trying every order.

use cellar_bench::linearizability::checker::{check, check_key, is_relevant, Budget, Verdict};
use cellar_bench::linearizability::history::{Call, Op, Outcome, Ret};
use cellar_bench::linearizability::model;
use proptest::prelude::*;
use std::collections::HashMap;

/// How one generated operation ends.
#[derive(Debug, Clone, Copy)]
enum End {
    Ok,
    UnknownApplied,
    UnknownNotApplied,
    Failed,
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        16 => Just(End::Ok),
        2 => Just(End::UnknownApplied),
        1 => Just(End::UnknownNotApplied),
        1 => Just(End::Failed),
    ]
}

/// Small values, so reads often meet earlier writes and conditions often hold.
fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        3 => Just(Call::Get),
        2 => (1i64..5).prop_map(|value| Call::Put { value }),
        2 => (prop::option::of(1i64..5), 1i64..5)
            .prop_map(|(expected, new)| Call::Cas { expected, new }),
        2 => (1i64..3).prop_map(|delta| Call::Incr { delta }),
    ]
}

/// (key, call, end, window before, window after) per operation.
fn plan() -> impl Strategy<Value = Vec<(u8, Call, End, u64, u64)>> {
    prop::collection::vec((0u8..3, call(), end(), 0u64..60, 0u64..60), 0..60)
}

/// Runs the plan on one register per key; operation i takes effect at 10·(i+1) ns.
fn history(plan: &[(u8, Call, End, u64, u64)]) -> Vec<Op> {
    let mut state: HashMap<u8, model::State> = HashMap::new();
    let mut ops = Vec::new();
    for (i, &(key, call, end, before, after)) in plan.iter().enumerate() {
        let at = 10 * (i as u64 + 1);
        let s = state.entry(key).or_default();
        let (outcome, ret) = match end {
            End::Ok => {
                let ret = answer(*s, call);
                *s = apply(*s, call);
                (Outcome::Ok, Some(ret))
            }
            End::UnknownApplied => {
                *s = apply(*s, call);
                (Outcome::Unknown, None)
            }
            End::UnknownNotApplied => (Outcome::Unknown, None),
            End::Failed => (Outcome::Fail, None),
        };
        ops.push(Op {
            client: i as u32,
            key: format!("k{key}"),
            call,
            invoke_ns: at - before.min(at),
            end_ns: at + after,
            outcome,
            ret,
            error: None,
        });
    }
    ops
}

fn apply(s: model::State, call: Call) -> model::State {
    model::step(s, call, Outcome::Unknown, None).unwrap_or(s)
}

fn answer(s: model::State, call: Call) -> Ret {
    match call {
        Call::Put { .. } => Ret::Written,
        Call::Get => Ret::Read(s),
        Call::Cas { expected, .. } => Ret::Applied(s == expected),
        Call::Incr { delta } => Ret::Counter(s.unwrap_or(0).wrapping_add(delta)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_sequential_register_is_linearizable(plan in plan()) {
        let h = history(&plan);
        for r in check(&h, &Budget::default()) {
            prop_assert_eq!(&r.verdict, &Verdict::Linearizable, "key {}: {:#?}", r.key, r.ops);
        }
    }

    #[test]
    fn a_read_of_a_value_never_written_is_a_violation(plan in plan(), pick in any::<prop::sample::Index>()) {
        let mut h = history(&plan);
        let reads: Vec<usize> = (0..h.len())
            .filter(|&i| h[i].outcome == Outcome::Ok && h[i].call == Call::Get)
            .collect();
        prop_assume!(!reads.is_empty());
        let i = reads[pick.index(reads.len())];
        // Values are positive and small: -1 is never written nor summed to.
        h[i].ret = Some(Ret::Read(Some(-1)));
        let key = h[i].key.clone();
        let same_key: Vec<Op> = h.into_iter().filter(|o| o.key == key).collect();
        let (verdict, _, _) = check_key(&same_key, &Budget::default());
        prop_assert!(matches!(verdict, Verdict::Violation(_)), "{:#?}", same_key);
    }
}

/// Whether some order of the relevant operations — every answered one and any subset of the
/// unknown ones — respects real time and the register, tried exhaustively.
fn brute_force(h: &[Op]) -> bool {
    let ops: Vec<&Op> = h.iter().filter(|o| is_relevant(o)).collect();
    let unknown: Vec<usize> = (0..ops.len())
        .filter(|&i| ops[i].outcome == Outcome::Unknown)
        .collect();
    (0..1u32 << unknown.len()).any(|mask| {
        let chosen: Vec<usize> = (0..ops.len())
            .filter(|&i| match unknown.iter().position(|&u| u == i) {
                Some(p) => mask & (1 << p) != 0,
                None => true,
            })
            .collect();
        some_order(&ops, &chosen, &mut Vec::new(), None)
    })
}

fn some_order(ops: &[&Op], left: &[usize], done: &mut Vec<usize>, state: model::State) -> bool {
    if left.is_empty() {
        return true;
    }
    for (k, &i) in left.iter().enumerate() {
        // i may go next unless an operation still left was answered before i was invoked.
        let blocked = left
            .iter()
            .any(|&j| j != i && ops[j].outcome == Outcome::Ok && ops[j].end_ns < ops[i].invoke_ns);
        if blocked {
            continue;
        }
        if let Some(next) = model::step(state, ops[i].call, ops[i].outcome, ops[i].ret) {
            let mut rest = left.to_vec();
            rest.remove(k);
            done.push(i);
            if some_order(ops, &rest, done, next) {
                return true;
            }
            done.pop();
        }
    }
    false
}

fn random_op() -> impl Strategy<Value = Op> {
    let ret_for = |call: Call| -> BoxedStrategy<Ret> {
        match call {
            Call::Put { .. } => Just(Ret::Written).boxed(),
            Call::Get => prop::option::of(1i64..4).prop_map(Ret::Read).boxed(),
            Call::Cas { .. } => any::<bool>().prop_map(Ret::Applied).boxed(),
            Call::Incr { .. } => (1i64..6).prop_map(Ret::Counter).boxed(),
        }
    };
    (call(), 0u64..40, 0u64..25, 0u8..10).prop_flat_map(move |(call, at, len, how)| {
        let outcome = match how {
            0..=6 => Outcome::Ok,
            7 | 8 => Outcome::Unknown,
            _ => Outcome::Fail,
        };
        let ret = if outcome == Outcome::Ok {
            ret_for(call).prop_map(Some).boxed()
        } else {
            Just(None).boxed()
        };
        ret.prop_map(move |ret| Op {
            client: 0,
            key: "k".into(),
            call,
            invoke_ns: at,
            end_ns: at + len,
            outcome,
            ret,
            error: None,
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_search_agrees_with_trying_every_order(h in prop::collection::vec(random_op(), 0..7)) {
        let (verdict, _, _) = check_key(&h, &Budget::default());
        let expected = brute_force(&h);
        match verdict {
            Verdict::Linearizable => prop_assert!(expected, "search says linearizable: {:#?}", h),
            Verdict::Violation(_) => prop_assert!(!expected, "search says violation: {:#?}", h),
            Verdict::Undecided(why) => prop_assert!(false, "undecided ({}): {:#?}", why, h),
        }
    }
}
