//! `linkedlist verify`: scans the whole table and sorts every node into
//! - REFERENCED: the row exists and some node points at it;
//! - UNREFERENCED: the row exists and nothing points at it (expected only for the last nodes
//!   of lists whose circle was not closed);
//! - UNDEFINED: some node points at it and the row does not exist: an acknowledged write
//!   was lost (a node is written only after the node it points at was acknowledged).

use super::node::{self, Key};
use super::Summary;
use cellar_client::{Client, Scan};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Undefined references listed in the report.
const SHOWN: usize = 10;

/// What the scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub rows: u64,
    pub referenced: u64,
    pub unreferenced: u64,
    pub undefined: u64,
    /// Rows pointed at by more than one node (never made by generate).
    pub multiply_referenced: u64,
    /// Rows whose key or `prev` is not 16 bytes.
    pub malformed: u64,
    /// Up to [`SHOWN`] undefined references: the missing key, and who points at it.
    pub missing: Vec<String>,
}

/// One scanned node: its key, what it points at, who wrote it.
struct Scanned {
    key: Key,
    client: u32,
    count: Option<u64>,
}

/// Sorts the nodes into the three kinds. `defined` must be sorted by key (a scan's order);
/// `refs` are (target, index of the referring node in `defined`).
pub fn classify(defined: &[Key], refs: &mut [(Key, usize)]) -> Counts {
    refs.sort_unstable();
    let mut c = Counts {
        rows: defined.len() as u64,
        ..Counts::default()
    };
    let mut r = 0;
    for d in defined {
        // References to keys below this one are to rows that do not exist.
        while let Some((target, _)) = refs.get(r) {
            if target >= d {
                break;
            }
            let t = *target;
            c.undefined += 1;
            while refs.get(r).is_some_and(|(x, _)| *x == t) {
                r += 1;
            }
        }
        let mut n = 0;
        while refs.get(r).is_some_and(|(x, _)| x == d) {
            n += 1;
            r += 1;
        }
        match n {
            0 => c.unreferenced += 1,
            1 => c.referenced += 1,
            _ => {
                c.referenced += 1;
                c.multiply_referenced += 1;
            }
        }
    }
    while let Some((t, _)) = refs.get(r).copied() {
        c.undefined += 1;
        while refs.get(r).is_some_and(|(x, _)| *x == t) {
            r += 1;
        }
    }
    c
}

