//! Batches: operations on any rows, grouped by the server holding their region into one MULTI
//! call per server, sent concurrently. Each operation has its own outcome; the failed ones
//! whose error is retryable go round again (relocated when needed) until the retries run out.

use crate::cluster::Inner;
use crate::connection::Response;
use crate::error::{Error, Handling, Result};
use crate::location::RegionLocation;
use crate::retry::pause;
use crate::row::Row;
use bytes::{Bytes, BytesMut};
use cellar_model::MutationKind;
use cellar_model::{Get, RowMutation};
use cellar_proto::cellblock::CellReader;
use cellar_proto::convert;
use cellar_proto::pb::{self, Method};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::task::JoinSet;

/// One operation of [`Table::batch`](crate::Table::batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    Get(Get),
    Mutate(RowMutation),
}

/// What one successful batch operation returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOutcome {
    /// A get's row (empty when not found).
    Row(Row),
    /// A mutation was applied.
    Done,
}

/// One operation ready to send: its row, its message and its cells.
struct Prepared {
    row: Bytes,
    op: pb::action::Op,
    cells: Bytes,
}

fn prepare(op: &BatchOp) -> Prepared {
    match op {
        BatchOp::Get(g) => Prepared {
            row: g.row.clone(),
            op: pb::action::Op::Get(convert::get_to_pb(g)),
            cells: Bytes::new(),
        },
        BatchOp::Mutate(m) => {
            let mut cells = BytesMut::new();
            let pm = convert::mutation_to_pb(m, MutationKind::PutDelete, &mut cells);
            Prepared {
                row: m.row.clone(),
                op: pb::action::Op::Mutation(pm),
                cells: cells.freeze(),
            }
        }
    }
}

/// The operations of one round bound for one server.
type Group = Vec<(usize, RegionLocation)>;

pub(crate) async fn run(
    inner: &Arc<Inner>,
    table: &str,
    ops: Vec<BatchOp>,
) -> Result<Vec<Result<BatchOutcome>>> {
    let prepared: Arc<Vec<Prepared>> = Arc::new(ops.iter().map(prepare).collect());
    if u32::try_from(ops.len()).is_err() {
        return Err(Error::Protocol(format!(
            "a batch of {} operations is too large",
            ops.len()
        )));
    }
    let mut book = Book {
        outcomes: (0..ops.len()).map(|_| None).collect(),
        last_error: (0..ops.len()).map(|_| None).collect(),
        retry: Vec::new(),
    };
    let mut todo: Vec<usize> = (0..ops.len()).collect();
    let mut round = 0u32;
    while !todo.is_empty() {
        if round > inner.config.retries {
            for i in todo {
                let last = book.last_error[i].take().unwrap_or(Error::Closed);
                book.outcomes[i] = Some(Err(Error::RetriesExhausted {
                    attempts: round,
                    last: Box::new(last),
                }));
            }
            break;
        }
        if round > 0 {
            tokio::time::sleep(pause(inner.config.retry_backoff, round - 1)).await;
        }
        round += 1;
        // Group by server.
        let mut groups: HashMap<String, Group> = HashMap::new();
        for i in todo {
            match inner.locate(table, &prepared[i].row).await {
                Ok(loc) => groups.entry(loc.server.clone()).or_default().push((i, loc)),
                Err(e) => book.failed(inner, i, e, None),
            }
        }
        // One MULTI per server, all at once.
        let mut calls = JoinSet::new();
        for (server, group) in groups {
            let inner = inner.clone();
            let prepared = prepared.clone();
            calls.spawn(async move {
                let answer = send_multi(&inner, &server, &group, &prepared).await;
                (group, answer)
            });
        }
        while let Some(joined) = calls.join_next().await {
            let (group, answer) =
                joined.map_err(|e| Error::Protocol(format!("batch task: {e}")))?;
            match answer.and_then(|resp| split_results(&group, &prepared, resp)) {
                Err(e) => {
                    for (i, loc) in &group {
                        book.failed(inner, *i, e.clone(), Some(loc));
                    }
                }
                Ok(per_action) => {
                    for ((i, loc), outcome) in group.iter().zip(per_action) {
                        match outcome {
                            Ok(o) => book.outcomes[*i] = Some(Ok(o)),
                            Err(e) => book.failed(inner, *i, e, Some(loc)),
                        }
                    }
                }
            }
        }
        todo = std::mem::take(&mut book.retry);
        todo.sort_unstable();
    }
    Ok(book
        .outcomes
        .into_iter()
        .map(|o| {
            o.unwrap_or_else(|| Err(Error::Protocol("batch operation left unanswered".into())))
        })
        .collect())
}

