//! The linearizability checker on hand-made histories: ones that are linearizable (some
//! with concurrency, unknown outcomes and failures), and ones with a known violation — a
//! stale read after an acknowledged write, a lost increment, a value that was never
//! written, a read that flips back, a write that takes effect before it was made — each of
//! which it must catch, naming the operation that cannot be placed.

use cellar_bench::linearizability::checker::{check, check_key, Budget, Verdict};
use cellar_bench::linearizability::history::{Call, Op, Outcome, Ret};
use cellar_bench::linearizability::minimize::{cut_at, minimize};
use std::time::Duration;

fn op(client: u32, call: Call, at: (u64, u64), outcome: Outcome, ret: Option<Ret>) -> Op {
    Op {
        client,
        key: "k".into(),
        call,
        invoke_ns: at.0,
        end_ns: at.1,
        outcome,
        ret,
        error: None,
    }
}

fn put(c: u32, v: i64, at: (u64, u64)) -> Op {
    op(
        c,
        Call::Put { value: v },
        at,
        Outcome::Ok,
        Some(Ret::Written),
    )
}
fn get(c: u32, v: Option<i64>, at: (u64, u64)) -> Op {
    op(c, Call::Get, at, Outcome::Ok, Some(Ret::Read(v)))
}
fn incr(c: u32, d: i64, n: i64, at: (u64, u64)) -> Op {
    op(
        c,
        Call::Incr { delta: d },
        at,
        Outcome::Ok,
        Some(Ret::Counter(n)),
    )
}
fn cas(c: u32, e: Option<i64>, n: i64, applied: bool, at: (u64, u64)) -> Op {
    op(
        c,
        Call::Cas {
            expected: e,
            new: n,
        },
        at,
        Outcome::Ok,
        Some(Ret::Applied(applied)),
    )
}
fn unknown(c: u32, call: Call, at: u64) -> Op {
    op(c, call, (at, at + 1), Outcome::Unknown, None)
}
fn failed(c: u32, call: Call, at: (u64, u64)) -> Op {
    op(c, call, at, Outcome::Fail, None)
}

fn verdict(h: &[Op]) -> Verdict {
    check_key(h, &Budget::default()).0
}

/// The operation the checker could not place, when it found a violation.
fn stuck(h: &[Op]) -> Op {
    match verdict(h) {
        Verdict::Violation(v) => h[v.stuck].clone(),
        other => panic!("expected a violation, got {other:?} for {h:#?}"),
    }
}

#[test]
fn sequential_and_concurrent_histories_are_linearizable() {
    let histories: Vec<(&str, Vec<Op>)> = vec![
        ("empty", vec![]),
        (
            "a fresh register reads as nothing",
            vec![get(1, None, (0, 1))],
        ),
        (
            "one client, every call",
            vec![
                put(1, 1, (0, 1)),
                get(1, Some(1), (2, 3)),
                incr(1, 2, 3, (4, 5)),
                cas(1, Some(3), 10, true, (6, 7)),
                cas(1, Some(3), 11, false, (8, 9)),
                get(1, Some(10), (10, 11)),
                cas(1, Some(10), 12, true, (12, 13)),
            ],
        ),
        (
            "reads during a write see the old value, then the new",
            vec![
                put(1, 1, (0, 1)),
                put(2, 2, (2, 20)),
                get(3, Some(1), (3, 4)),
                get(3, Some(2), (5, 6)),
                get(4, Some(2), (7, 8)),
            ],
        ),
        (
            "concurrent increments in either order",
            vec![
                incr(1, 1, 2, (0, 10)),
                incr(2, 1, 1, (0, 10)),
                get(3, Some(2), (11, 12)),
            ],
        ),
        (
            "touching operations are concurrent",
            vec![put(1, 1, (0, 5)), get(2, None, (5, 6))],
        ),
        (
            "an unknown write seen later",
            vec![
                put(1, 1, (0, 1)),
                unknown(2, Call::Put { value: 5 }, 2),
                get(3, Some(1), (3, 4)),
                get(3, Some(5), (100, 101)),
            ],
        ),
        (
            "an unknown write never seen",
            vec![
                put(1, 1, (0, 1)),
                unknown(2, Call::Put { value: 5 }, 2),
                get(3, Some(1), (100, 101)),
            ],
        ),
        (
            "an unknown increment counted by a later one",
            vec![
                incr(1, 1, 1, (0, 1)),
                unknown(2, Call::Incr { delta: 5 }, 2),
                incr(1, 1, 7, (10, 11)),
            ],
        ),
        (
            "a failed write did not happen, an unanswered get says nothing",
            vec![
                put(1, 1, (0, 1)),
                failed(2, Call::Put { value: 9 }, (2, 3)),
                unknown(3, Call::Get, 2),
                get(1, Some(1), (4, 5)),
            ],
        ),
        (
            "check-and-mutate on a missing column",
            vec![
                cas(1, None, 4, true, (0, 1)),
                cas(2, None, 5, false, (2, 3)),
                get(1, Some(4), (4, 5)),
            ],
        ),
    ];
    for (what, h) in histories {
        assert_eq!(verdict(&h), Verdict::Linearizable, "{what}: {h:#?}");
    }
}

#[test]
fn a_stale_read_after_an_acknowledged_write_is_caught() {
    let h = vec![
        put(1, 1, (0, 1)),
        put(1, 2, (2, 3)),
        get(2, Some(1), (4, 5)),
    ];
    assert_eq!(stuck(&h), h[2]);
}

