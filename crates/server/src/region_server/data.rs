//! Data operations on one region: get, put/delete, increment, append, check-and-mutate.
//!
//! Every mutation holds its row's lock (`router::RowLocks`) from its first read to its
//! acknowledgement, so read-modify-write operations (increment, append, check-and-mutate)
//! never interleave with another write to the row. Reads take no lock (MVCC).
//!
//! What happens on the region (a Get and its filter, a check, a nonce, a read-modify-write)
//! is written against [`RegionApi`], generic and so statically dispatched: the same code as
//! calling `Region` directly, and this module's tests run it on a `MemRegion`. The network
//! reactor's calls that never wait (`get_inline_into`, `mutate_deferred`) use the engine's
//! own `Region::get_cached_into` and `Region::try_mutate_deferred`, which the trait leaves
//! out (`cellar_model::region_api`).

use super::nonces::{Nonces, Start};
use super::RegionServer;
use crate::error::ServerError;
use crate::names;
use crate::router::HostedRegion;
use crate::router::RowGuard;
use bytes::{Bytes, BytesMut};
use cellar_model::filter::{CompareOp, Condition, Filter, FilterEval};
use cellar_model::MutationKind;
use cellar_model::{Cell, CellSink, CellType, Get, RegionApi, RowMutation, TimeRange};
use cellar_storage::region::{PendingWrite, RowCells};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a conditional mutation checks, under the row lock, before it writes.
#[derive(Debug, Clone, Copy)]
pub enum Check<'a> {
    /// One column's newest value compared with a value.
    Column(&'a Condition),
    /// The row (every family, newest versions) passes the filter with at least one cell:
    /// HBase's checkAndMutate with a filter.
    RowFilter { row: &'a [u8], filter: &'a Filter },
}

impl Check<'_> {
    fn row(&self) -> &[u8] {
        match self {
            Check::Column(c) => &c.row,
            Check::RowFilter { row, .. } => row,
        }
    }
}

/// What a mutation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MutateOutcome {
    /// False when a condition did not hold (nothing was written).
    pub processed: bool,
    /// Increment and append: the new values of the changed columns.
    pub cells: Vec<Cell>,
}

/// A put applied on the network reactor whose WAL record is not yet in the OS
/// ([`RegionServer::mutate_deferred`]). It holds its row's lock until finished, so a
/// read-modify-write of the row (increment, append, check-and-mutate) waits for it and reads
/// it, exactly as if the put had finished before returning.
///
/// Deadlock freedom rests on one rule for holders: between taking a `DeferredPut` and
/// finishing it, wait for nothing another call could be holding back (no socket, no blocking
/// row lock); awaiting the WAL ([`DeferredPut::finish_async`]) is the one wait allowed, since
/// a WAL round waits for no row and no call. So every wait chain ends.
#[must_use = "a deferred put holds its row lock until it is finished"]
pub struct DeferredPut {
    // Field order is drop order: an unfinished write finishes before its row lock is let go.
    write: PendingWrite,
    _row: RowGuard,
}

impl DeferredPut {
    /// Hands the WAL record to the OS (one write covers every record buffered before it),
    /// makes the put visible, then releases its row. An error means it must not be
    /// acknowledged.
    pub fn finish(self) -> Result<(), ServerError> {
        let DeferredPut { write, _row } = self;
        write.finish().map_err(ServerError::from)
    }

    /// [`DeferredPut::finish`] for the network reactor: `Err` hands the put back when
    /// finishing would wait (another writer's WAL round is in progress): await
    /// [`DeferredPut::finish_async`] then.
    pub fn try_finish(self) -> Result<Result<(), ServerError>, DeferredPut> {
        let DeferredPut { write, _row } = self;
        match write.try_finish() {
            Ok(done) => Ok(done.map_err(ServerError::from)),
            Err(write) => Err(DeferredPut { write, _row }),
        }
    }

