//! AdminService: the region-server admin calls a client makes on its way (region info,
//! online regions, flush, compact, server info), and the one a replication source makes
//! (`ReplicateWALEntry`, `replication_sink.rs`). Regions are named as in data calls.

mod replicated_bulk_load;
mod replication_sink;

use super::names::{self, RegionRef, RegionTarget};
use super::registry;
use super::{message, meta_view, CallCtx, HbaseError, HbaseService, Reply, Request, Service};
use crate::meta::META_TABLE;
use crate::router::HostedRegion;
use bytes::Bytes;
use cellar_proto::hbase;
use std::sync::Arc;

/// An AdminService request, decoded.
#[derive(Debug)]
pub(crate) enum Call {
    GetRegionInfo(GetRegionInfo),
    GetOnlineRegion(GetOnlineRegion),
    FlushRegion(FlushRegion),
    CompactRegion(CompactRegion),
    GetRegionLoad(GetRegionLoad),
    GetServerInfo(GetServerInfo),
    ReplicateWalEntry(replication_sink::ReplicateWalEntry),
}

/// AdminService's calls and their decode halves.
pub(crate) const SERVICE: Service = Service {
    name: "AdminService",
    admit: super::admit_all,
    calls: &[
        ("GetRegionInfo", GetRegionInfo::decode),
        ("GetOnlineRegion", GetOnlineRegion::decode),
        ("FlushRegion", FlushRegion::decode),
        ("CompactRegion", CompactRegion::decode),
        ("GetRegionLoad", GetRegionLoad::decode),
        ("GetServerInfo", GetServerInfo::decode),
        (
            "ReplicateWALEntry",
            replication_sink::ReplicateWalEntry::decode,
        ),
    ],
};

impl From<Call> for Request {
    fn from(call: Call) -> Request {
        Request::Admin(call)
    }
}

/// The execute halves.
pub(crate) fn execute(svc: &HbaseService, ctx: &CallCtx, call: Call) -> Result<Reply, HbaseError> {
    match call {
        Call::GetRegionInfo(call) => call.execute(svc),
        Call::GetOnlineRegion(call) => call.execute(svc),
        Call::FlushRegion(call) => call.execute(svc, ctx),
        Call::CompactRegion(call) => call.execute(svc, ctx),
        Call::GetRegionLoad(call) => call.execute(svc),
        Call::GetServerInfo(call) => call.execute(svc),
        Call::ReplicateWalEntry(call) => call.execute(svc, ctx),
    }
}