/// The outcomes so far and the operations to retry in the next round.
struct Book {
    outcomes: Vec<Option<Result<BatchOutcome>>>,
    last_error: Vec<Option<Error>>,
    retry: Vec<usize>,
}

impl Book {
    fn failed(&mut self, inner: &Inner, i: usize, e: Error, loc: Option<&RegionLocation>) {
        match e.handling() {
            Handling::Fail => self.outcomes[i] = Some(Err(e)),
            h => {
                if let (Handling::Relocate, Some(loc)) = (h, loc) {
                    inner.cache.invalidate(loc);
                }
                self.last_error[i] = Some(e);
                self.retry.push(i);
            }
        }
    }
}

async fn send_multi(
    inner: &Inner,
    server: &str,
    group: &Group,
    prepared: &[Prepared],
) -> Result<Response> {
    let mut cells = BytesMut::new();
    let mut actions = Vec::with_capacity(group.len());
    for (i, loc) in group {
        let p = &prepared[*i];
        cells.extend_from_slice(&p.cells);
        actions.push(pb::Action {
            index: *i as u32,
            region: Some(loc.region_ref()),
            op: Some(p.op.clone()),
        });
    }
    let conn = inner.connection(server).await?;
    conn.call(Method::Multi, &pb::MultiRequest { actions }, &cells)
        .await
}

/// Each action's outcome, in `group` order.
fn split_results(
    group: &Group,
    prepared: &[Prepared],
    resp: Response,
) -> Result<Vec<Result<BatchOutcome>>> {
    let multi: pb::MultiResponse = resp.decode("MultiResponse")?;
    let mut reader = CellReader::new(resp.cellblock.clone());
    let mut by_index: HashMap<u32, Result<BatchOutcome>> = HashMap::new();
    // Cells are consumed in the order of the results.
    for r in multi.results {
        let outcome = match (r.error, r.result) {
            (Some(e), _) => Err(Error::from_pb(e)),
            (None, result) => {
                let i = r.index as usize;
                let p = prepared.get(i).ok_or_else(|| {
                    Error::Protocol(format!("MULTI result for unknown action {}", r.index))
                })?;
                match (&p.op, result) {
                    (pb::action::Op::Get(_), result) => {
                        let result = result.unwrap_or_default();
                        Ok(BatchOutcome::Row(Row::from_pb(
                            p.row.clone(),
                            &result,
                            &mut reader,
                        )?))
                    }
                    (pb::action::Op::Mutation(_), Some(result)) => {
                        // A mutation's result carries no cells in a plain batch; consume any.
                        Row::from_pb(p.row.clone(), &result, &mut reader)?;
                        Ok(BatchOutcome::Done)
                    }
                    (pb::action::Op::Mutation(_), None) => Ok(BatchOutcome::Done),
                }
            }
        };
        by_index.insert(r.index, outcome);
    }
    group
        .iter()
        .map(|(i, _)| {
            by_index.remove(&(*i as u32)).ok_or_else(|| {
                Error::Protocol(format!("MULTI response has no result for action {i}"))
            })
        })
        .collect::<Result<Vec<_>>>()
}