    /// [`DeferredPut::finish`] awaited by a reactor task: its thread never blocks. Safe to
    /// await while the put holds its row: the WAL round it waits for never waits on a row.
    pub async fn finish_async(self) -> Result<(), ServerError> {
        let DeferredPut { write, _row } = self;
        write.finish_async().await.map_err(ServerError::from)
    }
}

/// What the engine reads for `get`: with a filter, every version the family keeps, as the
/// filter sees them all and the Get's own version count applies to what it lets through
/// ([`FilterEval`], HBase 2's order).
fn engine_get(get: &Get) -> Cow<'_, Get> {
    match get.filter {
        Some(_) if get.max_versions != u32::MAX => {
            let mut all = get.clone();
            all.max_versions = u32::MAX;
            Cow::Owned(all)
        }
        _ => Cow::Borrowed(get),
    }
}

/// The row's cells that `get` asks for, after its filter.
fn read_filtered<R: RegionApi>(region: &R, get: &Get) -> Result<Vec<Cell>, ServerError> {
    Ok(filtered(get, region.get(&engine_get(get))?))
}

/// `cells`, read for `get` by [`engine_get`], after its filter and version count.
fn filtered(get: &Get, cells: Vec<Cell>) -> Vec<Cell> {
    match &get.filter {
        Some(f) => FilterEval::new(f)
            .versions(get.max_versions)
            .filter_row(cells)
            .unwrap_or_default(),
        None => cells,
    }
}

impl RegionServer {
    /// The region a data call names (see `Router::region_for_call`).
    pub(crate) fn data_region(
        &self,
        table: &str,
        region_id: u64,
    ) -> Result<Arc<HostedRegion>, ServerError> {
        self.check_running()?;
        let table = table.strip_prefix("default:").unwrap_or(table);
        match self.router.region_for_call(table, region_id) {
            // A cluster's region server knows only the tables it has regions of: the table
            // may well exist (its regions moved, closed or disabled). The client asks the
            // master again, which knows.
            Err(ServerError::TableNotFound(_))
                if matches!(self.role, super::Role::RegionServer) =>
            {
                Err(ServerError::not_serving(
                    table,
                    region_id,
                    "this region server does not serve it (moved, closed, or its table \
                     disabled); locate it again",
                ))
            }
            found => found,
        }
    }

    /// The row's cells that `get` asks for, after its filter.
    pub fn get(&self, table: &str, region_id: u64, get: &Get) -> Result<Vec<Cell>, ServerError> {
        if get.row.is_empty() {
            return Err(ServerError::invalid("get of an empty row key"));
        }
        let hosted = self.data_region(table, region_id)?;
        hosted.check_row(&get.row)?;
        hosted.with(|r| read_filtered(r, get))
    }

    /// [`RegionServer::get`] if it can be answered without disk IO or waiting (memstores and
    /// block cache); `None` sends the call to the handler pool. Run on the network reactor.
    pub fn get_inline(
        &self,
        table: &str,
        region_id: u64,
        get: &Get,
    ) -> Option<Result<Vec<Cell>, ServerError>> {
        let mut cells = Vec::new();
        let read = self.get_inline_into(
            table,
            region_id,
            &engine_get(get),
            &mut RowCells::new(&mut cells),
        )?;
        Some(read.map(|()| filtered(get, cells)))
    }