/// The region a request names, encoded names not yet looked up.
fn region(spec: &hbase::RegionSpecifier) -> Result<RegionRef, HbaseError> {
    names::region_ref(spec.r#type, &spec.value)
}

/// GetRegionInfo: a region's RegionInfo, whether it can split and merge, and its compaction
/// state and the row a split would use when asked.
#[derive(Debug, Clone)]
pub(crate) struct GetRegionInfo {
    pub(crate) region: RegionRef,
    pub(crate) compaction_state: bool,
    pub(crate) best_split_row: bool,
}

impl GetRegionInfo {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request, HbaseError> {
        let req: hbase::GetRegionInfoRequest = message(param, "GetRegionInfoRequest")?;
        Ok(Call::GetRegionInfo(GetRegionInfo {
            region: region(&req.region)?,
            compaction_state: req.compaction_state == Some(true),
            best_split_row: req.best_split_row == Some(true),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply, HbaseError> {
        // As HBase: meta never splits (and has no split row) but can merge; a region
        // splits and merges unless it still reads its parent's files (references).
        let (info, splittable, mergeable, split_row) = match resolve(svc, self.region)? {
            Resolved::Meta => (registry::meta_region_info(), false, true, None),
            Resolved::User(r) => {
                let split_row = if self.best_split_row {
                    best_split_row(&r)?
                } else {
                    None
                };
                let whole = !r.with(|region| Ok(region.has_references()))?;
                let info = meta_view::region_info_pb(&r.table, &r.info);
                (info, whole, whole, split_row)
            }
        };
        Ok(Reply::message(&hbase::GetRegionInfoResponse {
            region_info: info,
            // Compactions here run inside the call that asks for them: none is ever
            // in progress when a client looks.
            compaction_state: self
                .compaction_state
                .then_some(hbase::get_region_info_response::CompactionState::None as i32),
            splittable: Some(splittable),
            mergeable: Some(mergeable),
            best_split_row: split_row,
        }))
    }
}

/// The row a split of `r` would use (its middle row, as the split check and the master's
/// split without a row take it), `None` when it has none: too small, or still reading its
/// parent's files. As HBase, when there is none the region is flushed and asked again, as
/// rows only in memory have no middle yet.
fn best_split_row(r: &HostedRegion) -> Result<Option<Bytes>, HbaseError> {
    let point = |region: &cellar_storage::region::Region| {
        if region.has_references() {
            None
        } else {
            region.middle_row()
        }
    };
    Ok(r.with(|region| {
        if let Some(row) = point(region) {
            return Ok(Some(row));
        }
        region.flush()?;
        Ok(point(region))
    })?)
}

/// GetOnlineRegion: meta and every open user region.
#[derive(Debug, Clone)]
pub(crate) struct GetOnlineRegion;

impl GetOnlineRegion {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request, HbaseError> {
        message::<hbase::GetOnlineRegionRequest>(param, "GetOnlineRegionRequest")?;
        Ok(Call::GetOnlineRegion(GetOnlineRegion).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply, HbaseError> {
        let mut infos = vec![registry::meta_region_info()];
        for r in svc.rs.router.all_regions() {
            if r.table != META_TABLE && r.is_open() {
                infos.push(meta_view::region_info_pb(&r.table, &r.info));
            }
        }
        Ok(Reply::message(&hbase::GetOnlineRegionResponse {
            region_info: infos,
        }))
    }
}

/// FlushRegion: a region's memstores written out (if its last flush is older than asked).
#[derive(Debug, Clone)]
pub(crate) struct FlushRegion {
    pub(crate) region: RegionRef,
    /// The family named, which the table must have.
    pub(crate) family: Option<Bytes>,
    /// Flush only if the region's last flush (its open, if none) is older than this.
    pub(crate) if_older_than_ts: Option<u64>,
}

impl FlushRegion {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request, HbaseError> {
        let req: hbase::FlushRegionRequest = message(param, "FlushRegionRequest")?;
        Ok(Call::FlushRegion(FlushRegion {
            region: region(&req.region)?,
            family: req.family,
            if_older_than_ts: req.if_older_than_ts,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply, HbaseError> {
        let due = |last: u64| self.if_older_than_ts.is_none_or(|ts| last < ts);
        // HBase answers `flushed` only when it tried (the region was due), and the last
        // flush time either way.
        let (flushed, last_flush_time) = match resolve(svc, self.region)? {
            // Meta is computed, never written: nothing to flush, ever since the server began.
            Resolved::Meta => {
                // As HBase's preFlush: ADMIN or CREATE on the table, meta too.
                super::master_service::table_admin(svc, ctx, META_TABLE, "flush a region")?;
                let last = svc.start_code;
                (due(last).then_some(false), last)
            }
            Resolved::User(r) => {
                super::master_service::table_admin(svc, ctx, &r.table, "flush a region")?;
                // HBase flushes only the family named, after checking the table has it.
                // Cellar flushes the whole region (every family's memstore): more than
                // asked, with the same data visible.
                if let Some(family) = &self.family {
                    let schema = r.with(|region| Ok(region.schema().clone()))?;
                    super::master_service::check_families(
                        &schema,
                        std::slice::from_ref(family),
                        &r.table,
                    )?;
                }
                // A flush with nothing in memory writes nothing and is not one (`flushed`
                // false, the time unchanged), as in HBase.
                r.with(|region| {
                    let flushed = if due(region.last_flush_ms()) {
                        Some(region.flush_if_any()?)
                    } else {
                        None
                    };
                    Ok((flushed, region.last_flush_ms()))
                })?
            }
        };
        Ok(Reply::message(&hbase::FlushRegionResponse {
            last_flush_time,
            flushed,
            // No region replicas here, so no flush marker is written for them.
            wrote_flush_wal_marker: flushed.map(|_| false),
        }))
    }
}

/// CompactRegion: a region's stores (or one family's) compacted, minor or major.
#[derive(Debug, Clone)]
pub(crate) struct CompactRegion {
    pub(crate) region: RegionRef,
    pub(crate) major: bool,
    pub(crate) family: Option<Bytes>,
}

impl CompactRegion {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request, HbaseError> {
        let req: hbase::CompactRegionRequest = message(param, "CompactRegionRequest")?;
        Ok(Call::CompactRegion(CompactRegion {
            region: region(&req.region)?,
            major: req.major.unwrap_or(false),
            family: req.family,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply, HbaseError> {
        if let Resolved::User(r) = resolve(svc, self.region)? {
            super::master_service::table_admin(svc, ctx, &r.table, "compact a region")?;
            let major = self.major;
            match &self.family {
                // One family's store, as HBase's `compact(table, family)`; a family the
                // region lacks is HBase's NoSuchColumnFamilyException.
                Some(family) => {
                    let name = String::from_utf8_lossy(family).into_owned();
                    let done = r.with(|region| Ok(region.compact_family(&name, major)?))?;
                    if !done {
                        return Err(HbaseError::new(
                            super::exceptions::NO_SUCH_FAMILY,
                            format!(
                                "column family {name} does not exist in region {}",
                                names::show(&names::region_name(
                                    &r.table,
                                    &r.info.start_key,
                                    r.info.id
                                ))
                            ),
                            true,
                        ));
                    }
                }
                None => r.with(|region| Ok(region.compact(major)?))?,
            }
        }
        Ok(Reply::message(&hbase::CompactRegionResponse {}))
    }
}

/// GetRegionLoad: the load of every region, or of one table's.
#[derive(Debug, Clone)]
pub(crate) struct GetRegionLoad {
    pub(crate) table: Option<String>,
}

impl GetRegionLoad {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request, HbaseError> {
        let req: hbase::GetRegionLoadRequest = message(param, "GetRegionLoadRequest")?;
        Ok(Call::GetRegionLoad(GetRegionLoad {
            table: req
                .table_name
                .as_ref()
                .map(names::table_from_pb)
                .transpose()?,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply, HbaseError> {
        Ok(Reply::message(&hbase::GetRegionLoadResponse {
            region_loads: super::cluster_status::region_loads(svc, self.table.as_deref()),
        }))
    }
}

/// GetServerInfo: this server's name.
#[derive(Debug, Clone)]
pub(crate) struct GetServerInfo;

impl GetServerInfo {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request, HbaseError> {
        message::<hbase::GetServerInfoRequest>(param, "GetServerInfoRequest")?;
        Ok(Call::GetServerInfo(GetServerInfo).into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply, HbaseError> {
        Ok(Reply::message(&hbase::GetServerInfoResponse {
            server_info: hbase::ServerInfo {
                server_name: registry::server_name(svc),
                webui_port: None,
            },
        }))
    }
}

enum Resolved {
    Meta,
    User(Arc<HostedRegion>),
}

/// The region a request names, served here; NotServingRegion when it is not (split,
/// closed, unknown), TableNotEnabled when its table is disabled.
fn resolve(svc: &HbaseService, region: RegionRef) -> Result<Resolved, HbaseError> {
    match region.resolve(svc)? {
        RegionTarget::Meta => Ok(Resolved::Meta),
        RegionTarget::User { table, region_id } => Ok(Resolved::User(
            svc.rs.router.region_for_call(&table, region_id)?,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hbase::exceptions::NOT_SERVING_REGION;
    use crate::hbase::master_service::test_support::{create, Fixture};
    use crate::hbase::names::{encoded_name, region_name, ENCODED_REGION_NAME, REGION_NAME};
    use prost::Message;

    fn spec(kind: i32, value: impl Into<Bytes>) -> hbase::RegionSpecifier {
        hbase::RegionSpecifier {
            r#type: kind,
            value: value.into(),
        }
    }

    fn info(
        f: &Fixture,
        s: hbase::RegionSpecifier,
    ) -> Result<hbase::GetRegionInfoResponse, HbaseError> {
        let reply = f.call(
            "AdminService",
            "GetRegionInfo",
            &hbase::GetRegionInfoRequest {
                region: s,
                compaction_state: Some(true),
                best_split_row: None,
            },
        )?;
        Ok(hbase::GetRegionInfoResponse::decode(reply.param).expect("decodes"))
    }

    #[test]
    fn regions_by_name_and_encoded_name() {
        let f = Fixture::new();
        create(&f, "t", &[b"k,1"]).expect("create");
        let route = f.svc.rs.router.table("t").expect("t");
        let second = route
            .regions
            .values()
            .nth(1)
            .expect("second region")
            .clone();
        let full = region_name("t", &second.info.start_key, second.info.id);
        for s in [
            spec(REGION_NAME, full.clone()),
            spec(
                ENCODED_REGION_NAME,
                encoded_name("t", &second.info.start_key, second.info.id),
            ),
        ] {
            let r = info(&f, s).expect("region info");
            assert_eq!(r.region_info.region_id, second.info.id);
            assert_eq!(r.region_info.start_key.as_deref(), Some(&b"k,1"[..]));
            assert_eq!(r.compaction_state, Some(0), "NONE");
        }
        let meta = info(&f, spec(REGION_NAME, names::META_REGION_NAME)).expect("meta");
        assert_eq!(meta.region_info.region_id, 1);
        let gone = info(
            &f,
            spec(ENCODED_REGION_NAME, "0123456789abcdef0123456789abcdef"),
        )
        .expect_err("unknown");
        assert_eq!(gone.class, NOT_SERVING_REGION);
        assert!(!gone.do_not_retry);
        let stale = info(&f, spec(REGION_NAME, region_name("t", b"k,1", 42))).expect_err("old id");
        assert_eq!(stale.class, NOT_SERVING_REGION);
        // Flush and compact reach the region; online regions list meta and both regions.
        f.call(
            "AdminService",
            "FlushRegion",
            &hbase::FlushRegionRequest {
                region: spec(REGION_NAME, full.clone()),
                ..Default::default()
            },
        )
        .expect("flush");
        f.call(
            "AdminService",
            "CompactRegion",
            &hbase::CompactRegionRequest {
                region: spec(REGION_NAME, full),
                major: Some(true),
                family: None,
            },
        )
        .expect("compact");
        let online = f
            .call(
                "AdminService",
                "GetOnlineRegion",
                &hbase::GetOnlineRegionRequest {},
            )
            .expect("online");
        let online = hbase::GetOnlineRegionResponse::decode(online.param).expect("decodes");
        assert_eq!(online.region_info.len(), 3);
        let server = f
            .call(
                "AdminService",
                "GetServerInfo",
                &hbase::GetServerInfoRequest {},
            )
            .expect("server info");
        let server = hbase::GetServerInfoResponse::decode(server.param).expect("decodes");
        assert_eq!(server.server_info.server_name.port, Some(16020));
        f.svc
            .master()
            .expect("a master")
            .disable_table("t")
            .expect("disable");
        let closed = info(
            &f,
            spec(
                REGION_NAME,
                region_name(
                    "t",
                    b"",
                    route.regions.values().next().expect("first").info.id,
                ),
            ),
        )
        .expect_err("disabled");
        assert_eq!(closed.class, crate::hbase::exceptions::TABLE_NOT_ENABLED);
    }

    #[test]
    fn flush_and_compact_of_one_family() {
        use crate::hbase::exceptions::NO_SUCH_FAMILY;
        use crate::hbase::master_service::test_support::table_schema;
        use cellar_model::MutationKind;
        use cellar_model::RowMutation;
        let f = Fixture::new();
        let _: hbase::CreateTableResponse = f.master(
            "CreateTable",
            &hbase::CreateTableRequest {
                table_schema: table_schema("two", &["a", "b"]),
                split_keys: Vec::new(),
                nonce_group: None,
                nonce: None,
            },
        );
        let region = f.svc.rs.router.locate("two", b"r").expect("located");
        let name = region_name("two", b"", region.info.id);
        // Two store files in each family.
        for ts in [1, 2] {
            let m = RowMutation::new(b"r".to_vec())
                .put(b"a", b"q", ts, b"v".to_vec())
                .put(b"b", b"q", ts, b"v".to_vec());
            f.svc
                .rs
                .mutate("two", region.info.id, &m, MutationKind::PutDelete, None)
                .expect("put");
            region.with(|r| Ok(r.flush()?)).expect("flush");
        }
        let files = |family: &str| {
            region
                .with(|r| Ok(r.store_files(family).len()))
                .expect("open")
        };
        assert_eq!((files("a"), files("b")), (2, 2));
        let compact = |family: Option<&str>| {
            f.call(
                "AdminService",
                "CompactRegion",
                &hbase::CompactRegionRequest {
                    region: spec(REGION_NAME, name.clone()),
                    major: Some(true),
                    family: family.map(|c| Bytes::copy_from_slice(c.as_bytes())),
                },
            )
        };
        // HBase compacts the store of the family named, and only it.
        compact(Some("a")).expect("compact a");
        assert_eq!(
            (files("a"), files("b")),
            (1, 2),
            "only family a is compacted"
        );
        let e = compact(Some("nope")).expect_err("no such family");
        assert_eq!(e.class, NO_SUCH_FAMILY);
        assert!(
            e.message
                .starts_with("column family nope does not exist in region two,,"),
            "{}",
            e.message
        );
        let e = f
            .call(
                "AdminService",
                "FlushRegion",
                &hbase::FlushRegionRequest {
                    region: spec(REGION_NAME, name.clone()),
                    family: Some(Bytes::from_static(b"nope")),
                    ..Default::default()
                },
            )
            .expect_err("no such family");
        assert_eq!(e.class, NO_SUCH_FAMILY);
        assert_eq!(e.message, "Column families [nope] don't exist in table two");
        assert_eq!(
            (files("a"), files("b")),
            (1, 2),
            "a refused call does nothing"
        );
    }

    /// `n` rows `r000`.. of 1 KiB in family `cf` of `table`'s only region.
    fn fill(f: &Fixture, table: &str, n: usize) {
        use cellar_model::{MutationKind, RowMutation};
        let region = f.svc.rs.router.locate(table, b"r").expect("located");
        for i in 0..n {
            let m = RowMutation::new(format!("r{i:03}").into_bytes()).put(
                b"cf",
                b"q",
                1,
                vec![b'v'; 1024],
            );
            f.svc
                .rs
                .mutate(table, region.info.id, &m, MutationKind::PutDelete, None)
                .expect("put");
        }
    }

    fn region_info(
        f: &Fixture,
        s: hbase::RegionSpecifier,
        best_split_row: Option<bool>,
    ) -> hbase::GetRegionInfoResponse {
        let reply = f
            .call(
                "AdminService",
                "GetRegionInfo",
                &hbase::GetRegionInfoRequest {
                    region: s,
                    compaction_state: None,
                    best_split_row,
                },
            )
            .expect("region info");
        hbase::GetRegionInfoResponse::decode(reply.param).expect("decodes")
    }

    /// HBase's GetRegionInfo answers splittable and mergeable always, and with best_split_row
    /// the row its split would use, flushing first when the rows are all in memory.
    #[test]
    fn region_info_answers_splittable_mergeable_and_the_best_split_row() {
        let f = Fixture::new();
        create(&f, "t", &[]).expect("create");
        let region = f.svc.rs.router.locate("t", b"r").expect("located");
        let name = region_name("t", b"", region.info.id);
        fill(&f, "t", 1);
        let one = region_info(&f, spec(REGION_NAME, name.clone()), Some(true));
        assert_eq!((one.splittable, one.mergeable), (Some(true), Some(true)));
        assert_eq!(one.best_split_row, None, "one row: nothing to split at");
        // 300 rows, all in the memstore: flushed, then a row strictly inside.
        fill(&f, "t", 300);
        let big = region_info(&f, spec(REGION_NAME, name.clone()), Some(true));
        let row = big.best_split_row.expect("a split row");
        assert!(row[..] > b"r000"[..] && row[..] <= b"r299"[..], "{row:?}");
        assert_eq!(
            region.with(|r| Ok(r.stats().memstore_bytes)).expect("open"),
            0
        );
        assert_eq!((big.splittable, big.mergeable), (Some(true), Some(true)));
        let plain = region_info(&f, spec(REGION_NAME, name), None);
        assert_eq!(plain.best_split_row, None, "not asked");
        assert_eq!(
            (plain.splittable, plain.mergeable),
            (Some(true), Some(true))
        );
        // Meta never splits (HBase: not splittable, mergeable).
        let meta = region_info(&f, spec(REGION_NAME, names::META_REGION_NAME), Some(true));
        assert_eq!((meta.splittable, meta.mergeable), (Some(false), Some(true)));
        assert_eq!(meta.best_split_row, None);
    }

    fn flush(
        f: &Fixture,
        s: hbase::RegionSpecifier,
        if_older_than_ts: Option<u64>,
    ) -> hbase::FlushRegionResponse {
        let reply = f
            .call(
                "AdminService",
                "FlushRegion",
                &hbase::FlushRegionRequest {
                    region: s,
                    if_older_than_ts,
                    ..Default::default()
                },
            )
            .expect("flush");
        hbase::FlushRegionResponse::decode(reply.param).expect("decodes")
    }

    /// HBase flushes with if_older_than_ts only a region whose last flush (its open, if none)
    /// is older, and answers that last flush time; a flush with nothing in memory is not one.
    #[test]
    fn flush_if_older_than_and_the_last_flush_time() {
        let f = Fixture::new();
        create(&f, "t", &[]).expect("create");
        let region = f.svc.rs.router.locate("t", b"r").expect("located");
        let s = || spec(REGION_NAME, region_name("t", b"", region.info.id));
        let files = || region.with(|r| Ok(r.stats().store_files)).expect("open");
        fill(&f, "t", 1);
        let skipped = flush(&f, s(), Some(1));
        assert_eq!(
            (skipped.flushed, skipped.wrote_flush_wal_marker),
            (None, None)
        );
        let opened = skipped.last_flush_time;
        assert!(opened > 1 && opened <= crate::hbase::now_ms(), "{opened}");
        assert_eq!(files(), 0, "not flushed");
        std::thread::sleep(std::time::Duration::from_millis(5));
        let before = crate::hbase::now_ms();
        let done = flush(&f, s(), Some(before + 3_600_000));
        assert_eq!(done.flushed, Some(true));
        assert_eq!(files(), 1);
        let at = done.last_flush_time;
        assert!(
            at >= before && at <= crate::hbase::now_ms(),
            "{at} {before}"
        );
        let again = flush(&f, s(), Some(at));
        assert_eq!(
            (again.flushed, again.last_flush_time),
            (None, at),
            "not older"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
        let empty = flush(&f, s(), None);
        assert_eq!(
            (empty.flushed, empty.last_flush_time),
            (Some(false), at),
            "nothing in memory: nothing flushed"
        );
        // Meta has nothing to flush; its time is the server's start.
        let meta = flush(&f, spec(REGION_NAME, names::META_REGION_NAME), None);
        assert_eq!(meta.flushed, Some(false));
        assert_eq!(meta.last_flush_time, f.svc.start_code);
    }
}
