//! Procedures: DDL runs synchronously; its procedure id and outcome are kept so
//! `getProcedureResult` can answer the client's polling and `GetProcedures` can list them.

use super::{Call, Result};
use crate::hbase::{meta_view, CallCtx, HbaseError, HbaseService, Reply, Request};
use bytes::Bytes;
use cellar_proto::hbase;
use cellar_proto::hbase::get_procedure_result_response::State as ProcState;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};

/// Procedure outcomes kept for polling; the oldest go first.
const MAX_PROCEDURES: usize = 1024;

/// A finished procedure: when it ran and how it ended.
#[derive(Debug, Clone)]
struct Outcome {
    /// HBase's procedure class for the operation (what `list_procedures` shows).
    class: &'static str,
    owner: Option<std::sync::Arc<str>>,
    submitted_ms: u64,
    finished_ms: u64,
    error: Option<HbaseError>,
}

/// Finished procedures, by id (bounded: clients poll right after submitting).
#[derive(Debug, Default)]
pub(crate) struct Procedures {
    inner: Mutex<ProcTable>,
}

#[derive(Debug, Default)]
struct ProcTable {
    last_id: u64,
    done: BTreeMap<u64, Outcome>,
    /// The procedure each client nonce started, while that procedure is kept: a request
    /// retried with the same `(nonce_group, nonce)` gets that procedure back instead of
    /// running again (HBase's `ProcedureExecutor.registerNonce`).
    nonces: HashMap<(u64, u64), u64>,
}

/// A request's nonce as HBase keys procedures by it; none when the nonce is 0 (`NO_NONCE`).
pub(super) fn nonce_key(group: Option<u64>, nonce: Option<u64>) -> Option<(u64, u64)> {
    match nonce {
        Some(n) if n != 0 => Some((group.unwrap_or(0), n)),
        _ => None,
    }
}

impl Procedures {
    /// Runs `op` now and records its outcome under a new procedure id, as a procedure of
    /// HBase's class `class` (`org.apache.hadoop.hbase.master.` + `procedure.CreateTableProcedure` and the like) owned
    /// by the caller.
    pub(super) fn run(
        &self,
        class: &'static str,
        ctx: &CallCtx,
        nonce: Option<(u64, u64)>,
        op: impl FnOnce() -> Result<()>,
    ) -> u64 {
        let submitted_ms = crate::hbase::now_ms();
        let error = op().err();
        let mut st = self.inner.lock();
        st.last_id += 1;
        let id = st.last_id;
        if let Some(key) = nonce {
            st.nonces.insert(key, id);
        }
        st.done.insert(
            id,
            Outcome {
                class,
                owner: ctx.caller.user.clone(),
                submitted_ms,
                finished_ms: crate::hbase::now_ms(),
                error,
            },
        );
        while st.done.len() > MAX_PROCEDURES {
            if let Some((old, _)) = st.done.pop_first() {
                st.nonces.retain(|_, v| *v != old);
            }
        }
        id
    }

    /// A procedure call's answer: on a retry (a nonce already seen) the first run's id, else
    /// `op` run now and recorded as `class`; `reply` wraps the id in the call's response.
    pub(super) fn submit<M: prost::Message>(
        &self,
        class: &'static str,
        ctx: &CallCtx,
        nonce: Option<(u64, u64)>,
        reply: impl FnOnce(u64) -> M,
        op: impl FnOnce() -> Result<()>,
    ) -> Reply {
        let id = match self.replayed(nonce) {
            Some(id) => id,
            None => self.run(class, ctx, nonce, op),
        };
        Reply::message(&reply(id))
    }