/// Scans `table` and counts; prints a progress line every `status_interval`.
pub async fn scan(addr: &str, table: &str, status_interval: Duration) -> Result<Counts, String> {
    let client = {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            match Client::connect(addr).await {
                Ok(c) => break c,
                Err(e) if Instant::now() >= until => {
                    return Err(format!("cannot connect to cellar://{addr}: {e}"))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    };
    let started = Instant::now();
    let mut last_status = started;
    let mut scanner = client
        .table(table)
        .scan(Scan::new().family(node::FAMILY).caching(1000));
    let mut defined: Vec<Key> = Vec::new();
    let mut nodes: Vec<Scanned> = Vec::new();
    let mut refs: Vec<(Key, usize)> = Vec::new();
    let mut clients: HashMap<Vec<u8>, u32> = HashMap::new();
    let mut names: Vec<String> = Vec::new();
    let mut malformed = 0u64;
    while let Some(row) = scanner
        .next()
        .await
        .map_err(|e| format!("scanning table '{table}': {e}"))?
    {
        if last_status.elapsed() >= status_interval {
            last_status = Instant::now();
            eprintln!(
                "linkedlist verify: {:.0} s: {} rows scanned",
                started.elapsed().as_secs_f64(),
                defined.len() + malformed as usize
            );
        }
        let Ok(key) = Key::try_from(&row.row[..]) else {
            malformed += 1;
            continue;
        };
        let prev = row.value(node::FAMILY, node::PREV);
        let prev = match prev.map(|p| Key::try_from(&p[..])) {
            None => None,
            Some(Ok(p)) => Some(p),
            Some(Err(_)) => {
                malformed += 1;
                continue;
            }
        };
        let client_name = row
            .value(node::FAMILY, node::CLIENT)
            .map(|c| c.to_vec())
            .unwrap_or_default();
        let next_id = u32::try_from(names.len()).unwrap_or(u32::MAX);
        let client_id = *clients.entry(client_name.clone()).or_insert_with(|| {
            names.push(String::from_utf8_lossy(&client_name).into_owned());
            next_id
        });
        let count = row
            .value(node::FAMILY, node::COUNT)
            .and_then(|c| <[u8; 8]>::try_from(&c[..]).ok())
            .map(u64::from_be_bytes);
        let index = defined.len();
        defined.push(key);
        nodes.push(Scanned {
            key,
            client: client_id,
            count,
        });
        if let Some(p) = prev {
            refs.push((p, index));
        }
    }
    // A scan returns rows in key order, once each; anything else is a bug of its own.
    if let Some(w) = defined.windows(2).find(|w| w[0] >= w[1]) {
        return Err(format!(
            "the scan of table '{table}' returned row {} after row {}: rows out of order or repeated",
            node::hex(&w[1]),
            node::hex(&w[0])
        ));
    }
    let mut counts = classify(&defined, &mut refs);
    counts.malformed = malformed;
    counts.rows += malformed;
    // Name the first undefined references and their referrers.
    for (target, from) in refs.iter() {
        if counts.missing.len() >= SHOWN {
            break;
        }
        if defined.binary_search(target).is_ok() {
            continue;
        }
        let referrer = nodes.get(*from);
        let mut line = format!("missing {}", node::hex(target));
        if let Some(n) = referrer {
            let _ = write!(
                line,
                ", pointed at by {} (writer {}, node {})",
                node::hex(&n.key),
                names.get(n.client as usize).map_or("?", String::as_str),
                n.count.map_or_else(|| "?".to_string(), |c| c.to_string())
            );
        }
        counts.missing.push(line);
    }
    eprintln!(
        "linkedlist verify: scanned {} rows of table '{table}' in {:.1} s",
        counts.rows,
        started.elapsed().as_secs_f64()
    );
    Ok(counts)
}

/// The report, and whether the table passes: no undefined, malformed or multiply referenced
/// nodes, and — given what generate reported — the node count within what was acknowledged
/// and what may have landed, and no more unreferenced nodes than open lists explain.
pub fn judge(c: &Counts, expected: Option<&Summary>) -> (String, Vec<String>) {
    let mut out = String::new();
    let _ = writeln!(out, "REFERENCED={}", c.referenced);
    let _ = writeln!(out, "UNREFERENCED={}", c.unreferenced);
    let _ = writeln!(out, "UNDEFINED={}", c.undefined);
    if c.multiply_referenced > 0 {
        let _ = writeln!(out, "MULTIPLY_REFERENCED={}", c.multiply_referenced);
    }
    if c.malformed > 0 {
        let _ = writeln!(out, "MALFORMED={}", c.malformed);
    }
    for m in &c.missing {
        let _ = writeln!(out, "  {m}");
    }
    let mut problems = Vec::new();
    if c.undefined > 0 {
        problems.push(format!(
            "{} nodes are pointed at but missing: acknowledged writes were lost",
            c.undefined
        ));
    }
    if c.malformed > 0 {
        problems.push(format!("{} rows are not nodes", c.malformed));
    }
    if c.multiply_referenced > 0 {
        problems.push(format!(
            "{} nodes are pointed at more than once",
            c.multiply_referenced
        ));
    }
    if let Some(e) = expected {
        let defined = c.referenced + c.unreferenced;
        let most = e.acknowledged + e.unsettled;
        let _ = writeln!(
            out,
            "expected: {} acknowledged, {} unsettled, {} open heads; found {defined} nodes",
            e.acknowledged, e.unsettled, e.open_heads
        );
        if defined < e.acknowledged {
            problems.push(format!(
                "{} nodes found, {} were acknowledged: {} acknowledged nodes are missing",
                defined,
                e.acknowledged,
                e.acknowledged - defined
            ));
        }
        if defined > most {
            problems.push(format!(
                "{defined} nodes found, at most {most} were written"
            ));
        }
        if c.unreferenced > e.open_heads + e.unsettled {
            problems.push(format!(
                "{} nodes are pointed at by nothing, at most {} lists were left open: a node's link was lost",
                c.unreferenced,
                e.open_heads + e.unsettled
            ));
        }
    }
    (out, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(b: u8) -> Key {
        [b; 16]
    }

    #[test]
    fn nodes_are_sorted_into_the_three_kinds() {
        // 1 <- 2 <- 3, 5 -> 4 (missing), 6 -> 9 (missing), 7 alone, 8 -> 3.
        let defined = vec![k(1), k(2), k(3), k(5), k(6), k(7), k(8)];
        let mut refs = vec![
            (k(1), 1),
            (k(2), 2),
            (k(4), 3),
            (k(9), 4),
            (k(3), 6),
            (k(0), 5),
        ];
        let c = classify(&defined, &mut refs);
        assert_eq!(c.rows, 7);
        assert_eq!(c.referenced, 3, "{c:?}");
        assert_eq!(c.unreferenced, 4, "{c:?}");
        assert_eq!(c.undefined, 3, "{c:?}");
        assert_eq!(c.multiply_referenced, 0);
    }

    #[test]
    fn a_node_pointed_at_twice_is_reported() {
        let defined = vec![k(1), k(2), k(3)];
        let mut refs = vec![(k(1), 1), (k(1), 2), (k(7), 0), (k(7), 1)];
        let c = classify(&defined, &mut refs);
        assert_eq!(c.referenced, 1);
        assert_eq!(c.multiply_referenced, 1);
        assert_eq!(c.undefined, 1, "one missing key, counted once");
        let (_, problems) = judge(&c, None);
        assert_eq!(problems.len(), 2, "{problems:?}");
    }

    #[test]
    fn counts_are_held_to_the_summary() {
        let c = Counts {
            rows: 100,
            referenced: 90,
            unreferenced: 10,
            ..Counts::default()
        };
        let summary = |acknowledged, unsettled, open_heads| Summary {
            acknowledged,
            unsettled,
            open_heads,
            ..Summary::default()
        };
        assert!(judge(&c, Some(&summary(100, 0, 10))).1.is_empty());
        assert!(judge(&c, Some(&summary(95, 5, 5))).1.is_empty());
        let (_, p) = judge(&c, Some(&summary(101, 0, 10)));
        assert!(p[0].contains("1 acknowledged nodes are missing"), "{p:?}");
        let (_, p) = judge(&c, Some(&summary(90, 5, 10)));
        assert!(p[0].contains("at most 95"), "{p:?}");
        let (_, p) = judge(&c, Some(&summary(100, 0, 0)));
        assert!(p[0].contains("pointed at by nothing"), "{p:?}");
    }
}
