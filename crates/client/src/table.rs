//! Single-row operations on one table.

use crate::batch::{self, BatchOp, BatchOutcome};
use crate::cluster::Inner;
use crate::connection::{Response, SendStamps};
use crate::error::{missing, Error, Result};
use crate::row::Row;
use crate::scanner::Scanner;
use crate::timing::CallTiming;
use bytes::{Bytes, BytesMut};
use cellar_model::MutationKind;
use cellar_model::{Condition, Get, RowMutation, Scan, LATEST_TIMESTAMP};
use cellar_proto::cellblock::CellReader;
use cellar_proto::convert;
use cellar_proto::pb::{self, ErrorCode, Method};
use std::sync::Arc;
use std::time::Instant;

/// A handle on one table; cheap to clone.
#[derive(Clone)]
pub struct Table {
    pub(crate) inner: Arc<Inner>,
    pub(crate) name: Arc<str>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("name", &self.name).finish()
    }
}

impl Table {
    pub(crate) fn new(inner: Arc<Inner>, name: &str) -> Table {
        Table {
            inner,
            name: Arc::from(name),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reads one row; a row with no cells means not found.
    pub async fn get(&self, get: Get) -> Result<Row> {
        let pb_get = convert::get_to_pb(&get);
        let resp = self
            .inner
            .region_call(
                &self.name,
                &get.row,
                Method::Get,
                |region| pb::GetRequest {
                    region: Some(region),
                    get: Some(pb_get.clone()),
                },
                &[],
                true,
            )
            .await?;
        let r: pb::GetResponse = resp.decode("GetResponse")?;
        let result = r.result.unwrap_or_default();
        Row::from_pb(get.row, &result, &mut CellReader::new(resp.cellblock))
    }

    /// [`Table::get`] once (no retry), with where its time went: for benchmarks. The region
    /// is located and the connection opened before the clock starts.
    pub async fn get_with_timing(&self, get: Get) -> Result<(Row, CallTiming)> {
        let loc = self.inner.locate(&self.name, &get.row).await?;
        let conn = self.inner.connection(&loc.server).await?;
        let started = Instant::now();
        let req = pb::GetRequest {
            region: Some(loc.region_ref()),
            get: Some(convert::get_to_pb(&get)),
        };
        let mut stamps = SendStamps::default();
        let resp = conn.call_timed(Method::Get, &req, &[], &mut stamps).await?;
        let r: pb::GetResponse = resp.decode("GetResponse")?;
        let result = r.result.unwrap_or_default();
        let row = Row::from_pb(
            get.row,
            &result,
            &mut CellReader::new(resp.cellblock.clone()),
        )?;
        let timing = CallTiming::from_call(started, &stamps, &resp, Instant::now())?;
        Ok((row, timing))
    }

    /// [`Table::put`] once (no retry), with where its time went: for benchmarks. The region
    /// is located and the connection opened before the clock starts.
    pub async fn put_with_timing(&self, m: RowMutation) -> Result<CallTiming> {
        let loc = self.inner.locate(&self.name, &m.row).await?;
        let conn = self.inner.connection(&loc.server).await?;
        let started = Instant::now();
        let mut cells = BytesMut::new();
        let mutation = convert::mutation_to_pb(&m, MutationKind::PutDelete, &mut cells);
        let req = pb::MutateRequest {
            region: Some(loc.region_ref()),
            mutation: Some(mutation),
            condition: None,
        };
        let mut stamps = SendStamps::default();
        let resp = conn
            .call_timed(Method::Mutate, &req, &cells, &mut stamps)
            .await?;
        let _: pb::MutateResponse = resp.decode("MutateResponse")?;
        CallTiming::from_call(started, &stamps, &resp, Instant::now())
    }

    /// Applies a row's puts and deletes atomically.
    pub async fn mutate(&self, m: RowMutation) -> Result<()> {
        self.send_mutation(&m, MutationKind::PutDelete, None)
            .await
            .map(|_| ())
    }

    /// The same as [`Table::mutate`] (HBase's `put`).
    pub async fn put(&self, m: RowMutation) -> Result<()> {
        self.mutate(m).await
    }

    /// The same as [`Table::mutate`] (HBase's `delete`).
    pub async fn delete(&self, m: RowMutation) -> Result<()> {
        self.mutate(m).await
    }

    /// Adds `amount` to a column holding an 8-byte big-endian counter (absent: 0) and
    /// returns the new value.
    pub async fn increment(
        &self,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
        amount: i64,
    ) -> Result<i64> {
        let r = self
            .increment_columns(row, &[(family, qualifier, amount)])
            .await?;
        let v = r.value(family, qualifier).ok_or_else(|| {
            Error::Protocol(format!(
                "increment of {}:{} returned no value",
                String::from_utf8_lossy(family),
                String::from_utf8_lossy(qualifier)
            ))
        })?;
        decode_counter(v)
    }

    /// Increments several columns of one row atomically; returns their new values.
    pub async fn increment_columns(&self, row: &[u8], cols: &[(&[u8], &[u8], i64)]) -> Result<Row> {
        let mut m = RowMutation::new(Bytes::copy_from_slice(row));
        for (family, qualifier, amount) in cols {
            m = m.put(
                family,
                qualifier,
                LATEST_TIMESTAMP,
                Bytes::copy_from_slice(&amount.to_be_bytes()),
            );
        }
        self.send_mutation(&m, MutationKind::Increment, None)
            .await?
            .1
            .ok_or_else(|| missing("the incremented values"))
    }

    /// Appends to several columns of one row atomically; returns their new values.
    pub async fn append(&self, row: &[u8], cols: &[(&[u8], &[u8], &[u8])]) -> Result<Row> {
        let mut m = RowMutation::new(Bytes::copy_from_slice(row));
        for (family, qualifier, value) in cols {
            m = m.put(
                family,
                qualifier,
                LATEST_TIMESTAMP,
                Bytes::copy_from_slice(value),
            );
        }
        self.send_mutation(&m, MutationKind::Append, None)
            .await?
            .1
            .ok_or_else(|| missing("the appended values"))
    }

    /// Applies `m` only if `cond` holds, atomically; returns whether it was applied. The
    /// condition and the mutation must be of the same row.
    pub async fn check_and_mutate(&self, cond: Condition, m: RowMutation) -> Result<bool> {
        if cond.row != m.row {
            return Err(Error::rpc(
                ErrorCode::InvalidArgument,
                format!(
                    "check-and-mutate condition is on row {:?} but the mutation on row {:?}",
                    String::from_utf8_lossy(&cond.row),
                    String::from_utf8_lossy(&m.row)
                ),
            ));
        }
        let cond = convert::condition_to_pb(&cond);
        self.send_mutation(&m, MutationKind::PutDelete, Some(cond))
            .await
            .map(|(processed, _)| processed)
    }

    /// Gets and mutations on any rows, grouped into one MULTI call per server; each operation
    /// succeeds or fails on its own (the outcomes are in `ops` order) and only failed
    /// operations are retried.
    pub async fn batch(&self, ops: Vec<BatchOp>) -> Result<Vec<Result<BatchOutcome>>> {
        batch::run(&self.inner, &self.name, ops).await
    }

    /// Applies many row mutations (see [`Table::batch`]); the first failure is returned.
    pub async fn put_all(&self, ms: Vec<RowMutation>) -> Result<()> {
        let outcomes = self
            .batch(ms.into_iter().map(BatchOp::Mutate).collect())
            .await?;
        for o in outcomes {
            o?;
        }
        Ok(())
    }

    /// Reads a range of rows, region by region.
    pub fn scan(&self, scan: Scan) -> Scanner {
        Scanner::new(self.inner.clone(), self.name.clone(), scan)
    }

    /// Prepares `scan`'s shape (columns, filter, time range, versions, reversed, caching) for
    /// executions over any row range; its start, stop and limit are ignored. `compress`: each
    /// execution's results travel zstd-compressed. See [`crate::PreparedScan`].
    pub fn prepare_scan(&self, scan: Scan, compress: bool) -> crate::PreparedScan {
        crate::PreparedScan::new(self.inner.clone(), self.name.clone(), scan, compress)
    }

    /// Sends one MUTATE; returns whether it was processed and the result's row if any.
    async fn send_mutation(
        &self,
        m: &RowMutation,
        kind: MutationKind,
        condition: Option<pb::Condition>,
    ) -> Result<(bool, Option<Row>)> {
        let mut cells = BytesMut::new();
        let mutation = convert::mutation_to_pb(m, kind, &mut cells);
        let resp: Response = self
            .inner
            .region_call(
                &self.name,
                &m.row,
                Method::Mutate,
                |region| pb::MutateRequest {
                    region: Some(region),
                    mutation: Some(mutation.clone()),
                    condition: condition.clone(),
                },
                &cells,
                // Resending may apply an increment or append twice, or report a condition
                // that held as failed.
                kind == MutationKind::PutDelete && condition.is_none(),
            )
            .await?;
        let r: pb::MutateResponse = resp.decode("MutateResponse")?;
        let row = match &r.result {
            Some(result) => Some(Row::from_pb(
                m.row.clone(),
                result,
                &mut CellReader::new(resp.cellblock.clone()),
            )?),
            None => None,
        };
        Ok((r.processed, row))
    }
}

/// A counter's value: 8 bytes, big-endian.
pub(crate) fn decode_counter(v: &[u8]) -> Result<i64> {
    let bytes: [u8; 8] = v.try_into().map_err(|_| {
        Error::Protocol(format!(
            "a counter must be 8 bytes, the server returned {}",
            v.len()
        ))
    })?;
    Ok(i64::from_be_bytes(bytes))
}