    /// [`Procedures::submit`] for a call that HBase checks (or does) before its procedure
    /// runs: on a retry the first run's id; else `check` first, whose error fails the call
    /// itself, then `op` with what it gave, run and recorded as `class` (an error there is
    /// the procedure's, as `GetProcedureResult` tells). A call whose whole work is its check
    /// (a create, a delete, a split) passes `op` that does nothing.
    pub(super) fn submit_checked<M: prost::Message, T>(
        &self,
        class: &'static str,
        ctx: &CallCtx,
        nonce: Option<(u64, u64)>,
        reply: impl FnOnce(u64) -> M,
        check: impl FnOnce() -> Result<T>,
        op: impl FnOnce(T) -> Result<()>,
    ) -> Result<Reply> {
        if let Some(id) = self.replayed(nonce) {
            return Ok(Reply::message(&reply(id)));
        }
        let checked = check()?;
        let id = self.run(class, ctx, nonce, || op(checked));
        Ok(Reply::message(&reply(id)))
    }

    /// The procedure a request with this nonce already started, if it is still kept.
    pub(super) fn replayed(&self, nonce: Option<(u64, u64)>) -> Option<u64> {
        let key = nonce?;
        self.inner.lock().nonces.get(&key).copied()
    }

    fn get(&self, id: u64) -> Option<Outcome> {
        self.inner.lock().done.get(&id).cloned()
    }

    /// Every procedure kept, oldest first, as `GetProcedures` lists them.
    fn list(&self) -> Vec<hbase::Procedure> {
        let st = self.inner.lock();
        st.done
            .iter()
            .map(|(id, o)| hbase::Procedure {
                class_name: format!("org.apache.hadoop.hbase.master.{}", o.class),
                proc_id: *id,
                submitted_time: o.submitted_ms,
                owner: o.owner.as_deref().map(str::to_string),
                state: if o.error.is_some() {
                    hbase::ProcedureState::Failed
                } else {
                    hbase::ProcedureState::Success
                } as i32,
                last_update: o.finished_ms,
                executed: Some(true),
                ..Default::default()
            })
            .collect()
    }
}

/// GetProcedures: every procedure kept.
#[derive(Debug, Clone)]
pub(crate) struct GetProcedures;

impl GetProcedures {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        crate::hbase::message::<hbase::GetProceduresRequest>(param, "GetProcedures")?;
        Ok(Call::GetProcedures(GetProcedures).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        Ok(Reply::message(&hbase::GetProceduresResponse {
            procedure: svc.procedures.list(),
        }))
    }
}

/// getProcedureResult: how a procedure ended (the client polls it after DDL).
#[derive(Debug, Clone)]
pub(crate) struct GetProcedureResult {
    pub(crate) proc_id: u64,
}

impl GetProcedureResult {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::GetProcedureResultRequest =
            crate::hbase::message(param, "GetProcedureResultRequest")?;
        Ok(Call::GetProcedureResult(GetProcedureResult {
            proc_id: req.proc_id,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        Ok(Reply::message(&procedure_result(svc, self.proc_id)))
    }
}

/// What `getProcedureResult` answers for `proc_id`.
fn procedure_result(svc: &HbaseService, proc_id: u64) -> hbase::GetProcedureResultResponse {
    let Some(o) = svc.procedures.get(proc_id) else {
        return hbase::GetProcedureResultResponse {
            state: ProcState::NotFound as i32,
            ..Default::default()
        };
    };
    hbase::GetProcedureResultResponse {
        state: ProcState::Finished as i32,
        submitted_time: Some(o.submitted_ms),
        last_update: Some(o.finished_ms),
        result: None,
        exception: o.error.map(|e| foreign_exception(svc, &e)),
    }
}

/// A failed procedure's exception as the client rebuilds it (class by name, message).
pub(crate) fn foreign_exception(
    svc: &HbaseService,
    e: &HbaseError,
) -> hbase::ForeignExceptionMessage {
    hbase::ForeignExceptionMessage {
        source: Some(meta_view::server_name_string(svc)),
        generic_exception: Some(hbase::GenericExceptionMessage {
            class_name: Some(e.class.to_string()),
            message: Some(e.message.clone()),
            error_info: None,
            trace: Vec::new(),
        }),
    }
}
