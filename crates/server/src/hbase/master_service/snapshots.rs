//! MasterService's snapshot calls, as HBase 2.6's Java client and shell send them: `snapshot`
//! (`Snapshot`, then `getProcedureResult` or `IsSnapshotDone`), `list_snapshots`
//! (`GetCompletedSnapshots`), `delete_snapshot` (`DeleteSnapshot`), `clone_snapshot` and
//! `restore_snapshot` (both `RestoreSnapshot`: a table that exists is restored, one that does
//! not is cloned, as HBase's master decides). Each runs to its end before its answer; the
//! procedure ids clients wait on are already finished. The work is the master's
//! (`master/snapshot_procedure.rs`, `docs/snapshots.md`).

use super::procedures::nonce_key;
use super::{table_admin, Call};
use crate::error::ServerError;
use crate::hbase::{message, CallCtx, HbaseError, HbaseService, Reply, Request};
use crate::snapshot::{Manifest, SnapshotKind};
use bytes::Bytes;
use cellar_proto::hbase;

type Result<T> = std::result::Result<T, HbaseError>;
type Nonce = Option<(u64, u64)>;

const SNAPSHOT_EXISTS: &str = "org.apache.hadoop.hbase.snapshot.SnapshotExistsException";
const SNAPSHOT_NOT_FOUND: &str = "org.apache.hadoop.hbase.snapshot.SnapshotDoesNotExistException";
const UNKNOWN_SNAPSHOT: &str = "org.apache.hadoop.hbase.snapshot.UnknownSnapshotException";
const SNAPSHOT_CREATION: &str = "org.apache.hadoop.hbase.snapshot.SnapshotCreationException";

fn not_found(name: &str) -> HbaseError {
    HbaseError::new(
        SNAPSHOT_NOT_FOUND,
        format!("Snapshot '{name}' doesn't exist on the filesystem"),
        true,
    )
}

/// HBase's description of a snapshot.
fn description(m: &Manifest) -> hbase::SnapshotDescription {
    hbase::SnapshotDescription {
        name: m.name.clone(),
        table: Some(m.table.clone()),
        creation_time: Some(i64::try_from(m.created_ms).unwrap_or(i64::MAX)),
        r#type: Some(match m.kind {
            SnapshotKind::Flush => hbase::snapshot_description::Type::Flush,
            SnapshotKind::SkipFlush => hbase::snapshot_description::Type::Skipflush,
            SnapshotKind::Disabled => hbase::snapshot_description::Type::Disabled,
        } as i32),
        version: Some(2),
        owner: None,
        ttl: Some(0),
    }
}

/// The snapshot a request names, if it exists.
fn existing(svc: &HbaseService, name: &str) -> Result<Option<Manifest>> {
    match svc.master()?.snapshot_named(name) {
        Ok(m) => Ok(Some(m)),
        Err(ServerError::InvalidArgument(m)) if m.contains("does not exist") => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Snapshot: takes a snapshot of a table (`SKIPFLUSH` skips the flush).
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) desc: hbase::SnapshotDescription,
    pub(crate) nonce: Nonce,
}