#[test]
fn a_lost_increment_is_caught() {
    // Two increments one after the other both answer 1.
    let h = vec![incr(1, 1, 1, (0, 1)), incr(2, 1, 1, (2, 3))];
    assert_eq!(stuck(&h), h[1]);
    // Concurrent ones cannot both see 0 either.
    let h = vec![incr(1, 1, 1, (0, 10)), incr(2, 1, 1, (0, 10))];
    assert!(matches!(verdict(&h), Verdict::Violation(_)));
    // Nor can a read miss an acknowledged increment.
    let h = vec![
        incr(1, 1, 1, (0, 1)),
        incr(1, 1, 2, (2, 3)),
        get(2, Some(1), (4, 5)),
    ];
    assert_eq!(stuck(&h), h[2]);
}

#[test]
fn a_value_never_written_is_caught() {
    let h = vec![put(1, 1, (0, 1)), get(2, Some(7), (2, 3))];
    assert_eq!(stuck(&h), h[1]);
    // A failed write is not a write.
    let h = vec![
        failed(1, Call::Put { value: 7 }, (0, 1)),
        get(2, Some(7), (2, 3)),
    ];
    assert!(matches!(verdict(&h), Verdict::Violation(_)));
}

#[test]
fn a_read_that_flips_back_is_caught() {
    let h = vec![
        put(1, 1, (0, 1)),
        put(2, 2, (2, 20)),
        get(3, Some(2), (3, 4)),
        get(3, Some(1), (5, 6)),
    ];
    assert_eq!(stuck(&h), h[3]);
}

#[test]
fn an_acknowledged_write_lost_across_a_restart_is_caught() {
    // Acknowledged put, then the server dies (unknown ops), then the register reads empty.
    let h = vec![
        put(1, 1, (0, 1)),
        unknown(2, Call::Incr { delta: 1 }, 2),
        unknown(3, Call::Put { value: 3 }, 2),
        get(1, None, (100, 101)),
    ];
    assert_eq!(stuck(&h), h[3]);
}

#[test]
fn an_unknown_write_cannot_take_effect_before_it_was_made() {
    let h = vec![
        get(1, Some(5), (0, 1)),
        unknown(2, Call::Put { value: 5 }, 2),
    ];
    assert!(matches!(verdict(&h), Verdict::Violation(_)));
}

#[test]
fn a_check_and_mutate_that_could_not_hold_is_caught() {
    let h = vec![put(1, 1, (0, 1)), cas(2, Some(5), 6, true, (2, 3))];
    assert_eq!(stuck(&h), h[1]);
    let h = vec![put(1, 1, (0, 1)), cas(2, Some(1), 6, false, (2, 3))];
    assert_eq!(stuck(&h), h[1]);
}

#[test]
fn keys_are_checked_apart() {
    let mut a = put(1, 1, (0, 1));
    a.key = "a".into();
    let mut b = get(2, Some(1), (2, 3));
    b.key = "b".into();
    let mut c = get(2, Some(1), (4, 5));
    c.key = "a".into();
    let reports = check(&[a, b, c], &Budget::default());
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].key, "a");
    assert_eq!(reports[0].verdict, Verdict::Linearizable);
    assert_eq!(reports[1].key, "b");
    assert!(matches!(reports[1].verdict, Verdict::Violation(_)));
}

#[test]
fn a_search_past_its_budget_is_undecided_not_an_answer() {
    // Many concurrent unknown increments and a read of a sum that needs most of them: a
    // large space, and a budget of a few steps.
    let mut h: Vec<Op> = (0..30)
        .map(|i| {
            unknown(
                i,
                Call::Incr {
                    delta: 1 << (i % 8),
                },
                0,
            )
        })
        .collect();
    h.push(get(99, Some(1_000_000), (10, 11)));
    let tiny = Budget {
        steps_per_key: 100,
        ..Budget::default()
    };
    assert!(matches!(check_key(&h, &tiny).0, Verdict::Undecided(_)));
}

#[test]
fn a_witness_is_small_and_still_a_violation() {
    // A long, busy history (120 operations) with one stale read in the middle.
    let mut h = Vec::new();
    let mut t = 0;
    for i in 0..40 {
        h.push(put(1, i, (t, t + 1)));
        h.push(get(2, Some(i), (t + 2, t + 3)));
        h.push(get(3, Some(i), (t + 2, t + 4)));
        t += 10;
        if i == 20 {
            h.push(get(4, Some(19), (t - 5, t - 4)));
        }
    }
    assert!(matches!(verdict(&h), Verdict::Violation(_)));
    let w = minimize(&h, Duration::from_secs(30));
    assert!(matches!(verdict(&w), Verdict::Violation(_)), "{w:#?}");
    // Writes are never dropped (a read may need them); every read but the stale one is,
    // and nothing invoked after it stays.
    let stale = get(4, Some(19), (205, 206));
    assert!(w.contains(&stale), "{w:#?}");
    let reads: Vec<&Op> = w.iter().filter(|o| o.call == Call::Get).collect();
    assert_eq!(reads, vec![&stale], "{w:#?}");
    assert_eq!(w.len(), 22, "puts 0..=20 and the stale read: {w:#?}");
}

#[test]
fn a_cut_turns_operations_answered_later_into_unknown_ones() {
    let h = vec![
        put(1, 1, (0, 1)),
        put(2, 2, (2, 10)),
        get(3, Some(2), (3, 9)),
        get(4, None, (20, 21)),
    ];
    let cut = cut_at(&h, 5);
    assert_eq!(cut.len(), 2, "{cut:#?}");
    assert_eq!(cut[0], h[0]);
    assert_eq!(cut[1].outcome, Outcome::Unknown);
    assert_eq!(cut[1].call, Call::Put { value: 2 });
}