    /// [`RegionServer::get_inline`] giving the cells to `sink` (the reactor writes them
    /// straight into its answer), without applying `get`'s filter: a Get with a filter goes
    /// through `get_inline`. On `None` or an error the sink may hold part of the row:
    /// discard it.
    pub fn get_inline_into<S: CellSink>(
        &self,
        table: &str,
        region_id: u64,
        get: &Get,
        sink: &mut S,
    ) -> Option<Result<(), ServerError>> {
        let hosted = match self.data_region(table, region_id) {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        if get.row.is_empty() || hosted.check_row(&get.row).is_err() {
            // The pool path reports the error.
            return None;
        }
        hosted.try_with(|r| {
            r.get_cached_into(get, sink)
                .map(|c| c.map_err(ServerError::from))
        })
    }

    /// A plain put (no condition) begun on the network reactor, or `None` (nothing done) to
    /// send it to the handler pool: when the region is being taken out, the row or the
    /// region's write lock is held by another call, or the write could wait on the disk or on
    /// back-pressure (`Region::try_mutate_deferred`). The put is in the memstores and its
    /// record buffered in the WAL; the caller finishes it ([`DeferredPut::try_finish`] on the
    /// reactor, [`DeferredPut::finish`] on a handler thread) before acknowledging it. A reactor that applies several puts from one read finishes
    /// them together, so their records reach the OS in one write.
    pub fn mutate_deferred(
        &self,
        table: &str,
        region_id: u64,
        m: &RowMutation,
    ) -> Option<Result<DeferredPut, ServerError>> {
        if names::is_system(table) {
            return None;
        }
        let hosted = match self.data_region(table, region_id) {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        if hosted.check_row(&m.row).is_err() {
            return None;
        }
        hosted.try_with(|region| {
            let row = hosted.try_lock_row(&m.row)?;
            Some(
                region
                    .try_mutate_deferred(m)?
                    .map(|write| DeferredPut { write, _row: row })
                    .map_err(ServerError::from),
            )
        })
    }

    /// Applies one row mutation of `kind`; with a condition, only if it holds.
    pub fn mutate(
        &self,
        table: &str,
        region_id: u64,
        m: &RowMutation,
        kind: MutationKind,
        condition: Option<&Condition>,
    ) -> Result<MutateOutcome, ServerError> {
        self.mutate_checked(table, region_id, m, kind, condition.map(Check::Column))
    }

    /// [`RegionServer::mutate`] with any kind of [`Check`].
    pub fn mutate_checked(
        &self,
        table: &str,
        region_id: u64,
        m: &RowMutation,
        kind: MutationKind,
        check: Option<Check<'_>>,
    ) -> Result<MutateOutcome, ServerError> {
        self.mutate_reading(table, region_id, m, kind, check, TimeRange::ALL)
    }

    /// [`RegionServer::mutate_checked`] for an increment or append that reads the current
    /// values only among the versions in `read` (HBase's `Increment/Append.setTimeRange`):
    /// a column with none there counts as missing. Other kinds ignore `read`.
    pub fn mutate_reading(
        &self,
        table: &str,
        region_id: u64,
        m: &RowMutation,
        kind: MutationKind,
        check: Option<Check<'_>>,
        read: TimeRange,
    ) -> Result<MutateOutcome, ServerError> {
        if names::is_system(table) {
            return Err(ServerError::invalid(format!(
                "table '{table}' is read-only: it is written by the server"
            )));
        }
        if let Some(c) = &check {
            if c.row() != m.row {
                return Err(ServerError::invalid(format!(
                    "the condition's row {:?} is not the mutation's row {:?}",
                    String::from_utf8_lossy(c.row()),
                    String::from_utf8_lossy(&m.row)
                )));
            }
        }
        let hosted = self.data_region(table, region_id)?;
        hosted.check_row(&m.row)?;
        hosted.with(|region| {
            let _row = hosted.lock_row(&m.row);
            apply(region, &self.nonces, m, kind, check, read)
        })
    }
}

/// One mutation of `kind` on `region`, whose row lock the caller holds: the check, the
/// nonce, then the write.
fn apply<R: RegionApi>(
    region: &R,
    nonces: &Nonces,
    m: &RowMutation,
    kind: MutationKind,
    check: Option<Check<'_>>,
    read: TimeRange,
) -> Result<MutateOutcome, ServerError> {
    let holds = match check {
        None => true,
        Some(Check::Column(c)) => condition_holds(region, c)?,
        Some(Check::RowFilter { row, filter }) => {
            let cells = region.get(&Get::new(Bytes::copy_from_slice(row)))?;
            FilterEval::new(filter)
                .filter_row(cells)
                .is_some_and(|c| !c.is_empty())
        }
    };
    if !holds {
        return Ok(MutateOutcome::default());
    }
    // Under the row lock, so an earlier attempt of the same increment or append has
    // ended: its nonce is known applied or forgotten.
    let nonce = m
        .nonce
        .filter(|_| matches!(kind, MutationKind::Increment | MutationKind::Append));
    if let Some(n) = nonce {
        if nonces.start(n) == Start::Duplicate {
            return Ok(MutateOutcome {
                processed: true,
                cells: current_values(region, m, read)?,
            });
        }
    }
    let cells = match kind {
        MutationKind::PutDelete => region
            .mutate(m)
            .map(|()| Vec::new())
            .map_err(ServerError::from),
        MutationKind::Increment => read_modify_write(region, m, read, increment),
        MutationKind::Append => read_modify_write(region, m, read, append),
    };
    if cells.is_ok() {
        crate::faults::after_wal(match kind {
            MutationKind::Increment => "increment",
            MutationKind::Append => "append",
            _ => "put",
        });
    }
    if let Some(n) = nonce {
        nonces.end(n, cells.is_ok());
    }
    Ok(MutateOutcome {
        processed: true,
        cells: cells?,
    })
}

/// The newest values of the columns `m` names within `read`: what a retried increment or
/// append answers (HBase turns the retry into a Get over the mutation's time range).
fn current_values<R: RegionApi>(
    region: &R,
    m: &RowMutation,
    read: TimeRange,
) -> Result<Vec<Cell>, ServerError> {
    let mut get = Get::new(m.row.clone());
    get.time_range = read;
    for e in &m.entries {
        get = get.column(&e.family, &e.qualifier);
    }
    Ok(region.get(&get)?)
}

/// Whether the newest visible value of the condition's column compares as asked:
/// `existing <op> value`. Without a value the column must not exist or be empty (with
/// NOT_EQUAL: must hold a non-empty value), as HBase treats a null expected value. NO_OP
/// never holds.
fn condition_holds<R: RegionApi>(region: &R, c: &Condition) -> Result<bool, ServerError> {
    let get = Get::new(c.row.clone()).column(&c.family, &c.qualifier);
    let cells = region.get(&get)?;
    let existing = cells.first().map(|c| &c.value);
    Ok(match (&c.value, existing) {
        (_, _) if c.op == CompareOp::NoOp => false,
        (None, e) => (c.op == CompareOp::NotEqual) == e.is_some_and(|v| !v.is_empty()),
        (Some(_), None) => false,
        (Some(want), Some(have)) => c.op.holds(have.as_ref().cmp(want.as_ref())),
    })
}

fn column_name(family: &[u8], qualifier: &[u8]) -> String {
    format!(
        "{}:{}",
        String::from_utf8_lossy(family),
        String::from_utf8_lossy(qualifier)
    )
}

/// `old + amount`, both 8-byte big-endian signed integers (a missing column is 0), wrapping
/// on overflow as HBase's `long` arithmetic does.
fn increment(
    family: &[u8],
    qualifier: &[u8],
    old: Option<&[u8]>,
    amount: &[u8],
) -> Result<Bytes, ServerError> {
    let name = || column_name(family, qualifier);
    let amount: [u8; 8] = amount.try_into().map_err(|_| {
        ServerError::invalid(format!(
            "increment of {}: the amount must be 8 bytes (a big-endian i64), got {}",
            name(),
            amount.len()
        ))
    })?;
    let old = match old {
        None => 0,
        Some(v) => i64::from_be_bytes(v.try_into().map_err(|_| {
            ServerError::invalid(format!(
                "increment of {}: the current value is {} bytes, not an 8-byte counter",
                name(),
                v.len()
            ))
        })?),
    };
    let new = old.wrapping_add(i64::from_be_bytes(amount));
    Ok(Bytes::copy_from_slice(&new.to_be_bytes()))
}

fn append(
    _family: &[u8],
    _qualifier: &[u8],
    old: Option<&[u8]>,
    suffix: &[u8],
) -> Result<Bytes, ServerError> {
    let mut v = BytesMut::with_capacity(old.map_or(0, <[u8]>::len) + suffix.len());
    if let Some(old) = old {
        v.extend_from_slice(old);
    }
    v.extend_from_slice(suffix);
    Ok(v.freeze())
}

type Combine = fn(&[u8], &[u8], Option<&[u8]>, &[u8]) -> Result<Bytes, ServerError>;

/// Reads the columns a mutation names (their newest versions within `read`), combines each
/// with its cell's value, and writes the results as puts; the caller holds the row lock. A new value's timestamp is the clock's,
/// or one above the old value's if that is later, so it is always the newest version.
/// Returns the new cells, sorted by family and qualifier.
fn read_modify_write<R: RegionApi>(
    region: &R,
    m: &RowMutation,
    read: TimeRange,
    combine: Combine,
) -> Result<Vec<Cell>, ServerError> {
    if m.entries.is_empty() {
        return Err(ServerError::invalid("mutation has no cells"));
    }
    let mut get = Get::new(m.row.clone());
    get.time_range = read;
    for e in &m.entries {
        get = get.column(&e.family, &e.qualifier);
    }
    let current = region.get(&get)?;
    let now = region.now_millis();
    // (family, qualifier) → (value, timestamp); repeated columns combine in order.
    let mut new: BTreeMap<(Bytes, Bytes), (Bytes, u64)> = BTreeMap::new();
    for e in &m.entries {
        let key = (e.family.clone(), e.qualifier.clone());
        let (old, old_ts) = match new.get(&key) {
            Some((v, ts)) => (Some(v.clone()), Some(*ts)),
            None => current
                .iter()
                .find(|c| c.family == e.family && c.qualifier == e.qualifier)
                .map_or((None, None), |c| (Some(c.value.clone()), Some(c.timestamp))),
        };
        let value = combine(&e.family, &e.qualifier, old.as_deref(), &e.value)?;
        // At the clock's time, or at the old value's when that is later (a clock behind, a
        // client's timestamp from the future): of two versions at one timestamp the later
        // write wins (its sequence id is higher), so the result is the newest version. Never
        // above the clock for a value of our own: a put stamped with the clock after this must
        // not sort below it (a run of increments within one millisecond used to push the
        // column ahead of the clock and hide later puts; the linearizability check caught it).
        let ts = old_ts.map_or(now, |t| now.max(t));
        new.insert(key, (value, ts));
    }
    let mut write = RowMutation::new(m.row.clone())
        .with_durability(m.durability)
        .with_nonce(m.nonce);
    for ((family, qualifier), (value, ts)) in &new {
        write = write.put(family, qualifier, *ts, value.clone());
    }
    region.mutate(&write)?;
    Ok(new
        .into_iter()
        .map(|((family, qualifier), (value, timestamp))| Cell {
            row: m.row.clone(),
            family,
            qualifier,
            timestamp,
            cell_type: CellType::Put,
            seq_id: 0,
            value,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::{FamilySchema, MemRegion, Nonce, TableSchema};

    /// A region of one family `f`, at a clock standing at 1000.
    fn region() -> MemRegion {
        MemRegion::new(TableSchema::new("t", vec![FamilySchema::new("f")]))
            .expect("schema")
            .with_clock(|| 1000)
    }

    fn values(region: &MemRegion, row: &str) -> Vec<(String, Bytes)> {
        region
            .get(&Get::new(row.to_string()))
            .expect("get")
            .into_iter()
            .map(|c| (String::from_utf8_lossy(&c.qualifier).into_owned(), c.value))
            .collect()
    }

    #[test]
    fn increments_appends_and_checks_run_on_any_region() {
        let r = region();
        let nonces = Nonces::default();
        let by = |n: i64| Bytes::copy_from_slice(&n.to_be_bytes());
        let inc = RowMutation::new("row").put(b"f", b"n", 0, by(5));
        let apply_once = |m: &RowMutation, kind| {
            apply(&r, &nonces, m, kind, None, TimeRange::ALL).expect("apply")
        };
        apply_once(&inc, MutationKind::Increment);
        let out = apply_once(&inc, MutationKind::Increment);
        assert!(out.processed);
        assert_eq!(out.cells.len(), 1);
        assert_eq!(out.cells[0].value, by(10));
        assert_eq!(out.cells[0].timestamp, 1000, "the region's clock");
        let app = RowMutation::new("row").put(b"f", b"s", 0, "ab");
        apply_once(&app, MutationKind::Append);
        apply_once(&app, MutationKind::Append);
        assert_eq!(
            values(&r, "row"),
            [
                ("n".to_string(), by(10)),
                ("s".to_string(), Bytes::from("abab"))
            ]
        );

        // A retried increment (same nonce) answers the current value and adds nothing.
        let once = inc.clone().with_nonce(Some(Nonce { group: 1, nonce: 7 }));
        assert_eq!(
            apply_once(&once, MutationKind::Increment).cells[0].value,
            by(15)
        );
        assert_eq!(
            apply_once(&once, MutationKind::Increment).cells[0].value,
            by(15)
        );

        // A condition that does not hold writes nothing.
        let cond = Condition {
            row: Bytes::from("row"),
            family: Bytes::from("f"),
            qualifier: Bytes::from("s"),
            op: CompareOp::Equal,
            value: Some(Bytes::from("zz")),
        };
        let put = RowMutation::new("row").put(b"f", b"p", 1, "v");
        let check = Some(Check::Column(&cond));
        let out = apply(
            &r,
            &nonces,
            &put,
            MutationKind::PutDelete,
            check,
            TimeRange::ALL,
        )
        .expect("checked");
        assert!(!out.processed);
        assert_eq!(values(&r, "row").len(), 2);
        let cond = Condition {
            value: Some(Bytes::from("abab")),
            ..cond
        };
        let check = Some(Check::Column(&cond));
        let out = apply(
            &r,
            &nonces,
            &put,
            MutationKind::PutDelete,
            check,
            TimeRange::ALL,
        )
        .expect("checked");
        assert!(out.processed);
        assert_eq!(values(&r, "row").len(), 3);
    }

    #[test]
    fn increments_are_8_byte_counters_and_bad_values_name_the_column() {
        let v = increment(b"cf", b"n", None, &5i64.to_be_bytes()).expect("from nothing");
        assert_eq!(&v[..], &5i64.to_be_bytes());
        let v = increment(b"cf", b"n", Some(&v), &(-7i64).to_be_bytes()).expect("add");
        assert_eq!(&v[..], &(-2i64).to_be_bytes());
        let e = increment(b"cf", b"n", Some(b"abc"), &1i64.to_be_bytes()).expect_err("3 bytes");
        assert!(
            e.to_string().contains("cf:n") && e.to_string().contains("3 bytes"),
            "{e}"
        );
        let v = increment(
            b"cf",
            b"n",
            Some(&i64::MAX.to_be_bytes()),
            &1i64.to_be_bytes(),
        )
        .expect("wraps");
        assert_eq!(&v[..], &i64::MIN.to_be_bytes());
        assert_eq!(
            &append(b"cf", b"a", Some(b"ab"), b"cd").expect("append")[..],
            b"abcd"
        );
        assert_eq!(
            &append(b"cf", b"a", None, b"cd").expect("append")[..],
            b"cd"
        );
    }
}