impl Snapshot {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::SnapshotRequest = message(param, "SnapshotRequest")?;
        Ok(Call::Snapshot(Snapshot {
            desc: req.snapshot,
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let name = self.desc.name.clone();
        let table = self.desc.table.clone().unwrap_or_default();
        if table.is_empty() {
            return Err(HbaseError::do_not_retry(format!(
                "snapshot '{name}' names no table"
            )));
        }
        table_admin(svc, ctx, &table, "take a snapshot")?;
        let skip_flush =
            self.desc.r#type == Some(hbase::snapshot_description::Type::Skipflush as i32);
        let reply = |id| hbase::SnapshotResponse {
            expected_timeout: 60_000,
            proc_id: Some(i64::try_from(id).unwrap_or(i64::MAX)),
        };
        let take = || {
            if existing(svc, &name)?.is_some() {
                return Err(HbaseError::new(
                    SNAPSHOT_EXISTS,
                    format!("Snapshot '{name}' already stored on the filesystem."),
                    true,
                ));
            }
            svc.master()?
                .snapshot(&table, &name, skip_flush)
                .map_err(|e| match e {
                    ServerError::TableNotFound(t) => HbaseError::new(
                        SNAPSHOT_CREATION,
                        format!("Table '{t}' doesn't exist, can't take snapshot."),
                        true,
                    ),
                    e => e.into(),
                })
        };
        svc.procedures.submit_checked(
            "procedure.SnapshotProcedure",
            ctx,
            self.nonce,
            reply,
            take,
            |_| Ok(()),
        )
    }
}

/// IsSnapshotDone: a snapshot that exists is done (they finish before their call answers).
#[derive(Debug, Clone)]
pub(crate) struct IsSnapshotDone {
    pub(crate) name: Option<String>,
}

impl IsSnapshotDone {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::IsSnapshotDoneRequest = message(param, "IsSnapshotDoneRequest")?;
        Ok(Call::IsSnapshotDone(IsSnapshotDone {
            name: req.snapshot.map(|s| s.name),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        let Some(name) = self.name else {
            return Ok(Reply::message(&hbase::IsSnapshotDoneResponse {
                done: Some(false),
                snapshot: None,
            }));
        };
        match existing(svc, &name)? {
            Some(m) => Ok(Reply::message(&hbase::IsSnapshotDoneResponse {
                done: Some(true),
                snapshot: Some(description(&m)),
            })),
            None => Err(HbaseError::new(
                UNKNOWN_SNAPSHOT,
                format!("Snapshot '{name}' has not been taken or has failed"),
                true,
            )),
        }
    }
}

/// GetCompletedSnapshots: the snapshots of tables the caller administers.
#[derive(Debug, Clone)]
pub(crate) struct GetCompletedSnapshots;

impl GetCompletedSnapshots {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        message::<hbase::GetCompletedSnapshotsRequest>(param, "GetCompletedSnapshotsRequest")?;
        Ok(Call::GetCompletedSnapshots(GetCompletedSnapshots).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let snapshots = svc
            .master()?
            .list_snapshots()?
            .iter()
            .filter(|m| table_admin(svc, ctx, &m.table, "list snapshots").is_ok())
            .map(description)
            .collect();
        Ok(Reply::message(&hbase::GetCompletedSnapshotsResponse {
            snapshots,
        }))
    }
}

/// DeleteSnapshot.
#[derive(Debug, Clone)]
pub(crate) struct DeleteSnapshot {
    pub(crate) name: String,
}

impl DeleteSnapshot {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::DeleteSnapshotRequest = message(param, "DeleteSnapshotRequest")?;
        Ok(Call::DeleteSnapshot(DeleteSnapshot {
            name: req.snapshot.name,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let m = existing(svc, &self.name)?.ok_or_else(|| not_found(&self.name))?;
        table_admin(svc, ctx, &m.table, "delete a snapshot")?;
        svc.master()?.delete_snapshot(&self.name)?;
        Ok(Reply::message(&hbase::DeleteSnapshotResponse {}))
    }
}

/// RestoreSnapshot: `Admin.cloneSnapshot` (the named table does not exist: it is created from
/// the snapshot) and `Admin.restoreSnapshot` (it exists, disabled: it becomes the snapshot).
#[derive(Debug, Clone)]
pub(crate) struct RestoreSnapshot {
    pub(crate) name: String,
    pub(crate) table: Option<String>,
    pub(crate) nonce: Nonce,
}

impl RestoreSnapshot {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::RestoreSnapshotRequest = message(param, "RestoreSnapshotRequest")?;
        Ok(Call::RestoreSnapshot(RestoreSnapshot {
            name: req.snapshot.name,
            table: req.snapshot.table.filter(|t| !t.is_empty()),
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let m = existing(svc, &self.name)?.ok_or_else(|| not_found(&self.name))?;
        let table = crate::names::canonical(self.table.as_deref().unwrap_or(&m.table))?;
        let clone = !svc.rs.router.contains(&table);
        table_admin(svc, ctx, &m.table, "restore or clone a snapshot")?;
        if clone {
            svc.rs.authz.require_create(&ctx.caller, &table)?;
        } else {
            table_admin(svc, ctx, &table, "restore a snapshot")?;
        }
        let reply = |id| hbase::RestoreSnapshotResponse { proc_id: id };
        let (class, name) = if clone {
            ("procedure.CloneSnapshotProcedure", self.name.clone())
        } else {
            ("procedure.RestoreSnapshotProcedure", self.name.clone())
        };
        let run = || -> Result<()> {
            let master = svc.master()?;
            if clone {
                master.clone_snapshot(&name, &table)?;
                master.grant_owner(&ctx.caller, &table)?;
            } else {
                master.restore_snapshot_into(&name, &table)?;
            }
            Ok(())
        };
        svc.procedures
            .submit_checked(class, ctx, self.nonce, reply, run, |_| Ok(()))
    }
}

/// IsRestoreSnapshotDone: restores and clones finish before their call answers.
#[derive(Debug, Clone)]
pub(crate) struct IsRestoreSnapshotDone;

impl IsRestoreSnapshotDone {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        message::<hbase::IsRestoreSnapshotDoneRequest>(param, "IsRestoreSnapshotDoneRequest")?;
        Ok(Call::IsRestoreSnapshotDone(IsRestoreSnapshotDone).into())
    }

    pub(crate) fn execute(self) -> Result<Reply> {
        Ok(Reply::message(&hbase::IsRestoreSnapshotDoneResponse {
            done: Some(true),
        }))
    }
}
