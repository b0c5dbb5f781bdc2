//! An HBase front end over a real region server in a temporary directory, and helpers that
//! drive it with encoded requests as the Java client sends them.

use crate::hbase::{CallCtx, HbaseError, HbaseService, Reply};
use crate::region_server::RegionServer;
use crate::ServerConfig;
use bytes::Bytes;
use cellar_proto::hbase;
use prost::Message;

pub(crate) const CTX: CallCtx = CallCtx {
    conn_id: 1,
    cell_blocks: false,
    caller: crate::security::Caller::internal(),
};

/// A service on its own data directory; the server is shut down when dropped.
pub(crate) struct Fixture {
    pub svc: HbaseService,
    _tmp: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut config = ServerConfig {
            data_dir: tmp.path().to_path_buf(),
            ..ServerConfig::default()
        };
        config.split.auto = false;
        config.storage.block_cache_bytes = Some(8 * 1024 * 1024);
        let rs = RegionServer::open(&config, "127.0.0.1:16200".into()).expect("server opens");
        Fixture {
            svc: HbaseService::new(
                rs.clone(),
                Some(crate::master::Master::start(rs)),
                "127.0.0.1".into(),
                16020,
                "c1".into(),
            ),
            _tmp: tmp,
        }
    }

    /// One call, its request encoded as on the wire.
    pub fn call(
        &self,
        service: &str,
        method: &str,
        req: &impl Message,
    ) -> Result<Reply, HbaseError> {
        self.svc.call(
            &CTX,
            service,
            method,
            Bytes::from(req.encode_to_vec()),
            Bytes::new(),
        )
    }

    /// A master call that must succeed, its response decoded.
    pub fn master<R: Message + Default>(&self, method: &str, req: &impl Message) -> R {
        self.try_master(method, req)
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    /// A master call, its response decoded, or the exception it answered.
    pub fn try_master<R: Message + Default>(
        &self,
        method: &str,
        req: &impl Message,
    ) -> Result<R, HbaseError> {
        let reply = self.call("MasterService", method, req)?;
        Ok(R::decode(reply.param).unwrap_or_else(|e| panic!("{method} response: {e}")))
    }

    /// Polls a procedure as the client does: its final state and exception class, if any.
    pub fn procedure(&self, proc_id: Option<u64>) -> (i32, Option<String>) {
        let r: hbase::GetProcedureResultResponse = self.master(
            "getProcedureResult",
            &hbase::GetProcedureResultRequest {
                proc_id: proc_id.expect("a procedure id"),
            },
        );
        let class = r
            .exception
            .and_then(|e| e.generic_exception)
            .and_then(|g| g.class_name);
        (r.state, class)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.svc.rs.shutdown();
    }
}

/// A descriptor as `TableDescriptorBuilder` sends it: families with HBase's default attributes.
pub(crate) fn table_schema(name: &str, families: &[&str]) -> hbase::TableSchema {
    let attr = |k: &str, v: &str| hbase::BytesBytesPair {
        first: Bytes::copy_from_slice(k.as_bytes()),
        second: Bytes::copy_from_slice(v.as_bytes()),
    };
    hbase::TableSchema {
        table_name: Some(crate::hbase::names::table_to_pb(name)),
        attributes: Vec::new(),
        column_families: families
            .iter()
            .map(|f| hbase::ColumnFamilySchema {
                name: Bytes::copy_from_slice(f.as_bytes()),
                attributes: vec![
                    attr("VERSIONS", "1"),
                    attr("TTL", "2147483647"),
                    attr("BLOOMFILTER", "ROW"),
                    attr("COMPRESSION", "NONE"),
                    attr("BLOCKCACHE", "true"),
                ],
                configuration: Vec::new(),
            })
            .collect(),
        configuration: Vec::new(),
    }
}

/// CreateTable with split keys; the procedure id.
pub(crate) fn create(f: &Fixture, name: &str, splits: &[&[u8]]) -> Result<Option<u64>, HbaseError> {
    let r: hbase::CreateTableResponse = f.try_master(
        "CreateTable",
        &hbase::CreateTableRequest {
            table_schema: table_schema(name, &["cf"]),
            split_keys: splits.iter().map(|k| Bytes::copy_from_slice(k)).collect(),
            nonce_group: None,
            nonce: None,
        },
    )?;
    Ok(r.proc_id)
}

/// Creates namespace `name` (a table may only go into one that exists).
pub(crate) fn create_namespace(f: &Fixture, name: &str) {
    f.call(
        "MasterService",
        "CreateNamespace",
        &hbase::CreateNamespaceRequest {
            namespace_descriptor: hbase::NamespaceDescriptor {
                name: bytes::Bytes::copy_from_slice(name.as_bytes()),
                configuration: Vec::new(),
            },
            nonce_group: None,
            nonce: None,
        },
    )
    .expect("namespace created");
}
